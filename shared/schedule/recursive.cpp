// shared/schedule/recursive.cpp — recursive halving/doubling (Rabenseifner) allreduce, with the
// usual fix-up for group sizes that are not a power of two.
#include <vector>

#include "schedule/algorithms.h"

namespace compcoll::sched {
namespace {

struct Program {
  RankProgram& p;
  void add(Op op) { append_chained(p, std::move(op)); }
  uint32_t new_wire() { return p.wire_buffers++; }
  static Slice wire(uint32_t w) { return wire_slice(w); }
  // Sends `src`, compressed or not.
  void send(int peer, const Slice& src, bool compressed, uint32_t step) {
    if (!compressed) return add({OpKind::Send, peer, src, {}, {}, step});
    const uint32_t w = new_wire();
    add({OpKind::Compress, -1, src, wire(w), {}, step});
    add({OpKind::Send, peer, wire(w), {}, {}, step});
  }
  // Receives into `dst` (through a wire buffer when compressed).
  void recv(int peer, const Slice& dst, bool compressed, uint32_t step) {
    if (!compressed) return add({OpKind::Recv, peer, {}, dst, {}, step});
    const uint32_t w = new_wire();
    add({OpKind::Recv, peer, {}, wire(w), {}, step});
    add({OpKind::Decompress, -1, wire(w), dst, {}, step});
  }
};

}  // namespace

Schedule recursive_allreduce(int n, uint64_t count, DType dtype, Placement placement) {
  if (n < 1) throw ScheduleError("recursive_allreduce: group size must be >= 1, got " + std::to_string(n));
  if (placement == Placement::CompressOnce)
    throw ScheduleError("recursive_allreduce: placement compress-once is not built for recursive doubling; "
                        "use none, per-hop or zipccl");
  const bool rs_compressed = placement != Placement::None;
  const bool ag_compressed = placement != Placement::None;
  Schedule s = make_schedule(Collective::AllReduce, "recursive-halving-doubling", placement, n, count, dtype);
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  const int rem = n - pof2;
  // Element range of blocks [lo, hi) when `count` is split into pof2 blocks.
  const auto range = [&](int lo, int hi) {
    const Block b = blocks_of(count, pof2, lo, hi);
    return std::pair<uint64_t, uint64_t>{b.begin, b.end};
  };
  const auto out = [&](std::pair<uint64_t, uint64_t> r) { return Slice{BufKind::Output, 0, r.first, r.second - r.first}; };
  const auto tmp = [&](std::pair<uint64_t, uint64_t> r) { return Slice{BufKind::Scratch, 0, 0, r.second - r.first}; };
  const Slice all{BufKind::Output, 0, 0, count};
  for (int r = 0; r < n; ++r) {
    RankProgram& rp = s.ranks[r];
    rp.input_count = rp.output_count = count;
    rp.scratch_counts = {count};
    Program p{rp};
    p.add({OpKind::Copy, -1, Slice{BufKind::Input, 0, 0, count}, all, {}, 0});
    uint32_t step = 0;
    // Fix-up in: among the first 2*rem ranks, even ranks hand their data to the odd one above.
    int newrank;
    if (r < 2 * rem) {
      if (r % 2 == 0) {
        p.send(r + 1, all, rs_compressed, step);
        newrank = -1;
      } else {
        p.recv(r - 1, Slice{BufKind::Scratch, 0, 0, count}, rs_compressed, step);
        p.add({OpKind::Reduce, -1, Slice{BufKind::Scratch, 0, 0, count}, all, {}, step});
        newrank = r / 2;
      }
    } else {
      newrank = r - rem;
    }
    if (rem > 0) ++step;
    const auto real_rank = [&](int nr) { return nr < rem ? 2 * nr + 1 : nr + rem; };
    if (newrank >= 0) {
      int lo = 0, hi = pof2;
      for (int d = pof2 / 2; d >= 1; d /= 2, ++step) {  // reduce-scatter by recursive halving
        const int peer = real_rank(newrank ^ d);
        const int mid = lo + (hi - lo) / 2;
        const bool upper = (newrank & d) != 0;
        const auto keep = upper ? range(mid, hi) : range(lo, mid);
        const auto give = upper ? range(lo, mid) : range(mid, hi);
        p.send(peer, out(give), rs_compressed, step);
        p.recv(peer, tmp(keep), rs_compressed, step);
        p.add({OpKind::Reduce, -1, tmp(keep), out(keep), {}, step});
        if (upper) lo = mid; else hi = mid;
      }
      for (int d = 1; d < pof2; d *= 2, ++step) {  // allgather by recursive doubling
        const int peer = real_rank(newrank ^ d);
        const int size = hi - lo;
        const bool upper = (newrank & d) != 0;
        const int plo = upper ? lo - size : hi, phi = plo + size;
        p.send(peer, out(range(lo, hi)), ag_compressed, step);
        p.recv(peer, out(range(plo, phi)), ag_compressed, step);
        lo = std::min(lo, plo);
        hi = std::max(hi, phi);
      }
    } else {
      step += 2 * static_cast<uint32_t>(__builtin_ctz(static_cast<unsigned>(pof2)));
    }
    // Fix-up out: odd ranks return the result to the even rank below.
    if (r < 2 * rem) {
      if (r % 2 == 1) p.send(r - 1, all, ag_compressed, step);
      else p.recv(r + 1, all, ag_compressed, step);
    }
  }
  return s;
}

namespace {

void require_power_of_two(const char* what, int n, Placement placement) {
  if (n < 1 || (n & (n - 1)) != 0)
    throw ScheduleError(std::string(what) + ": group size must be a power of two, got " + std::to_string(n) +
                        " (use the ring for other sizes)");
  if (placement == Placement::CompressOnce || placement == Placement::ZipCCL)
    throw ScheduleError(std::string(what) + ": placement " + std::string(placement_name(placement)) +
                        " is not built for recursive halving/doubling; use none or per-hop");
}

}  // namespace

Schedule recursive_reduce_scatter(int n, uint64_t count, DType dtype, Placement placement) {
  require_power_of_two("recursive_reduce_scatter", n, placement);
  const bool compressed = placement == Placement::PerHop;
  Schedule s = make_schedule(Collective::ReduceScatter, "recursive-halving-doubling", placement, n, count, dtype);
  const auto range = [&](int lo, int hi) {
    const Block b = blocks_of(count, n, lo, hi);
    return std::pair<uint64_t, uint64_t>{b.begin, b.end};
  };
  for (int r = 0; r < n; ++r) {
    RankProgram& rp = s.ranks[r];
    const Block mine = block_of(count, n, r);
    rp.input_count = count;
    rp.output_count = mine.count();
    rp.scratch_counts = {count, count};  // receive buffer, accumulator
    Program p{rp};
    p.add({OpKind::Copy, -1, Slice{BufKind::Input, 0, 0, count}, Slice{BufKind::Scratch, 1, 0, count}, {}, 0});
    uint32_t step = 0;
    int lo = 0, hi = n;
    for (int d = n / 2; d >= 1; d /= 2, ++step) {  // the bit of d picks the half kept
      const int mid = lo + (hi - lo) / 2;
      const bool upper = (r & d) != 0;
      const auto keep = upper ? range(mid, hi) : range(lo, mid);
      const auto give = upper ? range(lo, mid) : range(mid, hi);
      const Slice acc_keep{BufKind::Scratch, 1, keep.first, keep.second - keep.first};
      const Slice tmp{BufKind::Scratch, 0, 0, keep.second - keep.first};
      p.send(r ^ d, Slice{BufKind::Scratch, 1, give.first, give.second - give.first}, compressed, step);
      p.recv(r ^ d, tmp, compressed, step);
      p.add({OpKind::Reduce, -1, tmp, acc_keep, {}, step});
      if (upper) lo = mid; else hi = mid;
    }
    p.add({OpKind::Copy, -1, Slice{BufKind::Scratch, 1, mine.begin, mine.count()},
           Slice{BufKind::Output, 0, 0, mine.count()}, {}, step});
  }
  return s;
}

Schedule recursive_allgather(int n, uint64_t count, DType dtype, Placement placement) {
  require_power_of_two("recursive_allgather", n, placement);
  const bool compressed = placement == Placement::PerHop;
  Schedule s = make_schedule(Collective::AllGather, "recursive-halving-doubling", placement, n, count, dtype);
  const auto out = [&](int lo, int hi) {
    const Block b = blocks_of(count, n, lo, hi);
    return Slice{BufKind::Output, 0, b.begin, b.count()};
  };
  for (int r = 0; r < n; ++r) {
    RankProgram& rp = s.ranks[r];
    const Block mine = block_of(count, n, r);
    rp.input_count = mine.count();
    rp.output_count = count;
    Program p{rp};
    p.add({OpKind::Copy, -1, Slice{BufKind::Input, 0, 0, mine.count()}, out(r, r + 1), {}, 0});
    uint32_t step = 0;
    int lo = r, hi = r + 1;
    for (int d = 1; d < n; d *= 2, ++step) {  // the partner holds the adjacent range of equal size
      const int size = hi - lo;
      const int plo = (r & d) ? lo - size : hi;
      p.send(r ^ d, out(lo, hi), compressed, step);
      p.recv(r ^ d, out(plo, plo + size), compressed, step);
      lo = std::min(lo, plo);
      hi = std::max(hi, plo + size);
    }
  }
  return s;
}

}  // namespace compcoll::sched
