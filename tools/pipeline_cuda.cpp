// tools/pipeline_cuda.cpp — the CUDA side of `compcoll-bench pipeline` (tools/pipeline.h): a
// message between two buffers of device 0, through pinned host memory. Four non-blocking
// streams: encode, device-to-host copies, host-to-device copies, decode. Each slot of a piece's
// bytes goes device -> host on the first copy stream and, once there (an event), host -> device
// on the second, so the two directions of the link run at once and a slot's second copy
// overlaps the next slot's first. Compressed, every piece is encoded in turn on the encode
// stream; the host learns a piece's stream size when its encode is done (the one thing it waits
// for), queues its copies, and the decode stream decodes it once its last slot has arrived,
// while later pieces are still being encoded or copied. Timed with CUDA events from the first
// encode or copy to the last decode or copy. nvcomp-ans (where the build has nvCOMP) runs as
// compcoll-run's GPU backend runs it (codec/cuda/nvcomp.h), with a scratch of its own for the
// decode stream. Built only with CUDA.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "calibrate.h"
#include "codec/cuda/check.h"
#include "codec/cuda/codec_cuda.h"
#ifdef COMPCOLL_HAVE_NVCOMP
#include "codec/cuda/nvcomp.h"
#endif
#include "cuda_memory.h"
#include "pipeline.h"
#include "schedule/algorithms.h"

