// real/host_backend.cpp — DataBackend on host memory (backend.h): the host codecs and the
// host reduce kernel (codec/reduce.h), synchronously.
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "codec/reduce.h"
#include "real/backend.h"

namespace compcoll::real {

namespace {

class HostBackend final : public DataBackend {
 public:
  explicit HostBackend(uint32_t codec_threads) : codec_threads_(codec_threads) {}
  MemorySpace memory() const override { return MemorySpace::Host; }
  std::string describe() const override {
    return "host (" + std::to_string(std::thread::hardware_concurrency()) + " hardware threads; codecs on " +
           std::to_string(codec_threads_) + " thread(s) per rank)";
  }
  void* alloc(size_t bytes) override {
    if (bytes == 0) return nullptr;
    void* p = std::calloc(1, bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void release(void* p) override { std::free(p); }
  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  Completion copy(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memmove(dst, src, bytes);
    return -1;
  }
  Completion reduce(DType dtype, void* dst, const void* src, uint64_t count) override {
    reduce_add(dtype, dst, src, count);
    return -1;
  }
  Completion compress(const Codec& codec, DType dtype, const void* src, uint64_t count, void* wire, size_t capacity,
                      const EncodeOptions& opt, uint64_t* stream_bytes) override {
    EncodeOptions threaded = opt;
    threaded.threads = codec_threads_;
    *stream_bytes = encode(codec, dtype, src, count, wire, capacity, threaded);
    return -1;
  }
  Completion decompress(const void* wire, size_t bytes, DType dtype, void* dst, uint64_t count) override {
    const StreamInfo info = decode(wire, bytes, dst, count * dtype_size(dtype), codec_threads_);
    check_decoded(info, dtype, count);
    return -1;
  }
  bool done(Completion) override { return true; }
  void synchronize() override {}
  void timer_start() override { t0_ = MPI_Wtime(); }
  double timer_stop() override { return MPI_Wtime() - t0_; }

 private:
  uint32_t codec_threads_;
  double t0_ = 0;
};

}  // namespace

std::unique_ptr<DataBackend> make_host_backend(uint32_t codec_threads) { return std::make_unique<HostBackend>(codec_threads); }

}  // namespace compcoll::real
