// shared/policy/cost_model.cpp — see cost_model.h.
#include "policy/cost_model.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <queue>
#include <tuple>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "codec/codec.h"
#include "codec/format.h"
#include "policy/nccl_tuning.h"
#include "schedule/algorithms.h"
#include "schedule/lockstep.h"

namespace compcoll::policy {

NetFactors flow_model_defaults(const std::string& model) {
  if (model == "cm02") return {1.0, 1.0, 0.0, false, 1e15};
  return {13.01, 0.97, 20537.0, true, 1e15};
}

namespace {

using sched::BufKind;
using sched::OpKind;

constexpr double kNever = std::numeric_limits<double>::infinity();

// An ordered pair of ints (ranks, or graph vertices: a directed link) as one key.
uint64_t pair_key(int a, int b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }
// A connection: the ordered pair of ranks and the lane (Op::lane) its messages travel on, as
// one key (ranks stay below 2^20, lanes below 2^12), and back.
uint64_t connection_key(int from, int to, uint32_t lane) {
  return pair_key(static_cast<int>(static_cast<uint32_t>(from) | (lane << 20)), to);
}
struct Connection {
  int from, to;
  uint32_t lane;
};
Connection connection_of(uint64_t key) {
  return {static_cast<int>((key >> 32) & 0xfffffu), static_cast<int>(key & 0xffffffffu), static_cast<uint32_t>(key >> 52)};
}

}  // namespace

SharedWork shared_work(double seconds, double alone_seconds, int concurrent) {
  SharedWork w;
  w.work = seconds / std::max(concurrent, 1);
  // Alone never slower than in company: a measured alone time above `seconds` is noise.
  const double alone = std::min(alone_seconds, seconds);
  w.bound = alone > 0 ? std::min(1.0, w.work / alone) : 1.0;
  return w;
}

namespace {
uint64_t stream_bytes(const std::string& codec, DType dtype, uint64_t elements, double ratio, uint32_t chunk_elements) {
  const uint64_t raw = elements * dtype_size(dtype);
  if (const LibraryCodec* lib = find_library_codec(codec)) {
    // Each chunk at the ratio, behind its size prefix and padded to 16 bytes (FORMAT.md).
    const uint64_t full = raw / lib->chunk_bytes, tail = raw % lib->chunk_bytes, chunks = full + (tail > 0);
    const auto chunk = [&](uint64_t bytes) {
      return format::library_chunk_bytes(chunks, static_cast<uint64_t>(ratio * static_cast<double>(bytes) + 0.5));
    };
    return format::kHeaderBytes + format::kOffsetEntryBytes * chunks + full * chunk(lib->chunk_bytes) +
           (tail > 0 ? chunk(tail) : 0);
  }
  const uint32_t c = format::chunk_elements_for(chunk_elements, elements);
  const uint64_t chunks = format::chunk_count_for(elements, c);
  double payload = codec == "identity" ? static_cast<double>(raw) : ratio * static_cast<double>(raw);
  if (c != format::kDefaultChunkElements && codec != "identity")
    if (const Codec* k = find_codec(codec)) {
      const double n = static_cast<double>(elements);
      payload += k->chunk_overhead_bytes(dtype) * (n / c - n / format::kDefaultChunkElements);
    }
  return format::kHeaderBytes + format::kOffsetEntryBytes * chunks + static_cast<uint64_t>(payload + 0.5);
}
}  // namespace

bool wire_budget_agreement(const sched::Schedule& s, const topo::Topology& t, const std::string& codec) {
  return t.wire_budget && !stream_sized_by_elements(codec) && s.compresses();
}

std::vector<FusedOp> fused_ops(const sched::Schedule& s, int rank, const topo::Topology& t, const calib::Calibration& cal,
                               const std::string& codec, bool nccl_kernels) {
  const sched::RankProgram& p = s.ranks[static_cast<size_t>(rank)];
  if (!t.fused_decode || p.wire_buffers == 0 || !gpu_decode_adds(codec) || !charges_reduce_copy(s, rank, nccl_kernels))
    return {};
  std::vector<FusedOp> tags;
  for (const auto& [d, r] : sched::decode_add_pairs(p.ops)) {
    if (cal.batches(calib::Op::Decompress, codec, s.dtype) && (p.ops[d].batched || sched::batch_end(p.ops, d) > d + 1))
      continue;
    if (tags.empty()) tags.assign(p.ops.size(), FusedOp::None);
    tags[d] = FusedOp::Absorbed;
    tags[r] = FusedOp::DecodeAdd;
  }
  return tags;
}

uint64_t wire_message_bytes(const std::string& codec, DType dtype, uint64_t elements, double ratio,
                            double budget_margin, uint32_t chunk_elements) {
  const uint64_t bytes = stream_bytes(codec, dtype, elements, ratio, chunk_elements);
  if (budget_margin == 0) return bytes;
  return static_cast<uint64_t>(std::ceil(static_cast<double>(bytes) * (1 + budget_margin)));
}

std::vector<int> rank_endpoints(const sched::Schedule& s, const topo::Topology& t) {
  const int gpus = s.gpu_ranks();
  if (gpus > static_cast<int>(t.rank_to_gpu.size()))
    throw std::runtime_error("schedule " + s.algorithm + ": " + std::to_string(gpus) + " ranks, the placement on " + t.name +
                             " has " + std::to_string(t.rank_to_gpu.size()));
  std::vector<int> ep(t.rank_to_gpu.begin(), t.rank_to_gpu.begin() + gpus);
  for (int k = 0; k < s.switches; ++k) {
    const int node = t.node_of(ep[static_cast<size_t>(k * s.switch_span)]);
    for (int i = 0; i < s.switch_span; ++i)
      if (t.node_of(ep[static_cast<size_t>(k * s.switch_span + i)]) != node)
        throw std::runtime_error("schedule " + s.algorithm + ": the GPUs of switch rank " + std::to_string(gpus + k) +
                                 " are not on one node of " + t.name + " (placement " + t.placement + ")");
    if (!t.nvls || t.gpus_per_node < 2)
      throw std::runtime_error("schedule " + s.algorithm + " needs NVLink SHARP, which " + t.name +
                               " has not (node.fabric nvswitch, node.nvls true)");
    ep.push_back(t.switch_of(node));
  }
  return ep;
}

double node_footprint_bytes(const sched::Schedule& s, const topo::Topology& t) {
  std::unordered_map<int, double> on_node;
  double most = 0;
  const double dsize = static_cast<double>(dtype_size(s.dtype));
  for (int r = 0; r < s.gpu_ranks() && r < static_cast<int>(t.rank_to_gpu.size()); ++r) {
    const sched::RankProgram& p = s.ranks[static_cast<size_t>(r)];
    double elements = static_cast<double>(p.input_count + p.output_count);
    for (const uint64_t c : p.scratch_counts) elements += static_cast<double>(c);
    double& node = on_node[t.node_of(t.rank_to_gpu[static_cast<size_t>(r)])];
    node += elements * dsize;
    most = std::max(most, node);
  }
  return most;
}

int kernel_concurrency(const calib::Calibration& cal, const topo::Topology& t) {
  return cal.concurrent > 1 ? cal.concurrent : t.gpus_per_node;
}

const RouteInfo& RouteCache::get(int src, int dst) {
  const uint64_t key = pair_key(src, dst);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  RouteInfo info;
  info.first = static_cast<uint32_t>(links_.size());
  topo::append_sim_route(t_, src, dst, links_);
  info.count = static_cast<uint32_t>(links_.size() - info.first);
  for (uint32_t k = 0; k < info.count; ++k) info.latency += links_[info.first + k].latency;
  return cache_.emplace(key, info).first->second;
}

std::string step_group_problem(const sched::Schedule& s, const topo::Topology& t, const NetFactors& net,
                               bool nccl_kernels) {
  if (!net.protocol_costs || t.receive_copy || s.size() < 2 || nccl_kernels || s.switches > 0) return "";
  return sched::lockstep_problem(s);
}

MessageCosts message_costs(const sched::Schedule& s, const topo::Topology& t, const NetFactors& net, bool nccl_kernels,
                           const std::string& protocol) {
  MessageCosts c;
  if (!net.protocol_costs || t.receive_copy || s.size() < 2) return c;
  const int nodes = t.nodes_spanned(s.gpu_ranks());
  const bool multi_node = nodes > 1, one_per_node = nodes == s.gpu_ranks();
  const bool tree = s.algorithm.rfind("double-binary-tree/", 0) == 0 || s.algorithm.rfind("nccl-tree/", 0) == 0;
  const bool nvls = s.switches > 0;  // NCCL's NVLS (one switch) or NVLS-Tree, whoever plans it
  const bool pat = nccl_kernels && s.algorithm.rfind("pat/", 0) == 0;
  const NcclStepCost sc = nvls  ? nccl_nvls_cost(nodes, s.switches > 1)
                          : pat ? nccl_pat_cost(s.gpu_ranks())
                                : nccl_step_cost(t.intra_fabric == "nvswitch", nccl_kernels && tree,
                                                 nccl_kernels ? protocol : "simple", multi_node, one_per_node);
  c.on = true;
  c.ungrouped = step_group_problem(s, t, net, nccl_kernels);
  c.lockstep = !nccl_kernels && !nvls && c.ungrouped.empty();
  c.base_s = nccl_kernels || nvls ? sc.base_us * 1e-6 : 0;  // compcoll's own plans: NCCL's point-to-point
  c.intra_s = sc.intra_us * 1e-6;
  c.inter_s = sc.inter_us * 1e-6;
  c.wire_factor = sc.wire_factor;
  c.latency_factor = net.latency_factor;
  // compcoll's plans only: NCCL's all-to-all keeps up to 8 peers in flight on their channels
  // (the schedule's rounds do not), and reaches the NIC's rate (docs/compcoll-sim.md).
  // A cap at or above a NIC port's line rate never binds a message, which leaves through one:
  // not applied (the NIC-filling count on every shipped topology).
  if (multi_node && !nvls && !nccl_kernels) {
    const NcclView v = nccl_view(t, s.gpu_ranks());
    const double rate = nccl_p2p_net_peer_rate(v, net.p2p_net_channels);
    if (rate < v.nic_bw * 1e9) c.net_peer_rate = rate;
  }
  return c;
}

double MessageCosts::delay_s(const topo::Topology& t, RouteCache& routes, int src_gpu, int dst_gpu) const {
  if (!on) return 0;
  const double step = t.node_of(src_gpu) == t.node_of(dst_gpu) ? intra_s : inter_s;
  return std::max(0.0, step - routes.get(src_gpu, dst_gpu).latency * latency_factor);
}

uint64_t MessageCosts::wire_bytes(uint64_t bytes) const {
  return wire_factor == 1 ? bytes : static_cast<uint64_t>(std::ceil(static_cast<double>(bytes) * wire_factor));
}

namespace {

// ---- the network: SimGrid's flow model ----------------------------------------------------
// A message first waits its route's latency (x latency_factor), then its bytes flow at the rate
// that weighted max-min sharing gives it among the messages flowing at that moment: every
// directed link of a route is a constraint of capacity its bandwidth (the reverse route's too at
// 0.05 when crosstraffic is on), a flow's weight in the sharing is SimGrid's penalty (route
// latency + weight_s / bandwidth per link), and it progresses at its share x bandwidth_factor
// (x the topology's factor for its size where the topology has measured ones, LinkSpec::by_size).
// With shared memory a rank's kernel or receive copy is a flow too: its work through its node's
// constraint (capacity 1, one per node), capped at its bound. Rates are recomputed whenever the
// set of flows changes.
class FlowModel {
 public:
  struct Flow {
    int from, r;
    uint32_t op;  // the receive (a message), or the kernel's or copy's op (a job)
    uint64_t bytes;
    uint32_t send_op = 0;
    uint32_t lane = 0;
    double left = 0, since = 0, rate = 0;  // bytes left at time `since`, flowing at `rate` since
    double factor = 1;                     // bandwidth_factor x the topology's factor for its size
    bool copied = false;                   // the receiver's core copies it (topo receive_copy)
    bool job = false;                      // shared memory: a rank's kernel or receive copy on its node
    double penalty = 0, bound = kNever;     // sharing weight; TCP-gamma cap on its share
    uint32_t first = 0, count = 0;          // into uses
    uint32_t version = 0;                   // bumped when its finish time changes
  };

