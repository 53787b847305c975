// tests/codec/test_codec_roundtrip.cpp — host codecs: bit-exact round trips over sizes, dtypes
// and special values, the bundled real tensors, ratios, and rejection of damaged streams.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "codec/codec.h"
#include "codec/exponent_bits.h"
#include "io/tensor_file.h"
#include "test_util.h"

using namespace compcoll;

namespace {

const DType kDTypes[] = {DType::BF16, DType::FP16, DType::FP32};

std::vector<uint8_t> roundtrip(const Codec& codec, DType dtype, const std::vector<uint8_t>& in,
                               const EncodeOptions& opt = {}) {
  const size_t n = in.size() / dtype_size(dtype);
  std::vector<uint8_t> stream = encode(codec, dtype, in.data(), n, opt);
  // Decode from a buffer cut to exactly the reported size.
  std::vector<uint8_t> exact(stream.begin(), stream.end());
  const StreamInfo info = read_stream_info(exact.data(), exact.size());
  REQUIRE(info.total_bytes == exact.size());
  REQUIRE(info.elements == n);
  REQUIRE(info.dtype == dtype);
  REQUIRE(info.codec == codec.id());
  std::vector<uint8_t> out(in.size(), 0xA5);
  decode(exact.data(), exact.size(), out.data(), out.size());
  return out;
}

}  // namespace

TEST_CASE("codec registry names every codec", "[codec]") {
  REQUIRE(codec_names() ==
          std::vector<std::string_view>{"identity", "gauss-exp", "entropy-exp", "fp8-hadamard"});
  for (auto name : codec_names()) {
    const Codec* c = find_codec(name);
    REQUIRE(c != nullptr);
    CHECK(c->name() == name);
    CHECK(&codec_by_id(c->id()) == c);
    CHECK(c->lossless() == (name != "fp8-hadamard"));  // lossy: tests/codec/test_fp8_hadamard.cpp
  }
  CHECK(find_codec("zip") == nullptr);
}

TEST_CASE("gauss-exp fixed code is a complete prefix code", "[codec][gauss-exp]") {
  uint32_t kraft = 0;
  for (uint32_t s = 0; s < format::kGaussSymbols; ++s) {
    REQUIRE(format::kGaussCodeLengths[s] >= 1);
    REQUIRE(format::kGaussCodeLengths[s] <= format::kMaxCodeBits);
    kraft += 1u << (format::kMaxCodeBits - format::kGaussCodeLengths[s]);
  }
  CHECK(kraft == (1u << format::kMaxCodeBits));
  expbits::PrefixCode pc{};
  REQUIRE(expbits::build_prefix_code(format::kGaussCodeLengths, format::kGaussSymbols, pc));
  // Every 12-bit pattern decodes to some symbol: the code is complete.
  for (uint32_t i = 0; i < (1u << format::kMaxCodeBits); ++i) REQUIRE(pc.lut[i] != 0);
}

TEST_CASE("huffman lengths are limited, deterministic and optimal on small cases", "[codec][entropy-exp]") {
  // Fibonacci frequencies force a deep tree; the limit must hold.
  uint32_t freq[256] = {};
  uint32_t a = 1, b = 1;
  for (int s = 0; s < 30; ++s) {
    freq[s] = a;
    const uint32_t c = a + b;
    a = b;
    b = c;
  }
  uint8_t len1[256], len2[256];
  expbits::huffman_lengths(freq, 256, len1);
  expbits::huffman_lengths(freq, 256, len2);
  uint32_t kraft = 0;
  for (int s = 0; s < 256; ++s) {
    REQUIRE(len1[s] == len2[s]);
    REQUIRE(len1[s] <= format::kMaxCodeBits);
    REQUIRE((freq[s] > 0) == (len1[s] > 0));
    if (len1[s]) kraft += 1u << (format::kMaxCodeBits - len1[s]);
  }
  CHECK(kraft == (1u << format::kMaxCodeBits));
  // Dyadic frequencies give exact lengths 1, 2, 3, 3.
  uint32_t dy[4] = {4, 2, 1, 1};
  uint8_t dl[4];
  expbits::huffman_lengths(dy, 4, dl);
  CHECK(std::vector<int>(dl, dl + 4) == std::vector<int>{1, 2, 3, 3});
  // One symbol gets one bit.
  uint32_t one[8] = {0, 0, 5, 0, 0, 0, 0, 0};
  uint8_t ol[8];
  expbits::huffman_lengths(one, 8, ol);
  CHECK(ol[2] == 1);
  CHECK(ol[0] == 0);
}

TEST_CASE("round trip is bit-exact over sizes, chunkings and dtypes", "[codec]") {
  const uint32_t chunk = GENERATE(32u, 1024u, format::kDefaultChunkElements);
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const auto codec_name = GENERATE(as<std::string_view>{}, "identity", "gauss-exp", "entropy-exp");
  const Codec& codec = *find_codec(codec_name);
  std::vector<size_t> sizes = {0, 1, 2, 31, 32, 33, 63, 64, 65, chunk - 1, chunk, chunk + 1,
                               3 * size_t{chunk} + 17};
  test::SplitMix64 rng{99};
  for (int i = 0; i < 4; ++i) sizes.push_back(rng.next() % (5 * size_t{chunk}));
  EncodeOptions opt;
  opt.chunk_elements = chunk;
  for (size_t n : sizes) {
    CAPTURE(codec_name, dtype_name(dtype), chunk, n);
    const auto in = test::gaussian_bytes(dtype, n, 0.02, 1000 + n);
    CHECK(roundtrip(codec, dtype, in, opt) == in);
  }
}

TEST_CASE("every 16-bit pattern round-trips: all exponents, NaN payloads, inf, subnormals, -0",
          "[codec]") {
  const DType dtype = GENERATE(DType::BF16, DType::FP16);
  const auto codec_name = GENERATE(as<std::string_view>{}, "gauss-exp", "entropy-exp");
  std::vector<uint8_t> in(65536 * 2);
  for (uint32_t v = 0; v < 65536; ++v) {
    in[2 * v] = static_cast<uint8_t>(v);
    in[2 * v + 1] = static_cast<uint8_t>(v >> 8);
  }
  CAPTURE(codec_name, dtype_name(dtype));
  CHECK(roundtrip(*find_codec(codec_name), dtype, in) == in);
  // The same patterns shuffled, so chunks mix rare and common exponents.
  test::SplitMix64 rng{5};
  for (size_t i = 65535; i > 0; --i) {
    const size_t j = rng.next() % (i + 1);
    std::swap(in[2 * i], in[2 * j]);
    std::swap(in[2 * i + 1], in[2 * j + 1]);
  }
  CHECK(roundtrip(*find_codec(codec_name), dtype, in) == in);
}

