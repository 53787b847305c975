// shared/codec/fp8_bits.h — the arithmetic of the fp8-hadamard codec (TACO-style FP8 with a
// Walsh–Hadamard rotation and two scales per group), written once for the host reference and
// the CUDA kernels so the two produce the same bits. docs/FORMAT.md ("fp8-hadamard") is the
// specification; this file must agree with it.
//
// Determinism: every operation is one IEEE-754 binary32 operation rounded to nearest even, in
// a fixed order. On the device each goes through an explicit _rn intrinsic (never contracted
// into an FMA); the host source that uses this header is compiled with -ffp-contract=off.
// FP8 rounding is integer arithmetic on bit patterns, never a hardware conversion. No fast
// math anywhere. Allocation-free, exception-free; errors are returned as codes.
#pragma once

#include <cstdint>

#include "codec/format.h"
#include "util/hd.h"
#include "io/float_convert.h"

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace compcoll::fp8bits {

// ---- one rounding per operation -----------------------------------------------------------
#if defined(__CUDA_ARCH__)
__device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline float sqrt_rn(float a) { return __fsqrt_rn(a); }
#else
inline float add_rn(float a, float b) { return a + b; }
inline float sub_rn(float a, float b) { return a - b; }
inline float mul_rn(float a, float b) { return a * b; }
inline float div_rn(float a, float b) { return a / b; }
inline float sqrt_rn(float a) { return std::sqrt(a); }
#endif

COMPCOLL_HD inline float abs_f(float x) { return float_from_bits(float_bits(x) & 0x7FFFFFFFu); }
COMPCOLL_HD inline bool is_finite_bits(uint32_t fp32_bits) {
  return (fp32_bits & 0x7F800000u) != 0x7F800000u;
}

// ---- FP8 (OCP 8-bit floating point) --------------------------------------------------------
// E4M3: bias 7, no infinities, S.1111.111 is NaN, largest finite 448 (code 0x7E).
// E5M2: bias 15, IEEE-like, largest finite 57344 (code 0x7B), 0x7C infinity, above NaN.
struct Fp8Spec {
  uint32_t mant_bits;
  int32_t bias;
  uint32_t max_code;  // magnitude code of the largest finite value
  float max_value;
};
COMPCOLL_HD inline Fp8Spec fp8_spec(uint32_t fmt) {
  if (fmt == format::kFp8E5M2) return {2, 15, 0x7Bu, 57344.0f};
  return {3, 7, 0x7Eu, 448.0f};
}

// Round-to-nearest-even with saturation: |x| beyond the largest finite value (or a rounding
// that would reach past it) gives ±max. x must not be NaN (the encoder never passes one).
// fp32 subnormals lie far below half the smallest FP8 subnormal and give ±0.
COMPCOLL_HD inline uint8_t float_to_fp8(float x, uint32_t fmt) {
  const Fp8Spec s = fp8_spec(fmt);
  const uint32_t bits = float_bits(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t mag = bits & 0x7FFFFFFFu;
  const uint32_t e_field = mag >> 23;
  if (e_field == 0) return static_cast<uint8_t>(sign);
  const int32_t e = static_cast<int32_t>(e_field) - 127;  // unbiased exponent
  const int32_t max_e = static_cast<int32_t>(s.max_code >> s.mant_bits) - s.bias;
  if (e > max_e) return static_cast<uint8_t>(sign | s.max_code);
  const uint32_t m24 = (mag & 0x7FFFFFu) | 0x800000u;  // with the implicit bit
  // Normal results keep mant_bits fraction bits; subnormal ones (e + bias < 1) fewer. `base`
  // is the code of the binade below, so adding the rounded significand (implicit bit
  // included) carries into the exponent exactly when rounding does.
  uint32_t shift, base;
  if (e + s.bias >= 1) {
    shift = 23 - s.mant_bits;
    base = static_cast<uint32_t>(e + s.bias - 1) << s.mant_bits;
  } else {
    shift = static_cast<uint32_t>(24 - static_cast<int32_t>(s.mant_bits) - s.bias - e);
    base = 0;
    if (shift >= 25) return static_cast<uint8_t>(sign);  // below half the smallest subnormal
  }
  uint32_t q = m24 >> shift;
  const uint32_t rem = m24 & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  uint32_t code = base + q;
  if (code > s.max_code) code = s.max_code;
  return static_cast<uint8_t>(sign | code);
}

// Exact. Codes the encoder never writes decode per OCP semantics (E4M3 S.1111.111 and E5M2
// exponent 31 with a non-zero fraction: NaN; E5M2 0x7C/0xFC: ±infinity).
COMPCOLL_HD inline float fp8_to_float(uint8_t code, uint32_t fmt) {
  const Fp8Spec s = fp8_spec(fmt);
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t e = (code & 0x7Fu) >> s.mant_bits;
  const uint32_t m = code & ((1u << s.mant_bits) - 1u);
  const uint32_t e_all = (1u << (7 - s.mant_bits)) - 1u;
  if (fmt == format::kFp8E4M3 && e == e_all && m == (1u << s.mant_bits) - 1u)
    return float_from_bits(sign | 0x7FC00000u);
  if (fmt == format::kFp8E5M2 && e == e_all)
    return float_from_bits(sign | (m ? 0x7FC00000u : 0x7F800000u));
  if (e != 0)
    return float_from_bits(sign | ((e - s.bias + 127u) << 23) | (m << (23 - s.mant_bits)));
  // Subnormal: m · 2^(1 - bias - mant_bits), a normal fp32; renormalise around the leading bit.
  if (m == 0) return float_from_bits(sign);
  uint32_t lead = s.mant_bits - 1;
  while ((m >> lead) == 0) --lead;
  const int32_t exp = static_cast<int32_t>(lead) + 1 - s.bias - static_cast<int32_t>(s.mant_bits);
  const uint32_t frac = (m << (23 - lead)) & 0x7FFFFFu;
  return float_from_bits(sign | (static_cast<uint32_t>(exp + 127) << 23) | frac);
}

// ---- elements ------------------------------------------------------------------------------
// Loading is exact. Storing rounds to nearest even and saturates: a quantized chunk came from
// finite values, so a reconstruction past the dtype's largest finite value becomes that value.
// A NaN (only from codes the encoder never writes, or Inf - Inf in the transform) is stored as
// the dtype's canonical quiet NaN: a GPU's float arithmetic returns one NaN pattern of its own
// where an x86 core keeps a payload or sets the sign, and host and GPU must write the same bits.
COMPCOLL_HD inline bool is_nan_bits(uint32_t f) { return (f & 0x7FFFFFFFu) > 0x7F800000u; }
struct Bf16Elem {
  using Bits = uint16_t;
  COMPCOLL_HD static uint32_t fp32_bits(Bits v) { return uint32_t{v} << 16; }
  COMPCOLL_HD static float to_float(Bits v) { return bf16_to_float(v); }
  COMPCOLL_HD static Bits from_float(float x) {
    if (is_nan_bits(float_bits(x))) return 0x7FC0u;
    const Bits r = float_to_bf16_rne(x);
    return (r & 0x7FFFu) == 0x7F80u ? static_cast<Bits>((r & 0x8000u) | 0x7F7Fu) : r;
  }
};
struct Fp16Elem {
  using Bits = uint16_t;
  COMPCOLL_HD static uint32_t fp32_bits(Bits v) { return float_bits(fp16_to_float(v)); }
  COMPCOLL_HD static float to_float(Bits v) { return fp16_to_float(v); }
  COMPCOLL_HD static Bits from_float(float x) {
    if (is_nan_bits(float_bits(x))) return 0x7E00u;
    const Bits r = float_to_fp16_rne(x);
    return (r & 0x7FFFu) == 0x7C00u ? static_cast<Bits>((r & 0x8000u) | 0x7BFFu) : r;
  }
};
struct Fp32Elem {
  using Bits = uint32_t;
  COMPCOLL_HD static uint32_t fp32_bits(Bits v) { return v; }
  COMPCOLL_HD static float to_float(Bits v) { return float_from_bits(v); }
  COMPCOLL_HD static Bits from_float(float x) {
    const Bits r = float_bits(x);
    if (is_nan_bits(r)) return 0x7FC00000u;
    return (r & 0x7FFFFFFFu) == 0x7F800000u ? (r & 0x80000000u) | 0x7F7FFFFFu : r;
  }
};

// ---- chunk layout --------------------------------------------------------------------------
// A chunk of n elements in groups of G (a power of two): every group is G elements but the
// last, which holds the tail t = n mod G and is transformed at P = bit_ceil(t), zero-padded.
struct ChunkLayout {
  COMPCOLL_HD static uint32_t groups(uint32_t n, uint32_t g) { return (n + g - 1) / g; }
  // Transform size of group i (the codes it stores).
  COMPCOLL_HD static uint32_t group_size(uint32_t n, uint32_t g, uint32_t i) {
    const uint32_t m = n - i * g < g ? n - i * g : g;
    uint32_t p = 1;
    while (p < m) p *= 2;
    return p;
  }
  COMPCOLL_HD static uint32_t code_bytes(uint32_t n, uint32_t g) {
    const uint32_t full = n / g;
    return full * g + (n % g ? group_size(n, g, full) : 0);
  }
  COMPCOLL_HD static uint32_t scales_at() { return format::kChunkHeaderBytes; }
  COMPCOLL_HD static uint32_t codes_at(uint32_t n, uint32_t g) {
    return format::kChunkHeaderBytes + format::kFp8ScaleBytes * groups(n, g);
  }
  COMPCOLL_HD static uint32_t quantized_bytes(uint32_t n, uint32_t g) {
    return codes_at(n, g) + format::align_up(code_bytes(n, g), format::kChunkAlign);
  }
  COMPCOLL_HD static uint32_t stored_bytes(uint32_t n, uint32_t esize) {
    return format::kChunkHeaderBytes + format::align_up(n * esize, format::kChunkAlign);
  }
};

// ---- one group -----------------------------------------------------------------------------
// Each step is a function of its own, so that the CUDA kernels, which spread a group over the
// lanes of a warp (below), run the very operations of the host's loops, in the same order.

// One butterfly of the transform: the new value of element j given its own value and that of
// its partner j ^ h; `upper` when j is the pair's higher element (j & h). The pair (a, b)
// becomes (a + b, a − b).
COMPCOLL_HD inline float butterfly(float own, float partner, bool upper) {
  return upper ? sub_rn(partner, own) : add_rn(own, partner);
}

// In-place unnormalised Walsh–Hadamard transform (Sylvester order) of p = 2^k values:
// stages h = 1, 2, 4, …, p/2; in each, the pair (j, j + h) becomes (a + b, a − b).
// Applied twice it gives p times the input, so the inverse is the same transform times 1/p.
COMPCOLL_HD inline void fwht(float* v, uint32_t p) {
  for (uint32_t h = 1; h < p; h *= 2)
    for (uint32_t i = 0; i < p; i += 2 * h)
      for (uint32_t j = i; j < i + h; ++j) {
        const float a = v[j], b = v[j + h];
        v[j] = butterfly(a, b, false);
        v[j + h] = butterfly(b, a, true);
      }
}

// The per-element steps of quantize_group and dequantize_group.
COMPCOLL_HD inline float rms_term(float x, float amax) {  // (x / amax)^2
  const float t = div_rn(x, amax);
  return mul_rn(t, t);
}
// s1 from the group's max |x| and its rms terms summed in index order.
COMPCOLL_HD inline float rms_scale(float amax, float sum, uint32_t p) {
  const float s1 = mul_rn(amax, sqrt_rn(div_rn(sum, static_cast<float>(p))));
  return s1 == 0.0f ? amax : s1;  // a tiny subnormal group whose RMS rounds to zero
}
COMPCOLL_HD inline float quantization_scale(float ymax, uint32_t fmt) {
  return div_rn(ymax, fp8_spec(fmt).max_value);
}
COMPCOLL_HD inline uint8_t quantize_value(float y, float s2, uint32_t fmt) {
  return float_to_fp8(div_rn(y, s2), fmt);
}
COMPCOLL_HD inline float dequantize_value(uint8_t code, float s2, uint32_t fmt) {
  return mul_rn(fp8_to_float(code, fmt), s2);
}
COMPCOLL_HD inline float inverse_size(uint32_t p) {  // exactly 1/p, p a power of two
  uint32_t log2p = 0;
  while ((1u << log2p) < p) ++log2p;
  return float_from_bits((127u - log2p) << 23);
}
COMPCOLL_HD inline float restore_value(float y, float inv_p, float s1) {
  return mul_rn(mul_rn(y, inv_p), s1);
}

struct GroupScales {
  float s1;  // RMS scale: x / s1 has unit RMS
  float s2;  // quantization scale: max |H(x / s1)| / FP8 max
};

// Quantizes p finite values at v (overwritten) into p codes. Zero groups give s1 = s2 = 0 and
// zero codes. docs/FORMAT.md gives the same steps in words.
COMPCOLL_HD inline GroupScales quantize_group(float* v, uint32_t p, uint32_t fmt, uint8_t* codes) {
  float amax = 0.0f;
  for (uint32_t i = 0; i < p; ++i) {
    const float a = abs_f(v[i]);
    if (a > amax) amax = a;
  }
  if (amax == 0.0f) {
    for (uint32_t i = 0; i < p; ++i) codes[i] = 0;
    return {0.0f, 0.0f};
  }
  // RMS as amax · sqrt(mean((x / amax)^2)): the sum lies in [1, p], so it can neither overflow
  // nor underflow whatever the magnitude of the group. Summed in index order.
  float sum = 0.0f;
  for (uint32_t i = 0; i < p; ++i) sum = add_rn(sum, rms_term(v[i], amax));
  const float s1 = rms_scale(amax, sum, p);
  for (uint32_t i = 0; i < p; ++i) v[i] = div_rn(v[i], s1);
  fwht(v, p);
  float ymax = 0.0f;
  for (uint32_t i = 0; i < p; ++i) {
    const float a = abs_f(v[i]);
    if (a > ymax) ymax = a;
  }
  // ymax >= 1 (the transform keeps the energy, p times, and max |x / s1| >= 1), so s2 > 0.
  const float s2 = quantization_scale(ymax, fmt);
  for (uint32_t i = 0; i < p; ++i) codes[i] = quantize_value(v[i], s2, fmt);
  return {s1, s2};
}

// The inverse: v[i] = (H(code · s2))[i] · (1/p) · s1, for p values.
COMPCOLL_HD inline void dequantize_group(const uint8_t* codes, uint32_t p, uint32_t fmt,
                                         GroupScales s, float* v) {
  for (uint32_t i = 0; i < p; ++i) v[i] = dequantize_value(codes[i], s.s2, fmt);
  fwht(v, p);
  const float inv_p = inverse_size(p);
  for (uint32_t i = 0; i < p; ++i) v[i] = restore_value(v[i], inv_p, s.s1);
}

// ---- one group across the lanes of a warp --------------------------------------------------
// The CUDA kernels code a group of p values with the 32 lanes of a warp. For p >= 32, lane l
// holds elements l, l + 32, …, l + 32 (p/32 − 1) in its registers r = 0 … p/32 − 1; for p < 32,
// lane l < p holds element l and the other lanes hold nothing. Stage h of the transform then
// pairs each element with its partner across lanes (h < 32: lane l ^ h, the same register) or
// inside a lane (h >= 32: register r ^ h/32), stages in fwht's order, so every value goes
// through the same operations on the same operands as in fwht.
constexpr uint32_t kGroupLanes = 32;
COMPCOLL_HD inline uint32_t lane_registers(uint32_t p) { return p >= kGroupLanes ? p / kGroupLanes : 1; }
COMPCOLL_HD inline uint32_t lane_element(uint32_t lane, uint32_t r) { return r * kGroupLanes + lane; }
// The stages across lanes: h = 1, 2, …, below min(p, 32).
COMPCOLL_HD inline uint32_t cross_lane_stages_end(uint32_t p) { return p < kGroupLanes ? p : kGroupLanes; }
// A register's value at stage h < 32, given the same register of the partner lane (lane ^ h).
COMPCOLL_HD inline float cross_lane_butterfly(float own, float partner, uint32_t lane, uint32_t h) {
  return butterfly(own, partner, (lane & h) != 0);
}
// The stages inside one lane (h = 32, 64, …, p/2), after the stages across lanes.
template <uint32_t R>
COMPCOLL_HD inline void in_lane_stages(float (&v)[R]) {
  COMPCOLL_UNROLL
  for (uint32_t hr = 1; hr < R; hr *= 2)
    COMPCOLL_UNROLL
    for (uint32_t r = 0; r < R; ++r)
      if ((r & hr) == 0) {
        const float a = v[r], b = v[r + hr];
        v[r] = butterfly(a, b, false);
        v[r + hr] = butterfly(b, a, true);
      }
}

// A stored scale is valid when it is finite and not negative (−0 included: sign bit clear).
COMPCOLL_HD inline bool valid_scale_bits(uint32_t bits) { return bits < 0x7F800000u; }

}  // namespace compcoll::fp8bits
