// shared/codec/cuda/reduce_cuda.cu — see reduce_cuda.h. One grid-stride kernel, 16 bytes a
// thread and step; the element arithmetic is float_convert.h's, shared with the host reduce_add().
#include "codec/cuda/reduce_cuda.h"

#include <algorithm>

#include "codec/cuda/check.h"
#include "codec/cuda/element_add.cuh"
#include "io/float_convert.h"

namespace compcoll {

namespace {

constexpr int kThreads = 256;

// dst[i] = add(dst[i], src[i]) for i < n, grid-stride: 16 bytes a load and a store where both
// pointers are 16-byte aligned (the elements past the last whole vector one at a time).
template <class T, class Add>
__global__ void reduce_kernel(T* dst, const T* src, uint64_t n, Add add) {  // src may be dst
  constexpr uint32_t kPerVector = 16 / sizeof(T);
  const uint64_t first = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  uint64_t from = 0;
  if ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) % 16 == 0) {
    const uint64_t vectors = n / kPerVector;
    auto* d = reinterpret_cast<uint4*>(dst);
    const auto* s = reinterpret_cast<const uint4*>(src);
    for (uint64_t i = first; i < vectors; i += stride) {
      uint4 a = d[i];
      const uint4 b = s[i];
      T* ta = reinterpret_cast<T*>(&a);
      const T* tb = reinterpret_cast<const T*>(&b);
#pragma unroll
      for (uint32_t k = 0; k < kPerVector; ++k) ta[k] = add(ta[k], tb[k]);
      d[i] = a;
    }
    from = vectors * kPerVector;
  }
  for (uint64_t i = from + first; i < n; i += stride) dst[i] = add(dst[i], src[i]);
}

}  // namespace

void cuda_reduce_add(DType dtype, void* dst_dev, const void* src_dev, uint64_t elements,
                     cudaStream_t stream) {
  if (elements == 0) return;
  int device = 0, sms = 0;
  COMPCOLL_CUDA_CHECK(cudaGetDevice(&device));
  COMPCOLL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Enough blocks to fill every SM several times over; the grid-stride loop covers the rest.
  const uint64_t vectors = elements * dtype_size(dtype) / 16 + 1;
  const uint64_t wanted = (vectors + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(std::min<uint64_t>(wanted, uint64_t{32} * sms));
  switch (dtype) {
    case DType::BF16:
      reduce_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint16_t*>(dst_dev),
                                                    static_cast<const uint16_t*>(src_dev), elements, gpu::AddBf16{});
      break;
    case DType::FP16:
      reduce_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint16_t*>(dst_dev),
                                                    static_cast<const uint16_t*>(src_dev), elements, gpu::AddFp16{});
      break;
    case DType::FP32:
      reduce_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(dst_dev),
                                                    static_cast<const float*>(src_dev), elements, gpu::AddFp32{});
      break;
  }
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

}  // namespace compcoll
