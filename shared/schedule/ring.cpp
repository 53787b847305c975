// shared/schedule/ring.cpp — ring algorithms.
#include "schedule/algorithms.h"

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

namespace {

// Builds one rank's part of a ring over `group` (real ranks, in ring order) on the elements
// [base, base + count) of its buffers, split into group-size blocks. A block index is taken
// mod the group size; "owned" is the block a rank holds complete when a phase starts
// (allgather) or ends (reduce-scatter). Hierarchical algorithms run rings over subgroups;
// pipelined chunks and channels run one RingRank per piece of the data. A RingRank's ops form
// one dependency chain, starting after op `after` (so pieces can run concurrently).
class RingRank {
 public:
  RingRank(std::vector<int> group, int pos, uint64_t base, uint64_t count, RankProgram& p, int64_t after,
           uint32_t scratch = 0)
      : group_(std::move(group)), n_(static_cast<int>(group_.size())), r_(pos), base_(base), count_(count),
        p_(p), last_(after), scratch_(scratch) {}

  int steps() const { return n_ - 1; }  // per phase
  int mod(int v) const { return ((v % n_) + n_) % n_; }
  Slice block(BufKind buf, int b, uint32_t index = 0) const {
    const Block blk = block_of(count_, n_, mod(b));
    return Slice{buf, index, base_ + blk.begin, blk.count()};
  }
  static Slice wire(uint32_t w) { return wire_slice(w); }
  uint32_t new_wire() { return p_.wire_buffers++; }
  void after(int64_t op) { last_ = op; }
  void add(Op op) { append_after(p_, std::move(op), last_); }

  // Reduce-scatter step k of n-1; `acc` (output or a scratch buffer) accumulates; after the
  // last step the rank owns block `owned`.
  void reduce_scatter_step(int k, BufKind acc, uint32_t acc_index, int owned, bool compressed, uint32_t step) {
    const int next = group_[mod(r_ + 1)], prev = group_[mod(r_ - 1)];
    // Send block owned-1-k, receive (from the rank that owns owned-1 at the end) block
    // owned-2-k and add it; after n-1 steps the last block added is `owned`.
    const int sb = owned - 1 - k, rb = owned - 2 - k;
    const Slice tmp{BufKind::Scratch, scratch_, 0, block(BufKind::Scratch, rb).count};  // receive buffer
    if (compressed) {
      const uint32_t out_w = new_wire(), in_w = new_wire();
      add({OpKind::Compress, -1, block(acc, sb, acc_index), wire(out_w), {}, step});
      add({OpKind::Send, next, wire(out_w), {}, {}, step});
      add({OpKind::Recv, prev, {}, wire(in_w), {}, step});
      add({OpKind::Decompress, -1, wire(in_w), tmp, {}, step});
    } else {
      add({OpKind::Send, next, block(acc, sb, acc_index), {}, {}, step});
      add({OpKind::Recv, prev, {}, tmp, {}, step});
    }
    add({OpKind::Reduce, -1, tmp, block(acc, rb, acc_index), {}, step});
  }

  // Allgather step k of n-1 in the output; the rank starts owning block `owned` complete.
  void allgather_step(int k, int owned, Placement placement, uint32_t step) {
    const int next = group_[mod(r_ + 1)], prev = group_[mod(r_ - 1)];
    const bool per_hop = placement == Placement::PerHop;
    const bool once = placement == Placement::CompressOnce || placement == Placement::ZipCCL;
    const int sb = owned - k, rb = owned - k - 1;
    if (per_hop || (once && k == 0)) {
      forward_ = new_wire();
      add({OpKind::Compress, -1, block(BufKind::Output, sb), wire(forward_), {}, step});
    }
    if (per_hop || once) {
      const uint32_t in_w = new_wire();
      add({OpKind::Send, next, wire(forward_), {}, {}, step});
      add({OpKind::Recv, prev, {}, wire(in_w), {}, step});
      add({OpKind::Decompress, -1, wire(in_w), block(BufKind::Output, rb), {}, step});
      forward_ = in_w;  // compress-once: pass on the bytes received
    } else {
      add({OpKind::Send, next, block(BufKind::Output, sb), {}, {}, step});
      add({OpKind::Recv, prev, {}, block(BufKind::Output, rb), {}, step});
    }
  }

