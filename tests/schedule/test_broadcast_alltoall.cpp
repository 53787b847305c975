// tests/schedule/test_broadcast_alltoall.cpp — broadcast (chain, binary tree) and
// all-to-all(v) (direct, pairwise, hierarchical, NCCL's with PXN, NCCL's own exchange in its
// work batches) through the reference
// executor, with every placement.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "schedule/algorithms.h"
#include "schedule/nccl_p2p.h"
#include "schedule/reference_executor.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::sched;

TEST_CASE("broadcast delivers the root's data to every rank", "[schedule][broadcast]") {
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 64;
  for (Placement p : {Placement::None, Placement::PerHop, Placement::CompressOnce}) {
    for (int n : {1, 2, 3, 5, 8, 16}) {
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{1003}}) {
        for (int root : {0, n - 1}) {
          const auto data = test::gaussian_bytes(DType::BF16, count, 0.1, 5 + n);
          std::vector<std::vector<uint8_t>> inputs(n);
          inputs[root] = data;
          for (int variant = 0; variant < 3; ++variant) {
            const Schedule s = variant == 0   ? tree_broadcast(n, root, count, DType::BF16, p)
                               : variant == 1 ? chain_broadcast(n, root, count, DType::BF16, 1, p)
                                              : chain_broadcast(n, root, count, DType::BF16, 3, p);
            CAPTURE(placement_name(p), n, count, root, s.algorithm, variant);
            const auto out = run_reference(s, inputs, opt);
            for (int r = 0; r < n; ++r) REQUIRE(out[r] == data);
            size_t compress_ops = 0;
            for (const auto& rp : s.ranks)
              for (const Op& op : rp.ops) compress_ops += op.kind == OpKind::Compress;
            if (p == Placement::None || n == 1) CHECK(compress_ops == 0);
            if (p == Placement::CompressOnce && n > 1) CHECK(compress_ops == (variant == 2 ? 3u : 1u));
          }
        }
      }
    }
  }
}

TEST_CASE("broadcast step counts", "[schedule][broadcast][cost]") {
  CHECK(step_bytes(chain_broadcast(8, 0, 800, DType::FP32, 1)).steps == 7);
  CHECK(step_bytes(chain_broadcast(8, 0, 800, DType::FP32, 4)).steps == 7 + 3);
  CHECK(step_bytes(tree_broadcast(8, 0, 800, DType::FP32)).steps == 3);   // depths 0, 1, 2 send
  CHECK(step_bytes(tree_broadcast(7, 3, 800, DType::FP32)).steps == 2);
  // In a chain every rank but the last sends the whole message once.
  const StepBytes b = step_bytes(chain_broadcast(4, 1, 1000, DType::FP32, 5));
  CHECK(b.sent_bytes[1] == 4000);
  CHECK(b.sent_bytes[0] == 0);  // rank 0 is the last in the chain from root 1
  CHECK_THROWS_AS(tree_broadcast(4, 4, 10, DType::FP32), ScheduleError);
}

TEST_CASE("all-to-all(v) delivers every block with uneven counts", "[schedule][alltoall]") {
  ReferenceOptions opt;
  opt.codec = find_codec("entropy-exp");
  opt.encode.chunk_elements = 32;
  test::SplitMix64 rng{3};
  for (int n : {1, 2, 3, 5, 8, 16}) {
    std::vector<std::vector<uint64_t>> counts(n, std::vector<uint64_t>(n));
    for (auto& row : counts)
      for (auto& c : row) c = rng.next() % 4 == 0 ? 0 : rng.next() % 300;  // MoE-like: some empty
    std::vector<std::vector<uint8_t>> inputs(n);
    for (int i = 0; i < n; ++i) {
      uint64_t total = 0;
      for (int j = 0; j < n; ++j) total += counts[i][j];
      inputs[i] = test::gaussian_bytes(DType::FP16, total, 1.0, 900 + i);
    }
    // Expected: rank j's output is the blocks from i = 0..n-1 in order.
    std::vector<std::vector<uint8_t>> want(n);
    for (int i = 0; i < n; ++i) {
      uint64_t off = 0;
      for (int j = 0; j < n; ++j) {
        want[j].insert(want[j].end(), inputs[i].begin() + 2 * off, inputs[i].begin() + 2 * (off + counts[i][j]));
        off += counts[i][j];
      }
    }
    for (AllToAllOrder order : {AllToAllOrder::Direct, AllToAllOrder::Pairwise})
      for (Placement p : {Placement::None, Placement::PerHop, Placement::CompressOnce}) {
        const Schedule s = alltoall(counts, DType::FP16, order, p);
        CAPTURE(n, s.algorithm);
        REQUIRE(run_reference(s, inputs, opt) == want);
        CHECK(step_bytes(s).steps <= static_cast<uint32_t>(order == AllToAllOrder::Direct ? 1 : n - 1));
      }
  }
  CHECK_THROWS_AS(alltoall({{1, 2}, {3}}, DType::FP16), ScheduleError);
}

