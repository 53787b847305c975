// tests/codec/test_lowrank.cpp — the lowrank compressor (codec/lowrank.h): exact recovery of
// rank-r matrices at rank >= r (and not below), error feedback (the running sum of updates
// tracks the running sum of gradients; without feedback it does not), the two-allreduce
// protocol across simulated ranks, the byte formula, determinism, dtypes, rank changes, bad
// input, and the error against rank on the bundled real gradients.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "codec/lowrank.h"
#include "io/float_convert.h"
#include "io/tensor_file.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::lowrank;

namespace {

// rows x cols matrix A Bᵀ of rank r (A, B Gaussian).
std::vector<float> rank_r_matrix(uint64_t rows, uint64_t cols, uint32_t r, uint64_t seed) {
  test::SplitMix64 rng{seed};
  std::vector<float> a(rows * r), b(cols * r), m(rows * cols, 0.0f);
  for (auto& v : a) v = static_cast<float>(rng.normal());
  for (auto& v : b) v = static_cast<float>(rng.normal());
  for (uint64_t i = 0; i < rows; ++i)
    for (uint64_t k = 0; k < cols; ++k) {
      double s = 0;
      for (uint32_t j = 0; j < r; ++j) s += static_cast<double>(a[i * r + j]) * b[k * r + j];
      m[i * cols + k] = static_cast<float>(s);
    }
  return m;
}

std::vector<float> gaussian(uint64_t n, double scale, uint64_t seed) {
  test::SplitMix64 rng{seed};
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal() * scale);
  return v;
}

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

double rel_error(const std::vector<float>& approx, const std::vector<float>& exact) {
  double num = 0, den = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    const double d = static_cast<double>(approx[i]) - exact[i];
    num += d * d;
    den += static_cast<double>(exact[i]) * exact[i];
  }
  return std::sqrt(num / den);
}

// The relative L2 error of one step from a fresh state at `rank`, plus `extra` further steps on
// the same gradient with the residual dropped (more power iterations from the warm start).
double one_step_error(const std::vector<float>& m, uint64_t rows, uint64_t cols, uint32_t rank, int extra = 0) {
  LowRankState s = make_state(rows, cols, rank, 42);
  s.error_feedback = false;
  std::vector<float> out(m.size());
  for (int i = 0; i <= extra; ++i) compress_step(s, DType::FP32, m.data(), out.data());
  return rel_error(out, m);
}

}  // namespace

TEST_CASE("lowrank: a rank-r matrix is recovered at rank >= r, not below", "[lowrank]") {
  struct Shape {
    uint64_t rows, cols;
    uint32_t r;
  };
  for (const Shape sh : {Shape{64, 48, 3}, Shape{100, 300, 5}, Shape{257, 33, 1}, Shape{31, 600, 8}}) {
    const auto m = rank_r_matrix(sh.rows, sh.cols, sh.r, sh.rows * 1000 + sh.cols);
    for (uint32_t k : {sh.r, sh.r + 1, sh.r + 4}) {
      CAPTURE(sh.rows, sh.cols, sh.r, k);
      LowRankState s = make_state(sh.rows, sh.cols, k, 7);
      std::vector<float> out(m.size());
      compress_step(s, DType::FP32, m.data(), out.data());
      CHECK(rel_error(out, m) < 2e-6);
      // Error feedback keeps only round-off.
      double res = 0, mm = 0;
      for (size_t i = 0; i < m.size(); ++i) {
        res = std::max(res, std::abs(static_cast<double>(s.residual[i])));
        mm = std::max(mm, std::abs(static_cast<double>(m[i])));
      }
      CHECK(res < 1e-5 * mm);
    }
    if (sh.r > 1) {
      // One rank short misses a whole direction.
      CHECK(one_step_error(m, sh.rows, sh.cols, sh.r - 1) > 1e-2);
    }
  }
}