TEST_CASE("fp32 special values and all 256 exponents round-trip", "[codec]") {
  const auto codec_name = GENERATE(as<std::string_view>{}, "gauss-exp", "entropy-exp");
  std::vector<uint32_t> vals = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u,
                                0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7FBFFFFFu,
                                0x00000001u, 0x807FFFFFu, 0x00400000u, 0x7F7FFFFFu};
  test::SplitMix64 rng{11};
  for (uint32_t e = 0; e < 256; ++e)
    for (int k = 0; k < 8; ++k)
      vals.push_back((static_cast<uint32_t>(rng.next() & 1) << 31) | (e << 23) |
                     static_cast<uint32_t>(rng.next() & 0x7FFFFF));
  // Embed them among Gaussian values so both escape and coded paths run in one chunk.
  auto in = test::gaussian_bytes(DType::FP32, 5000, 1.0, 3);
  for (size_t i = 0; i < vals.size(); ++i) std::memcpy(in.data() + 4 * (i * 2), &vals[i], 4);
  CAPTURE(codec_name);
  CHECK(roundtrip(*find_codec(codec_name), DType::FP32, in) == in);
}

TEST_CASE("constant, all-zero and single-exponent chunks round-trip", "[codec]") {
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const auto codec_name = GENERATE(as<std::string_view>{}, "gauss-exp", "entropy-exp");
  const Codec& codec = *find_codec(codec_name);
  std::vector<uint8_t> zeros(40000 * dtype_size(dtype), 0);
  CHECK(roundtrip(codec, dtype, zeros) == zeros);
  // entropy-exp codes a lone exponent in one bit; gauss-exp's fixed code gives ZERO 7 bits.
  // (fp16 zeros would cost 7 + 11 bits: those chunks fall back to stored).
  const double limit = codec_name == "entropy-exp" ? 0.8 : 1.01;
  CHECK(encode(codec, dtype, zeros.data(), 40000).size() < zeros.size() * limit + format::kHeaderBytes);
  std::vector<uint8_t> inf(1000 * dtype_size(dtype), 0xFF);  // all NaN with full payload
  CHECK(roundtrip(codec, dtype, inf) == inf);
}

TEST_CASE("gauss-exp and entropy-exp compress Gaussians near the exponent-entropy bound",
          "[codec]") {
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const size_t n = 1 << 18;
  const auto in = test::gaussian_bytes(dtype, n, 0.013, 17);
  const ExponentEntropy ent = exponent_entropy(dtype, in.data(), n);
  const double h = ent.bits, bound = ent.bound;
  const double r_gauss = static_cast<double>(in.size()) / encode(*find_codec("gauss-exp"), dtype, in.data(), n).size();
  const double r_entropy = static_cast<double>(in.size()) / encode(*find_codec("entropy-exp"), dtype, in.data(), n).size();
  CAPTURE(dtype_name(dtype), h, bound, r_gauss, r_entropy);
  CHECK(r_entropy >= 0.98 * bound);
  CHECK(r_gauss >= 0.95 * bound);
  CHECK(r_entropy <= bound * 1.02);  // a ratio above the order-0 bound on i.i.d. data is a bug
}

TEST_CASE("incompressible input expands by at most 1% plus the header", "[codec]") {
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const auto codec_name = GENERATE(as<std::string_view>{}, "identity", "gauss-exp", "entropy-exp");
  const size_t n = 100003;
  const auto in = test::random_bytes(n * dtype_size(dtype), 23);
  const auto stream = encode(*find_codec(codec_name), dtype, in.data(), n);
  CAPTURE(codec_name, dtype_name(dtype), stream.size(), in.size());
  CHECK(stream.size() <= in.size() * 1.01 + format::kHeaderBytes);
  CHECK(roundtrip(*find_codec(codec_name), dtype, in) == in);
}

TEST_CASE("a slice of chunks decodes alone", "[codec]") {
  const auto codec_name = GENERATE(as<std::string_view>{}, "identity", "gauss-exp", "entropy-exp");
  const size_t n = 10 * 1024 + 7;
  const auto in = test::gaussian_bytes(DType::BF16, n, 1.0, 8);
  EncodeOptions opt;
  opt.chunk_elements = 1024;
  const auto stream = encode(*find_codec(codec_name), DType::BF16, in.data(), n, opt);
  for (uint32_t first : {0u, 3u, 9u, 10u}) {
    const uint32_t count = std::min(2u, 11 - first);
    const size_t e0 = first * 1024, e1 = std::min(n, size_t{first + count} * 1024);
    std::vector<uint8_t> out((e1 - e0) * 2);
    decode_chunks(stream.data(), stream.size(), first, count, out.data(), out.size());
    CHECK(std::equal(out.begin(), out.end(), in.begin() + 2 * e0));
  }
  std::vector<uint8_t> out(4096);
  CHECK_THROWS_AS(decode_chunks(stream.data(), stream.size(), 10, 2, out.data(), out.size()), CodecError);
}

TEST_CASE("bundled real tensors round-trip and compress", "[codec][real]") {
  const auto files = test::real_tensor_files();
  if (files.empty()) {
    WARN("SKIPPED: no .npy files under " << test::test_data_dir());
    return;
  }
  for (const auto& f : files) {
    const bool is_bf16 = f.string().find(".bf16.") != std::string::npos;
    for (const TensorData& t : load_tensors(f.string(), is_bf16 ? std::optional(DType::BF16) : std::nullopt)) {
      const ExponentEntropy ent = exponent_entropy(t.dtype, t.bytes.data(), t.elements());
      const double h = ent.bits, bound = ent.bound;
      for (auto name : codec_names()) {
        const Codec& codec = *find_codec(name);
        if (!codec.lossless()) continue;  // error bounds: test_fp8_hadamard.cpp
        CAPTURE(t.source, name);
        CHECK(roundtrip(codec, t.dtype, t.bytes) == t.bytes);
        if (name == "entropy-exp" && t.elements() >= 65536) {
          const double r = static_cast<double>(t.bytes.size()) /
                           encode(codec, t.dtype, t.bytes.data(), t.elements()).size();
          CAPTURE(h, bound, r);
          CHECK(r >= 0.97 * bound);
        }
      }
    }
  }
}

