// tests/schedule/test_hierarchical.cpp — two-level collectives: the hierarchical allreduce
// with each inter-node algorithm and pipelining, hierarchical reduce-scatter and allgather;
// exact results, step and byte counts, and the size of the schedule at 16,384 ranks.
#include <catch2/catch.hpp>

#include <cmath>

#include "schedule/algorithms.h"
#include "schedule/exact.h"
#include "schedule/reference_executor.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::sched;
using test::encode_values;

namespace {

const std::vector<std::pair<int, int>> kShapes = {{1, 1}, {1, 4}, {4, 1}, {2, 2}, {2, 4}, {3, 2}, {3, 5}, {5, 3}, {8, 8}};
const InterAlgorithm kInters[] = {InterAlgorithm::Ring, InterAlgorithm::Recursive, InterAlgorithm::Tree};

uint32_t log2_floor(int n) { return static_cast<uint32_t>(std::floor(std::log2(n))); }

}  // namespace

TEST_CASE("hierarchical allreduce computes the exact sum with every inter-node algorithm", "[schedule][hierarchical]") {
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 32;
  for (auto [nodes, g] : kShapes) {
    const int n = nodes * g;
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{1003}}) {
      const auto e = test::exact_inputs(DType::BF16, n, count);
      const auto want = encode_values(DType::BF16, e.sum);
      for (InterAlgorithm inter : kInters) {
        for (Placement p : {Placement::None, Placement::PerHop, Placement::CompressOnce, Placement::ZipCCL}) {
          CAPTURE(nodes, g, count, inter_name(inter), placement_name(p));
          const auto out = run_reference(hierarchical_allreduce(nodes, g, count, DType::BF16, p, inter), e.inputs, opt);
          for (int r = 0; r < n; ++r) REQUIRE(out[r] == want);
        }
      }
    }
  }
}

TEST_CASE("hierarchical allreduce with its own placement inside nodes: exact, and compresses only across",
          "[schedule][hierarchical]") {
  ReferenceOptions opt;
  opt.codec = find_codec("entropy-exp");
  opt.encode.chunk_elements = 32;
  const int nodes = 3, g = 4, n = nodes * g;
  const uint64_t count = 1003;
  const auto e = test::exact_inputs(DType::BF16, n, count);
  const auto want = encode_values(DType::BF16, e.sum);
  for (InterAlgorithm inter : kInters) {
    CAPTURE(inter_name(inter));
    const Schedule s = hierarchical_allreduce(nodes, g, count, DType::BF16, Placement::ZipCCL, inter, {}, Placement::None);
    validate(s);
    const auto out = run_reference(s, e.inputs, opt);
    for (int r = 0; r < n; ++r) REQUIRE(out[r] == want);
    // Every compress feeds a send to another node; no send inside a node carries a wire buffer.
    for (int r = 0; r < n; ++r)
      for (const Op& op : s.ranks[r].ops)
        if (op.kind == OpKind::Send && op.src.buf == BufKind::Wire) CHECK(op.peer / g != r / g);
    CHECK_THAT(s.algorithm, Catch::Contains("intra=none"));
  }
}

