// shared/codec/exponent_avx512.cpp — AVX-512 host paths of gauss-exp and entropy-exp for bf16,
// fp16 and fp32 (see the header).
//
// The format puts element k of a chunk in lane k mod 32, so a row of 32 elements is one
// element of every lane: two vectors of 16 lanes. Each lane keeps its own bit position.
//
// Decode, per lane: a 64-bit window gathered at the lane's byte position holds >= 57 stream
// bits; it is gathered again only when some lane of the vector holds fewer than the 18 bits
// an element may take (the escape's 10-bit code, then 8 exponent bits, or 5 and fp16's 3
// extra bits). A symbol is decoded by byte permutes instead of table gathers: the fixed
// code's codes of up to 7 bits come from a 128-entry table indexed by the next 7 bits
// (VPERMI2B); longer codes (0.6-1.9 % of the elements of the bundled bf16 tensors) share two
// 7-bit prefixes and are finished from a 32-entry table indexed by prefix and the next 4 bits
// (VPERMW), on every step: a branch on them is taken by a fifth of the steps at random.
// Exponents come from tables with the reference added (built once for each of the 256), so
// no per-element arithmetic remains; where the reference puts some symbols' exponents out of
// range (fp16's usual references, extreme ones elsewhere), those entries are marked and each
// element is checked. Lanes that read past their own words do so harmlessly (positions are
// clamped to the streams' end, and at most 8 bytes past it are read: the next chunk's, or a
// padded copy's) and fail the end-of-lane check, as in the portable decoder.
//
// A row's bit positions depend on the row before: a chain of permutes and shifts about as
// long as the row's work. Two chunks are therefore decoded at once, their rows interleaved,
// and the next two chunks' bytes are asked of the memory a few lines a row, so that long
// inputs decode at the speed of cache-resident ones.
//
// Encode: one pass writes each row's raw bytes and sums the exponents for the reference; a
// second computes every element's symbol, code and length (16-bit lanes, a row per vector)
// and appends them to 64-bit lane accumulators, stored to the lanes' scratch streams with one
// 8-byte store per lane when some lane might not have room for another row (the portable
// LaneWriter's scheme, 8 lanes per vector); the lanes are then copied back to back.
//
// entropy-exp decode is gauss-exp's but for the symbols: one gather per 16 lanes from the
// chunk's 4096-entry decode table (codes of up to 12 bits). entropy-exp encode: the chunk's
// histogram (scalar, four partial counts) and Huffman code as the portable encoder builds
// them, then gauss-exp's second pass with each row's codes permuted from the chunk's table of
// code by exponent (and the raw section written on the way).
#include "codec/exponent_avx512.h"

// GCC 12 warns about the intrinsics headers' deliberately undefined vectors (_mm512_undefined_*).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "codec/exponent_bits.h"
#include "codec/exponent_host.h"
#include "codec/format.h"

#define COMPCOLL_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vbmi2,popcnt")))


namespace compcoll::detail::avx512 {
namespace {

using namespace format;

std::atomic<int> g_switch{-1};  // -1: not yet read from the environment

bool cpu_has() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2") &&
         __builtin_cpu_supports("popcnt");
}


constexpr uint32_t kShortBits = 7;   // first-level table: codes of up to 7 bits
constexpr uint32_t kLongBits = 4;    // second level: the next 4 bits (codes of up to 11)
constexpr uint32_t kLongSlots = 2;   // 7-bit prefixes that start longer codes
// Per-chunk exponent tables: what a decoded symbol stands for besides an exponent.
constexpr uint8_t kBadShort = 0xFF;     // first level: ref + d out of range
constexpr uint16_t kEscMarker = 0x100;  // second level: an escape (its exponent follows)
constexpr uint16_t kBadLong = 0x200;    // second level: ref + d out of range
// Longest element: the escape's 10-bit code, then an 8-bit exponent (bf16, fp32) or a 5-bit
// exponent and 3 extra bits (fp16).
constexpr int kMaxElementBits = 18;

// The fixed code split into the two tables the decoder permutes from, independent of the
// chunk: symbols and lengths. `usable` is false if the code did not fit the scheme (it does;
// tests/codec check the decoder runs).
struct DecodeTables {
  bool usable = false;
  uint32_t esc_len = 0;              // the escape's code length
  alignas(64) uint8_t l1_len[128];   // code length, 0: a longer code starts here
  uint8_t l1_sym[128];               // symbol, or for a longer code its prefix slot
  uint16_t l2_len[32];               // slot * 16 + next 4 bits: code length
  uint16_t l2_sym[32];
};

const DecodeTables& decode_tables() {
  static const DecodeTables tables = [] {
    DecodeTables t{};
    const expbits::PrefixCode& pc = expbits::host::gauss_prefix_code();
    uint32_t slots = 0;
    t.esc_len = pc.length[kGaussSymEsc];
    if (t.esc_len + 8 > kMaxElementBits) return t;  // an escape's exponent and extra bits: <= 8
    for (uint32_t idx = 0; idx < 128; ++idx) {
      const uint16_t e = pc.lut[idx];
      const uint32_t len = e & 0xFu, sym = e >> 4;
      if (len == 0) return t;  // incomplete code
      if (len <= kShortBits) {
        if (sym == kGaussSymEsc) return t;
        t.l1_len[idx] = static_cast<uint8_t>(len);
        t.l1_sym[idx] = static_cast<uint8_t>(sym);
        continue;
      }
      if (slots == kLongSlots) return t;
      const uint32_t slot = slots++;
      t.l1_len[idx] = 0;
      t.l1_sym[idx] = static_cast<uint8_t>(slot);
      for (uint32_t next = 0; next < (1u << kLongBits); ++next) {
        const uint16_t e2 = pc.lut[idx | (next << kShortBits)];
        const uint32_t len2 = e2 & 0xFu, sym2 = e2 >> 4;
        if (len2 <= kShortBits || len2 > kShortBits + kLongBits) return t;
        t.l2_len[slot * 16 + next] = static_cast<uint16_t>(len2);
        t.l2_sym[slot * 16 + next] = static_cast<uint16_t>(sym2);
      }
    }
    t.usable = true;
    return t;
  }();
  return tables;
}

// 16 lanes' decode state: bit position (relative to the streams' start), the next stream
// bits (lo: the next 32, hi: the 32 after them) and how many of those 64 are valid.
struct Lanes {
  __m512i pos, lo, hi, valid;
};

struct DecodeRegs {
  __m512i l1_len_a, l1_len_b, l1_exp_a, l1_exp_b, l2_len, l2_exp;
  __m512i limit, even, odd, seven;
  uint32_t esc_len;
};

// The number of ones in a mask that is a prefix (lanes 0 .. c-1).
inline uint32_t prefix_count(uint32_t live) { return static_cast<uint32_t>(__builtin_popcount(live)); }

COMPCOLL_AVX512 inline void refill(Lanes& l, const uint8_t* base, const DecodeRegs& r) {
  const __m512i p = _mm512_min_epu32(l.pos, r.limit);
  const __m512i off = _mm512_srli_epi32(p, 3);
  const __m512i q0 = _mm512_i32gather_epi64(_mm512_castsi512_si256(off), base, 1);
  const __m512i q1 = _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(off, 1), base, 1);
  const __m512i lo = _mm512_permutex2var_epi32(q0, r.even, q1);
  const __m512i hi = _mm512_permutex2var_epi32(q0, r.odd, q1);
  const __m512i s = _mm512_and_si512(p, r.seven);
  l.lo = _mm512_shrdv_epi32(lo, hi, s);
  l.hi = _mm512_srlv_epi32(hi, s);
  l.valid = _mm512_sub_epi32(_mm512_set1_epi32(64), s);
}

