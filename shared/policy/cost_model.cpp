// shared/policy/cost_model.cpp — see cost_model.h.
#include "policy/cost_model.h"

#include <algorithm>
#include <deque>
#include <map>
#include <queue>
#include <tuple>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "codec/format.h"

namespace compcoll::policy {

namespace {

using sched::BufKind;
using sched::OpKind;

uint64_t wire_bytes_of(const std::string& codec, uint64_t elements, uint64_t raw, double ratio) {
  const uint64_t chunks = (elements + format::kDefaultChunkElements - 1) / format::kDefaultChunkElements;
  const double payload = codec == "identity" ? static_cast<double>(raw) : ratio * static_cast<double>(raw);
  return format::kHeaderBytes + format::kOffsetEntryBytes * chunks + static_cast<uint64_t>(payload + 0.5);
}

// An ordered pair of ints (ranks, or graph vertices: a directed link) as one key.
uint64_t pair_key(int a, int b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

}  // namespace

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

PlanCost predict(const sched::Schedule& s, const topo::Topology& t, const calib::Calibration& cal,
                 const std::string& codec, double ratio, const NetFactors& net, RouteCache& routes) {
  const int n = s.size();
  if (static_cast<int>(t.rank_to_gpu.size()) < n)
    throw std::runtime_error("cost model: the placement has fewer ranks than the schedule");
  const uint64_t dsize = dtype_size(s.dtype);

  // Ops are taken in the order they become ready (as the simulator's actors start them), so
  // a GPU's kernel queue and a pair's message order come out as they do there.
  struct Rank {
    std::vector<uint32_t> missing;
    std::vector<std::vector<uint32_t>> dependents;
    std::vector<double> ready, finish;
    std::vector<uint32_t> seq;                      // sends / receives: index among those of the pair
    std::vector<uint64_t> wire;                     // bytes of each wire buffer's message
    double gpu_free = 0, codec_s = 0;
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
    std::unordered_map<int, uint32_t> sends, recvs;
    for (uint32_t i = 0; i < ops.size(); ++i) {
      st.missing[i] = static_cast<uint32_t>(ops[i].deps.size());
      for (uint32_t d : ops[i].deps) st.dependents[d].push_back(i);
      if (ops[i].kind == OpKind::Send) st.seq[i] = sends[ops[i].peer]++;
      if (ops[i].kind == OpKind::Recv) st.seq[i] = recvs[ops[i].peer]++;
      if (!st.missing[i]) queue.emplace(0.0, r, i);
    }
    remaining += ops.size();
  }
  // Per ordered pair: the messages posted and not yet delivered, in the order they leave (the
  // order they were posted, as the simulator's per-peer queue has it), the receives waiting
  // for their message, and when the pair's last message arrived.
  struct Pending {
    uint32_t seq;
    double posted;
    uint64_t bytes;
  };
  struct Pair {
    std::deque<Pending> outbox;
    std::map<uint32_t, uint32_t> waiting;  // seq -> receiving op
    double free = 0;
  };
  std::unordered_map<uint64_t, Pair> pairs;
  std::unordered_map<uint64_t, double> link_free;  // a directed link: busy until
  PlanCost cost;
  double end = 0;

  auto finish_op = [&](int r, uint32_t i, double done) {
    Rank& st = ranks[r];
    st.finish[i] = done;
    end = std::max(end, done);
    --remaining;
    for (uint32_t d : st.dependents[i]) {
      st.ready[d] = std::max(st.ready[d], done);
      if (--st.missing[d] == 0) queue.emplace(st.ready[d], r, d);
    }
  };
  // A message that can leave: the pair's next one with its receive posted.
  struct Leaving {
    int from, r;
    uint32_t op;  // the receive
    uint64_t bytes;
    double start;
    const RouteInfo* route;
  };
  auto next_leaving = [&](int from, int r, Leaving& out) {
    Pair& p = pairs[pair_key(from, r)];
    if (p.outbox.empty()) return false;
    const Pending m = p.outbox.front();
    auto w = p.waiting.find(m.seq);
    if (w == p.waiting.end()) return false;  // a rendezvous: it holds the ones behind it
    out = {from, r, w->second, m.bytes, std::max({m.posted, ranks[r].ready[w->second], p.free}),
           &routes.get(t.rank_to_gpu[static_cast<size_t>(from)], t.rank_to_gpu[static_cast<size_t>(r)])};
    p.waiting.erase(w);
    p.outbox.pop_front();
    return true;
  };
  auto hold = [&](const topo::NetLink& l, uint64_t bytes) {
    return static_cast<double>(bytes) / (l.bandwidth * net.bandwidth_factor);
  };
  auto arrive = [&](const Leaving& m, double done) {
    Pair& p = pairs[pair_key(m.from, m.r)];
    p.free = done + m.route->latency * net.latency_factor;
    const auto& op = s.ranks[m.r].ops[m.op];
    if (op.dst.buf == BufKind::Wire) ranks[m.r].wire[op.dst.index] = m.bytes;
    finish_op(m.r, m.op, p.free);
  };
  // Delivers the pair's queued messages (from -> r) in order while their receives are posted,
  // each taking its links in turn.
  auto deliver = [&](int from, int r) {
    Leaving m;
    while (next_leaving(from, r, m)) {
      double done = m.start;
      const topo::NetLink* links = routes.links(*m.route);
      for (uint32_t k = 0; k < m.route->count; ++k) {
        double& busy = link_free[links[k].id];
        busy = std::max(busy, m.start) + hold(links[k], m.bytes);
        done = std::max(done, busy);
      }
      arrive(m, done);
    }
  };
  // The messages that can leave once every op ready at one instant has been posted leave
  // together: on a link they share, each ends when the link has carried all of them (as fair
  // sharing ends flows that start together), not one after another.
  std::vector<uint64_t> touched;  // pairs posted to at this instant
  std::vector<Leaving> batch;
  std::unordered_map<uint64_t, std::pair<double, double>> load;  // link -> (earliest start, holds)
  auto deliver_together = [&] {
    batch.clear();
    load.clear();
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint64_t key : touched) {
      Leaving m;
      if (next_leaving(static_cast<int>(key >> 32), static_cast<int>(key & 0xffffffffu), m)) batch.push_back(m);
    }
    for (const Leaving& m : batch) {
      const topo::NetLink* links = routes.links(*m.route);
      for (uint32_t k = 0; k < m.route->count; ++k) {
        auto [it, fresh] = load.try_emplace(links[k].id, m.start, 0.0);
        it->second.first = std::min(it->second.first, m.start);
        it->second.second += hold(links[k], m.bytes);
      }
    }
    for (const Leaving& m : batch) {
      double done = m.start;
      const topo::NetLink* links = routes.links(*m.route);
      for (uint32_t k = 0; k < m.route->count; ++k)
        done = std::max(done, std::max(link_free[links[k].id], m.start) + load.at(links[k].id).second);
      arrive(m, done);
    }
    for (const auto& [id, l] : load) {
      double& busy = link_free[id];
      busy = std::max(busy, l.first) + l.second;
    }
    // What is left behind (a pair's later messages) leaves in turn.
    for (uint64_t key : touched) deliver(static_cast<int>(key >> 32), static_cast<int>(key & 0xffffffffu));
    touched.clear();
  };

