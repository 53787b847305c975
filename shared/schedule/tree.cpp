// shared/schedule/tree.cpp — double binary tree allreduce over a part (parts.h): half of the
// data reduced up and broadcast down each of two binary trees whose inner ranks are (mostly)
// each other's leaves.
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
  if (n < 1) throw ScheduleError("double_tree_allreduce: group size must be >= 1, got " + std::to_string(n));
  Schedule s = make_schedule(Collective::AllReduce, "double-binary-tree", placement, n, count, dtype);
  detail::allreduce_prologue(s, count);
  detail::Chains chains = detail::chains_after_last(s);
  detail::double_tree_allreduce_part(s, detail::Part{detail::whole_group(n), 0, count}, placement, 0, chains);
  return s;
}

}  // namespace compcoll::sched