// Refills only when some lane holds fewer bits than its next element may need (18: an
// escape), so a gather usually serves several rows rather than a fixed three.
COMPCOLL_AVX512 inline void refill_if_low(Lanes& l, const uint8_t* base, const DecodeRegs& r) {
  if (_mm512_cmplt_epu32_mask(l.valid, _mm512_set1_epi32(kMaxElementBits))) refill(l, base, r);
}

// The end of a step, once each lane's exponent `ex` and code length `len` are known: fp16's
// extra bits after the code, then the active lanes move past what they took. Returns the
// exponent, and for fp16 the extra bits << 8, one per 32-bit lane.
template <class L>
COMPCOLL_AVX512 inline __m512i finish_step(Lanes& l, __m512i ex, __m512i len, __mmask16 active) {
  if constexpr (L::kExtraBits != 0) {  // fp16: sign, mantissa bits 9 and 8 after the code
    const __m512i extra = _mm512_and_si512(_mm512_srlv_epi32(l.lo, len), _mm512_set1_epi32((1 << L::kExtraBits) - 1));
    ex = _mm512_or_si512(ex, _mm512_slli_epi32(extra, 8));
    len = _mm512_add_epi32(len, _mm512_set1_epi32(L::kExtraBits));
  }
  len = _mm512_maskz_mov_epi32(active, len);
  l.lo = _mm512_shrdv_epi32(l.lo, l.hi, len);
  l.hi = _mm512_srlv_epi32(l.hi, len);
  l.pos = _mm512_add_epi32(l.pos, len);
  l.valid = _mm512_sub_epi32(l.valid, len);
  return ex;
}

// One element of each of the 16 lanes (only lanes in `active` advance): returns the
// exponent, and for fp16 the extra bits << 8, one per 32-bit lane. With kCheck (a chunk whose
// reference puts some symbols out of range), active lanes that decode such a symbol are
// added to *bad.
template <class L, bool kCheck>
COMPCOLL_AVX512 inline __m512i decode_step(Lanes& l, const DecodeRegs& r, __mmask16 active, __mmask16* bad) {
  constexpr __mmask64 kLowBytes = 0x1111111111111111ull;
  __m512i len = _mm512_maskz_permutex2var_epi8(kLowBytes, r.l1_len_a, l.lo, r.l1_len_b);
  __m512i ex = _mm512_maskz_permutex2var_epi8(kLowBytes, r.l1_exp_a, l.lo, r.l1_exp_b);
  const __mmask16 is_long = _mm512_testn_epi32_mask(len, len);
  if constexpr (kCheck)
    *bad |= _mm512_mask_cmpeq_epi32_mask(active & ~is_long, ex, _mm512_set1_epi32(kBadShort));
  {
    // Every step takes the second level too, whether or not some lane needs it: about a
    // fifth of the steps have a longer code in one of their 16 lanes, at random, and on
    // data that does not repeat a branch on it is mispredicted that often (it costs more
    // than the lookup). (next 4 bits) | slot << 4, as the low word's 5 index bits (ternary
    // 0xE4: C ? A : B, bit by bit, with C = 0xF).
    const __m512i idx = _mm512_ternarylogic_epi32(_mm512_srli_epi32(l.lo, kShortBits),
                                                  _mm512_slli_epi32(ex, 4),
                                                  _mm512_set1_epi32(0xF), 0xE4);
    constexpr __mmask32 kLowWords = 0x55555555u;
    const __m512i len2 = _mm512_maskz_permutexvar_epi16(kLowWords, idx, r.l2_len);
    __m512i ex2 = _mm512_maskz_permutexvar_epi16(kLowWords, idx, r.l2_exp);
    if constexpr (kCheck)
      *bad |= _mm512_mask_cmpeq_epi32_mask(active & is_long, ex2, _mm512_set1_epi32(kBadLong));
    const __mmask16 esc = _mm512_mask_cmpeq_epi32_mask(is_long, ex2, _mm512_set1_epi32(kEscMarker));
    ex2 = _mm512_mask_and_epi32(ex2, esc, _mm512_srl_epi32(l.lo, _mm_cvtsi32_si128(static_cast<int>(r.esc_len))),
                                _mm512_set1_epi32((1 << L::kExpBits) - 1));
    len = _mm512_mask_mov_epi32(len, is_long, len2);
    ex = _mm512_mask_mov_epi32(ex, is_long, ex2);
  }
  return finish_step<L>(l, ex, len, active);
}

// What differs between the dtypes, one row (32 elements) at a time: the exponent fields,
// the raw section (R bytes per element) and joining both back into values. Lanes past
// `live` (the last, partial row) are neither read nor written.
template <class L>
struct Rows;

template <>
struct Rows<expbits::Bf16Layout> {
  // The row's exponent fields, one per 16-bit lane (0 past `live`).
  COMPCOLL_AVX512 static __m512i exponents(const uint8_t* in, uint32_t row, __mmask32 live) {
    const __m512i x = _mm512_maskz_loadu_epi16(live, in + 64 * size_t{row});
    return _mm512_and_si512(_mm512_srli_epi16(x, 7), _mm512_set1_epi16(0xFF));
  }
  // The same, and the row's raw bytes (sign << 7 | mantissa) written to the raw section.
  COMPCOLL_AVX512 static __m512i split(const uint8_t* in, uint32_t row, __mmask32 live, uint8_t* raw) {
    const __m512i x = _mm512_maskz_loadu_epi16(live, in + 64 * size_t{row});
    const __m512i r = _mm512_ternarylogic_epi32(x, _mm512_srli_epi16(x, 8), _mm512_set1_epi16(0x7F), 0xE4);
    _mm256_mask_storeu_epi8(raw + kLanes * row, live, _mm512_cvtepi16_epi8(r));
    return _mm512_and_si512(_mm512_srli_epi16(x, 7), _mm512_set1_epi16(0xFF));
  }
  // Stores the row's values from the two halves' exponents (32-bit lanes) and its raw bytes.
  COMPCOLL_AVX512 static void join(uint8_t* out, uint32_t row, __mmask32 live, __m512i ea, __m512i eb,
                                   const uint8_t* raw) {
    const __m512i words = _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32,
                                           30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i e16 = _mm512_permutex2var_epi16(ea, words, eb);
    const __m512i r = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(live, raw + kLanes * row));
    // (sign << 15 | mantissa) from the raw byte, then the exponent in bits 7..14.
    const __m512i sign_mant = _mm512_ternarylogic_epi32(_mm512_slli_epi16(r, 8), r,
                                                        _mm512_set1_epi16(static_cast<short>(0x807F)), 0xA8);
    _mm512_mask_storeu_epi16(out + 64 * size_t{row}, live, _mm512_or_si512(sign_mant, _mm512_slli_epi16(e16, 7)));
  }
};

