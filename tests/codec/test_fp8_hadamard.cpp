// tests/codec/test_fp8_hadamard.cpp — the lossy fp8-hadamard codec (codec/fp8_hadamard.h,
// codec/fp8_bits.h): FP8 rounding and saturation bit for bit, the Hadamard transform's exact
// inverse, exact cases (zero, constant and one-spike groups), tails, non-finite chunks, the
// stream size formula, error bounds on Gaussian and on the bundled real activations, and
// rejection of damaged streams.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "codec/fp8_bits.h"
#include "codec/fp8_hadamard.h"
#include "io/float_convert.h"
#include "io/tensor_file.h"
#include "test_util.h"

using namespace compcoll;
using fp8bits::ChunkLayout;

namespace {

const DType kDTypes[] = {DType::BF16, DType::FP16, DType::FP32};

double value_at(DType dtype, const std::vector<uint8_t>& b, size_t i) { return load_as_float(dtype, b.data(), i); }

struct Error {
  double max_abs = 0, rel_l2 = 0;
  bool all_finite = true;
};

Error error_of(DType dtype, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  REQUIRE(got.size() == want.size());
  Error e;
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size() / dtype_size(dtype); ++i) {
    const double g = value_at(dtype, got, i), w = value_at(dtype, want, i);
    e.all_finite &= std::isfinite(g);
    e.max_abs = std::max(e.max_abs, std::abs(g - w));
    num += (g - w) * (g - w);
    den += w * w;
  }
  e.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return e;
}

std::vector<uint8_t> roundtrip(const Codec& codec, DType dtype, const std::vector<uint8_t>& in,
                               const EncodeOptions& opt = {}, size_t* stream_bytes = nullptr) {
  const size_t n = in.size() / dtype_size(dtype);
  const std::vector<uint8_t> stream = encode(codec, dtype, in.data(), n, opt);
  const StreamInfo info = read_stream_info(stream.data(), stream.size());
  REQUIRE(info.total_bytes == stream.size());
  REQUIRE(info.codec == CodecId::Fp8Hadamard);
  REQUIRE(stream.size() <= max_encoded_size(codec, dtype, n, opt));
  if (stream_bytes) *stream_bytes = stream.size();
  std::vector<uint8_t> out(in.size(), 0xA5);
  decode(stream.data(), stream.size(), out.data(), out.size());
  return out;
}

// The stream size docs/FORMAT.md promises for finite input.
size_t expected_stream_bytes(DType dtype, uint64_t n, uint32_t chunk, uint32_t g) {
  size_t total = format::kHeaderBytes;
  for (uint64_t first = 0; first < n; first += chunk) {
    const uint32_t m = static_cast<uint32_t>(std::min<uint64_t>(chunk, n - first));
    const uint32_t stored = ChunkLayout::stored_bytes(m, static_cast<uint32_t>(dtype_size(dtype)));
    const uint32_t quantized = ChunkLayout::quantized_bytes(m, g);
    total += format::kOffsetEntryBytes + (stored <= quantized ? stored : quantized);
  }
  return total;
}

std::vector<uint8_t> from_floats(DType dtype, const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * dtype_size(dtype));
  for (size_t i = 0; i < v.size(); ++i) store_from_float(dtype, out.data(), i, v[i]);
  return out;
}

}  // namespace

TEST_CASE("fp8-hadamard: registry, names and parameters", "[codec][fp8]") {
  const Codec* c = find_codec("fp8-hadamard");
  REQUIRE(c != nullptr);
  CHECK(c->id() == CodecId::Fp8Hadamard);
  CHECK(!c->lossless());
  CHECK(&codec_by_id(CodecId::Fp8Hadamard) == c);
  CHECK(&fp8_hadamard_codec() == c);
  const Codec* e = find_codec("fp8-hadamard-e5m2-g64");
  REQUIRE(e != nullptr);
  CHECK(e->name() == "fp8-hadamard-e5m2-g64");
  CHECK(e == &fp8_hadamard_codec({64, Fp8Format::E5M2}));
  CHECK(find_codec("fp8-hadamard-g128") == c);
  CHECK(find_codec("fp8-hadamard-g512")->name() == "fp8-hadamard-g512");
  for (const char* bad : {"fp8-hadamard-g100", "fp8-hadamard-g16", "fp8-hadamard-g1024",
                          "fp8-hadamard-g", "fp8-hadamard-g064", "fp8-hadamard-e4m3",
                          "fp8-hadamard-g64-e5m2", "fp8-hadamardx", "fp8"})
    CHECK(find_codec(bad) == nullptr);
  CHECK_THROWS_AS(fp8_hadamard_codec({100}), CodecError);
  CHECK_THROWS_AS(fp8_hadamard_codec({1024}), CodecError);
}

