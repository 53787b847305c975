// shared/topology/topology.h — a GPU cluster as data. A topology YAML file (topologies/*.yaml,
// docs/TOPOLOGY.md) names a generator and its parameters; load_topology() checks every key and
// builds a Boost.Graph of GPUs, intra-node switches and network switches with the bandwidth and
// latency of every link. The cost model and the simulator both read it; the simulator turns the
// same parameters into SimGrid zones (sim/platform.cpp).
//
// Model. Every GPU reaches the other GPUs of its node through its own link to the node's switch
// (NVSwitch or a PCIe switch: one up and one down link per GPU, so the node is non-blocking),
// and GPUs of other nodes through its own NIC port(s) into the network. The network is
// generated: a fat tree (XGFT: two or three tiers, an oversubscription ratio at the leaf
// uplinks), a rail-optimized fat tree (leaf switches gather the GPUs of one local rank across
// nodes), a dragonfly, or a 2D/3D torus; its leaves are the GPUs' NIC ports.
#pragma once

#include <boost/graph/adjacency_list.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace compcoll::topo {

// The largest size factor (LinkSpec::by_size) a topology file may give: a message 100x faster
// than the link's fitted bandwidth is a point timed within noise of the latency, not a transport.
constexpr double kMaxSizeFactor = 100;

struct LinkSpec {
  double bandwidth = 0;    // bytes/s per direction, nominal
  double latency = 0;      // seconds per traversal
  double efficiency = 1.0; // fraction of `bandwidth` a transfer reaches (calibrated, stated in the file)
  // Measured transports only (`by_size`): the fraction of the bandwidth a message of a given
  // size reaches, (bytes, factor) by increasing bytes, SMPI's piecewise idea; a message's
  // factor is interpolated linearly in log(bytes) and held flat past both ends. Empty: 1.
  std::vector<std::pair<double, double>> by_size;
  // Measured host transports only (`alone_by_size`): the same factor for a message sent while
  // no other rank of the host sends (the pingpong), where `by_size` is every rank's at once (the
  // exchange). Empty: by_size's.
  std::vector<std::pair<double, double>> alone_by_size;
  // Measured host transports only (`by_footprint`, `alone_by_footprint`): the same two factors
  // for a message of a plan whose typed buffers on the node total a given footprint, one list
  // (bytes, factor) per footprint, by increasing footprint. The transport bench measures each
  // by rotating the messages through buffers of that total, so that a message's data is as
  // cache-resident as a plan's of that footprint (docs/TOPOLOGY.md, "Working set"). A message
  // takes the factor of the lists whose sizes span it, interpolated linearly in
  // log(footprint) and held flat past the smallest and largest footprint; where no list spans
  // it, by_size's (alone_by_size's). Empty: by_size's and alone_by_size's.
  struct FootprintFactors {
    double footprint = 0;                           // bytes of buffers on the node
    std::vector<std::pair<double, double>> by_size;  // (bytes, factor), increasing bytes
  };
  std::vector<FootprintFactors> by_footprint;
  std::vector<FootprintFactors> alone_by_footprint;
  double effective_bandwidth() const { return bandwidth * efficiency; }
  // `footprint`: the plan's bytes of buffers on the node (policy::node_footprint_bytes; 0: not
  // known, by_size's).
  double size_factor(double bytes, double footprint = 0) const;
  double alone_size_factor(double bytes, double footprint = 0) const;
};

enum class Generator : uint8_t { SingleNode, FatTree, RailFatTree, Dragonfly, Torus };
std::string_view generator_name(Generator g);

// Extended generalized fat tree XGFT(h; m; w) as SimGrid's fat-tree zone takes it: down[i]
// children per tier-(i+1) switch, up[i] parents per element of tier i, links[i] parallel links
// per connection. Leaves are GPU NIC ports.
struct FatTreeSpec {
  int tiers = 2;
  int gpus_per_leaf = 32;
  int leaves_per_pod = 0;         // 3 tiers
  double oversubscription = 1.0;  // at the leaf switches' uplinks
  std::vector<unsigned> down, up, links;
};