template <>
struct Rows<expbits::Fp32Layout> {
  // Byte permutes between 16 packed 24-bit raw values (48 bytes) and 16 32-bit lanes.
  struct Permutes {
    alignas(64) uint8_t pack[64];    // lane bytes 0..2 -> packed
    alignas(64) uint8_t unpack[64];  // packed -> lane bytes 0..2 (byte 3 masked to zero)
  };
  static constexpr Permutes kPermutes = [] {
    Permutes p{};
    for (uint32_t i = 0; i < 16; ++i)
      for (uint32_t j = 0; j < 3; ++j) {
        p.pack[3 * i + j] = static_cast<uint8_t>(4 * i + j);
        p.unpack[4 * i + j] = static_cast<uint8_t>(3 * i + j);
      }
    return p;
  }();
  static constexpr __mmask64 kLow3 = 0x7777777777777777ull;  // bytes 0..2 of each 32-bit lane
  // Raw-section bytes of the first c elements of a half row.
  static __mmask64 raw_mask(__mmask16 live) {
    const uint32_t c = prefix_count(live);
    return c == 16 ? (1ull << 48) - 1 : (1ull << (3 * c)) - 1;
  }
  COMPCOLL_AVX512 static __m512i exponents_of(__m512i x0, __m512i x1) {
    const __m512i e0 = _mm512_and_si512(_mm512_srli_epi32(x0, 23), _mm512_set1_epi32(0xFF));
    const __m512i e1 = _mm512_and_si512(_mm512_srli_epi32(x1, 23), _mm512_set1_epi32(0xFF));
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(e0)), _mm512_cvtepi32_epi16(e1), 1);
  }
  COMPCOLL_AVX512 static __m512i exponents(const uint8_t* in, uint32_t row, __mmask32 live) {
    const uint8_t* p = in + 128 * size_t{row};
    return exponents_of(_mm512_maskz_loadu_epi32(static_cast<__mmask16>(live), p),
                        _mm512_maskz_loadu_epi32(static_cast<__mmask16>(live >> 16), p + 64));
  }
  COMPCOLL_AVX512 static __m512i split(const uint8_t* in, uint32_t row, __mmask32 live, uint8_t* raw) {
    const uint8_t* p = in + 128 * size_t{row};
    const __m512i x[2] = {_mm512_maskz_loadu_epi32(static_cast<__mmask16>(live), p),
                          _mm512_maskz_loadu_epi32(static_cast<__mmask16>(live >> 16), p + 64)};
    const __m512i pack = _mm512_load_si512(kPermutes.pack);
    for (uint32_t h = 0; h < 2; ++h) {
      // sign << 23 | mantissa: 24 bits, then 3 bytes per element.
      const __m512i r = _mm512_ternarylogic_epi32(x[h], _mm512_srli_epi32(x[h], 8), _mm512_set1_epi32(0x7FFFFF), 0xE4);
      _mm512_mask_storeu_epi8(raw + 96 * size_t{row} + 48 * h, raw_mask(static_cast<__mmask16>(live >> (16 * h))),
                              _mm512_permutexvar_epi8(pack, r));
    }
    return exponents_of(x[0], x[1]);
  }
  COMPCOLL_AVX512 static void join(uint8_t* out, uint32_t row, __mmask32 live, __m512i ea, __m512i eb,
                                   const uint8_t* raw) {
    const __m512i unpack = _mm512_load_si512(kPermutes.unpack);
    const __m512i e[2] = {ea, eb};
    for (uint32_t h = 0; h < 2; ++h) {
      const __mmask16 lh = static_cast<__mmask16>(live >> (16 * h));
      const __m512i packed = _mm512_maskz_loadu_epi8(raw_mask(lh), raw + 96 * size_t{row} + 48 * h);
      const __m512i r = _mm512_maskz_permutexvar_epi8(kLow3, unpack, packed);
      // Sign from bit 23 to bit 31, mantissa bits 0..22, then the exponent in bits 23..30.
      const __m512i t = _mm512_ternarylogic_epi32(_mm512_slli_epi32(r, 8), r,
                                                  _mm512_set1_epi32(static_cast<int>(0x80000000u)), 0xE4);
      const __m512i v = _mm512_ternarylogic_epi32(t, _mm512_slli_epi32(e[h], 23),
                                                  _mm512_set1_epi32(static_cast<int>(0x807FFFFFu)), 0xEC);
      _mm512_mask_storeu_epi32(out + 128 * size_t{row} + 64 * h, lh, v);
    }
  }
};

template <>
struct Rows<expbits::Fp16Layout> {
  static constexpr uint32_t kExpMask = (1u << expbits::Fp16Layout::kExpBits) - 1;
  COMPCOLL_AVX512 static __m512i load(const uint8_t* in, uint32_t row, __mmask32 live) {
    return _mm512_maskz_loadu_epi16(live, in + 64 * size_t{row});
  }
  COMPCOLL_AVX512 static __m512i exponents(const uint8_t* in, uint32_t row, __mmask32 live) {
    return _mm512_and_si512(_mm512_srli_epi16(load(in, row, live), 10), _mm512_set1_epi16(kExpMask));
  }
  // The extra bits of the lane stream: sign << 2 | mantissa bits 9..8, per 16-bit lane.
  COMPCOLL_AVX512 static __m512i extras(const uint8_t* in, uint32_t row, __mmask32 live) {
    const __m512i high = _mm512_srli_epi16(load(in, row, live), 8);  // sign, exponent, mantissa 9..8
    // Ternary 0xD8 (C ? B : A) with C = 0x3: bits 1..0 from high, bit 2 (the sign) from high >> 5.
    return _mm512_ternarylogic_epi32(_mm512_srli_epi16(high, 5), high, _mm512_set1_epi16(0x3), 0xD8);
  }
  // Raw byte: mantissa bits 7..0.
  COMPCOLL_AVX512 static __m512i split(const uint8_t* in, uint32_t row, __mmask32 live, uint8_t* raw) {
    const __m512i x = load(in, row, live);
    _mm256_mask_storeu_epi8(raw + kLanes * row, live, _mm512_cvtepi16_epi8(x));
    return _mm512_and_si512(_mm512_srli_epi16(x, 10), _mm512_set1_epi16(kExpMask));
  }
  // ea, eb: exponent | extra << 8 per 32-bit lane.
  COMPCOLL_AVX512 static void join(uint8_t* out, uint32_t row, __mmask32 live, __m512i ea, __m512i eb,
                                   const uint8_t* raw) {
    const __m512i words = _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32,
                                           30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i k = _mm512_permutex2var_epi16(ea, words, eb);  // e in bits 0..4, extra in 8..10
    const __m512i r = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(live, raw + kLanes * row));
    // Bit 15: the extra's sign (bit 10 of k); bits 8..9: mantissa 9..8 (same place in k);
    // bits 10..14: the exponent; bits 0..7: the raw byte.
    const __m512i sign_m98 = _mm512_ternarylogic_epi32(_mm512_slli_epi16(k, 5), k,
                                                       _mm512_set1_epi16(static_cast<short>(0x8000)), 0xE4);
    const __m512i v = _mm512_ternarylogic_epi32(sign_m98, _mm512_slli_epi16(k, 10),
                                                _mm512_set1_epi16(static_cast<short>(0x8300)), 0xEC);
    _mm512_mask_storeu_epi16(out + 64 * size_t{row}, live, _mm512_or_si512(v, r));
  }
};

