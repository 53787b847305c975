// tests/schedule/test_nvls.cpp — NCCL's NVLS allreduce on one node: exact sums for every group
// size, channel count and chunking (the switch rank reduces), in any order a concurrent
// executor may run it; the traffic NVLink SHARP has: each GPU sends and receives (1 + 1/g) x
// the data, all of it to and from the switch; and what the builder refuses.
#include <catch2/catch.hpp>

#include "schedule/algorithms.h"
#include "schedule/build.h"
#include "schedule/exact.h"
#include "schedule/reference_executor.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::sched;
using test::encode_values;

namespace {

// Every GPU rank ends with the exact sum, in program order and in two random orders a
// concurrent executor may run (inputs: one per rank, empty for the switches).
void check_exact(const Schedule& s, const test::ExactInputs& e) {
  validate(s);
  for (uint64_t seed : {uint64_t{0}, uint64_t{7}}) {
    ReferenceOptions opt;
    opt.order_seed = seed;
    const auto out = run_reference(s, e.inputs, opt);
    for (int r = 0; r < s.gpu_ranks(); ++r) REQUIRE(out[r] == encode_values(DType::BF16, e.sum));
  }
}

}  // namespace

TEST_CASE("NVLS allreduce is exact for every group size, channel count and chunking", "[schedule][nvls][slow]") {
  for (int g : {2, 3, 4, 8}) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t(g + 1), uint64_t{517}}) {
      auto e = test::exact_inputs(DType::BF16, g, count);
      e.inputs.emplace_back();  // the switch holds no input
      for (Pipelining pipe : {Pipelining{1, 1}, Pipelining{3, 1}, Pipelining{2, 4}, Pipelining{2, 16}}) {
        CAPTURE(g, count, pipe.chunks, pipe.channels);
        const Schedule s = nvls_allreduce(g, count, DType::BF16, Placement::None, pipe);
        REQUIRE(s.size() == g + 1);
        CHECK(s.gpu_ranks() == g);
        CHECK(s.is_switch(g));
        check_exact(s, e);
      }
    }
  }
}

TEST_CASE("NVLS moves (1 + 1/g) x the data through each GPU's port, to and from the switch only",
          "[schedule][nvls][cost]") {
  const int g = 8;
  const uint64_t count = 1 << 16, bytes = count * 4;
  const uint32_t channels = 4, chunks = 4;  // 16 pieces: each GPU is the head of two
  const Schedule s = nvls_allreduce(g, count, DType::FP32, Placement::None, Pipelining{chunks, channels});
  validate(s);
  const StepBytes b = step_bytes(s);
  for (int r = 0; r < g; ++r) {
    CAPTURE(r);
    uint64_t received = 0;
    for (uint64_t x : b.received[r]) received += x;
    CHECK(b.sent_bytes[r] == bytes + bytes / g);
    CHECK(received == bytes + bytes / g);
    for (const Op& op : s.ranks[r].ops)
      if (op.kind == OpKind::Send || op.kind == OpKind::Recv) CHECK(op.peer == g);
  }
  // The switch takes in every GPU's data and the heads' sums, and sends the sums to the heads
  // and every sum to every GPU.
  CHECK(b.sent_bytes[g] == bytes + g * bytes);
  // Lanes: part h of channel c's pieces on lane c + h x channels (each head's stream), the
  // heads' round trips on lane c + g x channels: a multicast goes out on its part's lane.
  for (const Op& op : s.ranks[g].ops) {
    if (op.kind != OpKind::Send) continue;
    CHECK(op.lane < (g + 1) * channels);
    if (op.lane >= g * channels) CHECK(op.src.count == count / channels / chunks / g);  // a head's sum
  }
  for (int r = 0; r < g; ++r)
    for (const Op& op : s.ranks[r].ops)
      if (op.kind == OpKind::Send && op.lane >= g * channels) CHECK(int(op.lane / channels) == g);
}

