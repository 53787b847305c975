// sim/platform.cpp — see platform.h.
#include "sim/platform.h"

#include <string>

namespace compcoll::sim {
namespace s4u = simgrid::s4u;

namespace {

constexpr double kHostSpeed = 1e9;  // flops/s; kernel durations are executions of seconds x speed

s4u::Link* make_link(s4u::NetZone* zone, const std::string& name, const topo::LinkSpec& spec) {
  return zone->create_link(name, spec.effective_bandwidth())->set_latency(spec.latency)->seal();
}

}  // namespace

Platform build_platform(const topo::Topology& t) {
  Platform p;
  const int G = t.gpus();
  p.gpu_hosts.assign(static_cast<size_t>(G), nullptr);
  auto gpu_name = [&](int gpu) { return "gpu-" + std::to_string(t.node_of(gpu)) + "-" + std::to_string(t.local_of(gpu)); };

  if (t.generator == topo::Generator::SingleNode) {
    auto* zone = s4u::create_star_zone(t.name);
    for (int g = 0; g < G; ++g) {
      s4u::Host* h = zone->create_host(gpu_name(g), kHostSpeed)->seal();
      const s4u::Link* up = make_link(zone, gpu_name(g) + "-up", t.gpu_link);
      const s4u::Link* down = make_link(zone, gpu_name(g) + "-down", t.gpu_link);
      zone->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, {s4u::LinkInRoute(up)}, false);
      zone->add_route(nullptr, h->get_netpoint(), nullptr, nullptr, {s4u::LinkInRoute(down)}, false);
      p.gpu_hosts[g] = h;
    }
    zone->seal();
    return p;
  }

  // The network zone; its leaves (ids in its own order) are the GPUs.
  auto leaf_cb = [&](s4u::NetZone* zone, const std::vector<unsigned long>& /*coord*/, unsigned long id) {
    const int gpu = t.gpu_of_leaf(id);
    s4u::Host* h = zone->create_host(gpu_name(gpu), kHostSpeed)->seal();
    p.gpu_hosts[gpu] = h;
    return std::make_pair(h->get_netpoint(), static_cast<simgrid::kernel::routing::NetPoint*>(nullptr));
  };
  const s4u::ClusterCallbacks callbacks(leaf_cb);
  const double bw = t.network_link.effective_bandwidth(), lat = t.network_link.latency;
  const auto sharing = s4u::Link::SharingPolicy::SPLITDUPLEX;
  s4u::NetZone* zone = nullptr;
  switch (t.generator) {
    case topo::Generator::FatTree:
    case topo::Generator::RailFatTree: {
      const auto& f = t.fat_tree;
      zone = s4u::create_fatTree_zone(t.name, nullptr, s4u::FatTreeParams(static_cast<unsigned>(f.down.size()), f.down, f.up, f.links),
                                      callbacks, bw, lat, sharing);
      break;
    }
    case topo::Generator::Dragonfly: {
      const auto& d = t.dragonfly;
      zone = s4u::create_dragonfly_zone(
          t.name, nullptr,
          s4u::DragonflyParams({d.groups, d.group_links}, {d.chassis, d.chassis_links}, {d.routers, d.router_links},
                               d.gpus_per_router),
          callbacks, bw, lat, sharing);
      break;
    }
    case topo::Generator::Torus:
      zone = s4u::create_torus_zone(t.name, nullptr, t.torus.dims, callbacks, bw, lat, sharing);
      break;
    case topo::Generator::SingleNode: break;
  }

  // Intra-node: each GPU's own up and down link to its node switch; bypass routes for every
  // ordered pair of GPUs of a node.
  if (t.gpus_per_node > 1) {
    std::vector<const s4u::Link*> up(static_cast<size_t>(G)), down(static_cast<size_t>(G));
    for (int g = 0; g < G; ++g) {
      up[g] = make_link(zone, gpu_name(g) + "-nvl-up", t.gpu_link);
      down[g] = make_link(zone, gpu_name(g) + "-nvl-down", t.gpu_link);
    }
    for (int n = 0; n < t.nodes; ++n)
      for (int a = 0; a < t.gpus_per_node; ++a)
        for (int b = 0; b < t.gpus_per_node; ++b) {
          if (a == b) continue;
          const int ga = n * t.gpus_per_node + a, gb = n * t.gpus_per_node + b;
          zone->add_bypass_route(p.gpu_hosts[ga]->get_netpoint(), p.gpu_hosts[gb]->get_netpoint(), nullptr, nullptr,
                                 {s4u::LinkInRoute(up[ga]), s4u::LinkInRoute(down[gb])});
        }
  }
  zone->seal();
  return p;
}

}  // namespace compcoll::sim
