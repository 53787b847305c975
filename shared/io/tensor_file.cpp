// shared/io/tensor_file.cpp — .npy / .safetensors readers and the synthetic tensor generators.
// Every length or offset a file declares is checked against the bytes actually read before it is
// used; this code must never index past the buffer, trust a declared size, or let a non-
// TensorFileError escape for bad input (allocation failure included).
#include "io/tensor_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <string_view>
#include <system_error>
#include <utility>

#include "io/float_convert.h"
#include "util/splitmix64.h"
#include "util/text.h"

// The synthetic Gaussian must be bit-identical everywhere, which a fused multiply-add would
// break; GCC in ISO mode (-std=c++20, as the build uses) already never contracts.
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace compcoll {
namespace {

// ---------------------------------------------------------------------------------------------
// Errors

// Names and keys come from the file, so they may hold newlines, terminal escapes or bytes that
// are not UTF-8: the message stays one printable line (util/text.h).
[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw TensorFileError(printable(where + ": " + what));
}

// nlohmann's message without its "[json.exception.parse_error.101] parse error at line 1,
// column 13: " lead: the reason alone (the caller gives the byte offset).
std::string json_reason(const std::string& what) {
  std::string s = what;
  if (s.rfind("[json.exception.", 0) == 0) {
    if (const size_t p = s.find("] "); p != std::string::npos) s.erase(0, p + 2);
  }
  if (s.rfind("parse error at ", 0) == 0) {
    if (const size_t p = s.find(": "); p != std::string::npos) s.erase(0, p + 2);
  }
  return s;
}

std::string at_offset(uint64_t offset) {
  return " (at byte offset " + std::to_string(offset) + ")";
}
std::string at_key(const std::string& key) { return " (key '" + key + "')"; }

std::string name_of(DType t) { return std::string(dtype_name(t)); }

// ---------------------------------------------------------------------------------------------
// Byte helpers

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         std::string_view(text).substr(text.size() - suffix.size()) == suffix;
}

uint64_t read_le(const uint8_t* bytes, size_t count) {
  uint64_t value = 0;
  for (size_t i = 0; i < count; ++i) value |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  return value;
}

void write_le(uint8_t* bytes, uint64_t value, size_t count) {
  for (size_t i = 0; i < count; ++i) bytes[i] = static_cast<uint8_t>(value >> (8 * i));
}

// Product of dims times element size, or nullopt on uint64 overflow (a hostile shape).
std::optional<uint64_t> checked_byte_count(const std::vector<uint64_t>& shape, uint64_t elem_size) {
  uint64_t total = elem_size;
  for (uint64_t dim : shape) {
    if (__builtin_mul_overflow(total, dim, &total)) return std::nullopt;
  }
  return total;
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::vector<uint8_t> read_whole_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open: " + std::generic_category().message(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  struct stat info {};
  if (::fstat(fd, &info) != 0) fail(path, "cannot stat: " + std::generic_category().message(errno));
  if (!S_ISREG(info.st_mode)) fail(path, "cannot open: not a regular file");

  std::vector<uint8_t> bytes;
  try {
    bytes.resize(static_cast<size_t>(info.st_size));
  } catch (const std::bad_alloc&) {
    fail(path, "cannot allocate " + std::to_string(info.st_size) + " bytes to read the file");
  }
  size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = ::read(fd, bytes.data() + filled, bytes.size() - filled);
    if (got < 0) {
      if (errno == EINTR) continue;
      fail(path, "cannot read: " + std::generic_category().message(errno));
    }
    if (got == 0) break;  // shrank since fstat: use what is there, the parsers check lengths
    filled += static_cast<size_t>(got);
  }
  bytes.resize(filled);
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// dtype conversion shared by both file formats

// Copies or converts one tensor's data. stored: the dtype of the bytes in the file;
// data/size: those bytes (size is a multiple of dtype_size(stored), already bounds-checked);
// where/location: the file and the " (key ...)" suffix for error messages.
TensorData make_tensor(std::string source, DType stored, const uint8_t* data, size_t size,
                       std::optional<DType> requested, const std::string& where,
                       const std::string& location) {
  const DType target = requested.value_or(stored);
  TensorData tensor;
  tensor.source = std::move(source);
  tensor.dtype = target;

  if (target != stored && stored != DType::FP32) {
    fail(where, "tensor holds " + name_of(stored) + " but " + name_of(target) +
                    " was requested (only fp32 data is converted)" + location);
  }
  const size_t elements = size / dtype_size(stored);
  try {
    tensor.bytes.resize(elements * dtype_size(target));
  } catch (const std::bad_alloc&) {
    fail(where, "cannot allocate " + std::to_string(elements * dtype_size(target)) +
                    " bytes for the tensor" + location);
  }
  if (target == stored) {
    if (size != 0) std::copy(data, data + size, tensor.bytes.begin());
    return tensor;
  }
  for (size_t i = 0; i < elements; ++i) {
    const float value = float_from_bits(static_cast<uint32_t>(read_le(data + 4 * i, 4)));
    const uint16_t half =
        target == DType::BF16 ? float_to_bf16_rne(value) : float_to_fp16_rne(value);
    write_le(tensor.bytes.data() + 2 * i, half, 2);
  }
  return tensor;
}

// ---------------------------------------------------------------------------------------------
// .npy

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<uint64_t> shape;
};

