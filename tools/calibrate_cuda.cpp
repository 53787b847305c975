// tools/calibrate_cuda.cpp — the CUDA device of `compcoll-bench calibrate`: the codec kernels
// (codec/cuda/codec_cuda.h), cuda_reduce_add and a device-to-device copy on device 0, timed
// with CUDA events on a non-blocking stream. Built only with CUDA; without a device,
// make_cuda_device() throws DeviceUnavailable and the program exits 2 with that one line.
// Checks are separate, untimed passes against the host input and the host reduce_add.
// `codec --device cuda` (compcoll_bench.cpp) times the codecs through the same device, and
// peers (nvCOMP, tools/nvcomp_peer.h) through cuda_peer_context: its input, stream and timing.
// Where nvCOMP loads, the device also runs nvcomp-ans as compcoll-run's GPU backend does
// (codec/cuda/nvcomp.h): calibrate's curves of it.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "calibrate.h"
#include "cuda_memory.h"
#include "codec/cuda/check.h"
#include "codec/cuda/codec_cuda.h"
#include "codec/cuda/reduce_cuda.h"
#ifdef COMPCOLL_HAVE_NVCOMP
#include "codec/cuda/nvcomp.h"
#endif
#include "codec/reduce.h"
#include "nvcomp_peer.h"

