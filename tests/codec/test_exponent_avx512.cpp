// tests/codec/test_exponent_avx512.cpp — the AVX-512 paths of gauss-exp and entropy-exp (bf16,
// fp16, fp32) (codec/exponent_avx512.cpp) against the portable host paths: the same stream bytes for
// every size, chunk size and kind of value; the same values from every stream; and on
// damaged streams the same error, word for word. On a CPU without the instructions every
// case says SKIPPED.
#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "codec/codec.h"
#include "codec/exponent_avx512.h"
#include "codec/exponent_bits.h"
#include "codec/exponent_host.h"
#include "codec/format.h"
#include "io/tensor_file.h"
#include "test_util.h"

using namespace compcoll;
namespace simd = compcoll::detail::avx512;

namespace {

#define SKIP_WITHOUT_AVX512()                                                         \
  do {                                                                                \
    if (!simd::cpu_supported()) {                                                     \
      WARN("SKIPPED: this CPU lacks AVX-512 F/BW/VL/DQ/VBMI/VBMI2 (portable paths only)"); \
      return;                                                                         \
    }                                                                                 \
  } while (0)

// Restores the switch whatever a case does.
struct SimdSwitch {
  ~SimdSwitch() { simd::set_enabled(true); }
};

using test::values_of_kind;  // kinds 0..7; 3 (tiny) and fp16's 0 have references below 13

std::vector<uint8_t> encode_with(bool on, DType dtype, const std::vector<uint8_t>& in, uint32_t chunk,
                                 const char* codec = "gauss-exp") {
  simd::set_enabled(on);
  EncodeOptions opt;
  opt.chunk_elements = chunk;
  return encode(*find_codec(codec), dtype, in.data(), in.size() / dtype_size(dtype), opt);
}

// decode() with the switch as given: the error message, or "" and the values in *out.
std::string decode_with(bool on, const std::vector<uint8_t>& stream, size_t bytes, std::vector<uint8_t>* out) {
  simd::set_enabled(on);
  try {
    decode(stream.data(), stream.size(), out->data(), bytes);
  } catch (const CodecError& e) {
    return e.what();
  }
  return {};
}

// A damaged stream through both decoders: the same error, or the same values; counts which.
void same_on_damage(const std::vector<uint8_t>& stream, size_t bytes, int* decoded, int* failures) {
  std::vector<uint8_t> a(bytes, 0x11), b(bytes, 0x22);
  const std::string portable = decode_with(false, stream, bytes, &a);
  const std::string fast = decode_with(true, stream, bytes, &b);
  CHECK(fast == portable);
  if (portable.empty()) {
    CHECK(a == b);
    ++*decoded;
  } else {
    ++*failures;
  }
}

// Both encoders (the same bytes) and both decoders (the same values), gauss-exp or entropy-exp.
void check_same(DType dtype, const std::vector<uint8_t>& in, uint32_t chunk, const char* codec = "gauss-exp") {
  const auto portable = encode_with(false, dtype, in, chunk, codec);
  const auto fast = encode_with(true, dtype, in, chunk, codec);
  REQUIRE(fast == portable);
  std::vector<uint8_t> a(in.size(), 0x11), b(in.size(), 0x22);
  CHECK(decode_with(false, fast, in.size(), &a).empty());
  CHECK(decode_with(true, fast, in.size(), &b).empty());
  CHECK(a == in);
  CHECK(b == in);
}

}  // namespace