TEST_CASE("fp8: every code converts back to itself; ties to even; saturation", "[codec][fp8]") {
  for (uint32_t fmt : {format::kFp8E4M3, format::kFp8E5M2}) {
    const fp8bits::Fp8Spec s = fp8bits::fp8_spec(fmt);
    CAPTURE(fmt);
    for (uint32_t code = 0; code < 256; ++code) {
      const float f = fp8bits::fp8_to_float(static_cast<uint8_t>(code), fmt);
      if ((code & 0x7F) > s.max_code) {  // NaN / Inf codes: never written by the encoder
        CHECK(!std::isfinite(f));
        continue;
      }
      CHECK(fp8bits::float_to_fp8(f, fmt) == code);
    }
    CHECK(fp8bits::fp8_to_float(static_cast<uint8_t>(s.max_code), fmt) == s.max_value);
    // Midpoints between neighbours round to the even code; just above or below, to the nearer.
    for (uint32_t code = 0; code < s.max_code; ++code) {
      const float a = fp8bits::fp8_to_float(static_cast<uint8_t>(code), fmt);
      const float b = fp8bits::fp8_to_float(static_cast<uint8_t>(code + 1), fmt);
      const float mid = (a + b) / 2;  // exact: both have few significant bits
      CAPTURE(code, a, b);
      CHECK(fp8bits::float_to_fp8(mid, fmt) == ((code & 1) ? code + 1 : code));
      CHECK(fp8bits::float_to_fp8(std::nextafter(mid, 0.0f), fmt) == code);
      CHECK(fp8bits::float_to_fp8(std::nextafter(mid, 1e30f), fmt) == code + 1);
      CHECK(fp8bits::float_to_fp8(-mid, fmt) == (0x80 | ((code & 1) ? code + 1 : code)));
    }
    // Saturation: past the largest finite value, including the tie above it and huge values.
    const float next_up = std::ldexp(s.max_value, 0) * (fmt == format::kFp8E4M3 ? 480.0f / 448 : 65536.0f / 57344);
    for (float big : {s.max_value, (s.max_value + next_up) / 2, next_up, 1e20f,
                      std::numeric_limits<float>::max()}) {
      CHECK(fp8bits::float_to_fp8(big, fmt) == s.max_code);
      CHECK(fp8bits::float_to_fp8(-big, fmt) == (0x80 | s.max_code));
    }
    // Below half the smallest subnormal: zero; fp32 subnormals: zero.
    const float tiny = fp8bits::fp8_to_float(1, fmt);
    CHECK(fp8bits::float_to_fp8(tiny / 2, fmt) == 0);
    CHECK(fp8bits::float_to_fp8(std::nextafter(tiny / 2, 1.0f), fmt) == 1);
    CHECK(fp8bits::float_to_fp8(1e-40f, fmt) == 0);
  }
  CHECK(fp8bits::fp8_to_float(0x7E, format::kFp8E4M3) == 448.0f);
  CHECK(fp8bits::fp8_to_float(0x01, format::kFp8E4M3) == std::ldexp(1.0f, -9));
  CHECK(fp8bits::fp8_to_float(0x7B, format::kFp8E5M2) == 57344.0f);
  CHECK(fp8bits::fp8_to_float(0x01, format::kFp8E5M2) == std::ldexp(1.0f, -16));
}

