// shared/schedule/ring.cpp — ring algorithms: a ring over a part (parts.h) and the flat ring
// allreduce, reduce-scatter and allgather built from it; also the block and placement helpers.
#include <functional>
#include <map>

#include "schedule/parts.h"

namespace compcoll::sched {

Block block_of(uint64_t count, int parts, int b) {
  const uint64_t base = count / parts, extra = count % parts;
  const uint64_t ub = static_cast<uint64_t>(b);
  const uint64_t begin = ub * base + std::min<uint64_t>(ub, extra);
  return {begin, begin + base + (ub < extra ? 1 : 0)};
}

Block blocks_of(uint64_t count, int parts, int lo, int hi) {
  const uint64_t begin = block_of(count, parts, lo).begin;
  return {begin, hi > lo ? block_of(count, parts, hi - 1).end : begin};
}

std::string_view placement_name(Placement p) {
  switch (p) {
    case Placement::None: return "none";
    case Placement::PerHop: return "per-hop";
    case Placement::CompressOnce: return "compress-once";
    case Placement::ZipCCL: return "zipccl";
  }
  return "unknown";
}

Schedule make_schedule(Collective c, std::string_view algorithm, Placement placement, int n, uint64_t count,
                       DType dtype) {
  Schedule s;
  s.collective = c;
  s.algorithm = std::string(algorithm) + "/" + std::string(placement_name(placement));
  s.dtype = dtype;
  s.count = count;
  s.ranks.resize(n);
  return s;
}

namespace detail {
namespace {

// One member's side of a ring over a part (parts.h): members in ring order, member -> next.
// A block index is taken mod the group size; "owned" is the block a member holds complete
// when a phase starts (allgather) or ends (reduce-scatter). Receives land in the part's
// scratch buffer; the member's ops form one dependency chain.
class RingRank {
 public:
  RingRank(const Part& part, int pos, RankProgram& p, int64_t& last)
      : part_(part), n_(part.size()), me_(part.members[mod(pos)]), next_(part.members[mod(pos + 1)]),
        prev_(part.members[mod(pos - 1)]), chain_{p, last} {}

  int mod(int v) const { return ((v % n_) + n_) % n_; }
  Slice block(int b) const { return part_.slice(part_.block(mod(b))); }
  // Whether the hop from rank a to rank b may carry compressed bytes (Part::node_size).
  bool compresses(int a, int b) const { return part_.node_size <= 0 || a / part_.node_size != b / part_.node_size; }

  // Reduce-scatter step k of n-1: send block owned-1-k, receive (from the member that owns
  // owned-1 at the end) block owned-2-k and add it; after n-1 steps the last block added is
  // `owned`.
  void reduce_scatter_step(int k, int owned, bool compressed, uint32_t step) {
    const Slice dst = block(owned - 2 - k);
    const Slice tmp{BufKind::Scratch, part_.scratch, 0, dst.count};
    chain_.send(next_, block(owned - 1 - k), compressed && compresses(me_, next_), step);
    chain_.recv(prev_, tmp, compressed && compresses(prev_, me_), step);
    chain_.add({OpKind::Reduce, -1, tmp, dst, {}, step});
  }

  // Allgather step k of n-1; the member starts owning block `owned` complete. Compress-once
  // (and zipccl) compress the owned block at step 0 and forward the bytes received after. With
  // Part::node_size a hop inside a node moves the block as it is, and the first hop out of a
  // node compresses it again (a block received over such a hop is held uncompressed).
  void allgather_step(int k, int owned, Placement placement, uint32_t step) {
    const Slice out = block(owned - k), in = block(owned - k - 1);
    if (placement == Placement::None) {
      chain_.send(next_, out, false, step);
      chain_.recv(prev_, in, false, step);
      return;
    }
    if (!compresses(me_, next_)) {
      chain_.send(next_, out, false, step);
    } else {
      if (placement == Placement::PerHop || k == 0 || !holds_wire_) forward_ = chain_.compress(out, step);
      chain_.send_wire(next_, forward_, step);
    }
    holds_wire_ = compresses(prev_, me_);
    if (holds_wire_) forward_ = chain_.recv_wire(prev_, in, step);
    else chain_.recv(prev_, in, false, step);
  }

