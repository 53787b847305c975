// tests/schedule/test_rail_ring.cpp — NCCL's rings over the rails of a cluster: exact results
// and the ring's block layout for every channel count, which GPU each ring leaves and enters a
// node through, and the same bytes per rank as the flat ring.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "schedule/algorithms.h"
#include "schedule/build.h"
#include "schedule/exact.h"
#include "schedule/reference_executor.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::sched;
using test::encode_values;

namespace {

const std::vector<std::pair<int, int>> kShapes = {{1, 1}, {1, 4}, {4, 1}, {2, 2}, {2, 4}, {3, 2}, {3, 4}, {4, 8}};

}  // namespace

TEST_CASE("rail rings: every member once, each node's GPUs together, hops between nodes on one rail",
          "[schedule][rail-ring]") {
  for (auto [nodes, g] : kShapes) {
    std::map<int, int> rail_uses_out, rail_uses_in;  // over channels 0..g-1: rail -> hops
    for (int c = 0; c < g; ++c) {
      CAPTURE(nodes, g, c);
      const auto m = rail_ring_members(nodes, g, c);
      REQUIRE(m.size() == static_cast<size_t>(nodes * g));
      REQUIRE(std::set<int>(m.begin(), m.end()).size() == m.size());
      for (int i = 0; i < nodes * g; ++i) REQUIRE(m[i] / g == i / g);  // a node's GPUs in a row, nodes in order
      for (int k = 0; k < nodes && nodes > 1; ++k) {
        const int leave = m[(k + 1) * g - 1], enter = m[((k + 1) % nodes) * g];
        const bool closing = k + 1 == nodes;
        if (!closing || nodes % 2 == 0) CHECK(leave % g == enter % g);
        ++rail_uses_out[leave % g];
        ++rail_uses_in[enter % g];
      }
    }
    // g channels leave and enter every node on g different rails: each rail carries the same
    // number of hops (one per node and channel).
    if (nodes > 1) {
      CHECK(rail_uses_out.size() == static_cast<size_t>(g));
      CHECK(rail_uses_in.size() == static_cast<size_t>(g));
      for (auto [rail, uses] : rail_uses_out) CHECK(uses == nodes);
      for (auto [rail, uses] : rail_uses_in) CHECK(uses == nodes);
    }
  }
}

TEST_CASE("rail-ring allreduce, reduce-scatter and allgather are exact and keep the ring's layout",
          "[schedule][rail-ring]") {
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 32;
  for (auto [nodes, g] : kShapes) {
    const int n = nodes * g;
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t(n + 1), uint64_t{1003}}) {
      const auto e = test::exact_inputs(DType::BF16, n, count);
      for (Pipelining pipe : {Pipelining{1, 1}, Pipelining{1, static_cast<uint32_t>(g)}, Pipelining{2, 3}}) {
        for (Placement p : {Placement::None, Placement::PerHop, Placement::CompressOnce, Placement::ZipCCL}) {
          CAPTURE(nodes, g, count, pipe.chunks, pipe.channels, placement_name(p));
          const Schedule ar = rail_ring_allreduce(nodes, g, count, DType::BF16, p, pipe);
          validate(ar);
          const auto out = run_reference(ar, e.inputs, opt);
          for (int r = 0; r < n; ++r) REQUIRE(out[r] == encode_values(DType::BF16, e.sum));
          if (p == Placement::None || p == Placement::PerHop) {
            const Schedule rs = rail_ring_reduce_scatter(nodes, g, count, DType::BF16, p, pipe);
            validate(rs);
            const auto got = run_reference(rs, e.inputs, opt);
            for (int r = 0; r < n; ++r) REQUIRE(got[r] == test::encoded_block(DType::BF16, e.sum, n, r));
          }
          if (p != Placement::ZipCCL) {
            const Schedule ag = rail_ring_allgather(nodes, g, count, DType::BF16, p, pipe);
            validate(ag);
            const auto got = run_reference(ag, e.blocks, opt);
            for (int r = 0; r < n; ++r) REQUIRE(got[r] == encode_values(DType::BF16, e.gathered));
          }
        }
      }
    }
  }
}

TEST_CASE("rail rings send what the flat ring sends, and cross nodes on every rail", "[schedule][rail-ring][cost]") {
  const int nodes = 4, g = 8, n = nodes * g;
  const uint64_t count = 1 << 16;
  const Pipelining pipe{1, static_cast<uint32_t>(g)};
  const Schedule flat = ring_allreduce(n, count, DType::BF16, Placement::None, pipe);
  const Schedule rail = rail_ring_allreduce(nodes, g, count, DType::BF16, Placement::None, pipe);
  CHECK(step_bytes(rail).sent_bytes == step_bytes(flat).sent_bytes);
  CHECK(step_bytes(rail).steps == step_bytes(flat).steps);
  // Sends between nodes: the flat ring's leave every node from its last GPU only; the rail
  // rings' from every GPU, to the GPU of the same rail.
  auto senders_across = [&](const Schedule& s) {
    std::set<int> locals;
    for (int r = 0; r < n; ++r)
      for (const Op& op : s.ranks[r].ops)
        if (op.kind == OpKind::Send && op.peer / g != r / g) {
          locals.insert(r % g);
          if (&s == &rail) CHECK(op.peer % g == r % g);
        }
    return locals;
  };
  CHECK(senders_across(flat) == std::set<int>{g - 1});
  CHECK(senders_across(rail).size() == static_cast<size_t>(g));
}

