// shared/codec/cuda/exponent_kernels.cuh — the kernels of the compcoll stream formats and their
// templated launchers: identity (a copy), gauss-exp and entropy-exp (exponent coding).
// Every per-element bit operation comes from codec/exponent_bits.h, the very functions the host
// reference runs (encode_lane, decode_lane, build_key_code, build_symbol_exponents,
// huffman_lengths, assign_prefix_codes, the decode table's clear_prefix_lut and fill_prefix_lut,
// gauss_reference, ChunkLayout, the float layouts): this file only places chunks, lanes and
// tables, and must never re-implement bit logic, or host and GPU would drift.
// One warp codes one chunk at a time; its 32 threads are the chunk's 32 lanes; grids are at
// most one resident wave and stride over the chunks. A warp walks its chunk in windows of
// kWindow elements: the whole warp loads a window's elements (encode) or raw bytes (decode)
// into shared memory, the next window's loads in flight while the lanes code the current one
// from there, each lane's bit writer or reader carried from window to window; a decoder's
// lanes write the window's values into shared memory, and the warp stores (or adds) them with
// 16-byte accesses. Lane loops thus never wait on a global load or store per element.
// Encode: [entropy-exp: code tables] -> measure (per chunk: lane word counts, size) -> CUB
// inclusive scan of the sizes (the offset table) -> emit (each chunk at its final offset) ->
// finish (offset table, header, size); gauss-exp optionally in one launch instead
// (gauss_encode_kernel, decoupled look-back). Decode: one kernel, validating the stream's
// header and every chunk on its own, storing the elements or adding them to the output;
// gauss-exp takes two elements a table lookup where it can (expbits::take_lane_pairs), with no
// check in the lane loop where the chunk's reference puts every symbol of that table in range
// (take_lane_pairs_in_range); in bf16 such a chunk's lanes, and entropy-exp's (from a table
// the warp builds per chunk), take three exponents a lookup into shared memory and the warp
// joins them with the raw bytes (take_lane_exponents, join_bf16x4). Identity encodes and
// decodes in one launch each, a block a batch.
// Include from .cu files only.
#pragma once

#include <cub/device/device_scan.cuh>
#include <cuda/atomic>
#include <cuda_pipeline_primitives.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "codec/codec.h"
#include "codec/cuda/check.h"
#include "codec/cuda/codec_cuda.h"
#include "codec/exponent_bits.h"
#include "codec/format.h"

namespace compcoll::gpu {

using expbits::ChunkLayout;
using expbits::LaneStatus;
using expbits::PrefixCode;

constexpr uint32_t kWarp = 32;
static_assert(format::kLanes == kWarp, "a chunk's lanes are the threads of one warp");
constexpr uint32_t kWarpsPerBlock = 4;
constexpr uint32_t kBlockThreads = kWarpsPerBlock * kWarp;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
// Elements of a chunk window (16 per lane); a multiple of kLanes, so every window starts a
// new row of the chunk's lanes, and of 4, so its raw bytes (kRawBytes an element) are whole
// words.
constexpr uint32_t kWindow = 512;
static_assert(kWindow % format::kLanes == 0 && kWindow % 4 == 0, "windows start lane rows and raw words");
// Bytes of PrefixCode that encoding reads (code and length); the decode table follows.
constexpr uint32_t kEncodeCodeBytes = offsetof(PrefixCode, lut);
static_assert(kEncodeCodeBytes % 16 == 0 && sizeof(PrefixCode) % 16 == 0, "copied as uint4");
static_assert(format::kOffPayloadBytes + 8 == format::kHeaderBytes, "payload size ends the header");

enum class Kind { Gauss, Entropy };

template <class L>
constexpr uint32_t kExpSymbols = 1u << L::kExpBits;
// Lane streams are written and read through a per-warp staging buffer in shared memory, so
// that global memory sees whole coalesced words instead of 32 lanes' scattered bytes; a chunk
// whose streams do not fit is coded straight to (or from) global memory, by the same
// functions. The size fits typical gauss-exp chunks of 16384 elements (fp16 carries 3 extra
// bits per element).
template <class L>
constexpr uint32_t kStageBytes = L::kExtraBits ? 12288 : 8192;

// A decoder's output window (WindowPut): kWindow elements a warp, in its dynamic shared memory.
template <class L>
constexpr uint32_t kOutWindowBytes = kWindow * sizeof(typename L::Bits);
static_assert(kOutWindowBytes<expbits::Bf16Layout> % 16 == 0, "the stage after it stays 16-byte aligned");

// The bf16 decoders take three exponents a lookup (expbits::take_lane_exponents), their lanes
// writing only exponent bytes, and the warp joins them with the raw bytes into values,
// vectors at a time (expbits::join_bf16x4); gauss-exp's fp16 and fp32 take two elements a
// lookup, entropy-exp's one.
template <class L>
constexpr bool kThreeALookup = std::is_same_v<L, expbits::Bf16Layout>;
// A decoder warp's dynamic shared memory beside its stage: entropy-exp's bf16 triple table
// (built per chunk; 4 KB a warp would take static shared memory past its 48 KB), then its
// output window.
template <Kind K, class L>
constexpr uint32_t kDecodeTripleBytes = K == Kind::Entropy && kThreeALookup<L> ? sizeof(expbits::TripleCode) : 0;
template <Kind K, class L>
constexpr uint32_t kDecodeWarpBytes = kDecodeTripleBytes<K, L> + kOutWindowBytes<L>;
// A decoder warp's stage is stage_bytes and these past it: a chunk's streams land in it 0-12
// bytes from its start (stage_async).
constexpr uint32_t kStageSlack = 16;
static_assert(sizeof(expbits::TripleCode) % 16 == 0, "the output window after it stays 16-byte aligned");

// This warp's staging buffer: dynamic shared memory, stage_bytes per warp.
__device__ inline uint8_t* warp_stage(uint32_t stage_bytes) {
  extern __shared__ __align__(16) uint8_t s_dynamic[];
  return s_dynamic + (threadIdx.x / kWarp) * stage_bytes;
}

// Entries of a KeyCode (one per key byte, expbits::KeyCode).
constexpr uint32_t kKeys = sizeof(expbits::KeyCode::entry) / sizeof(expbits::KeyCode::entry[0]);
static_assert(kKeys == format::kMaxEntropySymbols, "a key and an exponent symbol fit a byte");

// The gauss-exp code is fixed. The host builds it once with build_prefix_code and hands it to
// the kernels as a __grid_constant__ parameter; each block copies it to shared memory.
template <Kind K>
struct GaussCodeParam {};
template <>
struct alignas(16) GaussCodeParam<Kind::Gauss> {
  PrefixCode pc;
};

template <Kind K>
inline const GaussCodeParam<K>& gauss_code_param() {
  static const GaussCodeParam<K> param = [] {
    GaussCodeParam<K> p{};
    if constexpr (K == Kind::Gauss)
      expbits::build_prefix_code(format::kGaussCodeLengths, format::kGaussSymbols, p.pc);
    return p;
  }();
  return param;
}

// Chunking of a stream: chunk c holds elements [c * chunk_elements, ...), the last one fewer.
struct Geometry {
  uint64_t elements;
  uint32_t chunk_elements;
  uint32_t chunks;
  __host__ __device__ uint32_t chunk_size(uint64_t c) const {
    const uint64_t left = elements - c * chunk_elements;
    return left < chunk_elements ? static_cast<uint32_t>(left) : chunk_elements;
  }
};

// Encoder scratch (device), laid out by scratch_layout().
struct EncodeScratch {
  uint64_t* chunk_bytes;  // [chunks] each chunk's size: coded, or stored when that is not smaller
  uint64_t* chunk_end;    // [chunks] inclusive sum of chunk_bytes: the offset table's entries
  uint16_t* lane_words;   // [chunks * kLanes] each lane's word count
  uint32_t* gauss_ref;    // [chunks] gauss-exp: the reference exponent
  uint32_t* key_entry;    // [chunks * kKeys] entropy-exp: the chunk's KeyCode::entry
  uint8_t* code_length;   // [chunks * kKeys] entropy-exp: code length of each exponent
  void* scan_temp;        // CUB's temporary storage for the scan
  size_t scan_temp_bytes;
  // The one-launch gauss-exp encoder (gauss_encode_kernel) uses chunk_bytes as its chunks'
  // look-back descriptors and these two words: the next chunk to take, and a failure flag.
  uint32_t* counters;
};

struct ScratchLayout {
  size_t chunk_bytes = 0, chunk_end = 0, lane_words = 0, gauss_ref = 0, key_entry = 0,
         code_length = 0, scan_temp = 0, scan_temp_bytes = 0, counters = 0;
  size_t total = 0;  // including the slack that aligns an arbitrary base to 256 bytes
};

inline size_t cub_scan_temp_bytes(uint32_t chunks) {
  size_t bytes = 0;
  COMPCOLL_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, bytes,
                                                    static_cast<const uint64_t*>(nullptr),
                                                    static_cast<uint64_t*>(nullptr), chunks));
  return bytes;
}

inline ScratchLayout scratch_layout(Kind kind, uint32_t chunks) {
  ScratchLayout s;
  if (chunks == 0) return s;
  constexpr size_t kAlign = 256;
  size_t at = 0;
  const auto take = [&](size_t bytes) {
    const size_t o = at;
    at = format::align_up64(at + bytes, kAlign);
    return o;
  };
  s.chunk_bytes = take(sizeof(uint64_t) * chunks);
  s.chunk_end = take(sizeof(uint64_t) * chunks);
  s.lane_words = take(sizeof(uint16_t) * format::kLanes * chunks);
  if (kind == Kind::Gauss) {
    s.gauss_ref = take(sizeof(uint32_t) * chunks);
  } else {
    s.key_entry = take(sizeof(uint32_t) * kKeys * chunks);
    s.code_length = take(kKeys * size_t{chunks});
  }
  s.scan_temp_bytes = cub_scan_temp_bytes(chunks);
  s.scan_temp = take(s.scan_temp_bytes);
  s.counters = take(2 * sizeof(uint32_t));
  s.total = at + kAlign - 1;
  return s;
}

inline EncodeScratch bind_scratch(const ScratchLayout& s, void* scratch_dev) {
  auto base = reinterpret_cast<uintptr_t>(scratch_dev);
  base = (base + 255) & ~uintptr_t{255};
  auto* p = reinterpret_cast<uint8_t*>(base);
  EncodeScratch e{};
  e.chunk_bytes = reinterpret_cast<uint64_t*>(p + s.chunk_bytes);
  e.chunk_end = reinterpret_cast<uint64_t*>(p + s.chunk_end);
  e.lane_words = reinterpret_cast<uint16_t*>(p + s.lane_words);
  e.gauss_ref = reinterpret_cast<uint32_t*>(p + s.gauss_ref);
  e.key_entry = reinterpret_cast<uint32_t*>(p + s.key_entry);
  e.code_length = p + s.code_length;
  e.scan_temp = p + s.scan_temp;
  e.scan_temp_bytes = s.scan_temp_bytes;
  e.counters = reinterpret_cast<uint32_t*>(p + s.counters);
  return e;
}

// ---- warp and block helpers ---------------------------------------------------------------

__device__ inline uint32_t lane_id() { return threadIdx.x % kWarp; }
__device__ inline uint32_t warp_in_block() { return threadIdx.x / kWarp; }
// Chunks are dealt to warps: warp w of block b takes chunk b * kWarpsPerBlock + w, then
// strides by the grid's warp count (the grid is at most one resident wave).
__device__ inline uint64_t first_chunk() {
  return uint64_t{blockIdx.x} * kWarpsPerBlock + warp_in_block();
}
__device__ inline uint64_t chunk_stride() { return uint64_t{gridDim.x} * kWarpsPerBlock; }

// The barrier between the steps of expbits' builders in parts, a part a lane.
struct WarpSync {
  __device__ void operator()() const { __syncwarp(); }
};

