// real/host_backend.cpp — DataBackend on host memory (backend.h): the host codecs and the
// host reduce kernel (codec/reduce.h), on the calling thread or, with a compute thread, on one
// worker thread per rank in submission order while the rank's thread drives MPI.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "codec/reduce.h"
#include "real/backend.h"

namespace compcoll::real {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class HostBackend final : public DataBackend {
 public:
  HostBackend(uint32_t codec_threads, bool compute_thread, bool decode_add, bool batch)
      : codec_threads_(codec_threads), decode_add_(decode_add), batch_(batch) {
    if (compute_thread) worker_ = std::thread([this] { work(); });
  }
  ~HostBackend() override {
    if (!worker_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    work_cv_.notify_one();
    worker_.join();
  }
  MemorySpace memory() const override { return MemorySpace::Host; }
  std::string describe() const override {
    return "host (" + std::to_string(std::thread::hardware_concurrency()) + " hardware threads; codecs on " +
           std::to_string(codec_threads_) + " thread(s) per rank" +
           (worker_.joinable() ? "; kernels on a compute thread beside the rank's MPI thread" : "") + ")";
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
    return run([=] {
      if (bytes) std::memmove(dst, src, bytes);
    });
  }
  Completion reduce(DType dtype, void* dst, const void* src, uint64_t count) override {
    return run([=] { reduce_add(dtype, dst, src, count); });
  }
  Completion compress(const Codec& codec, DType dtype, const void* src, uint64_t count, void* wire, size_t capacity,
                      const EncodeOptions& opt, uint64_t* stream_bytes) override {
    return compress_batch_of(codec, dtype, {CompressItem{src, count, wire, capacity, stream_bytes}}, opt);
  }
  Completion decompress(const Codec& codec, const EncodeOptions& opt, const void* wire, size_t bytes, DType dtype,
                        void* dst, uint64_t count) override {
    return decompress_batch_of(codec, opt, dtype, {DecompressItem{wire, bytes, dst, count}});
  }
  bool batches(const Codec&) const override { return batch_; }
  Completion compress_batch(const Codec& codec, DType dtype, const CompressItem* items, size_t count,
                            const EncodeOptions& opt) override {
    if (!batch_) return DataBackend::compress_batch(codec, dtype, items, count, opt);
    return compress_batch_of(codec, dtype, std::vector<CompressItem>(items, items + count), opt);
  }
  Completion decompress_batch(const Codec& codec, const EncodeOptions& opt, DType dtype, const DecompressItem* items,
                              size_t count) override {
    if (!batch_) return DataBackend::decompress_batch(codec, opt, dtype, items, count);
    return decompress_batch_of(codec, opt, dtype, std::vector<DecompressItem>(items, items + count));
  }
  bool decompress_adds(const Codec&) const override { return decode_add_; }
  Completion decompress_add(const Codec& codec, const EncodeOptions& opt, const void* wire, size_t bytes, DType dtype,
                            void* acc, uint64_t count) override {
    if (!decode_add_) return DataBackend::decompress_add(codec, opt, wire, bytes, dtype, acc, count);
    const uint32_t threads = codec_threads_;
    const Codec* c = &codec;
    return run([=] {
      std::vector<uint8_t> decoded(count * dtype_size(dtype));
      const StreamInfo info = decode(wire, bytes, decoded.data(), decoded.size(), threads);
      check_decoded(info, *c, opt, dtype, count);
      reduce_add(dtype, acc, decoded.data(), count);
    });
  }
  bool done(Completion c, double* host_seconds) override {
    if (c < 0) return true;  // ran on the calling thread
    std::unique_lock<std::mutex> lock(m_);
    const auto it = finished_.find(c);
    if (it == finished_.end()) return false;
    const Finished f = it->second;
    finished_.erase(it);
    lock.unlock();
    if (f.error) std::rethrow_exception(f.error);
    if (host_seconds) *host_seconds = f.seconds;
    return true;
  }
  // Queued mode with a compute thread: its queue is the rank's kernels in submission order, and
  // a kernel can wait there for a transfer's mark (set by the rank's thread as MPI completes it).
  bool queues() const override { return worker_.joinable(); }
  QueueMark mark(Completion c) override {
    std::lock_guard<std::mutex> lock(m_);
    if (c < 0 || finished_.count(c)) return QueueMark{nullptr, std::make_shared<HostSignal>(true)};
    auto& signal = marks_[c];  // one per operation, however often asked for
    if (!signal) signal = std::make_shared<HostSignal>();
    return QueueMark{nullptr, signal};
  }
  void queue_after(const QueueMark& m) override { waits_.push_back(m); }
  bool wait_any() override {
    if (!worker_.joinable()) return false;
    std::unique_lock<std::mutex> lock(m_);
    if (queue_.empty() && !busy_) return false;
    const uint64_t seen = completions_;
    done_cv_.wait(lock, [&] { return completions_ != seen; });
    return true;
  }
  // After a run that ended in an error, a kernel may still wait for a transfer's mark that no
  // one will set (the rank's thread no longer tests transfers): it then runs without it, on
  // data no one reads, so that this returns. A run that ends normally leaves no such wait.
  void synchronize() override {
    if (!worker_.joinable()) return;
    std::unique_lock<std::mutex> lock(m_);
    release_waits_ = true;
    done_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
    release_waits_ = false;
  }
  void timer_start() override { t0_ = MPI_Wtime(); }
  double timer_stop() override {
    synchronize();
    return MPI_Wtime() - t0_;
  }

 private:
  struct Finished {
    double seconds = 0;
    std::exception_ptr error;
  };
  // The items coded one after another, in one operation.
  Completion compress_batch_of(const Codec& codec, DType dtype, std::vector<CompressItem> items,
                               const EncodeOptions& opt) {
    EncodeOptions threaded = opt;
    threaded.threads = codec_threads_;
    const Codec* c = &codec;
    return run([c, dtype, threaded, items = std::move(items)] {
      for (const CompressItem& m : items)
        *m.stream_bytes = encode(*c, dtype, m.src, m.count, m.wire, m.capacity, threaded);
    });
  }
  Completion decompress_batch_of(const Codec& codec, const EncodeOptions& opt, DType dtype,
                                 std::vector<DecompressItem> items) {
    const uint32_t threads = codec_threads_;
    const uint32_t es = dtype_size(dtype);
    const Codec* c = &codec;
    return run([c, opt, dtype, threads, es, items = std::move(items)] {
      for (const DecompressItem& m : items) {
        const StreamInfo info = decode(m.wire, m.bytes, m.dst, m.count * es, threads);
        check_decoded(info, *c, opt, dtype, m.count);
      }
    });
  }
  // Runs `fn` now (no compute thread: the completion is -1, and the executor times it), or
  // queues it for the compute thread.
  Completion run(std::function<void()> fn) {
    if (!worker_.joinable()) {
      fn();
      return -1;
    }
    Completion c;
    {
      std::lock_guard<std::mutex> lock(m_);
      c = next_id_;
      next_id_ = next_id_ == kMaxId ? 0 : next_id_ + 1;  // far more ids than tasks in flight
      queue_.push_back({c, std::move(fn), std::move(waits_)});
      waits_.clear();
    }
    work_cv_.notify_one();
    return c;
  }
  void work() {
    std::unique_lock<std::mutex> lock(m_);
    while (true) {
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      Task task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      // Marks it waits for (queued mode), untimed and asleep: the rank's thread sets them.
      for (const QueueMark& m : task.waits)
        if (m.passed) m.passed->wait(release_waits_);
      Finished f;
      const auto t0 = std::chrono::steady_clock::now();
      try {
        task.fn();
      } catch (...) {
        f.error = std::current_exception();
      }
      f.seconds = seconds_since(t0);
      lock.lock();
      finished_[task.id] = f;
      if (const auto it = marks_.find(task.id); it != marks_.end()) {
        it->second->set();
        marks_.erase(it);
      }
      busy_ = false;
      ++completions_;
      done_cv_.notify_all();
    }
  }

  static constexpr Completion kMaxId = 1 << 30;
  uint32_t codec_threads_;
  bool decode_add_;
  bool batch_;
  double t0_ = 0;
  std::thread worker_;
  std::mutex m_;
  std::condition_variable work_cv_, done_cv_;
  struct Task {
    Completion id;
    std::function<void()> fn;
    std::vector<QueueMark> waits;
  };
  std::deque<Task> queue_;
  std::unordered_map<Completion, std::shared_ptr<HostSignal>> marks_;  // asked for, not yet done
  std::vector<QueueMark> waits_;  // for the next task
  std::atomic<bool> release_waits_{false};
  std::unordered_map<Completion, Finished> finished_;
  Completion next_id_ = 0;
  uint64_t completions_ = 0;
  bool busy_ = false, stop_ = false;
};

}  // namespace

std::unique_ptr<DataBackend> make_host_backend(uint32_t codec_threads, bool compute_thread, bool decode_add,
                                               bool batch) {
  return std::make_unique<HostBackend>(codec_threads, compute_thread, decode_add, batch);
}

}  // namespace compcoll::real
