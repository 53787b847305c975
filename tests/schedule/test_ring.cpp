// tests/schedule/test_ring.cpp — the schedule IR's validator and the ring collectives,
// run by the reference executor with inputs whose exact sum is predictable.
#include <catch2/catch.hpp>

#include <cstring>
#include <set>

#include "io/float_convert.h"
#include "schedule/algorithms.h"
#include "schedule/exact.h"
#include "schedule/reference_executor.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::sched;

using test::encode_values;
using test::value_of;

TEST_CASE("ring allreduce computes the exact sum on every rank", "[schedule][ring]") {
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  for (int n : {1, 2, 3, 4, 5, 7, 8, 16, 64}) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t(n - 1), uint64_t{1000}, uint64_t{1003}}) {
      CAPTURE(dtype_name(dtype), n, count);
      const Schedule s = ring_allreduce(n, count, dtype);
      std::vector<std::vector<uint8_t>> inputs(n);
      std::vector<int> expected(count, 0);
      for (int r = 0; r < n; ++r) {
        std::vector<int> v(count);
        for (uint64_t i = 0; i < count; ++i) {
          v[i] = value_of(r, i);
          expected[i] += v[i];
        }
        inputs[r] = encode_values(dtype, v);
      }
      const auto want = encode_values(dtype, expected);
      const auto outputs = run_reference(s, inputs);
      for (int r = 0; r < n; ++r) REQUIRE(outputs[r] == want);
    }
  }
}

TEST_CASE("ring allreduce moves 2(n-1)/n of the data in 2(n-1) steps", "[schedule][ring][cost]") {
  for (int n : {2, 4, 8, 64}) {
    const uint64_t count = 64 * 1024;  // divisible by every n here
    const Schedule s = ring_allreduce(n, count, DType::BF16);
    const StepBytes b = step_bytes(s);
    CAPTURE(n);
    CHECK(b.steps == static_cast<uint32_t>(2 * (n - 1)));
    for (int r = 0; r < n; ++r) {
      CHECK(b.sent_bytes[r] == 2 * (n - 1) * (count / n) * 2);
      CHECK(b.max_step_bytes[r] == (count / n) * 2);
      for (uint32_t step = 0; step < b.steps; ++step) {  // one block each way at every step
        CHECK(b.sent[r][step] == (count / n) * 2);
        CHECK(b.received[r][step] == (count / n) * 2);
      }
    }
  }
  CHECK(step_bytes(ring_allreduce(1, 100, DType::FP32)).steps == 0);
}

TEST_CASE("validate names the rank and op of a broken schedule", "[schedule][validate]") {
  const Schedule good = ring_allreduce(4, 100, DType::FP32);
  REQUIRE_NOTHROW(validate(good));

  auto expect_error = [](const Schedule& s, const std::string& part) {
    try {
      validate(s);
      FAIL("no ScheduleError for: " << part);
    } catch (const ScheduleError& e) {
      CAPTURE(e.what());
      CHECK(std::string(e.what()).find(part) != std::string::npos);
    }
  };
  {
    Schedule s = good;  // drop rank 2's first recv: its peer's send is never received
    auto& ops = s.ranks[2].ops;
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].kind == OpKind::Recv) {
        ops.erase(ops.begin() + static_cast<long>(i));
        break;
      }
    for (auto& op : ops) op.deps.clear();
    expect_error(s, "rank ");
  }
  {
    Schedule s = good;  // every rank receives before it sends: a cycle of waiting recvs
    for (auto& r : s.ranks) {
      for (auto& op : r.ops) op.deps.clear();
      for (size_t i = 0; i + 1 < r.ops.size(); ++i)
        if (r.ops[i].kind == OpKind::Send && r.ops[i + 1].kind == OpKind::Recv) std::swap(r.ops[i], r.ops[i + 1]);
    }
    expect_error(s, "deadlock");
  }
  {
    Schedule s = good;
    s.ranks[1].ops[3].dst.count += 1000;  // a slice past its buffer
    s.ranks[1].ops[3].src.count += 1000;
    expect_error(s, "rank 1 op 3");
  }
  {
    Schedule s = good;
    s.ranks[3].ops[2].deps = {7};
    expect_error(s, "rank 3 op 2: depends on op 7");
  }
  {
    Schedule s = good;
    s.ranks[0].ops[1].peer = 9;
    expect_error(s, "rank 0 op 1: send peer 9");
  }
}