__device__ inline uint32_t warp_sum(uint32_t v) {
  for (uint32_t o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ inline unsigned long long warp_sum64(unsigned long long v) {
  for (uint32_t o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ inline uint32_t warp_exclusive_sum(uint32_t v, uint32_t lane) {
  uint32_t inclusive = v;
  for (uint32_t o = 1; o < kWarp; o *= 2) {
    const uint32_t t = __shfl_up_sync(kFullMask, inclusive, o);
    if (lane >= o) inclusive += t;
  }
  return inclusive - v;
}

// Copies `bytes` (a multiple of 16) from a 16-byte aligned object with the whole block.
__device__ inline void block_copy16(void* dst, const void* src, uint32_t bytes) {
  auto* d = static_cast<uint4*>(dst);
  const auto* s = static_cast<const uint4*>(src);
  for (uint32_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) d[i] = s[i];
}

// An element from a possibly unaligned byte address (the format is little-endian).
template <class Bits>
__device__ inline Bits load_bits(const uint8_t* p) {
  if constexpr (sizeof(Bits) == 2)
    return format::load_u16(p);
  else
    return format::load_u32(p);
}

// A little-endian field of a stream (a chunk's first word, an offset table entry, the
// header's payload size; T: uint32_t or uint64_t): one load where it is aligned to its size
// (the stream is, as cudaMalloc returns it), byte by byte elsewhere (a stream may start
// anywhere).
template <class T>
__device__ inline T load_stream(const uint8_t* p) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "a 32- or 64-bit field");
  if (reinterpret_cast<uintptr_t>(p) % sizeof(T) == 0) return *reinterpret_cast<const T*>(p);
  if constexpr (sizeof(T) == 8) return format::load_u64(p);
  else return format::load_u32(p);
}

// Copies count items from src to dst (of any memory; they do not overlap), one warp (or, with
// kThreads, a group of that many threads; lane: the thread's rank in it): each thread issues
// kCopyBatch loads before it stores any, so that it waits for memory once per batch, not once
// per item (a loop of load-then-store would, the two pointers being possibly the same memory
// to the compiler).
constexpr uint32_t kCopyBatch = 8;
template <class T, uint32_t kThreads = kWarp>
__device__ inline void warp_copy(const T* __restrict__ src, T* __restrict__ dst, uint32_t count,
                                 uint32_t lane) {
  for (uint32_t at = 0; at < count; at += kCopyBatch * kThreads) {
    T v[kCopyBatch];
#pragma unroll
    for (uint32_t b = 0; b < kCopyBatch; ++b) {
      const uint32_t i = at + b * kThreads + lane;
      if (i < count) v[b] = src[i];
    }
#pragma unroll
    for (uint32_t b = 0; b < kCopyBatch; ++b) {
      const uint32_t i = at + b * kThreads + lane;
      if (i < count) dst[i] = v[b];
    }
  }
}

// The Bits packed in a V (a vector of them, or one) put into those of `acc`: acc[e] = v[e]
// (expbits::StoreElement) or acc[e] + v[e] (gpu::AddElement), element by element.
template <class Bits, class V, class Put>
__device__ inline V put_vector(V acc, V v, Put put) {
  constexpr uint32_t kPer = sizeof(V) / sizeof(Bits);
  static_assert(kPer * sizeof(Bits) == sizeof(V), "a vector of whole elements");
  Bits a[kPer], b[kPer];
  memcpy(a, &acc, sizeof(V));
  memcpy(b, &v, sizeof(V));
#pragma unroll
  for (uint32_t e = 0; e < kPer; ++e) put(a, e, b[e]);
  memcpy(&acc, a, sizeof(V));
  return acc;
}

// Copies n elements from bytes at `src` (any alignment) to `dst` (aligned to the element),
// one warp (or kThreads threads, as warp_copy): 16 bytes an item where both are 16-byte aligned.
template <class Bits, uint32_t kThreads = kWarp>
__device__ inline void warp_copy_elements(const uint8_t* src, uint32_t n, Bits* dst,
                                          uint32_t lane) {
  constexpr uint32_t kPerVector = 16 / sizeof(Bits);
  if (reinterpret_cast<uintptr_t>(src) % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    const uint32_t vectors = n / kPerVector;
    warp_copy<uint4, kThreads>(reinterpret_cast<const uint4*>(src), reinterpret_cast<uint4*>(dst), vectors, lane);
    const uint32_t from = vectors * kPerVector;
    warp_copy<Bits, kThreads>(reinterpret_cast<const Bits*>(src) + from, dst + from, n - from, lane);
  } else if (reinterpret_cast<uintptr_t>(src) % sizeof(Bits) == 0) {
    warp_copy<Bits, kThreads>(reinterpret_cast<const Bits*>(src), dst, n, lane);
  } else {
    for (uint32_t k = lane; k < n; k += kThreads) dst[k] = load_bits<Bits>(src + k * sizeof(Bits));
  }
}

// Puts n elements from bytes at `src` (any alignment) into `dst` with `put` (expbits::take_lane's
// put: a plain store copies, gpu::AddElement adds), one warp (or kThreads threads, as
// warp_copy); a store is warp_copy_elements.
template <class Bits, class Put, uint32_t kThreads = kWarp>
__device__ inline void warp_put_elements(const uint8_t* src, uint32_t n, Bits* dst, uint32_t lane,
                                         Put put) {
  if constexpr (std::is_same_v<Put, expbits::StoreElement>) {
    warp_copy_elements<Bits, kThreads>(src, n, dst, lane);
  } else {
    // Both operands of a batch are loaded before any sum is stored (a put of its own would load
    // dst[k] after the store before it: the compiler cannot tell that they differ).
    const bool aligned = reinterpret_cast<uintptr_t>(src) % sizeof(Bits) == 0;
    for (uint32_t at = 0; at < n; at += kCopyBatch * kThreads) {
      Bits v[kCopyBatch], acc[kCopyBatch];
#pragma unroll
      for (uint32_t b = 0; b < kCopyBatch; ++b) {
        const uint32_t k = at + b * kThreads + lane;
        if (k < n) {
          v[b] = aligned ? reinterpret_cast<const Bits*>(src)[k] : load_bits<Bits>(src + k * sizeof(Bits));
          acc[b] = dst[k];
        }
      }
#pragma unroll
      for (uint32_t b = 0; b < kCopyBatch; ++b) {
        const uint32_t k = at + b * kThreads + lane;
        if (k < n) {
          put(acc, b, v[b]);  // acc[b] = add(acc[b], v[b])
          dst[k] = acc[b];
        }
      }
    }
  }
}

// A decoded chunk window goes from this warp's buffer in shared memory to the output, the whole
// warp with 16-byte loads and stores (a lane's serial decode writes shared memory only). Where
// the window is whole and its output 16-byte aligned, decode-and-add loads the output's window
// (prefetch, before the lanes decode) so that its latency hides behind theirs; elsewhere
// warp_put_elements puts it.
template <class Bits, class Put>
struct WindowPut {
  static constexpr uint32_t kPerVector = 16 / sizeof(Bits);
  static constexpr uint32_t kVectors = kWindow / kPerVector / kWarp;  // a lane's
  static_assert(kWindow % (kPerVector * kWarp) == 0, "a window is whole vectors for every lane");
  static constexpr bool kAdds = !std::is_same_v<Put, expbits::StoreElement>;
  uint4 acc[kAdds ? kVectors : 1];
  bool wide = false;
  __device__ void prefetch(const Bits* dst, uint32_t n, uint32_t lane) {
    wide = n == kWindow && reinterpret_cast<uintptr_t>(dst) % 16 == 0;
    if constexpr (kAdds) {
      if (wide) {
#pragma unroll
        for (uint32_t i = 0; i < kVectors; ++i) acc[i] = reinterpret_cast<const uint4*>(dst)[i * kWarp + lane];
      }
    }
  }
  // window: 16-byte aligned, n elements (the n of prefetch); the warp has synchronised since
  // the lanes wrote it.
  __device__ void put(const Bits* window, uint32_t n, Bits* dst, uint32_t lane, Put p) const {
    if (!wide) {
      warp_put_elements<Bits>(reinterpret_cast<const uint8_t*>(window), n, dst, lane, p);
      return;
    }
#pragma unroll
    for (uint32_t i = 0; i < kVectors; ++i) store(reinterpret_cast<const uint4*>(window)[i * kWarp + lane], i, dst, lane, p);
  }
  // The same from registers: v holds this lane's vectors of the window (vector i * kWarp + lane
  // in v[i]), put straight where the window is whole and aligned, else through `window` (this
  // warp's, 16-byte aligned, which no lane reads any more).
  __device__ void put_vectors(const uint4* v, Bits* window, uint32_t n, Bits* dst, uint32_t lane, Put p) const {
    if (!wide) {
#pragma unroll
      for (uint32_t i = 0; i < kVectors; ++i) reinterpret_cast<uint4*>(window)[i * kWarp + lane] = v[i];
      __syncwarp();
      warp_put_elements<Bits>(reinterpret_cast<const uint8_t*>(window), n, dst, lane, p);
      return;
    }
#pragma unroll
    for (uint32_t i = 0; i < kVectors; ++i) store(v[i], i, dst, lane, p);
  }

 private:
  __device__ void store(uint4 w, uint32_t i, Bits* dst, uint32_t lane, Put p) const {
    if constexpr (kAdds)
      reinterpret_cast<uint4*>(dst)[i * kWarp + lane] = put_vector<Bits>(acc[i], w, p);
    else
      reinterpret_cast<uint4*>(dst)[i * kWarp + lane] = w;
  }
};

// Copies elements [0, n) of a chunk window to this warp's window in shared memory (`dst`,
// 16-byte aligned), one warp.
template <class Bits>
__device__ inline void warp_load_window(const Bits* src, uint32_t n, Bits* dst, uint32_t lane) {
  warp_copy_elements(reinterpret_cast<const uint8_t*>(src), n, dst, lane);
}

// Copies `words` 32-bit words from `src` (any alignment) to `dst`, one warp.
__device__ inline void warp_load_words(const uint8_t* src, uint32_t words, uint32_t* dst,
                                       uint32_t lane) {
  if (reinterpret_cast<uintptr_t>(src) % 4 == 0) {
    warp_copy(reinterpret_cast<const uint32_t*>(src), dst, words, lane);
  } else {
    for (uint32_t w = lane; w < words; w += kWarp) dst[w] = format::load_u32(src + 4 * w);
  }
}

// Copies the `bytes` at src (4-byte aligned) into this warp's stage with asynchronous copies
// (cp.async: no registers, and nothing waits for them until the caller's
// __pipeline_wait_prior), 16 bytes a copy where 16 aligned bytes lie inside them, 4 at their
// ends; the stage holds them from stage + (src % 16), so that 16-byte copies line up (the stage
// is 16-byte aligned and has room for bytes + 12). Returns that offset. One commit a call.
__device__ inline uint32_t stage_async(const uint8_t* src, uint32_t bytes, uint8_t* stage, uint32_t lane) {
  const uint32_t shift = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(src) % 16);
  const uint8_t* const base = src - shift;  // 16-byte aligned; bytes [shift, shift + bytes) are src's
  const uint32_t end = shift + bytes / 4 * 4;
  for (uint32_t at = 16 * lane; at < end; at += 16 * kWarp) {
    if (at >= shift && at + 16 <= end) {
      __pipeline_memcpy_async(stage + at, base + at, 16);
    } else {
      for (uint32_t b = max(at, shift); b < min(at + 16, end); b += 4) __pipeline_memcpy_async(stage + b, base + b, 4);
    }
  }
  __pipeline_commit();
  return shift;
}

// A chunk's windows go through this warp's shared memory one after another, the next one's
// loads in flight while the lanes work on the current one (a warp alone on its scheduler would
// otherwise wait for memory once a window): in registers, kWords 32-bit words a lane, where the
// window is whole (kWords * kWarp words) and its source 4-byte aligned; elsewhere the caller's
// load runs when the window is needed.
template <uint32_t kWords>
struct WindowPrefetch {
  uint32_t v[kWords];
  bool held = false;
  __device__ void fetch(const uint8_t* src, bool whole, uint32_t lane) {
    held = whole && reinterpret_cast<uintptr_t>(src) % 4 == 0;
    if (held) {
      const auto* s = reinterpret_cast<const uint32_t*>(src);
#pragma unroll
      for (uint32_t i = 0; i < kWords; ++i) v[i] = s[i * kWarp + lane];
    }
  }
  // Puts the fetched window into dst (shared memory), or runs load() where it was not fetched.
  template <class Load>
  __device__ void land(uint32_t* dst, uint32_t lane, Load load) const {
    if (held) {
#pragma unroll
      for (uint32_t i = 0; i < kWords; ++i) dst[i * kWarp + lane] = v[i];
    } else {
      load();
    }
  }
};

// for_each_window_bytes's start when the caller has nothing to issue before a window.
struct NoStart {
  __device__ void operator()(uint32_t, uint32_t) const {}
};

// A window of kBytes an element, prefetched (for_each_window_bytes).
template <uint32_t kBytes>
using WindowOf = WindowPrefetch<kWindow * kBytes / 4 / kWarp>;

// The first window of a chunk of n elements whose bytes start at src, fetched.
template <uint32_t kBytes>
__device__ inline WindowOf<kBytes> first_window(const uint8_t* src, uint32_t n, uint32_t lane) {
  static_assert(kWindow * kBytes % (4 * kWarp) == 0, "a window is whole words for every lane");
  WindowOf<kBytes> w;
  w.fetch(src, n >= kWindow, lane);
  return w;
}

// Runs body(base, wn) for each window [base, base + wn) of a chunk of n elements whose bytes
// (kBytes an element) start at src, with the window's bytes in dst (this warp's shared memory)
// and the next window's loads in flight (WindowPrefetch); load(base, wn) puts a window into dst
// where it was not fetched, and start(base, wn), before that, issues what else the window's
// body will wait for. next: the first window, as first_window fetches it (a caller may issue
// it early). The whole warp calls it; body may read dst only.
template <uint32_t kBytes, class Load, class Body, class Start = NoStart>
__device__ inline void for_each_window_bytes(const uint8_t* src, uint32_t n, uint32_t* dst, uint32_t lane, Load load,
                                             Body body, Start start, WindowOf<kBytes> next) {
  for (uint32_t base = 0; base < n; base += kWindow) {
    const uint32_t wn = min(kWindow, n - base);
    start(base, wn);
    __syncwarp();  // every lane is done with the last window
    next.land(dst, lane, [&] { load(base, wn); });
    __syncwarp();
    if (base + kWindow < n) next.fetch(src + (base + kWindow) * kBytes, n - base >= 2 * kWindow, lane);
    body(base, wn);
  }
}

// for_each_window_bytes over chunk x[0, n)'s elements, into `window` (16-byte aligned); first:
// its first window (first_elements).
template <class Bits>
__device__ inline WindowOf<sizeof(Bits)> first_elements(const Bits* x, uint32_t n, uint32_t lane) {
  return first_window<sizeof(Bits)>(reinterpret_cast<const uint8_t*>(x), n, lane);
}
template <class Bits, class Body>
__device__ inline void for_each_window(const Bits* x, uint32_t n, Bits* window, uint32_t lane, Body body,
                                       WindowOf<sizeof(Bits)> first) {
  for_each_window_bytes<sizeof(Bits)>(
      reinterpret_cast<const uint8_t*>(x), n, reinterpret_cast<uint32_t*>(window), lane,
      [&](uint32_t base, uint32_t wn) { warp_load_window(x + base, wn, window, lane); }, body, NoStart{}, first);
}

// The raw bytes (L::raw) of the two 16-bit elements of `pair` at its bytes 0 and 2; bytes 1 and
// 3 are unspecified. bf16's is one bit select: the sign over the mantissa's top bit, each half.
template <class L>
__device__ inline uint32_t raw_pair(uint32_t pair) {
  static_assert(sizeof(typename L::Bits) == 2 && L::kRawBytes == 1, "16-bit elements, a raw byte each");
  if constexpr (std::is_same_v<L, expbits::Bf16Layout>)
    return (pair & 0x7F7F7F7Fu) | ((pair >> 8) & 0x80808080u);
  else
    return L::raw(static_cast<uint16_t>(pair)) | L::raw(static_cast<uint16_t>(pair >> 16)) << 16;
}

// Word w (little-endian) of a chunk's raw section: byte b is byte (b % kRawBytes) of
// L::raw(element b / kRawBytes), as expbits::store_raw lays it; bytes past n are zero.
// x: 8-byte aligned (a window in shared memory). 16-bit elements with a raw byte each (bf16,
// fp16): a whole word's four elements are one 8-byte load, their raw bytes taken two at a time
// (raw_pair) and packed with a byte permute.
template <class L>
__device__ inline uint32_t raw_section_word(const typename L::Bits* x, uint32_t n, uint32_t w) {
  if constexpr (sizeof(typename L::Bits) == 2 && L::kRawBytes == 1) {
    if (4 * w + 4 <= n) {
      const uint2 q = reinterpret_cast<const uint2*>(x)[w];
      return __byte_perm(raw_pair<L>(q.x), raw_pair<L>(q.y), 0x6420);  // bytes 0 and 2 of each
    }
  }
  uint32_t v = 0;
  for (uint32_t b = 0; b < 4; ++b) {
    const uint32_t byte = 4 * w + b;
    const uint32_t k = byte / L::kRawBytes;
    if (k < n) v |= ((L::raw(x[k]) >> (8 * (byte % L::kRawBytes))) & 0xFFu) << (8 * b);
  }
  return v;
}

// Word w of the elements' bytes, zero-padded past n (a stored chunk's body).
template <class Bits>
__device__ inline uint32_t element_word(const Bits* x, uint32_t n, uint32_t w) {
  if constexpr (sizeof(Bits) == 4) {
    return x[w];
  } else {
    const uint32_t lo = x[2 * w];
    const uint32_t hi = 2 * w + 1 < n ? x[2 * w + 1] : 0u;
    return lo | (hi << 16);
  }
}

// ---- per-warp code tables -----------------------------------------------------------------
// gauss-exp's per-chunk tables (KeyCode for encoding, SymbolExponents for decoding) depend
// only on the reference exponent, which neighbouring chunks mostly share: each warp keeps the
// tables of the last reference it saw and rebuilds them (the host's own builder, a part a
// lane) only when the reference changes.
template <class L>
__device__ inline void gauss_key_code(uint32_t ref, uint32_t& cached_ref, const PrefixCode& pc,
                                      expbits::KeyCode& kc, uint32_t lane) {
  if (ref == cached_ref) return;  // warp-uniform
  __syncwarp();                   // every lane is done with the old table
  expbits::build_key_code<L>(expbits::GaussSymbols{ref}, pc, kc, lane, kWarp);
  cached_ref = ref;
  __syncwarp();
}

// Calls f(e) for each element e packed in q (16 / sizeof(Bits) of them), in order.
template <class Bits, class F>
__device__ inline void for_each_packed(const uint4& q, F&& f) {
  constexpr uint32_t kPerWord = 4 / sizeof(Bits);
  static_assert(sizeof(Bits) == 2 || sizeof(Bits) == 4, "whole elements a word");
  const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (uint32_t word : words)
#pragma unroll
    for (uint32_t h = 0; h < kPerWord; ++h) f(static_cast<Bits>(word >> (8 * sizeof(Bits) * h)));
}

// Calls visit(v, valid) for each element of chunk x[0, n), read straight from global memory,
// the whole warp (or kThreads threads; lane: the thread's rank among them) in step (every lane
// makes the same calls; past the end, v is zero and valid false): where x is 16-byte aligned,
// 16 bytes a lane and load, kVisitLoads loads in flight (a warp reads 512 contiguous bytes a
// load), the tail element by element; elsewhere element by element.
constexpr uint32_t kVisitLoads = 4;
template <uint32_t kThreads = kWarp, class Bits, class Visit>
__device__ inline void warp_visit_elements(const Bits* x, uint32_t n, uint32_t lane, Visit visit) {
  constexpr uint32_t kPerVector = 16 / sizeof(Bits);
  uint32_t from = 0;
  if (reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    const auto* v = reinterpret_cast<const uint4*>(x);
    const uint32_t vectors = n / kPerVector;
    for (uint32_t base = 0; base < vectors; base += kThreads * kVisitLoads) {
      uint4 q[kVisitLoads];
      bool in[kVisitLoads];
#pragma unroll
      for (uint32_t u = 0; u < kVisitLoads; ++u) {
        const uint32_t i = base + u * kThreads + lane;
        in[u] = i < vectors;
        q[u] = in[u] ? v[i] : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (uint32_t u = 0; u < kVisitLoads; ++u) for_each_packed<Bits>(q[u], [&](Bits e) { visit(e, in[u]); });
    }
    from = vectors * kPerVector;
  }
  for (uint32_t base = from; base < n; base += kThreads) {
    const uint32_t k = base + lane;
    visit(k < n ? x[k] : Bits{0}, k < n);
  }
}

// Chunk x[0, n)'s exponent histogram added into hist (shared memory, kExpSymbols<L> counts), the
// whole warp: lanes holding the same exponent add once (warp-aggregated shared atomics).
template <class L>
__device__ inline void exponent_histogram(const typename L::Bits* x, uint32_t n, uint32_t lane, uint32_t* hist) {
  warp_visit_elements(x, n, lane, [&](typename L::Bits v, bool valid) {
    const uint32_t e = valid ? L::exponent(v) : 0xFFFFFFFFu;
    const unsigned peers = __match_any_sync(kFullMask, e);
    if (valid && lane == static_cast<uint32_t>(__ffs(peers) - 1))
      atomicAdd(&hist[e], static_cast<uint32_t>(__popc(peers)));
  });
}

// ---- encode: entropy-exp code tables ------------------------------------------------------
// Per chunk: the exponent histogram -> huffman_lengths -> assign_prefix_codes -> build_key_code,
// saved to scratch for measure and emit, each built by the whole warp (expbits' builders in
// parts, a part a lane). A kernel of its own because the builders' scratch takes shared
// memory the lane loops' windows need.
union TableScratch {
  expbits::HuffmanScratch huffman;
  expbits::CodeScratch code;
};

template <class L>
__device__ __forceinline__ void entropy_tables(const typename L::Bits* in, const Geometry& g, const EncodeScratch& s) {
  using Bits = typename L::Bits;
  constexpr uint32_t kSyms = kExpSymbols<L>;
  __shared__ __align__(16) expbits::CanonicalCode s_code[kWarpsPerBlock];
  __shared__ TableScratch s_scratch[kWarpsPerBlock];
  __shared__ expbits::KeyCode s_kc[kWarpsPerBlock];
  __shared__ uint32_t s_hist[kWarpsPerBlock][kSyms];
  __shared__ uint8_t s_len[kWarpsPerBlock][kSyms];
  const uint32_t lane = lane_id();
  const uint32_t warp = warp_in_block();
  expbits::CanonicalCode& pc = s_code[warp];
  TableScratch& scratch = s_scratch[warp];
  expbits::KeyCode& kc = s_kc[warp];
  uint32_t* hist = s_hist[warp];
  uint8_t* len = s_len[warp];
  for (uint64_t c = first_chunk(); c < g.chunks; c += chunk_stride()) {
    const uint32_t n = g.chunk_size(c);
    const Bits* x = in + c * g.chunk_elements;
    for (uint32_t i = lane; i < kSyms; i += kWarp) hist[i] = 0;
    __syncwarp();
    exponent_histogram<L>(x, n, lane, hist);
    __syncwarp();
    expbits::huffman_lengths_in_parts(hist, kSyms, len, scratch.huffman, lane, kWarp, WarpSync{});
    // The codes (encoding needs no decode table); Huffman lengths always make a valid set.
    expbits::assign_prefix_codes_in_parts(len, kSyms, pc, scratch.code, lane, kWarp, WarpSync{});
    expbits::build_key_code<L>(expbits::DirectSymbols{}, pc, kc, lane, kWarp);
    __syncwarp();
    uint32_t* entry_out = s.key_entry + c * kKeys;
    uint8_t* len_out = s.code_length + c * kKeys;
    for (uint32_t i = lane; i < kKeys; i += kWarp) {
      entry_out[i] = kc.entry[i];
      len_out[i] = i < kSyms ? len[i] : 0;
    }
    __syncwarp();  // the next chunk rebuilds this warp's tables
  }
}

template <class L>
__global__ void __launch_bounds__(kBlockThreads)
    entropy_table_kernel(const typename L::Bits* in, Geometry g, EncodeScratch s) {
  entropy_tables<L>(in, g, s);
}

// Loads chunk c's entropy-exp key code and code lengths from scratch into shared memory.
__device__ inline void load_entropy_tables(const EncodeScratch& s, uint64_t c, uint32_t lane,
                                           expbits::KeyCode& kc, uint8_t* len) {
  const uint32_t* entry_in = s.key_entry + c * kKeys;
  const uint8_t* len_in = s.code_length + c * kKeys;
  for (uint32_t i = lane; i < kKeys; i += kWarp) {
    kc.entry[i] = entry_in[i];
    len[i] = len_in[i];
  }
  __syncwarp();
}

// ---- encode: measure ----------------------------------------------------------------------
// Lane `lane`'s word count for chunk x[0, n) under the key code kc (encode_lane's count),
// window by window through `window`.
template <class L>
__device__ inline uint32_t measure_lane_words(const typename L::Bits* x, uint32_t n,
                                              const expbits::KeyCode& kc,
                                              typename L::Bits* window, uint32_t lane,
                                              WindowOf<sizeof(typename L::Bits)> first) {
  uint32_t bits = 0;  // the lane's, as encode_lane would write them
  for_each_window(x, n, window, lane,
                  [&](uint32_t, uint32_t wn) { bits += expbits::lane_bits<L>(window, wn, lane, kc); }, first);
  return (bits + 31) / 32;
}

// A chunk's size under the host's rule: stored when coding would not make it smaller. `words`
// is this lane's word count; the whole warp calls it.
template <class L>
__device__ inline uint64_t chunk_size_bytes(uint32_t table_bytes, uint32_t n, uint32_t words) {
  const uint64_t coded = ChunkLayout<L>::streams_at(table_bytes, n) + 4ull * warp_sum(words);
  const uint32_t stored = ChunkLayout<L>::stored_bytes(n);
  return coded >= stored ? uint64_t{stored} : coded;
}

// gauss-exp, one chunk: its reference exponent (the mean of its normal exponents,
// exponent_sums), this warp's key code for it (rebuilt only when the reference changes) and
// each lane's word count.
struct GaussMeasure {
  uint32_t ref;
  uint32_t words;  // this lane's
};
// Exponents two to a word, in the halves of a 32-bit word (bits 0.. and 16..), summed and
// classified with word-wide adds and masks (exponent_sums): a packed exponent e counts as
// nonzero where e + (2^k - 1) carries into bit k, and as all ones (inf/NaN) where e + 1 does (k =
// L::kExpBits; no half carries into the next).
template <class L>
struct PackedExponents {
  using Bits = typename L::Bits;
  static constexpr uint32_t kShift = 8 * sizeof(Bits) - 1 - L::kExpBits;  // the exponent's low bit
  static constexpr uint32_t kMax = (1u << L::kExpBits) - 1;              // all ones: inf or NaN
  static constexpr uint32_t kLow = kMax | kMax << 16;                      // each half's exponent
  static constexpr uint32_t kCarry = 1u << L::kExpBits | 1u << (16 + L::kExpBits);
  static constexpr uint32_t kOnes = 1u | 1u << 16;
  // The sums of one round of at most kPerRound packed words; no half overflows.
  static constexpr uint32_t kPerRound = 16;
  static_assert(kPerRound * kMax < (1u << 16) && kPerRound * (1u << L::kExpBits) < (1u << 16),
                "a round's sums fit their halves");
  uint32_t sum = 0, nonzero = 0, all_ones = 0;  // packed
  // Adds the exponents of q's elements, two a packed word.
  __device__ void add(const uint4& q) {
    if constexpr (sizeof(Bits) == 2) {
      add_word(q.x >> kShift & kLow);
      add_word(q.y >> kShift & kLow);
      add_word(q.z >> kShift & kLow);
      add_word(q.w >> kShift & kLow);
    } else {
      add_word((q.x >> kShift & kMax) | (q.y >> kShift & kMax) << 16);
      add_word((q.z >> kShift & kMax) | (q.w >> kShift & kMax) << 16);
    }
  }
  __device__ void add_word(uint32_t e2) {
    sum += e2;
    nonzero += (e2 + kLow) & kCarry;
    all_ones += (e2 + kOnes) & kCarry;
  }
  // Adds the round's normal exponents (neither zero nor all ones) and their count to
  // (normal_sum, count), and starts the next round.
  __device__ void flush(uint32_t& normal_sum, uint32_t& count) {
    const auto halves = [](uint32_t v) { return (v & 0xFFFFu) + (v >> 16); };
    const uint32_t ones = halves(all_ones) >> L::kExpBits;
    normal_sum += halves(sum) - kMax * ones;
    count += (halves(nonzero) >> L::kExpBits) - ones;
    sum = nonzero = all_ones = 0;
  }
};

// The sum and the count of chunk x[0, n)'s normal exponents (gauss_reference's inputs), this
// lane's share, read as warp_visit_elements reads (but each lane on its own: no lane waits for
// another past the end), the exponents of a round of loads summed packed (PackedExponents). A
// lane's sum fits 32 bits (at most 65,536 elements of exponents below 256).
template <class L>
__device__ inline void exponent_sums(const typename L::Bits* x, uint32_t n, uint32_t lane, uint32_t& sum,
                                     uint32_t& count) {
  using Bits = typename L::Bits;
  constexpr uint32_t kPerVector = 16 / sizeof(Bits);
  using Packed = PackedExponents<L>;
  static_assert(kVisitLoads * 16 / 4 <= Packed::kPerRound, "a round of loads is a round of sums");
  uint32_t from = 0;
  if (reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    const auto* v = reinterpret_cast<const uint4*>(x);
    const uint32_t vectors = n / kPerVector;
    constexpr uint32_t kRound = kWarp * kVisitLoads;  // vectors a round of the warp's loads
    const auto round = [&](uint32_t i, auto whole) {
      constexpr bool kWhole = decltype(whole)::value;
      uint4 q[kVisitLoads];
#pragma unroll
      for (uint32_t u = 0; u < kVisitLoads; ++u)  // zeros past the end: exponent 0 is not normal
        q[u] = kWhole || i + u * kWarp < vectors ? v[i + u * kWarp] : make_uint4(0, 0, 0, 0);
      Packed packed;
#pragma unroll
      for (uint32_t u = 0; u < kVisitLoads; ++u) packed.add(q[u]);
      packed.flush(sum, count);
    };
    // Whole rounds load unconditionally, all their loads in flight before the first sum (a
    // load that may be skipped has its registers zeroed first, which holds the next one back).
    const uint32_t whole = vectors / kRound * kRound;
    uint32_t i = lane;
    for (; i < whole; i += kRound) round(i, std::true_type{});
    if (i < vectors) round(i, std::false_type{});
    from = vectors * kPerVector;
  }
  for (uint32_t k = from + lane; k < n; k += kWarp) {
    const uint32_t e = L::exponent(x[k]);
    const bool normal = expbits::is_normal_exponent<L>(e);
    sum += normal ? e : 0u;
    count += normal ? 1u : 0u;
  }
}

template <class L>
__device__ inline GaussMeasure measure_gauss_chunk(const typename L::Bits* x, uint32_t n,
                                                   const PrefixCode& gauss_pc, expbits::KeyCode& kc,
                                                   uint32_t& cached_ref, typename L::Bits* window,
                                                   uint32_t lane) {
  const auto first = first_elements(x, n, lane);  // the lane bits' first window, in flight with the sums'
  uint32_t lane_sum = 0, lane_count = 0;
  exponent_sums<L>(x, n, lane, lane_sum, lane_count);
  const unsigned long long sum = warp_sum64(lane_sum);
  const uint32_t count = warp_sum(lane_count);
  const uint32_t ref = expbits::gauss_reference(sum, count);
  gauss_key_code<L>(ref, cached_ref, gauss_pc, kc, lane);
  return {ref, measure_lane_words<L>(x, n, kc, window, lane, first)};
}

// Per chunk: the code (gauss: the reference; entropy: the tables above), each lane's word
// count and the chunk's size.
template <Kind K, class L>
__device__ __forceinline__ void measure_chunks(const typename L::Bits* in, const Geometry& g, const EncodeScratch& s,
                                               const GaussCodeParam<K>& gauss) {
  using Bits = typename L::Bits;
  constexpr bool kGauss = K == Kind::Gauss;
  __shared__ expbits::KeyCode s_kc[kWarpsPerBlock];
  __shared__ uint8_t s_len[kGauss ? 1 : kWarpsPerBlock][kGauss ? 1 : kKeys];
  __shared__ __align__(16) Bits s_window[kWarpsPerBlock][kWindow];
  const uint32_t lane = lane_id();
  const uint32_t warp = warp_in_block();
  const PrefixCode* gauss_pc = nullptr;  // gauss: the block's copy of the fixed code
  if constexpr (kGauss) {
    __shared__ __align__(16) PrefixCode s_gauss;
    block_copy16(&s_gauss, &gauss.pc, kEncodeCodeBytes);
    __syncthreads();
    gauss_pc = &s_gauss;
  }
  expbits::KeyCode& kc = s_kc[warp];
  Bits* window = s_window[warp];
  uint32_t cached_ref = ~0u;
  for (uint64_t c = first_chunk(); c < g.chunks; c += chunk_stride()) {
    const uint32_t n = g.chunk_size(c);
    const Bits* x = in + c * g.chunk_elements;
    uint32_t table_bytes = 0, words = 0;
    if constexpr (kGauss) {
      const GaussMeasure m = measure_gauss_chunk<L>(x, n, *gauss_pc, kc, cached_ref, window, lane);
      if (lane == 0) s.gauss_ref[c] = m.ref;
      words = m.words;
    } else {
      uint8_t* len = s_len[warp];
      load_entropy_tables(s, c, lane, kc, len);
      uint32_t used = 0;
      for (uint32_t i = lane; i < kKeys; i += kWarp) used += len[i] != 0;
      table_bytes = ChunkLayout<L>::table_bytes_entropy(warp_sum(used));
      words = measure_lane_words<L>(x, n, kc, window, lane, first_elements(x, n, lane));
    }
    const uint64_t size = chunk_size_bytes<L>(table_bytes, n, words);
    s.lane_words[c * format::kLanes + lane] = static_cast<uint16_t>(words);
    if (lane == 0) s.chunk_bytes[c] = size;
    __syncwarp();  // the next chunk rebuilds this warp's tables
  }
}

template <Kind K, class L>
__global__ void __launch_bounds__(kBlockThreads)
    measure_kernel(const typename L::Bits* in, Geometry g, EncodeScratch s,
                   const __grid_constant__ GaussCodeParam<K> gauss) {
  measure_chunks<K, L>(in, g, s, gauss);
}

// ---- encode: container --------------------------------------------------------------------
// The header's first 24 bytes (everything but payload_bytes), built on the host.
struct HeaderPrefix {
  uint8_t bytes[format::kOffPayloadBytes];
};

inline HeaderPrefix make_header_prefix(CodecId codec, DType dtype, const Geometry& g) {
  HeaderPrefix h{};
  std::memcpy(h.bytes + format::kOffMagic, format::kMagic, 4);
  h.bytes[format::kOffVersion] = format::kVersion;
  h.bytes[format::kOffCodec] = static_cast<uint8_t>(codec);
  h.bytes[format::kOffDType] = static_cast<uint8_t>(dtype);
  h.bytes[format::kOffFlags] = 0;
  format::store_u64(h.bytes + format::kOffElements, g.elements);
  format::store_u32(h.bytes + format::kOffChunkElements, g.chunk_elements);
  format::store_u32(h.bytes + format::kOffChunkCount, g.chunks);
  return h;
}

// Chunk c's entry of the offset table (little-endian u64 as two aligned words; out is 4-byte
// aligned) and the header, its payload size last: what emit_kernel, finish_kernel and
// gauss_encode_kernel write.
__device__ inline void store_offset_entry(uint8_t* out, uint64_t c, uint64_t end) {
  auto* table32 = reinterpret_cast<uint32_t*>(out + format::kHeaderBytes);
  table32[2 * c] = static_cast<uint32_t>(end);
  table32[2 * c + 1] = static_cast<uint32_t>(end >> 32);
}
__device__ inline void store_header(uint8_t* out, const HeaderPrefix& header, uint64_t payload) {
  for (uint32_t i = 0; i < format::kOffPayloadBytes; ++i) out[i] = header.bytes[i];
  format::store_u64(out + format::kOffPayloadBytes, payload);
}

// ---- encode: emit -------------------------------------------------------------------------
// A stored chunk at o (4-byte aligned): mode word, then the elements, zero-padded to a word.
template <class L>
__device__ inline void emit_stored_chunk(const typename L::Bits* x, uint32_t n, uint8_t* o,
                                         typename L::Bits* window, uint32_t lane) {
  using Bits = typename L::Bits;
  auto* o32 = reinterpret_cast<uint32_t*>(o);  // little-endian device, like the format
  if (lane == 0) o32[0] = format::kModeStored;
  for (uint32_t base = 0; base < n; base += kWindow) {
    const uint32_t wn = min(kWindow, n - base);
    __syncwarp();  // every lane is done with the last window
    warp_load_window(x + base, wn, window, lane);
    __syncwarp();
    uint32_t* body = o32 + 1 + base * sizeof(Bits) / 4;
    const uint32_t words = format::align_up(wn * static_cast<uint32_t>(sizeof(Bits)), 4) / 4;
    for (uint32_t w = lane; w < words; w += kWarp) body[w] = element_word(window, wn, w);
  }
}

// A coded chunk's lane table, raw section and lane streams at o (its header and code table are
// the caller's), `words` this lane's word count: window by window, each lane's bits through a
// BitWriter into the warp's stage (copied out at the end) or, when the streams do not fit
// it, straight to global memory. first: the chunk's first window (first_elements).
template <class L>
__device__ inline void emit_coded_body(const typename L::Bits* x, uint32_t n, uint8_t* o,
                                       uint32_t table_bytes, uint32_t words,
                                       const expbits::KeyCode& kc, typename L::Bits* window,
                                       uint8_t* stage, uint32_t stage_bytes, uint32_t lane,
                                       WindowOf<sizeof(typename L::Bits)> first) {
  format::store_u16(o + ChunkLayout<L>::lane_table_at(table_bytes) + 2 * lane,
                    static_cast<uint16_t>(words));
  auto* raw32 = reinterpret_cast<uint32_t*>(o + ChunkLayout<L>::raw_at(table_bytes));
  uint8_t* streams = o + ChunkLayout<L>::streams_at(table_bytes, n);
  const uint32_t stream_words = warp_sum(words);
  const bool staged = 4 * stream_words <= stage_bytes;  // warp-uniform
  expbits::StreamBitWriter writer((staged ? stage : streams) + 4 * warp_exclusive_sum(words, lane));
  for_each_window(x, n, window, lane, [&](uint32_t base, uint32_t wn) {
    // The window's raw bytes start at byte base * kRawBytes, a word boundary; the last
    // window's final word is zero-padded past n.
    uint32_t* raw_window = raw32 + base * L::kRawBytes / 4;
    const uint32_t raw_words = ChunkLayout<L>::raw_bytes(wn) / 4;
    for (uint32_t w = lane; w < raw_words; w += kWarp)
      raw_window[w] = raw_section_word<L>(window, wn, w);
    expbits::put_lane<L>(window, wn, lane, kc, writer);
  }, first);
  writer.finish();
  if (staged) {
    __syncwarp();
    warp_copy(reinterpret_cast<const uint32_t*>(stage), reinterpret_cast<uint32_t*>(streams),
              stream_words, lane);
  }
}

// Each chunk written at its final offset in the stream at out (its payload + chunk_end - base -
// chunk_bytes, a multiple of 4; out is 4-byte aligned): header, code table, lane table, raw
// section, lane streams; and its offset table entry. The grid's first warp writes the stream's
// header and *out_size (the payload: the last chunk's end), also for a stream of no chunks.
// base: what chunk_end counts before the stream's first chunk (a batch's stream after the first).
template <Kind K, class L>
__device__ __forceinline__ void emit_chunks(const typename L::Bits* in, const Geometry& g, const EncodeScratch& s,
                                            uint64_t base, uint8_t* out, const HeaderPrefix& header,
                                            uint64_t* out_size, uint32_t stage_bytes, const GaussCodeParam<K>& gauss) {
  using Bits = typename L::Bits;
  constexpr uint32_t kSyms = kExpSymbols<L>;
  constexpr bool kGauss = K == Kind::Gauss;
  __shared__ expbits::KeyCode s_kc[kWarpsPerBlock];
  __shared__ uint8_t s_len[kGauss ? 1 : kWarpsPerBlock][kGauss ? 1 : kKeys];
  __shared__ __align__(16) Bits s_window[kWarpsPerBlock][kWindow];
  const uint32_t lane = lane_id();
  const uint32_t warp = warp_in_block();
  const PrefixCode* gauss_pc = nullptr;  // gauss: the block's copy of the fixed code
  if constexpr (kGauss) {
    __shared__ __align__(16) PrefixCode s_gauss;
    block_copy16(&s_gauss, &gauss.pc, kEncodeCodeBytes);
    __syncthreads();
    gauss_pc = &s_gauss;
  }
  expbits::KeyCode& kc = s_kc[warp];
  Bits* window = s_window[warp];
  uint8_t* stage = warp_stage(stage_bytes);
  const uint64_t payload_at = format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} * g.chunks;
  uint8_t* const payload = out + payload_at;
  if (first_chunk() == 0 && lane == 0) {
    const uint64_t bytes = g.chunks == 0 ? 0 : s.chunk_end[g.chunks - 1] - base;
    store_header(out, header, bytes);
    *out_size = payload_at + bytes;
  }
  uint32_t cached_ref = ~0u;
  for (uint64_t c = first_chunk(); c < g.chunks; c += chunk_stride()) {
    const uint32_t n = g.chunk_size(c);
    const Bits* x = in + c * g.chunk_elements;
    // What the measure kernel left of the chunk, and its first window, loaded together: the
    // warp waits for memory once before it codes.
    const uint64_t size = s.chunk_bytes[c];
    const uint64_t end = s.chunk_end[c];
    const uint32_t words = s.lane_words[c * format::kLanes + lane];
    const uint32_t ref = kGauss ? s.gauss_ref[c] : 0;
    const auto first = first_elements(x, n, lane);
    uint8_t* o = payload + (end - base - size);
    if (lane == 0) store_offset_entry(out, c, end - base);
    // gauss: the key code, before the chunk's mode is known (a stored chunk's reference is
    // measured too), so that no load waits for that.
    if constexpr (kGauss) gauss_key_code<L>(ref, cached_ref, *gauss_pc, kc, lane);
    if (size == ChunkLayout<L>::stored_bytes(n)) {  // a coded chunk is always smaller
      emit_stored_chunk<L>(x, n, o, window, lane);
      continue;
    }
    uint32_t table_bytes = 0;
    uint32_t header_byte1;
    if constexpr (kGauss) {
      header_byte1 = ref;
    } else {
      uint8_t* len = s_len[warp];
      load_entropy_tables(s, c, lane, kc, len);
      // Code table: (symbol, length) of each used symbol in symbol order; lane i owns a run of
      // kSyms / kWarp symbols, placed after the used symbols of the lanes before it.
      constexpr uint32_t kRun = kSyms / kWarp;
      static_assert(kSyms % kWarp == 0, "symbols split evenly over lanes");
      uint32_t used = 0;
      for (uint32_t i = 0; i < kRun; ++i) used += len[lane * kRun + i] != 0;
      uint32_t at = warp_exclusive_sum(used, lane);
      const uint32_t nsyms = warp_sum(used);
      for (uint32_t i = 0; i < kRun; ++i) {
        const uint32_t sym = lane * kRun + i;
        if (len[sym] == 0) continue;
        o[format::kChunkHeaderBytes + 2 * at] = static_cast<uint8_t>(sym);
        o[format::kChunkHeaderBytes + 2 * at + 1] = len[sym];
        ++at;
      }
      table_bytes = ChunkLayout<L>::table_bytes_entropy(nsyms);
      for (uint32_t b = 2 * nsyms + lane; b < table_bytes; b += kWarp)
        o[format::kChunkHeaderBytes + b] = 0;
      header_byte1 = nsyms - 1;
    }
    if (lane == 0) reinterpret_cast<uint32_t*>(o)[0] = format::kModeCoded | (header_byte1 << 8);
    emit_coded_body<L>(x, n, o, table_bytes, words, kc, window, stage, stage_bytes, lane, first);
    __syncwarp();  // the next chunk reloads this warp's tables and stage
  }
}

template <Kind K, class L>
__global__ void __launch_bounds__(kBlockThreads)
    emit_kernel(const typename L::Bits* in, Geometry g, EncodeScratch s, uint8_t* out, HeaderPrefix header,
                uint64_t* out_size, uint32_t stage_bytes, const __grid_constant__ GaussCodeParam<K> gauss) {
  emit_chunks<K, L>(in, g, s, 0, out, header, out_size, stage_bytes, gauss);
}

// Writes the offset table, the header and *out_size, as thread `thread` of `threads`. chunk_end
// is the scan's output, or null for identity, whose chunk sizes are fixed (element bytes padded
// to 4); identity_esize then gives the element size and the call also zeroes the payload's final
// pad.
__device__ inline void write_table_and_header(uint8_t* out, const HeaderPrefix& header, const Geometry& g,
                                              const uint64_t* chunk_end, uint32_t identity_esize,
                                              uint64_t* out_size, uint64_t thread, uint64_t threads) {
  const auto end_of = [&](uint64_t c) -> uint64_t {
    if (chunk_end != nullptr) return chunk_end[c];
    const uint64_t next = (c + 1) * g.chunk_elements;
    const uint64_t last = next < g.elements ? next : g.elements;
    return format::align_up64(last * identity_esize, format::kChunkAlign);
  };
  for (uint64_t c = thread; c < g.chunks; c += threads) store_offset_entry(out, c, end_of(c));
  if (thread == 0) {
    const uint64_t payload = g.chunks == 0 ? 0 : end_of(g.chunks - 1);
    store_header(out, header, payload);
    const uint64_t payload_at =
        format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} * g.chunks;
    if (chunk_end == nullptr)
      for (uint64_t b = g.elements * identity_esize; b < payload; ++b) out[payload_at + b] = 0;
    *out_size = payload_at + payload;
  }
}

