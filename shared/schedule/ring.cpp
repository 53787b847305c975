// shared/schedule/ring.cpp — ring algorithms.
#include "schedule/algorithms.h"

namespace compcoll::sched {

Block block_of(uint64_t count, int parts, int b) {
  const uint64_t base = count / parts, extra = count % parts;
  const uint64_t ub = static_cast<uint64_t>(b);
  const uint64_t begin = ub * base + std::min<uint64_t>(ub, extra);
  return {begin, begin + base + (ub < extra ? 1 : 0)};
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

Schedule ring_allreduce(int n, uint64_t count, DType dtype, Placement placement) {
  if (n < 1) throw ScheduleError("ring_allreduce: group size must be >= 1, got " + std::to_string(n));
  const bool rs_compressed = placement == Placement::PerHop || placement == Placement::ZipCCL;
  const bool ag_per_hop = placement == Placement::PerHop;
  const bool ag_once = placement == Placement::CompressOnce || placement == Placement::ZipCCL;
  Schedule s;
  s.collective = Collective::AllReduce;
  s.algorithm = "ring/" + std::string(placement_name(placement));
  s.dtype = dtype;
  s.count = count;
  s.ranks.resize(n);
  const auto mod = [n](int v) { return ((v % n) + n) % n; };
  uint64_t largest = 0;
  for (int b = 0; b < n; ++b) largest = std::max(largest, block_of(count, n, b).count());
  for (int r = 0; r < n; ++r) {
    RankProgram& p = s.ranks[r];
    p.input_count = p.output_count = count;
    p.scratch_counts = {largest};
    // One wire buffer per step and direction, so that no buffer is reused while a concurrent
    // executor may still be sending it.
    p.wire_buffers = placement == Placement::None ? 0 : static_cast<uint32_t>(4 * n);
    uint32_t next_wire = 0;
    // Each op waits for the one before it: the simplest correct order (no pipelining yet).
    auto add = [&p](Op op) {
      if (!p.ops.empty()) op.deps = {static_cast<uint32_t>(p.ops.size() - 1)};
      p.ops.push_back(std::move(op));
    };
    auto slice = [&](BufKind buf, int b) {
      const Block blk = block_of(count, n, b);
      return Slice{buf, 0, blk.begin, blk.count()};
    };
    auto wire = [](uint32_t w) { return Slice{BufKind::Wire, w, 0, 0}; };
    add({OpKind::Copy, -1, Slice{BufKind::Input, 0, 0, count}, Slice{BufKind::Output, 0, 0, count}, {}, 0});
    const int next = mod(r + 1), prev = mod(r - 1);
    uint32_t step = 0;
    for (int k = 0; k < n - 1; ++k, ++step) {  // reduce-scatter
      const int send_b = mod(r - k), recv_b = mod(r - k - 1);
      const Slice tmp{BufKind::Scratch, 0, 0, block_of(count, n, recv_b).count()};
      if (rs_compressed) {
        const uint32_t out_w = next_wire++, in_w = next_wire++;
        add({OpKind::Compress, -1, slice(BufKind::Output, send_b), wire(out_w), {}, step});
        add({OpKind::Send, next, wire(out_w), {}, {}, step});
        add({OpKind::Recv, prev, {}, wire(in_w), {}, step});
        add({OpKind::Decompress, -1, wire(in_w), tmp, {}, step});
      } else {
        add({OpKind::Send, next, slice(BufKind::Output, send_b), {}, {}, step});
        add({OpKind::Recv, prev, {}, tmp, {}, step});
      }
      add({OpKind::Reduce, -1, tmp, slice(BufKind::Output, recv_b), {}, step});
    }
    uint32_t forward = 0;  // compress-once: the wire buffer to pass on at the next step
    for (int k = 0; k < n - 1; ++k, ++step) {  // allgather
      const int send_b = mod(r + 1 - k), recv_b = mod(r - k);
      if (ag_per_hop || (ag_once && k == 0)) {
        forward = next_wire++;
        add({OpKind::Compress, -1, slice(BufKind::Output, send_b), wire(forward), {}, step});
      }
      if (ag_per_hop || ag_once) {
        const uint32_t in_w = next_wire++;
        add({OpKind::Send, next, wire(forward), {}, {}, step});
        add({OpKind::Recv, prev, {}, wire(in_w), {}, step});
        add({OpKind::Decompress, -1, wire(in_w), slice(BufKind::Output, recv_b), {}, step});
        forward = in_w;
      } else {
        add({OpKind::Send, next, slice(BufKind::Output, send_b), {}, {}, step});
        add({OpKind::Recv, prev, {}, slice(BufKind::Output, recv_b), {}, step});
      }
    }
  }
  return s;
}

}  // namespace compcoll::sched