TEST_CASE("damaged streams are rejected with a located error, never misread", "[codec][bad-input]") {
  const auto codec_name = GENERATE(as<std::string_view>{}, "identity", "gauss-exp", "entropy-exp");
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const size_t n = 3000;
  const auto in = test::gaussian_bytes(dtype, n, 0.5, 31);
  EncodeOptions opt;
  opt.chunk_elements = 1024;
  const auto stream = encode(*find_codec(codec_name), dtype, in.data(), n, opt);
  std::vector<uint8_t> out(in.size());
  CAPTURE(codec_name, dtype_name(dtype));
  // Every truncation is an error (the header states the exact size).
  for (size_t len = 0; len < stream.size(); len += (len < 200 ? 1 : 37)) {
    std::vector<uint8_t> cut(stream.begin(), stream.begin() + len);
    CAPTURE(len);
    CHECK_THROWS_AS(decode(cut.data(), cut.size(), out.data(), out.size()), CodecError);
  }
  // Single bit flips: either a CodecError or a successful decode; flips in the container
  // header, offsets and lane tables must all be caught.
  size_t caught = 0, flips = 0;
  for (size_t byte = 0; byte < stream.size(); byte += 7) {
    auto bad = stream;
    bad[byte] ^= static_cast<uint8_t>(1u << (byte % 8));
    ++flips;
    try {
      decode(bad.data(), bad.size(), out.data(), out.size());
    } catch (const CodecError& e) {
      ++caught;
      CHECK(std::string(e.what()).size() > 10);
      CHECK(e.byte_offset() <= bad.size());
    }
  }
  CHECK(caught > 0);
  for (size_t byte = 0; byte < format::kHeaderBytes; ++byte) {
    auto bad = stream;
    bad[byte] ^= 0x10;
    CAPTURE(byte);
    CHECK_THROWS_AS(decode(bad.data(), bad.size(), out.data(), out.size()), CodecError);
  }
  // A too-small output buffer is an error, not an overflow.
  std::vector<uint8_t> small(in.size() - 1);
  CHECK_THROWS_AS(decode(stream.data(), stream.size(), small.data(), small.size()), CodecError);
}

TEST_CASE("threads code the same stream, decode the same tensor and report the same damage", "[codec][threads]") {
  const auto codec_name = GENERATE(as<std::string_view>{}, "identity", "gauss-exp", "entropy-exp", "fp8-hadamard");
  const DType dtype = GENERATE(DType::BF16, DType::FP32);
  // 41 chunks of 1024, the last partial; and 201 chunks of 4096, which threads code in many
  // runs of chunks each (more than a thread stages at once: it waits for its runs to be placed)
  const auto [chunk, n] = GENERATE(table<uint32_t, size_t>({{1024, 40 * 1024 + 77}, {4096, 200 * 4096 + 77}}));
  const auto in = test::gaussian_bytes(dtype, n, 0.02, 77);
  const Codec& codec = *find_codec(codec_name);
  EncodeOptions one;
  one.chunk_elements = chunk;
  const auto stream = encode(codec, dtype, in.data(), n, one);
  std::vector<uint8_t> want(in.size());
  decode(stream.data(), stream.size(), want.data(), want.size());
  CAPTURE(codec_name, dtype_name(dtype), chunk);
  for (uint32_t threads : {0u, 2u, 3u, 8u, 64u}) {
    CAPTURE(threads);
    EncodeOptions opt = one;
    opt.threads = threads;
    CHECK(encode(codec, dtype, in.data(), n, opt) == stream);
    std::vector<uint8_t> got(in.size(), 0xAB);
    decode(stream.data(), stream.size(), got.data(), got.size(), threads);
    CHECK(got == want);
  }
  // Damage in two chunks: one thread and four report the same (the lower chunk's) error, or
  // both decode the same bytes.
  const StreamInfo info = read_stream_info(stream.data(), stream.size());
  const size_t payload = format::kHeaderBytes + size_t{format::kOffsetEntryBytes} * info.chunk_count;
  for (size_t at = payload + 3; at < stream.size(); at += stream.size() / 23) {
    auto bad = stream;
    bad[at] ^= 0x5A;
    bad[bad.size() - 5] ^= 0x21;
    std::string one_error, four_error;
    std::vector<uint8_t> a(in.size()), b(in.size());
    try {
      decode(bad.data(), bad.size(), a.data(), a.size(), 1);
    } catch (const CodecError& e) {
      one_error = e.what();
    }
    try {
      decode(bad.data(), bad.size(), b.data(), b.size(), 4);
    } catch (const CodecError& e) {
      four_error = e.what();
    }
    CAPTURE(at);
    CHECK(one_error == four_error);
    if (one_error.empty()) CHECK(a == b);
  }
  // A too-small output is refused before any thread writes.
  std::vector<uint8_t> small(in.size() - 1);
  CHECK_THROWS_AS(decode(stream.data(), stream.size(), small.data(), small.size(), 4), CodecError);
}

TEST_CASE("chunks sized by the stream: 4096 to 16384 elements, as the header says", "[codec]") {
  using format::auto_chunk_elements;
  // 16384 from 2048 chunks of it, 8192 from 2048 of it, 4096 below.
  CHECK(auto_chunk_elements(0) == 4096);
  CHECK(auto_chunk_elements(1) == 4096);
  CHECK(auto_chunk_elements(8192 * 2048 - 1) == 4096);
  CHECK(auto_chunk_elements(8192 * 2048) == 8192);
  CHECK(auto_chunk_elements(16384 * 2048 - 1) == 8192);
  CHECK(auto_chunk_elements(16384 * 2048) == 16384);
  CHECK(auto_chunk_elements(uint64_t{1} << 40) == 16384);
  CHECK(format::chunk_elements_for(1024, 100) == 1024);
  CHECK(format::chunk_elements_for(format::kAutoChunk, 100) == 4096);

  // A stream coded with kAutoChunk is the stream coded with the size it picks, byte for byte.
  EncodeOptions autos;
  autos.chunk_elements = format::kAutoChunk;
  for (auto name : {"identity", "gauss-exp", "entropy-exp", "fp8-hadamard"}) {
    const Codec& codec = *find_codec(name);
    for (size_t n : {size_t{0}, size_t{100}, size_t{4096 * 3 + 5}}) {
      CAPTURE(name, n);
      const auto in = test::gaussian_bytes(DType::BF16, n, 0.02, 7 + n);
      const std::vector<uint8_t> s = encode(codec, DType::BF16, in.data(), n, autos);
      EncodeOptions fixed;
      fixed.chunk_elements = 4096;
      CHECK(s == encode(codec, DType::BF16, in.data(), n, fixed));
      const StreamInfo info = read_stream_info(s.data(), s.size());
      CHECK(info.chunk_elements == 4096);
      CHECK(s.size() <= max_encoded_size(codec, DType::BF16, n, autos));
      const StreamInfo expected = expected_stream_info(codec, DType::BF16, n, autos, s.size());
      CHECK(expected.chunk_elements == 4096);
      CHECK(expected.chunk_count == info.chunk_count);
      if (codec.lossless()) CHECK(roundtrip(codec, DType::BF16, in, autos) == in);
    }
  }
}

