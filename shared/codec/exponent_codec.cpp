// shared/codec/exponent_codec.cpp — host reference of the exponent codecs: gauss-exp (a fixed
// code around the chunk's mean exponent, no statistics stored) and entropy-exp (a Huffman
// code built from the chunk's exponent histogram and stored in the chunk). The bit logic is
// codec/exponent_bits.h, shared with the CUDA kernels; this file only walks chunks and lanes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "codec/codec_internal.h"
#include "codec/exponent_bits.h"

namespace compcoll::detail {
namespace {

using namespace format;
using expbits::ChunkLayout;
using expbits::LaneStatus;
using expbits::PrefixCode;

const PrefixCode& gauss_prefix_code() {
  static const PrefixCode pc = [] {
    PrefixCode c{};
    expbits::build_prefix_code(kGaussCodeLengths, kGaussSymbols, c);
    return c;
  }();
  return pc;
}

std::string lane_error(LaneStatus st, uint32_t lane, uint32_t element) {
  const std::string where = "lane " + std::to_string(lane) + " element " + std::to_string(element);
  switch (st) {
    case LaneStatus::Ok: return {};
    case LaneStatus::BadCode: return where + ": bit pattern is no code";
    case LaneStatus::BadExponent: return where + ": exponent out of range";
    case LaneStatus::Overrun: return where + ": lane bitstream exhausted";
    case LaneStatus::TrailingBits: return "lane " + std::to_string(lane) + ": trailing bits after the last element";
  }
  return where + ": unknown lane status";
}

enum class Kind { Gauss, Entropy };

template <Kind K>
class ExponentCodec final : public Codec {
 public:
  CodecId id() const override { return K == Kind::Gauss ? CodecId::GaussExp : CodecId::EntropyExp; }
  std::string_view name() const override { return K == Kind::Gauss ? "gauss-exp" : "entropy-exp"; }
  bool lossless() const override { return true; }

  size_t max_chunk_bytes(DType dtype, uint32_t n) const override {
    switch (dtype) {
      case DType::BF16: return max_bytes<expbits::Bf16Layout>(n);
      case DType::FP16: return max_bytes<expbits::Fp16Layout>(n);
      case DType::FP32: return max_bytes<expbits::Fp32Layout>(n);
    }
    throw_bad_dtype(static_cast<uint8_t>(dtype));
  }
  size_t encode_chunk(DType dtype, const uint8_t* in, uint32_t n, uint8_t* out) const override {
    switch (dtype) {
      case DType::BF16: return encode<expbits::Bf16Layout>(in, n, out);
      case DType::FP16: return encode<expbits::Fp16Layout>(in, n, out);
      case DType::FP32: return encode<expbits::Fp32Layout>(in, n, out);
    }
    throw_bad_dtype(static_cast<uint8_t>(dtype));
  }
  std::string decode_chunk(DType dtype, const uint8_t* in, size_t bytes, uint32_t n,
                           uint8_t* out) const override {
    switch (dtype) {
      case DType::BF16: return decode<expbits::Bf16Layout>(in, bytes, n, out);
      case DType::FP16: return decode<expbits::Fp16Layout>(in, bytes, n, out);
      case DType::FP32: return decode<expbits::Fp32Layout>(in, bytes, n, out);
    }
    throw_bad_dtype(static_cast<uint8_t>(dtype));
  }

 private:
  template <class L>
  static constexpr uint32_t kMaxTableBytes =
      K == Kind::Gauss ? 0 : ChunkLayout<L>::table_bytes_entropy(1u << L::kExpBits);

  template <class L>
  static size_t max_bytes(uint32_t n) {
    return std::max(ChunkLayout<L>::max_coded_bytes(kMaxTableBytes<L>, n),
                    ChunkLayout<L>::stored_bytes(n));
  }

  template <class L>
  static size_t store(const uint8_t* in, uint32_t n, uint8_t* out) {
    const uint32_t total = ChunkLayout<L>::stored_bytes(n);
    std::memset(out, 0, total);
    out[0] = kModeStored;
    std::memcpy(out + kChunkHeaderBytes, in, size_t{n} * sizeof(typename L::Bits));
    return total;
  }