TEST_CASE("hierarchical allreduce sends 2(g-1)/g inside a node and the inter algorithm's share across",
          "[schedule][hierarchical][cost]") {
  const int g = 8;
  for (int nodes : {4, 8, 6}) {
    const uint64_t count = 3 * 32 * 1024;  // divisible by g * nodes
    for (InterAlgorithm inter : kInters) {
      CAPTURE(nodes, inter_name(inter));
      const Schedule s = hierarchical_allreduce(nodes, g, count, DType::FP32, Placement::None, inter);
      for (int r : {0, 5, nodes * g - 1}) {
        uint64_t intra = 0, across = 0;
        for (const Op& op : s.ranks[r].ops) {
          if (op.kind != OpKind::Send) continue;
          (op.peer / g == r / g ? intra : across) += op.src.count * 4;
          if (op.peer / g != r / g) CHECK(op.peer % g == r % g);  // only to the same local rank
        }
        CHECK(intra == 2 * (g - 1) * (count / g) * 4);
        const uint64_t slice = count / g * 4;  // what the ranks of one local rank allreduce
        if (inter == InterAlgorithm::Ring) CHECK(across == 2 * (nodes - 1) * (slice / nodes));
        if (inter == InterAlgorithm::Recursive && (nodes & (nodes - 1)) == 0) CHECK(across == 2 * (nodes - 1) * (slice / nodes));
        if (inter == InterAlgorithm::Tree) CHECK(across <= 2 * slice);  // each half: up once, down to <= 2 children
      }
      const uint32_t inter_steps = inter == InterAlgorithm::Ring        ? 2 * (nodes - 1)
                                   : inter == InterAlgorithm::Recursive ? 2 * log2_floor(nodes) + ((nodes & (nodes - 1)) ? 2 : 0)
                                                                        : 2 * log2_floor(nodes);
      CHECK(step_bytes(s).steps == static_cast<uint32_t>(2 * (g - 1)) + inter_steps);
    }
  }
}

TEST_CASE("pipelined hierarchical allreduce stays exact and adds chunks-1 steps", "[schedule][hierarchical][pipelining]") {
  ReferenceOptions opt;
  opt.codec = find_codec("entropy-exp");
  opt.encode.chunk_elements = 32;
  for (auto [chunks, channels] : std::vector<std::pair<uint32_t, uint32_t>>{{2, 1}, {1, 2}, {3, 2}}) {
    for (auto [nodes, g] : std::vector<std::pair<int, int>>{{1, 1}, {2, 2}, {3, 4}, {5, 2}}) {
      const int n = nodes * g;
      for (uint64_t count : {uint64_t{0}, uint64_t{5}, uint64_t{1003}}) {
        const auto e = test::exact_inputs(DType::FP16, n, count);
        for (InterAlgorithm inter : {InterAlgorithm::Ring, InterAlgorithm::Recursive}) {
          for (Placement p : {Placement::None, Placement::ZipCCL}) {
            CAPTURE(chunks, channels, nodes, g, count, inter_name(inter), placement_name(p));
            const Schedule s = hierarchical_allreduce(nodes, g, count, DType::FP16, p, inter, {chunks, channels});
            const auto out = run_reference(s, e.inputs, opt);
            for (int r = 0; r < n; ++r) REQUIRE(out[r] == encode_values(DType::FP16, e.sum));
            ReferenceOptions shuffled = opt;  // the pieces' chains are complete
            shuffled.order_seed = 7;
            REQUIRE(run_reference(s, e.inputs, shuffled) == out);
          }
        }
      }
    }
  }
  const StepBytes plain = step_bytes(hierarchical_allreduce(4, 4, 4096, DType::BF16, Placement::None, InterAlgorithm::Recursive));
  const StepBytes piped =
      step_bytes(hierarchical_allreduce(4, 4, 4096, DType::BF16, Placement::None, InterAlgorithm::Recursive, {4, 2}));
  CHECK(piped.steps == plain.steps * 4);  // each chunk's step a lockstep group of its own
  CHECK(piped.sent_bytes == plain.sent_bytes);
  CHECK_THROWS_WITH(hierarchical_allreduce(2, 2, 10, DType::BF16, Placement::None, InterAlgorithm::Tree, {2, 1}),
                    Catch::Contains("tree"));
}