// The coded codecs' table and header (chunk_end: the scan's output; null only without chunks).
__global__ void finish_kernel(uint8_t* out, HeaderPrefix header, Geometry g, const uint64_t* chunk_end,
                              uint64_t* out_size) {
  write_table_and_header(out, header, g, chunk_end, 0, out_size,
                         uint64_t{blockIdx.x} * blockDim.x + threadIdx.x, uint64_t{gridDim.x} * blockDim.x);
}

// ---- encode: gauss-exp in one launch ------------------------------------------------------
// Each warp takes the next chunk (a ticket: chunks are taken in order, by warps already
// running), measures it, publishes its size, learns the sizes of the chunks before it by
// decoupled look-back (a chunk's descriptor: its size once measured, then the sum of its size
// and all before it once that is known; a warp reads back until it meets such a sum), writes
// the chunk at its offset and its offset-table entry; the last chunk's warp writes the header
// and the size. Descriptors and counters are zeroed by the launcher before the kernel.
constexpr unsigned long long kDescSize = 1ull << 62;       // the chunk's own size
constexpr unsigned long long kDescInclusive = 2ull << 62;  // the size of it and all before it
constexpr unsigned long long kDescValue = kDescSize - 1;
// A lane waits for a chunk before its warp's at most this many polls (each a device-scope load
// and a 64 ns sleep: seconds, not a hang), then the warp gives up: its chunk is not written and
// the call's size is 0, should the descriptors ever go wrong.
constexpr uint32_t kLookBackPolls = 1u << 24;

