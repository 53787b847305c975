// shared/io/float_convert.h — bit-exact conversions between fp32 and the 16-bit float formats.
// Header-only so host code and (later) CUDA kernels round identically. Must never depend on
// the current FP rounding mode, FTZ/DAZ flags or hardware conversion instructions: results are
// defined by integer arithmetic on bit patterns, so every platform gets the same bits.
#pragma once

#include <cstdint>
#include <cstring>

#include "util/dtype.h"
#include "util/hd.h"

// __builtin_bit_cast makes the conversions usable in constant expressions; the memcpy fallback
// is for compilers without it (still correct, just not constexpr).
#if defined(__has_builtin)
#if __has_builtin(__builtin_bit_cast)
#define COMPCOLL_FLOAT_CONVERT_CONSTEXPR 1
#endif
#endif

#ifdef COMPCOLL_FLOAT_CONVERT_CONSTEXPR
#define COMPCOLL_FC_CONSTEXPR constexpr
#else
#define COMPCOLL_FC_CONSTEXPR
#endif

namespace compcoll {

COMPCOLL_HD inline COMPCOLL_FC_CONSTEXPR uint32_t float_bits(float value) {
#ifdef COMPCOLL_FLOAT_CONVERT_CONSTEXPR
  return __builtin_bit_cast(uint32_t, value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

COMPCOLL_HD inline COMPCOLL_FC_CONSTEXPR float float_from_bits(uint32_t bits) {
#ifdef COMPCOLL_FLOAT_CONVERT_CONSTEXPR
  return __builtin_bit_cast(float, bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

// Round-to-nearest-even; values beyond bf16's range become ±Inf, NaN stays a quiet NaN with its
// sign and top payload bits (a plain truncation could turn a NaN whose payload sits only in the
// low 16 bits into Inf).
COMPCOLL_HD inline COMPCOLL_FC_CONSTEXPR uint16_t float_to_bf16_rne(float value) {
  const uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7fff plus the kept LSB rounds ties to even; a carry out of the mantissa bumps the
  // exponent, which is exactly the right result, including overflow to Inf.
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

COMPCOLL_HD inline COMPCOLL_FC_CONSTEXPR float bf16_to_float(uint16_t bits) {
  return float_from_bits(static_cast<uint32_t>(bits) << 16);
}

// Round-to-nearest-even; |value| ≥ 65520 (the tie above fp16's max 65504, which rounds to the
// even neighbour 2^16) becomes ±Inf, results below 2^-14 become fp16 subnormals or ±0, and NaN
// becomes a quiet NaN keeping its sign and top payload bits.
COMPCOLL_HD inline COMPCOLL_FC_CONSTEXPR uint16_t float_to_fp16_rne(float value) {
  const uint32_t bits = float_bits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;

  if (magnitude > 0x7f800000u) {
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x03ffu));
  }
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);

  if (magnitude >= 0x38800000u) {
    // Normal in fp16: rebias the exponent (127 → 15) and round away 13 mantissa bits. A carry
    // out of the mantissa correctly bumps the exponent; the Inf check above keeps it below 31.
    const uint32_t rebiased = magnitude - 0x38000000u;
    const uint32_t rounded = rebiased + 0x0fffu + ((rebiased >> 13) & 1u);
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }

  // Subnormal or zero in fp16: the result is value / 2^-24 rounded to an integer. For a normal
  // fp32 with biased exponent e and 24-bit significand m that is m >> (126 - e).
  const uint32_t exponent = magnitude >> 23;
  const uint32_t shift = 126u - exponent;
  if (exponent == 0 || shift > 24u) return sign;  // below 2^-25: rounds to ±0
  const uint32_t significand = (magnitude & 0x007fffffu) | 0x00800000u;
  uint32_t quotient = significand >> shift;
  const uint32_t remainder = significand & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (remainder > half || (remainder == half && (quotient & 1u))) ++quotient;
  // quotient may reach 0x400, which is the bit pattern of the smallest normal: still correct.
  return static_cast<uint16_t>(sign | quotient);
}

// Exact (every fp16 value is an fp32 value). NaN payloads are kept bit for bit, so a signalling
// NaN stays signalling, unlike F16C's vcvtph2ps, which quiets it.
COMPCOLL_HD inline COMPCOLL_FC_CONSTEXPR float fp16_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x03ffu;

  if (exponent == 0x1fu) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return float_from_bits(sign);

  // Subnormal: mantissa · 2^-24 is a normal fp32; renormalise around its leading one bit.
  uint32_t leading_bit = 9;
  while ((mantissa >> leading_bit) == 0) --leading_bit;
  const uint32_t fp32_exponent = leading_bit + 103u;  // (leading_bit - 24) + 127
  const uint32_t fp32_mantissa = (mantissa << (23u - leading_bit)) & 0x007fffffu;
  return float_from_bits(sign | (fp32_exponent << 23) | fp32_mantissa);
}

// Element i of a buffer of `dtype` values (aligned to their size), widened exactly to fp32.
COMPCOLL_HD inline float load_as_float(DType dtype, const void* data, uint64_t i) {
  switch (dtype) {
    case DType::BF16: return bf16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::FP16: return fp16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::FP32: break;
  }
  return static_cast<const float*>(data)[i];
}

// The other way: stores `value` as element i of a buffer of `dtype` values, rounded to nearest
// even for bf16 and fp16 (native byte order, as load_as_float reads it).
COMPCOLL_HD inline void store_from_float(DType dtype, void* data, uint64_t i, float value) {
  if (dtype == DType::FP32) {
    memcpy(static_cast<unsigned char*>(data) + 4 * i, &value, 4);
    return;
  }
  const uint16_t half = dtype == DType::BF16 ? float_to_bf16_rne(value) : float_to_fp16_rne(value);
  memcpy(static_cast<unsigned char*>(data) + 2 * i, &half, 2);
}

}  // namespace compcoll
