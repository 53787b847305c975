// shared/schedule/broadcast.cpp — broadcast as a pipelined chain and as a binary tree.
#include "schedule/algorithms.h"

namespace compcoll::sched {
namespace {

Schedule broadcast_base(const char* what, int n, int root, uint64_t count, DType dtype, Placement placement,
                        const std::string& algorithm) {
  if (n < 1) throw ScheduleError(std::string(what) + ": group size must be >= 1, got " + std::to_string(n));
  if (root < 0 || root >= n)
    throw ScheduleError(std::string(what) + ": root " + std::to_string(root) + " outside the group of " + std::to_string(n));
  if (placement == Placement::ZipCCL)
    throw ScheduleError(std::string(what) + ": placement zipccl is for allreduce; use none, per-hop or compress-once");
  Schedule s = make_schedule(Collective::Broadcast, algorithm, placement, n, count, dtype);
  for (int r = 0; r < n; ++r) {
    s.ranks[r].input_count = r == root ? count : 0;
    s.ranks[r].output_count = count;
    if (r == root)
      append_chained(s.ranks[r], {OpKind::Copy, -1, Slice{BufKind::Input, 0, 0, count}, Slice{BufKind::Output, 0, 0, count}, {}, 0});
  }
  return s;
}

// Moves `piece` of the output from `from` to each of `to`, at `step`, with the placement:
// compress-once: `from` forwards the wire it received (or the root compresses once);
// per-hop: every sender compresses its own output. `held[r]` is rank r's wire for the piece;
// `last[r]` the last op of rank r's dependency chain for the piece.
void hop(Schedule& s, int from, const std::vector<int>& to, const Slice& piece, Placement placement, int root,
         uint32_t step, std::vector<int64_t>& held, std::vector<int64_t>& last) {
  RankProgram& src = s.ranks[from];
  if (placement == Placement::None) {
    for (int t : to) {
      append_after(src, {OpKind::Send, t, piece, {}, {}, step}, last[from]);
      append_after(s.ranks[t], {OpKind::Recv, from, {}, piece, {}, step}, last[t]);
    }
    return;
  }
  const bool compress_here = placement == Placement::PerHop || from == root;
  if (compress_here || held[from] < 0) {
    held[from] = src.wire_buffers++;
    append_after(src, {OpKind::Compress, -1, piece, wire_slice(static_cast<uint32_t>(held[from])), {}, step}, last[from]);
  }
  for (int t : to) {
    append_after(src, {OpKind::Send, t, wire_slice(static_cast<uint32_t>(held[from])), {}, {}, step}, last[from]);
    RankProgram& dst = s.ranks[t];
    held[t] = dst.wire_buffers++;
    append_after(dst, {OpKind::Recv, from, {}, wire_slice(static_cast<uint32_t>(held[t])), {}, step}, last[t]);
    append_after(dst, {OpKind::Decompress, -1, wire_slice(static_cast<uint32_t>(held[t])), piece, {}, step}, last[t]);
  }
}

// Each rank's chain starts after its first op (the root's copy of its input) or at nothing.
std::vector<int64_t> chain_starts(const Schedule& s) {
  std::vector<int64_t> last(s.ranks.size());
  for (size_t r = 0; r < s.ranks.size(); ++r) last[r] = s.ranks[r].ops.empty() ? -1 : 0;
  return last;
}

}  // namespace

Schedule chain_broadcast(int n, int root, uint64_t count, DType dtype, uint32_t chunks, Placement placement) {
  if (chunks < 1) throw ScheduleError("chain_broadcast: chunks must be >= 1");
  Schedule s = broadcast_base("chain_broadcast", n, root, count, dtype, placement, "chain");
  // Chunk j leaves the root at step j and reaches hop h at step j + h - 1. Programs list a
  // rank's ops chunk by chunk: receive chunk j, then pass it on. Each chunk is its own
  // dependency chain, so a rank may forward chunk j while it receives chunk j+1.
  const std::vector<int64_t> start = chain_starts(s);
  for (uint32_t j = 0; j < chunks; ++j) {
    const Block b = block_of(count, static_cast<int>(chunks), static_cast<int>(j));
    const Slice piece{BufKind::Output, 0, b.begin, b.count()};
    std::vector<int64_t> held(n, -1), last = start;
    for (int h = 0; h + 1 < n; ++h)
      hop(s, (root + h) % n, {(root + h + 1) % n}, piece, placement, root, j + static_cast<uint32_t>(h), held, last);
  }
  return s;
}

Schedule tree_broadcast(int n, int root, uint64_t count, DType dtype, Placement placement) {
  Schedule s = broadcast_base("tree_broadcast", n, root, count, dtype, placement, "binary-tree");
  const Slice all{BufKind::Output, 0, 0, count};
  std::vector<int64_t> held(n, -1), last = chain_starts(s);
  // Virtual rank v = (r - root) mod n; children of v are 2v+1 and 2v+2; depth d sends at step d.
  for (int v = 0; v < n; ++v) {
    std::vector<int> to;
    for (int c : {2 * v + 1, 2 * v + 2})
      if (c < n) to.push_back((c + root) % n);
    if (to.empty()) continue;
    uint32_t depth = 0;
    for (int x = v; x > 0; x = (x - 1) / 2) ++depth;
    hop(s, (v + root) % n, to, all, placement, root, depth, held, last);
  }
  return s;
}

Schedule point_to_point(uint64_t count, DType dtype, uint32_t pieces, Placement placement) {
  if (pieces < 1) throw ScheduleError("point_to_point: pieces must be >= 1");
  if (placement == Placement::ZipCCL)
    throw ScheduleError("point_to_point: placement zipccl is for allreduce; use none, per-hop or compress-once");
  Schedule s = make_schedule(Collective::Broadcast, "point-to-point", placement, 2, count, dtype);
  RankProgram &from = s.ranks[0], &to = s.ranks[1];
  from.input_count = count;
  to.output_count = count;
  for (uint32_t j = 0; j < pieces; ++j) {
    const Block b = block_of(count, static_cast<int>(pieces), static_cast<int>(j));
    const Slice in{BufKind::Input, 0, b.begin, b.count()}, out{BufKind::Output, 0, b.begin, b.count()};
    int64_t last_from = -1, last_to = -1;
    if (placement == Placement::None) {
      append_after(from, {OpKind::Send, 1, in, {}, {}, j}, last_from);
      append_after(to, {OpKind::Recv, 0, {}, out, {}, j}, last_to);
      continue;
    }
    const Slice sent = wire_slice(from.wire_buffers++), got = wire_slice(to.wire_buffers++);
    append_after(from, {OpKind::Compress, -1, in, sent, {}, j}, last_from);
    append_after(from, {OpKind::Send, 1, sent, {}, {}, j}, last_from);
    append_after(to, {OpKind::Recv, 0, {}, got, {}, j}, last_to);
    append_after(to, {OpKind::Decompress, -1, got, out, {}, j}, last_to);
  }
  return s;
}

}  // namespace compcoll::sched
