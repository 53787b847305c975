// shared/policy/cost_model.h — predicts how long a plan takes without simulating the network:
// the schedule's dependency graph is walked once, each message crossing the links of the route
// the simulator gives it (topo::sim_route), each kernel taking its calibration duration
// (shared/calibration), compressed messages sized by the expected ratio; ops are taken in the
// order they become ready, as a small discrete-event walk. It follows the simulator's rules
// (sim/simulator.cpp): buffered sends, one message at a time from a rank to a peer, a message
// leaves when both sides have posted it.
//
// Sharing: every directed link keeps the time it is busy until; a message of b bytes holds
// each link l of its route for b / bandwidth_l and arrives when the last of its links is done,
// plus the route's latency. Messages that can leave at the same instant (every op ready then
// is posted first) leave together: on a link they share, each ends when the link has carried
// all of them, as max-min sharing ends flows that start together; a message that comes later
// waits for the link. So flows that meet on a link — a GPU's own link out or in, an
// oversubscribed fat tree's uplink, a dragonfly's global link, a torus link on multi-hop
// paths — together take their bytes over its bandwidth. What this misses: the rate a flow
// loses to a bottleneck elsewhere while it holds a link (a link is held per link, not per
// route), and sharing among flows that start at different instants (taken in turn). Within
// 5% of the simulator where flows share no link inside the network, within 0.95-1.09 where
// they do (tests/sim/test_cost_model.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "calibration/calibration.h"
#include "schedule/schedule.h"
#include "topology/sim_routes.h"
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

// Routes between GPUs as the simulator takes them (topo::sim_route), cached per pair: the
// directed links in order and their summed latency.
struct RouteInfo {
  double latency = 0;
  uint32_t first = 0, count = 0;  // into RouteCache's link list
};

class RouteCache {
 public:
  explicit RouteCache(const topo::Topology& t) : t_(t) {}
  const RouteInfo& get(int src_gpu, int dst_gpu);
  const topo::NetLink* links(const RouteInfo& r) const { return links_.data() + r.first; }

 private:
  const topo::Topology& t_;
  std::unordered_map<uint64_t, RouteInfo> cache_;
  std::vector<topo::NetLink> links_;
};

// Ranks of `s` sit on t.rank_to_gpu. Throws std::runtime_error if the schedule cannot finish.
PlanCost predict(const sched::Schedule& s, const topo::Topology& t, const calib::Calibration& cal,
                 const std::string& codec, double ratio, const NetFactors& net, RouteCache& routes);

}  // namespace compcoll::policy
