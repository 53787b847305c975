// shared/schedule/alltoall.cpp — all-to-all(v): direct and pairwise exchange.
#include "schedule/algorithms.h"

namespace compcoll::sched {
namespace {

}  // namespace

Schedule alltoall(const std::vector<std::vector<uint64_t>>& counts, DType dtype, AllToAllOrder order,
                  Placement placement) {
  const int n = static_cast<int>(counts.size());
  if (n < 1) throw ScheduleError("alltoall: group size must be >= 1");
  for (int i = 0; i < n; ++i)
    if (static_cast<int>(counts[i].size()) != n)
      throw ScheduleError("alltoall: counts row " + std::to_string(i) + " has " + std::to_string(counts[i].size()) +
                          " entries, expected " + std::to_string(n));
  if (placement == Placement::ZipCCL)
    throw ScheduleError("alltoall: placement zipccl is for allreduce; use none, per-hop or compress-once");
  Schedule s = make_schedule(Collective::AllToAll, order == AllToAllOrder::Direct ? "direct" : "pairwise", placement,
                             n, 0, dtype);
  // send_at[i][j]: offset of i's block for j in i's input; recv_at[i][j]: offset of the block
  // from i in j's output.
  std::vector<std::vector<uint64_t>> send_at(n, std::vector<uint64_t>(n)), recv_at(n, std::vector<uint64_t>(n));
  for (int i = 0; i < n; ++i) {
    uint64_t off = 0;
    for (int j = 0; j < n; ++j) {
      send_at[i][j] = off;
      off += counts[i][j];
      s.count += counts[i][j];
    }
    s.ranks[i].input_count = off;
  }
  for (int j = 0; j < n; ++j) {
    uint64_t off = 0;
    for (int i = 0; i < n; ++i) {
      recv_at[i][j] = off;
      off += counts[i][j];
    }
    s.ranks[j].output_count = off;
  }
  const bool compressed = placement != Placement::None;  // one hop: per-hop == compress-once
  auto send = [&](int i, int j, uint32_t step) {
    const Slice src{BufKind::Input, 0, send_at[i][j], counts[i][j]};
    if (!compressed) return append_chained(s.ranks[i], {OpKind::Send, j, src, {}, {}, step});
    const uint32_t w = s.ranks[i].wire_buffers++;
    append_chained(s.ranks[i], {OpKind::Compress, -1, src, wire_slice(w), {}, step});
    append_chained(s.ranks[i], {OpKind::Send, j, wire_slice(w), {}, {}, step});
  };
  auto recv = [&](int i, int j, uint32_t step) {  // j receives from i
    const Slice dst{BufKind::Output, 0, recv_at[i][j], counts[i][j]};
    if (!compressed) return append_chained(s.ranks[j], {OpKind::Recv, i, {}, dst, {}, step});
    const uint32_t w = s.ranks[j].wire_buffers++;
    append_chained(s.ranks[j], {OpKind::Recv, i, {}, wire_slice(w), {}, step});
    append_chained(s.ranks[j], {OpKind::Decompress, -1, wire_slice(w), dst, {}, step});
  };
  for (int r = 0; r < n; ++r) {
    append_chained(s.ranks[r], {OpKind::Copy, -1, Slice{BufKind::Input, 0, send_at[r][r], counts[r][r]},
                     Slice{BufKind::Output, 0, recv_at[r][r], counts[r][r]}, {}, 0});
    if (order == AllToAllOrder::Direct) {
      // Post every send, then every receive: one step, n-1 messages in flight per rank.
      for (int k = 1; k < n; ++k) send(r, (r + k) % n, 0);
      for (int k = 1; k < n; ++k) recv((r - k + n) % n, r, 0);
    } else {
      // Step k: send to r+k, receive from r-k (one partner each way per step).
      for (int k = 1; k < n; ++k) {
        send(r, (r + k) % n, static_cast<uint32_t>(k - 1));
        recv((r - k + n) % n, r, static_cast<uint32_t>(k - 1));
      }
    }
  }
  return s;
}

}  // namespace compcoll::sched

