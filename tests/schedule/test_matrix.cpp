// tests/schedule/test_matrix.cpp — every allreduce algorithm x placement x lossless codec x
// group size: the compressed schedule's output is bitwise the uncompressed one's.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>

#include "schedule/algorithms.h"
#include "schedule/reference_executor.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::sched;

TEST_CASE("allreduce algorithms x placements x codecs are lossless end to end", "[schedule][matrix]") {
  using Builder = std::function<Schedule(int, uint64_t, Placement)>;
  const std::vector<std::pair<const char*, Builder>> algorithms = {
      {"ring", [](int n, uint64_t c, Placement p) { return ring_allreduce(n, c, DType::BF16, p); }},
      {"ring-piped", [](int n, uint64_t c, Placement p) { return ring_allreduce(n, c, DType::BF16, p, {2, 2}); }},
      {"recursive", [](int n, uint64_t c, Placement p) { return recursive_allreduce(n, c, DType::BF16, p); }},
      {"double-tree", [](int n, uint64_t c, Placement p) { return double_tree_allreduce(n, c, DType::BF16, p); }},
      {"hierarchical", [](int n, uint64_t c, Placement p) {
         const int g = n % 4 == 0 ? 4 : 1;
         return hierarchical_allreduce(n / g, g, c, DType::BF16, p);
       }},
  };
  for (int n : {1, 2, 3, 4, 5, 7, 8, 16, 64}) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{1003}}) {
      std::vector<std::vector<uint8_t>> inputs(n);
      for (int r = 0; r < n; ++r) inputs[r] = test::gaussian_bytes(DType::BF16, count, 0.01, 500 + r);
      for (const auto& [name, build] : algorithms) {
        const auto plain = run_reference(build(n, count, Placement::None), inputs);
        for (Placement p : {Placement::PerHop, Placement::CompressOnce, Placement::ZipCCL}) {
          if (std::string(name) == "recursive" && p == Placement::CompressOnce) continue;  // not built
          for (auto codec : codec_names()) {
            ReferenceOptions opt;
            opt.codec = find_codec(codec);
            opt.encode.chunk_elements = 128;
            CAPTURE(name, n, count, placement_name(p), codec);
            REQUIRE(run_reference(build(n, count, p), inputs, opt) == plain);
          }
        }
      }
    }
  }
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
  CHECK(std::isinf(compare_outputs(DType::FP32, {f32({3, NAN}), f32({0, 0})}, want).max_abs));
  CHECK_THROWS_AS(compare_outputs(DType::FP32, {f32({3, 4})}, want), ScheduleError);
}
