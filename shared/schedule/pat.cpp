// shared/schedule/pat.cpp — NCCL's PAT (Parallel Aggregated Trees) allgather and
// reduce-scatter (algorithms.h: pat_allgather, pat_reduce_scatter): Bruck's algorithm with its
// dimensions reversed, so that the few blocks travel far and the many travel near, and with the
// blocks a message carries bounded, as NCCL bounds them by its buffers.
#include "schedule/parts.h"

#include <string>
#include <utility>

namespace compcoll::sched {

namespace {

using detail::Chain;
using detail::Chains;
using detail::Part;

// Dimension d of a group of n: the offsets t (multiples of 2^(d + 1), below n) whose blocks a
// member passes on at distance 2^d, in the order it sends them, cut into messages of at most
// `aggregate` blocks (0: one message).
//   Allgather, dimensions from the highest down: member i holds the blocks of members i + t for
//   every t a multiple of 2^(d + 1); it sends those with t + 2^d < n to member i - 2^d and
//   receives from member i + 2^d the same offsets of its own, which are its offsets t + 2^d.
//   After dimension 0 it holds every offset below n: each block reached every member once.
//   Reduce-scatter is the same exchange run backwards, dimensions from 0 up: member i sends to
//   member i + 2^d its partial sums for the members i + t + 2^d, and adds what member i - 2^d
//   sends it into its partial sums for the members i + t; after the last dimension it holds its
//   own block, summed over every member.
std::vector<std::vector<int>> messages_of(int n, int d, uint32_t aggregate) {
  std::vector<int> offsets;
  const int step = 1 << (d + 1), dist = 1 << d;
  for (int t = 0; t + dist < n; t += step) offsets.push_back(t);
  std::vector<std::vector<int>> out;
  const size_t per = aggregate == 0 ? offsets.size() : aggregate;
  for (size_t k = 0; k < offsets.size(); k += per)
    out.emplace_back(offsets.begin() + static_cast<std::ptrdiff_t>(k),
                     offsets.begin() + static_cast<std::ptrdiff_t>(std::min(offsets.size(), k + per)));
  return out;
}

int dimensions(int n) {
  int d = 0;
  while ((1 << d) < n) ++d;
  return d;
}

int mod(int a, int n) { return ((a % n) + n) % n; }

// One piece of the collective over the whole group: `part` is the typed buffer the blocks live
// in (the output for allgather, the accumulating scratch 0 for reduce-scatter) cut into this
// piece's blocks; `stage` and `stage + 1` are the piece's scratch buffers for messages of more
// than one block (packed before sending, unpacked after receiving; a reduce-scatter receives a
// one-block message into `stage + 1` too).
uint32_t pat_part(Schedule& s, const Part& part, Collective kind, bool compressed, uint32_t aggregate, uint32_t stage,
                  uint32_t step, Chains& chains) {
  const int n = part.size(), D = dimensions(n);
  const bool gather = kind == Collective::AllGather;
  for (int e = 0; e < D; ++e, ++step) {
    const int d = gather ? D - 1 - e : e, dist = 1 << d;
    const auto messages = messages_of(n, d, aggregate);
    for (int i = 0; i < n; ++i) {
      RankProgram& p = s.ranks[static_cast<size_t>(i)];
      Chain c{p, chains[static_cast<size_t>(i)]};
      const int to = mod(gather ? i - dist : i + dist, n), from = mod(gather ? i + dist : i - dist, n);
      // The block a message's offset t stands for, on the sending and on the receiving side.
      const auto sent = [&](int t) { return part.block(mod(gather ? i + t : i + t + dist, n)); };
      const auto got = [&](int t) { return part.block(mod(gather ? i + t + dist : i + t, n)); };
      const auto packed = [&](uint32_t buf, const std::vector<int>& ts, const auto& block) {
        uint64_t total = 0;
        for (int t : ts) total += block(t).count();
        detail::grow_scratch(p, buf, total);
        return Slice{BufKind::Scratch, buf, 0, total};
      };
      for (const auto& ts : messages) {
        if (ts.size() == 1) {
          c.send(to, part.slice(sent(ts[0])), compressed, step);
          continue;
        }
        const Slice out = packed(stage, ts, sent);
        uint64_t at = 0;
        for (int t : ts) {
          const Block b = sent(t);
          c.add({OpKind::Copy, -1, part.slice(b), Slice{BufKind::Scratch, stage, at, b.count()}, {}, step});
          at += b.count();
        }
        c.send(to, out, compressed, step);
      }
      for (const auto& ts : messages) {
        if (ts.size() == 1 && gather) {
          c.recv(from, part.slice(got(ts[0])), compressed, step);
          continue;
        }
        const Slice in = packed(stage + 1, ts, got);
        c.recv(from, in, compressed, step);
        uint64_t at = 0;
        for (int t : ts) {
          const Block b = got(t);
          const Slice piece{BufKind::Scratch, stage + 1, at, b.count()};
          c.add({gather ? OpKind::Copy : OpKind::Reduce, -1, piece, part.slice(b), {}, step});
          at += b.count();
        }
      }
    }
  }
  return step;
}

// pipe.merge: NCCL's channels run the same exchange between the same members in lockstep, so
// they are built as one channel whose pieces carry theirs side by side (loop j of every
// channel as piece j).
Pipelining pieces_of(const Pipelining& pipe) { return pipe.merge ? Pipelining{pipe.chunks, 1, false} : pipe; }

Schedule pat_base(Collective c, const char* what, int n, uint64_t count, DType dtype, Placement placement,
                  const Pipelining& pipe) {
  if (n < 1) throw ScheduleError(std::string(what) + ": group size must be >= 1, got " + std::to_string(n));
  if (placement != Placement::None && placement != Placement::PerHop)
    throw ScheduleError(std::string(what) + ": placement " + std::string(placement_name(placement)) +
                        " does not apply; use none or per-hop");
  detail::check_pipelining(what, Pipelining{pipe.chunks, pipe.channels, false});
  Schedule s = make_schedule(c, "pat", placement, n, count, dtype);
  if (pipe.chunks > 1 || pipe.channels > 1)
    s.algorithm += " chunks=" + std::to_string(pipe.chunks) + " channels=" + std::to_string(pipe.channels) +
                   (pipe.merge ? " merged" : "");
  return s;
}

// PAT over every piece of `pipe`, on the typed buffer `buf` (index 0); piece i stages its
// messages in scratch buffers first_stage + 2i and first_stage + 2i + 1. Returns pipelined()'s
// ends and the step after the last.
std::pair<std::vector<std::vector<uint32_t>>, uint32_t> pat_pieces(Schedule& s, Collective kind, uint64_t count,
                                                                   Placement placement, const Pipelining& pipe,
                                                                   uint32_t aggregate, BufKind buf,
                                                                   uint32_t first_stage) {
  const int n = s.size();
  const Pipelining run = pieces_of(pipe);
  const uint32_t pieces = run.chunks * run.channels;
  const detail::Chains start = detail::chains_after_last(s);
  uint32_t steps = 0;
  auto ends = detail::pipelined(s, count, run, [&](const Block&, uint32_t index, uint32_t delay) {
    const Part part{detail::whole_group(n), 0, count, buf, 0, 1, 0, pieces, index};
    detail::Chains chains = start;
    steps = std::max(steps, pat_part(s, part, kind, placement == Placement::PerHop, aggregate, first_stage + 2 * index,
                                     delay, chains));
  });
  return {std::move(ends), steps};
}

}  // namespace

PatSize pat_size(int n, uint32_t aggregate) {
  PatSize z;
  for (int d = 0; d < dimensions(n); ++d)
    for (const auto& ts : messages_of(n, d, aggregate)) {
      ++z.messages;
      if (ts.size() > 1) z.packed_blocks += ts.size();
    }
  z.messages *= static_cast<uint64_t>(std::max(n, 0));
  z.packed_blocks *= static_cast<uint64_t>(std::max(n, 0));
  return z;
}

Schedule pat_allgather(int n, uint64_t count, DType dtype, Placement placement, const Pipelining& pipe,
                       uint32_t aggregate) {
  Schedule s = pat_base(Collective::AllGather, "pat_allgather", n, count, dtype, placement, pipe);
  detail::allgather_prologue(s, count);
  pat_pieces(s, Collective::AllGather, count, placement, pipe, aggregate, BufKind::Output, 0);
  return s;
}

Schedule pat_reduce_scatter(int n, uint64_t count, DType dtype, Placement placement, const Pipelining& pipe,
                            uint32_t aggregate) {
  Schedule s = pat_base(Collective::ReduceScatter, "pat_reduce_scatter", n, count, dtype, placement, pipe);
  // Scratch 0 accumulates the whole vector; the pieces stage their messages from scratch 1 on.
  detail::reduce_scatter_prologue(s, count);
  const auto [ends, steps] = pat_pieces(s, Collective::ReduceScatter, count, placement, pipe, aggregate, BufKind::Scratch, 1);
  for (int r = 0; r < n; ++r) {
    RankProgram& p = s.ranks[static_cast<size_t>(r)];
    const Block mine = block_of(count, n, r);
    p.output_count = mine.count();
    // The copy of the result waits for every piece (or the prologue when there are none).
    const auto& last = ends[static_cast<size_t>(r)];
    p.ops.push_back({OpKind::Copy, -1, Slice{BufKind::Scratch, 0, mine.begin, mine.count()},
                     Slice{BufKind::Output, 0, 0, mine.count()}, last.empty() ? std::vector<uint32_t>{0} : last, steps});
  }
  return s;
}

}  // namespace compcoll::sched
