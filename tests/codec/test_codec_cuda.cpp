// tests/codec/test_codec_cuda.cpp — the CUDA codec kernels (codec/cuda/codec_cuda.h) against the
// host reference: GPU streams byte-identical to encode(), GPU decode bit-exact, per-chunk errors
// for damaged streams; fp8-hadamard (lossy) streams and decodes bit-identical to the host's;
// encode, decode and decode-and-add captured in a CUDA graph and replayed; batches of messages
// coded as each message alone (cuda_encode_batch, cuda_decode_batch), captured too. Runs on a non-blocking stream; without a device every GPU case says
// "SKIPPED" with a warning instead of passing silently. Built only with CUDA.
#ifdef COMPCOLL_HAVE_CUDA

#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codec/codec.h"
#include "codec/cuda/check.h"
#include "codec/cuda/codec_cuda.h"
#include "codec/exponent_bits.h"
#include "codec/reduce.h"
#include "io/tensor_file.h"
#include "cuda_test_util.h"
#include "test_util.h"

using namespace compcoll;

namespace {

const DType kDTypes[] = {DType::BF16, DType::FP16, DType::FP32};
const CodecId kCodecs[] = {CodecId::Identity, CodecId::GaussExp, CodecId::EntropyExp};


template <class T = uint8_t>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count > 0)
      COMPCOLL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), count * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return ptr_; }
  size_t count() const { return count_; }

 private:
  T* ptr_ = nullptr;
  size_t count_;
};

class Stream {
 public:
  Stream() { COMPCOLL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void sync() const { COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_{};
};

void to_device(const Stream& s, void* dst, const void* src, size_t bytes) {
  if (bytes > 0)
    COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s.get()));
}
template <class T>
std::vector<T> to_host(const Stream& s, const T* src, size_t count) {
  std::vector<T> out(count);
  if (count > 0)
    COMPCOLL_CUDA_CHECK(
        cudaMemcpyAsync(out.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost, s.get()));
  s.sync();
  return out;
}

const Codec& codec_of(CodecId id) { return codec_by_id(id); }
std::string codec_name(CodecId id) { return std::string(codec_of(id).name()); }

// Encodes `in` on the GPU; the input sits `in_offset` bytes into its allocation (element
// aligned, not necessarily more). Output and scratch start out as garbage, so a kernel that
// leaves bytes unwritten cannot match the host stream.
std::vector<uint8_t> gpu_encode(const Stream& s, CodecId codec, DType dtype,
                                const std::vector<uint8_t>& in, const EncodeOptions& opt = {},
                                size_t in_offset = 0) {
  const uint64_t n = in.size() / dtype_size(dtype);
  DeviceBuffer<uint8_t> din(in.size() + in_offset + 1);
  to_device(s, din.get() + in_offset, in.data(), in.size());
  const size_t capacity = max_encoded_size(codec_of(codec), dtype, n, opt);
  DeviceBuffer<uint8_t> dout(capacity);
  COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dout.get(), 0x5A, capacity, s.get()));
  DeviceBuffer<uint64_t> dsize(1);
  COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dsize.get(), 0xFF, sizeof(uint64_t), s.get()));
  const size_t scratch_bytes = cuda_encode_scratch_bytes(codec, dtype, n, opt);
  DeviceBuffer<uint8_t> scratch(scratch_bytes);
  if (scratch_bytes > 0)
    COMPCOLL_CUDA_CHECK(cudaMemsetAsync(scratch.get(), 0xC3, scratch_bytes, s.get()));
  cuda_encode(codec, dtype, n > 0 ? din.get() + in_offset : nullptr, n, dout.get(), capacity,
              dsize.get(), scratch.get(), scratch_bytes, opt, s.get());
  const uint64_t size = to_host(s, dsize.get(), 1)[0];
  REQUIRE(size <= capacity);
  return to_host(s, dout.get(), size);
}

// Decodes a stream on the GPU with cuda_decode_checked; the stream sits `stream_offset` bytes
// into its allocation (any alignment), the output `out_offset` elements into its own.
std::vector<uint8_t> gpu_decode(const Stream& s, const std::vector<uint8_t>& stream, DType dtype,
                                uint64_t elements, size_t stream_offset = 0,
                                size_t out_offset = 0) {
  const size_t esize = dtype_size(dtype);
  DeviceBuffer<uint8_t> din(stream.size() + stream_offset + 1);
  to_device(s, din.get() + stream_offset, stream.data(), stream.size());
  DeviceBuffer<uint8_t> dout((elements + out_offset) * esize + 1);
  COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dout.get(), 0xA5, dout.count(), s.get()));
  const StreamInfo info =
      cuda_decode_checked(din.get() + stream_offset, stream.size(), dout.get() + out_offset * esize,
                          elements * esize, s.get());
  REQUIRE(info.elements == elements);
  REQUIRE(info.total_bytes == stream.size());
  return to_host(s, dout.get() + out_offset * esize, elements * esize);
}

// Sets the CUDA encoder for a scope.
class EncoderScope {
 public:
  explicit EncoderScope(CudaEncoder e) : was_(cuda_encoder()) { set_cuda_encoder(e); }
  ~EncoderScope() { set_cuda_encoder(was_); }
  EncoderScope(const EncoderScope&) = delete;
  EncoderScope& operator=(const EncoderScope&) = delete;

 private:
  CudaEncoder was_;
};

// Host encode, GPU encode (gauss-exp: with both encoders), GPU decode of the host stream, host
// decode of the GPU stream.
void check_against_host(const Stream& s, CodecId codec, DType dtype, const std::vector<uint8_t>& in,
                        const EncodeOptions& opt = {}) {
  const uint64_t n = in.size() / dtype_size(dtype);
  const std::vector<uint8_t> host = encode(codec_of(codec), dtype, in.data(), n, opt);
  const std::vector<uint8_t> gpu = gpu_encode(s, codec, dtype, in, opt);
  CHECK(gpu.size() == host.size());
  CHECK(gpu == host);
  if (codec == CodecId::GaussExp) {
    const EncoderScope one_launch(CudaEncoder::OneLaunch);
    CHECK(gpu_encode(s, codec, dtype, in, opt) == host);
  }
  CHECK(gpu_decode(s, host, dtype, n) == in);
  std::vector<uint8_t> back(in.size(), 0xA5);
  decode(gpu.data(), gpu.size(), back.data(), back.size());
  CHECK(back == in);
}

bool any_nonzero(const std::vector<uint8_t>& v) {
  return std::any_of(v.begin(), v.end(), [](uint8_t b) { return b != 0; });
}

// Where chunk c of a host stream begins and ends (absolute byte offsets).
std::pair<uint64_t, uint64_t> chunk_bytes_at(const std::vector<uint8_t>& stream, uint32_t c) {
  const StreamInfo info = read_stream_info(stream.data(), stream.size());
  const uint64_t payload_at =
      format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} * info.chunk_count;
  const uint8_t* table = stream.data() + format::kHeaderBytes;
  const uint64_t begin = c == 0 ? 0 : format::load_u64(table + 8 * (c - 1));
  return {payload_at + begin, payload_at + format::load_u64(table + 8 * c)};
}

// Per-chunk statuses of a (possibly damaged) stream decoded with the clean stream's info.
std::vector<int32_t> gpu_statuses(const Stream& s, const StreamInfo& info,
                                  const std::vector<uint8_t>& stream) {
  DeviceBuffer<uint8_t> din(stream.size());
  to_device(s, din.get(), stream.data(), stream.size());
  DeviceBuffer<uint8_t> dout(info.elements * dtype_size(info.dtype) + 1);
  DeviceBuffer<int32_t> dstatus(info.chunk_count);
  COMPCOLL_CUDA_CHECK(
      cudaMemsetAsync(dstatus.get(), 0x7F, info.chunk_count * sizeof(int32_t), s.get()));
  cuda_decode(info, din.get(), stream.size(), dout.get(), dout.count(), dstatus.get(), s.get());
  return to_host(s, dstatus.get(), info.chunk_count);
}

CudaChunkStatus kind_of(int32_t status) { return static_cast<CudaChunkStatus>(status & 0xFF); }

}  // namespace

