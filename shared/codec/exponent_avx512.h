// shared/codec/exponent_avx512.h — AVX-512 host paths of gauss-exp for bf16, fp16 and fp32
// (host-only).
// They write and read exactly the bits of docs/FORMAT.md, like the portable host paths of
// codec/exponent_codec.cpp, but 16 lanes of a chunk per instruction: the 32 lanes of the
// format are two vectors. They run only where the CPU has AVX-512 F/BW/VL/DQ, VBMI and VBMI2
// (checked at run time); the portable paths remain the reference and the fallback
// (tests/codec/test_exponent_avx512.cpp checks that both give the same bytes and the same
// errors).
#pragma once

#if defined(__CUDACC__)
#error "codec/exponent_avx512.h is host-only"
#endif

#include <cstddef>
#include <cstdint>

#include "codec/exponent_bits.h"

namespace compcoll::detail::avx512 {

// True when the CPU has the instructions and they are not switched off: by the environment
// (COMPCOLL_HOST_SIMD=0, read once) or by set_enabled(false).
bool enabled();
// Switches the AVX-512 paths off (false) or back on where the CPU has them (true); for tests
// and benchmarks comparing both paths. Not thread-safe against running codecs.
void set_enabled(bool on);
// Whether the CPU has the instructions, whatever the switch says.
bool cpu_supported();

// L is expbits::Bf16Layout, Fp16Layout or Fp32Layout (the only specializations).
//
// Decodes the lane streams of a coded gauss-exp chunk of n elements (n >= 1): `streams` holds
// all 32 lanes' words back to back (stream_bytes in all, already checked against the lane
// table), `lane_table` the 32 word counts, `raw` the raw section, `ref` the chunk's reference.
// Writes n values to out and returns true when every lane decoded cleanly; returns false
// (out then holds garbage) for anything else, and the caller decodes the chunk again with the
// portable loops, which name the error. Never reads outside the given buffers.
template <class L>
bool decode_gauss(const uint8_t* streams, size_t stream_bytes, const uint8_t* lane_table,
                  const uint8_t* raw, uint32_t n, uint32_t ref, uint8_t* out);

// Encodes a gauss-exp chunk of n elements (1 <= n <= kMaxChunkElements) from `in` into `out`
// (room for the codec's max_chunk_bytes): the coded form, or the stored form when coding would
// not make it smaller — the same bytes as the portable encoder. Returns its size (0 only for
// n outside [1, kMaxChunkElements]).
template <class L>
size_t encode_gauss(const uint8_t* in, uint32_t n, uint8_t* out);

template <>
bool decode_gauss<expbits::Bf16Layout>(const uint8_t*, size_t, const uint8_t*, const uint8_t*, uint32_t,
                                       uint32_t, uint8_t*);
template <>
bool decode_gauss<expbits::Fp32Layout>(const uint8_t*, size_t, const uint8_t*, const uint8_t*, uint32_t,
                                       uint32_t, uint8_t*);
template <>
size_t encode_gauss<expbits::Bf16Layout>(const uint8_t*, uint32_t, uint8_t*);
template <>
size_t encode_gauss<expbits::Fp32Layout>(const uint8_t*, uint32_t, uint8_t*);
template <>
bool decode_gauss<expbits::Fp16Layout>(const uint8_t*, size_t, const uint8_t*, const uint8_t*, uint32_t,
                                       uint32_t, uint8_t*);
template <>
size_t encode_gauss<expbits::Fp16Layout>(const uint8_t*, uint32_t, uint8_t*);

}  // namespace compcoll::detail::avx512
