// tests/real/self_send.h — one rank that sends a compressed block to itself through the
// executor: copy input -> output; compress input -> wire 0; send wire 0 to itself and receive
// it into wire 1 (one step group); decompress wire 1 into scratch; add the scratch into the
// output (a decode-and-add pair, sched::decode_add_pairs). Output = input + input. One rank
// is all one GPU can host, and this is the one schedule of one rank whose transfers, sizes,
// budgets, queues and fused kernel all run: the MPI executor test runs it on the host
// backend over MPI_COMM_SELF, the [nccl] test on the CUDA backend over NCCL.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "codec/reduce.h"
#include "real/executor.h"
#include "real/verify.h"
#include "schedule/schedule.h"

namespace compcoll::real::test {

inline sched::Schedule self_send_schedule(uint64_t n) {
  using sched::BufKind;
  using sched::OpKind;
  sched::Schedule s;
  s.dtype = DType::BF16;
  s.count = n;
  s.ranks.resize(1);
  sched::RankProgram& p = s.ranks[0];
  p.input_count = p.output_count = n;
  p.wire_buffers = 2;
  p.scratch_counts = {n};
  const sched::Slice in{BufKind::Input, 0, 0, n}, out{BufKind::Output, 0, 0, n}, scratch{BufKind::Scratch, 0, 0, n};
  p.ops = {{OpKind::Copy, -1, in, out, {}, 0},
           {OpKind::Compress, -1, in, sched::wire_slice(0), {}, 0},
           {OpKind::Send, 0, sched::wire_slice(0), {}, {1}, 1},
           {OpKind::Recv, 0, {}, sched::Slice{BufKind::Wire, 1, 0, n}, {}, 1},
           {OpKind::Decompress, -1, sched::wire_slice(1), scratch, {3}, 2},
           {OpKind::Reduce, -1, scratch, out, {4, 0}, 2}};
  return s;
}

// Runs the schedule with `codec` in every mode, three runs each (the first at exact sizes,
// which teaches the budgets), on real gradients: the output must be input + input, every run
// must send one message, fuse where the backend does (`fuses`), queue its budgeted runs where
// backend and transport queue (`queues`) and redo nothing.
inline void check_self_send(Transport& t, DataBackend& b, const std::string& codec, bool fuses, bool queues) {
  struct Mode {
    const char* name;
    bool budget, queued, fused;
    double margin;
  };
  const uint64_t n = 300001;
  const sched::Schedule s = self_send_schedule(n);
  REQUIRE(sched::decode_add_pairs(s.ranks[0].ops).size() == 1);
  const std::vector<uint8_t> in = timing_input(DType::BF16, n, 0, COMPCOLL_TEST_DATA_DIR, "grad");
  std::vector<uint8_t> want = in;
  reduce_add(DType::BF16, want.data(), in.data(), n);
  for (const Mode m : {Mode{"exact sizes", false, false, false, 0}, Mode{"fused", false, false, true, 0},
                       Mode{"budget", true, false, false, 0}, Mode{"budget 5%", true, false, true, 0.05},
                       Mode{"budget 5%, queued, fused", true, true, true, 0.05}}) {
    CAPTURE(codec, m.name);
    ExecutorOptions opt;
    opt.codec = find_plan_codec(codec);
    opt.lockstep = true;
    opt.fuse_decode_add = m.fused;
    opt.wire_budget = m.budget;
    opt.wire_budget_margin = m.margin;
    opt.queue_ahead = m.queued;
    Executor ex(s, 0, t, b, opt);
    b.upload(ex.input(), in.data(), in.size());
    RunStats st;
    for (int run = 0; run < 3; ++run) st += ex.run();
    b.synchronize();
    std::vector<uint8_t> got(ex.output_bytes());
    b.download(got.data(), ex.output(), got.size());
    CHECK(count_wrong(DType::BF16, got, want) == 0);
    CHECK(st.messages == 3);
    CHECK(st.fused == (m.fused && fuses ? 3u : 0u));
    CHECK(st.queued == (m.queued && queues ? 2u : 0u));  // the two runs within budgets
    CHECK(st.reruns == 0);
    CHECK(st.overflows == 0);
  }
}

}  // namespace compcoll::real::test