namespace compcoll::bench {
namespace {

constexpr size_t kAlign = 256;  // each piece's stream starts aligned in its buffers
constexpr size_t kLatencyBytes = 4096;
size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

class Event {
 public:
  explicit Event(bool timing = true) {
    COMPCOLL_CUDA_CHECK(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  operator cudaEvent_t() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

class Stream {
 public:
  Stream() { COMPCOLL_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() {
    cudaStreamSynchronize(s_);
    cudaStreamDestroy(s_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  operator cudaStream_t() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

double elapsed_s(cudaEvent_t from, cudaEvent_t to) {
  COMPCOLL_CUDA_CHECK(cudaEventSynchronize(to));
  float ms = 0;
  COMPCOLL_CUDA_CHECK(cudaEventElapsedTime(&ms, from, to));
  return ms * 1e-3;
}

// Samples of `one` (which returns seconds) after one untimed call, until min_time has been
// spent and at least min_samples taken.
std::vector<double> sample(const std::function<double()>& one, double min_time, int min_samples) {
  one();
  std::vector<double> s;
  double total = 0;
  while (static_cast<int>(s.size()) < min_samples || total < min_time) {
    s.push_back(one());
    total += s.back();
    if (s.size() >= 100000) break;
  }
  return s;
}

class CudaLinkDevice final : public LinkDevice {
 public:
  explicit CudaLinkDevice(uint64_t slot) : slot_(slot) {
    if (const std::string why = gpu::cuda_unavailable_reason(); !why.empty())
      throw DeviceUnavailable("--device cuda: no usable CUDA device (" + why + ")");
    COMPCOLL_CUDA_CHECK(cudaSetDevice(0));
    COMPCOLL_CUDA_CHECK(cudaGetDeviceProperties(&prop_, 0));
    streams_ = std::make_unique<Streams>();
  }
  ~CudaLinkDevice() override { cudaDeviceSynchronize(); }

  std::string name() const override { return prop_.name; }

  LinkFigures measure_link(uint64_t bytes, double min_time) override {
    bytes = std::max<uint64_t>(bytes, kLatencyBytes);
    DeviceMemory src, dst;
    PinnedMemory host_out, host_in;
    src.allocate(bytes);
    dst.allocate(bytes);
    host_out.allocate(bytes);
    host_in.allocate(bytes);
    COMPCOLL_CUDA_CHECK(cudaMemset(src.get(), 0x5a, bytes));
    COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
    Streams& s = *streams_;
    Event start, out_done, in_done;
    auto d2h = [&] {
      for (uint64_t off = 0; off < bytes; off += slot_)
        COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(host_out.as<uint8_t>() + off, src.as<uint8_t>() + off,
                                            std::min(slot_, bytes - off), cudaMemcpyDeviceToHost, s.out));
    };
    auto h2d = [&] {
      for (uint64_t off = 0; off < bytes; off += slot_)
        COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(dst.as<uint8_t>() + off, host_in.as<uint8_t>() + off,
                                            std::min(slot_, bytes - off), cudaMemcpyHostToDevice, s.in));
    };
    // One timed round: `out` and `in` say which directions run; each direction's time is from
    // the common start to its last copy.
    double out_s = 0, in_s = 0;
    auto round = [&](bool out, bool in) {
      COMPCOLL_CUDA_CHECK(cudaEventRecord(start, s.out));
      COMPCOLL_CUDA_CHECK(cudaStreamWaitEvent(s.in, start));
      if (out) d2h();
      if (in) h2d();
      COMPCOLL_CUDA_CHECK(cudaEventRecord(out_done, s.out));
      COMPCOLL_CUDA_CHECK(cudaEventRecord(in_done, s.in));
      out_s = elapsed_s(start, out_done);
      in_s = elapsed_s(start, in_done);
      return std::max(out_s, in_s);
    };
    LinkFigures f;
    f.slot_bytes = slot_;
    f.d2h_alone = bytes / median(sample([&] { return round(true, false); }, min_time, 5));
    f.h2d_alone = bytes / median(sample([&] { return round(false, true); }, min_time, 5));
    std::vector<double> outs, ins;  // each direction's time in every round, the untimed first one too
    sample([&] {
      const double t = round(true, true);
      outs.push_back(out_s);
      ins.push_back(in_s);
      return t;
    }, min_time, 5);
    f.d2h_both = bytes / median(std::vector<double>(outs.begin() + 1, outs.end()));
    f.h2d_both = bytes / median(std::vector<double>(ins.begin() + 1, ins.end()));
    // Latency: one small message over the staged path, the way a transfer's slot goes.
    f.latency_s = median(sample([&] {
      COMPCOLL_CUDA_CHECK(cudaEventRecord(start, s.out));
      staged_copy(src.get(), dst.get(), kLatencyBytes, host_out.as<uint8_t>());
      COMPCOLL_CUDA_CHECK(cudaEventRecord(in_done, s.in));
      return elapsed_s(start, in_done);
    }, min_time, 50));
    return f;
  }

  void load(const TensorData& t) override {
    message_ = &t;
    const size_t bytes = t.bytes.size();
    in_.allocate(bytes);
    out_.allocate(bytes);
    if (bytes) COMPCOLL_CUDA_CHECK(cudaMemcpy(in_.get(), t.bytes.data(), bytes, cudaMemcpyHostToDevice));
    COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
  }

  TransferResult transfer(const Codec* codec, const EncodeOptions& opt, uint32_t pieces, double min_time) override {
    const TensorData& t = *message_;
    const uint64_t count = t.elements();
    const size_t esize = dtype_size(t.dtype);
    // The pieces: element ranges as the model's schedule splits them, and where each piece's
    // stream goes in the near and far stream buffers and in host memory.
    std::vector<Piece> plan(pieces);
    size_t stream_bytes = 0, scratch_bytes = 0, decode_scratch_bytes = 0;
    uint32_t chunks = 0;
    for (uint32_t p = 0; p < pieces; ++p) {
      const sched::Block b = sched::block_of(count, static_cast<int>(pieces), static_cast<int>(p));
      Piece& x = plan[p];
      x.begin = b.begin;
      x.elements = b.count();
      if (!codec) continue;
      x.capacity = align_up(library(codec) ? library_max(t.dtype, x.elements)
                                           : max_encoded_size(*codec, t.dtype, x.elements, opt));
      x.offset = stream_bytes;
      stream_bytes += x.capacity;
      x.first_chunk = chunks;
      const uint32_t chunk = library(codec) ? library_chunk_elements(*find_library_codec(codec->name()), t.dtype)
                                            : format::chunk_elements_for(opt.chunk_elements, x.elements);
      chunks += static_cast<uint32_t>((x.elements + chunk - 1) / chunk);
      scratch_bytes = std::max(scratch_bytes, library(codec) ? library_scratch(true, t.dtype, x.elements)
                                                             : cuda_encode_scratch_bytes(codec->id(), t.dtype, x.elements, opt));
      decode_scratch_bytes = std::max(decode_scratch_bytes, library(codec) ? library_scratch(false, t.dtype, x.elements) : 0);
    }
    grow(staging_, codec ? stream_bytes : t.bytes.size());
    if (codec) {
      grow(near_, stream_bytes);
      grow(far_, stream_bytes);
      grow(scratch_, scratch_bytes);
      grow(decode_scratch_, decode_scratch_bytes);  // the decode stream runs beside the encode stream
      grow(sizes_dev_, pieces * sizeof(uint64_t));
      grow(sizes_host_, pieces * sizeof(uint64_t));
      grow(status_, chunks * sizeof(int32_t));
      while (encoded_.size() < pieces) encoded_.push_back(std::make_unique<Event>(false));
      while (arrived_.size() < pieces) arrived_.push_back(std::make_unique<Event>(false));
    }

    Streams& s = *streams_;
    uint64_t link_bytes = 0;
    auto run = [&]() -> double {
      link_bytes = 0;
      const auto* in = in_.as<uint8_t>();
      auto* out = out_.as<uint8_t>();
      if (!codec) {
        COMPCOLL_CUDA_CHECK(cudaEventRecord(s.start, s.out));
        COMPCOLL_CUDA_CHECK(cudaStreamWaitEvent(s.in, s.start));
        for (const Piece& x : plan) {
          staged_copy(in + x.begin * esize, out + x.begin * esize, x.elements * esize,
                      staging_.as<uint8_t>() + x.begin * esize);
          link_bytes += x.elements * esize;
        }
        COMPCOLL_CUDA_CHECK(cudaEventRecord(s.end, s.in));
        return elapsed_s(s.start, s.end);
      }
      COMPCOLL_CUDA_CHECK(cudaEventRecord(s.start, s.enc));
      for (cudaStream_t other : {cudaStream_t(s.out), cudaStream_t(s.in), cudaStream_t(s.dec)}) COMPCOLL_CUDA_CHECK(cudaStreamWaitEvent(other, s.start));
      auto* sizes_host = sizes_host_.as<uint64_t>();
      for (uint32_t p = 0; p < pieces; ++p) {
        const Piece& x = plan[p];
        encode(*codec, t.dtype, in + x.begin * esize, x, sizes_dev_.as<uint64_t>() + p, opt);
        COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(sizes_host + p, sizes_dev_.as<uint64_t>() + p, sizeof(uint64_t),
                                            cudaMemcpyDeviceToHost, s.enc));
        COMPCOLL_CUDA_CHECK(cudaEventRecord(*encoded_[p], s.enc));
      }
      for (uint32_t p = 0; p < pieces; ++p) {
        const Piece& x = plan[p];
        COMPCOLL_CUDA_CHECK(cudaEventSynchronize(*encoded_[p]));
        const uint64_t n = sizes_host[p];
        if (n > x.capacity)
          throw std::runtime_error("piece " + std::to_string(p) + ": the encoder reports a stream of " +
                                   std::to_string(n) + " bytes, more than its buffer's " +
                                   std::to_string(x.capacity));
        COMPCOLL_CUDA_CHECK(cudaStreamWaitEvent(s.out, *encoded_[p]));
        staged_copy(near_.as<uint8_t>() + x.offset, far_.as<uint8_t>() + x.offset, n,
                    staging_.as<uint8_t>() + x.offset);
        COMPCOLL_CUDA_CHECK(cudaEventRecord(*arrived_[p], s.in));
        COMPCOLL_CUDA_CHECK(cudaStreamWaitEvent(s.dec, *arrived_[p]));
        decode(*codec, t.dtype, x, n, out + x.begin * esize, opt);
        link_bytes += n;
      }
      COMPCOLL_CUDA_CHECK(cudaEventRecord(s.end, s.dec));
      return elapsed_s(s.start, s.end);
    };

    TransferResult r;
    const std::vector<double> samples = sample(run, min_time, 5);
    r.seconds = median(samples);
    r.fastest = *std::min_element(samples.begin(), samples.end());
    r.slowest = *std::max_element(samples.begin(), samples.end());
    r.runs = static_cast<int>(samples.size());
    // The check: one more run with every buffer the message passes through poisoned (the
    // stream buffers and the staging memory too, so that a step that ran before the one it
    // depends on cannot find the previous run's bytes there), every decode status read back.
    COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
    if (!t.bytes.empty()) COMPCOLL_CUDA_CHECK(cudaMemset(out_.get(), 0xa5, t.bytes.size()));
    if (codec && chunks) COMPCOLL_CUDA_CHECK(cudaMemset(status_.get(), 0xff, chunks * sizeof(int32_t)));
    if (codec && stream_bytes) {
      COMPCOLL_CUDA_CHECK(cudaMemset(near_.get(), 0xa5, stream_bytes));
      COMPCOLL_CUDA_CHECK(cudaMemset(far_.get(), 0xa5, stream_bytes));
    }
    COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
    if (const size_t staged = codec ? stream_bytes : t.bytes.size(); staged > 0)
      std::memset(staging_.get(), 0xa5, staged);
    run();
    COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
    r.link_bytes = link_bytes;
    if (codec) {
      std::vector<int32_t> status(chunks);
      if (chunks)
        COMPCOLL_CUDA_CHECK(cudaMemcpy(status.data(), status_.get(), chunks * sizeof(int32_t), cudaMemcpyDeviceToHost));
      for (uint32_t p = 0; p < pieces && r.error.empty(); ++p)
        for (uint32_t c = plan[p].first_chunk; c < (p + 1 < pieces ? plan[p + 1].first_chunk : chunks); ++c)
          if (status[c] != 0) {
            r.error = "piece " + std::to_string(p) + " chunk " + std::to_string(c - plan[p].first_chunk) +
                      ": " + cuda_chunk_status_message(status[c]);
            break;
          }
    }
    if (r.error.empty() && !t.bytes.empty()) {
      std::vector<uint8_t> got(t.bytes.size());
      COMPCOLL_CUDA_CHECK(cudaMemcpy(got.data(), out_.get(), got.size(), cudaMemcpyDeviceToHost));
      const auto [a, b] = std::mismatch(got.begin(), got.end(), t.bytes.begin());
      if (a != got.end())
        r.error = "the far buffer differs from the message at byte " + std::to_string(a - got.begin());
    }
    return r;
  }

 private:
  struct Streams {
    Stream enc, out, in, dec;
    Event start, end, handoff{false};
  };
  struct Piece {
    uint64_t begin = 0, elements = 0;  // elements of the message
    size_t offset = 0, capacity = 0;   // its stream's place in the stream buffers
    uint32_t first_chunk = 0;          // its chunks' place in the status array
  };

  // nvcomp-ans (codec/cuda/nvcomp.h) where the build has nvCOMP; compcoll's kernels otherwise.
  static bool library(const Codec* codec) { return codec && codec->id() == CodecId::NvcompAns; }
#ifdef COMPCOLL_HAVE_NVCOMP
  static size_t library_max(DType dtype, uint64_t elements) { return nvcomp_ans_max_encoded_size(dtype, elements); }
  static size_t library_scratch(bool encode, DType dtype, uint64_t elements) {
    return encode ? nvcomp_ans_encode_scratch_bytes(dtype, elements) : nvcomp_ans_decode_scratch_bytes(dtype, elements);
  }
#else
  [[noreturn]] static void no_library() { throw std::runtime_error("nvcomp-ans: this build has no nvCOMP"); }
  static size_t library_max(DType, uint64_t) { no_library(); }
  static size_t library_scratch(bool, DType, uint64_t) { no_library(); }
#endif
  // Piece x's encode on the encode stream, its stream's size to size_dev.
  void encode(const Codec& codec, DType dtype, const uint8_t* in, const Piece& x, uint64_t* size_dev,
              const EncodeOptions& opt) {
    Streams& s = *streams_;
#ifdef COMPCOLL_HAVE_NVCOMP
    if (library(&codec))
      return nvcomp_ans_encode(dtype, in, x.elements, near_.as<uint8_t>() + x.offset, x.capacity, size_dev,
                               status_.as<int32_t>() + x.first_chunk, scratch_.get(), scratch_.bytes(), s.enc);
#endif
    cuda_encode(codec.id(), dtype, in, x.elements, near_.as<uint8_t>() + x.offset, x.capacity, size_dev,
                scratch_.get(), scratch_.bytes(), opt, s.enc);
  }
  // Piece x's decode of its n stream bytes in the far buffer, on the decode stream.
  void decode(const Codec& codec, DType dtype, const Piece& x, uint64_t n, uint8_t* out, const EncodeOptions& opt) {
    Streams& s = *streams_;
#ifdef COMPCOLL_HAVE_NVCOMP
    if (library(&codec))
      return nvcomp_ans_decode(dtype, x.elements, far_.as<uint8_t>() + x.offset, n, out,
                               status_.as<int32_t>() + x.first_chunk, decode_scratch_.get(), decode_scratch_.bytes(),
                               s.dec);
#endif
    const StreamInfo info = expected_stream_info(codec, dtype, x.elements, opt, n);
    cuda_decode(info, far_.as<uint8_t>() + x.offset, n, out, x.elements * dtype_size(dtype),
                status_.as<int32_t>() + x.first_chunk, s.dec);
  }

  template <bool kPinned>
  static void grow(CudaMemory<kPinned>& m, size_t bytes) {
    if (m.bytes() < bytes) m.allocate(bytes);
  }

  // `bytes` at src (device) to dst (device) through `host` (pinned), slot by slot: device to
  // host on the out stream, then host to device on the in stream once that slot is there.
  void staged_copy(const void* src, void* dst, size_t bytes, uint8_t* host) {
    Streams& s = *streams_;
    for (size_t off = 0; off < bytes; off += slot_) {
      const size_t n = std::min<size_t>(slot_, bytes - off);
      COMPCOLL_CUDA_CHECK(
          cudaMemcpyAsync(host + off, static_cast<const uint8_t*>(src) + off, n, cudaMemcpyDeviceToHost, s.out));
      // The in stream waits for this record (cudaStreamWaitEvent takes the event's latest
      // record at the time of the call), so one event serves every slot.
      COMPCOLL_CUDA_CHECK(cudaEventRecord(s.handoff, s.out));
      COMPCOLL_CUDA_CHECK(cudaStreamWaitEvent(s.in, s.handoff));
      COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(static_cast<uint8_t*>(dst) + off, host + off, n, cudaMemcpyHostToDevice, s.in));
    }
  }

  uint64_t slot_;
  cudaDeviceProp prop_{};
  std::unique_ptr<Streams> streams_;
  const TensorData* message_ = nullptr;
  DeviceMemory in_, out_, near_, far_, scratch_, decode_scratch_, sizes_dev_, status_;
  PinnedMemory staging_, sizes_host_;
  std::vector<std::unique_ptr<Event>> encoded_, arrived_;
};

}  // namespace

std::unique_ptr<LinkDevice> make_cuda_link_device(uint64_t slot_bytes) {
  return std::make_unique<CudaLinkDevice>(slot_bytes);
}

}  // namespace compcoll::bench