// The whole warp: lane 0 publishes chunk c's size; every lane gets the bytes of the chunks
// before it, or ~0ull when a wait gave up (the failure flag is set). The lanes read 32
// descriptors at a time, chunk c - 1 - lane (the nearest first), each waiting until its own is
// published (an earlier ticket's warp is running, so it will be); the nearest one that holds an
// inclusive sum ends the walk, and the values up to it are summed across the warp.
__device__ inline unsigned long long look_back(unsigned long long* desc, uint32_t* failed, uint64_t c,
                                               unsigned long long size, uint32_t lane) {
  using Ref = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>;
  if (lane == 0) Ref(desc[c]).store((c == 0 ? kDescInclusive : kDescSize) | size, cuda::memory_order_release);
  if (c == 0) return 0;  // warp-uniform
  unsigned long long before = 0;
  for (uint64_t top = c;; top -= kWarp) {  // this round reads chunks top - 1 - lane
    // A lane past chunk 0 reads nothing; its inclusive 0 is never the nearest, as chunk 0's
    // descriptor (lane top - 1) is inclusive once published.
    unsigned long long d = kDescInclusive;
    if (lane < top) {
      Ref theirs(desc[top - 1 - lane]);
      d = theirs.load(cuda::memory_order_acquire);
      for (uint32_t polls = 1; d == 0 && polls < kLookBackPolls; ++polls) {
        __nanosleep(64);
        d = theirs.load(cuda::memory_order_acquire);
      }
    }
    if (__any_sync(kFullMask, d == 0)) {  // a wait gave up
      if (lane == 0)
        cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(*failed).store(1u, cuda::memory_order_seq_cst);
      return ~0ull;
    }
    const unsigned inclusive = __ballot_sync(kFullMask, (d & ~kDescValue) == kDescInclusive);
    const uint32_t last = inclusive != 0 ? static_cast<uint32_t>(__ffs(inclusive) - 1) : kWarp - 1;
    unsigned long long v = lane <= last ? (d & kDescValue) : 0;
    for (uint32_t o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
    before += v;
    if (inclusive != 0) break;
  }
  if (lane == 0) Ref(desc[c]).store(kDescInclusive | (before + size), cuda::memory_order_release);
  return before;
}

template <class L>
__global__ void __launch_bounds__(kBlockThreads)
    gauss_encode_kernel(const typename L::Bits* in, Geometry g, EncodeScratch s, uint8_t* out,
                        uint64_t* out_size, HeaderPrefix header, uint32_t stage_bytes,
                        const __grid_constant__ GaussCodeParam<Kind::Gauss> gauss) {
  using Bits = typename L::Bits;
  __shared__ expbits::KeyCode s_kc[kWarpsPerBlock];
  __shared__ __align__(16) Bits s_window[kWarpsPerBlock][kWindow];
  __shared__ __align__(16) PrefixCode s_gauss;
  block_copy16(&s_gauss, &gauss.pc, kEncodeCodeBytes);
  __syncthreads();
  const uint32_t lane = lane_id();
  const uint32_t warp = warp_in_block();
  expbits::KeyCode& kc = s_kc[warp];
  Bits* window = s_window[warp];
  uint8_t* stage = warp_stage(stage_bytes);
  uint32_t cached_ref = ~0u;
  const uint64_t payload_at = format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} * g.chunks;
  auto* desc = reinterpret_cast<unsigned long long*>(s.chunk_bytes);
  for (;;) {
    uint32_t ticket = 0;
    if (lane == 0) ticket = atomicAdd(&s.counters[0], 1u);
    const uint64_t c = __shfl_sync(kFullMask, ticket, 0);
    if (c >= g.chunks) break;
    const uint32_t n = g.chunk_size(c);
    const Bits* x = in + c * g.chunk_elements;
    const GaussMeasure m = measure_gauss_chunk<L>(x, n, s_gauss, kc, cached_ref, window, lane);
    const uint64_t size = chunk_size_bytes<L>(0, n, m.words);
    const unsigned long long before = look_back(desc, &s.counters[1], c, size, lane);
    // The call's size: the last chunk's warp stores it, then reads the failure flag and stores
    // 0 if it is set; a warp that gives up sets the flag, then stores 0. All sequentially
    // consistent, so whichever order they run in, a call with a chunk left out ends at 0.
    using SizeRef = cuda::atomic_ref<uint64_t, cuda::thread_scope_device>;
    if (before == ~0ull) {  // gave up waiting: leave the chunk, the call's size is 0
      if (lane == 0) SizeRef(*out_size).store(0, cuda::memory_order_seq_cst);
      continue;
    }
    uint8_t* o = out + payload_at + before;
    if (size == ChunkLayout<L>::stored_bytes(n)) {
      emit_stored_chunk<L>(x, n, o, window, lane);
    } else {
      if (lane == 0) reinterpret_cast<uint32_t*>(o)[0] = format::kModeCoded | (m.ref << 8);
      emit_coded_body<L>(x, n, o, 0, m.words, kc, window, stage, stage_bytes, lane, first_elements(x, n, lane));
    }
    if (lane == 0) {
      const uint64_t end = before + size;
      store_offset_entry(out, c, end);
      if (c + 1 == g.chunks) {
        store_header(out, header, end);
        SizeRef size_ref(*out_size);
        size_ref.store(payload_at + end, cuda::memory_order_seq_cst);
        if (cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(s.counters[1]).load(cuda::memory_order_seq_cst) != 0)
          size_ref.store(0, cuda::memory_order_seq_cst);
      }
    }
    __syncwarp();  // the next chunk reloads this warp's window and stage
  }
}