  FlowModel(const topo::Topology& t, const std::vector<int>& endpoints, const NetFactors& net, RouteCache& routes,
            const MessageCosts& costs)
      : t_(t), ep_(endpoints), net_(net), routes_(routes), costs_(costs) {}

  double now() const { return now_; }
  void set_now(double now) { now_ = now; }
  const MessageCosts& costs() const { return costs_; }
  const Flow& flow(uint32_t slot) const { return flows_[slot]; }

  // A message from `from` to `r` on `lane` (its receive `recv_op`, its send `send_op`): it
  // starts flowing once its route's latency is paid (start_due). A copied message (the
  // receiver's core copies it: topo receive_copy) only pays the latency here.
  // `sharing`: the messages of its step group to the same peer (MessageCosts::peer_rate).
  void send(int from, int r, uint32_t lane, uint32_t recv_op, uint32_t send_op, uint64_t bytes, uint32_t sharing = 1) {
    const int src_gpu = ep_[static_cast<size_t>(from)], dst_gpu = ep_[static_cast<size_t>(r)];
    const RouteInfo* route = &routes_.get(src_gpu, dst_gpu);
    Flow& fl = fresh(Flow{from, r, recv_op, bytes});
    fl.send_op = send_op;
    fl.lane = lane;
    fl.copied = t_.copies_on_receive(src_gpu, dst_gpu);
    fl.left = fl.copied ? 0.0 : static_cast<double>(costs_.wire_bytes(bytes));  // copied: latency only
    const RouteFlow& rf = flow_of(src_gpu, dst_gpu, route);
    fl.first = rf.first;
    fl.count = rf.count;
    fl.penalty = rf.penalty;
    fl.bound = rf.bound;
    fl.factor = net_.bandwidth_factor * t_.message_factor(src_gpu, dst_gpu, static_cast<double>(bytes));
    // NCCL's channels to the peer: a cap on the rate it makes, as SimGrid's Comm::set_rate.
    if (const double cap = costs_.peer_rate(t_, src_gpu, dst_gpu, sharing); cap > 0) fl.bound = std::min(fl.bound, cap / fl.factor);
    starting_.emplace(now_ + route->latency * net_.latency_factor, static_cast<uint32_t>(&fl - flows_.data()));
  }

