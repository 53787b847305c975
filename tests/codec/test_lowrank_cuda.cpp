// tests/codec/test_lowrank_cuda.cpp — the lowrank CUDA kernels (codec/cuda/lowrank_cuda.h)
// bit-exact against the host reference (codec/lowrank.h) step by step: P, P̂, Q, the update, the
// residual and the next warm start, over several steps, shapes at the 256-lane edges, every
// dtype, a dependent (rank-deficient) case and a zero gradient. Runs on a non-blocking stream;
// without a device every case says "SKIPPED" with a warning instead of passing silently.
// Built only with CUDA.
#ifdef COMPCOLL_HAVE_CUDA

#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "codec/cuda/check.h"
#include "codec/cuda/lowrank_cuda.h"
#include "codec/lowrank.h"
#include "cuda_test_util.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::lowrank;

namespace {


template <class T>
class DeviceVec {
 public:
  explicit DeviceVec(size_t n) : n_(n) { COMPCOLL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n, 1) * sizeof(T))); }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  ~DeviceVec() { cudaFree(p_); }
  T* get() { return p_; }
  // Waited for on the whole device: the kernels run on a non-blocking stream, which does not
  // wait for cudaMemcpy's legacy stream, and a copy from pageable memory may return before the
  // device has the data.
  void put(const void* host, size_t bytes) {
    COMPCOLL_CUDA_CHECK(cudaMemcpy(p_, host, bytes, cudaMemcpyHostToDevice));
    COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<T> fetch() const {
    std::vector<T> h(n_);
    COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
    COMPCOLL_CUDA_CHECK(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Runs `steps` steps on host and device from the same state and compares every buffer.
void compare(DType dtype, uint64_t rows, uint64_t cols, uint32_t rank, int steps, bool rank_deficient, bool zero) {
  CAPTURE(std::string(dtype_name(dtype)), rows, cols, rank, rank_deficient, zero);
  cudaStream_t stream;
  COMPCOLL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  LowRankState host = make_state(rows, cols, rank, 17);
  const uint64_t n = rows * cols;
  DeviceVec<uint8_t> grad(n * dtype_size(dtype));
  DeviceVec<float> m(n), residual(n), out(n), p(rows * rank), q(cols * rank);
  DeviceVec<int> bad(1);
  const int zero_int = 0;
  bad.put(&zero_int, sizeof zero_int);
  residual.put(host.residual.data(), n * 4);
  q.put(host.q.data(), host.q.size() * 4);
  std::vector<float> hp(rows * rank), hq(cols * rank), hout(n);
  bool any_nonzero = false;
  for (int t = 0; t < steps; ++t) {
    CAPTURE(t);
    std::vector<uint8_t> g;
    if (zero) {
      g.assign(n * dtype_size(dtype), 0);
    } else if (rank_deficient) {
      // Two rank-1 outer products: rank 2 < rank, so later P columns are dependent.
      test::SplitMix64 rng{static_cast<uint64_t>(t) + 5};
      std::vector<float> a(rows), b(cols), c(rows), d(cols), f(n);
      for (auto* v : {&a, &c}) for (auto& x : *v) x = static_cast<float>(rng.normal());
      for (auto* v : {&b, &d}) for (auto& x : *v) x = static_cast<float>(rng.normal());
      for (uint64_t i = 0; i < rows; ++i)
        for (uint64_t k = 0; k < cols; ++k) f[i * cols + k] = a[i] * b[k] + c[i] * d[k];
      g.resize(n * 4);
      std::memcpy(g.data(), f.data(), n * 4);
      dtype = DType::FP32;
    } else {
      g = test::gaussian_bytes(dtype, n, 0.01, 100 + t);
    }
    grad.put(g.data(), g.size());
    begin(host, dtype, g.data());
    cuda_lowrank_begin(dtype, grad.get(), residual.get(), m.get(), n, bad.get(), stream);
    compute_p(host, hp.data());
    cuda_lowrank_compute_p(m.get(), q.get(), p.get(), rows, cols, rank, stream);
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream));
    REQUIRE(same_bits(m.fetch(), host.m));
    REQUIRE(same_bits(p.fetch(), hp));
    orthonormalize(hp.data(), rows, rank);
    cuda_lowrank_orthonormalize(p.get(), rows, rank, stream);
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream));
    REQUIRE(same_bits(p.fetch(), hp));
    compute_q(host, hp.data(), hq.data());
    cuda_lowrank_compute_q(m.get(), p.get(), q.get(), rows, cols, rank, stream);
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream));
    REQUIRE(same_bits(q.fetch(), hq));
    // As if 3 ranks had sent the same Q: exercises the division.
    for (auto& v : hq) v *= 3;
    q.put(hq.data(), hq.size() * 4);
    finish(host, hp.data(), hq.data(), 3, hout.data());
    cuda_lowrank_finish(m.get(), p.get(), q.get(), 3, out.get(), residual.get(), true, host.seed, host.step, rows, cols,
                        rank, stream);
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream));
    REQUIRE(same_bits(out.fetch(), hout));
    REQUIRE(same_bits(residual.fetch(), host.residual));
    REQUIRE(same_bits(q.fetch(), host.q));
    any_nonzero = any_nonzero || std::any_of(hout.begin(), hout.end(), [](float v) { return v != 0.0f; });
  }
  CHECK(any_nonzero == !zero);  // an all-zero result must not pass as agreement
  CHECK(bad.fetch()[0] == 0);
  COMPCOLL_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace

TEST_CASE("lowrank cuda: bit-exact against the host, step by step", "[lowrank][cuda]") {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::BF16, DType::FP16, DType::FP32}) {
    compare(dt, 1, 1, 1, 2, false, false);
    compare(dt, 32, 33, 4, 3, false, false);
    compare(dt, 255, 257, 7, 3, false, false);
    compare(dt, 256, 512, 16, 2, false, false);
    compare(dt, 513, 65, 8, 2, false, false);
  }
  compare(DType::FP32, 100, 300, 6, 3, true, false);  // dependent columns zeroed, reseeded
  compare(DType::BF16, 64, 65, 3, 2, false, true);    // zero gradient
}

TEST_CASE("lowrank cuda: non-finite gradients are flagged", "[lowrank][cuda]") {
  SKIP_WITHOUT_CUDA();
  std::vector<float> g(1000, 1.0f), zeros(1000, 0.0f);
  g[777] = INFINITY;
  DeviceVec<float> gd(1000), res(1000), m(1000);
  DeviceVec<int> bad(1);
  const int zero_int = 0;
  bad.put(&zero_int, sizeof zero_int);
  gd.put(g.data(), 4000);
  res.put(zeros.data(), 4000);
  cuda_lowrank_begin(DType::FP32, gd.get(), res.get(), m.get(), 1000, bad.get(), nullptr);
  COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(bad.fetch()[0] == 1);
}

#endif  // COMPCOLL_HAVE_CUDA
