// shared/schedule/recursive.cpp — recursive halving (reduce-scatter) and recursive doubling
// (allgather) over a part (parts.h), and the allreduce that chains them (Rabenseifner), with
// the usual fix-up for group sizes that are not a power of two: of the first 2·(n - 2^k)
// members, each even one folds into the odd one above before the halving/doubling and gets
// its result from it after.
#include <vector>

#include "schedule/parts.h"

namespace compcoll::sched {
namespace detail {
namespace {

// Recursive halving/doubling among pof2 virtual ranks of a part. Member 2i (i < rem) folds
// into member 2i+1, virtual rank i; member j >= 2·rem is virtual rank j - rem. Virtual rank v
// owns fine blocks [first(v), first(v+1)): the allreduce splits the data into pof2 fine blocks
// (first(v) = v), the reduce-scatter and allgather keep the group's n blocks (first(v) = 2v
// for v < rem, v + rem after), so a virtual rank owns the blocks of the members it stands for.
struct Recursive {
  const Part& part;
  Collective kind;
  int n, pof2, rem, log2;

  Recursive(const Part& p, Collective k) : part(p), kind(k), n(p.size()), pof2(1), rem(0), log2(0) {
    while (pof2 * 2 <= n) pof2 *= 2, ++log2;
    rem = n - pof2;
  }
  bool group_blocks() const { return kind != Collective::AllReduce; }
  int fine() const { return group_blocks() ? n : pof2; }
  int first(int v) const { return !group_blocks() ? v : v < rem ? 2 * v : v + rem; }
  Block range(int lo, int hi) const { return blocks_of(part.count, fine(), first(lo), first(hi)); }
  Slice slice(int lo, int hi) const { return part.slice(range(lo, hi)); }
  Slice fine_slice(int f) const { return part.slice(blocks_of(part.count, fine(), f, f + 1)); }
  Slice tmp(uint64_t count) const { return Slice{BufKind::Scratch, part.scratch, 0, count}; }
  int virtual_of(int pos) const { return pos < 2 * rem ? (pos % 2 == 1 ? pos / 2 : -1) : pos - rem; }
  int member(int v) const { return part.members[v < rem ? 2 * v + 1 : v + rem]; }

  // Reduce-scatter by recursive halving: virtual rank v keeps the half of its range that holds
  // its own blocks and sends the other half; it ends owning range(v, v + 1), reduced.
  void halving(Chain& c, int v, bool compressed, uint32_t step) const {
    int lo = 0, hi = pof2;
    for (int d = pof2 / 2; d >= 1; d /= 2, ++step) {
      const int peer = member(v ^ d), mid = lo + (hi - lo) / 2;
      const bool upper = (v & d) != 0;
      const Slice keep = upper ? slice(mid, hi) : slice(lo, mid);
      c.send(peer, upper ? slice(lo, mid) : slice(mid, hi), compressed, step);
      c.recv(peer, tmp(keep.count), compressed, step);
      c.add({OpKind::Reduce, -1, tmp(keep.count), keep, {}, step});
      if (upper) lo = mid; else hi = mid;
    }
  }

