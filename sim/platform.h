// sim/platform.h — a SimGrid platform from a compcoll topology (shared/topology), built with
// SimGrid's C++ zone API: one host per GPU; the network is SimGrid's own fat-tree, dragonfly or
// torus zone whose leaves are the GPUs (rail-major leaf order for a rail-optimized fat tree);
// the GPUs of a node reach each other through their own up/down links to the node switch
// (NVSwitch or PCIe), given as bypass routes of the network zone. A single node is a star zone.
// With NVLink SHARP the node's switch may be a host too: schedules' switch ranks run there.
#pragma once

#include <simgrid/s4u.hpp>

#include <vector>

#include "topology/topology.h"

namespace compcoll::sim {

struct Platform {
  std::vector<simgrid::s4u::Host*> gpu_hosts;     // by GPU id (node * gpus_per_node + local)
  std::vector<simgrid::s4u::Host*> switch_hosts;  // by node, with `switches` only
  // The host of an endpoint: a GPU or a node's switch (topo::Topology::switch_of).
  simgrid::s4u::Host* host(int endpoint) const {
    const auto g = static_cast<size_t>(endpoint);
    return g < gpu_hosts.size() ? gpu_hosts[g] : switch_hosts.at(g - gpu_hosts.size());
  }
};

// Call after the network model is configured and before any other zone exists. `switches`:
// NVLink SHARP's switches too, on a topology with NVLS (a host per node, reached from its GPUs
// by bypass routes through each GPU's link into the switch's reduction), for schedules with
// switch ranks (sched::Schedule::switches).
Platform build_platform(const topo::Topology& t, bool switches = false);

}  // namespace compcoll::sim
