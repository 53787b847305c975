// tests/policy/test_entropy.cpp — the `entropy` policy (policy/entropy.h): the estimator's
// order on random bits, Gaussian, uniform and constant data, its scale invariance, its sampled
// estimate against the full-data one on the bundled real gradients; the controller's warm-up,
// its rank moving with the entropy only at window boundaries and within bounds; the policy
// adapter's plans and codec names.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "calibration/calibration.h"
#include "io/tensor_file.h"
#include "policy/entropy.h"
#include "test_util.h"
#include "topology/topology.h"

using namespace compcoll;
using namespace compcoll::policy;

namespace {

std::vector<float> gaussian(size_t n, double scale, uint64_t seed) {
  test::SplitMix64 rng{seed};
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal() * scale);
  return v;
}

// A fraction `dense` of Gaussian elements, the rest zero: entropy rises with `dense`.
std::vector<float> sparse_gaussian(size_t n, double dense, uint64_t seed) {
  test::SplitMix64 rng{seed};
  std::vector<float> v(n);
  for (auto& x : v) {
    const double g = rng.normal();
    x = rng.uniform() < dense ? static_cast<float>(g * 1e-3) : 0.0f;
  }
  return v;
}

double full(const std::vector<float>& v, int m = 2) { return entropy_full(DType::FP32, v.data(), v.size(), m).bits; }

}  // namespace

TEST_CASE("entropy estimator: random bits > Gaussian > uniform values > constant", "[entropy]") {
  const size_t n = 1 << 16;
  std::vector<float> bits(n), uniform(n), constant(n, 0.37f);
  test::SplitMix64 rng{1};
  for (auto& x : bits) {
    const uint32_t b = static_cast<uint32_t>(rng.next());
    std::memcpy(&x, &b, 4);
  }
  for (auto& x : uniform) x = static_cast<float>(2 * rng.uniform() - 1);
  const auto gauss = gaussian(n, 1.0, 2);
  const double hb = full(bits), hg = full(gauss), hu = full(uniform), hc = full(constant);
  CAPTURE(hb, hg, hu, hc);
  CHECK(hb > 10.9);  // 11-bit symbols, all equally likely: log2(2048) = 11
  CHECK(hb <= 11.0 + 1e-9);
  CHECK(hg > hu + 0.3);  // the Gaussian spreads over more binades than uniform(-1, 1)
  CHECK(hb > hg + 4);
  CHECK(hu > 4.5);  // sign 1 + binades 2 + 2 mantissa bits, about 5
  CHECK(hc == 0.0);
  // More mantissa bits, more entropy (for a continuous distribution, about one bit each).
  CHECK(full(gauss, 4) > full(gauss, 2) + 1.5);
  // Scale invariant: a power of two only shifts the exponents.
  auto scaled = gauss;
  for (auto& x : scaled) x *= 0.0078125f;
  CHECK(full(scaled) == full(gauss));
  // Sampling respects the order too.
  const double sb = entropy_sampled(DType::FP32, bits.data(), n, 0.05, 0, 9).bits;
  const double sg = entropy_sampled(DType::FP32, gauss.data(), n, 0.05, 0, 9).bits;
  const double sc = entropy_sampled(DType::FP32, constant.data(), n, 0.05, 0, 9).bits;
  CHECK(sb > sg);
  CHECK(sg > sc);
  CHECK(sc == 0.0);
}

