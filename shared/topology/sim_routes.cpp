// shared/topology/sim_routes.cpp — see sim_routes.h. Each generator mirrors the get_local_route
// of the SimGrid zone sim/platform.cpp builds for it; the comments name SimGrid's terms.
#include "topology/sim_routes.h"

#include <array>
#include <stdexcept>

namespace compcoll::topo {

namespace {

// A link id: its kind in the top 4 bits, then the fields that tell it apart within the kind.
enum Kind : uint64_t {
  kNodeUp = 1, kNodeDown,      // a GPU's link to / from its node switch: (gpu)
  kTreeUp, kTreeDown,          // fat tree: (child element, port in the child's parent list)
  kLocalUp, kLocalDown,        // dragonfly GPU <-> router: (router, GPU on the router)
  kGreen, kBlack, kBlue,       // dragonfly: (router, target blade / target chassis), (router)
  kTorusUp, kTorusDown,        // torus: (element, dimension); up = towards coordinate + 1
  kNvlsUp, kNvlsDown,          // a GPU's NVLink SHARP traffic to / from its node's switch: (gpu)
};
uint64_t link_id(Kind k, uint64_t a, uint64_t b = 0) { return (uint64_t{k} << 60) | (a << 16) | b; }

constexpr size_t kMaxTiers = 8;

// FatTreeZone: elements of tier lv (0 = the leaves) have positions 0..count-1 and labels: digit
// j (lowest first) runs over down[j] when j >= lv, over up[j] below; a tier-lv element's
// parents are the tier-(lv+1) elements with the same label except digit lv, and its port p
// holds the (p / up[lv])-th parallel link to the parent whose digit lv is p mod up[lv].
void fat_tree(const Topology& t, uint64_t src, uint64_t dst, std::vector<NetLink>& out) {
  const auto& f = t.fat_tree;
  const size_t h = f.down.size();
  if (h == 0 || h >= kMaxTiers) throw std::logic_error("sim_route: fat tree without tiers");
  const double bw = t.network_link.effective_bandwidth(), lat = t.network_link.latency;
  auto radix = [&](size_t lv, size_t j) -> uint64_t { return j >= lv ? f.down[j] : f.up[j]; };
  std::array<uint64_t, kMaxTiers + 1> first{};  // global index of a tier's first element
  for (size_t lv = 0; lv < h; ++lv) {
    uint64_t count = 1;
    for (size_t j = 0; j < h; ++j) count *= radix(lv, j);
    first[lv + 1] = first[lv] + count;
  }
  using Label = std::array<uint64_t, kMaxTiers>;
  auto label_of = [&](uint64_t pos) {  // a leaf's label
    Label l{};
    for (size_t j = 0; j < h; ++j) l[j] = pos % f.down[j], pos /= f.down[j];
    return l;
  };
  auto element = [&](size_t lv, const Label& l) {
    uint64_t pos = 0;
    for (size_t j = h; j-- > 0;) pos = pos * radix(lv, j) + l[j];
    return first[lv] + pos;
  };
  const Label target = label_of(dst);
  Label cur = label_of(src);
  size_t lv = 0;
  auto above_target = [&] {
    if (lv == 0) return false;
    for (size_t j = lv; j < h; ++j)
      if (cur[j] != target[j]) return false;
    return true;
  };
  // Up, d-mod-k.
  while (!above_target()) {
    if (lv == h) throw std::logic_error("sim_route: no common ancestor in the fat tree");
    uint64_t d = dst;
    for (size_t i = 0; i < lv; ++i) d /= f.up[i];
    d %= uint64_t{f.up[lv]} * f.links[lv];
    out.push_back({link_id(kTreeUp, element(lv, cur), d), bw, lat});
    cur[lv] = d % f.up[lv];
    ++lv;
  }
  // Down: SimGrid scans the element's child ports from (source mod links) x down, and keeps
  // scanning, with the same counter, the ports of the child it moves to.
  while (lv > 0) {
    uint64_t i = (src % f.links[lv - 1]) * f.down[lv - 1];
    for (; lv > 0 && i < uint64_t{f.down[lv - 1]} * f.links[lv - 1]; ++i) {
      if (i % f.down[lv - 1] != target[lv - 1]) continue;
      const uint64_t copy = i / f.down[lv - 1], parent_digit = cur[lv - 1];
      --lv;
      cur[lv] = target[lv];
      out.push_back({link_id(kTreeDown, element(lv, cur), parent_digit + copy * f.up[lv]), bw, lat});
    }
  }
}

// DragonflyZone, minimal routing. Router index = (group x chassis + chassis) x routers + blade.
void dragonfly(const Topology& t, uint64_t src, uint64_t dst, std::vector<NetLink>& out) {
  const auto& d = t.dragonfly;
  const double bw = t.network_link.effective_bandwidth(), lat = t.network_link.latency;
  const uint64_t C = d.chassis, B = d.routers, N = d.gpus_per_router;
  struct Coords {
    uint64_t group, chassis, blade, node;
  };
  auto coords = [&](uint64_t id) { return Coords{id / (C * B * N), id / (B * N) % C, id / N % B, id % N}; };
  auto router = [&](uint64_t g, uint64_t c, uint64_t b) { return (g * C + c) * B + b; };
  const Coords me = coords(src), to = coords(dst);
  const uint64_t mine = router(me.group, me.chassis, me.blade), theirs = router(to.group, to.chassis, to.blade);
  out.push_back({link_id(kLocalUp, mine, me.node), bw, lat});
  if (mine != theirs) {
    Coords cur{me.group, me.chassis, me.blade, 0};
    const double green = bw * d.router_links, black = bw * d.chassis_links, blue = bw * d.group_links;
    if (to.group != cur.group) {
      if (cur.blade != to.group) {  // the router of this chassis that serves the target group
        out.push_back({link_id(kGreen, router(cur.group, cur.chassis, cur.blade), to.group), green, lat});
        cur.blade = to.group;
      }
      if (cur.chassis != 0) {  // its twin in chassis 0 holds the global link
        out.push_back({link_id(kBlack, router(cur.group, cur.chassis, cur.blade), 0), black, lat});
        cur.chassis = 0;
      }
      out.push_back({link_id(kBlue, router(cur.group, cur.chassis, cur.blade)), blue, lat});
      cur = {to.group, 0, me.group, 0};
    }
    if (to.blade != cur.blade) {
      out.push_back({link_id(kGreen, router(cur.group, cur.chassis, cur.blade), to.blade), green, lat});
      cur = {to.group, 0, to.blade, 0};  // SimGrid continues from chassis 0, whatever the chassis was
    }
    if (to.chassis != cur.chassis)
      out.push_back({link_id(kBlack, router(cur.group, cur.chassis, cur.blade), to.chassis), black, lat});
  }
  out.push_back({link_id(kLocalDown, theirs, to.node), bw, lat});
}

// TorusZone: element i links to its successor in each dimension ("up" from i, "down" back).
void torus(const Topology& t, uint64_t src, uint64_t dst, std::vector<NetLink>& out) {
  const auto& dims = t.torus.dims;
  const double bw = t.network_link.effective_bandwidth(), lat = t.network_link.latency;
  uint64_t cur = src;
  while (cur != dst) {
    uint64_t stride = 1;
    for (size_t j = 0; j < dims.size(); ++j) {
      const uint64_t D = dims[j], c = cur / stride % D, m = src / stride % D, g = dst / stride % D;
      if (c != g) {
        if ((g > m && g <= m + D / 2) || (m > D / 2 && (m + D / 2) % D >= g)) {
          out.push_back({link_id(kTorusUp, cur, j), bw, lat});
          cur = c == D - 1 ? cur - (D - 1) * stride : cur + stride;
        } else {
          cur = c == 0 ? cur + (D - 1) * stride : cur - stride;
          out.push_back({link_id(kTorusDown, cur, j), bw, lat});
        }
        break;
      }
      stride *= D;
    }
  }
}

}  // namespace

void append_sim_route(const Topology& t, int src, int dst, std::vector<NetLink>& out) {
  if (src == dst) return;
  if (t.is_switch(src) || t.is_switch(dst)) {  // a GPU and its node's switch
    const int gpu = t.is_switch(src) ? dst : src;
    if (t.is_switch(gpu) || t.node_of(src) != t.node_of(dst) || !t.nvls || t.gpus_per_node < 2)
      throw std::logic_error("sim_route: a switch reaches the GPUs of its node only, with NVLS");
    const NetLink port{link_id(t.is_switch(src) ? kNodeDown : kNodeUp, static_cast<uint64_t>(gpu)),
                       t.gpu_link.effective_bandwidth(), t.gpu_link.latency};
    const NetLink sharp{link_id(t.is_switch(src) ? kNvlsDown : kNvlsUp, static_cast<uint64_t>(gpu)),
                        t.gpu_link.bandwidth * t.nvls_efficiency, 0};
    if (t.is_switch(src)) {
      out.push_back(sharp);
      out.push_back(port);
    } else {
      out.push_back(port);
      out.push_back(sharp);
    }
    return;
  }
  if (t.generator == Generator::SingleNode || t.node_of(src) == t.node_of(dst)) {
    const double bw = t.gpu_link.effective_bandwidth(), lat = t.gpu_link.latency;
    out.push_back({link_id(kNodeUp, static_cast<uint64_t>(src)), bw, lat});
    out.push_back({link_id(kNodeDown, static_cast<uint64_t>(dst)), bw, lat});
    return;
  }
  const uint64_t a = t.leaf_of(src), b = t.leaf_of(dst);
  switch (t.generator) {
    case Generator::FatTree:
    case Generator::RailFatTree: fat_tree(t, a, b, out); break;
    case Generator::Dragonfly: dragonfly(t, a, b, out); break;
    case Generator::Torus: torus(t, a, b, out); break;
    case Generator::SingleNode: break;
  }
}

}  // namespace compcoll::topo