  template <class L>
  static size_t encode(const uint8_t* in_bytes, uint32_t n, uint8_t* out) {
    using Bits = typename L::Bits;
    // The input may be unaligned (a slice of a caller's buffer): copy once into lanes' view.
    Bits values[kMaxChunkElements];
    std::memcpy(values, in_bytes, size_t{n} * sizeof(Bits));
    // The lanes read each element's key (L::key, one byte) from an in-order, vectorized pass.
    uint8_t keys[kMaxChunkElements];
    for (uint32_t i = 0; i < n; ++i) keys[i] = static_cast<uint8_t>(L::key(values[i]));
    PrefixCode entropy_code;
    const PrefixCode* pc = &gauss_prefix_code();
    uint32_t table_bytes = 0;
    std::memset(out, 0, kChunkHeaderBytes);
    out[0] = kModeCoded;
    expbits::GaussSymbols gauss{0};
    if constexpr (K == Kind::Gauss) {
      // 32-bit sums cannot overflow (65536 * 255 < 2^32); branch-free so it vectorizes.
      uint32_t sum = 0, count = 0;
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t e = L::exponent(values[i]);
        const uint32_t normal = expbits::is_normal_exponent<L>(e) ? 1u : 0u;
        sum += e & (0u - normal);
        count += normal;
      }
      gauss.ref = expbits::gauss_reference(sum, count);
      out[1] = static_cast<uint8_t>(gauss.ref);
    } else {
      constexpr uint32_t kSyms = 1u << L::kExpBits;
      uint32_t hist[kSyms] = {};
      for (uint32_t i = 0; i < n; ++i) ++hist[L::exponent(values[i])];
      uint8_t lengths[kSyms];
      expbits::huffman_lengths(hist, kSyms, lengths);
      uint32_t nsyms = 0;
      for (uint32_t s = 0; s < kSyms; ++s) {
        if (lengths[s] == 0) continue;
        out[kChunkHeaderBytes + 2 * nsyms] = static_cast<uint8_t>(s);
        out[kChunkHeaderBytes + 2 * nsyms + 1] = lengths[s];
        ++nsyms;
      }
      if (nsyms == 0) return store<L>(in_bytes, n, out);  // n == 0
      out[1] = static_cast<uint8_t>(nsyms - 1);
      table_bytes = ChunkLayout<L>::table_bytes_entropy(nsyms);
      std::memset(out + kChunkHeaderBytes + 2 * nsyms, 0, table_bytes - 2 * nsyms);
      expbits::build_prefix_code(lengths, kSyms, entropy_code);
      pc = &entropy_code;
    }
    expbits::KeyCode kc;
    if constexpr (K == Kind::Gauss)
      expbits::build_key_code<L>(gauss, *pc, kc);
    else
      expbits::build_key_code<L>(expbits::DirectSymbols{}, *pc, kc);
    uint8_t* raw = out + ChunkLayout<L>::raw_at(table_bytes);
    for (uint32_t i = 0; i < n; ++i) expbits::store_raw<L>(raw + i * L::kRawBytes, L::raw(values[i]));
    std::memset(raw + n * L::kRawBytes, 0, ChunkLayout<L>::raw_bytes(n) - n * L::kRawBytes);
    uint8_t* lane_table = out + ChunkLayout<L>::lane_table_at(table_bytes);
    uint8_t* stream = out + ChunkLayout<L>::streams_at(table_bytes, n);
    // Two lanes at a time into a scratch area each (their bit writers are independent
    // dependency chains a core can overlap; with four, x86-64 runs out of registers and the
    // writers spill, which measured 15% slower), then the lanes are packed back to back. The
    // lane bits are exactly expbits::encode_lane's: same KeyCode, same BitWriter.
    constexpr uint32_t kGroup = 2;
    uint8_t scratch[kGroup][4 * ChunkLayout<expbits::Fp32Layout>::max_lane_words(kMaxChunkElements)];
    for (uint32_t lane0 = 0; lane0 < kLanes; lane0 += kGroup) {
      expbits::BitWriter w[kGroup] = {expbits::BitWriter(scratch[0]), expbits::BitWriter(scratch[1])};
      const uint32_t full_rows = n / kLanes;
      for (uint32_t row = 0; row < full_rows; ++row) {
        const uint8_t* v = keys + row * kLanes + lane0;
        for (uint32_t g = 0; g < kGroup; ++g) w[g].put(kc.word[v[g]], kc.length[v[g]]);
      }
      for (uint32_t g = 0; g < kGroup; ++g) {
        const uint32_t k = full_rows * kLanes + lane0 + g;
        if (k < n) w[g].put(kc.word[keys[k]], kc.length[keys[k]]);
        const uint32_t words = w[g].finish();
        std::memcpy(stream, scratch[g], 4 * size_t{words});
        store_u16(lane_table + 2 * (lane0 + g), static_cast<uint16_t>(words));
        stream += 4 * words;
      }
    }
    const size_t coded = static_cast<size_t>(stream - out);
    if (coded >= ChunkLayout<L>::stored_bytes(n)) return store<L>(in_bytes, n, out);
    return coded;
  }

