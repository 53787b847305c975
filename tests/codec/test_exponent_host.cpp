// tests/codec/test_exponent_host.cpp — the host's fast exponent-codec paths
// (codec/exponent_codec.cpp, codec/exponent_host.h) against the shared functions of
// codec/exponent_bits.h that the CUDA kernels run: the same prefix codes, the same lane bits
// for every dtype and kind of value, and on damaged lanes the same verdict and the same first
// bad element as expbits::decode_lane, lane by lane.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "codec/exponent_bits.h"
#include "codec/exponent_host.h"
#include "test_util.h"

using namespace compcoll;

namespace {

using test::values_of_kind;

// One coded chunk's tables, rebuilt with the shared functions.
struct ChunkTables {
  expbits::PrefixCode pc{};
  expbits::KeyCode kc{};
  expbits::SymbolExponents se{};
  uint32_t table_bytes = 0;
};

template <class L>
bool chunk_tables(const uint8_t* chunk, bool gauss, ChunkTables& t) {
  if (gauss) {
    if (!expbits::build_prefix_code(format::kGaussCodeLengths, format::kGaussSymbols, t.pc)) return false;
    const expbits::GaussSymbols syms{chunk[1]};
    expbits::build_key_code<L>(syms, t.pc, t.kc);
    expbits::build_symbol_exponents<L>(syms, t.se);
    return true;
  }
  const uint32_t nsyms = chunk[1] + 1u;
  uint8_t lengths[256] = {};
  for (uint32_t i = 0; i < nsyms; ++i) lengths[chunk[4 + 2 * i]] = chunk[5 + 2 * i];
  if (!expbits::build_prefix_code(lengths, 1u << L::kExpBits, t.pc)) return false;
  expbits::build_key_code<L>(expbits::DirectSymbols{}, t.pc, t.kc);
  expbits::build_symbol_exponents<L>(expbits::DirectSymbols{}, t.se);
  t.table_bytes = expbits::ChunkLayout<L>::table_bytes_entropy(nsyms);
  return true;
}

// What the generic decoder reports for a coded chunk whose sizes are valid: expbits::decode_lane
// on lanes 0..31 in order, the first failure named as exponent_codec.cpp names it; empty and
// the values in *out when every lane is clean.
template <class L>
std::string reference_lanes(const uint8_t* chunk, uint32_t n, bool gauss, std::vector<uint8_t>* out) {
  ChunkTables t;
  REQUIRE(chunk_tables<L>(chunk, gauss, t));
  using Layout = expbits::ChunkLayout<L>;
  const uint8_t* lane_table = chunk + Layout::lane_table_at(t.table_bytes);
  const uint8_t* raw = chunk + Layout::raw_at(t.table_bytes);
  const uint8_t* words = chunk + Layout::streams_at(t.table_bytes, n);
  std::vector<typename L::Bits> values(n);
  for (uint32_t lane = 0; lane < format::kLanes; ++lane) {
    const uint32_t nwords = format::load_u16(lane_table + 2 * lane);
    uint32_t element = 0;
    const expbits::LaneStatus st =
        expbits::decode_lane<L>(words, nwords, raw, n, lane, t.se, t.pc, values.data(), &element);
    const std::string where = "lane " + std::to_string(lane) + " element " + std::to_string(element);
    switch (st) {
      case expbits::LaneStatus::Ok: break;
      case expbits::LaneStatus::BadCode: return where + ": bit pattern is no code";
      case expbits::LaneStatus::BadExponent: return where + ": exponent out of range";
      case expbits::LaneStatus::Overrun:
        return "lane " + std::to_string(lane) + ": bitstream exhausted before its last element";
      case expbits::LaneStatus::TrailingBits:
        return "lane " + std::to_string(lane) + ": trailing bits after the last element";
    }
    words += 4 * nwords;
  }
  out->resize(n * sizeof(typename L::Bits));
  std::memcpy(out->data(), values.data(), out->size());
  return {};
}

template <class L>
void check_lanes_equal_shared(const std::vector<uint8_t>& in, uint32_t n, uint32_t chunk_elements,
                              bool gauss, DType dtype) {
  EncodeOptions opt;
  opt.chunk_elements = chunk_elements;
  const auto stream = encode(*find_codec(gauss ? "gauss-exp" : "entropy-exp"), dtype, in.data(), n, opt);
  const StreamInfo info = read_stream_info(stream.data(), stream.size());
  const uint8_t* table = stream.data() + format::kHeaderBytes;
  const uint8_t* payload = table + format::kOffsetEntryBytes * info.chunk_count;
  std::vector<typename L::Bits> values(n);
  std::memcpy(values.data(), in.data(), in.size());
  uint64_t begin = 0;
  for (uint32_t c = 0; c < info.chunk_count; ++c) {
    CAPTURE(c);
    const uint64_t end = format::load_u64(table + 8 * c);
    const uint8_t* chunk = payload + begin;
    const uint32_t first = c * chunk_elements;
    const uint32_t cn = std::min(chunk_elements, n - first);
    begin = end;
    if (chunk[0] != format::kModeCoded) continue;
    ChunkTables t;
    REQUIRE(chunk_tables<L>(chunk, gauss, t));
    using Layout = expbits::ChunkLayout<L>;
    const uint8_t* lane_table = chunk + Layout::lane_table_at(t.table_bytes);
    const uint8_t* words = chunk + Layout::streams_at(t.table_bytes, cn);
    for (uint32_t lane = 0; lane < format::kLanes; ++lane) {
      CAPTURE(lane);
      const uint32_t nwords = format::load_u16(lane_table + 2 * lane);
      std::vector<uint8_t> mine(4 * Layout::max_lane_words(cn) + 4, 0);
      REQUIRE(expbits::encode_lane<L>(values.data() + first, cn, lane, t.kc, mine.data()) == nwords);
      CHECK(std::equal(words, words + 4 * nwords, mine.begin()));
      words += 4 * nwords;
    }
    std::vector<uint8_t> decoded;
    CHECK(reference_lanes<L>(chunk, cn, gauss, &decoded).empty());
    CHECK(std::memcmp(decoded.data(), in.data() + size_t{first} * sizeof(typename L::Bits), decoded.size()) == 0);
  }
  std::vector<uint8_t> out(in.size());
  decode(stream.data(), stream.size(), out.data(), out.size());
  CHECK(out == in);
}

// Flips bits in one coded chunk's lane streams (and, for gauss-exp, sometimes its reference
// exponent) and checks that decode() fails exactly when the shared per-lane decoder does,
// naming the same lane and element, and otherwise gives the shared decoder's values.
template <class L>
void check_damaged_lanes(DType dtype, bool gauss, int kind, uint32_t n, uint64_t seed) {
  const auto in = values_of_kind(dtype, n, kind, seed);
  EncodeOptions opt;
  opt.chunk_elements = format::align_up(n, format::kLanes);  // one chunk
  const auto clean = encode(*find_codec(gauss ? "gauss-exp" : "entropy-exp"), dtype, in.data(), n, opt);
  const size_t chunk_at = format::kHeaderBytes + format::kOffsetEntryBytes;
  if (clean[chunk_at] != format::kModeCoded) return;
  ChunkTables t;
  REQUIRE(chunk_tables<L>(clean.data() + chunk_at, gauss, t));
  const size_t streams_at = chunk_at + expbits::ChunkLayout<L>::streams_at(t.table_bytes, n);
  REQUIRE(streams_at < clean.size());
  test::SplitMix64 rng{seed * 7 + 1};
  int failures = 0;
  for (int trial = 0; trial < 60; ++trial) {
    CAPTURE(trial);
    auto stream = clean;
    const int flips = 1 + static_cast<int>(rng.next() % 3);
    for (int f = 0; f < flips; ++f) {
      const size_t at = streams_at + rng.next() % (stream.size() - streams_at);
      stream[at] ^= static_cast<uint8_t>(1u << (rng.next() % 8));
    }
    if (gauss && trial % 5 == 4) stream[chunk_at + 1] ^= static_cast<uint8_t>(1u << (rng.next() % 8));
    std::vector<uint8_t> expected_values;
    const std::string expected = reference_lanes<L>(stream.data() + chunk_at, n, gauss, &expected_values);
    std::vector<uint8_t> out(in.size());
    std::string got;
    try {
      decode(stream.data(), stream.size(), out.data(), out.size());
    } catch (const CodecError& e) {
      got = e.what();
    }
    if (expected.empty()) {
      CHECK(got.empty());
      CHECK(out == expected_values);
    } else {
      ++failures;
      CAPTURE(got, expected);
      CHECK(got.size() >= expected.size());
      CHECK(got.compare(got.size() - std::min(got.size(), expected.size()), std::string::npos, expected) == 0);
    }
  }
  CHECK(failures > 0);
}

// Up to 39 arbitrary code lengths 0..12 (0..13 with too_long) written over `lengths`: valid,
// incomplete, over-subscribed or too long sets.
void scribble_lengths(test::SplitMix64& rng, uint32_t nsym, bool too_long, uint8_t* lengths) {
  const uint32_t used = static_cast<uint32_t>(rng.next() % 40);
  for (uint32_t i = 0; i < used; ++i)
    lengths[rng.next() % nsym] = static_cast<uint8_t>(rng.next() % (too_long ? 14 : 13));
}

// Runs a table builder's steps (`step(step, part)` returns the next step) as `parts` lanes of a
// warp run them between barriers: every part of a step, in a scrambled order; all must name
// the same next step.
template <class Step>
void run_in_parts(uint32_t first, uint32_t parts, test::SplitMix64& rng, Step step) {
  std::vector<uint32_t> order(parts);
  for (uint32_t s = first; s != expbits::kStepDone;) {
    for (uint32_t i = 0; i < parts; ++i) order[i] = i;
    for (uint32_t i = parts; i > 1; --i) std::swap(order[i - 1], order[rng.next() % i]);
    uint32_t next = 0;
    for (uint32_t i = 0; i < parts; ++i) {
      const uint32_t n = step(s, order[i]);
      if (i == 0) next = n;
      REQUIRE(n == next);
    }
    s = next;
  }
}

// The textbook construction huffman_lengths must agree with: sort the used symbols by
// (frequency, symbol), build the tree from two queues, halve the frequencies until the
// longest code fits.
void reference_huffman_lengths(const uint32_t* freq_in, uint32_t nsym, uint8_t* lengths) {
  std::vector<uint32_t> freq(freq_in, freq_in + nsym);
  for (;;) {
    std::fill(lengths, lengths + nsym, 0);
    std::vector<uint32_t> used;
    for (uint32_t s = 0; s < nsym; ++s)
      if (freq[s] > 0) used.push_back(s);
    if (used.size() <= 1) {
      if (used.size() == 1) lengths[used[0]] = 1;
      return;
    }
    std::stable_sort(used.begin(), used.end(), [&](uint32_t a, uint32_t b) { return freq[a] < freq[b]; });
    const size_t n = used.size();
    std::vector<uint64_t> weight(2 * n);
    std::vector<size_t> parent(2 * n);
    for (size_t i = 0; i < n; ++i) weight[i] = freq[used[i]];
    size_t leaf = 0, node = n, made = n;
    for (size_t k = 0; k + 1 < n; ++k) {
      size_t pick[2];
      for (size_t& p : pick) p = leaf < n && (node >= made || weight[leaf] <= weight[node]) ? leaf++ : node++;
      weight[made] = weight[pick[0]] + weight[pick[1]];
      parent[pick[0]] = parent[pick[1]] = made++;
    }
    std::vector<uint32_t> depth(made, 0);
    uint32_t deepest = 0;
    for (size_t i = made - 1; i-- > 0;) {
      depth[i] = depth[parent[i]] + 1;
      if (i < n) deepest = std::max(deepest, depth[i]);
    }
    if (deepest <= format::kMaxCodeBits) {
      for (size_t i = 0; i < n; ++i) lengths[used[i]] = static_cast<uint8_t>(depth[i]);
      return;
    }
    for (uint32_t& f : freq) f = (f + 1) >> 1;
  }
}

}  // namespace