namespace {

// An all-to-all(v) of nodes x g ranks, MoE-like (a third of the blocks empty), and its bf16
// inputs.
struct RandomAllToAll {
  std::vector<std::vector<uint64_t>> counts;
  std::vector<std::vector<uint8_t>> inputs;
};
RandomAllToAll random_alltoall(int n, test::SplitMix64& rng, uint64_t seed) {
  RandomAllToAll a{std::vector<std::vector<uint64_t>>(n, std::vector<uint64_t>(n)), {}};
  for (auto& row : a.counts)
    for (auto& c : row) c = rng.next() % 3 == 0 ? 0 : rng.next() % 200;
  for (int i = 0; i < n; ++i) {
    uint64_t total = 0;
    for (int j = 0; j < n; ++j) total += a.counts[i][j];
    a.inputs.push_back(test::gaussian_bytes(DType::BF16, total, 0.5, seed + i));
  }
  return a;
}

}  // namespace

TEST_CASE("hierarchical all-to-all(v) equals the direct one and sends fewer messages", "[schedule][alltoall][hierarchical]") {
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 32;
  test::SplitMix64 rng{17};
  for (auto [nodes, g] : std::vector<std::pair<int, int>>{{1, 1}, {1, 4}, {4, 1}, {2, 2}, {2, 4}, {3, 2}, {4, 8}}) {
    const int n = nodes * g;
    const auto [counts, inputs] = random_alltoall(n, rng, 300);
    const auto want = run_reference(alltoall(counts, DType::BF16, AllToAllOrder::Direct), inputs);
    for (Placement p : {Placement::None, Placement::PerHop}) {
      const Schedule s = hierarchical_alltoall(counts, g, DType::BF16, p);
      CAPTURE(nodes, g, placement_name(p));
      REQUIRE(run_reference(s, inputs, opt) == want);
      ReferenceOptions shuffled = opt;
      shuffled.order_seed = 3;
      REQUIRE(run_reference(s, inputs, shuffled) == want);
      size_t sends = 0;
      for (const Op& op : s.ranks[0].ops) sends += op.kind == OpKind::Send;
      CHECK(sends == static_cast<size_t>((g - 1) + (nodes - 1)));
    }
  }
  CHECK_THROWS_AS(hierarchical_alltoall({{1, 1, 1}, {1, 1, 1}, {1, 1, 1}}, 2, DType::BF16), ScheduleError);
}

TEST_CASE("all-to-all: no two ranks take their k-th receive of a step from the same peer", "[schedule][alltoall]") {
  // Receives run one at a time (each is chained to the one before), so if the k-th receives
  // of several ranks named one peer, its link would carry all those flows at once while other
  // links idle: the hierarchical all-to-all once received from local rank 0 (node 0) first
  // everywhere, and took g(g-1)/2 message times per phase instead of g-1 in the simulator.
  const auto check = [](const Schedule& s) {
    // (step, k) -> peers of the k-th receive of that step, one per rank that has one.
    std::map<std::pair<uint32_t, size_t>, std::vector<int>> peers;
    for (const RankProgram& p : s.ranks) {
      std::map<uint32_t, size_t> k;
      for (const Op& op : p.ops)
        if (op.kind == OpKind::Recv) peers[{op.step, k[op.step]++}].push_back(op.peer);
    }
    for (auto& [at, v] : peers) {
      CAPTURE(s.algorithm, at.first, at.second);
      std::sort(v.begin(), v.end());
      CHECK(std::adjacent_find(v.begin(), v.end()) == v.end());
    }
  };
  for (auto [nodes, g] : std::vector<std::pair<int, int>>{{1, 4}, {4, 1}, {2, 4}, {3, 2}, {4, 8}, {8, 8}}) {
    const int n = nodes * g;
    const std::vector<std::vector<uint64_t>> counts(n, std::vector<uint64_t>(n, 5));
    CAPTURE(nodes, g);
    check(hierarchical_alltoall(counts, g, DType::BF16, Placement::None));
    check(hierarchical_alltoall(counts, g, DType::BF16, Placement::PerHop));
    check(alltoall(counts, DType::BF16, AllToAllOrder::Direct, Placement::None));
    check(alltoall(counts, DType::BF16, AllToAllOrder::Pairwise, Placement::None));
    check(pxn_alltoall(counts, g, DType::BF16, Placement::None));
    check(pxn_alltoall(counts, g, DType::BF16, Placement::PerHop));
  }
}

