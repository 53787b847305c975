// shared/schedule/direct.cpp — the direct allreduce over a part (parts.h): a reduce-scatter in
// which every member sends each other member that member's block at once, then an allgather in
// which it sends its reduced block to every other member at once. Two steps, n - 1 messages
// per member and step, 2 (n - 1)/n of the data per member. Compressed, each phase's codec work
// is one batch (Op::batched): the blocks a member sends are compressed in one launch and the
// blocks it receives decompressed in one, so a call pays four codec launches whatever n is.
#include "schedule/parts.h"

namespace compcoll::sched {
namespace detail {

uint32_t direct_allreduce_part(Schedule& s, const Part& part, Placement placement, uint32_t step, Chains& chains) {
  const int n = part.size();
  if (n == 1) return step;
  const bool rs_compressed = placement == Placement::PerHop || placement == Placement::ZipCCL;
  const bool ag_compressed = placement != Placement::None;
  const uint32_t rs = step, ag = step + 1;
  const uint64_t largest = part.block(0).count();  // block_of: the first blocks are the larger
  for (int i = 0; i < n; ++i) {
    const int r = part.members[i];
    RankProgram& p = s.ranks[r];
    const std::vector<uint32_t> start =
        chains[r] >= 0 ? std::vector<uint32_t>{static_cast<uint32_t>(chains[r])} : std::vector<uint32_t>{};
    auto add = [&](Op op, std::vector<uint32_t> deps) {
      op.deps = std::move(deps);
      p.ops.push_back(std::move(op));
      return static_cast<uint32_t>(p.ops.size() - 1);
    };
    // Member i sends to i + 1, i + 2, ... and receives from i - 1, i - 2, ...: at every
    // distance d, each member sends to one member and receives from another.
    std::vector<int> to, from;
    for (int d = 1; d < n; ++d) to.push_back((i + d) % n), from.push_back((i - d + n) % n);
    const Slice mine = part.slice(part.block(i));

    // Reduce-scatter: block j to member j; the n - 1 blocks received into scratch slots, then
    // added to block i in the order they were posted (the same sums compressed or not).
    grow_scratch(p, part.scratch, static_cast<uint64_t>(n - 1) * largest);
    auto slot = [&](int k) { return Slice{BufKind::Scratch, part.scratch, static_cast<uint64_t>(k) * largest, mine.count}; };
    std::vector<uint32_t> rs_sends(n);  // per member: the send of its block (none for i)
    if (rs_compressed) {
      std::vector<Op> batch;
      for (int j : to) batch.push_back({OpKind::Compress, -1, part.slice(part.block(j)), wire_slice(p.wire_buffers++), {}, rs});
      const std::vector<uint32_t> at = append_batch(p, batch, start);
      for (int k = 0; k < n - 1; ++k)
        rs_sends[to[k]] = add({OpKind::Send, part.members[to[k]], p.ops[at[k]].dst, {}, {}, rs}, {at[k]});
    } else {
      for (int j : to) rs_sends[j] = add({OpKind::Send, part.members[j], part.slice(part.block(j)), {}, {}, rs}, start);
    }
    std::vector<uint32_t> got(n - 1);  // the op after which slot k holds its block
    if (rs_compressed) {
      std::vector<uint32_t> recvs;
      std::vector<Op> batch;
      for (int k = 0; k < n - 1; ++k) {
        const uint32_t w = p.wire_buffers++;
        recvs.push_back(add({OpKind::Recv, part.members[from[k]], {}, wire_slice(w), {}, rs}, start));
        batch.push_back({OpKind::Decompress, -1, wire_slice(w), slot(k), {}, rs});
      }
      got = append_batch(p, batch, recvs);
    } else {
      for (int k = 0; k < n - 1; ++k) got[k] = add({OpKind::Recv, part.members[from[k]], {}, slot(k), {}, rs}, start);
    }
    // Block i is read by nothing the reduce-scatter sends, so the sums may start at once.
    uint32_t reduced = 0;
    for (int k = 0; k < n - 1; ++k)
      reduced = add({OpKind::Reduce, -1, slot(k), mine, {}, rs}, k == 0 ? std::vector<uint32_t>{got[k]}
                                                                         : std::vector<uint32_t>{got[k], reduced});

    // Allgather: block i, now the sum, to every other member; block j from member j. A typed
    // receive into block j waits for the reduce-scatter's send of block j (posted: the IR's
    // sends are buffered); a compressed one lands in a wire of its own and needs nothing.
    std::vector<uint32_t> end{reduced};
    if (ag_compressed) {
      const uint32_t w = p.wire_buffers++;
      const uint32_t packed = add({OpKind::Compress, -1, mine, wire_slice(w), {}, ag}, {reduced});
      for (int j : to) add({OpKind::Send, part.members[j], wire_slice(w), {}, {}, ag}, {packed});
      std::vector<uint32_t> recvs;
      std::vector<Op> batch;
      for (int j : from) {
        const uint32_t v = p.wire_buffers++;
        recvs.push_back(add({OpKind::Recv, part.members[j], {}, wire_slice(v), {}, ag}, start));
        batch.push_back({OpKind::Decompress, -1, wire_slice(v), part.slice(part.block(j)), {}, ag});
      }
      recvs.push_back(packed);  // so that the phase's last op also follows block i's sum
      const std::vector<uint32_t> at = append_batch(p, batch, recvs);
      chains[r] = at.back();
      continue;
    }
    for (int j : to) add({OpKind::Send, part.members[j], mine, {}, {}, ag}, {reduced});
    for (int j : from) end.push_back(add({OpKind::Recv, part.members[j], {}, part.slice(part.block(j)), {}, ag}, {rs_sends[j]}));
    chains[r] = append_join(p, end, ag);
  }
  return ag + 1;
}

}  // namespace detail

Schedule direct_allreduce(int n, uint64_t count, DType dtype, Placement placement) {
  return detail::flat_allreduce("direct_allreduce", "direct", detail::direct_allreduce_part, n, count, dtype, placement);
}

}  // namespace compcoll::sched