TEST_CASE("host prefix codes equal expbits::build_prefix_code", "[codec]") {
  test::SplitMix64 rng{2024};
  for (int trial = 0; trial < 3000; ++trial) {
    CAPTURE(trial);
    const uint32_t nsym = trial % 3 == 0 ? 32 : 256;
    uint8_t lengths[256] = {};
    if (trial % 2 == 0) {
      // Huffman lengths of a random histogram: complete codes, as encoders make them.
      uint32_t freq[256] = {};
      const uint32_t used = 1 + static_cast<uint32_t>(rng.next() % nsym);
      for (uint32_t i = 0; i < used; ++i)
        freq[rng.next() % nsym] += 1 + static_cast<uint32_t>(rng.next() % (trial % 4 == 0 ? 100000 : 50));
      expbits::huffman_lengths(freq, nsym, lengths);
    } else {
      scribble_lengths(rng, nsym, trial % 7 == 1, lengths);
    }
    expbits::PrefixCode shared{}, host{};
    const bool ok = expbits::build_prefix_code(lengths, nsym, shared);
    REQUIRE(expbits::host::build_prefix_code(lengths, nsym, host) == ok);
    if (!ok) continue;
    CHECK(std::memcmp(shared.code, host.code, sizeof(shared.code)) == 0);
    CHECK(std::memcmp(shared.length, host.length, sizeof(shared.length)) == 0);
    CHECK(std::memcmp(shared.lut, host.lut, sizeof(shared.lut)) == 0);
    // The table in 32 parts, as the GPU's decode builds it (a part a lane): every clear, then
    // every fill, the parts in a scrambled order, over a table full of garbage.
    expbits::PrefixCode split;
    std::memset(&split, 0xa5, sizeof split);
    REQUIRE(expbits::assign_prefix_codes(lengths, nsym, split));
    const uint32_t shift = static_cast<uint32_t>(rng.next() % 32);
    for (uint32_t p = 0; p < 32; ++p) expbits::clear_prefix_lut(split, (p * 7 + shift) % 32, 32);
    for (uint32_t p = 0; p < 32; ++p) expbits::fill_prefix_lut(split, nsym, (p * 13 + shift) % 32, 32);
    CHECK(std::memcmp(shared.code, split.code, sizeof(shared.code)) == 0);
    CHECK(std::memcmp(shared.length, split.length, sizeof(shared.length)) == 0);
    CHECK(std::memcmp(shared.lut, split.lut, sizeof(shared.lut)) == 0);
    // The same from a chunk's code table, (symbol, length) pairs of the used symbols, as the
    // GPU's decode walks it.
    std::vector<uint8_t> listed;
    for (uint32_t sym = 0; sym < nsym; ++sym)
      if (lengths[sym] != 0) listed.insert(listed.end(), {static_cast<uint8_t>(sym), lengths[sym]});
    std::memset(split.lut, 0xa5, sizeof split.lut);
    for (uint32_t p = 0; p < 32; ++p) expbits::clear_prefix_lut(split, (p * 7 + shift) % 32, 32);
    for (uint32_t p = 0; p < 32; ++p)
      expbits::fill_prefix_lut_listed(split, listed.data(), 2, static_cast<uint32_t>(listed.size() / 2),
                                      (p * 13 + shift) % 32, 32);
    CHECK(std::memcmp(shared.lut, split.lut, sizeof(shared.lut)) == 0);
    expbits::PrefixCode codes_only{};
    REQUIRE(expbits::host::build_prefix_code(lengths, nsym, codes_only, /*with_lut=*/false));
    CHECK(std::memcmp(shared.code, codes_only.code, sizeof(shared.code)) == 0);
    CHECK(std::memcmp(shared.length, codes_only.length, sizeof(shared.length)) == 0);
  }
}