TEST_CASE("cuda: status messages and argument errors (host side, no device needed)", "[cuda]") {
  CHECK(cuda_chunk_status_message(0).empty());
  const int32_t bad_code =
      static_cast<int32_t>(CudaChunkStatus::LaneBadCode) | (3 << 8) | (2 << 16);
  CHECK(cuda_chunk_status_message(bad_code) == "lane 3 element 67: bit pattern is no code");
  CHECK(cuda_chunk_status_message(static_cast<int32_t>(CudaChunkStatus::LaneTrailingBits) |
                                  (31 << 8)) == "lane 31: trailing bits after the last element");
  CHECK(cuda_chunk_status_message(static_cast<int32_t>(CudaChunkStatus::KraftViolation))
            .find("Kraft") != std::string::npos);
  CHECK(cuda_chunk_status_message(200).find("unknown") != std::string::npos);
  CHECK(cuda_chunk_status_message(static_cast<int32_t>(CudaChunkStatus::BadHeader)).find("header") !=
        std::string::npos);
  // Bad options are caller errors, found before any CUDA call.
  EncodeOptions opt;
  for (uint32_t c : {16u, 33u, 65568u}) {
    opt.chunk_elements = c;
    CHECK_THROWS_AS(cuda_encode_scratch_bytes(CodecId::GaussExp, DType::BF16, 100, opt),
                    CodecError);
    CHECK_THROWS_AS(cuda_encode(CodecId::GaussExp, DType::BF16, nullptr, 100, nullptr, 0, nullptr,
                                nullptr, 0, opt, nullptr),
                    CodecError);
  }
  CHECK_THROWS_AS(cuda_encode(static_cast<CodecId>(9), DType::BF16, nullptr, 0, nullptr, 0, nullptr,
                              nullptr, 0, EncodeOptions{}, nullptr),
                  CodecError);
  // The encoder switch: names both ways, a bad name named, set and read back.
  for (const CudaEncoder e : {CudaEncoder::Passes, CudaEncoder::OneLaunch})
    CHECK(parse_cuda_encoder(cuda_encoder_name(e)) == e);
  CHECK_THROWS_WITH(parse_cuda_encoder("fused"), Catch::Contains("'fused'"));
  const CudaEncoder before = cuda_encoder();
  {
    const EncoderScope one_launch(CudaEncoder::OneLaunch);
    CHECK(cuda_encoder() == CudaEncoder::OneLaunch);
  }
  CHECK(cuda_encoder() == before);
}

TEST_CASE("cuda: encode is byte-identical to the host over sizes, chunkings, dtypes and codecs",
          "[cuda]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  const uint32_t chunk = GENERATE(32u, 1024u, format::kDefaultChunkElements);
  EncodeOptions opt;
  opt.chunk_elements = chunk;
  std::vector<size_t> sizes = {
      0, 1, 31, 32, 33, 64, 65, chunk - 1, chunk, chunk + 1, 3 * size_t{chunk} + 17};
  test::SplitMix64 rng{4242};
  for (int i = 0; i < 4; ++i) sizes.push_back(rng.next() % (5 * size_t{chunk}));
  for (CodecId codec : kCodecs)
    for (DType dtype : kDTypes)
      for (size_t n : sizes) {
        CAPTURE(codec_name(codec), dtype_name(dtype), chunk, n);
        const auto in = test::gaussian_bytes(dtype, n, 0.02, 1000 + n);
        if (n > 0) REQUIRE(any_nonzero(in));
        check_against_host(s, codec, dtype, in, opt);
      }
}

TEST_CASE("cuda: decode-and-add equals decode, then reduce_add, on the host", "[cuda]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  for (const uint32_t chunk : {1024u, format::kDefaultChunkElements})
    for (CodecId codec : kCodecs)
      for (DType dtype : kDTypes)
        // 40,000 and 50,000 elements: in chunks of 16,384, 3 and 4 chunks, so that the payload
        // starts 8 and 0 bytes past a 16-byte boundary (identity's decoder takes its two paths).
        for (const size_t n :
             {size_t{0}, size_t{1}, size_t{1000}, size_t{3 * 1024 + 17}, size_t{40000}, size_t{50000}}) {
          CAPTURE(codec_name(codec), dtype_name(dtype), chunk, n);
          EncodeOptions opt;
          opt.chunk_elements = chunk;
          const auto in = test::gaussian_bytes(dtype, n, 0.02, 300 + n);
          const auto acc0 = test::gaussian_bytes(dtype, n, 0.5, 700 + n);
          const auto stream = encode(codec_of(codec), dtype, in.data(), n, opt);
          std::vector<uint8_t> expect = acc0, decoded(in.size());
          decode(stream.data(), stream.size(), decoded.data(), decoded.size());
          reduce_add(dtype, expect.data(), decoded.data(), n);
          const StreamInfo info = read_stream_info(stream.data(), stream.size());
          DeviceBuffer<uint8_t> din(stream.size()), dacc(acc0.size() + 1);
          DeviceBuffer<int32_t> dstatus(info.chunk_count);
          to_device(s, din.get(), stream.data(), stream.size());
          to_device(s, dacc.get(), acc0.data(), acc0.size());
          cuda_decode_add(info, din.get(), stream.size(), dacc.get(), acc0.size(), dstatus.get(), s.get());
          CHECK(to_host(s, dacc.get(), acc0.size()) == expect);
          for (const int32_t st : to_host(s, dstatus.get(), info.chunk_count)) CHECK(st == 0);
        }
  // fp8-hadamard has no fused kernel.
  const auto in = test::gaussian_bytes(DType::BF16, 256, 0.02, 5);
  const auto stream = encode(*find_codec("fp8-hadamard"), DType::BF16, in.data(), 256);
  const StreamInfo info = read_stream_info(stream.data(), stream.size());
  DeviceBuffer<uint8_t> din(stream.size()), dacc(in.size());
  DeviceBuffer<int32_t> dstatus(info.chunk_count);
  CHECK_THROWS_AS(cuda_decode_add(info, din.get(), stream.size(), dacc.get(), in.size(), dstatus.get(), s.get()),
                  CodecError);
}

TEST_CASE("cuda: encode, decode and decode-and-add captured in a CUDA graph, replayed", "[cuda][graph]") {
  SKIP_WITHOUT_CUDA();
  // What a collective step would put in a graph: encode a block, decode a stream of the size the
  // caller knows (expected_stream_info: nothing read back to the host), decode another into an
  // accumulator. Captured in thread-local mode, so any call that could synchronise or allocate
  // in this thread fails the capture; replayed over poisoned outputs, every replay checked.
  Stream s;
  const CudaEncoder before = cuda_encoder();
  for (const CudaEncoder encoder : {CudaEncoder::Passes, CudaEncoder::OneLaunch})
    for (CodecId codec : kCodecs)
      for (DType dtype : {DType::BF16, DType::FP32}) {
        CAPTURE(codec_name(codec), dtype_name(dtype), std::string(cuda_encoder_name(encoder)));
        set_cuda_encoder(encoder);
        const EncodeOptions opt;
        const uint64_t n = 3 * format::kDefaultChunkElements + 1000;
        const size_t bytes = n * dtype_size(dtype);
        const auto in = test::gaussian_bytes(dtype, n, 0.02, 41);
        const auto acc0 = test::gaussian_bytes(dtype, n, 0.5, 43);
        const auto host_stream = encode(codec_of(codec), dtype, in.data(), n, opt);
        std::vector<uint8_t> expect_acc = acc0;
        reduce_add(dtype, expect_acc.data(), in.data(), n);
        const StreamInfo info = expected_stream_info(codec_of(codec), dtype, n, opt, host_stream.size());
        const size_t capacity = max_encoded_size(codec_of(codec), dtype, n, opt);
        const size_t scratch_bytes = cuda_encode_scratch_bytes(codec, dtype, n, opt);
        DeviceBuffer<uint8_t> din(bytes), dstream(capacity), dout(bytes), dacc(bytes), scratch(scratch_bytes);
        DeviceBuffer<uint64_t> dsize(1);
        DeviceBuffer<int32_t> dstatus(2 * info.chunk_count);
        to_device(s, din.get(), in.data(), bytes);
        s.sync();

        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        REQUIRE(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal) == cudaSuccess);
        std::string failed;  // a CUDA call the capture refused: the capture is ended before reporting it
        try {
          cuda_encode(codec, dtype, din.get(), n, dstream.get(), capacity, dsize.get(), scratch.get(), scratch_bytes,
                      opt, s.get());
          cuda_decode(info, dstream.get(), host_stream.size(), dout.get(), bytes, dstatus.get(), s.get());
          cuda_decode_add(info, dstream.get(), host_stream.size(), dacc.get(), bytes,
                          dstatus.get() + info.chunk_count, s.get());
        } catch (const std::exception& e) {
          failed = e.what();
        }
        const cudaError_t captured = cudaStreamEndCapture(s.get(), &graph);
        cudaGetLastError();  // a refused capture leaves its error behind
        INFO(failed);
        REQUIRE(failed.empty());
        INFO(cudaGetErrorString(captured));
        REQUIRE(captured == cudaSuccess);
        REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
        for (int replay = 0; replay < 3; ++replay) {
          CAPTURE(replay);
          COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dstream.get(), 0x5A, capacity, s.get()));
          COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dout.get(), 0xA5, bytes, s.get()));
          COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dsize.get(), 0xFF, sizeof(uint64_t), s.get()));
          COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dstatus.get(), 0xFF, 2 * info.chunk_count * sizeof(int32_t), s.get()));
          to_device(s, dacc.get(), acc0.data(), bytes);
          COMPCOLL_CUDA_CHECK(cudaGraphLaunch(exec, s.get()));
          CHECK(to_host(s, dsize.get(), 1)[0] == host_stream.size());
          CHECK(to_host(s, dstream.get(), host_stream.size()) == host_stream);
          CHECK(to_host(s, dout.get(), bytes) == in);
          CHECK(to_host(s, dacc.get(), bytes) == expect_acc);
          for (const int32_t st : to_host(s, dstatus.get(), 2 * info.chunk_count)) CHECK(st == 0);
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
      }
  set_cuda_encoder(before);
}