namespace compcoll::bench {

namespace {

class CudaDevice : public CalibrationDevice {
 public:
  explicit CudaDevice(const EncodeOptions& encode) : encode_(encode) {
    if (const std::string why = gpu::cuda_unavailable_reason(); !why.empty())
      throw DeviceUnavailable("--device cuda: no usable CUDA device (" + why + ")");
    COMPCOLL_CUDA_CHECK(cudaSetDevice(0));
    COMPCOLL_CUDA_CHECK(cudaGetDeviceProperties(&prop_, 0));
    COMPCOLL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    COMPCOLL_CUDA_CHECK(cudaEventCreate(&start_));
    COMPCOLL_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~CudaDevice() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return prop_.name; }
  std::vector<std::pair<std::string, std::string>> machine() const override {
    int driver = 0, runtime = 0, clock_khz = 0, mem_clock_khz = 0, bus_bits = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, 0);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0);
    auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
    return {{"gpu", prop_.name},
            {"compute_capability", std::to_string(prop_.major) + "." + std::to_string(prop_.minor)},
            {"sms", std::to_string(prop_.multiProcessorCount)},
            {"memory_bytes", std::to_string(prop_.totalGlobalMem)},
            {"driver_cuda_version", version(driver)},
            {"runtime_version", version(runtime)},
            {"sm_clock_mhz_max", std::to_string(clock_khz / 1000)},
            {"memory_clock_mhz_max", std::to_string(mem_clock_khz / 1000)},
            {"memory_bus_bits", std::to_string(bus_bits)},
            {"cuda_encoder", std::string(cuda_encoder_name(cuda_encoder()))},
            {"compiler", __VERSION__}};
  }
  std::string method() const override {
    return "CUDA kernels (cuda_encode, cuda_decode, cuda_decode_add, cuda_reduce_add) and cudaMemcpyAsync device "
           "to device on device 0, one op at a time on a non-blocking stream, CUDA events around each op (launch "
           "included)";
  }
  void load(DType dtype, const std::vector<uint8_t>& input) override {
    dtype_ = dtype;
    host_input_ = &input;
    const uint64_t elements = input.size() / dtype_size(dtype);
    size_t stream_cap = 0, scratch = 0;
    for (auto n : codec_names()) {
      const Codec& c = *find_codec(n);
      stream_cap = std::max(stream_cap, max_encoded_size(c, dtype, elements, encode_));
      scratch = std::max(scratch, cuda_encode_scratch_bytes(c.id(), dtype, elements, encode_));
    }
#ifdef COMPCOLL_HAVE_NVCOMP
    if (nvcomp_unavailable().empty()) {  // nvcomp-ans as compcoll-run runs it (calibrate's curves)
      stream_cap = std::max(stream_cap, nvcomp_ans_max_encoded_size(dtype, elements));
      scratch = std::max({scratch, nvcomp_ans_encode_scratch_bytes(dtype, elements),
                          nvcomp_ans_decode_scratch_bytes(dtype, elements)});
    }
#endif
    in_.allocate(input.size());
    out_.allocate(input.size());
    stream_buf_.allocate(stream_cap);
    scratch_.allocate(scratch);
    size_dev_.allocate(sizeof(uint64_t));
    status_.allocate(sizeof(int32_t) * (elements / format::kMinChunkElements + 1));
    // On the timing stream and waited for: a cudaMemcpy from pageable memory may return before
    // the device has the data, and the non-blocking stream does not wait for the legacy one.
    COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(in_.get(), input.data(), input.size(), cudaMemcpyHostToDevice, stream_));
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    encoded_ = {};
  }
  Measurement measure(calib::Op op, const Codec* codec, uint64_t bytes, const TimingOptions& opt) override {
    if (op == calib::Op::DecodeAdd) return measure_decode_add(*codec, bytes, opt);
    const uint64_t elements = bytes / dtype_size(dtype_);
    Measurement m;
    switch (op) {
      case calib::Op::Compress:
        m = time([&] { encode_prefix(*codec, elements); }, opt);
        break;
      case calib::Op::Decompress:
        if (encoded_.codec != codec || encoded_.elements != elements) encode_prefix(*codec, elements);
        fetch_info();
        m = time([&] { decode_prefix(bytes); }, opt);
        break;
      case calib::Op::Reduce:
        COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(out_.get(), in_.get(), bytes, cudaMemcpyDeviceToDevice, stream_));
        m = time([&] { cuda_reduce_add(dtype_, out_.get(), in_.get(), elements, stream_); }, opt);
        break;
      case calib::Op::Copy:
        m = time([&] {
          COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(out_.get(), in_.get(), bytes, cudaMemcpyDeviceToDevice, stream_));
        }, opt);
        break;
      case calib::Op::DecodeAdd: break;  // above
    }
    // The correctness pass, apart from the timing: results back to the host and compared.
    std::vector<uint8_t> got(bytes), want;
    const uint8_t* in = host_input_->data();
    COMPCOLL_CUDA_CHECK(cudaMemsetAsync(out_.get(), 0x5A, bytes, stream_));
    switch (op) {
      case calib::Op::Compress:
      case calib::Op::Decompress:
        encode_prefix(*codec, elements);
        fetch_info();
        decode_prefix(bytes);
        if (!codec->lossless()) {  // lossy (fp8-hadamard): bit-exact against the host round trip
          const std::vector<uint8_t> stream = encode(*codec, dtype_, in, elements, encode_);
          want.resize(bytes);
          decode(stream.data(), stream.size(), want.data(), bytes);
          in = want.data();
        }
        break;
      case calib::Op::Reduce:
        COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(out_.get(), in_.get(), bytes, cudaMemcpyDeviceToDevice, stream_));
        cuda_reduce_add(dtype_, out_.get(), in_.get(), elements, stream_);
        want.assign(in, in + bytes);
        reduce_add(dtype_, want.data(), in, elements);
        in = want.data();
        break;
      case calib::Op::Copy:
        COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(out_.get(), in_.get(), bytes, cudaMemcpyDeviceToDevice, stream_));
        break;
      case calib::Op::DecodeAdd: break;  // above
    }
    COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(got.data(), out_.get(), bytes, cudaMemcpyDeviceToHost, stream_));
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const size_t es = dtype_size(dtype_);
    m.wrong = 0;
    for (uint64_t i = 0; i < bytes; i += es) m.wrong += std::memcmp(got.data() + i, in + i, es) != 0;
    // A chunk the device decoder flagged is wrong even where its bytes happen to match.
    if ((op == calib::Op::Compress || op == calib::Op::Decompress) && bad_chunks() > 0)
      m.wrong = std::max<int64_t>(m.wrong, 1);
    return m;
  }

  // cuda_decode_add of the input's stream into an accumulator that holds the input: timed (the
  // accumulator grows from call to call; the time does not depend on its values), then once
  // more from the input, against the host's input + decode(stream).
  Measurement measure_decode_add(const Codec& codec, uint64_t bytes, const TimingOptions& opt) {
    const uint64_t elements = bytes / dtype_size(dtype_);
    if (encoded_.codec != &codec || encoded_.elements != elements) encode_prefix(codec, elements);
    fetch_info();
    const auto decode_add = [&] {
      cuda_decode_add(encoded_.info, stream_buf_.get(), encoded_.size, out_.get(), bytes,
                      static_cast<int32_t*>(status_.get()), stream_);
    };
    COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(out_.get(), in_.get(), bytes, cudaMemcpyDeviceToDevice, stream_));
    Measurement m = time(decode_add, opt);
    COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(out_.get(), in_.get(), bytes, cudaMemcpyDeviceToDevice, stream_));
    decode_add();
    std::vector<uint8_t> got(bytes), want(host_input_->begin(), host_input_->begin() + bytes);
    reduce_add(dtype_, want.data(), host_input_->data(), elements);
    COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(got.data(), out_.get(), bytes, cudaMemcpyDeviceToHost, stream_));
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const size_t es = dtype_size(dtype_);
    m.wrong = 0;
    for (uint64_t i = 0; i < bytes; i += es) m.wrong += std::memcmp(got.data() + i, want.data() + i, es) != 0;
    if (bad_chunks() > 0) m.wrong = std::max<int64_t>(m.wrong, 1);
    return m;
  }

  // measure_cuda_batch: the input as `messages` blocks, one batch against a call a block.
  BatchMeasurement measure_batch(const Codec& codec, uint32_t messages, const TimingOptions& opt, uint64_t bytes,
                                 bool calls) {
    const size_t es = dtype_size(dtype_);
    if (bytes == 0 || bytes > host_input_->size()) bytes = host_input_->size();
    const uint64_t n = bytes / es;
    std::vector<uint64_t> count(messages), at(messages), slot(messages), capacity(messages);
    size_t slots = 0, scratch = 0, chunks = 0;
    for (uint32_t i = 0; i < messages; ++i) {
      count[i] = n / messages + (i < n % messages ? 1 : 0);
      at[i] = i == 0 ? 0 : at[i - 1] + count[i - 1];
      capacity[i] = max_encoded_size(codec, dtype_, count[i], encode_);
      slot[i] = slots;
      slots += format::align_up64(capacity[i], 16);
      scratch = std::max(scratch, cuda_encode_scratch_bytes(codec.id(), dtype_, count[i], encode_));
      chunks += format::chunk_count_for(count[i], format::chunk_elements_for(encode_.chunk_elements, count[i]));
    }
    scratch = std::max(scratch, cuda_encode_batch_scratch_bytes(codec.id(), dtype_, count.data(), messages, encode_));
    DeviceMemory streams, sizes, scratch_dev, status;
    streams.allocate(slots);
    sizes.allocate(sizeof(uint64_t) * messages);
    scratch_dev.allocate(scratch);
    status.allocate(sizeof(int32_t) * (chunks + 1));
    const auto* in = static_cast<const uint8_t*>(in_.get());
    auto* out = static_cast<uint8_t*>(out_.get());
    std::vector<CudaEncodeItem> enc(messages);
    for (uint32_t i = 0; i < messages; ++i)
      enc[i] = {count[i] ? in + at[i] * es : nullptr, count[i], streams.as<uint8_t>() + slot[i], capacity[i],
                sizes.as<uint64_t>() + i};
    const auto encode_batch = [&] {
      cuda_encode_batch(codec.id(), dtype_, enc.data(), messages, scratch_dev.get(), scratch_dev.bytes(), encode_, stream_);
    };
    BatchMeasurement m;
    m.encode_batch = time(encode_batch, opt);
    if (calls)
      m.encode_calls = time([&] {
        for (const CudaEncodeItem& e : enc)
          cuda_encode(codec.id(), dtype_, e.in_dev, e.elements, e.out_dev, e.out_capacity, e.out_size_dev,
                      scratch_dev.get(), scratch_dev.bytes(), encode_, stream_);
      }, opt);
    // The receivers' infos from the streams' sizes (expected_stream_info: no header read back).
    encode_batch();
    std::vector<uint64_t> size(messages);
    COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(size.data(), sizes.get(), sizeof(uint64_t) * messages, cudaMemcpyDeviceToHost, stream_));
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<CudaDecodeItem> dec(messages);
    size_t status_at = 0;
    for (uint32_t i = 0; i < messages; ++i) {
      const StreamInfo info = expected_stream_info(codec, dtype_, count[i], encode_, size[i]);
      dec[i] = {info, streams.as<uint8_t>() + slot[i], size[i], count[i] ? out + at[i] * es : nullptr, count[i] * es,
                status.as<int32_t>() + status_at};
      status_at += info.chunk_count;
    }
    const auto decode_batch = [&] { cuda_decode_batch(dec.data(), messages, stream_); };
    m.decode_batch = time(decode_batch, opt);
    if (calls)
      m.decode_calls = time([&] {
        for (const CudaDecodeItem& d : dec)
          cuda_decode(d.info, d.stream_dev, d.stream_bytes, d.out_dev, d.out_capacity, d.status_dev, stream_);
      }, opt);
    // The correctness pass: the batch's streams decoded by the batch, against the input.
    COMPCOLL_CUDA_CHECK(cudaMemsetAsync(out_.get(), 0x5A, n * es, stream_));
    COMPCOLL_CUDA_CHECK(cudaMemsetAsync(status.get(), 0x7F, status.bytes(), stream_));
    decode_batch();
    std::vector<uint8_t> got(n * es);
    std::vector<int32_t> st(status_at);
    COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(got.data(), out_.get(), got.size(), cudaMemcpyDeviceToHost, stream_));
    if (!st.empty())
      COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(st.data(), status.get(), st.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    int64_t wrong = 0;
    for (uint64_t i = 0; i < got.size(); i += es) wrong += std::memcmp(got.data() + i, host_input_->data() + i, es) != 0;
    if (std::any_of(st.begin(), st.end(), [](int32_t s) { return s != 0; })) wrong = std::max<int64_t>(wrong, 1);
    m.encode_batch.wrong = m.decode_batch.wrong = wrong;
    return m;
  }

  // For cuda_peer_context: the loaded input on the device, and the stream everything runs on.
  const void* input_dev() const { return in_.get(); }
  uint64_t input_bytes() const { return host_input_ ? host_input_->size() : 0; }
  DType dtype() const { return dtype_; }
  cudaStream_t stream() const { return stream_; }

  // One untimed warm-up, then CUDA-event samples of `fn` on the stream until `opt` is met;
  // the median. measure() and the peers of cuda_peer_context time with this.
  Measurement time(const std::function<void()>& fn, const TimingOptions& opt) {
    fn();  // warm-up
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<double> samples;
    double total = 0;
    while (static_cast<int>(samples.size()) < opt.min_samples || total < opt.min_time) {
      COMPCOLL_CUDA_CHECK(cudaEventRecord(start_, stream_));
      fn();
      COMPCOLL_CUDA_CHECK(cudaEventRecord(stop_, stream_));
      COMPCOLL_CUDA_CHECK(cudaEventSynchronize(stop_));
      float ms = 0;
      COMPCOLL_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      samples.push_back(ms * 1e-3);
      total += ms * 1e-3;
      if (samples.size() >= 100000) break;
    }
    Measurement m;
    m.seconds = median(samples);
    m.samples = static_cast<int>(samples.size());
    return m;
  }

 private:
  // nvcomp-ans through codec/cuda/nvcomp.h (its encode's per-chunk statuses go to status_,
  // which the decode that every check runs after it overwrites); compcoll's codecs through
  // cuda_encode / cuda_decode.
  void encode_prefix(const Codec& codec, uint64_t elements) {
#ifdef COMPCOLL_HAVE_NVCOMP
    if (codec.id() == CodecId::NvcompAns)
      nvcomp_ans_encode(dtype_, in_.get(), elements, stream_buf_.get(), stream_buf_.bytes(),
                        static_cast<uint64_t*>(size_dev_.get()), static_cast<int32_t*>(status_.get()), scratch_.get(),
                        scratch_.bytes(), stream_);
    else
#endif
      cuda_encode(codec.id(), dtype_, in_.get(), elements, stream_buf_.get(), stream_buf_.bytes(),
                  static_cast<uint64_t*>(size_dev_.get()), scratch_.get(), scratch_.bytes(), encode_, stream_);
    encoded_.codec = &codec;
    encoded_.elements = elements;
    encoded_.info_valid = false;
  }
  void fetch_info() {
    if (encoded_.info_valid) return;
    uint64_t size = 0;
    COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(&size, size_dev_.get(), sizeof size, cudaMemcpyDeviceToHost, stream_));
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    encoded_.size = size;
    encoded_.info = cuda_read_stream_info(stream_buf_.get(), size, stream_);
    encoded_.info_valid = true;
  }
  void decode_prefix(uint64_t bytes) {
#ifdef COMPCOLL_HAVE_NVCOMP
    if (encoded_.info.codec == CodecId::NvcompAns)
      return nvcomp_ans_decode(dtype_, encoded_.elements, stream_buf_.get(), encoded_.size, out_.get(),
                               static_cast<int32_t*>(status_.get()), scratch_.get(), scratch_.bytes(), stream_);
#endif
    cuda_decode(encoded_.info, stream_buf_.get(), encoded_.size, out_.get(), bytes,
                static_cast<int32_t*>(status_.get()), stream_);
  }
  int64_t bad_chunks() {
    std::vector<int32_t> status(encoded_.info.chunk_count);
    if (status.empty()) return 0;
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    COMPCOLL_CUDA_CHECK(cudaMemcpy(status.data(), status_.get(), status.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
    return std::count_if(status.begin(), status.end(), [](int32_t s) { return s != 0; });
  }

  struct Encoded {
    const Codec* codec = nullptr;
    uint64_t elements = 0;
    uint64_t size = 0;
    StreamInfo info{};
    bool info_valid = false;
  };
  EncodeOptions encode_;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  DType dtype_ = DType::BF16;
  const std::vector<uint8_t>* host_input_ = nullptr;
  DeviceMemory in_, out_, stream_buf_, scratch_, size_dev_, status_;
  Encoded encoded_;
};

}  // namespace

