// tests/test_util.h — deterministic test inputs shared by the test files: seeded random
// values of each dtype, and the bundled real tensors of tests/data.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "codec/dtype.h"
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
