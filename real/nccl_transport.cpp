// real/nccl_transport.cpp — NcclTransport, the NCCL baseline and make_nccl_backend
// (nccl_transport.h). Only compiled with CUDA and NCCL; never run on a machine without a GPU.
#include "real/nccl_transport.h"

#include <cuda_runtime.h>
#include <cstdlib>

#include "codec/cuda/check.h"
#include "real/verify.h"
#include "schedule/algorithms.h"

namespace compcoll::real {

std::string nccl_unavailable_reason() {
  const std::string why = gpu::cuda_unavailable_reason();
  return why.empty() ? why : "no CUDA device: " + why;
}

std::string nccl_version_string() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

// ncclConfig_t::nChannelsPerNetPeer, from NCCL 2.28.3.
#define COMPCOLL_NCCL_NET_PEER_VERSION NCCL_VERSION(2, 28, 3)
#if NCCL_VERSION_CODE >= COMPCOLL_NCCL_NET_PEER_VERSION
#define COMPCOLL_NCCL_NET_PEER_CONFIG 1
#else
#define COMPCOLL_NCCL_NET_PEER_CONFIG 0
#endif

std::string nccl_net_peer_config_unavailable() {
  if (!COMPCOLL_NCCL_NET_PEER_CONFIG)
    return "built with NCCL " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
           std::to_string(NCCL_PATCH) + ", whose ncclConfig_t has no nChannelsPerNetPeer (2.28.3 and later)";
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess || v < COMPCOLL_NCCL_NET_PEER_VERSION)
    return "NCCL " + nccl_version_string() +
           " is loaded, whose ncclConfig_t has no nChannelsPerNetPeer (2.28.3 and later)";
  return "";
}

int nccl_env_channels_per_net_peer() {
  const char* e = std::getenv("NCCL_NCHANNELS_PER_NET_PEER");
  if (!e || !*e) return 0;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 0);
  return *end == '\0' && v > 0 && v <= 64 ? static_cast<int>(v) : 0;
}

namespace {

// A communicator over `mpi` (rank 0's unique id, broadcast), `channels_per_net_peer` > 0 set in
// its configuration.
ncclComm_t init_comm(MPI_Comm mpi, int rank, int size, int channels_per_net_peer) {
  ncclUniqueId id;
  if (rank == 0) COMPCOLL_NCCL_CHECK(ncclGetUniqueId(&id));
  mpi_check(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, mpi), "MPI_Bcast(ncclUniqueId)");
  ncclComm_t c = nullptr;
  if (channels_per_net_peer <= 0) {
    COMPCOLL_NCCL_CHECK(ncclCommInitRank(&c, size, id, rank));
    return c;
  }
#if COMPCOLL_NCCL_NET_PEER_CONFIG
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.nChannelsPerNetPeer = channels_per_net_peer;
  COMPCOLL_NCCL_CHECK(ncclCommInitRankConfig(&c, size, id, rank, &config));
  return c;
#else
  throw TransportError("nccl: " + nccl_net_peer_config_unavailable());
#endif
}

}  // namespace