TEST_CASE("lowrank: orthonormalize gives orthonormal columns, zero for dependent ones", "[lowrank]") {
  const uint64_t rows = 300;
  const uint32_t r = 6;
  auto p = gaussian(rows * r, 1.0, 3);
  // Column 4 = 2 x column 1 - column 0: dependent.
  for (uint64_t i = 0; i < rows; ++i) p[i * r + 4] = 2 * p[i * r + 1] - p[i * r + 0];
  orthonormalize(p.data(), rows, r);
  for (uint32_t a = 0; a < r; ++a)
    for (uint32_t b = 0; b < r; ++b) {
      double d = 0;
      for (uint64_t i = 0; i < rows; ++i) d += static_cast<double>(p[i * r + a]) * p[i * r + b];
      const double expect = (a == b && a != 4) ? 1.0 : 0.0;
      CAPTURE(a, b);
      CHECK(std::abs(d - expect) < 1e-5);
    }
  // All-zero input stays zero (no NaN from 0/0).
  std::vector<float> z(rows * r, 0.0f);
  orthonormalize(z.data(), rows, r);
  CHECK(std::all_of(z.begin(), z.end(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("lowrank: error feedback makes the sum of updates track the sum of gradients", "[lowrank]") {
  const uint64_t rows = 64, cols = 96;
  const uint32_t rank = 4;
  const auto signal = gaussian(rows * cols, 1.0, 11);  // full rank: rank 4 alone cannot carry it
  // g_t = signal + noise_t. Returns |sum g - sum out| / |sum g| after `steps`; residual norms
  // per step in *residuals.
  auto run = [&](bool feedback, int steps, std::vector<double>* residuals) {
    LowRankState s = make_state(rows, cols, rank, 5);
    s.error_feedback = feedback;
    std::vector<double> sum_g(rows * cols, 0.0), sum_out(rows * cols, 0.0);
    std::vector<float> out(rows * cols);
    for (int t = 0; t < steps; ++t) {
      auto g = gaussian(rows * cols, 0.5, 1000 + t);
      for (size_t i = 0; i < g.size(); ++i) g[i] += signal[i];
      compress_step(s, DType::FP32, g.data(), out.data());
      std::vector<double> res(g.size()), gap(g.size());
      for (size_t i = 0; i < g.size(); ++i) {
        sum_g[i] += g[i];
        sum_out[i] += out[i];
        res[i] = s.residual[i];
        gap[i] = sum_g[i] - sum_out[i] - s.residual[i];
      }
      residuals->push_back(norm(res));
      // Bookkeeping identity of error feedback: sum of updates + residual = sum of gradients.
      if (feedback) REQUIRE(norm(gap) < 1e-4 * norm(sum_g));
    }
    std::vector<double> diff(sum_g.size());
    for (size_t i = 0; i < diff.size(); ++i) diff[i] = sum_g[i] - sum_out[i];
    return norm(diff) / norm(sum_g);
  };
  std::vector<double> res10, res200, res_off;
  const double ef10 = run(true, 10, &res10);
  const double ef200 = run(true, 200, &res200);
  const double off200 = run(false, 200, &res_off);
  const double early = *std::max_element(res200.begin() + 50, res200.begin() + 100);
  const double late = *std::max_element(res200.begin() + 100, res200.end());
  CAPTURE(ef10, ef200, off200, early, late);
  CHECK(ef200 < 0.06);        // the running sums agree (measured 0.047) ...
  CHECK(ef200 < ef10 / 10);   // ... ever better, as 1/T: the residual does not grow with T
  CHECK(late < 1.1 * early);  // bounded: flat after ~25 steps (measured about 745 = 8.4 |g|)
  CHECK(off200 > 0.5);        // without feedback most of the signal is never sent (0.9)
}

TEST_CASE("lowrank: two ranks, two allreduces: one update, the mean, on both", "[lowrank]") {
  const uint64_t rows = 40, cols = 70;
  const uint32_t rank = 6;  // each gradient has rank 3: their mean has rank <= 6
  const auto g0 = rank_r_matrix(rows, cols, 3, 100), g1 = rank_r_matrix(rows, cols, 3, 200);
  LowRankState s0 = make_state(rows, cols, rank, 9), s1 = make_state(rows, cols, rank, 9);
  std::vector<float> p0(rows * rank), p1(rows * rank), q0(cols * rank), q1(cols * rank);
  begin(s0, DType::FP32, g0.data());
  begin(s1, DType::FP32, g1.data());
  compute_p(s0, p0.data());
  compute_p(s1, p1.data());
  for (size_t i = 0; i < p0.size(); ++i) p0[i] = p1[i] = p0[i] + p1[i];  // allreduce(P, sum)
  orthonormalize(p0.data(), rows, rank);
  orthonormalize(p1.data(), rows, rank);
  compute_q(s0, p0.data(), q0.data());
  compute_q(s1, p1.data(), q1.data());
  for (size_t i = 0; i < q0.size(); ++i) q0[i] = q1[i] = q0[i] + q1[i];  // allreduce(Q, sum)
  std::vector<float> out0(rows * cols), out1(rows * cols);
  finish(s0, p0.data(), q0.data(), 2, out0.data());
  finish(s1, p1.data(), q1.data(), 2, out1.data());
  CHECK(std::memcmp(out0.data(), out1.data(), out0.size() * 4) == 0);
  std::vector<float> mean(rows * cols);
  for (size_t i = 0; i < mean.size(); ++i) mean[i] = (g0[i] + g1[i]) / 2;
  CHECK(rel_error(out0, mean) < 5e-6);
  // Bytes each rank put into the two allreduces.
  CHECK((p0.size() + q0.size()) * 4 == compressed_bytes(rows, cols, rank));
  // Each rank keeps its own residual: g_i - mean, to round-off.
  double worst = 0;
  for (size_t i = 0; i < mean.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(s0.residual[i] - (g0[i] - mean[i]))));
  CHECK(worst < 1e-4);
}

TEST_CASE("lowrank: compressed bytes and ratio", "[lowrank]") {
  STATIC_REQUIRE(compressed_bytes(256, 1024, 8) == (256 + 1024) * 8 * 4);
  CHECK(compressed_bytes(4096, 4096, 4) == 131072);
  CHECK(compressed_bytes(1, 1, 1) == 8);
  CHECK(compression_ratio(256, 1024, 8, DType::BF16) == Approx(256.0 * 1024 * 2 / 40960));
  CHECK(compression_ratio(4096, 4096, 4, DType::FP32) == Approx(4096.0 * 4096 * 4 / 131072));
  LowRankState s = make_state(256, 1024, 8, 1);
  CHECK((s.q.size() + 256 * s.rank) * sizeof(float) == compressed_bytes(256, 1024, 8));
}

TEST_CASE("lowrank: deterministic; the seed matters", "[lowrank]") {
  const uint64_t rows = 50, cols = 80;
  auto run = [&](uint64_t seed) {
    LowRankState s = make_state(rows, cols, 4, seed);
    std::vector<float> out(rows * cols), all;
    for (int t = 0; t < 5; ++t) {
      const auto g = gaussian(rows * cols, 1.0, 77 + t);
      compress_step(s, DType::FP32, g.data(), out.data());
      all.insert(all.end(), out.begin(), out.end());
    }
    all.insert(all.end(), s.residual.begin(), s.residual.end());
    all.insert(all.end(), s.q.begin(), s.q.end());
    return all;
  };
  const auto a = run(3), b = run(3), c = run(4);
  REQUIRE(a.size() == b.size());
  CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  CHECK(std::memcmp(a.data(), c.data(), a.size() * 4) != 0);
}

TEST_CASE("lowrank: bf16 and fp16 input equal their fp32 values", "[lowrank]") {
  const uint64_t rows = 33, cols = 65;
  for (DType dt : {DType::BF16, DType::FP16}) {
    const auto bytes = test::gaussian_bytes(dt, rows * cols, 0.1, 21);
    std::vector<float> as_f32(rows * cols);
    for (size_t i = 0; i < as_f32.size(); ++i) as_f32[i] = load_as_float(dt, bytes.data(), i);
    LowRankState s16 = make_state(rows, cols, 3, 1), s32 = make_state(rows, cols, 3, 1);
    std::vector<float> o16(rows * cols), o32(rows * cols);
    for (int t = 0; t < 2; ++t) {
      compress_step(s16, dt, bytes.data(), o16.data());
      compress_step(s32, DType::FP32, as_f32.data(), o32.data());
    }
    CHECK(std::memcmp(o16.data(), o32.data(), o16.size() * 4) == 0);
    CHECK(std::any_of(o16.begin(), o16.end(), [](float v) { return v != 0.0f; }));
  }
}

TEST_CASE("lowrank: set_rank keeps the residual and the leading warm-start columns", "[lowrank]") {
  const uint64_t rows = 30, cols = 40;
  LowRankState s = make_state(rows, cols, 4, 2);
  const auto g = gaussian(rows * cols, 1.0, 8);
  compress_step(s, DType::FP32, g.data(), nullptr);
  const auto residual = s.residual;
  const auto q = s.q;
  set_rank(s, 2);
  CHECK(s.rank == 2);
  REQUIRE(s.q.size() == cols * 2);
  for (uint64_t k = 0; k < cols; ++k)
    for (uint32_t j = 0; j < 2; ++j) CHECK(s.q[k * 2 + j] == q[k * 4 + j]);
  CHECK(s.residual == residual);
  set_rank(s, 9);
  CHECK(s.q.size() == cols * 9);
  std::vector<float> out(rows * cols);
  compress_step(s, DType::FP32, g.data(), out.data());
  CHECK(std::all_of(out.begin(), out.end(), [](float v) { return std::isfinite(v); }));
}

TEST_CASE("lowrank: a zero gradient sends zero, and the warm start recovers", "[lowrank]") {
  const uint64_t rows = 20, cols = 24;
  LowRankState s = make_state(rows, cols, 3, 4);
  std::vector<float> zero(rows * cols, 0.0f), out(rows * cols, 1.0f);
  compress_step(s, DType::FP32, zero.data(), out.data());
  CHECK(std::all_of(out.begin(), out.end(), [](float v) { return v == 0.0f; }));
  CHECK(std::any_of(s.q.begin(), s.q.end(), [](float v) { return v != 0.0f; }));  // reseeded
  const auto m = rank_r_matrix(rows, cols, 2, 5);
  compress_step(s, DType::FP32, m.data(), out.data());
  CHECK(rel_error(out, m) < 2e-6);
}

TEST_CASE("lowrank: bad shapes, ranks and gradients are refused", "[lowrank]") {
  CHECK_THROWS_AS(make_state(0, 10, 1, 0), std::invalid_argument);
  CHECK_THROWS_AS(make_state(10, 10, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(make_state(10, 20, 11, 0), std::invalid_argument);
  CHECK_NOTHROW(make_state(10, 20, 10, 0));
  LowRankState s = make_state(4, 4, 2, 0);
  CHECK_THROWS_AS(set_rank(s, 5), std::invalid_argument);
  std::vector<float> g(16, 1.0f);
  g[5] = std::nanf("");
  CHECK_THROWS_AS(begin(s, DType::FP32, g.data()), std::invalid_argument);
  g[5] = INFINITY;
  CHECK_THROWS_AS(begin(s, DType::FP32, g.data()), std::invalid_argument);
  std::vector<float> p(8), q(8);
  g[5] = 1.0f;
  begin(s, DType::FP32, g.data());
  CHECK_THROWS_AS(finish(s, p.data(), q.data(), 0, nullptr), std::invalid_argument);
}

namespace {

struct RealGrad {
  std::string file;
  uint64_t rows, cols;
  DType dtype;
};
// tests/data/manifest.json: layer1-attn-out-weight is the whole [256, 256] matrix;
// layer2-ffn-down-weight's file holds the first 131072 elements of [256, 1024]: 128 rows.
const RealGrad kRealGrads[] = {
    {"grad.layer1-attn-out-weight.step060.fp32.npy", 256, 256, DType::FP32},
    {"grad.layer2-ffn-down-weight.step060.bf16.npy", 128, 1024, DType::BF16},
};

std::vector<float> load_real(const RealGrad& g) {
  const auto t = load_tensors((test::test_data_dir() / g.file).string(), g.dtype).at(0);
  REQUIRE(t.elements() == g.rows * g.cols);
  std::vector<float> m(t.elements());
  for (size_t i = 0; i < m.size(); ++i) {
    if (g.dtype == DType::FP32) {
      std::memcpy(&m[i], t.bytes.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.bytes.data() + 2 * i, 2);
      m[i] = bf16_to_float(h);
    }
  }
  return m;
}

}  // namespace

TEST_CASE("lowrank: error falls with rank on the real gradients, exact at full rank", "[lowrank]") {
  for (const RealGrad& g : kRealGrads) {
    const auto m = load_real(g);
    double prev = 2.0;
    for (uint32_t r : {1u, 4u, 16u, 64u}) {
      const double e = one_step_error(m, g.rows, g.cols, r);
      CAPTURE(g.file, r, e);
      CHECK(e < prev);
      CHECK(e < 1.0);
      prev = e;
    }
    // rank = min(rows, cols): P spans the whole column space, up to the directions
    // orthonormalize() drops as dependent (below 1e-4 of their column's norm).
    const uint32_t full = static_cast<uint32_t>(std::min(g.rows, g.cols));
    CHECK(one_step_error(m, g.rows, g.cols, full) < 1e-3);
  }
}

// Prints the table in docs/LOWRANK.md: build-lr/tests/compcoll_tests "[.lowrank-report]" -s
TEST_CASE("lowrank: report of error vs rank on the real gradients", "[.lowrank-report]") {
  for (const RealGrad& g : kRealGrads) {
    const auto m = load_real(g);
    for (uint32_t r : {1u, 2u, 4u, 8u, 16u, 32u, 64u}) {
      const double e1 = one_step_error(m, g.rows, g.cols, r, 0), e4 = one_step_error(m, g.rows, g.cols, r, 3);
      std::printf("%-48s %4llux%-5llu r=%-3u ratio(%s)=%7.2f relL2 1 step %.4f  4 steps %.4f\n", g.file.c_str(),
                  static_cast<unsigned long long>(g.rows), static_cast<unsigned long long>(g.cols), r,
                  std::string(dtype_name(g.dtype)).c_str(), compression_ratio(g.rows, g.cols, r, g.dtype), e1, e4);
    }
  }
}
