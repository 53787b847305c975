// tests/schedule/test_matrix.cpp — every allreduce, reduce-scatter and allgather algorithm x
// placement x lossless codec x group size: the uncompressed schedule computes the exact
// result (small-integer inputs) and the compressed schedule's output is bitwise the
// uncompressed one's (Gaussian inputs).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>

#include "schedule/algorithms.h"
#include "schedule/exact.h"
#include "schedule/reference_executor.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::sched;

namespace {

using Builder = std::function<Schedule(int, uint64_t, Placement)>;
using Named = std::vector<std::pair<const char*, Builder>>;

// g = 4 where n allows, else 1 (nodes of one rank).
int gpus_for(int n) { return n % 4 == 0 ? 4 : 1; }

const Named& allreduce_builders() {
  static const Named b = {
      {"ring", [](int n, uint64_t c, Placement p) { return ring_allreduce(n, c, DType::BF16, p); }},
      {"ring-piped", [](int n, uint64_t c, Placement p) { return ring_allreduce(n, c, DType::BF16, p, {2, 2}); }},
      {"recursive", [](int n, uint64_t c, Placement p) { return recursive_allreduce(n, c, DType::BF16, p); }},
      {"double-tree", [](int n, uint64_t c, Placement p) { return double_tree_allreduce(n, c, DType::BF16, p); }},
      {"direct", [](int n, uint64_t c, Placement p) { return direct_allreduce(n, c, DType::BF16, p); }},
      {"hierarchical", [](int n, uint64_t c, Placement p) {
         return hierarchical_allreduce(n / gpus_for(n), gpus_for(n), c, DType::BF16, p);
       }},
      {"hierarchical-recursive", [](int n, uint64_t c, Placement p) {
         return hierarchical_allreduce(n / gpus_for(n), gpus_for(n), c, DType::BF16, p, InterAlgorithm::Recursive);
       }},
      {"hierarchical-tree", [](int n, uint64_t c, Placement p) {
         return hierarchical_allreduce(n / gpus_for(n), gpus_for(n), c, DType::BF16, p, InterAlgorithm::Tree);
       }},
      {"hierarchical-direct", [](int n, uint64_t c, Placement p) {
         return hierarchical_allreduce(n / gpus_for(n), gpus_for(n), c, DType::BF16, p, InterAlgorithm::Direct);
       }},
      {"hierarchical-direct-piped", [](int n, uint64_t c, Placement p) {
         return hierarchical_allreduce(n / gpus_for(n), gpus_for(n), c, DType::BF16, p, InterAlgorithm::Direct, {2, 1},
                                       Placement::None);
       }},
      {"hierarchical-piped", [](int n, uint64_t c, Placement p) {
         return hierarchical_allreduce(n / gpus_for(n), gpus_for(n), c, DType::BF16, p, InterAlgorithm::Recursive, {2, 2});
       }},
  };
  return b;
}

const Named& reduce_scatter_builders() {
  static const Named b = {
      {"ring", [](int n, uint64_t c, Placement p) { return ring_reduce_scatter(n, c, DType::BF16, p); }},
      {"ring-piped", [](int n, uint64_t c, Placement p) { return ring_reduce_scatter(n, c, DType::BF16, p, {2, 2}); }},
      {"recursive", [](int n, uint64_t c, Placement p) { return recursive_reduce_scatter(n, c, DType::BF16, p); }},
      {"hierarchical", [](int n, uint64_t c, Placement p) {
         return hierarchical_reduce_scatter(n / gpus_for(n), gpus_for(n), c, DType::BF16, p);
       }},
  };
  return b;
}

const Named& allgather_builders() {
  static const Named b = {
      {"ring", [](int n, uint64_t c, Placement p) { return ring_allgather(n, c, DType::BF16, p); }},
      {"ring-piped", [](int n, uint64_t c, Placement p) { return ring_allgather(n, c, DType::BF16, p, {3, 1}); }},
      {"recursive", [](int n, uint64_t c, Placement p) { return recursive_allgather(n, c, DType::BF16, p); }},
      {"hierarchical", [](int n, uint64_t c, Placement p) {
         return hierarchical_allgather(n / gpus_for(n), gpus_for(n), c, DType::BF16, p);
       }},
  };
  return b;
}

// For each n, count and builder: the plain schedule on exact inputs gives `exact(e, r)` on
// every rank r; with each placement and lossless codec the output on Gaussian inputs is
// bitwise the plain one's.
void check_matrix(const Named& builders, const std::vector<Placement>& placements, bool gathers,
                  const std::function<std::vector<uint8_t>(const test::ExactInputs&, int n, int r)>& exact) {
  for (int n : {1, 2, 3, 4, 5, 7, 8, 16, 64}) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{1003}}) {
      const auto e = test::exact_inputs(DType::BF16, n, count);
      std::vector<std::vector<uint8_t>> inputs(n);
      for (int r = 0; r < n; ++r)
        inputs[r] = test::gaussian_bytes(DType::BF16, gathers ? block_of(count, n, r).count() : count, 0.01, 500 + r);
      for (const auto& [name, build] : builders) {
        CAPTURE(name, n, count);
        const auto exact_out = run_reference(build(n, count, Placement::None), gathers ? e.blocks : e.inputs);
        for (int r = 0; r < n; ++r) REQUIRE(exact_out[r] == exact(e, n, r));
        const auto plain = run_reference(build(n, count, Placement::None), inputs);
        for (Placement p : placements) {
          for (auto codec : codec_names()) {
            if (!find_codec(codec)->lossless()) continue;
            ReferenceOptions opt;
            opt.codec = find_codec(codec);
            opt.encode.chunk_elements = 128;
            CAPTURE(placement_name(p), codec);
            REQUIRE(run_reference(build(n, count, p), inputs, opt) == plain);
          }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("allreduce algorithms x placements x codecs are lossless end to end", "[schedule][matrix]") {
  check_matrix(allreduce_builders(), {Placement::PerHop, Placement::CompressOnce, Placement::ZipCCL}, false,
               [](const test::ExactInputs& e, int, int) { return test::encode_values(DType::BF16, e.sum); });
}

TEST_CASE("reduce-scatter algorithms x placements x codecs are lossless end to end", "[schedule][matrix]") {
  check_matrix(reduce_scatter_builders(), {Placement::PerHop}, false, [](const test::ExactInputs& e, int n, int r) {
    return test::encoded_block(DType::BF16, e.sum, n, r);
  });
}

TEST_CASE("allgather algorithms x placements x codecs are lossless end to end", "[schedule][matrix]") {
  check_matrix(allgather_builders(), {Placement::PerHop, Placement::CompressOnce}, true,
               [](const test::ExactInputs& e, int, int) { return test::encode_values(DType::BF16, e.gathered); });
}

TEST_CASE("dependencies are complete: any dependency-respecting order gives the same result", "[schedule][deps]") {
  const int n = 5;
  const uint64_t count = 1003;
  std::vector<std::vector<uint8_t>> inputs(n), blocks(n);
  for (int r = 0; r < n; ++r) {
    inputs[r] = test::gaussian_bytes(DType::FP32, count, 1.0, 800 + r);
    blocks[r] = test::gaussian_bytes(DType::FP32, block_of(count, n, r).count(), 1.0, 900 + r);
  }
  ReferenceOptions opt;
  opt.codec = find_codec("entropy-exp");
  opt.encode.chunk_elements = 64;
  const std::vector<std::pair<Schedule, const std::vector<std::vector<uint8_t>>*>> cases = {
      {ring_allreduce(n, count, DType::FP32, Placement::ZipCCL, {3, 2}), &inputs},
      {ring_allreduce(n, count, DType::FP32, Placement::None, {2, 3}), &inputs},
      {recursive_allreduce(n, count, DType::FP32, Placement::PerHop), &inputs},
      {double_tree_allreduce(n, count, DType::FP32, Placement::CompressOnce), &inputs},
      {ring_allgather(n, count, DType::FP32, Placement::CompressOnce), &blocks},
      {chain_broadcast(n, 2, count, DType::FP32, 4, Placement::CompressOnce), &inputs},
      {ring_reduce_scatter(n, count, DType::FP32, Placement::PerHop, {2, 2}), &inputs},
      {ring_allgather(n, count, DType::FP32, Placement::CompressOnce, {3, 1}), &blocks},
      {recursive_reduce_scatter(n, count, DType::FP32, Placement::PerHop), &inputs},
      {recursive_allgather(n, count, DType::FP32, Placement::CompressOnce), &blocks},
      {recursive_allreduce(n, count, DType::FP32, Placement::CompressOnce), &inputs},
      {direct_allreduce(n, count, DType::FP32, Placement::None), &inputs},
      {direct_allreduce(n, count, DType::FP32, Placement::ZipCCL), &inputs},
      {direct_allreduce(n, count, DType::FP32, Placement::CompressOnce), &inputs},
  };
  for (const auto& [s, in] : cases) {
    std::vector<std::vector<uint8_t>> feed = *in;
    if (s.collective == Collective::Broadcast)
      for (int r = 0; r < n; ++r) feed[r].resize(s.ranks[r].input_count * 4);
    const auto in_order = run_reference(s, feed, opt);
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      ReferenceOptions shuffled = opt;
      shuffled.order_seed = seed;
      CAPTURE(s.algorithm, seed);
      REQUIRE(run_reference(s, feed, shuffled) == in_order);
    }
  }
  // The check can fail: drop the dependencies of every reduce of a pipelined ring (so a
  // reduce may run before the data it adds has arrived) and some order must differ.
  Schedule broken = ring_allreduce(n, count, DType::FP32, Placement::None, {2, 2});
  for (auto& rp : broken.ranks)
    for (auto& op : rp.ops)
      if (op.kind == OpKind::Reduce) op.deps.clear();
  const auto in_order = run_reference(broken, inputs);
  bool differs = false;
  for (uint64_t seed = 1; seed <= 20 && !differs; ++seed) {
    ReferenceOptions shuffled;
    shuffled.order_seed = seed;
    differs = run_reference(broken, inputs, shuffled) != in_order;
  }
  CHECK(differs);
}

TEST_CASE("dependencies of the hierarchical schedules are complete", "[schedule][deps][hierarchical]") {
  const int nodes = 3, g = 2, n = nodes * g;
  const uint64_t count = 1003;
  const auto e = test::exact_inputs(DType::FP32, n, count);
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 64;
  const std::vector<std::pair<Schedule, const std::vector<std::vector<uint8_t>>*>> cases = {
      {hierarchical_allreduce(nodes, g, count, DType::FP32, Placement::ZipCCL, InterAlgorithm::Recursive, {2, 2}), &e.inputs},
      {hierarchical_allreduce(nodes, g, count, DType::FP32, Placement::CompressOnce, InterAlgorithm::Tree), &e.inputs},
      {hierarchical_allreduce(nodes, g, count, DType::FP32, Placement::None, InterAlgorithm::Direct, {2, 1}), &e.inputs},
      {hierarchical_allreduce(nodes, g, count, DType::FP32, Placement::ZipCCL, InterAlgorithm::Direct, {1, 2},
                              Placement::None),
       &e.inputs},
      {hierarchical_reduce_scatter(nodes, g, count, DType::FP32, Placement::PerHop), &e.inputs},
      {hierarchical_allgather(nodes, g, count, DType::FP32, Placement::CompressOnce), &e.blocks},
  };
  for (const auto& [s, in] : cases) {
    const auto in_order = run_reference(s, *in, opt);
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      ReferenceOptions shuffled = opt;
      shuffled.order_seed = seed;
      CAPTURE(s.algorithm, seed);
      REQUIRE(run_reference(s, *in, shuffled) == in_order);
    }
  }
}

TEST_CASE("compare_outputs measures max and relative L2 error", "[schedule][error]") {
  const auto f32 = [](std::vector<float> v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  const std::vector<std::vector<uint8_t>> want = {f32({3, 4}), f32({0, 0})};
  const OutputError same = compare_outputs(DType::FP32, want, want);
  CHECK(same.max_abs == 0);
  CHECK(same.rel_l2 == 0);
  CHECK(same.elements == 4);
  const OutputError e = compare_outputs(DType::FP32, {f32({3, 4}), f32({0, 0.5f})}, want);
  CHECK(e.max_abs == Approx(0.5));
  CHECK(e.rel_l2 == Approx(0.5 / 5.0));
  CHECK(e.snr_db == Approx(20.0));  // 10 log10(25 / 0.25)
  CHECK(std::isinf(same.snr_db));
  CHECK(std::isinf(compare_outputs(DType::FP32, {f32({3, NAN}), f32({0, 0})}, want).max_abs));
  CHECK_THROWS_AS(compare_outputs(DType::FP32, {f32({3, 4})}, want), ScheduleError);
}