// Parses the Python dict literal numpy writes, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// Only that subset of Python syntax is accepted; anything else is reported with its offset.
class NpyHeaderParser {
 public:
  // text/size: the header bytes; base: their offset in the file, so errors point into the file.
  NpyHeaderParser(const std::string& path, const uint8_t* text, size_t size, size_t base)
      : path_(path), text_(text), size_(size), base_(base) {}

  NpyHeader parse() {
    NpyHeader header;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    skip_space();
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const size_t key_pos = pos_;
      const std::string key = parse_string();
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (seen_descr) error("duplicate key 'descr'", key_pos);
        seen_descr = true;
        if (peek() != '\'' && peek() != '"') error("expected a dtype string for key 'descr'");
        header.descr = parse_string();
      } else if (key == "fortran_order") {
        if (seen_fortran) error("duplicate key 'fortran_order'", key_pos);
        seen_fortran = true;
        header.fortran_order = parse_bool();
      } else if (key == "shape") {
        if (seen_shape) error("duplicate key 'shape'", key_pos);
        seen_shape = true;
        header.shape = parse_shape();
      } else {
        error("unexpected key '" + key + "' in header", key_pos);
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') break;
      error("expected ',' or '}' in header");
    }
    expect('}');
    skip_space();
    if (pos_ != size_) error("unexpected characters after the header dict");
    if (!seen_descr) fail(path_, "header has no dtype" + at_key("descr"));
    if (!seen_fortran) fail(path_, "header has no memory order" + at_key("fortran_order"));
    if (!seen_shape) fail(path_, "header has no shape" + at_key("shape"));
    return header;
  }

 private:
  [[noreturn]] void error(const std::string& what, size_t pos) {
    fail(path_, "cannot parse header: " + what + at_offset(base_ + pos));
  }
  [[noreturn]] void error(const std::string& what) { error(what, pos_); }

  int peek() const { return pos_ < size_ ? text_[pos_] : -1; }

  void skip_space() {
    // NUL is accepted as padding because some non-numpy writers pad with it.
    while (pos_ < size_ && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                            text_[pos_] == '\r' || text_[pos_] == '\0')) {
      ++pos_;
    }
  }

  void expect(char wanted) {
    if (peek() != static_cast<unsigned char>(wanted)) {
      error(std::string("expected '") + wanted + "'");
    }
    ++pos_;
  }

  std::string parse_string() {
    const int quote = peek();
    if (quote != '\'' && quote != '"') error("expected a quoted string");
    const size_t start = ++pos_;
    while (pos_ < size_ && text_[pos_] != quote) {
      if (text_[pos_] == '\\') error("escape sequences are not supported in header strings");
      ++pos_;
    }
    if (pos_ >= size_) error("unterminated string", start - 1);
    std::string value(reinterpret_cast<const char*>(text_ + start), pos_ - start);
    ++pos_;
    return value;
  }

  bool parse_bool() {
    if (match_word("True")) return true;
    if (match_word("False")) return false;
    error("expected True or False for key 'fortran_order'");
  }

  bool match_word(std::string_view word) {
    if (size_ - pos_ < word.size()) return false;
    if (std::string_view(reinterpret_cast<const char*>(text_ + pos_), word.size()) != word) {
      return false;
    }
    pos_ += word.size();
    return true;
  }

  std::vector<uint64_t> parse_shape() {
    std::vector<uint64_t> shape;
    if (peek() != '(') error("expected a tuple for key 'shape'");
    ++pos_;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      shape.push_back(parse_dim());
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ')') break;
      error("expected ',' or ')' in shape");
    }
    ++pos_;
    return shape;
  }

  uint64_t parse_dim() {
    const size_t start = pos_;
    uint64_t value = 0;
    while (pos_ < size_ && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (__builtin_mul_overflow(value, 10u, &value) ||
          __builtin_add_overflow(value, static_cast<uint64_t>(text_[pos_] - '0'), &value)) {
        error("shape dimension does not fit in 64 bits", start);
      }
      ++pos_;
    }
    if (pos_ == start) error("expected a non-negative integer in shape");
    if (peek() == 'L') ++pos_;  // numpy under Python 2 wrote longs as "3L"
    return value;
  }

  const std::string& path_;
  const uint8_t* text_;
  size_t size_;
  size_t base_;
  size_t pos_ = 0;
};