// What a chunk costs beside its elements' coded bytes (Codec::chunk_overhead_bytes, from which
// the simulator sizes streams coded in smaller chunks than their ratio was measured in): the
// stated figure against the bytes the host codecs write, coding the same elements in chunks of
// 4096 and of 16384: within 5% on Gaussians; on the bundled bf16 tensors, where smaller chunks
// also fit the exponent codes to the data better (measured: gauss-exp 79-148 bytes a chunk,
// entropy-exp 128-164), within 0.5x to 1.15x.
TEST_CASE("a chunk's overhead is what coding in smaller chunks costs", "[codec]") {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> inputs;
  inputs.emplace_back("gaussian", test::gaussian_bytes(DType::BF16, 1 << 20, 0.02, 5));
  REQUIRE(test::real_tensor_files().size() > 0);
  for (const auto& f : test::real_tensor_files())
    if (f.string().find(".bf16.") != std::string::npos)
      for (const TensorData& t : load_tensors(f.string(), DType::BF16))
        if (t.elements() >= (1u << 16)) inputs.emplace_back(t.source, t.bytes);
  for (auto name : {"gauss-exp", "entropy-exp", "fp8-hadamard"}) {
    const Codec& codec = *find_codec(name);
    for (const auto& [source, bytes] : inputs) {
      const uint64_t n = bytes.size() / 2;
      EncodeOptions small, large;
      small.chunk_elements = 4096;
      const std::vector<uint8_t> sa = encode(codec, DType::BF16, bytes.data(), n, small);
      const std::vector<uint8_t> sb = encode(codec, DType::BF16, bytes.data(), n, large);
      const StreamInfo a = read_stream_info(sa.data(), sa.size()), b = read_stream_info(sb.data(), sb.size());
      const double per_chunk = (static_cast<double>(a.payload_bytes) - static_cast<double>(b.payload_bytes)) /
                               (a.chunk_count - b.chunk_count);
      const double stated = codec.chunk_overhead_bytes(DType::BF16);
      CAPTURE(name, source, per_chunk, stated);
      if (source == "gaussian") {
        CHECK(per_chunk == Approx(stated).epsilon(0.05));
      } else {
        CHECK(per_chunk >= 0.5 * stated);
        CHECK(per_chunk <= 1.15 * stated);
      }
    }
  }
}

TEST_CASE("bad encode options are errors", "[codec]") {
  const auto in = test::gaussian_bytes(DType::BF16, 100, 1.0, 1);
  EncodeOptions opt;
  for (uint32_t c : {16u, 33u, 65568u}) {
    opt.chunk_elements = c;
    CHECK_THROWS_AS(encode(*find_codec("gauss-exp"), DType::BF16, in.data(), 100, opt), CodecError);
  }
  std::vector<uint8_t> tiny(10);
  CHECK_THROWS_AS(encode(*find_codec("gauss-exp"), DType::BF16, in.data(), 100, tiny.data(), tiny.size()), CodecError);
}

TEST_CASE("host lane loops equal the shared encode_lane/decode_lane the GPU runs", "[codec]") {
  // The host interleaves four lanes for speed; the CUDA kernels run encode_lane's and
  // decode_lane's lane loops (put_lane, take_lane) one lane per thread. Both must give the same
  // bits.
  using L = expbits::Bf16Layout;
  const uint32_t n = 5000;  // one chunk, lanes of unequal length
  const auto in = test::gaussian_bytes(DType::BF16, n, 0.05, 77);
  std::vector<uint16_t> values(n);
  std::memcpy(values.data(), in.data(), in.size());
  for (const bool gauss : {true, false}) {
    CAPTURE(gauss);
    const auto stream = encode(*find_codec(gauss ? "gauss-exp" : "entropy-exp"), DType::BF16, in.data(), n);
    const uint8_t* chunk = stream.data() + format::kHeaderBytes + format::kOffsetEntryBytes;
    REQUIRE(chunk[0] == format::kModeCoded);
    expbits::PrefixCode pc{};
    uint32_t table_bytes = 0;
    expbits::KeyCode kc{};
    expbits::SymbolExponents se{};
    if (gauss) {
      REQUIRE(expbits::build_prefix_code(format::kGaussCodeLengths, format::kGaussSymbols, pc));
      const expbits::GaussSymbols syms{chunk[1]};
      expbits::build_key_code<L>(syms, pc, kc);
      expbits::build_symbol_exponents<L>(syms, se);
    } else {
      const uint32_t nsyms = chunk[1] + 1u;
      uint8_t lengths[256] = {};
      for (uint32_t i = 0; i < nsyms; ++i) lengths[chunk[4 + 2 * i]] = chunk[5 + 2 * i];
      REQUIRE(expbits::build_prefix_code(lengths, 256, pc));
      expbits::build_key_code<L>(expbits::DirectSymbols{}, pc, kc);
      expbits::build_symbol_exponents<L>(expbits::DirectSymbols{}, se);
      table_bytes = expbits::ChunkLayout<L>::table_bytes_entropy(nsyms);
    }
    const uint8_t* lane_table = chunk + expbits::ChunkLayout<L>::lane_table_at(table_bytes);
    const uint8_t* raw = chunk + expbits::ChunkLayout<L>::raw_at(table_bytes);
    const uint8_t* words = chunk + expbits::ChunkLayout<L>::streams_at(table_bytes, n);
    std::vector<uint16_t> decoded(n, 0);
    for (uint32_t lane = 0; lane < format::kLanes; ++lane) {
      const uint32_t nwords = format::load_u16(lane_table + 2 * lane);
      std::vector<uint8_t> mine(4 * expbits::ChunkLayout<L>::max_lane_words(n) + 4, 0);
      REQUIRE(expbits::encode_lane<L>(values.data(), n, lane, kc, mine.data()) == nwords);
      CHECK(std::equal(words, words + 4 * nwords, mine.begin()));
      uint32_t bad = 0;
      CHECK(expbits::decode_lane<L>(words, nwords, raw, n, lane, se, pc, decoded.data(), &bad) ==
            expbits::LaneStatus::Ok);
      words += 4 * nwords;
    }
    CHECK(decoded == values);
  }
}

