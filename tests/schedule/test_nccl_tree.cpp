// tests/schedule/test_nccl_tree.cpp — NCCL's tree allreduce: the binary trees of nodes as
// NCCL's trees.cc builds them, exact sums for every shape, channel count and chunking, and
// the traffic NCCL's tree has: two network hops per node and channel (one up, one down), on
// the channel's rail, and a depth that grows with the log of the nodes.
#include <catch2/catch.hpp>

#include <set>

#include "schedule/algorithms.h"
#include "schedule/build.h"
#include "schedule/exact.h"
#include "schedule/reference_executor.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::sched;
using test::encode_values;

TEST_CASE("NCCL's binary trees of nodes: one root, every node reached, the second tree mirrored or shifted",
          "[schedule][nccl-tree]") {
  // NCCL's in-order tree of 8 nodes (trees.cc): 0 -> 4; 4 -> 2, 6; 2 -> 1, 3; 6 -> 5, 7.
  CHECK(nccl_tree_parents(8, 0) == std::vector<int>{-1, 2, 4, 2, 0, 6, 4, 6});
  // Its mirror (even node count): node r's parent is 7 - parent(7 - r).
  CHECK(nccl_tree_parents(8, 1) == std::vector<int>{1, 3, 1, 7, 5, 3, 5, -1});
  // Odd counts shift by one: node 1 is the second tree's root.
  CHECK(nccl_tree_parents(5, 0) == std::vector<int>{-1, 2, 4, 2, 0});
  CHECK(nccl_tree_parents(5, 1) == std::vector<int>{1, -1, 3, 0, 3});
  for (int n = 1; n <= 40; ++n)
    for (int tree : {0, 1}) {
      CAPTURE(n, tree);
      const auto up = nccl_tree_parents(n, tree);
      int roots = 0, depth_max = 0;
      for (int r = 0; r < n; ++r) {
        roots += up[r] < 0;
        int d = 0;
        for (int v = r; up[v] >= 0 && d <= n; v = up[v]) ++d;
        REQUIRE(d <= n);  // no cycle
        depth_max = std::max(depth_max, d);
      }
      CHECK(roots == 1);
      int log2n = 0;
      while ((1 << log2n) < n) ++log2n;
      CHECK(depth_max <= log2n);
    }
  CHECK_THROWS_AS(nccl_tree_parents(0, 0), ScheduleError);
}

TEST_CASE("NCCL's tree allreduce is exact for every shape, channel count and chunking", "[schedule][nccl-tree]") {
  for (auto [nodes, g] : std::vector<std::pair<int, int>>{{1, 1}, {1, 4}, {4, 1}, {2, 2}, {3, 2}, {5, 3}, {4, 8}}) {
    const int n = nodes * g;
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t(n + 1), uint64_t{1003}}) {
      const auto e = test::exact_inputs(DType::BF16, n, count);
      for (Pipelining pipe : {Pipelining{1, 1}, Pipelining{1, 2}, Pipelining{3, 2}, Pipelining{2, 2 * uint32_t(g)},
                              Pipelining{1, 5}}) {
        CAPTURE(nodes, g, count, pipe.chunks, pipe.channels);
        const Schedule s = nccl_tree_allreduce(nodes, g, count, DType::BF16, Placement::None, pipe);
        validate(s);
        const auto out = run_reference(s, e.inputs, {});
        for (int r = 0; r < n; ++r) REQUIRE(out[r] == encode_values(DType::BF16, e.sum));
      }
    }
  }
}

TEST_CASE("NCCL's tree crosses the network once up and once down per node and channel, on the channel's rail",
          "[schedule][nccl-tree][cost]") {
  const int nodes = 4, g = 8, n = nodes * g;
  const uint32_t channels = 16, chunks = 2;
  const uint64_t count = 1 << 16;
  const Schedule s = nccl_tree_allreduce(nodes, g, count, DType::BF16, Placement::None, Pipelining{chunks, channels});
  validate(s);
  std::vector<int> across(channels, 0), inside(channels, 0);
  for (int r = 0; r < n; ++r)
    for (const Op& op : s.ranks[r].ops) {
      if (op.kind != OpKind::Send) continue;
      if (op.peer / g != r / g) {
        ++across[op.lane];
        CHECK(op.peer % g == r % g);               // rail to rail
        CHECK(r % g == int(op.lane % (channels / 2)) % g);  // the channel's head GPU
      } else {
        ++inside[op.lane];
      }
    }
  for (uint32_t c = 0; c < channels; ++c) {
    CAPTURE(c);
    CHECK(across[c] == int(2 * (nodes - 1) * chunks));  // every non-root node: one up, one down per chunk
    CHECK(inside[c] == int(2 * nodes * (g - 1) * chunks));  // each node's chain, both ways
  }
  // Steps with a send: up and down a tree of height 9 (a chain of 8 under 2 levels of nodes),
  // each chunk's step a lockstep group of its own.
  CHECK(step_bytes(s).steps == 2 * (g - 1 + 2) * chunks);
  // Every rank sends its share once up and once down (the root only down), nothing more.
  const uint64_t bytes = count * 2;
  uint64_t sent = 0;
  for (uint64_t b : step_bytes(s).sent_bytes) sent += b;
  CHECK(sent == 2 * uint64_t(n - 1) * bytes);
}

TEST_CASE("NCCL's tree by name: whole nodes, no compression, no merged channels", "[schedule][nccl-tree]") {
  BuildSpec b;
  b.algorithm = "nccl-tree";
  b.nranks = 16;
  b.gpus_per_node = 8;
  b.count = 100;
  b.pipe = {2, 4};
  const Schedule s = build_schedule(b);
  CHECK(s.algorithm == "nccl-tree/none chunks=2 channels=4");
  validate(s);
  b.placement = Placement::PerHop;
  CHECK_THROWS_WITH(build_schedule(b), Catch::Contains("placement per-hop does not apply"));
  b.placement = Placement::None;
  b.pipe = {1, 4, true};
  CHECK_THROWS_WITH(build_schedule(b), Catch::Contains("merged channels"));
  b.pipe = {1, 1};
  b.nranks = 12;
  CHECK_THROWS_AS(build_schedule(b), ScheduleError);
  b.collective = Collective::ReduceScatter;
  b.nranks = 16;
  CHECK_THROWS_WITH(build_schedule(b), Catch::Contains("unknown reduce-scatter algorithm 'nccl-tree'"));
}