std::vector<TensorData> load_npy(const std::string& path, std::optional<DType> requested) {
  const std::vector<uint8_t> file = read_whole_file(path);
  static constexpr uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

  for (size_t i = 0; i < sizeof kMagic; ++i) {
    if (i >= file.size()) fail(path, "file ends inside the .npy magic" + at_offset(file.size()));
    if (file[i] != kMagic[i]) fail(path, "not a .npy file: bad magic" + at_offset(i));
  }
  if (file.size() < 8) fail(path, "file ends inside the .npy version" + at_offset(file.size()));
  const unsigned major = file[6], minor = file[7];
  if (major < 1 || major > 3 || minor != 0) {
    fail(path, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                   at_offset(6));
  }
  const size_t length_size = major == 1 ? 2 : 4;
  const size_t header_start = 8 + length_size;
  if (file.size() < header_start) {
    fail(path, "file ends inside the header length" + at_offset(file.size()));
  }
  const uint64_t header_length = read_le(file.data() + 8, length_size);
  if (header_length > file.size() - header_start) {
    fail(path, "header length " + std::to_string(header_length) + " runs past the end of the " +
                   std::to_string(file.size()) + "-byte file" + at_offset(8));
  }
  const size_t data_start = header_start + static_cast<size_t>(header_length);

  const NpyHeader header =
      NpyHeaderParser(path, file.data() + header_start, header_length, header_start).parse();

  DType stored;
  if (header.descr == "<f4") {
    stored = DType::FP32;
  } else if (header.descr == "<f2") {
    stored = DType::FP16;
  } else if (header.descr == "<u2") {
    if (requested != DType::BF16) {
      fail(path,
           "uint16 .npy is read as bf16 bit patterns only with --dtype bf16" + at_key("descr"));
    }
    stored = DType::BF16;
  } else if (!header.descr.empty() && header.descr[0] == '>') {
    fail(path, "big-endian dtype '" + header.descr + "' is not supported" + at_key("descr"));
  } else {
    fail(path,
         "unsupported dtype '" + header.descr + "' (expected <f4, <f2 or <u2)" + at_key("descr"));
  }
  if (header.fortran_order && header.shape.size() > 1) {
    fail(path, "Fortran-order arrays with more than one dimension are not supported" +
                   at_key("fortran_order"));
  }

  const std::optional<uint64_t> data_size = checked_byte_count(header.shape, dtype_size(stored));
  if (!data_size) {
    fail(path,
         "shape " + shape_text(header.shape) + " overflows 64-bit byte count" + at_key("shape"));
  }
  const size_t available = file.size() - data_start;
  if (*data_size > available) {
    fail(path, "truncated data: shape " + shape_text(header.shape) + " needs " +
                   std::to_string(*data_size) + " bytes, file has " + std::to_string(available) +
                   at_offset(file.size()));
  }
  if (*data_size < available) {
    fail(path, "trailing garbage: " + std::to_string(available - *data_size) +
                   " bytes after the data" + at_offset(data_start + *data_size));
  }

  std::vector<TensorData> tensors;
  tensors.push_back(make_tensor(path, stored, file.data() + data_start,
                                static_cast<size_t>(*data_size), requested, path, ""));
  tensors.back().shape = header.shape;
  return tensors;
}