NcclTransport::NcclTransport(MPI_Comm comm, cudaStream_t stream, int channels_per_net_peer) : stream_(stream) {
  mpi_check(MPI_Comm_dup(comm, &mpi_), "MPI_Comm_dup");
  mpi_check(MPI_Comm_set_errhandler(mpi_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  MPI_Comm_rank(mpi_, &rank_);
  MPI_Comm_size(mpi_, &size_);
  int* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(mpi_, MPI_TAG_UB, &ub, &flag);
  if (flag && ub) tag_ub_ = *ub;
  comm_ = init_comm(mpi_, rank_, size_, channels_per_net_peer);
  if (channels_per_net_peer > 0) baseline_ = init_comm(mpi_, rank_, size_, 0);
  init_seqs(size_);
}

NcclTransport::~NcclTransport() {
  for (auto& p : pending_)
    if (p.done) cudaEventDestroy(p.done);
  if (baseline_) ncclCommDestroy(baseline_);
  if (comm_) ncclCommDestroy(comm_);
  if (mpi_ != MPI_COMM_NULL) MPI_Comm_free(&mpi_);
}

Request NcclTransport::slot() {
  if (free_.empty()) {
    pending_.emplace_back();
    COMPCOLL_CUDA_CHECK(cudaEventCreateWithFlags(&pending_.back().done, cudaEventDisableTiming));
    free_.push_back(static_cast<Request>(pending_.size() - 1));
  }
  const Request r = free_.back();
  free_.pop_back();
  pending_[static_cast<size_t>(r)].in_use = true;
  pending_[static_cast<size_t>(r)].flushed = false;
  pending_[static_cast<size_t>(r)].received = 0;
  return r;
}

void NcclTransport::group_start() { ++depth_; }

void NcclTransport::group_end() {
  if (depth_ == 0) throw TransportError("nccl: group_end without group_start");
  if (--depth_ == 0) flush();
}

Request NcclTransport::post_send(const void* buf, size_t bytes, int peer, uint64_t seq, bool exact) {
  const Request r = slot();
  group_.push_back({true, const_cast<void*>(buf), bytes, peer, seq, exact, r});
  if (depth_ == 0) flush();
  return r;
}

Request NcclTransport::post_recv(void* buf, size_t bytes, int peer, uint64_t seq, bool exact) {
  const Request r = slot();
  group_.push_back({false, buf, bytes, peer, seq, exact, r});
  if (depth_ == 0) flush();
  return r;
}

void NcclTransport::flush() {
  if (group_.empty()) return;
  std::vector<Post> posted;
  posted.swap(group_);  // whatever happens below, nothing of this group is posted again
  // 1. Sizes of variable-length messages, over MPI: the sender's host knows it (the executor
  //    waited for the compress op), the receiver needs it to name the count.
  std::vector<uint64_t> sizes(posted.size());
  std::vector<MPI_Request> reqs;
  for (size_t i = 0; i < posted.size(); ++i) {
    const Post& p = posted[i];
    if (p.exact) continue;
    const int tag = static_cast<int>(p.seq % (static_cast<uint64_t>(tag_ub_) + 1));
    reqs.emplace_back();
    if (p.send) {
      sizes[i] = p.bytes;
      mpi_check(MPI_Isend(&sizes[i], 1, MPI_UINT64_T, p.peer, tag, mpi_, &reqs.back()), "MPI_Isend(size)");
    } else {
      mpi_check(MPI_Irecv(&sizes[i], 1, MPI_UINT64_T, p.peer, tag, mpi_, &reqs.back()), "MPI_Irecv(size)");
    }
  }
  if (!reqs.empty()) mpi_check(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE), "MPI_Waitall(sizes)");
  for (size_t i = 0; i < posted.size(); ++i) {
    Post& p = posted[i];
    if (p.send || p.exact) continue;
    if (sizes[i] > p.bytes)
      throw TransportError("nccl: a " + std::to_string(sizes[i]) + "-byte message from rank " + std::to_string(p.peer) +
                           " exceeds its " + std::to_string(p.bytes) + "-byte receive buffer");
    p.bytes = sizes[i];
  }
  // 2. The transfers, in posting order (NCCL matches a pair's messages in that order). A
  //    failing call closes NCCL's (thread-local) group before the error goes on.
  COMPCOLL_NCCL_CHECK(ncclGroupStart());
  try {
    for (const Post& p : posted) {
      if (p.send) COMPCOLL_NCCL_CHECK(ncclSend(p.buf, p.bytes, ncclUint8, p.peer, comm_, stream_));
      else COMPCOLL_NCCL_CHECK(ncclRecv(p.buf, p.bytes, ncclUint8, p.peer, comm_, stream_));
    }
  } catch (...) {
    ncclGroupEnd();
    throw;
  }
  COMPCOLL_NCCL_CHECK(ncclGroupEnd());
  for (const Post& p : posted) {
    Pending& q = pending_[static_cast<size_t>(p.r)];
    q.received = p.bytes;
    q.flushed = true;
    COMPCOLL_CUDA_CHECK(cudaEventRecord(q.done, stream_));
  }
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream_);
}

bool NcclTransport::test(Request r, size_t* received) {
  Pending& p = pending_.at(static_cast<size_t>(r));
  if (!p.in_use) throw TransportError("nccl: test of request " + std::to_string(r) + ", which is not pending");
  // An event not yet recorded reads as complete (cudaEventQuery): a request is tested only
  // once its group has been handed to NCCL.
  if (!p.flushed)
    throw TransportError("nccl: test of request " + std::to_string(r) + " before its group was ended (group_end)");
  const cudaError_t e = cudaEventQuery(p.done);
  if (e == cudaErrorNotReady) {
    ncclResult_t async = ncclSuccess;
    COMPCOLL_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
    if (async != ncclSuccess && async != ncclInProgress)
      throw TransportError(std::string("nccl: communicator failed: ") + ncclGetErrorString(async));
    return false;
  }
  COMPCOLL_CUDA_CHECK(e);
  if (received) *received = p.received;
  p.in_use = false;
  free_.push_back(r);
  return true;
}

void NcclTransport::barrier() {
  COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  mpi_check(MPI_Barrier(mpi_), "MPI_Barrier");
}

bool NcclTransport::any(bool flag) { return mpi_any(mpi_, flag); }