TEST_CASE("cuda: every 16-bit pattern, straight and shuffled", "[cuda]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  std::vector<uint8_t> in(65536 * 2);
  for (uint32_t v = 0; v < 65536; ++v) {
    in[2 * v] = static_cast<uint8_t>(v);
    in[2 * v + 1] = static_cast<uint8_t>(v >> 8);
  }
  std::vector<uint8_t> shuffled = in;
  test::SplitMix64 rng{5};
  for (size_t i = 65535; i > 0; --i) {
    const size_t j = rng.next() % (i + 1);
    std::swap(shuffled[2 * i], shuffled[2 * j]);
    std::swap(shuffled[2 * i + 1], shuffled[2 * j + 1]);
  }
  for (CodecId codec : kCodecs)
    for (DType dtype : {DType::BF16, DType::FP16})
      for (uint32_t chunk : {1024u, format::kDefaultChunkElements, format::kMaxChunkElements}) {
        CAPTURE(codec_name(codec), dtype_name(dtype), chunk);
        EncodeOptions opt;
        opt.chunk_elements = chunk;
        check_against_host(s, codec, dtype, in, opt);
        check_against_host(s, codec, dtype, shuffled, opt);
      }
}

TEST_CASE("cuda: fp32 special values and all 256 exponents", "[cuda]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  std::vector<uint32_t> vals = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u,
                                0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7FBFFFFFu,
                                0x00000001u, 0x807FFFFFu, 0x00400000u, 0x7F7FFFFFu};
  test::SplitMix64 rng{11};
  for (uint32_t e = 0; e < 256; ++e)
    for (int k = 0; k < 8; ++k)
      vals.push_back((static_cast<uint32_t>(rng.next() & 1) << 31) | (e << 23) |
                     static_cast<uint32_t>(rng.next() & 0x7FFFFF));
  auto in = test::gaussian_bytes(DType::FP32, 5000, 1.0, 3);
  for (size_t i = 0; i < vals.size(); ++i) std::memcpy(in.data() + 4 * (i * 2), &vals[i], 4);
  for (CodecId codec : kCodecs)
    for (uint32_t chunk : {32u, 1024u, format::kDefaultChunkElements}) {
      CAPTURE(codec_name(codec), chunk);
      EncodeOptions opt;
      opt.chunk_elements = chunk;
      check_against_host(s, codec, DType::FP32, in, opt);
    }
}

TEST_CASE("cuda: constant, all-zero, all-NaN and incompressible inputs", "[cuda]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  for (DType dtype : kDTypes)
    for (CodecId codec : kCodecs) {
      CAPTURE(codec_name(codec), dtype_name(dtype));
      const std::vector<uint8_t> zeros(40000 * dtype_size(dtype), 0);
      check_against_host(s, codec, dtype, zeros);
      const std::vector<uint8_t> nans(1000 * dtype_size(dtype), 0xFF);
      check_against_host(s, codec, dtype, nans);
      // Random bytes: the exponent codecs must fall back to stored chunks, as the host does.
      const size_t n = 100003;
      const auto noise = test::random_bytes(n * dtype_size(dtype), 23);
      check_against_host(s, codec, dtype, noise);
      if (codec != CodecId::Identity) {
        const auto host = encode(codec_of(codec), dtype, noise.data(), n);
        CHECK(host[chunk_bytes_at(host, 0).first] == format::kModeStored);
      }
    }
}

TEST_CASE("cuda: element-aligned input, unaligned stream and output pointers", "[cuda]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  for (DType dtype : kDTypes)
    for (CodecId codec : kCodecs) {
      CAPTURE(codec_name(codec), dtype_name(dtype));
      const size_t n = 3 * 1024 + 5;
      const auto in = test::gaussian_bytes(dtype, n, 0.3, 77);
      EncodeOptions opt;
      opt.chunk_elements = 1024;
      const auto host = encode(codec_of(codec), dtype, in.data(), n, opt);
      // Input one element past a 256-byte boundary: 2-byte aligned for the 16-bit types.
      CHECK(gpu_encode(s, codec, dtype, in, opt, dtype_size(dtype)) == host);
      // The stream at an odd address, the output one element in.
      CHECK(gpu_decode(s, host, dtype, n, 1, 1) == in);
      CHECK(gpu_decode(s, host, dtype, n, 3, 0) == in);
    }
}

TEST_CASE("cuda: bundled real tensors", "[cuda][real]") {
  SKIP_WITHOUT_CUDA();
  const auto files = test::real_tensor_files();
  if (files.empty()) {
    WARN("SKIPPED: no .npy files under " << test::test_data_dir());
    return;
  }
  Stream s;
  for (const auto& f : files) {
    const bool is_bf16 = f.string().find(".bf16.") != std::string::npos;
    for (const TensorData& t :
         load_tensors(f.string(), is_bf16 ? std::optional(DType::BF16) : std::nullopt))
      for (CodecId codec : kCodecs) {
        CAPTURE(t.source, codec_name(codec));
        check_against_host(s, codec, t.dtype, t.bytes);
      }
  }
}

TEST_CASE("cuda: a larger tensor over many chunks and resident waves", "[cuda]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  const size_t n = (size_t{1} << 22) + 777;  // 257 default chunks; 4097 chunks of 1024
  for (DType dtype : {DType::BF16, DType::FP32})
    for (CodecId codec : {CodecId::GaussExp, CodecId::EntropyExp})
      for (uint32_t chunk : {1024u, format::kDefaultChunkElements}) {
        CAPTURE(codec_name(codec), dtype_name(dtype), chunk);
        EncodeOptions opt;
        opt.chunk_elements = chunk;
        check_against_host(s, codec, dtype, test::gaussian_bytes(dtype, n, 0.01, 9), opt);
      }
}

TEST_CASE("cuda: chunks by the stream's size, as the host picks them", "[cuda]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  EncodeOptions opt;
  opt.chunk_elements = format::kAutoChunk;
  for (CodecId codec : kCodecs)
    for (DType dtype : kDTypes) {
      CAPTURE(codec_name(codec), dtype_name(dtype));
      const auto in = test::gaussian_bytes(dtype, 100000, 0.02, 77);  // 25 chunks of 4096
      check_against_host(s, codec, dtype, in, opt);
      const std::vector<uint8_t> gpu = gpu_encode(s, codec, dtype, in, opt);
      CHECK(read_stream_info(gpu.data(), gpu.size()).chunk_elements == 4096);
    }
}