  // Shared memory: rank r's kernel or receive copy (`from` >= 0: the copy of a message from
  // `from`, whose send `send_op` it delivers), `w` of work on its node, flowing from now.
  void job(int r, uint32_t op, const SharedWork& w, int from, uint32_t send_op) {
    const int node = t_.node_of(ep_[static_cast<size_t>(r)]);
    auto [it, added] = node_use_.try_emplace(node, static_cast<uint32_t>(uses_.size()));
    if (added) {
      uses_.push_back({static_cast<uint32_t>(link_capacity_.size()), 1.0});
      link_capacity_.push_back(1.0);
    }
    Flow& fl = fresh(Flow{from, r, op, 0});
    fl.send_op = send_op;
    fl.job = true;
    fl.copied = from >= 0;
    fl.left = w.work;
    fl.first = it->second;
    fl.count = 1;
    fl.penalty = 1;
    fl.bound = w.bound;
    start_flow(static_cast<uint32_t>(&fl - flows_.data()));
  }

  // The next instant a flow starts or ends (kNever: none).
  double next() {
    while (!finishing_.empty() && std::get<2>(finishing_.top()) != flows_[std::get<1>(finishing_.top())].version)
      finishing_.pop();  // stale: the flow's rate changed since
    const double t_start = starting_.empty() ? kNever : starting_.top().first;
    const double t_done = finishing_.empty() ? kNever : std::get<0>(finishing_.top());
    return std::min(t_start, t_done);
  }
  // The flows whose bytes or work are through now, taken off their links, in a fixed order
  // (sender, receiver, lane). Each slot is the caller's until it hands it back (release).
  const std::vector<uint32_t>& ended() {
    ended_.clear();
    while (!finishing_.empty() && std::get<0>(finishing_.top()) <= now_ * (1 + 1e-12)) {
      const auto [when, f, version] = finishing_.top();
      finishing_.pop();
      if (version != flows_[f].version) continue;
      ++flows_[f].version;
      ended_.push_back(f);
    }
    std::sort(ended_.begin(), ended_.end(), [&](uint32_t a, uint32_t b) {
      return std::tie(flows_[a].from, flows_[a].r, flows_[a].lane) < std::tie(flows_[b].from, flows_[b].r, flows_[b].lane);
    });
    for (uint32_t f : ended_) end_flow(f);
    return ended_;
  }
  void release(uint32_t slot) { free_slots_.push_back(slot); }
  // Messages whose latency is paid start flowing, and the rates follow the flows that started
  // or ended at this instant.
  void settle() {
    while (!starting_.empty() && starting_.top().first <= now_) {
      start_flow(starting_.top().second);
      starting_.pop();
    }
    if (!dirty_.empty()) recompute();
  }

 private:
  struct LinkUse {
    uint32_t link;  // dense index
    double use;     // 1 on the route, 0.05 on the reverse route
  };
  // What a route means to a flow, worked out once per route.
  struct RouteFlow {
    uint32_t first = 0, count = 0;                // its link uses, in `uses_`
    double penalty = 1, bound = kNever;           // sharing weight; TCP-gamma cap on its share
  };

  // A flow slot (reused: a reused slot keeps counting versions, so its old heap entries stay
  // stale) holding `proto`.
  Flow& fresh(const Flow& proto) {
    uint32_t slot;
    if (free_slots_.empty()) {
      flows_.emplace_back();
      slot = static_cast<uint32_t>(flows_.size() - 1);
    } else {
      slot = free_slots_.back();
      free_slots_.pop_back();
    }
    Flow& fl = flows_[slot];
    const uint32_t version = fl.version;
    fl = proto;
    fl.version = version + 1;
    return fl;
  }

