// tests/real/self_send.h — one rank that sends a compressed block to itself through the
// executor: copy input -> output; compress input -> wire 0; send wire 0 to itself and receive
// it into wire 1 (one step group); decompress wire 1 into scratch; add the scratch into the
// output (a decode-and-add pair, sched::decode_add_pairs). Output = input + input. One rank
// is all one GPU can host, and this is the one schedule of one rank whose transfers, sizes,
// budgets, queues and fused kernel all run: the MPI executor test runs it on the host
// backend over MPI_COMM_SELF, the [nccl] test on the CUDA backend over NCCL. Beside it, the
// same with three blocks whose compressions and decompressions are batches.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "codec/reduce.h"
#include "real/executor.h"
#include "real/verify.h"
#include "schedule/schedule.h"

namespace compcoll::real::test {

// A bf16 schedule of one rank over n elements, with `wires` wire buffers and a scratch of n.
inline sched::Schedule one_rank_schedule(uint64_t n, uint32_t wires) {
  sched::Schedule s;
  s.dtype = DType::BF16;
  s.count = n;
  s.ranks.resize(1);
  sched::RankProgram& p = s.ranks[0];
  p.input_count = p.output_count = n;
  p.wire_buffers = wires;
  p.scratch_counts = {n};
  return s;
}

inline sched::Schedule self_send_schedule(uint64_t n) {
  using sched::BufKind;
  using sched::OpKind;
  sched::Schedule s = one_rank_schedule(n, 2);
  sched::RankProgram& p = s.ranks[0];
  const sched::Slice in{BufKind::Input, 0, 0, n}, out{BufKind::Output, 0, 0, n}, scratch{BufKind::Scratch, 0, 0, n};
  p.ops = {{OpKind::Copy, -1, in, out, {}, 0},
           {OpKind::Compress, -1, in, sched::wire_slice(0), {}, 0},
           {OpKind::Send, 0, sched::wire_slice(0), {}, {1}, 1},
           {OpKind::Recv, 0, {}, sched::Slice{BufKind::Wire, 1, 0, n}, {}, 1},
           {OpKind::Decompress, -1, sched::wire_slice(1), scratch, {3}, 2},
           {OpKind::Reduce, -1, scratch, out, {4, 0}, 2}};
  return s;
}

// Three runs of `ex` on `in` (the first at exact sizes, which teaches the budgets): their counts,
// and the output they leave in `out`.
inline RunStats run_three_times(Executor& ex, DataBackend& b, const std::vector<uint8_t>& in, std::vector<uint8_t>& out) {
  b.upload(ex.input(), in.data(), in.size());
  RunStats st;
  for (int run = 0; run < 3; ++run) st += ex.run();
  b.synchronize();
  out.resize(ex.output_bytes());
  b.download(out.data(), ex.output(), out.size());
  return st;
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
    std::vector<uint8_t> got;
    const RunStats st = run_three_times(ex, b, in, got);
    CHECK(count_wrong(DType::BF16, got, want) == 0);
    CHECK(st.messages == 3);
    CHECK(st.fused == (m.fused && fuses ? 3u : 0u));
    CHECK(st.queued == (m.queued && queues ? 2u : 0u));  // the two runs within budgets
    CHECK(st.reruns == 0);
    CHECK(st.overflows == 0);
  }
}

// One rank that sends three compressed blocks to itself, the codec's work in batches
// (Op::batched): copy input -> output; compress the input's three blocks -> wires 0-2 (a batch);
// send each to itself and receive it into wires 3-5 (one step group); decompress them into
// scratch (a batch); add the scratch into the output. Output = input + input.
inline sched::Schedule self_send_batch_schedule(uint64_t n) {
  using sched::BufKind;
  using sched::OpKind;
  sched::Schedule s = one_rank_schedule(n, 6);
  sched::RankProgram& p = s.ranks[0];
  const uint64_t third = n / 3;
  const uint64_t at[3] = {0, third, 2 * third}, count[3] = {third, third, n - 2 * third};
  p.ops.push_back({OpKind::Copy, -1, {BufKind::Input, 0, 0, n}, {BufKind::Output, 0, 0, n}, {}, 0});
  for (uint32_t k = 0; k < 3; ++k) {  // ops 1-3
    sched::Op c{OpKind::Compress, -1, {BufKind::Input, 0, at[k], count[k]}, sched::wire_slice(k), {}, 0};
    if (k > 0) c.deps = {1}, c.batched = 1;
    p.ops.push_back(c);
  }
  for (uint32_t k = 0; k < 3; ++k) p.ops.push_back({OpKind::Send, 0, sched::wire_slice(k), {}, {1 + k}, 1});  // 4-6
  for (uint32_t k = 0; k < 3; ++k)  // 7-9
    p.ops.push_back({OpKind::Recv, 0, {}, sched::Slice{BufKind::Wire, 3 + k, 0, count[k]}, {}, 1});
  for (uint32_t k = 0; k < 3; ++k) {  // 10-12
    sched::Op d{OpKind::Decompress, -1, sched::wire_slice(3 + k), {BufKind::Scratch, 0, at[k], count[k]}, {7, 8, 9}, 2};
    if (k > 0) d.deps = {10}, d.batched = 1;
    p.ops.push_back(d);
  }
  p.ops.push_back({OpKind::Reduce, -1, {BufKind::Scratch, 0, 0, n}, {BufKind::Output, 0, 0, n}, {0, 10, 11, 12}, 2});
  return s;  // (sched::validate refuses a rank's send to itself, which one GPU needs)
}

// Runs the batch schedule with `codec` at exact sizes and within budgets (queued where the
// backend and transport queue), three runs each: the output must be input + input, every run
// must send three messages and run its two batches as one call each where the backend codes
// `codec`'s batches (`batches`), and redo nothing.
inline void check_self_send_batch(Transport& t, DataBackend& b, const std::string& codec, bool batches) {
  const uint64_t n = 300001;
  const sched::Schedule s = self_send_batch_schedule(n);
  const std::vector<uint8_t> in = timing_input(DType::BF16, n, 0, COMPCOLL_TEST_DATA_DIR, "grad");
  std::vector<uint8_t> want = in;
  reduce_add(DType::BF16, want.data(), in.data(), n);
  for (const bool budget : {false, true}) {
    CAPTURE(codec, budget);
    ExecutorOptions opt;
    opt.codec = find_plan_codec(codec);
    opt.lockstep = true;
    opt.batch_compress = opt.batch_decompress = true;
    opt.wire_budget = budget;
    opt.wire_budget_margin = 0.05;
    opt.queue_ahead = budget;
    Executor ex(s, 0, t, b, opt);
    std::vector<uint8_t> got;
    const RunStats st = run_three_times(ex, b, in, got);
    CHECK(count_wrong(DType::BF16, got, want) == 0);
    CHECK(st.messages == 9);
    CHECK(st.batches == (batches ? 6u : 0u));
    CHECK(st.reruns == 0);
  }
}

}  // namespace compcoll::real::test