TEST_CASE("cuda: the largest chunks, past the per-warp stage, for every codec and dtype", "[cuda]") {
  // Chunks of 65,536 elements code to more bytes than a warp's shared-memory stage, so the
  // kernels write them straight to global memory: a path the other cases reach only with
  // entropy-exp on 16-bit patterns. Gaussian and heavy-tailed (random bits) inputs.
  SKIP_WITHOUT_CUDA();
  Stream s;
  EncodeOptions opt;
  opt.chunk_elements = format::kMaxChunkElements;
  const size_t n = 3 * size_t{format::kMaxChunkElements} + 1001;
  for (DType dtype : kDTypes)
    for (CodecId codec : kCodecs) {
      CAPTURE(codec_name(codec), dtype_name(dtype));
      check_against_host(s, codec, dtype, test::gaussian_bytes(dtype, n, 0.05, 31), opt);
      check_against_host(s, codec, dtype, test::random_bytes(n * dtype_size(dtype), 37), opt);
    }
}

TEST_CASE("cuda: fp8-hadamard decodes from an unaligned stream into an unaligned output", "[cuda][fp8]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  for (DType dtype : kDTypes) {
    CAPTURE(dtype_name(dtype));
    const size_t n = 3 * 1024 + 5;
    const auto in = test::gaussian_bytes(dtype, n, 0.3, 78);
    EncodeOptions opt;
    opt.chunk_elements = 1024;
    const auto host = encode(fp8_hadamard_codec(), dtype, in.data(), n, opt);
    std::vector<uint8_t> want(in.size(), 0xA5);
    decode(host.data(), host.size(), want.data(), want.size());
    CHECK(gpu_decode(s, host, dtype, n, 1, 1) == want);
    CHECK(gpu_decode(s, host, dtype, n, 3, 0) == want);
  }
}

