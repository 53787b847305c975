// shared/codec/exponent_codec.cpp — host reference of the exponent codecs: gauss-exp (a fixed
// code around the chunk's mean exponent, no statistics stored) and entropy-exp (a Huffman
// code built from the chunk's exponent histogram and stored in the chunk). The bit logic is
// codec/exponent_bits.h, shared with the CUDA kernels; this file walks chunks and lanes and,
// for speed on one core, writes and reads the very same lane bits with wider loops ("host
// fast paths" below). Where the CPU has AVX-512, gauss-exp chunks go to the vector paths of
// codec/exponent_avx512.h first; these portable paths stay the reference and the fallback.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "codec/codec_internal.h"
#include "codec/exponent_avx512.h"
#include "codec/exponent_bits.h"
#include "codec/exponent_host.h"

namespace compcoll::detail {
namespace {

using namespace format;
using expbits::ChunkLayout;
using expbits::LaneStatus;
using expbits::PrefixCode;

using expbits::host::gauss_prefix_code;

std::string lane_error(LaneStatus st, uint32_t lane, uint32_t element) {
  const std::string where = "lane " + std::to_string(lane) + " element " + std::to_string(element);
  switch (st) {
    case LaneStatus::Ok: return {};
    case LaneStatus::BadCode: return where + ": bit pattern is no code";
    case LaneStatus::BadExponent: return where + ": exponent out of range";
    case LaneStatus::Overrun: return "lane " + std::to_string(lane) + ": bitstream exhausted before its last element";
    case LaneStatus::TrailingBits: return "lane " + std::to_string(lane) + ": trailing bits after the last element";
  }
  return where + ": unknown lane status";
}

// ---- host fast paths ---------------------------------------------------------------------
// The CUDA kernels run encode_lane's and decode_lane's lane loops (expbits::put_lane,
// take_lane), one lane per thread. On one host
// core those per-element loops are latency-bound, so the host codes the same bits with wider
// loops: a writer that appends three codes per 64-bit flush, a reader that decodes from a
// 64-bit window, and (gauss-exp) a table that decodes up to three symbols per lookup. The
// streams are bit-identical to encode_lane's (tests/codec check it); any chunk the fast
// decoder does not accept as clean is decoded again by the generic lane loops below, which
// name the first bad element exactly as before.

// Per key: expbits::KeyCode's word (low 32 bits) and length (bits 32..39) in one load.
struct PackedKeyCode {
  uint64_t e[256];
  uint32_t max_len;
};

inline void pack_key_code(const expbits::KeyCode& kc, PackedKeyCode& pk) {
  uint32_t max_len = 0;
  for (uint32_t key = 0; key < 256; ++key) {
    pk.e[key] = kc.word(key) | (uint64_t{kc.length(key)} << 32);
    max_len = std::max<uint32_t>(max_len, kc.length(key));
  }
  pk.max_len = max_len;
}

// LSB-first lane writer with byte-granular flushes. After a flush, acc holds the nb < 8 bits
// of the last, incomplete byte at p; a flush stores all 8 bytes of acc at p (bits above nb
// are zero), so the bytes are exactly expbits::BitWriter's and the last word's padding is
// zero. It stores up to 8 bytes past the lane's last word: the caller leaves room.
struct LaneWriter {
  uint8_t* start;
  uint8_t* p;
  uint64_t acc = 0;
  uint32_t nb = 0;
  explicit LaneWriter(uint8_t* o) : start(o), p(o) {}
  void flush() {
    store_u64(p, acc);
    p += nb >> 3;
    acc >>= nb & 56u;
    nb &= 7u;
  }
  void put1(uint64_t e) {  // a code of up to 32 bits
    acc |= uint64_t{static_cast<uint32_t>(e)} << nb;
    nb += static_cast<uint32_t>(e >> 32);
    flush();
  }
  // Three codes of at most kMaxPut3Bits bits: 7 + 3 * 19 bits fit the accumulator.
  static constexpr uint32_t kMaxPut3Bits = 19;
  void put3(uint64_t e0, uint64_t e1, uint64_t e2) {
    const uint32_t l0 = static_cast<uint32_t>(e0 >> 32);
    const uint32_t l01 = l0 + static_cast<uint32_t>(e1 >> 32);
    const uint64_t c = uint64_t{static_cast<uint32_t>(e0)} |
                       (uint64_t{static_cast<uint32_t>(e1)} << l0) |
                       (uint64_t{static_cast<uint32_t>(e2)} << l01);
    acc |= c << nb;
    nb += l01 + static_cast<uint32_t>(e2 >> 32);
    flush();
  }
  uint32_t finish() {  // word count; the zero-padded last word is already stored, and re-stored here
    store_u64(p, acc);
    const uint64_t bits = 8 * static_cast<uint64_t>(p - start) + nb;
    return static_cast<uint32_t>((bits + 31) / 32);
  }
};

// Lanes lane0 .. lane0+G-1 of a chunk of n elements with keys `keys`, lane g into dst[g]
// (room for its words plus 8 bytes); returns the word counts in words[g].
template <uint32_t G>
void encode_lane_group(const uint8_t* keys, uint32_t n, uint32_t lane0, const PackedKeyCode& pk,
                       uint8_t* const* dst, uint32_t* words) {
  LaneWriter w[G] = {LaneWriter(dst[0]), LaneWriter(dst[1])};
  static_assert(G == 2, "one writer per lane of the group");
  const uint32_t full_rows = n / kLanes;
  uint32_t row = 0;
  if (pk.max_len <= LaneWriter::kMaxPut3Bits) {
    for (; row + 3 <= full_rows; row += 3) {
      const uint8_t* v = keys + row * kLanes + lane0;
      for (uint32_t g = 0; g < G; ++g)
        w[g].put3(pk.e[v[g]], pk.e[v[g + kLanes]], pk.e[v[g + 2 * kLanes]]);
    }
  }
  for (; row < full_rows; ++row) {
    const uint8_t* v = keys + row * kLanes + lane0;
    for (uint32_t g = 0; g < G; ++g) w[g].put1(pk.e[v[g]]);
  }
  for (uint32_t g = 0; g < G; ++g) {
    const uint32_t k = full_rows * kLanes + lane0 + g;
    if (k < n) w[g].put1(pk.e[keys[k]]);
    words[g] = w[g].finish();
  }
}

// gauss-exp decode table of the fixed code, independent of the chunk's reference: for the
// next kMaxCodeBits stream bits, up to three whole symbols that are not escapes (bytes 0..2),
// their count (bits 24..25) and the bits they take (bits 28..31). Count 0: the first symbol
// is an escape (or, were the code incomplete, the bits start no code word).
struct GaussMultiTable {
  uint32_t e[1u << kMaxCodeBits];
};

const GaussMultiTable& gauss_multi_table() {
  static const GaussMultiTable table = [] {
    GaussMultiTable t{};
    const PrefixCode& pc = gauss_prefix_code();
    for (uint32_t bits = 0; bits < (1u << kMaxCodeBits); ++bits) {
      uint32_t used = 0, count = 0, syms = 0;
      while (count < 3) {
        // The bits past `used` that the window holds; a code no longer than that is decided.
        const uint16_t entry = pc.lut[bits >> used];
        const uint32_t len = entry & 0xFu, sym = entry >> 4;
        if (len == 0 || used + len > kMaxCodeBits || sym == kGaussSymEsc) break;
        syms |= sym << (8 * count);
        used += len;
        ++count;
      }
      t.e[bits] = syms | (count << 24) | (used << 28);
    }
    return t;
  }();
  return table;
}

// The gauss-exp fast decoder writes one byte per element: the symbol (d + 12, kGaussSymZero,
// or kGaussSymEsc, whose exponent goes to a side array), mapped to exponents afterwards.
// One element from the next (at least 12 + 8) stream bits: its symbol and length, and for an
// escape its exponent in *e. A bit pattern that is no code gives length 0 and sets *bad.
inline uint8_t gauss_symbol(uint32_t bits, const PrefixCode& pc, uint32_t* len, uint8_t* e,
                            bool* bad) {
  const uint16_t entry = pc.lut[bits & ((1u << kMaxCodeBits) - 1)];
  const uint32_t l = entry & 0xFu, sym = entry >> 4;
  *bad |= l == 0;
  if (sym == kGaussSymEsc) {
    *e = static_cast<uint8_t>(bits >> l);  // bf16 and fp32: 8 exponent bits follow
    *len = l + 8;
  } else {
    *len = l;
  }
  return static_cast<uint8_t>(sym);
}

// Where a lane's fast decoder stands.
struct LaneCursor {
  const uint8_t* p;     // the lane's first word
  uint32_t nwords;      // its word count
  uint64_t limit;       // bytes readable from p (to the end of the chunk)
  uint64_t pos = 0;     // bit position
  uint32_t k = 0;       // next element
  uint32_t end_k = 0;   // past its last element
  uint64_t window() const { return load_u64(p + (pos >> 3)) >> (pos & 7); }  // >= 57 bits
};

// A hint for long inputs, which come from memory rather than cache: the next chunk's input
// usually follows this chunk's and is as large. Each lane group asks for its share of it
// while this chunk's lanes keep the core busy. A prefetch never faults, whatever the address.
inline void prefetch_next_chunk(const uint8_t* end, size_t bytes, uint32_t lane0, uint32_t group) {
  const uint8_t* p = end + bytes * lane0 / kLanes;
  for (size_t b = 0; b < bytes * group / kLanes; b += 64) __builtin_prefetch(p + b);
}

// The rest of G lanes, interleaved (independent chains), through bounds-checked readers:
// step(g, bits, &len) decodes lane g's element c[g].k from its next 32 bits. Returns false
// unless every lane ends cleanly (expbits::lane_end_status).
template <uint32_t G, class Step>
bool finish_lanes(LaneCursor* c, Step step) {
  struct Reader : expbits::BitReader {
    Reader() : BitReader(nullptr, 0) {}
  };
  Reader r[G];
  uint32_t steps = 0;
  for (uint32_t g = 0; g < G; ++g) {
    r[g].in = c[g].p;
    r[g].nwords = c[g].nwords;
    r[g].pos = c[g].pos;
    steps = std::max(steps, (c[g].end_k - c[g].k) / kLanes);
  }
  for (uint32_t i = 0; i < steps; ++i) {
    for (uint32_t g = 0; g < G; ++g) {
      if (c[g].k >= c[g].end_k) continue;
      uint32_t len;
      step(g, r[g].peek32(), &len);
      r[g].skip(len);
      c[g].k += kLanes;
    }
  }
  bool clean = true;
  for (uint32_t g = 0; g < G; ++g) clean &= expbits::lane_end_status(r[g]) == LaneStatus::Ok;
  return clean;
}

enum class Kind { Gauss, Entropy };

// gauss-exp dtypes with an AVX-512 path (codec/exponent_avx512.h), taken where the CPU has it.
template <class L>
constexpr bool kHasAvx512Path = std::is_same_v<L, expbits::Bf16Layout> ||
                                std::is_same_v<L, expbits::Fp16Layout> ||
                                std::is_same_v<L, expbits::Fp32Layout>;

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
  // The chunk header, the lane table and 32 lane streams each padded to a word (2 bytes each,
  // on average); entropy-exp's code table besides: 2 bytes a symbol, padded to 4 (30 bytes in
  // chunks of 4096 Gaussian elements, which use about 14 symbols).
  double chunk_overhead_bytes(DType) const override {
    const double lanes = format::kChunkHeaderBytes + format::kLaneTableBytes + format::kLanes * 2.0;
    return K == Kind::Gauss ? lanes : lanes + 30.0;
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
  // The AVX-512 paths decode two coded chunks at once; the portable paths, and a stored or
  // damaged chunk, one after the other.
  void decode_chunk_pair(DType dtype, const ChunkRef (&chunk)[2], std::span<const uint8_t> ahead,
                         std::string (&err)[2]) const override {
    if (avx512::enabled()) {
      switch (dtype) {
        case DType::BF16: return decode_pair<expbits::Bf16Layout>(chunk, ahead, err);
        case DType::FP16: return decode_pair<expbits::Fp16Layout>(chunk, ahead, err);
        case DType::FP32: return decode_pair<expbits::Fp32Layout>(chunk, ahead, err);
      }
    }
    Codec::decode_chunk_pair(dtype, chunk, ahead, err);
  }

 private:
  // A coded chunk's parts, its header, table and sizes checked.
  struct Located {
    const uint8_t* lane_table;
    const uint8_t* raw;
    const uint8_t* streams;  // the lane streams, back to back: 4 * total_words bytes
    uint64_t total_words;
    uint32_t ref;            // gauss-exp: the reference
    bool complete_code;      // every bit pattern starts a code word (gauss-exp's fixed code does)
  };

  // Checks a coded chunk (not a stored one) and finds its parts; for entropy-exp also reads
  // its code into `code` (with the decode table). "" or what is wrong.
  template <class L>
  static std::string locate(const uint8_t* in, size_t bytes, uint32_t n, PrefixCode& code, Located& c) {
    const auto size_error = [&](size_t expected) {
      return "chunk of " + std::to_string(bytes) + " bytes, its contents need " + std::to_string(expected);
    };
    if (bytes < kChunkHeaderBytes) return size_error(kChunkHeaderBytes);
    if (in[0] != kModeCoded) return "unknown chunk mode " + std::to_string(in[0]) + " at chunk byte 0";
    if (in[2] != 0 || in[3] != 0) return "reserved chunk header bytes 2..3 are not zero";
    uint32_t table_bytes = 0;
    c.complete_code = true;  // gauss-exp's fixed code is complete (tests check it)
    c.ref = expbits::GaussSymbols{in[1]}.ref;
    if constexpr (K == Kind::Entropy) {
      constexpr uint32_t kSyms = 1u << L::kExpBits;
      const uint32_t nsyms = uint32_t{in[1]} + 1;
      if (nsyms > kSyms) return "symbol count " + std::to_string(nsyms) + " exceeds " + std::to_string(kSyms);
      table_bytes = ChunkLayout<L>::table_bytes_entropy(nsyms);
      if (bytes < kChunkHeaderBytes + table_bytes) return size_error(kChunkHeaderBytes + table_bytes);
      uint8_t lengths[kSyms] = {};
      int prev = -1;
      uint32_t kraft = 0;  // in units of 2^-kMaxCodeBits
      for (uint32_t i = 0; i < nsyms; ++i) {
        const uint32_t s = in[kChunkHeaderBytes + 2 * i], l = in[kChunkHeaderBytes + 2 * i + 1];
        if (static_cast<int>(s) <= prev || s >= kSyms || l == 0 || l > kMaxCodeBits)
          return "code table entry " + std::to_string(i) + " (symbol " + std::to_string(s) +
                 ", length " + std::to_string(l) + ") is invalid";
        lengths[s] = static_cast<uint8_t>(l);
        prev = static_cast<int>(s);
        kraft += 1u << (kMaxCodeBits - l);
      }
      if (!expbits::host::build_prefix_code(lengths, kSyms, code))
        return "code table lengths violate the Kraft inequality";
      c.complete_code = kraft == (1u << kMaxCodeBits);
    }
    const uint32_t streams_at = ChunkLayout<L>::streams_at(table_bytes, n);
    if (bytes < streams_at) return size_error(streams_at);
    c.lane_table = in + ChunkLayout<L>::lane_table_at(table_bytes);
    c.total_words = 0;
    for (uint32_t lane = 0; lane < kLanes; ++lane) c.total_words += load_u16(c.lane_table + 2 * lane);
    if (bytes != streams_at + 4 * c.total_words) return size_error(streams_at + 4 * c.total_words);
    c.raw = in + ChunkLayout<L>::raw_at(table_bytes);
    c.streams = in + streams_at;
    return {};
  }

  // A located chunk as the AVX-512 decoder takes it.
  static avx512::CodedChunk vector_chunk(const Located& c, uint32_t n, uint8_t* out, const PrefixCode& code) {
    return {c.streams, 4 * c.total_words, c.lane_table, c.raw, n, c.ref, out,
            K == Kind::Entropy ? code.lut : nullptr};
  }

  template <class L>
  void decode_pair(const ChunkRef (&chunk)[2], std::span<const uint8_t> ahead, std::string (&err)[2]) const {
    thread_local PrefixCode code[2];  // entropy-exp: the chunks' codes (9 KB each, off the stack)
    Located c[2];
    bool ok[2] = {false, false};
    if (chunk[0].bytes >= 1 && chunk[0].in[0] == kModeCoded && chunk[1].bytes >= 1 && chunk[1].in[0] == kModeCoded &&
        locate<L>(chunk[0].in, chunk[0].bytes, chunk[0].n, code[0], c[0]).empty() &&
        locate<L>(chunk[1].in, chunk[1].bytes, chunk[1].n, code[1], c[1]).empty()) {
      avx512::CodedChunk g[2] = {vector_chunk(c[0], chunk[0].n, chunk[0].out, code[0]),
                                 vector_chunk(c[1], chunk[1].n, chunk[1].out, code[1])};
      // A chunk's streams end it; where the next chunk follows, the decoder reads in place.
      g[0].readable_after = chunk[0].in + chunk[0].bytes == chunk[1].in;
      g[1].readable_after = ahead.size() >= 8 && chunk[1].in + chunk[1].bytes == ahead.data();
      avx512::decode_pair<L>(g[0], g[1], ahead.data(), ahead.size(), ok);
    }
    for (uint32_t i = 0; i < 2; ++i)
      err[i] = ok[i] ? std::string{} : decode<L>(chunk[i].in, chunk[i].bytes, chunk[i].n, chunk[i].out);
  }

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

  // Element i of a chunk's input, which may be unaligned (a slice of a caller's buffer).
  template <class L>
  static typename L::Bits load_value(const uint8_t* in, uint32_t i) {
    typename L::Bits v;
    std::memcpy(&v, in + size_t{i} * sizeof(v), sizeof(v));
    return v;
  }
  template <class L>
  static void store_value(uint8_t* out, uint32_t i, typename L::Bits v) {
    std::memcpy(out + size_t{i} * sizeof(v), &v, sizeof(v));
  }

  template <class L>
  static size_t encode(const uint8_t* in, uint32_t n, uint8_t* out) {
    if constexpr (kHasAvx512Path<L>) {
      if (avx512::enabled()) {
        const size_t size =
            K == Kind::Gauss ? avx512::encode_gauss<L>(in, n, out) : avx512::encode_entropy<L>(in, n, out);
        if (size) return size;
      }
    }
    // Each element's key (L::key, one byte: what decides its lane-stream bits) from one
    // in-order pass the compiler vectorizes; the lanes then read keys only.
    uint8_t keys[kMaxChunkElements];
    PrefixCode entropy_code;
    const PrefixCode* pc = &gauss_prefix_code();
    uint32_t table_bytes = 0;
    std::memset(out, 0, kChunkHeaderBytes);
    out[0] = kModeCoded;
    expbits::KeyCode kc;
    for (uint32_t i = 0; i < n; ++i) keys[i] = static_cast<uint8_t>(L::key(load_value<L>(in, i)));
    if constexpr (K == Kind::Gauss) {
      // The sum and count of the normal exponents, in blocks of 256 keys whose 16-bit sums
      // cannot overflow (256 * 255 < 2^16), branch-free: the compiler vectorizes it in
      // 16-bit lanes.
      uint32_t sum = 0, count = 0;
      for (uint32_t i0 = 0; i0 < n; i0 += 256) {
        const uint32_t i1 = std::min(n, i0 + 256);
        uint16_t block_sum = 0, block_count = 0;
        for (uint32_t i = i0; i < i1; ++i) {
          const uint8_t e = static_cast<uint8_t>(L::key_exponent(keys[i]));
          const uint8_t normal = expbits::is_normal_exponent<L>(e) ? 0xFFu : 0u;
          block_sum = static_cast<uint16_t>(block_sum + (e & normal));
          block_count = static_cast<uint16_t>(block_count + (normal & 1u));
        }
        sum += block_sum;
        count += block_count;
      }
      const expbits::GaussSymbols gauss{expbits::gauss_reference(sum, count)};
      out[1] = static_cast<uint8_t>(gauss.ref);
      expbits::build_key_code<L>(gauss, *pc, kc);
    } else {
      // Four partial histograms, so runs of equal keys do not wait on each other's increments.
      uint32_t part[4][256] = {};
      uint32_t i = 0;
      for (; i + 4 <= n; i += 4)
        for (uint32_t j = 0; j < 4; ++j) ++part[j][keys[i + j]];
      for (; i < n; ++i) ++part[0][keys[i]];
      constexpr uint32_t kSyms = 1u << L::kExpBits;
      uint32_t hist[kSyms] = {};
      for (uint32_t key = 0; key < 256; ++key)
        hist[L::key_exponent(key)] += part[0][key] + part[1][key] + part[2][key] + part[3][key];
      uint8_t lengths[kSyms];
      expbits::huffman_lengths(hist, kSyms, lengths);
      uint32_t nsyms = 0;
      for (uint32_t s = 0; s < kSyms; ++s) {
        if (lengths[s] == 0) continue;
        out[kChunkHeaderBytes + 2 * nsyms] = static_cast<uint8_t>(s);
        out[kChunkHeaderBytes + 2 * nsyms + 1] = lengths[s];
        ++nsyms;
      }
      if (nsyms == 0) return store<L>(in, n, out);  // n == 0
      out[1] = static_cast<uint8_t>(nsyms - 1);
      table_bytes = ChunkLayout<L>::table_bytes_entropy(nsyms);
      std::memset(out + kChunkHeaderBytes + 2 * nsyms, 0, table_bytes - 2 * nsyms);
      expbits::host::build_prefix_code(lengths, kSyms, entropy_code, /*with_lut=*/false);
      pc = &entropy_code;
      expbits::build_key_code<L>(expbits::DirectSymbols{}, *pc, kc);
    }
    PackedKeyCode pk;
    pack_key_code(kc, pk);
    uint8_t* raw = out + ChunkLayout<L>::raw_at(table_bytes);
    for (uint32_t i = 0; i < n; ++i)
      expbits::store_raw<L>(raw + i * L::kRawBytes, L::raw(load_value<L>(in, i)));
    std::memset(raw + n * L::kRawBytes, 0, ChunkLayout<L>::raw_bytes(n) - n * L::kRawBytes);
    uint8_t* lane_table = out + ChunkLayout<L>::lane_table_at(table_bytes);
    uint8_t* stream = out + ChunkLayout<L>::streams_at(table_bytes, n);
    const size_t stored = ChunkLayout<L>::stored_bytes(n);
    const size_t in_bytes = size_t{n} * sizeof(typename L::Bits);
    // Two lanes at a time (independent dependency chains a core overlaps), each into a
    // scratch area, then packed back to back.
    constexpr uint32_t kGroup = 2;
    // Room for the longest lane (ChunkLayout::max_lane_words of a largest chunk) and the
    // writer's 8 bytes past it.
    constexpr size_t kScratch =
        4 * ((kMaxChunkElements / kLanes * (kMaxCodeBits + 8 + 3) + 31) / 32) + 8;
    uint8_t scratch[kGroup][kScratch];
    for (uint32_t lane0 = 0; lane0 < kLanes; lane0 += kGroup) {
      uint8_t* const dst[kGroup] = {scratch[0], scratch[1]};
      uint32_t words[kGroup];
      prefetch_next_chunk(in + in_bytes, in_bytes, lane0, kGroup);
      encode_lane_group<kGroup>(keys, n, lane0, pk, dst, words);
      for (uint32_t g = 0; g < kGroup; ++g) {
        std::memcpy(stream, scratch[g], 4 * size_t{words[g]});
        store_u16(lane_table + 2 * (lane0 + g), static_cast<uint16_t>(words[g]));
        stream += 4 * size_t{words[g]};
      }
      // Coded chunks only grow: once as large as the stored form, it will be stored.
      if (static_cast<size_t>(stream - out) >= stored) return store<L>(in, n, out);
    }
    return static_cast<size_t>(stream - out);
  }

  template <class L>
  static std::string decode(const uint8_t* in, size_t bytes, uint32_t n, uint8_t* out_bytes) {
    const auto size_error = [&](size_t expected) {
      return "chunk of " + std::to_string(bytes) + " bytes, its contents need " +
             std::to_string(expected);
    };
    if (bytes < kChunkHeaderBytes) return size_error(kChunkHeaderBytes);
    if (in[0] == kModeStored) {
      if (bytes != ChunkLayout<L>::stored_bytes(n)) return size_error(ChunkLayout<L>::stored_bytes(n));
      std::memcpy(out_bytes, in + kChunkHeaderBytes, size_t{n} * sizeof(typename L::Bits));
      return {};
    }
    PrefixCode entropy_code;
    Located c;
    if (std::string err = locate<L>(in, bytes, n, entropy_code, c); !err.empty()) return err;
    const PrefixCode* pc = K == Kind::Gauss ? &gauss_prefix_code() : &entropy_code;
    const expbits::GaussSymbols gauss{c.ref};
    const uint8_t* const lane_table = c.lane_table;
    const uint8_t* const raw = c.raw;
    const bool complete_code = c.complete_code;
    const uint8_t* lane_stream[kLanes];
    lane_stream[0] = c.streams;
    for (uint32_t lane = 1; lane < kLanes; ++lane)
      lane_stream[lane] = lane_stream[lane - 1] + 4 * load_u16(lane_table + 2 * (lane - 1));
    // The AVX-512 decoder first, where the CPU has it; a chunk it does not accept as clean
    // goes on to the portable decoders below.
    if constexpr (kHasAvx512Path<L>) {
      if (avx512::enabled() && avx512::decode_chunk<L>(vector_chunk(c, n, out_bytes, entropy_code))) return {};
    }
    // The fast decoders need a complete code (every bit pattern starts a code word) and no
    // extra bits (bf16, fp32). A chunk they do not accept as clean is decoded again by the
    // generic loops, which report the first bad element.
    if constexpr (L::kExtraBits == 0) {
      if (complete_code) {
        const uint8_t* end = in + bytes;
        // The lane loops' loads are on their dependency chains: a cache miss stalls them.
        // Ask for the lane streams (read lane after lane) up front.
        for (const uint8_t* p = lane_stream[0]; p < end; p += 64) __builtin_prefetch(p);
        const bool clean = K == Kind::Gauss
                               ? decode_gauss_fast<L>(end, n, gauss.ref, raw, lane_stream, lane_table, out_bytes)
                               : decode_entropy_fast<L>(end, n, *pc, raw, lane_stream, lane_table, out_bytes);
        if (clean) return {};
      }
    }
    expbits::SymbolExponents se;
    if constexpr (K == Kind::Gauss)
      expbits::build_symbol_exponents<L>(gauss, se);
    else
      expbits::build_symbol_exponents<L>(expbits::DirectSymbols{}, se);
    return decode_generic<L>(n, raw, lane_stream, lane_table, se, *pc, out_bytes);
  }

  // A lane group's cursors, each at the lane's start.
  template <class L, uint32_t G>
  static void start_lanes(LaneCursor* c, uint32_t lane0, uint32_t n, const uint8_t* chunk_end,
                          const uint8_t* const* lane_stream, const uint8_t* lane_table) {
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t lane = lane0 + g;
      c[g].p = lane_stream[lane];
      c[g].nwords = load_u16(lane_table + 2 * lane);
      c[g].limit = static_cast<uint64_t>(chunk_end - c[g].p);
      c[g].pos = 0;
      c[g].k = lane;
      c[g].end_k = lane + kLanes * ChunkLayout<L>::lane_elements(n, lane);
    }
  }