// ---- encode --------------------------------------------------------------------------------

// The fixed code by symbol, as one 16-bit word: the reversed code word (bits 0..11) and its
// length (bits 12..15). An escape's exponent is appended to its word later.
struct EncodeTables {
  alignas(64) uint16_t code_len[32];
  uint32_t esc_len;
};

const EncodeTables& encode_tables() {
  static const EncodeTables tables = [] {
    EncodeTables t{};
    const expbits::PrefixCode& pc = expbits::host::gauss_prefix_code();
    for (uint32_t s = 0; s < kGaussSymbols; ++s)
      t.code_len[s] = static_cast<uint16_t>(pc.code[s] | (uint32_t{pc.length[s]} << 12));
    t.esc_len = pc.length[kGaussSymEsc];
    return t;
  }();
  return tables;
}

// 8 lanes' writers: the bits not yet complete (acc, nb < 8 of them) and the address of the
// byte they belong to, as in the portable LaneWriter.
struct Writers {
  __m512i acc, nb, p;
};

// Stores each of 8 lanes' accumulator (at most 63 bits) at its byte address, then moves the
// address past the complete bytes and keeps the incomplete one.
COMPCOLL_AVX512 inline void flush(Writers& w, uint64_t* vals, uint64_t* ptrs) {
  _mm512_store_si512(vals, w.acc);
  _mm512_store_si512(ptrs, w.p);
  w.p = _mm512_add_epi64(w.p, _mm512_srli_epi64(w.nb, 3));
  w.acc = _mm512_srlv_epi64(w.acc, _mm512_and_si512(w.nb, _mm512_set1_epi64(56)));
  w.nb = _mm512_and_si512(w.nb, _mm512_set1_epi64(7));
}

// The 32 lanes' 8-byte stores, as scalar stores: they run on the integer ports beside the
// vector work (the compiler would otherwise turn the loop into VPSCATTERQQ, much slower
// here; the empty asm keeps each value in a general register).
inline void store_lanes(const uint64_t* vals, const uint64_t* ptrs) {
  for (uint32_t j = 0; j < kLanes; ++j) {
    uint64_t v = vals[j];
    asm("" : "+r"(v));
    std::memcpy(reinterpret_cast<uint8_t*>(ptrs[j]), &v, 8);
  }
}

}  // namespace

bool cpu_supported() {
  static const bool has = cpu_has();
  return has;
}

bool enabled() {
  int s = g_switch.load(std::memory_order_relaxed);
  if (s < 0) {
    const char* env = std::getenv("COMPCOLL_HOST_SIMD");
    s = (env != nullptr && std::strcmp(env, "0") == 0) ? 0 : 1;
    g_switch.store(s, std::memory_order_relaxed);
  }
  return s == 1 && cpu_supported();
}

void set_enabled(bool on) { g_switch.store(on ? 1 : 0, std::memory_order_relaxed); }

