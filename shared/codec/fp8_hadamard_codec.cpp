// shared/codec/fp8_hadamard_codec.cpp — host reference of the lossy fp8-hadamard codec
// (docs/FORMAT.md "fp8-hadamard"). The per-group arithmetic is codec/fp8_bits.h, shared with
// the CUDA kernels; this file only walks chunks and groups and validates streams. Compiled
// with -ffp-contract=off (shared/CMakeLists.txt): a fused multiply-add would change the bits.
#include <array>
#include <charconv>
#include <cstring>
#include <memory>
#include <mutex>

#include "codec/codec_internal.h"
#include "codec/fp8_bits.h"
#include "codec/fp8_hadamard.h"

namespace compcoll {
namespace detail {
namespace {

using fp8bits::ChunkLayout;

uint32_t log2_of(uint32_t g) {
  uint32_t l = 0;
  while ((1u << l) < g) ++l;
  return l;
}

template <class E>
bool chunk_is_finite(const uint8_t* in, uint32_t n) {
  for (uint32_t k = 0; k < n; ++k) {
    typename E::Bits v;
    std::memcpy(&v, in + size_t{k} * sizeof v, sizeof v);
    if (!fp8bits::is_finite_bits(E::fp32_bits(v))) return false;
  }
  return true;
}

template <class E>
void quantize_chunk(const uint8_t* in, uint32_t n, uint32_t g, uint32_t fmt, uint8_t* out) {
  std::array<float, format::kFp8MaxGroup> v;
  uint8_t* scales = out + ChunkLayout::scales_at();
  uint8_t* codes = out + ChunkLayout::codes_at(n, g);
  const uint32_t groups = ChunkLayout::groups(n, g);
  for (uint32_t i = 0; i < groups; ++i) {
    const uint32_t first = i * g;
    const uint32_t m = std::min(g, n - first);
    const uint32_t p = ChunkLayout::group_size(n, g, i);
    for (uint32_t k = 0; k < m; ++k) {
      typename E::Bits b;
      std::memcpy(&b, in + size_t{first + k} * sizeof b, sizeof b);
      v[k] = E::to_float(b);
    }
    for (uint32_t k = m; k < p; ++k) v[k] = 0.0f;
    const fp8bits::GroupScales s = fp8bits::quantize_group(v.data(), p, fmt, codes + first);
    format::store_u32(scales + format::kFp8ScaleBytes * i, float_bits(s.s1));
    format::store_u32(scales + format::kFp8ScaleBytes * i + 4, float_bits(s.s2));
  }
  const uint32_t code_bytes = ChunkLayout::code_bytes(n, g);
  std::memset(codes + code_bytes, 0, format::align_up(code_bytes, format::kChunkAlign) - code_bytes);
}

template <class E>
std::string dequantize_chunk(const uint8_t* in, uint32_t n, uint32_t g, uint32_t fmt, uint8_t* out) {
  std::array<float, format::kFp8MaxGroup> v;
  const uint8_t* scales = in + ChunkLayout::scales_at();
  const uint8_t* codes = in + ChunkLayout::codes_at(n, g);
  const uint32_t groups = ChunkLayout::groups(n, g);
  for (uint32_t i = 0; i < groups; ++i) {
    const uint32_t at = format::kFp8ScaleBytes * i;
    const uint32_t b1 = format::load_u32(scales + at), b2 = format::load_u32(scales + at + 4);
    if (!fp8bits::valid_scale_bits(b1) || !fp8bits::valid_scale_bits(b2))
      return "group " + std::to_string(i) + ": scale at chunk byte " +
             std::to_string(ChunkLayout::scales_at() + at) + " is negative or not finite";
    const uint32_t first = i * g;
    const uint32_t m = std::min(g, n - first);
    const uint32_t p = ChunkLayout::group_size(n, g, i);
    fp8bits::dequantize_group(codes + first, p, fmt, {float_from_bits(b1), float_from_bits(b2)},
                              v.data());
    for (uint32_t k = 0; k < m; ++k) {
      const typename E::Bits b = E::from_float(v[k]);
      std::memcpy(out + size_t{first + k} * sizeof b, &b, sizeof b);
    }
  }
  return {};
}

class Fp8HadamardCodec final : public Codec {
 public:
  Fp8HadamardCodec(const Fp8HadamardParams& p) : params_(p), name_(fp8_hadamard_name(p)) {}
  CodecId id() const override { return CodecId::Fp8Hadamard; }
  std::string_view name() const override { return name_; }
  bool lossless() const override { return false; }
  size_t max_chunk_bytes(DType dtype, uint32_t n) const override {
    return std::max(ChunkLayout::quantized_bytes(n, params_.group),
                    ChunkLayout::stored_bytes(n, static_cast<uint32_t>(dtype_size(dtype))));
  }
  // The chunk header: a group's scales and codes are the same bytes in any chunk.
  double chunk_overhead_bytes(DType) const override { return format::kChunkHeaderBytes; }
  size_t encode_chunk(DType dtype, const uint8_t* in, uint32_t n, uint8_t* out) const override {
    switch (dtype) {
      case DType::BF16: return encode_as<fp8bits::Bf16Elem>(in, n, out);
      case DType::FP16: return encode_as<fp8bits::Fp16Elem>(in, n, out);
      case DType::FP32: return encode_as<fp8bits::Fp32Elem>(in, n, out);
    }
    throw_bad_dtype(static_cast<uint8_t>(dtype));
  }
  std::string decode_chunk(DType dtype, const uint8_t* in, size_t bytes, uint32_t n,
                           uint8_t* out) const override {
    switch (dtype) {
      case DType::BF16: return decode_as<fp8bits::Bf16Elem>(in, bytes, n, out);
      case DType::FP16: return decode_as<fp8bits::Fp16Elem>(in, bytes, n, out);
      case DType::FP32: return decode_as<fp8bits::Fp32Elem>(in, bytes, n, out);
    }
    throw_bad_dtype(static_cast<uint8_t>(dtype));
  }

