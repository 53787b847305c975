#pragma once
// A JSON value read as a count, an index or a rank: a whole number >= 0. nlohmann's get<int>()
// takes any number and converts it without a word (1.5 -> 1, 2^32 + 2 -> 2, -1e308 undefined),
// so every reader of such a field asks here first and names the key where the answer is none.

#include <cmath>
#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

namespace compcoll::util {

// v as a whole number >= 0; nullopt where it is none: a negative, a fraction, a string, null, a
// number past 2^64. A float with no fraction counts only where `integral_floats` is set (a
// writer that prints every number as a double, 1000.0 for 1000).
inline std::optional<uint64_t> natural_number(const nlohmann::json& v, bool integral_floats = false) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i >= 0) return static_cast<uint64_t>(i);
    return std::nullopt;
  }
  if (integral_floats && v.is_number_float()) {
    const double d = v.get<double>();
    if (d >= 0 && d < 0x1p64 && d == std::floor(d)) return static_cast<uint64_t>(d);
  }
  return std::nullopt;
}

}  // namespace compcoll::util