namespace {

// take_lane_exponents window by window of `window` elements, as the bf16 decoders run it:
// each window's exponents joined with its raw bytes (from a copy of the window's) once the lane
// is done with the window, the lane's elements decoded past the window carried into the next.
// The lane's status, its end included; *bad: the chunk index of its first bad element.
template <class L, class Reader, class Exponents>
expbits::LaneStatus take_exponents_windowed(Reader& r, const uint8_t* raw, uint32_t n, uint32_t window, uint32_t lane,
                                            Exponents exponents, const expbits::SymbolExponents& se,
                                            const expbits::PrefixCode& pc, const expbits::TripleCode& triples,
                                            typename L::Bits* out, uint32_t* bad) {
  *bad = n;
  std::vector<uint8_t> raw_window(window * L::kRawBytes + 4);
  std::vector<uint8_t> exps(window + 2 * format::kLanes, 0xEE);
  uint32_t j = 0;  // the lane's elements of the window already decoded
  for (uint32_t base = 0; base < n; base += window) {
    const uint32_t wn = std::min(window, n - base);
    std::memcpy(raw_window.data(), raw + base * L::kRawBytes, expbits::ChunkLayout<L>::raw_bytes(wn));
    const uint32_t stop = lane < wn ? (wn - lane + 31) / 32 : 0;
    const uint32_t last = lane < n - base ? (n - base - lane + 31) / 32 : 0;
    uint32_t at = 0;
    const auto st = expbits::take_lane_exponents<L>(r, &j, stop, last, lane, exponents, se, pc, triples, exps.data(), &at);
    if (st != expbits::LaneStatus::Ok) {
      *bad = base + at;
      return st;
    }
    CHECK(j >= stop);
    CHECK(j <= std::min(stop + 2, last));
    for (uint32_t i = 0; i < stop; ++i) {
      const uint32_t k = format::kLanes * i + lane;
      out[base + k] = L::join(exps[k], expbits::load_raw<L>(raw_window.data() + k * L::kRawBytes), 0);
    }
    for (uint32_t i = stop; i < j; ++i) exps[format::kLanes * (i - stop) + lane] = exps[format::kLanes * i + lane];
    j -= stop;
  }
  return expbits::lane_end_status(r);
}

// The CUDA kernels' lane loops, run here lane by lane: a chunk coded window by window of
// `window` elements (the kernels' kWindow is 512), with the kernels' StreamBitWriter and
// (Aligned)WordBitReader carried from window to window, the raw bytes read from a copy of the
// window's. Checks that they give encode_lane's words (BitWriter's), lane_bits' count and
// decode_lane's values and statuses, damaged or not.
template <class L>
void check_windowed_lanes(DType dtype, uint32_t n, uint32_t window, double sigma = 0.05) {
  using Bits = typename L::Bits;
  CAPTURE(static_cast<int>(dtype), n, window, sigma);
  auto in = test::gaussian_bytes(dtype, n, sigma, 5 + n);
  std::vector<Bits> values(n);
  std::memcpy(values.data(), in.data(), in.size());
  // Zeros, Inf/NaN and exponents far from the chunk's (escapes: the longest codes) here and
  // there, so that windows hold every kind of code.
  constexpr uint32_t kTop = (1u << L::kExpBits) - 1;
  const uint32_t special[] = {0u, kTop, 1u, kTop - 1};
  for (uint32_t k = 11; k < n; k += 97) values[k] = L::join(special[(k / 97) % 4], 0x2A, 5);
  std::memcpy(in.data(), values.data(), in.size());
  EncodeOptions opt;
  opt.chunk_elements = format::align_up(n, 32);  // one chunk
  const auto stream = encode(*find_codec("gauss-exp"), dtype, in.data(), n, opt);
  const uint8_t* chunk = stream.data() + format::kHeaderBytes + format::kOffsetEntryBytes;
  REQUIRE(chunk[0] == format::kModeCoded);
  expbits::PrefixCode pc{};
  REQUIRE(expbits::build_prefix_code(format::kGaussCodeLengths, format::kGaussSymbols, pc));
  const expbits::GaussSymbols syms{chunk[1]};
  expbits::KeyCode kc{};
  expbits::SymbolExponents se{};  // the chunk's, or a damaged header's below
  expbits::build_key_code<L>(syms, pc, kc);
  expbits::build_symbol_exponents<L>(syms, se);
  const uint8_t* lane_table = chunk + expbits::ChunkLayout<L>::lane_table_at(0);
  const uint8_t* raw = chunk + expbits::ChunkLayout<L>::raw_at(0);
  const uint8_t* words = chunk + expbits::ChunkLayout<L>::streams_at(0, n);
  // Encode: each lane's words and count, window by window.
  std::vector<uint8_t> raw_mine(expbits::ChunkLayout<L>::raw_bytes(n), 0xEE);
  for (uint32_t base = 0; base < n; base += window) {
    const uint32_t wn = std::min(window, n - base);
    for (uint32_t w = 0; w < expbits::ChunkLayout<L>::raw_bytes(wn) / 4; ++w) {
      uint32_t v = 0;  // the kernels' raw_section_word over the window
      for (uint32_t b = 0; b < 4; ++b) {
        const uint32_t byte = 4 * w + b, k = byte / L::kRawBytes;
        if (k < wn) v |= ((L::raw(values[base + k]) >> (8 * (byte % L::kRawBytes))) & 0xFFu) << (8 * b);
      }
      format::store_u32(raw_mine.data() + base * L::kRawBytes + 4 * w, v);
    }
  }
  CHECK(std::equal(raw_mine.begin(), raw_mine.end(), raw));
  const uint8_t* lane_words = words;
  for (uint32_t lane = 0; lane < format::kLanes; ++lane) {
    const uint32_t nwords = format::load_u16(lane_table + 2 * lane);
    std::vector<uint8_t> mine(4 * expbits::ChunkLayout<L>::max_lane_words(n) + 4, 0xCD);
    expbits::StreamBitWriter w(mine.data());  // the kernels' writer
    uint32_t bits = 0;
    for (uint32_t base = 0; base < n; base += window) {
      const uint32_t wn = std::min(window, n - base);
      bits += expbits::lane_bits<L>(values.data() + base, wn, lane, kc);
      expbits::put_lane<L>(values.data() + base, wn, lane, kc, w);
    }
    REQUIRE(w.finish() == nwords);
    CHECK((bits + 31) / 32 == nwords);
    CHECK(std::equal(lane_words, lane_words + 4 * nwords, mine.begin()));
    lane_words += 4 * nwords;
  }
  // Decode, whole and damaged: each lane's status and first bad element as decode_lane's.
  // gauss-exp's kernels take two elements a lookup where they can (take_lane_pairs, and
  // take_lane_pairs_in_range where the chunk's reference puts every symbol of the pair table
  // in range).
  const auto pairs = std::make_unique<expbits::PairCode>();
  expbits::build_pair_code<L, expbits::GaussSymbols>(pc, *pairs);
  // bf16's (and any layout's of an 8-bit exponent and no extra bits) three exponents a lookup
  // (take_lane_exponents, build_triple_code), the values joined after a window's lanes
  // are done; a lane's elements decoded past its window carried into the next.
  constexpr bool kExponents = L::kExtraBits == 0 && L::kExpBits == 8;
  const auto triples = std::make_unique<expbits::TripleCode>();
  expbits::build_triple_code<expbits::GaussSymbols>(pc, *triples);
  enum class Loop { Single, Pairs, InRange, Exponents };
  // aligned_reader: the kernels' reader of staged (4-byte aligned) lane streams.
  const auto decode_windowed = [&](const uint8_t* lane_in, uint32_t nwords, uint32_t lane,
                                   std::vector<Bits>& out, uint32_t* bad, Loop loop,
                                   bool aligned_reader) {
    const auto go = [&](auto r) {
      if constexpr (kExponents) {
        if (loop == Loop::Exponents)
          return take_exponents_windowed<L>(r, raw, n, window, lane,
                                            expbits::GaussTripleExponents{expbits::triple_ref_bytes(syms.ref)}, se, pc,
                                            *triples, out.data(), bad);
      }
      expbits::LaneStatus st = expbits::LaneStatus::Ok;
      *bad = n;
      std::vector<uint8_t> raw_window(window * L::kRawBytes + 4);
      for (uint32_t base = 0; base < n && st == expbits::LaneStatus::Ok; base += window) {
        const uint32_t wn = std::min(window, n - base);
        std::memcpy(raw_window.data(), raw + base * L::kRawBytes, expbits::ChunkLayout<L>::raw_bytes(wn));
        uint32_t at = 0;
        if (loop == Loop::Pairs)
          st = expbits::take_lane_pairs<L>(r, raw_window.data(), wn, lane, se, pc, *pairs, out.data() + base, &at);
        else if (loop == Loop::InRange)
          st = expbits::take_lane_pairs_in_range<L>(r, raw_window.data(), wn, lane, se, pc, *pairs,
                                                    out.data() + base, &at);
        else
          st = expbits::take_lane<L>(r, raw_window.data(), wn, lane, se, pc, out.data() + base, &at);
        if (st != expbits::LaneStatus::Ok) *bad = base + at;
      }
      return st == expbits::LaneStatus::Ok ? expbits::lane_end_status(r) : st;
    };
    return aligned_reader ? go(expbits::AlignedWordBitReader(lane_in, nwords))
                          : go(expbits::WordBitReader(lane_in, nwords));
  };
  const uint32_t total_words = static_cast<uint32_t>(lane_words - words) / 4;
  test::SplitMix64 rng{n + window};
  const expbits::SymbolExponents se_chunk = se;
  bool ran_in_range = false, ran_exponents = false;
  for (const int damage : {-1, 0, 1, 2, 3, 4, 5}) {
    CAPTURE(damage);
    // damage -1: intact; 0: a flipped bit in lane 3's middle; 1: lane 7 one word short; 2: the
    // lane streams copied to an odd address (WordBitReader's unaligned path); 3: a random bit
    // flipped in every lane; 4, 5: a reference exponent near either end (a damaged chunk
    // header), so that short codes stand for exponents out of range.
    se = se_chunk;
    if (damage >= 4)
      expbits::build_symbol_exponents<L>(expbits::GaussSymbols{damage == 4 ? 2u : (1u << L::kExpBits) - 3}, se);
    // take_lane_pairs_in_range's condition: every d whose code fits the pair table's bits
    // stands for an exponent (1 .. kTop - 1) under the reference; one near either end fails it.
    const bool in_range = expbits::pairs_in_range<expbits::GaussSymbols>(se, pc, format::kGaussSymbols);
    if (damage >= 4) {
      CHECK_FALSE(in_range);
    } else {
      int dlo = format::kGaussDMax, dhi = format::kGaussDMin;
      for (int d = format::kGaussDMin; d <= format::kGaussDMax; ++d)
        if (format::kGaussCodeLengths[d - format::kGaussDMin] <= expbits::kPairBits) {
          dlo = std::min(dlo, d);
          dhi = std::max(dhi, d);
        }
      const int ref = static_cast<int>(syms.ref);
      CHECK(in_range == (ref + dlo >= 1 && ref + dhi < static_cast<int>(kTop)));
    }
    std::vector<uint8_t> streams(4 * total_words + 1);
    uint8_t* base_at = streams.data() + (damage == 2 ? 1 : 0);
    std::memcpy(base_at, words, 4 * total_words);
    uint32_t at = 0;
    for (uint32_t lane = 0; lane < format::kLanes; ++lane) {
      uint32_t nwords = format::load_u16(lane_table + 2 * lane);
      const uint8_t* lane_in = base_at + 4 * at;
      at += nwords;
      if (damage == 0 && lane == 3) base_at[4 * (at - nwords) + 2 * nwords] ^= 0x10;
      if (damage == 1 && lane == 7) --nwords;
      if (damage == 3 && nwords > 0) base_at[4 * (at - nwords) + rng.next() % (4 * nwords)] ^= 1u << (rng.next() % 8);
      std::vector<Bits> ref(n, 0);
      uint32_t bad_ref = 0;
      const auto st_ref = expbits::decode_lane<L>(lane_in, nwords, raw, n, lane, se, pc, ref.data(), &bad_ref);
      for (const Loop loop : {Loop::Single, Loop::Pairs, Loop::InRange, Loop::Exponents}) {
        if (loop == Loop::InRange && !in_range) continue;
        if (loop == Loop::Exponents && (!kExponents || !in_range || syms.ref < 8)) continue;
        for (const bool aligned_reader : {false, true}) {
          if (aligned_reader && reinterpret_cast<uintptr_t>(lane_in) % 4 != 0) continue;
          ran_in_range = ran_in_range || loop == Loop::InRange;
          ran_exponents = ran_exponents || loop == Loop::Exponents;
          std::vector<Bits> mine(n, 0);
          uint32_t bad_mine = 0;
          const auto st_mine = decode_windowed(lane_in, nwords, lane, mine, &bad_mine, loop, aligned_reader);
          CAPTURE(lane, static_cast<int>(loop), aligned_reader);
          CHECK(st_mine == st_ref);
          CHECK(bad_mine == bad_ref);
          for (uint32_t k = lane; k < bad_ref; k += format::kLanes) CHECK(mine[k] == ref[k]);
          if (damage == -1 || damage == 2) {
            CHECK(st_ref == expbits::LaneStatus::Ok);
            for (uint32_t k = lane; k < n; k += format::kLanes) CHECK(mine[k] == values[k]);
          }
        }
      }
    }
  }
  // The in-range loop ran (every case's reference is inside the range; damage 4 and 5 take
  // the general loop).
  CHECK(ran_in_range);
  CHECK(ran_exponents == kExponents);
}

// entropy-exp's bf16 decoder's lane loop (take_lane_exponents over the chunk's own code, whose
// triple table the warp builds per chunk), window by window, against decode_lane: values,
// statuses and first bad elements, intact and damaged. Gaussian values, and one in `every` of
// random exponent (2: a flat spread of exponents, whose codes are 7 to 12 bits long).
void check_entropy_exponents(uint32_t n, uint32_t window, uint32_t every) {
  using L = expbits::Bf16Layout;
  CAPTURE(n, window, every);
  auto in = test::gaussian_bytes(DType::BF16, n, 0.05, 9 + n);
  std::vector<uint16_t> values(n);
  std::memcpy(values.data(), in.data(), in.size());
  test::SplitMix64 spread{every};
  for (uint32_t k = 0; k < n; k += every) values[k] = L::join(spread.next() % 256, 0x15, 0);
  const uint32_t special[] = {0u, 255u, 1u, 254u};  // rare exponents: the chunk's longest codes
  for (uint32_t k = 13; k < n; k += 89) values[k] = L::join(special[(k / 89) % 4], 0x2A, 0);
  std::memcpy(in.data(), values.data(), in.size());
  EncodeOptions opt;
  opt.chunk_elements = format::align_up(n, 32);  // one chunk
  const auto stream = encode(*find_codec("entropy-exp"), DType::BF16, in.data(), n, opt);
  const uint8_t* chunk = stream.data() + format::kHeaderBytes + format::kOffsetEntryBytes;
  REQUIRE(chunk[0] == format::kModeCoded);
  const uint32_t nsyms = uint32_t{chunk[1]} + 1;
  uint8_t lengths[format::kMaxEntropySymbols] = {};
  for (uint32_t i = 0; i < nsyms; ++i)
    lengths[chunk[format::kChunkHeaderBytes + 2 * i]] = chunk[format::kChunkHeaderBytes + 2 * i + 1];
  const auto pc = std::make_unique<expbits::PrefixCode>();
  REQUIRE(expbits::build_prefix_code(lengths, format::kMaxEntropySymbols, *pc));
  expbits::SymbolExponents se{};
  expbits::build_symbol_exponents<L>(expbits::DirectSymbols{}, se);
  const auto triples = std::make_unique<expbits::TripleCode>();
  expbits::build_triple_code<expbits::DirectSymbols>(*pc, *triples);
  // The table holds entries of three codes and of codes too long to share it.
  uint32_t threes = 0, longest = 0;
  for (const uint32_t e : triples->entry) threes += e >> expbits::kTripleCountShift == 3;
  for (uint32_t s = 0; s < format::kMaxEntropySymbols; ++s) longest = std::max<uint32_t>(longest, lengths[s]);
  CHECK(threes > 0);
  // Rare exponents (one in 97 of random exponent) take codes longer than the table's bits in a
  // whole chunk.
  if (every > 2 && n >= 16384) CHECK(longest > expbits::kPairBits);
  const uint32_t table_bytes = expbits::ChunkLayout<L>::table_bytes_entropy(nsyms);
  const uint8_t* lane_table = chunk + expbits::ChunkLayout<L>::lane_table_at(table_bytes);
  const uint8_t* raw = chunk + expbits::ChunkLayout<L>::raw_at(table_bytes);
  const uint8_t* words = chunk + expbits::ChunkLayout<L>::streams_at(table_bytes, n);
  uint32_t total_words = 0;
  for (uint32_t lane = 0; lane < format::kLanes; ++lane) total_words += format::load_u16(lane_table + 2 * lane);
  test::SplitMix64 rng{n + window + 1};
  for (const int damage : {-1, 0, 1, 2}) {
    // -1: intact; 0: a flipped bit in lane 3's middle; 1: lane 7 one word short; 2: a random bit
    // flipped in every lane.
    CAPTURE(damage);
    std::vector<uint8_t> streams(words, words + 4 * total_words);
    uint32_t at = 0;
    for (uint32_t lane = 0; lane < format::kLanes; ++lane) {
      uint32_t nwords = format::load_u16(lane_table + 2 * lane);
      uint8_t* lane_in = streams.data() + 4 * at;
      at += nwords;
      if (damage == 0 && lane == 3) lane_in[2 * nwords] ^= 0x10;
      if (damage == 1 && lane == 7) --nwords;
      if (damage == 2 && nwords > 0) lane_in[rng.next() % (4 * nwords)] ^= 1u << (rng.next() % 8);
      std::vector<uint16_t> ref(n, 0), mine(n, 0);
      uint32_t bad_ref = 0, bad_mine = 0;
      const auto st_ref = expbits::decode_lane<L>(lane_in, nwords, raw, n, lane, se, *pc, ref.data(), &bad_ref);
      expbits::AlignedWordBitReader r(lane_in, nwords);
      const auto st_mine = take_exponents_windowed<L>(r, raw, n, window, lane, expbits::DirectTripleExponents{}, se,
                                                      *pc, *triples, mine.data(), &bad_mine);
      CAPTURE(lane);
      CHECK(st_mine == st_ref);
      CHECK(bad_mine == bad_ref);
      for (uint32_t k = lane; k < bad_ref; k += format::kLanes) CHECK(mine[k] == ref[k]);
      if (damage == -1) {
        CHECK(st_ref == expbits::LaneStatus::Ok);
        for (uint32_t k = lane; k < n; k += format::kLanes) CHECK(mine[k] == values[k]);
      }
    }
  }
}

}  // namespace