TEST_CASE("AVX-512 gauss-exp runs on coded chunks", "[codec]") {
  SKIP_WITHOUT_AVX512();
  SimdSwitch guard;
  // Called directly, so a silent fallback to the portable paths would fail here. Kind 0 of
  // fp16 and kind 3 have references below 13 (some symbols are out of range, and checked).
  const auto run = [](auto layout, DType dtype, int kind) {
    using L = decltype(layout);
    CAPTURE(dtype_name(dtype), kind);
    constexpr uint32_t n = format::kDefaultChunkElements - 5;
    const auto in = values_of_kind(dtype, n, kind, 5);
    std::vector<uint8_t> chunk(2 * in.size() + 1024);
    const size_t size = simd::encode_gauss<L>(in.data(), n, chunk.data());
    REQUIRE(size > 0);
    REQUIRE(chunk[0] == format::kModeCoded);
    const size_t raw_at = format::kChunkHeaderBytes + format::kLaneTableBytes;
    const size_t streams_at = raw_at + expbits::ChunkLayout<L>::raw_bytes(n);
    std::vector<uint8_t> out(in.size());
    CHECK(simd::decode_chunk<L>({chunk.data() + streams_at, size - streams_at, chunk.data() + format::kChunkHeaderBytes,
                                 chunk.data() + raw_at, n, chunk[1], out.data()}));
    CHECK(out == in);
  };
  for (int kind : {0, 2, 4}) {
    run(expbits::Bf16Layout{}, DType::BF16, kind);
    run(expbits::Fp16Layout{}, DType::FP16, kind);
    run(expbits::Fp32Layout{}, DType::FP32, kind);
  }
  run(expbits::Bf16Layout{}, DType::BF16, 3);  // fp16's tiny values are all zeros and subnormals: stored
  run(expbits::Fp32Layout{}, DType::FP32, 3);
  // entropy-exp's encoder, called directly: a coded chunk whose table has one entry per
  // exponent the values hold (the bytes against the portable encoder's: the next case).
  const auto run_entropy = [](auto layout, DType dtype, int kind) {
    using L = decltype(layout);
    CAPTURE(dtype_name(dtype), kind);
    constexpr uint32_t n = format::kDefaultChunkElements - 5;
    const auto in = values_of_kind(dtype, n, kind, 5);
    bool seen[256] = {};
    uint32_t distinct = 0;
    for (uint32_t i = 0; i < n; ++i) {
      typename L::Bits v;
      std::memcpy(&v, in.data() + i * sizeof v, sizeof v);
      const uint32_t e = L::exponent(v);
      distinct += !seen[e];
      seen[e] = true;
    }
    std::vector<uint8_t> chunk(2 * in.size() + 1024);
    const size_t size = simd::encode_entropy<L>(in.data(), n, chunk.data());
    REQUIRE(size > 0);
    REQUIRE(chunk[0] == format::kModeCoded);
    CHECK(chunk[1] + 1u == distinct);
  };
  for (int kind : {0, 2, 4}) {
    run_entropy(expbits::Bf16Layout{}, DType::BF16, kind);
    run_entropy(expbits::Fp32Layout{}, DType::FP32, kind);
  }
  run_entropy(expbits::Fp16Layout{}, DType::FP16, 2);
  // The switch, as the codecs and the bench see it.
  simd::set_enabled(false);
  CHECK(host_codec_path() == "portable");
  simd::set_enabled(true);
  CHECK(host_codec_path() == "avx512");
}

TEST_CASE("AVX-512 gauss-exp writes and reads the portable bytes", "[codec]") {
  SKIP_WITHOUT_AVX512();
  SimdSwitch guard;
  const char* codec = GENERATE("gauss-exp", "entropy-exp");
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const uint32_t chunk = GENERATE(32u, 96u, 1024u, format::kDefaultChunkElements, format::kMaxChunkElements);
  const int kind = GENERATE(0, 1, 2, 3, 4, 5, 6, 7);
  CAPTURE(codec, dtype_name(dtype), chunk, kind);
  std::vector<size_t> sizes = {0, 1, 15, 16, 17, 31, 32, 33, 64, 65, 95, 97, chunk - 1, chunk, chunk + 1,
                               2 * size_t{chunk} + 17};
  test::SplitMix64 rng{static_cast<uint64_t>(chunk) * 31 + kind};
  for (int i = 0; i < 3; ++i) sizes.push_back(rng.next() % (3 * size_t{chunk}));
  for (size_t n : sizes) {
    CAPTURE(n);
    check_same(dtype, values_of_kind(dtype, n, kind, n * 13 + kind), chunk, codec);
  }
}

