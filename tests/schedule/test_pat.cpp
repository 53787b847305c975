// tests/schedule/test_pat.cpp — NCCL's PAT allgather and reduce-scatter: exact results for
// every group size, aggregation, pipelining and placement; (n-1)/n of the data in
// ceil(log2 n) steps; the far dimension first (allgather) with one block, the next rank last
// with the most; the message count pat_size gives.
#include <catch2/catch.hpp>

#include <map>

#include "schedule/algorithms.h"
#include "schedule/exact.h"
#include "schedule/reference_executor.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::sched;

namespace {

int log2_up(int n) {
  int d = 0;
  while ((1 << d) < n) ++d;
  return d;
}

// Messages sent, in all and per (rank, peer).
struct Sends {
  uint64_t messages = 0;
  std::map<std::pair<int, int>, uint64_t> by_pair;
};
Sends sends_of(const Schedule& s) {
  Sends out;
  for (int r = 0; r < s.size(); ++r)
    for (const Op& op : s.ranks[static_cast<size_t>(r)].ops)
      if (op.kind == OpKind::Send) {
        ++out.messages;
        ++out.by_pair[{r, op.peer}];
      }
  return out;
}

}  // namespace

TEST_CASE("PAT allgather and reduce-scatter compute their collectives", "[schedule][pat]") {
  const DType dtype = DType::FP32;
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17}) {
    for (uint32_t aggregate : {0u, 1u, 2u, 3u, 8u}) {
      for (const Pipelining& pipe : {Pipelining{1, 1, false}, Pipelining{3, 2, false}, Pipelining{2, 4, true}}) {
        for (uint64_t count : {uint64_t{0}, uint64_t(n), uint64_t{101}}) {
          CAPTURE(n, aggregate, pipe.chunks, pipe.channels, pipe.merge, count);
          const auto e = test::exact_inputs(dtype, n, count);
          const Schedule rs = pat_reduce_scatter(n, count, dtype, Placement::None, pipe, aggregate);
          const Schedule ag = pat_allgather(n, count, dtype, Placement::None, pipe, aggregate);
          REQUIRE_NOTHROW(validate(rs));
          REQUIRE_NOTHROW(validate(ag));
          const auto got_rs = run_reference(rs, e.inputs);
          const auto got_ag = run_reference(ag, e.blocks);
          for (int r = 0; r < n; ++r) {
            REQUIRE(got_rs[r] == test::encoded_block(dtype, e.sum, n, r));
            REQUIRE(got_ag[r] == test::encode_values(dtype, e.gathered));
          }
        }
      }
    }
  }
}

