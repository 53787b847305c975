// shared/policy/entropy.h — EDGC's entropy-driven rate control for the lowrank gradient
// compressor (codec/lowrank.h): a cheap entropy estimate of the gradient from a sampled
// fraction of its elements every few iterations; per window of iterations the rank moves
// within [rank_min, rank_max] with the change of the window's mean entropy (higher entropy →
// higher rank), after a warm-up of uncompressed steps. EntropyController is the stateful part
// (fed with gradients, asked for ranks); EntropyPolicy adapts it to policy::Policy.
// What it must never do: touch the gradient it is shown, or decide anything but the codec and
// its rank of gradient allreduces (everything else goes to the fallback policy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "util/dtype.h"
#include "policy/policy.h"

namespace compcoll::policy {

// --- the estimator ---------------------------------------------------------------------------
// Shannon entropy (bits per element) of the histogram of each value's top 9 + mantissa_bits
// bits in fp32 (sign, 8 exponent bits, the top mantissa bits): the information in magnitude
// and sign at a fixed relative precision, independent of the tensor's scale (x2 shifts the
// exponents only), found in one pass with no min/max. The plug-in estimate on s samples is
// biased low by about (K - 1) / (2 s ln 2) bits for K occupied bins; the Miller-Madow term
// adds that back. Zero for a constant tensor; 9 + mantissa_bits bits at most.
struct EntropyEstimate {
  double bits = 0;       // entropy estimate, bits per element
  uint64_t samples = 0;  // elements it looked at
};

// All n elements (the reference the sampled estimate is checked against).
EntropyEstimate entropy_full(DType dtype, const void* data, uint64_t n, int mantissa_bits = 2);
// s = clamp(ceil(fraction x n), min(min_samples, n), n) elements drawn uniformly with
// replacement by splitmix64 seeded with `seed` (all n, in order, when s == n).
EntropyEstimate entropy_sampled(DType dtype, const void* data, uint64_t n, double fraction, uint64_t min_samples,
                                uint64_t seed, int mantissa_bits = 2);

// --- the controller --------------------------------------------------------------------------
struct EntropyConfig {
  uint64_t warmup_steps = 100;    // iterations [0, warmup_steps) run uncompressed (rank 0)
  uint64_t window = 50;           // iterations per window; the rank changes only between windows
  uint64_t estimate_every = 10;   // estimate at iterations that are multiples of this
  double sample_fraction = 0.01;  // fraction of the elements each estimate looks at
  uint64_t min_samples = 4096;    // ... but at least this many (or all)
  uint32_t rank_min = 4, rank_max = 64;
  uint32_t rank_start = 0;        // rank of the first window after warm-up; 0: rank_max
  double dead_band_bits = 0.05;   // |entropy change| at or below this keeps the rank (see POLICIES.md)
  double gain = 4.0;              // log2(rank) moves by gain x entropy change (bits), >= 1 step
  int mantissa_bits = 2;          // estimator's mantissa bits (0..7)
  uint64_t seed = 0x5eed;         // sampling seed (the iteration is mixed in)
  // Throws std::invalid_argument naming the field and its allowed values.
  void validate() const;
};

// The windows of a run of `steps` iterations as [first, end) spans: the warm-up as one (when
// there is one), then window after window (the last may be short). The rank is constant in
// each.
std::vector<std::pair<uint64_t, uint64_t>> entropy_windows(const EntropyConfig& config, uint64_t steps);

class EntropyController {
 public:
  explicit EntropyController(EntropyConfig config);

  // The gradient of `iteration` (iterations never go back; std::invalid_argument otherwise).
  // Estimates when iteration % estimate_every == 0 and returns the estimate; nullopt otherwise.
  std::optional<double> observe(uint64_t iteration, const float* grad, size_t n);
  std::optional<double> observe(uint64_t iteration, DType dtype, const void* grad, size_t n);

  // 0 (uncompressed) during warm-up, then the rank for the window holding `iteration`, decided
  // from the windows before it only. Same ordering rule as observe().
  uint32_t rank_for(uint64_t iteration);

  // One row per closed window (warm-up windows included, rank 0 there).
  struct WindowRecord {
    int64_t window = 0;            // 0 = first window after warm-up; negative inside warm-up
    uint64_t first_iteration = 0;
    int estimates = 0;
    double mean_bits = 0;          // meaningful when estimates > 0
    uint32_t rank = 0;             // the rank that ran in this window
  };
  const std::vector<WindowRecord>& history() const { return history_; }
  const EntropyConfig& config() const { return config_; }

 private:
  int64_t window_of(uint64_t iteration) const;
  void advance(uint64_t iteration);  // closes every window before iteration's
  void close_window();

  EntropyConfig config_;
  int64_t window_ = 0;  // the open window
  bool started_ = false;
  uint64_t last_iteration_ = 0;
  double sum_ = 0;
  int count_ = 0;
  std::optional<double> reference_;  // mean of the last closed window with estimates
  uint32_t rank_ = 0;                // rank of post-warm-up windows so far
  std::vector<WindowRecord> history_;
};

// --- the policy adapter ----------------------------------------------------------------------
// "lowrank:r=8": the codec of a Plan that runs the lowrank protocol at rank 8 (docs/LOWRANK.md).
std::string lowrank_codec_name(uint32_t rank);
// The rank of such a codec name; nullopt for any other name.
std::optional<uint32_t> parse_lowrank_codec(const std::string& codec);

// Matrix shape assumed for an allreduce of `elements` gradient elements when none is given:
// rows = the largest divisor of elements at most sqrt(elements), cols = elements / rows.
std::pair<uint64_t, uint64_t> near_square_shape(uint64_t elements);

// `entropy` as a policy: gradient allreduces ("grad" tensors) get a ring allreduce with codec
// identity during warm-up and lowrank_codec_name(rank) after it (rank clamped to the matrix);
// every other call goes to `fallback` (nccl-like when null). Its predicted time (with a
// topology and calibration) is the cost model's for two uncompressed fp32 ring allreduces of
// P (rows x r) and Q (cols x r); the compressor's own compute is not priced (no calibration
// entry for it yet).
class EntropyPolicy final : public Policy {
 public:
  explicit EntropyPolicy(std::shared_ptr<EntropyController> controller, std::unique_ptr<Policy> fallback = nullptr);
  std::string name() const override { return "entropy"; }
  void set_iteration(uint64_t iteration) { iteration_ = iteration; }
  // Overrides near_square_shape for a call (a workload knows its weight shapes).
  std::function<std::pair<uint64_t, uint64_t>(const CallInfo&)> shape_of;
  Plan choose(const CallInfo& call, const System& sys, double* predicted_s) override;

 private:
  std::shared_ptr<EntropyController> controller_;
  std::unique_ptr<Policy> fallback_;
  uint64_t iteration_ = 0;
};

}  // namespace compcoll::policy