  while (!queue.empty()) {
    const auto [ready, r, i] = queue.top();
    queue.pop();
    Rank& st = ranks[r];
    const auto& op = s.ranks[r].ops[i];
    auto kernel = [&](double seconds) {
      if (seconds <= 0) return ready;  // zero-time ops do not queue (the simulator skips them)
      st.gpu_free = std::max(st.gpu_free, ready) + seconds;
      return st.gpu_free;
    };
    switch (op.kind) {
      case OpKind::Send: {
        const uint64_t bytes = op.src.buf == BufKind::Wire ? st.wire[op.src.index] : op.src.count * dsize;
        pairs[pair_key(r, op.peer)].outbox.push_back({st.seq[i], ready, bytes});
        ++cost.messages;
        cost.wire_bytes += bytes;
        finish_op(r, i, ready);  // buffered: what depends on it may go on
        touched.push_back(pair_key(r, op.peer));
        break;
      }
      case OpKind::Recv:
        pairs[pair_key(op.peer, r)].waiting[st.seq[i]] = i;
        touched.push_back(pair_key(op.peer, r));
        break;
      case OpKind::Compress: {
        const uint64_t raw = op.src.count * dsize;
        st.wire[op.dst.index] = wire_bytes_of(codec, op.src.count, raw, ratio);
        const double d = cal.seconds(calib::Op::Compress, codec, s.dtype, static_cast<double>(raw));
        st.codec_s += d;
        finish_op(r, i, kernel(d));
        break;
      }
      case OpKind::Decompress: {
        const double d = cal.seconds(calib::Op::Decompress, codec, s.dtype, static_cast<double>(op.dst.count * dsize));
        st.codec_s += d;
        finish_op(r, i, kernel(d));
        break;
      }
      case OpKind::Reduce:
        finish_op(r, i, kernel(cal.seconds(calib::Op::Reduce, codec, s.dtype, static_cast<double>(op.dst.count * dsize))));
        break;
      case OpKind::Copy: {
        if (op.src.buf == BufKind::Wire && op.dst.buf == BufKind::Wire) st.wire[op.dst.index] = st.wire[op.src.index];
        const bool timed = cal.has(calib::Op::Copy, "", s.dtype);
        finish_op(r, i, timed ? kernel(cal.seconds(calib::Op::Copy, codec, s.dtype, static_cast<double>(op.dst.count * dsize)))
                              : ready);
        break;
      }
    }
    if (queue.empty() || std::get<0>(queue.top()) != ready) deliver_together();
  }
  if (remaining > 0) throw std::runtime_error("cost model: the schedule cannot finish (a receive is never matched)");
  for (const auto& st : ranks) cost.codec_s = std::max(cost.codec_s, st.codec_s);
  cost.time_s = end;
  return cost;
}

}  // namespace compcoll::policy