TEST_CASE("NCCL's point-to-point order visits every delta once", "[schedule][alltoall][pxn]") {
  // The sequence init.cc's comment gives for 16 ranks.
  CHECK(nccl_p2p_deltas(16) == std::vector<int>{0, 1, 3, 6, 10, 15, 5, 12, 4, 13, 7, 2, 14, 11, 9, 8});
  CHECK(nccl_p2p_deltas(10) == std::vector<int>{0, 1, 3, 6, 5, 4, 7, 2, 9, 8});
  for (int m = 1; m <= 40; ++m) {
    std::vector<int> d = nccl_p2p_deltas(m);
    CAPTURE(m);
    REQUIRE(d.size() == static_cast<size_t>(m));
    CHECK(d[0] == 0);
    std::sort(d.begin(), d.end());
    for (int i = 0; i < m; ++i) CHECK(d[static_cast<size_t>(i)] == i);
  }
}

TEST_CASE("PXN all-to-all(v) equals the direct one and keeps every message across nodes on one rail",
          "[schedule][alltoall][pxn]") {
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 32;
  test::SplitMix64 rng{29};
  for (auto [nodes, g] : std::vector<std::pair<int, int>>{{1, 1}, {1, 4}, {4, 1}, {2, 2}, {2, 4}, {3, 2}, {3, 8}, {5, 3}}) {
    const int n = nodes * g;
    const auto [counts, inputs] = random_alltoall(n, rng, 700);
    const auto want = run_reference(alltoall(counts, DType::BF16, AllToAllOrder::Direct), inputs);
    for (Placement p : {Placement::None, Placement::PerHop, Placement::CompressOnce}) {
      const Schedule s = pxn_alltoall(counts, g, DType::BF16, p);
      CAPTURE(nodes, g, placement_name(p));
      REQUIRE(run_reference(s, inputs, opt) == want);
      for (uint64_t seed : {3u, 11u}) {
        ReferenceOptions shuffled = opt;
        shuffled.order_seed = seed;
        REQUIRE(run_reference(s, inputs, shuffled) == want);
      }
      for (int r = 0; r < n; ++r) {
        size_t sends = 0, codec_ops = 0;
        for (const Op& op : s.ranks[r].ops) {
          sends += op.kind == OpKind::Send;
          codec_ops += op.kind == OpKind::Compress;
          // Across nodes only between GPUs of the same local index: one rail.
          if (op.kind == OpKind::Send || op.kind == OpKind::Recv)
            if (op.peer / g != r / g) CHECK(op.peer % g == r % g);
        }
        // Its own n - 1 blocks, and a relay's (nodes - 1)(g - 1); each block compressed once.
        CHECK(sends == static_cast<size_t>(n - 1 + (nodes - 1) * (g - 1)));
        CHECK(codec_ops == (p == Placement::None ? 0u : static_cast<size_t>(n - 1)));
      }
    }
  }
  CHECK_THROWS_AS(pxn_alltoall({{1, 1, 1}, {1, 1, 1}, {1, 1, 1}}, 2, DType::BF16), ScheduleError);
  CHECK_THROWS_AS(pxn_alltoall({{1, 1}, {1, 1}}, 1, DType::BF16, Placement::ZipCCL), ScheduleError);
}

TEST_CASE("point_to_point moves rank 0's input to rank 1's output, piece by piece", "[schedule][broadcast]") {
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 64;
  for (Placement p : {Placement::None, Placement::PerHop, Placement::CompressOnce})
    for (uint32_t pieces : {1u, 3u, 16u})
      for (uint64_t count : {uint64_t{0}, uint64_t{5}, uint64_t{1003}}) {
        CAPTURE(placement_name(p), pieces, count);
        const Schedule s = point_to_point(count, DType::BF16, pieces, p);
        const auto data = test::gaussian_bytes(DType::BF16, count, 0.1, 11);
        const auto out = run_reference(s, {data, {}}, opt);
        CHECK(out[0].empty());  // the sender keeps no copy
        REQUIRE(out[1] == data);
        size_t compress = 0, sends = 0;
        for (const Op& op : s.ranks[0].ops) {
          compress += op.kind == OpKind::Compress;
          sends += op.kind == OpKind::Send;
          CHECK(op.step < pieces);
          CHECK(op.lane == 0);
        }
        CHECK(sends == pieces);
        CHECK(compress == (p == Placement::None ? 0 : pieces));
        CHECK(s.ranks[1].wire_buffers == (p == Placement::None ? 0 : pieces));
      }
  CHECK(step_bytes(point_to_point(800, DType::FP32, 4)).steps == 4);
  CHECK(step_bytes(point_to_point(800, DType::FP32, 4)).sent_bytes[0] == 3200);
  CHECK_THROWS_AS(point_to_point(10, DType::FP32, 0), ScheduleError);
  CHECK_THROWS_AS(point_to_point(10, DType::FP32, 1, Placement::ZipCCL), ScheduleError);
}