  template <class L>
  static std::string decode(const uint8_t* in, size_t bytes, uint32_t n, uint8_t* out_bytes) {
    using Bits = typename L::Bits;
    const auto size_error = [&](size_t expected) {
      return "chunk of " + std::to_string(bytes) + " bytes, its contents need " +
             std::to_string(expected);
    };
    if (bytes < kChunkHeaderBytes) return size_error(kChunkHeaderBytes);
    if (in[0] == kModeStored) {
      if (bytes != ChunkLayout<L>::stored_bytes(n)) return size_error(ChunkLayout<L>::stored_bytes(n));
      std::memcpy(out_bytes, in + kChunkHeaderBytes, size_t{n} * sizeof(Bits));
      return {};
    }
    if (in[0] != kModeCoded) return "unknown chunk mode " + std::to_string(in[0]) + " at chunk byte 0";
    if (in[2] != 0 || in[3] != 0) return "reserved chunk header bytes 2..3 are not zero";
    PrefixCode entropy_code;
    const PrefixCode* pc = &gauss_prefix_code();
    uint32_t table_bytes = 0;
    expbits::GaussSymbols gauss{in[1]};
    if constexpr (K == Kind::Entropy) {
      constexpr uint32_t kSyms = 1u << L::kExpBits;
      const uint32_t nsyms = uint32_t{in[1]} + 1;
      if (nsyms > kSyms) return "symbol count " + std::to_string(nsyms) + " exceeds " + std::to_string(kSyms);
      table_bytes = ChunkLayout<L>::table_bytes_entropy(nsyms);
      if (bytes < kChunkHeaderBytes + table_bytes) return size_error(kChunkHeaderBytes + table_bytes);
      uint8_t lengths[kSyms] = {};
      int prev = -1;
      for (uint32_t i = 0; i < nsyms; ++i) {
        const uint32_t s = in[kChunkHeaderBytes + 2 * i], l = in[kChunkHeaderBytes + 2 * i + 1];
        if (static_cast<int>(s) <= prev || s >= kSyms || l == 0 || l > kMaxCodeBits)
          return "code table entry " + std::to_string(i) + " (symbol " + std::to_string(s) +
                 ", length " + std::to_string(l) + ") is invalid";
        lengths[s] = static_cast<uint8_t>(l);
        prev = static_cast<int>(s);
      }
      if (!expbits::build_prefix_code(lengths, kSyms, entropy_code))
        return "code table lengths violate the Kraft inequality";
      pc = &entropy_code;
    }
    const uint32_t streams_at = ChunkLayout<L>::streams_at(table_bytes, n);
    if (bytes < streams_at) return size_error(streams_at);
    const uint8_t* lane_table = in + ChunkLayout<L>::lane_table_at(table_bytes);
    uint64_t total_words = 0;
    for (uint32_t lane = 0; lane < kLanes; ++lane) total_words += load_u16(lane_table + 2 * lane);
    if (bytes != streams_at + 4 * total_words) return size_error(streams_at + 4 * total_words);
    expbits::SymbolExponents se;
    if constexpr (K == Kind::Gauss)
      expbits::build_symbol_exponents<L>(gauss, se);
    else
      expbits::build_symbol_exponents<L>(expbits::DirectSymbols{}, se);
    Bits values[kMaxChunkElements];
    uint8_t keys[kMaxChunkElements];  // the decode loop yields keys (L::key), joined below
    const uint8_t* raw = in + ChunkLayout<L>::raw_at(table_bytes);
    const uint8_t* lane_stream[kLanes];
    lane_stream[0] = in + streams_at;
    for (uint32_t lane = 1; lane < kLanes; ++lane)
      lane_stream[lane] = lane_stream[lane - 1] + 4 * load_u16(lane_table + 2 * (lane - 1));
    // Four lanes at a time: their bit readers are independent dependency chains, which is
    // what lets one core overlap the table lookups (a GPU thread runs one lane instead).
    constexpr uint32_t kGroup = 4;
    for (uint32_t lane0 = 0; lane0 < kLanes; lane0 += kGroup) {
      const auto reader = [&](uint32_t g) {
        return expbits::BitReader(lane_stream[lane0 + g], load_u16(lane_table + 2 * (lane0 + g)));
      };
      expbits::BitReader r[kGroup] = {reader(0), reader(1), reader(2), reader(3)};
      LaneStatus st[kGroup] = {};
      // A bad code only sets st[g]; decoding goes on harmlessly (bounded reads, values
      // discarded), so the hot loop has no per-element branch on it.
      const uint32_t full_rows = n / kLanes;
      for (uint32_t row = 0; row < full_rows; ++row) {
        const uint32_t k = row * kLanes + lane0;
        for (uint32_t g = 0; g < kGroup; ++g)
          keys[k + g] = static_cast<uint8_t>(expbits::decode_key<L>(r[g], se, *pc, &st[g]));
      }
      bool bad = false;
      for (uint32_t g = 0; g < kGroup; ++g) {
        const uint32_t k = full_rows * kLanes + lane0 + g;
        if (k < n) keys[k] = static_cast<uint8_t>(expbits::decode_key<L>(r[g], se, *pc, &st[g]));
        bad |= st[g] != LaneStatus::Ok || expbits::lane_end_status(r[g]) != LaneStatus::Ok;
      }
      if (bad) {  // rare: decode the group's lanes one by one to name the first bad element
        for (uint32_t g = 0; g < kGroup; ++g) {
          uint32_t element = 0;
          const LaneStatus lane_st = expbits::decode_lane<L>(
              lane_stream[lane0 + g], load_u16(lane_table + 2 * (lane0 + g)), raw, n, lane0 + g,
              se, *pc, values, &element);
          if (lane_st != LaneStatus::Ok) return lane_error(lane_st, lane0 + g, element);
        }
      }
    }
    // Keys and raw bytes meet in one in-order pass the compiler vectorizes.
    for (uint32_t k = 0; k < n; ++k) values[k] = expbits::join_key<L>(keys[k], raw, k);
    std::memcpy(out_bytes, values, size_t{n} * sizeof(Bits));
    return {};
  }
};

}  // namespace

