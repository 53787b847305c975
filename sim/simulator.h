// sim/simulator.h — runs collective schedules (shared/schedule) on a SimGrid model of a
// topology (shared/topology): every rank's program is a state machine driven by the completions
// of SimGrid activities, with no SimGrid actor (so nothing per rank but its state: no stack, no
// memory map); sends and receives are SimGrid host-to-host communications of the message's real
// size (compressed where the plan compresses); compress, decompress, reduce and copy are
// executions whose durations come from a calibration file (shared/calibration).
//
// SimGrid allows one engine per process, so simulate() forks: the child builds the platform
// once, and each call runs in a process forked from it (so every call starts from the same
// engine state and its result does not depend on the calls before it), streaming each result
// back through a pipe as it finishes; the parent never touches SimGrid. A crash in a call's
// process costs that call; a crash or an error in the child costs the rows not yet finished,
// never the ones already reported.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "calibration/calibration.h"
#include "policy/cost_model.h"
#include "schedule/build.h"
#include "topology/topology.h"

namespace compcoll::sim {

// SimGrid's network model and the knobs that change its answers (docs/compcoll-sim.md).
struct NetworkModel {
  std::string model = "lv08";   // lv08 (SimGrid's default flow model) | cm02 (plain latency/bandwidth)
  double latency_factor = 13.01;
  double bandwidth_factor = 0.97;
  bool crosstraffic = true;
  double tcp_gamma = 1e15;      // bytes; flows are capped at tcp_gamma / (2 x route latency)
  double weight_s = 20537;      // bytes; SimGrid's network/weight-S: a flow's sharing weight is its
                                // route latency + weight_s / bandwidth per link (LV08; CM02: 0)
  std::string update = "lazy";  // SimGrid's network/optim: lazy (its default: rates updated only
                                // where marked modified) or full (every flow at every event)
  double precision = 1e-12;     // seconds; SimGrid's precision/timing (its own default 1e-9)
  bool protocol_costs = false;  // NCCL's per-step latency and LL / LL128 wire bytes (policy::MessageCosts)
  int p2p_net_channels = policy::kP2pFillNic;  // NCCL's point-to-point channels per peer across
                                               // nodes of compcoll's plans (policy::NetFactors)
  // The defaults of a model: lv08 = SimGrid's (13.01, 0.97, cross-traffic on); cm02 = (1, 1, off).
  static NetworkModel defaults(const std::string& model);
  std::string describe() const;  // one line for outputs
  policy::NetFactors factors() const {
    return {latency_factor, bandwidth_factor, weight_s, crosstraffic, tcp_gamma, protocol_costs, p2p_net_channels};
  }
};

struct Call {
  sched::BuildSpec build;   // the schedule to run (nranks, count, algorithm, placement, ...)
  std::string codec = "identity";
  double ratio = 1.0;       // compressed bytes / uncompressed bytes of a wire message's payload
  int iterations = 1;       // > 1: back to back, as compcoll-run times a row (sched::repeated):
                            // each rank starts its next iteration once all of its ops of the
                            // last one are done and its sends delivered
  bool nccl_kernels = false;  // NCCL's kernels run it (policy::Plan::nccl_kernels): its reduce and
                              // copy ops take no time
  std::string protocol;       // NCCL's protocol for NCCL's kernels (policy::Plan::protocol)
  // Its codec's exposed time (codec_exposed_s) is worked out in the call's process; false: the
  // caller may ask codec_exposed_s itself (compcoll-sim does for an oracle's fastest candidate).
  bool exposed = true;
  bool operator==(const Call&) const = default;  // the same simulated call, the same result
};

// The largest schedule whose codec's exposed time a call reports: the cost model runs it twice,
// before the simulation, in the call's process (its memory is freed before SimGrid's peak).
constexpr uint64_t kMaxExposedOps = 4'000'000;

struct CallResult {
  size_t index = 0;         // into the job's calls
  double time_s = 0;        // simulated: from the start of the call to the last rank's last op
                            // (of the last iteration)
  double iteration_s = 0;   // mean over ranks of each rank's time (its last op done, its last send
                            // delivered) / iterations: compcoll-run's time column
  uint64_t messages = 0;    // SimGrid communications (per call, as all the counts here)
  uint64_t wire_bytes = 0;  // bytes on the wire, all ranks
  uint64_t raw_bytes = 0;   // the same messages' uncompressed bytes
  double codec_s = 0;       // compress + decompress time of the busiest rank (simulated)
  double reduce_s = 0;      // reduce + copy time of the busiest rank (simulated)
  double codec_exposed_s = NAN;  // the codec's exposed time in one call (policy::exposed_codec_s, the
                                 // cost model's), for compressed calls of at most kMaxExposedOps ops
  double wall_s = 0;        // host time to build the schedule and simulate it
  uint64_t ops = 0;         // schedule ops, all ranks
  uint64_t compress_ops = 0;  // its compress ops, all ranks: 0 where the plan compresses nothing
  // With NCCL's protocol costs, a plan of compcoll's that cannot run in step groups
  // (sched::lockstep_problem, which compcoll-run refuses on NCCL): why; it ran ungrouped.
  std::string ungrouped;
  std::string error;        // non-empty: this call failed (the message), the others still run
};

struct Job {
  topo::Topology topology;  // its rank_to_gpu places the ranks of every call
  calib::Calibration calibration;
  NetworkModel network;
  std::vector<Call> calls;
};

struct JobStats {
  double platform_wall_s = 0;   // building the SimGrid platform
  long peak_rss_kb = 0;         // of the child process
  std::string error;            // the child died or failed before finishing every call
};

// Runs every call of the job in a forked child; on_result is called in the parent, in order,
// as each finishes.
JobStats simulate(const Job& job, const std::function<void(const CallResult&)>& on_result);

// The codec's exposed time in one of the call's calls on the job's platform
// (policy::exposed_codec_s, as a simulated call with `exposed` reports it): 0 with the zero
// calibration; NaN for identity, a schedule of more than kMaxExposedOps ops, or one the cost
// model cannot price. No SimGrid: the cost model alone, in this process.
double codec_exposed_s(const Job& job, const Call& call);

// The links SimGrid routes each (source, destination) pair of endpoints (GPUs, or a node's switch:
// topo::Topology::switch_of) through on the topology's
// platform, in order (forks like simulate(); for tests and debugging).
struct SimGridLink {
  std::string name;
  double bandwidth = 0, latency = 0;
};
std::vector<std::vector<SimGridLink>> simgrid_routes(const topo::Topology& t,
                                                     const std::vector<std::pair<int, int>>& pairs);

// Peak memory of simulating one group of calls (the largest of the platform's process and a
// call's process, which starts as its copy): the platform of `gpus` GPUs (SimGrid's hosts,
// links and routes) and the largest call, `ranks` ranks' state over a schedule of `ops` ops
// (policy::plan_size). A fit to measured peaks (docs/compcoll-sim.md, "Memory").
double expected_peak_bytes(int gpus, int ranks, uint64_t ops);

// The memory this process may still take: the machine's MemAvailable, capped by its cgroup's
// limit (v2 memory.max, v1 memory.limit_in_bytes) less what the cgroup holds, and by
// RLIMIT_AS; infinity where none can be read.
double available_memory_bytes();

}  // namespace compcoll::sim