 private:
  const Part& part_;
  int n_, me_, next_, prev_;
  Chain chain_;
  uint32_t forward_ = 0;
  bool holds_wire_ = false;  // forward_ is the stream of the block received last
};

uint64_t largest_block(const Part& part) {
  uint64_t largest = 0;
  for (int b = 0; b < part.size(); ++b) largest = std::max(largest, part.block(b).count());
  return largest;
}

}  // namespace

uint32_t ring_reduce_scatter_part(Schedule& s, const Part& part, int owned_shift, bool compressed, uint32_t step,
                                  Chains& chains) {
  const int n = part.size();
  const uint64_t largest = n > 1 ? largest_block(part) : 0;
  for (int pos = 0; pos < n; ++pos) {
    const int r = part.members[pos];
    if (n > 1) grow_scratch(s.ranks[r], part.scratch, largest);
    RingRank ring(part, pos, s.ranks[r], chains[r]);
    for (int k = 0; k + 1 < n; ++k) ring.reduce_scatter_step(k, pos + owned_shift, compressed, step + k);
  }
  return step + static_cast<uint32_t>(n - 1);
}

uint32_t ring_allgather_part(Schedule& s, const Part& part, int owned_shift, Placement placement, uint32_t step,
                             Chains& chains) {
  const int n = part.size();
  for (int pos = 0; pos < n; ++pos) {
    const int r = part.members[pos];
    RingRank ring(part, pos, s.ranks[r], chains[r]);
    for (int k = 0; k + 1 < n; ++k) ring.allgather_step(k, pos + owned_shift, placement, step + k);
  }
  return step + static_cast<uint32_t>(n - 1);
}

uint32_t ring_allreduce_part(Schedule& s, const Part& part, Placement placement, uint32_t step, Chains& chains) {
  // Member i ends the reduce-scatter owning block i+1 and starts the allgather with it.
  // CompressOnce compresses only the allgather (a reduce-scatter block changes at every hop).
  const bool rs_compressed = placement == Placement::PerHop || placement == Placement::ZipCCL;
  step = ring_reduce_scatter_part(s, part, 1, rs_compressed, step, chains);
  return ring_allgather_part(s, part, 1, placement, step, chains);
}

}  // namespace detail

namespace {

using namespace detail;

// The members of a ring, by channel: the rank order (flat rings) or a rail ring.
using RingOf = std::function<std::vector<int>(uint32_t channel)>;

Schedule ring_base(Collective c, const char* name, const char* what, int n, uint64_t count, DType dtype,
                   Placement placement, const Pipelining& pipe) {
  if (n < 1) throw ScheduleError(std::string(what) + ": group size must be >= 1, got " + std::to_string(n));
  check_pipelining(what, pipe);
  Schedule s = make_schedule(c, name, placement, n, count, dtype);
  if (pipe.chunks > 1 || pipe.channels > 1)
    s.algorithm += " chunks=" + std::to_string(pipe.chunks) + " channels=" + std::to_string(pipe.channels);
  return s;
}

// Algorithm block b of a ring over `members` is block members[b], so that member i owns rank
// members[i]'s block (reduce-scatter and allgather keep the layout whatever the ring order).
std::vector<int> layout_order(const std::vector<int>& members) {
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i] != static_cast<int>(i)) return members;
  return {};
}