TEST_CASE("a schedule prints one line per op", "[schedule]") {
  const Schedule s = ring_allreduce(3, 9, DType::BF16);
  const std::string text = to_text(s);
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  size_t ops = 0;
  for (const auto& r : s.ranks) ops += r.ops.size();
  CHECK(lines == ops + 1);
  CHECK(text.find("allreduce ring/none n=3 count=9 bf16") == 0);
  CHECK(text.find("rank 1 op 1 step 0: send output[3+3] to 2 after 0") != std::string::npos);
  CHECK(text.find("rank 1 op 2 step 0: recv from 0 -> scratch0[0+3] after 1") != std::string::npos);
}

TEST_CASE("with a lossless codec every placement is bitwise the uncompressed ring", "[schedule][ring][compression]") {
  const DType dtype = GENERATE(DType::BF16, DType::FP16, DType::FP32);
  const Placement placement = GENERATE(Placement::PerHop, Placement::CompressOnce, Placement::ZipCCL);
  for (auto codec_name : codec_names()) {
    if (!find_codec(codec_name)->lossless()) continue;
    ReferenceOptions opt;
    opt.codec = find_codec(codec_name);
    opt.encode.chunk_elements = 64;  // several chunks per block even for small counts
    for (int n : {1, 2, 3, 5, 8, 16}) {
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{1003}}) {
        CAPTURE(dtype_name(dtype), placement_name(placement), codec_name, n, count);
        std::vector<std::vector<uint8_t>> inputs(n);
        for (int r = 0; r < n; ++r) inputs[r] = test::gaussian_bytes(dtype, count, 0.01, 100 + r);
        const auto plain = run_reference(ring_allreduce(n, count, dtype), inputs);
        const Schedule s = ring_allreduce(n, count, dtype, placement);
        const auto compressed = run_reference(s, inputs, opt);
        REQUIRE(compressed == plain);
        // The schedule really compresses: it has compress ops exactly where the placement says.
        size_t compress_ops = 0;
        for (const Op& op : s.ranks[0].ops) compress_ops += op.kind == OpKind::Compress;
        const size_t expected = placement == Placement::PerHop ? 2 * (n - 1)
                                : placement == Placement::ZipCCL ? (n - 1) + (n > 1 ? 1 : 0)
                                                                 : (n > 1 ? 1 : 0);
        CHECK(compress_ops == expected);
      }
    }
  }
}

TEST_CASE("a compressing schedule without a codec is an error, not a crash", "[schedule]") {
  const Schedule s = ring_allreduce(2, 10, DType::BF16, Placement::PerHop);
  std::vector<std::vector<uint8_t>> inputs(2, std::vector<uint8_t>(20, 0));
  CHECK_THROWS_AS(run_reference(s, inputs), ScheduleError);
}

TEST_CASE("ring reduce-scatter and allgather compute their collectives", "[schedule][ring]") {
  const DType dtype = GENERATE(DType::BF16, DType::FP32);
  for (int n : {1, 2, 3, 4, 5, 7, 8, 16, 64}) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t(n + 1), uint64_t{1003}}) {
      CAPTURE(dtype_name(dtype), n, count);
      // reduce-scatter: rank r gets block r of the exact sum
      std::vector<std::vector<uint8_t>> inputs(n);
      std::vector<int> sum(count, 0);
      for (int r = 0; r < n; ++r) {
        std::vector<int> v(count);
        for (uint64_t i = 0; i < count; ++i) sum[i] += v[i] = value_of(r, i);
        inputs[r] = encode_values(dtype, v);
      }
      const auto rs = run_reference(ring_reduce_scatter(n, count, dtype), inputs);
      for (int r = 0; r < n; ++r) {
        const Block b = block_of(count, n, r);
        REQUIRE(rs[r] == encode_values(dtype, std::vector<int>(sum.begin() + b.begin, sum.begin() + b.end)));
      }
      // allgather: every rank gets every rank's block
      std::vector<int> all(count);
      std::vector<std::vector<uint8_t>> blocks(n);
      for (int r = 0; r < n; ++r) {
        const Block b = block_of(count, n, r);
        std::vector<int> v;
        for (uint64_t i = b.begin; i < b.end; ++i) v.push_back(all[i] = value_of(r, i));
        blocks[r] = encode_values(dtype, v);
      }
      const auto ag = run_reference(ring_allgather(n, count, dtype), blocks);
      for (int r = 0; r < n; ++r) REQUIRE(ag[r] == encode_values(dtype, all));
    }
  }
}

