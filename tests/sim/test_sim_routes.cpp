// tests/sim/test_sim_routes.cpp — topo::sim_route (what the cost model charges) lists the links
// SimGrid's own routing (Host::route_to on the simulator's platform) does: for every pair of
// GPUs of small instances of each generator, and for sampled pairs of the shipped topologies,
// the same number of links, in the same order, with the same bandwidth and latency, and one
// SimGrid link for each of our link ids across all routes (so two flows share a link in the
// cost model exactly when they share it in the simulator).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "sim/simulator.h"
#include "topology/sim_routes.h"

using namespace compcoll;

namespace {

std::string temp_yaml(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / ("compcoll-test-routes-" + name + ".yaml");
  std::ofstream(p) << text;
  return p.string();
}

std::string network_topology(const std::string& name, const std::string& generator, int gpus_per_node, int nics,
                             const std::string& network) {
  return "name: " + name + "\ngenerator: " + generator +
         "\nnode:\n  gpus: " + std::to_string(gpus_per_node) +
         "\n  fabric: nvswitch\n  gpu_link: {bandwidth: 450GB/s, latency: 0.5us, efficiency: 0.8}\n  nics_per_gpu: " +
         std::to_string(nics) + "\nnetwork:\n  link: {bandwidth: 400Gb/s, latency: 1us, efficiency: 0.9}\n" + network;
}

void check_routes(const topo::Topology& t, const std::vector<std::pair<int, int>>& pairs) {
  const auto theirs = sim::simgrid_routes(t, pairs);
  REQUIRE(theirs.size() == pairs.size());
  std::map<uint64_t, std::string> name_of;
  std::map<std::string, uint64_t> id_of;
  size_t mismatches = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto ours = topo::sim_route(t, pairs[i].first, pairs[i].second);
    const auto& sg = theirs[i];
    bool same = ours.size() == sg.size();
    for (size_t k = 0; same && k < ours.size(); ++k) {
      const auto [n, fresh_name] = name_of.emplace(ours[k].id, sg[k].name);
      const auto [d, fresh_id] = id_of.emplace(sg[k].name, ours[k].id);
      same = n->second == sg[k].name && d->second == ours[k].id &&
             ours[k].bandwidth == Approx(sg[k].bandwidth).epsilon(1e-9) &&
             ours[k].latency == Approx(sg[k].latency).epsilon(1e-9);
    }
    if (!same && ++mismatches <= 3) {
      std::string s = "SimGrid:";
      for (const auto& l : sg) s += " " + l.name;
      s += " | ours: " + std::to_string(ours.size()) + " links";
      CAPTURE(t.name, pairs[i].first, pairs[i].second, s);
      CHECK(same);
    }
  }
  CAPTURE(t.name, pairs.size());
  CHECK(mismatches == 0);
}

std::vector<std::pair<int, int>> all_pairs(int gpus) {
  std::vector<std::pair<int, int>> p;
  for (int a = 0; a < gpus; ++a)
    for (int b = 0; b < gpus; ++b)
      if (a != b) p.emplace_back(a, b);
  return p;
}

}  // namespace

TEST_CASE("sim_route lists SimGrid's links, every pair of small fat trees, dragonflies and tori",
          "[sim][topology][routes]") {
  struct Case {
    std::string name, generator;
    int gpus_per_node, nics;
    std::string network;
  };
  const std::vector<Case> cases = {
      // Two tiers, 2:1 oversubscribed (two uplinks for four ports), two NIC ports per GPU.
      {"fat-tree-2tier", "fat-tree", 2, 2, "  nodes: 8\n  tiers: 2\n  gpus_per_leaf: 4\n  oversubscription: 2\n"},
      {"fat-tree-3tier", "fat-tree", 2, 1, "  nodes: 16\n  tiers: 3\n  gpus_per_leaf: 4\n  leaves_per_pod: 2\n"},
      {"rail-fat-tree", "rail-fat-tree", 4, 1, "  nodes: 6\n  tiers: 2\n  gpus_per_leaf: 4\n"},
      // Four groups of three chassis of four routers: every branch of the minimal routing.
      {"dragonfly-small", "dragonfly", 2, 1,
       "  nodes: 48\n  groups: 4\n  group_links: 2\n  chassis: 3\n  chassis_links: 1\n  routers: 4\n"
       "  router_links: 3\n  gpus_per_router: 2\n"},
      {"dragonfly-one-gpu", "dragonfly", 1, 1,
       "  nodes: 16\n  groups: 2\n  chassis: 2\n  routers: 2\n  gpus_per_router: 2\n"},
      // Odd and even sizes, a dimension of two (one link used both ways), wrap-around.
      {"torus-3d", "torus", 1, 1, "  nodes: 30\n  dims: [5, 3, 2]\n"},
      {"torus-2d", "torus", 2, 1, "  nodes: 24\n  dims: [6, 8]\n"},
  };
  for (const auto& c : cases) {
    const auto t = topo::load_topology(temp_yaml(c.name, network_topology(c.name, c.generator, c.gpus_per_node, c.nics, c.network)));
    CAPTURE(c.name, t.gpus());
    check_routes(t, all_pairs(t.gpus()));
  }
}

