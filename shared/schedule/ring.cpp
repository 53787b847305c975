// shared/schedule/ring.cpp — ring algorithms.
#include "schedule/algorithms.h"

namespace compcoll::sched {

Block block_of(uint64_t count, int parts, int b) {
  const uint64_t base = count / parts, extra = count % parts;
  const uint64_t ub = static_cast<uint64_t>(b);
  const uint64_t begin = ub * base + std::min<uint64_t>(ub, extra);
  return {begin, begin + base + (ub < extra ? 1 : 0)};
}

Schedule ring_allreduce(int n, uint64_t count, DType dtype) {
  if (n < 1) throw ScheduleError("ring_allreduce: group size must be >= 1, got " + std::to_string(n));
  Schedule s;
  s.collective = Collective::AllReduce;
  s.algorithm = "ring";
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
    // Each op waits for the one before it: the simplest correct order (no pipelining yet).
    auto add = [&p](Op op) {
      if (!p.ops.empty()) op.deps = {static_cast<uint32_t>(p.ops.size() - 1)};
      p.ops.push_back(std::move(op));
    };
    auto slice = [&](BufKind buf, int b) {
      const Block blk = block_of(count, n, b);
      return Slice{buf, 0, blk.begin, blk.count()};
    };
    add({OpKind::Copy, -1, Slice{BufKind::Input, 0, 0, count}, Slice{BufKind::Output, 0, 0, count}, {}, 0});
    const int next = mod(r + 1), prev = mod(r - 1);
    uint32_t step = 0;
    for (int k = 0; k < n - 1; ++k, ++step) {  // reduce-scatter
      const int send_b = mod(r - k), recv_b = mod(r - k - 1);
      const Block rb = block_of(count, n, recv_b);
      add({OpKind::Send, next, slice(BufKind::Output, send_b), {}, {}, step});
      add({OpKind::Recv, prev, {}, Slice{BufKind::Scratch, 0, 0, rb.count()}, {}, step});
      add({OpKind::Reduce, -1, Slice{BufKind::Scratch, 0, 0, rb.count()}, slice(BufKind::Output, recv_b), {}, step});
    }
    for (int k = 0; k < n - 1; ++k, ++step) {  // allgather
      add({OpKind::Send, next, slice(BufKind::Output, mod(r + 1 - k)), {}, {}, step});
      add({OpKind::Recv, prev, {}, slice(BufKind::Output, mod(r - k)), {}, step});
    }
  }
  return s;
}

}  // namespace compcoll::sched
