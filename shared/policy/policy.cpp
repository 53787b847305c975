// shared/policy/policy.cpp — see policy.h.
#include "policy/policy.h"

#include "policy/nccl_tuning.h"
#include "schedule/nccl_p2p.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>

namespace compcoll::policy {

using sched::Collective;
using sched::Placement;

std::string Plan::describe() const {
  std::string s = algorithm == "hierarchical" ? "hierarchical/" + inter : algorithm;
  if (chunks > 1) s += " chunks=" + std::to_string(chunks);
  if (channels > 1) s += " channels=" + std::to_string(channels);
  if (!protocol.empty()) s += " protocol=" + protocol;
  s += " " + std::string(sched::placement_name(placement));
  if (intra && *intra != placement) s += "/" + std::string(sched::placement_name(*intra));
  s += " " + codec;
  return nccl_kernels ? s + " (nccl kernels)" : s;
}

std::string algorithm_label(const Plan& p, Collective c) {
  std::string s = p.algorithm == "hierarchical" && c == Collective::AllReduce ? "hierarchical/" + p.inter : p.algorithm;
  if (!p.protocol.empty()) s += "/" + p.protocol;
  if (p.chunks > 1) s += "x" + std::to_string(p.chunks);
  if (p.channels > 1) s += " " + std::to_string(p.channels) + "ch";
  if (!p.nccl.empty()) s += " [nccl " + p.nccl + "]";
  return p.library ? "nccl:" + s : s;
}

std::string placement_label(const Plan& p) {
  if (p.codec == "identity") return "none";
  std::string s(sched::placement_name(p.placement));
  if (p.intra && *p.intra != p.placement) s += "/" + std::string(sched::placement_name(*p.intra));
  return s;
}

bool pxn_applies(const topo::Topology& t, int n) {
  const int g = ranks_per_node(t, n);
  return !t.receive_copy && t.intra_fabric == "nvswitch" && t.nics_per_gpu >= 1 && g > 1 && n > g;
}

uint64_t count_for(Collective c, uint64_t bytes, DType dtype, int nranks) {
  const uint64_t elems = bytes / dtype_size(dtype);
  return c == Collective::AllToAll ? elems / static_cast<uint64_t>(std::max(1, nranks)) : elems;
}

int ranks_per_node(const topo::Topology& t, int n) {
  if (n <= 0 || static_cast<int>(t.rank_to_gpu.size()) < n) return 1;
  const int node0 = t.node_of(t.rank_to_gpu[0]);
  int g = 0;
  while (g < n && t.node_of(t.rank_to_gpu[g]) == node0) ++g;
  if (n % g) return 1;
  std::set<int> seen;
  for (int r = 0; r < n; ++r) {
    const int node = t.node_of(t.rank_to_gpu[r]);
    if (node != t.node_of(t.rank_to_gpu[(r / g) * g])) return 1;
    if (r % g == 0 && !seen.insert(node).second) return 1;
  }
  return g;
}

sched::BuildSpec build_spec(const Plan& plan, const CallInfo& call, const topo::Topology& t) {
  sched::BuildSpec b;
  b.collective = call.collective;
  b.algorithm = plan.algorithm;
  b.placement = plan.codec == "identity" ? Placement::None : plan.placement;
  if (plan.codec != "identity") b.intra_placement = plan.intra;
  b.nranks = call.nranks;
  b.count = count_for(call.collective, call.bytes, call.dtype, call.nranks);
  b.dtype = call.dtype;
  b.pipe.chunks = plan.chunks;
  b.pipe.channels = plan.channels;
  b.gpus_per_node = ranks_per_node(t, call.nranks);
  b.inter = plan.inter;
  b.aggregate = plan.aggregate;
  return b;
}

namespace {

// The distinct rings of a ring or rail-ring plan's channels (rail ring c is rail ring c mod g),
// and whether its channels make groups of one size on them.
uint32_t distinct_rings(const std::string& algorithm, uint32_t channels, int gpus_per_node) {
  if (algorithm == "ring" || algorithm == "nvls" || algorithm == "pat") return 1;
  if (algorithm == "nvls-tree") return std::min(channels, 2u);  // NCCL's two trees of nodes
  return std::min(channels, static_cast<uint32_t>(std::max(1, gpus_per_node)));
}

bool lockstep_channels(const std::string& algorithm, Placement placement, const sched::Pipelining& pipe,
                       bool nccl_kernels, int gpus_per_node) {
  if (!nccl_kernels || placement != Placement::None || pipe.channels < 2) return false;
  // NVLS's channels all take the same heads, switch and NICs, loop by loop (NVLS-Tree's those
  // of one tree of nodes).
  if (algorithm == "nvls" || algorithm == "nvls-tree")
    return pipe.channels % distinct_rings(algorithm, pipe.channels, gpus_per_node) == 0;
  // PAT's channels run the same exchange between the same ranks, loop by loop.
  if (algorithm == "pat") return true;
  if (pipe.chunks != 1 || (algorithm != "ring" && algorithm != "rail-ring")) return false;
  const uint32_t rings = distinct_rings(algorithm, pipe.channels, gpus_per_node);
  return rings < pipe.channels && pipe.channels % rings == 0;
}

}  // namespace

sched::BuildSpec flow_spec(const sched::BuildSpec& b, bool nccl_kernels, const topo::Topology& t, const NetFactors& net) {
  if (b.collective == Collective::AllToAll) {
    if (!nccl_kernels || t.receive_copy || b.placement != Placement::None || b.nranks > kMaxBatchedExchange ||
        (b.algorithm != "pairwise" && b.algorithm != "pxn"))
      return b;
    sched::BuildSpec m = b;
    m.nccl_p2p_channels = nccl_p2p_channels(nccl_view(t, b.nranks));
    if (static_cast<int>(t.rank_to_gpu.size()) >= b.nranks)
      for (int r = 0; r < b.nranks; ++r) m.nccl_nodes.push_back(t.node_of(t.rank_to_gpu[static_cast<size_t>(r)]));
    return m;
  }
  if (b.collective == Collective::Broadcast) return b;
  if (!lockstep_channels(b.algorithm, b.placement, b.pipe, nccl_kernels, b.gpus_per_node)) return b;
  if (t.has_size_factors() || t.receive_copy) return b;
  if (net.tcp_gamma > 0) {
    // SimGrid caps a flow at tcp_gamma / (2 x its route's latency): the merge holds where no cap
    // falls below the fastest link.
    const double shortest = std::min(t.gpu_link.latency, t.network_link.latency) * net.latency_factor;
    const double fastest = std::max(t.gpu_link.bandwidth, t.network_link.bandwidth) * std::max(1.0, net.bandwidth_factor);
    if (shortest > 0 && net.tcp_gamma / (2 * shortest) < fastest) return b;
  }
  sched::BuildSpec m = b;
  m.pipe.merge = true;
  return m;
}

namespace {

uint64_t log2_ceil(uint64_t n) {
  uint64_t k = 0;
  while ((uint64_t{1} << k) < n) ++k;
  return k;
}

// Messages of the uncompressed schedule of one flat algorithm over n ranks (chunks pieces each),
// and whether they grow as n^2: what the builders of shared/schedule send (checked against
// built schedules in tests/sim/test_policy.cpp).
uint64_t flat_messages(Collective c, const std::string& algorithm, uint64_t n, uint64_t chunks, bool* quadratic) {
  *quadratic = false;
  if (n <= 1) return 0;
  const bool twice = c == Collective::AllReduce;
  if (algorithm == "ring" || algorithm == "rail-ring") {
    *quadratic = true;
    return (twice ? 2 : 1) * n * (n - 1) * chunks;
  }
  if (algorithm == "pairwise" || algorithm == "direct") {  // all-to-all; the direct allreduce twice a piece
    *quadratic = true;
    return twice ? 2 * n * (n - 1) * chunks : n * (n - 1);
  }
  if (algorithm == "chain" || (algorithm == "tree" && c == Collective::Broadcast)) return (n - 1) * chunks;
  if (algorithm == "tree") return 4 * (n - 1);  // up and down two binary trees
  if (algorithm == "nccl-tree") return 2 * (n - 1) * chunks;  // up and down one tree per channel
  // NVLS: per piece, each of the node's n parts n in, to and from its head, n out (n is at most
  // a node's GPUs: it does not grow with the cluster).
  if (algorithm == "nvls") return 2 * n * (n + 1) * chunks;
  // Recursive halving/doubling: log2 steps (about one more each way when n is not a power of
  // two: the fold-in and fold-out).
  const uint64_t steps = log2_ceil(n) + ((n & (n - 1)) ? 1 : 0);
  return (twice ? 2 : 1) * n * steps * chunks;
}

}  // namespace

PlanSize plan_size(const Plan& p, const CallInfo& call, int gpus_per_node) {
  const Collective c = call.collective;
  const uint64_t n = static_cast<uint64_t>(std::max(1, call.nranks));
  // Channels multiply a ring's messages as chunks do; merged channels (flow_spec) count once.
  const sched::Pipelining pipe{p.chunks, p.channels, false};
  const uint32_t channels = lockstep_channels(p.algorithm, p.codec == "identity" ? Placement::None : p.placement, pipe,
                                              p.nccl_kernels, gpus_per_node)
                                ? distinct_rings(p.algorithm, p.channels, gpus_per_node)
                                : p.channels;
  const uint64_t chunks = uint64_t{std::max<uint32_t>(1, p.chunks)} * std::max<uint32_t>(1, channels);
  const uint64_t g = p.algorithm == "hierarchical" ? static_cast<uint64_t>(std::max(1, gpus_per_node)) : 1;
  const uint64_t nodes = n / g;
  PlanSize z;
  uint64_t copies = c == Collective::Broadcast ? 1 : 2 * n;  // prologue and epilogue
  uint64_t relayed = 0;                                      // pxn's relayed messages
  if (p.algorithm == "pat") {
    // Per piece, pat_size's messages (one block a message makes them n (n - 1), as a ring's),
    // and a copy into and one out of a message for each block packed with others.
    const sched::PatSize pat = sched::pat_size(static_cast<int>(n), p.aggregate);
    z.messages = chunks * pat.messages;
    z.quadratic = p.aggregate == 1;
    copies += chunks * 2 * pat.packed_blocks;
  } else if (p.algorithm == "pxn") {
    // Every block once from its source, and those for another node's other GPUs once more from
    // their relay (no codec op there: the relay forwards the stream). NCCL's own exchange
    // (flow_spec: sched::nccl_alltoall) relays a block in up to 8 pieces of at least 128 KiB,
    // each on both hops.
    const uint64_t gg = static_cast<uint64_t>(std::max(1, gpus_per_node));
    relayed = n * (n / gg - 1) * (gg - 1);
    uint64_t pieces = 1;
    if (p.nccl_kernels && p.codec == "identity" && n <= static_cast<uint64_t>(kMaxBatchedExchange)) {
      pieces = sched::nccl_relay_pieces(count_for(c, call.bytes, call.dtype, static_cast<int>(n)) * dtype_size(call.dtype));
    }
    z.messages = n * (n - 1) + relayed * (2 * pieces - 1);
    relayed *= 2 * pieces - 1;  // messages that carry no codec op
    z.quadratic = true;
  } else if (p.algorithm == "nvls-tree") {
    // Per piece, in each node NVLS's 2 g (g + 1) messages; across nodes each part up and down
    // its tree: 2 (nodes - 1) x g.
    const uint64_t gg = static_cast<uint64_t>(std::max(1, gpus_per_node)), nn = n / gg;
    z.messages = chunks * (nn * 2 * gg * (gg + 1) + 2 * (nn - 1) * gg);
  } else if (p.algorithm != "hierarchical") {
    z.messages = flat_messages(c, p.algorithm, n, chunks, &z.quadratic);
    // The recursive allgather's compress-once forwards each block as it came: n(n - 1) messages.
    if (p.algorithm == "recursive" && c == Collective::AllGather && p.codec != "identity" &&
        p.placement == sched::Placement::CompressOnce) {
      z.messages = n * (n - 1);
      z.quadratic = true;
    }
  } else {
    // Inside each node a ring (reduce-scatter and allgather for allreduce; one exchange round
    // for all-to-all); across nodes g groups of `nodes` ranks: the allreduce's inter algorithm,
    // a ring for reduce-scatter and allgather, a pairwise exchange for all-to-all. Rings and
    // pairwise exchanges across nodes grow as n x nodes.
    const uint64_t in_node = (c == Collective::AllReduce ? 2 : 1) * n * (g - 1) * chunks;
    bool quadratic = false;
    const std::string across = c == Collective::AllReduce ? p.inter : c == Collective::AllToAll ? "pairwise" : "ring";
    z.messages = in_node + g * flat_messages(c, across, nodes, c == Collective::AllReduce ? chunks : 1, &quadratic);
    z.quadratic = quadratic;
    if (c == Collective::ReduceScatter || c == Collective::AllGather) z.messages += n;  // the transposing exchange
    if (c == Collective::AllToAll) copies += 2 * n * n;  // packing and unpacking every block
  }
  // A send and its receive are two ops; a reduction follows a receive where the collective
  // reduces; compression per hop adds a compress and a decompress to every message,
  // compress-once a decompress.
  const bool reduces = c == Collective::AllReduce || c == Collective::ReduceScatter;
  const uint64_t per_message = 2 + (reduces ? 1 : 0) + (p.codec == "identity" ? 0
                                                       : p.placement == sched::Placement::CompressOnce ? 1 : 2);
  z.ops = copies + z.messages * per_message - relayed * (per_message - 2);
  return z;
}

namespace {

// A candidate rail ring with NCCL's channel count (NcclView::ring_channels), run by compcoll's
// kernels: halved while its schedule would be too large to price.
uint32_t candidate_ring_channels(const CallInfo& call, const NcclView& view, int g) {
  Plan p;
  p.algorithm = "rail-ring";
  p.channels = static_cast<uint32_t>(std::max(1, view.ring_channels));
  while (p.channels > 1 && plan_size(p, call, g).messages > kMaxFlatMessages) p.channels /= 2;
  return p.channels;
}

}  // namespace

std::vector<Plan> candidates(const CallInfo& call, const System& sys, uint64_t max_ops, uint64_t max_flat_messages) {
  const topo::Topology& t = *sys.topology;
  const int n = call.nranks, g = ranks_per_node(t, n);
  const bool two_level = g > 1 && n % g == 0 && n / g > 1;
  std::vector<Plan> out;
  std::optional<std::pair<uint64_t, Plan>> smallest_skipped;  // kept when nothing else applies
  const uint64_t max_kept_ops = 2 * max_ops;  // the most a plan kept past the limits may have
  bool forced = false;
  auto too_large = [&](const PlanSize& z) { return z.ops > max_ops || (z.quadratic && z.messages > max_flat_messages); };
  auto add = [&](Plan p) {
    const PlanSize z = plan_size(p, call, g);
    if (too_large(z) && !forced) {
      if (!smallest_skipped || z.ops < smallest_skipped->first) smallest_skipped = std::make_pair(z.ops, p);
      return;
    }
    for (const auto& codec : sys.codecs) {
      Plan q = p;
      q.codec = codec;
      if (codec == "identity") {
        q.placement = Placement::None;
        q.intra.reset();
        out.push_back(q);
        continue;
      }
      std::vector<std::pair<Placement, std::optional<Placement>>> placements;
      switch (call.collective) {
        case Collective::AllReduce:
          // Direct: per-hop is zipccl's schedule (one hop a block and phase); compress-once
          // moves the reduce-scatter's blocks as they are.
          if (p.algorithm == "hierarchical" && p.inter == "direct")
            placements = {{Placement::ZipCCL, Placement::None}, {Placement::ZipCCL, std::nullopt}};
          else if (p.algorithm == "hierarchical")
            placements = {{Placement::ZipCCL, Placement::None}, {Placement::ZipCCL, std::nullopt},
                          {Placement::PerHop, Placement::None}};
          else if (p.algorithm == "direct")
            placements = {{Placement::ZipCCL, std::nullopt}, {Placement::CompressOnce, std::nullopt}};
          else
            placements = {{Placement::ZipCCL, std::nullopt}, {Placement::PerHop, std::nullopt}};
          break;
        case Collective::ReduceScatter:
        case Collective::AllToAll: placements = {{Placement::PerHop, std::nullopt}}; break;
        case Collective::AllGather: placements = {{Placement::CompressOnce, std::nullopt}, {Placement::PerHop, std::nullopt}}; break;
        case Collective::Broadcast: placements = {{Placement::CompressOnce, std::nullopt}}; break;
      }
      // Rail rings also compress only what crosses the network (the hops between nodes).
      if (p.algorithm == "rail-ring") placements.push_back({placements.front().first, Placement::None});
      for (const auto& [pl, intra] : placements) {
        q.placement = pl;
        q.intra = intra;
        if (too_large(plan_size(q, call, g)) && !forced) continue;
        out.push_back(q);
      }
    }
  };
  auto plan = [](const char* algo, const char* inter = "recursive", uint32_t chunks = 1, uint32_t channels = 1) {
    Plan p;
    p.algorithm = algo;
    p.inter = inter;
    p.chunks = chunks;
    p.channels = channels;
    return p;
  };
  // Rail rings (NCCL's rings): one channel per GPU of a node, so that every NIC carries a ring,
  // and NCCL's own channel count.
  const auto rail_rings = [&] {
    if (g <= 1 || n % g) return;
    const uint32_t nccl_channels = candidate_ring_channels(call, nccl_view(t, n), g);
    add(plan("rail-ring", "recursive", 1, static_cast<uint32_t>(g)));
    if (nccl_channels != static_cast<uint32_t>(g)) add(plan("rail-ring", "recursive", 1, nccl_channels));
    // In step groups (NCCL's protocol costs: MessageCosts::lockstep) the channels of a step go
    // out together, so a rail ring's codec runs beside its transfers only across chunks: its
    // rings pipelined in 2 chunks too.
    if (sys.net.protocol_costs && !t.receive_copy) add(plan("rail-ring", "recursive", 2, static_cast<uint32_t>(g)));
  };
  // Pipelined rings (2 and 4 chunks: a step's transfer overlaps the reduction of the chunk
  // before) where their schedules stay small; they pay off for large messages on few ranks.
  const bool pipelined_ring = plan_size(plan("ring", "recursive", 4), call, g).messages <= max_flat_messages;
  switch (call.collective) {
    case Collective::AllReduce:
      add(plan("ring"));
      rail_rings();
      if (pipelined_ring)
        for (uint32_t k : {2u, 4u}) add(plan("ring", "recursive", k));
      add(plan("recursive"));
      add(plan("tree"));
      if (n <= kMaxDirectGroup) add(plan("direct"));
      if (two_level) {
        for (const char* inter : {"ring", "recursive", "tree"}) add(plan("hierarchical", inter));
        if (n / g <= kMaxDirectGroup) add(plan("hierarchical", "direct"));
      }
      break;
    case Collective::ReduceScatter:
    case Collective::AllGather:
      add(plan("ring"));
      rail_rings();
      if (pipelined_ring)
        for (uint32_t k : {2u, 4u}) add(plan("ring", "recursive", k));
      add(plan("recursive"));
      if (two_level) add(plan("hierarchical"));
      break;
    case Collective::Broadcast:
      add(plan("tree"));
      add(plan("chain"));
      add(plan("chain", "recursive", 8));
      break;
    case Collective::AllToAll:
      add(plan("pairwise"));
      if (n <= kMaxDirectGroup) add(plan("direct"));
      if (two_level) add(plan("hierarchical"));
      if (pxn_applies(t, n)) add(plan("pxn"));
      break;
  }
  if (out.empty() && smallest_skipped && smallest_skipped->first <= max_kept_ops) {
    forced = true;
    add(smallest_skipped->second);
  }
  // A plan that cannot run in step groups is no candidate (step_group_problem).
  out.erase(std::remove_if(out.begin(), out.end(),
                           [&](const Plan& p) { return !step_group_problem(p, call, sys).empty(); }),
            out.end());
  // NCCL's own collective, where it is small enough to price (its channels merged, flow_spec):
  // at most max_kept_ops, as a plan kept when nothing else applies, however its messages grow.
  // Its rings pay n - 1 step latencies, as compcoll's do, but at large sizes over many ranks
  // they are what NCCL runs and often the fastest plan (the oracle, which simulates what
  // nccl-like chose, would otherwise beat adaptive there).
  if (!t.receive_copy && sys.nccl_library) {
    Plan lib = make_policy("nccl-like")->choose(call, sys, nullptr);
    lib.library = true;
    if (plan_size(lib, call, g).ops <= max_kept_ops) out.push_back(lib);
  }
  return out;
}

std::string step_group_problem(const Plan& p, const CallInfo& call, const System& sys) {
  const topo::Topology& t = *sys.topology;
  if (!sys.net.protocol_costs || t.receive_copy || p.nccl_kernels) return "";  // no schedule to build
  return step_group_problem(sched::build_schedule(build_spec(p, call, t)), t, sys.net, false);
}

double predict_plan(const Plan& p, const CallInfo& call, const System& sys, RouteCache& routes) {
  const double ratio = p.codec == "identity" ? 1.0 : sys.ratio(p.codec, call.dtype, call.tensor);
  const auto s = sched::build_schedule(flow_spec(build_spec(p, call, *sys.topology), p.nccl_kernels, *sys.topology, sys.net));
  return predict(s, *sys.topology, *sys.calibration, p.codec, ratio, sys.net, routes, 1, p.nccl_kernels, p.protocol).time_s;
}

namespace {

class NcclLike final : public Policy {
 public:
  std::string name() const override { return "nccl-like"; }
  Plan choose(const CallInfo& call, const System& sys, double* predicted) override {
    const topo::Topology& t = *sys.topology;
    Plan p;
    p.codec = "identity";
    // NCCL's kernels run it on GPUs; ranks of a host over MPI (receive_copy) run it through
    // compcoll's executor, reductions and copies included.
    p.nccl_kernels = !t.receive_copy;
    if (call.nranks <= 1) {
      // NCCL runs a collective of one rank without any of its algorithms: a copy of the input
      // to the output, nothing in place (src/enqueue.cc, ncclLaunchOneRank). Nothing crosses a
      // link; a one-rank schedule has no ops.
      p.algorithm = call.collective == Collective::Broadcast ? "chain"
                    : call.collective == Collective::AllToAll ? "pairwise" : "ring";
      p.nccl_s = 0;
      if (predicted) *predicted = 0;
      return p;
    }
    if (call.collective == Collective::Broadcast || call.collective == Collective::AllToAll) {
      // Not tuned by NCCL's model here: a pipelined chain; NCCL's point-to-point exchange,
      // through PXN where NCCL uses it.
      p.algorithm = call.collective == Collective::Broadcast ? "chain" : pxn_applies(t, call.nranks) ? "pxn" : "pairwise";
      if (call.collective == Collective::Broadcast) p.nccl_s = nccl_pick(call, nccl_view(t, call.nranks)).time_s;
      if (predicted) *predicted = p.nccl_s;
      return p;
    }
    const NcclView view = nccl_view(t, call.nranks);
    std::vector<NcclEstimate> estimates = nccl_estimates(call, view);
    if (!sys.nccl_algorithms.empty()) {  // NCCL_ALGO: the others are not rated
      const auto& allowed = sys.nccl_algorithms;
      for (NcclEstimate& e : estimates)
        if (std::find(allowed.begin(), allowed.end(), e.algorithm) == allowed.end()) e.time_s = -1;
    }
    const NcclEstimate pick = nccl_fastest(estimates);
    if (pick.time_s < 0)
      throw std::runtime_error("nccl-like: NCCL has no algorithm for " + std::string(sched::collective_name(call.collective)) +
                               " over " + std::to_string(call.nranks) + " ranks among those allowed (nccl_algo)");
    // NCCL's tree, its rings, its NVLS allreduce on one node, NVLS-Tree across whole nodes and
    // PAT run as NCCL launches them. NVLS's allgather and reduce-scatter are not simulated:
    // where NCCL would pick one, its fastest ring runs and the row names NCCL's choice.
    const int g = ranks_per_node(t, call.nranks);
    const bool nvls = call.collective == Collective::AllReduce && g > 1 &&
                      ((pick.algorithm == "nvls" && g == call.nranks) ||
                       (pick.algorithm == "nvls-tree" && call.nranks % g == 0 && call.nranks > g));
    const bool pat = pick.algorithm == "pat";  // NCCL enables it at one rank per node only
    const NcclEstimate run = pick.algorithm == "tree" || nvls || pat ? pick : nccl_fastest(estimates, "ring");
    p.protocol = run.protocol;
    if (pick.algorithm != run.algorithm || pick.protocol != run.protocol) p.nccl = pick.label();
    p.nccl_s = pick.time_s;
    if (pat) {
      // Its channels, loops and the blocks a message carries (nccl_pat_launch).
      const NcclPatLaunch launch = nccl_pat_launch(call.collective, call.bytes, view);
      p.algorithm = "pat";
      p.channels = static_cast<uint32_t>(launch.channels);
      p.chunks = static_cast<uint32_t>(std::min<uint64_t>(launch.chunks, std::numeric_limits<uint32_t>::max()));
      p.aggregate = launch.aggregate;
    } else if (nvls) {
      // Its channels and loops (nccl_nvls_launch): every loop of a channel a piece.
      const NcclTreeLaunch launch = nccl_nvls_launch(call.bytes, view);
      p.algorithm = pick.algorithm;  // nvls, nvls-tree
      p.channels = static_cast<uint32_t>(launch.channels);
      p.chunks = static_cast<uint32_t>(std::min<uint64_t>(launch.chunks, std::numeric_limits<uint32_t>::max()));
    } else if (run.algorithm == "tree") {
      // Its channels and chunks (nccl_tree_launch), never fewer: a tree of fewer, larger chunks
      // pipelines less and would make NCCL slow. A schedule too large for the machine is
      // refused before it runs (compcoll-sim's memory check), as a ring's is.
      const NcclTreeLaunch launch = nccl_tree_launch(call.bytes, view, run.channels, run.protocol);
      p.algorithm = "nccl-tree";
      p.channels = static_cast<uint32_t>(launch.channels);
      p.chunks = static_cast<uint32_t>(std::min<uint64_t>(launch.chunks, std::numeric_limits<uint32_t>::max()));
    } else if (g > 1) {
      // NCCL's channels for the size (simulated merged where they divide into the rail rings,
      // flow_spec).
      p.algorithm = "rail-ring";
      p.channels = static_cast<uint32_t>(nccl_launch_channels("ring", run.protocol, call.bytes, view, view.ring_channels));
    } else {
      p.algorithm = "ring";  // one rank per node (or a group not in whole nodes): one NIC each
    }
    if (predicted) *predicted = run.time_s;  // NCCL's own estimate, not compcoll's cost model
    return p;
  }
};

class Adaptive final : public Policy {
 public:
  std::string name() const override { return "adaptive"; }
  Plan choose(const CallInfo& call, const System& sys, double* predicted) override {
    const std::string key = std::to_string(static_cast<int>(call.collective)) + "/" + std::to_string(call.bytes) + "/" +
                            std::string(dtype_name(call.dtype)) + "/" + call.tensor + "/" + std::to_string(call.nranks);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      RouteCache routes(*sys.topology);
      std::pair<Plan, double> best{Plan{}, std::numeric_limits<double>::infinity()};
      for (const Plan& p : candidates(call, sys)) {
        const double tm = predict_plan(p, call, sys, routes);
        if (tm < best.second) best = {p, tm};
      }
      if (!std::isfinite(best.second))
        throw std::runtime_error("adaptive: no candidate plan for " + std::string(sched::collective_name(call.collective)) +
                                 " over " + std::to_string(call.nranks) +
                                 " ranks: every schedule of it is over the size limits (policy::candidates)");
      it = cache_.emplace(key, best).first;
    }
    if (predicted) *predicted = it->second.second;
    return it->second.first;
  }

 private:
  std::map<std::string, std::pair<Plan, double>> cache_;
};

}  // namespace

std::vector<std::string> policy_names() { return {"static", "nccl-like", "adaptive", "oracle"}; }

std::unique_ptr<Policy> make_policy(const std::string& name) {
  if (name == "nccl-like") return std::make_unique<NcclLike>();
  if (name == "adaptive") return std::make_unique<Adaptive>();
  throw std::invalid_argument("no policy object for '" + name + "' (static and oracle are the experiment's and the simulator's)");
}

}  // namespace compcoll::policy