// ---- decode -------------------------------------------------------------------------------

struct DecodeGeometry {
  Geometry g;
  uint64_t payload_at;     // byte offset of the payload in the stream
  uint64_t payload_bytes;  // as the header states; checked to lie inside the stream on the host
  // The stream's header as the caller expects it, byte for byte (cuda_decode's info): every
  // chunk checks the stream's own header against it on the device.
  uint8_t header[format::kHeaderBytes];
  // StreamInfo::payload_at_most: the header's payload size is the stream's own, at most
  // payload_bytes (bytes after the stream are not its own), instead of payload_bytes itself.
  bool payload_at_most;
};

// The payload size a chunk checks its offsets against: payload_bytes, or (payload_at_most)
// the stream's own header's; 0 and *truncated where that exceeds payload_bytes (the stream was
// cut short: its table and chunks run past the bytes given, and nothing more is read).
// own: the header's payload size, read only where d.payload_at_most.
__device__ inline uint64_t checked_payload(uint64_t own, const DecodeGeometry& d, bool* truncated) {
  *truncated = d.payload_at_most && own > d.payload_bytes;
  return !d.payload_at_most ? d.payload_bytes : *truncated ? 0 : own;
}
__device__ inline uint64_t stream_payload(const uint8_t* stream, const DecodeGeometry& d, bool* truncated) {
  *truncated = false;
  if (!d.payload_at_most) return d.payload_bytes;
  return checked_payload(load_stream<uint64_t>(stream + format::kOffPayloadBytes), d, truncated);
}

__device__ inline int32_t status_of(CudaChunkStatus s) { return static_cast<int32_t>(s); }

__device__ inline int32_t lane_status(LaneStatus st, uint32_t lane, uint32_t element) {
  CudaChunkStatus s = CudaChunkStatus::LaneTrailingBits;
  switch (st) {
    case LaneStatus::Ok:
      return 0;
    case LaneStatus::BadCode:
      s = CudaChunkStatus::LaneBadCode;
      break;
    case LaneStatus::BadExponent:
      s = CudaChunkStatus::LaneBadExponent;
      break;
    case LaneStatus::Overrun:
      s = CudaChunkStatus::LaneOverrun;
      break;
    case LaneStatus::TrailingBits:
      s = CudaChunkStatus::LaneTrailingBits;
      break;
  }
  return static_cast<int32_t>(static_cast<uint32_t>(s) | (lane << 8) |
                              (((element / kWarp) & 0x7FFFu) << 16));
}

// Chunk c's byte range [begin, end) in the payload from what the stream says of it: `header_byte`
// (the stream's header byte `lane`), its offset table entries `from` (0 for chunk 0) and `to`,
// and the payload size to check them against (stream_payload's). The whole warp calls it; the
// stream's header is checked against the expected one first, then the range against the
// payload, before any chunk byte is read.
__device__ inline int32_t check_chunk_range(uint8_t header_byte, uint64_t from, uint64_t to, uint64_t payload,
                                            bool truncated, const DecodeGeometry& d, uint64_t c, uint64_t& begin,
                                            uint64_t& end) {
  const uint32_t lane = lane_id();
  // The payload size's bytes are compared only where the caller knows it (not payload_at_most).
  const bool own_payload = d.payload_at_most && lane >= format::kOffPayloadBytes;
  if (__ballot_sync(kFullMask, !own_payload && header_byte != d.header[lane]) != 0)
    return status_of(CudaChunkStatus::BadHeader);
  if (truncated) return status_of(CudaChunkStatus::Truncated);
  begin = from;
  end = to;
  // As read_stream_info: the last chunk ends where the payload does.
  if (begin > end || end > payload || begin % format::kChunkAlign != 0 || end % format::kChunkAlign != 0 ||
      (c + 1 == d.g.chunks && end != payload))
    return status_of(CudaChunkStatus::BadOffsets);
  return 0;
}

// Chunk c's byte range, from the stream's own offset table; every lane reads the same entries.
// Its loads (a header byte a lane, the two table entries, the header's payload size) are all
// issued before the first test, so that a call waits for memory once: the host has checked that
// the header and the whole table lie inside the stream. It makes the loads of load_chunk_range
// itself: composed of that and ChunkRangeLoads::check, it costs the identity decoder, which
// calls it with a batch of loads in flight, a 12-byte spill (nvcc 13, sm_90).
__device__ inline int32_t chunk_range(const uint8_t* stream, const DecodeGeometry& d, uint64_t c,
                                      uint64_t& begin, uint64_t& end) {
  static_assert(format::kHeaderBytes == kWarp, "one header byte a lane");
  const uint8_t* table = stream + format::kHeaderBytes;
  const uint8_t header_byte = stream[lane_id()];
  const uint64_t from = c == 0 ? 0 : load_stream<uint64_t>(table + format::kOffsetEntryBytes * (c - 1));
  const uint64_t to = load_stream<uint64_t>(table + format::kOffsetEntryBytes * c);
  bool truncated = false;
  const uint64_t payload = stream_payload(stream, d, &truncated);
  return check_chunk_range(header_byte, from, to, payload, truncated, d, c, begin, end);
}

// chunk_range in two parts: its loads, issued by load_chunk_range (the decoder's before its
// block builds its tables), and its checks, which wait for them (ChunkRangeLoads::check).
struct ChunkRangeLoads {
  uint8_t header_byte;
  uint64_t from, to;
  uint64_t own_payload;  // the header's payload size, read only where d.payload_at_most
  __device__ int32_t check(const DecodeGeometry& d, uint64_t c, uint64_t& begin, uint64_t& end) const {
    bool truncated = false;
    const uint64_t payload = checked_payload(own_payload, d, &truncated);
    return check_chunk_range(header_byte, from, to, payload, truncated, d, c, begin, end);
  }
};
__device__ inline ChunkRangeLoads load_chunk_range(const uint8_t* stream, const DecodeGeometry& d, uint64_t c) {
  const uint8_t* table = stream + format::kHeaderBytes;
  ChunkRangeLoads l;
  l.header_byte = stream[lane_id()];
  l.from = c == 0 ? 0 : load_stream<uint64_t>(table + format::kOffsetEntryBytes * (c - 1));
  l.to = load_stream<uint64_t>(table + format::kOffsetEntryBytes * c);
  l.own_payload = d.payload_at_most ? load_stream<uint64_t>(stream + format::kOffPayloadBytes) : 0;
  return l;
}

// One warp's decode tables, in shared memory. gauss: pc is the block's fixed code (read
// only) and se follows the chunk's reference; entropy: pc is rebuilt per chunk from its code
// table and se is fixed (the exponent is the symbol).
struct WarpDecodeTables {
  PrefixCode* pc;
  expbits::SymbolExponents* se;
  uint8_t* len;                    // entropy: code lengths read from the chunk's table
  uint32_t cached_ref;             // gauss: the reference se was built for
  const expbits::PairCode* pairs;  // gauss: two elements a lookup (the block's, read only)
  // bf16: three exponents a lookup, instead (gauss: the block's, read only; entropy: the
  // warp's, built per chunk from pc)
  expbits::TripleCode* triples;
  bool in_range;       // gauss: every symbol of pairs (triples) stands for an exponent
  uint32_t ref_bytes;  // gauss bf16: expbits::triple_ref_bytes of cached_ref
};


// What the decode of a coded chunk waits for before its first element, issued at once as soon
// as the chunk's layout is known (gauss-exp: from its size alone; entropy-exp: once its header
// gives the code table's size), ahead of the header's checks and the code tables' builds: this
// lane's lane table entry, the chunk's first raw window (registers) and, where they fit the
// stage and the stream is 4-byte aligned, its lane streams (into the stage, by cp.async), so
// that the chunk waits for memory about once instead of once a step. Loads only inside the
// chunk's bytes, whatever they hold; the checks that follow decide. Any copy still in flight
// is waited for when it goes (the next chunk reuses the stage).
template <class L>
struct ChunkBodyLoads {
  uint32_t words = 0;     // this lane's lane table entry
  bool staged = false;    // the lane streams are on their way into the stage, from stage + shift
  uint32_t shift = 0;
  WindowOf<L::kRawBytes> raw;  // the first raw window

  // Issues them for a chunk of n elements, `bytes` at in, whose code table takes table_bytes;
  // nothing where the chunk is shorter than the coded layout (its checks fail it).
  __device__ void issue(const uint8_t* in, uint64_t bytes, uint32_t n, uint32_t table_bytes, uint8_t* stage,
                        uint32_t stage_bytes, uint32_t lane) {
    const uint32_t streams_at = ChunkLayout<L>::streams_at(table_bytes, n);
    if (bytes < streams_at) return;  // warp-uniform
    words = format::load_u16(in + ChunkLayout<L>::lane_table_at(table_bytes) + 2 * lane);
    raw = first_window<L::kRawBytes>(in + ChunkLayout<L>::raw_at(table_bytes), n, lane);
    staged = bytes - streams_at <= stage_bytes && reinterpret_cast<uintptr_t>(in) % 4 == 0;
    if (staged) shift = stage_async(in + streams_at, static_cast<uint32_t>(bytes - streams_at), stage, lane);
  }
  // Every lane's streams in the stage (the warp's __syncwarp after it makes them everyone's).
  __device__ void wait() const {
    if (staged) __pipeline_wait_prior(0);
  }
  __device__ ~ChunkBodyLoads() { wait(); }
};

