// tests/schedule/test_build.cpp — the dispatcher: every algorithm name of every collective
// builds a valid schedule that computes its collective; unknown names and unsupported
// combinations are ScheduleErrors that name them.
#include <catch2/catch.hpp>

#include "schedule/build.h"
#include "schedule/exact.h"
#include "schedule/reference_executor.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::sched;

namespace {

const Collective kCollectives[] = {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                                   Collective::Broadcast, Collective::AllToAll};

// The error message of build_schedule(spec), or "" if it builds.
std::string error_of(const BuildSpec& spec) {
  try {
    build_schedule(spec);
  } catch (const ScheduleError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("build_schedule: every algorithm of every collective builds, validates and computes", "[schedule][build]") {
  const DType dtype = DType::FP32;
  for (Collective c : kCollectives) {
    const auto names = algorithm_names(c);
    REQUIRE(names.size() >= 2);
    for (const std::string& name : names) {
      for (int n : {1, 2, 3, 4, 6, 8, 12}) {
        for (const std::string inter : {"ring", "recursive", "tree", "direct"}) {
          if (inter != "ring" && !(c == Collective::AllReduce && name == "hierarchical")) continue;
          BuildSpec spec;
          spec.collective = c;
          spec.algorithm = name;
          spec.nranks = n;
          spec.count = 37;
          spec.dtype = dtype;
          spec.gpus_per_node = n % 2 == 0 ? 2 : 1;
          if (name == "nvls") {  // one node of n GPUs and its switch
            if (n < 2) continue;
            spec.gpus_per_node = n;
          }
          if (name == "nvls-tree" && (n < 4 || n % 2)) continue;  // whole nodes of 2, at least 2
          spec.inter = inter;
          spec.root = n - 1;
          CAPTURE(collective_name(c), name, n, inter);
          const Schedule s = build_schedule(spec);
          REQUIRE(s.gpu_ranks() == n);
          REQUIRE(s.size() == n + (name == "nvls" ? 1 : name == "nvls-tree" ? n / 2 : 0));
          REQUIRE(s.collective == c);
          REQUIRE_NOTHROW(validate(s));
          // It computes the collective it says (exact small-integer values).
          const auto e = test::exact_inputs(dtype, n, spec.count);
          std::vector<std::vector<uint8_t>> inputs = c == Collective::AllGather ? e.blocks : e.inputs;
          if (c == Collective::Broadcast)
            for (int r = 0; r < n; ++r) inputs[r].resize(s.ranks[r].input_count * 4);
          if (c == Collective::AllToAll)  // count elements to each rank
            for (int r = 0; r < n; ++r) inputs[r] = test::encode_values(dtype, std::vector<int>(spec.count * n, r));
          inputs.resize(static_cast<size_t>(s.size()));  // a switch rank holds no input
          const auto out = run_reference(s, inputs);
          for (int r = 0; r < n; ++r) {
            switch (c) {
              case Collective::AllReduce: REQUIRE(out[r] == test::encode_values(dtype, e.sum)); break;
              case Collective::ReduceScatter: REQUIRE(out[r] == test::encoded_block(dtype, e.sum, n, r)); break;
              case Collective::AllGather: REQUIRE(out[r] == test::encode_values(dtype, e.gathered)); break;
              case Collective::Broadcast: REQUIRE(out[r] == e.inputs[n - 1]); break;
              case Collective::AllToAll: {
                std::vector<int> want;
                for (int i = 0; i < n; ++i) want.insert(want.end(), spec.count, i);
                REQUIRE(out[r] == test::encode_values(dtype, want));
                break;
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("build_schedule passes placement, pipelining, counts and shape through", "[schedule][build]") {
  BuildSpec spec;
  spec.nranks = 8;
  spec.count = 4096;
  spec.placement = Placement::ZipCCL;
  spec.pipe = {2, 2};
  CHECK(build_schedule(spec).algorithm == ring_allreduce(8, 4096, DType::BF16, Placement::ZipCCL, {2, 2}).algorithm);
  spec.placement = Placement::None;  // step_bytes counts typed messages only
  CHECK(step_bytes(build_schedule(spec)).steps == 2 * 7 * 2);  // each chunk's step a lockstep group of its own
  spec.placement = Placement::ZipCCL;
  spec.algorithm = "hierarchical";
  spec.gpus_per_node = 4;
  spec.inter = "recursive";
  spec.pipe = {};
  const Schedule h = build_schedule(spec);
  CHECK(h.algorithm == "hierarchical-recursive/zipccl");
  CHECK(to_text(h) == to_text(hierarchical_allreduce(2, 4, 4096, DType::BF16, Placement::ZipCCL, InterAlgorithm::Recursive)));
  BuildSpec a2a;
  a2a.collective = Collective::AllToAll;
  a2a.algorithm = "pairwise";
  a2a.nranks = 2;
  a2a.counts = {{1, 2}, {3, 4}};
  const Schedule s = build_schedule(a2a);
  CHECK(s.ranks[0].input_count == 3);
  CHECK(s.ranks[1].output_count == 6);
  BuildSpec bc;
  bc.collective = Collective::Broadcast;
  bc.algorithm = "chain";
  bc.nranks = 4;
  bc.count = 100;
  bc.root = 2;
  bc.pipe = {5, 1};
  CHECK(step_bytes(build_schedule(bc)).steps == 3 + 4);
  CHECK(build_schedule(bc).ranks[2].input_count == 100);
}

TEST_CASE("build_schedule errors name what is wrong", "[schedule][build]") {
  const auto spec = [](Collective c, std::string algorithm) {
    BuildSpec s;
    s.collective = c;
    s.algorithm = std::move(algorithm);
    s.nranks = 4;
    s.count = 100;
    return s;
  };
  CHECK_THAT(error_of(spec(Collective::AllReduce, "butterfly")),
             Catch::Contains("butterfly") && Catch::Contains("allreduce") && Catch::Contains("ring, recursive, tree, direct, nccl-tree, nvls, nvls-tree, hierarchical"));
  CHECK_THAT(error_of(spec(Collective::Broadcast, "ring")), Catch::Contains("'ring'") && Catch::Contains("tree, chain"));
  BuildSpec s = spec(Collective::ReduceScatter, "ring");
  s.placement = Placement::CompressOnce;
  CHECK_THAT(error_of(s), Catch::Contains("compress-once"));
  s = spec(Collective::AllGather, "recursive");
  s.placement = Placement::ZipCCL;
  CHECK_THAT(error_of(s), Catch::Contains("zipccl"));
  s = spec(Collective::AllReduce, "hierarchical");
  s.gpus_per_node = 3;
  CHECK_THAT(error_of(s), Catch::Contains("4 ranks") && Catch::Contains("3"));
  s.gpus_per_node = 2;
  s.inter = "mesh";
  CHECK_THAT(error_of(s), Catch::Contains("'mesh'"));
  s.inter = "tree";
  s.pipe = {2, 1};
  CHECK_THAT(error_of(s), Catch::Contains("tree"));
  s = spec(Collective::AllReduce, "recursive");
  s.pipe = {1, 3};
  CHECK_THAT(error_of(s), Catch::Contains("recursive") && Catch::Contains("pipelining"));
  s = spec(Collective::AllReduce, "ring");
  s.pipe = {0, 1};
  CHECK_THAT(error_of(s), Catch::Contains("chunks"));
  s.nranks = 0;
  CHECK_THAT(error_of(s), Catch::Contains("at least one rank"));
  s = spec(Collective::Broadcast, "tree");
  s.root = 4;
  CHECK_THAT(error_of(s), Catch::Contains("root 4"));
  s = spec(Collective::AllToAll, "direct");
  s.counts = {{1, 2}};
  CHECK_THAT(error_of(s), Catch::Contains("counts"));
  CHECK(error_of(spec(Collective::AllToAll, "direct")).empty());
  // Names round-trip through the parsers; unknown ones are errors naming them.
  for (Collective c : kCollectives) CHECK(parse_collective(collective_name(c)) == c);
  for (Placement p : {Placement::None, Placement::PerHop, Placement::CompressOnce, Placement::ZipCCL})
    CHECK(parse_placement(placement_name(p)) == p);
  CHECK_THROWS_WITH(parse_collective("allgatherv"), Catch::Contains("allgatherv"));
  CHECK_THROWS_WITH(parse_placement("twice"), Catch::Contains("twice"));
}
