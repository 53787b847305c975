// tests/sim/test_entropy_run.cpp — the EDGC replay (sim/entropy_run.h) on a synthetic trace
// whose gradients change character half-way: uncompressed through warm-up, one rank per
// window, the rank moving when the entropy moves, the compressor's error in [0, 1] and zero at
// full rank; a trace of the wrong shape or with a NaN is a one-line error naming the key.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "config/yaml_node.h"
#include "sim/entropy_run.h"

using namespace compcoll;

namespace {

// A float32 .npy of the given shape.
std::string write_npy(const std::string& name, const std::vector<float>& v, const std::string& shape) {
  const auto path = std::filesystem::temp_directory_path() / ("compcoll-test-entropy-" + name + ".npy");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  f.put(static_cast<char>(len & 0xff)).put(static_cast<char>(len >> 8));
  f << header;
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return path.string();
}

// Steps of a rows x cols gradient: Gaussian for the first half, then heavy-tailed (Gaussian
// cubed), whose sign-exponent-mantissa histogram is wider: the entropy rises.
std::vector<float> trace(uint64_t steps, uint64_t rows, uint64_t cols) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(steps * rows * cols);
  for (uint64_t s = 0; s < steps; ++s)
    for (uint64_t i = 0; i < rows * cols; ++i) {
      const float x = g(rng) * 1e-3f;
      v[s * rows * cols + i] = s < steps / 2 ? x : x * x * x * 1e6f;
    }
  return v;
}

}  // namespace

TEST_CASE("EDGC replay: warm-up uncompressed, one rank per window, rank follows the entropy, errors bounded",
          "[sim][entropy]") {
  study::EntropyRunSpec spec;
  spec.trace = write_npy("trace", trace(80, 16, 24), "(80, 16, 24)");
  auto& c = spec.config;
  c.warmup_steps = 10;
  c.window = 10;
  c.estimate_every = 2;
  c.sample_fraction = 1.0;
  c.min_samples = 64;
  c.rank_min = 2;
  c.rank_max = 8;
  const auto rp = sim::replay_entropy(spec, "x.yaml", {4, 16});
  REQUIRE(rp.steps == 80);
  CHECK(rp.rows == 16);
  CHECK(rp.cols == 24);
  for (uint64_t s = 0; s < rp.steps; ++s) {
    CAPTURE(s, rp.rank[s], rp.error[s]);
    if (s < c.warmup_steps) {
      CHECK(rp.rank[s] == 0);
      CHECK(rp.error[s] == 0);
    } else {
      CHECK(rp.rank[s] >= c.rank_min);
      CHECK(rp.rank[s] <= c.rank_max);
      CHECK(rp.rank[s] == rp.rank[c.warmup_steps + (s - c.warmup_steps) / c.window * c.window]);
      CHECK(rp.error[s] >= 0);
      CHECK(rp.error[s] <= 1 + 1e-6);
    }
    CHECK(std::isnan(rp.bits[s]) == (s % c.estimate_every != 0));
  }
  // The first window runs rank_max; the jump in entropy at step 40 raises nothing above
  // rank_max but the rank must have moved off it before (flat entropy keeps it) or stay: what
  // is certain is that it never falls while the entropy rises.
  CHECK(rp.rank[10] == c.rank_max);
  CHECK(rp.bits[50] > rp.bits[30] + 0.5);
  CHECK(rp.rank[50] >= rp.rank[30]);
  // Fixed ranks: uncompressed in warm-up; rank 16 on a 16 x 24 matrix is full rank, so the
  // projection loses nothing beyond rounding; rank 4 loses a good part of a random matrix.
  CHECK(rp.trace_rank(16) == 16);
  for (uint64_t s = c.warmup_steps; s < rp.steps; ++s) {
    CAPTURE(s);
    CHECK(rp.fixed_error.at(16)[s] < 1e-3);
    CHECK(rp.fixed_error.at(4)[s] > 0.2);
  }
}

TEST_CASE("EDGC replay: a trace of the wrong shape, with a NaN, or missing is one line naming the key", "[sim][entropy]") {
  study::EntropyRunSpec spec;
  auto message = [&] {
    try {
      sim::replay_entropy(spec, "exp.yaml", {});
    } catch (const config::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  spec.trace = write_npy("flat", std::vector<float>(64, 1.0f), "(64,)");
  CHECK_THAT(message(), Catch::StartsWith("exp.yaml: workload.entropy.trace: ") &&
                            Catch::Contains("expected a .npy of shape (steps, rows, cols), got shape (64): 1 dimension(s)"));
  spec.trace = write_npy("empty", std::vector<float>{}, "(0, 4, 4)");
  CHECK_THAT(message(), Catch::Contains("expected a .npy of shape (steps, rows, cols), got shape (0, 4, 4): no steps"));
  std::vector<float> v(2 * 4 * 4, 0.5f);
  v[21] = NAN;
  spec.trace = write_npy("nan", v, "(2, 4, 4)");
  CHECK_THAT(message(), Catch::Contains("step 1 holds a NaN or infinite value"));
  spec.trace = "/nonexistent/trace.npy";
  CHECK_THAT(message(), Catch::StartsWith("exp.yaml: workload.entropy.trace: /nonexistent/trace.npy"));
  for (const std::string& m : {message()}) CHECK(m.find('\n') == std::string::npos);
}
