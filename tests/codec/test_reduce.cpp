// tests/codec/test_reduce.cpp — reduce_add (codec/reduce.h): hand-computed sums with ties to
// even, overflow, signed zeros, subnormals, Inf and NaN in every dtype; buffers are touched
// only up to `elements`; in place (dst == src) doubles. With CUDA, cuda_reduce_add is
// bit-exact against it (SKIPPED with a warning where no GPU is present).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "codec/reduce.h"
#include "io/float_convert.h"
#include "test_util.h"

#ifdef COMPCOLL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "codec/cuda/check.h"
#include "codec/cuda/reduce_cuda.h"
#include "cuda_test_util.h"
#endif

using namespace compcoll;

namespace {

uint16_t add16(DType dtype, uint16_t a, uint16_t b) {
  reduce_add(dtype, &a, &b, 1);
  return a;
}

uint32_t add32(uint32_t a, uint32_t b) {
  reduce_add(DType::FP32, &a, &b, 1);
  return a;
}

}  // namespace

TEST_CASE("reduce_add bf16: hand-computed sums", "[reduce]") {
  CHECK(add16(DType::BF16, 0x3F80, 0x3F80) == 0x4000);  // 1 + 1 = 2
  CHECK(add16(DType::BF16, 0x3F80, 0x3B80) == 0x3F80);  // 1 + 2^-8: a tie, to even (down)
  CHECK(add16(DType::BF16, 0x3F81, 0x3B80) == 0x3F82);  // 1+2^-7 + 2^-8: a tie, to even (up)
  CHECK(add16(DType::BF16, 0x3F80, 0xBF80) == 0x0000);  // 1 - 1 = +0
  CHECK(add16(DType::BF16, 0x8000, 0x8000) == 0x8000);  // -0 + -0 = -0
  CHECK(add16(DType::BF16, 0x0001, 0x0001) == 0x0002);  // subnormals add exactly
  CHECK(add16(DType::BF16, 0x7F7F, 0x7F7F) == 0x7F80);  // max + max = +Inf
  CHECK(add16(DType::BF16, 0x7F80, 0x3F80) == 0x7F80);  // Inf + 1 = Inf
  const uint16_t nan = add16(DType::BF16, 0x7F80, 0xFF80);  // Inf - Inf = NaN
  CHECK((nan & 0x7F80) == 0x7F80);
  CHECK((nan & 0x007F) != 0);
}

TEST_CASE("reduce_add fp16: hand-computed sums", "[reduce]") {
  CHECK(add16(DType::FP16, 0x3C00, 0x3C00) == 0x4000);  // 1 + 1 = 2
  CHECK(add16(DType::FP16, 0x3C00, 0x1000) == 0x3C00);  // 1 + 2^-11: a tie, to even (down)
  CHECK(add16(DType::FP16, 0x3C01, 0x1000) == 0x3C02);  // a tie, to even (up)
  CHECK(add16(DType::FP16, 0x0001, 0x0001) == 0x0002);  // subnormals
  CHECK(add16(DType::FP16, 0x03FF, 0x0001) == 0x0400);  // largest subnormal + min = smallest normal
  CHECK(add16(DType::FP16, 0x7BFF, 0x7BFF) == 0x7C00);  // 65504 + 65504 = +Inf
  CHECK(add16(DType::FP16, 0x7BFF, 0x4800) == 0x7BFF);  // 65504 + 8 rounds back down
  CHECK(add16(DType::FP16, 0x7BFF, 0x4C00) == 0x7C00);  // 65504 + 16 = 65520: the tie goes to Inf
  CHECK(add16(DType::FP16, 0x8000, 0x8000) == 0x8000);  // -0 + -0 = -0
  const uint16_t nan = add16(DType::FP16, 0x7C00, 0xFC00);
  CHECK((nan & 0x7C00) == 0x7C00);
  CHECK((nan & 0x03FF) != 0);
}

TEST_CASE("reduce_add fp32: hand-computed sums", "[reduce]") {
  CHECK(add32(0x3F800000, 0x3F800000) == 0x40000000);  // 1 + 1 = 2
  CHECK(add32(0x3F800000, 0x33800000) == 0x3F800000);  // 1 + 2^-24: a tie, to even
  CHECK(add32(0x3F800001, 0x33800000) == 0x3F800002);
  CHECK(add32(0x7F7FFFFF, 0x7F7FFFFF) == 0x7F800000);  // overflow to Inf
  CHECK(add32(0x00000001, 0x00000001) == 0x00000002);  // subnormals
  CHECK(add32(0x80000000, 0x80000000) == 0x80000000);
}