TEST_CASE("AVX-512 gauss-exp on every exponent, 16-bit pattern and real tensor", "[codec]") {
  SKIP_WITHOUT_AVX512();
  SimdSwitch guard;
  const char* codec = GENERATE("gauss-exp", "entropy-exp");
  CAPTURE(codec);
  std::vector<uint8_t> all(65536 * 2);
  for (uint32_t v = 0; v < 65536; ++v) format::store_u16(all.data() + 2 * v, static_cast<uint16_t>(v));
  check_same(DType::BF16, all, format::kDefaultChunkElements, codec);
  check_same(DType::FP16, all, format::kDefaultChunkElements, codec);
  check_same(DType::BF16, all, 1024, codec);  // chunks of one or a few exponents: references of every value
  check_same(DType::FP16, all, 1024, codec);
  // Every exponent (with random sign and mantissa) next to an ordinary reference.
  test::SplitMix64 rng{8};
  auto bf16 = test::gaussian_bytes(DType::BF16, 4096, 1.0, 8);
  auto fp16 = test::gaussian_bytes(DType::FP16, 4096, 1.0, 8);
  auto fp32 = test::gaussian_bytes(DType::FP32, 4096, 1.0, 8);
  for (uint32_t e = 0; e < 256; ++e) {
    const uint32_t r = static_cast<uint32_t>(rng.next());
    format::store_u16(bf16.data() + 2 * (e * 13), static_cast<uint16_t>((r & 0x807F) | e << 7));
    format::store_u32(fp32.data() + 4 * (e * 13), (r & 0x807FFFFFu) | e << 23);
    if (e < 32) format::store_u16(fp16.data() + 2 * (e * 101), static_cast<uint16_t>((r & 0x83FF) | e << 10));
  }
  check_same(DType::BF16, bf16, 1024, codec);
  check_same(DType::FP16, fp16, 1024, codec);
  check_same(DType::FP32, fp32, 1024, codec);
  int files = 0;
  for (const auto& path : test::real_tensor_files()) {
    const std::string name = path.filename().string();
    const bool is_bf16 = name.find(".bf16.") != std::string::npos;
    CAPTURE(name);
    for (const TensorData& t : load_tensors(path.string(), is_bf16 ? std::optional(DType::BF16) : std::nullopt)) {
      check_same(t.dtype, t.bytes, format::kDefaultChunkElements, codec);
      ++files;
    }
    if (!is_bf16)  // fp32 tensors also as fp16, rounded to nearest even
      for (const TensorData& t : load_tensors(path.string(), DType::FP16)) check_same(t.dtype, t.bytes, format::kDefaultChunkElements, codec);
  }
  if (files == 0) WARN("SKIPPED: no tensors under " << test::test_data_dir());
}

TEST_CASE("AVX-512 gauss-exp reports damage exactly as the portable decoder", "[codec]") {
  SKIP_WITHOUT_AVX512();
  SimdSwitch guard;
  const char* codec = GENERATE("gauss-exp", "entropy-exp");
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const int kind = GENERATE(0, 2, 3, 4, 5);
  const uint32_t n = GENERATE(1000u, 4096u);
  CAPTURE(codec, dtype_name(dtype), kind, n);
  const auto in = values_of_kind(dtype, n, kind, 77 + kind);
  const auto clean = encode_with(true, dtype, in, format::align_up(n, format::kLanes), codec);
  const size_t chunk_at = format::kHeaderBytes + format::kOffsetEntryBytes;
  // fp16 chunks of a third zeros or of subnormals barely shrink, if at all (ZERO's 7-bit
  // code and 3 extra bits): a stored one has no lane streams to damage. Every other
  // combination must be coded.
  if (dtype == DType::FP16 && (kind == 2 || kind == 3) && clean[chunk_at] == format::kModeStored) return;
  REQUIRE(clean[chunk_at] == format::kModeCoded);
  const size_t raw_at = chunk_at + format::kChunkHeaderBytes + format::kLaneTableBytes;
  const size_t streams_at = raw_at + format::align_up(n * (dtype == DType::FP32 ? 3 : 1), 4);
  test::SplitMix64 rng{n + 3u * kind};
  int failures = 0, decoded = 0;
  for (int trial = 0; trial < 200; ++trial) {
    CAPTURE(trial);
    auto stream = clean;
    const int flips = 1 + static_cast<int>(rng.next() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly the lane streams; sometimes the reference or the raw section.
      const size_t from = trial % 7 == 6 ? chunk_at + 1 : trial % 7 == 5 ? raw_at : streams_at;
      const size_t at = from + rng.next() % (trial % 7 == 6 ? 1 : stream.size() - from);
      stream[at] ^= static_cast<uint8_t>(1u << (rng.next() % 8));
    }
    same_on_damage(stream, in.size(), &decoded, &failures);
  }
  CHECK(failures > 0);
  CHECK(decoded > 0);
}

