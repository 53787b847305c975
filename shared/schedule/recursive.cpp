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
  Schedule s;
  s.collective = Collective::AllReduce;
  s.algorithm = "recursive-halving-doubling/" + std::string(placement_name(placement));
  s.dtype = dtype;
  s.count = count;
  s.ranks.resize(n);
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  const int rem = n - pof2;
  // Element range of blocks [lo, hi) when `count` is split into pof2 blocks.
  const auto range = [&](int lo, int hi) {
    const uint64_t b = block_of(count, pof2, lo).begin;
    const uint64_t e = hi > lo ? block_of(count, pof2, hi - 1).end : b;
    return std::pair<uint64_t, uint64_t>{b, e};
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

}  // namespace compcoll::sched