TEST_CASE("fp8-hadamard: the transform applied twice is p times the input, exactly",
          "[codec][fp8]") {
  test::SplitMix64 rng{7};
  for (uint32_t p = 1; p <= format::kFp8MaxGroup; p *= 2) {
    std::vector<float> x(p), v(p);
    for (auto& f : x) f = static_cast<float>(static_cast<int>(rng.next() % 201) - 100);
    v = x;
    fp8bits::fwht(v.data(), p);
    if (p == 4) {  // H_4 in Sylvester order
      CHECK(v[0] == x[0] + x[1] + x[2] + x[3]);
      CHECK(v[1] == x[0] - x[1] + x[2] - x[3]);
      CHECK(v[2] == x[0] + x[1] - x[2] - x[3]);
      CHECK(v[3] == x[0] - x[1] - x[2] + x[3]);
    }
    fp8bits::fwht(v.data(), p);
    for (uint32_t i = 0; i < p; ++i) REQUIRE(v[i] == x[i] * static_cast<float>(p));
  }
}

namespace {

// A group of p values as the CUDA kernels hold it, over 32 lanes of R registers each
// (fp8bits' lane layout), and back.
template <uint32_t R>
struct WarpGroup {
  float v[fp8bits::kGroupLanes][R] = {};
  WarpGroup(const std::vector<float>& x, uint32_t p) {
    for (uint32_t lane = 0; lane < fp8bits::kGroupLanes; ++lane)
      for (uint32_t r = 0; r < R; ++r) {
        const uint32_t k = fp8bits::lane_element(lane, r);
        if (k < p) v[lane][r] = x[k];
      }
  }
  std::vector<float> values(uint32_t p) const {
    std::vector<float> x(p);
    for (uint32_t lane = 0; lane < fp8bits::kGroupLanes; ++lane)
      for (uint32_t r = 0; r < R; ++r) {
        const uint32_t k = fp8bits::lane_element(lane, r);
        if (k < p) x[k] = v[lane][r];
      }
    return x;
  }
  // The kernels' warp_fwht: stages across lanes (a shuffle gives each lane its partner's
  // register), then inside each lane.
  void fwht(uint32_t p) {
    for (uint32_t h = 1; h < fp8bits::cross_lane_stages_end(p); h *= 2) {
      const WarpGroup before = *this;
      for (uint32_t lane = 0; lane < fp8bits::kGroupLanes; ++lane)
        for (uint32_t r = 0; r < R; ++r)
          v[lane][r] = fp8bits::cross_lane_butterfly(before.v[lane][r], before.v[lane ^ h][r], lane, h);
    }
    for (auto& lane : v) fp8bits::in_lane_stages(lane);
  }
};

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// quantize_group and dequantize_group with the transform in the warp's layout, steps as the
// kernels take them (maxima over all values, terms summed in index order).
template <uint32_t R>
void check_warp_layout(const std::vector<float>& x, uint32_t p, uint32_t fmt) {
  std::vector<float> want = x;
  fp8bits::fwht(want.data(), p);
  WarpGroup<R> w(x, p);
  w.fwht(p);
  const std::vector<float> got = w.values(p);
  for (uint32_t k = 0; k < p; ++k) REQUIRE(bits_of(got[k]) == bits_of(want[k]));

  std::vector<float> q = x;
  std::vector<uint8_t> codes(p), warp_codes(p);
  const fp8bits::GroupScales sc = fp8bits::quantize_group(q.data(), p, fmt, codes.data());
  float amax = 0.0f;
  for (float f : x) amax = std::max(amax, fp8bits::abs_f(f));
  fp8bits::GroupScales ws{0.0f, 0.0f};
  if (amax != 0.0f) {
    float sum = 0.0f;
    for (float f : x) sum = fp8bits::add_rn(sum, fp8bits::rms_term(f, amax));
    ws.s1 = fp8bits::rms_scale(amax, sum, p);
    std::vector<float> y(p);
    for (uint32_t k = 0; k < p; ++k) y[k] = fp8bits::div_rn(x[k], ws.s1);
    WarpGroup<R> wy(y, p);
    wy.fwht(p);
    y = wy.values(p);
    float ymax = 0.0f;
    for (float f : y) ymax = std::max(ymax, fp8bits::abs_f(f));
    ws.s2 = fp8bits::quantization_scale(ymax, fmt);
    for (uint32_t k = 0; k < p; ++k) warp_codes[k] = fp8bits::quantize_value(y[k], ws.s2, fmt);
  }
  REQUIRE(bits_of(ws.s1) == bits_of(sc.s1));
  REQUIRE(bits_of(ws.s2) == bits_of(sc.s2));
  REQUIRE(warp_codes == codes);

  std::vector<float> back(p);
  fp8bits::dequantize_group(codes.data(), p, fmt, sc, back.data());
  std::vector<float> d(p);
  for (uint32_t k = 0; k < p; ++k) d[k] = fp8bits::dequantize_value(codes[k], sc.s2, fmt);
  WarpGroup<R> wd(d, p);
  wd.fwht(p);
  d = wd.values(p);
  const float inv_p = fp8bits::inverse_size(p);
  for (uint32_t k = 0; k < p; ++k) REQUIRE(bits_of(fp8bits::restore_value(d[k], inv_p, sc.s1)) == bits_of(back[k]));
}

}  // namespace

