// shared/codec/exponent_host.h — host-only helpers of the exponent codecs' fast host paths
// (codec/exponent_codec.cpp). They compute exactly what the shared functions of
// codec/exponent_bits.h compute, only faster on a CPU; the CUDA kernels keep using the
// shared functions (tests/codec check that both agree).
#pragma once

#if defined(__CUDACC__)
#error "codec/exponent_host.h is host-only: CUDA code uses codec/exponent_bits.h"
#endif

#include <cstdint>
#include <cstring>

#include "codec/exponent_bits.h"

namespace compcoll::expbits::host {

// expbits::build_prefix_code with the same result and the same checks. The decode table is
// filled length by length, doubling it (a code of length l decides every index whose low l
// bits are its reversed code, so the table for l + 1 bits is two copies of the table for l
// bits plus the codes of length l + 1): about 8 KiB of copies instead of 4096 scattered
// stores. With with_lut false, pc.lut is left untouched (encoders only need the codes).
inline bool build_prefix_code(const uint8_t* lengths, uint32_t nsym, PrefixCode& pc,
                              bool with_lut = true) {
  constexpr uint32_t kMax = format::kMaxCodeBits;
  if (nsym > format::kMaxEntropySymbols) return false;
  uint32_t count[kMax + 1], next[kMax + 2];
  if (!canonical_code_starts(lengths, nsym, count, next)) return false;
  // Symbols in canonical order (by length, then symbol): where each length starts.
  uint32_t first[kMax + 2] = {};
  for (uint32_t l = 1; l <= kMax; ++l) first[l + 1] = first[l] + count[l];
  uint8_t order[format::kMaxEntropySymbols];
  std::memset(pc.code, 0, sizeof(pc.code));
  std::memset(pc.length, 0, sizeof(pc.length));
  for (uint32_t s = 0; s < nsym; ++s) {
    const uint32_t l = lengths[s];
    pc.length[s] = static_cast<uint8_t>(l);
    if (l == 0) continue;
    pc.code[s] = static_cast<uint16_t>(reverse_bits(next[l]++, l));
    order[first[l]++] = static_cast<uint8_t>(s);
  }
  if (!with_lut) return true;
  // first[l] now ends the symbols of length l; first[l - 1] (shifted by one) starts them.
  pc.lut[0] = 0;
  uint32_t size = 1, at = 0;
  for (uint32_t l = 1; l <= kMax; ++l) {
    std::memcpy(pc.lut + size, pc.lut, size * sizeof(pc.lut[0]));
    size *= 2;
    for (; at < first[l]; ++at) {
      const uint32_t s = order[at];
      pc.lut[pc.code[s]] = static_cast<uint16_t>((s << 4) | l);
    }
  }
  return true;
}

// gauss-exp's fixed code (format::kGaussCodeLengths), built once for the whole program and
// shared by the host paths (the portable ones and the AVX-512 ones).
inline const PrefixCode& gauss_prefix_code() {
  static const PrefixCode pc = [] {
    PrefixCode c{};
    expbits::build_prefix_code(format::kGaussCodeLengths, format::kGaussSymbols, c);
    return c;
  }();
  return pc;
}

}  // namespace compcoll::expbits::host
