// real/mpi_transport.cpp — Transport over MPI point-to-point on host buffers (transport.h).
#include <algorithm>
#include <climits>
#include <thread>

#include "real/transport.h"

namespace compcoll::real {

void mpi_check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw TransportError(std::string(call) + " failed: " + std::string(msg, static_cast<size_t>(len)));
}

uint64_t Transport::reserve_seqs(Direction d, int peer, uint64_t count) {
  auto& v = next_seq_[d == Direction::Send ? 0 : 1];
  if (peer < 0 || static_cast<size_t>(peer) >= v.size())
    throw TransportError("reserve_seqs: peer " + std::to_string(peer) + " is not a rank of " + std::to_string(v.size()));
  const uint64_t first = v[static_cast<size_t>(peer)];
  v[static_cast<size_t>(peer)] += count;
  return first;
}

size_t Transport::wait(Request r) {
  size_t received = 0;
  while (!test(r, &received)) std::this_thread::yield();
  return received;
}

MpiTransport::MpiTransport(MPI_Comm comm) {
  mpi_check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  // Errors come back as return codes (TransportError) instead of aborting the job.
  mpi_check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  int* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag);
  if (flag && ub) tag_ub_ = *ub;
  init_seqs(size_);
}

MpiTransport::~MpiTransport() {
  for (auto& p : pending_)
    if (p.in_use && p.req != MPI_REQUEST_NULL) {
      MPI_Cancel(&p.req);
      MPI_Request_free(&p.req);
    }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Request MpiTransport::slot() {
  if (free_.empty()) {
    pending_.emplace_back();
    free_.push_back(static_cast<Request>(pending_.size() - 1));
  }
  const Request r = free_.back();
  free_.pop_back();
  pending_[static_cast<size_t>(r)] = Pending{};
  pending_[static_cast<size_t>(r)].in_use = true;
  return r;
}

namespace {
int mpi_count(size_t bytes, const char* what, int peer) {
  if (bytes > static_cast<size_t>(INT_MAX))
    throw TransportError(std::string(what) + ": " + std::to_string(bytes) + " bytes to/from rank " + std::to_string(peer) +
                         " exceed MPI's int count (2 GiB); use smaller sizes or more chunks");
  return static_cast<int>(bytes);
}
}  // namespace

Request MpiTransport::post_send(const void* buf, size_t bytes, int peer, uint64_t seq, bool /*exact*/) {
  const Request r = slot();
  Pending& p = pending_[static_cast<size_t>(r)];
  p.send = true;
  p.peer = peer;
  p.tag = tag_of(seq);
  p.buf = const_cast<void*>(buf);
  p.capacity = bytes;
  p.waits.swap(waits_);
  start(p);
  return r;
}

Request MpiTransport::post_recv(void* buf, size_t bytes, int peer, uint64_t seq, bool exact) {
  const Request r = slot();
  Pending& p = pending_[static_cast<size_t>(r)];
  p.peer = peer;
  p.tag = tag_of(seq);
  p.buf = buf;
  p.capacity = bytes;
  p.exact = exact;
  p.waits.swap(waits_);
  start(p);
  return r;
}

void MpiTransport::start(Pending& p) {
  p.held = !std::all_of(p.waits.begin(), p.waits.end(), [](const QueueMark& m) { return m.has_passed(); });
  if (p.held) return;
  p.waits.clear();
  if (p.send) {
    mpi_check(MPI_Isend(p.buf, mpi_count(p.capacity, "MPI_Isend", p.peer), MPI_BYTE, p.peer, p.tag, comm_, &p.req),
              "MPI_Isend");
  } else if (p.exact) {
    p.received = p.capacity;
    mpi_check(MPI_Irecv(p.buf, mpi_count(p.capacity, "MPI_Irecv", p.peer), MPI_BYTE, p.peer, p.tag, comm_, &p.req),
              "MPI_Irecv");
  } else {
    p.probing = true;  // test() matches it with MPI_Improbe, then receives with MPI_Imrecv
  }
}

QueueMark MpiTransport::mark(Request r) {
  Pending& p = pending_.at(static_cast<size_t>(r));
  if (!p.in_use) throw TransportError("mark: request " + std::to_string(r) + " is not pending");
  if (!p.passed) p.passed = std::make_shared<HostSignal>();
  return QueueMark{nullptr, p.passed};
}

bool MpiTransport::test(Request r, size_t* received) {
  Pending& p = pending_.at(static_cast<size_t>(r));
  if (!p.in_use) throw TransportError("test: request " + std::to_string(r) + " is not pending");
  if (p.held) {
    start(p);
    if (p.held) return false;
  }
  if (p.probing) {
    int found = 0;
    MPI_Message msg;
    MPI_Status st;
    mpi_check(MPI_Improbe(p.peer, p.tag, comm_, &found, &msg, &st), "MPI_Improbe");
    if (!found) return false;
    int count = 0;
    mpi_check(MPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count");
    if (static_cast<size_t>(count) > p.capacity) {
      throw TransportError("a " + std::to_string(count) + "-byte message from rank " + std::to_string(p.peer) +
                           " exceeds its " + std::to_string(p.capacity) + "-byte receive buffer");
    }
    p.received = static_cast<size_t>(count);
    p.probing = false;
    mpi_check(MPI_Imrecv(p.buf, count, MPI_BYTE, &msg, &p.req), "MPI_Imrecv");
  }
  int done = 0;
  mpi_check(MPI_Test(&p.req, &done, MPI_STATUS_IGNORE), "MPI_Test");
  if (!done) return false;
  if (received) *received = p.received;
  if (p.passed) p.passed->set();
  p.in_use = false;
  free_.push_back(r);
  return true;
}

void MpiTransport::barrier() { mpi_check(MPI_Barrier(comm_), "MPI_Barrier"); }

bool mpi_any(MPI_Comm comm, bool flag) {
  int in = flag ? 1 : 0, out = 0;
  mpi_check(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LOR, comm), "MPI_Allreduce(any)");
  return out != 0;
}

bool MpiTransport::any(bool flag) { return mpi_any(comm_, flag); }

}  // namespace compcoll::real
