// shared/codec/identity_codec.cpp — the baseline codec: a chunk is its elements' bytes,
// padded to the chunk alignment. Every table compares against it.
#include <cstring>

#include "codec/codec_internal.h"

namespace compcoll::detail {
namespace {

class IdentityCodec final : public Codec {
 public:
  CodecId id() const override { return CodecId::Identity; }
  std::string_view name() const override { return "identity"; }
  bool lossless() const override { return true; }
  bool sized_by_elements() const override { return true; }
  size_t max_chunk_bytes(DType dtype, uint32_t n) const override {
    return format::align_up(n * static_cast<uint32_t>(dtype_size(dtype)), format::kChunkAlign);
  }
  size_t encode_chunk(DType dtype, const uint8_t* in, uint32_t n, uint8_t* out) const override {
    const size_t bytes = size_t{n} * dtype_size(dtype);
    const size_t padded = max_chunk_bytes(dtype, n);
    if (bytes) std::memcpy(out, in, bytes);
    std::memset(out + bytes, 0, padded - bytes);
    return padded;
  }
  std::string decode_chunk(DType dtype, const uint8_t* in, size_t bytes, uint32_t n,
                           uint8_t* out) const override {
    if (bytes != max_chunk_bytes(dtype, n))
      return "identity chunk of " + std::to_string(bytes) + " bytes, expected " +
             std::to_string(max_chunk_bytes(dtype, n));
    if (n) std::memcpy(out, in, size_t{n} * dtype_size(dtype));
    return {};
  }
};

}  // namespace

const Codec& identity_codec() {
  static const IdentityCodec codec;
  return codec;
}

}  // namespace compcoll::detail
