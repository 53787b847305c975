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
  for (Placement p : {Placement::PerHop, Placement::CompressOnce, Placement::ZipCCL}) {
    for (int n : {2, 3, 5, 8, 12}) {
      const uint64_t count = 1003;
      std::vector<std::vector<uint8_t>> inputs(n);
      for (int r = 0; r < n; ++r) inputs[r] = test::gaussian_bytes(DType::BF16, count, 0.02, 40 + r);
      CAPTURE(placement_name(p), n);
      CHECK(run_reference(recursive_allreduce(n, count, DType::BF16, p), inputs, opt) ==
            run_reference(recursive_allreduce(n, count, DType::BF16), inputs));
    }
  }
  CHECK_THROWS_AS(recursive_allreduce(0, 10, DType::BF16, Placement::CompressOnce), ScheduleError);
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

TEST_CASE("recursive halving reduce-scatter and doubling allgather match the ring versions for any n", "[schedule][recursive]") {
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 32;
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 64}) {
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
      for (Placement p : {Placement::None, Placement::PerHop, Placement::CompressOnce}) {
        CAPTURE(placement_name(p));
        if (p != Placement::CompressOnce) CHECK(run_reference(recursive_reduce_scatter(n, count, DType::FP32, p), inputs, opt) == rs);
        CHECK(run_reference(recursive_allgather(n, count, DType::FP32, p), blocks, opt) == ag);
      }
      if (n > 1) {
        // log2 n steps for a power of two, two more (fold in, fold out) otherwise.
        const uint32_t log2 = static_cast<uint32_t>(std::floor(std::log2(n))), extra = (n & (n - 1)) ? 2 : 0;
        CHECK(step_bytes(recursive_allgather(n, count, DType::FP32)).steps == log2 + extra);
        CHECK(step_bytes(recursive_reduce_scatter(n, count, DType::FP32)).steps == log2 + extra);
      }
    }
  }
  // Closed forms for n a power of two: (n-1)/n of the data per rank, S/2^(k+1) at halving step k
  // and S·2^k/n at doubling step k.
  const uint64_t count = 64 * 1024;
  for (int n : {2, 8, 64}) {
    CAPTURE(n);
    const StepBytes rsb = step_bytes(recursive_reduce_scatter(n, count, DType::FP32));
    const StepBytes agb = step_bytes(recursive_allgather(n, count, DType::FP32));
    for (int r = 0; r < n; ++r) {
      CHECK(rsb.sent_bytes[r] == (n - 1) * (count / n) * 4);
      CHECK(agb.sent_bytes[r] == (n - 1) * (count / n) * 4);
      for (uint32_t k = 0; k < rsb.steps; ++k) {
        CHECK(rsb.sent[r][k] == (count >> (k + 1)) * 4);
        CHECK(agb.sent[r][k] == (count / n << k) * 4);
      }
    }
  }
  // Compress-once forwards each block's bytes: one message per block, n-1 sent per rank.
  for (int n : {4, 6}) {
    const Schedule s = recursive_allgather(n, 1000, DType::FP32, Placement::CompressOnce);
    size_t compress = 0, sends = 0;
    for (const auto& rp : s.ranks)
      for (const Op& op : rp.ops) compress += op.kind == OpKind::Compress, sends += op.kind == OpKind::Send;
    CHECK(compress == static_cast<size_t>(n));
    CHECK(sends >= static_cast<size_t>(n * (n - 1)));
  }
  CHECK_THROWS_AS(recursive_allgather(0, 10, DType::FP32), ScheduleError);
  CHECK_THROWS_AS(recursive_allgather(4, 10, DType::FP32, Placement::ZipCCL), ScheduleError);
  CHECK_THROWS_AS(recursive_reduce_scatter(4, 10, DType::FP32, Placement::CompressOnce), ScheduleError);
}
