// shared/topology/topology.cpp — see topology.h.
#include "topology/topology.h"

#include <boost/graph/breadth_first_search.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>
#include <sstream>

#include "config/yaml_node.h"

namespace compcoll::topo {
namespace {

using config::Node;

LinkSpec read_link(const Node& n) {
  LinkSpec l;
  l.bandwidth = n.get("bandwidth").as_bandwidth();
  l.latency = n.get("latency").as_time();
  const Node e = n.opt("efficiency");
  if (e.defined()) {
    l.efficiency = e.as_double();
    if (!(l.efficiency > 0 && l.efficiency <= 1)) e.fail("expected an efficiency in (0, 1]");
  }
  const auto read_factors = [](const Node& bs, std::vector<std::pair<double, double>>& out) {
    if (!bs.is_sequence() || bs.size() == 0) bs.fail("expected a list of [bytes, factor] pairs");
    for (size_t i = 0; i < bs.size(); ++i) {
      const Node pt = bs[i];
      if (!pt.is_sequence() || pt.size() != 2) pt.fail("expected [bytes, factor]");
      const double bytes = pt[0].as_double(), f = pt[1].as_double();
      if (!(bytes > 0)) pt[0].fail("expected a message size in bytes > 0");
      if (!(f > 0 && f <= kMaxSizeFactor)) pt[1].fail("expected a bandwidth factor in (0, 100]");
      if (!out.empty() && bytes <= out.back().first) pt[0].fail("expected sizes in increasing order");
      out.emplace_back(bytes, f);
    }
  };
  const auto factors = [&](const char* key, std::vector<std::pair<double, double>>& out) {
    const Node bs = n.opt(key);
    if (bs.defined()) read_factors(bs, out);
  };
  factors("by_size", l.by_size);
  factors("alone_by_size", l.alone_by_size);
  // [{footprint: 16MiB, by_size: [[bytes, factor], ...]}, ...] by increasing footprint.
  const auto footprints = [&](const char* key, std::vector<LinkSpec::FootprintFactors>& out) {
    const Node list = n.opt(key);
    if (!list.defined()) return;
    if (!list.is_sequence() || list.size() == 0) list.fail("expected a list of {footprint: BYTES, by_size: [[bytes, factor], ...]}");
    for (size_t i = 0; i < list.size(); ++i) {
      const Node e = list[i];
      if (!e.is_map()) e.fail("expected {footprint: BYTES, by_size: [[bytes, factor], ...]}");
      LinkSpec::FootprintFactors f;
      const Node fp = e.get("footprint");
      f.footprint = static_cast<double>(fp.as_bytes());
      if (!(f.footprint > 0)) fp.fail("expected a footprint in bytes > 0, like 16MiB");
      if (!out.empty() && f.footprint <= out.back().footprint) fp.fail("expected footprints in increasing order");
      read_factors(e.get("by_size"), f.by_size);
      e.check_no_unknown_keys();
      out.push_back(std::move(f));
    }
  };
  footprints("by_footprint", l.by_footprint);
  footprints("alone_by_footprint", l.alone_by_footprint);
  if (l.by_size.empty() && !l.by_footprint.empty())
    n.opt("by_footprint").fail("factors by footprint need by_size (the factors of sizes no footprint's list spans)");
  if (l.by_footprint.empty() && !l.alone_by_footprint.empty()) n.opt("alone_by_footprint").fail("needs by_footprint");
  n.check_no_unknown_keys();
  return l;
}

}  // namespace

namespace {

// A factor by message size: linear in log(bytes) between points, flat past both ends; 1 for none.
double interpolate_factor(const std::vector<std::pair<double, double>>& by_size, double bytes) {
  if (by_size.empty()) return 1.0;
  if (bytes <= by_size.front().first) return by_size.front().second;
  if (bytes >= by_size.back().first) return by_size.back().second;
  const auto hi = std::upper_bound(by_size.begin(), by_size.end(), bytes,
                                   [](double b, const std::pair<double, double>& p) { return b < p.first; });
  const auto lo = hi - 1;
  const double w = std::log(bytes / lo->first) / std::log(hi->first / lo->first);
  return lo->second + w * (hi->second - lo->second);
}

// The factor of a message of `bytes` in a plan of `footprint` bytes on the node from the lists
// (LinkSpec::by_footprint) whose sizes span it: interpolated linearly in log(footprint) between
// the two around it, held flat past both ends; NAN where no list spans the message.
double footprint_factor(const std::vector<LinkSpec::FootprintFactors>& lists, double bytes, double footprint) {
  const LinkSpec::FootprintFactors* below = nullptr;
  const LinkSpec::FootprintFactors* above = nullptr;
  for (const auto& l : lists) {
    if (l.by_size.empty() || bytes < l.by_size.front().first || bytes > l.by_size.back().first) continue;
    if (l.footprint <= footprint) below = &l;
    else if (!above) above = &l;
  }
  if (!below && !above) return NAN;
  if (!below) return interpolate_factor(above->by_size, bytes);
  if (!above || below->footprint == footprint) return interpolate_factor(below->by_size, bytes);
  const double w = std::log(footprint / below->footprint) / std::log(above->footprint / below->footprint);
  const double lo = interpolate_factor(below->by_size, bytes), hi = interpolate_factor(above->by_size, bytes);
  return lo + w * (hi - lo);
}

}  // namespace

double LinkSpec::size_factor(double bytes, double footprint) const {
  if (footprint > 0 && !by_footprint.empty()) {
    const double f = footprint_factor(by_footprint, bytes, footprint);
    if (!std::isnan(f)) return f;
  }
  return interpolate_factor(by_size, bytes);
}
double LinkSpec::alone_size_factor(double bytes, double footprint) const {
  if (footprint > 0 && !alone_by_footprint.empty()) {
    const double f = footprint_factor(alone_by_footprint, bytes, footprint);
    if (!std::isnan(f)) return f;
  }
  if (alone_by_size.empty()) return size_factor(bytes, footprint);
  return interpolate_factor(alone_by_size, bytes);
}

namespace {

uint64_t product(const std::vector<unsigned>& v, size_t lo, size_t hi) {
  uint64_t p = 1;
  for (size_t i = lo; i < hi; ++i) p *= v[i];
  return p;
}

std::string fmt_bw(double b) {
  std::ostringstream o;
  o.precision(4);
  o << b / 1e9 << " GB/s";
  return o.str();
}
std::string fmt_us(double s) {
  std::ostringstream o;
  o.precision(4);
  o << s * 1e6 << " us";
  return o.str();
}

// XGFT parameters of a fat tree whose leaves are the GPUs' NIC ports.
void derive_fat_tree(Topology& t, const Node& where) {
  FatTreeSpec& f = t.fat_tree;
  const uint64_t leaves = static_cast<uint64_t>(t.gpus());
  if (leaves % f.gpus_per_leaf) where.fail("gpus_per_leaf (" + std::to_string(f.gpus_per_leaf) + ") must divide the " +
                                           std::to_string(leaves) + " GPUs");
  const double uplinks = f.gpus_per_leaf * t.nics_per_gpu / f.oversubscription;
  if (uplinks < 1 || uplinks != std::floor(uplinks))
    where.fail("gpus_per_leaf x nics_per_gpu / oversubscription must be a whole number >= 1, got " +
               std::to_string(uplinks));
  const unsigned u = static_cast<unsigned>(uplinks);
  const uint64_t leaf_switches = leaves / f.gpus_per_leaf;
  if (f.tiers == 2) {
    f.down = {static_cast<unsigned>(f.gpus_per_leaf), static_cast<unsigned>(leaf_switches)};
    f.up = {1, u};
    f.links = {static_cast<unsigned>(t.nics_per_gpu), 1};
  } else {
    if (f.leaves_per_pod <= 0 || leaf_switches % f.leaves_per_pod)
      where.fail("leaves_per_pod must divide the " + std::to_string(leaf_switches) + " leaf switches");
    f.down = {static_cast<unsigned>(f.gpus_per_leaf), static_cast<unsigned>(f.leaves_per_pod),
              static_cast<unsigned>(leaf_switches / f.leaves_per_pod)};
    f.up = {1, u, static_cast<unsigned>(f.leaves_per_pod)};
    f.links = {static_cast<unsigned>(t.nics_per_gpu), 1, 1};
  }
}

}  // namespace

std::string_view generator_name(Generator g) {
  switch (g) {
    case Generator::SingleNode: return "single-node";
    case Generator::FatTree: return "fat-tree";
    case Generator::RailFatTree: return "rail-fat-tree";
    case Generator::Dragonfly: return "dragonfly";
    case Generator::Torus: return "torus";
  }
  return "?";
}

uint64_t Topology::leaf_of(int gpu) const {
  if (generator == Generator::RailFatTree) return static_cast<uint64_t>(local_of(gpu)) * nodes + node_of(gpu);
  return static_cast<uint64_t>(gpu);
}

int Topology::nodes_spanned(int nranks) const {
  std::vector<char> seen(static_cast<size_t>(std::max(nodes, 1)), 0);
  int n = 0;
  for (int r = 0; r < nranks && r < static_cast<int>(rank_to_gpu.size()); ++r) {
    const int k = node_of(rank_to_gpu[static_cast<size_t>(r)]);
    if (k >= 0 && k < nodes && !seen[static_cast<size_t>(k)]) seen[static_cast<size_t>(k)] = 1, ++n;
  }
  return std::max(n, 1);
}

int Topology::gpu_of_leaf(uint64_t leaf) const {
  if (generator == Generator::RailFatTree)
    return static_cast<int>(leaf % nodes) * gpus_per_node + static_cast<int>(leaf / nodes);
  return static_cast<int>(leaf);
}

void build_graph(Topology& t) {
  Graph g;
  const int G = t.gpus();
  for (int i = 0; i < G; ++i) add_vertex(VertexProps{VertexKind::Gpu, t.node_of(i)}, g);
  const EdgeProps gl{t.gpu_link.effective_bandwidth(), t.gpu_link.latency, 1};
  for (int n = 0; n < t.nodes; ++n) {
    const auto sw = add_vertex(VertexProps{VertexKind::NodeSwitch, n}, g);
    for (int l = 0; l < t.gpus_per_node; ++l) add_edge(n * t.gpus_per_node + l, sw, gl, g);
  }
  const double nb = t.network_link.effective_bandwidth(), nl = t.network_link.latency;
  auto add_switches = [&](uint64_t count) {
    const auto first = num_vertices(g);
    for (uint64_t i = 0; i < count; ++i) add_vertex(VertexProps{VertexKind::NetworkSwitch, -1}, g);
    return first;
  };
  switch (t.generator) {
    case Generator::SingleNode: break;
    case Generator::FatTree:
    case Generator::RailFatTree: {
      // XGFT: a tier-l element is (a_h..a_{l+1}, b_l..b_1); it links to every tier-(l+1) element
      // that keeps a_h..a_{l+2} and b_l..b_1 and has any b_{l+1}. Index = mixed radix with the
      // b digits low (radices w_1..w_l) and the a digits high (radices m_{l+1}..m_h).
      const auto& f = t.fat_tree;
      const size_t h = f.down.size();
      std::vector<uint64_t> first(h + 1, 0);
      for (size_t l = 1; l <= h; ++l) first[l] = add_switches(product(f.down, l, h) * product(f.up, 0, l));
      for (size_t l = 0; l < h; ++l) {
        const uint64_t lower_b = product(f.up, 0, l);       // radix of b_l..b_1
        const uint64_t count = product(f.down, l, h) * lower_b;
        const EdgeProps e{nb * f.links[l], nl, f.links[l]};
        for (uint64_t idx = 0; idx < count; ++idx) {
          const uint64_t b = idx % lower_b, a = idx / lower_b;  // a = (a_h..a_{l+1}), a_{l+1} lowest
          const uint64_t a_rest = a / f.down[l];
          for (unsigned bn = 0; bn < f.up[l]; ++bn) {
            const uint64_t parent = (a_rest * f.up[l] + bn) * lower_b + b;
            const uint64_t from = l == 0 ? static_cast<uint64_t>(t.gpu_of_leaf(idx)) : first[l] + idx;
            add_edge(from, first[l + 1] + parent, e, g);
          }
        }
      }
      break;
    }
    case Generator::Dragonfly: {
      // As SimGrid wires it: routers of a chassis all-to-all; router r of every chassis of a
      // group linked to router r of the others; group g linked to group g' by router g' of
      // g's chassis 0 and router g of g''s chassis 0.
      const auto& d = t.dragonfly;
      const uint64_t per_group = uint64_t{d.chassis} * d.routers;
      const auto r0 = add_switches(uint64_t{d.groups} * per_group);
      auto rid = [&](uint64_t grp, uint64_t ch, uint64_t r) { return r0 + (grp * d.chassis + ch) * d.routers + r; };
      for (uint64_t grp = 0; grp < d.groups; ++grp)
        for (uint64_t ch = 0; ch < d.chassis; ++ch)
          for (uint64_t r = 0; r < d.routers; ++r) {
            for (uint64_t r2 = r + 1; r2 < d.routers; ++r2)
              add_edge(rid(grp, ch, r), rid(grp, ch, r2), EdgeProps{nb * d.router_links, nl, d.router_links}, g);
            for (uint64_t ch2 = ch + 1; ch2 < d.chassis; ++ch2)
              add_edge(rid(grp, ch, r), rid(grp, ch2, r), EdgeProps{nb * d.chassis_links, nl, d.chassis_links}, g);
            for (unsigned k = 0; k < d.gpus_per_router; ++k) {
              const uint64_t leaf = ((grp * d.chassis + ch) * d.routers + r) * d.gpus_per_router + k;
              add_edge(t.gpu_of_leaf(leaf), rid(grp, ch, r), EdgeProps{nb * t.nics_per_gpu, nl, 1}, g);
            }
          }
      for (uint64_t g1 = 0; g1 < d.groups; ++g1)
        for (uint64_t g2 = g1 + 1; g2 < d.groups; ++g2)
          add_edge(r0 + g1 * per_group + g2, r0 + g2 * per_group + g1,
                   EdgeProps{nb * d.group_links, nl, d.group_links}, g);
      break;
    }
    case Generator::Torus: {
      const auto& dims = t.torus.dims;
      const uint64_t n = static_cast<uint64_t>(G);
      uint64_t stride = 1;
      for (size_t k = 0; k < dims.size(); ++k) {
        if (dims[k] > 1)
          for (uint64_t i = 0; i < n; ++i) {
            const uint64_t c = (i / stride) % dims[k];
            const uint64_t j = i - c * stride + ((c + 1) % dims[k]) * stride;
            if (dims[k] == 2 && c == 1) continue;  // one link between the two, not two
            add_edge(t.gpu_of_leaf(i), t.gpu_of_leaf(j), EdgeProps{nb, nl, 1}, g);
          }
        stride *= dims[k];
      }
      break;
    }
  }
  t.graph = std::move(g);
}

namespace {

// Latency summed over the route's links, bandwidth of the narrowest single link.
Route with_costs(const Graph& g, Route r) {
  r.bandwidth = INFINITY;
  for (size_t i = 0; i + 1 < r.vertices.size(); ++i) {
    const auto [e, ok] = edge(r.vertices[i], r.vertices[i + 1], g);
    r.latency += g[e].latency;
    r.bandwidth = std::min(r.bandwidth, g[e].bandwidth / g[e].count);
  }
  return r;
}

}  // namespace

Route route(const Topology& t, int src, int dst) {
  Route r;
  if (src == dst) {
    r.vertices = {src};
    return r;
  }
  const auto& g = t.graph;
  const size_t V = num_vertices(g);
  // Inside a node: through its switch (the simulator's bypass routes), never the network.
  // Otherwise BFS by hops through the network; GPUs forward only in a torus (they are its
  // routers).
  const bool same_node = t.node_of(src) == t.node_of(dst);
  if (same_node) {
    const int sw = t.gpus() + t.node_of(src);  // node switches follow the GPUs (build_graph)
    r.vertices = {src, sw, dst};
    return with_costs(g, std::move(r));
  }
  std::vector<int64_t> prev(V, -1);
  std::queue<size_t> q;
  q.push(static_cast<size_t>(src));
  prev[static_cast<size_t>(src)] = src;
  while (!q.empty() && prev[static_cast<size_t>(dst)] < 0) {
    const size_t v = q.front();
    q.pop();
    for (auto [e, end] = out_edges(v, g); e != end; ++e) {
      const size_t w = target(*e, g);
      if (prev[w] >= 0) continue;
      const auto kind = g[w].kind;  // node switches carry intra-node traffic only
      if (kind == VertexKind::NodeSwitch) continue;
      if (kind == VertexKind::Gpu && w != static_cast<size_t>(dst) && t.generator != Generator::Torus) continue;
      prev[w] = static_cast<int64_t>(v);
      q.push(w);
    }
  }
  if (prev[static_cast<size_t>(dst)] < 0) return r;  // unreachable: empty route
  for (int64_t v = dst; v != src; v = prev[static_cast<size_t>(v)]) r.vertices.push_back(static_cast<int>(v));
  r.vertices.push_back(src);
  std::reverse(r.vertices.begin(), r.vertices.end());
  return with_costs(g, std::move(r));
}

void place_ranks(Topology& t, int ranks, const std::string& how) {
  t.placement = how;
  t.rank_to_gpu.assign(static_cast<size_t>(ranks), 0);
  for (int r = 0; r < ranks; ++r) {
    if (how == "round-robin")
      t.rank_to_gpu[r] = (r % t.nodes) * t.gpus_per_node + (r / t.nodes) % t.gpus_per_node;
    else
      t.rank_to_gpu[r] = r;
  }
}

Topology single_node(int gpus, LinkSpec gpu_link, const std::string& fabric) {
  Topology t;
  t.name = "single-node";
  t.generator = Generator::SingleNode;
  t.nodes = 1;
  t.gpus_per_node = gpus;
  t.gpu_link = gpu_link;
  t.intra_fabric = fabric;
  t.nvls = fabric == "nvswitch";
  build_graph(t);
  place_ranks(t, gpus, "linear");
  return t;
}

NetworkDefault network_default(const Topology& t) {
  if (!t.gpu_link.by_size.empty() || !t.network_link.by_size.empty())
    return {"measured", "a measured transport (by_size)"};
  if (t.network_fabric == "ethernet-tcp") return {"tcp", "network.fabric: ethernet-tcp"};
  if (!t.network_fabric.empty()) return {"rdma", "network.fabric: " + t.network_fabric};
  return {"rdma", "one node, " + std::string(t.intra_fabric == "nvswitch" ? "NVLink" : "PCIe")};
}

NetworkDefault network_default(const std::string& path) { return network_default(load_topology(path)); }

Topology load_topology(const std::string& path, int ranks, const std::vector<std::string>& overrides) {
  const Node root = Node::load_file(path, overrides);
  Topology t;
  t.file = path;
  t.name = root.get("name").as_string();
  t.description = root.get_string("description", "");
  const std::string gen =
      root.get("generator").as_choice({"single-node", "fat-tree", "rail-fat-tree", "dragonfly", "torus"});
  t.generator = gen == "single-node"     ? Generator::SingleNode
                : gen == "fat-tree"      ? Generator::FatTree
                : gen == "rail-fat-tree" ? Generator::RailFatTree
                : gen == "dragonfly"     ? Generator::Dragonfly
                                         : Generator::Torus;
  const Node node = root.get("node");
  t.gpus_per_node = static_cast<int>(node.get("gpus").as_int(1, 1024));
  t.intra_fabric = node.get("fabric").as_choice({"nvswitch", "pcie"});
  t.gpu_link = read_link(node.get("gpu_link"));
  t.nics_per_gpu = static_cast<int>(node.get_int("nics_per_gpu", 1, 1, 16));
  t.nvls = t.intra_fabric == "nvswitch";
  if (node.has("nvls")) {
    t.nvls = node.get("nvls").as_bool();
    if (t.nvls && t.intra_fabric != "nvswitch") node.get("nvls").fail("NVLS needs fabric: nvswitch");
  }
  if (node.has("nvls_efficiency")) {
    if (!t.nvls) node.get("nvls_efficiency").fail("needs NVLS (fabric: nvswitch, nvls: true)");
    const Node e = node.get("nvls_efficiency");
    t.nvls_efficiency = e.as_double();
    if (!(t.nvls_efficiency > 0 && t.nvls_efficiency <= 1)) e.fail("expected an efficiency in (0, 1]");
  }
  if (node.has("receive_copy")) t.receive_copy = node.get("receive_copy").as_bool();
  if (node.has("shared_memory")) t.shared_memory = node.get("shared_memory").as_bool();
  node.check_no_unknown_keys();

  if (t.generator == Generator::SingleNode) {
    if (root.has("network")) root.opt("network").fail("a single-node topology has no network");
    t.nodes = 1;
  } else {
    const Node net = root.get("network");
    t.nodes = static_cast<int>(net.get("nodes").as_int(1, 1 << 20));
    if (static_cast<int64_t>(t.nodes) * t.gpus_per_node > (1 << 22)) net.fail("more than 4M GPUs");
    t.network_link = read_link(net.get("link"));
    t.network_fabric = net.opt("fabric").defined() ? net.get("fabric").as_choice({"infiniband", "roce", "ethernet-tcp"})
                                                   : "infiniband";
    if (!t.network_link.by_footprint.empty())
      net.get("link").get("by_footprint").fail("factors by footprint are the node's (gpu_link: receive copies within a host)");
    switch (t.generator) {
      case Generator::FatTree:
      case Generator::RailFatTree: {
        auto& f = t.fat_tree;
        f.tiers = static_cast<int>(net.get("tiers").as_int(2, 3));
        f.gpus_per_leaf = static_cast<int>(net.get("gpus_per_leaf").as_int(1, 1 << 16));
        f.oversubscription = net.get_double("oversubscription", 1.0);
        if (!(f.oversubscription >= 1)) net.opt("oversubscription").fail("expected a ratio >= 1");
        if (f.tiers == 3) f.leaves_per_pod = static_cast<int>(net.get("leaves_per_pod").as_int(1, 1 << 16));
        derive_fat_tree(t, net);
        break;
      }
      case Generator::Dragonfly: {
        auto& d = t.dragonfly;
        auto u = [&](const char* k, int64_t lo) { return static_cast<unsigned>(net.get(k).as_int(lo, 1 << 16)); };
        d.groups = u("groups", 1);
        d.chassis = u("chassis", 1);
        d.routers = u("routers", 1);
        d.gpus_per_router = u("gpus_per_router", 1);
        d.group_links = static_cast<unsigned>(net.get_int("group_links", 1, 1, 64));
        d.chassis_links = static_cast<unsigned>(net.get_int("chassis_links", 1, 1, 64));
        d.router_links = static_cast<unsigned>(net.get_int("router_links", 1, 1, 64));
        // SimGrid's dragonfly attaches the link to group g at router g of chassis 0 (its
        // minimal routing relies on it), so a group needs at least as many routers per chassis.
        if (d.groups > d.routers)
          net.fail("a dragonfly needs routers (" + std::to_string(d.routers) + ") >= groups (" +
                   std::to_string(d.groups) + "): SimGrid attaches group g's global link to router g of chassis 0");
        const uint64_t leaves = uint64_t{d.groups} * d.chassis * d.routers * d.gpus_per_router;
        if (leaves != static_cast<uint64_t>(t.gpus()))
          net.fail("groups x chassis x routers x gpus_per_router = " + std::to_string(leaves) + ", but the " +
                   std::to_string(t.nodes) + " nodes have " + std::to_string(t.gpus()) + " GPUs");
        break;
      }
      case Generator::Torus: {
        const Node dims = net.get("dims");
        if (!dims.is_sequence() || dims.size() < 2 || dims.size() > 3) dims.fail("expected a list of 2 or 3 sizes");
        uint64_t p = 1;
        for (size_t i = 0; i < dims.size(); ++i) {
          t.torus.dims.push_back(static_cast<unsigned long>(dims[i].as_int(1, 1 << 16)));
          p *= t.torus.dims.back();
        }
        if (p != static_cast<uint64_t>(t.gpus()))
          dims.fail("the torus has " + std::to_string(p) + " positions but the nodes have " +
                    std::to_string(t.gpus()) + " GPUs");
        break;
      }
      case Generator::SingleNode: break;
    }
    net.check_no_unknown_keys();
  }

  const Node pl = root.opt("placement");
  build_graph(t);
  const int n = ranks > 0 ? ranks : t.gpus();
  if (n > t.gpus())
    root.fail("the topology has " + std::to_string(t.gpus()) + " GPUs, too few for " + std::to_string(n) + " ranks");
  if (pl.defined() && pl.is_sequence()) {
    if (static_cast<int>(pl.size()) < n)
      pl.fail("lists " + std::to_string(pl.size()) + " GPUs for " + std::to_string(n) + " ranks");
    t.placement = "explicit";
    std::vector<char> used(static_cast<size_t>(t.gpus()), 0);
    for (int r = 0; r < n; ++r) {
      const int gpu = static_cast<int>(pl[static_cast<size_t>(r)].as_int(0, t.gpus() - 1));
      if (used[gpu]++) pl[static_cast<size_t>(r)].fail("GPU " + std::to_string(gpu) + " is placed twice");
      t.rank_to_gpu.push_back(gpu);
    }
  } else {
    place_ranks(t, n, pl.defined() ? pl.as_choice({"linear", "round-robin"}) : "linear");
  }
  root.check_no_unknown_keys();
  return t;
}

std::string describe(const Topology& t) {
  std::ostringstream o;
  o << "# topology " << t.name << " (" << (t.file.empty() ? "generated" : t.file) << "): " << generator_name(t.generator)
    << ", " << t.nodes << " node(s) x " << t.gpus_per_node << " GPUs = " << t.gpus() << " GPUs\n";
  o << "#   intra-node " << t.intra_fabric << ": per GPU " << fmt_bw(t.gpu_link.bandwidth) << " x efficiency "
    << t.gpu_link.efficiency << " = " << fmt_bw(t.gpu_link.effective_bandwidth()) << ", latency "
    << fmt_us(t.gpu_link.latency) << " per link\n";
  if (t.nvls)
    o << "#   NVLink SHARP: the switch reduces and multicasts; a GPU's traffic with it at " << fmt_bw(t.gpu_link.bandwidth)
      << " x " << t.nvls_efficiency << " = " << fmt_bw(t.gpu_link.bandwidth * t.nvls_efficiency) << " per direction\n";
  auto by_size = [&](const LinkSpec& l, const char* what) {
    if (l.by_size.empty()) return;
    o << "#   " << what << " bandwidth by message size (measured): x" << l.by_size.front().second << " at "
      << l.by_size.front().first << " B to x" << l.by_size.back().second << " at " << l.by_size.back().first << " B, "
      << l.by_size.size() << " points\n";
  };
  by_size(t.gpu_link, "intra-node");
  if (!t.gpu_link.by_footprint.empty())
    o << "#   intra-node bandwidth by the plan's footprint on the node (measured): " << t.gpu_link.by_footprint.size()
      << " lists, " << config::format_bytes(static_cast<uint64_t>(t.gpu_link.by_footprint.front().footprint)) << " to "
      << config::format_bytes(static_cast<uint64_t>(t.gpu_link.by_footprint.back().footprint)) << "\n";
  if (t.receive_copy)
    o << "#   receive copy: the receiving rank's core copies each message within a node, in turn with its kernels\n";
  if (t.shared_memory)
    o << "#   shared memory: a node's kernels and receive copies share it (alone at their alone speed, at once at "
         "their measured one)\n";
  if (t.generator != Generator::SingleNode)
    o << "#   network: " << t.nics_per_gpu << " NIC port(s) per GPU, ports " << fmt_bw(t.network_link.bandwidth)
      << " x efficiency " << t.network_link.efficiency << ", latency " << fmt_us(t.network_link.latency) << " per hop\n";
  by_size(t.network_link, "network");
  if (t.generator == Generator::FatTree || t.generator == Generator::RailFatTree) {
    const auto& f = t.fat_tree;
    auto list = [](const std::vector<unsigned>& v) {
      std::string s;
      for (auto x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
      return s;
    };
    o << "#   fat tree: " << f.tiers << " tiers, XGFT down " << list(f.down) << " up " << list(f.up) << " links "
      << list(f.links) << ", " << f.gpus_per_leaf << " GPU ports per leaf switch, oversubscription "
      << f.oversubscription << ":1" << (t.generator == Generator::RailFatTree ? ", rail-optimized" : "") << "\n";
  } else if (t.generator == Generator::Dragonfly) {
    const auto& d = t.dragonfly;
    o << "#   dragonfly: " << d.groups << " groups (" << d.group_links << " links), " << d.chassis << " chassis ("
      << d.chassis_links << "), " << d.routers << " routers (" << d.router_links << "), " << d.gpus_per_router
      << " GPUs per router\n";
  } else if (t.generator == Generator::Torus) {
    o << "#   torus:";
    for (size_t i = 0; i < t.torus.dims.size(); ++i) o << (i ? " x " : " ") << t.torus.dims[i];
    o << "\n";
  }
  o << "#   graph: " << num_vertices(t.graph) << " vertices, " << num_edges(t.graph) << " edges\n";
  o << "#   placement " << t.placement << ": " << t.rank_to_gpu.size() << " ranks;";
  const size_t show = std::min<size_t>(t.rank_to_gpu.size(), 4);
  for (size_t r = 0; r < show; ++r)
    o << " rank " << r << " -> node " << t.node_of(t.rank_to_gpu[r]) << " gpu " << t.local_of(t.rank_to_gpu[r]) << ";";
  if (t.rank_to_gpu.size() > show) {
    const size_t r = t.rank_to_gpu.size() - 1;
    o << " ... rank " << r << " -> node " << t.node_of(t.rank_to_gpu[r]) << " gpu " << t.local_of(t.rank_to_gpu[r]);
  }
  o << "\n";
  return o.str();
}

}  // namespace compcoll::topo