TEST_CASE("the GPU's windowed lane loops equal encode_lane/decode_lane", "[codec]") {
  for (const uint32_t window : {512u, 64u, 96u}) {
    for (const uint32_t n : {5000u, 16384u, 1000u}) {
      check_windowed_lanes<expbits::Bf16Layout>(DType::BF16, n, window);
      check_windowed_lanes<expbits::Fp16Layout>(DType::FP16, n, window);
      // fp16 about 1: its reference in the middle of fp16's exponents, not near their bottom.
      check_windowed_lanes<expbits::Fp16Layout>(DType::FP16, n, window, 1.0);
      check_windowed_lanes<expbits::Fp32Layout>(DType::FP32, n, window);
      // entropy-exp: narrow and wide spreads of exponents (short codes, and codes of 10 bits and more)
      check_entropy_exponents(n, window, 97);
      if (n >= 5000) check_entropy_exponents(n, window, 2);  // (1,000 such elements are stored)
    }
  }
}

TEST_CASE("join_bf16x4 joins four bf16 values as Bf16Layout::join does", "[codec]") {
  test::SplitMix64 rng{77};
  for (int i = 0; i < 20000; ++i) {
    const uint32_t raw4 = static_cast<uint32_t>(rng.next()), exps4 = static_cast<uint32_t>(rng.next());
    uint32_t first = 0, second = 0;
    expbits::join_bf16x4(raw4, exps4, &first, &second);
    for (uint32_t b = 0; b < 4; ++b) {
      const uint32_t want = expbits::Bf16Layout::join(exps4 >> (8 * b) & 0xFFu, raw4 >> (8 * b) & 0xFFu, 0);
      CHECK(((b < 2 ? first : second) >> (16 * (b % 2)) & 0xFFFFu) == want);
    }
  }
}

