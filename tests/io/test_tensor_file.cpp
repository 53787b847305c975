// tests/io/test_tensor_file.cpp — load_tensors and the fp32 → bf16/fp16 conversions.
// Builds every input file in a private temp dir; must never depend on files in the source tree,
// on numpy/safetensors being installed, or on the platform's libm for expected values.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "io/float_convert.h"
#include "io/tensor_file.h"
#include "test_util.h"
#include "util/text.h"

using namespace compcoll;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() / ("compcoll_tensor_file_" + std::to_string(::getpid()) +
                                         "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

using Bytes = std::vector<uint8_t>;

void write_file(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

void append_le(Bytes& out, uint64_t value, size_t count) {
  for (size_t i = 0; i < count; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

Bytes f32_bytes(const std::vector<float>& values) {
  Bytes out;
  for (float v : values) append_le(out, float_bits(v), 4);
  return out;
}

Bytes u32_bytes(const std::vector<uint32_t>& values) {
  Bytes out;
  for (uint32_t v : values) append_le(out, v, 4);
  return out;
}

Bytes u16_bytes(const std::vector<uint16_t>& values) {
  Bytes out;
  for (uint16_t v : values) append_le(out, v, 2);
  return out;
}

std::vector<uint16_t> as_u16(const Bytes& bytes) {
  std::vector<uint16_t> out;
  for (size_t i = 0; i + 1 < bytes.size(); i += 2) out.push_back(bytes[i] | bytes[i + 1] << 8);
  return out;
}

std::vector<float> as_f32(const Bytes& bytes) {
  std::vector<float> out;
  for (size_t i = 0; i + 3 < bytes.size(); i += 4) {
    out.push_back(float_from_bits(static_cast<uint32_t>(bytes[i]) | bytes[i + 1] << 8 |
                                  bytes[i + 2] << 16 | static_cast<uint32_t>(bytes[i + 3]) << 24));
  }
  return out;
}

// Builds a .npy file the way numpy does: dict header padded with spaces to a 64-byte boundary
// and ended by '\n'. dict is the literal text between the magic/length and the padding.
Bytes npy_file(const std::string& dict, const Bytes& data, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  append_le(out, header.size(), major == 1 ? 2 : 4);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string npy_dict(const std::string& descr, const std::string& shape,
                     const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

Bytes safetensors_file(const std::string& header_json, const Bytes& data) {
  Bytes out;
  append_le(out, header_json.size(), 8);
  out.insert(out.end(), header_json.begin(), header_json.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// The message of the TensorFileError that loading spec throws, or a marker that fails the
// Contains checks when something else (or nothing) happens.
std::string error_of(const std::string& spec, std::optional<DType> requested = std::nullopt) {
  try {
    load_tensors(spec, requested);
  } catch (const TensorFileError& e) {
    const std::string message = e.what();
    CHECK(message.find('\n') == std::string::npos);
    return message;
  } catch (const std::exception& e) {
    return std::string("<wrong exception type: ") + e.what() + ">";
  }
  return "<no exception>";
}

// Loading must either succeed or throw TensorFileError; returns whether it loaded.
bool loads_or_throws_cleanly(const std::string& spec, std::optional<DType> requested) {
  try {
    load_tensors(spec, requested);
    return true;
  } catch (const TensorFileError&) {
    return false;
  }
}

uint64_t fnv1a(const uint8_t* data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 0x100000001b3ull;
  return hash;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// float_convert.h

#ifdef COMPCOLL_FLOAT_CONVERT_CONSTEXPR
static_assert(float_to_bf16_rne(1.0f) == 0x3f80);
static_assert(float_to_fp16_rne(1.0f) == 0x3c00);
static_assert(fp16_to_float(0x0001) == 0x1p-24f);
static_assert(bf16_to_float(0xc000) == -2.0f);
#endif

TEST_CASE("float_to_bf16_rne matches hand-computed bit patterns", "[io][float_convert]") {
  auto bf16 = [](uint32_t bits) { return float_to_bf16_rne(float_from_bits(bits)); };
  CHECK(bf16(0x3f800000) == 0x3f80);  // 1.0
  CHECK(bf16(0x80000000) == 0x8000);  // -0.0 keeps its sign
  // Ties go to the even neighbour.
  CHECK(bf16(0x3f808000) == 0x3f80);
  CHECK(bf16(0x3f818000) == 0x3f82);
  CHECK(bf16(0xbf818000) == 0xbf82);
  // Just off the tie goes to the nearer neighbour.
  CHECK(bf16(0x3f808001) == 0x3f81);
  CHECK(bf16(0x3f807fff) == 0x3f80);
  // Rounding up carries into the exponent.
  CHECK(bf16(0x3fffffff) == 0x4000);
  // Infinities, overflow, max.
  CHECK(bf16(0x7f800000) == 0x7f80);
  CHECK(bf16(0xff800000) == 0xff80);
  CHECK(bf16(0x7f7f7fff) == 0x7f7f);  // rounds down to bf16 max
  CHECK(bf16(0x7f7f8000) == 0x7f80);  // tie above bf16 max (odd) → Inf
  CHECK(bf16(0x7f7fffff) == 0x7f80);  // FLT_MAX → Inf
  CHECK(bf16(0xff7fffff) == 0xff80);
  // NaN stays NaN, quiet, with sign — even when its payload sits only in the dropped bits.
  CHECK(bf16(0x7fc00000) == 0x7fc0);
  CHECK(bf16(0xffc00000) == 0xffc0);
  CHECK(bf16(0x7f800001) == 0x7fc0);
  CHECK(bf16(0x7fbf0000) == 0x7fff);
  // fp32 subnormals round like any other value.
  CHECK(bf16(0x00000001) == 0x0000);
  CHECK(bf16(0x00008000) == 0x0000);  // tie → even 0
  CHECK(bf16(0x00018000) == 0x0002);  // tie → even 2
  CHECK(bf16(0x00010000) == 0x0001);
  CHECK(bf16(0x807fffff) == 0x8080);  // largest subnormal rounds up to the smallest normal

  CHECK(float_bits(bf16_to_float(0x3f80)) == 0x3f800000);
  CHECK(float_bits(bf16_to_float(0xff80)) == 0xff800000);
}

TEST_CASE("float_to_fp16_rne matches hand-computed bit patterns", "[io][float_convert]") {
  auto fp16 = [](uint32_t bits) { return float_to_fp16_rne(float_from_bits(bits)); };
  CHECK(float_to_fp16_rne(1.0f) == 0x3c00);
  CHECK(float_to_fp16_rne(-2.0f) == 0xc000);
  CHECK(float_to_fp16_rne(-0.0f) == 0x8000);
  // Ties at 1 + 2^-11 (half an fp16 ulp) go to even; just above goes up.
  CHECK(fp16(0x3f801000) == 0x3c00);
  CHECK(fp16(0x3f803000) == 0x3c02);
  CHECK(fp16(0x3f801001) == 0x3c01);
  CHECK(fp16(0x3f800fff) == 0x3c00);
  // Max, overflow, Inf.
  CHECK(float_to_fp16_rne(65504.0f) == 0x7bff);
  CHECK(float_to_fp16_rne(65519.0f) == 0x7bff);
  CHECK(fp16(0x477fefff) == 0x7bff);             // just below the tie at 65520
  CHECK(float_to_fp16_rne(65520.0f) == 0x7c00);  // tie above max (odd) → Inf
  CHECK(float_to_fp16_rne(-65520.0f) == 0xfc00);
  CHECK(float_to_fp16_rne(1e10f) == 0x7c00);
  CHECK(fp16(0x7f7fffff) == 0x7c00);
  CHECK(fp16(0x7f800000) == 0x7c00);
  CHECK(fp16(0xff800000) == 0xfc00);
  // NaN: quiet, sign kept, top payload bits kept.
  CHECK(fp16(0x7fc00000) == 0x7e00);
  CHECK(fp16(0xffc00000) == 0xfe00);
  CHECK(fp16(0x7f800001) == 0x7e00);
  CHECK(fp16(0x7fffe000) == 0x7fff);
  // Normal/subnormal boundary.
  CHECK(float_to_fp16_rne(0x1p-14f) == 0x0400);
  CHECK(float_to_fp16_rne(std::ldexp(2047.0f, -25)) == 0x0400);  // tie between 0x3ff and 0x400
  CHECK(float_to_fp16_rne(std::ldexp(1023.0f, -24)) == 0x03ff);  // largest subnormal
  // Subnormals.
  CHECK(float_to_fp16_rne(0x1p-24f) == 0x0001);
  CHECK(float_to_fp16_rne(-0x1p-24f) == 0x8001);
  CHECK(float_to_fp16_rne(0x1p-25f) == 0x0000);               // tie → even 0
  CHECK(fp16(0x33000001) == 0x0001);                          // just above 2^-25
  CHECK(float_to_fp16_rne(0x1.8p-24f) == 0x0002);             // 1.5 ulp tie → even 2
  CHECK(float_to_fp16_rne(0x1.8p-23f) == 0x0003);             // exactly 3 ulp
  CHECK(float_to_fp16_rne(std::ldexp(5.0f, -25)) == 0x0002);  // 2.5 ulp tie → even 2
  CHECK(float_to_fp16_rne(std::ldexp(7.0f, -25)) == 0x0004);  // 3.5 ulp tie → even 4
  CHECK(float_to_fp16_rne(0x1p-26f) == 0x0000);
  CHECK(fp16(0x00000001) == 0x0000);  // fp32 subnormal
  CHECK(fp16(0x80000001) == 0x8000);

  CHECK(fp16_to_float(0x0001) == 0x1p-24f);
  CHECK(fp16_to_float(0x03ff) == std::ldexp(1023.0f, -24));
  CHECK(fp16_to_float(0x0400) == 0x1p-14f);
  CHECK(fp16_to_float(0x7bff) == 65504.0f);
  CHECK(fp16_to_float(0xfc00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(fp16_to_float(0x7e00)));
  CHECK(float_bits(fp16_to_float(0x8000)) == 0x80000000);
}

TEST_CASE("every non-NaN 16-bit pattern survives a round trip through fp32",
          "[io][float_convert]") {
  int fp16_mismatches = 0, bf16_mismatches = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    const bool fp16_nan = (half & 0x7c00) == 0x7c00 && (half & 0x03ff) != 0;
    const bool bf16_nan = (half & 0x7f80) == 0x7f80 && (half & 0x007f) != 0;
    if (!fp16_nan && float_to_fp16_rne(fp16_to_float(half)) != half) ++fp16_mismatches;
    if (!bf16_nan && float_to_bf16_rne(bf16_to_float(half)) != half) ++bf16_mismatches;
  }
  CHECK(fp16_mismatches == 0);
  CHECK(bf16_mismatches == 0);
}

// ---------------------------------------------------------------------------------------------
// .npy

TEST_CASE(".npy values round-trip for each dtype", "[io][npy]") {
  TempDir dir;

  SECTION("fp32, 2-D, flattened in C order") {
    const std::string path = dir.file("a.npy");
    const std::vector<float> values = {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e-40f};
    write_file(path, npy_file(npy_dict("<f4", "(2, 3)"), f32_bytes(values)));
    for (auto requested : {std::optional<DType>(), std::optional<DType>(DType::FP32)}) {
      const auto tensors = load_tensors(path, requested);
      REQUIRE(tensors.size() == 1);
      CHECK(tensors[0].source == path);
      CHECK(tensors[0].dtype == DType::FP32);
      CHECK(tensors[0].elements() == 6);
      CHECK(tensors[0].bytes == f32_bytes(values));
      CHECK(tensors[0].shape == std::vector<uint64_t>{2, 3});
    }
  }
  SECTION("fp16") {
    const std::string path = dir.file("h.npy");
    const std::vector<uint16_t> values = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x7e00};
    write_file(path, npy_file(npy_dict("<f2", "(5,)"), u16_bytes(values)));
    const auto tensors = load_tensors(path, DType::FP16);
    REQUIRE(tensors.size() == 1);
    CHECK(tensors[0].dtype == DType::FP16);
    CHECK(as_u16(tensors[0].bytes) == values);
    CHECK(load_tensors(path, std::nullopt)[0].bytes == u16_bytes(values));
  }
  SECTION("uint16 taken as bf16 bit patterns") {
    const std::string path = dir.file("b.npy");
    const std::vector<uint16_t> values = {0x3f80, 0xbf80, 0x7f80, 0x0001};
    write_file(path, npy_file(npy_dict("<u2", "(2, 2)"), u16_bytes(values)));
    const auto tensors = load_tensors(path, DType::BF16);
    REQUIRE(tensors.size() == 1);
    CHECK(tensors[0].dtype == DType::BF16);
    CHECK(as_u16(tensors[0].bytes) == values);
  }
  SECTION("format versions 2.0 and 3.0") {
    for (int major : {2, 3}) {
      const std::string path = dir.file("v" + std::to_string(major) + ".npy");
      write_file(path, npy_file(npy_dict("<f4", "(2,)"), f32_bytes({7.0f, 8.0f}), major));
      CHECK(as_f32(load_tensors(path, std::nullopt)[0].bytes) == std::vector<float>{7.0f, 8.0f});
    }
  }
  SECTION("unusual but valid shapes and headers") {
    const std::string scalar = dir.file("scalar.npy");
    write_file(scalar, npy_file(npy_dict("<f4", "()"), f32_bytes({4.0f})));
    CHECK(load_tensors(scalar, std::nullopt)[0].elements() == 1);

    const std::string empty = dir.file("empty.npy");
    write_file(empty, npy_file(npy_dict("<f4", "(0, 5)"), {}));
    CHECK(load_tensors(empty, std::nullopt)[0].elements() == 0);

    const std::string fortran_1d = dir.file("fortran1d.npy");
    write_file(fortran_1d, npy_file(npy_dict("<f4", "(2,)", "True"), f32_bytes({1.0f, 2.0f})));
    CHECK(load_tensors(fortran_1d, std::nullopt)[0].elements() == 2);

    const std::string py2 = dir.file("py2.npy");
    write_file(py2, npy_file("{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(1L,2L)}",
                             f32_bytes({1.0f, 2.0f})));
    CHECK(load_tensors(py2, std::nullopt)[0].elements() == 2);

    const std::string three_d = dir.file("3d.npy");
    write_file(three_d, npy_file(npy_dict("<f4", "(2, 3, 4)"), Bytes(96, 0)));
    CHECK(load_tensors(three_d, std::nullopt)[0].elements() == 24);
  }
}

TEST_CASE(".npy fp32 converts to bf16 and fp16 with round-to-nearest-even", "[io][npy]") {
  TempDir dir;
  const std::string path = dir.file("convert.npy");
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<uint32_t> input = {
      0x3f800000,  // 1.0
      0x3f808000,  // bf16 tie → even (down); exact in fp16
      0x3f818000,  // bf16 tie → even (up); exact in fp16
      0x3f801000,  // fp16 tie → even (down)
      0x3f803000,  // fp16 tie → even (up)
      0x7fc00000,  // NaN
      float_bits(-inf),
      0x7f7fffff,  // FLT_MAX
      0x33800000,  // 2^-24: smallest fp16 subnormal
      0x33000000,  // 2^-25: fp16 tie → 0
  };
  write_file(path, npy_file(npy_dict("<f4", "(10,)"), u32_bytes(input)));

  const auto bf16 = load_tensors(path, DType::BF16);
  REQUIRE(bf16.size() == 1);
  CHECK(bf16[0].dtype == DType::BF16);
  CHECK(as_u16(bf16[0].bytes) == std::vector<uint16_t>{0x3f80, 0x3f80, 0x3f82, 0x3f80, 0x3f80,
                                                       0x7fc0, 0xff80, 0x7f80, 0x3380, 0x3300});

  const auto fp16 = load_tensors(path, DType::FP16);
  REQUIRE(fp16.size() == 1);
  CHECK(fp16[0].dtype == DType::FP16);
  CHECK(as_u16(fp16[0].bytes) == std::vector<uint16_t>{0x3c00, 0x3c04, 0x3c0c, 0x3c00, 0x3c02,
                                                       0x7e00, 0xfc00, 0x7c00, 0x0001, 0x0000});
}

TEST_CASE(".npy errors name the file and the key or byte offset", "[io][npy][errors]") {
  TempDir dir;
  auto write_npy = [&](const std::string& name, const Bytes& bytes) {
    const std::string path = dir.file(name);
    write_file(path, bytes);
    return path;
  };

  SECTION("dtype mismatches") {
    const std::string f16 = write_npy("f16.npy", npy_file(npy_dict("<f2", "(1,)"), Bytes(2, 0)));
    CHECK_THAT(error_of(f16, DType::BF16), Contains(f16) && Contains("fp16") && Contains("bf16"));
    CHECK_THAT(error_of(f16, DType::FP32), Contains(f16) && Contains("fp16") && Contains("fp32"));

    const std::string u16 = write_npy("u16.npy", npy_file(npy_dict("<u2", "(1,)"), Bytes(2, 0)));
    for (auto requested : {std::optional<DType>(), std::optional<DType>(DType::FP16),
                           std::optional<DType>(DType::FP32)}) {
      CHECK_THAT(error_of(u16, requested),
                 Contains(u16) &&
                     Contains("uint16 .npy is read as bf16 bit patterns only with --dtype bf16"));
    }
  }
  SECTION("bytes of the header that would drive a terminal, or are not UTF-8, are escaped") {
    const std::string odd = write_npy(
        "odd.npy", npy_file("{'fortr\xe3n\x1b[31m\xc2\x9b': False, 'descr': '<f4', 'shape': (1,), }", Bytes(4)));
    const std::string m = error_of(odd);
    CHECK_THAT(m, Contains(odd) && Contains("unexpected key 'fortr\\xe3n [31m\\xc2\\x9b'"));
    CHECK(valid_utf8(m));
    CHECK(m.find('\x1b') == std::string::npos);
  }
  SECTION("unsupported descr") {
    const std::string be = write_npy("be.npy", npy_file(npy_dict(">f4", "(1,)"), Bytes(4, 0)));
    CHECK_THAT(error_of(be), Contains(be) && Contains("big-endian") && Contains("key 'descr'"));
    const std::string f8 = write_npy("f8.npy", npy_file(npy_dict("<f8", "(1,)"), Bytes(8, 0)));
    CHECK_THAT(error_of(f8), Contains(f8) && Contains("'<f8'") && Contains("key 'descr'"));
    const std::string structured = write_npy(
        "rec.npy",
        npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", Bytes(4)));
    CHECK_THAT(error_of(structured), Contains(structured) && Contains("byte offset 20"));
  }
  SECTION("data size disagrees with shape") {
    const Bytes full = npy_file(npy_dict("<f4", "(3,)"), f32_bytes({1, 2, 3}));
    const size_t data_start = full.size() - 12;

    const Bytes short_data(full.begin(), full.end() - 1);
    const std::string truncated = write_npy("trunc.npy", short_data);
    CHECK_THAT(error_of(truncated),
               Contains(truncated) && Contains("truncated") &&
                   Contains("byte offset " + std::to_string(short_data.size())));

    Bytes long_data = full;
    long_data.push_back(0xAB);
    const std::string trailing = write_npy("trail.npy", long_data);
    CHECK_THAT(error_of(trailing), Contains(trailing) && Contains("trailing garbage") &&
                                       Contains("byte offset " + std::to_string(data_start + 12)));
  }
  SECTION("bad magic and version") {
    Bytes bad = npy_file(npy_dict("<f4", "(1,)"), Bytes(4));
    bad[3] = 'X';
    const std::string magic = write_npy("magic.npy", bad);
    CHECK_THAT(error_of(magic), Contains(magic) && Contains("magic") && Contains("byte offset 3"));

    Bytes v4 = npy_file(npy_dict("<f4", "(1,)"), Bytes(4));
    v4[6] = 4;
    const std::string version = write_npy("v4.npy", v4);
    CHECK_THAT(error_of(version),
               Contains(version) && Contains("4.0") && Contains("byte offset 6"));

    Bytes long_header = npy_file(npy_dict("<f4", "(1,)"), Bytes(4));
    long_header[8] = 0xff;
    long_header[9] = 0xff;
    const std::string header_len = write_npy("hlen.npy", long_header);
    CHECK_THAT(error_of(header_len), Contains(header_len) && Contains("byte offset 8"));
  }
  SECTION("unparseable or incomplete header") {
    const std::string dict = "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }";
    const std::string maybe = write_npy("maybe.npy", npy_file(dict, Bytes(4)));
    const size_t maybe_offset = 10 + dict.find("Maybe");
    CHECK_THAT(error_of(maybe),
               Contains(maybe) && Contains("byte offset " + std::to_string(maybe_offset)));

    const std::string no_shape =
        write_npy("noshape.npy", npy_file("{'descr': '<f4', 'fortran_order': False}", Bytes(4)));
    CHECK_THAT(error_of(no_shape), Contains(no_shape) && Contains("key 'shape'"));

    const std::string extra_dict =
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}";
    const std::string extra = write_npy("extra2.npy", npy_file(extra_dict, Bytes(4)));
    CHECK_THAT(error_of(extra),
               Contains(extra) && Contains("'x'") &&
                   Contains("byte offset " + std::to_string(10 + extra_dict.find("'x'"))));

    const std::string negative = write_npy("neg.npy", npy_file(npy_dict("<f4", "(-1,)"), Bytes(4)));
    CHECK_THAT(error_of(negative), Contains(negative) && Contains("byte offset"));

    const std::string huge =
        write_npy("huge.npy", npy_file(npy_dict("<f4", "(4294967296, 4294967296)"), Bytes(4)));
    CHECK_THAT(error_of(huge), Contains(huge) && Contains("key 'shape'"));
  }
  SECTION("Fortran order with more than one dimension") {
    const std::string path =
        write_npy("fortran.npy", npy_file(npy_dict("<f4", "(2, 2)", "True"), Bytes(16)));
    CHECK_THAT(error_of(path), Contains(path) && Contains("key 'fortran_order'"));
  }
}

// ---------------------------------------------------------------------------------------------
// .safetensors

TEST_CASE(".safetensors loads every float tensor in data order", "[io][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  // JSON key order deliberately differs from data order; the I64 tensor is skipped.
  const std::string header = R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                             R"("__metadata__":{"format":"pt"},)"
                             R"("ids":{"dtype":"I64","shape":[1],"data_offsets":[18,26]},)"
                             R"("a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},)"
                             R"("c":{"dtype":"F16","shape":[1],"data_offsets":[16,18]}}    )";
  Bytes data = u16_bytes({0x3f80, 0x4000, 0x4040, 0x4080});
  const Bytes b = f32_bytes({1.5f, -3.0f});
  data.insert(data.end(), b.begin(), b.end());
  append_le(data, 0x3c00, 2);
  append_le(data, 42, 8);
  write_file(path, safetensors_file(header, data));

  const auto tensors = load_tensors(path, std::nullopt);
  REQUIRE(tensors.size() == 3);
  CHECK(tensors[0].source == path + ":a");
  CHECK(tensors[0].dtype == DType::BF16);
  CHECK(as_u16(tensors[0].bytes) == std::vector<uint16_t>{0x3f80, 0x4000, 0x4040, 0x4080});
  CHECK(tensors[1].source == path + ":b");
  CHECK(tensors[1].dtype == DType::FP32);
  CHECK(as_f32(tensors[1].bytes) == std::vector<float>{1.5f, -3.0f});
  CHECK(tensors[2].source == path + ":c");
  CHECK(tensors[2].dtype == DType::FP16);
  CHECK(as_u16(tensors[2].bytes) == std::vector<uint16_t>{0x3c00});

  // Requesting one dtype for all: the bf16 tensor cannot become fp16.
  CHECK_THAT(error_of(path, DType::FP16),
             Contains(path) && Contains("bf16") && Contains("fp16") && Contains("key 'a'"));
}

TEST_CASE(".safetensors fp32 converts by round-to-nearest-even", "[io][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("f32.safetensors");
  const std::string header = R"({"w":{"dtype":"F32","shape":[1,3],"data_offsets":[0,12]},)"
                             R"("v":{"dtype":"F32","shape":[],"data_offsets":[12,16]}})";
  write_file(path,
             safetensors_file(header, u32_bytes({0x3f818000, 0x3f803000, 0x7f800001, 0x477ff000})));
  const auto bf16 = load_tensors(path, DType::BF16);
  REQUIRE(bf16.size() == 2);
  CHECK(bf16[0].source == path + ":w");
  CHECK(as_u16(bf16[0].bytes) == std::vector<uint16_t>{0x3f82, 0x3f80, 0x7fc0});
  CHECK(as_u16(bf16[1].bytes) == std::vector<uint16_t>{0x4780});
  const auto fp16 = load_tensors(path, DType::FP16);
  REQUIRE(fp16.size() == 2);
  CHECK(as_u16(fp16[0].bytes) == std::vector<uint16_t>{0x3c0c, 0x3c02, 0x7e00});
  CHECK(as_u16(fp16[1].bytes) == std::vector<uint16_t>{0x7c00});
}

TEST_CASE(".safetensors errors name the file and the key or byte offset",
          "[io][safetensors][errors]") {
  TempDir dir;
  int counter = 0;
  auto write_st = [&](const std::string& header, const Bytes& data) {
    const std::string path = dir.file("t" + std::to_string(counter++) + ".safetensors");
    write_file(path, safetensors_file(header, data));
    return path;
  };

  SECTION("header framing") {
    const std::string tiny = dir.file("tiny.safetensors");
    write_file(tiny, Bytes{1, 2, 3});
    CHECK_THAT(error_of(tiny), Contains(tiny) && Contains("byte offset 3"));

    const std::string too_long = dir.file("long.safetensors");
    Bytes bytes;
    append_le(bytes, 1000, 8);
    bytes.push_back('{');
    write_file(too_long, bytes);
    CHECK_THAT(error_of(too_long),
               Contains(too_long) && Contains("1000") && Contains("byte offset 0"));

    const std::string huge = dir.file("huge.safetensors");
    Bytes huge_bytes;
    append_le(huge_bytes, ~0ull, 8);
    write_file(huge, huge_bytes);
    CHECK_THAT(error_of(huge), Contains(huge) && Contains("byte offset 0"));

    const std::string bad_json = write_st(R"({"w": {"dtype": )", {});
    CHECK_THAT(error_of(bad_json),
               Contains(bad_json) && Contains("header is not valid JSON: syntax error") && Contains("byte offset") &&
                   !Contains("json.exception") && !Contains("line 1, column"));

    const std::string array = write_st("[1, 2]", {});
    CHECK_THAT(error_of(array), Contains(array) && Contains("not a JSON object"));

    const std::string empty = write_st("{}", {});
    CHECK_THAT(error_of(empty), Contains(empty) && Contains("no tensor"));
  }
  SECTION("malformed tensor entries") {
    const std::string past_end =
        write_st(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", Bytes(4));
    CHECK_THAT(error_of(past_end), Contains(past_end) && Contains("key 'w'") && Contains("[0, 8]"));

    const std::string reversed =
        write_st(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", Bytes(4));
    CHECK_THAT(error_of(reversed), Contains(reversed) && Contains("key 'w'"));

    const std::string wrong_size =
        write_st(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", Bytes(8));
    CHECK_THAT(error_of(wrong_size), Contains(wrong_size) && Contains("key 'w'") && Contains("12"));

    const std::string overflow = write_st(
        R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", Bytes(8));
    CHECK_THAT(error_of(overflow), Contains(overflow) && Contains("key 'w'"));

    const std::string negative =
        write_st(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", Bytes(4));
    CHECK_THAT(error_of(negative), Contains(negative) && Contains("key 'w'") && Contains("shape"));

    const std::string no_dtype = write_st(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", Bytes(4));
    CHECK_THAT(error_of(no_dtype), Contains(no_dtype) && Contains("key 'w'") && Contains("dtype"));

    const std::string bad_offsets =
        write_st(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", Bytes(4));
    CHECK_THAT(error_of(bad_offsets), Contains(bad_offsets) && Contains("key 'w'"));

    const std::string not_object = write_st(R"({"w":[1,2,3]})", Bytes(4));
    CHECK_THAT(error_of(not_object), Contains(not_object) && Contains("key 'w'"));

    // A hostile name must not break the one-line message.
    const std::string newline_name =
        write_st(R"({"a\nb":{"dtype":"F32","shape":[9],"data_offsets":[0,4]}})", Bytes(4));
    CHECK_THAT(error_of(newline_name), Contains(newline_name) && Contains("key 'a b'"));
  }
  SECTION("only unusable dtypes") {
    const std::string ints =
        write_st(R"({"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", Bytes(8));
    CHECK_THAT(error_of(ints), Contains(ints) && Contains("no tensor of dtype") && Contains("I64"));
  }
  SECTION("dtype mismatch") {
    const std::string bf16 =
        write_st(R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", Bytes(4));
    CHECK_THAT(error_of(bf16, DType::FP32),
               Contains(bf16) && Contains("bf16") && Contains("fp32") && Contains("key 'w'"));
    CHECK(load_tensors(bf16, DType::BF16).size() == 1);
  }
  SECTION("deeply nested JSON does not overflow the stack") {
    const std::string deep = write_st(std::string(100000, '[') + std::string(100000, ']'), {});
    CHECK_THAT(error_of(deep), Contains(deep) && Contains("not a JSON object"));
  }
}

// ---------------------------------------------------------------------------------------------
// Hostile input: every prefix and many single-byte corruptions of valid files

TEST_CASE("truncated or corrupted files never crash", "[io][errors][fuzz]") {
  TempDir dir;
  const Bytes npy = npy_file(npy_dict("<f4", "(2, 2)"), f32_bytes({1, 2, 3, 4}));
  const Bytes st = safetensors_file(
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]}})",
      Bytes(12, 0x3f));

  for (const auto& [name, valid] : {std::pair<std::string, Bytes>{"p.npy", npy},
                                    std::pair<std::string, Bytes>{"p.safetensors", st}}) {
    const std::string path = dir.file(name);
    int prefixes_loaded = 0;
    for (size_t length = 0; length <= valid.size(); ++length) {
      write_file(path, Bytes(valid.begin(), valid.begin() + static_cast<ptrdiff_t>(length)));
      if (loads_or_throws_cleanly(path, std::nullopt)) ++prefixes_loaded;
    }
    CHECK(prefixes_loaded == 1);  // only the complete file

    int corruptions_loaded = 0;
    for (size_t at = 0; at < valid.size(); ++at) {
      for (uint8_t value : std::initializer_list<uint8_t>{0x00, 0xff, 0x7f, '0', '9', '"', '\'',
                                                          '(', '[', '{', '-', 'L'}) {
        Bytes corrupt = valid;
        corrupt[at] = value;
        write_file(path, corrupt);
        if (loads_or_throws_cleanly(path, DType::BF16)) ++corruptions_loaded;
      }
    }
    CHECK(corruptions_loaded > 0);  // corruptions inside the data still load
  }
}

TEST_CASE("missing, unreadable and unknown files", "[io][errors]") {
  TempDir dir;
  const std::string missing = dir.file("missing.npy");
  CHECK(error_of(missing) == missing + ": cannot open: No such file or directory");
  const std::string missing_st = dir.file("missing.safetensors");
  CHECK(error_of(missing_st) == missing_st + ": cannot open: No such file or directory");

  const std::string unknown = dir.file("weights.bin");
  write_file(unknown, Bytes(16));
  CHECK(error_of(unknown) ==
        unknown + ": unknown tensor file type (expected .npy or .safetensors)");

  const std::string directory = dir.file("folder.npy");
  fs::create_directory(directory);
  CHECK_THAT(error_of(directory), Contains(directory) && Contains("cannot open"));
}

// ---------------------------------------------------------------------------------------------
// Synthetic tensors

TEST_CASE("synthetic tensors are deterministic and pinned", "[io][synthetic]") {
  const auto first = load_tensors("synthetic:gaussian:4k", std::nullopt);
  const auto second = load_tensors("synthetic:gaussian:4k", std::nullopt);
  REQUIRE(first.size() == 1);
  CHECK(first[0].source == "synthetic:gaussian:4k");
  CHECK(first[0].dtype == DType::BF16);
  CHECK(first[0].elements() == 4096);
  CHECK(first[0].bytes == second[0].bytes);

  // Pinned so a change of generator, seed or rounding is noticed: the benchmark results in the
  // docs are measured on these bytes.
  CHECK(fnv1a(first[0].bytes.data(), 2048) == 0x3c8eb6c230423b9eull);
  const auto fp32 = load_tensors("synthetic:gaussian:1k", DType::FP32);
  CHECK(fnv1a(fp32[0].bytes.data(), 4096) == 0x45a173d79d40f563ull);
  const auto bits = load_tensors("synthetic:uniform-bits:1k", DType::BF16);
  CHECK(fnv1a(bits[0].bytes.data(), 2048) == 0x96bd884394f81576ull);
}

TEST_CASE("synthetic gaussian matches Box-Muller over splitmix64", "[io][synthetic]") {
  const auto fp32 = load_tensors("synthetic:gaussian:64", DType::FP32);
  const std::vector<float> samples = as_f32(fp32[0].bytes);
  REQUIRE(samples.size() == 64);
  test::SplitMix64 rng{42};  // the same splitmix64 stream, with libm Box–Muller below
  for (size_t i = 0; i < samples.size(); i += 2) {
    const double u1 = static_cast<double>((rng.next() >> 11) + 1) * 0x1p-53;
    const double u2 = static_cast<double>(rng.next() >> 11) * 0x1p-53;
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * 3.14159265358979323846 * u2;
    CHECK(samples[i] == Approx(radius * std::cos(angle)).margin(1e-6));
    CHECK(samples[i + 1] == Approx(radius * std::sin(angle)).margin(1e-6));
  }

  // bf16/fp16 output is exactly the RNE of the fp32 samples.
  const auto bf16 = as_u16(load_tensors("synthetic:gaussian:64", DType::BF16)[0].bytes);
  const auto fp16 = as_u16(load_tensors("synthetic:gaussian:64", DType::FP16)[0].bytes);
  for (size_t i = 0; i < samples.size(); ++i) {
    CHECK(bf16[i] == float_to_bf16_rne(samples[i]));
    CHECK(fp16[i] == float_to_fp16_rne(samples[i]));
  }

  // An odd count is a prefix of the next even one; SCALE multiplies before rounding.
  const auto odd = as_f32(load_tensors("synthetic:gaussian:5", DType::FP32)[0].bytes);
  CHECK(odd == std::vector<float>(samples.begin(), samples.begin() + 5));
  const auto scaled = as_f32(load_tensors("synthetic:gaussian:64:0.5", DType::FP32)[0].bytes);
  for (size_t i = 0; i < samples.size(); ++i) CHECK(scaled[i] == Approx(samples[i] * 0.5));
}

TEST_CASE("synthetic gaussian has N(0, scale^2) statistics", "[io][synthetic]") {
  for (double scale : {1.0, 3.0}) {
    const std::string spec = "synthetic:gaussian:1M" + (scale == 1.0 ? std::string() : ":3");
    const auto samples = as_f32(load_tensors(spec, DType::FP32)[0].bytes);
    REQUIRE(samples.size() == (1u << 20));
    double sum = 0, sum_sq = 0;
    size_t within_one_sigma = 0;
    for (float x : samples) {
      sum += x;
      sum_sq += static_cast<double>(x) * x;
      if (std::fabs(x) < scale) ++within_one_sigma;
    }
    const double mean = sum / samples.size();
    const double stddev = std::sqrt(sum_sq / samples.size() - mean * mean);
    CHECK(mean == Approx(0.0).margin(0.01 * scale));
    CHECK(stddev == Approx(scale).epsilon(0.01));
    CHECK(static_cast<double>(within_one_sigma) / samples.size() == Approx(0.6827).margin(0.005));
  }
}

TEST_CASE("synthetic uniform-bits is incompressible", "[io][synthetic]") {
  const auto tensors = load_tensors("synthetic:uniform-bits:1M", std::nullopt);
  REQUIRE(tensors.size() == 1);
  CHECK(tensors[0].dtype == DType::BF16);
  const Bytes& bytes = tensors[0].bytes;
  REQUIRE(bytes.size() == 2u << 20);
  std::vector<size_t> histogram(256, 0);
  for (uint8_t b : bytes) ++histogram[b];
  double entropy = 0;
  for (size_t count : histogram) {
    if (count == 0) continue;
    const double p = static_cast<double>(count) / bytes.size();
    entropy -= p * std::log2(p);
  }
  CHECK(entropy > 7.999);

  // The byte stream does not depend on the element width.
  const auto fp32 = load_tensors("synthetic:uniform-bits:3", DType::FP32)[0].bytes;
  const auto bf16 = load_tensors("synthetic:uniform-bits:6", DType::BF16)[0].bytes;
  CHECK(fp32 == bf16);
  CHECK(load_tensors("synthetic:uniform-bits:3", DType::FP16)[0].bytes.size() == 6);
}

TEST_CASE("synthetic element counts take k/M/G suffixes", "[io][synthetic]") {
  CHECK(load_tensors("synthetic:uniform-bits:7", std::nullopt)[0].elements() == 7);
  CHECK(load_tensors("synthetic:uniform-bits:3k", std::nullopt)[0].elements() == 3 * 1024);
  CHECK(load_tensors("synthetic:gaussian:2M", DType::FP16)[0].elements() == 2u << 20);
  CHECK(load_tensors("synthetic:gaussian:1k:2.5", DType::FP32)[0].elements() == 1024);
  // G is 2^30: 2^33 G elements fit in 64 bits but their bytes do not; 2^34 G overflows the count.
  CHECK_THAT(error_of("synthetic:uniform-bits:8589934592G"), Contains("too large"));
  CHECK_THAT(error_of("synthetic:uniform-bits:17179869184G"), Contains("bad element count"));
}

TEST_CASE("bad synthetic specs name the spec", "[io][synthetic][errors]") {
  for (const std::string spec :
       {"synthetic:", "synthetic:gaussian", "synthetic:gaussian:", "synthetic:gaussian:0",
        "synthetic:gaussian:12x", "synthetic:gaussian:-5", "synthetic:gaussian:1m",
        "synthetic:gaussian:k", "synthetic:gaussian:4K", "synthetic:gaussian: 5",
        "synthetic:laplace:10", "synthetic:uniform-bits:10:2.0", "synthetic:gaussian:10:abc",
        "synthetic:gaussian:10:-1", "synthetic:gaussian:10:inf", "synthetic:gaussian:10:0",
        "synthetic:gaussian:10:1:2",
        "synthetic:gaussian:10:", "synthetic:gaussian:99999999999999999999"}) {
    INFO(spec);
    CHECK_THAT(error_of(spec), StartsWith(spec + ": "));
  }
}
