// shared/policy/cost_model.cpp — see cost_model.h.
#include "policy/cost_model.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <queue>
#include <tuple>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "codec/format.h"

namespace compcoll::policy {

NetFactors flow_model_defaults(const std::string& model) {
  if (model == "cm02") return {1.0, 1.0, 0.0, false, 1e15};
  return {13.01, 0.97, 20537.0, true, 1e15};
}

namespace {

using sched::BufKind;
using sched::OpKind;

uint64_t wire_bytes_of(const std::string& codec, uint64_t elements, uint64_t raw, double ratio) {
  const uint64_t chunks = (elements + format::kDefaultChunkElements - 1) / format::kDefaultChunkElements;
  const double payload = codec == "identity" ? static_cast<double>(raw) : ratio * static_cast<double>(raw);
  return format::kHeaderBytes + format::kOffsetEntryBytes * chunks + static_cast<uint64_t>(payload + 0.5);
}

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

double node_footprint_bytes(const sched::Schedule& s, const topo::Topology& t) {
  std::unordered_map<int, double> on_node;
  double most = 0;
  const double dsize = static_cast<double>(dtype_size(s.dtype));
  for (int r = 0; r < s.size() && r < static_cast<int>(t.rank_to_gpu.size()); ++r) {
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

PlanCost predict(const sched::Schedule& call, const topo::Topology& t, const calib::Calibration& cal,
                 const std::string& codec, double ratio, const NetFactors& net, RouteCache& routes, int iterations,
                 bool nccl_kernels) {
  iterations = std::max(iterations, 1);
  const sched::Schedule back_to_back = iterations > 1 ? sched::repeated(call, iterations) : sched::Schedule{};
  const sched::Schedule& s = iterations > 1 ? back_to_back : call;
  const int n = s.size();
  if (static_cast<int>(t.rank_to_gpu.size()) < n)
    throw std::runtime_error("cost model: the placement has fewer ranks than the schedule");
  const uint64_t dsize = dtype_size(s.dtype);
  const bool shared = t.shared_memory;
  const int kernels_at_once = kernel_concurrency(cal, t);
  const double footprint = node_footprint_bytes(call, t);  // receive copies' factors (LinkSpec::by_footprint)

  // Ops are taken in the order they become ready (as the simulator's actors start them), so
  // a GPU's kernel queue and a pair's message order come out as they do there.
  struct Rank {
    std::vector<uint32_t> missing;
    std::vector<std::vector<uint32_t>> dependents;
    std::vector<double> ready, finish;
    std::vector<uint32_t> seq;                      // sends / receives: index among those of the connection
    std::vector<uint64_t> wire;                     // bytes of each wire buffer's message
    double gpu_free = 0, codec_s = 0, kernel_s = 0;
    // Shared memory (topo::Topology::shared_memory): the kernels and receive copies waiting for
    // the rank's core, in the order they became ready, and whether one is running.
    struct Job {
      uint32_t op;
      SharedWork w;
      int from = -1;          // a receive copy: the sender, whose send it delivers
      uint32_t send_op = 0;
    };
    std::deque<Job> jobs;
    bool running = false;
    // Back to back: iteration k's ops are [k x per_iteration, (k+1) x per_iteration); `open[k]`
    // counts its ops not done and sends not delivered, and when it reaches 0 (at `gate[k]`, the
    // latest of those times) iteration k + 1's first ops (`roots[k + 1]`) become ready.
    uint32_t per_iteration = 0;
    std::vector<uint32_t> open;
    std::vector<double> gate;
    std::vector<std::vector<uint32_t>> roots;
    double end = 0;  // its last op done, its last send delivered
  };
  std::vector<Rank> ranks(static_cast<size_t>(n));
  size_t remaining = 0;
  using Item = std::tuple<double, int, uint32_t>;  // ready time, rank, op
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
  for (int r = 0; r < n; ++r) {
    const auto& ops = s.ranks[r].ops;
    Rank& st = ranks[r];
    st.missing.resize(ops.size());
    st.dependents.resize(ops.size());
    st.ready.assign(ops.size(), 0);
    st.finish.assign(ops.size(), 0);
    st.seq.assign(ops.size(), 0);
    st.wire.assign(s.ranks[r].wire_buffers, 0);
    std::unordered_map<uint64_t, uint32_t> sends, recvs;  // per connection
    st.per_iteration = static_cast<uint32_t>(call.ranks[r].ops.size());
    st.open.assign(static_cast<size_t>(iterations), st.per_iteration);
    st.gate.assign(static_cast<size_t>(iterations), 0);
    st.roots.resize(static_cast<size_t>(iterations));
    for (uint32_t i = 0; i < ops.size(); ++i) {
      st.missing[i] = static_cast<uint32_t>(ops[i].deps.size());
      for (uint32_t d : ops[i].deps) st.dependents[d].push_back(i);
      if (ops[i].kind == OpKind::Send) {
        st.seq[i] = sends[connection_key(r, ops[i].peer, ops[i].lane)]++;
        ++st.open[i / st.per_iteration];  // and its delivery
      }
      if (ops[i].kind == OpKind::Recv) st.seq[i] = recvs[connection_key(ops[i].peer, r, ops[i].lane)]++;
      if (st.missing[i]) continue;
      if (i < st.per_iteration) queue.emplace(0.0, r, i);
      else st.roots[i / st.per_iteration].push_back(i);
    }
    remaining += ops.size();
  }
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
  std::unordered_map<uint64_t, Pair> pairs;
  PlanCost cost;
  double end = 0;

  // One of iteration k's ops done or sends delivered at `when`: the last one lets iteration
  // k + 1 begin.
  auto close = [&](int r, uint32_t i, double when) {
    Rank& st = ranks[r];
    st.end = std::max(st.end, when);
    const uint32_t k = i / st.per_iteration;
    st.gate[k] = std::max(st.gate[k], when);
    if (--st.open[k] > 0 || k + 1 >= st.roots.size()) return;
    for (uint32_t root : st.roots[k + 1]) {
      st.ready[root] = st.gate[k];
      queue.emplace(st.gate[k], r, root);
    }
  };
  auto finish_op = [&](int r, uint32_t i, double done) {
    Rank& st = ranks[r];
    st.finish[i] = done;
    end = std::max(end, done);
    --remaining;
    for (uint32_t d : st.dependents[i]) {
      st.ready[d] = std::max(st.ready[d], done);
      if (--st.missing[d] == 0) queue.emplace(st.ready[d], r, d);
    }
    close(r, i, done);
  };
  // ---- the network: SimGrid's flow model ----------------------------------------------------
  // A message first waits its route's latency (x latency_factor), then its bytes flow at the
  // rate that weighted max-min sharing gives it among the messages flowing at that moment:
  // every directed link of a route is a constraint of capacity its bandwidth (the reverse
  // route's too at 0.05 when crosstraffic is on), a flow's weight in the sharing is SimGrid's
  // penalty (route latency + weight_s / bandwidth per link), and it progresses at its share x
  // bandwidth_factor (x the topology's factor for its size where the topology has measured
  // ones, LinkSpec::by_size). Rates are recomputed whenever the set of flows changes.
  struct LinkUse {
    uint32_t link;  // dense index
    double use;     // 1 on the route, 0.05 on the reverse route
  };
  std::vector<double> link_capacity;                 // by dense index: bytes/s
  std::unordered_map<uint64_t, uint32_t> dense;      // link id -> dense index
  std::vector<LinkUse> uses;
  // What a route means to a flow, worked out once per route.
  struct RouteFlow {
    uint32_t first = 0, count = 0;                // its link uses, in `uses`
    double penalty = 1, bound = kNever;           // sharing weight; TCP-gamma cap on its share
  };
  std::unordered_map<const RouteInfo*, RouteFlow> route_flows;
  auto flow_of = [&](int src_gpu, int dst_gpu, const RouteInfo* route) -> const RouteFlow& {
    auto [it, fresh] = route_flows.try_emplace(route);
    if (!fresh) return it->second;
    RouteFlow& rf = it->second;
    rf.first = static_cast<uint32_t>(uses.size());
    auto add = [&](const RouteInfo& r, double use) {
      const topo::NetLink* links = routes.links(r);
      for (uint32_t k = 0; k < r.count; ++k) {
        auto [d, added] = dense.try_emplace(links[k].id, static_cast<uint32_t>(link_capacity.size()));
        if (added) link_capacity.push_back(links[k].bandwidth);
        uses.push_back({d->second, use});
      }
    };
    add(*route, 1.0);
    if (net.crosstraffic) add(routes.get(dst_gpu, src_gpu), 0.05);
    rf.count = static_cast<uint32_t>(uses.size()) - rf.first;
    double penalty = route->latency;
    const topo::NetLink* links = routes.links(*route);
    for (uint32_t k = 0; k < route->count; ++k) penalty += net.weight_s / links[k].bandwidth;
    if (penalty > 0) rf.penalty = penalty;  // else no latency, no weight: plain max-min
    if (net.tcp_gamma > 0 && route->latency > 0) rf.bound = net.tcp_gamma / (2 * route->latency);
    return rf;
  };
  struct Flow {
    int from, r;
    uint32_t op;  // the receive
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
  std::vector<Flow> flows;  // slots, reused
  std::vector<uint32_t> free_slots;
  std::vector<std::vector<uint32_t>> on_link;  // dense link -> the flows on it
  using Event = std::pair<double, uint32_t>;   // time, flow slot
  std::priority_queue<Event, std::vector<Event>, std::greater<>> starting;
  using Finish = std::tuple<double, uint32_t, uint32_t>;  // time, slot, version
  std::priority_queue<Finish, std::vector<Finish>, std::greater<>> finishing;
  double now = 0;

  // Weighted max-min (progressive filling) over the component of flows and links that the
  // flows started or ended at this instant reach through shared links (rates elsewhere do not
  // change): the link whose capacity left per unit of weight (sum of use / penalty of its
  // unfixed flows) is smallest fixes its flows at that level; the level only rises as links
  // are taken, so stale heap entries are re-pushed.
  std::vector<double> cap, weight;
  std::vector<uint32_t> link_stamp, flow_stamp, fixed_stamp;
  std::vector<uint32_t> comp_links, comp_flows, dirty;
  uint32_t epoch = 0;
  using Level = std::pair<double, uint32_t>;
  std::priority_queue<Level, std::vector<Level>, std::greater<>> levels;
  auto recompute = [&] {
    ++epoch;
    const uint32_t nlinks = static_cast<uint32_t>(link_capacity.size());
    if (link_stamp.size() < nlinks) {
      link_stamp.resize(nlinks, 0);
      cap.resize(nlinks);
      weight.resize(nlinks);
    }
    if (flow_stamp.size() < flows.size()) {
      flow_stamp.resize(flows.size(), 0);
      fixed_stamp.resize(flows.size(), 0);
    }
    comp_links.clear();
    comp_flows.clear();
    for (uint32_t l : dirty)
      if (link_stamp[l] != epoch) {
        link_stamp[l] = epoch;
        comp_links.push_back(l);
      }
    dirty.clear();
    for (size_t i = 0; i < comp_links.size(); ++i) {
      for (uint32_t f : on_link[comp_links[i]]) {
        if (flow_stamp[f] == epoch) continue;
        flow_stamp[f] = epoch;
        comp_flows.push_back(f);
        const Flow& fl = flows[f];
        for (uint32_t k = fl.first; k < fl.first + fl.count; ++k)
          if (link_stamp[uses[k].link] != epoch) {
            link_stamp[uses[k].link] = epoch;
            comp_links.push_back(uses[k].link);
          }
      }
    }
    for (uint32_t l : comp_links) {
      cap[l] = link_capacity[l];
      weight[l] = 0;
    }
    for (uint32_t f : comp_flows) {
      const Flow& fl = flows[f];
      for (uint32_t k = fl.first; k < fl.first + fl.count; ++k) weight[uses[k].link] += uses[k].use / fl.penalty;
    }
    for (uint32_t l : comp_links)
      if (weight[l] > 0) levels.emplace(cap[l] / weight[l], l);
    for (uint32_t f : comp_flows)  // a capped flow is a constraint of its own (index nlinks + slot)
      if (flows[f].bound < kNever) levels.emplace(flows[f].bound * flows[f].penalty, nlinks + f);
    size_t unfixed = comp_flows.size();
    auto fix = [&](uint32_t f, double value) {
      fixed_stamp[f] = epoch;
      --unfixed;
      Flow& fl = flows[f];
      fl.left = std::max(0.0, fl.left - fl.rate * (now - fl.since));
      fl.since = now;
      fl.rate = value * fl.factor;
      ++fl.version;
      finishing.emplace(fl.rate > 0 ? now + fl.left / fl.rate : kNever, f, fl.version);
      for (uint32_t k = fl.first; k < fl.first + fl.count; ++k) {
        cap[uses[k].link] -= uses[k].use * value;
        weight[uses[k].link] -= uses[k].use / fl.penalty;
      }
    };
    while (unfixed > 0 && !levels.empty()) {
      const auto [level, l] = levels.top();
      levels.pop();
      if (l >= nlinks) {
        if (fixed_stamp[l - nlinks] != epoch) fix(l - nlinks, flows[l - nlinks].bound);
        continue;
      }
      if (weight[l] <= 0) continue;  // every flow on it is fixed
      const double current = std::max(cap[l], 0.0) / weight[l];
      if (current > level * (1 + 1e-12)) {
        levels.emplace(current, l);
        continue;
      }
      const double at = std::max(current, level);  // the level never falls; rounding may say so
      for (uint32_t f : on_link[l])
        if (fixed_stamp[f] != epoch) fix(f, at / flows[f].penalty);
      weight[l] = 0;
    }
    levels = {};
  };
  auto start_flow = [&](uint32_t f) {
    Flow& fl = flows[f];
    fl.since = now;
    if (fl.count == 0) {  // no link: done at once
      finishing.emplace(now, f, ++fl.version);
      return;
    }
    if (on_link.size() < link_capacity.size()) on_link.resize(link_capacity.size());
    for (uint32_t k = fl.first; k < fl.first + fl.count; ++k) {
      on_link[uses[k].link].push_back(f);
      dirty.push_back(uses[k].link);
    }
  };
  auto end_flow = [&](uint32_t f) {
    const Flow& fl = flows[f];
    for (uint32_t k = fl.first; k < fl.first + fl.count; ++k) {
      auto& v = on_link[uses[k].link];
      *std::find(v.begin(), v.end(), f) = v.back();
      v.pop_back();
      dirty.push_back(uses[k].link);
    }
  };
  auto take_slot = [&] {
    if (free_slots.empty()) {
      flows.emplace_back();
      return static_cast<uint32_t>(flows.size() - 1);
    }
    const uint32_t slot = free_slots.back();
    free_slots.pop_back();
    return slot;
  };
  // The pair's next message leaves if the pair's wire is free and its receive is posted (a
  // rendezvous holds the ones behind it).
  auto try_send = [&](int from, int r, uint32_t lane) {
    Pair& p = pairs[connection_key(from, r, lane)];
    if (p.busy || p.outbox.empty()) return;
    const Pending m = p.outbox.front();
    auto w = p.waiting.find(m.seq);
    if (w == p.waiting.end()) return;
    const uint32_t recv_op = w->second;
    p.waiting.erase(w);
    p.outbox.pop_front();
    p.busy = true;
    const int src_gpu = t.rank_to_gpu[static_cast<size_t>(from)], dst_gpu = t.rank_to_gpu[static_cast<size_t>(r)];
    const RouteInfo* route = &routes.get(src_gpu, dst_gpu);
    const uint32_t slot = take_slot();
    Flow& fl = flows[slot];
    const uint32_t version = fl.version;  // a reused slot keeps counting: old entries stay stale
    fl = Flow{from, r, recv_op, m.bytes};
    fl.send_op = m.op;
    fl.lane = lane;
    fl.version = version + 1;
    fl.copied = t.copies_on_receive(src_gpu, dst_gpu);
    fl.left = fl.copied ? 0.0 : static_cast<double>(m.bytes);  // copied by the receiver: latency only
    const RouteFlow& rf = flow_of(src_gpu, dst_gpu, route);
    fl.first = rf.first;
    fl.count = rf.count;
    fl.penalty = rf.penalty;
    fl.bound = rf.bound;
    fl.factor = net.bandwidth_factor * t.message_factor(src_gpu, dst_gpu, static_cast<double>(m.bytes));
    starting.emplace(now + route->latency * net.latency_factor, slot);
  };
  // Shared memory: the rank's next kernel or receive copy starts if its core is free, as a flow
  // of its work through its node's constraint (capacity 1, one per node), capped at its bound.
  std::unordered_map<int, uint32_t> node_use;  // node -> its entry in `uses`
  auto start_job = [&](int r) {
    Rank& st = ranks[r];
    if (st.running || st.jobs.empty()) return;
    const Rank::Job job = st.jobs.front();
    st.jobs.pop_front();
    st.running = true;
    const int node = t.node_of(t.rank_to_gpu[static_cast<size_t>(r)]);
    auto [it, fresh] = node_use.try_emplace(node, static_cast<uint32_t>(uses.size()));
    if (fresh) {
      uses.push_back({static_cast<uint32_t>(link_capacity.size()), 1.0});
      link_capacity.push_back(1.0);
    }
    const uint32_t slot = take_slot();
    Flow& fl = flows[slot];
    const uint32_t version = fl.version;
    fl = Flow{job.from, r, job.op, 0};
    fl.send_op = job.send_op;
    fl.version = version + 1;
    fl.job = true;
    fl.copied = job.from >= 0;
    fl.left = job.w.work;
    fl.first = it->second;
    fl.count = 1;
    fl.penalty = 1;
    fl.bound = job.w.bound;
    start_flow(slot);
  };
  // Shared memory: a kernel or receive copy is done; the rank's next one starts.
  auto job_done = [&](uint32_t slot) {
    const Flow fl = flows[slot];
    free_slots.push_back(slot);
    ranks[fl.r].running = false;
    start_job(fl.r);
    finish_op(fl.r, fl.op, now);
    if (fl.copied) {  // the sender's send is delivered once the acknowledgement is back
      const int src_gpu = t.rank_to_gpu[static_cast<size_t>(fl.from)], dst_gpu = t.rank_to_gpu[static_cast<size_t>(fl.r)];
      const double acked = now + routes.get(dst_gpu, src_gpu).latency * net.latency_factor;
      end = std::max(end, acked);
      close(fl.from, fl.send_op, acked);
    }
  };
  auto arrive = [&](uint32_t slot) {
    const Flow fl = flows[slot];
    free_slots.push_back(slot);
    pairs[connection_key(fl.from, fl.r, fl.lane)].busy = false;
    const auto& op = s.ranks[fl.r].ops[fl.op];
    if (op.dst.buf == BufKind::Wire) ranks[fl.r].wire[op.dst.index] = fl.bytes;
    Rank& st = ranks[fl.r];
    const double copy =
        fl.copied ? t.receive_copy_seconds(static_cast<double>(fl.bytes), net.bandwidth_factor, footprint) : 0;
    if (copy > 0 && shared) {  // in the receiver's queue, as work on the node
      const double alone = t.receive_copy_alone_seconds(static_cast<double>(fl.bytes), net.bandwidth_factor, footprint);
      st.jobs.push_back({fl.op, shared_work(copy, alone, copy_concurrency(t)), fl.from, fl.send_op});
      start_job(fl.r);
      try_send(fl.from, fl.r, fl.lane);
      return;
    }
    if (copy > 0) st.gpu_free = std::max(st.gpu_free, now) + copy;  // in the receiver's kernel queue
    const double received = copy > 0 ? st.gpu_free : now;
    finish_op(fl.r, fl.op, received);
    // The send is delivered when the message has arrived; a copied one when the receiver's copy is
    // done and its acknowledgement is back (the reverse route's latency), as an MPI rendezvous.
    if (!fl.copied) {
      close(fl.from, fl.send_op, now);
    } else {
      const int src_gpu = t.rank_to_gpu[static_cast<size_t>(fl.from)], dst_gpu = t.rank_to_gpu[static_cast<size_t>(fl.r)];
      const double acked = received + routes.get(dst_gpu, src_gpu).latency * net.latency_factor;
      end = std::max(end, acked);
      close(fl.from, fl.send_op, acked);
    }
    try_send(fl.from, fl.r, fl.lane);
  };

  std::vector<uint64_t> touched;  // pairs posted to at this instant
  std::vector<uint32_t> ended;
  while (true) {
    while (!finishing.empty() && std::get<2>(finishing.top()) != flows[std::get<1>(finishing.top())].version)
      finishing.pop();  // stale: the flow's rate changed since
    const double t_op = queue.empty() ? kNever : std::get<0>(queue.top());
    const double t_start = starting.empty() ? kNever : starting.top().first;
    const double t_done = finishing.empty() ? kNever : std::get<0>(finishing.top());
    const double t_next = std::min({t_op, t_start, t_done});
    if (t_next == kNever) break;
    now = t_next;
    // Messages whose bytes are through arrive (in a fixed order).
    ended.clear();
    while (!finishing.empty() && std::get<0>(finishing.top()) <= now * (1 + 1e-12)) {
      const auto [when, f, version] = finishing.top();
      finishing.pop();
      if (version != flows[f].version) continue;
      ++flows[f].version;
      ended.push_back(f);
    }
    std::sort(ended.begin(), ended.end(), [&](uint32_t a, uint32_t b) {
      return std::tie(flows[a].from, flows[a].r, flows[a].lane) < std::tie(flows[b].from, flows[b].r, flows[b].lane);
    });
    for (uint32_t f : ended) end_flow(f);
    for (uint32_t f : ended) {
      if (flows[f].job) job_done(f);
      else arrive(f);
    }
    // Ops ready now, in order; what they post leaves once all of this instant's are posted.
    while (!queue.empty() && std::get<0>(queue.top()) <= now) {
      const auto [ready, r, i] = queue.top();
      queue.pop();
      Rank& st = ranks[r];
      const auto& op = s.ranks[r].ops[i];
      // A kernel of `seconds` (calibrated) in the rank's queue: it ends in turn, or with shared
      // memory when its work on the node is done (job_done).
      auto kernel = [&](calib::Op kind, double bytes, double seconds) {
        if (seconds <= 0) return finish_op(r, i, now);  // zero-time ops do not queue (the simulator skips them)
        st.kernel_s += seconds;
        if (shared) {
          const double alone = cal.alone_seconds(kind, codec, s.dtype, bytes);
          st.jobs.push_back({i, shared_work(seconds, alone, kernels_at_once)});
          return start_job(r);
        }
        st.gpu_free = std::max(st.gpu_free, now) + seconds;
        finish_op(r, i, st.gpu_free);
      };
      switch (op.kind) {
        case OpKind::Send: {
          const uint64_t bytes = op.src.buf == BufKind::Wire ? st.wire[op.src.index] : op.src.count * dsize;
          pairs[connection_key(r, op.peer, op.lane)].outbox.push_back({st.seq[i], bytes, i});
          ++cost.messages;
          cost.wire_bytes += bytes;
          finish_op(r, i, now);  // buffered: what depends on it may go on
          touched.push_back(connection_key(r, op.peer, op.lane));
          break;
        }
        case OpKind::Recv:
          pairs[connection_key(op.peer, r, op.lane)].waiting[st.seq[i]] = i;
          touched.push_back(connection_key(op.peer, r, op.lane));
          break;
        case OpKind::Compress: {
          const uint64_t raw = op.src.count * dsize;
          st.wire[op.dst.index] = wire_bytes_of(codec, op.src.count, raw, ratio);
          const double d = cal.seconds(calib::Op::Compress, codec, s.dtype, static_cast<double>(raw));
          st.codec_s += d;
          kernel(calib::Op::Compress, static_cast<double>(raw), d);
          break;
        }
        case OpKind::Decompress: {
          const double bytes = static_cast<double>(op.dst.count * dsize);
          const double d = cal.seconds(calib::Op::Decompress, codec, s.dtype, bytes);
          st.codec_s += d;
          kernel(calib::Op::Decompress, bytes, d);
          break;
        }
        case OpKind::Reduce: {
          const double bytes = static_cast<double>(op.dst.count * dsize);
          if (nccl_kernels) finish_op(r, i, now);
          else kernel(calib::Op::Reduce, bytes, cal.seconds(calib::Op::Reduce, codec, s.dtype, bytes));
          break;
        }
        case OpKind::Copy: {
          if (op.src.buf == BufKind::Wire && op.dst.buf == BufKind::Wire) st.wire[op.dst.index] = st.wire[op.src.index];
          const double bytes = static_cast<double>(op.dst.count * dsize);
          if (!nccl_kernels && cal.has(calib::Op::Copy, "", s.dtype))
            kernel(calib::Op::Copy, bytes, cal.seconds(calib::Op::Copy, codec, s.dtype, bytes));
          else finish_op(r, i, now);
          break;
        }
      }
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint64_t key : touched) {
      const Connection c = connection_of(key);
      try_send(c.from, c.to, c.lane);
    }
    touched.clear();
    // Messages whose latency is paid start flowing.
    while (!starting.empty() && starting.top().first <= now) {
      start_flow(starting.top().second);
      starting.pop();
    }
    if (!dirty.empty()) recompute();
  }
  if (remaining > 0) throw std::runtime_error("cost model: the schedule cannot finish (a receive is never matched)");
  for (const auto& st : ranks) {
    cost.codec_s = std::max(cost.codec_s, st.codec_s / iterations);
    cost.kernel_s += st.kernel_s / n / iterations;
    cost.iteration_s += st.end / n / iterations;
  }
  cost.time_s = end;
  return cost;
}

double exposed_codec_s(const sched::Schedule& s, const topo::Topology& t, const calib::Calibration& cal,
                       const std::string& codec, double ratio, const NetFactors& net, RouteCache& routes,
                       bool nccl_kernels) {
  if (codec == "identity" || cal.source == "zero") return 0;
  calib::Calibration free = cal;  // the same kernels, compress and decompress at no time
  for (auto& c : free.curves)
    if (c.op == calib::Op::Compress || c.op == calib::Op::Decompress) {
      for (auto& p : c.points) p.second = 0;
      for (auto& p : c.alone) p.second = 0;
    }
  const double with = predict(s, t, cal, codec, ratio, net, routes, 1, nccl_kernels).time_s;
  const double without = predict(s, t, free, codec, ratio, net, routes, 1, nccl_kernels).time_s;
  return std::max(0.0, with - without);
}

}  // namespace compcoll::policy
