// shared/codec/cuda/fp8_kernels.cuh — the kernels of the lossy fp8-hadamard codec and their
// templated launchers. All arithmetic comes from codec/fp8_bits.h (the steps of
// quantize_group and dequantize_group, the transform's butterflies and their placement over a
// warp's lanes, ChunkLayout, the element types), the very functions the host reference runs:
// this file only places chunks, groups and lanes, and must never re-implement that logic, or
// host and GPU would drift (fp8_bits.h rounds every device operation through _rn intrinsics,
// so nvcc cannot fuse them).
// A block of kFp8Warps warps codes one chunk at a time (its header, the finite-input check,
// a stored chunk's copy); its warps take the chunk's groups in turn, and a warp codes a whole
// group with its 32 lanes: the group's values in registers (fp8bits' lane layout), the
// transform's stages across lanes by shuffles and inside lanes in registers, the two maxima
// by shuffles, and the RMS terms summed in index order from the warp's row of shared memory,
// as the host sums them. Values are loaded and codes stored 32 consecutive ones at a time.
// Encode: measure (mode and size per chunk) -> CUB inclusive scan (the offset table) -> emit
// -> finish (offset table, header, size), the exponent codecs' scratch layout and finish
// kernel reused. Decode: one kernel, validating every chunk on its own.
// Include from .cu files only.
#pragma once

#include "codec/cuda/exponent_kernels.cuh"
#include "codec/fp8_bits.h"

