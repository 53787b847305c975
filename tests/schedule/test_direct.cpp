// tests/schedule/test_direct.cpp — the direct allreduce (two steps, every block straight to its
// owner and back) and the batches its codec ops form: exact sums, steps and bytes, one launch
// per phase, and validate()'s rules for batches.
#include <catch2/catch.hpp>

#include <functional>

#include "schedule/algorithms.h"
#include "schedule/exact.h"
#include "schedule/reference_executor.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::sched;

namespace {

// Per rank: the number of batches of each codec kind (a batch: a lead and its followers).
struct Launches {
  int compress = 0, decompress = 0, batched = 0;
};
Launches launches(const RankProgram& p) {
  Launches l;
  for (const Op& op : p.ops) {
    if (op.batched) {
      ++l.batched;
      continue;
    }
    if (op.kind == OpKind::Compress) ++l.compress;
    if (op.kind == OpKind::Decompress) ++l.decompress;
  }
  return l;
}

}  // namespace

TEST_CASE("direct allreduce computes the exact sum for any group size", "[schedule][direct]") {
  for (int n : {1, 2, 3, 5, 8, 13}) {
    for (uint64_t count : {uint64_t{0}, uint64_t{2}, uint64_t{1003}}) {
      CAPTURE(n, count);
      const auto e = test::exact_inputs(DType::FP32, n, count);
      const auto want = test::encode_values(DType::FP32, e.sum);
      for (Placement p : {Placement::None, Placement::PerHop, Placement::CompressOnce, Placement::ZipCCL}) {
        ReferenceOptions opt;
        opt.codec = find_codec("gauss-exp");
        opt.encode.chunk_elements = 64;
        const auto out = run_reference(direct_allreduce(n, count, DType::FP32, p), e.inputs, opt);
        for (int r = 0; r < n; ++r) REQUIRE(out[r] == want);
      }
    }
  }
}

TEST_CASE("direct allreduce: two steps, 2(n-1)/n of the data, four codec launches a rank", "[schedule][direct][cost]") {
  const int n = 8;
  const uint64_t count = 8 * 1024;
  const StepBytes b = step_bytes(direct_allreduce(n, count, DType::BF16));
  CHECK(b.steps == 2);
  for (int r = 0; r < n; ++r) CHECK(b.sent_bytes[r] == 2 * (n - 1) * (count / n) * 2);

  // Compressed both phases: a batch of n - 1 compressions, one of n - 1 decompressions, the
  // allgather's one compression and its batch of n - 1 decompressions.
  const Schedule zip = direct_allreduce(n, count, DType::BF16, Placement::ZipCCL);
  for (int r = 0; r < n; ++r) {
    const Launches l = launches(zip.ranks[r]);
    CHECK(l.compress == 2);
    CHECK(l.decompress == 2);
    CHECK(l.batched == 3 * (n - 2));
  }
  // Compress-once: the reduce-scatter moves blocks as they are.
  const Launches once = launches(direct_allreduce(n, count, DType::BF16, Placement::CompressOnce).ranks[0]);
  CHECK(once.compress == 1);
  CHECK(once.decompress == 1);
  CHECK(once.batched == n - 2);
  // The text form marks the ops of a batch.
  CHECK(to_text(zip).find("batched after") != std::string::npos);
  CHECK(to_text(direct_allreduce(n, count, DType::BF16)).find("batched") == std::string::npos);
}

TEST_CASE("validate: a batched op depends on its batch's first op only and follows it", "[schedule][direct][validate]") {
  const Schedule good = direct_allreduce(4, 1000, DType::BF16, Placement::ZipCCL);
  REQUIRE_NOTHROW(validate(good));
  // The first batched op of rank 0 and its lead.
  uint32_t first = 0;
  while (!good.ranks[0].ops[first].batched) ++first;
  const uint32_t lead = good.ranks[0].ops[first].deps.at(0);
  REQUIRE(lead == first - 1);

  auto broken = [&](const std::function<void(std::vector<Op>&)>& edit) {
    Schedule s = good;
    edit(s.ranks[0].ops);
    try {
      validate(s);
    } catch (const ScheduleError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // A second dependency.
  CHECK(broken([&](std::vector<Op>& ops) { ops[first].deps.push_back(0); }).find("rank 0 op " + std::to_string(first)) !=
        std::string::npos);
  // Led by an op of another kind.
  CHECK(broken([&](std::vector<Op>& ops) {
          ops[lead].kind = OpKind::Decompress;
          std::swap(ops[lead].src, ops[lead].dst);
        }).find("rank 0 op " + std::to_string(first) + ": a batched compress") != std::string::npos);
  // A batched op that is not a codec op.
  CHECK(broken([&](std::vector<Op>& ops) {
          for (auto& op : ops)
            if (op.kind == OpKind::Reduce) {
              op.batched = true;
              break;
            }
        }).find("batched reduce") != std::string::npos);
  // Not next to its batch: its lead is two ops back with a non-batched op between.
  Schedule gap = good;
  auto& ops = gap.ranks[0].ops;
  const uint32_t end = batch_end(ops, lead);
  REQUIRE(end - lead >= 3);
  ops[lead + 1].batched = false;  // the middle op now leads nothing and the next follows a gap
  ops[lead + 1].deps = {lead};
  CHECK_THROWS_WITH(validate(gap), Catch::Contains("follow it or another op of its batch"));
}