TEST_CASE("sim_route lists SimGrid's links on the shipped topologies (sampled pairs)", "[sim][topology][routes]") {
  for (const char* file : {"dgx-h100.yaml", "h100-64gpu.yaml", "fat-tree-1k.yaml", "fat-tree-4k-2to1.yaml",
                           "torus-1k.yaml", "dragonfly-2k.yaml"}) {
    const auto t = topo::load_topology(std::string(COMPCOLL_SOURCE_DIR) + "/topologies/" + file);
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> gpu(0, t.gpus() - 1);
    std::vector<std::pair<int, int>> pairs;
    while (pairs.size() < 3000) {
      const int a = gpu(rng), b = gpu(rng);
      if (a != b) pairs.emplace_back(a, b);
    }
    CAPTURE(file);
    check_routes(t, pairs);
  }
}

// The pairs the policy-validation grid's 1,024-rank hierarchical plans use across nodes (one
// GPU of each node to the same GPU of every other node), for two of the eight rails.
TEST_CASE("sim_route lists SimGrid's links on the rails of 1,024 ranks of the contended topologies",
          "[sim][topology][routes]") {
  for (const char* f : {"torus-1k.yaml", "dragonfly-2k.yaml", "fat-tree-4k-2to1.yaml"}) {
    const auto t = topo::load_topology(std::string(COMPCOLL_SOURCE_DIR) + "/topologies/" + f, 1024);
    REQUIRE(t.gpus_per_node == 8);
    std::vector<std::pair<int, int>> pairs;
    for (int a = 0; a < 1024; a += 8)
      for (int b = 0; b < 1024; b += 8)
        if (a != b)
          for (int l : {0, 5}) pairs.emplace_back(t.rank_to_gpu[a + l], t.rank_to_gpu[b + l]);
    CAPTURE(f, pairs.size());
    check_routes(t, pairs);
  }
}

// NVLink SHARP: with the switches' hosts in the platform (created after the network zone's
// leaves), every GPU reaches its node's switch and back through its own port and its link into
// the switch's reduction, and the routes between GPUs, across nodes too, do not change.
TEST_CASE("sim_route lists SimGrid's links to and from the NVSwitch, and GPU routes stay put beside it",
          "[sim][topology][routes][nvls]") {
  std::vector<topo::Topology> ts;
  for (const char* file : {"dgx-h100.yaml", "h100-64gpu.yaml"})
    ts.push_back(topo::load_topology(std::string(COMPCOLL_SOURCE_DIR) + "/topologies/" + file));
  ts.push_back(topo::load_topology(temp_yaml("nvls-dragonfly", network_topology("nvls-dragonfly", "dragonfly", 2, 1,
      "  nodes: 8\n  groups: 2\n  chassis: 2\n  routers: 2\n  gpus_per_router: 2\n"))));
  ts.push_back(topo::load_topology(temp_yaml("nvls-torus", network_topology("nvls-torus", "torus", 4, 1, "  nodes: 6\n  dims: [6, 4]\n"))));
  for (const auto& t : ts) {
    CAPTURE(t.name);
    REQUIRE(t.nvls);
    std::vector<std::pair<int, int>> pairs = all_pairs(std::min(t.gpus(), 24));
    for (int g = 0; g < t.gpus(); ++g) {
      pairs.emplace_back(g, t.switch_of(t.node_of(g)));
      pairs.emplace_back(t.switch_of(t.node_of(g)), g);
    }
    check_routes(t, pairs);
    const auto up = topo::sim_route(t, 1, t.switch_of(0));
    REQUIRE(up.size() == 2);
    CHECK(up[1].bandwidth == Approx(t.gpu_link.bandwidth * t.nvls_efficiency));
    if (t.nodes > 1) CHECK_THROWS_AS(topo::sim_route(t, t.switch_of(0), t.gpus_per_node), std::logic_error);  // another node's GPU
  }
}
