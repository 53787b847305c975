// shared/policy/entropy.cpp — see entropy.h.
#include "policy/entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "codec/lowrank_bits.h"
#include "util/splitmix64.h"

namespace compcoll::policy {

namespace {

void check_mantissa_bits(int m) {
  if (m < 0 || m > 7) throw std::invalid_argument("entropy: mantissa_bits: expected 0..7, got " + std::to_string(m));
}

uint32_t symbol(float v, int mantissa_bits) { return float_bits(v) >> (23 - mantissa_bits); }

EntropyEstimate entropy_of(const std::vector<uint32_t>& hist, uint64_t samples) {
  EntropyEstimate e;
  e.samples = samples;
  if (samples == 0) return e;
  const double s = static_cast<double>(samples);
  double h = 0;
  uint64_t occupied = 0;
  for (uint32_t c : hist)
    if (c > 0) {
      const double p = c / s;
      h -= p * std::log2(p);
      ++occupied;
    }
  // Miller-Madow: the plug-in estimate's bias, (K - 1) / (2 s) nats.
  e.bits = h + static_cast<double>(occupied - 1) / (2.0 * s * std::log(2.0));
  return e;
}

}  // namespace

EntropyEstimate entropy_full(DType dtype, const void* data, uint64_t n, int mantissa_bits) {
  check_mantissa_bits(mantissa_bits);
  std::vector<uint32_t> hist(size_t{1} << (9 + mantissa_bits), 0);
  for (uint64_t i = 0; i < n; ++i) ++hist[symbol(load_as_float(dtype, data, i), mantissa_bits)];
  return entropy_of(hist, n);
}

EntropyEstimate entropy_sampled(DType dtype, const void* data, uint64_t n, double fraction, uint64_t min_samples,
                                uint64_t seed, int mantissa_bits) {
  check_mantissa_bits(mantissa_bits);
  if (!(fraction > 0 && fraction <= 1))
    throw std::invalid_argument("entropy: sample_fraction: expected a value in (0, 1], got " + std::to_string(fraction));
  const uint64_t want = static_cast<uint64_t>(std::ceil(fraction * static_cast<double>(n)));
  const uint64_t s = std::min(n, std::max(want, min_samples));
  if (s == n) return entropy_full(dtype, data, n, mantissa_bits);
  std::vector<uint32_t> hist(size_t{1} << (9 + mantissa_bits), 0);
  SplitMix64 rng{seed};
  for (uint64_t t = 0; t < s; ++t) {
    const uint64_t i = static_cast<uint64_t>((static_cast<unsigned __int128>(rng.next()) * n) >> 64);
    ++hist[symbol(load_as_float(dtype, data, i), mantissa_bits)];
  }
  return entropy_of(hist, s);
}

void EntropyConfig::validate() const {
  auto bad = [](const std::string& what) { throw std::invalid_argument("entropy: " + what); };
  if (window == 0) bad("window: expected a positive number of iterations");
  if (estimate_every == 0) bad("estimate_every: expected a positive number of iterations");
  if (!(sample_fraction > 0 && sample_fraction <= 1))
    bad("sample_fraction: expected a value in (0, 1], got " + std::to_string(sample_fraction));
  if (rank_min < 1 || rank_min > rank_max)
    bad("rank_min, rank_max: expected 1 <= rank_min <= rank_max, got " + std::to_string(rank_min) + ", " +
        std::to_string(rank_max));
  if (rank_start != 0 && (rank_start < rank_min || rank_start > rank_max))
    bad("rank_start: expected 0 or a rank in [rank_min, rank_max], got " + std::to_string(rank_start));
  if (!(dead_band_bits >= 0)) bad("dead_band_bits: expected >= 0");
  if (!(gain > 0)) bad("gain: expected > 0");
  check_mantissa_bits(mantissa_bits);
}

EntropyController::EntropyController(EntropyConfig config) : config_(config) {
  config_.validate();
  rank_ = config_.rank_start != 0 ? config_.rank_start : config_.rank_max;
}

int64_t EntropyController::window_of(uint64_t iteration) const {
  const int64_t d = static_cast<int64_t>(iteration) - static_cast<int64_t>(config_.warmup_steps);
  const int64_t w = static_cast<int64_t>(config_.window);
  return d >= 0 ? d / w : -((-d + w - 1) / w);
}

void EntropyController::advance(uint64_t iteration) {
  if (!started_) {
    started_ = true;
    window_ = window_of(iteration);
  } else if (iteration < last_iteration_) {
    throw std::invalid_argument("entropy: iteration " + std::to_string(iteration) + " after " +
                                std::to_string(last_iteration_) + ": iterations must not go back");
  }
  last_iteration_ = iteration;
  const int64_t target = window_of(iteration);
  while (window_ < target) {
    close_window();
    ++window_;
  }
}

void EntropyController::close_window() {
  WindowRecord rec;
  rec.window = window_;
  rec.first_iteration = static_cast<uint64_t>(static_cast<int64_t>(config_.warmup_steps) +
                                              window_ * static_cast<int64_t>(config_.window));
  if (window_ < 0 && rec.first_iteration > config_.warmup_steps) rec.first_iteration = 0;  // partial first window
  rec.estimates = count_;
  rec.rank = window_ >= 0 ? rank_ : 0;
  if (count_ > 0) {
    const double mean = sum_ / count_;
    rec.mean_bits = mean;
    if (window_ >= 0 && reference_) {
      const double delta = mean - *reference_;
      if (std::abs(delta) > config_.dead_band_bits) {
        const double target = std::log2(static_cast<double>(rank_)) + config_.gain * delta;
        int64_t r = std::llround(std::exp2(std::clamp(target, 0.0, 31.0)));
        r = delta > 0 ? std::max<int64_t>(r, rank_ + 1) : std::min<int64_t>(r, static_cast<int64_t>(rank_) - 1);
        rank_ = static_cast<uint32_t>(std::clamp<int64_t>(r, config_.rank_min, config_.rank_max));
      }
    }
    reference_ = mean;
  }
  history_.push_back(rec);
  sum_ = 0;
  count_ = 0;
}

std::optional<double> EntropyController::observe(uint64_t iteration, DType dtype, const void* grad, size_t n) {
  advance(iteration);
  if (iteration % config_.estimate_every != 0 || n == 0) return std::nullopt;
  const uint64_t seed = config_.seed ^ (iteration * 0x9E3779B97F4A7C15ull);
  const double bits =
      entropy_sampled(dtype, grad, n, config_.sample_fraction, config_.min_samples, seed, config_.mantissa_bits).bits;
  sum_ += bits;
  ++count_;
  return bits;
}

std::optional<double> EntropyController::observe(uint64_t iteration, const float* grad, size_t n) {
  return observe(iteration, DType::FP32, grad, n);
}

uint32_t EntropyController::rank_for(uint64_t iteration) {
  advance(iteration);
  return iteration < config_.warmup_steps ? 0 : rank_;
}

// --- the policy adapter ----------------------------------------------------------------------

std::string lowrank_codec_name(uint32_t rank) { return "lowrank:r=" + std::to_string(rank); }

std::optional<uint32_t> parse_lowrank_codec(const std::string& codec) {
  const std::string prefix = "lowrank:r=";
  if (codec.rfind(prefix, 0) != 0 || codec.size() == prefix.size() || codec.size() > prefix.size() + 9) return std::nullopt;
  uint64_t r = 0;
  for (size_t i = prefix.size(); i < codec.size(); ++i) {
    if (codec[i] < '0' || codec[i] > '9') return std::nullopt;
    r = r * 10 + static_cast<uint64_t>(codec[i] - '0');
  }
  if (r == 0 || codec[prefix.size()] == '0') return std::nullopt;
  return static_cast<uint32_t>(r);
}

std::pair<uint64_t, uint64_t> near_square_shape(uint64_t elements) {
  if (elements == 0) return {0, 0};
  uint64_t rows = static_cast<uint64_t>(std::sqrt(static_cast<double>(elements)));
  while (rows * rows > elements) --rows;
  while ((rows + 1) * (rows + 1) <= elements) ++rows;
  while (elements % rows != 0) --rows;
  return {rows, elements / rows};
}

EntropyPolicy::EntropyPolicy(std::shared_ptr<EntropyController> controller, std::unique_ptr<Policy> fallback)
    : controller_(std::move(controller)), fallback_(std::move(fallback)) {
  if (!controller_) throw std::invalid_argument("entropy policy: no controller");
  if (!fallback_) fallback_ = make_policy("nccl-like");
}

Plan EntropyPolicy::choose(const CallInfo& call, const System& sys, double* predicted) {
  if (call.tensor != "grad" || call.collective != sched::Collective::AllReduce)
    return fallback_->choose(call, sys, predicted);
  Plan plan;
  plan.algorithm = "ring";
  plan.placement = sched::Placement::None;
  const uint32_t rank = controller_->rank_for(iteration_);
  const uint64_t elements = call.bytes / dtype_size(call.dtype);
  const auto [rows, cols] = shape_of ? shape_of(call) : near_square_shape(elements);
  const uint32_t r = static_cast<uint32_t>(std::min<uint64_t>(rank, std::min(rows, cols)));
  plan.codec = r == 0 ? "identity" : lowrank_codec_name(r);
  if (predicted) {
    *predicted = 0;
    if (sys.topology && sys.calibration) {
      RouteCache routes(*sys.topology);
      auto price = [&](uint64_t bytes, DType dtype) {
        CallInfo c = call;
        c.bytes = bytes;
        c.dtype = dtype;
        Plan p;
        p.algorithm = "ring";
        const auto s = sched::build_schedule(build_spec(p, c, *sys.topology));
        return predict(s, *sys.topology, *sys.calibration, "identity", 1.0, sys.net, routes).time_s;
      };
      *predicted = r == 0 ? price(call.bytes, call.dtype)
                          : price(rows * r * 4, DType::FP32) + price(cols * r * 4, DType::FP32);
    }
  }
  return plan;
}

std::vector<std::pair<uint64_t, uint64_t>> entropy_windows(const EntropyConfig& config, uint64_t steps) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  uint64_t first = std::min(config.warmup_steps, steps);
  if (first > 0) out.emplace_back(0, first);
  for (; first < steps; first += config.window) out.emplace_back(first, std::min(first + config.window, steps));
  return out;
}

}  // namespace compcoll::policy