  void reduce_scatter(BufKind acc, uint32_t acc_index, int owned, bool compressed, uint32_t& step) {
    for (int k = 0; k < steps(); ++k) reduce_scatter_step(k, acc, acc_index, owned, compressed, step++);
  }
  void allgather(int owned, Placement placement, uint32_t& step) {
    for (int k = 0; k < steps(); ++k) allgather_step(k, owned, placement, step++);
  }

 private:
  std::vector<int> group_;
  int n_, r_;
  uint64_t base_, count_;
  RankProgram& p_;
  int64_t last_;
  uint32_t scratch_;
  uint32_t forward_ = 0;
};

std::vector<int> whole_group(int n) {
  std::vector<int> g(n);
  for (int i = 0; i < n; ++i) g[i] = i;
  return g;
}

Schedule ring_base(Collective c, const char* what, int n, uint64_t count, DType dtype, Placement placement) {
  if (n < 1) throw ScheduleError(std::string(what) + ": group size must be >= 1, got " + std::to_string(n));
  return make_schedule(c, "ring", placement, n, count, dtype);
}

uint64_t largest_block(uint64_t count, int n) {
  uint64_t largest = 0;
  for (int b = 0; b < n; ++b) largest = std::max(largest, block_of(count, n, b).count());
  return largest;
}

}  // namespace

Schedule ring_allreduce(int n, uint64_t count, DType dtype, Placement placement, const Pipelining& pipe) {
  if (pipe.chunks < 1 || pipe.channels < 1)
    throw ScheduleError("ring_allreduce: chunks and channels must be >= 1, got " + std::to_string(pipe.chunks) + " and " +
                        std::to_string(pipe.channels));
  Schedule s = ring_base(Collective::AllReduce, "ring_allreduce", n, count, dtype, placement);
  if (pipe.chunks > 1 || pipe.channels > 1)
    s.algorithm += " chunks=" + std::to_string(pipe.chunks) + " channels=" + std::to_string(pipe.channels);
  const bool rs_compressed = placement == Placement::PerHop || placement == Placement::ZipCCL;
  const int pieces = static_cast<int>(pipe.chunks * pipe.channels);
  for (int r = 0; r < n; ++r) {
    RankProgram& p = s.ranks[r];
    p.input_count = p.output_count = count;
    append_chained(p, {OpKind::Copy, -1, Slice{BufKind::Input, 0, 0, count}, Slice{BufKind::Output, 0, 0, count}, {}, 0});
    // Piece (channel c, chunk j) = part c*chunks+j of the data, its own ring with its own
    // receive buffer; chunk j runs j steps behind chunk 0, so the chunks of a channel follow
    // each other through the ring (pipelining) and channels run side by side.
    std::vector<RingRank> ring;
    for (int piece = 0; piece < pieces; ++piece) {
      const Block part = block_of(count, pieces, piece);
      p.scratch_counts.push_back(largest_block(part.count(), n));
      ring.emplace_back(whole_group(n), r, part.begin, part.count(), p, 0, static_cast<uint32_t>(piece));
    }
    const int phase = n - 1, delay_max = static_cast<int>(pipe.chunks) - 1;
    for (int t = 0; t < 2 * phase + delay_max; ++t) {
      for (int piece = 0; piece < pieces; ++piece) {
        const int k = t - piece % static_cast<int>(pipe.chunks);
        if (k < 0 || k >= 2 * phase) continue;
        if (k < phase) ring[piece].reduce_scatter_step(k, BufKind::Output, 0, r + 1, rs_compressed, t);
        else ring[piece].allgather_step(k - phase, r + 1, placement, t);
      }
    }
  }
  return s;
}