TEST_CASE("reduce_add: every element up to `elements`, nothing beyond; in place doubles", "[reduce]") {
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const size_t es = dtype_size(dtype);
  for (size_t n : {size_t{0}, size_t{1}, size_t{31}, size_t{32}, size_t{33}, size_t{1000}, size_t{4097}}) {
    const std::vector<uint8_t> a = test::gaussian_bytes(dtype, n + 8, 3.0, 11 + n);
    const std::vector<uint8_t> b = test::gaussian_bytes(dtype, n + 8, 0.01, 29 + n);
    std::vector<uint8_t> dst = a;
    reduce_add(dtype, dst.data(), b.data(), n);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      if (dtype == DType::FP32) {
        float x, y, z;
        std::memcpy(&x, a.data() + 4 * i, 4);
        std::memcpy(&y, b.data() + 4 * i, 4);
        std::memcpy(&z, dst.data() + 4 * i, 4);
        wrong += float_bits(z) != float_bits(x + y);
      } else {
        uint16_t x, y, z;
        std::memcpy(&x, a.data() + 2 * i, 2);
        std::memcpy(&y, b.data() + 2 * i, 2);
        std::memcpy(&z, dst.data() + 2 * i, 2);
        const float sum = dtype == DType::BF16 ? bf16_to_float(x) + bf16_to_float(y) : fp16_to_float(x) + fp16_to_float(y);
        wrong += z != (dtype == DType::BF16 ? float_to_bf16_rne(sum) : float_to_fp16_rne(sum));
      }
    }
    CHECK(wrong == 0);
    CHECK(std::memcmp(dst.data() + n * es, a.data() + n * es, 8 * es) == 0);  // untouched tail
    if (n >= 31) CHECK(dst != a);  // something was added (one small addend may round away)

    // In place: x + x = 2x exactly (no overflow at this scale).
    std::vector<uint8_t> twice = a;
    reduce_add(dtype, twice.data(), twice.data(), n);
    for (size_t i = 0; i < n; ++i) {
      if (dtype == DType::FP32) {
        float x, z;
        std::memcpy(&x, a.data() + 4 * i, 4);
        std::memcpy(&z, twice.data() + 4 * i, 4);
        REQUIRE(z == 2 * x);
      } else {
        uint16_t x, z;
        std::memcpy(&x, a.data() + 2 * i, 2);
        std::memcpy(&z, twice.data() + 2 * i, 2);
        const auto widen = dtype == DType::BF16 ? bf16_to_float : fp16_to_float;
        REQUIRE(widen(z) == 2 * widen(x));
      }
    }
  }
}

#ifdef COMPCOLL_HAVE_CUDA
TEST_CASE("cuda_reduce_add is bit-exact against reduce_add", "[reduce][cuda]") {
  SKIP_WITHOUT_CUDA();
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  cudaStream_t stream;
  COMPCOLL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (size_t n : {size_t{1}, size_t{32}, size_t{33}, size_t{255}, size_t{256}, size_t{257}, size_t{1} << 20}) {
    const size_t bytes = n * dtype_size(dtype);
    const std::vector<uint8_t> a = test::gaussian_bytes(dtype, n, 1e-3, 7 + n);
    const std::vector<uint8_t> b = test::gaussian_bytes(dtype, n, 1e-4, 9 + n);
    std::vector<uint8_t> want = a, got(bytes, 0);
    reduce_add(dtype, want.data(), b.data(), n);
    void *dst = nullptr, *src = nullptr;
    COMPCOLL_CUDA_CHECK(cudaMalloc(&dst, bytes));
    COMPCOLL_CUDA_CHECK(cudaMalloc(&src, bytes));
    COMPCOLL_CUDA_CHECK(cudaMemcpy(dst, a.data(), bytes, cudaMemcpyHostToDevice));
    COMPCOLL_CUDA_CHECK(cudaMemcpy(src, b.data(), bytes, cudaMemcpyHostToDevice));
    COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());  // the non-blocking stream does not wait for these copies
    cuda_reduce_add(dtype, dst, src, n, stream);
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream));
    COMPCOLL_CUDA_CHECK(cudaMemcpy(got.data(), dst, bytes, cudaMemcpyDeviceToHost));
    cudaFree(dst);
    cudaFree(src);
    CHECK(got == want);
    CHECK(got != a);
  }
  cudaStreamDestroy(stream);
}
#endif
