// shared/schedule/parts.cpp — what the builders share: groups, dependency chains, compressed
// sends and receives, scratch sizes, and the interleaving of pipelined pieces (parts.h).
#include "schedule/parts.h"

#include <algorithm>
#include <numeric>

namespace compcoll::sched::detail {

std::vector<int> whole_group(int n) {
  std::vector<int> g(n);
  std::iota(g.begin(), g.end(), 0);
  return g;
}

Chains chains_after_last(const Schedule& s) {
  Chains c(s.ranks.size());
  for (size_t r = 0; r < s.ranks.size(); ++r) c[r] = static_cast<int64_t>(s.ranks[r].ops.size()) - 1;
  return c;
}

Schedule flat_allreduce(const char* what, const char* algorithm, AllreducePart part, int n, uint64_t count, DType dtype,
                        Placement placement) {
  if (n < 1) throw ScheduleError(std::string(what) + ": group size must be >= 1, got " + std::to_string(n));
  Schedule s = make_schedule(Collective::AllReduce, algorithm, placement, n, count, dtype);
  allreduce_prologue(s, count);
  Chains chains = chains_after_last(s);
  part(s, Part{whole_group(n), 0, count}, placement, 0, chains);
  return s;
}

void allreduce_prologue(Schedule& s, uint64_t count) {
  for (RankProgram& p : s.ranks) {
    p.input_count = p.output_count = count;
    append_chained(p, {OpKind::Copy, -1, Slice{BufKind::Input, 0, 0, count}, Slice{BufKind::Output, 0, 0, count}, {}, 0});
  }
}

void reduce_scatter_prologue(Schedule& s, uint64_t count) {
  for (RankProgram& p : s.ranks) {
    p.input_count = count;
    p.scratch_counts = {count};
    append_chained(p, {OpKind::Copy, -1, Slice{BufKind::Input, 0, 0, count}, Slice{BufKind::Scratch, 0, 0, count}, {}, 0});
  }
}

void allgather_prologue(Schedule& s, uint64_t count) {
  const int n = s.size();
  for (int r = 0; r < n; ++r) {
    RankProgram& p = s.ranks[r];
    const Block mine = block_of(count, n, r);
    p.input_count = mine.count();
    p.output_count = count;
    append_chained(p, {OpKind::Copy, -1, Slice{BufKind::Input, 0, 0, mine.count()},
                       Slice{BufKind::Output, 0, mine.begin, mine.count()}, {}, 0});
  }
}

void grow_scratch(RankProgram& p, uint32_t index, uint64_t count) {
  if (p.scratch_counts.size() <= index) p.scratch_counts.resize(index + 1, 0);
  p.scratch_counts[index] = std::max(p.scratch_counts[index], count);
}

void Chain::send(int peer, const Slice& src, bool compressed, uint32_t step) {
  if (!compressed) return add({OpKind::Send, peer, src, {}, {}, step});
  send_wire(peer, compress(src, step), step);
}

void Chain::recv(int peer, const Slice& dst, bool compressed, uint32_t step) {
  if (!compressed) return add({OpKind::Recv, peer, {}, dst, {}, step});
  recv_wire(peer, dst, step);
}

uint32_t Chain::compress(const Slice& src, uint32_t step) {
  const uint32_t w = new_wire();
  add({OpKind::Compress, -1, src, wire_slice(w), {}, step});
  return w;
}

void Chain::send_wire(int peer, uint32_t w, uint32_t step) { add({OpKind::Send, peer, wire_slice(w), {}, {}, step}); }

uint32_t Chain::recv_wire(int peer, const Slice& dst, uint32_t step) {
  const uint32_t w = new_wire();
  add({OpKind::Recv, peer, {}, wire_slice(w), {}, step});
  add({OpKind::Decompress, -1, wire_slice(w), dst, {}, step});
  return w;
}

void check_pipelining(const char* what, const Pipelining& pipe) {
  if (pipe.chunks < 1 || pipe.channels < 1)
    throw ScheduleError(std::string(what) + ": chunks and channels must be >= 1, got " + std::to_string(pipe.chunks) +
                        " and " + std::to_string(pipe.channels));
  if (pipe.merge && pipe.chunks != 1)
    throw ScheduleError(std::string(what) + ": merged channels need chunks 1, got " + std::to_string(pipe.chunks));
}

std::vector<std::vector<uint32_t>> pipelined(
    Schedule& s, uint64_t count, const Pipelining& pipe,
    const std::function<void(const Block& piece, uint32_t index, uint32_t delay)>& build,
    const std::vector<Block>* ranges) {
  const uint32_t pieces = pipe.chunks * pipe.channels;
  const size_t n = s.ranks.size();
  std::vector<size_t> start(n);
  for (size_t r = 0; r < n; ++r) start[r] = s.ranks[r].ops.size();
  // ends[r][i]: size of rank r's program after piece i.
  std::vector<std::vector<size_t>> ends(n, std::vector<size_t>(pieces));
  for (uint32_t i = 0; i < pieces; ++i) {
    build(ranges ? (*ranges)[i] : block_of(count, static_cast<int>(pieces), static_cast<int>(i)), i, i % pipe.chunks);
    for (size_t r = 0; r < n; ++r) {
      // A channel's messages travel on a connection of their own (its lane); a piece's lane L
      // (the builder's) becomes channel + L x channels.
      auto& ops = s.ranks[r].ops;
      for (size_t k = i == 0 ? start[r] : ends[r][i - 1]; k < ops.size(); ++k)
        if (ops[k].kind == OpKind::Send || ops[k].kind == OpKind::Recv)
          ops[k].lane = ops[k].lane * pipe.channels + i / pipe.chunks;
      ends[r][i] = ops.size();
    }
  }
  // last[r]: the last op of each piece on rank r that has any.
  std::vector<std::vector<uint32_t>> last(n);
  for (size_t r = 0; r < n; ++r)
    for (uint32_t i = 0; i < pieces; ++i)
      if (ends[r][i] > (i == 0 ? start[r] : ends[r][i - 1])) last[r].push_back(static_cast<uint32_t>(ends[r][i] - 1));
  if (pieces == 1) return last;
  for (size_t r = 0; r < n; ++r) {
    auto& ops = s.ranks[r].ops;
    const size_t first = start[r], m = ops.size() - first;
    std::vector<uint32_t> piece_of(m);
    for (uint32_t i = 0, j = 0; j < m; ++j) {
      while (first + j >= ends[r][i]) ++i;
      piece_of[j] = i;
      if (j > 0 && piece_of[j - 1] == i && ops[first + j].step < ops[first + j - 1].step)
        throw ScheduleError("pipelined: rank " + std::to_string(r) + " op " + std::to_string(first + j) +
                            ": steps decrease within a piece; this builder cannot be pipelined");
    }
    std::vector<uint32_t> order(m);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      const uint32_t sa = ops[first + a].step, sb = ops[first + b].step;
      return sa != sb ? sa < sb : piece_of[a] < piece_of[b];
    });
    std::vector<uint32_t> new_index(m);
    for (uint32_t k = 0; k < m; ++k) new_index[order[k]] = static_cast<uint32_t>(first + k);
    std::vector<Op> sorted;
    sorted.reserve(m);
    for (uint32_t k = 0; k < m; ++k) {
      Op op = std::move(ops[first + order[k]]);
      for (uint32_t& d : op.deps)
        if (d >= first) d = new_index[d - first];
      sorted.push_back(std::move(op));
    }
    std::move(sorted.begin(), sorted.end(), ops.begin() + static_cast<long>(first));
    for (uint32_t& l : last[r]) l = new_index[l - first];
    // Lockstep (sched::plan_lockstep) posts a step's transfers as one group after the group
    // before. So that one chunk's transfers can be on the wire while another chunk's
    // computations run, each chunk's step is a group of its own, in turn: a piece's step s
    // (base step s - delay) becomes (s - delay) x chunks + delay. Channels keep sharing a step;
    // the program's order is unchanged.
    if (pipe.chunks == 1) continue;
    for (uint32_t k = 0; k < m; ++k) {
      Op& op = ops[first + k];
      const uint32_t delay = piece_of[order[k]] % pipe.chunks;
      if (op.step < delay)
        throw ScheduleError("pipelined: rank " + std::to_string(r) + " op " + std::to_string(first + k) + ": step " +
                            std::to_string(op.step) + " before its piece's start, step " + std::to_string(delay));
      op.step = (op.step - delay) * pipe.chunks + delay;
    }
  }
  return last;
}

}  // namespace compcoll::sched::detail
