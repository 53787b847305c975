// shared/schedule/build.cpp — the dispatcher from a BuildSpec to a builder (build.h).
#include "schedule/build.h"

#include <iterator>

#include "schedule/nccl_p2p.h"

namespace compcoll::sched {
namespace {

[[noreturn]] void fail(const std::string& what) { throw ScheduleError(what); }

void no_pipelining(const BuildSpec& s) {
  if (s.pipe.chunks != 1 || s.pipe.channels != 1)
    fail(std::string(collective_name(s.collective)) + " " + s.algorithm + ": no pipelining (chunks/channels must be 1)");
}

constexpr InterAlgorithm kInterAlgorithms[] = {InterAlgorithm::Ring, InterAlgorithm::Recursive, InterAlgorithm::Tree,
                                               InterAlgorithm::Direct};

InterAlgorithm parse_inter(const std::string& name) {
  if (const auto a = find_inter(name)) return *a;
  fail("hierarchical allreduce: unknown inter-node algorithm '" + name + "' (expected " + inter_choices() + ")");
}

int nodes_of(const BuildSpec& s) {
  if (s.gpus_per_node < 1 || s.nranks % s.gpus_per_node)
    fail(std::string(collective_name(s.collective)) + " " + s.algorithm + ": " + std::to_string(s.nranks) + " ranks are not whole nodes of " +
         std::to_string(s.gpus_per_node) + " GPUs");
  return s.nranks / s.gpus_per_node;
}

std::vector<std::vector<uint64_t>> a2a_counts(const BuildSpec& s) {
  if (!s.counts.empty()) {
    if (s.counts.size() != static_cast<size_t>(s.nranks)) fail("all-to-all: counts must be nranks x nranks");
    return s.counts;
  }
  return std::vector<std::vector<uint64_t>>(static_cast<size_t>(s.nranks),
                                            std::vector<uint64_t>(static_cast<size_t>(s.nranks), s.count));
}

}  // namespace

Collective parse_collective(std::string_view n) {
  if (n == "allreduce") return Collective::AllReduce;
  if (n == "reduce-scatter") return Collective::ReduceScatter;
  if (n == "allgather") return Collective::AllGather;
  if (n == "broadcast") return Collective::Broadcast;
  if (n == "all-to-all") return Collective::AllToAll;
  fail("unknown collective '" + std::string(n) + "' (expected allreduce, reduce-scatter, allgather, broadcast, all-to-all)");
}

std::optional<InterAlgorithm> find_inter(std::string_view name) {
  for (InterAlgorithm a : kInterAlgorithms)
    if (inter_name(a) == name) return a;
  return std::nullopt;
}

std::string inter_choices() {
  std::string out;
  const size_t n = std::size(kInterAlgorithms);
  for (size_t i = 0; i < n; ++i)
    out += (i == 0 ? "" : i + 1 == n ? " or " : ", ") + std::string(inter_name(kInterAlgorithms[i]));
  return out;
}

Placement parse_placement(std::string_view n) {
  if (n == "none") return Placement::None;
  if (n == "per-hop") return Placement::PerHop;
  if (n == "compress-once") return Placement::CompressOnce;
  if (n == "zipccl") return Placement::ZipCCL;
  fail("unknown placement '" + std::string(n) + "' (expected none, per-hop, compress-once, zipccl)");
}

std::vector<std::string> algorithm_names(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return {"ring", "rail-ring", "recursive", "tree", "direct", "nccl-tree", "nvls", "nvls-tree", "hierarchical"};
    case Collective::ReduceScatter:
    case Collective::AllGather: return {"ring", "rail-ring", "recursive", "pat", "hierarchical"};
    case Collective::Broadcast: return {"tree", "chain"};
    case Collective::AllToAll: return {"direct", "pairwise", "hierarchical", "pxn"};
  }
  return {};
}

