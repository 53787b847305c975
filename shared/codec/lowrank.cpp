// shared/codec/lowrank.cpp — the host reference of the lowrank compressor (see lowrank.h). The
// loops follow lowrank_bits.h's summation order exactly, so the CUDA kernels can match bit for
// bit; they are written for clarity, not speed.
#include "codec/lowrank.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "codec/lowrank_bits.h"

namespace compcoll::lowrank {

namespace {

void check_shape(uint64_t rows, uint64_t cols, uint32_t rank) {
  if (rows == 0 || cols == 0)
    throw std::invalid_argument("lowrank: matrix " + std::to_string(rows) + " x " + std::to_string(cols) + " is empty");
  if (rank < 1 || rank > std::min(rows, cols))
    throw std::invalid_argument("lowrank: rank " + std::to_string(rank) + " outside [1, " +
                                std::to_string(std::min(rows, cols)) + "] for a " + std::to_string(rows) + " x " +
                                std::to_string(cols) + " matrix");
}

// The lane-order dot product of lowrank_bits.h over n terms term(t) = (a, b).
template <class Term>
float lane_dot(uint64_t n, Term term) {
  float lanes[kLanes] = {};
  for (uint64_t t = 0; t < n; ++t) {
    const auto [a, b] = term(t);
    float& acc = lanes[t % kLanes];
    acc = lane_fma(acc, a, b);
  }
  return lane_tree_sum(lanes);
}

}  // namespace

LowRankState make_state(uint64_t rows, uint64_t cols, uint32_t rank, uint64_t seed) {
  check_shape(rows, cols, rank);
  LowRankState s;
  s.rows = rows;
  s.cols = cols;
  s.rank = rank;
  s.seed = seed;
  s.q.resize(cols * rank);
  for (uint64_t k = 0; k < cols; ++k)
    for (uint32_t j = 0; j < rank; ++j) s.q[k * rank + j] = seeded_q(seed, 0, j, k);
  s.residual.assign(rows * cols, 0.0f);
  return s;
}

void set_rank(LowRankState& s, uint32_t rank) {
  check_shape(s.rows, s.cols, rank);
  if (rank == s.rank) return;
  std::vector<float> q(s.cols * rank);
  for (uint64_t k = 0; k < s.cols; ++k)
    for (uint32_t j = 0; j < rank; ++j)
      q[k * rank + j] = j < s.rank ? s.q[k * s.rank + j] : seeded_q(s.seed, s.step, j, k);
  s.q = std::move(q);
  s.rank = rank;
}

double compression_ratio(uint64_t rows, uint64_t cols, uint32_t rank, DType dtype) {
  return static_cast<double>(rows * cols * dtype_size(dtype)) / static_cast<double>(compressed_bytes(rows, cols, rank));
}

void begin(LowRankState& s, DType dtype, const void* grad) {
  const uint64_t n = s.rows * s.cols;
  s.m.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    const float g = load_as_float(dtype, grad, i);
    if (!std::isfinite(g))
      throw std::invalid_argument("lowrank: gradient element " + std::to_string(i) + " is not finite");
    s.m[i] = g + s.residual[i];
  }
}

void compute_p(const LowRankState& s, float* p) {
  const uint32_t r = s.rank;
  for (uint64_t i = 0; i < s.rows; ++i) {
    const float* row = s.m.data() + i * s.cols;
    for (uint32_t j = 0; j < r; ++j)
      p[i * r + j] = lane_dot(s.cols, [&](uint64_t k) { return std::pair{row[k], s.q[k * r + j]}; });
  }
}

void orthonormalize(float* p, uint64_t rows, uint32_t r) {
  auto dot = [&](uint32_t a, uint32_t b) {
    return lane_dot(rows, [&](uint64_t i) { return std::pair{p[i * r + a], p[i * r + b]}; });
  };
  for (uint32_t j = 0; j < r; ++j) {
    const float before = std::sqrt(dot(j, j));
    for (int pass = 0; pass < 2; ++pass)
      for (uint32_t i = 0; i < j; ++i) {
        const float c = -dot(i, j);
        for (uint64_t e = 0; e < rows; ++e) p[e * r + j] = lane_fma(p[e * r + j], c, p[e * r + i]);
      }
    const float after = std::sqrt(dot(j, j));
    const bool keep = after > kDependentColumn * before;  // false for zero and NaN columns too
    for (uint64_t e = 0; e < rows; ++e) p[e * r + j] = keep ? p[e * r + j] / after : 0.0f;
  }
}

void compute_q(const LowRankState& s, const float* p_hat, float* q) {
  const uint32_t r = s.rank;
  for (uint64_t k = 0; k < s.cols; ++k)
    for (uint32_t j = 0; j < r; ++j)
      q[k * r + j] = lane_dot(s.rows, [&](uint64_t i) { return std::pair{s.m[i * s.cols + k], p_hat[i * r + j]}; });
}

void finish(LowRankState& s, const float* p_hat, const float* q_sum, int nranks, float* out) {
  if (nranks < 1) throw std::invalid_argument("lowrank: nranks must be >= 1");
  const uint32_t r = s.rank;
  const float n = static_cast<float>(nranks);
  std::vector<float> q(s.cols * r);
  for (uint64_t e = 0; e < q.size(); ++e) q[e] = q_sum[e] / n;
  for (uint64_t i = 0; i < s.rows; ++i)
    for (uint64_t k = 0; k < s.cols; ++k) {
      const float a = approx_element(p_hat + i * r, q.data() + k * r, r);
      if (out != nullptr) out[i * s.cols + k] = a;
      s.residual[i * s.cols + k] = s.error_feedback ? s.m[i * s.cols + k] - a : 0.0f;
    }
  // A column of Q that came out all zero (its P̂ column was dependent, or M is zero) would
  // stay zero forever as a warm start: it is reseeded.
  ++s.step;
  for (uint32_t j = 0; j < r; ++j) {
    bool zero = true;
    for (uint64_t k = 0; k < s.cols && zero; ++k) zero = q[k * r + j] == 0.0f;
    if (zero)
      for (uint64_t k = 0; k < s.cols; ++k) q[k * r + j] = seeded_q(s.seed, s.step, j, k);
  }
  s.q = std::move(q);
}

void compress_step(LowRankState& s, DType dtype, const void* grad, float* out) {
  std::vector<float> p(s.rows * s.rank), q(s.cols * s.rank);
  begin(s, dtype, grad);
  compute_p(s, p.data());
  orthonormalize(p.data(), s.rows, s.rank);
  compute_q(s, p.data(), q.data());
  finish(s, p.data(), q.data(), 1, out);
}

double step_error(const LowRankState& state, const float* update) {
  double left = 0, total = 0;
  for (size_t i = 0; i < state.residual.size(); ++i) {
    const double r = state.residual[i], m = r + update[i];
    left += r * r;
    total += m * m;
  }
  return total > 0 ? std::sqrt(left / total) : 0.0;
}

}  // namespace compcoll::lowrank