TEST_CASE("cuda: damaged streams give per-chunk errors, never a crash", "[cuda][bad-input][budget]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  for (CodecId codec : kCodecs)
    for (DType dtype : kDTypes) {
      CAPTURE(codec_name(codec), dtype_name(dtype));
      const size_t n = 3000;  // chunks of 1024, 1024, 952
      const auto in = test::gaussian_bytes(dtype, n, 0.5, 31);
      EncodeOptions opt;
      opt.chunk_elements = 1024;
      const auto stream = encode(codec_of(codec), dtype, in.data(), n, opt);
      const StreamInfo info = read_stream_info(stream.data(), stream.size());
      REQUIRE(info.chunk_count == 3);
      CHECK(gpu_statuses(s, info, stream) == std::vector<int32_t>{0, 0, 0});
      // What the receiver expects, no header read back: the same; a header byte that differs
      // from it (codec, elements, payload size): every chunk says so.
      const StreamInfo expect = expected_stream_info(codec_of(codec), dtype, n, opt, stream.size());
      CHECK(gpu_statuses(s, expect, stream) == std::vector<int32_t>{0, 0, 0});
      // A stream sent within a wire budget (real/executor.h): the receiver knows only the
      // budget (expected_stream_info with `within`), the stream's own header says where it
      // ends, as the host's decode() reads a stream followed by bytes it does not own (also
      // past the longest stream the codec writes: identity's streams are that long). Without
      // `within` the same bytes are a stream whose header disagrees with its size (or one no
      // stream can have: refused on the host); cut 40 bytes short (a stream that outgrew its
      // budget), every chunk says so.
      auto padded = stream;
      padded.resize(stream.size() + 100, 0xA7);
      const StreamInfo within = expected_stream_info(codec_of(codec), dtype, n, opt, padded.size(), true);
      {
        DeviceBuffer<uint8_t> din(padded.size()), dout(in.size());
        DeviceBuffer<int32_t> dstatus(within.chunk_count);
        to_device(s, din.get(), padded.data(), padded.size());
        cuda_decode(within, din.get(), padded.size(), dout.get(), in.size(), dstatus.get(), s.get());
        CHECK(to_host(s, dstatus.get(), within.chunk_count) == std::vector<int32_t>{0, 0, 0});
        CHECK(to_host(s, dout.get(), in.size()) == in);
      }
      if (padded.size() > max_encoded_size(codec_of(codec), dtype, n, opt)) {
        CHECK_THROWS_AS(expected_stream_info(codec_of(codec), dtype, n, opt, padded.size()), CodecError);
      } else {
        const StreamInfo padded_exact = expected_stream_info(codec_of(codec), dtype, n, opt, padded.size());
        for (const int32_t st : gpu_statuses(s, padded_exact, padded)) CHECK(kind_of(st) == CudaChunkStatus::BadHeader);
      }
      const std::vector<uint8_t> short_of(stream.begin(), stream.end() - 40);
      const StreamInfo short_info = expected_stream_info(codec_of(codec), dtype, n, opt, short_of.size(), true);
      for (const int32_t st : gpu_statuses(s, short_info, short_of)) CHECK(kind_of(st) == CudaChunkStatus::Truncated);
      for (const uint32_t at : {format::kOffCodec, format::kOffElements, format::kOffPayloadBytes}) {
        CAPTURE(at);
        auto wrong = stream;
        wrong[at] ^= 0x01;
        for (const int32_t st : gpu_statuses(s, expect, wrong)) CHECK(kind_of(st) == CudaChunkStatus::BadHeader);
      }
      // The last chunk's end below the payload (a stream read_stream_info refuses; with the
      // expected info no host reads the table): the last chunk says so.
      {
        auto short_end = stream;
        const size_t last = format::kHeaderBytes + format::kOffsetEntryBytes * 2;
        format::store_u64(short_end.data() + last, format::load_u64(stream.data() + last) - 4);
        CHECK_THROWS_AS(read_stream_info(short_end.data(), short_end.size()), CodecError);
        const auto st = gpu_statuses(s, expect, short_end);
        CHECK(kind_of(st[2]) == CudaChunkStatus::BadOffsets);
      }
      const uint64_t end0 = format::load_u64(stream.data() + format::kHeaderBytes);

      // Truncated chunk offsets: chunk 0 loses its last word, chunk 1 gains it.
      auto bad = stream;
      format::store_u64(bad.data() + format::kHeaderBytes, end0 - 4);
      auto st = gpu_statuses(s, info, bad);
      CHECK(kind_of(st[0]) != CudaChunkStatus::Ok);
      CHECK(kind_of(st[1]) != CudaChunkStatus::Ok);
      CHECK(st[2] == 0);
      // An offset out of order / beyond the payload: chunks 1 and 2 out of range.
      bad = stream;
      format::store_u64(bad.data() + format::kHeaderBytes + 8, info.payload_bytes + 4);
      st = gpu_statuses(s, info, bad);
      CHECK(st[0] == 0);
      CHECK(kind_of(st[1]) == CudaChunkStatus::BadOffsets);
      CHECK(kind_of(st[2]) == CudaChunkStatus::BadOffsets);
      // An unaligned offset.
      bad = stream;
      format::store_u64(bad.data() + format::kHeaderBytes, end0 - 2);
      st = gpu_statuses(s, info, bad);
      CHECK(kind_of(st[0]) == CudaChunkStatus::BadOffsets);
      CHECK(kind_of(st[1]) == CudaChunkStatus::BadOffsets);
      // The stream cut short: the host-side checks refuse it.
      std::vector<uint8_t> cut(stream.begin(), stream.end() - 4);
      CHECK_THROWS_AS(gpu_decode(s, cut, dtype, n), CodecError);
      {
        DeviceBuffer<uint8_t> din(cut.size());
        DeviceBuffer<uint8_t> dout(in.size());
        DeviceBuffer<int32_t> dstatus(3);
        to_device(s, din.get(), cut.data(), cut.size());
        CHECK_THROWS_AS(cuda_decode(info, din.get(), cut.size(), dout.get(), dout.count(),
                                    dstatus.get(), s.get()),
                        CodecError);
        CHECK_THROWS_AS(cuda_decode(info, din.get(), cut.size(), dout.get(), in.size() - 1,
                                    dstatus.get(), s.get()),
                        CodecError);
      }

      if (codec == CodecId::Identity) {
        // A sound chunk after a damaged one, which the table places 4 bytes before its fixed
        // place (chunk 0 one word short, chunk 1 of its right size): decoded, and added, from
        // where the table says, as the host reads it. Four chunks, so that the payload starts
        // 16-byte aligned (32 + 8 * 4 bytes in), where the decoder loads the chunks' first batch
        // from their fixed places before it reads the table.
        const size_t n4 = 4000;
        const auto in4 = test::gaussian_bytes(dtype, n4, 0.5, 37);
        const auto stream4 = encode(codec_of(codec), dtype, in4.data(), n4, opt);
        const StreamInfo info4 = read_stream_info(stream4.data(), stream4.size());
        REQUIRE(info4.chunk_count == 4);
        REQUIRE((format::kHeaderBytes + format::kOffsetEntryBytes * 4) % 16 == 0);
        auto moved = stream4;
        for (const size_t entry : {size_t{0}, size_t{1}}) {
          const size_t at = format::kHeaderBytes + format::kOffsetEntryBytes * entry;
          format::store_u64(moved.data() + at, format::load_u64(stream4.data() + at) - 4);
        }
        const size_t chunk_bytes = 1024 * dtype_size(dtype);
        const std::vector<uint8_t> sent(in4.begin() + chunk_bytes - 4, in4.begin() + 2 * chunk_bytes - 4);
        std::vector<uint8_t> summed(in4.begin() + chunk_bytes, in4.begin() + 2 * chunk_bytes);
        reduce_add(dtype, summed.data(), sent.data(), 1024);
        DeviceBuffer<uint8_t> din(moved.size()), dout(in4.size());
        DeviceBuffer<int32_t> dstatus(4);
        to_device(s, din.get(), moved.data(), moved.size());
        for (const bool add : {false, true}) {
          CAPTURE(add);
          to_device(s, dout.get(), in4.data(), in4.size());
          if (add)
            cuda_decode_add(info4, din.get(), moved.size(), dout.get(), in4.size(), dstatus.get(), s.get());
          else
            cuda_decode(info4, din.get(), moved.size(), dout.get(), in4.size(), dstatus.get(), s.get());
          // Chunk 2 starts where chunk 1 ends, one word early: it is one word too long.
          const auto mismatch = static_cast<int32_t>(CudaChunkStatus::SizeMismatch);
          CHECK(to_host(s, dstatus.get(), 4) == std::vector<int32_t>{mismatch, 0, mismatch, 0});
          const auto out = to_host(s, dout.get(), in4.size());
          CHECK(std::vector<uint8_t>(out.begin() + chunk_bytes, out.begin() + 2 * chunk_bytes) ==
                (add ? summed : sent));
        }
        continue;
      }
      const uint64_t begin1 = chunk_bytes_at(stream, 1).first;
      REQUIRE(stream[begin1] == format::kModeCoded);
      const uint32_t table_bytes =
          codec == CodecId::EntropyExp
              ? expbits::ChunkLayout<expbits::Bf16Layout>::table_bytes_entropy(stream[begin1 + 1] +
                                                                               1u)
              : 0;
      // A flipped lane table entry: chunk 1's size no longer matches.
      bad = stream;
      bad[begin1 + format::kChunkHeaderBytes + table_bytes + 2 * 5] ^= 0x04;
      st = gpu_statuses(s, info, bad);
      CHECK(st[0] == 0);
      CHECK(kind_of(st[1]) == CudaChunkStatus::SizeMismatch);
      CHECK(st[2] == 0);
      try {
        gpu_decode(s, bad, dtype, n);
        FAIL("no CodecError for a flipped lane table");
      } catch (const CodecError& e) {
        CHECK(std::string(e.what()).find("chunk 1 ") != std::string::npos);
        CHECK(e.byte_offset() == begin1);
      }
      // Mode and reserved header bytes.
      bad = stream;
      bad[begin1] = 7;
      CHECK(kind_of(gpu_statuses(s, info, bad)[1]) == CudaChunkStatus::BadMode);
      bad = stream;
      bad[begin1 + 3] = 1;
      CHECK(kind_of(gpu_statuses(s, info, bad)[1]) == CudaChunkStatus::ReservedBytes);
      // Lane data that decodes wrongly: trailing garbage in lane 0's last word, or a lane word
      // moved between two lanes (sizes still add up).
      bad = stream;
      const uint32_t words0 =
          format::load_u16(stream.data() + begin1 + format::kChunkHeaderBytes + table_bytes);
      REQUIRE(words0 > 1);
      bad[begin1 + format::kChunkHeaderBytes + table_bytes] -= 1;      // lane 0 one word shorter
      bad[begin1 + format::kChunkHeaderBytes + table_bytes + 2] += 1;  // lane 1 one longer
      st = gpu_statuses(s, info, bad);
      CHECK(st[0] == 0);
      CHECK(kind_of(st[1]) >= CudaChunkStatus::LaneBadCode);
      CHECK(st[2] == 0);
      CHECK_THROWS_AS(
          decode(bad.data(), bad.size(), std::vector<uint8_t>(in.size()).data(), in.size()),
          CodecError);

      if (codec != CodecId::EntropyExp) continue;
      const uint32_t nsyms = stream[begin1 + 1] + 1u;
      REQUIRE(nsyms >= 3);
      const size_t entry0 = begin1 + format::kChunkHeaderBytes;
      for (uint8_t length : {uint8_t{0}, uint8_t{13}}) {  // bad code table lengths
        bad = stream;
        bad[entry0 + 1] = length;
        CHECK(kind_of(gpu_statuses(s, info, bad)[1]) == CudaChunkStatus::BadCodeTable);
      }
      bad = stream;  // symbols out of order
      std::swap(bad[entry0], bad[entry0 + 2]);
      CHECK(kind_of(gpu_statuses(s, info, bad)[1]) == CudaChunkStatus::BadCodeTable);
      bad = stream;  // every length 1: over-full code
      for (uint32_t i = 0; i < nsyms; ++i) bad[entry0 + 2 * i + 1] = 1;
      CHECK(kind_of(gpu_statuses(s, info, bad)[1]) == CudaChunkStatus::KraftViolation);
      bad = stream;  // more symbols than fp16 has exponents; elsewhere a table of garbage
      bad[begin1 + 1] = 255;
      st = gpu_statuses(s, info, bad);
      if (dtype == DType::FP16)
        CHECK(kind_of(st[1]) == CudaChunkStatus::BadSymbolCount);
      else
        CHECK(kind_of(st[1]) != CudaChunkStatus::Ok);
    }
}

TEST_CASE("cuda: bit flips are caught or decoded exactly as the host does", "[cuda][bad-input]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  for (CodecId codec : kCodecs)
    for (DType dtype : kDTypes)
      for (const size_t n : {size_t{3000}, size_t{4000}}) {
        // 3 and 4 chunks: the payload starts 8 and 0 bytes past a 16-byte boundary, which
        // identity's decoder reads differently (the other codecs alike: once is enough).
        if (n == 4000 && codec != CodecId::Identity) continue;
        CAPTURE(codec_name(codec), dtype_name(dtype), n);
        const auto in = test::gaussian_bytes(dtype, n, 0.5, 31);
        EncodeOptions opt;
        opt.chunk_elements = 1024;
        const auto stream = encode(codec_of(codec), dtype, in.data(), n, opt);
        size_t caught = 0;
        for (size_t byte = 0; byte < stream.size(); byte += 13) {
          auto bad = stream;
          bad[byte] ^= static_cast<uint8_t>(1u << (byte % 8));
          CAPTURE(byte);
          std::vector<uint8_t> host_out(in.size());
          std::optional<uint64_t> host_error;
          try {
            decode(bad.data(), bad.size(), host_out.data(), host_out.size());
          } catch (const CodecError& e) {
            host_error = e.byte_offset();
          }
          try {
            const auto gpu_out = gpu_decode(s, bad, dtype, n);
            CHECK_FALSE(host_error.has_value());
            CHECK(gpu_out == host_out);
          } catch (const CodecError& e) {
            ++caught;
            REQUIRE(host_error.has_value());
            CHECK(e.byte_offset() == *host_error);  // the same first bad chunk (or header field)
          }
        }
        CHECK(caught > 0);
      }
}

