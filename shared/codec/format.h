// shared/codec/format.h — constants and little-endian field access of the compcoll stream
// container (docs/FORMAT.md is the specification; this file must agree with it).
// Shared by the host codecs and the CUDA kernels; no allocation, no exceptions here.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "util/hd.h"

namespace compcoll::format {

// Container header, 32 bytes.
constexpr uint8_t kMagic[4] = {'C', 'C', 'Z', 'S'};
constexpr uint8_t kVersion = 1;
constexpr uint32_t kHeaderBytes = 32;
constexpr uint32_t kOffsetEntryBytes = 8;  // one u64 end offset per chunk

// Header field byte offsets.
constexpr uint32_t kOffMagic = 0;
constexpr uint32_t kOffVersion = 4;
constexpr uint32_t kOffCodec = 5;
constexpr uint32_t kOffDType = 6;
constexpr uint32_t kOffFlags = 7;
constexpr uint32_t kOffElements = 8;
constexpr uint32_t kOffChunkElements = 16;
constexpr uint32_t kOffChunkCount = 20;
constexpr uint32_t kOffPayloadBytes = 24;

// Chunking: a chunk holds chunk_elements elements (the last one fewer), split over
// kLanes interleaved lanes (element k of a chunk belongs to lane k % kLanes).
constexpr uint32_t kLanes = 32;
constexpr uint32_t kDefaultChunkElements = 16384;
constexpr uint32_t kMinChunkElements = kLanes;
constexpr uint32_t kMaxChunkElements = 65536;
constexpr uint32_t kChunkAlign = 4;  // every chunk's size is a multiple of 4 bytes

// Chunks sized by the message (EncodeOptions::chunk_elements = kAutoChunk; docs/FORMAT.md,
// "Chunk size"): the GPU kernels code a chunk with one warp, so a message of few chunks leaves
// most of a GPU idle. A stream of E elements is coded in chunks of 16384 elements where it has
// at least kAutoFillChunks of them, else of the largest of 8192 and 4096 that gives it as many,
// and of 4096 below: about one chunk per warp the decoder keeps resident on an H100 or H200 (16
// per SM, bounded by its shared memory, x 132 SMs). No smaller: 4096 is the smallest chunk
// whose gauss-exp ratio on Gaussian bf16 stays above nvCOMP ANS's on the same bytes (1.464
// against 1.460 at 4 MiB on an H200; 1.424 at 2048).
constexpr uint32_t kAutoChunk = 0;
constexpr uint32_t kAutoMinChunkElements = 4096;
constexpr uint64_t kAutoFillChunks = 2048;

// Exponent-coded chunks.
constexpr uint8_t kModeCoded = 0;
constexpr uint8_t kModeStored = 1;
constexpr uint32_t kChunkHeaderBytes = 4;
constexpr uint32_t kLaneTableBytes = kLanes * 2;  // u16 word count per lane
constexpr uint32_t kMaxCodeBits = 12;             // longest prefix code; one-lookup decode

// gauss-exp fixed code: symbols d = e - ref for d in [kGaussDMin, kGaussDMax], then ZERO, ESC.
constexpr int kGaussDMin = -12;
constexpr int kGaussDMax = 7;
constexpr uint32_t kGaussSymZero = kGaussDMax - kGaussDMin + 1;  // 20
constexpr uint32_t kGaussSymEsc = kGaussSymZero + 1;             // 21
constexpr uint32_t kGaussSymbols = kGaussSymEsc + 1;             // 22
// Code lengths of the fixed code, in symbol order (d = -12 .. 7, ZERO, ESC). Derived by
// tools/derive_gauss_code.py from the exponent distribution of Gaussian chunks of 16384
// elements around their mean exponent; tests check it is a complete prefix code.
constexpr uint8_t kGaussCodeLengths[kGaussSymbols] = {
    11, 11, 11, 11, 10, 8, 8, 6, 6, 4, 3, 3, 2, 2, 3, 7, 9, 10, 11, 11,  // d = -12 .. 7
    7,                                                                   // ZERO (e == 0)
    10};                                                                 // ESC (+ raw exponent)

constexpr uint32_t kMaxEntropySymbols = 256;

// fp8-hadamard chunks (docs/FORMAT.md "fp8-hadamard"): chunk header byte 0 the mode, byte 1
// log2 of the group size G, byte 2 the FP8 format, byte 3 zero; then, when quantized, two fp32
// scales per group and one FP8 code per transformed element.
constexpr uint8_t kFp8ModeQuantized = 0;
constexpr uint8_t kFp8ModeStored = 1;
constexpr uint32_t kFp8E4M3 = 0;
constexpr uint32_t kFp8E5M2 = 1;
constexpr uint32_t kFp8MinLog2Group = 5;    // G = 32
constexpr uint32_t kFp8MaxLog2Group = 9;    // G = 512
constexpr uint32_t kFp8DefaultGroup = 128;
constexpr uint32_t kFp8ScaleBytes = 8;      // s1, s2: fp32 each
constexpr uint32_t kFp8MaxGroup = 1u << kFp8MaxLog2Group;

// nvcomp-ans chunks (docs/FORMAT.md "nvcomp-ans"): a library's compressed chunk at a
// kLibraryAlign-aligned stream offset, after a prefix holding its exact size (u32, then zeros),
// and zero bytes up to a multiple of kLibraryAlign. The payload starts at 32 + 8K, a multiple
// of 16 when K is even and of 8 when it is odd; every chunk's size is a multiple of 16, so the
// prefix is 16 bytes for an even K and 8 for an odd one, and every chunk's data is aligned.
constexpr uint32_t kLibraryAlign = 16;  // nvCOMP's ANS input alignment (nvcompANSRequiredDecompressionAlignment)
constexpr uint32_t kLibraryChunkBytes = 64 * 1024;  // uncompressed bytes per chunk
COMPCOLL_HD constexpr uint32_t library_prefix_bytes(uint64_t chunk_count) { return chunk_count % 2 ? 8 : 16; }
// A chunk's size in the stream for `compressed` bytes of the library's.
COMPCOLL_HD constexpr uint64_t library_chunk_bytes(uint64_t chunk_count, uint64_t compressed) {
  return (library_prefix_bytes(chunk_count) + compressed + kLibraryAlign - 1) / kLibraryAlign * kLibraryAlign;
}
// The most a stream of chunk_count chunks takes, each of at most max_compressed bytes of the
// library's (header, offset table, chunks).
COMPCOLL_HD constexpr uint64_t library_stream_bound(uint64_t chunk_count, uint64_t max_compressed) {
  return kHeaderBytes + kOffsetEntryBytes * chunk_count +
         chunk_count * library_chunk_bytes(chunk_count, max_compressed);
}

COMPCOLL_HD constexpr uint32_t align_up(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }
COMPCOLL_HD constexpr uint64_t align_up64(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Little-endian loads and stores at any alignment. On the host they are memcpy (one move
// instruction; compcoll assumes a little-endian host); on the GPU, byte accesses, since
// stream fields need not be aligned.
#if defined(__CUDA_ARCH__)
#define COMPCOLL_LE_ACCESS(T, NAME)                                                     \
  COMPCOLL_HD inline T load_##NAME(const uint8_t* p) {                                  \
    T v = 0;                                                                            \
    for (unsigned i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<T>(p[i]) << (8 * i)); \
    return v;                                                                           \
  }                                                                                     \
  COMPCOLL_HD inline void store_##NAME(uint8_t* p, T v) {                               \
    for (unsigned i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(v >> (8 * i)); \
  }
#else
static_assert(std::endian::native == std::endian::little, "compcoll assumes a little-endian host");
#define COMPCOLL_LE_ACCESS(T, NAME)                                                     \
  inline T load_##NAME(const uint8_t* p) {                                              \
    T v;                                                                                \
    std::memcpy(&v, p, sizeof(T));                                                      \
    return v;                                                                           \
  }                                                                                     \
  inline void store_##NAME(uint8_t* p, T v) { std::memcpy(p, &v, sizeof(T)); }
#endif
COMPCOLL_LE_ACCESS(uint16_t, u16)
COMPCOLL_LE_ACCESS(uint32_t, u32)
COMPCOLL_LE_ACCESS(uint64_t, u64)
#undef COMPCOLL_LE_ACCESS

// Whether c is a chunk size a stream may have (a multiple of kLanes in [kMinChunkElements,
// kMaxChunkElements]): what encoders accept, what a header must say.
COMPCOLL_HD constexpr bool valid_chunk_elements(uint64_t c) {
  return c >= kMinChunkElements && c <= kMaxChunkElements && c % kLanes == 0;
}

COMPCOLL_HD inline uint32_t chunk_count_for(uint64_t elements, uint32_t chunk_elements) {
  return static_cast<uint32_t>((elements + chunk_elements - 1) / chunk_elements);
}

// The chunk size kAutoChunk gives a stream of `elements` elements (above).
COMPCOLL_HD constexpr uint32_t auto_chunk_elements(uint64_t elements) {
  uint32_t c = kDefaultChunkElements;
  while (c > kAutoMinChunkElements && elements < uint64_t{c} * kAutoFillChunks) c /= 2;
  return c;
}
// The chunk size of a stream of `elements` elements coded with chunk_elements `requested`.
COMPCOLL_HD constexpr uint32_t chunk_elements_for(uint32_t requested, uint64_t elements) {
  return requested == kAutoChunk ? auto_chunk_elements(elements) : requested;
}

}  // namespace compcoll::format