const Codec& gauss_exp_codec() {
  static const ExponentCodec<Kind::Gauss> codec;
  return codec;
}
const Codec& entropy_exp_codec() {
  static const ExponentCodec<Kind::Entropy> codec;
  return codec;
}

}  // namespace compcoll::detail

namespace compcoll {
namespace {

template <class L>
ExponentEntropy exponent_entropy_of(const uint8_t* data, uint64_t n) {
  using Bits = typename L::Bits;
  uint64_t hist[1u << L::kExpBits] = {};
  for (uint64_t i = 0; i < n; ++i) {
    Bits v;
    std::memcpy(&v, data + i * sizeof(Bits), sizeof(Bits));
    ++hist[L::exponent(v)];
  }
  ExponentEntropy e;
  if (n == 0) return e;
  for (uint64_t c : hist)
    if (c) e.bits -= static_cast<double>(c) / n * std::log2(static_cast<double>(c) / n);
  const double bits = 8.0 * sizeof(Bits);
  e.bound = bits / (bits - L::kExpBits + e.bits);
  return e;
}

}  // namespace

ExponentEntropy exponent_entropy(DType dtype, const void* data, uint64_t elements) {
  const auto* p = static_cast<const uint8_t*>(data);
  switch (dtype) {
    case DType::BF16: return exponent_entropy_of<expbits::Bf16Layout>(p, elements);
    case DType::FP16: return exponent_entropy_of<expbits::Fp16Layout>(p, elements);
    case DType::FP32: return exponent_entropy_of<expbits::Fp32Layout>(p, elements);
  }
  detail::throw_bad_dtype(static_cast<uint8_t>(dtype));
}

}  // namespace compcoll
