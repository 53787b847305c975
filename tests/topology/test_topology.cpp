// tests/topology/test_topology.cpp — topology files load into the graph the simulator and the
// cost model share; generators have the shapes they claim; bad files fail with one line naming
// the file and the key.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "config/yaml_node.h"
#include "topology/topology.h"

using namespace compcoll;
using namespace compcoll::topo;

namespace {

std::string topo_file(const std::string& name) { return std::string(COMPCOLL_SOURCE_DIR) + "/topologies/" + name; }

// Writes `text` to a temporary YAML file and returns its path.
std::string temp_yaml(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / ("compcoll-test-" + name + ".yaml");
  std::ofstream(p) << text;
  return p.string();
}

size_t count_kind(const Topology& t, VertexKind k) {
  size_t n = 0;
  for (auto v : boost::make_iterator_range(vertices(t.graph)))
    if (t.graph[v].kind == k) ++n;
  return n;
}

const char* kNode = R"(node:
  gpus: 8
  fabric: nvswitch
  gpu_link: {bandwidth: 450GB/s, latency: 0.5us, efficiency: 0.8}
)";

}  // namespace

TEST_CASE("every shipped topology loads, with the GPU count its name says", "[topology]") {
  const std::vector<std::pair<std::string, int>> files = {
      {"dgx-h100.yaml", 8},          {"h100-64gpu.yaml", 64},     {"fat-tree-1k.yaml", 1024},
      {"host-mpi.yaml", 2},          {"host-mpi-4.yaml", 4},
      {"fat-tree-4k-2to1.yaml", 4096}, {"fat-tree-16k.yaml", 16384}, {"dragonfly-2k.yaml", 2048},
      {"dragonfly-16k.yaml", 16384}, {"torus-1k.yaml", 1024},     {"torus-16k.yaml", 16384}};
  for (const auto& [f, gpus] : files) {
    CAPTURE(f);
    const Topology t = load_topology(topo_file(f));
    CHECK(t.gpus() == gpus);
    CHECK(t.rank_to_gpu.size() == static_cast<size_t>(gpus));
    CHECK(count_kind(t, VertexKind::Gpu) == static_cast<size_t>(gpus));
    CHECK(count_kind(t, VertexKind::NodeSwitch) == static_cast<size_t>(t.nodes));
    // Every GPU reaches GPU 0.
    for (int g : {1, gpus / 2, gpus - 1}) CHECK(route(t, g, 0).hops() >= 2);
    CHECK_THAT(describe(t), Catch::Contains("placement linear"));
  }
}

TEST_CASE("dgx-h100: GPU to GPU through NVSwitch, two links of the stated bandwidth", "[topology]") {
  const Topology t = load_topology(topo_file("dgx-h100.yaml"));
  REQUIRE(t.generator == Generator::SingleNode);
  const Route r = route(t, 0, 7);
  CHECK(r.hops() == 2);
  CHECK(r.latency == Approx(2 * 0.5e-6));
  CHECK(r.bandwidth == Approx(450e9 * t.gpu_link.efficiency));
}

TEST_CASE("rail-optimized fat tree: same rail one leaf switch, other rail through a spine", "[topology]") {
  const Topology t = load_topology(topo_file("h100-64gpu.yaml"));
  REQUIRE(t.generator == Generator::RailFatTree);
  CHECK(t.fat_tree.down == std::vector<unsigned>{8, 8});
  CHECK(t.fat_tree.up == std::vector<unsigned>{1, 8});
  CHECK(count_kind(t, VertexKind::NetworkSwitch) == 8 + 8);
  CHECK(route(t, 0, 8).hops() == 2);    // node 0 gpu 0 -> node 1 gpu 0: rail 0's leaf
  CHECK(route(t, 0, 9).hops() == 4);    // node 0 gpu 0 -> node 1 gpu 1: leaf, spine, leaf
  CHECK(route(t, 0, 1).hops() == 2);    // same node: NVSwitch
  CHECK(route(t, 0, 8).latency == Approx(2e-6));
  CHECK(route(t, 0, 8).bandwidth == Approx(50e9 * 0.92));
  // Leaf order is rail-major and invertible.
  for (int g = 0; g < t.gpus(); ++g) CHECK(t.gpu_of_leaf(t.leaf_of(g)) == g);
  CHECK(t.leaf_of(9) == 1u * 8 + 1);
}

