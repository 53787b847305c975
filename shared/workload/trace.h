// shared/workload/trace.h — a real training job's iteration from its PyTorch profiler traces
// (docs/WORKLOADS.md, "Trace replay"): one Chrome-trace JSON per rank, as torch.profiler writes
// it. Each rank's step becomes a timeline of compute, collective calls (issued, then executed
// on the process group's stream) and waits (the rank blocked until a call finished); replay()
// runs the timelines of all ranks again with other call times, the calls of a group starting
// when every member has issued them. Nothing here picks an algorithm or a codec.
//
// Schemas read: the gloo backend's (c10d::* CPU ops on the main thread, gloo:* annotations on
// the process group's worker threads; the group is told by which group's threads ran the call),
// record_param_comms events (collective name, element counts, dtype and the group's ranks on
// the event), and GPU traces of NCCL jobs (the GPU work the step launched: NCCL kernels with
// the same args, and the compute lane). A trace of another schema, without collectives,
// without a ProfilerStep annotation, or a rank set with holes is refused with the file and
// the event.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "schedule/schedule.h"
#include "util/dtype.h"

namespace compcoll::workload {

// The job's layout in Megatron-LM's rank order (rank = (pp stage x dp + dp rank) x tp + tp
// rank), which names each process group: tp, dp, pp or world (load_trace refuses a call on a
// group that is none of them: the layout is not the job's).
struct TraceLayout {
  int dp = 0, tp = 1, pp = 1;  // dp 0: the trace's world / (tp x pp)
};

struct TraceGroup {
  std::vector<int> ranks;  // job ranks, ascending
  std::string label;       // tp | dp | pp | world
};

struct TraceCall {
  sched::Collective collective = sched::Collective::AllReduce;
  std::string name;        // the trace's name (c10d::allreduce_, allreduce, ...)
  uint64_t bytes = 0;      // nccl-tests size: allgather output, reduce-scatter input, ...
  DType dtype = DType::FP32;
  size_t group = 0;        // index into TraceJob::groups
  bool backward = false;   // issued inside autograd's backward
  std::string tensor;      // ratio-model kind: grad, param, act, actgrad, moe-dispatch
  std::string kind;        // label-collective, e.g. dp-allreduce (the tables' call kind)
  double issue_s = 0;      // from the step's start, on the issuing thread
  double start_s = 0, end_s = 0;  // executed, from the step's start
  double measured_s() const { return end_s - start_s; }
};

struct TraceItem {
  enum class Type : uint8_t { Compute, Issue, Wait } type = Type::Compute;
  double seconds = 0;  // Compute
  size_t call = 0;     // Issue, Wait: index into RankTrace::calls
};

struct RankTrace {
  int rank = 0;
  std::string file;
  std::string step;            // ProfilerStep#N
  double step_s = 0;           // the step's length in the trace
  double compute_s = 0;        // step_s minus the waits
  std::vector<TraceCall> calls;  // in issue order
  std::vector<TraceItem> items;
};

// The most ranks a job may have, as traced (distributedInfo's world_size) or scaled
// (scale_data_parallel): 8x the largest cluster of the repository's topologies (131,072 GPUs).
constexpr int kMaxTraceRanks = 1 << 20;

struct TraceJob {
  std::string backend;   // gloo, nccl, ...
  int world = 0;
  TraceLayout layout;
  std::vector<TraceGroup> groups;
  std::vector<RankTrace> ranks;  // index = rank
};

// Reads one trace file per rank (any order; distributedInfo says whose). `step`: the
// ProfilerStep#N to read; -1: the last step every file has. `spmd`: one file only, whose rank
// stands for every rank of the job (each rank runs the same step, on its own tp, dp, pp or
// world groups). Throws std::runtime_error naming the
// file and the event (or key) on bad input, and naming the file and the call when a call's group
// is none of the layout's tp, dp, pp or world groups.
TraceJob load_trace(const std::vector<std::string>& files, const TraceLayout& layout, int step = -1,
                    bool spmd = false);

// The job with its data parallelism K times larger: every rank's timeline copied to the K
// replicas, data-parallel groups (and the world group) K times larger with the same bytes per
// rank (allgather, reduce-scatter and all-to-all sizes grow K times), other groups copied per
// replica. A group none of tp, dp, pp or world is refused, naming the file and its first call;
// a job of more than kMaxTraceRanks ranks, naming the factor.
TraceJob scale_data_parallel(const TraceJob& job, int k);

// Each call's traced time as the replay charges it: from the latest member's start to the
// earliest member's end (a member's own span includes waiting for the others to arrive, which
// the replay adds by starting a call when all have issued it). [rank][call], seconds.
std::vector<std::vector<double>> traced_call_seconds(const TraceJob& job);

// Replays every rank's timeline with call (rank, index) taking seconds(rank, index): compute
// items as traced, a call starts when all members of its group have issued it and the group's
// previous call has finished on every member, a wait blocks the rank until its call ends.
// Returns each rank's iteration time (its last item or its last call's end, whichever is later).
// Throws std::runtime_error when the ranks' calls do not match (the traces disagree).
std::vector<double> replay(const TraceJob& job, const std::function<double(int rank, size_t call)>& seconds);

}  // namespace compcoll::workload