// Decodes one exponent-coded chunk of `bytes` bytes at `in` into out[0, n), one warp, with
// the host decoder's checks in the host decoder's order. Every return is warp-uniform.
// raw_window: this warp's kWindow * kRawBytes bytes of shared memory; out_window: its kWindow
// elements (16-byte aligned), where the lanes decode a window before the warp puts it (WindowPut).
// put: how a decoded value goes to `out` (stored, or added to it). A chunk that fails leaves
// its elements of out unspecified.
template <Kind K, class L, class Put>
__device__ inline int32_t decode_exponent_chunk(const uint8_t* in, uint64_t bytes, uint32_t n,
                                                typename L::Bits* out, uint32_t lane,
                                                WarpDecodeTables& t, uint8_t* stage,
                                                uint32_t stage_bytes, uint32_t* raw_window,
                                                typename L::Bits* out_window, Put put) {
  using Bits = typename L::Bits;
  constexpr uint32_t kSyms = kExpSymbols<L>;
  if (bytes < format::kChunkHeaderBytes) return status_of(CudaChunkStatus::SizeMismatch);
  ChunkBodyLoads<L> body;
  if constexpr (K == Kind::Gauss) body.issue(in, bytes, n, 0, stage, stage_bytes, lane);
  const uint32_t head = load_stream<uint32_t>(in);  // bytes 0-3: mode, reference or symbol count, reserved
  const uint32_t mode = head & 0xFFu, byte1 = head >> 8 & 0xFFu;
  if (mode == format::kModeStored) {
    if (bytes != ChunkLayout<L>::stored_bytes(n)) return status_of(CudaChunkStatus::SizeMismatch);
    warp_put_elements<Bits>(in + format::kChunkHeaderBytes, n, out, lane, put);
    return 0;
  }
  if (mode != format::kModeCoded) return status_of(CudaChunkStatus::BadMode);
  if ((head >> 16) != 0) return status_of(CudaChunkStatus::ReservedBytes);
  uint32_t table_bytes = 0;
  if constexpr (K == Kind::Entropy) {
    const uint32_t nsyms = byte1 + 1;
    if (nsyms > kSyms) return status_of(CudaChunkStatus::BadSymbolCount);
    table_bytes = ChunkLayout<L>::table_bytes_entropy(nsyms);
    if (bytes < format::kChunkHeaderBytes + table_bytes)
      return status_of(CudaChunkStatus::SizeMismatch);
    body.issue(in, bytes, n, table_bytes, stage, stage_bytes, lane);
    // The lengths from the chunk's table, checked as the host decoder checks them (symbols
    // strictly increasing and in range, lengths 1..kMaxCodeBits), then the codes and the decode
    // table, each by the whole warp (expbits' builders in parts, a part a lane).
    const uint8_t* table = in + format::kChunkHeaderBytes;
    bool bad = false;
    for (uint32_t i = lane; i < nsyms; i += kWarp) {
      const uint32_t sym = table[2 * i], l = table[2 * i + 1];
      bad = bad || (i > 0 && sym <= table[2 * (i - 1)]) || sym >= kSyms || l == 0 || l > format::kMaxCodeBits;
    }
    if (__any_sync(kFullMask, bad)) return status_of(CudaChunkStatus::BadCodeTable);
    for (uint32_t sym = lane; sym < kSyms; sym += kWarp) t.len[sym] = 0;
    __syncwarp();
    for (uint32_t i = lane; i < nsyms; i += kWarp) t.len[table[2 * i]] = table[2 * i + 1];
    __syncwarp();
    // The codes, their scratch in the decode table's place (built after them).
    if (!expbits::assign_prefix_codes_in_parts(t.len, kSyms, *t.pc, t.pc->scratch, lane, kWarp, WarpSync{}))
      return status_of(CudaChunkStatus::KraftViolation);  // warp-uniform
    // The decode table: the clears, a barrier, the fills of the listed symbols, a barrier; the
    // same table lane 0 would build alone (expbits::fill_prefix_lut).
    expbits::clear_prefix_lut(*t.pc, lane, kWarp);
    __syncwarp();
    expbits::fill_prefix_lut_listed(*t.pc, table, 2, nsyms, lane, kWarp);
    __syncwarp();
    if constexpr (kThreeALookup<L>) {
      expbits::build_triple_code<expbits::DirectSymbols>(*t.pc, *t.triples, lane, kWarp);
      __syncwarp();
    }
  } else {
    const uint32_t ref = byte1;
    if (ref != t.cached_ref) {  // warp-uniform; the last chunk's lanes are done (decode_kernel)
      expbits::build_symbol_exponents<L>(expbits::GaussSymbols{ref}, *t.se, lane, kWarp);
      t.cached_ref = ref;
      __syncwarp();
      t.in_range = __all_sync(kFullMask, expbits::pairs_in_range<expbits::GaussSymbols>(
                                             *t.se, *t.pc, format::kGaussSymbols, lane, kWarp));
      if constexpr (kThreeALookup<L>) {
        t.in_range = t.in_range && ref >= 8;  // GaussTripleExponents' condition (implied by gauss-exp's code)
        t.ref_bytes = expbits::triple_ref_bytes(ref);
      }
    }
  }
  const uint32_t streams_at = ChunkLayout<L>::streams_at(table_bytes, n);
  if (bytes < streams_at) return status_of(CudaChunkStatus::SizeMismatch);
  const uint32_t words = body.words;  // issued: bytes >= streams_at
  const uint32_t total = warp_sum(words);
  if (bytes != streams_at + 4ull * total) return status_of(CudaChunkStatus::SizeMismatch);
  const uint8_t* const raw = in + ChunkLayout<L>::raw_at(table_bytes);
  const uint32_t lane_at = 4 * warp_exclusive_sum(words, lane);
  LaneStatus st = LaneStatus::Ok;
  uint32_t bad = n;
  // decode_lane, window by window: a lane that meets a bad code stops decoding but keeps
  // loading windows with the others. The raw bytes of window i + 1 load while the lanes decode
  // window i (WindowPrefetch), and decode-and-add's accumulator of window i (WindowPut).
  const auto run = [&](auto reader) {
    WindowPut<Bits, Put> window;
    const auto load_raw = [&](uint32_t base, uint32_t wn) {
      warp_load_words(raw + base * L::kRawBytes, ChunkLayout<L>::raw_bytes(wn) / 4, raw_window, lane);
    };
    // The first window's waits: its accumulator loads issued, then the staged streams awaited,
    // before the window's __syncwarp.
    const auto start = [&](uint32_t base, uint32_t wn) {
      window.prefetch(out + base, wn, lane);
      if (base == 0) body.wait();
    };
    if constexpr (kThreeALookup<L>) {
      if (K == Kind::Entropy || t.in_range) {  // warp-uniform
        // A window's exponents, one byte each in element order (a lane's element j of the
        // window at 32 j + lane), then its values, go through out_window: a lane's lookups may
        // run up to two elements past its window (bytes kWindow .. kWindow + 63: the next
        // window's first two rows), which the next window finds at its start.
        auto* const exps = reinterpret_cast<uint8_t*>(out_window);
        constexpr uint32_t kCarryWords = 2 * kWarp / 4;
        static_assert(kWindow + 2 * kWarp <= kOutWindowBytes<L>, "the exponents and the next two rows fit");
        const uint32_t total = lane < n ? (n - lane + kWarp - 1) / kWarp : 0;  // the lane's elements
        uint32_t j = 0;  // the lane's elements of the window already decoded
        const auto decode = [&](uint32_t base, uint32_t wn) {
          const uint32_t stop = lane < wn ? (wn - lane + kWarp - 1) / kWarp : 0;
          if (st == LaneStatus::Ok) {
            uint32_t at = 0;
            const auto exponents = [&] {
              if constexpr (K == Kind::Gauss) return expbits::GaussTripleExponents{t.ref_bytes};
              else return expbits::DirectTripleExponents{};
            }();
            st = expbits::take_lane_exponents<L>(reader, &j, stop, total - base / kWarp, lane, exponents, *t.se,
                                                 *t.pc, *t.triples, exps, &at);
            if (st == LaneStatus::Ok) j -= stop;
            else bad = base + at;
          }
          __syncwarp();
          // This lane's vectors of the window (WindowPut's: vector i * kWarp + lane, 8
          // elements), from 8 exponent bytes and 8 raw bytes each.
          using V = WindowPut<Bits, Put>;
          uint4 v[V::kVectors];
#pragma unroll
          for (uint32_t i = 0; i < V::kVectors; ++i) {
            const uint2 r = reinterpret_cast<const uint2*>(raw_window)[i * kWarp + lane];
            const uint2 x = reinterpret_cast<const uint2*>(exps)[i * kWarp + lane];
            expbits::join_bf16x4(r.x, x.x, &v[i].x, &v[i].y);
            expbits::join_bf16x4(r.y, x.y, &v[i].z, &v[i].w);
          }
          const uint32_t carry = lane < kCarryWords ? reinterpret_cast<const uint32_t*>(exps)[kWindow / 4 + lane] : 0;
          __syncwarp();
          window.put_vectors(v, out_window, wn, out + base, lane, put);
          __syncwarp();
          if (lane < kCarryWords) reinterpret_cast<uint32_t*>(exps)[lane] = carry;
        };
        for_each_window_bytes<L::kRawBytes>(raw, n, raw_window, lane, load_raw, decode, start, body.raw);
        if (st == LaneStatus::Ok) st = expbits::lane_end_status(reader);
        return;
      }
    }
    const auto decode = [&](uint32_t base, uint32_t wn) {
      if (st == LaneStatus::Ok) {
        uint32_t at = 0;
        const auto* raw_bytes = reinterpret_cast<const uint8_t*>(raw_window);
        if constexpr (K == Kind::Gauss && !kThreeALookup<L>) {
          if (t.in_range)  // warp-uniform
            st = expbits::take_lane_pairs_in_range<L>(reader, raw_bytes, wn, lane, *t.se, *t.pc, *t.pairs,
                                                      out_window, &at);
          else
            st = expbits::take_lane_pairs<L>(reader, raw_bytes, wn, lane, *t.se, *t.pc, *t.pairs, out_window, &at);
        } else  // entropy-exp's fp16 and fp32; gauss-exp's bf16 chunks whose reference is near either end
          st = expbits::take_lane<L>(reader, raw_bytes, wn, lane, *t.se, *t.pc, out_window, &at);
        if (st != LaneStatus::Ok) bad = base + at;
      }
      __syncwarp();
      window.put(out_window, wn, out + base, lane, put);
    };
    for_each_window_bytes<L::kRawBytes>(raw, n, raw_window, lane, load_raw, decode, start, body.raw);
    if (st == LaneStatus::Ok) st = expbits::lane_end_status(reader);
  };
  // The lane streams, staged in shared memory where they fit (ChunkBodyLoads; in a stream that
  // is not 4-byte aligned, with loads here); else read where they are in the stream.
  if (4ull * total <= stage_bytes) {  // warp-uniform; body.staged where the stream is 4-byte aligned
    if (!body.staged) {
      warp_load_words(in + streams_at, total, reinterpret_cast<uint32_t*>(stage), lane);
      __syncwarp();
    }
    run(expbits::AlignedWordBitReader(stage + body.shift + lane_at, words));
  } else {
    run(expbits::WordBitReader(in + streams_at + lane_at, words));
  }
  // Report the lowest failing lane (the host may name another lane of the same chunk when
  // several are damaged: it walks lanes in groups of four, element by element).
  const unsigned failing = __ballot_sync(kFullMask, st != LaneStatus::Ok);
  if (failing == 0) return 0;
  const uint32_t first = static_cast<uint32_t>(__ffs(failing) - 1);
  const int32_t mine = lane_status(st, lane, bad);
  return __shfl_sync(kFullMask, mine, static_cast<int>(first));
}

template <Kind K, class L, class Put>
__device__ __forceinline__ void decode_chunks(const uint8_t* stream, const DecodeGeometry& d, typename L::Bits* out,
                                              int32_t* status, uint32_t stage_bytes, const GaussCodeParam<K>& gauss) {
  constexpr bool kGauss = K == Kind::Gauss;
  __shared__ __align__(16) PrefixCode s_code[kGauss ? 1 : kWarpsPerBlock];
  __shared__ expbits::SymbolExponents s_se[kWarpsPerBlock];
  __shared__ uint8_t s_len[kGauss ? 1 : kWarpsPerBlock][kGauss ? 1 : kExpSymbols<L>];
  __shared__ __align__(16) uint32_t s_raw[kWarpsPerBlock][kWindow * L::kRawBytes / 4];
  // gauss-exp's table of several elements a lookup, the block's.
  struct NoPairs {};
  using Lookup = std::conditional_t<kThreeALookup<L>, expbits::TripleCode, expbits::PairCode>;
  __shared__ std::conditional_t<kGauss, Lookup, NoPairs> s_pairs;
  const uint32_t lane = lane_id();
  const uint32_t warp = warp_in_block();
  WarpDecodeTables t{&s_code[kGauss ? 0 : warp], &s_se[warp], s_len[kGauss ? 0 : warp], ~0u, nullptr, nullptr, false, 0};
  // The first chunk's offsets, loaded while the block builds its tables.
  ChunkRangeLoads range{};
  if (first_chunk() < d.g.chunks) range = load_chunk_range(stream, d, first_chunk());
  // This warp's dynamic shared memory: entropy-exp's bf16 triple table, its output window, then
  // its stage (kDecodeWarpBytes, then stage_bytes and kStageSlack).
  uint8_t* const dynamic = warp_stage(kDecodeWarpBytes<K, L> + stage_bytes + kStageSlack);
  if constexpr (kDecodeTripleBytes<K, L> != 0) t.triples = reinterpret_cast<expbits::TripleCode*>(dynamic);
  auto* const out_window = reinterpret_cast<typename L::Bits*>(dynamic + kDecodeTripleBytes<K, L>);
  uint8_t* const stage = dynamic + kDecodeWarpBytes<K, L>;
  if constexpr (kGauss) {
    block_copy16(&s_code[0], &gauss.pc, sizeof(PrefixCode));
    __syncthreads();
    if constexpr (kThreeALookup<L>) {
      expbits::build_triple_code<expbits::GaussSymbols>(s_code[0], s_pairs, threadIdx.x, kBlockThreads);
      t.triples = &s_pairs;
    } else {
      expbits::build_pair_code<L, expbits::GaussSymbols>(s_code[0], s_pairs, threadIdx.x, kBlockThreads);
      t.pairs = &s_pairs;
    }
    __syncthreads();
  } else {
    expbits::build_symbol_exponents<L>(expbits::DirectSymbols{}, *t.se, lane, kWarp);
    __syncwarp();
  }
  for (uint64_t c = first_chunk(); c < d.g.chunks;) {
    uint64_t begin = 0, end = 0;
    int32_t st = range.check(d, c, begin, end);
    if (st == 0)
      st =
          decode_exponent_chunk<K, L>(stream + d.payload_at + begin, end - begin, d.g.chunk_size(c),
                                      out + c * d.g.chunk_elements, lane, t, stage, stage_bytes,
                                      s_raw[warp], out_window, Put{});
    if (lane == 0) status[c] = st;
    __syncwarp();  // the next chunk may rebuild this warp's tables
    c += chunk_stride();
    if (c < d.g.chunks) range = load_chunk_range(stream, d, c);
  }
}

template <Kind K, class L, class Put>
__global__ void __launch_bounds__(kBlockThreads)
    decode_kernel(const uint8_t* stream, const __grid_constant__ DecodeGeometry d, typename L::Bits* out, int32_t* status,
                  uint32_t stage_bytes, const __grid_constant__ GaussCodeParam<K> gauss) {
  decode_chunks<K, L, Put>(stream, d, out, status, stage_bytes, gauss);
}

// ---- identity: a copy a block -----------------------------------------------------------
// The identity kernels move bytes with blocks of kThreads threads (lane: the thread's rank in
// the block), in items of 16, 8 or 4 bytes. (The exponent kernels keep warp_put_elements, whose
// fewer paths cost their lane loops fewer registers.)

struct AllItems {
  __device__ bool operator()(uint32_t) const { return true; }
};