// ---------------------------------------------------------------------------------------------
// .safetensors

std::optional<DType> safetensors_dtype(const std::string& name) {
  if (name == "BF16") return DType::BF16;
  if (name == "F16") return DType::FP16;
  if (name == "F32") return DType::FP32;
  return std::nullopt;
}

// Reads a JSON array of non-negative integers; nullopt when it is anything else.
std::optional<std::vector<uint64_t>> unsigned_array(const nlohmann::json& value) {
  if (!value.is_array()) return std::nullopt;
  std::vector<uint64_t> numbers;
  for (const auto& item : value) {
    if (!item.is_number_unsigned()) return std::nullopt;
    numbers.push_back(item.get<uint64_t>());
  }
  return numbers;
}

struct SafetensorsEntry {
  std::string name;
  DType stored;
  uint64_t begin;
  uint64_t end;
};

std::vector<TensorData> load_safetensors(const std::string& path, std::optional<DType> requested) {
  const std::vector<uint8_t> file = read_whole_file(path);
  if (file.size() < 8) {
    fail(path, "file too short for the 8-byte header length" + at_offset(file.size()));
  }
  const uint64_t header_length = read_le(file.data(), 8);
  if (header_length > file.size() - 8) {
    fail(path, "header length " + std::to_string(header_length) + " runs past the end of the " +
                   std::to_string(file.size()) + "-byte file" + at_offset(0));
  }
  const uint8_t* header_begin = file.data() + 8;
  const uint8_t* header_end = header_begin + header_length;
  const uint64_t data_start = 8 + header_length;
  const uint64_t data_size = file.size() - data_start;

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_begin, header_end);
  } catch (const nlohmann::json::parse_error& e) {
    fail(path, "header is not valid JSON: " + json_reason(e.what()) + at_offset(8 + e.byte));
  } catch (const nlohmann::json::exception& e) {
    fail(path, "header is not valid JSON: " + json_reason(e.what()) + at_offset(8));
  } catch (const std::bad_alloc&) {
    fail(path, "cannot allocate memory to parse the " + std::to_string(header_length) +
                   "-byte header" + at_offset(8));
  }
  if (!header.is_object()) fail(path, "header is not a JSON object" + at_offset(8));

  std::vector<SafetensorsEntry> usable;
  std::vector<std::string> skipped;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string key = at_key(name);
    if (!info.is_object()) fail(path, "tensor entry is not an object" + key);

    const auto dtype_it = info.find("dtype");
    if (dtype_it == info.end() || !dtype_it->is_string()) {
      fail(path, "tensor entry has no 'dtype' string" + key);
    }
    const auto shape_it = info.find("shape");
    const auto shape = shape_it == info.end() ? std::nullopt : unsigned_array(*shape_it);
    if (!shape) fail(path, "tensor 'shape' is not an array of non-negative integers" + key);
    const auto offsets_it = info.find("data_offsets");
    const auto offsets = offsets_it == info.end() ? std::nullopt : unsigned_array(*offsets_it);
    if (!offsets || offsets->size() != 2) {
      fail(path, "tensor 'data_offsets' is not a pair of non-negative integers" + key);
    }
    const uint64_t begin = (*offsets)[0], end = (*offsets)[1];
    if (begin > end || end > data_size) {
      fail(path, "tensor 'data_offsets' [" + std::to_string(begin) + ", " + std::to_string(end) +
                     "] lie outside the " + std::to_string(data_size) + "-byte data section" + key);
    }

    const std::string dtype_text = dtype_it->get<std::string>();
    const std::optional<DType> stored = safetensors_dtype(dtype_text);
    if (!stored) {
      skipped.push_back(name + " (" + dtype_text + ")");
      continue;
    }
    const std::optional<uint64_t> expected = checked_byte_count(*shape, dtype_size(*stored));
    if (!expected || *expected != end - begin) {
      fail(path, "tensor 'data_offsets' span " + std::to_string(end - begin) + " bytes but shape " +
                     shape_text(*shape) + " of " + dtype_text + " needs " +
                     (expected ? std::to_string(*expected) : std::string("more than 2^64")) + key);
    }
    usable.push_back({name, *stored, begin, end});
  }

  if (usable.empty()) {
    std::string what = "no tensor of dtype BF16, F16 or F32";
    if (!skipped.empty()) {
      what += "; skipped:";
      for (size_t i = 0; i < skipped.size() && i < 8; ++i) what += " " + skipped[i];
      if (skipped.size() > 8) what += " ...";
    }
    fail(path, what);
  }

  std::sort(usable.begin(), usable.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.name < b.name;
  });
  std::vector<TensorData> tensors;
  tensors.reserve(usable.size());
  for (const SafetensorsEntry& entry : usable) {
    const uint8_t* data = file.data() + data_start + entry.begin;
    tensors.push_back(make_tensor(path + ":" + entry.name, entry.stored, data,
                                  static_cast<size_t>(entry.end - entry.begin), requested, path,
                                  at_key(entry.name)));
  }
  return tensors;
}

