// shared/schedule/tree.cpp — double binary tree allreduce over a part (parts.h): half of the
// data reduced up and broadcast down each of two binary trees whose inner ranks are (mostly)
// each other's leaves; and NCCL's tree allreduce, pipelined per channel over node chains and
// a double binary tree of nodes.
#include <array>

#include "schedule/parts.h"

namespace compcoll::sched {
namespace detail {

uint32_t double_tree_allreduce_part(Schedule& s, const Part& part, Placement placement, uint32_t step,
                                    Chains& chains) {
  const int n = part.size();
  if (n == 1) return step;
  const bool up_compressed = placement == Placement::PerHop || placement == Placement::ZipCCL;
  const bool down_per_hop = placement == Placement::PerHop;
  const bool down_once = placement == Placement::CompressOnce || placement == Placement::ZipCCL;
  for (int r : part.members) grow_scratch(s.ranks[r], part.scratch, (part.count + 1) / 2);
  const auto chain = [&](int r) { return Chain{s.ranks[r], chains[r]}; };
  const auto depth_of = [](int v) { int d = 0; for (; v > 0; v = (v - 1) / 2) ++d; return d; };
  const int depth_max = depth_of(n - 1);
  for (int tree = 0; tree < 2; ++tree) {
    // Tree 0: heap order on member positions; tree 1: heap order on n-1-position, so tree 0's
    // leaves (high positions) are tree 1's inner ranks. Each tree carries one half of the data.
    const auto rank_of = [&](int v) { return part.members[tree == 0 ? v : n - 1 - v]; };
    const Slice mine = part.slice(block_of(part.count, 2, tree));
    const Slice tmp{BufKind::Scratch, part.scratch, 0, mine.count};
    // Reduce up: deepest ranks first, so every parent's receives follow its children's sends.
    for (int v = n - 1; v > 0; --v) {
      const int child = rank_of(v), parent = rank_of((v - 1) / 2);
      const uint32_t at = step + static_cast<uint32_t>(depth_max - depth_of(v));
      chain(child).send(parent, mine, up_compressed, at);
      Chain p = chain(parent);
      p.recv(child, tmp, up_compressed, at);
      p.add({OpKind::Reduce, -1, tmp, mine, {}, at});
    }
    // Broadcast down from the root: compress-once forwards the root's bytes.
    std::vector<int64_t> held(n, -1);  // by position in the tree
    for (int v = 1; v < n; ++v) {
      const int pv = (v - 1) / 2, child = rank_of(v), parent = rank_of(pv);
      const uint32_t at = step + static_cast<uint32_t>(depth_max + 1 + depth_of(pv));
      Chain p = chain(parent), c = chain(child);
      if (!down_per_hop && !down_once) {
        p.send(child, mine, false, at);
        c.recv(parent, mine, false, at);
        continue;
      }
      if (held[pv] < 0 || (down_per_hop && v == 2 * pv + 1)) held[pv] = p.compress(mine, at);  // once per sender
      p.send_wire(child, static_cast<uint32_t>(held[pv]), at);
      held[v] = c.recv_wire(parent, mine, at);
    }
  }
  return step + static_cast<uint32_t>(2 * depth_max + 1);
}

}  // namespace detail

Schedule double_tree_allreduce(int n, uint64_t count, DType dtype, Placement placement) {
  return detail::flat_allreduce("double_tree_allreduce", "double-binary-tree", detail::double_tree_allreduce_part, n,
                                count, dtype, placement);
}

std::vector<int> nccl_tree_parents(int n, int tree) {
  if (n < 1) throw ScheduleError("nccl_tree_parents: node count must be >= 1, got " + std::to_string(n));
  // In-order binary tree: node r (> 0) with lowest set bit b hangs under r - b + 2b, or under
  // r - b where that is past the last node; node 0 is the root.
  const auto btree = [n](int r) {
    if (r == 0) return -1;
    const int b = r & -r, up = (r ^ b) | (b << 1);
    return up >= n ? (r ^ b) : up;
  };
  std::vector<int> parent(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (tree == 0) {
      parent[r] = btree(r);
    } else if (n % 2 == 0) {  // mirror
      const int u = btree(n - 1 - r);
      parent[r] = u < 0 ? -1 : n - 1 - u;
    } else {  // shift by one
      const int u = btree((r - 1 + n) % n);
      parent[r] = u < 0 ? -1 : (u + 1) % n;
    }
  }
  return parent;
}

Schedule nccl_tree_allreduce(int nodes, int g, uint64_t count, DType dtype, Placement placement, const Pipelining& pipe) {
  if (nodes < 1 || g < 1)
    throw ScheduleError("nccl_tree_allreduce: nodes and GPUs per node must be >= 1, got " + std::to_string(nodes) +
                        " and " + std::to_string(g));
  if (placement != Placement::None)
    throw ScheduleError("nccl_tree_allreduce: placement " + std::string(placement_name(placement)) +
                        " does not apply (NCCL's tree moves raw data; compressed trees: tree, hierarchical)");
  detail::check_pipelining("nccl_tree_allreduce", pipe);
  if (pipe.merge) throw ScheduleError("nccl_tree_allreduce: merged channels are for ring and rail-ring only");
  const int n = nodes * g;
  Schedule s = make_schedule(Collective::AllReduce, "nccl-tree", placement, n, count, dtype);
  if (pipe.chunks > 1 || pipe.channels > 1)
    s.algorithm += " chunks=" + std::to_string(pipe.chunks) + " channels=" + std::to_string(pipe.channels);
  detail::allreduce_prologue(s, count);
  if (n == 1) return s;
  // Each channel's tree over the ranks: parent, children (the chain's first, then the nodes'),
  // depth.
  struct Tree {
    std::vector<int> parent, depth;
    std::vector<std::vector<int>> kids;
    int height = 0;
  };
  const std::array<std::vector<int>, 2> across{nccl_tree_parents(nodes, 0), nccl_tree_parents(nodes, 1)};
  const uint32_t half = (pipe.channels + 1) / 2;
  std::vector<Tree> trees(pipe.channels);
  for (uint32_t c = 0; c < pipe.channels; ++c) {
    Tree& t = trees[c];
    const std::vector<int>& up = across[c < half ? 0 : 1];
    const int head = static_cast<int>(c % half) % g;
    const auto rank = [&](int node, int pos) { return node * g + (head + pos) % g; };
    t.parent.assign(static_cast<size_t>(n), -1);
    t.kids.assign(static_cast<size_t>(n), {});
    for (int k = 0; k < nodes; ++k)
      for (int pos = 1; pos < g; ++pos) t.parent[rank(k, pos)] = rank(k, pos - 1);
    for (int k = 0; k < nodes; ++k)
      if (up[k] >= 0) t.parent[rank(k, 0)] = rank(up[k], 0);
    for (int r = 0; r < n; ++r)  // chain children first: a rank's chain child is in its own node
      if (t.parent[r] >= 0 && t.parent[r] / g == r / g) t.kids[t.parent[r]].push_back(r);
    for (int r = 0; r < n; ++r)
      if (t.parent[r] >= 0 && t.parent[r] / g != r / g) t.kids[t.parent[r]].push_back(r);
    t.depth.assign(static_cast<size_t>(n), 0);
    for (int r = 0; r < n; ++r) {
      int d = 0;
      for (int v = r; t.parent[v] >= 0; v = t.parent[v]) ++d;
      t.depth[r] = d;
      t.height = std::max(t.height, d);
    }
  }
  const detail::Chains start = detail::chains_after_last(s);
  detail::pipelined(s, count, pipe, [&](const Block& piece, uint32_t index, uint32_t delay) {
    if (piece.count() == 0) return;
    const Tree& t = trees[index / pipe.chunks];
    const auto h = static_cast<uint32_t>(t.height);
    detail::Chains chains = start;
    const Slice mine{BufKind::Output, 0, piece.begin, piece.count()};
    const Slice tmp{BufKind::Scratch, index, 0, piece.count()};
    for (int r = 0; r < n; ++r) {
      detail::Chain ch{s.ranks[r], chains[r]};
      const auto d = static_cast<uint32_t>(t.depth[r]);
      if (!t.kids[r].empty()) detail::grow_scratch(s.ranks[r], index, piece.count());
      for (int kid : t.kids[r]) {  // reduce: a child sends at step delay + height - its depth
        ch.recv(kid, tmp, false, delay + h - d - 1);
        ch.add({OpKind::Reduce, -1, tmp, mine, {}, delay + h - d - 1});
      }
      if (t.parent[r] >= 0) {
        ch.send(t.parent[r], mine, false, delay + h - d);
        ch.recv(t.parent[r], mine, false, delay + h + d);  // broadcast: the parent sends at h + its depth + 1
      }
      for (int kid : t.kids[r]) ch.send(kid, mine, false, delay + h + d + 1);
    }
  });
  return s;
}

}  // namespace compcoll::sched
