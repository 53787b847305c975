// shared/codec/cuda/fp8_kernels.cuh — the kernels of the lossy fp8-hadamard codec and their
// templated launchers. All arithmetic comes from codec/fp8_bits.h (quantize_group,
// dequantize_group, ChunkLayout, the element types), the very functions the host reference
// runs: this file only places chunks and groups, and must never re-implement that logic, or
// host and GPU would drift (fp8_bits.h rounds every device operation through _rn intrinsics,
// so nvcc cannot fuse them).
// One warp codes one chunk at a time (chunk placement, the finite-input check, stored chunks);
// within a quantized chunk each lane codes whole groups, group lane, lane + 32, ..., in a
// per-thread buffer of up to 512 floats (local memory). A warp-cooperative group transform
// would be faster; it would have to keep the same operation order.
// Encode: measure (mode and size per chunk) -> CUB inclusive scan (the offset table) -> emit
// -> finish (offset table, header, size), the exponent codecs' scratch layout and finish
// kernel reused. Decode: one kernel, validating every chunk on its own.
// Include from .cu files only.
#pragma once

#include "codec/cuda/exponent_kernels.cuh"
#include "codec/fp8_bits.h"

namespace compcoll::gpu {

using Fp8Layout = fp8bits::ChunkLayout;

// scratch.gauss_ref holds each chunk's mode in the fp8-hadamard encoder.
template <class E>
__global__ void __launch_bounds__(kBlockThreads)
    fp8_measure_kernel(const typename E::Bits* in, Geometry g, EncodeScratch s, uint32_t group) {
  const uint32_t lane = lane_id();
  for (uint64_t c = first_chunk(); c < g.chunks; c += chunk_stride()) {
    const uint32_t n = g.chunk_size(c);
    const typename E::Bits* x = in + c * g.chunk_elements;
    bool finite = true;
    for (uint32_t k = lane; k < n; k += kWarp) finite &= fp8bits::is_finite_bits(E::fp32_bits(x[k]));
    const bool all_finite = __all_sync(kFullMask, finite);
    const uint32_t stored = Fp8Layout::stored_bytes(n, sizeof(typename E::Bits));
    const uint32_t quantized = Fp8Layout::quantized_bytes(n, group);
    const bool store = stored <= quantized || !all_finite;
    if (lane == 0) {
      s.chunk_bytes[c] = store ? stored : quantized;
      s.gauss_ref[c] = store ? format::kFp8ModeStored : format::kFp8ModeQuantized;
    }
  }
}

template <class E>
__global__ void __launch_bounds__(kBlockThreads)
    fp8_emit_kernel(const typename E::Bits* in, Geometry g, EncodeScratch s, uint8_t* payload,
                    uint32_t group, uint32_t log2_group, uint32_t fmt) {
  using Bits = typename E::Bits;
  const uint32_t lane = lane_id();
  float v[format::kFp8MaxGroup];
  for (uint64_t c = first_chunk(); c < g.chunks; c += chunk_stride()) {
    const uint32_t n = g.chunk_size(c);
    const Bits* x = in + c * g.chunk_elements;
    uint8_t* out = payload + (c == 0 ? 0 : s.chunk_end[c - 1]);  // 4-byte aligned
    const uint32_t mode = s.gauss_ref[c];
    if (lane == 0) {
      out[0] = static_cast<uint8_t>(mode);
      out[1] = static_cast<uint8_t>(log2_group);
      out[2] = static_cast<uint8_t>(fmt);
      out[3] = 0;
    }
    if (mode == format::kFp8ModeStored) {
      auto* words = reinterpret_cast<uint32_t*>(out + format::kChunkHeaderBytes);
      const uint32_t nwords = (n * static_cast<uint32_t>(sizeof(Bits)) + 3) / 4;
      for (uint32_t w = lane; w < nwords; w += kWarp) words[w] = element_word<Bits>(x, n, w);
      continue;
    }
    uint8_t* scales = out + Fp8Layout::scales_at();
    uint8_t* codes = out + Fp8Layout::codes_at(n, group);
    const uint32_t groups = Fp8Layout::groups(n, group);
    for (uint32_t i = lane; i < groups; i += kWarp) {
      const uint32_t first = i * group;
      const uint32_t m = n - first < group ? n - first : group;
      const uint32_t p = Fp8Layout::group_size(n, group, i);
      for (uint32_t k = 0; k < m; ++k) v[k] = E::to_float(x[first + k]);
      for (uint32_t k = m; k < p; ++k) v[k] = 0.0f;
      const fp8bits::GroupScales sc = fp8bits::quantize_group(v, p, fmt, codes + first);
      format::store_u32(scales + format::kFp8ScaleBytes * i, float_bits(sc.s1));
      format::store_u32(scales + format::kFp8ScaleBytes * i + 4, float_bits(sc.s2));
    }
    const uint32_t code_bytes = Fp8Layout::code_bytes(n, group);
    const uint32_t padded = format::align_up(code_bytes, format::kChunkAlign);
    for (uint32_t b = code_bytes + lane; b < padded; b += kWarp) codes[b] = 0;
  }
}

__device__ inline uint32_t warp_min(uint32_t v) {
  for (uint32_t o = kWarp / 2; o > 0; o /= 2) {
    const uint32_t t = __shfl_xor_sync(kFullMask, v, o);
    v = t < v ? t : v;
  }
  return v;
}

// Decodes one fp8-hadamard chunk of `bytes` bytes at `in` into out[0, n), one warp, with the
// host decoder's checks in the host decoder's order. Every return is warp-uniform.
template <class E>
__device__ inline int32_t decode_fp8_chunk(const uint8_t* in, uint64_t bytes, uint32_t n,
                                           typename E::Bits* out, uint32_t lane, float* v) {
  using Bits = typename E::Bits;
  if (bytes < format::kChunkHeaderBytes) return status_of(CudaChunkStatus::SizeMismatch);
  const uint32_t mode = in[0], log2g = in[1], fmt = in[2];
  if (mode != format::kFp8ModeQuantized && mode != format::kFp8ModeStored)
    return status_of(CudaChunkStatus::BadMode);
  if (log2g < format::kFp8MinLog2Group || log2g > format::kFp8MaxLog2Group ||
      (fmt != format::kFp8E4M3 && fmt != format::kFp8E5M2) || in[3] != 0)
    return status_of(CudaChunkStatus::Fp8BadHeader);
  const uint32_t group = 1u << log2g;
  const uint64_t expect = mode == format::kFp8ModeStored
                              ? Fp8Layout::stored_bytes(n, sizeof(Bits))
                              : Fp8Layout::quantized_bytes(n, group);
  if (bytes != expect) return status_of(CudaChunkStatus::SizeMismatch);
  if (mode == format::kFp8ModeStored) {
    warp_copy_elements<Bits>(in + format::kChunkHeaderBytes, n, out, lane);
    return 0;
  }
  const uint8_t* scales = in + Fp8Layout::scales_at();
  const uint8_t* codes = in + Fp8Layout::codes_at(n, group);
  const uint32_t groups = Fp8Layout::groups(n, group);
  uint32_t first_bad = ~0u;
  for (uint32_t i = lane; i < groups; i += kWarp) {
    const uint32_t b1 = format::load_u32(scales + format::kFp8ScaleBytes * i);
    const uint32_t b2 = format::load_u32(scales + format::kFp8ScaleBytes * i + 4);
    if (!fp8bits::valid_scale_bits(b1) || !fp8bits::valid_scale_bits(b2)) {
      if (first_bad == ~0u) first_bad = i;
      continue;
    }
    const uint32_t first = i * group;
    const uint32_t m = n - first < group ? n - first : group;
    const uint32_t p = Fp8Layout::group_size(n, group, i);
    fp8bits::dequantize_group(codes + first, p, fmt, {float_from_bits(b1), float_from_bits(b2)}, v);
    for (uint32_t k = 0; k < m; ++k) out[first + k] = E::from_float(v[k]);
  }
  // The lowest bad group, as the host (which walks groups in order) reports it.
  first_bad = warp_min(first_bad);
  if (first_bad == ~0u) return 0;
  return static_cast<int32_t>(static_cast<uint32_t>(CudaChunkStatus::Fp8BadScale) |
                              ((first_bad & 0x7FFFFFu) << 8));
}

template <class E>
__global__ void __launch_bounds__(kBlockThreads)
    fp8_decode_kernel(const uint8_t* stream, DecodeGeometry d, typename E::Bits* out,
                      int32_t* status) {
  const uint32_t lane = lane_id();
  float v[format::kFp8MaxGroup];
  for (uint64_t c = first_chunk(); c < d.g.chunks; c += chunk_stride()) {
    uint64_t begin = 0, end = 0;
    int32_t st = chunk_range(stream, d, c, begin, end);
    if (st == 0)
      st = decode_fp8_chunk<E>(stream + d.payload_at + begin, end - begin, d.g.chunk_size(c),
                               out + c * d.g.chunk_elements, lane, v);
    if (lane == 0) status[c] = st;
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
    measure<<<grid_blocks(measure, g.chunks), kBlockThreads, 0, stream>>>(in, g, s, group);
    COMPCOLL_CUDA_CHECK(cub::DeviceScan::InclusiveSum(s.scan_temp, s.scan_temp_bytes, s.chunk_bytes,
                                                      s.chunk_end, g.chunks, stream));
    uint8_t* payload = out + format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} * g.chunks;
    uint32_t log2g = 0;
    while ((1u << log2g) < group) ++log2g;
    const auto emit = fp8_emit_kernel<E>;
    emit<<<grid_blocks(emit, g.chunks), kBlockThreads, 0, stream>>>(in, g, s, payload, group,
                                                                    log2g, fmt);
  }
  launch_finish(out, make_header_prefix(CodecId::Fp8Hadamard, dtype, g), g, s.chunk_end, 0,
                out_size, stream);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

template <class E>
void launch_fp8_decode(const uint8_t* stream_dev, const DecodeGeometry& d, typename E::Bits* out,
                       int32_t* status, cudaStream_t stream) {
  if (d.g.chunks == 0) return;
  const auto kernel = fp8_decode_kernel<E>;
  kernel<<<grid_blocks(kernel, d.g.chunks), kBlockThreads, 0, stream>>>(stream_dev, d, out, status);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

}  // namespace compcoll::gpu
