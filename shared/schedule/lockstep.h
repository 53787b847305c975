// shared/schedule/lockstep.h — a rank's transfers posted step by step, each step's transfers as
// one group (NCCL's ncclGroupStart/End), as compcoll-run's NCCL executor posts them and as the
// simulator and the cost model run compcoll's plans with NCCL's protocol costs
// (docs/compcoll-run.md, "Lockstep"; docs/compcoll-sim.md, "Protocol costs").
//
// A step's group goes out once all its transfers are ready, after the group before it; every
// rank posts its groups in step order and a send's receive carries its step, so the groups of
// all ranks match one another. That needs no transfer to wait (through computations) for a
// transfer of its own step or a later one, and no receive to write what a send of its group
// reads. A transfer's dependency on a transfer of its own group is met by posting them
// together (a send counts as done once posted; two transfers that touch different memory need
// no order inside a group): such a dependency does not count in lockstep.
#pragma once

#include <string>
#include <vector>

#include "schedule/schedule.h"

namespace compcoll::sched {

inline bool is_transfer(OpKind k) { return k == OpKind::Send || k == OpKind::Recv; }
// Whether two slices share memory (a wire buffer: any two slices of it).
bool overlap(const Slice& a, const Slice& b);
// Whether op i's dependency on op d is met by posting both in one step group (see above).
bool lockstep_free_dependency(const std::vector<Op>& ops, uint32_t i, uint32_t d);

struct LockstepPlan {
  std::vector<uint32_t> group_of;                 // per op: its group (transfers only)
  std::vector<std::vector<uint32_t>> groups;      // transfers per step, in (step, index) order
  std::vector<std::vector<uint32_t>> dependents;  // dependency edges that count in lockstep
  std::vector<uint32_t> dep_count;
  std::string problem;                            // empty when the program can run in lockstep
};
LockstepPlan plan_lockstep(const RankProgram& prog);
// Empty when the program can run in lockstep; else "op I (step S): why". Linear in the ops
// (and n log n in a step's transfers), without the plan's tables.
std::string lockstep_problem(const RankProgram& prog);
// Empty when every rank of `s` can run in lockstep; else "rank R op I (step S): why".
std::string lockstep_problem(const Schedule& s);

}  // namespace compcoll::sched