  const RouteFlow& flow_of(int src_gpu, int dst_gpu, const RouteInfo* route) {
    auto [it, added] = route_flows_.try_emplace(route);
    if (!added) return it->second;
    RouteFlow& rf = it->second;
    rf.first = static_cast<uint32_t>(uses_.size());
    auto add = [&](const RouteInfo& r, double use) {
      const topo::NetLink* links = routes_.links(r);
      for (uint32_t k = 0; k < r.count; ++k) {
        auto [d, inserted] = dense_.try_emplace(links[k].id, static_cast<uint32_t>(link_capacity_.size()));
        if (inserted) link_capacity_.push_back(links[k].bandwidth);
        uses_.push_back({d->second, use});
      }
    };
    add(*route, 1.0);
    if (net_.crosstraffic) add(routes_.get(dst_gpu, src_gpu), 0.05);
    rf.count = static_cast<uint32_t>(uses_.size()) - rf.first;
    double penalty = route->latency;
    const topo::NetLink* links = routes_.links(*route);
    for (uint32_t k = 0; k < route->count; ++k) penalty += net_.weight_s / links[k].bandwidth;
    if (penalty > 0) rf.penalty = penalty;  // else no latency, no weight: plain max-min
    if (net_.tcp_gamma > 0 && route->latency > 0) rf.bound = net_.tcp_gamma / (2 * route->latency);
    return rf;
  }

  void start_flow(uint32_t f) {
    Flow& fl = flows_[f];
    fl.since = now_;
    if (fl.count == 0) {  // no link: done at once
      finishing_.emplace(now_, f, ++fl.version);
      return;
    }
    if (on_link_.size() < link_capacity_.size()) on_link_.resize(link_capacity_.size());
    for (uint32_t k = fl.first; k < fl.first + fl.count; ++k) {
      on_link_[uses_[k].link].push_back(f);
      dirty_.push_back(uses_[k].link);
    }
  }

  void end_flow(uint32_t f) {
    const Flow& fl = flows_[f];
    for (uint32_t k = fl.first; k < fl.first + fl.count; ++k) {
      auto& v = on_link_[uses_[k].link];
      *std::find(v.begin(), v.end(), f) = v.back();
      v.pop_back();
      dirty_.push_back(uses_[k].link);
    }
  }

  // Weighted max-min (progressive filling) over the component of flows and links that the
  // flows started or ended at this instant reach through shared links (rates elsewhere do not
  // change): the link whose capacity left per unit of weight (sum of use / penalty of its
  // unfixed flows) is smallest fixes its flows at that level; the level only rises as links
  // are taken, so stale heap entries are re-pushed.
  void recompute() {
    ++epoch_;
    const uint32_t nlinks = static_cast<uint32_t>(link_capacity_.size());
    if (link_stamp_.size() < nlinks) {
      link_stamp_.resize(nlinks, 0);
      cap_.resize(nlinks);
      weight_.resize(nlinks);
    }
    if (flow_stamp_.size() < flows_.size()) {
      flow_stamp_.resize(flows_.size(), 0);
      fixed_stamp_.resize(flows_.size(), 0);
    }
    comp_links_.clear();
    comp_flows_.clear();
    for (uint32_t l : dirty_)
      if (link_stamp_[l] != epoch_) {
        link_stamp_[l] = epoch_;
        comp_links_.push_back(l);
      }
    dirty_.clear();
    for (size_t i = 0; i < comp_links_.size(); ++i) {
      for (uint32_t f : on_link_[comp_links_[i]]) {
        if (flow_stamp_[f] == epoch_) continue;
        flow_stamp_[f] = epoch_;
        comp_flows_.push_back(f);
        const Flow& fl = flows_[f];
        for (uint32_t k = fl.first; k < fl.first + fl.count; ++k)
          if (link_stamp_[uses_[k].link] != epoch_) {
            link_stamp_[uses_[k].link] = epoch_;
            comp_links_.push_back(uses_[k].link);
          }
      }
    }
    for (uint32_t l : comp_links_) {
      cap_[l] = link_capacity_[l];
      weight_[l] = 0;
    }
    for (uint32_t f : comp_flows_) {
      const Flow& fl = flows_[f];
      for (uint32_t k = fl.first; k < fl.first + fl.count; ++k) weight_[uses_[k].link] += uses_[k].use / fl.penalty;
    }
    for (uint32_t l : comp_links_)
      if (weight_[l] > 0) levels_.emplace(cap_[l] / weight_[l], l);
    for (uint32_t f : comp_flows_)  // a capped flow is a constraint of its own (index nlinks + slot)
      if (flows_[f].bound < kNever) levels_.emplace(flows_[f].bound * flows_[f].penalty, nlinks + f);
    size_t unfixed = comp_flows_.size();
    auto fix = [&](uint32_t f, double value) {
      fixed_stamp_[f] = epoch_;
      --unfixed;
      Flow& fl = flows_[f];
      fl.left = std::max(0.0, fl.left - fl.rate * (now_ - fl.since));
      fl.since = now_;
      fl.rate = value * fl.factor;
      ++fl.version;
      finishing_.emplace(fl.rate > 0 ? now_ + fl.left / fl.rate : kNever, f, fl.version);
      for (uint32_t k = fl.first; k < fl.first + fl.count; ++k) {
        cap_[uses_[k].link] -= uses_[k].use * value;
        weight_[uses_[k].link] -= uses_[k].use / fl.penalty;
      }
    };
    while (unfixed > 0 && !levels_.empty()) {
      const auto [level, l] = levels_.top();
      levels_.pop();
      if (l >= nlinks) {
        if (fixed_stamp_[l - nlinks] != epoch_) fix(l - nlinks, flows_[l - nlinks].bound);
        continue;
      }
      if (weight_[l] <= 0) continue;  // every flow on it is fixed
      const double current = std::max(cap_[l], 0.0) / weight_[l];
      if (current > level * (1 + 1e-12)) {
        levels_.emplace(current, l);
        continue;
      }
      const double at = std::max(current, level);  // the level never falls; rounding may say so
      for (uint32_t f : on_link_[l])
        if (fixed_stamp_[f] != epoch_) fix(f, at / flows_[f].penalty);
      weight_[l] = 0;
    }
    levels_ = {};
  }