TEST_CASE("fp8-hadamard: a group spread over a warp's lanes, as the CUDA kernels code it, gives the same bits",
          "[codec][fp8]") {
  test::SplitMix64 rng{11};
  for (uint32_t fmt : {format::kFp8E4M3, format::kFp8E5M2})
    for (uint32_t p = 1; p <= format::kFp8MaxGroup; p *= 2)
      for (int trial = 0; trial < 20; ++trial) {
        CAPTURE(fmt, p, trial);
        std::vector<float> x(p);
        // Magnitudes from subnormal to huge, signs and zeros mixed, some groups all zero: rounding
        // in every step differs with the order of operations, so a misplaced pair shows.
        const float scale = std::ldexp(1.0f, static_cast<int>(rng.next() % 200) - 140);
        for (auto& f : x) {
          const uint64_t r = rng.next();
          const float unit = static_cast<float>(static_cast<int64_t>(r >> 40) - (int64_t{1} << 23)) / 1048576.0f;
          f = trial == 0 || r % 7 == 0 ? 0.0f : scale * unit;
        }
        switch (fp8bits::lane_registers(p)) {
          case 1: check_warp_layout<1>(x, p, fmt); break;
          case 2: check_warp_layout<2>(x, p, fmt); break;
          case 4: check_warp_layout<4>(x, p, fmt); break;
          case 8: check_warp_layout<8>(x, p, fmt); break;
          default: REQUIRE(fp8bits::lane_registers(p) == 16); check_warp_layout<16>(x, p, fmt);
        }
      }
}

TEST_CASE("fp8-hadamard: zero, constant and one-spike groups decode exactly", "[codec][fp8]") {
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const uint32_t g = GENERATE(32u, 128u, 512u);
  const Codec& codec = fp8_hadamard_codec({g});
  CAPTURE(dtype_name(dtype), g);
  // Six groups: zeros, -0s, a constant, a negative constant, a spike, zeros again.
  std::vector<float> v(6 * g, 0.0f);
  for (uint32_t i = 0; i < g; ++i) {
    v[g + i] = -0.0f;
    v[2 * g + i] = 0.75f;
    v[3 * g + i] = -3.0f;
  }
  v[4 * g + 5] = -12.5f;
  const auto in = from_floats(dtype, v);
  const auto out = roundtrip(codec, dtype, in);
  for (size_t i = 0; i < v.size(); ++i) {
    CAPTURE(i);
    CHECK(value_at(dtype, out, i) == (v[i] == 0.0f ? 0.0 : value_at(dtype, in, i)));
  }
  // Zero groups are +0 bit for bit (−0 included): documented.
  for (size_t b = 0; b < 2 * g * dtype_size(dtype); ++b) REQUIRE(out[b] == 0);
  // An all-zero chunk: zero scales, zero codes, zero output.
  const std::vector<uint8_t> zeros(1000 * dtype_size(dtype), 0);
  CHECK(roundtrip(codec, dtype, zeros) == zeros);
}

