// shared/schedule/nvls.cpp — NCCL's NVLS allreduce inside one node (NVLink SHARP): the
// NVSwitch reduces and multicasts (algorithms.h, nvls_allreduce).
#include "schedule/parts.h"

#include <string>

namespace compcoll::sched {

Schedule nvls_allreduce(int g, uint64_t count, DType dtype, Placement placement, const Pipelining& pipe) {
  if (g < 2) throw ScheduleError("nvls_allreduce: a node needs at least 2 GPUs, got " + std::to_string(g));
  if (placement != Placement::None)
    throw ScheduleError("nvls_allreduce: placement " + std::string(placement_name(placement)) +
                        " does not apply (the switch reduces raw data)");
  detail::check_pipelining("nvls_allreduce", pipe);
  if (pipe.merge) throw ScheduleError("nvls_allreduce: merged channels are for ring and rail-ring only");
  Schedule s = make_schedule(Collective::AllReduce, "nvls", placement, g + 1, count, dtype);
  if (pipe.chunks > 1 || pipe.channels > 1)
    s.algorithm += " chunks=" + std::to_string(pipe.chunks) + " channels=" + std::to_string(pipe.channels);
  s.switches = 1;
  s.switch_span = g;
  detail::allreduce_prologue(s, count);
  RankProgram& sw = s.ranks[static_cast<size_t>(g)];
  sw.ops.clear();
  sw.input_count = sw.output_count = 0;
  std::vector<detail::Chains> after(pipe.channels, detail::chains_after_last(s));
  const auto round_trip = static_cast<uint32_t>(g);
  detail::pipelined(s, count, pipe, [&](const Block& piece, uint32_t index, uint32_t delay) {
    if (piece.count() == 0) return;
    const uint64_t m = piece.count();
    // Head h reduces and multicasts part h of the piece (block_of(m, g, h)), as NCCL's loop
    // of a channel gives each of its heads one chunk.
    const auto part = [&](int h) { return block_of(m, g, h); };
    // The switch: every GPU's piece lands in a buffer of its own (the receives wait on nothing,
    // so the messages flow at once), the sum of part h accumulates in the first buffer, goes to
    // head h, comes back from it and is multicast to every GPU.
    const auto buf = [&](int j) { return index * static_cast<uint32_t>(g) + static_cast<uint32_t>(j); };
    for (int j = 0; j < g; ++j) detail::grow_scratch(sw, buf(j), m);
    const auto at = [&] { return static_cast<uint32_t>(sw.ops.size()); };
    const auto scratch = [&](int j, int h) { return Slice{BufKind::Scratch, buf(j), part(h).begin, part(h).count()}; };
    // Phase by phase, so that messages between the switch and a GPU keep one order on both
    // sides: the parts in (sum received), then the sums out to the heads, back, and out to all.
    // Connections: part h's data in and out on lane h, as each head's loads and stores are a
    // stream of their own in NCCL; the heads' round trips on lane g, behind no part's data.
    std::vector<uint32_t> sums(static_cast<size_t>(g));
    for (int h = 0; h < g; ++h) {
      if (part(h).count() == 0) continue;
      std::vector<uint32_t> recvs;
      for (int j = 0; j < g; ++j) {
        recvs.push_back(at());
        sw.ops.push_back({OpKind::Recv, j, {}, scratch(j, h), {}, delay, static_cast<uint32_t>(h)});
      }
      sums[h] = recvs[0];
      for (int j = 1; j < g; ++j) {
        const uint32_t op = at();
        sw.ops.push_back({OpKind::Reduce, -1, scratch(j, h), scratch(0, h), {sums[h], recvs[static_cast<size_t>(j)]}, delay});
        sums[h] = op;
      }
    }
    std::vector<uint32_t> up(static_cast<size_t>(g)), back(static_cast<size_t>(g));
    for (int h = 0; h < g; ++h)
      if (part(h).count() > 0) {
        up[h] = at();
        sw.ops.push_back({OpKind::Send, h, scratch(0, h), {}, {sums[h]}, delay + 1, round_trip});
      }
    for (int h = 0; h < g; ++h)
      if (part(h).count() > 0) {
        back[h] = at();
        sw.ops.push_back({OpKind::Recv, h, {}, scratch(0, h), {up[h]}, delay + 2, round_trip});
      }
    for (int h = 0; h < g; ++h)
      if (part(h).count() > 0)
        for (int j = 0; j < g; ++j)
          sw.ops.push_back({OpKind::Send, j, scratch(0, h), {}, {back[h]}, delay + 3, static_cast<uint32_t>(h)});
    // The GPUs: each sends every part to the switch; head r takes the sum of part r and stores
    // it to the switch's multicast; every GPU receives each part's multicast into its output.
    // A channel's pieces leave each GPU in order: piece j's parts after piece j - 1's.
    std::vector<int64_t>& chains = after[index / pipe.chunks];
    for (int r = 0; r < g; ++r) {
      detail::Chain ch{s.ranks[static_cast<size_t>(r)], chains[static_cast<size_t>(r)]};
      for (int h = 0; h < g; ++h)
        if (part(h).count() > 0)
          ch.add({OpKind::Send, g, Slice{BufKind::Output, 0, piece.begin + part(h).begin, part(h).count()}, {}, {}, delay,
                  static_cast<uint32_t>(h)});
      const int64_t sent = chains[static_cast<size_t>(r)];
      const Block own = part(r);
      if (own.count() > 0) {
        detail::grow_scratch(s.ranks[static_cast<size_t>(r)], index, own.count());
        const Slice sum{BufKind::Scratch, index, 0, own.count()};
        ch.add({OpKind::Recv, g, {}, sum, {}, delay + 1, round_trip});
        ch.add({OpKind::Send, g, sum, {}, {}, delay + 2, round_trip});
      }
      // The multicast parts land side by side (each part's receive waits only on the GPU's own
      // parts having left: it overwrites them).
      for (int h = 0; h < g; ++h)
        if (part(h).count() > 0)
          s.ranks[static_cast<size_t>(r)].ops.push_back(
              {OpKind::Recv, g, {}, Slice{BufKind::Output, 0, piece.begin + part(h).begin, part(h).count()},
               {static_cast<uint32_t>(sent)}, delay + 3, static_cast<uint32_t>(h)});
      chains[static_cast<size_t>(r)] = sent;
    }
  });
  return s;
}

}  // namespace compcoll::sched
