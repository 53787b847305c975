// shared/codec/library_codec.cpp — the host's stand-in for nvcomp-ans (codec id 4): nvCOMP's
// batched ANS in the compcoll container, coded and decoded on a GPU only (codec/cuda/nvcomp.h).
// The stand-in names the codec in messages and stream info; anything that would code on the
// host refuses in one line, and a host decoder reports each chunk of such a stream as one it
// cannot decode.
#include "codec/codec_internal.h"

namespace compcoll::detail {
namespace {

class NvcompAnsHostCodec final : public Codec {
 public:
  CodecId id() const override { return CodecId::NvcompAns; }
  std::string_view name() const override { return kNvcompAnsName; }
  bool lossless() const override { return true; }
  // The bound is nvCOMP's (nvcompBatchedANSCompressGetMaxOutputChunkSize), which only the
  // library knows: a GPU backend asks it (nvcomp_ans_max_encoded_size).
  size_t max_chunk_bytes(DType, uint32_t) const override { throw CodecError(refusal(), 0); }
  size_t encode_chunk(DType, const uint8_t*, uint32_t, uint8_t*) const override { throw CodecError(refusal(), 0); }
  std::string decode_chunk(DType, const uint8_t*, size_t, uint32_t, uint8_t*) const override {
    return "an nvcomp-ans chunk, which only nvCOMP on a GPU decodes";
  }

 private:
  static std::string refusal() {
    return "nvcomp-ans: nvCOMP codes on a GPU only; the host has no implementation of it";
  }
};

}  // namespace

const Codec& nvcomp_ans_host_codec() {
  static const NvcompAnsHostCodec codec;
  return codec;
}

}  // namespace compcoll::detail