QueueMark NcclTransport::mark(Request r) {
  const Pending& p = pending_.at(static_cast<size_t>(r));
  if (!p.in_use || !p.flushed)
    throw TransportError("nccl: mark of request " + std::to_string(r) + ", which is not posted in an ended group");
  return QueueMark{p.done, nullptr};
}

void NcclTransport::queue_after(const QueueMark& m) {
  if (m.event) COMPCOLL_CUDA_CHECK(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(m.event), 0));
}

NcclSetup make_nccl_backend(MPI_Comm comm, int local_rank, int channels_per_net_peer) {
  int devices = 0;
  COMPCOLL_CUDA_CHECK(cudaGetDeviceCount(&devices));
  if (devices == 0) throw TransportError("nccl: no CUDA device");
  COMPCOLL_CUDA_CHECK(cudaSetDevice(local_rank % devices));
  NcclSetup s;
  COMPCOLL_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  s.backend = make_cuda_backend(s.stream);
  s.transport = std::make_unique<NcclTransport>(comm, s.stream, channels_per_net_peer);
  return s;
}

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::BF16: return ncclBfloat16;
    case DType::FP16: return ncclFloat16;
    case DType::FP32: return ncclFloat32;
  }
  throw TransportError("nccl: unknown dtype");
}

class NcclBaseline final : public Baseline {
 public:
  NcclBaseline(NcclTransport& t, const sched::Schedule& s)
      : t_(t),
        coll_(s.collective),
        dtype_(s.dtype),
        count_(s.collective == sched::Collective::AllToAll ? alltoall_count(s) : s.count),
        n_(s.size()) {
    for (int r = 0; r < n_; ++r)
      if (s.collective == sched::Collective::Broadcast && s.ranks[r].input_count) root_ = r;
    if ((coll_ == sched::Collective::ReduceScatter || coll_ == sched::Collective::AllGather) && count_ % n_)
      throw TransportError("nccl baseline: " + std::string(sched::collective_name(coll_)) + " of " +
                           std::to_string(count_) + " elements needs a multiple of " + std::to_string(n_) + " ranks");
  }
  std::string name() const override {
    switch (coll_) {
      case sched::Collective::AllReduce: return "ncclAllReduce";
      case sched::Collective::ReduceScatter: return "ncclReduceScatter";
      case sched::Collective::AllGather: return "ncclAllGather";
      case sched::Collective::Broadcast: return "ncclBroadcast";
      case sched::Collective::AllToAll: return "ncclSend/Recv all-to-all";
    }
    return "?";
  }
  void run(const void* in, void* out) override {
    const ncclDataType_t ty = nccl_type(dtype_);
    ncclComm_t c = t_.baseline_comm();
    cudaStream_t st = t_.stream();
    switch (coll_) {
      case sched::Collective::AllReduce:
        COMPCOLL_NCCL_CHECK(ncclAllReduce(in, out, count_, ty, ncclSum, c, st));
        break;
      case sched::Collective::ReduceScatter:
        COMPCOLL_NCCL_CHECK(ncclReduceScatter(in, out, count_ / n_, ty, ncclSum, c, st));
        break;
      case sched::Collective::AllGather:
        COMPCOLL_NCCL_CHECK(ncclAllGather(in, out, count_ / n_, ty, c, st));
        break;
      case sched::Collective::Broadcast:
        COMPCOLL_NCCL_CHECK(ncclBroadcast(t_.rank() == root_ ? in : out, out, count_, ty, root_, c, st));
        break;
      case sched::Collective::AllToAll: {
        const size_t bytes = count_ * dtype_size(dtype_);
        COMPCOLL_NCCL_CHECK(ncclGroupStart());
        for (int p = 0; p < n_; ++p) {
          COMPCOLL_NCCL_CHECK(ncclSend(static_cast<const uint8_t*>(in) + p * bytes, count_, ty, p, c, st));
          COMPCOLL_NCCL_CHECK(ncclRecv(static_cast<uint8_t*>(out) + p * bytes, count_, ty, p, c, st));
        }
        COMPCOLL_NCCL_CHECK(ncclGroupEnd());
        break;
      }
    }
    COMPCOLL_CUDA_CHECK_LAUNCHES(st);
  }

 private:
  NcclTransport& t_;
  sched::Collective coll_;
  DType dtype_;
  uint64_t count_;
  int n_, root_ = 0;
};

}  // namespace

std::unique_ptr<Baseline> make_nccl_baseline(Transport& transport, const sched::Schedule& s) {
  auto* t = dynamic_cast<NcclTransport*>(&transport);
  if (!t) throw TransportError("nccl baseline: the transport is " + std::string(transport.name()) + ", not nccl");
  return std::make_unique<NcclBaseline>(*t, s);
}

}  // namespace compcoll::real