 private:
  template <class E>
  size_t encode_as(const uint8_t* in, uint32_t n, uint8_t* out) const {
    const uint32_t g = params_.group;
    const uint32_t fmt = static_cast<uint32_t>(params_.fp8);
    const uint32_t stored = ChunkLayout::stored_bytes(n, sizeof(typename E::Bits));
    const uint32_t quantized = ChunkLayout::quantized_bytes(n, g);
    const bool store = stored <= quantized || !chunk_is_finite<E>(in, n);
    out[0] = store ? format::kFp8ModeStored : format::kFp8ModeQuantized;
    out[1] = static_cast<uint8_t>(log2_of(g));
    out[2] = static_cast<uint8_t>(fmt);
    out[3] = 0;
    if (store) {
      const size_t bytes = size_t{n} * sizeof(typename E::Bits);
      if (bytes) std::memcpy(out + format::kChunkHeaderBytes, in, bytes);
      std::memset(out + format::kChunkHeaderBytes + bytes, 0,
                  stored - format::kChunkHeaderBytes - bytes);
      return stored;
    }
    quantize_chunk<E>(in, n, g, fmt, out);
    return quantized;
  }

  template <class E>
  std::string decode_as(const uint8_t* in, size_t bytes, uint32_t n, uint8_t* out) const {
    if (bytes < format::kChunkHeaderBytes)
      return "chunk of " + std::to_string(bytes) + " bytes is shorter than its header";
    const uint32_t mode = in[0], log2g = in[1], fmt = in[2];
    if (mode != format::kFp8ModeQuantized && mode != format::kFp8ModeStored)
      return "unknown chunk mode " + std::to_string(mode) + " at chunk byte 0";
    if (log2g < format::kFp8MinLog2Group || log2g > format::kFp8MaxLog2Group)
      return "group size 2^" + std::to_string(log2g) + " at chunk byte 1 is outside [2^5, 2^9]";
    if (fmt != format::kFp8E4M3 && fmt != format::kFp8E5M2)
      return "unknown fp8 format " + std::to_string(fmt) + " at chunk byte 2";
    if (in[3] != 0) return "reserved chunk header byte 3 is not zero";
    const uint32_t g = 1u << log2g;
    const size_t expect = mode == format::kFp8ModeStored
                              ? ChunkLayout::stored_bytes(n, sizeof(typename E::Bits))
                              : ChunkLayout::quantized_bytes(n, g);
    if (bytes != expect)
      return std::string(mode == format::kFp8ModeStored ? "stored" : "quantized") + " chunk of " +
             std::to_string(bytes) + " bytes, expected " + std::to_string(expect);
    if (mode == format::kFp8ModeStored) {
      if (n) std::memcpy(out, in + format::kChunkHeaderBytes, size_t{n} * sizeof(typename E::Bits));
      return {};
    }
    return dequantize_chunk<E>(in, n, g, fmt, out);
  }

  Fp8HadamardParams params_;
  std::string name_;
};

bool valid_group(uint32_t g) {
  return g >= (1u << format::kFp8MinLog2Group) && g <= format::kFp8MaxGroup && (g & (g - 1)) == 0;
}

}  // namespace

const Codec& fp8_hadamard_codec_default() { return fp8_hadamard_codec({}); }

}  // namespace detail

const Codec& fp8_hadamard_codec(const Fp8HadamardParams& params) {
  if (!detail::valid_group(params.group))
    throw CodecError("fp8-hadamard: group size must be a power of two in [32, 512], got " +
                         std::to_string(params.group),
                     0);
  if (params.fp8 != Fp8Format::E4M3 && params.fp8 != Fp8Format::E5M2)
    throw CodecError("fp8-hadamard: unknown fp8 format", 0);
  // One instance per (format, log2 G), built on first use.
  constexpr uint32_t kSizes = format::kFp8MaxLog2Group - format::kFp8MinLog2Group + 1;
  static std::unique_ptr<detail::Fp8HadamardCodec> table[2][kSizes];
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = table[static_cast<int>(params.fp8)][detail::log2_of(params.group) -
                                                   format::kFp8MinLog2Group];
  if (!slot) slot = std::make_unique<detail::Fp8HadamardCodec>(params);
  return *slot;
}

std::string fp8_hadamard_name(const Fp8HadamardParams& params) {
  std::string name = "fp8-hadamard";
  if (params.fp8 == Fp8Format::E5M2) name += "-e5m2";
  if (params.group != format::kFp8DefaultGroup) name += "-g" + std::to_string(params.group);
  return name;
}

bool parse_fp8_hadamard_name(std::string_view name, Fp8HadamardParams& params) {
  constexpr std::string_view kBase = "fp8-hadamard";
  if (name.substr(0, kBase.size()) != kBase) return false;
  name.remove_prefix(kBase.size());
  Fp8HadamardParams p;
  if (name.substr(0, 5) == "-e5m2") {
    p.fp8 = Fp8Format::E5M2;
    name.remove_prefix(5);
  }
  if (name.substr(0, 2) == "-g") {
    name.remove_prefix(2);
    uint32_t g = 0;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), g);
    if (ec != std::errc() || end != name.data() + name.size() || !detail::valid_group(g) ||
        name[0] == '0')
      return false;
    p.group = g;
    name = {};
  }
  if (!name.empty()) return false;
  params = p;
  return true;
}

}  // namespace compcoll