  const topo::Topology& t_;
  const std::vector<int>& ep_;  // each rank's endpoint (rank_endpoints)
  const NetFactors& net_;
  RouteCache& routes_;
  const MessageCosts costs_;
  double now_ = 0;
  std::vector<double> link_capacity_;             // by dense index: bytes/s (a node: 1)
  std::unordered_map<uint64_t, uint32_t> dense_;  // link id -> dense index
  std::vector<LinkUse> uses_;
  std::unordered_map<const RouteInfo*, RouteFlow> route_flows_;
  std::unordered_map<int, uint32_t> node_use_;    // node -> its entry in `uses_`
  std::vector<Flow> flows_;                       // slots, reused
  std::vector<uint32_t> free_slots_, ended_;
  std::vector<std::vector<uint32_t>> on_link_;    // dense link -> the flows on it
  using Start = std::pair<double, uint32_t>;      // time, flow slot
  std::priority_queue<Start, std::vector<Start>, std::greater<>> starting_;
  using Finish = std::tuple<double, uint32_t, uint32_t>;  // time, slot, version
  std::priority_queue<Finish, std::vector<Finish>, std::greater<>> finishing_;
  // recompute()'s working state, kept between calls
  std::vector<double> cap_, weight_;
  std::vector<uint32_t> link_stamp_, flow_stamp_, fixed_stamp_;
  std::vector<uint32_t> comp_links_, comp_flows_, dirty_;
  uint32_t epoch_ = 0;
  using Level = std::pair<double, uint32_t>;
  std::priority_queue<Level, std::vector<Level>, std::greater<>> levels_;
};

// ---- the ranks: ops in dependency order, kernels, message matching, iterations ------------
// Ops are taken in the order they become ready (as the simulator starts them), so a GPU's
// kernel queue and a pair's message order come out as they do there.
class PlanRun {
 public:
  PlanRun(const sched::Schedule& call, int iterations, const topo::Topology& t, const calib::Calibration& cal,
          const std::string& codec, double ratio, const NetFactors& net, RouteCache& routes, bool nccl_kernels,
          const std::string& protocol)
      : call_(call),
        iterations_(std::max(iterations, 1)),
        back_to_back_(iterations_ > 1 ? sched::repeated(call, iterations_) : sched::Schedule{}),
        s_(iterations_ > 1 ? back_to_back_ : call),
        t_(t),
        cal_(cal),
        codec_(codec),
        ratio_(ratio),
        net_(net),
        routes_(routes),
        nccl_kernels_(nccl_kernels),
        n_(s_.size()),
        dsize_(dtype_size(s_.dtype)),
        shared_(t.shared_memory),
        kernels_at_once_(kernel_concurrency(cal, t)),
        footprint_(node_footprint_bytes(call, t)),  // receive copies' factors (LinkSpec::by_footprint)
        ep_(rank_endpoints(call, t)),
        flows_(t, ep_, net, routes, message_costs(call, t, net, nccl_kernels, protocol)) {
    setup();
  }

  PlanCost run();

 private:
  struct Rank {
    std::vector<uint32_t> missing;
    std::vector<std::vector<uint32_t>> dependents;
    std::vector<double> ready, finish;
    std::vector<uint32_t> seq;                      // sends / receives: index among those of the connection
    std::vector<uint64_t> wire;                     // bytes of each wire buffer's message
    std::vector<FusedOp> fused;                     // fused_ops (empty: none)
    double gpu_free = 0, codec_s = 0, kernel_s = 0;
    // Shared memory (topo::Topology::shared_memory): the kernels and receive copies waiting for
    // the rank's thread, in the order they became ready, and whether one is running; with a
    // compute thread (topo::Topology::compute_thread) the receive copies wait in a second queue,
    // the rank's MPI thread's (Rank::kCopies).
    struct Job {
      uint32_t op;
      SharedWork w;
      int from = -1;          // a receive copy: the sender, whose send it delivers
      uint32_t send_op = 0;
    };
    static constexpr int kKernels = 0, kCopies = 1;
    std::deque<Job> jobs[2];
    bool running[2] = {false, false};
    // Back to back: iteration k's ops are [k x per_iteration, (k+1) x per_iteration); `open[k]`
    // counts its ops not done and sends not delivered, and when it reaches 0 (at `gate[k]`, the
    // latest of those times) iteration k + 1's first ops (`roots[k + 1]`) become ready.
    uint32_t per_iteration = 0;
    std::vector<uint32_t> open;
    std::vector<double> gate;
    std::vector<std::vector<uint32_t>> roots;
    double end = 0;  // its last op done, its last send delivered
    sched::StepGroups groups;  // lockstep (MessageCosts::lockstep), as the simulator runs it
    sched::PeerSharing sharing;  // MessageCosts::net_peer_rate (counts nothing: no cap)
  };
  // Per connection (ordered pair and lane): the messages posted and not yet sent, in the order
  // they leave (the order they were posted, as the simulator's per-connection queue has it), the
  // receives waiting for their message, and whether one of its messages is on the wire (one at
  // a time).
  struct Pending {
    uint32_t seq;
    uint64_t bytes;
    uint32_t op;  // the send
  };
  struct Pair {
    std::deque<Pending> outbox;
    std::map<uint32_t, uint32_t> waiting;  // seq -> receiving op
    bool busy = false;                     // one of its messages is on the wire
  };
  using Item = std::tuple<double, int, uint32_t>;  // ready time, rank, op

  void setup();
  void close(int r, uint32_t i, double when);
  void finish_op(int r, uint32_t i, double done);
  void try_send(int from, int r, uint32_t lane);
  void start_job(int r, int queue);
  // The queue a job waits in: a receive copy (copied) in the MPI thread's with a compute thread.
  int copy_queue(bool copied) const { return copied && t_.compute_thread ? Rank::kCopies : Rank::kKernels; }
  void job_done(uint32_t slot);
  void arrive(uint32_t slot);
  void delivered(const FlowModel::Flow& fl, double received);
  // `messages` > 1: a batch's call (a GPU call: its alone time is its time, as the simulator's).
  void kernel(int r, uint32_t i, calib::Op kind, double bytes, double seconds, uint32_t messages = 1);
  void start_op(int r, uint32_t i);
  void run_op(int r, uint32_t i);
  void group_transfer_done(int r, int64_t receive);