// One batch of put_items: items [at, at + kItems * kThreads) of count, kItems a thread. load()
// issues every load of the batch (src's, and dst's where put adds) before store() stores any, so
// that a thread waits for memory once per batch; a caller may do other work between the two
// while the loads are in flight.
template <class Bits, class V, class Put, uint32_t kThreads>
struct ItemBatch {
  static constexpr bool kAdds = !std::is_same_v<Put, expbits::StoreElement>;
  // Items a thread: an add holds two operands and their sums, so half a copy's.
  static constexpr uint32_t kItems = kAdds ? kCopyBatch / 2 : kCopyBatch;
  static constexpr uint32_t kBytes = kItems * kThreads * sizeof(V);  // src's bytes a batch
  V v[kItems];
  V acc[kAdds ? kItems : 1];
  __device__ void load(const V* src, const V* dst, uint32_t at, uint32_t count, uint32_t lane) {
#pragma unroll
    for (uint32_t b = 0; b < kItems; ++b) {
      const uint32_t i = at + b * kThreads + lane;
      if (i < count) {
        v[b] = src[i];
        if constexpr (kAdds) acc[b] = dst[i];
      }
    }
  }
  // keep(i): whether item i is stored (all of them by default).
  template <class Keep = AllItems>
  __device__ void store(V* dst, uint32_t at, uint32_t count, uint32_t lane, Put put, Keep keep = {}) const {
#pragma unroll
    for (uint32_t b = 0; b < kItems; ++b) {
      const uint32_t i = at + b * kThreads + lane;
      if (i < count && keep(i)) {
        if constexpr (kAdds)
          dst[i] = put_vector<Bits>(acc[b], v[b], put);
        else
          dst[i] = v[b];
      }
    }
  }
};

// Puts count items of type V (a vector of Bits, or one) from src into dst, kThreads threads, a
// batch (ItemBatch) at a time.
template <class Bits, class V, class Put, uint32_t kThreads>
__device__ inline void put_items(const V* src, V* dst, uint32_t count, uint32_t lane, Put put) {
  for (uint32_t at = 0; at < count; at += ItemBatch<Bits, V, Put, kThreads>::kItems * kThreads) {
    ItemBatch<Bits, V, Put, kThreads> batch;
    batch.load(src, dst, at, count, lane);
    batch.store(dst, at, count, lane, put);
  }
}

// Puts n elements from bytes at `src` (any alignment) into `dst` with `put` (a plain store
// copies, gpu::AddElement adds), kThreads threads: in the widest items (16, 8 or 4 bytes) that
// both addresses are aligned to, the elements past the last whole item one at a time.
template <class Bits, class Put, uint32_t kThreads>
__device__ inline void put_elements_wide(const uint8_t* src, uint32_t n, Bits* dst, uint32_t lane,
                                         Put put) {
  const uintptr_t both = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst);
  uint32_t from = 0;
  const auto whole = [&](auto item) {
    using V = decltype(item);
    constexpr uint32_t kPer = sizeof(V) / sizeof(Bits);
    const uint32_t count = n / kPer;
    put_items<Bits, V, Put, kThreads>(reinterpret_cast<const V*>(src), reinterpret_cast<V*>(dst), count, lane,
                                      put);
    from = count * kPer;
  };
  if (both % 16 == 0)
    whole(uint4{});
  else if (both % 8 == 0)
    whole(uint2{});
  else if (sizeof(Bits) < 4 && both % 4 == 0)
    whole(uint32_t{});
  if (reinterpret_cast<uintptr_t>(src) % sizeof(Bits) == 0) {
    put_items<Bits, Bits, Put, kThreads>(reinterpret_cast<const Bits*>(src) + from, dst + from, n - from, lane,
                                         put);
  } else {
    for (uint32_t k = from + lane; k < n; k += kThreads) put(dst, k, load_bits<Bits>(src + k * sizeof(Bits)));
  }
}

// A copy has no serial work per lane. An identity chunk's place in the payload is fixed (chunk c
// at c times a whole chunk's bytes, its elements' bytes with no pad between chunks: a whole
// chunk's bytes are a multiple of kChunkAlign), so the decoder's block takes a unit of
// consecutive chunks (as many as a batch holds, at least one, at most one a warp), issues the
// loads of the unit's first batch from the chunks' fixed places, and meanwhile has a warp a
// chunk read and check its offset table entries (chunk_range): the block waits for memory
// once. It keeps the batch's items of the chunks that are sound and where the table places them
// at their fixed places, and reads a sound chunk the table places elsewhere (after a damaged
// one, a table may place a sound chunk anywhere) from there.
constexpr uint32_t kCopyThreads = 256;
constexpr uint32_t kUnitChunks = kCopyThreads / kWarp;
// At least two blocks a multiprocessor (at most 128 registers a thread): a batch of each in
// flight is 64 KiB of loads a multiprocessor, as many as the reduce kernel keeps in flight (2,048
// threads of one 32-byte pair each), which reaches 96-98% of the device copy's traffic.
constexpr uint32_t kCopyBlocksPerSm = 2;

// The chunks of an identity decoder's unit: as many whole chunks of chunk_elements as a batch of
// batch_bytes holds, at least one, at most kUnitChunks.
__host__ __device__ inline uint32_t identity_unit_chunks(uint32_t chunk_elements, uint32_t esize,
                                                         uint32_t batch_bytes) {
  const uint64_t fit = batch_bytes / (uint64_t{chunk_elements} * esize);
  return fit < 1 ? 1u : fit > kUnitChunks ? kUnitChunks : static_cast<uint32_t>(fit);
}

template <class Bits, class Put>
__device__ __forceinline__ void identity_decode_units(const uint8_t* stream, const DecodeGeometry& d, Bits* out,
                                                      int32_t* status) {
  using Batch = ItemBatch<Bits, uint4, Put, kCopyThreads>;
  constexpr uint32_t kPerVector = 16 / sizeof(Bits);
  constexpr uint32_t kBatchVectors = Batch::kItems * kCopyThreads;
  __shared__ int32_t s_status[kUnitChunks];
  __shared__ uint64_t s_begin[kUnitChunks];
  const uint32_t c_elems = d.g.chunk_elements;
  const uint64_t whole_bytes = uint64_t{c_elems} * sizeof(Bits);
  const uint32_t unit = identity_unit_chunks(c_elems, sizeof(Bits), Batch::kBytes);
  const uint32_t warp = threadIdx.x / kWarp;
  for (uint64_t first = uint64_t{blockIdx.x} * unit; first < d.g.chunks; first += uint64_t{gridDim.x} * unit) {
    const uint32_t k = static_cast<uint32_t>(d.g.chunks - first < unit ? d.g.chunks - first : unit);
    const uint64_t e0 = first * c_elems;
    const uint64_t e1 = (first + k) * c_elems < d.g.elements ? (first + k) * c_elems : d.g.elements;
    const uint32_t n = static_cast<uint32_t>(e1 - e0);  // at most kUnitChunks whole chunks
    const uint64_t guess = first * whole_bytes;
    const uint8_t* const at = stream + d.payload_at + guess;
    Bits* const dst = out + e0;
    // Only inside the payload given (the host has checked that it lies inside the stream).
    const uint64_t bytes = format::align_up64(uint64_t{n} * sizeof(Bits), format::kChunkAlign);
    const bool early = guess + bytes <= d.payload_bytes &&
                       (reinterpret_cast<uintptr_t>(at) | reinterpret_cast<uintptr_t>(dst)) % 16 == 0;
    const uint32_t vectors = n / kPerVector;
    Batch batch;
    if (early)
      batch.load(reinterpret_cast<const uint4*>(at), reinterpret_cast<const uint4*>(dst), 0, vectors, threadIdx.x);
    if (warp < k) {
      const uint64_t c = first + warp;
      uint64_t begin = 0, end = 0;
      int32_t st = chunk_range(stream, d, c, begin, end);  // the warp alike
      if (st == 0 &&
          end - begin != format::align_up64(uint64_t{d.g.chunk_size(c)} * sizeof(Bits), format::kChunkAlign))
        st = status_of(CudaChunkStatus::SizeMismatch);
      if (lane_id() == 0) {
        s_status[warp] = st;
        s_begin[warp] = begin;
        status[c] = st;
      }
    }
    __syncthreads();
    // Bit w: chunk first + w is sound and at its fixed place, so the batch holds its bytes.
    uint32_t fixed = 0;
    for (uint32_t w = 0; w < k; ++w)
      if (s_status[w] == 0 && s_begin[w] == (first + w) * whole_bytes) fixed |= 1u << w;
    if (early && fixed == (1u << k) - 1)  // every chunk of the unit (block-uniform)
      batch.store(reinterpret_cast<uint4*>(dst), 0, vectors, threadIdx.x, Put{});
    else if (early)
      batch.store(reinterpret_cast<uint4*>(dst), 0, vectors, threadIdx.x, Put{},
                  [&](uint32_t i) { return (fixed >> (i * kPerVector / c_elems)) & 1u; });
    const uint32_t done = early ? (vectors < kBatchVectors ? vectors : kBatchVectors) * kPerVector : 0;
    for (uint32_t w = 0; w < k; ++w) {
      if (s_status[w] != 0) continue;
      const uint32_t from = w * c_elems, size = d.g.chunk_size(first + w);
      // What the batch left of a chunk at its fixed place, or all of one placed elsewhere.
      const uint32_t skip = (fixed >> w) & 1u ? (done > from ? (done - from < size ? done - from : size) : 0) : 0;
      if (skip < size)
        put_elements_wide<Bits, Put, kCopyThreads>(stream + d.payload_at + s_begin[w] + uint64_t{skip} * sizeof(Bits),
                                                   size - skip, dst + from + skip, threadIdx.x, Put{});
    }
    __syncthreads();  // the next unit rewrites s_status and s_begin
  }
}

template <class Bits, class Put>
__global__ void __launch_bounds__(kCopyThreads, kCopyBlocksPerSm)
    identity_decode_kernel(const uint8_t* stream, const __grid_constant__ DecodeGeometry d, Bits* out, int32_t* status) {
  identity_decode_units<Bits, Put>(stream, d, out, status);
}

// Identity in one launch: the grid copies the elements into the payload (chunk c's element bytes
// are the payload's from c times a whole chunk's, no pad between them: a whole chunk's bytes are
// a multiple of kChunkAlign) in tiles of a batch, and writes the offset table, the header, the
// final pad and the size beside the copy.
template <class Bits>
__device__ __forceinline__ void identity_encode_tiles(const Bits* in, const Geometry& g, uint8_t* out,
                                                      const HeaderPrefix& header, uint64_t* out_size) {
  constexpr uint64_t kTile = ItemBatch<Bits, uint4, expbits::StoreElement, kCopyThreads>::kBytes / sizeof(Bits);
  const uint64_t payload_at = format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} * g.chunks;
  // out is 4-byte aligned and payload_at a multiple of 8: the payload is aligned to the element.
  Bits* const payload = reinterpret_cast<Bits*>(out + payload_at);
  for (uint64_t t = blockIdx.x; t * kTile < g.elements; t += gridDim.x) {
    const uint64_t left = g.elements - t * kTile;
    put_elements_wide<Bits, expbits::StoreElement, kCopyThreads>(
        reinterpret_cast<const uint8_t*>(in + t * kTile), static_cast<uint32_t>(left < kTile ? left : kTile),
        payload + t * kTile, threadIdx.x, expbits::StoreElement{});
  }
  write_table_and_header(out, header, g, nullptr, sizeof(Bits), out_size,
                         uint64_t{blockIdx.x} * blockDim.x + threadIdx.x, uint64_t{gridDim.x} * blockDim.x);
}

template <class Bits>
__global__ void __launch_bounds__(kCopyThreads, kCopyBlocksPerSm)
    identity_encode_kernel(const Bits* in, Geometry g, uint8_t* out, HeaderPrefix header, uint64_t* out_size) {
  identity_encode_tiles<Bits>(in, g, out, header, out_size);
}

// ---- batches: several streams in one launch a kernel --------------------------------------
// A batch is up to kBatchItems streams of one codec and dtype, coded (or decoded) by one launch
// of each kernel that codes one stream: the grid's y is the stream, its x the blocks of one
// stream, which deal that stream's chunks among their warps as for a stream alone. The
// encoder's per-chunk scratch holds the batch's chunks one stream after another (chunk_base: a
// stream's first), so that one scan covers them all; a stream's offsets are then its chunks'
// scanned ends less what the streams before it hold (item_base).
constexpr uint32_t kBatchItems = 16;

struct EncodeItem {
  const void* in;  // the dtype's elements
  Geometry g;
  uint8_t* out;
  uint64_t* out_size;
  uint32_t chunk_base;
  HeaderPrefix header;
};
struct EncodeBatch {
  EncodeItem items[kBatchItems];
};

struct DecodeItem {
  const uint8_t* stream;
  DecodeGeometry d;
  void* out;  // the dtype's elements
  int32_t* status;
};
struct DecodeBatch {
  DecodeItem items[kBatchItems];
};

// A stream's view of its batch's scratch: its own chunks'.
template <Kind K>
__device__ inline EncodeScratch item_scratch(EncodeScratch s, uint32_t chunk_base) {
  s.chunk_bytes += chunk_base;
  s.chunk_end += chunk_base;
  s.lane_words += uint64_t{chunk_base} * format::kLanes;
  if constexpr (K == Kind::Gauss) {
    s.gauss_ref += chunk_base;
  } else {
    s.key_entry += uint64_t{chunk_base} * kKeys;
    s.code_length += uint64_t{chunk_base} * kKeys;
  }
  return s;
}
// What the batch's scan counts before the stream's first chunk.
__device__ inline uint64_t item_base(const EncodeScratch& s, uint32_t chunk_base) {
  return chunk_base == 0 ? 0 : s.chunk_end[chunk_base - 1];
}

template <class L>
__global__ void __launch_bounds__(kBlockThreads)
    entropy_table_batch_kernel(const __grid_constant__ EncodeBatch b, EncodeScratch s) {
  const EncodeItem& it = b.items[blockIdx.y];
  entropy_tables<L>(static_cast<const typename L::Bits*>(it.in), it.g, item_scratch<Kind::Entropy>(s, it.chunk_base));
}

template <Kind K, class L>
__global__ void __launch_bounds__(kBlockThreads)
    measure_batch_kernel(const __grid_constant__ EncodeBatch b, EncodeScratch s,
                         const __grid_constant__ GaussCodeParam<K> gauss) {
  const EncodeItem& it = b.items[blockIdx.y];
  measure_chunks<K, L>(static_cast<const typename L::Bits*>(it.in), it.g, item_scratch<K>(s, it.chunk_base), gauss);
}

template <Kind K, class L>
__global__ void __launch_bounds__(kBlockThreads)
    emit_batch_kernel(const __grid_constant__ EncodeBatch b, EncodeScratch s, uint32_t stage_bytes,
                      const __grid_constant__ GaussCodeParam<K> gauss) {
  const EncodeItem& it = b.items[blockIdx.y];
  emit_chunks<K, L>(static_cast<const typename L::Bits*>(it.in), it.g, item_scratch<K>(s, it.chunk_base),
                    item_base(s, it.chunk_base), it.out, it.header, it.out_size, stage_bytes, gauss);
}

// The header and size of streams of no chunks, a block each (emit_batch_kernel writes them
// where any stream of the batch has a chunk).
__global__ void header_batch_kernel(const __grid_constant__ EncodeBatch b) {
  const EncodeItem& it = b.items[blockIdx.x];
  write_table_and_header(it.out, it.header, it.g, nullptr, 0, it.out_size, threadIdx.x, blockDim.x);
}

template <Kind K, class L>
__global__ void __launch_bounds__(kBlockThreads)
    decode_batch_kernel(const __grid_constant__ DecodeBatch b, uint32_t stage_bytes,
                        const __grid_constant__ GaussCodeParam<K> gauss) {
  const DecodeItem& it = b.items[blockIdx.y];
  decode_chunks<K, L, expbits::StoreElement>(it.stream, it.d, static_cast<typename L::Bits*>(it.out), it.status,
                                             stage_bytes, gauss);
}