TEST_CASE("NVLS by name: one node, no compression; merged channels as one", "[schedule][nvls]") {
  BuildSpec b;
  b.algorithm = "nvls";
  b.nranks = 8;
  b.gpus_per_node = 8;
  b.count = 100;
  b.pipe = {2, 4};
  const Schedule s = build_schedule(b);
  CHECK(s.algorithm == "nvls/none chunks=2 channels=4");
  CHECK(s.switches == 1);
  CHECK(s.switch_span == 8);
  validate(s);
  b.placement = Placement::PerHop;
  CHECK_THROWS_WITH(build_schedule(b), Catch::Contains("placement per-hop does not apply"));
  b.placement = Placement::None;
  b.pipe = {2, 4, true};  // merged: the 4 channels as one, carrying their pieces side by side
  const Schedule merged = build_schedule(b);
  CHECK(merged.algorithm == "nvls/none chunks=2 channels=4 merged");
  for (const Op& op : merged.ranks[0].ops)  // one channel's lanes: the 8 parts' and the round trip's
    if (op.kind == OpKind::Send) CHECK(op.lane <= 8);
  uint64_t sends = 0, merged_sends = 0;
  for (const auto& r : s.ranks) for (const Op& op : r.ops) sends += op.kind == OpKind::Send;
  for (const auto& r : merged.ranks) for (const Op& op : r.ops) merged_sends += op.kind == OpKind::Send;
  CHECK(merged_sends * 4 == sends);
  b.pipe = {1, 1};
  b.nranks = 16;
  CHECK_THROWS_WITH(build_schedule(b), Catch::Contains("one node only"));
  b.nranks = 1;
  b.gpus_per_node = 1;
  CHECK_THROWS_WITH(build_schedule(b), Catch::Contains("at least 2 GPUs"));
  b.collective = Collective::AllGather;
  b.nranks = 8;
  b.gpus_per_node = 8;
  CHECK_THROWS_WITH(build_schedule(b), Catch::Contains("unknown allgather algorithm 'nvls'"));
}

TEST_CASE("A switch rank holds no data and runs no codec", "[schedule][nvls]") {
  Schedule s = nvls_allreduce(4, 64, DType::BF16);
  s.switch_span = 3;
  CHECK_THROWS_WITH(validate(s), Catch::Contains("do not cover"));
  s = nvls_allreduce(4, 64, DType::BF16);
  s.ranks[4].input_count = 64;
  CHECK_THROWS_WITH(validate(s), Catch::Contains("holds no input or output"));
  s = nvls_allreduce(4, 64, DType::BF16);
  s.ranks[4].wire_buffers = 1;
  s.ranks[4].ops.push_back({OpKind::Compress, -1, Slice{BufKind::Scratch, 0, 0, 16}, wire_slice(0), {}, 9});
  CHECK_THROWS_WITH(validate(s), Catch::Contains("a switch rank does not compress"));
}

TEST_CASE("NVLS-Tree allreduce is exact for every shape, channel count and chunking", "[schedule][nvls]") {
  for (auto [nodes, g] : std::vector<std::pair<int, int>>{{2, 2}, {2, 8}, {3, 2}, {4, 3}, {5, 2}, {8, 2}}) {
    const int n = nodes * g;
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t(n + 1), uint64_t{517}}) {
      auto e = test::exact_inputs(DType::BF16, n, count);
      e.inputs.resize(static_cast<size_t>(n + nodes));  // the switches hold no input
      for (Pipelining pipe : {Pipelining{1, 1}, Pipelining{3, 2}, Pipelining{2, 5}}) {
        CAPTURE(nodes, g, count, pipe.chunks, pipe.channels);
        const Schedule s = nvls_tree_allreduce(nodes, g, count, DType::BF16, Placement::None, pipe);
        REQUIRE(s.gpu_ranks() == n);
        CHECK(s.switches == nodes);
        check_exact(s, e);
      }
    }
  }
}

TEST_CASE("NVLS-Tree: inside a node what NVLS moves, across nodes each head's part up and down its tree",
          "[schedule][nvls][cost]") {
  const int nodes = 4, g = 8, n = nodes * g;
  const uint32_t channels = 4, chunks = 2;
  const uint64_t count = 1 << 16, bytes = count * 4;
  const Schedule s = nvls_tree_allreduce(nodes, g, count, DType::FP32, Placement::None, Pipelining{chunks, channels});
  validate(s);
  uint64_t across = 0;
  for (int r = 0; r < n; ++r)
    for (const Op& op : s.ranks[r].ops) {
      if (op.kind != OpKind::Send) continue;
      if (op.peer >= n) {
        CHECK(op.peer == n + r / g);  // its own node's switch
        continue;
      }
      CHECK(op.peer % g == r % g);  // head h to head h: the rail of part h
      CHECK(op.peer / g != r / g);
      across += op.src.count * 4;
    }
  // Every tree edge carries each part once up and once down: 2 (nodes - 1) x S / g per head.
  CHECK(across == 2 * uint64_t(nodes - 1) * bytes);
  const StepBytes b = step_bytes(s);
  for (int k = 0; k < nodes; ++k) CHECK(b.sent_bytes[n + k] == bytes + g * bytes);  // each switch as on one node
  BuildSpec spec;
  spec.algorithm = "nvls-tree";
  spec.nranks = 8;
  spec.gpus_per_node = 8;
  spec.count = 64;
  CHECK_THROWS_WITH(build_schedule(spec), Catch::Contains("at least 2 nodes"));
  spec.nranks = 16;
  CHECK(build_schedule(spec).algorithm == "nvls-tree/none");
  CHECK(has_switch_ranks(spec));
}
