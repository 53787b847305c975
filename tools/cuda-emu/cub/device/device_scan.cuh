// tools/cuda-emu/cub/device/device_scan.cuh — CUB's device-wide inclusive sum for the emulator:
// a sequential scan run in stream order (so it is recorded while a stream is captured). The
// temporary storage is asked for and passed as with CUB, and its size checked.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

namespace emu {
void run_in_stream(cudaStream_t stream, std::function<void()> work);
}

namespace cub {
struct DeviceScan {
  template <class In, class Out, class N>
  static cudaError_t InclusiveSum(void* temp, size_t& temp_bytes, In in, Out out, N n, cudaStream_t stream = 0) {
    constexpr size_t kTemp = 64;
    if (temp == nullptr) {
      temp_bytes = kTemp;
      return cudaSuccess;
    }
    if (temp_bytes < kTemp) return cudaErrorInvalidValue;
    emu::run_in_stream(stream, [in, out, n] {
      if (n <= 0) return;
      auto acc = in[0];
      out[0] = acc;
      for (N i = 1; i < n; ++i) {
        acc = acc + in[i];
        out[i] = acc;
      }
    });
    return cudaSuccess;
  }
};
}  // namespace cub