  // Allgather by recursive doubling from range(v, v + 1): the partner at distance d holds the
  // adjacent range of equal size. Compress-once: `held` are the wires of the fine blocks of
  // the range, in order, each compressed once by its owner; they are forwarded unchanged (one
  // message per fine block, so 2^k messages at step k) and come back as the wires of the
  // whole vector.
  void doubling(Chain& c, int v, bool per_hop, bool once, uint32_t step, std::vector<uint32_t>& held) const {
    int lo = v, hi = v + 1;
    for (int d = 1; d < pof2; d *= 2, ++step) {
      const int peer = member(v ^ d), size = hi - lo;
      const int plo = (v & d) ? lo - size : hi, phi = plo + size;
      if (!once) {
        c.send(peer, slice(lo, hi), per_hop, step);
        c.recv(peer, slice(plo, phi), per_hop, step);
      } else {
        for (uint32_t w : held) c.send_wire(peer, w, step);
        std::vector<uint32_t> got;
        for (int f = first(plo); f < first(phi); ++f) got.push_back(c.recv_wire(peer, fine_slice(f), step));
        held.insert(plo < lo ? held.begin() : held.end(), got.begin(), got.end());
      }
      lo = std::min(lo, plo);
      hi = std::max(hi, phi);
    }
  }
};

}  // namespace

// The three collectives over a part. Reduce-scatter and allreduce reduce into the part's
// buffer; the allgather's part buffer starts with each member's block in place.
uint32_t recursive_part(Schedule& s, const Part& part, Collective kind, Placement placement, uint32_t step,
                        Chains& chains) {
  const Recursive rec(part, kind);
  const bool reduces = kind != Collective::AllGather;
  const bool rs_compressed = placement == Placement::PerHop || placement == Placement::ZipCCL;
  // Zipccl is per hop in both phases here: forwarding every block's bytes unchanged costs a
  // message per block (n-1 per rank), too many at scale; compress-once does that on request.
  const bool once = placement == Placement::CompressOnce;
  const bool ag_per_hop = placement == Placement::PerHop || placement == Placement::ZipCCL;
  const uint32_t fold_in = step, core = step + (rec.rem > 0 ? 1 : 0);
  const uint32_t halving_steps = reduces ? rec.log2 : 0, doubling_steps = kind != Collective::ReduceScatter ? rec.log2 : 0;
  const uint32_t fold_out = core + halving_steps + doubling_steps;
  for (int pos = 0; pos < rec.n; ++pos) {
    const int r = part.members[pos];
    Chain c{s.ranks[r], chains[r]};
    if (reduces && rec.n > 1) grow_scratch(s.ranks[r], part.scratch, part.count);
    const int v = rec.virtual_of(pos);
    const bool folded = pos < 2 * rec.rem;  // pairs (even, odd) of the fix-up
    const int partner = folded ? part.members[pos ^ 1] : -1;
    std::vector<uint32_t> held;  // compress-once allgather: wires of the fine blocks held
    // Fold in: the even member hands its data (reductions) or its block (allgather) over.
    if (folded && reduces) {
      if (v < 0) c.send(partner, part.all(), rs_compressed, fold_in);
      else {
        c.recv(partner, rec.tmp(part.count), rs_compressed, fold_in);
        c.add({OpKind::Reduce, -1, rec.tmp(part.count), part.all(), {}, fold_in});
      }
    } else if (folded) {
      if (v < 0 && once) c.send_wire(partner, c.compress(rec.fine_slice(pos), fold_in), fold_in);
      else if (v < 0) c.send(partner, rec.fine_slice(pos), ag_per_hop, fold_in);
      else if (once) held.push_back(c.recv_wire(partner, rec.fine_slice(pos - 1), fold_in));
      else c.recv(partner, rec.fine_slice(pos - 1), ag_per_hop, fold_in);
    }
    if (v >= 0) {
      if (reduces) rec.halving(c, v, rs_compressed, core);
      if (kind != Collective::ReduceScatter) {
        if (once)  // the virtual rank's own fine blocks not yet held: compressed here, once
          for (int f = rec.first(v) + static_cast<int>(held.size()); f < rec.first(v + 1); ++f)
            held.push_back(c.compress(rec.fine_slice(f), core + halving_steps));
        rec.doubling(c, v, ag_per_hop, once, core + halving_steps, held);
      }
    }
    // Fold out: the odd member gives the even one its result.
    if (!folded) continue;
    if (kind == Collective::ReduceScatter) {
      if (v >= 0) c.send(partner, rec.fine_slice(pos - 1), rs_compressed, fold_out);
      else c.recv(partner, rec.fine_slice(pos), rs_compressed, fold_out);
    } else if (once) {  // the wires of every fine block but the even member's own
      const int skip = kind == Collective::AllGather ? pos - (v >= 0 ? 1 : 0) : -1;
      for (int f = 0, i = 0; f < rec.fine(); ++f) {
        if (f == skip) { i += v >= 0; continue; }
        if (v >= 0) c.send_wire(partner, held[i++], fold_out);
        else c.recv_wire(partner, rec.fine_slice(f), fold_out);
      }
    } else if (v >= 0) {
      c.send(partner, part.all(), rs_compressed || ag_per_hop, fold_out);
    } else {
      c.recv(partner, part.all(), rs_compressed || ag_per_hop, fold_out);
    }
  }
  return fold_out + (rec.rem > 0 ? 1 : 0);
}

uint32_t recursive_allreduce_part(Schedule& s, const Part& part, Placement placement, uint32_t step, Chains& chains) {
  return recursive_part(s, part, Collective::AllReduce, placement, step, chains);
}

}  // namespace detail

using namespace detail;

Schedule recursive_allreduce(int n, uint64_t count, DType dtype, Placement placement) {
  return flat_allreduce("recursive_allreduce", "recursive-halving-doubling", recursive_allreduce_part, n, count, dtype,
                        placement);
}

namespace {

Schedule recursive_base(Collective kind, const char* what, int n, uint64_t count, DType dtype, Placement placement) {
  if (n < 1) throw ScheduleError(std::string(what) + ": group size must be >= 1, got " + std::to_string(n));
  if (placement == Placement::ZipCCL || (kind == Collective::ReduceScatter && placement == Placement::CompressOnce))
    throw ScheduleError(std::string(what) + ": placement " + std::string(placement_name(placement)) +
                        " does not apply; use none, per-hop" +
                        (kind == Collective::AllGather ? " or compress-once" : ""));
  return make_schedule(kind, "recursive-halving-doubling", placement, n, count, dtype);
}

}  // namespace

Schedule recursive_reduce_scatter(int n, uint64_t count, DType dtype, Placement placement) {
  Schedule s = recursive_base(Collective::ReduceScatter, "recursive_reduce_scatter", n, count, dtype, placement);
  // Scratch 0 accumulates the whole vector, scratch 1 receives.
  reduce_scatter_prologue(s, count);
  Chains chains = chains_after_last(s);
  const uint32_t step =
      recursive_part(s, Part{whole_group(n), 0, count, BufKind::Scratch, 0, 1, 1}, Collective::ReduceScatter, placement, 0, chains);
  for (int r = 0; r < n; ++r) {
    const Block mine = block_of(count, n, r);
    s.ranks[r].output_count = mine.count();
    append_after(s.ranks[r], {OpKind::Copy, -1, Slice{BufKind::Scratch, 0, mine.begin, mine.count()},
                              Slice{BufKind::Output, 0, 0, mine.count()}, {}, step}, chains[r]);
  }
  return s;
}

Schedule recursive_allgather(int n, uint64_t count, DType dtype, Placement placement) {
  Schedule s = recursive_base(Collective::AllGather, "recursive_allgather", n, count, dtype, placement);
  allgather_prologue(s, count);
  Chains chains = chains_after_last(s);
  recursive_part(s, Part{whole_group(n), 0, count}, Collective::AllGather, placement, 0, chains);
  return s;
}

}  // namespace compcoll::sched