TEST_CASE("rail-ring by name: whole nodes required", "[schedule][rail-ring]") {
  BuildSpec b;
  b.algorithm = "rail-ring";
  b.nranks = 16;
  b.gpus_per_node = 8;
  b.count = 100;
  b.pipe.channels = 8;
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather}) {
    b.collective = c;
    CHECK(build_schedule(b).algorithm.rfind("rail-ring/none", 0) == 0);
  }
  b.gpus_per_node = 3;
  CHECK_THROWS_WITH(build_schedule(b), Catch::Contains("not whole nodes of 3"));
  b.collective = Collective::AllToAll;
  b.gpus_per_node = 8;
  b.pipe.channels = 1;
  CHECK_THROWS_WITH(build_schedule(b), Catch::Contains("unknown all-to-all algorithm 'rail-ring'"));
}

// Merged channels (Pipelining::merge): the channels of each distinct ring built as one ring.
// The merged schedule computes its collective, and every rank sends, at every step, exactly the
// bytes the channels it stands for send together, whatever the count.
TEST_CASE("merged channels: exact, one ring per distinct ring, the same bytes per rank and step",
          "[schedule][rail-ring][merge]") {
  struct Case {
    int nodes, g;
    uint32_t channels;
    bool rail;
  };
  for (const Case k : {Case{2, 4, 8, true}, Case{3, 4, 12, true}, Case{4, 8, 16, true}, Case{2, 2, 6, true},
                       Case{1, 6, 4, false}, Case{2, 4, 3, false}}) {
    const int n = k.nodes * k.g;
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t(n + 1), uint64_t{1003}, uint64_t(n) * k.channels * 5}) {
      CAPTURE(k.nodes, k.g, k.channels, k.rail, count);
      const auto e = test::exact_inputs(DType::BF16, n, count);
      const Pipelining apart{1, k.channels}, merged{1, k.channels, true};
      auto build = [&](Collective c, const Pipelining& pipe) {
        BuildSpec b;
        b.collective = c;
        b.algorithm = k.rail ? "rail-ring" : "ring";
        b.nranks = n;
        b.gpus_per_node = k.g;
        b.count = count;
        b.pipe = pipe;
        const Schedule s = build_schedule(b);
        validate(s);
        return s;
      };
      const uint32_t rings = k.rail ? std::min<uint32_t>(k.channels, k.g) : 1;
      for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather}) {
        const Schedule m = build(c, merged), a = build(c, apart);
        CHECK(m.algorithm.find(" merged=" + std::to_string(rings)) != std::string::npos);
        std::set<uint32_t> lanes;
        for (const auto& p : m.ranks)
          for (const Op& op : p.ops)
            if (op.kind == OpKind::Send) lanes.insert(op.lane);
        CHECK(lanes.size() <= rings);
        if (count >= static_cast<uint64_t>(n) * k.channels) CHECK(lanes.size() == rings);
        if (!lanes.empty()) CHECK(*lanes.rbegin() < rings);
        CHECK(step_bytes(m).sent == step_bytes(a).sent);
        CHECK(step_bytes(m).received == step_bytes(a).received);
        const auto out = run_reference(m, c == Collective::AllGather ? e.blocks : e.inputs);
        for (int r = 0; r < n; ++r) {
          if (c == Collective::AllReduce) REQUIRE(out[r] == encode_values(DType::BF16, e.sum));
          if (c == Collective::ReduceScatter) REQUIRE(out[r] == test::encoded_block(DType::BF16, e.sum, n, r));
          if (c == Collective::AllGather) REQUIRE(out[r] == encode_values(DType::BF16, e.gathered));
        }
      }
    }
  }
}

TEST_CASE("merged channels: rings of unequal channel counts, chunks and other algorithms refused",
          "[schedule][rail-ring][merge]") {
  BuildSpec b;
  b.algorithm = "rail-ring";
  b.nranks = 16;
  b.gpus_per_node = 8;
  b.count = 1000;
  b.pipe = Pipelining{1, 12, true};  // rails 0-3 carry two channels, rails 4-7 one
  CHECK_THROWS_WITH(build_schedule(b), Catch::Contains("12 channels make 8 rings of 2 and 1"));
  b.pipe = Pipelining{2, 16, true};
  CHECK_THROWS_WITH(build_schedule(b), Catch::Contains("merged channels need chunks 1"));
  b.pipe = Pipelining{1, 1, true};
  b.algorithm = "hierarchical";
  CHECK_THROWS_WITH(build_schedule(b), Catch::Contains("merged channels are for ring, rail-ring, nvls, nvls-tree and pat only"));
}

