// real/cuda_backend.cpp — the CUDA DataBackend (backend.h, declared in nccl_transport.h):
// device buffers, the codec kernels of codec/cuda/codec_cuda.h and the reduce kernel of
// codec/cuda/reduce_cuda.h (bit-exact against the host's), so host and device runs give the
// same bits; where the build has nvCOMP, also nvcomp-ans (codec/cuda/nvcomp.h), which has no
// host counterpart. Everything runs on one compute stream;
// completions are events the executor polls, and nothing waits on the device in between:
// decompression checks streams on the device and reports through done(). Device memory that
// grows during a run (the encoder's scratch, a slot's size word and status array) comes from
// the stream-ordered allocator (cudaMallocAsync / cudaFreeAsync on the compute stream): a
// cudaFree waits for the whole device, NCCL kernels on the transfer stream included, which may
// wait in turn for a peer whose host is blocked the same way (NCCL's known hang). Pinned host
// buffers a slot outgrows are freed when the backend is. Never run on a machine without a GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "codec/cuda/check.h"
#include "codec/cuda/codec_cuda.h"
#include "codec/cuda/reduce_cuda.h"
#ifdef COMPCOLL_HAVE_NVCOMP
#include "codec/cuda/nvcomp.h"
#endif
#include "real/nccl_transport.h"

namespace compcoll::real {
namespace {

class CudaBackend final : public DataBackend {
 public:
  explicit CudaBackend(cudaStream_t comm) : comm_(comm) {
    COMPCOLL_CUDA_CHECK(cudaGetDevice(&device_));
    COMPCOLL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    COMPCOLL_CUDA_CHECK(cudaEventCreate(&t0_));
    COMPCOLL_CUDA_CHECK(cudaEventCreate(&t1_));
    COMPCOLL_CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
    cudaDeviceProp prop{};
    COMPCOLL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    name_ = std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", device " +
            std::to_string(device_) + ")";
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    cudaStreamSynchronize(comm_);
    for (auto& s : slots_) {
      cudaEventDestroy(s.done);
      cudaFreeHost(s.size_host);
      cudaFree(s.size_dev);
      cudaFreeHost(s.sizes_host);
      cudaFree(s.sizes_dev);
      cudaFreeHost(s.status_host);
      cudaFree(s.status_dev);
    }
    for (void* p : retired_pinned_) cudaFreeHost(p);
    cudaFree(scratch_);
    cudaEventDestroy(t0_);
    cudaEventDestroy(t1_);
    cudaEventDestroy(join_);
    cudaStreamDestroy(stream_);
    cudaStreamDestroy(comm_);
  }
  MemorySpace memory() const override { return MemorySpace::Device; }
  std::string describe() const override { return name_; }

  // Memsets and copies go on the compute stream and are waited for: cudaMemset and cudaMemcpy
  // run on the legacy default stream, which the non-blocking compute and transfer streams do
  // not wait for, and cudaMemset, like cudaMemcpy from pageable host memory to the device, may
  // return before the device has the data (CUDA Runtime API, "API synchronization behavior").
  // Uploads and downloads also wait for both streams, so no kernel or transfer still uses the
  // buffer. None of this is on a timed path.
  void* alloc(size_t bytes) override {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    COMPCOLL_CUDA_CHECK(cudaMalloc(&p, bytes));
    COMPCOLL_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return p;
  }
  void release(void* p) override {
    if (p) COMPCOLL_CUDA_CHECK(cudaFree(p));
  }
  void upload(void* dst, const void* src, size_t bytes) override { copy_waited(dst, src, bytes, cudaMemcpyHostToDevice); }
  void download(void* dst, const void* src, size_t bytes) override { copy_waited(dst, src, bytes, cudaMemcpyDeviceToHost); }