TEST_CASE("ring reduce-scatter and allgather cost (n-1)/n in n-1 steps; placements are lossless",
          "[schedule][ring][cost][compression]") {
  for (int n : {2, 4, 8, 64}) {
    const uint64_t count = 64 * 1024;
    CAPTURE(n);
    for (const Schedule& s : {ring_reduce_scatter(n, count, DType::FP32), ring_allgather(n, count, DType::FP32)}) {
      const StepBytes b = step_bytes(s);
      CHECK(b.steps == static_cast<uint32_t>(n - 1));
      for (int r = 0; r < n; ++r) CHECK(b.sent_bytes[r] == (n - 1) * (count / n) * 4);
    }
  }
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 64;
  for (int n : {2, 3, 8}) {
    const uint64_t count = 1003;
    std::vector<std::vector<uint8_t>> inputs(n), blocks(n);
    for (int r = 0; r < n; ++r) {
      inputs[r] = test::gaussian_bytes(DType::BF16, count, 0.02, 7 + r);
      blocks[r] = test::gaussian_bytes(DType::BF16, block_of(count, n, r).count(), 0.02, 70 + r);
    }
    CAPTURE(n);
    CHECK(run_reference(ring_reduce_scatter(n, count, DType::BF16, Placement::PerHop), inputs, opt) ==
          run_reference(ring_reduce_scatter(n, count, DType::BF16), inputs));
    for (Placement p : {Placement::PerHop, Placement::CompressOnce})
      CHECK(run_reference(ring_allgather(n, count, DType::BF16, p), blocks, opt) ==
            run_reference(ring_allgather(n, count, DType::BF16), blocks));
  }
  CHECK_THROWS_AS(ring_reduce_scatter(4, 10, DType::BF16, Placement::CompressOnce), ScheduleError);
  CHECK_THROWS_AS(ring_allgather(4, 10, DType::BF16, Placement::ZipCCL), ScheduleError);
}

