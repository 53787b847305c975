// shared/util/dtype.h — the element types compcoll's codecs accept, and their bit layout.
// Host-only header with no CUDA syntax; the per-element bit logic lives in exponent_bits.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace compcoll {

enum class DType : uint8_t { BF16 = 0, FP16 = 1, FP32 = 2 };

constexpr size_t dtype_size(DType t) { return t == DType::FP32 ? 4 : 2; }

// Lower-case names as used on command lines, in YAML and in output files.
std::string_view dtype_name(DType t);
// Parses "bf16" | "fp16" | "fp32"; nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);

}  // namespace compcoll
