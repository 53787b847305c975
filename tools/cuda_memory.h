// tools/cuda_memory.h — owners of the bench's CUDA allocations: device memory (cudaMalloc) and
// pinned host memory (cudaMallocHost), freed when the owner goes. Failures throw as
// COMPCOLL_CUDA_CHECK does. Host code with the CUDA runtime API; built only with CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "codec/cuda/check.h"

namespace compcoll::bench {

template <bool kPinnedHost>
class CudaMemory {
 public:
  CudaMemory() = default;
  ~CudaMemory() { reset(); }
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;
  void allocate(size_t bytes) {
    reset();
    if (bytes == 0) return;
    if constexpr (kPinnedHost)
      COMPCOLL_CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
    else
      COMPCOLL_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
    bytes_ = bytes;
  }
  void reset() {
    if (ptr_) {
      if constexpr (kPinnedHost)
        cudaFreeHost(ptr_);
      else
        cudaFree(ptr_);
    }
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};
using DeviceMemory = CudaMemory<false>;
using PinnedMemory = CudaMemory<true>;

}  // namespace compcoll::bench
