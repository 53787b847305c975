// shared/policy/cost_model.h — predicts how long a plan takes without simulating the network:
// the schedule's dependency graph is walked once, each message costing its route's latency
// plus bytes over the route's narrowest link (shared/topology), each kernel its calibration
// duration (shared/calibration), compressed messages sized by the expected ratio; ops are
// taken in the order they become ready, as a small discrete-event walk. It follows
// the simulator's rules (sim/simulator.cpp): buffered sends, one message at a time from a rank
// to a peer, a message leaves when both sides have posted it. Sharing is modelled where it
// matters most, at the ends: the messages a GPU sends to different peers take turns on its
// link out (and those it receives on its link in), each holding the link for bytes /
// bandwidth; links inside the network (an oversubscribed fat tree's uplinks) are charged as
// if each flow had them alone. On contention-free topologies it matches the simulator
// (tests/sim/test_cost_model.cpp: within 5%); where flows meet inside the network it is
// optimistic.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "calibration/calibration.h"
#include "schedule/schedule.h"
#include "topology/topology.h"

namespace compcoll::policy {

// The network model's corrections the simulator applies (sim::NetworkModel), so the two agree.
struct NetFactors {
  double latency_factor = 1.0;
  double bandwidth_factor = 1.0;
};

struct PlanCost {
  double time_s = 0;       // from the first op to the last one, all ranks
  double codec_s = 0;      // compress + decompress time of the busiest rank
  uint64_t wire_bytes = 0; // all messages
  uint64_t messages = 0;
};

// What the cost model needs of the route between two GPUs: its latency, its bottleneck
// bandwidth, and its first and last links (directed: SimGrid's links are split-duplex) — the
// GPU's way out and the peer's way in, which the GPU's messages to different peers share.
struct RouteInfo {
  double latency = 0, bandwidth = 0;
  uint64_t out_link = 0, in_link = 0;
};

// Routes between GPUs, cached (a BFS per new pair).
class RouteCache {
 public:
  explicit RouteCache(const topo::Topology& t) : t_(t) {}
  const RouteInfo& get(int src_gpu, int dst_gpu);

 private:
  const topo::Topology& t_;
  std::map<std::pair<int, int>, RouteInfo> cache_;
};

// Ranks of `s` sit on t.rank_to_gpu. Throws std::runtime_error if the schedule cannot finish.
PlanCost predict(const sched::Schedule& s, const topo::Topology& t, const calib::Calibration& cal,
                 const std::string& codec, double ratio, const NetFactors& net, RouteCache& routes);

}  // namespace compcoll::policy