template <class Bits>
__global__ void __launch_bounds__(kCopyThreads, kCopyBlocksPerSm)
    identity_encode_batch_kernel(const __grid_constant__ EncodeBatch b) {
  const EncodeItem& it = b.items[blockIdx.y];
  identity_encode_tiles<Bits>(static_cast<const Bits*>(it.in), it.g, it.out, it.header, it.out_size);
}

template <class Bits>
__global__ void __launch_bounds__(kCopyThreads, kCopyBlocksPerSm)
    identity_decode_batch_kernel(const __grid_constant__ DecodeBatch b) {
  const DecodeItem& it = b.items[blockIdx.y];
  identity_decode_units<Bits, expbits::StoreElement>(it.stream, it.d, static_cast<Bits*>(it.out), it.status);
}

// ---- launchers ----------------------------------------------------------------------------

// Blocks of `threads` threads for a grid-stride launch that wants `blocks` blocks: one
// resident wave at most, so per-block setup (the gauss code copy) is paid once per resident
// block. The wave's size (blocks a multiprocessor holds, times multiprocessors) is asked of the
// runtime once per kernel, block size, shared memory and device on each host thread, then
// remembered: a launch pays no occupancy query.
template <class Kernel>
inline uint32_t resident_grid(Kernel kernel, uint64_t blocks, uint32_t threads, size_t dynamic_smem = 0) {
  struct Wave {
    const void* kernel;
    uint32_t threads;
    size_t smem;
    int device;
    uint64_t blocks;
  };
  thread_local std::vector<Wave> known;
  int device = 0;
  COMPCOLL_CUDA_CHECK(cudaGetDevice(&device));
  const void* k = reinterpret_cast<const void*>(kernel);
  uint64_t resident = 0;
  for (const Wave& w : known)
    if (w.kernel == k && w.threads == threads && w.smem == dynamic_smem && w.device == device) resident = w.blocks;
  if (resident == 0) {
    int sms = 0, per_sm = 0;
    COMPCOLL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    COMPCOLL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, static_cast<int>(threads),
                                                                      dynamic_smem));
    resident = uint64_t(std::max(per_sm, 1)) * uint64_t(std::max(sms, 1));
    // None resident (the kernel not yet allowed that much shared memory): asked again next time.
    if (per_sm > 0) known.push_back({k, threads, dynamic_smem, device, resident});
  }
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min(blocks, resident)));
}

// Blocks for a grid-stride launch over `chunks` chunks, one per warp.
template <class Kernel>
inline uint32_t grid_blocks(Kernel kernel, uint64_t chunks, size_t dynamic_smem = 0) {
  return resident_grid(kernel, (chunks + kWarpsPerBlock - 1) / kWarpsPerBlock, kBlockThreads, dynamic_smem);
}

// Lets `kernel` take the dynamic shared memory of any chunk size (stage_bytes_for is at most
// kStageBytes a warp); past 48 KB (with its static shared memory) a kernel must opt in. The
// same value at every call, whatever the chunk size, so that threads launching the kernel at
// once never lower each other's limit.
// extra: the bytes each warp takes beside its stage (the decoder's output window).
template <class L, class Kernel>
inline void allow_dynamic_smem(Kernel kernel, uint32_t extra = 0) {
  COMPCOLL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(size_t{kStageBytes<L> + extra} * kWarpsPerBlock)));
}

// Per-warp staging bytes for chunks of chunk_elements: kStageBytes, or less when no coded
// chunk's lane streams can be that long (they are shorter than the stored form's excess).
template <class L>
inline uint32_t stage_bytes_for(uint32_t chunk_elements) {
  const uint32_t stored = ChunkLayout<L>::stored_bytes(chunk_elements);
  const uint32_t streams_at = ChunkLayout<L>::streams_at(0, chunk_elements);
  const uint32_t bound = stored > streams_at ? stored - streams_at : 0;
  return std::min(kStageBytes<L>, static_cast<uint32_t>(format::align_up64(bound, 16)));
}

inline void launch_finish(uint8_t* out, const HeaderPrefix& header, const Geometry& g, const uint64_t* chunk_end,
                          uint64_t* out_size, cudaStream_t stream) {
  constexpr uint32_t kThreads = 256;
  const uint64_t blocks =
      std::clamp<uint64_t>((uint64_t{g.chunks} + kThreads - 1) / kThreads, 1, 1024);
  finish_kernel<<<static_cast<uint32_t>(blocks), kThreads, 0, stream>>>(out, header, g, chunk_end, out_size);
}

// out: 4-byte aligned; scratch: scratch_layout(K, g.chunks).total bytes (checked by the caller).
// one_launch: gauss-exp through gauss_encode_kernel (ignored for entropy-exp).
template <Kind K, class L>
void launch_exponent_encode(CodecId codec, DType dtype, const typename L::Bits* in,
                            const Geometry& g, uint8_t* out, uint64_t* out_size, void* scratch,
                            bool one_launch, cudaStream_t stream) {
  EncodeScratch s{};
  if (g.chunks > 0) {
    s = bind_scratch(scratch_layout(K, g.chunks), scratch);
    const GaussCodeParam<K>& gauss = gauss_code_param<K>();
    if constexpr (K == Kind::Gauss) {
      if (one_launch) {
        COMPCOLL_CUDA_CHECK(cudaMemsetAsync(s.chunk_bytes, 0, sizeof(uint64_t) * g.chunks, stream));
        COMPCOLL_CUDA_CHECK(cudaMemsetAsync(s.counters, 0, 2 * sizeof(uint32_t), stream));
        const auto kernel = gauss_encode_kernel<L>;
        const uint32_t stage = stage_bytes_for<L>(g.chunk_elements);
        const size_t smem = size_t{stage} * kWarpsPerBlock;
        allow_dynamic_smem<L>(kernel);
        kernel<<<grid_blocks(kernel, g.chunks, smem), kBlockThreads, smem, stream>>>(
            in, g, s, out, out_size, make_header_prefix(codec, dtype, g), stage, gauss);
        COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
        return;
      }
    }
    if constexpr (K == Kind::Entropy) {
      const auto tables = entropy_table_kernel<L>;
      tables<<<grid_blocks(tables, g.chunks), kBlockThreads, 0, stream>>>(in, g, s);
    }
    const auto measure = measure_kernel<K, L>;
    measure<<<grid_blocks(measure, g.chunks), kBlockThreads, 0, stream>>>(in, g, s, gauss);
    COMPCOLL_CUDA_CHECK(cub::DeviceScan::InclusiveSum(s.scan_temp, s.scan_temp_bytes, s.chunk_bytes,
                                                      s.chunk_end, g.chunks, stream));
    // The offset table, the header and the size too (no finish kernel).
    const auto emit = emit_kernel<K, L>;
    const uint32_t stage = stage_bytes_for<L>(g.chunk_elements);
    const size_t smem = size_t{stage} * kWarpsPerBlock;
    allow_dynamic_smem<L>(emit);
    emit<<<grid_blocks(emit, g.chunks, smem), kBlockThreads, smem, stream>>>(
        in, g, s, out, make_header_prefix(codec, dtype, g), out_size, stage, gauss);
  } else {
    launch_finish(out, make_header_prefix(codec, dtype, g), g, nullptr, out_size, stream);
  }
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

inline void launch_identity_encode(DType dtype, const void* in, const Geometry& g, uint8_t* out,
                                   uint64_t* out_size, cudaStream_t stream) {
  const HeaderPrefix header = make_header_prefix(CodecId::Identity, dtype, g);
  const auto launch = [&](auto kernel, const auto* elements) {
    // A block a tile of a batch (identity_encode_kernel's kTile).
    using Bits = std::remove_cv_t<std::remove_reference_t<decltype(*elements)>>;
    const uint64_t tiles =
        g.elements * sizeof(Bits) / ItemBatch<Bits, uint4, expbits::StoreElement, kCopyThreads>::kBytes + 1;
    kernel<<<resident_grid(kernel, tiles, kCopyThreads), kCopyThreads, 0, stream>>>(elements, g, out, header,
                                                                                   out_size);
  };
  if (dtype_size(dtype) == 2)
    launch(identity_encode_kernel<uint16_t>, static_cast<const uint16_t*>(in));
  else
    launch(identity_encode_kernel<uint32_t>, static_cast<const uint32_t*>(in));
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

// Put: expbits::StoreElement (decode) or gpu::AddElement (decode and add to out).
template <Kind K, class L, class Put = expbits::StoreElement>
void launch_exponent_decode(const uint8_t* stream_dev, const DecodeGeometry& d,
                            typename L::Bits* out, int32_t* status, cudaStream_t stream) {
  if (d.g.chunks == 0) return;
  const auto kernel = decode_kernel<K, L, Put>;
  const uint32_t stage = stage_bytes_for<L>(d.g.chunk_elements);
  const size_t smem = size_t{stage + kDecodeWarpBytes<K, L> + kStageSlack} * kWarpsPerBlock;
  allow_dynamic_smem<L>(kernel, kDecodeWarpBytes<K, L> + kStageSlack);
  kernel<<<grid_blocks(kernel, d.g.chunks, smem), kBlockThreads, smem, stream>>>(
      stream_dev, d, out, status, stage, gauss_code_param<K>());
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

template <class Bits, class Put = expbits::StoreElement>
void launch_identity_decode(const uint8_t* stream_dev, const DecodeGeometry& d, Bits* out,
                            int32_t* status, cudaStream_t stream) {
  if (d.g.chunks == 0) return;
  const auto kernel = identity_decode_kernel<Bits, Put>;
  const uint32_t unit =
      identity_unit_chunks(d.g.chunk_elements, sizeof(Bits), ItemBatch<Bits, uint4, Put, kCopyThreads>::kBytes);
  const uint64_t units = (d.g.chunks + unit - 1) / unit;
  kernel<<<resident_grid(kernel, units, kCopyThreads), kCopyThreads, 0, stream>>>(stream_dev, d, out, status);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

// ---- batch launchers ----------------------------------------------------------------------
// A batch's shape, as its launchers size the grid: n streams (grid y), the most chunks and the
// largest chunk of any of them, and all their chunks.
struct BatchShape {
  uint32_t n = 0;
  uint32_t max_chunks = 0;
  uint32_t max_chunk_elements = 0;
  uint32_t total_chunks = 0;
};

// Blocks along x for n streams of which the largest wants `blocks` blocks: the grid at most a
// resident wave (at least a block a stream).
template <class Kernel>
inline uint32_t batch_grid_x(Kernel kernel, uint64_t blocks, uint32_t n, uint32_t threads, size_t dynamic_smem = 0) {
  const uint64_t wave = resident_grid(kernel, std::max<uint64_t>(blocks, 1) * n, threads, dynamic_smem);
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(blocks, wave / n)));
}

// scratch: scratch_layout(K, shape.total_chunks).total bytes (checked by the caller).
template <Kind K, class L>
void launch_exponent_encode_batch(const EncodeBatch& b, const BatchShape& shape, void* scratch, cudaStream_t stream) {
  EncodeScratch s{};
  const uint64_t blocks = (uint64_t{shape.max_chunks} + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (shape.total_chunks > 0) {
    s = bind_scratch(scratch_layout(K, shape.total_chunks), scratch);
    const GaussCodeParam<K>& gauss = gauss_code_param<K>();
    if constexpr (K == Kind::Entropy) {
      const auto tables = entropy_table_batch_kernel<L>;
      tables<<<dim3(batch_grid_x(tables, blocks, shape.n, kBlockThreads), shape.n), kBlockThreads, 0, stream>>>(b, s);
    }
    const auto measure = measure_batch_kernel<K, L>;
    measure<<<dim3(batch_grid_x(measure, blocks, shape.n, kBlockThreads), shape.n), kBlockThreads, 0, stream>>>(
        b, s, gauss);
    COMPCOLL_CUDA_CHECK(cub::DeviceScan::InclusiveSum(s.scan_temp, s.scan_temp_bytes, s.chunk_bytes, s.chunk_end,
                                                      shape.total_chunks, stream));
    const auto emit = emit_batch_kernel<K, L>;
    const uint32_t stage = stage_bytes_for<L>(shape.max_chunk_elements);
    const size_t smem = size_t{stage} * kWarpsPerBlock;
    allow_dynamic_smem<L>(emit);
    // Every stream's offset table, header and size too, a stream of no chunks among them.
    emit<<<dim3(batch_grid_x(emit, blocks, shape.n, kBlockThreads, smem), shape.n), kBlockThreads, smem, stream>>>(
        b, s, stage, gauss);
  } else {  // no stream has a chunk: their headers and sizes
    header_batch_kernel<<<shape.n, kWarp, 0, stream>>>(b);
  }
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

template <class Bits>
void launch_identity_encode_batch(const EncodeBatch& b, const BatchShape& shape, cudaStream_t stream) {
  const auto kernel = identity_encode_batch_kernel<Bits>;
  uint64_t tiles = 0;  // the most of any stream, as launch_identity_encode counts them
  for (uint32_t i = 0; i < shape.n; ++i)
    tiles = std::max<uint64_t>(
        tiles, b.items[i].g.elements * sizeof(Bits) / ItemBatch<Bits, uint4, expbits::StoreElement, kCopyThreads>::kBytes + 1);
  kernel<<<dim3(batch_grid_x(kernel, tiles, shape.n, kCopyThreads), shape.n), kCopyThreads, 0, stream>>>(b);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

template <Kind K, class L>
void launch_exponent_decode_batch(const DecodeBatch& b, const BatchShape& shape, cudaStream_t stream) {
  if (shape.max_chunks == 0) return;
  const auto kernel = decode_batch_kernel<K, L>;
  const uint32_t stage = stage_bytes_for<L>(shape.max_chunk_elements);
  const size_t smem = size_t{stage + kDecodeWarpBytes<K, L> + kStageSlack} * kWarpsPerBlock;
  allow_dynamic_smem<L>(kernel, kDecodeWarpBytes<K, L> + kStageSlack);
  const uint64_t blocks = (uint64_t{shape.max_chunks} + kWarpsPerBlock - 1) / kWarpsPerBlock;
  kernel<<<dim3(batch_grid_x(kernel, blocks, shape.n, kBlockThreads, smem), shape.n), kBlockThreads, smem, stream>>>(
      b, stage, gauss_code_param<K>());
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

template <class Bits>
void launch_identity_decode_batch(const DecodeBatch& b, const BatchShape& shape, cudaStream_t stream) {
  if (shape.max_chunks == 0) return;
  const auto kernel = identity_decode_batch_kernel<Bits>;
  uint64_t units = 0;  // the most of any stream, as launch_identity_decode counts them
  for (uint32_t i = 0; i < shape.n; ++i) {
    const Geometry& g = b.items[i].d.g;
    if (g.chunks == 0) continue;
    const uint32_t unit = identity_unit_chunks(g.chunk_elements, sizeof(Bits),
                                               ItemBatch<Bits, uint4, expbits::StoreElement, kCopyThreads>::kBytes);
    units = std::max<uint64_t>(units, (uint64_t{g.chunks} + unit - 1) / unit);
  }
  kernel<<<dim3(batch_grid_x(kernel, units, shape.n, kCopyThreads), shape.n), kCopyThreads, 0, stream>>>(b);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

}  // namespace compcoll::gpu
