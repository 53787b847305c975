// shared/codec/cuda/check.h — the one checking macro for CUDA runtime calls, and the debug
// switch that synchronises after each group of launches. Library code reports: a failure
// throws std::runtime_error naming file:line and the failing call; it never aborts.
// Host-only header (no CUDA syntax); usable from .cpp and .cu files alike.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace compcoll::gpu {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file,
                                          int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call +
                           " failed: " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

// Why CUDA code cannot run on this host ("" when a device is present): the error of
// cudaGetDeviceCount, or that it found none. Clears the sticky error such a failure leaves.
inline std::string cuda_unavailable_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
  }
  return count == 0 ? "cudaGetDeviceCount found no device" : "";
}

// True when every launch group is followed by a stream synchronisation, so an asynchronous
// kernel fault is reported at the launch group that caused it. On with the compile
// definition COMPCOLL_CUDA_SYNC, or at run time with COMPCOLL_CUDA_SYNC=1 in the environment.
inline bool sync_after_launches() {
#ifdef COMPCOLL_CUDA_SYNC
  return true;
#else
  static const bool on = [] {
    const char* v = std::getenv("COMPCOLL_CUDA_SYNC");
    return v != nullptr && v[0] != '\0' && std::string(v) != "0";
  }();
  return on;
#endif
}

}  // namespace compcoll::gpu

// Checks a CUDA runtime call; throws std::runtime_error("file:line: call failed: ...").
#define COMPCOLL_CUDA_CHECK(call)                                                       \
  do {                                                                                  \
    const cudaError_t compcoll_cuda_err_ = (call);                                      \
    if (compcoll_cuda_err_ != cudaSuccess)                                              \
      ::compcoll::gpu::throw_cuda_error(compcoll_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After a group of kernel launches on `stream`: reports launch errors, and with the debug
// switch on also waits for the group and reports faults inside it.
#define COMPCOLL_CUDA_CHECK_LAUNCHES(stream)              \
  do {                                                    \
    COMPCOLL_CUDA_CHECK(cudaGetLastError());              \
    if (::compcoll::gpu::sync_after_launches())           \
      COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream)); \
  } while (0)