// intra none: only the hops between nodes compress. Exact for every shape, pipelining and
// placement; no hop inside a node carries a stream (a hop between nodes carries one where the
// placement compresses that phase); in the allgather with compress-once each block is
// compressed once per node it leaves, not per hop.
TEST_CASE("rail rings compressing only between nodes: exact, streams on the network hops only",
          "[schedule][rail-ring][intra]") {
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 32;
  const std::optional<Placement> none = Placement::None;
  for (auto [nodes, g] : kShapes) {
    const int n = nodes * g;
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t(n + 1), uint64_t{1003}}) {
      const auto e = test::exact_inputs(DType::BF16, n, count);
      for (Pipelining pipe : {Pipelining{1, 1}, Pipelining{1, static_cast<uint32_t>(g)}, Pipelining{2, 3}}) {
        for (Placement p : {Placement::PerHop, Placement::CompressOnce, Placement::ZipCCL}) {
          CAPTURE(nodes, g, count, pipe.chunks, pipe.channels, placement_name(p));
          // Sends of a stream (a wire buffer) and of data as it is, inside nodes and between.
          auto check_hops = [&](const Schedule& s) {
            CHECK(s.algorithm.find(" intra=none") != std::string::npos);
            for (int r = 0; r < n; ++r)
              for (const Op& op : s.ranks[r].ops) {
                if (op.kind != OpKind::Send) continue;
                const bool across = op.peer / g != r / g, stream = op.src.buf == BufKind::Wire;
                if (!across) CHECK_FALSE(stream);
              }
          };
          std::vector<Schedule> built;
          built.push_back(rail_ring_allreduce(nodes, g, count, DType::BF16, p, pipe, none));
          validate(built.back());
          check_hops(built.back());
          auto out = run_reference(built.back(), e.inputs, opt);
          for (int r = 0; r < n; ++r) REQUIRE(out[r] == encode_values(DType::BF16, e.sum));
          if (p == Placement::PerHop) {
            const Schedule rs = rail_ring_reduce_scatter(nodes, g, count, DType::BF16, p, pipe, none);
            validate(rs);
            check_hops(rs);
            out = run_reference(rs, e.inputs, opt);
            for (int r = 0; r < n; ++r) REQUIRE(out[r] == test::encoded_block(DType::BF16, e.sum, n, r));
          }
          if (p != Placement::ZipCCL) {
            const Schedule ag = rail_ring_allgather(nodes, g, count, DType::BF16, p, pipe, none);
            validate(ag);
            check_hops(ag);
            out = run_reference(ag, e.blocks, opt);
            for (int r = 0; r < n; ++r) REQUIRE(out[r] == encode_values(DType::BF16, e.gathered));
          }
        }
      }
    }
  }
  // 4 nodes of 8, one channel, 4 elements a block: the compress-once allgather compresses a block
  // at each node it leaves, where without intra none each block is compressed once and every hop
  // carries its stream; the allreduce decompresses only at the hops between nodes.
  const int nodes = 4, g = 8, n = nodes * g;
  const uint64_t count = 4 * n;
  auto count_ops = [&](const Schedule& s, OpKind kind, bool across_only) {
    size_t k = 0;
    for (int r = 0; r < n; ++r)
      for (const Op& op : s.ranks[r].ops)
        k += op.kind == kind && (!across_only || op.peer / g != r / g);
    return k;
  };
  const Schedule ag = rail_ring_allgather(nodes, g, count, DType::BF16, Placement::CompressOnce, {}, none);
  const Schedule ag_all = rail_ring_allgather(nodes, g, count, DType::BF16, Placement::CompressOnce);
  // At each of the 31 steps 4 hops cross nodes, and each crossing's sender compresses (no two
  // crossings follow each other with 8 GPUs a node): 124 streams, against one per block.
  CHECK(count_ops(ag, OpKind::Send, true) == size_t(nodes) * (n - 1));
  CHECK(count_ops(ag, OpKind::Compress, false) == size_t(nodes) * (n - 1));
  CHECK(count_ops(ag_all, OpKind::Compress, false) == size_t(n));
  const Schedule ar = rail_ring_allreduce(nodes, g, count, DType::BF16, Placement::ZipCCL, {}, none);
  const Schedule ar_all = rail_ring_allreduce(nodes, g, count, DType::BF16, Placement::ZipCCL);
  CHECK(count_ops(ar, OpKind::Decompress, false) < count_ops(ar_all, OpKind::Decompress, false) / 4);
  auto last_step = [&](const Schedule& s) {
    uint32_t last = 0;
    for (const auto& prog : s.ranks)
      for (const Op& op : prog.ops) last = std::max(last, op.step);
    return last;
  };
  CHECK(last_step(ar) == last_step(ar_all));  // the same ring, step for step
  CHECK_THROWS_WITH(rail_ring_allreduce(2, 4, 100, DType::BF16, Placement::ZipCCL, {}, Placement::PerHop),
                    Catch::Contains("rail rings take intra none"));
  CHECK(rail_ring_allreduce(2, 4, 100, DType::BF16, Placement::ZipCCL, {}, Placement::ZipCCL).algorithm.find("intra") ==
        std::string::npos);
}