// ---------------------------------------------------------------------------------------------
// Synthetic tensors
//
// std::normal_distribution differs between standard libraries and libm's log/sin/cos may differ
// in the last bit, so the Gaussian is built only from IEEE basic operations (+ - * / sqrt),
// which round identically everywhere. Accuracy is ~1e-16 relative, far below fp32 resolution.

constexpr uint64_t kSyntheticSeed = 42;

// Natural log for x in (0, 1]. frexp is exact; ln(m) = 2·atanh(s), s = (m-1)/(m+1), |s| < 0.172
// after centring m on 1, so 12 series terms (s^23/23 < 1e-19) reach double precision.
double portable_log(double x) {
  static constexpr double kOddReciprocals[] = {1.0,        1.0 / 3.0,  1.0 / 5.0,  1.0 / 7.0,
                                               1.0 / 9.0,  1.0 / 11.0, 1.0 / 13.0, 1.0 / 15.0,
                                               1.0 / 17.0, 1.0 / 19.0, 1.0 / 21.0, 1.0 / 23.0};
  int exponent = 0;
  double mantissa = std::frexp(x, &exponent);
  if (mantissa < 0.70710678118654752440) {
    mantissa *= 2.0;
    exponent -= 1;
  }
  const double s = (mantissa - 1.0) / (mantissa + 1.0);
  const double z = s * s;
  double series = kOddReciprocals[11];
  for (int k = 10; k >= 0; --k) series = kOddReciprocals[k] + z * series;
  return exponent * 0.69314718055994530942 + 2.0 * s * series;
}

// Taylor series on [0, π/4]: sin to x^17 and cos to x^18 leave truncation errors below 1e-19.
// The coefficients are constant-folded, which compilers round correctly, so they match everywhere.
double sin_near_zero(double x) {
  static constexpr double kCoefficients[] = {
      1.0,
      -1.0 / 6.0,
      1.0 / 120.0,
      -1.0 / 5040.0,
      1.0 / 362880.0,
      -1.0 / 39916800.0,
      1.0 / 6227020800.0,
      -1.0 / 1307674368000.0,
      1.0 / 355687428096000.0,
  };
  const double z = x * x;
  double sum = kCoefficients[8];
  for (int k = 7; k >= 0; --k) sum = kCoefficients[k] + z * sum;
  return x * sum;
}