TEST_CASE("NCCL's own exchange in its work batches equals the direct one", "[schedule][alltoall][nccl][p2p]") {
  test::SplitMix64 rng{41};
  for (auto [nodes, g] : std::vector<std::pair<int, int>>{{1, 1}, {1, 5}, {4, 1}, {2, 2}, {2, 4}, {3, 8}, {5, 3}, {17, 1}}) {
    const int n = nodes * g;
    const auto [counts, inputs] = random_alltoall(n, rng, 500);
    const auto want = run_reference(alltoall(counts, DType::BF16, AllToAllOrder::Direct), inputs);
    for (int channels : {1, 2, 16}) {
      const auto rounds = NcclP2pRounds::node_major(nodes * g, g, channels);
      for (int relay_g : {1, g}) {  // pairwise, and PXN where it relays
        const Schedule s = nccl_alltoall(counts, DType::BF16, rounds, relay_g);
        CAPTURE(nodes, g, channels, relay_g);
        CHECK(s.algorithm == (relay_g > 1 && n > g ? "pxn" : "pairwise"));
        REQUIRE(run_reference(s, inputs) == want);
        for (uint64_t seed : {5u, 13u}) {
          ReferenceOptions shuffled;
          shuffled.order_seed = seed;
          REQUIRE(run_reference(s, inputs, shuffled) == want);
        }
      }
    }
  }
  // Ranks round-robin over 3 nodes (NCCL's nodes by first rank), no relays.
  const auto [counts, inputs] = random_alltoall(6, rng, 300);
  const Schedule s = nccl_alltoall(counts, DType::BF16, NcclP2pRounds({0, 1, 2, 0, 1, 2}, 4), 1);
  CHECK(run_reference(s, inputs) == run_reference(alltoall(counts, DType::BF16, AllToAllOrder::Direct), inputs));
  // PXN needs node-major whole nodes.
  CHECK_THROWS_AS(nccl_alltoall(counts, DType::BF16, NcclP2pRounds({0, 1, 2, 0, 1, 2}, 4), 2), ScheduleError);
  CHECK_THROWS_AS(nccl_alltoall(counts, DType::BF16, NcclP2pRounds::node_major(4, 4, 4), 1), ScheduleError);
}

TEST_CASE("NCCL's exchange on 1,024 ranks: 8 batches one after the other on each of 16 channels",
          "[schedule][alltoall][nccl][p2p]") {
  const int nodes = 128, g = 8, n = nodes * g;
  const std::vector<std::vector<uint64_t>> counts(n, std::vector<uint64_t>(n, 1));
  const Schedule s = nccl_alltoall(counts, DType::BF16, NcclP2pRounds::node_major(nodes * g, g, 16), g);
  for (int r : {0, 5, 1023}) {
    const auto& ops = s.ranks[r].ops;
    // Joins (copies of nothing): one between consecutive batches of a channel, 7 on each of 16.
    size_t joins = 0;
    std::vector<uint32_t> depth(ops.size(), 0);  // joins on the longest chain to an op
    uint32_t deepest = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      const bool join = ops[i].kind == OpKind::Copy && ops[i].dst.count == 0 && !ops[i].deps.empty();
      joins += join;
      for (uint32_t d : ops[i].deps) depth[i] = std::max(depth[i], depth[d]);
      depth[i] += join;
      deepest = std::max(deepest, depth[i]);
    }
    CAPTURE(r);
    CHECK(joins == 16u * 7u);
    CHECK(deepest == 7u);
    // Relayed sends wait for their own receive only.
    for (const Op& op : ops)
      if (op.kind == OpKind::Send && op.lane == 1 && !op.deps.empty() && ops[op.deps[0]].kind == OpKind::Recv)
        CHECK(op.deps.size() == 1);
  }
}

