// tests/schedule/test_recursive.cpp — recursive halving/doubling allreduce: exact sums for
// power-of-two and other group sizes, its step and byte counts, lossless placements.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "io/float_convert.h"
#include "schedule/algorithms.h"
#include "schedule/reference_executor.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::sched;

TEST_CASE("recursive halving/doubling allreduce computes the exact sum", "[schedule][recursive]") {
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 64}) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t(n + 3), uint64_t{1003}}) {
      CAPTURE(n, count);
      const Schedule s = recursive_allreduce(n, count, DType::FP32);
      std::vector<std::vector<uint8_t>> inputs(n);
      std::vector<float> sum(count, 0.0f);
      for (int r = 0; r < n; ++r) {
        inputs[r].resize(count * 4);
        for (uint64_t i = 0; i < count; ++i) {
          // Small integers: exact in fp32 in any order, so a missed or doubled block shows.
          const float v = static_cast<float>(static_cast<int>((r * 5 + i * 11) % 9) - 4);
          std::memcpy(inputs[r].data() + 4 * i, &v, 4);
          sum[i] += v;
        }
      }
      std::vector<uint8_t> want(count * 4);
      if (count) std::memcpy(want.data(), sum.data(), count * 4);
      const auto outputs = run_reference(s, inputs);
      for (int r = 0; r < n; ++r) REQUIRE(outputs[r] == want);
    }
  }
}

TEST_CASE("recursive halving/doubling moves 2(n-1)/n of the data in 2 log2 n steps", "[schedule][recursive][cost]") {
  for (int n : {2, 4, 8, 64}) {
    const uint64_t count = 64 * 1024;
    const StepBytes b = step_bytes(recursive_allreduce(n, count, DType::BF16));
    CAPTURE(n);
    CHECK(b.steps == 2 * static_cast<uint32_t>(std::log2(n)));
    for (int r = 0; r < n; ++r) CHECK(b.sent_bytes[r] == 2 * (n - 1) * (count / n) * 2);
  }
  // Not a power of two: two extra steps for the fix-up.
  CHECK(step_bytes(recursive_allreduce(6, 1024, DType::BF16)).steps == 2 * 2 + 2);
}

TEST_CASE("recursive halving/doubling with a lossless codec is bitwise the uncompressed run", "[schedule][recursive][compression]") {
  ReferenceOptions opt;
  opt.codec = find_codec("entropy-exp");
  opt.encode.chunk_elements = 64;
  for (Placement p : {Placement::PerHop, Placement::ZipCCL}) {
    for (int n : {2, 3, 5, 8}) {
      const uint64_t count = 1003;
      std::vector<std::vector<uint8_t>> inputs(n);
      for (int r = 0; r < n; ++r) inputs[r] = test::gaussian_bytes(DType::BF16, count, 0.02, 40 + r);
      CAPTURE(placement_name(p), n);
      CHECK(run_reference(recursive_allreduce(n, count, DType::BF16, p), inputs, opt) ==
            run_reference(recursive_allreduce(n, count, DType::BF16), inputs));
    }
  }
  CHECK_THROWS_AS(recursive_allreduce(4, 10, DType::BF16, Placement::CompressOnce), ScheduleError);
}

TEST_CASE("double binary tree allreduce computes the exact sum with every placement", "[schedule][tree]") {
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 32;
  for (int n : {1, 2, 3, 4, 5, 7, 8, 16, 33}) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{1003}}) {
      std::vector<std::vector<uint8_t>> inputs(n);
      std::vector<float> sum(count, 0.0f);
      for (int r = 0; r < n; ++r) {
        inputs[r].resize(count * 4);
        for (uint64_t i = 0; i < count; ++i) {
          const float v = static_cast<float>(static_cast<int>((r * 3 + i * 7) % 5) - 2);
          std::memcpy(inputs[r].data() + 4 * i, &v, 4);
          sum[i] += v;
        }
      }
      std::vector<uint8_t> want(count * 4);
      if (count) std::memcpy(want.data(), sum.data(), count * 4);
      for (Placement p : {Placement::None, Placement::PerHop, Placement::CompressOnce, Placement::ZipCCL}) {
        CAPTURE(n, count, placement_name(p));
        const auto out = run_reference(double_tree_allreduce(n, count, DType::FP32, p), inputs, opt);
        for (int r = 0; r < n; ++r) REQUIRE(out[r] == want);
      }
    }
  }
}

TEST_CASE("recursive halving reduce-scatter and doubling allgather match the ring versions", "[schedule][recursive]") {
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 32;
  for (int n : {1, 2, 4, 8, 16, 64}) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t(n + 3), uint64_t{1003}}) {
      CAPTURE(n, count);
      std::vector<std::vector<uint8_t>> inputs(n), blocks(n);
      for (int r = 0; r < n; ++r) {
        inputs[r].resize(count * 4);
        for (uint64_t i = 0; i < count; ++i) {
          const float v = static_cast<float>(static_cast<int>((r + i * 5) % 7) - 3);  // exact in any order
          std::memcpy(inputs[r].data() + 4 * i, &v, 4);
        }
        blocks[r] = test::gaussian_bytes(DType::FP32, block_of(count, n, r).count(), 1.0, 60 + r);
      }
      const auto rs = run_reference(ring_reduce_scatter(n, count, DType::FP32), inputs);
      const auto ag = run_reference(ring_allgather(n, count, DType::FP32), blocks);
      for (Placement p : {Placement::None, Placement::PerHop}) {
        CHECK(run_reference(recursive_reduce_scatter(n, count, DType::FP32, p), inputs, opt) == rs);
        CHECK(run_reference(recursive_allgather(n, count, DType::FP32, p), blocks, opt) == ag);
      }
      if (n > 1) {
        const StepBytes b = step_bytes(recursive_allgather(n, count, DType::FP32));
        CHECK(b.steps == static_cast<uint32_t>(std::log2(n)));
      }
    }
  }
  const uint64_t count = 64 * 1024;
  for (int n : {2, 8, 64})
    for (const Schedule& s : {recursive_reduce_scatter(n, count, DType::FP32), recursive_allgather(n, count, DType::FP32)}) {
      const StepBytes b = step_bytes(s);
      for (int r = 0; r < n; ++r) CHECK(b.sent_bytes[r] == (n - 1) * (count / n) * 4);
    }
  CHECK_THROWS_AS(recursive_allgather(6, 10, DType::FP32), ScheduleError);
  CHECK_THROWS_AS(recursive_reduce_scatter(4, 10, DType::FP32, Placement::CompressOnce), ScheduleError);
}