TEST_CASE("cuda: gauss-exp chunks whose reference exponent leaves short codes no exponent", "[cuda][bad-input]") {
  // A damaged chunk header's reference near either end of the exponent range: the likeliest
  // codes, which the decoder takes two at a time, then stand for exponents out of range, and the
  // GPU must reject the chunk the host rejects.
  SKIP_WITHOUT_CUDA();
  Stream s;
  for (DType dtype : kDTypes) {
    const size_t n = 5000;
    const auto in = test::gaussian_bytes(dtype, n, 0.05, 41);
    EncodeOptions opt;
    opt.chunk_elements = 1024;
    const auto stream = encode(codec_of(CodecId::GaussExp), dtype, in.data(), n, opt);
    const uint32_t top = dtype == DType::FP16 ? 31 : 255;
    for (const uint32_t ref : {1u, 2u, top - 3, top - 1})
      for (uint32_t c = 0; c < 5; ++c) {
        CAPTURE(dtype_name(dtype), ref, c);
        auto bad = stream;
        const uint64_t at = chunk_bytes_at(bad, c).first;
        if (bad[at] != format::kModeCoded) continue;
        bad[at + 1] = static_cast<uint8_t>(ref);
        std::optional<uint64_t> host_error;
        std::vector<uint8_t> host_out(in.size());
        try {
          decode(bad.data(), bad.size(), host_out.data(), host_out.size());
        } catch (const CodecError& e) {
          host_error = e.byte_offset();
        }
        REQUIRE(host_error.has_value());
        try {
          (void)gpu_decode(s, bad, dtype, n);
          FAIL("the GPU decoded a chunk the host rejects");
        } catch (const CodecError& e) {
          CHECK(e.byte_offset() == *host_error);  // the same first bad chunk
        }
      }
  }
}


// ---- fp8-hadamard (lossy): GPU streams and GPU decodes bit-identical to the host's ------------

namespace {

// Host encode vs GPU encode (byte-identical), and GPU decode vs host decode of the same stream
// (bit-identical: the decode is lossy, so the reference is the host's output, not the input).
void check_fp8_against_host(const Stream& s, const Fp8HadamardParams& params, DType dtype,
                            const std::vector<uint8_t>& in, const EncodeOptions& opt = {}) {
  const uint64_t n = in.size() / dtype_size(dtype);
  const Codec& codec = fp8_hadamard_codec(params);
  const std::vector<uint8_t> host = encode(codec, dtype, in.data(), n, opt);
  DeviceBuffer<uint8_t> din(in.size() + 1);
  to_device(s, din.get(), in.data(), in.size());
  const size_t capacity = max_encoded_size(codec, dtype, n, opt);
  DeviceBuffer<uint8_t> dout(capacity);
  COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dout.get(), 0x5A, capacity, s.get()));
  DeviceBuffer<uint64_t> dsize(1);
  const size_t scratch_bytes = cuda_encode_scratch_bytes(CodecId::Fp8Hadamard, dtype, n, opt);
  DeviceBuffer<uint8_t> scratch(scratch_bytes);
  cuda_encode_fp8_hadamard(params, dtype, n > 0 ? din.get() : nullptr, n, dout.get(), capacity,
                           dsize.get(), scratch.get(), scratch_bytes, opt, s.get());
  const uint64_t size = to_host(s, dsize.get(), 1)[0];
  REQUIRE(size <= capacity);
  const std::vector<uint8_t> gpu = to_host(s, dout.get(), size);
  CHECK(gpu == host);
  std::vector<uint8_t> want(in.size(), 0xA5);
  decode(host.data(), host.size(), want.data(), want.size());
  CHECK(gpu_decode(s, host, dtype, n) == want);
}

}  // namespace

TEST_CASE("cuda: fp8-hadamard encode and decode are bit-identical to the host", "[cuda][fp8]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  const uint32_t chunk = GENERATE(32u, 1024u, format::kDefaultChunkElements);
  EncodeOptions opt;
  opt.chunk_elements = chunk;
  const std::vector<size_t> sizes = {0,   1,   5,   31,  32,        33,    65,       127,
                                     128, 129, 513, chunk - 1, chunk, chunk + 1, 3 * size_t{chunk} + 17};
  for (Fp8Format fmt : {Fp8Format::E4M3, Fp8Format::E5M2})
    for (uint32_t g : {32u, 128u, 512u})
      for (DType dtype : kDTypes)
        for (size_t n : sizes) {
          CAPTURE(fp8_hadamard_name({g, fmt}), dtype_name(dtype), chunk, n);
          check_fp8_against_host(s, {g, fmt}, dtype, test::gaussian_bytes(dtype, n, 0.02, 700 + n), opt);
        }
  // The default codec through the plain entry point, and special inputs: zeros, NaN chunks,
  // random bit patterns (non-finite chunks stored, extreme finite ones saturating).
  for (DType dtype : kDTypes) {
    CAPTURE(dtype_name(dtype));
    check_fp8_against_host(s, {}, dtype, std::vector<uint8_t>(40000 * dtype_size(dtype), 0));
    check_fp8_against_host(s, {}, dtype, std::vector<uint8_t>(1000 * dtype_size(dtype), 0xFF));
    check_fp8_against_host(s, {}, dtype, test::random_bytes(100003 * dtype_size(dtype), 23));
    const auto in = test::gaussian_bytes(dtype, 50000, 1.0, 5);
    CHECK(gpu_encode(s, CodecId::Fp8Hadamard, dtype, in) ==
          encode(fp8_hadamard_codec(), dtype, in.data(), 50000));
  }
}

TEST_CASE("cuda: fp8-hadamard damaged chunks give the host's errors", "[cuda][fp8][bad-input]") {
  CHECK(cuda_chunk_status_message(static_cast<int32_t>(CudaChunkStatus::Fp8BadScale) | (7 << 8)) ==
        "group 7: scale is negative or not finite");
  SKIP_WITHOUT_CUDA();
  Stream s;
  const auto in = test::gaussian_bytes(DType::BF16, 3000, 1.0, 4);
  EncodeOptions opt;
  opt.chunk_elements = 1024;
  const auto stream = encode(fp8_hadamard_codec({64}), DType::BF16, in.data(), 3000, opt);
  const StreamInfo info = read_stream_info(stream.data(), stream.size());
  const uint64_t at = chunk_bytes_at(stream, 1).first;
  const std::pair<uint64_t, CudaChunkStatus> edits[] = {
      {at, CudaChunkStatus::BadMode},           {at + 1, CudaChunkStatus::Fp8BadHeader},
      {at + 2, CudaChunkStatus::Fp8BadHeader},  {at + 3, CudaChunkStatus::Fp8BadHeader},
      {at + 4 + 8 * 3 + 3, CudaChunkStatus::Fp8BadScale}};
  for (const auto& [byte, want] : edits) {
    auto bad = stream;
    bad[byte] ^= 0xF0;
    CAPTURE(byte);
    const auto st = gpu_statuses(s, info, bad);
    CHECK(st[0] == 0);
    CHECK(kind_of(st[1]) == want);
    CHECK(st[2] == 0);
    std::vector<uint8_t> out(in.size());
    CHECK_THROWS_AS(decode(bad.data(), bad.size(), out.data(), out.size()), CodecError);
  }
}

// ---- batches ----------------------------------------------------------------------------------

