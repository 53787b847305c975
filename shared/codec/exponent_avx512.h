// shared/codec/exponent_avx512.h — AVX-512 host paths of gauss-exp and entropy-exp (encode
// and decode) for bf16, fp16 and fp32 (host-only).
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

// A coded gauss-exp or entropy-exp chunk of n elements (n >= 1) to decode: `streams` holds
// all 32 lanes' words back to back (stream_bytes in all, already checked against the lane
// table), `lane_table` the 32 word counts, `raw` the raw section; n values go to `out`.
// gauss-exp: `ref` is the chunk's reference and `lut` null. entropy-exp: `lut` is the chunk's
// decode table (expbits::PrefixCode::lut of its code: 4096 entries, symbol << 4 | length,
// length 0 where no code starts), with 2 readable bytes before it (PrefixCode's own fields).
// `readable_after`: at least 8 bytes after the streams may be read (the decoder's 8-byte
// windows then read the streams in place instead of a padded copy).
struct CodedChunk {
  const uint8_t* streams;
  size_t stream_bytes;
  const uint8_t* lane_table;
  const uint8_t* raw;
  uint32_t n;
  uint32_t ref;
  uint8_t* out;
  const uint16_t* lut = nullptr;
  bool readable_after = false;
};

// L is expbits::Bf16Layout, Fp16Layout or Fp32Layout (the only specializations).
//
// Decodes a chunk; returns true when every lane decoded cleanly, false (out then holds
// garbage) for anything else, and the caller decodes the chunk again with the portable
// loops, which name the error. Never reads outside the given buffers.
template <class L>
bool decode_chunk(const CodedChunk& chunk);

// Decodes two chunks of the same codec at once, their rows interleaved (a row's decode waits
// on the row before it; the other chunk's row fills the wait): the same values and the same
// verdicts, ok[i], as decode_chunk on each. `ahead`, `ahead_bytes`: what the caller decodes
// next, asked of the memory a few lines a row so that it has arrived when its turn comes (may
// be empty).
template <class L>
void decode_pair(const CodedChunk& c0, const CodedChunk& c1, const uint8_t* ahead, size_t ahead_bytes,
                 bool ok[2]);

// Encodes a gauss-exp chunk of n elements (1 <= n <= kMaxChunkElements) from `in` into `out`
// (room for the codec's max_chunk_bytes): the coded form, or the stored form when coding would
// not make it smaller — the same bytes as the portable encoder. Returns its size (0 only for
// n outside [1, kMaxChunkElements]).
template <class L>
size_t encode_gauss(const uint8_t* in, uint32_t n, uint8_t* out);
// The same for entropy-exp: the portable encoder's Huffman code from the same histogram, the
// same bytes.
template <class L>
size_t encode_entropy(const uint8_t* in, uint32_t n, uint8_t* out);

#define COMPCOLL_AVX512_DECLARE(LAYOUT)                                            \
  template <>                                                                    \
  bool decode_chunk<LAYOUT>(const CodedChunk&);                                  \
  template <>                                                                    \
  void decode_pair<LAYOUT>(const CodedChunk&, const CodedChunk&, const uint8_t*, size_t, bool[2]); \
  template <>                                                                    \
  size_t encode_gauss<LAYOUT>(const uint8_t*, uint32_t, uint8_t*);               \
  template <>                                                                    \
  size_t encode_entropy<LAYOUT>(const uint8_t*, uint32_t, uint8_t*);
COMPCOLL_AVX512_DECLARE(expbits::Bf16Layout)
COMPCOLL_AVX512_DECLARE(expbits::Fp16Layout)
COMPCOLL_AVX512_DECLARE(expbits::Fp32Layout)
#undef COMPCOLL_AVX512_DECLARE

}  // namespace compcoll::detail::avx512