std::optional<Measurement> measure_cuda_decode_add(CalibrationDevice& device, const Codec& codec, uint64_t bytes,
                                                   const TimingOptions& opt) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  if (cuda == nullptr || !gpu_decode_adds(codec.id())) return std::nullopt;
  return cuda->measure_decode_add(codec, bytes, opt);
}

std::optional<BatchMeasurement> measure_cuda_batch(CalibrationDevice& device, const Codec& codec, uint32_t messages,
                                                   const TimingOptions& opt, uint64_t bytes, bool calls) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  if (cuda == nullptr || messages == 0 || !cuda_batches(codec)) return std::nullopt;
  return cuda->measure_batch(codec, messages, opt, bytes, calls);
}

uint32_t cuda_batch_limit() { return static_cast<uint32_t>(cuda_batch_messages()); }

bool cuda_batches(const Codec& codec) {
  const CodecId id = codec.id();
  return id == CodecId::Identity || id == CodecId::GaussExp || id == CodecId::EntropyExp;
}

std::unique_ptr<CalibrationDevice> make_cuda_device(const EncodeOptions& encode) {
  return std::make_unique<CudaDevice>(encode);
}

CudaPeerContext cuda_peer_context(CalibrationDevice& device, const TimingOptions& opt) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  if (!cuda) throw std::logic_error("cuda_peer_context: not a device of make_cuda_device()");
  CudaPeerContext ctx;
  ctx.input_dev = cuda->input_dev();
  ctx.bytes = cuda->input_bytes();
  ctx.dtype = cuda->dtype();
  ctx.stream = cuda->stream();
  ctx.time = [cuda, opt](const std::function<void()>& fn) { return cuda->time(fn, opt); };
  return ctx;
}

}  // namespace compcoll::bench