TEST_CASE("fp8-hadamard: sizes, tails and chunkings; stream size is the formula", "[codec][fp8]") {
  const uint32_t chunk = GENERATE(32u, 1024u, format::kDefaultChunkElements);
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const uint32_t g = GENERATE(32u, 128u, 512u);
  const Codec& codec = fp8_hadamard_codec({g});
  std::vector<size_t> sizes = {0,  1,  2,   3,   5,   31,  32,  33,        63,    64,
                               65, 127, 128, 129, 200, 511, 513, chunk - 1, chunk, chunk + 1,
                               3 * size_t{chunk} + 17};
  test::SplitMix64 rng{31};
  for (int i = 0; i < 3; ++i) sizes.push_back(rng.next() % (5 * size_t{chunk}));
  EncodeOptions opt;
  opt.chunk_elements = chunk;
  for (size_t n : sizes) {
    CAPTURE(dtype_name(dtype), chunk, g, n);
    const auto in = test::gaussian_bytes(dtype, n, 0.02, 500 + n);
    size_t bytes = 0;
    const auto out = roundtrip(codec, dtype, in, opt, &bytes);
    CHECK(bytes == expected_stream_bytes(dtype, n, chunk, g));
    const Error e = error_of(dtype, out, in);
    CHECK(e.all_finite);
    // Tails (P < 32 values in the last group) quantize with the same relative precision;
    // per-element error is bounded by the group's FP8 step, far below 0.02 * 5.
    CHECK(e.rel_l2 < 0.05);
    CHECK(e.max_abs < 0.02);
  }
  // About 1 + 8/G bytes per element on full chunks (plus 12 bytes per chunk).
  const size_t n = 8 * size_t{chunk};
  const double expect = n + 8.0 * n / g + 12.0 * 8 + 32;
  if (chunk >= g) {
    const auto in = test::gaussian_bytes(DType::BF16, n, 1.0, 3);
    CHECK(encode(codec, DType::BF16, in.data(), n, opt).size() == static_cast<size_t>(expect));
  }
}

TEST_CASE("fp8-hadamard: chunks with NaN or Inf are stored raw, bit for bit", "[codec][fp8]") {
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const size_t n = 4000;
  EncodeOptions opt;
  opt.chunk_elements = 1024;
  auto in = test::gaussian_bytes(dtype, n, 1.0, 11);
  const size_t es = dtype_size(dtype);
  // Chunk 1: a NaN with a payload; chunk 3 (the tail): -Inf. Chunks 0 and 2 stay finite.
  const uint32_t nan = dtype == DType::FP32 ? 0x7FA00001u : dtype == DType::BF16 ? 0xFFA1u : 0x7D01u;
  const uint32_t ninf = dtype == DType::FP32 ? 0xFF800000u : dtype == DType::BF16 ? 0xFF80u : 0xFC00u;
  std::memcpy(in.data() + 1500 * es, &nan, es);
  std::memcpy(in.data() + 3999 * es, &ninf, es);
  const auto stream = encode(fp8_hadamard_codec(), dtype, in.data(), n, opt);
  std::vector<uint8_t> out(in.size());
  decode(stream.data(), stream.size(), out.data(), out.size());
  CHECK(std::equal(out.begin() + 1024 * es, out.begin() + 2048 * es, in.begin() + 1024 * es));
  CHECK(std::equal(out.begin() + 3072 * es, out.end(), in.begin() + 3072 * es));
  // The finite chunks are quantized (lossy, so not all equal) and stay close.
  const std::vector<uint8_t> a(in.begin(), in.begin() + 1024 * es), b(out.begin(), out.begin() + 1024 * es);
  CHECK(a != b);
  CHECK(error_of(dtype, b, a).rel_l2 < 0.05);
  CHECK(stream.size() == format::kHeaderBytes + 4 * 8 + 2 * ChunkLayout::quantized_bytes(1024, 128) +
                             ChunkLayout::stored_bytes(1024, static_cast<uint32_t>(es)) +
                             ChunkLayout::stored_bytes(928, static_cast<uint32_t>(es)));
}