TEST_CASE("three-tier fat tree: XGFT counts and the longest route", "[topology]") {
  const Topology t = load_topology(topo_file("fat-tree-16k.yaml"));
  CHECK(t.fat_tree.down == std::vector<unsigned>{32, 32, 16});
  CHECK(t.fat_tree.up == std::vector<unsigned>{1, 32, 32});
  // 512 leaf switches, 16 x 32 aggregation, 32 x 32 core.
  CHECK(count_kind(t, VertexKind::NetworkSwitch) == 512 + 512 + 1024);
  // Same rail, other pod: leaf, aggregation, core, aggregation, leaf = 6 hops.
  const int other_pod = 1024 * 8;  // node 1024, GPU 0: rail 0, leaf index 1024 -> pod 1
  CHECK(route(t, 0, other_pod).hops() == 6);
}

TEST_CASE("oversubscription sets the leaf uplinks", "[topology]") {
  const Topology t = load_topology(topo_file("fat-tree-4k-2to1.yaml"));
  CHECK(t.fat_tree.up == std::vector<unsigned>{1, 16});
  CHECK(t.fat_tree.down == std::vector<unsigned>{32, 128});
  CHECK_THAT(describe(t), Catch::Contains("oversubscription 2:1"));
}

TEST_CASE("torus: neighbours one hop apart, wrap-around included", "[topology]") {
  const Topology t = load_topology(topo_file("torus-1k.yaml"));
  CHECK(route(t, 0, 8).hops() == 1);          // +1 in dimension 1 (stride 8)
  CHECK(route(t, 0, 7 * 8).hops() == 1);      // wrap in dimension 1
  CHECK(route(t, 0, 64).hops() == 1);         // +1 in dimension 2 (stride 64)
  CHECK(route(t, 0, 9).hops() == 2);          // other node: +1 +1, through the network
  CHECK(num_edges(t.graph) == 1024 * 3 + 1024 /* GPU to node switch */);
}

TEST_CASE("placement: round-robin and explicit, printed", "[topology]") {
  const std::string f = temp_yaml("placement", std::string("name: p\ngenerator: fat-tree\n") + kNode +
                                                   "network:\n  nodes: 4\n  link: {bandwidth: 400Gb/s, latency: 1us}\n"
                                                   "  tiers: 2\n  gpus_per_leaf: 8\nplacement: round-robin\n");
  const Topology t = load_topology(f);
  CHECK(t.rank_to_gpu[1] == 8);   // rank 1 -> node 1, gpu 0
  CHECK(t.rank_to_gpu[4] == 1);   // rank 4 -> node 0, gpu 1
  CHECK_THAT(describe(t), Catch::Contains("rank 1 -> node 1 gpu 0"));
  // The nodes a group of the first N ranks occupies, by the placement.
  CHECK(t.nodes_spanned(1) == 1);
  CHECK(t.nodes_spanned(2) == 2);
  CHECK(t.nodes_spanned(4) == 4);
  CHECK(t.nodes_spanned(32) == 4);
  const std::string g = temp_yaml("explicit", std::string("name: p\ngenerator: single-node\n") + kNode +
                                                  "placement: [7, 6, 5]\n");
  const Topology u = load_topology(g, 3);
  CHECK(u.rank_to_gpu == std::vector<int>{7, 6, 5});
  CHECK(u.nodes_spanned(3) == 1);
  const std::string h = temp_yaml("explicit2", std::string("name: p\ngenerator: fat-tree\n") + kNode +
                                                   "network:\n  nodes: 4\n  link: {bandwidth: 400Gb/s, latency: 1us}\n"
                                                   "  tiers: 2\n  gpus_per_leaf: 8\nplacement: [0, 1, 8, 9]\n");
  const Topology v = load_topology(h, 4);
  CHECK(v.nodes_spanned(2) == 1);  // ranks 0, 1 on node 0
  CHECK(v.nodes_spanned(4) == 2);
  const Topology w = load_topology(temp_yaml("linear", std::string("name: p\ngenerator: fat-tree\n") + kNode +
                                                   "network:\n  nodes: 4\n  link: {bandwidth: 400Gb/s, latency: 1us}\n"
                                                   "  tiers: 2\n  gpus_per_leaf: 8\n"));
  CHECK(w.nodes_spanned(8) == 1);
  CHECK(w.nodes_spanned(9) == 2);
  CHECK(w.nodes_spanned(32) == 4);
}