  // gauss-exp, bf16 and fp32: lanes -> symbols (up to three per table lookup), then one
  // in-order pass maps symbols to exponents (ref + d), checks their range and joins the raw
  // bytes. Returns true when the chunk was clean (else `out` holds garbage).
  template <class L>
  [[gnu::noinline]] static bool decode_gauss_fast(const uint8_t* chunk_end, uint32_t n, uint32_t ref,
                                const uint8_t* raw, const uint8_t* const* lane_stream,
                                const uint8_t* lane_table, uint8_t* out) {
    const GaussMultiTable& mt = gauss_multi_table();
    const PrefixCode& pc = gauss_prefix_code();
    uint8_t sym[kMaxChunkElements];
    uint8_t esc[kMaxChunkElements];  // an escape's exponent, only where sym is kGaussSymEsc
    bool bad = false;
    uint32_t escapes = 0;
    constexpr uint32_t kGroup = 4;
    for (uint32_t lane0 = 0; lane0 < kLanes; lane0 += kGroup) {
      LaneCursor c[kGroup];
      start_lanes<L, kGroup>(c, lane0, n, chunk_end, lane_stream, lane_table);
      // A round: per lane four lookups from one 57-bit window (refilled after an escape),
      // at most 12 elements and 4 * 18 bits, so it stays inside the lane and the chunk.
      const auto can_round = [](const LaneCursor& l) {
        return l.k + 11 * kLanes < l.end_k && (l.pos >> 3) + 17 <= l.limit;
      };
      const auto all_round = [&] {
        bool all = true;
        for (uint32_t g = 0; g < kGroup; ++g) all &= can_round(c[g]);
        return all;
      };
      const auto round = [&] {
        uint64_t w[kGroup];
        for (uint32_t g = 0; g < kGroup; ++g) w[g] = c[g].window();
        for (uint32_t t = 0; t < 4; ++t) {
          for (uint32_t g = 0; g < kGroup; ++g) {
            const uint32_t e = mt.e[w[g] & ((1u << kMaxCodeBits) - 1)];
            if ((e & (3u << 24)) == 0) [[unlikely]] {  // an escape first
              uint32_t len;
              sym[c[g].k] = gauss_symbol(static_cast<uint32_t>(w[g]), pc, &len, &esc[c[g].k], &bad);
              ++escapes;
              c[g].k += kLanes;
              c[g].pos += len;
              w[g] = c[g].window();
            } else {
              uint8_t* d = sym + c[g].k;
              d[0] = static_cast<uint8_t>(e);
              d[kLanes] = static_cast<uint8_t>(e >> 8);
              d[2 * kLanes] = static_cast<uint8_t>(e >> 16);
              c[g].k += ((e >> 24) & 3u) * kLanes;
              const uint32_t len = e >> 28;
              c[g].pos += len;
              w[g] >>= len;
            }
          }
        }
      };
      // Rounds that can_round allows whatever the bits (at most 12 elements and 72 bits
      // each) need no check; the rest are checked one by one.
      uint64_t unchecked = UINT64_MAX;
      for (uint32_t g = 0; g < kGroup; ++g) {
        const uint32_t rows = (c[g].end_k - c[g].k) / kLanes;
        unchecked = std::min<uint64_t>(unchecked, rows < 12 ? 0 : (rows - 12) / 12 + 1);
        unchecked = std::min<uint64_t>(unchecked, c[g].limit < 17 ? 0 : (c[g].limit - 17) / 9 + 1);
      }
      for (uint64_t r = 0; r < unchecked; ++r) round();
      while (all_round()) round();
      bad |= !finish_lanes<kGroup>(c, [&](uint32_t g, uint32_t bits, uint32_t* len) {
        const uint32_t k = c[g].k;
        sym[k] = gauss_symbol(bits, pc, len, &esc[k], &bad);
        escapes += sym[k] == kGaussSymEsc;
      });
    }
    if (bad) return false;
    // Symbol s < kGaussSymZero stands for ref + s - 12, which must lie in [1, all-ones - 1]:
    // s in [s_lo, s_hi]. One vectorized pass: exponents (escapes patched below), the joined
    // values, and the smallest and largest such symbol.
    const int base = static_cast<int>(ref) + kGaussDMin;
    const int max_normal = (1 << L::kExpBits) - 2;
    const uint32_t s_lo = static_cast<uint32_t>(std::max(0, 1 - base));
    const uint32_t s_hi = static_cast<uint32_t>(std::min<int>(kGaussSymZero - 1, max_normal - base));
    const uint8_t base8 = static_cast<uint8_t>(base);
    // Bad: s < s_lo, or s in (s_hi, kGaussSymZero). (ZERO and ESC exceed every s_lo.)
    const uint8_t lo = static_cast<uint8_t>(s_lo), hi1 = static_cast<uint8_t>(s_hi + 1);
    const uint8_t span = static_cast<uint8_t>(kGaussSymZero - hi1);
    uint8_t out_of_range = 0;
    for (uint32_t k = 0; k < n; ++k) {
      const uint8_t s = sym[k];
      out_of_range |= static_cast<uint8_t>((s < lo) | (static_cast<uint8_t>(s - hi1) < span));
    }
    if (out_of_range) return false;
    for (uint32_t k = 0; k < n; ++k) {
      const uint8_t s = sym[k];
      const uint8_t e = s == kGaussSymZero ? uint8_t{0} : static_cast<uint8_t>(s + base8);
      store_value<L>(out, k, L::join(e, expbits::load_raw<L>(raw + k * L::kRawBytes), 0));
    }
    for (const uint8_t* p = sym; escapes > 0; ++p, --escapes) {
      p = static_cast<const uint8_t*>(std::memchr(p, kGaussSymEsc, static_cast<size_t>(sym + n - p)));
      if (p == nullptr) break;
      const uint32_t k = static_cast<uint32_t>(p - sym);
      store_value<L>(out, k, L::join(esc[k], expbits::load_raw<L>(raw + k * L::kRawBytes), 0));
    }
    return true;
  }