namespace {

// One chunk's decode state: its two vectors of lanes, tables and buffers.
// What a chunk's rows read. The row loops copy its fields into locals, so that the compiler
// keeps them in registers across the stores of decoded values (which may alias any memory).
struct RowContext {
  DecodeRegs r;
  const uint8_t* base;  // where its windows are read: the streams, or a padded copy
  const uint8_t* raw;
  uint8_t* out;
  const uint8_t* lut;   // entropy-exp: the chunk's decode table, 2 bytes before its entry 0
  uint32_t n;
};

// One chunk's decode state: its two vectors of lanes, what its rows read, its lanes' extent.
struct ChunkState {
  Lanes a, b;
  RowContext x;
  bool check;           // gauss-exp: some symbol is out of range for its reference
  alignas(64) uint32_t start[kLanes];
  uint32_t words[kLanes];
};

// How a chunk's symbols are decoded: gauss-exp's fixed code from permuted tables (its
// symbols checked when the reference puts some out of range), or entropy-exp's code of the
// chunk from its table of 4096 entries, gathered.
enum class Mode { Gauss, GaussChecked, Entropy };

// entropy-exp: one element of each of the 16 lanes from the chunk's table, indexed by the next
// 12 bits (kMaxCodeBits): symbol << 4 | length, length 0 where no code starts (added to *bad
// for active lanes). `lut` points 2 bytes before entry 0, so that each 4-byte gather ends on
// its entry (the high half) and never reads past the table.
template <class L>
COMPCOLL_AVX512 inline __m512i decode_step_lut(Lanes& l, const uint8_t* lut, __mmask16 active, __mmask16* bad) {
  static_assert(kMaxCodeBits == 12, "the table has 4096 entries");
  const __m512i idx = _mm512_and_si512(l.lo, _mm512_set1_epi32(0xFFF));
  const __m512i e = _mm512_srli_epi32(_mm512_i32gather_epi32(idx, lut, 2), 16);
  __m512i len = _mm512_and_si512(e, _mm512_set1_epi32(0xF));
  __m512i ex = _mm512_srli_epi32(e, 4);
  *bad |= _mm512_mask_testn_epi32_mask(active, len, len);
  return finish_step<L>(l, ex, len, active);
}

// Row `row` of a chunk: 32 elements, one of each lane (lanes past the last row's end are
// neither read nor written).
template <class L, Mode M>
COMPCOLL_AVX512 inline void decode_row(Lanes& a, Lanes& b, const DecodeRegs& r, const uint8_t* base,
                                       const uint8_t* lut, uint32_t row, uint32_t n, const uint8_t* raw,
                                       uint8_t* out, __mmask16* bad) {
  const uint32_t full_rows = n / kLanes, tail = n % kLanes;
  refill_if_low(a, base, r);
  refill_if_low(b, base, r);
  const __mmask32 live = row < full_rows ? 0xFFFFFFFFu : (1u << tail) - 1;  // the last row: 0 .. tail-1
  __m512i ea, eb;
  if constexpr (M == Mode::Entropy) {
    ea = decode_step_lut<L>(a, lut, static_cast<__mmask16>(live), bad);
    eb = decode_step_lut<L>(b, lut, static_cast<__mmask16>(live >> 16), bad);
  } else {
    ea = decode_step<L, M == Mode::GaussChecked>(a, r, static_cast<__mmask16>(live), bad);
    eb = decode_step<L, M == Mode::GaussChecked>(b, r, static_cast<__mmask16>(live >> 16), bad);
  }
  Rows<L>::join(out, row, live, ea, eb, raw);
}

// The rows [row0, rows) of one chunk; false if some lane decoded a symbol out of range or
// without a code (looked for by GaussChecked and Entropy).
template <class L, Mode M>
COMPCOLL_AVX512 bool decode_rows(ChunkState& c, uint32_t row0) {
  const uint32_t n = c.x.n, rows = (n + kLanes - 1) / kLanes;
  Lanes a = c.a, b = c.b;  // locals, so that they stay in registers
  const DecodeRegs r = c.x.r;
  const uint8_t *const base = c.x.base, *const lut = c.x.lut, *const raw = c.x.raw;
  uint8_t* const out = c.x.out;
  __mmask16 bad = 0;
  for (uint32_t row = row0; row < rows; ++row) decode_row<L, M>(a, b, r, base, lut, row, n, raw, out, &bad);
  c.a = a;
  c.b = b;
  return bad == 0;
}

// The rows both chunks have, the two chunks' rows interleaved: a row's symbols depend on
// the bit positions the row before left, a chain of permutes (or a gather) and shifts as long
// as the row's work, and the other chunk's row fills that wait. Then each chunk's remaining
// rows.
template <class L, Mode M>
COMPCOLL_AVX512 void decode_rows_pair(ChunkState& c0, ChunkState& c1, const uint8_t* ahead, size_t ahead_bytes,
                                      bool in_range[2]) {
  const RowContext &x0 = c0.x, &x1 = c1.x;
  const uint32_t common = std::min(x0.n, x1.n) / kLanes;  // full rows of both
  const uint8_t *const base0 = x0.base, *const lut0 = x0.lut, *const raw0 = x0.raw;
  const uint8_t *const base1 = x1.base, *const lut1 = x1.lut, *const raw1 = x1.raw;
  uint8_t *const out0 = x0.out, *const out1 = x1.out;
  const uint32_t n0 = x0.n, n1 = x1.n;
  Lanes a0 = c0.a, b0 = c0.b, a1 = c1.a, b1 = c1.b;
  __mmask16 bad0 = 0, bad1 = 0;
  // The next pair's bytes, spread over these rows: a whole cache line or more per row.
  const size_t ahead_step = common ? (ahead_bytes / common + 64) & ~size_t{63} : 0;
  size_t asked = 0;
  for (uint32_t row = 0; row < common; ++row) {
    for (const size_t to = std::min(asked + ahead_step, ahead_bytes); asked < to; asked += 64)
      _mm_prefetch(reinterpret_cast<const char*>(ahead + asked), _MM_HINT_T1);
    decode_row<L, M>(a0, b0, x0.r, base0, lut0, row, n0, raw0, out0, &bad0);
    decode_row<L, M>(a1, b1, x1.r, base1, lut1, row, n1, raw1, out1, &bad1);
  }
  c0.a = a0;
  c0.b = b0;
  c1.a = a1;
  c1.b = b1;
  in_range[0] = decode_rows<L, M>(c0, common) && bad0 == 0;
  in_range[1] = decode_rows<L, M>(c1, common) && bad1 == 0;
}

// The decode tables with a reference folded in: exponents instead of symbols. Where ref + d
// leaves the exponent range for some symbols (references below 13, or near the top), they
// are marked and `check` says every decoded symbol must be checked. GaussSymbols::exponent
// gives -1 for those.
struct RefTables {
  alignas(64) uint8_t l1_exp[128];
  alignas(64) uint16_t l2_exp[32];
  alignas(64) uint16_t l2_len[32];
  bool check;
};

// The tables of every reference a chunk header can hold (a byte), built once per layout:
// about a tenth of a chunk's decode time if built per chunk.
template <class L>
const std::vector<RefTables>& ref_tables() {
  static const std::vector<RefTables> all = [] {
    const DecodeTables& t = decode_tables();
    std::vector<RefTables> v(256);
    for (uint32_t ref = 0; ref < 256; ++ref) {
      const expbits::GaussSymbols syms{ref};
      RefTables& rt = v[ref];
      rt.check = false;
      for (uint32_t i = 0; i < 128; ++i) {
        if (t.l1_len[i] == 0) {
          rt.l1_exp[i] = t.l1_sym[i];  // the slot of a longer code
          continue;
        }
        const int e = syms.exponent<L>(t.l1_sym[i]);
        rt.check |= e < 0;
        rt.l1_exp[i] = e < 0 ? kBadShort : static_cast<uint8_t>(e);
      }
      for (uint32_t i = 0; i < 32; ++i) {
        const bool esc = t.l2_sym[i] == kGaussSymEsc;
        const int e = esc ? 0 : syms.exponent<L>(t.l2_sym[i]);
        rt.check |= e < 0;
        rt.l2_exp[i] = esc ? kEscMarker : e < 0 ? kBadLong : static_cast<uint16_t>(e);
        rt.l2_len[i] = static_cast<uint16_t>(t.l2_len[i] + (esc ? L::kExpBits : 0));
      }
    }
    return v;
  }();
  return all;
}

// Sets up a chunk's state: where its windows are read (the streams, or a copy in `copy`),
// gauss-exp's tables for its reference or entropy-exp's table, its lanes at their starts
// (refilled).
template <class L>
COMPCOLL_AVX512 void start_chunk(const CodedChunk& g, std::vector<uint8_t>& copy, ChunkState& c) {
  // Windows are read up to 8 bytes past a position clamped to the streams' end: in place
  // where the caller says they may be, else in a copy with zero padding. Bits past a lane's
  // words are never taken by a clean lane, so what they hold does not matter.
  if (g.readable_after) {
    c.x.base = g.streams;
  } else {
    constexpr size_t kPad = 64;
    if (copy.size() < g.stream_bytes + kPad) copy.resize(g.stream_bytes + kPad);
    std::memcpy(copy.data(), g.streams, g.stream_bytes);
    std::memset(copy.data() + g.stream_bytes, 0, kPad);
    c.x.base = copy.data();
  }
  c.x.raw = g.raw;
  c.x.out = g.out;
  c.x.n = g.n;
  c.x.lut = g.lut ? reinterpret_cast<const uint8_t*>(g.lut) - 2 : nullptr;

  DecodeRegs& r = c.x.r;
  if (!g.lut) {
    const DecodeTables& t = decode_tables();
    const RefTables& rt = ref_tables<L>()[g.ref & 0xFF];
    c.check = rt.check;
    r.l1_len_a = _mm512_load_si512(t.l1_len);
    r.l1_len_b = _mm512_load_si512(t.l1_len + 64);
    r.l1_exp_a = _mm512_load_si512(rt.l1_exp);
    r.l1_exp_b = _mm512_load_si512(rt.l1_exp + 64);
    r.l2_len = _mm512_load_si512(rt.l2_len);
    r.l2_exp = _mm512_load_si512(rt.l2_exp);
    r.esc_len = t.esc_len;
  } else {
    c.check = false;
    r.l1_len_a = r.l1_len_b = r.l1_exp_a = r.l1_exp_b = r.l2_len = r.l2_exp = _mm512_setzero_si512();
    r.esc_len = 0;
  }
  r.limit = _mm512_set1_epi32(static_cast<int>(8 * g.stream_bytes));
  r.even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  r.odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  r.seven = _mm512_set1_epi32(7);

  uint32_t at = 0;
  for (uint32_t j = 0; j < kLanes; ++j) {
    c.words[j] = load_u16(g.lane_table + 2 * j);
    c.start[j] = 32 * at;
    at += c.words[j];
  }
  c.a = Lanes{_mm512_load_si512(c.start), {}, {}, {}};
  c.b = Lanes{_mm512_load_si512(c.start + 16), {}, {}, {}};
  refill(c.a, c.x.base, r);
  refill(c.b, c.x.base, r);
}

// Each lane must end exactly: its words hold the bits read plus zero padding of < 32 bits.
COMPCOLL_AVX512 bool lanes_end_clean(const ChunkState& c) {
  alignas(64) uint32_t pos[kLanes];
  _mm512_store_si512(pos, c.a.pos);
  _mm512_store_si512(pos + 16, c.b.pos);
  for (uint32_t j = 0; j < kLanes; ++j) {
    const uint32_t used = pos[j] - c.start[j];
    if ((used + 31) / 32 != c.words[j]) return false;
    if ((used & 31) != 0 && (load_u32(c.x.base + c.start[j] / 8 + 4 * (used / 32)) >> (used & 31)) != 0)
      return false;
  }
  return true;
}

template <class L>
COMPCOLL_AVX512 bool decode_impl(const CodedChunk& g) {
  if ((!g.lut && !decode_tables().usable) || g.n == 0) return false;
  thread_local std::vector<uint8_t> copy;
  ChunkState c;
  start_chunk<L>(g, copy, c);
  const bool in_range = c.x.lut   ? decode_rows<L, Mode::Entropy>(c, 0)
                        : c.check ? decode_rows<L, Mode::GaussChecked>(c, 0)
                                  : decode_rows<L, Mode::Gauss>(c, 0);
  return in_range && lanes_end_clean(c);
}

template <class L>
COMPCOLL_AVX512 void decode_pair_impl(const CodedChunk& g0, const CodedChunk& g1, const uint8_t* ahead,
                                      size_t ahead_bytes, bool ok[2]) {
  ok[0] = ok[1] = false;
  if ((g0.lut == nullptr) != (g1.lut == nullptr) || (!g0.lut && !decode_tables().usable) || g0.n == 0 || g1.n == 0)
    return;
  thread_local std::vector<uint8_t> copy[2];
  ChunkState c[2];
  start_chunk<L>(g0, copy[0], c[0]);
  start_chunk<L>(g1, copy[1], c[1]);
  bool in_range[2];
  if (c[0].x.lut)
    decode_rows_pair<L, Mode::Entropy>(c[0], c[1], ahead, ahead_bytes, in_range);
  else if (c[0].check || c[1].check)  // tables without marked symbols never match the checks
    decode_rows_pair<L, Mode::GaussChecked>(c[0], c[1], ahead, ahead_bytes, in_range);
  else
    decode_rows_pair<L, Mode::Gauss>(c[0], c[1], ahead, ahead_bytes, in_range);
  ok[0] = in_range[0] && lanes_end_clean(c[0]);
  ok[1] = in_range[1] && lanes_end_clean(c[1]);
}

// Row `row`'s live elements: all 32, or the last row's first n mod 32.
inline __mmask32 live_mask(uint32_t n, uint32_t row) {
  const uint32_t full_rows = n / kLanes, tail = n % kLanes;
  return row < full_rows ? 0xFFFFFFFFu : row == full_rows && tail ? (1u << tail) - 1 : 0u;
}

// The lane streams of a chunk's n elements, lane j into scratch + j x stride, and each lane's
// word count. Per row, code_row(row, live, esc) gives each live element's code | length << 12
// (16-bit lanes; codes of up to 12 bits, written LSB first) and the mask of escapes, whose
// exponents it stores in esc (appended after their code, `esc_len` being the escape code's
// length); fp16's extra bits follow. The codes are appended to 64-bit lane accumulators, and
// when some lane might not have room for another row's element (more than 63 - 18 bits
// pending) every lane's complete bytes are stored (one 8-byte store per lane) and the
// accumulators keep the incomplete byte: far fewer stores than a fixed three rows per store.
template <class L, class CodeRow>
COMPCOLL_AVX512 inline void write_lanes(const uint8_t* in, uint32_t n, uint32_t esc_len, CodeRow code_row,
                                        uint8_t* scratch, uint32_t stride, uint32_t words[kLanes]) {
  const uint32_t rows = (n + kLanes - 1) / kLanes;
  Writers w[4];
  for (uint32_t g = 0; g < 4; ++g) {
    w[g].acc = _mm512_setzero_si512();
    w[g].nb = _mm512_setzero_si512();
    const uint64_t b = reinterpret_cast<uint64_t>(scratch) + uint64_t{stride} * 8 * g;
    w[g].p = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(b)),
                              _mm512_mullo_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi64(stride)));
  }
  const __m512i room = _mm512_set1_epi64(63 - kMaxElementBits);
  alignas(64) uint16_t cl[kLanes];     // code | length << 12
  alignas(64) uint16_t esc[kLanes];    // an escape's exponent, else 0
  alignas(64) uint16_t extra[kLanes];  // fp16: the extra bits
  alignas(64) uint64_t vals[kLanes], ptrs[kLanes];
  // The next chunk's input usually follows this one's and comes from memory on long inputs:
  // its rows are asked for as this chunk's are coded (a prefetch never faults).
  constexpr uint32_t kRowBytes = kLanes * sizeof(typename L::Bits);
  const uint8_t* const next = in + size_t{n} * sizeof(typename L::Bits);
  for (uint32_t row = 0; row < rows; ++row) {
    for (uint32_t b = 0; b < kRowBytes; b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(next + size_t{row} * kRowBytes + b), _MM_HINT_T1);
    const __mmask32 live = live_mask(n, row);
    const __mmask32 is_esc = code_row(row, live, cl, esc);
    if constexpr (L::kExtraBits != 0) _mm512_store_si512(extra, Rows<L>::extras(in, row, live));
    __m512i most = _mm512_setzero_si512();
    for (uint32_t g = 0; g < 4; ++g) {
      const __m512i v = _mm512_cvtepu16_epi64(_mm_load_si128(reinterpret_cast<const __m128i*>(cl + 8 * g)));
      __m512i l = _mm512_srli_epi64(v, 12);
      __m512i c = _mm512_and_si512(v, _mm512_set1_epi64(0xFFF));
      if (is_esc) {
        const __m512i ex = _mm512_cvtepu16_epi64(_mm_load_si128(reinterpret_cast<const __m128i*>(esc + 8 * g)));
        const __mmask8 k = _mm512_test_epi64_mask(ex, ex);
        c = _mm512_mask_or_epi64(c, k, c, _mm512_sll_epi64(ex, _mm_cvtsi32_si128(static_cast<int>(esc_len))));
        l = _mm512_mask_add_epi64(l, k, l, _mm512_set1_epi64(L::kExpBits));
      }
      if constexpr (L::kExtraBits != 0) {  // after the code (and escape), live elements only
        const __m512i x = _mm512_cvtepu16_epi64(_mm_load_si128(reinterpret_cast<const __m128i*>(extra + 8 * g)));
        const __mmask8 lv = _mm512_test_epi64_mask(l, l);  // every code has a length
        c = _mm512_or_si512(c, _mm512_sllv_epi64(x, l));
        l = _mm512_mask_add_epi64(l, lv, l, _mm512_set1_epi64(L::kExtraBits));
      }
      w[g].acc = _mm512_or_si512(w[g].acc, _mm512_sllv_epi64(c, w[g].nb));
      w[g].nb = _mm512_add_epi64(w[g].nb, l);
      most = _mm512_max_epu64(most, w[g].nb);
    }
    if (_mm512_cmpgt_epu64_mask(most, room)) {
      for (uint32_t g = 0; g < 4; ++g) flush(w[g], vals + 8 * g, ptrs + 8 * g);
      store_lanes(vals, ptrs);
    }
  }
  // The complete bytes, then the incomplete last one, zero-padded to 8 bytes (so that a lane's
  // last word is written whole), and each lane's word count.
  for (uint32_t g = 0; g < 4; ++g) flush(w[g], vals + 8 * g, ptrs + 8 * g);
  store_lanes(vals, ptrs);
  alignas(64) uint64_t nbs[kLanes];
  for (uint32_t g = 0; g < 4; ++g) {
    _mm512_store_si512(vals + 8 * g, w[g].acc);
    _mm512_store_si512(ptrs + 8 * g, w[g].p);
    _mm512_store_si512(nbs + 8 * g, w[g].nb);
  }
  for (uint32_t j = 0; j < kLanes; ++j) {
    uint8_t* p = reinterpret_cast<uint8_t*>(ptrs[j]);
    std::memcpy(p, &vals[j], 8);
    const uint64_t bits = 8 * static_cast<uint64_t>(p - (scratch + size_t{j} * stride)) + nbs[j];
    words[j] = static_cast<uint32_t>((bits + 31) / 32);
  }
}

