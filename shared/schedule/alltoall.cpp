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
