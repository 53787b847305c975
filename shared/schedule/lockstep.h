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

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "schedule/schedule.h"

namespace compcoll::sched {

inline bool is_transfer(OpKind k) { return k == OpKind::Send || k == OpKind::Recv; }
// Whether two slices share memory (a wire buffer: any two slices of it).
bool overlap(const Slice& a, const Slice& b);
// Whether op i's dependency on op d is met by posting both in one step group (see above).
bool lockstep_free_dependency(const std::vector<Op>& ops, uint32_t i, uint32_t d);

// One rank's transfers in step groups, posted and completed as compcoll-run's NCCL executor
// does (the simulator and the cost model run compcoll's plans so, policy::MessageCosts::
// lockstep): a group goes out once all its transfers are ready and the group before it has
// completed (NCCL runs a rank's groups one after the other on its stream), and its receives
// complete when the whole group has (the events the executor waits on follow the group). The
// program may hold `iterations` copies of one call's ops back to back (sched::repeated): group G
// is the (G mod S)-th step of iteration G / S, S the call's steps with a transfer.
class StepGroups {
 public:
  StepGroups() = default;
  // The transfers of ops[0, per_iteration), by step.
  StepGroups(const std::vector<Op>& ops, uint32_t per_iteration, size_t iterations);
  size_t steps() const { return begin_.size() - 1; }
  // Step group g of the call: its transfers in program order.
  const uint32_t* members_begin(size_t g) const { return ops_.data() + begin_[g]; }
  const uint32_t* members_end(size_t g) const { return ops_.data() + begin_[g + 1]; }

  // Transfer op i (of any iteration) is ready: post(j) for each transfer of every group that
  // may go now, in program order.
  template <class Post>
  void ready(const std::vector<Op>& ops, uint32_t i, Post&& post) {
    const auto g = std::lower_bound(steps_.begin(), steps_.end(), ops[i].step) - steps_.begin();
    ++ready_[i / per_iteration_ * steps_.size() + static_cast<size_t>(g)];
    post_ready(post);
  }
  // A transfer of the posted group is done: a send (receive < 0) or receive `receive`, which
  // completes with its group. At the group's last: complete(r) for its receives in op order,
  // then post(j) for what may go next.
  template <class Complete, class Post>
  void done(int64_t receive, Complete&& complete, Post&& post) {
    if (receive >= 0) arrived_.push_back(static_cast<uint32_t>(receive));
    if (--open_ > 0) return;
    std::vector<uint32_t> arrived;
    arrived.swap(arrived_);
    std::sort(arrived.begin(), arrived.end());
    for (uint32_t r : arrived) complete(r);
    post_ready(post);
  }

 private:
  template <class Post>
  void post_ready(Post& post) {
    const size_t S = steps_.size();
    while (open_ == 0 && next_ < ready_.size()) {
      const size_t g = next_ % S;
      const uint32_t offset = static_cast<uint32_t>(next_ / S) * per_iteration_;
      const uint32_t size = begin_[g + 1] - begin_[g];
      if (ready_[next_] < size) return;
      ++next_;
      open_ = size;
      for (uint32_t k = begin_[g]; k < begin_[g + 1]; ++k) post(ops_[k] + offset);
    }
  }

  uint32_t per_iteration_ = 0;
  std::vector<uint32_t> steps_;       // the call's steps with a transfer, ascending
  std::vector<uint32_t> begin_{0};    // group g's transfers: ops_[begin_[g], begin_[g + 1])
  std::vector<uint32_t> ops_;         // the call's transfers by (step, index)
  std::vector<uint32_t> ready_;       // per group (all iterations): its transfers ready
  size_t next_ = 0;                   // the next group to post
  uint32_t open_ = 0;                 // the posted group's transfers not done
  std::vector<uint32_t> arrived_;     // the posted group's receives that arrived
};

// Per send of a rank's program: how many sends of its step go to the same peer (they share
// NCCL's channels to that peer, policy::MessageCosts::net_peer_rate). The program may hold
// iterations of one call's ops[0, per_iteration) back to back (sched::repeated).
class PeerSharing {
 public:
  PeerSharing() = default;  // counts nothing: every send its own
  PeerSharing(const std::vector<Op>& ops, uint32_t per_iteration);
  uint32_t of(uint32_t send_op) const { return count_.empty() ? 1 : count_[send_op % count_.size()]; }
 private:
  std::vector<uint16_t> count_;  // per op of one iteration (0 for other than sends)
};
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