TEST_CASE("pipelined chunks and channels keep the ring allreduce exact", "[schedule][ring][pipelining]") {
  ReferenceOptions opt;
  opt.codec = find_codec("gauss-exp");
  opt.encode.chunk_elements = 32;
  for (auto [chunks, channels] : std::vector<std::pair<uint32_t, uint32_t>>{{1, 1}, {4, 1}, {1, 2}, {3, 2}}) {
    for (int n : {1, 2, 3, 5, 8}) {
      for (uint64_t count : {uint64_t{0}, uint64_t{7}, uint64_t{1003}}) {
        CAPTURE(chunks, channels, n, count);
        std::vector<std::vector<uint8_t>> inputs(n);
        std::vector<int> sum(count, 0);
        for (int r = 0; r < n; ++r) {
          std::vector<int> v(count);
          for (uint64_t i = 0; i < count; ++i) sum[i] += v[i] = value_of(r, i);
          inputs[r] = encode_values(DType::FP16, v);
        }
        const Pipelining pipe{chunks, channels};
        for (Placement p : {Placement::None, Placement::ZipCCL}) {
          const Schedule s = ring_allreduce(n, count, DType::FP16, p, pipe);
          const auto out = run_reference(s, inputs, opt);
          for (int r = 0; r < n; ++r) REQUIRE(out[r] == encode_values(DType::FP16, sum));
          // Each piece's chain starts right after the initial copy; no other op waits for it.
          size_t chain_starts = 0;
          for (const Op& op : s.ranks[0].ops) chain_starts += op.deps == std::vector<uint32_t>{0};
          CHECK(chain_starts == (n > 1 ? chunks * channels : 0));
        }
      }
    }
  }
  const uint64_t count = 8 * 1024;
  const StepBytes plain = step_bytes(ring_allreduce(8, count, DType::BF16));
  const Schedule four = ring_allreduce(8, count, DType::BF16, Placement::None, {4, 2});
  const StepBytes piped = step_bytes(four);
  // Each chunk's step is a lockstep group of its own: chunk j's base step k is step k x 4 + j,
  // k + j the time step it runs at, 3 behind chunk 0 for the last chunk.
  CHECK(piped.steps == plain.steps * 4);
  std::set<uint32_t> depth;
  for (const Op& op : four.ranks[0].ops)
    if (op.kind == OpKind::Send) depth.insert(op.step / 4 + op.step % 4);
  CHECK(depth.size() == plain.steps + 3);
  CHECK(piped.sent_bytes == plain.sent_bytes);
  CHECK_THROWS_AS(ring_allreduce(4, 10, DType::BF16, Placement::None, {0, 1}), ScheduleError);
}

TEST_CASE("pipelined ring reduce-scatter and allgather keep the block layout", "[schedule][ring][pipelining]") {
  ReferenceOptions opt;
  opt.codec = find_codec("entropy-exp");
  opt.encode.chunk_elements = 32;
  for (auto [chunks, channels] : std::vector<std::pair<uint32_t, uint32_t>>{{2, 1}, {1, 3}, {3, 2}}) {
    for (int n : {1, 2, 3, 5, 8}) {
      for (uint64_t count : {uint64_t{0}, uint64_t{7}, uint64_t{1003}}) {
        CAPTURE(chunks, channels, n, count);
        const auto e = test::exact_inputs(DType::BF16, n, count);
        const Pipelining pipe{chunks, channels};
        for (Placement p : {Placement::None, Placement::PerHop}) {
          const Schedule rs = ring_reduce_scatter(n, count, DType::BF16, p, pipe);
          const auto out = run_reference(rs, e.inputs, opt);
          for (int r = 0; r < n; ++r) REQUIRE(out[r] == test::encoded_block(DType::BF16, e.sum, n, r));
          ReferenceOptions shuffled = opt;
          shuffled.order_seed = 3;
          REQUIRE(run_reference(rs, e.inputs, shuffled) == out);
        }
        for (Placement p : {Placement::None, Placement::CompressOnce}) {
          const Schedule ag = ring_allgather(n, count, DType::BF16, p, pipe);
          const auto out = run_reference(ag, e.blocks, opt);
          for (int r = 0; r < n; ++r) REQUIRE(out[r] == encode_values(DType::BF16, e.gathered));
          ReferenceOptions shuffled = opt;
          shuffled.order_seed = 5;
          REQUIRE(run_reference(ag, e.blocks, shuffled) == out);
        }
      }
    }
  }
  const uint64_t count = 8 * 1024;
  for (const auto& [plain, piped] :
       {std::pair{ring_reduce_scatter(8, count, DType::BF16), ring_reduce_scatter(8, count, DType::BF16, Placement::None, {4, 2})},
        std::pair{ring_allgather(8, count, DType::BF16), ring_allgather(8, count, DType::BF16, Placement::None, {4, 2})}}) {
    const StepBytes a = step_bytes(plain), b = step_bytes(piped);
    CHECK(b.steps == a.steps * 4);  // each chunk's step a lockstep group of its own
    CHECK(b.sent_bytes == a.sent_bytes);
    CHECK(b.sent[0][0] * 4 == a.sent[0][0]);  // step 0 carries chunk 0 of each channel: a quarter of a block
  }
  CHECK_THROWS_AS(ring_allgather(4, 10, DType::BF16, Placement::None, {1, 0}), ScheduleError);
}