TEST_CASE("fp8-hadamard: extreme magnitudes stay finite and close", "[codec][fp8]") {
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const double top = dtype == DType::FP16 ? 65504.0 : 3.3895313892515355e38;
  const double bottom = dtype == DType::FP16 ? 5.960464477539063e-08 : 1e-44;
  for (double scale : {top, top / 3, 1e-30, bottom}) {
    if (dtype == DType::FP16 && scale < 1e-8 && scale != bottom) continue;
    CAPTURE(dtype_name(dtype), scale);
    // Values of magnitude up to `scale`, the largest exactly `scale`: saturation of the
    // reconstruction must clamp to the dtype's largest finite value, never overflow.
    std::vector<float> v(1000);
    test::SplitMix64 rng{static_cast<uint64_t>(scale * 0 + 5)};
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(scale * (i % 128 == 0 ? 1.0 : (rng.uniform() * 2 - 1)));
    const auto in = from_floats(dtype, v);
    const auto out = roundtrip(fp8_hadamard_codec(), dtype, in);
    const Error e = error_of(dtype, out, in);
    CHECK(e.all_finite);
    if (scale > 1e-20) CHECK(e.rel_l2 < 0.05);
  }
}

TEST_CASE("fp8-hadamard: error on Gaussian data per group size and format", "[codec][fp8]") {
  const auto in = test::gaussian_bytes(DType::FP32, 1 << 16, 1.0, 77);
  for (Fp8Format fmt : {Fp8Format::E4M3, Fp8Format::E5M2})
    for (uint32_t g = 32; g <= 512; g *= 2) {
      const Codec& codec = fp8_hadamard_codec({g, fmt});
      const Error e = error_of(DType::FP32, roundtrip(codec, DType::FP32, in), in);
      CAPTURE(codec.name(), e.rel_l2, e.max_abs);
      // Measured: E4M3 0.0245..0.0262, E5M2 0.049..0.0524 over G = 32..512 (3 and 2 mantissa
      // bits: round-to-nearest's RMS error is about 2^-m / sqrt(12) of the binade, relative
      // to values spread within it). The bounds leave ~15 % margin: a wrong rounding, scale or
      // transform order costs far more than that.
      CHECK(e.rel_l2 < (fmt == Fp8Format::E4M3 ? 0.03 : 0.06));
      CHECK(e.rel_l2 > (fmt == Fp8Format::E4M3 ? 0.015 : 0.03));  // it is lossy: not a copy
    }
}

TEST_CASE("fp8-hadamard: bundled real activations and activation gradients", "[codec][fp8][real]") {
  const auto files = test::real_tensor_files();
  size_t tested = 0;
  for (const auto& f : files) {
    const std::string name = f.filename().string();
    if (name.rfind("act.", 0) != 0 && name.rfind("actgrad.", 0) != 0) continue;
    const bool is_bf16 = name.find(".bf16.") != std::string::npos;
    for (const TensorData& t : load_tensors(f.string(), is_bf16 ? std::optional(DType::BF16) : std::nullopt)) {
      for (Fp8Format fmt : {Fp8Format::E4M3, Fp8Format::E5M2}) {
        const Codec& codec = fp8_hadamard_codec({128, fmt});
        size_t bytes = 0;
        const auto out = roundtrip(codec, t.dtype, t.bytes, {}, &bytes);
        const Error e = error_of(t.dtype, out, t.bytes);
        const double ratio = static_cast<double>(t.bytes.size()) / bytes;
        CAPTURE(t.source, codec.name(), e.rel_l2, e.max_abs, ratio);
        CHECK(e.all_finite);
        // Measured on these files (docs/FORMAT.md): 0.0256..0.0261 (E4M3), 0.0506..0.0515
        // (E5M2), bf16 and fp32 alike; the bounds leave ~15 % margin and fail if a rounding,
        // a scale or the transform goes wrong.
        CHECK(e.rel_l2 < (fmt == Fp8Format::E4M3 ? 0.03 : 0.06));
        if (t.dtype == DType::BF16 && t.elements() >= 16384) CHECK(ratio > 1.85);
        ++tested;
      }
    }
  }
  if (tested == 0) WARN("SKIPPED: no act.* / actgrad.* files under " << test::test_data_dir());
}

TEST_CASE("fp8-hadamard: encoding is deterministic", "[codec][fp8]") {
  const auto in = test::gaussian_bytes(DType::BF16, 50000, 0.3, 9);
  const Codec& codec = fp8_hadamard_codec();
  CHECK(encode(codec, DType::BF16, in.data(), 50000) == encode(codec, DType::BF16, in.data(), 50000));
}

