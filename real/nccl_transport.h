// real/nccl_transport.h — the GPU side of the real executor: NcclTransport (device buffers,
// ncclSend / ncclRecv inside ncclGroupStart / ncclGroupEnd on one communicator for the group,
// bootstrapped by an MPI_Bcast of the ncclUniqueId), the CUDA DataBackend (codec kernels of
// codec/cuda/codec_cuda.h, a reduce kernel, one compute stream) and NCCL's own collectives as
// the baseline. Compiled and linked whenever CUDA and NCCL are found; run only where a GPU
// is present (nccl_unavailable_reason()).
//
// Variable-length messages: NCCL has no probe and a receive must name the sender's count, so
// the size of each compressed stream goes first over MPI (tagged by its message number), and
// the group's NCCL calls are issued once the sizes are in. docs/compcoll-run.md: the cost. A
// stream within a wire budget (real/executor.h) is an exact message and needs no exchange.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "real/backend.h"
#include "real/baseline.h"
#include "real/transport.h"
#include "schedule/schedule.h"

// Checks an NCCL call; throws compcoll::real::TransportError("file:line: call failed: ...").
#define COMPCOLL_NCCL_CHECK(call)                                                                   \
  do {                                                                                              \
    const ncclResult_t compcoll_nccl_res_ = (call);                                                 \
    if (compcoll_nccl_res_ != ncclSuccess)                                                          \
      throw ::compcoll::real::TransportError(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                                             ": " #call " failed: " +                               \
                                             ncclGetErrorString(compcoll_nccl_res_));               \
  } while (0)

namespace compcoll::real {

// Empty when this process can run the nccl backend (a CUDA device is visible), else why not,
// in one line ("no CUDA device: cudaGetDeviceCount: no CUDA-capable device is detected").
std::string nccl_unavailable_reason();
std::string nccl_version_string();  // "2.27.7"
// "" when this NCCL takes a communicator's channels per network peer in its config
// (ncclConfig_t::nChannelsPerNetPeer, NCCL 2.28.3 and later, as built and as loaded), else why not.
std::string nccl_net_peer_config_unavailable();
// NCCL_NCHANNELS_PER_NET_PEER (> 0), which NCCL applies to every communicator over its config;
// 0 when unset or not a positive number (NCCL then ignores it too).
int nccl_env_channels_per_net_peer();

class NcclTransport final : public Transport {
 public:
  // Collective over `comm`: rank 0 makes the unique id, MPI_Bcast hands it to every rank,
  // ncclCommInitRank makes the communicator. The current CUDA device must be set. Transfers
  // run on `stream` (not owned). `channels_per_net_peer` > 0: the communicator's channels per
  // peer on another node (ncclConfig_t::nChannelsPerNetPeer; nccl_net_peer_config_unavailable()
  // must be ""), and NCCL's own collectives (baseline_comm()) get a second communicator with
  // NCCL's defaults; 0: one communicator, NCCL's defaults.
  NcclTransport(MPI_Comm comm, cudaStream_t stream, int channels_per_net_peer = 0);
  ~NcclTransport() override;
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;

  std::string_view name() const override { return "nccl"; }
  MemorySpace memory() const override { return MemorySpace::Device; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool sends_wait_for_receives() const override { return true; }
  void group_start() override;
  void group_end() override;
  Request post_send(const void* buf, size_t bytes, int peer, uint64_t seq, bool exact) override;
  Request post_recv(void* buf, size_t bytes, int peer, uint64_t seq, bool exact) override;
  bool test(Request r, size_t* received = nullptr) override;
  void barrier() override;
  bool any(bool flag) override;
  // Queued mode: the transfer stream is the queue (groups run in posting order); a mark is a
  // request's event (recorded when its group ended), a wait cudaStreamWaitEvent, taken at once.
  bool queues() const override { return true; }
  bool runs_in_order() const override { return true; }
  QueueMark mark(Request r) override;
  void queue_after(const QueueMark& m) override;

  ncclComm_t comm() const { return comm_; }
  ncclComm_t baseline_comm() const { return baseline_ ? baseline_ : comm_; }
  cudaStream_t stream() const { return stream_; }

 private:
  struct Post {
    bool send;
    void* buf;
    size_t bytes;  // exact size, or the receive's capacity until the size arrives
    int peer;
    uint64_t seq;
    bool exact;
    Request r;
  };
  struct Pending {
    cudaEvent_t done = nullptr;
    size_t received = 0;
    bool in_use = false;
    bool flushed = false;  // its group was handed to NCCL and `done` recorded after it
  };
  Request slot();
  void flush();  // the collected group: sizes over MPI, then the NCCL calls, then one event

  MPI_Comm mpi_ = MPI_COMM_NULL;
  ncclComm_t comm_ = nullptr;
  ncclComm_t baseline_ = nullptr;  // NCCL's own collectives, where comm_ has a set configuration
  cudaStream_t stream_;
  int rank_ = 0, size_ = 1, tag_ub_ = 32767, depth_ = 0;
  std::vector<Post> group_;
  std::vector<Pending> pending_;
  std::vector<Request> free_;
};

// The CUDA backend on the current device: a compute stream (created), and `comm_stream`
// (owned from here on: destroyed with the backend) whose work the timer and synchronize()
// cover too.
std::unique_ptr<DataBackend> make_cuda_backend(cudaStream_t comm_stream);

// Picks the GPU of this local rank (local_rank % devices), creates the transfer stream, the
// communicator over `comm` and the CUDA backend sharing that stream.
struct NcclSetup {
  std::unique_ptr<Transport> transport;  // an NcclTransport
  std::unique_ptr<DataBackend> backend;
  cudaStream_t stream = nullptr;
};
NcclSetup make_nccl_backend(MPI_Comm comm, int local_rank, int channels_per_net_peer = 0);

// NCCL's collective for schedule `s` (ncclAllReduce, ncclReduceScatter, ncclAllGather,
// ncclBroadcast; all-to-all as grouped ncclSend/ncclRecv like nccl-tests) on `transport`'s
// baseline communicator (NCCL's defaults) and stream. Reduce-scatter and allgather need
// count % ranks == 0.
std::unique_ptr<Baseline> make_nccl_baseline(Transport& transport, const sched::Schedule& s);

}  // namespace compcoll::real