TEST_CASE("expected_stream_info is what the stream's header says", "[codec]") {
  EncodeOptions opt;
  opt.chunk_elements = 1024;
  for (const char* name : {"identity", "gauss-exp", "entropy-exp", "fp8-hadamard"})
    for (DType dtype : kDTypes)
      for (const uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{1024}, uint64_t{5000}}) {
        CAPTURE(name, static_cast<int>(dtype), n);
        const Codec& codec = *find_codec(name);
        const auto in = test::gaussian_bytes(dtype, n, 0.02, 9 + n);
        const auto stream = encode(codec, dtype, in.data(), n, opt);
        const StreamInfo read = read_stream_info(stream.data(), stream.size());
        const StreamInfo expect = expected_stream_info(codec, dtype, n, opt, stream.size());
        CHECK(expect.codec == read.codec);
        CHECK(expect.dtype == read.dtype);
        CHECK(expect.elements == read.elements);
        CHECK(expect.chunk_elements == read.chunk_elements);
        CHECK(expect.chunk_count == read.chunk_count);
        CHECK(expect.payload_bytes == read.payload_bytes);
        CHECK(expect.total_bytes == read.total_bytes);
        // Sizes no such stream can have, and bad options, are errors naming the codec.
        const uint64_t table_end = format::kHeaderBytes + format::kOffsetEntryBytes * read.chunk_count;
        CHECK_THROWS_WITH(expected_stream_info(codec, dtype, n, opt, table_end - 1), Catch::Contains(name));
        CHECK_THROWS_AS(expected_stream_info(codec, dtype, n, opt, max_encoded_size(codec, dtype, n, opt) + 1),
                        CodecError);
        // Within a wire budget (the receiver knows only the budget): bytes past the stream, even
        // past the longest stream the codec writes (a budget grown from a stream at that bound,
        // as identity's always are), hold at most that longest stream; too few to hold the
        // header and table are still refused.
        const uint64_t most = max_encoded_size(codec, dtype, n, opt);
        for (const uint64_t budget : {uint64_t(stream.size()), stream.size() + 100, most, most + 1, most * 2}) {
          CAPTURE(budget);
          const StreamInfo within = expected_stream_info(codec, dtype, n, opt, budget, true);
          CHECK(within.payload_at_most);
          CHECK(within.total_bytes == std::min(budget, most));
          CHECK(within.payload_bytes == within.total_bytes - table_end);
          CHECK(within.payload_bytes >= read.payload_bytes);
        }
        CHECK_THROWS_AS(expected_stream_info(codec, dtype, n, opt, table_end - 1, true), CodecError);
      }
  EncodeOptions bad;
  bad.chunk_elements = 33;
  CHECK_THROWS_AS(expected_stream_info(*find_codec("gauss-exp"), DType::BF16, 100, bad, 1000), CodecError);
}