namespace {

// Messages of a batch laid out as a collective's blocks are: the inputs one after another in
// one buffer (element aligned, not more), each stream in a 16-byte aligned slot of its own in
// another.
struct BatchBuffers {
  std::vector<uint64_t> elements;
  std::vector<size_t> in_at, slot_at, capacity;
  size_t in_bytes = 0, slot_bytes = 0;
};

BatchBuffers batch_layout(CodecId codec, DType dtype, const std::vector<uint64_t>& elements, const EncodeOptions& opt) {
  BatchBuffers b;
  b.elements = elements;
  for (const uint64_t n : elements) {
    b.in_at.push_back(b.in_bytes);
    b.in_bytes += n * dtype_size(dtype);
    const size_t cap = max_encoded_size(codec_of(codec), dtype, n, opt);
    b.slot_at.push_back(b.slot_bytes);
    b.capacity.push_back(cap);
    b.slot_bytes += format::align_up64(cap, 16);
  }
  return b;
}

// Encodes the messages (whose bytes lie in `in`, laid out as b) with cuda_encode_batch; the
// streams, each as long as its size says. Outputs, sizes and scratch start out as garbage.
std::vector<std::vector<uint8_t>> gpu_encode_batch(const Stream& s, CodecId codec, DType dtype, const BatchBuffers& b,
                                                   const std::vector<uint8_t>& in, const EncodeOptions& opt) {
  const size_t count = b.elements.size();
  DeviceBuffer<uint8_t> din(b.in_bytes + 1), dout(b.slot_bytes + 1);
  DeviceBuffer<uint64_t> dsize(count + 1);
  to_device(s, din.get(), in.data(), in.size());
  COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dout.get(), 0x5A, dout.count(), s.get()));
  COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dsize.get(), 0xFF, dsize.count() * sizeof(uint64_t), s.get()));
  const size_t scratch_bytes = cuda_encode_batch_scratch_bytes(codec, dtype, b.elements.data(), count, opt);
  DeviceBuffer<uint8_t> scratch(scratch_bytes);
  if (scratch_bytes > 0) COMPCOLL_CUDA_CHECK(cudaMemsetAsync(scratch.get(), 0xC3, scratch_bytes, s.get()));
  std::vector<CudaEncodeItem> items;
  for (size_t i = 0; i < count; ++i)
    items.push_back({b.elements[i] > 0 ? din.get() + b.in_at[i] : nullptr, b.elements[i], dout.get() + b.slot_at[i],
                     b.capacity[i], dsize.get() + i});
  cuda_encode_batch(codec, dtype, items.data(), count, scratch.get(), scratch_bytes, opt, s.get());
  const std::vector<uint64_t> sizes = to_host(s, dsize.get(), count);
  const std::vector<uint8_t> all = to_host(s, dout.get(), dout.count());
  std::vector<std::vector<uint8_t>> streams;
  for (size_t i = 0; i < count; ++i) {
    REQUIRE(sizes[i] <= b.capacity[i]);
    streams.emplace_back(all.begin() + static_cast<ptrdiff_t>(b.slot_at[i]),
                         all.begin() + static_cast<ptrdiff_t>(b.slot_at[i] + sizes[i]));
  }
  return streams;
}

struct BatchDecoded {
  std::vector<std::vector<uint8_t>> out;
  std::vector<std::vector<int32_t>> status;
};

// Decodes host streams (their infos as the receiver expects them) with cuda_decode_batch, each
// stream `skew` bytes into a 16-byte slot (any alignment), each output into its own buffer.
BatchDecoded gpu_decode_batch(const Stream& s, const std::vector<std::vector<uint8_t>>& streams,
                              const std::vector<StreamInfo>& infos, size_t skew) {
  const size_t count = streams.size();
  size_t slot_bytes = 0, out_bytes = 0, chunks = 0;
  std::vector<size_t> slot_at, out_at, status_at;
  for (size_t i = 0; i < count; ++i) {
    slot_at.push_back(slot_bytes + skew);
    slot_bytes += format::align_up64(streams[i].size() + skew, 16);
    out_at.push_back(out_bytes);
    out_bytes += format::align_up64(infos[i].elements * dtype_size(infos[i].dtype), 16);
    status_at.push_back(chunks);
    chunks += infos[i].chunk_count;
  }
  DeviceBuffer<uint8_t> din(slot_bytes + 1), dout(out_bytes + 1);
  DeviceBuffer<int32_t> dstatus(chunks + 1);
  for (size_t i = 0; i < count; ++i) to_device(s, din.get() + slot_at[i], streams[i].data(), streams[i].size());
  COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dout.get(), 0xA5, dout.count(), s.get()));
  COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dstatus.get(), 0x7F, dstatus.count() * sizeof(int32_t), s.get()));
  std::vector<CudaDecodeItem> items;
  for (size_t i = 0; i < count; ++i)
    items.push_back({infos[i], din.get() + slot_at[i], streams[i].size(), dout.get() + out_at[i],
                     infos[i].elements * dtype_size(infos[i].dtype), dstatus.get() + status_at[i]});
  cuda_decode_batch(items.data(), count, s.get());
  const std::vector<uint8_t> out = to_host(s, dout.get(), dout.count());
  const std::vector<int32_t> status = to_host(s, dstatus.get(), dstatus.count());
  BatchDecoded d;
  for (size_t i = 0; i < count; ++i) {
    const size_t bytes = infos[i].elements * dtype_size(infos[i].dtype);
    d.out.emplace_back(out.begin() + static_cast<ptrdiff_t>(out_at[i]),
                       out.begin() + static_cast<ptrdiff_t>(out_at[i] + bytes));
    d.status.emplace_back(status.begin() + static_cast<ptrdiff_t>(status_at[i]),
                          status.begin() + static_cast<ptrdiff_t>(status_at[i] + infos[i].chunk_count));
  }
  return d;
}

}  // namespace

TEST_CASE("cuda: a batch codes each message as a call of its own would", "[cuda][batch]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  EncodeOptions opt;
  opt.chunk_elements = 1024;
  // 19 messages: a group of cuda_batch_messages() and one of 3, empty ones and ones of one
  // element among them, chunk counts 0 to 5.
  REQUIRE(cuda_batch_messages() == 16);
  test::SplitMix64 rng{777};
  std::vector<uint64_t> elements = {0, 1, 3000, 1024, 0};
  while (elements.size() < 19) elements.push_back(rng.next() % 5000);
  for (const CodecId codec : {CodecId::Identity, CodecId::GaussExp, CodecId::EntropyExp, CodecId::Fp8Hadamard})
    for (const DType dtype : kDTypes) {
      CAPTURE(codec_name(codec), dtype_name(dtype));
      const BatchBuffers b = batch_layout(codec, dtype, elements, opt);
      uint64_t total = 0;
      for (const uint64_t n : elements) total += n;
      const auto in = test::gaussian_bytes(dtype, total, 0.02, 900 + static_cast<int>(codec));
      const auto streams = gpu_encode_batch(s, codec, dtype, b, in, opt);
      std::vector<std::vector<uint8_t>> host;
      std::vector<StreamInfo> infos;
      for (size_t i = 0; i < elements.size(); ++i) {
        CAPTURE(i, elements[i]);
        host.push_back(encode(codec_of(codec), dtype, in.data() + b.in_at[i], elements[i], opt));
        CHECK(streams[i] == host.back());
        infos.push_back(expected_stream_info(codec_of(codec), dtype, elements[i], opt, host.back().size()));
      }
      for (const size_t skew : {size_t{0}, size_t{3}}) {
        CAPTURE(skew);
        const BatchDecoded d = gpu_decode_batch(s, host, infos, skew);
        for (size_t i = 0; i < elements.size(); ++i) {
          CAPTURE(i, elements[i]);
          std::vector<uint8_t> expect(elements[i] * dtype_size(dtype));
          decode(host[i].data(), host[i].size(), expect.data(), expect.size());
          CHECK(d.out[i] == expect);
          CHECK(d.status[i] == std::vector<int32_t>(infos[i].chunk_count, 0));
        }
      }
    }
}