TEST_CASE("host lanes equal the shared encode_lane/decode_lane for every dtype and kind", "[codec]") {
  // The host codes lanes with wider loops than the GPU's one lane per thread; every lane's
  // words must still be expbits::encode_lane's, for escapes, zeros, subnormals, Inf/NaN and
  // single-exponent chunks, full and partial rows, every chunk size class.
  for (const bool gauss : {true, false}) {
    for (int kind = 0; kind < 6; ++kind) {
      for (const uint32_t chunk : {32u, 96u, 1024u, 16384u}) {
        for (const uint32_t n : {33u, 5000u, 40000u}) {
          if (n > 5000 && chunk < 1024) continue;
          CAPTURE(gauss, kind, chunk, n);
          const uint64_t seed = 1000 * kind + n + chunk;
          check_lanes_equal_shared<expbits::Bf16Layout>(values_of_kind(DType::BF16, n, kind, seed), n, chunk, gauss, DType::BF16);
          check_lanes_equal_shared<expbits::Fp16Layout>(values_of_kind(DType::FP16, n, kind, seed), n, chunk, gauss, DType::FP16);
          check_lanes_equal_shared<expbits::Fp32Layout>(values_of_kind(DType::FP32, n, kind, seed), n, chunk, gauss, DType::FP32);
        }
      }
    }
  }
}