  const sched::Schedule& call_;
  const int iterations_;
  const sched::Schedule back_to_back_;
  const sched::Schedule& s_;
  const topo::Topology& t_;
  const calib::Calibration& cal_;
  const std::string& codec_;
  const double ratio_;
  const NetFactors& net_;
  RouteCache& routes_;
  const bool nccl_kernels_;
  bool lockstep_ = false;
  const int n_;
  // Back to back within wire budgets (topo::Topology::wire_budget): per iteration, the ranks
  // done with it and when the last was.
  std::vector<int> together_;
  std::vector<double> together_at_;
  int together_need_ = 0;  // the ranks with ops, where they end each run together; else 0
  const uint64_t dsize_;
  const bool shared_;
  const int kernels_at_once_;
  const double footprint_;
  const std::vector<int> ep_;  // each rank's endpoint: its GPU or its switch (rank_endpoints)
  FlowModel flows_;
  std::vector<Rank> ranks_;
  size_t remaining_ = 0;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue_;
  std::unordered_map<uint64_t, Pair> pairs_;
  std::vector<uint64_t> touched_;  // pairs posted to at this instant
  // Messages waiting out their step latency (MessageCosts): when, pair, message; in time order,
  // then in the order they were posted (a pair's latency is one value, so its order holds).
  struct Delayed {
    double when;
    uint64_t order, key;
    Pending m;
    bool operator>(const Delayed& o) const { return std::tie(when, order) > std::tie(o.when, o.order); }
  };
  std::priority_queue<Delayed, std::vector<Delayed>, std::greater<>> delayed_;
  uint64_t delayed_order_ = 0;
  PlanCost cost_;
  double end_ = 0;
};

void PlanRun::setup() {
  lockstep_ = flows_.costs().lockstep;
  ranks_.resize(static_cast<size_t>(n_));
  together_.assign(static_cast<size_t>(iterations_), 0);
  together_at_.assign(static_cast<size_t>(iterations_), 0);
  // Within wire budgets a compressing call's ranks end each run together (real::Executor);
  // together_need_ stays 0 otherwise.
  const bool together = wire_budget_agreement(call_, t_, codec_);
  for (int r = 0; r < n_; ++r) {
    const auto& ops = s_.ranks[r].ops;
    Rank& st = ranks_[r];
    st.missing.resize(ops.size());
    st.dependents.resize(ops.size());
    st.ready.assign(ops.size(), 0);
    st.finish.assign(ops.size(), 0);
    st.seq.assign(ops.size(), 0);
    st.wire.assign(s_.ranks[r].wire_buffers, 0);
    st.fused = fused_ops(s_, r, t_, cal_, codec_, nccl_kernels_);
    std::unordered_map<uint64_t, uint32_t> sends, recvs;  // per connection
    st.per_iteration = static_cast<uint32_t>(call_.ranks[r].ops.size());
    if (together && st.per_iteration > 0) ++together_need_;
    st.open.assign(static_cast<size_t>(iterations_), st.per_iteration);
    st.gate.assign(static_cast<size_t>(iterations_), 0);
    st.roots.resize(static_cast<size_t>(iterations_));
    for (uint32_t i = 0; i < ops.size(); ++i) {
      for (uint32_t d : ops[i].deps)
        if (!lockstep_ || !sched::lockstep_free_dependency(ops, i, d)) st.dependents[d].push_back(i), ++st.missing[i];
      if (ops[i].kind == OpKind::Send) {
        st.seq[i] = sends[connection_key(r, ops[i].peer, ops[i].lane)]++;
        ++st.open[i / st.per_iteration];  // and its delivery
      }
      if (ops[i].kind == OpKind::Recv) st.seq[i] = recvs[connection_key(ops[i].peer, r, ops[i].lane)]++;
      if (st.missing[i]) continue;
      if (i < st.per_iteration) queue_.emplace(flows_.costs().base_s, r, i);  // NCCL's launch: base latency
      else st.roots[i / st.per_iteration].push_back(i);
    }
    remaining_ += ops.size();
    if (lockstep_) st.groups = sched::StepGroups(ops, st.per_iteration, static_cast<size_t>(iterations_));
    if (flows_.costs().net_peer_rate > 0) st.sharing = sched::PeerSharing(ops, st.per_iteration);
  }
}

// Lockstep: a transfer of rank r's posted group is done (a receive: `receive`, else -1); the
// last one finishes the group's receives and posts the groups that may go next.
void PlanRun::group_transfer_done(int r, int64_t receive) {
  ranks_[r].groups.done(receive, [&](uint32_t i) { finish_op(r, i, flows_.now()); }, [&](uint32_t i) { run_op(r, i); });
}

// One of iteration k's ops done or sends delivered at `when`: the last one lets iteration k + 1
// begin.
void PlanRun::close(int r, uint32_t i, double when) {
  Rank& st = ranks_[r];
  st.end = std::max(st.end, when);
  const uint32_t k = i / st.per_iteration;
  st.gate[k] = std::max(st.gate[k], when);
  if (--st.open[k] > 0 || k + 1 >= st.roots.size()) return;
  const auto begin = [&](int q, double at) {
    for (uint32_t root : ranks_[q].roots[k + 1]) {
      ranks_[q].ready[root] = at;
      queue_.emplace(at, q, root);
    }
  };
  if (!together_need_) return begin(r, st.gate[k]);
  // Within wire budgets every rank ends a run with the others (real::Executor): the next
  // iteration begins everywhere once the last rank is done with this one.
  together_at_[k] = std::max(together_at_[k], st.gate[k]);
  if (++together_[k] == together_need_)
    for (int q = 0; q < n_; ++q)
      if (ranks_[q].per_iteration > 0) begin(q, together_at_[k]);
}

void PlanRun::finish_op(int r, uint32_t i, double done) {
  Rank& st = ranks_[r];
  st.finish[i] = done;
  end_ = std::max(end_, done);
  --remaining_;
  for (uint32_t d : st.dependents[i]) {
    st.ready[d] = std::max(st.ready[d], done);
    if (--st.missing[d] == 0) queue_.emplace(st.ready[d], r, d);
  }
  close(r, i, done);
}

// The pair's next message leaves if the pair's wire is free and its receive is posted (a
// rendezvous holds the ones behind it).
void PlanRun::try_send(int from, int r, uint32_t lane) {
  Pair& p = pairs_[connection_key(from, r, lane)];
  if (p.busy || p.outbox.empty()) return;
  const Pending m = p.outbox.front();
  auto w = p.waiting.find(m.seq);
  if (w == p.waiting.end()) return;
  const uint32_t recv_op = w->second;
  p.waiting.erase(w);
  p.outbox.pop_front();
  p.busy = true;
  flows_.send(from, r, lane, recv_op, m.op, m.bytes, ranks_[from].sharing.of(m.op));
}

// Shared memory: the rank's next kernel or receive copy starts if its core is free.
void PlanRun::start_job(int r, int q) {
  Rank& st = ranks_[r];
  if (st.running[q] || st.jobs[q].empty()) return;
  const Rank::Job job = st.jobs[q].front();
  st.jobs[q].pop_front();
  st.running[q] = true;
  flows_.job(r, job.op, job.w, job.from, job.send_op);
}

// The send of a copied message is delivered when the receiver's copy is done (`received`) and
// its acknowledgement is back (the reverse route's latency), as in an MPI rendezvous.
void PlanRun::delivered(const FlowModel::Flow& fl, double received) {
  const int src_gpu = ep_[static_cast<size_t>(fl.from)], dst_gpu = ep_[static_cast<size_t>(fl.r)];
  const double acked = received + routes_.get(dst_gpu, src_gpu).latency * net_.latency_factor;
  end_ = std::max(end_, acked);
  close(fl.from, fl.send_op, acked);
}

// Shared memory: a kernel or receive copy is done; the rank's next one starts.
void PlanRun::job_done(uint32_t slot) {
  const FlowModel::Flow fl = flows_.flow(slot);
  flows_.release(slot);
  const int q = copy_queue(fl.copied);
  ranks_[fl.r].running[q] = false;
  start_job(fl.r, q);
  finish_op(fl.r, fl.op, flows_.now());
  if (fl.copied) delivered(fl, flows_.now());
}

void PlanRun::arrive(uint32_t slot) {
  const FlowModel::Flow fl = flows_.flow(slot);
  flows_.release(slot);
  const double now = flows_.now();
  pairs_[connection_key(fl.from, fl.r, fl.lane)].busy = false;
  const auto& op = s_.ranks[fl.r].ops[fl.op];
  if (op.dst.buf == BufKind::Wire) ranks_[fl.r].wire[op.dst.index] = fl.bytes;
  Rank& st = ranks_[fl.r];
  const double copy =
      fl.copied ? t_.receive_copy_seconds(static_cast<double>(fl.bytes), net_.bandwidth_factor, footprint_) : 0;
  if (copy > 0 && shared_) {  // in the receiver's queue, as work on the node
    const double alone = t_.receive_copy_alone_seconds(static_cast<double>(fl.bytes), net_.bandwidth_factor, footprint_);
    const int q = copy_queue(true);
    st.jobs[q].push_back({fl.op, shared_work(copy, alone, copy_concurrency(t_)), fl.from, fl.send_op});
    start_job(fl.r, q);
    try_send(fl.from, fl.r, fl.lane);
    return;
  }
  if (copy > 0) st.gpu_free = std::max(st.gpu_free, now) + copy;  // in the receiver's kernel queue
  const double received = copy > 0 ? st.gpu_free : now;
  if (lockstep_) group_transfer_done(fl.r, fl.op);  // the receive finishes with its group
  else finish_op(fl.r, fl.op, received);
  // The send is delivered when the message has arrived; a copied one once its copy is done and
  // the acknowledgement is back.
  if (!fl.copied) close(fl.from, fl.send_op, now);
  else delivered(fl, received);
  if (lockstep_) group_transfer_done(fl.from, -1);
  try_send(fl.from, fl.r, fl.lane);
}

// A kernel of `seconds` (calibrated) in the rank's queue: it ends in turn, or with shared memory
// when its work on the node is done (job_done).
void PlanRun::kernel(int r, uint32_t i, calib::Op kind, double bytes, double seconds, uint32_t messages) {
  const double now = flows_.now();
  if (seconds <= 0) return finish_op(r, i, now);  // zero-time ops do not queue (the simulator skips them)
  Rank& st = ranks_[r];
  st.kernel_s += seconds;
  if (shared_) {
    const double alone = messages > 1 ? seconds : cal_.alone_seconds(kind, codec_, s_.dtype, bytes);
    st.jobs[Rank::kKernels].push_back({i, shared_work(seconds, alone, kernels_at_once_)});
    return start_job(r, Rank::kKernels);
  }
  st.gpu_free = std::max(st.gpu_free, now) + seconds;
  finish_op(r, i, st.gpu_free);
}

void PlanRun::start_op(int r, uint32_t i) {
  if (lockstep_ && sched::is_transfer(s_.ranks[r].ops[i].kind))
    return ranks_[r].groups.ready(s_.ranks[r].ops, i, [&](uint32_t j) { run_op(r, j); });
  run_op(r, i);
}

void PlanRun::run_op(int r, uint32_t i) {
  const double now = flows_.now();
  Rank& st = ranks_[r];
  const auto& op = s_.ranks[r].ops[i];
  switch (op.kind) {
    case OpKind::Send: {
      const uint64_t bytes = op.src.buf == BufKind::Wire ? st.wire[op.src.index] : op.src.count * dsize_;
      ++cost_.messages;
      cost_.wire_bytes += bytes;
      finish_op(r, i, now);  // buffered: what depends on it may go on
      // NCCL's protocol costs: the message joins its pair's queue its step latency (less its
      // route's) later, the wire not held meanwhile (MessageCosts; as the simulator does).
      const double delay = flows_.costs().delay_s(t_, routes_, ep_[static_cast<size_t>(r)], ep_[static_cast<size_t>(op.peer)]);
      const uint64_t key = connection_key(r, op.peer, op.lane);
      if (delay > 0) {
        delayed_.push(Delayed{now + delay, delayed_order_++, key, Pending{st.seq[i], bytes, i}});
        break;
      }
      pairs_[key].outbox.push_back({st.seq[i], bytes, i});
      touched_.push_back(key);
      break;
    }
    case OpKind::Recv:
      pairs_[connection_key(op.peer, r, op.lane)].waiting[st.seq[i]] = i;
      touched_.push_back(connection_key(op.peer, r, op.lane));
      break;
    case OpKind::Compress:
    case OpKind::Decompress: {
      if (op.kind == OpKind::Compress)
        st.wire[op.dst.index] =
            wire_message_bytes(codec_, s_.dtype, op.src.count, ratio_, t_.wire_budget_margin, cal_.chunk_elements);
      const calib::Op kind = op.kind == OpKind::Compress ? calib::Op::Compress : calib::Op::Decompress;
      const bool batches = cal_.batches(kind, codec_, s_.dtype);
      if ((op.batched && batches) ||  // run in its batch's first op's launch
          (!st.fused.empty() && st.fused[i] == FusedOp::Absorbed)) {  // or in its reduce's
        finish_op(r, i, now);
        break;
      }
      // The launch covers the op's bytes, or with batch launches its batch's (as the simulator).
      const auto& ops = s_.ranks[r].ops;
      const double bytes = static_cast<double>(sched::launch_elements(ops, i, batches) * dsize_);
      const uint32_t messages = batches ? sched::batch_end(ops, i) - i : 1;
      const double d = messages > 1 ? cal_.batch_seconds(kind, codec_, s_.dtype, messages, bytes)
                                    : cal_.seconds(kind, codec_, s_.dtype, bytes);
      st.codec_s += d;
      kernel(r, i, kind, bytes, d, messages);
      break;
    }
    case OpKind::Reduce: {
      const double bytes = static_cast<double>(op.dst.count * dsize_);
      if (!st.fused.empty() && st.fused[i] == FusedOp::DecodeAdd) {  // its block decoded and added in one kernel
        const double d = cal_.seconds(calib::Op::DecodeAdd, codec_, s_.dtype, bytes);
        st.codec_s += d;
        kernel(r, i, calib::Op::DecodeAdd, bytes, d);
      } else if (!charges_reduce_copy(s_, r, nccl_kernels_)) finish_op(r, i, now);
      else kernel(r, i, calib::Op::Reduce, bytes, cal_.seconds(calib::Op::Reduce, codec_, s_.dtype, bytes));
      break;
    }
    case OpKind::Copy: {
      if (op.src.buf == BufKind::Wire && op.dst.buf == BufKind::Wire) st.wire[op.dst.index] = st.wire[op.src.index];
      const double bytes = static_cast<double>(op.dst.count * dsize_);
      if (bytes > 0 && charges_reduce_copy(s_, r, nccl_kernels_) && cal_.has(calib::Op::Copy, "", s_.dtype))
        kernel(r, i, calib::Op::Copy, bytes, cal_.seconds(calib::Op::Copy, codec_, s_.dtype, bytes));
      else finish_op(r, i, now);
      break;
    }
  }
}

PlanCost PlanRun::run() {
  while (true) {
    const double t_op = queue_.empty() ? kNever : std::get<0>(queue_.top());
    const double t_delayed = delayed_.empty() ? kNever : delayed_.top().when;
    const double t_next = std::min({t_op, t_delayed, flows_.next()});
    if (t_next == kNever) break;
    flows_.set_now(t_next);
    // Messages whose bytes are through arrive, kernels and copies whose work is done end (in a
    // fixed order).
    for (uint32_t f : flows_.ended()) {
      if (flows_.flow(f).job) job_done(f);
      else arrive(f);
    }
    // Messages whose step latency has passed join their pairs' queues.
    while (!delayed_.empty() && delayed_.top().when <= t_next) {
      const Delayed d = delayed_.top();
      delayed_.pop();
      pairs_[d.key].outbox.push_back(d.m);
      touched_.push_back(d.key);
    }
    // Ops ready now, in order; what they post leaves once all of this instant's are posted.
    while (!queue_.empty() && std::get<0>(queue_.top()) <= t_next) {
      const auto [ready, r, i] = queue_.top();
      queue_.pop();
      start_op(r, i);
    }
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    for (uint64_t key : touched_) {
      const Connection c = connection_of(key);
      try_send(c.from, c.to, c.lane);
    }
    touched_.clear();
    flows_.settle();
  }
  if (remaining_ > 0) throw std::runtime_error("cost model: the schedule cannot finish (a receive is never matched)");
  const int gpus = s_.gpu_ranks();  // a switch rank is no GPU: the means are over the group
  for (int r = 0; r < gpus; ++r) {
    const Rank& st = ranks_[static_cast<size_t>(r)];
    cost_.codec_s = std::max(cost_.codec_s, st.codec_s / iterations_);
    cost_.kernel_s += st.kernel_s / gpus / iterations_;
    cost_.iteration_s += st.end / gpus / iterations_;
  }
  cost_.time_s = end_;
  return cost_;
}

}  // namespace

PlanCost predict(const sched::Schedule& call, const topo::Topology& t, const calib::Calibration& cal,
                 const std::string& codec, double ratio, const NetFactors& net, RouteCache& routes, int iterations,
                 bool nccl_kernels, const std::string& protocol) {
  return PlanRun(call, iterations, t, cal, codec, ratio, net, routes, nccl_kernels, protocol).run();
}

double exposed_codec_s(const sched::Schedule& s, const topo::Topology& t, const calib::Calibration& cal,
                       const std::string& codec, double ratio, const NetFactors& net, RouteCache& routes,
                       bool nccl_kernels, const std::string& protocol) {
  if (codec == "identity" || cal.source == "zero") return 0;
  calib::Calibration free = cal;  // the same kernels, compress and decompress at no time
  for (auto* list : {&free.curves, &free.batch_curves})
    for (auto& c : *list)
      if (c.op == calib::Op::Compress || c.op == calib::Op::Decompress) {
        for (auto& p : c.points) p.second = 0;
        for (auto& p : c.alone) p.second = 0;
      }
  // A fused decode-and-add without its decoding: the reduce (calib::Calibration::seconds of a
  // decode_add without a curve: the decompress's time, now none, and the reduce's).
  std::erase_if(free.curves, [](const calib::Curve& c) { return c.op == calib::Op::DecodeAdd; });
  const double with = predict(s, t, cal, codec, ratio, net, routes, 1, nccl_kernels, protocol).time_s;
  const double without = predict(s, t, free, codec, ratio, net, routes, 1, nccl_kernels, protocol).time_s;
  return std::max(0.0, with - without);
}

double predict_link_transfer(uint64_t count, DType dtype, uint32_t pieces, const std::string& codec,
                             double stream_fraction, double bandwidth, double latency, const calib::Calibration& cal) {
  // A route between two GPUs of a node crosses two links, the sender's up and the receiver's
  // down: each carries the link's rate and half its latency.
  topo::LinkSpec link;
  link.bandwidth = bandwidth;
  link.latency = latency / 2;
  const topo::Topology t = topo::single_node(2, link, "pcie");
  const sched::Schedule s = sched::point_to_point(count, dtype, pieces,
                                                  codec.empty() ? sched::Placement::None : sched::Placement::PerHop);
  RouteCache routes(t);
  return predict(s, t, cal, codec.empty() ? "identity" : codec, codec.empty() ? 1.0 : stream_fraction, NetFactors{},
                 routes)
      .time_s;
}

}  // namespace compcoll::policy