  Completion copy(void* dst, const void* src, size_t bytes) override {
    if (bytes) COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
    return record(nullptr);
  }
  Completion reduce(DType dtype, void* dst, const void* src, uint64_t count) override {
    cuda_reduce_add(dtype, dst, src, count, stream_);
    COMPCOLL_CUDA_CHECK_LAUNCHES(stream_);
    return record(nullptr);
  }
  size_t max_encoded_size(const Codec& codec, DType dtype, uint64_t count, const EncodeOptions& opt) const override {
#ifdef COMPCOLL_HAVE_NVCOMP
    if (codec.id() == CodecId::NvcompAns) return nvcomp_ans_max_encoded_size(dtype, count);
#endif
    return DataBackend::max_encoded_size(codec, dtype, count, opt);
  }
  Completion compress(const Codec& codec, DType dtype, const void* src, uint64_t count, void* wire, size_t capacity,
                      const EncodeOptions& opt, uint64_t* stream_bytes) override {
#ifdef COMPCOLL_HAVE_NVCOMP
    // nvCOMP's batched ANS: a status per chunk comes back with the size, checked in done().
    if (codec.id() == CodecId::NvcompAns) {
      grow_scratch(nvcomp_ans_encode_scratch_bytes(dtype, count));
      return on_status_slot(library_chunks(dtype, count), codec.id(), [&](Slot& s) {
        nvcomp_ans_encode(dtype, src, count, wire, capacity, s.size_dev, s.status_dev, scratch_, scratch_bytes_,
                          stream_);
        COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(s.size_host, s.size_dev, sizeof(uint64_t), cudaMemcpyDeviceToHost, stream_));
        s.dest = stream_bytes;
      });
    }
#endif
    grow_scratch(cuda_encode_scratch_bytes(codec.id(), dtype, count, opt));
    const int c = take_slot();
    return with_slot(c, [&] {
      Slot& s = slots_[static_cast<size_t>(c)];
      // fp8-hadamard's parameters live in its name (fp8-hadamard-e5m2-g64); CodecId alone
      // means the defaults.
      Fp8HadamardParams fp8;
      if (codec.id() == CodecId::Fp8Hadamard && parse_fp8_hadamard_name(codec.name(), fp8))
        cuda_encode_fp8_hadamard(fp8, dtype, src, count, wire, capacity, s.size_dev, scratch_, scratch_bytes_, opt,
                                 stream_);
      else
        cuda_encode(codec.id(), dtype, src, count, wire, capacity, s.size_dev, scratch_, scratch_bytes_, opt, stream_);
      COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(s.size_host, s.size_dev, sizeof(uint64_t), cudaMemcpyDeviceToHost, stream_));
      s.dest = stream_bytes;
      COMPCOLL_CUDA_CHECK(cudaEventRecord(s.done, stream_));
      COMPCOLL_CUDA_CHECK_LAUNCHES(stream_);
    });
  }
  // Asynchronous: the stream is expected to be the one `codec` wrote with `opt` (the plan's),
  // so nothing is read back before the kernel: it checks the stream's header against that on
  // the device, and each chunk; their statuses come back to pinned memory behind the kernel,
  // and done() reads them once the completion's event has passed (a CodecError there).
  Completion decompress(const Codec& codec, const EncodeOptions& opt, const void* wire, size_t bytes, DType dtype,
                        void* dst, uint64_t count) override {
#ifdef COMPCOLL_HAVE_NVCOMP
    if (codec.id() == CodecId::NvcompAns) {
      grow_scratch(nvcomp_ans_decode_scratch_bytes(dtype, count));
      return on_status_slot(library_chunks(dtype, count), codec.id(), [&](Slot& s) {
        nvcomp_ans_decode(dtype, count, wire, bytes, dst, s.status_dev, scratch_, scratch_bytes_, stream_);
      });
    }
#endif
    return decode_stream(cuda_decode, codec, opt, wire, bytes, dtype, dst, count);
  }
  // cuda_decode_add: the decode and the reduction of a reduce-scatter or allreduce step in one
  // pass (identity, gauss-exp, entropy-exp), the decoded block never written out.
  bool decompress_adds(const Codec& codec) const override { return gpu_decode_adds(codec.id()); }
  Completion decompress_add(const Codec& codec, const EncodeOptions& opt, const void* wire, size_t bytes, DType dtype,
                            void* acc, uint64_t count) override {
    if (!decompress_adds(codec)) return DataBackend::decompress_add(codec, opt, wire, bytes, dtype, acc, count);
    return decode_stream(cuda_decode_add, codec, opt, wire, bytes, dtype, acc, count);
  }
  // A batch of messages in one launch of each kernel (cuda_encode_batch, cuda_decode_batch):
  // identity, gauss-exp and entropy-exp (fp8-hadamard's parameters live in its name, which the
  // batch call does not take).
  bool batches(const Codec& codec) const override {
    const CodecId id = codec.id();
    return id == CodecId::Identity || id == CodecId::GaussExp || id == CodecId::EntropyExp;
  }
  Completion compress_batch(const Codec& codec, DType dtype, const CompressItem* items, size_t count,
                            const EncodeOptions& opt) override {
    if (!batches(codec)) return DataBackend::compress_batch(codec, dtype, items, count, opt);
    std::vector<uint64_t> elements(count);
    for (size_t k = 0; k < count; ++k) elements[k] = items[k].count;
    grow_scratch(cuda_encode_batch_scratch_bytes(codec.id(), dtype, elements.data(), count, opt));
    const int c = take_slot();
    return with_slot(c, [&] {
      Slot& s = slots_[static_cast<size_t>(c)];
      hold_sizes(s, count);
      std::vector<CudaEncodeItem> enc(count);
      for (size_t k = 0; k < count; ++k)
        enc[k] = {items[k].src, items[k].count, items[k].wire, items[k].capacity, s.sizes_dev + k};
      cuda_encode_batch(codec.id(), dtype, enc.data(), count, scratch_, scratch_bytes_, opt, stream_);
      if (count > 0)
        COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(s.sizes_host, s.sizes_dev, count * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                            stream_));
      for (size_t k = 0; k < count; ++k) s.dests.push_back(items[k].stream_bytes);
      COMPCOLL_CUDA_CHECK(cudaEventRecord(s.done, stream_));
      COMPCOLL_CUDA_CHECK_LAUNCHES(stream_);
    });
  }
  // As decompress, every message's statuses in one array (a message's from its start).
  Completion decompress_batch(const Codec& codec, const EncodeOptions& opt, DType dtype, const DecompressItem* items,
                              size_t count) override {
    if (!batches(codec)) return DataBackend::decompress_batch(codec, opt, dtype, items, count);
    std::vector<CudaDecodeItem> dec(count);
    std::vector<size_t> starts(count);
    size_t chunks = 0;
    for (size_t k = 0; k < count; ++k) {
      const StreamInfo info = expected_stream_info(codec, dtype, items[k].count, opt, items[k].bytes, /*within=*/true);
      dec[k] = {info, items[k].wire, items[k].bytes, items[k].dst, items[k].count * dtype_size(dtype), nullptr};
      starts[k] = chunks;
      chunks += info.chunk_count;
    }
    return on_status_slot(chunks, codec.id(), [&](Slot& s) {
      for (size_t k = 0; k < count; ++k) dec[k].status_dev = s.status_dev + starts[k];
      cuda_decode_batch(dec.data(), count, stream_);
      s.message_starts = std::move(starts);
    });
  }
  bool done(Completion c, double* /*host_seconds*/) override {
    if (c < 0) return true;
    Slot& s = slots_.at(static_cast<size_t>(c));
    const cudaError_t e = cudaEventQuery(s.done);
    if (e == cudaErrorNotReady) return false;
    COMPCOLL_CUDA_CHECK(e);
    if (s.dest) *s.dest = *s.size_host;
    s.dest = nullptr;
    for (size_t k = 0; k < s.dests.size(); ++k) *s.dests[k] = s.sizes_host[k];
    s.dests.clear();
    const size_t chunks = s.status_chunks;
    s.status_chunks = 0;
    const std::vector<size_t> starts = std::move(s.message_starts);
    s.message_starts.clear();
    free_.push_back(c);
    for (size_t k = 0; k < chunks; ++k) {
      if (s.status_host[k] == 0) continue;
      // A batch's: the message and its own chunk.
      const auto m = std::upper_bound(starts.begin(), starts.end(), k);
      const std::string where = starts.empty() ? "chunk " + std::to_string(k)
                                               : "message " + std::to_string(m - starts.begin() - 1) + " chunk " +
                                                     std::to_string(k - *(m - 1));
      throw CodecError(std::string(codec_by_id(s.codec).name()) + " stream: " + where + ": " +
                           cuda_chunk_status_message(s.status_host[k]),
                       0);
    }
    return true;
  }
  void synchronize() override {
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(comm_));
  }
  // Queued mode: the compute stream is the queue; a mark is an operation's event, and a wait
  // is cudaStreamWaitEvent (the transport's events), taken at once.
  bool queues() const override { return true; }
  QueueMark mark(Completion c) override {
    if (c < 0) return {};
    return QueueMark{slots_.at(static_cast<size_t>(c)).done, nullptr};
  }
  void queue_after(const QueueMark& m) override {
    if (m.event) COMPCOLL_CUDA_CHECK(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(m.event), 0));
  }
  // CUDA events on the compute stream, joined with the transfer stream at both ends.
  void timer_start() override {
    COMPCOLL_CUDA_CHECK(cudaEventRecord(t0_, stream_));
    COMPCOLL_CUDA_CHECK(cudaStreamWaitEvent(comm_, t0_, 0));
  }
  double timer_stop() override {
    COMPCOLL_CUDA_CHECK(cudaEventRecord(join_, comm_));
    COMPCOLL_CUDA_CHECK(cudaStreamWaitEvent(stream_, join_, 0));
    COMPCOLL_CUDA_CHECK(cudaEventRecord(t1_, stream_));
    COMPCOLL_CUDA_CHECK(cudaEventSynchronize(t1_));
    float ms = 0;
    COMPCOLL_CUDA_CHECK(cudaEventElapsedTime(&ms, t0_, t1_));
    return ms * 1e-3;
  }

 private:
  struct Slot {
    cudaEvent_t done = nullptr;
    uint64_t* size_host = nullptr;  // pinned
    uint64_t* size_dev = nullptr;
    uint64_t* dest = nullptr;
    // A batch's stream sizes (pinned mirror of the device array, kept and grown with the slot)
    // and where each goes.
    uint64_t* sizes_host = nullptr;
    uint64_t* sizes_dev = nullptr;
    size_t sizes_capacity = 0;
    std::vector<uint64_t*> dests;
    std::vector<size_t> message_starts;  // a batch's decompression: each message's first status
    // A decompression's (or nvcomp-ans's compression's) per-chunk statuses (pinned mirror of
    // the device array), kept and grown with the slot: a slot allocates only when a call has
    // more chunks than it held before.
    int32_t* status_host = nullptr;
    int32_t* status_dev = nullptr;
    size_t status_capacity = 0;
    size_t status_chunks = 0;  // to check in done(); 0 for other operations
    CodecId codec = CodecId::Identity;
  };
  int take_slot() {
    if (free_.empty()) {
      Slot s;
      COMPCOLL_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
      COMPCOLL_CUDA_CHECK(cudaMallocHost(&s.size_host, sizeof(uint64_t)));
      COMPCOLL_CUDA_CHECK(cudaMallocAsync(&s.size_dev, sizeof(uint64_t), stream_));
      slots_.push_back(s);
      free_.push_back(static_cast<int>(slots_.size() - 1));
    }
    const int c = free_.back();
    free_.pop_back();
    return c;
  }
  // Runs `launch` on slot c and returns c; a slot whose launch throws goes back to the free
  // list (its event was not recorded, so nothing will poll it).
  template <typename F>
  Completion with_slot(int c, F&& launch) {
    try {
      launch();
    } catch (...) {
      Slot& s = slots_[static_cast<size_t>(c)];
      s.dest = nullptr;
      s.dests.clear();
      s.message_starts.clear();
      s.status_chunks = 0;
      free_.push_back(c);
      throw;
    }
    return c;
  }
  // The scratch of the codec calls, grown to `need` bytes in stream order: the kernels before
  // still use the old one.
  void grow_scratch(size_t need) {
    if (need <= scratch_bytes_) return;
    if (scratch_) COMPCOLL_CUDA_CHECK(cudaFreeAsync(scratch_, stream_));
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    COMPCOLL_CUDA_CHECK(cudaMallocAsync(&scratch_, need, stream_));
    scratch_bytes_ = need;
  }
  // Runs `launch(slot)` on a free slot whose status arrays hold `chunks` chunks, then queues
  // the statuses back behind it and the slot's event (finish_with_statuses).
  template <typename F>
  Completion on_status_slot(size_t chunks, CodecId codec, F&& launch) {
    const int c = take_slot();
    return with_slot(c, [&] {
      Slot& s = slots_[static_cast<size_t>(c)];
      hold_statuses(s, chunks);
      launch(s);
      finish_with_statuses(s, chunks, codec);
    });
  }
  // cuda_decode or cuda_decode_add (`kernel`) of the plan's stream into `out` (count elements),
  // on a slot of its own.
  template <typename Kernel>
  Completion decode_stream(Kernel kernel, const Codec& codec, const EncodeOptions& opt, const void* wire, size_t bytes,
                           DType dtype, void* out, uint64_t count) {
    const StreamInfo info = expected_stream_info(codec, dtype, count, opt, bytes, /*within=*/true);
    return on_status_slot(info.chunk_count, info.codec, [&](Slot& s) {
      kernel(info, wire, bytes, out, count * dtype_size(dtype), s.status_dev, stream_);
    });
  }
  // Slot s's status arrays, grown to `chunks`, and its size arrays, grown to `count` (the slot
  // is free: nothing reads its old ones).
  void hold_statuses(Slot& s, size_t chunks) { hold_pinned(s.status_host, s.status_dev, s.status_capacity, chunks); }
  void hold_sizes(Slot& s, size_t count) { hold_pinned(s.sizes_host, s.sizes_dev, s.sizes_capacity, count); }
  // A pinned host array and its device twin, grown to `count` elements.
  template <typename T>
  void hold_pinned(T*& host, T*& dev, size_t& capacity, size_t count) {
    if (count <= capacity) return;
    if (host) retired_pinned_.push_back(host);
    if (dev) COMPCOLL_CUDA_CHECK(cudaFreeAsync(dev, stream_));
    host = nullptr;
    dev = nullptr;
    capacity = 0;
    COMPCOLL_CUDA_CHECK(cudaMallocHost(&host, count * sizeof(T)));
    COMPCOLL_CUDA_CHECK(cudaMallocAsync(&dev, count * sizeof(T), stream_));
    capacity = count;
  }
  // After a codec call on slot s: its `chunks` statuses back to pinned memory behind it, for
  // done() to check once the slot's event has passed; then the event.
  void finish_with_statuses(Slot& s, size_t chunks, CodecId codec) {
    if (chunks > 0)
      COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(s.status_host, s.status_dev, chunks * sizeof(int32_t),
                                          cudaMemcpyDeviceToHost, stream_));
    s.status_chunks = chunks;
    s.codec = codec;
    COMPCOLL_CUDA_CHECK(cudaEventRecord(s.done, stream_));
    COMPCOLL_CUDA_CHECK_LAUNCHES(stream_);
  }
  static size_t library_chunks(DType dtype, uint64_t count) {
    const LibraryCodec& lib = *find_library_codec(kNvcompAnsName);
    return format::chunk_count_for(count, library_chunk_elements(lib, dtype));
  }
  void copy_waited(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (!bytes) return;
    synchronize();
    COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  Completion record(uint64_t* dest) {
    const int c = take_slot();
    slots_[static_cast<size_t>(c)].dest = dest;
    COMPCOLL_CUDA_CHECK(cudaEventRecord(slots_[static_cast<size_t>(c)].done, stream_));
    return c;
  }

  int device_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr, comm_ = nullptr;
  cudaEvent_t t0_ = nullptr, t1_ = nullptr, join_ = nullptr;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::vector<Slot> slots_;
  std::vector<int> free_;
  std::vector<void*> retired_pinned_;  // status arrays slots outgrew (cudaFreeHost may wait)
};

}  // namespace

std::unique_ptr<DataBackend> make_cuda_backend(cudaStream_t comm_stream) {
  return std::make_unique<CudaBackend>(comm_stream);
}

}  // namespace compcoll::real
