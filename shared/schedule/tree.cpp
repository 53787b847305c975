// shared/schedule/tree.cpp — double binary tree allreduce: half of the data reduced up and
// broadcast down each of two binary trees whose inner ranks are (mostly) each other's leaves.
#include "schedule/algorithms.h"

namespace compcoll::sched {

Schedule double_tree_allreduce(int n, uint64_t count, DType dtype, Placement placement) {
  if (n < 1) throw ScheduleError("double_tree_allreduce: group size must be >= 1, got " + std::to_string(n));
  const bool up_compressed = placement == Placement::PerHop || placement == Placement::ZipCCL;
  const bool down_per_hop = placement == Placement::PerHop;
  const bool down_once = placement == Placement::CompressOnce || placement == Placement::ZipCCL;
  Schedule s = make_schedule(Collective::AllReduce, "double-binary-tree", placement, n, count, dtype);
  for (int r = 0; r < n; ++r) {
    s.ranks[r].input_count = s.ranks[r].output_count = count;
    s.ranks[r].scratch_counts = {count / 2 + 1};
    append_chained(s.ranks[r], {OpKind::Copy, -1, Slice{BufKind::Input, 0, 0, count}, Slice{BufKind::Output, 0, 0, count}, {}, 0});
  }
  int depth_max = 0;
  for (int v = n - 1; v > 0; v = (v - 1) / 2) ++depth_max;
  const auto depth_of = [](int v) { int d = 0; for (; v > 0; v = (v - 1) / 2) ++d; return d; };
  for (int tree = 0; tree < 2; ++tree) {
    // Tree 0: heap order on r; tree 1: heap order on n-1-r, so tree 0's leaves (high r) are
    // tree 1's inner ranks. Each tree carries one half of the data.
    const auto rank_of = [&](int v) { return tree == 0 ? v : n - 1 - v; };
    const Block half = block_of(count, 2, tree);
    const Slice mine{BufKind::Output, 0, half.begin, half.count()};
    const Slice tmp{BufKind::Scratch, 0, 0, half.count()};
    // Reduce up: deepest ranks first, so every parent's receives follow its children's sends.
    for (int v = n - 1; v > 0; --v) {
      const int child = rank_of(v), parent = rank_of((v - 1) / 2);
      const uint32_t step = static_cast<uint32_t>(depth_max - depth_of(v));
      if (up_compressed) {
        const uint32_t w = s.ranks[child].wire_buffers++, in = s.ranks[parent].wire_buffers++;
        append_chained(s.ranks[child], {OpKind::Compress, -1, mine, wire_slice(w), {}, step});
        append_chained(s.ranks[child], {OpKind::Send, parent, wire_slice(w), {}, {}, step});
        append_chained(s.ranks[parent], {OpKind::Recv, child, {}, wire_slice(in), {}, step});
        append_chained(s.ranks[parent], {OpKind::Decompress, -1, wire_slice(in), tmp, {}, step});
      } else {
        append_chained(s.ranks[child], {OpKind::Send, parent, mine, {}, {}, step});
        append_chained(s.ranks[parent], {OpKind::Recv, child, {}, tmp, {}, step});
      }
      append_chained(s.ranks[parent], {OpKind::Reduce, -1, tmp, mine, {}, step});
    }
    // Broadcast down from the root: compress-once forwards the root's bytes.
    std::vector<int64_t> held(n, -1);
    for (int v = 1; v < n; ++v) {
      const int child = rank_of(v), pv = (v - 1) / 2, parent = rank_of(pv);
      const uint32_t step = static_cast<uint32_t>(depth_max + 1 + depth_of(pv));
      if (!down_per_hop && !down_once) {
        append_chained(s.ranks[parent], {OpKind::Send, child, mine, {}, {}, step});
        append_chained(s.ranks[child], {OpKind::Recv, parent, {}, mine, {}, step});
        continue;
      }
      if (held[parent] < 0 || (down_per_hop && v == 2 * pv + 1)) {  // once per sender and tree
        held[parent] = s.ranks[parent].wire_buffers++;
        append_chained(s.ranks[parent], {OpKind::Compress, -1, mine, wire_slice(static_cast<uint32_t>(held[parent])), {}, step});
      }
      append_chained(s.ranks[parent], {OpKind::Send, child, wire_slice(static_cast<uint32_t>(held[parent])), {}, {}, step});
      held[child] = s.ranks[child].wire_buffers++;
      append_chained(s.ranks[child], {OpKind::Recv, parent, {}, wire_slice(static_cast<uint32_t>(held[child])), {}, step});
      append_chained(s.ranks[child], {OpKind::Decompress, -1, wire_slice(static_cast<uint32_t>(held[child])), mine, {}, step});
    }
  }
  return s;
}

}  // namespace compcoll::sched