TEST_CASE("entropy estimator: sampled estimates are within 0.08 bits (4 sigma) of the full data on the real gradients", "[entropy]") {
  int files = 0;
  for (const auto& path : test::real_tensor_files()) {
    const std::string name = path.filename().string();
    if (name.rfind("grad.", 0) != 0) continue;
    const DType dt = name.find(".fp32.") != std::string::npos ? DType::FP32 : DType::BF16;
    const auto t = load_tensors(path.string(), dt).at(0);
    const double h = entropy_full(dt, t.bytes.data(), t.elements()).bits;
    for (uint64_t seed : {1u, 2u, 3u}) {
      // 1% of 65,536 or 131,072 elements is below min_samples: 4,096 samples (3-6%).
      const auto s = entropy_sampled(dt, t.bytes.data(), t.elements(), 0.01, 4096, seed);
      CAPTURE(name, seed, h, s.bits, s.samples);
      CHECK(s.samples == 4096);
      CHECK(std::abs(s.bits - h) < 0.08);  // measured: bias -0.006, sd 0.019 bits at 4,096 samples
    }
    // And 1% of a 16x larger tensor (the same file repeated): 20,972 samples, closer still.
    std::vector<uint8_t> big;
    for (int i = 0; i < 16; ++i) big.insert(big.end(), t.bytes.begin(), t.bytes.end());
    const auto s = entropy_sampled(dt, big.data(), 16 * t.elements(), 0.01, 4096, 5);
    CAPTURE(name, h, s.bits);
    CHECK(std::abs(s.bits - h) < 0.04);
    ++files;
  }
  CHECK(files == 5);
}

namespace {

EntropyConfig small_config() {
  EntropyConfig c;
  c.warmup_steps = 20;
  c.window = 10;
  c.estimate_every = 2;
  c.sample_fraction = 1.0;  // the full 8,192 elements: the test is about the controller, not sampling noise
  c.min_samples = 0;
  c.rank_min = 2;
  c.rank_max = 32;
  c.rank_start = 8;
  return c;
}

// Drives a controller for `iterations` with the density per iteration given by `dense(it)`;
// checks at every iteration that the rank changes only at a window boundary and stays within
// bounds, and that observing an iteration does not change its own rank. Returns the rank per
// iteration.
template <class Dense>
std::vector<uint32_t> drive(EntropyController& c, uint64_t iterations, Dense dense) {
  const auto& cfg = c.config();
  std::vector<uint32_t> ranks;
  for (uint64_t it = 0; it < iterations; ++it) {
    const uint32_t r = c.rank_for(it);
    const auto g = sparse_gaussian(8192, dense(it), 1000 + it);
    c.observe(it, g.data(), g.size());
    CAPTURE(it, r);
    REQUIRE(c.rank_for(it) == r);
    if (it < cfg.warmup_steps) {
      REQUIRE(r == 0);
    } else {
      REQUIRE(r >= cfg.rank_min);
      REQUIRE(r <= cfg.rank_max);
    }
    if (it > cfg.warmup_steps && r != ranks.back()) REQUIRE((it - cfg.warmup_steps) % cfg.window == 0);
    ranks.push_back(r);
  }
  return ranks;
}

}  // namespace

TEST_CASE("entropy controller: warm-up uncompressed, then rank_start", "[entropy]") {
  EntropyController c(small_config());
  const auto ranks = drive(c, 30, [](uint64_t) { return 0.5; });
  for (uint64_t it = 0; it < 20; ++it) CHECK(ranks[it] == 0);
  for (uint64_t it = 20; it < 30; ++it) CHECK(ranks[it] == 8);
  EntropyConfig d = small_config();
  d.rank_start = 0;
  EntropyController c2(d);
  CHECK(c2.rank_for(20) == 32);  // rank_start 0: rank_max
}

TEST_CASE("entropy controller: rank rises with entropy, falls with it, within bounds", "[entropy]") {
  EntropyConfig cfg = small_config();
  cfg.rank_max = 64;
  cfg.gain = 2;  // ~0.6 bits more per window: x2.3
  EntropyController c(cfg);
  // Windows start at 20, 30, ...: density up by 0.1 per window until 100, then down.
  auto dense = [](uint64_t it) {
    const int w = it < 20 ? -1 : static_cast<int>((it - 20) / 10);
    return w <= 5 ? 0.3 + 0.1 * std::max(w, 0) : std::max(0.05, 0.8 - 0.15 * (w - 5));
  };
  const auto ranks = drive(c, 200, dense);
  auto rank_of_window = [&](int w) { return ranks[20 + 10 * w]; };
  std::string trace;
  for (int w = 0; w < 18; ++w) trace += std::to_string(rank_of_window(w)) + " ";
  CAPTURE(trace);
  CHECK(rank_of_window(0) == 8);
  // Window 0's entropy vs the warm-up's last window: equal densities, no move.
  CHECK(rank_of_window(1) == 8);
  for (int w = 2; w <= 4; ++w) {
    CAPTURE(w);
    CHECK(rank_of_window(w) > rank_of_window(w - 1));  // rising entropy: up
  }
  CHECK(rank_of_window(6) == 64);  // capped at rank_max
  for (int w = 7; w <= 8; ++w) {
    CAPTURE(w);
    CHECK(rank_of_window(w) < rank_of_window(w - 1));  // falling entropy: down
  }
  CHECK(rank_of_window(17) == 2);  // floored at rank_min
  // history(): one row per closed window, with the rank that ran in it.
  const auto& h = c.history();
  REQUIRE(h.size() >= 19);
  CHECK(h[0].window == -2);
  CHECK(h[1].window == -1);
  CHECK(h[1].rank == 0);
  CHECK(h[2].window == 0);
  CHECK(h[2].rank == 8);
  CHECK(h[2].estimates == 5);
  CHECK(h[4].mean_bits > h[3].mean_bits);
}