namespace {

// A coded bf16 chunk of n elements at `at` of `buf`, located for the vector decoder.
simd::CodedChunk locate(std::vector<uint8_t>& buf, size_t at, size_t size, uint32_t n, uint8_t* out) {
  using L = expbits::Bf16Layout;
  const size_t raw_at = at + format::kChunkHeaderBytes + format::kLaneTableBytes;
  const size_t streams_at = raw_at + expbits::ChunkLayout<L>::raw_bytes(n);
  return {buf.data() + streams_at, at + size - streams_at, buf.data() + at + format::kChunkHeaderBytes,
          buf.data() + raw_at, n, buf[at + 1], out};
}

}  // namespace

TEST_CASE("AVX-512 gauss-exp decodes two chunks at once as it decodes each", "[codec]") {
  SKIP_WITHOUT_AVX512();
  SimdSwitch guard;
  using L = expbits::Bf16Layout;
  // Two chunks back to back, the second shorter (a stream's last chunk), then a third that
  // stands for what follows (the decoder reads the first in place, the second from a copy
  // or in place).
  const uint32_t n0 = format::kDefaultChunkElements, n1 = 5000 + 7;
  const auto in0 = values_of_kind(DType::BF16, n0, 4, 1), in1 = values_of_kind(DType::BF16, n1, 2, 2);
  std::vector<uint8_t> buf(2 * (in0.size() + in1.size()) + 4096);
  const size_t s0 = simd::encode_gauss<L>(in0.data(), n0, buf.data());
  const size_t s1 = simd::encode_gauss<L>(in1.data(), n1, buf.data() + s0);
  REQUIRE(buf[0] == format::kModeCoded);
  REQUIRE(buf[s0] == format::kModeCoded);
  const bool in_place = GENERATE(false, true);
  CAPTURE(in_place);
  std::vector<uint8_t> out0(in0.size()), out1(in1.size());
  simd::CodedChunk g0 = locate(buf, 0, s0, n0, out0.data()), g1 = locate(buf, s0, s1, n1, out1.data());
  g0.readable_after = in_place;
  g1.readable_after = in_place;
  bool ok[2] = {false, false};
  simd::decode_pair<L>(g0, g1, buf.data() + s0 + s1, 64, ok);
  CHECK(ok[0]);
  CHECK(ok[1]);
  CHECK(out0 == in0);
  CHECK(out1 == in1);
  // The chunks in the other order (the shorter first), as decode_chunk decodes each.
  std::fill(out0.begin(), out0.end(), 0);
  std::fill(out1.begin(), out1.end(), 0);
  simd::decode_pair<L>(g1, g0, nullptr, 0, ok);
  CHECK((ok[0] && ok[1]));
  CHECK(out0 == in0);
  CHECK(out1 == in1);
  // Damage in the second chunk's lane streams: each chunk's verdict is decode_chunk's, and
  // the clean chunk still decodes.
  test::SplitMix64 rng{11};
  int failed = 0;
  for (int trial = 0; trial < 50; ++trial) {
    auto damaged = buf;
    const size_t streams1 = static_cast<size_t>(g1.streams - buf.data());
    damaged[streams1 + rng.next() % g1.stream_bytes] ^= static_cast<uint8_t>(1u << (rng.next() % 8));
    std::vector<uint8_t> one(in1.size()), pair0(in0.size()), pair1(in1.size());
    simd::CodedChunk d0 = locate(damaged, 0, s0, n0, pair0.data()), d1 = locate(damaged, s0, s1, n1, pair1.data());
    d0.readable_after = d1.readable_after = in_place;
    simd::CodedChunk single = d1;
    single.out = one.data();
    const bool alone = simd::decode_chunk<L>(single);
    simd::decode_pair<L>(d0, d1, nullptr, 0, ok);
    CHECK(ok[0]);
    CHECK(pair0 == in0);
    CHECK(ok[1] == alone);
    if (alone) CHECK(pair1 == one);
    failed += !alone;
  }
  CHECK(failed > 0);
}