TEST_CASE("PAT moves (n-1)/n of the data in ceil(log2 n) steps, the far ranks first", "[schedule][pat][cost]") {
  for (int n : {2, 3, 5, 8, 12, 64}) {
    const uint64_t count = uint64_t{64} * 1024 * static_cast<uint64_t>(n);  // blocks of 64 Ki elements
    CAPTURE(n);
    for (uint32_t aggregate : {0u, 1u, 4u}) {
      for (const Schedule& s : {pat_reduce_scatter(n, count, DType::BF16, Placement::None, {}, aggregate),
                                pat_allgather(n, count, DType::BF16, Placement::None, {}, aggregate)}) {
        const StepBytes b = step_bytes(s);
        CHECK(b.steps == static_cast<uint32_t>(log2_up(n)));
        for (int r = 0; r < n; ++r) CHECK(b.sent_bytes[r] == uint64_t(n - 1) * (count / n) * 2);
        const Sends sends = sends_of(s);
        CHECK(sends.messages == pat_size(n, aggregate).messages);
        // Each step talks to one peer at distance 2^d: ceil(log2 n) peers per rank.
        for (int r = 0; r < n; ++r) {
          int peers = 0;
          for (const auto& [pair, m] : sends.by_pair) peers += pair.first == r;
          CHECK(peers == log2_up(n));
        }
      }
    }
    // Allgather: the first step sends one block to rank r - 2^(D-1), the last n/2 blocks (rounded
    // up) to rank r - 1; reduce-scatter the reverse (rank r + 1 first). Unaggregated, one message
    // per block: n - 1 per rank.
    const Schedule ag = pat_allgather(n, count, DType::BF16);
    const StepBytes b = step_bytes(ag);
    // Packed blocks: a copy in at the sender, one out at the receiver (and each rank's own block
    // copied to its place in the output first).
    for (uint32_t aggregate : {0u, 2u}) {
      uint64_t copies = 0;
      for (const RankProgram& p : pat_allgather(n, count, DType::BF16, Placement::None, {}, aggregate).ranks)
        for (const Op& op : p.ops) copies += op.kind == OpKind::Copy;
      CHECK(copies == 2 * pat_size(n, aggregate).packed_blocks + uint64_t(n));
    }
    const int D = log2_up(n);
    const uint64_t block = count / n * 2;
    CHECK(b.sent[0][0] == block);
    CHECK(b.sent[0][static_cast<size_t>(D - 1)] == uint64_t(n / 2) * block);
    for (const Op& op : ag.ranks[0].ops)
      if (op.kind == OpKind::Send && op.step == static_cast<uint32_t>(D - 1)) CHECK(op.peer == n - 1);
    const Schedule rs = pat_reduce_scatter(n, count, DType::BF16);
    for (const Op& op : rs.ranks[0].ops)
      if (op.kind == OpKind::Send && op.step == 0) CHECK(op.peer == 1 % n);
    CHECK(pat_size(n, 1).messages == uint64_t(n) * uint64_t(n - 1));
    CHECK(pat_size(n, 1).packed_blocks == 0);
  }
  // Aggregated by 4 on 64 ranks: the steps of 1, 2, 4 blocks are one message each, those of 8,
  // 16 and 32 blocks 2, 4 and 8.
  CHECK(pat_size(64, 4).messages == 64 * (1 + 1 + 1 + 2 + 4 + 8));
  CHECK(pat_size(64, 4).packed_blocks == 64 * (2 + 4 + 8 + 16 + 32));
  CHECK(pat_size(64, 0).messages == 64 * 6);
  CHECK(pat_size(64, 0).packed_blocks == 64 * (63 - 1));
}

TEST_CASE("PAT with a lossless codec per hop is bitwise the uncompressed run", "[schedule][pat][compression]") {
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 64;
  for (int n : {2, 3, 6, 8}) {
    for (uint32_t aggregate : {0u, 1u}) {
      const uint64_t count = 1003;
      std::vector<std::vector<uint8_t>> inputs(n), blocks(n);
      for (int r = 0; r < n; ++r) {
        inputs[r] = test::gaussian_bytes(DType::BF16, count, 0.02, 17 + r);
        blocks[r] = test::gaussian_bytes(DType::BF16, block_of(count, n, r).count(), 0.02, 170 + r);
      }
      CAPTURE(n, aggregate);
      const Pipelining pipe{2, 1, false};
      CHECK(run_reference(pat_reduce_scatter(n, count, DType::BF16, Placement::PerHop, pipe, aggregate), inputs, opt) ==
            run_reference(pat_reduce_scatter(n, count, DType::BF16, Placement::None, pipe, aggregate), inputs));
      CHECK(run_reference(pat_allgather(n, count, DType::BF16, Placement::PerHop, pipe, aggregate), blocks, opt) ==
            run_reference(pat_allgather(n, count, DType::BF16, Placement::None, pipe, aggregate), blocks));
    }
  }
  CHECK_THROWS_AS(pat_allgather(4, 10, DType::BF16, Placement::CompressOnce), ScheduleError);
  CHECK_THROWS_AS(pat_reduce_scatter(4, 10, DType::BF16, Placement::ZipCCL), ScheduleError);
  CHECK_THROWS_AS(pat_allgather(0, 10, DType::BF16), ScheduleError);
  CHECK_THROWS_AS(pat_allgather(4, 10, DType::BF16, Placement::None, {0, 1, false}), ScheduleError);
}