// SimGrid's dragonfly: groups x chassis x routers, `gpus_per_router` leaves on each router;
// the *_links are the parallel links between two groups / chassis / routers.
struct DragonflySpec {
  unsigned groups = 0, group_links = 1, chassis = 0, chassis_links = 1, routers = 0, router_links = 1,
           gpus_per_router = 0;
};

struct TorusSpec {
  std::vector<unsigned long> dims;  // product = number of GPUs; GPUs are the torus elements
};

enum class VertexKind : uint8_t { Gpu, NodeSwitch, NetworkSwitch };
struct VertexProps {
  VertexKind kind = VertexKind::Gpu;
  int node = -1;  // for GPUs and node switches
};
struct EdgeProps {
  double bandwidth = 0;  // effective bytes/s per direction of one link x count
  double latency = 0;
  unsigned count = 1;    // parallel links
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, VertexProps, EdgeProps>;

struct Topology {
  std::string name, file, description;
  Generator generator = Generator::SingleNode;
  int nodes = 1, gpus_per_node = 8;
  std::string intra_fabric = "nvswitch";  // nvswitch | pcie
  // What carries traffic between nodes (network.fabric: infiniband | roce | ethernet-tcp;
  // default infiniband); "" on a single node. It sets the network model an experiment that
  // gives none runs with (network_default).
  std::string network_fabric;
  bool nvls = true;        // the NVSwitch reduces and multicasts (NVLink SHARP, H100 and later); nvswitch only
  // NVLink SHARP: the share of gpu_link's line rate that a GPU's traffic to and from the
  // switch's reduction and multicast reaches, per direction (NCCL's multimem loads and stores;
  // docs/TOPOLOGY.md). A GPU's messages to and from its switch cross its gpu_link and a link of
  // this bandwidth.
  double nvls_efficiency = kNvlsEfficiency;
  static constexpr double kNvlsEfficiency = 0.70;
  // Ranks of a host over shared-memory MPI (compcoll-bench transport writes it): the receiving
  // rank's core copies every message within the node, in turn with its kernels, as compcoll-run's
  // host executor does (one thread per rank). A message takes its route's latency, then
  // receive_copy_seconds() in the receiver's kernel queue; no link carries its bytes.
  bool receive_copy = false;
  // The ranks of a node share one memory (a host's cores and their caches): a host kernel or a
  // receive copy alone on the node runs at its alone speed (the calibration's `alone` points,
  // the link's alone_by_size), N of them at once (N the ranks that ran at once when they were
  // measured) each at its measured speed, and in between they share the node by bounded
  // max-min sharing (docs/TOPOLOGY.md). Without it every kernel runs at its calibrated speed
  // whatever else runs, as on GPUs with memories of their own.
  bool shared_memory = false;
  // Not a file key: the experiment's run.compute_thread (study::load_topology). The host
  // executor runs a rank's kernels on a thread of their own, so its receive copies (MPI's
  // progress, on the rank's thread) run beside them instead of in turn: the model puts them in
  // a second queue per rank, both sharing the node (needs receive_copy and shared_memory).
  bool compute_thread = false;
  // Not file keys: the experiment's run.wire_budget and its margin (study::load_topology; the
  // margin 0 where wire_budget is off). compcoll-run's executor sends each compressed stream
  // within a budget that much over its size, the model sizes the messages so
  // (policy::wire_message_bytes); and every rank's run ends with an agreement of all ranks, so
  // back to back calls start together: the model starts a call's next iteration on every rank
  // once every rank is done with the last.
  bool wire_budget = false;
  double wire_budget_margin = 0;
  // Not a file key: the experiment's run.fused_decode where an executor fuses (study::
  // load_topology: GPUs, not receive_copy hosts; compcoll-run: its nccl backend only). A reduce
  // step's decompression and reduce run as one decode-and-add kernel, and the model prices them
  // so (policy::fused_ops).
  bool fused_decode = false;
  LinkSpec gpu_link;       // GPU <-> node switch
  int nics_per_gpu = 1;
  LinkSpec network_link;   // every network port (NIC <-> switch, switch <-> switch)
  FatTreeSpec fat_tree;
  DragonflySpec dragonfly;
  TorusSpec torus;
  std::string placement = "linear";  // linear | round-robin | explicit
  std::vector<int> rank_to_gpu;      // rank -> GPU id (node * gpus_per_node + local)
  Graph graph;                       // vertices 0..gpus()-1 are the GPUs