// The rings the pieces of a pipelined schedule run on. Without Pipelining::merge, piece i
// (channel i / chunks) on ring_of(i / chunks), as `pipe` asks. With it, the channels of each
// distinct ring (by its members) as one piece, groups in the order of their first channel, each
// as large as the first.
class PieceRings {
 public:
  PieceRings(const char* what, const Pipelining& pipe, const RingOf& ring_of) : pipe_(pipe), ring_of_(ring_of) {
    if (!pipe.merge) return;
    std::map<std::vector<int>, size_t> seen;
    for (uint32_t c = 0; c < pipe.channels; ++c) {
      const auto [it, fresh] = seen.emplace(ring_of(c), groups_.size());
      if (fresh) groups_.emplace_back();
      groups_[it->second].push_back(c);
    }
    for (const auto& g : groups_)
      if (g.size() != groups_[0].size())
        throw ScheduleError(std::string(what) + ": merged channels need every ring to carry as many channels; " +
                            std::to_string(pipe.channels) + " channels make " + std::to_string(groups_.size()) +
                            " rings of " + std::to_string(groups_[0].size()) + " and " + std::to_string(g.size()));
    piece_groups_.resize(pipe.channels);
    for (uint32_t g = 0; g < groups_.size(); ++g)
      for (uint32_t c : groups_[g]) piece_groups_[c] = g;
  }
  bool merged() const { return pipe_.merge; }
  // What pipelined() runs: `pipe`, or one channel per group.
  Pipelining pieces() const {
    return merged() ? Pipelining{1, static_cast<uint32_t>(groups_.size()), false} : pipe_;
  }
  std::vector<int> members(uint32_t piece) const { return ring_of_(merged() ? groups_[piece][0] : piece / pipe_.chunks); }
  const std::vector<std::vector<uint32_t>>& groups() const { return groups_; }
  const std::vector<uint32_t>& piece_groups() const { return piece_groups_; }  // merged: each channel's group
  void label(Schedule& s) const {
    if (merged()) s.algorithm += " merged=" + std::to_string(groups_.size());
  }

 private:
  Pipelining pipe_;
  const RingOf& ring_of_;
  std::vector<std::vector<uint32_t>> groups_;
  std::vector<uint32_t> piece_groups_;
};

Schedule allreduce_rings(Schedule s, uint64_t count, Placement placement, const Pipelining& pipe,
                         const RingOf& ring_of, int node_size = 0) {
  allreduce_prologue(s, count);
  // Piece (channel c, chunk j) = part c*chunks+j of the data, its own ring with its own
  // receive buffer and chain; chunk j runs j steps behind chunk 0, so the chunks of a channel
  // follow each other through the ring (pipelining) and channels run side by side.
  const Chains start = chains_after_last(s);
  const PieceRings rings("ring_allreduce", pipe, ring_of);
  // Merged channels (no groups otherwise): a group's pieces (channel c's: part c of the data)
  // side by side, groups in order; block k of the group's ring is the sum of its pieces' blocks k.
  const int n = s.size();
  std::vector<Block> ranges;
  std::vector<std::vector<uint64_t>> bounds;
  uint64_t at = 0;
  for (const auto& group : rings.groups()) {
    std::vector<uint64_t> b(static_cast<size_t>(n) + 1, 0);
    for (uint32_t c : group) {
      const uint64_t q = block_of(count, static_cast<int>(pipe.channels), static_cast<int>(c)).count();
      for (int k = 0; k < n; ++k) b[static_cast<size_t>(k)] += block_of(q, n, k).begin;
      b[static_cast<size_t>(n)] += q;
    }
    ranges.push_back({at, at + b.back()});
    at += b.back();
    bounds.push_back(std::move(b));
  }
  pipelined(
      s, count, rings.pieces(),
      [&](const Block& piece, uint32_t index, uint32_t delay) {
        Part part{rings.members(index)};
        part.base = piece.begin;
        part.count = piece.count();
        part.scratch = index;
        if (rings.merged()) part.bounds = bounds[index];
        part.node_size = node_size;
        Chains chains = start;
        ring_allreduce_part(s, part, placement, delay, chains);
      },
      rings.merged() ? &ranges : nullptr);
  rings.label(s);
  return s;
}