TEST_CASE("bad topology files: one line naming the file, the key path and what was expected", "[topology][errors]") {
  struct Case {
    const char* name;
    std::string text;
    int ranks;
    const char* expect;
  };
  const std::string net = "network:\n  nodes: 4\n  link: {bandwidth: 400Gb/s, latency: 1us}\n  tiers: 2\n  gpus_per_leaf: 8\n";
  const std::vector<Case> cases = {
      {"missing", "name: x\ngenerator: single-node\n", 0, "(top level): missing key 'node'"},
      {"generator", std::string("name: x\ngenerator: hypercube\n") + kNode, 0,
       "generator: expected one of single-node, fat-tree, rail-fat-tree, dragonfly, torus, got 'hypercube'"},
      {"type", "name: x\ngenerator: single-node\nnode:\n  gpus: eight\n", 0, "node.gpus: expected an integer, got 'eight'"},
      {"unit", "name: x\ngenerator: single-node\nnode:\n  gpus: 8\n  fabric: nvswitch\n  gpu_link: {bandwidth: fast, latency: 1us}\n",
       0, "node.gpu_link.bandwidth: expected a bandwidth"},
      {"unknown", std::string("name: x\ngenerator: single-node\n") + kNode + "colour: blue\n", 0,
       "(top level): unknown key 'colour'"},
      {"unknown-nested", std::string("name: x\ngenerator: fat-tree\n") + kNode + net + "  teirs: 3\n", 0,
       "network: unknown key 'teirs'"},
      {"too-small", std::string("name: x\ngenerator: single-node\n") + kNode, 9, "8 GPUs, too few for 9 ranks"},
      {"leaf", std::string("name: x\ngenerator: fat-tree\n") + kNode +
                   "network:\n  nodes: 3\n  link: {bandwidth: 400Gb/s, latency: 1us}\n  tiers: 2\n  gpus_per_leaf: 16\n",
       0, "network: gpus_per_leaf (16) must divide the 24 GPUs"},
      {"by-size-order",
       "name: x\ngenerator: single-node\nnode:\n  gpus: 2\n  fabric: pcie\n  gpu_link: {bandwidth: 4GB/s, latency: 1us, "
       "by_size: [[8192, 0.5], [4096, 0.4]]}\n",
       0, "node.gpu_link.by_size.1.0: expected sizes in increasing order"},
      {"by-size-factor",
       "name: x\ngenerator: single-node\nnode:\n  gpus: 2\n  fabric: pcie\n  gpu_link: {bandwidth: 4GB/s, latency: 1us, "
       "by_size: [[4096, 0]]}\n",
       0, "node.gpu_link.by_size.0.1: expected a bandwidth factor in (0, 100]"},
      {"by-size-pair",
       "name: x\ngenerator: single-node\nnode:\n  gpus: 2\n  fabric: pcie\n  gpu_link: {bandwidth: 4GB/s, latency: 1us, "
       "by_size: [4096]}\n",
       0, "node.gpu_link.by_size.0: expected [bytes, factor]"},
      {"alone-by-size-order",
       "name: x\ngenerator: single-node\nnode:\n  gpus: 2\n  fabric: pcie\n  gpu_link: {bandwidth: 4GB/s, latency: 1us, "
       "alone_by_size: [[8192, 0.5], [4096, 0.4]]}\n",
       0, "node.gpu_link.alone_by_size.1.0: expected sizes in increasing order"},
      {"network-fabric", std::string("name: x\ngenerator: fat-tree\n") + kNode + net + "  fabric: ethernet\n", 0,
       "network.fabric: expected one of"},
      {"footprint-without-by-size",
       "name: x\ngenerator: single-node\nnode:\n  gpus: 2\n  fabric: pcie\n  gpu_link: {bandwidth: 4GB/s, latency: 1us, "
       "by_footprint: [{footprint: 16MiB, by_size: [[4096, 0.7]]}]}\n",
       0, "node.gpu_link.by_footprint: factors by footprint need by_size"},
      {"footprint-alone-alone",
       "name: x\ngenerator: single-node\nnode:\n  gpus: 2\n  fabric: pcie\n  gpu_link: {bandwidth: 4GB/s, latency: 1us, "
       "by_size: [[4096, 0.5]], alone_by_footprint: [{footprint: 16MiB, by_size: [[4096, 0.7]]}]}\n",
       0, "node.gpu_link.alone_by_footprint: needs by_footprint"},
      {"footprint-order",
       "name: x\ngenerator: single-node\nnode:\n  gpus: 2\n  fabric: pcie\n  gpu_link: {bandwidth: 4GB/s, latency: 1us, "
       "by_size: [[4096, 0.5]], by_footprint: [{footprint: 32MiB, by_size: [[4096, 0.7]]}, "
       "{footprint: 16MiB, by_size: [[4096, 0.9]]}]}\n",
       0, "node.gpu_link.by_footprint.1.footprint: expected footprints in increasing order"},
      {"footprint-size",
       "name: x\ngenerator: single-node\nnode:\n  gpus: 2\n  fabric: pcie\n  gpu_link: {bandwidth: 4GB/s, latency: 1us, "
       "by_size: [[4096, 0.5]], by_footprint: [{footprint: lots, by_size: [[4096, 0.7]]}]}\n",
       0, "node.gpu_link.by_footprint.0.footprint: expected"},
      {"footprint-list",
       "name: x\ngenerator: single-node\nnode:\n  gpus: 2\n  fabric: pcie\n  gpu_link: {bandwidth: 4GB/s, latency: 1us, "
       "by_size: [[4096, 0.5]], by_footprint: [{footprint: 16MiB, by_size: [[4096, 0]]}]}\n",
       0, "node.gpu_link.by_footprint.0.by_size.0.1: expected a bandwidth factor in (0, 100]"},
      {"footprint-key",
       "name: x\ngenerator: single-node\nnode:\n  gpus: 2\n  fabric: pcie\n  gpu_link: {bandwidth: 4GB/s, latency: 1us, "
       "by_size: [[4096, 0.5]], by_footprint: [{footprint: 16MiB, by_size: [[4096, 0.7]], window: 4}]}\n",
       0, "node.gpu_link.by_footprint.0: unknown key 'window'"},
      {"footprint-network", std::string("name: x\ngenerator: fat-tree\n") + kNode +
                               "network:\n  nodes: 2\n  link: {bandwidth: 400Gb/s, latency: 1us, by_size: [[4096, 0.5]], "
                               "by_footprint: [{footprint: 16MiB, by_size: [[4096, 0.7]]}]}\n  tiers: 2\n  gpus_per_leaf: 16\n",
       0, "network.link.by_footprint: factors by footprint are the node's"},
      {"shared-memory", "name: x\ngenerator: single-node\nnode:\n  gpus: 2\n  fabric: pcie\n  shared_memory: maybe\n"
       "  gpu_link: {bandwidth: 4GB/s, latency: 1us}\n",
       0, "node.shared_memory: expected"},
      {"torus", std::string("name: x\ngenerator: torus\n") + kNode +
                    "network:\n  nodes: 2\n  link: {bandwidth: 400Gb/s, latency: 1us}\n  dims: [4, 3]\n",
       0, "network.dims: the torus has 12 positions but the nodes have 16 GPUs"},
      {"syntax", "name: [x\n", 0, "YAML syntax error"},
      {"map-key", std::string("name: x\ngenerator: single-node\n{a: 1}: 2\n") + kNode, 0,
       "(top level): expected plain keys, got a mapping as a key at line 3"},
      {"list-key", std::string("name: x\ngenerator: single-node\n") + kNode + "  [1, 2]: 3\n", 0,
       "node: expected plain keys, got a list as a key"},
      {"alias", "name: x\ngenerator: single-node\nnode: &a\n  gpus: *a\n", 0, "node.gpus: expected a scalar value"},
      {"dragonfly", std::string("name: x\ngenerator: dragonfly\n") + kNode +
                        "network:\n  nodes: 4\n  link: {bandwidth: 400Gb/s, latency: 1us}\n  groups: 4\n  chassis: 1\n"
                        "  routers: 2\n  gpus_per_router: 4\n",
       0, "network: a dragonfly needs routers (2) >= groups (4)"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const std::string path = temp_yaml(std::string("bad-") + c.name, c.text);
    try {
      load_topology(path, c.ranks);
      FAIL("no error");
    } catch (const config::ConfigError& e) {
      const std::string msg = e.what();
      CHECK_THAT(msg, Catch::StartsWith(path + ": "));
      CHECK_THAT(msg, Catch::Contains(c.expect));
      CHECK(msg.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("units: bandwidths in bytes/s, times in seconds, sizes in bytes", "[config]") {
  CHECK(config::parse_bandwidth("400Gb/s") == Approx(50e9));
  CHECK(config::parse_bandwidth("450GB/s") == Approx(450e9));
  CHECK(config::parse_bandwidth("25GBps") == Approx(25e9));
  CHECK(config::parse_time("500ns") == Approx(5e-7));
  CHECK(config::parse_time("2.5ms") == Approx(2.5e-3));
  CHECK(config::parse_bytes("1MB") == 1000000u);
  CHECK(config::parse_bytes("64KiB") == 65536u);
  CHECK_THROWS_AS(config::parse_bytes("1.5B"), std::invalid_argument);
  CHECK_THROWS_AS(config::parse_time("3 parsecs"), std::invalid_argument);
}

TEST_CASE("measured bandwidth by message size: interpolated in log(bytes), flat past both ends", "[topology]") {
  LinkSpec l;
  CHECK(l.size_factor(12345) == 1.0);  // none: the bandwidth as it is
  l.by_size = {{4096, 0.25}, {16384, 0.75}, {1 << 20, 2.0}};
  CHECK(l.size_factor(1) == 0.25);
  CHECK(l.size_factor(4096) == 0.25);
  CHECK(l.size_factor(8192) == Approx(0.5));  // halfway in log(bytes)
  CHECK(l.size_factor(16384) == 0.75);
  CHECK(l.size_factor(double(1 << 30)) == 2.0);
  CHECK(l.alone_size_factor(8192) == Approx(0.5));  // none measured alone: by_size's
  l.alone_by_size = {{4096, 0.5}, {16384, 1.0}};
  CHECK(l.alone_size_factor(8192) == Approx(0.75));
  CHECK(l.alone_size_factor(double(1 << 30)) == 1.0);
  CHECK(l.size_factor(8192) == Approx(0.5));
  // Factors by footprint: asked for and given, else the others; between two footprints linear
  // in log(footprint), past both ends flat; only the lists that span the message count.
  CHECK(l.size_factor(8192, double(16 << 20)) == Approx(0.5));
  CHECK(l.alone_size_factor(8192, double(16 << 20)) == Approx(0.75));
  l.by_footprint = {{double(8 << 20), {{4096, 1.0}, {16384, 2.0}}}, {double(32 << 20), {{4096, 0.5}, {1 << 20, 1.0}}}};
  CHECK(l.size_factor(8192, double(4 << 20)) == Approx(1.5));
  CHECK(l.size_factor(8192, double(8 << 20)) == Approx(1.5));
  CHECK(l.size_factor(8192, double(16 << 20)) == Approx(0.5 * 1.5 + 0.5 * 0.5625));  // 8192: 0.5 + 0.5 / 8 in the 32 MiB list
  CHECK(l.size_factor(8192, double(1 << 30)) == Approx(0.5625));
  CHECK(l.size_factor(65536, double(8 << 20)) == Approx(0.75));  // only the 32 MiB list spans 64 KiB
  CHECK(l.size_factor(double(4 << 20), double(1 << 30)) == 2.0);  // none spans 4 MiB: by_size's
  CHECK(l.size_factor(8192) == Approx(0.5));                     // no footprint: by_size's
  CHECK(l.alone_size_factor(8192, double(8 << 20)) == Approx(0.75));  // none measured alone: alone_by_size's
  l.alone_by_footprint = {{double(8 << 20), {{4096, 3.0}, {16384, 4.0}}}};
  CHECK(l.alone_size_factor(8192, double(1 << 30)) == Approx(3.5));
  CHECK(l.alone_size_factor(8192) == Approx(0.75));
  // The shipped host topology: written by compcoll-bench transport, factors by size, one node.
  const Topology t = load_topology(topo_file("host-mpi.yaml"));
  CHECK(t.has_size_factors());
  CHECK(t.receive_copy);  // MPI over shared memory: the receiving core copies
  CHECK(t.copies_on_receive(0, 1));
  CHECK(t.receive_copy_seconds(1 << 20, 1.0) ==
        Approx((1 << 20) / (t.gpu_link.effective_bandwidth() * t.gpu_link.size_factor(1 << 20))));
  CHECK(t.gpu_link.by_size.size() >= 10);
  CHECK(t.message_factor(0, 1, 4096) == t.gpu_link.by_size.front().second);
  CHECK_THAT(describe(t), Catch::Contains("bandwidth by message size (measured)"));
  // Its factors by footprint: measured through working sets from 4 to 128 MiB.
  REQUIRE(t.gpu_link.by_footprint.size() >= 4);
  REQUIRE(t.gpu_link.alone_by_footprint.size() == t.gpu_link.by_footprint.size());
  CHECK(t.receive_copy_seconds(1 << 20, 1.0, double(64 << 20)) ==
        Approx((1 << 20) / (t.gpu_link.effective_bandwidth() * t.gpu_link.size_factor(1 << 20, double(64 << 20)))));
  CHECK_THAT(describe(t), Catch::Contains("intra-node bandwidth by the plan's footprint on the node (measured)"));
}

TEST_CASE("NVLink SHARP's port rate: default, set, and refused where it cannot apply", "[topology][nvls]") {
  const std::string f = std::string(COMPCOLL_SOURCE_DIR) + "/topologies/dgx-h100.yaml";
  const Topology t = load_topology(f);
  CHECK(t.nvls);
  CHECK(t.nvls_efficiency == Topology::kNvlsEfficiency);
  CHECK(load_topology(f, 0, {"node.nvls_efficiency=0.5"}).nvls_efficiency == 0.5);
  CHECK_THROWS_WITH(load_topology(f, 0, {"node.nvls_efficiency=1.5"}),
                    Catch::Contains("nvls_efficiency") && Catch::Contains("expected an efficiency in (0, 1]"));
  CHECK_THROWS_WITH(load_topology(f, 0, {"node.nvls=false", "node.nvls_efficiency=0.5"}), Catch::Contains("needs NVLS"));
  // Endpoints: a node's switch sits after the GPUs.
  CHECK(t.switch_of(0) == t.gpus());
  CHECK(t.is_switch(t.switch_of(0)));
  CHECK_FALSE(t.is_switch(t.gpus() - 1));
  CHECK(t.node_of(t.switch_of(0)) == 0);
}