Schedule ring_reduce_scatter(int n, uint64_t count, DType dtype, Placement placement) {
  if (placement == Placement::CompressOnce || placement == Placement::ZipCCL)
    throw ScheduleError("ring_reduce_scatter: placement " + std::string(placement_name(placement)) +
                        " does not apply (blocks change at every hop); use none or per-hop");
  Schedule s = ring_base(Collective::ReduceScatter, "ring_reduce_scatter", n, count, dtype, placement);
  for (int r = 0; r < n; ++r) {
    RankProgram& p = s.ranks[r];
    const Block mine = block_of(count, n, r);
    p.input_count = count;
    p.output_count = mine.count();
    p.scratch_counts = {largest_block(count, n), count};  // receive buffer, accumulator
    RingRank ring(whole_group(n), r, 0, count, p, -1);
    ring.add({OpKind::Copy, -1, Slice{BufKind::Input, 0, 0, count}, Slice{BufKind::Scratch, 1, 0, count}, {}, 0});
    uint32_t step = 0;
    ring.reduce_scatter(BufKind::Scratch, 1, r, placement == Placement::PerHop, step);
    ring.add({OpKind::Copy, -1, Slice{BufKind::Scratch, 1, mine.begin, mine.count()},
              Slice{BufKind::Output, 0, 0, mine.count()}, {}, step});
  }
  return s;
}

Schedule ring_allgather(int n, uint64_t count, DType dtype, Placement placement) {
  if (placement == Placement::ZipCCL)
    throw ScheduleError("ring_allgather: placement zipccl is for allreduce; use none, per-hop or compress-once");
  Schedule s = ring_base(Collective::AllGather, "ring_allgather", n, count, dtype, placement);
  for (int r = 0; r < n; ++r) {
    RankProgram& p = s.ranks[r];
    const Block mine = block_of(count, n, r);
    p.input_count = mine.count();
    p.output_count = count;
    RingRank ring(whole_group(n), r, 0, count, p, -1);
    ring.add({OpKind::Copy, -1, Slice{BufKind::Input, 0, 0, mine.count()},
              Slice{BufKind::Output, 0, mine.begin, mine.count()}, {}, 0});
    uint32_t step = 0;
    ring.allgather(r, placement, step);
  }
  return s;
}

Schedule hierarchical_allreduce(int nodes, int gpus_per_node, uint64_t count, DType dtype, Placement placement) {
  if (nodes < 1 || gpus_per_node < 1)
    throw ScheduleError("hierarchical_allreduce: nodes and gpus_per_node must be >= 1, got " + std::to_string(nodes) +
                        " x " + std::to_string(gpus_per_node));
  const int g = gpus_per_node, n = nodes * g;
  Schedule s = make_schedule(Collective::AllReduce, "hierarchical-ring", placement, n, count, dtype);
  const bool rs_compressed = placement == Placement::PerHop || placement == Placement::ZipCCL;
  for (int r = 0; r < n; ++r) {
    RankProgram& p = s.ranks[r];
    p.input_count = p.output_count = count;
    p.scratch_counts = {largest_block(count, g)};
    const int node = r / g, local = r % g;
    std::vector<int> intra(g), inter(nodes);
    for (int i = 0; i < g; ++i) intra[i] = node * g + i;
    for (int k = 0; k < nodes; ++k) inter[k] = k * g + local;
    RingRank in_node(intra, local, 0, count, p, -1);
    in_node.add({OpKind::Copy, -1, Slice{BufKind::Input, 0, 0, count}, Slice{BufKind::Output, 0, 0, count}, {}, 0});
    uint32_t step = 0;
    in_node.reduce_scatter(BufKind::Output, 0, local, rs_compressed, step);  // local rank l owns block l
    const Block mine = block_of(count, g, local);
    RingRank across(inter, node, mine.begin, mine.count(), p, static_cast<int64_t>(p.ops.size()) - 1);
    across.reduce_scatter(BufKind::Output, 0, node + 1, rs_compressed, step);
    across.allgather(node + 1, placement, step);
    in_node.after(static_cast<int64_t>(p.ops.size()) - 1);
    in_node.allgather(local, placement, step);
  }
  return s;
}

}  // namespace compcoll::sched