TEST_CASE("fp8-hadamard: damaged streams are rejected with a located error", "[codec][fp8][bad-input]") {
  const DType dtype = GENERATE(DType::BF16, DType::FP32);
  const auto in = test::gaussian_bytes(dtype, 300, 1.0, 4);
  const auto stream = encode(fp8_hadamard_codec({64}), dtype, in.data(), 300);
  const size_t chunk_at = format::kHeaderBytes + format::kOffsetEntryBytes;
  REQUIRE(stream[chunk_at] == format::kFp8ModeQuantized);
  std::vector<uint8_t> out(in.size());
  const auto rejects = [&](size_t at, uint8_t value, const std::string& what) {
    auto bad = stream;
    bad[at] = value;
    CAPTURE(at, int{value}, what);
    try {
      decode(bad.data(), bad.size(), out.data(), out.size());
      FAIL("accepted");
    } catch (const CodecError& e) {
      CHECK(std::string(e.what()).find(what) != std::string::npos);
      CHECK(std::string(e.what()).find("chunk 0 at byte offset 40") != std::string::npos);
    }
  };
  rejects(chunk_at, 2, "unknown chunk mode 2");
  rejects(chunk_at, format::kFp8ModeStored, "stored chunk of");
  rejects(chunk_at + 1, 4, "group size 2^4");
  rejects(chunk_at + 1, 10, "group size 2^10");
  rejects(chunk_at + 1, 5, "quantized chunk of");  // G = 32: another size
  rejects(chunk_at + 2, 2, "unknown fp8 format 2");
  rejects(chunk_at + 3, 1, "reserved chunk header byte 3");
  rejects(chunk_at + 4 + 3, 0x80, "group 0: scale");           // s1 negative
  rejects(chunk_at + 4 + 8 + 4 + 3, 0xFF, "group 1: scale");   // s2 negative and NaN
  // A code byte changes values, not safety: any code decodes.
  auto other = stream;
  other[stream.size() - 5] ^= 0xFF;
  CHECK_NOTHROW(decode(other.data(), other.size(), out.data(), out.size()));
  // E4M3's NaN code (never written) decodes to NaN somewhere in its group, without a crash.
  std::fill(other.begin() + chunk_at + 4 + 8 * 5, other.end(), 0x7F);
  CHECK_NOTHROW(decode(other.data(), other.size(), out.data(), out.size()));
}

TEST_CASE("fp8-hadamard: a NaN decoded from codes the encoder never writes is the canonical quiet NaN",
          "[codec][fp8][bad-input]") {
  // Two E5M2 +Inf codes in one group: the transform's first stage makes Inf - Inf, which an x86
  // core gives as the negative default NaN and a GPU as its own pattern. Host and GPU must
  // write the same bits, so every NaN comes out as the dtype's canonical quiet NaN.
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const uint32_t canonical[] = {0x7FC0u, 0x7E00u, 0x7FC00000u};
  const uint32_t want = canonical[dtype == DType::BF16 ? 0 : dtype == DType::FP16 ? 1 : 2];
  const auto in = test::gaussian_bytes(dtype, 64, 1.0, 5);
  auto stream = encode(fp8_hadamard_codec({32, Fp8Format::E5M2}), dtype, in.data(), 64);
  const size_t chunk_at = format::kHeaderBytes + format::kOffsetEntryBytes;
  REQUIRE(stream[chunk_at] == format::kFp8ModeQuantized);
  const size_t codes_at = chunk_at + 4 + 8 * 2;  // two groups of 32
  stream[codes_at] = stream[codes_at + 1] = 0x7C;  // E5M2 +Inf, twice in group 0
  std::vector<uint8_t> out(in.size(), 0xA5);
  decode(stream.data(), stream.size(), out.data(), out.size());
  const size_t esize = dtype_size(dtype);
  int nans = 0;
  for (size_t i = 0; i < 64; ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, out.data() + i * esize, esize);
    if (!std::isnan(load_as_float(dtype, out.data(), i))) continue;
    ++nans;
    CAPTURE(i, bits);
    CHECK(bits == want);
  }
  CHECK(nans > 0);
  CHECK(nans <= 32);  // group 1 is untouched
}
