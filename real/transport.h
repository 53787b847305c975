// real/transport.h — the small interface the real executor sends and receives through: post a
// send or a receive of a byte range to a peer, get a request, test or wait it; barrier; rank
// and size. Two implementations: MpiTransport (host buffers, MPI_Isend / MPI_Irecv /
// MPI_Improbe) and NcclTransport (device buffers, ncclSend / ncclRecv inside group calls,
// real/nccl_transport.h). No home-made transport, and nothing here knows about schedules or
// codecs. docs/compcoll-run.md states what each costs.
//
// Matching: the k-th message from a to b is the k-th receive at b from a (docs/SCHEDULES.md).
// Callers number the messages of each (peer, direction) with reserve_seqs() and pass the
// number with each post, so a transport may match by number (MPI: the tag) or by posting
// order (NCCL: the caller posts in that order).
//
// Variable-length messages (compressed streams): a post with exact == false names an upper
// bound on the receive side; the receiver learns the size from the transport (test()/wait()).
// A compressed stream sent within a wire budget (executor.h) is an exact message of the
// budget's size.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace compcoll::real {

enum class MemorySpace { Host, Device };

// A transport failure (an MPI or NCCL call that failed, a message larger than its receive
// buffer): what() names the call, the peer and the sizes.
class TransportError : public std::runtime_error {
 public:
  using runtime_error::runtime_error;
};

using Request = int;  // index into the transport's table; valid until test() returns true

// A host mark's flag: set once by one thread, waited for by another asleep (not spinning: on
// a host whose cores the ranks already fill, a spinning waiter takes them from the threads
// that move the data).
class HostSignal {
 public:
  explicit HostSignal(bool set = false) : set_(set) {}
  void set() {
    {
      std::lock_guard<std::mutex> lock(m_);
      set_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
  }
  bool is_set() const { return set_.load(std::memory_order_acquire); }
  // Until set, or until `give_up` is true (looked at every millisecond).
  void wait(const std::atomic<bool>& give_up) {
    std::unique_lock<std::mutex> lock(m_);
    while (!is_set() && !give_up.load()) cv_.wait_for(lock, std::chrono::milliseconds(1));
  }

 private:
  std::atomic<bool> set_;
  std::mutex m_;
  std::condition_variable cv_;
};

// A point in a queue of work (a backend's kernels, a transport's transfers) that work on the
// other queue can be made to wait for without the host waiting (the executor's queued mode,
// ExecutorOptions::queue_ahead). On a GPU a CUDA event recorded there; on a host a signal set
// once the work before it is done.
struct QueueMark {
  void* event = nullptr;               // cudaEvent_t
  std::shared_ptr<HostSignal> passed;  // host
  // Host marks: whether the work has passed it. A mark of neither kind (work already done
  // when it was asked for) has.
  bool has_passed() const { return passed ? passed->is_set() : event == nullptr; }
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;
  virtual MemorySpace memory() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // True when a send may wait for its receive (NCCL): a caller must then post every transfer
  // of a step between group_start() and group_end(), all ranks steps in the same order, or it
  // can deadlock. False when sends never wait for their receives (MPI non-blocking sends).
  virtual bool sends_wait_for_receives() const = 0;
  virtual void group_start() {}
  virtual void group_end() {}

  // The next `count` message numbers to (Send) or from (Recv) `peer`; both ends of a pair
  // reserve the same numbers as long as they run the same collectives in the same order.
  enum class Direction { Send, Recv };
  uint64_t reserve_seqs(Direction d, int peer, uint64_t count);