TEST_CASE("cuda: a batch's messages may differ in chunk size; one damaged message fails alone",
          "[cuda][batch][bad-input]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  for (const CodecId codec : kCodecs)
    for (const DType dtype : kDTypes) {
      CAPTURE(codec_name(codec), dtype_name(dtype));
      std::vector<std::vector<uint8_t>> streams, inputs;
      std::vector<StreamInfo> infos;
      for (const uint32_t chunk : {1024u, 4096u, 32u}) {
        EncodeOptions opt;
        opt.chunk_elements = chunk;
        const uint64_t n = 3000;
        inputs.push_back(test::gaussian_bytes(dtype, n, 0.5, 60 + chunk));
        streams.push_back(encode(codec_of(codec), dtype, inputs.back().data(), n, opt));
        infos.push_back(read_stream_info(streams.back().data(), streams.back().size()));
      }
      // Message 0's chunk 1 damaged: its second half's bytes flipped (identity, whose bytes are
      // all elements: its offset table entry a word short).
      auto damaged = streams;
      if (codec == CodecId::Identity) {
        const size_t entry = format::kHeaderBytes + format::kOffsetEntryBytes;
        format::store_u64(damaged[0].data() + entry, format::load_u64(streams[0].data() + entry) - 4);
      } else {
        const auto [begin, end] = chunk_bytes_at(streams[0], 1);
        for (uint64_t at = (begin + end) / 2; at < end; ++at) damaged[0][at] ^= 0x5A;
      }
      const std::vector<int32_t> alone = gpu_statuses(s, infos[0], damaged[0]);
      CHECK(alone[0] == 0);
      CHECK(alone[1] != 0);
      const BatchDecoded d = gpu_decode_batch(s, damaged, infos, 1);
      CHECK(d.status[0] == alone);
      for (size_t i = 1; i < streams.size(); ++i) {
        CAPTURE(i);
        CHECK(d.status[i] == std::vector<int32_t>(infos[i].chunk_count, 0));
        CHECK(d.out[i] == inputs[i]);
      }
    }
}

TEST_CASE("cuda: a batch's argument errors name the message", "[cuda][batch][bad-input]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  const DType dtype = DType::BF16;
  EncodeOptions opt;
  opt.chunk_elements = 1024;
  const std::vector<uint64_t> elements = {100, 20000, 50};
  const BatchBuffers b = batch_layout(CodecId::GaussExp, dtype, elements, opt);
  DeviceBuffer<uint8_t> din(b.in_bytes), dout(b.slot_bytes);
  DeviceBuffer<uint64_t> dsize(3);
  const size_t scratch_bytes = cuda_encode_batch_scratch_bytes(CodecId::GaussExp, dtype, elements.data(), 3, opt);
  DeviceBuffer<uint8_t> scratch(scratch_bytes);
  std::vector<CudaEncodeItem> items;
  for (size_t i = 0; i < 3; ++i)
    items.push_back({din.get() + b.in_at[i], elements[i], dout.get() + b.slot_at[i], b.capacity[i], dsize.get() + i});
  // The scratch of three messages is more than that of the largest alone: one scan covers them.
  CHECK(scratch_bytes > cuda_encode_scratch_bytes(CodecId::GaussExp, dtype, 20000, opt));
  auto bad = items;
  bad[2].out_size_dev = nullptr;
  CHECK_THROWS_WITH(cuda_encode_batch(CodecId::GaussExp, dtype, bad.data(), 3, scratch.get(), scratch_bytes, opt, s.get()),
                    Catch::Contains("message 2") && Catch::Contains("out_size_dev"));
  bad = items;
  bad[1].out_capacity = 10;
  CHECK_THROWS_WITH(cuda_encode_batch(CodecId::GaussExp, dtype, bad.data(), 3, scratch.get(), scratch_bytes, opt, s.get()),
                    Catch::Contains("message 1") && Catch::Contains("capacity"));
  CHECK_THROWS_WITH(
      cuda_encode_batch(CodecId::GaussExp, dtype, items.data(), 3, scratch.get(), scratch_bytes - 1, opt, s.get()),
      Catch::Contains("scratch"));
  // Decoding: a stream of another codec in the batch, and a stream too short for its info.
  std::vector<std::vector<uint8_t>> host;
  const auto in = test::gaussian_bytes(dtype, 20150, 0.02, 5);
  std::vector<CudaDecodeItem> ditems;
  DeviceBuffer<int32_t> dstatus(8);
  for (size_t i = 0; i < 3; ++i) {
    const CodecId codec = i == 1 ? CodecId::EntropyExp : CodecId::GaussExp;
    host.push_back(encode(codec_of(codec), dtype, in.data() + b.in_at[i], elements[i], opt));
    ditems.push_back({read_stream_info(host[i].data(), host[i].size()), dout.get() + b.slot_at[i], host[i].size(),
                      din.get() + b.in_at[i], elements[i] * 2, dstatus.get() + 2 * i});
  }
  CHECK_THROWS_WITH(cuda_decode_batch(ditems.data(), 3, s.get()),
                    Catch::Contains("message 1") && Catch::Contains("one codec and dtype"));
  ditems[1] = ditems[0];
  ditems[2].stream_bytes = 20;
  CHECK_THROWS_WITH(cuda_decode_batch(ditems.data(), 3, s.get()), Catch::Contains("message 2"));
  s.sync();
}

TEST_CASE("cuda: a batch's encode and decode captured in a CUDA graph, replayed", "[cuda][batch][graph]") {
  SKIP_WITHOUT_CUDA();
  Stream s;
  for (const CodecId codec : kCodecs) {
    CAPTURE(codec_name(codec));
    const DType dtype = DType::BF16;
    const EncodeOptions opt;
    const std::vector<uint64_t> elements = {5000, 0, 7001};
    const BatchBuffers b = batch_layout(codec, dtype, elements, opt);
    const auto in = test::gaussian_bytes(dtype, 12001, 0.02, 47);
    std::vector<std::vector<uint8_t>> host;
    std::vector<StreamInfo> infos;
    size_t chunks = 0;
    for (size_t i = 0; i < 3; ++i) {
      host.push_back(encode(codec_of(codec), dtype, in.data() + b.in_at[i], elements[i], opt));
      infos.push_back(expected_stream_info(codec_of(codec), dtype, elements[i], opt, host[i].size()));
      chunks += infos[i].chunk_count;
    }
    const size_t scratch_bytes = cuda_encode_batch_scratch_bytes(codec, dtype, elements.data(), 3, opt);
    DeviceBuffer<uint8_t> din(b.in_bytes), dstreams(b.slot_bytes), dout(b.in_bytes), scratch(scratch_bytes);
    DeviceBuffer<uint64_t> dsize(3);
    DeviceBuffer<int32_t> dstatus(chunks);
    to_device(s, din.get(), in.data(), in.size());
    std::vector<CudaEncodeItem> enc;
    std::vector<CudaDecodeItem> dec;
    size_t status_at = 0;
    for (size_t i = 0; i < 3; ++i) {
      uint8_t* in_i = elements[i] > 0 ? din.get() + b.in_at[i] : nullptr;
      uint8_t* out_i = elements[i] > 0 ? dout.get() + b.in_at[i] : nullptr;
      enc.push_back({in_i, elements[i], dstreams.get() + b.slot_at[i], b.capacity[i], dsize.get() + i});
      dec.push_back({infos[i], dstreams.get() + b.slot_at[i], host[i].size(), out_i, elements[i] * 2,
                     infos[i].chunk_count > 0 ? dstatus.get() + status_at : nullptr});
      status_at += infos[i].chunk_count;
    }
    s.sync();
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    std::string failed;
    try {
      cuda_encode_batch(codec, dtype, enc.data(), 3, scratch.get(), scratch_bytes, opt, s.get());
      cuda_decode_batch(dec.data(), 3, s.get());
    } catch (const std::exception& e) {
      failed = e.what();
    }
    const cudaError_t captured = cudaStreamEndCapture(s.get(), &graph);
    cudaGetLastError();
    INFO(failed);
    REQUIRE(failed.empty());
    REQUIRE(captured == cudaSuccess);
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    for (int replay = 0; replay < 2; ++replay) {
      CAPTURE(replay);
      COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dstreams.get(), 0x5A, b.slot_bytes, s.get()));
      COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dout.get(), 0xA5, b.in_bytes, s.get()));
      COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dstatus.get(), 0xFF, chunks * sizeof(int32_t), s.get()));
      COMPCOLL_CUDA_CHECK(cudaGraphLaunch(exec, s.get()));
      const auto sizes = to_host(s, dsize.get(), 3);
      const auto streams = to_host(s, dstreams.get(), b.slot_bytes);
      for (size_t i = 0; i < 3; ++i) {
        CAPTURE(i);
        CHECK(sizes[i] == host[i].size());
        CHECK(std::equal(host[i].begin(), host[i].end(), streams.begin() + static_cast<ptrdiff_t>(b.slot_at[i])));
      }
      CHECK(to_host(s, dout.get(), b.in_bytes) == in);
      for (const int32_t st : to_host(s, dstatus.get(), chunks)) CHECK(st == 0);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
}


#endif  // COMPCOLL_HAVE_CUDA
