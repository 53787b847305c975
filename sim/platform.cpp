// sim/platform.cpp — see platform.h.
#include "sim/platform.h"

#include <string>

namespace compcoll::sim {
namespace s4u = simgrid::s4u;

namespace {

constexpr double kHostSpeed = 1e9;  // flops/s; kernel durations are executions of seconds x speed

s4u::Link* make_link(s4u::NetZone* zone, const std::string& name, const topo::LinkSpec& spec) {
  return zone->add_link(name, spec.effective_bandwidth())->set_latency(spec.latency)->seal();
}

}  // namespace

Platform build_platform(const topo::Topology& t, bool switches) {
  Platform p;
  const int G = t.gpus();
  p.gpu_hosts.assign(static_cast<size_t>(G), nullptr);
  auto gpu_name = [&](int gpu) { return "gpu-" + std::to_string(t.node_of(gpu)) + "-" + std::to_string(t.local_of(gpu)); };
  switches = switches && t.nvls && t.gpus_per_node > 1;
  // NVLink SHARP: a host per node for its switch, and each GPU's links into and out of the
  // switch's reduction, crossed after / before the GPU's own link (topo::append_sim_route).
  std::vector<const s4u::Link*> sharp_up, sharp_down;
  auto add_switch_hosts = [&](s4u::NetZone* zone) {
    for (int n = 0; n < t.nodes; ++n)
      p.switch_hosts.push_back(zone->add_host("nvswitch-" + std::to_string(n), kHostSpeed)->seal());
  };
  auto add_sharp_links = [&](s4u::NetZone* zone) {
    topo::LinkSpec sharp;
    sharp.bandwidth = t.gpu_link.bandwidth;
    sharp.efficiency = t.nvls_efficiency;
    for (int g = 0; g < G; ++g) {
      sharp_up.push_back(make_link(zone, gpu_name(g) + "-sharp-up", sharp));
      sharp_down.push_back(make_link(zone, gpu_name(g) + "-sharp-down", sharp));
    }
  };
  auto switch_routes = [&](s4u::NetZone* zone, const std::vector<const s4u::Link*>& up,
                           const std::vector<const s4u::Link*>& down) {
    for (int g = 0; g < G && switches; ++g) {
      s4u::Host* sw = p.switch_hosts[static_cast<size_t>(t.node_of(g))];
      zone->add_bypass_route(p.gpu_hosts[g]->get_netpoint(), sw->get_netpoint(), nullptr, nullptr,
                             {s4u::LinkInRoute(up[g]), s4u::LinkInRoute(sharp_up[g])});
      zone->add_bypass_route(sw->get_netpoint(), p.gpu_hosts[g]->get_netpoint(), nullptr, nullptr,
                             {s4u::LinkInRoute(sharp_down[g]), s4u::LinkInRoute(down[g])});
    }
  };

  if (t.generator == topo::Generator::SingleNode) {
    auto* zone = s4u::Engine::get_instance()->get_netzone_root()->add_netzone_star(t.name);
    std::vector<const s4u::Link*> up, down;
    for (int g = 0; g < G; ++g) {
      s4u::Host* h = zone->add_host(gpu_name(g), kHostSpeed)->seal();
      up.push_back(make_link(zone, gpu_name(g) + "-up", t.gpu_link));
      down.push_back(make_link(zone, gpu_name(g) + "-down", t.gpu_link));
      zone->add_route(h, nullptr, {s4u::LinkInRoute(up.back())}, false);
      zone->add_route(nullptr, h, {s4u::LinkInRoute(down.back())}, false);
      p.gpu_hosts[g] = h;
    }
    if (switches) {
      add_switch_hosts(zone);
      add_sharp_links(zone);
    }
    zone->seal();
    switch_routes(zone, up, down);
    s4u::Engine::get_instance()->get_netzone_root()->seal();
    return p;
  }

  // The network zone; its leaves (ids in its own order) are the GPUs. The switches' hosts are
  // created after the last leaf, so that the zone's leaf ids (its netpoints' ids) stay the GPUs'
  // leaf indices; only bypass routes reach them.
  int leaves = 0;
  auto leaf_cb = [&](s4u::NetZone* zone, const std::vector<unsigned long>& /*coord*/, unsigned long id) {
    const int gpu = t.gpu_of_leaf(id);
    s4u::Host* h = zone->add_host(gpu_name(gpu), kHostSpeed)->seal();
    p.gpu_hosts[gpu] = h;
    if (++leaves == G && switches) add_switch_hosts(zone);
    return h;
  };
  const double bw = t.network_link.effective_bandwidth(), lat = t.network_link.latency;
  const auto sharing = s4u::Link::SharingPolicy::SPLITDUPLEX;
  s4u::NetZone* root = s4u::Engine::get_instance()->get_netzone_root();
  s4u::NetZone* zone = nullptr;
  switch (t.generator) {
    case topo::Generator::FatTree:
    case topo::Generator::RailFatTree: {
      const auto& f = t.fat_tree;
      zone = root->add_netzone_fatTree(t.name, static_cast<unsigned>(f.down.size()), f.down, f.up, f.links, bw, lat, sharing);
      break;
    }
    case topo::Generator::Dragonfly: {
      const auto& d = t.dragonfly;
      zone = root->add_netzone_dragonfly(t.name, {d.groups, d.group_links}, {d.chassis, d.chassis_links},
                                         {d.routers, d.router_links}, d.gpus_per_router, bw, lat, sharing);
      break;
    }
    case topo::Generator::Torus:
      zone = root->add_netzone_torus(t.name, t.torus.dims, bw, lat, sharing);
      break;
    case topo::Generator::SingleNode: break;
  }
  zone->set_host_cb(leaf_cb);

  // Intra-node: each GPU's own up and down link to its node switch (created before the zone is
  // sealed, which creates the hosts); bypass routes for every ordered pair of GPUs of a node.
  std::vector<const s4u::Link*> up, down;
  if (t.gpus_per_node > 1)
    for (int g = 0; g < G; ++g) {
      up.push_back(make_link(zone, gpu_name(g) + "-nvl-up", t.gpu_link));
      down.push_back(make_link(zone, gpu_name(g) + "-nvl-down", t.gpu_link));
    }
  if (switches) add_sharp_links(zone);
  zone->seal();
  switch_routes(zone, up, down);
  if (t.gpus_per_node > 1)
    for (int n = 0; n < t.nodes; ++n)
      for (int a = 0; a < t.gpus_per_node; ++a)
        for (int b = 0; b < t.gpus_per_node; ++b) {
          if (a == b) continue;
          const int ga = n * t.gpus_per_node + a, gb = n * t.gpus_per_node + b;
          zone->add_bypass_route(p.gpu_hosts[ga]->get_netpoint(), p.gpu_hosts[gb]->get_netpoint(), nullptr, nullptr,
                                 {s4u::LinkInRoute(up[ga]), s4u::LinkInRoute(down[gb])});
        }
  root->seal();
  return p;
}

}  // namespace compcoll::sim
