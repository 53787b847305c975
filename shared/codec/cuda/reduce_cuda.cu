// shared/codec/cuda/reduce_cuda.cu — see reduce_cuda.h. One grid-stride kernel per dtype; the
// element arithmetic is float_convert.h's, shared with the host reduce_add().
#include "codec/cuda/reduce_cuda.h"

#include <algorithm>

#include "codec/cuda/check.h"
#include "io/float_convert.h"

namespace compcoll {

namespace {

constexpr int kThreads = 256;

__global__ void reduce_bf16(uint16_t* dst, const uint16_t* src, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n; i += uint64_t{gridDim.x} * blockDim.x)
    dst[i] = float_to_bf16_rne(bf16_to_float(dst[i]) + bf16_to_float(src[i]));
}

__global__ void reduce_fp16(uint16_t* dst, const uint16_t* src, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n; i += uint64_t{gridDim.x} * blockDim.x)
    dst[i] = float_to_fp16_rne(fp16_to_float(dst[i]) + fp16_to_float(src[i]));
}

__global__ void reduce_fp32(float* dst, const float* src, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n; i += uint64_t{gridDim.x} * blockDim.x)
    dst[i] = __fadd_rn(dst[i], src[i]);  // no contraction, as on the host
}

}  // namespace

void cuda_reduce_add(DType dtype, void* dst_dev, const void* src_dev, uint64_t elements,
                     cudaStream_t stream) {
  if (elements == 0) return;
  int device = 0, sms = 0;
  COMPCOLL_CUDA_CHECK(cudaGetDevice(&device));
  COMPCOLL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Enough blocks to fill every SM several times over; the grid-stride loop covers the rest.
  const uint64_t wanted = (elements + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(std::min<uint64_t>(wanted, uint64_t{32} * sms));
  switch (dtype) {
    case DType::BF16:
      reduce_bf16<<<blocks, kThreads, 0, stream>>>(static_cast<uint16_t*>(dst_dev),
                                                  static_cast<const uint16_t*>(src_dev), elements);
      break;
    case DType::FP16:
      reduce_fp16<<<blocks, kThreads, 0, stream>>>(static_cast<uint16_t*>(dst_dev),
                                                  static_cast<const uint16_t*>(src_dev), elements);
      break;
    case DType::FP32:
      reduce_fp32<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(dst_dev),
                                                  static_cast<const float*>(src_dev), elements);
      break;
  }
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

}  // namespace compcoll
