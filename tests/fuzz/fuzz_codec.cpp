// tests/fuzz/fuzz_codec.cpp — libFuzzer target for the host codecs, built with AddressSanitizer
// and UndefinedBehaviorSanitizer. Three modes, picked by the first input byte:
//   0: the rest is a stream: decoding must return or throw CodecError, never crash.
//   1: the rest is tensor data: encode, decode, and the round trip must be bit-exact (for the
//      lossy fp8-hadamard: the fresh stream must decode, to the size it states).
//   2: encode the tensor data, then apply the input's tail as byte edits to the stream, then
//      decode: reaches deep decoder paths (lane tables, code tables, bitstreams) with streams
//      that are valid up to the damage.
// Where the CPU has the AVX-512 paths (codec/exponent_avx512.h), every encode and decode runs
// a second time with them switched off, and both must agree byte for byte and error for error
// (a differential check of the fast paths against the portable ones).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "codec/exponent_avx512.h"
#include "codec/fp8_hadamard.h"

using namespace compcoll;

namespace {

namespace simd = compcoll::detail::avx512;

// Decodes with the AVX-512 paths on or off: the error, or "" and the values in *out.
std::string decode_with(bool fast, const uint8_t* data, size_t size, std::vector<uint8_t>* out) {
  simd::set_enabled(fast);
  try {
    const StreamInfo info = read_stream_info(data, size);
    const uint64_t bytes = info.elements * dtype_size(info.dtype);
    if (bytes > (64u << 20)) return "too large";  // a valid header may promise more than we allocate
    out->assign(bytes, 0);
    decode(data, size, out->data(), out->size());
  } catch (const CodecError& e) {
    return e.what();
  }
  return {};
}

void decode_any(const uint8_t* data, size_t size) {
  std::vector<uint8_t> fast_out, portable_out;
  const std::string fast = decode_with(true, data, size, &fast_out);
  if (!simd::cpu_supported()) return;
  const std::string portable = decode_with(false, data, size, &portable_out);
  if (fast != portable || (fast.empty() && fast_out != portable_out)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t mode = data[0] % 3;
  if (mode == 0) {
    decode_any(data + 1, size - 1);
    return 0;
  }
  const CodecId id = static_cast<CodecId>(data[1] % 4);
  const DType dtype = static_cast<DType>((data[1] / 4) % 3);
  EncodeOptions opt;
  opt.chunk_elements = 32u << (data[2] % 6);  // 32 .. 1024: many chunks from small inputs
  // fp8-hadamard: every group size 32 .. 512 and both formats.
  const Codec& codec =
      id == CodecId::Fp8Hadamard
          ? fp8_hadamard_codec({32u << ((data[2] / 6) % 5),
                                (data[2] / 30) % 2 ? Fp8Format::E5M2 : Fp8Format::E4M3})
          : codec_by_id(id);
  data += 3;
  size -= 3;
  size_t split = mode == 2 ? size / 2 : size;
  const size_t es = dtype_size(dtype);
  const size_t n = split / es;
  std::vector<uint8_t> tensor(data, data + n * es);
  simd::set_enabled(true);
  std::vector<uint8_t> stream = encode(codec, dtype, tensor.data(), n, opt);
  if (simd::cpu_supported()) {
    simd::set_enabled(false);
    if (encode(codec, dtype, tensor.data(), n, opt) != stream) std::abort();
    simd::set_enabled(true);
  }
  if (mode == 1) {
    std::vector<uint8_t> out(tensor.size());
    decode(stream.data(), stream.size(), out.data(), out.size());
    if (codec.lossless() && out != tensor) std::abort();
    return 0;
  }
  // Edits: (position u16, value u8) triples; a position past the end truncates the stream.
  for (size_t i = split; i + 3 <= size; i += 3) {
    const size_t pos = (data[i] | (data[i + 1] << 8));
    if (pos >= stream.size()) {
      stream.resize(pos % (stream.size() + 1));
      if (stream.empty()) break;
    } else {
      stream[pos] ^= data[i + 2];
    }
  }
  decode_any(stream.data(), stream.size());
  return 0;
}