TEST_CASE("hierarchical reduce-scatter and allgather keep the ring's block layout", "[schedule][hierarchical]") {
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 32;
  for (auto [nodes, g] : kShapes) {
    const int n = nodes * g;
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t(n + 1), uint64_t{1003}}) {
      const auto e = test::exact_inputs(DType::BF16, n, count);
      for (Placement p : {Placement::None, Placement::PerHop, Placement::CompressOnce}) {
        CAPTURE(nodes, g, count, placement_name(p));
        if (p != Placement::CompressOnce) {
          const auto rs = run_reference(hierarchical_reduce_scatter(nodes, g, count, DType::BF16, p), e.inputs, opt);
          for (int r = 0; r < n; ++r) REQUIRE(rs[r] == test::encoded_block(DType::BF16, e.sum, n, r));
        }
        const auto ag = run_reference(hierarchical_allgather(nodes, g, count, DType::BF16, p), e.blocks, opt);
        for (int r = 0; r < n; ++r) REQUIRE(ag[r] == encode_values(DType::BF16, e.gathered));
      }
    }
  }
  CHECK_THROWS_WITH(hierarchical_reduce_scatter(2, 2, 10, DType::BF16, Placement::CompressOnce),
                    Catch::Contains("compress-once"));
  CHECK_THROWS_WITH(hierarchical_allgather(2, 2, 10, DType::BF16, Placement::ZipCCL), Catch::Contains("zipccl"));
  CHECK_THROWS_AS(hierarchical_allgather(0, 2, 10, DType::BF16), ScheduleError);
}

TEST_CASE("hierarchical reduce-scatter and allgather: (g-1)/g in the node, (N-1)/(N g) across, S/n for the transpose",
          "[schedule][hierarchical][cost]") {
  for (auto [nodes, g] : std::vector<std::pair<int, int>>{{4, 8}, {3, 4}, {1, 8}, {8, 1}}) {
    const int n = nodes * g;
    const uint64_t count = 96 * 1024;  // divisible by every n here
    const uint64_t block = count / n * 4;
    for (const Schedule& s : {hierarchical_reduce_scatter(nodes, g, count, DType::FP32),
                              hierarchical_allgather(nodes, g, count, DType::FP32)}) {
      CAPTURE(nodes, g, collective_name(s.collective));
      const bool transposes = nodes > 1 && g > 1;
      CHECK(step_bytes(s).steps == static_cast<uint32_t>((g - 1) + (nodes - 1) + (transposes ? 1 : 0)));
      for (int r = 0; r < n; ++r) {
        uint64_t intra = 0, across = 0, exchange = 0;
        for (const Op& op : s.ranks[r].ops) {
          if (op.kind != OpKind::Send) continue;
          const bool same_node = op.peer / g == r / g, same_local = op.peer % g == r % g;
          (same_node && !same_local ? intra : !same_node && same_local ? across : exchange) += op.src.count * 4;
        }
        // The transpose's one block may go to a rank of either kind; it is the only sent block
        // that is not a whole ring share.
        const uint64_t t = (intra + across + exchange) - (g - 1) * (count / g * 4) - (nodes - 1) * block;
        CHECK((t == 0 || t == block));
        CHECK(intra + exchange >= (g - 1) * (count / g * 4));
        CHECK(across + exchange >= (nodes - 1) * block);
        const int held = (r % g) * nodes + r / g;  // the block rank r holds between the levels
        CHECK(t == (held == r ? 0 : block));
      }
    }
  }
}

TEST_CASE("a 16,384-rank hierarchical allreduce has few steps and ops per rank", "[schedule][hierarchical][scale]") {
  // 2,048 nodes x 8: recursive halving/doubling across nodes; what the simulator runs.
  const Schedule s = hierarchical_allreduce(2048, 8, uint64_t{1} << 28, DType::BF16, Placement::ZipCCL,
                                            InterAlgorithm::Recursive);
  REQUIRE(s.size() == 16384);
  size_t ops = 0, most = 0;
  uint32_t last_step = 0;
  for (const RankProgram& p : s.ranks) {
    ops += p.ops.size();
    most = std::max(most, p.ops.size());
    for (const Op& op : p.ops) last_step = std::max(last_step, op.step);
  }
  CHECK(last_step + 1 == 2 * 7 + 2 * 11);
  CHECK(most <= 200);  // O(g + log nodes) per rank; a ring across nodes would be ~12,000
  CHECK(ops / s.size() >= 2 * 7 + 2 * 11);
  REQUIRE_NOTHROW(validate(s));
}
