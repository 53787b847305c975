// tests/schedule/test_lockstep.cpp — lockstep posting (sched::lockstep_problem, plan_lockstep):
// the rings, the hierarchical allreduce, the hierarchical and direct all-to-all run in step
// groups, the double binary tree does not;
// a receive into what a send of its step reads is refused, naming both ops, however the
// step's slices are ordered; a dependency inside a group is left out of the plan's counts.
#include <catch2/catch.hpp>

#include "schedule/build.h"
#include "schedule/lockstep.h"

using namespace compcoll;
using namespace compcoll::sched;

namespace {

Op transfer(OpKind kind, int peer, Slice s, uint32_t step, std::vector<uint32_t> deps = {}) {
  Op op;
  op.kind = kind;
  op.peer = peer;
  (kind == OpKind::Send ? op.src : op.dst) = s;
  op.step = step;
  op.deps = std::move(deps);
  return op;
}

Slice out(uint64_t offset, uint64_t count) { return Slice{BufKind::Output, 0, offset, count}; }

}  // namespace

TEST_CASE("lockstep: which schedules run in step groups", "[schedule][lockstep]") {
  for (const char* algorithm : {"ring", "rail-ring", "hierarchical", "tree"})
    for (const char* placement : {"none", "per-hop"}) {
      BuildSpec b;
      b.collective = Collective::AllReduce;
      b.algorithm = algorithm;
      b.placement = parse_placement(placement);
      b.nranks = 8;
      b.gpus_per_node = 4;
      b.count = 4099;
      if (std::string(algorithm) != "tree") b.pipe.chunks = 2;
      const Schedule s = build_schedule(b);
      INFO(algorithm << " " << placement);
      const std::string why = lockstep_problem(s);
      if (std::string(algorithm) == "tree") {
        CHECK_THAT(why, Catch::Matchers::Contains("waits for a transfer of its own or a later step"));
      } else {
        CHECK(why.empty());
        for (const auto& prog : s.ranks) CHECK(plan_lockstep(prog).problem.empty());
      }
    }
}

TEST_CASE("lockstep: the hierarchical and direct all-to-all run in step groups, compressed or not",
          "[schedule][lockstep][alltoall]") {
  // Both pack (the hierarchical one) or compress (both) every message of a step before the
  // step's transfers, each message in a buffer of its own.
  for (auto [nodes, g] : std::vector<std::pair<int, int>>{{2, 4}, {3, 2}, {4, 1}, {1, 4}})
    for (const char* placement : {"none", "per-hop"}) {
      BuildSpec b;
      b.collective = Collective::AllToAll;
      b.algorithm = "hierarchical";
      b.placement = parse_placement(placement);
      b.nranks = nodes * g;
      b.gpus_per_node = g;
      b.count = 333;
      const Schedule s = build_schedule(b);
      INFO(nodes << " x " << g << " " << placement);
      CHECK(lockstep_problem(s).empty());
      for (const auto& prog : s.ranks) CHECK(plan_lockstep(prog).problem.empty());
      b.algorithm = "direct";
      CHECK(lockstep_problem(build_schedule(b)).empty());
    }
}

TEST_CASE("lockstep: a receive into what a send of its step reads is refused, naming both", "[schedule][lockstep]") {
  RankProgram p;
  // Step 0: sends [0, 10) and [20, 30), receives [10, 20) (no overlap); step 1: a send of
  // [40, 50) and a receive into [45, 60), listed receive first.
  p.ops = {transfer(OpKind::Send, 1, out(0, 10), 0), transfer(OpKind::Send, 1, out(20, 10), 0),
           transfer(OpKind::Recv, 1, out(10, 10), 0), transfer(OpKind::Recv, 1, out(45, 15), 1),
           transfer(OpKind::Send, 1, out(40, 10), 1)};
  CHECK(lockstep_problem(p) == "op 3 (step 1): receives into what op 4 sends in the same step, which lockstep cannot run");
  CHECK(plan_lockstep(p).problem == lockstep_problem(p));
  p.ops[3].dst = out(50, 10);  // adjacent, not overlapping
  CHECK(lockstep_problem(p).empty());
  p.ops[3].step = 0;  // [50, 60) beside step 0's sends: still apart
  CHECK(lockstep_problem(p).empty());
  p.ops[3].dst = out(5, 2);  // inside step 0's first send, behind a longer one in the sweep
  p.ops[1].src = out(0, 30);
  p.ops[2].dst = out(30, 5);
  CHECK_THAT(lockstep_problem(p), Catch::Matchers::StartsWith("op 3 (step 0): receives into what op"));
  // Wire buffers: any two slices of one buffer share it.
  RankProgram w;
  w.ops = {transfer(OpKind::Send, 1, Slice{BufKind::Wire, 2, 0, 0}, 0),
           transfer(OpKind::Recv, 1, Slice{BufKind::Wire, 2, 0, 0}, 0)};
  CHECK(lockstep_problem(w) == "op 1 (step 0): receives into what op 0 sends in the same step, which lockstep cannot run");
  w.ops[1].dst.index = 3;
  CHECK(lockstep_problem(w).empty());
}

TEST_CASE("lockstep: a dependency inside a group is met by posting the group", "[schedule][lockstep]") {
  RankProgram p;
  // A receive, a send after it (into other memory) in the same step, a send of the received
  // slice in the next step.
  p.ops = {transfer(OpKind::Recv, 1, out(0, 10), 0), transfer(OpKind::Send, 1, out(10, 10), 0, {0}),
           transfer(OpKind::Send, 1, out(0, 10), 1, {0})};
  CHECK(lockstep_free_dependency(p.ops, 1, 0));
  CHECK_FALSE(lockstep_free_dependency(p.ops, 2, 0));
  const LockstepPlan plan = plan_lockstep(p);
  REQUIRE(plan.problem.empty());
  CHECK(plan.groups == std::vector<std::vector<uint32_t>>{{0, 1}, {2}});
  CHECK(plan.dep_count == std::vector<uint32_t>{0, 0, 1});
  CHECK(plan.dependents[0] == std::vector<uint32_t>{2});
  // A send of the received slice in the receive's own step waits within its step.
  p.ops[1].src = out(0, 10);
  CHECK_FALSE(lockstep_free_dependency(p.ops, 1, 0));
  CHECK(lockstep_problem(p) == "op 1 (step 0): waits for a transfer of its own or a later step, which lockstep cannot run");
}