// A chunk whose header, code table (table_bytes) and raw section are written and whose lanes
// are in scratch (write_lanes): the lane table and the streams after the raw section, or, when
// that would not be smaller, the stored form, as the portable encoder writes it. Its size.
template <class L>
inline size_t finish_chunk(const uint8_t* in, uint32_t n, uint8_t* out, uint32_t table_bytes, const uint8_t* scratch,
                           uint32_t stride, const uint32_t words[kLanes], bool* coded_form) {
  using Layout = expbits::ChunkLayout<L>;
  size_t total = 0;
  for (uint32_t j = 0; j < kLanes; ++j) total += words[j];
  const size_t coded = Layout::streams_at(table_bytes, n) + 4 * total;
  const size_t stored = Layout::stored_bytes(n);
  *coded_form = coded < stored;
  if (coded >= stored) {
    std::memset(out, 0, stored);
    out[0] = kModeStored;
    std::memcpy(out + kChunkHeaderBytes, in, size_t{n} * sizeof(typename L::Bits));
    return stored;
  }
  uint8_t* lane_table = out + Layout::lane_table_at(table_bytes);
  uint8_t* stream = out + Layout::streams_at(table_bytes, n);
  for (uint32_t j = 0; j < kLanes; ++j) {
    store_u16(lane_table + 2 * j, static_cast<uint16_t>(words[j]));
    std::memcpy(stream, scratch + size_t{j} * stride, 4 * size_t{words[j]});
    stream += 4 * size_t{words[j]};
  }
  return coded;
}

