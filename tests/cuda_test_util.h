// tests/cuda_test_util.h — how a CUDA test case steps aside where no GPU is: it prints
// "SKIPPED: no CUDA device (why)" as a Catch2 warning and returns, and ctest reports the case
// as skipped (tests/CMakeLists.txt), never as passed. Only for files built with CUDA.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "codec/cuda/check.h"

namespace compcoll::test {

// Why the GPU cases cannot run here; empty when a device is present (asked once).
inline const std::string& cuda_unavailable() {
  static const std::string why = gpu::cuda_unavailable_reason();
  return why;
}

}  // namespace compcoll::test

#define SKIP_WITHOUT_CUDA()                                                        \
  do {                                                                             \
    const std::string& compcoll_why_ = ::compcoll::test::cuda_unavailable();       \
    if (!compcoll_why_.empty()) {                                                  \
      WARN("SKIPPED: no CUDA device (" << compcoll_why_ << ")");                   \
      return;                                                                      \
    }                                                                              \
  } while (0)