Schedule reduce_scatter_rings(Schedule s, int n, uint64_t count, Placement placement, const Pipelining& pipe,
                              const RingOf& ring_of, int node_size = 0) {
  if (placement == Placement::CompressOnce || placement == Placement::ZipCCL)
    throw ScheduleError("ring_reduce_scatter: placement " + std::string(placement_name(placement)) +
                        " does not apply (blocks change at every hop); use none or per-hop");
  // Scratch 0 accumulates the whole vector; pieces receive into scratch 1, 2, ...
  reduce_scatter_prologue(s, count);
  // Pipelined pieces split every block (piece i of block b), so rank r still ends with block r.
  // Merged channels: a group's pieces of each block side by side (Part::piece_groups).
  const PieceRings rings("ring_reduce_scatter", pipe, ring_of);
  const Chains start = chains_after_last(s);
  uint32_t steps = 0;
  const auto ends = pipelined(s, count, rings.pieces(), [&](const Block&, uint32_t index, uint32_t delay) {
    Part part{rings.members(index), 0, count, BufKind::Scratch, 0, 1, 1 + index, pipe.chunks * pipe.channels, index};
    part.order = layout_order(part.members);
    part.piece_groups = rings.piece_groups();
    part.node_size = node_size;
    Chains chains = start;
    steps = std::max(steps, ring_reduce_scatter_part(s, part, 0, placement == Placement::PerHop, delay, chains));
  });
  rings.label(s);
  for (int r = 0; r < n; ++r) {
    RankProgram& p = s.ranks[r];
    const Block mine = block_of(count, n, r);
    p.output_count = mine.count();
    // The copy of the result waits for every piece (or the first copy when there are none).
    Op copy{OpKind::Copy, -1, Slice{BufKind::Scratch, 0, mine.begin, mine.count()},
            Slice{BufKind::Output, 0, 0, mine.count()}, ends[r].empty() ? std::vector<uint32_t>{0} : ends[r], steps};
    p.ops.push_back(std::move(copy));
  }
  return s;
}

Schedule allgather_rings(Schedule s, uint64_t count, Placement placement, const Pipelining& pipe,
                         const RingOf& ring_of, int node_size = 0) {
  if (placement == Placement::ZipCCL)
    throw ScheduleError("ring_allgather: placement zipccl is for allreduce; use none, per-hop or compress-once");
  allgather_prologue(s, count);
  const PieceRings rings("ring_allgather", pipe, ring_of);
  const Chains start = chains_after_last(s);
  pipelined(s, count, rings.pieces(), [&](const Block&, uint32_t index, uint32_t delay) {
    Part part{rings.members(index), 0, count, BufKind::Output, 0, 1, index, pipe.chunks * pipe.channels, index};
    part.order = layout_order(part.members);
    part.piece_groups = rings.piece_groups();
    part.node_size = node_size;
    Chains chains = start;
    ring_allgather_part(s, part, 0, placement, delay, chains);
  });
  rings.label(s);
  return s;
}

RingOf flat_ring(int n) {
  return [n](uint32_t) { return whole_group(n); };
}

RingOf rail_rings(const char* what, int nodes, int g) {
  if (nodes < 1 || g < 1)
    throw ScheduleError(std::string(what) + ": expected at least one node of at least one GPU, got " +
                        std::to_string(nodes) + " x " + std::to_string(g));
  return [nodes, g](uint32_t channel) { return rail_ring_members(nodes, g, static_cast<int>(channel)); };
}

// A rail ring's `intra`: unset or the placement itself, every hop as the placement says (0);
// none, the hops inside a node move data as it is and only those between nodes compress (the
// node size g, Part::node_size; the label says " intra=none"). Other values: ScheduleError.
int network_only(const char* what, Schedule& s, Placement placement, std::optional<Placement> intra, int g) {
  if (!intra || *intra == placement || placement == Placement::None) return 0;
  if (*intra != Placement::None)
    throw ScheduleError(std::string(what) + ": intra placement " + std::string(placement_name(*intra)) +
                        " does not apply; rail rings take intra none (only the hops between nodes compress)");
  s.algorithm += " intra=none";
  return g;
}

}  // namespace