// Room for a chunk's 32 lanes (the longest each can be, and 16 bytes past it), kept by the
// thread that codes.
template <class L>
inline uint8_t* lane_scratch(uint32_t n, uint32_t* stride) {
  *stride = 4 * expbits::ChunkLayout<L>::max_lane_words(n) + 16;
  thread_local std::vector<uint8_t> scratch;
  if (scratch.size() < size_t{kLanes} * *stride) scratch.resize(size_t{kLanes} * *stride);
  return scratch.data();
}

// gauss-exp, one row: each element's symbol (GaussSymbols::symbol: ref + d for d in [-12, 7],
// exponent neither 0 nor all ones; 0; or an escape) and its code from the fixed table.
template <class L>
struct GaussRow {
  const uint8_t* in;
  __m512i code_len, base, twenty, esc_sym, all_ones;
  COMPCOLL_AVX512 GaussRow(const uint8_t* in_, uint32_t ref, const EncodeTables& tab)
      : in(in_),
        code_len(_mm512_load_si512(tab.code_len)),
        base(_mm512_set1_epi16(static_cast<short>(ref + kGaussDMin))),
        twenty(_mm512_set1_epi16(kGaussSymZero)),
        esc_sym(_mm512_set1_epi16(kGaussSymEsc)),
        all_ones(_mm512_set1_epi16((1 << L::kExpBits) - 1)) {}
  COMPCOLL_AVX512 __mmask32 operator()(uint32_t row, __mmask32 live, uint16_t* cl, uint16_t* esc) const {
    const __m512i e = Rows<L>::exponents(in, row, live);
    const __m512i d = _mm512_sub_epi16(e, base);
    const __mmask32 zero = _mm512_testn_epi16_mask(e, e);
    const __mmask32 near = _mm512_cmplt_epu16_mask(d, twenty) & ~zero & _mm512_cmpneq_epi16_mask(e, all_ones);
    const __m512i sym = _mm512_mask_mov_epi16(_mm512_mask_mov_epi16(esc_sym, zero, twenty), near, d);
    _mm512_store_si512(cl, _mm512_maskz_permutexvar_epi16(live, sym, code_len));
    const __mmask32 is_esc = live & ~(near | zero);
    if (is_esc) _mm512_store_si512(esc, _mm512_maskz_mov_epi16(is_esc, e));
    return is_esc;
  }
};

// entropy-exp, one row: the raw bytes to the raw section, and each element's code from the
// chunk's table of code | length << 12 by exponent (32 entries: one permute; 256: four, of 64
// entries each, chosen by exponent bits 6 and 7). No escapes: every exponent has a code.
template <class L>
struct EntropyRow {
  static constexpr uint32_t kSyms = 1u << L::kExpBits;
  const uint8_t* in;
  uint8_t* raw;
  __m512i t[8];
  COMPCOLL_AVX512 EntropyRow(const uint8_t* in_, uint8_t* raw_, const uint16_t* table) : in(in_), raw(raw_) {
    for (uint32_t k = 0; k < (kSyms + 31) / 32; ++k) t[k] = _mm512_load_si512(table + 32 * k);
  }
  COMPCOLL_AVX512 __mmask32 operator()(uint32_t row, __mmask32 live, uint16_t* cl, uint16_t*) const {
    const __m512i e = Rows<L>::split(in, row, live, raw);
    __m512i c;
    if constexpr (kSyms == 32) {
      c = _mm512_permutexvar_epi16(e, t[0]);
    } else {
      const __mmask32 b6 = _mm512_test_epi16_mask(e, _mm512_set1_epi16(64));
      const __mmask32 b7 = _mm512_test_epi16_mask(e, _mm512_set1_epi16(128));
      const __m512i lo = _mm512_mask_mov_epi16(_mm512_permutex2var_epi16(t[0], e, t[1]), b6,
                                               _mm512_permutex2var_epi16(t[2], e, t[3]));
      const __m512i hi = _mm512_mask_mov_epi16(_mm512_permutex2var_epi16(t[4], e, t[5]), b6,
                                               _mm512_permutex2var_epi16(t[6], e, t[7]));
      c = _mm512_mask_mov_epi16(lo, b7, hi);
    }
    _mm512_store_si512(cl, _mm512_maskz_mov_epi16(live, c));
    return 0;
  }
};