  // entropy-exp, bf16 and fp32, complete code: one symbol (the exponent) per lookup, four
  // lookups per 57-bit window; then keys and raw bytes meet in one in-order pass.
  template <class L>
  [[gnu::noinline]] static bool decode_entropy_fast(const uint8_t* chunk_end, uint32_t n, const PrefixCode& pc,
                                  const uint8_t* raw, const uint8_t* const* lane_stream,
                                  const uint8_t* lane_table, uint8_t* out) {
    bool clean = true;
    uint8_t keys[kMaxChunkElements];
    constexpr uint32_t kGroup = 4;
    for (uint32_t lane0 = 0; lane0 < kLanes; lane0 += kGroup) {
      LaneCursor c[kGroup];
      start_lanes<L, kGroup>(c, lane0, n, chunk_end, lane_stream, lane_table);
      // A round: per lane four elements from one window (4 * 12 <= 57 bits). Every lane
      // decodes one element per lookup, so the group moves row by row; the group's last lane
      // has the fewest rows.
      const uint32_t rows = ChunkLayout<L>::lane_elements(n, lane0 + kGroup - 1);
      uint32_t row = 0;
      const auto can_read = [&] {
        bool all = true;
        for (uint32_t g = 0; g < kGroup; ++g) all &= (c[g].pos >> 3) + 8 <= c[g].limit;
        return all;
      };
      // Lane after lane in program order: the lanes are independent dependency chains, which
      // the core overlaps by itself (interleaving them by hand made the compiler spill).
      const auto round = [&] {
        uint8_t* d = keys + row * kLanes + lane0;
        for (uint32_t g = 0; g < kGroup; ++g) {
          uint64_t w = c[g].window();
          uint64_t pos = c[g].pos;
          for (uint32_t t = 0; t < 4; ++t) {
            const uint16_t e = pc.lut[w & ((1u << kMaxCodeBits) - 1)];
            d[t * kLanes + g] = static_cast<uint8_t>(e >> 4);
            const uint32_t len = e & 0xFu;
            pos += len;
            w >>= len;
          }
          c[g].pos = pos;
        }
        row += 4;
      };
      // Rounds that can_read allows whatever the bits (at most 48 bits each) need no check.
      uint64_t unchecked = rows / 4;
      for (uint32_t g = 0; g < kGroup; ++g)
        unchecked = std::min<uint64_t>(unchecked, c[g].limit < 8 ? 0 : (c[g].limit - 8) / 6 + 1);
      for (uint64_t r = 0; r < unchecked; ++r) round();
      while (row + 4 <= rows && can_read()) round();
      for (uint32_t g = 0; g < kGroup; ++g) c[g].k = row * kLanes + lane0 + g;
      clean &= finish_lanes<kGroup>(c, [&](uint32_t g, uint32_t bits, uint32_t* len) {
        const uint16_t e = pc.lut[bits & ((1u << kMaxCodeBits) - 1)];
        *len = e & 0xFu;
        clean &= *len != 0;
        keys[c[g].k] = static_cast<uint8_t>(e >> 4);
      });
    }
    if (!clean) return false;
    for (uint32_t k = 0; k < n; ++k) store_value<L>(out, k, expbits::join_key<L>(keys[k], raw, k));
    return true;
  }

