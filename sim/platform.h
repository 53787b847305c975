// sim/platform.h — a SimGrid platform from a compcoll topology (shared/topology), built with
// SimGrid's C++ zone API: one host per GPU; the network is SimGrid's own fat-tree, dragonfly or
// torus zone whose leaves are the GPUs (rail-major leaf order for a rail-optimized fat tree);
// the GPUs of a node reach each other through their own up/down links to the node switch
// (NVSwitch or PCIe), given as bypass routes of the network zone. A single node is a star zone.
#pragma once

#include <simgrid/s4u.hpp>

#include <vector>

#include "topology/topology.h"

namespace compcoll::sim {

struct Platform {
  std::vector<simgrid::s4u::Host*> gpu_hosts;  // by GPU id (node * gpus_per_node + local)
};

// Call after the network model is configured and before any other zone exists.
Platform build_platform(const topo::Topology& t);

}  // namespace compcoll::sim
