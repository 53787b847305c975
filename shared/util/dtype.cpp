// shared/util/dtype.cpp — names of the element types.
#include "util/dtype.h"

namespace compcoll {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::BF16: return "bf16";
    case DType::FP16: return "fp16";
    case DType::FP32: return "fp32";
  }
  return "unknown";
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "bf16") return DType::BF16;
  if (name == "fp16") return DType::FP16;
  if (name == "fp32") return DType::FP32;
  return std::nullopt;
}

}  // namespace compcoll