std::vector<int> rail_ring_members(int nodes, int g, int channel) {
  std::vector<int> m;
  m.reserve(static_cast<size_t>(nodes) * static_cast<size_t>(g));
  const int c = ((channel % g) + g) % g;
  for (int k = 0; k < nodes; ++k)
    for (int i = 0; i < g; ++i) {
      // Even nodes: c, c+1, ..., c-1 (leave on rail c-1); odd nodes: c-1, c-2, ..., c (enter
      // on rail c-1, leave on rail c). Every hop between nodes stays on one rail, except the
      // hop that closes a ring over an odd number of nodes.
      const int local = k % 2 == 0 ? (c + i) % g : (((c - 1 - i) % g) + g) % g;
      m.push_back(k * g + local);
    }
  return m;
}

Schedule ring_allreduce(int n, uint64_t count, DType dtype, Placement placement, const Pipelining& pipe) {
  Schedule s = ring_base(Collective::AllReduce, "ring", "ring_allreduce", n, count, dtype, placement, pipe);
  return allreduce_rings(std::move(s), count, placement, pipe, flat_ring(n));
}

Schedule ring_reduce_scatter(int n, uint64_t count, DType dtype, Placement placement, const Pipelining& pipe) {
  Schedule s = ring_base(Collective::ReduceScatter, "ring", "ring_reduce_scatter", n, count, dtype, placement, pipe);
  return reduce_scatter_rings(std::move(s), n, count, placement, pipe, flat_ring(n));
}

Schedule ring_allgather(int n, uint64_t count, DType dtype, Placement placement, const Pipelining& pipe) {
  Schedule s = ring_base(Collective::AllGather, "ring", "ring_allgather", n, count, dtype, placement, pipe);
  return allgather_rings(std::move(s), count, placement, pipe, flat_ring(n));
}

Schedule rail_ring_allreduce(int nodes, int g, uint64_t count, DType dtype, Placement placement, const Pipelining& pipe,
                             std::optional<Placement> intra) {
  const RingOf rings = rail_rings("rail_ring_allreduce", nodes, g);
  Schedule s = ring_base(Collective::AllReduce, "rail-ring", "rail_ring_allreduce", nodes * g, count, dtype, placement, pipe);
  const int node_size = network_only("rail_ring_allreduce", s, placement, intra, g);
  return allreduce_rings(std::move(s), count, placement, pipe, rings, node_size);
}

Schedule rail_ring_reduce_scatter(int nodes, int g, uint64_t count, DType dtype, Placement placement,
                                  const Pipelining& pipe, std::optional<Placement> intra) {
  const RingOf rings = rail_rings("rail_ring_reduce_scatter", nodes, g);
  Schedule s = ring_base(Collective::ReduceScatter, "rail-ring", "rail_ring_reduce_scatter", nodes * g, count, dtype,
                         placement, pipe);
  const int node_size = network_only("rail_ring_reduce_scatter", s, placement, intra, g);
  return reduce_scatter_rings(std::move(s), nodes * g, count, placement, pipe, rings, node_size);
}

Schedule rail_ring_allgather(int nodes, int g, uint64_t count, DType dtype, Placement placement, const Pipelining& pipe,
                             std::optional<Placement> intra) {
  const RingOf rings = rail_rings("rail_ring_allgather", nodes, g);
  Schedule s =
      ring_base(Collective::AllGather, "rail-ring", "rail_ring_allgather", nodes * g, count, dtype, placement, pipe);
  const int node_size = network_only("rail_ring_allgather", s, placement, intra, g);
  return allgather_rings(std::move(s), count, placement, pipe, rings, node_size);
}

}  // namespace compcoll::sched