  // The generic lane loops (every dtype, any code): four lanes at a time through
  // expbits::decode_key; on any damage, lane by lane through expbits::decode_lane to name the
  // first bad element.
  template <class L>
  [[gnu::noinline]] static std::string decode_generic(uint32_t n, const uint8_t* raw, const uint8_t* const* lane_stream,
                                    const uint8_t* lane_table, const expbits::SymbolExponents& se,
                                    const PrefixCode& pc, uint8_t* out_bytes) {
    using Bits = typename L::Bits;
    Bits values[kMaxChunkElements];
    uint8_t keys[kMaxChunkElements];  // the decode loop yields keys (L::key), joined below
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
          keys[k + g] = static_cast<uint8_t>(expbits::decode_key<L>(r[g], se, pc, &st[g]));
      }
      bool bad = false;
      for (uint32_t g = 0; g < kGroup; ++g) {
        const uint32_t k = full_rows * kLanes + lane0 + g;
        if (k < n) keys[k] = static_cast<uint8_t>(expbits::decode_key<L>(r[g], se, pc, &st[g]));
        bad |= st[g] != LaneStatus::Ok || expbits::lane_end_status(r[g]) != LaneStatus::Ok;
      }
      if (bad) {  // rare: decode the group's lanes one by one to name the first bad element
        for (uint32_t g = 0; g < kGroup; ++g) {
          uint32_t element = 0;
          const LaneStatus lane_st = expbits::decode_lane<L>(
              lane_stream[lane0 + g], load_u16(lane_table + 2 * (lane0 + g)), raw, n, lane0 + g,
              se, pc, values, &element);
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