  // `bytes` at `buf` (in memory()) to `peer`. exact == false: a variable-length message.
  virtual Request post_send(const void* buf, size_t bytes, int peer, uint64_t seq, bool exact) = 0;
  // Into `buf` from `peer`: exactly `bytes` bytes (exact), or at most `bytes` (a
  // variable-length message; a larger one is a TransportError).
  virtual Request post_recv(void* buf, size_t bytes, int peer, uint64_t seq, bool exact) = 0;
  // True once the request finished (the request is then released); *received, if given,
  // gets the size of a received message.
  virtual bool test(Request r, size_t* received = nullptr) = 0;
  size_t wait(Request r);  // spins on test()
  virtual void barrier() = 0;
  // Collective: true on every rank when `flag` is true on any (a logical-or allreduce over the
  // host's MPI communicator, whatever the transport moves data with).
  virtual bool any(bool flag) = 0;

  // Queued mode: a transfer can be posted to wait for a mark of the backend's (its data's
  // kernel) without the host waiting, and a transfer's end is a mark. false: neither.
  virtual bool queues() const { return false; }
  // Whether posted transfers run one after the other (NCCL: one stream), so that a transfer
  // needs no mark of one posted before it.
  virtual bool runs_in_order() const { return false; }
  // The end of request r (posted, its group ended, not yet tested done).
  virtual QueueMark mark(Request r) {
    (void)r;
    throw TransportError(std::string(name()) + ": no queued mode");
  }
  // The next transfers posted (the next group) start once `m` has passed.
  virtual void queue_after(const QueueMark& m) {
    (void)m;
    throw TransportError(std::string(name()) + ": no queued mode");
  }

 protected:
  void init_seqs(int n) { next_seq_[0].assign(n, 0), next_seq_[1].assign(n, 0); }

 private:
  std::vector<uint64_t> next_seq_[2];
};

// Host buffers over an MPI communicator (duplicated, so nothing else's messages mix in).
// The tag of a message is its number modulo MPI_TAG_UB + 1: messages between a pair match by
// number whatever order they are posted in. Variable-length receives use MPI_Improbe and
// MPI_Imrecv with the size MPI_Get_count reports (docs/compcoll-run.md: what that costs).
// Queued mode: a post that must wait for marks is held here and handed to MPI by the test()
// that finds them passed (MPI has no queue to put it on); a transfer's mark is set by the
// test() that finds it done.
class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(MPI_Comm comm);
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  std::string_view name() const override { return "mpi"; }
  MemorySpace memory() const override { return MemorySpace::Host; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool sends_wait_for_receives() const override { return false; }
  Request post_send(const void* buf, size_t bytes, int peer, uint64_t seq, bool exact) override;
  Request post_recv(void* buf, size_t bytes, int peer, uint64_t seq, bool exact) override;
  bool test(Request r, size_t* received = nullptr) override;
  void barrier() override;
  bool any(bool flag) override;
  bool queues() const override { return true; }
  QueueMark mark(Request r) override;
  void queue_after(const QueueMark& m) override { waits_.push_back(m); }
  MPI_Comm comm() const { return comm_; }

 private:
  struct Pending {
    MPI_Request req = MPI_REQUEST_NULL;
    bool probing = false;  // a variable-length receive whose message has not been matched yet
    void* buf = nullptr;
    size_t capacity = 0, received = 0;
    int peer = -1, tag = 0;
    bool in_use = false;
    // Queued mode: not yet handed to MPI until these marks have passed.
    bool send = false, exact = true, held = false;
    std::vector<QueueMark> waits;
    std::shared_ptr<HostSignal> passed;  // its mark, once asked for
  };
  Request slot();
  void start(Pending& p);  // hands the post to MPI
  std::vector<QueueMark> waits_;  // for the next post
  int tag_of(uint64_t seq) const { return static_cast<int>(seq % (static_cast<uint64_t>(tag_ub_) + 1)); }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, tag_ub_ = 32767;
  std::vector<Pending> pending_;
  std::vector<Request> free_;
};

// Throws TransportError("CALL failed: MPI's error string") unless rc is MPI_SUCCESS.
void mpi_check(int rc, const char* call);

// Transport::any over an MPI communicator.
bool mpi_any(MPI_Comm comm, bool flag);

}  // namespace compcoll::real
