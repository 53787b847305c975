// shared/topology/sim_routes.h — the links a message crosses in compcoll-sim's SimGrid platform
// (sim/platform.cpp), computed without SimGrid, so the cost model (shared/policy) can charge
// every link of a route and see flows meet inside the network.
//
// It follows the deterministic routing of the zones the simulator builds (SimGrid 4.1):
// - two GPUs of one node: the sender's link up to the node switch, the receiver's link down
//   (the platform's bypass routes; a single node is a star zone with the same two links);
// - fat tree (FatTreeZone): d-mod-k up to the first common ancestor — at a tier-L element the
//   parent port is (destination leaf / (up_0 ... up_{L-1})) mod (up_L x links_L) — then down,
//   taking the parallel link (source leaf mod links) of each hop, with SimGrid's search order;
// - dragonfly (DragonflyZone, minimal routing): to the router of its chassis that serves the
//   target group, to chassis 0, the group's one global link, then the target blade and
//   chassis, exactly as SimGrid lists the links (parallel links are one link of n x bandwidth);
// - torus (TorusZone): dimension order, the direction chosen per dimension from the source's
//   and the target's coordinates as SimGrid chooses it.
// - a GPU and its node's switch (NVLink SHARP, topo::Topology::switch_of): the GPU's link up
//   to the node switch, then its link of nvls_efficiency into the switch's reduction; back,
//   that link's twin, then the GPU's link down (the platform's bypass routes).
// Links are directed (the simulator's links are split-duplex): one id per direction.
// tests/sim/test_sim_routes.cpp checks every route of small instances of each generator, link
// for link, against SimGrid's own Host::route_to.
#pragma once

#include <cstdint>
#include <vector>

#include "topology/topology.h"

namespace compcoll::topo {

struct NetLink {
  uint64_t id = 0;         // unique per directed link of the platform
  double bandwidth = 0;    // effective bytes/s
  double latency = 0;      // seconds
};

// Appends the links from src_gpu to dst_gpu, in the order a message crosses them, to `out`
// (nothing when src == dst). Either may be a switch endpoint, the other then a GPU of its
// node. Requires a topology built by load_topology / build_graph.
void append_sim_route(const Topology& t, int src_gpu, int dst_gpu, std::vector<NetLink>& out);

inline std::vector<NetLink> sim_route(const Topology& t, int src_gpu, int dst_gpu) {
  std::vector<NetLink> out;
  append_sim_route(t, src_gpu, dst_gpu, out);
  return out;
}

}  // namespace compcoll::topo