TEST_CASE("damaged lanes: the host decoders fail exactly where the shared decode_lane does", "[codec]") {
  // The fast host decoders only accept a chunk as clean; any other chunk is decoded again lane
  // by lane. Their verdict must be decode_lane's, and the error must name its first bad lane
  // and element.
  for (const bool gauss : {true, false}) {
    for (const int kind : {0, 1, 2}) {
      for (const uint32_t n : {1000u, 16384u}) {
        CAPTURE(gauss, kind, n);
        check_damaged_lanes<expbits::Bf16Layout>(DType::BF16, gauss, kind, n, 11 + kind + n);
        check_damaged_lanes<expbits::Fp32Layout>(DType::FP32, gauss, kind, n, 13 + kind + n);
        check_damaged_lanes<expbits::Fp16Layout>(DType::FP16, gauss, kind, n, 17 + kind + n);
      }
    }
  }
}

TEST_CASE("the table builders in parts, as a warp's lanes run them, give one part's tables", "[codec]") {
  test::SplitMix64 rng{77};
  for (int trial = 0; trial < 600; ++trial) {
    CAPTURE(trial);
    const uint32_t nsym = trial % 3 == 0 ? 32 : 256;
    // Histograms of chunks: a few symbols to all of them, skewed enough that lengths are cut
    // to kMaxCodeBits (frequencies halved), sometimes one symbol or none.
    uint32_t freq[256] = {};
    const uint32_t used = trial % 50 == 0 ? 0 : trial % 50 == 1 ? 1 : 1 + static_cast<uint32_t>(rng.next() % nsym);
    for (uint32_t i = 0; i < used; ++i) {
      const uint32_t top = trial % 4 == 0 ? 65536 : trial % 4 == 1 ? 3 : 600;
      freq[rng.next() % nsym] += 1 + static_cast<uint32_t>(rng.next() % top);
    }
    uint8_t want[256], one[256];
    reference_huffman_lengths(freq, nsym, want);
    expbits::huffman_lengths(freq, nsym, one);
    REQUIRE(std::memcmp(want, one, nsym) == 0);
    // Codes of those lengths, or (odd trials) of arbitrary ones: valid, incomplete,
    // over-subscribed or too long.
    uint8_t lengths[256] = {};
    std::memcpy(lengths, want, nsym);
    if (trial % 2 == 1) scribble_lengths(rng, nsym, trial % 7 == 1, lengths);
    expbits::PrefixCode host{};
    const bool ok = expbits::host::build_prefix_code(lengths, nsym, host, /*with_lut=*/false);
    for (const uint32_t parts : {2u, 5u, 32u}) {
      CAPTURE(parts);
      // Over scratch and outputs full of garbage.
      expbits::HuffmanScratch hs;
      std::memset(&hs, 0xa5, sizeof hs);
      uint8_t got[256];
      std::memset(got, 0x5a, sizeof got);
      run_in_parts(expbits::kHuffBegin, parts, rng, [&](uint32_t step, uint32_t part) {
        return expbits::huffman_step(step, freq, nsym, got, hs, part, parts);
      });
      REQUIRE(std::memcmp(want, got, nsym) == 0);
      expbits::CodeScratch cs;
      std::memset(&cs, 0xa5, sizeof cs);
      expbits::CanonicalCode code;
      std::memset(&code, 0x5a, sizeof code);
      run_in_parts(expbits::kCodeCount, parts, rng, [&](uint32_t step, uint32_t part) {
        return expbits::assign_codes_step(step, lengths, nsym, code, cs, part, parts);
      });
      REQUIRE((cs.ok != 0) == ok);
      if (!ok) continue;
      CHECK(std::memcmp(code.code, host.code, sizeof code.code) == 0);
      CHECK(std::memcmp(code.length, host.length, sizeof code.length) == 0);
    }
  }
  // The key codes and symbol exponents in 32 parts (a part a lane), for every reference.
  expbits::PrefixCode gauss{};
  REQUIRE(expbits::build_prefix_code(format::kGaussCodeLengths, format::kGaussSymbols, gauss));
  for (uint32_t ref = 0; ref < 256; ++ref) {
    CAPTURE(ref);
    const expbits::GaussSymbols syms{ref};
    expbits::KeyCode one, split;
    expbits::SymbolExponents se_one, se_split;
    expbits::build_key_code<expbits::Bf16Layout>(syms, gauss, one);
    expbits::build_symbol_exponents<expbits::Fp16Layout>(syms, se_one);
    std::memset(&split, 0xa5, sizeof split);
    std::memset(&se_split, 0xa5, sizeof se_split);
    for (uint32_t p = 0; p < 32; ++p) {
      expbits::build_key_code<expbits::Bf16Layout>(syms, gauss, split, (p * 11 + ref) % 32, 32);
      expbits::build_symbol_exponents<expbits::Fp16Layout>(syms, se_split, (p * 5 + ref) % 32, 32);
    }
    REQUIRE(std::memcmp(&one, &split, sizeof one) == 0);
    REQUIRE(std::memcmp(&se_one, &se_split, sizeof se_one) == 0);
  }
}