TEST_CASE("AVX-512 gauss-exp reports damage in many-chunk streams as the portable decoder", "[codec]") {
  SKIP_WITHOUT_AVX512();
  SimdSwitch guard;
  // Streams of several chunks are decoded two chunks at a time, reading lane streams in place
  // where another chunk follows: the first damaged chunk's error, word for word.
  const char* codec = GENERATE("gauss-exp", "entropy-exp");
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const uint32_t chunks = GENERATE(2u, 5u);
  const uint32_t chunk = 1024, n = chunks * chunk - 100;
  CAPTURE(codec, dtype_name(dtype), chunks);
  const auto in = values_of_kind(dtype, n, 4, 91);
  const auto clean = encode_with(true, dtype, in, chunk, codec);
  const size_t payload_at = format::kHeaderBytes + size_t{format::kOffsetEntryBytes} * chunks;
  test::SplitMix64 rng{chunks * 7u + static_cast<uint32_t>(dtype)};
  int failures = 0, decoded = 0;
  for (int trial = 0; trial < 150; ++trial) {
    CAPTURE(trial);
    auto stream = clean;
    const int flips = 1 + static_cast<int>(rng.next() % 3);
    for (int f = 0; f < flips; ++f)
      stream[payload_at + rng.next() % (stream.size() - payload_at)] ^= static_cast<uint8_t>(1u << (rng.next() % 8));
    same_on_damage(stream, in.size(), &decoded, &failures);
  }
  CHECK(failures > 0);
  CHECK(decoded > 0);
}

TEST_CASE("AVX-512 entropy-exp decode runs on coded chunks", "[codec]") {
  SKIP_WITHOUT_AVX512();
  SimdSwitch guard;
  // Called directly with the chunk's own decode table, so a silent fallback to the portable
  // paths would fail here.
  const auto run = [](auto layout, DType dtype, int kind) {
    using L = decltype(layout);
    CAPTURE(dtype_name(dtype), kind);
    constexpr uint32_t n = format::kDefaultChunkElements - 5;
    const auto in = values_of_kind(dtype, n, kind, 5);
    const Codec& codec = *find_codec("entropy-exp");
    std::vector<uint8_t> chunk(codec.max_chunk_bytes(dtype, n));
    const size_t size = codec.encode_chunk(dtype, in.data(), n, chunk.data());
    REQUIRE(chunk[0] == format::kModeCoded);
    constexpr uint32_t kSyms = 1u << L::kExpBits;
    const uint32_t nsyms = uint32_t{chunk[1]} + 1;
    uint8_t lengths[kSyms] = {};
    for (uint32_t i = 0; i < nsyms; ++i)
      lengths[chunk[format::kChunkHeaderBytes + 2 * i]] = chunk[format::kChunkHeaderBytes + 2 * i + 1];
    expbits::PrefixCode pc;
    REQUIRE(expbits::host::build_prefix_code(lengths, kSyms, pc));
    using Layout = expbits::ChunkLayout<L>;
    const uint32_t table = Layout::table_bytes_entropy(nsyms);
    const size_t streams_at = Layout::streams_at(table, n);
    std::vector<uint8_t> out(in.size());
    simd::CodedChunk c{chunk.data() + streams_at, size - streams_at, chunk.data() + Layout::lane_table_at(table),
                       chunk.data() + Layout::raw_at(table), n, 0, out.data(), pc.lut};
    CHECK(simd::decode_chunk<L>(c));
    CHECK(out == in);
    // A table that no longer fits the streams: the decoder says so rather than guess.
    pc.lut[(chunk[streams_at] | chunk[streams_at + 1] << 8) & 0xFFF] &= 0xFFF0;  // lane 0's first code: none
    CHECK_FALSE(simd::decode_chunk<L>(c));
  };
  for (int kind : {0, 2, 4}) {
    run(expbits::Bf16Layout{}, DType::BF16, kind);
    run(expbits::Fp16Layout{}, DType::FP16, kind);
    run(expbits::Fp32Layout{}, DType::FP32, kind);
  }
}