TEST_CASE("entropy controller: steady entropy keeps the rank", "[entropy]") {
  EntropyController c(small_config());
  const auto ranks = drive(c, 150, [](uint64_t) { return 0.6; });
  for (uint64_t it = 20; it < 150; ++it) CHECK(ranks[it] == 8);
  // A dead band of zero moves on the sampling noise alone: the band is what holds it.
  EntropyConfig d = small_config();
  d.dead_band_bits = 0;
  EntropyController c2(d);
  const auto r2 = drive(c2, 150, [](uint64_t) { return 0.6; });
  bool moved = false;
  for (uint64_t it = 20; it < 150; ++it) moved = moved || r2[it] != 8;
  CHECK(moved);
}

TEST_CASE("entropy controller: estimates only every estimate_every iterations; no going back", "[entropy]") {
  EntropyConfig cfg = small_config();
  cfg.estimate_every = 3;
  EntropyController c(cfg);
  const auto g = gaussian(4096, 1.0, 1);
  CHECK(c.observe(0, g.data(), g.size()).has_value());
  CHECK_FALSE(c.observe(1, g.data(), g.size()).has_value());
  CHECK_FALSE(c.observe(2, g.data(), g.size()).has_value());
  const auto e = c.observe(3, g.data(), g.size());
  REQUIRE(e.has_value());
  CHECK(*e > 5.0);
  CHECK_THROWS_AS(c.observe(2, g.data(), g.size()), std::invalid_argument);
  CHECK_THROWS_AS(c.rank_for(1), std::invalid_argument);
}

TEST_CASE("entropy config: bad values are refused, naming the field", "[entropy]") {
  auto refuse = [](auto edit, const std::string& field) {
    EntropyConfig c = small_config();
    edit(c);
    CHECK_THROWS_WITH(EntropyController(c), Catch::Contains(field));
  };
  refuse([](EntropyConfig& c) { c.window = 0; }, "window");
  refuse([](EntropyConfig& c) { c.estimate_every = 0; }, "estimate_every");
  refuse([](EntropyConfig& c) { c.sample_fraction = 0; }, "sample_fraction");
  refuse([](EntropyConfig& c) { c.sample_fraction = 1.5; }, "sample_fraction");
  refuse([](EntropyConfig& c) { c.rank_min = 40; }, "rank_min");
  refuse([](EntropyConfig& c) { c.rank_min = 0; }, "rank_min");
  refuse([](EntropyConfig& c) { c.rank_start = 64; }, "rank_start");
  refuse([](EntropyConfig& c) { c.gain = 0; }, "gain");
  refuse([](EntropyConfig& c) { c.mantissa_bits = 8; }, "mantissa_bits");
  CHECK_NOTHROW(EntropyController(small_config()));
}

namespace {

class Marker final : public Policy {
 public:
  std::string name() const override { return "marker"; }
  Plan choose(const CallInfo&, const System&, double* predicted) override {
    if (predicted) *predicted = 1.5;
    Plan p;
    p.codec = "marker";
    return p;
  }
};

}  // namespace