namespace {

Schedule dispatch(const BuildSpec& s) {
  if (s.nranks < 1) fail("a group needs at least one rank, got " + std::to_string(s.nranks));
  const std::string& a = s.algorithm;
  if (s.pipe.merge && a != "ring" && a != "rail-ring" && a != "nvls" && a != "nvls-tree" && a != "pat")
    fail(std::string(collective_name(s.collective)) + " " + a +
         ": merged channels are for ring, rail-ring, nvls, nvls-tree and pat only");
  switch (s.collective) {
    case Collective::AllReduce:
      if (a == "ring") return ring_allreduce(s.nranks, s.count, s.dtype, s.placement, s.pipe);
      if (a == "rail-ring")
        return rail_ring_allreduce(nodes_of(s), s.gpus_per_node, s.count, s.dtype, s.placement, s.pipe, s.intra_placement);
      if (a == "hierarchical")
        return hierarchical_allreduce(nodes_of(s), s.gpus_per_node, s.count, s.dtype, s.placement, parse_inter(s.inter),
                                      s.pipe, s.intra_placement);
      if (a == "nccl-tree")
        return nccl_tree_allreduce(nodes_of(s), s.gpus_per_node, s.count, s.dtype, s.placement, s.pipe);
      if (a == "nvls") {
        if (nodes_of(s) != 1)
          fail("allreduce nvls: one node only (" + std::to_string(s.nranks) + " ranks of " + std::to_string(s.gpus_per_node) +
               " GPUs per node)");
        return nvls_allreduce(s.nranks, s.count, s.dtype, s.placement, s.pipe);
      }
      if (a == "nvls-tree") return nvls_tree_allreduce(nodes_of(s), s.gpus_per_node, s.count, s.dtype, s.placement, s.pipe);
      no_pipelining(s);
      if (a == "recursive") return recursive_allreduce(s.nranks, s.count, s.dtype, s.placement);
      if (a == "tree") return double_tree_allreduce(s.nranks, s.count, s.dtype, s.placement);
      if (a == "direct") return direct_allreduce(s.nranks, s.count, s.dtype, s.placement);
      break;
    case Collective::ReduceScatter:
      if (a == "ring") return ring_reduce_scatter(s.nranks, s.count, s.dtype, s.placement, s.pipe);
      if (a == "rail-ring")
        return rail_ring_reduce_scatter(nodes_of(s), s.gpus_per_node, s.count, s.dtype, s.placement, s.pipe,
                                        s.intra_placement);
      if (a == "pat") return pat_reduce_scatter(s.nranks, s.count, s.dtype, s.placement, s.pipe, s.aggregate);
      no_pipelining(s);
      if (a == "recursive") return recursive_reduce_scatter(s.nranks, s.count, s.dtype, s.placement);
      if (a == "hierarchical") return hierarchical_reduce_scatter(nodes_of(s), s.gpus_per_node, s.count, s.dtype, s.placement);
      break;
    case Collective::AllGather:
      if (a == "ring") return ring_allgather(s.nranks, s.count, s.dtype, s.placement, s.pipe);
      if (a == "rail-ring")
        return rail_ring_allgather(nodes_of(s), s.gpus_per_node, s.count, s.dtype, s.placement, s.pipe, s.intra_placement);
      if (a == "pat") return pat_allgather(s.nranks, s.count, s.dtype, s.placement, s.pipe, s.aggregate);
      no_pipelining(s);
      if (a == "recursive") return recursive_allgather(s.nranks, s.count, s.dtype, s.placement);
      if (a == "hierarchical") return hierarchical_allgather(nodes_of(s), s.gpus_per_node, s.count, s.dtype, s.placement);
      break;
    case Collective::Broadcast:
      if (s.root < 0 || s.root >= s.nranks) fail("broadcast: root " + std::to_string(s.root) + " is not a rank");
      if (a == "chain") {
        if (s.pipe.channels != 1) fail("broadcast chain: channels must be 1 (use chunks)");
        return chain_broadcast(s.nranks, s.root, s.count, s.dtype, s.pipe.chunks, s.placement);
      }
      no_pipelining(s);
      if (a == "tree") return tree_broadcast(s.nranks, s.root, s.count, s.dtype, s.placement);
      break;
    case Collective::AllToAll:
      no_pipelining(s);
      if (s.nccl_p2p_channels > 0 && (a == "pairwise" || a == "pxn")) {
        if (s.placement != Placement::None) fail("all-to-all " + a + " as NCCL's exchange: placement must be none");
        if (a == "pxn") nodes_of(s);  // whole nodes
        const int g = a == "pxn" ? s.gpus_per_node : 1;
        if (s.nccl_nodes.empty())
          return nccl_alltoall(a2a_counts(s), s.dtype,
                               NcclP2pRounds::node_major(s.nranks, std::max(s.gpus_per_node, 1), s.nccl_p2p_channels), g);
        if (static_cast<int>(s.nccl_nodes.size()) != s.nranks)
          fail("all-to-all as NCCL's exchange: " + std::to_string(s.nccl_nodes.size()) + " nodes given for " +
               std::to_string(s.nranks) + " ranks");
        return nccl_alltoall(a2a_counts(s), s.dtype, NcclP2pRounds(s.nccl_nodes, s.nccl_p2p_channels), g);
      }
      if (a == "direct") return alltoall(a2a_counts(s), s.dtype, AllToAllOrder::Direct, s.placement);
      if (a == "pairwise") return alltoall(a2a_counts(s), s.dtype, AllToAllOrder::Pairwise, s.placement);
      if (a == "hierarchical") {
        nodes_of(s);
        return hierarchical_alltoall(a2a_counts(s), s.gpus_per_node, s.dtype, s.placement);
      }
      if (a == "pxn") {
        nodes_of(s);
        return pxn_alltoall(a2a_counts(s), s.gpus_per_node, s.dtype, s.placement);
      }
      break;
  }
  std::string names;
  for (const auto& n : algorithm_names(s.collective)) names += (names.empty() ? "" : ", ") + n;
  fail("unknown " + std::string(collective_name(s.collective)) + " algorithm '" + a + "' (expected " + names + ")");
}

}  // namespace

Schedule build_schedule(const BuildSpec& spec) {
  Schedule s = dispatch(spec);
  // The builders grow programs op by op; a schedule is read many times after (simulators hold
  // one per call), so it keeps no spare capacity.
  for (RankProgram& p : s.ranks) p.ops.shrink_to_fit();
  return s;
}

bool has_switch_ranks(const BuildSpec& spec) {
  return spec.collective == Collective::AllReduce && (spec.algorithm == "nvls" || spec.algorithm == "nvls-tree");
}

}  // namespace compcoll::sched