namespace compcoll::sched {

Schedule hierarchical_alltoall(const std::vector<std::vector<uint64_t>>& counts, int gpus_per_node, DType dtype,
                               Placement placement) {
  const int n = static_cast<int>(counts.size()), g = gpus_per_node;
  if (g < 1 || n < 1 || n % g != 0)
    throw ScheduleError("hierarchical_alltoall: " + std::to_string(n) + " ranks is not a multiple of gpus_per_node " +
                        std::to_string(g));
  if (placement == Placement::CompressOnce || placement == Placement::ZipCCL)
    throw ScheduleError("hierarchical_alltoall: placement " + std::string(placement_name(placement)) +
                        " is not built (blocks are repacked between phases); use none or per-hop");
  const int nodes = n / g;
  // The direct schedule fixes the input and output layouts; its programs are replaced.
  Schedule s = alltoall(counts, dtype, AllToAllOrder::Direct, Placement::None);
  s.algorithm = "hierarchical/" + std::string(placement_name(placement));
  const bool compressed = placement == Placement::PerHop;
  const auto rank_of = [g](int node, int local) { return node * g + local; };
  // Offsets of i's block for j in i's input, and of the block from i in j's output.
  std::vector<std::vector<uint64_t>> send_at(n, std::vector<uint64_t>(n)), recv_at(n, std::vector<uint64_t>(n));
  for (int i = 0; i < n; ++i)
    for (int j = 1; j < n; ++j) send_at[i][j] = send_at[i][j - 1] + counts[i][j - 1];
  for (int j = 0; j < n; ++j)
    for (int i = 1; i < n; ++i) recv_at[i][j] = recv_at[i - 1][j] + counts[i - 1][j];
  for (int me = 0; me < n; ++me) {
    RankProgram& p = s.ranks[me];
    p.ops.clear();
    p.wire_buffers = 0;
    const int k = me / g, l = me % g;
    // Scratch 0, "gathered": after phase 1, for each source local rank sl (in order) the blocks
    // from (k, sl) to (dk, l) for each node dk (in order). Scratch 1: packing area.
    std::vector<std::vector<uint64_t>> gathered_at(g, std::vector<uint64_t>(nodes + 1));
    uint64_t total = 0;
    for (int sl = 0; sl < g; ++sl) {
      for (int dk = 0; dk < nodes; ++dk) {
        gathered_at[sl][dk] = total;
        total += counts[rank_of(k, sl)][rank_of(dk, l)];
      }
      gathered_at[sl][nodes] = total;
    }
    p.scratch_counts = {total, std::max<uint64_t>(p.input_count, total)};
    const auto send = [&](int peer, const Slice& src, uint32_t step) {
      if (!compressed) return append_chained(p, {OpKind::Send, peer, src, {}, {}, step});
      const uint32_t w = p.wire_buffers++;
      append_chained(p, {OpKind::Compress, -1, src, wire_slice(w), {}, step});
      append_chained(p, {OpKind::Send, peer, wire_slice(w), {}, {}, step});
    };
    const auto recv = [&](int peer, const Slice& dst, uint32_t step) {
      if (!compressed) return append_chained(p, {OpKind::Recv, peer, {}, dst, {}, step});
      const uint32_t w = p.wire_buffers++;
      append_chained(p, {OpKind::Recv, peer, {}, wire_slice(w), {}, step});
      append_chained(p, {OpKind::Decompress, -1, wire_slice(w), dst, {}, step});
    };
    // Both phases go round the ring of peers, as the flat schedules do: this rank sends to
    // the j-th peer after it (local rank l + j, node k + j) and receives from the j-th before
    // it (l - j, k - j). Receives run one at a time, so if every rank received from peers in
    // the same order (local rank 0 first, then 1, ...), all of a node (all of a rail) would
    // pull from one rank at once: g - 1 flows sharing its link, and the phase would take
    // g(g - 1)/2 message times instead of g - 1 (tests/sim/test_cost_model.cpp).
    // Phase 1, inside the node: to each local rank dl, everything this rank has for ranks
    // (*, dl), packed node by node; its own share first, into the gathered area.
    for (int j = 0; j < g; ++j) {
      const int dl = (l + j) % g;
      uint64_t packed = 0;
      for (int dk = 0; dk < nodes; ++dk) {
        const int dst = rank_of(dk, dl);
        const uint64_t c = counts[me][dst];
        const Slice from{BufKind::Input, 0, send_at[me][dst], c};
        const Slice to = dl == l ? Slice{BufKind::Scratch, 0, gathered_at[l][dk], c} : Slice{BufKind::Scratch, 1, packed, c};
        if (c) append_chained(p, {OpKind::Copy, -1, from, to, {}, 0});
        packed += c;
      }
      if (dl != l) send(rank_of(k, dl), Slice{BufKind::Scratch, 1, 0, packed}, 0);
    }
    for (int j = 1; j < g; ++j) {
      const int sl = (l - j + g) % g;
      recv(rank_of(k, sl), Slice{BufKind::Scratch, 0, gathered_at[sl][0], gathered_at[sl][nodes] - gathered_at[sl][0]},
           0);
    }
    // Phase 2, across nodes: to (dk, l), the blocks from (k, *) to it, packed by source local
    // rank — which is exactly their order in its output; this node's own share first.
    for (int j = 0; j < nodes; ++j) {
      const int dk = (k + j) % nodes;
      const int dst = rank_of(dk, l);
      uint64_t packed = 0;
      const bool local = dk == k;
      for (int sl = 0; sl < g; ++sl) {
        const uint64_t c = counts[rank_of(k, sl)][dst];
        const Slice from{BufKind::Scratch, 0, gathered_at[sl][dk], c};
        const Slice to = local ? Slice{BufKind::Output, 0, recv_at[rank_of(k, sl)][me], c} : Slice{BufKind::Scratch, 1, packed, c};
        if (c) append_chained(p, {OpKind::Copy, -1, from, to, {}, 1});
        packed += c;
      }
      if (!local) send(dst, Slice{BufKind::Scratch, 1, 0, packed}, 1);
    }
    for (int j = 1; j < nodes; ++j) {
      const int sk = (k - j + nodes) % nodes;
      const int first = rank_of(sk, 0);
      const uint64_t c = recv_at[first + g - 1][me] + counts[first + g - 1][me] - recv_at[first][me];
      recv(rank_of(sk, l), Slice{BufKind::Output, 0, recv_at[first][me], c}, 1);
    }
  }
  return s;
}

}  // namespace compcoll::sched