TEST_CASE("entropy policy: identity in warm-up, lowrank:r=N after, others to the fallback", "[entropy]") {
  auto controller = std::make_shared<EntropyController>(small_config());
  EntropyPolicy policy(controller, std::make_unique<Marker>());
  CHECK(policy.name() == "entropy");
  System sys;  // no topology: no prediction
  CallInfo call;
  call.collective = sched::Collective::AllReduce;
  call.tensor = "grad";
  call.dtype = DType::BF16;
  call.bytes = 256 * 1024 * 2;
  double predicted = -1;
  policy.set_iteration(5);
  Plan p = policy.choose(call, sys, &predicted);
  CHECK(p.codec == "identity");
  CHECK(predicted == 0.0);
  policy.set_iteration(25);
  p = policy.choose(call, sys, &predicted);
  CHECK(p.codec == "lowrank:r=8");
  CHECK(p.placement == sched::Placement::None);
  CHECK(parse_lowrank_codec(p.codec) == 8u);
  // Rank clamped to the matrix: 16 elements are 4 x 4.
  call.bytes = 16 * 2;
  CHECK(policy.choose(call, sys, nullptr).codec == "lowrank:r=4");
  // Other tensors and collectives: the fallback's plan.
  call.tensor = "act";
  CHECK(policy.choose(call, sys, &predicted).codec == "marker");
  CHECK(predicted == 1.5);
  call.tensor = "grad";
  call.collective = sched::Collective::AllGather;
  CHECK(policy.choose(call, sys, nullptr).codec == "marker");
}

TEST_CASE("entropy policy: codec names and shapes", "[entropy]") {
  CHECK(lowrank_codec_name(16) == "lowrank:r=16");
  CHECK(parse_lowrank_codec("lowrank:r=16") == 16u);
  CHECK_FALSE(parse_lowrank_codec("lowrank:r=0").has_value());
  CHECK_FALSE(parse_lowrank_codec("lowrank:r=08").has_value());
  CHECK_FALSE(parse_lowrank_codec("lowrank:r=").has_value());
  CHECK_FALSE(parse_lowrank_codec("lowrank:r=8x").has_value());
  CHECK_FALSE(parse_lowrank_codec("lowrank").has_value());
  CHECK_FALSE(parse_lowrank_codec("gauss-exp").has_value());
  CHECK(near_square_shape(256 * 1024) == std::pair<uint64_t, uint64_t>{512, 512});
  CHECK(near_square_shape(256 * 1000) == std::pair<uint64_t, uint64_t>{500, 512});
  CHECK(near_square_shape(13) == std::pair<uint64_t, uint64_t>{1, 13});
  CHECK(near_square_shape(1) == std::pair<uint64_t, uint64_t>{1, 1});
}

TEST_CASE("entropy policy: predicted time is the cost model's for the P and Q allreduces", "[entropy]") {
  const std::string root = COMPCOLL_SOURCE_DIR;
  const auto t = topo::load_topology(root + "/topologies/h100-64gpu.yaml");
  const auto cal = calib::load_calibration(root + "/calibration/h100-derived.yaml");
  System sys;
  sys.topology = &t;
  sys.calibration = &cal;
  sys.codecs = {"identity"};
  CallInfo call;
  call.tensor = "grad";
  call.dtype = DType::BF16;
  call.nranks = 64;
  call.bytes = uint64_t{4096} * 4096 * 2;  // a 4096 x 4096 bf16 weight gradient, 32 MiB
  auto controller = std::make_shared<EntropyController>(small_config());
  EntropyPolicy policy(controller);
  double warm = 0, low = 0;
  policy.set_iteration(0);
  CHECK(policy.choose(call, sys, &warm).codec == "identity");
  policy.set_iteration(20);
  CHECK(policy.choose(call, sys, &low).codec == "lowrank:r=8");
  CAPTURE(warm, low);
  CHECK(warm > 0);
  CHECK(low > 0);
  // 2 x 4096 x 8 x 4 bytes = 256 KiB instead of 32 MiB, but two flat rings over 64 ranks are
  // latency-bound: measured 1.02 ms against 1.97 ms uncompressed.
  CHECK(low < 0.7 * warm);
}