template <class L>
COMPCOLL_AVX512 size_t encode_gauss_impl(const uint8_t* in, uint32_t n, uint8_t* out) {
  if (n == 0 || n > kMaxChunkElements) return 0;
  const EncodeTables& tab = encode_tables();
  const uint32_t rows = (n + kLanes - 1) / kLanes;
  using Layout = expbits::ChunkLayout<L>;
  uint8_t* raw = out + Layout::raw_at(0);
  const __m512i all_ones = _mm512_set1_epi16((1 << L::kExpBits) - 1);  // Inf / NaN

  // Pass 1: the raw section and the sum and count of normal exponents.
  uint64_t sum = 0, count = 0;
  for (uint32_t row0 = 0; row0 < rows; row0 += 256) {  // 16-bit sums of <= 256 rows of <= 254
    __m512i sum16 = _mm512_setzero_si512();
    const uint32_t row1 = std::min(rows, row0 + 256);
    for (uint32_t row = row0; row < row1; ++row) {
      const __m512i e = Rows<L>::split(in, row, live_mask(n, row), raw);
      const __mmask32 normal = _mm512_test_epi16_mask(e, e) & _mm512_cmpneq_epi16_mask(e, all_ones);
      sum16 = _mm512_mask_add_epi16(sum16, normal, sum16, e);
      count += static_cast<uint32_t>(__builtin_popcount(normal));
    }
    // Unsigned 16-bit sums (up to 65,024) widened to 32 bits before adding them up.
    const __m512i sum32 = _mm512_add_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(sum16)),
                                           _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(sum16, 1)));
    sum += static_cast<uint32_t>(_mm512_reduce_add_epi32(sum32));
  }
  const uint32_t ref = expbits::gauss_reference(sum, static_cast<uint32_t>(count));
  std::memset(raw + n * L::kRawBytes, 0, Layout::raw_bytes(n) - n * L::kRawBytes);

  // Pass 2: each element's symbol and code (GaussRow).
  uint32_t stride, words[kLanes];
  uint8_t* scratch = lane_scratch<L>(n, &stride);
  write_lanes<L>(in, n, tab.esc_len, GaussRow<L>(in, ref, tab), scratch, stride, words);
  bool coded;
  const size_t size = finish_chunk<L>(in, n, out, 0, scratch, stride, words, &coded);
  if (!coded) return size;
  out[0] = kModeCoded;
  out[1] = static_cast<uint8_t>(ref);
  out[2] = out[3] = 0;
  return size;
}

// entropy-exp: the chunk's Huffman code over its exponents (the portable encoder's, from the
// same histogram), the code table, then the raw section and each element's code from a
// 16-bit table of the code by exponent (permuted, 32 or 256 entries).
template <class L>
COMPCOLL_AVX512 size_t encode_entropy_impl(const uint8_t* in, uint32_t n, uint8_t* out) {
  if (n == 0 || n > kMaxChunkElements) return 0;
  constexpr uint32_t kSyms = 1u << L::kExpBits;
  using Layout = expbits::ChunkLayout<L>;
  // Four partial histograms, so runs of equal exponents do not wait on each other's increments.
  uint32_t part[4][kSyms] = {};
  uint32_t i = 0;
  const auto exponent = [in](uint32_t k) {
    typename L::Bits v;
    std::memcpy(&v, in + size_t{k} * sizeof v, sizeof v);
    return L::exponent(v);
  };
  for (; i + 4 <= n; i += 4)
    for (uint32_t j = 0; j < 4; ++j) ++part[j][exponent(i + j)];
  for (; i < n; ++i) ++part[0][exponent(i)];
  uint32_t hist[kSyms];
  for (uint32_t s = 0; s < kSyms; ++s) hist[s] = part[0][s] + part[1][s] + part[2][s] + part[3][s];
  uint8_t lengths[kSyms];
  expbits::huffman_lengths(hist, kSyms, lengths);
  expbits::PrefixCode pc;
  expbits::host::build_prefix_code(lengths, kSyms, pc, /*with_lut=*/false);
  std::memset(out, 0, kChunkHeaderBytes);
  uint32_t nsyms = 0;
  alignas(64) uint16_t table[kSyms < 32 ? 32 : kSyms] = {};
  for (uint32_t s = 0; s < kSyms; ++s) {
    if (lengths[s] == 0) continue;
    out[kChunkHeaderBytes + 2 * nsyms] = static_cast<uint8_t>(s);
    out[kChunkHeaderBytes + 2 * nsyms + 1] = lengths[s];
    table[s] = static_cast<uint16_t>(pc.code[s] | (uint32_t{lengths[s]} << 12));
    ++nsyms;
  }
  const uint32_t table_bytes = Layout::table_bytes_entropy(nsyms);
  std::memset(out + kChunkHeaderBytes + 2 * nsyms, 0, table_bytes - 2 * nsyms);
  uint8_t* raw = out + Layout::raw_at(table_bytes);
  std::memset(raw + n * L::kRawBytes, 0, Layout::raw_bytes(n) - n * L::kRawBytes);
  uint32_t stride, words[kLanes];
  uint8_t* scratch = lane_scratch<L>(n, &stride);
  write_lanes<L>(in, n, 0, EntropyRow<L>(in, raw, table), scratch, stride, words);
  bool coded;
  const size_t size = finish_chunk<L>(in, n, out, table_bytes, scratch, stride, words, &coded);
  if (!coded) return size;
  out[0] = kModeCoded;
  out[1] = static_cast<uint8_t>(nsyms - 1);
  return size;
}

}  // namespace

// The target attribute does not carry over to template instantiations reliably, so each
// public specialization is an ordinary function that carries it.
#define COMPCOLL_AVX512_SPECIALIZE(LAYOUT)                                                          \
  template <>                                                                                      \
  COMPCOLL_AVX512 bool decode_chunk<LAYOUT>(const CodedChunk& chunk) {                             \
    return decode_impl<LAYOUT>(chunk);                                                             \
  }                                                                                                \
  template <>                                                                                      \
  COMPCOLL_AVX512 void decode_pair<LAYOUT>(const CodedChunk& c0, const CodedChunk& c1,            \
                                           const uint8_t* ahead, size_t ahead_bytes, bool ok[2]) { \
    decode_pair_impl<LAYOUT>(c0, c1, ahead, ahead_bytes, ok);                                      \
  }                                                                                                \
  template <>                                                                                      \
  COMPCOLL_AVX512 size_t encode_gauss<LAYOUT>(const uint8_t* in, uint32_t n, uint8_t* out) {      \
    return encode_gauss_impl<LAYOUT>(in, n, out);                                                  \
  }                                                                                                \
  template <>                                                                                      \
  COMPCOLL_AVX512 size_t encode_entropy<LAYOUT>(const uint8_t* in, uint32_t n, uint8_t* out) {    \
    return encode_entropy_impl<LAYOUT>(in, n, out);                                                \
  }
COMPCOLL_AVX512_SPECIALIZE(expbits::Bf16Layout)
COMPCOLL_AVX512_SPECIALIZE(expbits::Fp16Layout)
COMPCOLL_AVX512_SPECIALIZE(expbits::Fp32Layout)
#undef COMPCOLL_AVX512_SPECIALIZE

}  // namespace compcoll::detail::avx512