double cos_near_zero(double x) {
  static constexpr double kCoefficients[] = {
      1.0,
      -1.0 / 2.0,
      1.0 / 24.0,
      -1.0 / 720.0,
      1.0 / 40320.0,
      -1.0 / 3628800.0,
      1.0 / 479001600.0,
      -1.0 / 87178291200.0,
      1.0 / 20922789888000.0,
      -1.0 / 6402373705728000.0,
  };
  const double z = x * x;
  double sum = kCoefficients[9];
  for (int k = 8; k >= 0; --k) sum = kCoefficients[k] + z * sum;
  return sum;
}

// sin and cos of 2π·turn for turn in [0, 1). Reducing by quarter turns and mirroring at 1/8
// turn is exact in binary, so rounding enters only in the scaling by π/2 and the series.
void portable_sincos_turn(double turn, double& sin_out, double& cos_out) {
  const double quarters = turn * 4.0;
  const int quadrant = static_cast<int>(quarters);
  const double fraction = quarters - quadrant;
  constexpr double kHalfPi = 1.57079632679489661923;
  double sin_part, cos_part;
  if (fraction <= 0.5) {
    sin_part = sin_near_zero(fraction * kHalfPi);
    cos_part = cos_near_zero(fraction * kHalfPi);
  } else {
    sin_part = cos_near_zero((1.0 - fraction) * kHalfPi);
    cos_part = sin_near_zero((1.0 - fraction) * kHalfPi);
  }
  switch (quadrant & 3) {
    case 0:
      sin_out = sin_part;
      cos_out = cos_part;
      break;
    case 1:
      sin_out = cos_part;
      cos_out = -sin_part;
      break;
    case 2:
      sin_out = -sin_part;
      cos_out = -cos_part;
      break;
    default:
      sin_out = -cos_part;
      cos_out = sin_part;
      break;
  }
}

void store_sample(uint8_t* out, DType dtype, float value) {
  switch (dtype) {
    case DType::FP32: write_le(out, float_bits(value), 4); break;
    case DType::BF16: write_le(out, float_to_bf16_rne(value), 2); break;
    case DType::FP16: write_le(out, float_to_fp16_rne(value), 2); break;
  }
}

// Samples are defined as fp32 (double Box–Muller result scaled, then rounded to float) and
// reach bf16/fp16 by the same RNE as file data.
void fill_gaussian(std::vector<uint8_t>& bytes, DType dtype, uint64_t elements, double scale) {
  SplitMix64 rng{kSyntheticSeed};
  const size_t width = dtype_size(dtype);
  for (uint64_t i = 0; i < elements; i += 2) {
    // (x + 1)·2^-53 lies in (0, 1], keeping log finite.
    const double radius_uniform = static_cast<double>((rng.next() >> 11) + 1) * 0x1p-53;
    const double angle_uniform = static_cast<double>(rng.next() >> 11) * 0x1p-53;
    const double radius = std::sqrt(-2.0 * portable_log(radius_uniform));
    double sin_angle, cos_angle;
    portable_sincos_turn(angle_uniform, sin_angle, cos_angle);
    store_sample(bytes.data() + i * width, dtype, static_cast<float>(radius * cos_angle * scale));
    if (i + 1 < elements) {
      store_sample(bytes.data() + (i + 1) * width, dtype,
                   static_cast<float>(radius * sin_angle * scale));
    }
  }
}

void fill_uniform_bits(std::vector<uint8_t>& bytes) {
  SplitMix64 rng{kSyntheticSeed};
  for (size_t i = 0; i < bytes.size(); i += 8) {
    write_le(bytes.data() + i, rng.next(), std::min<size_t>(8, bytes.size() - i));
  }
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

// "123", "4k", "64M", "2G" → element count; nullopt for anything else, zero or overflow.
std::optional<uint64_t> parse_count(std::string_view text) {
  uint64_t multiplier = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k': multiplier = 1ull << 10; break;
      case 'M': multiplier = 1ull << 20; break;
      case 'G': multiplier = 1ull << 30; break;
      default: break;
    }
    if (multiplier != 1) text.remove_suffix(1);
  }
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  uint64_t count = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (count == 0 || __builtin_mul_overflow(count, multiplier, &count)) return std::nullopt;
  return count;
}