TEST_CASE("exponent_entropy gives H and the order-0 bound", "[codec]") {
  // bf16: exponents 0x7F and 0x80 equally often -> H = 1 bit, bound 16 / (8 + 1).
  const std::vector<uint16_t> two = {0x3F80, 0x4000, 0xBF80, 0x4000};
  const ExponentEntropy e = exponent_entropy(DType::BF16, two.data(), two.size());
  CHECK(e.bits == Approx(1.0));
  CHECK(e.bound == Approx(16.0 / 9.0));
  // fp16: one exponent -> H = 0, bound 16 / (16 - 5); fp32: four exponents -> 32 / (24 + 2).
  const std::vector<uint16_t> one = {0x3C00, 0x3C01, 0xBC02};
  CHECK(exponent_entropy(DType::FP16, one.data(), one.size()).bound == Approx(16.0 / 11.0));
  const std::vector<uint32_t> four = {0x3F800000u, 0x40000000u, 0x40800000u, 0x41000000u};
  CHECK(exponent_entropy(DType::FP32, four.data(), four.size()).bits == Approx(2.0));
  CHECK(exponent_entropy(DType::FP32, four.data(), four.size()).bound == Approx(32.0 / 26.0));
  CHECK(exponent_entropy(DType::BF16, nullptr, 0).bound == 1.0);
}
