// tests/test_util.h — deterministic test inputs shared by the test files: seeded random
// values of each dtype, and the bundled real tensors of tests/data.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "util/dtype.h"
#include "io/float_convert.h"
#include "util/splitmix64.h"

namespace compcoll::test {

// The project's generator with the helpers tests need.
struct SplitMix64 : compcoll::SplitMix64 {
  explicit SplitMix64(uint64_t seed) : compcoll::SplitMix64{seed} {}
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
  double normal() {
    const double u1 = uniform() + 1e-300, u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

// n Gaussian values of the given scale as `dtype` bit patterns (little-endian bytes).
inline std::vector<uint8_t> gaussian_bytes(DType dtype, size_t n, double scale, uint64_t seed) {
  SplitMix64 rng{seed};
  std::vector<uint8_t> out(n * dtype_size(dtype));
  for (size_t i = 0; i < n; ++i) {
    store_from_float(dtype, out.data(), i, static_cast<float>(rng.normal() * scale));
  }
  return out;
}

inline std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  SplitMix64 rng{seed};
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng.next() >> 56);
  return out;
}

// n values of a kind, as `dtype` bit patterns: 0 Gaussian (scale 0.02), 1 heavy tails (many
// gauss-exp escapes), 2 a third zeros, 3 subnormals and tiny values (gauss-exp references
// far below the usual), 4 Inf / NaN / -0 sprinkled, 5 one value, 6 uniform random bits
// (incompressible: stored chunks), 7 huge values (references near the top of the range).
inline std::vector<uint8_t> values_of_kind(DType dtype, size_t n, int kind, uint64_t seed) {
  if (kind == 6) return random_bytes(n * dtype_size(dtype), seed);
  SplitMix64 rng{seed};
  std::vector<uint8_t> out(n * dtype_size(dtype));
  for (size_t i = 0; i < n; ++i) {
    double v = rng.normal();
    switch (kind) {
      case 0: v *= 0.02; break;
      case 1: v *= std::exp(rng.normal() * 6); break;
      case 2: v = rng.uniform() < 0.33 ? 0.0 : v; break;
      case 3: v *= dtype == DType::FP16 ? 1e-6 : 1e-39; break;
      case 4: {
        const double u = rng.uniform();
        if (u < 0.01) v = std::numeric_limits<double>::infinity();
        else if (u < 0.02) v = std::numeric_limits<double>::quiet_NaN();
        else if (u < 0.03) v = -0.0;
        break;
      }
      case 7: v *= dtype == DType::FP16 ? 1e4 : 1e37; break;
      default: v = 1.5; break;
    }
    store_from_float(dtype, out.data(), i, static_cast<float>(v));
  }
  return out;
}

inline std::filesystem::path test_data_dir() { return COMPCOLL_TEST_DATA_DIR; }

// The bundled real tensors (tests/data/*.npy), sorted by name.
inline std::vector<std::filesystem::path> real_tensor_files() {
  std::vector<std::filesystem::path> files;
  if (!std::filesystem::exists(test_data_dir())) return files;
  for (const auto& e : std::filesystem::directory_iterator(test_data_dir()))
    if (e.path().extension() == ".npy") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace compcoll::test