  // The bandwidth factor (LinkSpec::by_size) of a message between two GPUs: the intra-node
  // link's within a node, the network link's across nodes.
  // Endpoints: GPUs or a node's switch (endpoint gpus() + node, for schedules' switch ranks).
  double message_factor(int src, int dst, double bytes) const {
    return (node_of(src) == node_of(dst) ? gpu_link : network_link).size_factor(bytes);
  }
  bool has_size_factors() const { return !gpu_link.by_size.empty() || !network_link.by_size.empty(); }
  // With receive_copy: whether a message between these GPUs is copied by the receiver, and for
  // how long (`bandwidth_factor`: the flow model's, as on a link).
  bool copies_on_receive(int src_gpu, int dst_gpu) const {
    return receive_copy && node_of(src_gpu) == node_of(dst_gpu);
  }
  // `footprint`: the plan's bytes of buffers on the node (LinkSpec::by_footprint).
  double receive_copy_seconds(double bytes, double bandwidth_factor, double footprint = 0) const {
    return bytes / (gpu_link.effective_bandwidth() * gpu_link.size_factor(bytes, footprint) * bandwidth_factor);
  }
  // The same copy with no other rank of the node copying (LinkSpec::alone_by_size).
  double receive_copy_alone_seconds(double bytes, double bandwidth_factor, double footprint = 0) const {
    return bytes / (gpu_link.effective_bandwidth() * gpu_link.alone_size_factor(bytes, footprint) * bandwidth_factor);
  }
  int gpus() const { return nodes * gpus_per_node; }
  // A GPU's node, or a switch endpoint's.
  int node_of(int gpu) const { return gpu < gpus() ? gpu / gpus_per_node : gpu - gpus(); }
  // The endpoint of a node's NVSwitch: after the GPUs (a schedule's switch ranks sit there).
  int switch_of(int node) const { return gpus() + node; }
  bool is_switch(int endpoint) const { return endpoint >= gpus(); }
  int local_of(int gpu) const { return gpu % gpus_per_node; }
  // The nodes that the placement's first `nranks` ranks occupy (at least 1).
  int nodes_spanned(int nranks) const;
  // The GPU's leaf index in the generated network (rail-major for a rail-optimized fat tree).
  uint64_t leaf_of(int gpu) const;
  int gpu_of_leaf(uint64_t leaf) const;
};

// A route in the graph (minimum hops; inside a node through its switch).
struct Route {
  std::vector<int> vertices;   // from source GPU to destination GPU
  double latency = 0;          // sum over links
  double bandwidth = 0;        // bottleneck effective bandwidth (one link of each hop)
  int hops() const { return static_cast<int>(vertices.size()) - 1; }
};
Route route(const Topology& t, int src_gpu, int dst_gpu);

// Loads and checks a topology file (config::ConfigError, one line, naming the file and key).
// `ranks` > 0 asks for a placement of that many ranks (an error when the topology is too small).
Topology load_topology(const std::string& path, int ranks = 0, const std::vector<std::string>& overrides = {});

// The network model a topology calls for, where an experiment sets none (docs/TOPOLOGY.md,
// "Network defaults"): `kind` "rdma" (NVLink, InfiniBand, RoCE: SimGrid's LV08 flow model
// without its TCP latency factor and cross-traffic), "tcp" (Ethernet over TCP: LV08 as it was
// fitted) or "measured" (a measured transport, by_size: CM02 with no factors, the figures being
// the transport's own); `why` names what in the file decided it.
struct NetworkDefault {
  std::string kind, why;
};
NetworkDefault network_default(const Topology& t);
// The same for a topology file (load_topology's errors where it does not load).
NetworkDefault network_default(const std::string& path);

// Generators for code and tests (the YAML loader calls these).
Topology single_node(int gpus, LinkSpec gpu_link, const std::string& fabric = "nvswitch");
void build_graph(Topology& t);
void place_ranks(Topology& t, int ranks, const std::string& how);  // linear | round-robin

// A few lines: generator, counts, links, oversubscription, and the rank placement summary.
std::string describe(const Topology& t);

}  // namespace compcoll::topo