std::vector<TensorData> load_synthetic(const std::string& spec, std::optional<DType> requested) {
  static const std::string kUsage =
      " (expected synthetic:gaussian:N[:SCALE] or synthetic:uniform-bits:N, N with optional "
      "k/M/G suffix)";
  const std::vector<std::string_view> parts = split(spec, ':');
  const std::string_view kind = parts.size() >= 2 ? parts[1] : std::string_view();
  const bool gaussian = kind == "gaussian";
  if (!gaussian && kind != "uniform-bits") {
    fail(spec, "unknown synthetic tensor kind '" + std::string(kind) + "'" + kUsage);
  }
  if (parts.size() < 3) fail(spec, "missing element count" + kUsage);
  if (parts.size() > (gaussian ? 4u : 3u)) fail(spec, "too many fields" + kUsage);

  const std::optional<uint64_t> elements = parse_count(parts[2]);
  if (!elements) fail(spec, "bad element count '" + std::string(parts[2]) + "'" + kUsage);

  double scale = 1.0;
  if (parts.size() == 4) {
    const std::string_view text = parts[3];
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), scale);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
        !std::isfinite(scale) || scale <= 0.0) {
      fail(spec, "bad scale '" + std::string(text) + "' (expected a positive finite number)");
    }
  }

  const DType dtype = requested.value_or(DType::BF16);
  uint64_t byte_count = 0;
  if (__builtin_mul_overflow(*elements, dtype_size(dtype), &byte_count) ||
      byte_count > std::numeric_limits<size_t>::max()) {
    fail(spec, "element count too large");
  }
  TensorData tensor;
  tensor.source = spec;
  tensor.dtype = dtype;
  try {
    tensor.bytes.resize(static_cast<size_t>(byte_count));
  } catch (const std::bad_alloc&) {
    fail(spec, "cannot allocate " + std::to_string(byte_count) + " bytes");
  } catch (const std::length_error&) {
    fail(spec, "cannot allocate " + std::to_string(byte_count) + " bytes");
  }
  if (gaussian) {
    fill_gaussian(tensor.bytes, dtype, *elements, scale);
  } else {
    fill_uniform_bits(tensor.bytes);
  }
  std::vector<TensorData> tensors;
  tensors.push_back(std::move(tensor));
  return tensors;
}

}  // namespace

std::vector<TensorData> load_tensors(const std::string& spec, std::optional<DType> requested) {
  if (spec.rfind("synthetic:", 0) == 0) return load_synthetic(spec, requested);
  if (ends_with(spec, ".npy")) return load_npy(spec, requested);
  if (ends_with(spec, ".safetensors")) return load_safetensors(spec, requested);
  fail(spec, "unknown tensor file type (expected .npy or .safetensors)");
}

GradientTrace load_gradient_trace(const std::string& path) {
  GradientTrace t;
  t.data = std::move(load_tensors(path, DType::BF16).front());
  const auto& shape = t.data.shape;
  std::string dims;
  for (uint64_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  if (shape.size() != 3)
    fail(path, "expected a .npy of shape (steps, rows, cols), got shape (" + dims + "): " + std::to_string(shape.size()) +
                   " dimension(s)");
  if (shape[0] == 0 || shape[1] == 0 || shape[2] == 0)
    fail(path, "expected a .npy of shape (steps, rows, cols), got shape (" + dims + "): no " +
                   (shape[0] == 0 ? "steps" : shape[1] == 0 ? "rows" : "columns"));
  t.steps = shape[0];
  t.rows = shape[1];
  t.cols = shape[2];
  const uint64_t n = t.rows * t.cols;
  for (uint64_t s = 0; s < t.steps; ++s)
    for (uint64_t i = 0; i < n; ++i)
      if (!std::isfinite(load_as_float(t.data.dtype, t.step_bytes(s), i)))
        fail(path, "step " + std::to_string(s) + " holds a NaN or infinite value");
  return t;
}

}  // namespace compcoll