namespace compcoll::gpu {

using Fp8Layout = fp8bits::ChunkLayout;

constexpr uint32_t kFp8Warps = 8;  // the warps of a block, which codes one chunk at a time
constexpr uint32_t kFp8BlockThreads = kFp8Warps * kWarp;
static_assert(fp8bits::kGroupLanes == kWarp, "a group's lanes are the threads of one warp");

__device__ inline float warp_max(float v) {  // of non-negative, non-NaN values: exact
  for (uint32_t o = kWarp / 2; o > 0; o /= 2) {
    const float t = __shfl_xor_sync(kFullMask, v, o);
    v = t > v ? t : v;
  }
  return v;
}

// The transform of a group of p values held in fp8bits' lane layout (R registers a lane).
template <uint32_t R>
__device__ inline void warp_fwht(float (&v)[R], uint32_t p, uint32_t lane) {
  const uint32_t end = fp8bits::cross_lane_stages_end(p);
  for (uint32_t h = 1; h < end; h *= 2)
#pragma unroll
    for (uint32_t r = 0; r < R; ++r)
      v[r] = fp8bits::cross_lane_butterfly(v[r], __shfl_xor_sync(kFullMask, v[r], h), lane, h);
  fp8bits::in_lane_stages(v);
}

// The sum of terms[0, p) in index order, as quantize_group adds them (every lane alike: the
// loads are broadcasts, and only the additions wait on each other).
__device__ inline float sum_in_order(const float* terms, uint32_t p) {
  float sum = 0.0f;
  if (p % 4 == 0) {
    const float4* q = reinterpret_cast<const float4*>(terms);
#pragma unroll 8
    for (uint32_t k = 0; k < p / 4; ++k) {
      const float4 t = q[k];
      sum = fp8bits::add_rn(fp8bits::add_rn(fp8bits::add_rn(fp8bits::add_rn(sum, t.x), t.y), t.z), t.w);
    }
  } else {
    for (uint32_t k = 0; k < p; ++k) sum = fp8bits::add_rn(sum, terms[k]);
  }
  return sum;
}

// quantize_group over one warp: the group's m values at x (zero-padded to its transform size
// p), its codes at `codes`, its two scales at `scales`; `terms` is the warp's row of shared
// memory (at least p floats, 16-byte aligned).
template <class E, uint32_t R>
__device__ inline void quantize_warp_group(const typename E::Bits* x, uint32_t m, uint32_t p,
                                           uint32_t fmt, uint8_t* codes, uint8_t* scales,
                                           float* terms, uint32_t lane) {
  float v[R];
#pragma unroll
  for (uint32_t r = 0; r < R; ++r) {
    const uint32_t k = fp8bits::lane_element(lane, r);
    v[r] = k < m ? E::to_float(x[k]) : 0.0f;
  }
  float amax = 0.0f;
#pragma unroll
  for (uint32_t r = 0; r < R; ++r) {
    const float a = fp8bits::abs_f(v[r]);
    if (a > amax) amax = a;
  }
  amax = warp_max(amax);
  if (amax == 0.0f) {
#pragma unroll
    for (uint32_t r = 0; r < R; ++r) {
      const uint32_t k = fp8bits::lane_element(lane, r);
      if (k < p) codes[k] = 0;
    }
    if (lane == 0) {
      format::store_u32(scales, 0);
      format::store_u32(scales + 4, 0);
    }
    return;
  }
#pragma unroll
  for (uint32_t r = 0; r < R; ++r) {
    const uint32_t k = fp8bits::lane_element(lane, r);
    if (k < p) terms[k] = fp8bits::rms_term(v[r], amax);
  }
  __syncwarp();
  const float sum = sum_in_order(terms, p);
  __syncwarp();  // the next group rewrites the row
  const float s1 = fp8bits::rms_scale(amax, sum, p);
#pragma unroll
  for (uint32_t r = 0; r < R; ++r) v[r] = fp8bits::div_rn(v[r], s1);
  warp_fwht(v, p, lane);
  float ymax = 0.0f;
#pragma unroll
  for (uint32_t r = 0; r < R; ++r) {
    const float a = fp8bits::abs_f(v[r]);
    if (fp8bits::lane_element(lane, r) < p && a > ymax) ymax = a;
  }
  ymax = warp_max(ymax);
  const float s2 = fp8bits::quantization_scale(ymax, fmt);
#pragma unroll
  for (uint32_t r = 0; r < R; ++r) {
    const uint32_t k = fp8bits::lane_element(lane, r);
    if (k < p) codes[k] = fp8bits::quantize_value(v[r], s2, fmt);
  }
  if (lane == 0) {
    format::store_u32(scales, float_bits(s1));
    format::store_u32(scales + 4, float_bits(s2));
  }
}

// dequantize_group over one warp: the group's p codes, its first m values stored at out.
template <class E, uint32_t R>
__device__ inline void dequantize_warp_group(const uint8_t* codes, uint32_t m, uint32_t p,
                                             uint32_t fmt, fp8bits::GroupScales s,
                                             typename E::Bits* out, uint32_t lane) {
  float v[R];
#pragma unroll
  for (uint32_t r = 0; r < R; ++r) {
    const uint32_t k = fp8bits::lane_element(lane, r);
    v[r] = k < p ? fp8bits::dequantize_value(codes[k], s.s2, fmt) : 0.0f;
  }
  warp_fwht(v, p, lane);
  const float inv_p = fp8bits::inverse_size(p);
#pragma unroll
  for (uint32_t r = 0; r < R; ++r) {
    const uint32_t k = fp8bits::lane_element(lane, r);
    if (k < m) out[k] = E::from_float(fp8bits::restore_value(v[r], inv_p, s.s1));
  }
}

// Calls f(std::integral_constant<uint32_t, R>) with R, the registers a lane takes for a group
// of transform size p in [1, kFp8MaxGroup]: quantize_warp_group's and dequantize_warp_group's R.
template <class F>
__device__ inline void with_lane_registers(uint32_t p, F&& f) {
  static_assert(format::kFp8MaxGroup / kWarp == 16, "registers a lane: 1 to 16");
  switch (fp8bits::lane_registers(p)) {
    case 1: return f(std::integral_constant<uint32_t, 1>{});
    case 2: return f(std::integral_constant<uint32_t, 2>{});
    case 4: return f(std::integral_constant<uint32_t, 4>{});
    case 8: return f(std::integral_constant<uint32_t, 8>{});
    default: return f(std::integral_constant<uint32_t, 16>{});
  }
}

// Group i of a chunk of n elements in groups of g: its first element, its elements m and its
// transform size p.
struct GroupSpan {
  uint32_t first, m, p;
};
__device__ inline GroupSpan group_span(uint32_t n, uint32_t g, uint32_t i) {
  const uint32_t first = i * g;
  return {first, n - first < g ? n - first : g, Fp8Layout::group_size(n, g, i)};
}

// scratch.gauss_ref holds each chunk's mode in the fp8-hadamard encoder.
template <class E>
__global__ void __launch_bounds__(kFp8BlockThreads)
    fp8_measure_kernel(const typename E::Bits* in, Geometry g, EncodeScratch s, uint32_t group) {
  for (uint64_t c = blockIdx.x; c < g.chunks; c += gridDim.x) {  // block-uniform
    const uint32_t n = g.chunk_size(c);
    const typename E::Bits* x = in + c * g.chunk_elements;
    bool finite = true;  // past the end, zeros: finite
    warp_visit_elements<kFp8BlockThreads>(x, n, threadIdx.x, [&](typename E::Bits v, bool) {
      finite &= fp8bits::is_finite_bits(E::fp32_bits(v));
    });
    const bool all_finite = __syncthreads_and(finite) != 0;
    if (threadIdx.x == 0) {
      const uint32_t stored = Fp8Layout::stored_bytes(n, sizeof(typename E::Bits));
      const uint32_t quantized = Fp8Layout::quantized_bytes(n, group);
      const bool store = stored <= quantized || !all_finite;
      s.chunk_bytes[c] = store ? stored : quantized;
      s.gauss_ref[c] = store ? format::kFp8ModeStored : format::kFp8ModeQuantized;
    }
  }
}

template <class E>
__global__ void __launch_bounds__(kFp8BlockThreads)
    fp8_emit_kernel(const typename E::Bits* in, Geometry g, EncodeScratch s, uint8_t* payload,
                    uint32_t group, uint32_t log2_group, uint32_t fmt) {
  using Bits = typename E::Bits;
  __shared__ __align__(16) float s_terms[kFp8Warps][format::kFp8MaxGroup];
  const uint32_t lane = lane_id(), warp = warp_in_block();
  for (uint64_t c = blockIdx.x; c < g.chunks; c += gridDim.x) {
    const uint32_t n = g.chunk_size(c);
    const Bits* x = in + c * g.chunk_elements;
    uint8_t* out = payload + (c == 0 ? 0 : s.chunk_end[c - 1]);  // 4-byte aligned
    const uint32_t mode = s.gauss_ref[c];
    if (threadIdx.x == 0) {
      out[0] = static_cast<uint8_t>(mode);
      out[1] = static_cast<uint8_t>(log2_group);
      out[2] = static_cast<uint8_t>(fmt);
      out[3] = 0;
    }
    if (mode == format::kFp8ModeStored) {
      auto* words = reinterpret_cast<uint32_t*>(out + format::kChunkHeaderBytes);
      const uint32_t nwords = (n * static_cast<uint32_t>(sizeof(Bits)) + 3) / 4;
      for (uint32_t w = threadIdx.x; w < nwords; w += kFp8BlockThreads) words[w] = element_word<Bits>(x, n, w);
      continue;
    }
    uint8_t* scales = out + Fp8Layout::scales_at();
    uint8_t* codes = out + Fp8Layout::codes_at(n, group);
    const uint32_t groups = Fp8Layout::groups(n, group);
    for (uint32_t i = warp; i < groups; i += kFp8Warps) {
      const GroupSpan gs = group_span(n, group, i);
      with_lane_registers(gs.p, [&](auto r) {
        quantize_warp_group<E, decltype(r)::value>(x + gs.first, gs.m, gs.p, fmt, codes + gs.first,
                                                   scales + format::kFp8ScaleBytes * i, s_terms[warp], lane);
      });
    }
    const uint32_t code_bytes = Fp8Layout::code_bytes(n, group);
    const uint32_t padded = format::align_up(code_bytes, format::kChunkAlign);
    for (uint32_t b = code_bytes + threadIdx.x; b < padded; b += kFp8BlockThreads) codes[b] = 0;
  }
}

// A chunk's header as decode_fp8 reads it.
struct Fp8ChunkHeader {
  bool stored;
  uint32_t group, fmt;
};

// Checks one fp8-hadamard chunk of `bytes` bytes at `in` (n elements) as the host decoder does,
// in its order, and reads its header; any thread alike.
template <class Bits>
__device__ inline int32_t check_fp8_chunk(const uint8_t* in, uint64_t bytes, uint32_t n,
                                          Fp8ChunkHeader& h) {
  if (bytes < format::kChunkHeaderBytes) return status_of(CudaChunkStatus::SizeMismatch);
  const uint32_t mode = in[0], log2g = in[1], fmt = in[2];
  if (mode != format::kFp8ModeQuantized && mode != format::kFp8ModeStored)
    return status_of(CudaChunkStatus::BadMode);
  if (log2g < format::kFp8MinLog2Group || log2g > format::kFp8MaxLog2Group ||
      (fmt != format::kFp8E4M3 && fmt != format::kFp8E5M2) || in[3] != 0)
    return status_of(CudaChunkStatus::Fp8BadHeader);
  h = {mode == format::kFp8ModeStored, 1u << log2g, fmt};
  const uint64_t expect = h.stored ? Fp8Layout::stored_bytes(n, sizeof(Bits)) : Fp8Layout::quantized_bytes(n, h.group);
  if (bytes != expect) return status_of(CudaChunkStatus::SizeMismatch);
  return 0;
}

template <class E>
__global__ void __launch_bounds__(kFp8BlockThreads, 4)
    fp8_decode_kernel(const uint8_t* stream, const __grid_constant__ DecodeGeometry d, typename E::Bits* out,
                      int32_t* status) {
  using Bits = typename E::Bits;
  __shared__ uint32_t s_first_bad;  // the chunk's lowest group with a bad scale
  const uint32_t lane = lane_id(), warp = warp_in_block();
  for (uint64_t c = blockIdx.x; c < d.g.chunks; c += gridDim.x) {  // block-uniform
    if (threadIdx.x == 0) s_first_bad = ~0u;
    __syncthreads();
    const uint32_t n = d.g.chunk_size(c);
    Bits* o = out + c * d.g.chunk_elements;
    uint64_t begin = 0, end = 0;
    int32_t st = chunk_range(stream, d, c, begin, end);  // each warp alike
    const uint8_t* in = stream + d.payload_at + begin;
    Fp8ChunkHeader h{};
    if (st == 0) st = check_fp8_chunk<Bits>(in, end - begin, n, h);
    if (st == 0 && h.stored) {
      // Thread by thread (a batched copy's registers would halve the blocks a multiprocessor
      // holds for the groups' sake).
      const uint8_t* body = in + format::kChunkHeaderBytes;
      for (uint32_t k = threadIdx.x; k < n; k += kFp8BlockThreads) o[k] = load_bits<Bits>(body + k * sizeof(Bits));
    } else if (st == 0) {
      const uint8_t* scales = in + Fp8Layout::scales_at();
      const uint8_t* codes = in + Fp8Layout::codes_at(n, h.group);
      const uint32_t groups = Fp8Layout::groups(n, h.group);
      for (uint32_t i = warp; i < groups; i += kFp8Warps) {
        const GroupSpan gs = group_span(n, h.group, i);
        const uint32_t b1 = format::load_u32(scales + format::kFp8ScaleBytes * i);
        const uint32_t b2 = format::load_u32(scales + format::kFp8ScaleBytes * i + 4);
        if (!fp8bits::valid_scale_bits(b1) || !fp8bits::valid_scale_bits(b2)) {
          if (lane == 0) atomicMin(&s_first_bad, i);
          continue;
        }
        const fp8bits::GroupScales sc{float_from_bits(b1), float_from_bits(b2)};
        with_lane_registers(gs.p, [&](auto r) {
          dequantize_warp_group<E, decltype(r)::value>(codes + gs.first, gs.m, gs.p, h.fmt, sc, o + gs.first, lane);
        });
      }
    }
    __syncthreads();
    // The lowest bad group, as the host (which walks groups in order) reports it.
    if (threadIdx.x == 0)
      status[c] = st != 0 ? st
                  : s_first_bad == ~0u
                      ? 0
                      : static_cast<int32_t>(static_cast<uint32_t>(CudaChunkStatus::Fp8BadScale) |
                                             ((s_first_bad & 0x7FFFFFu) << 8));
  }
}

// out: 4-byte aligned; scratch: scratch_layout(Kind::Gauss, g.chunks).total bytes (checked by
// the caller); group a power of two in [32, 512], fmt format::kFp8E4M3 or kFp8E5M2 (checked).
template <class E>
void launch_fp8_encode(DType dtype, const typename E::Bits* in, const Geometry& g, uint8_t* out,
                       uint64_t* out_size, void* scratch, uint32_t group, uint32_t fmt,
                       cudaStream_t stream) {
  EncodeScratch s{};
  if (g.chunks > 0) {
    s = bind_scratch(scratch_layout(Kind::Gauss, g.chunks), scratch);
    const auto measure = fp8_measure_kernel<E>;
    measure<<<resident_grid(measure, g.chunks, kFp8BlockThreads), kFp8BlockThreads, 0, stream>>>(in, g, s, group);
    COMPCOLL_CUDA_CHECK(cub::DeviceScan::InclusiveSum(s.scan_temp, s.scan_temp_bytes, s.chunk_bytes,
                                                      s.chunk_end, g.chunks, stream));
    uint8_t* payload = out + format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} * g.chunks;
    uint32_t log2g = 0;
    while ((1u << log2g) < group) ++log2g;
    const auto emit = fp8_emit_kernel<E>;
    emit<<<resident_grid(emit, g.chunks, kFp8BlockThreads), kFp8BlockThreads, 0, stream>>>(
        in, g, s, payload, group, log2g, fmt);
  }
  launch_finish(out, make_header_prefix(CodecId::Fp8Hadamard, dtype, g), g, s.chunk_end, out_size, stream);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

template <class E>
void launch_fp8_decode(const uint8_t* stream_dev, const DecodeGeometry& d, typename E::Bits* out,
                       int32_t* status, cudaStream_t stream) {
  if (d.g.chunks == 0) return;
  const auto kernel = fp8_decode_kernel<E>;
  kernel<<<resident_grid(kernel, d.g.chunks, kFp8BlockThreads), kFp8BlockThreads, 0, stream>>>(
      stream_dev, d, out, status);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

}  // namespace compcoll::gpu
