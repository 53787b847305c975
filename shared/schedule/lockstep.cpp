// shared/schedule/lockstep.cpp — see lockstep.h.
#include "schedule/lockstep.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>

namespace compcoll::sched {

bool overlap(const Slice& a, const Slice& b) {
  if (a.buf != b.buf || a.index != b.index) return false;
  if (a.buf == BufKind::Wire) return true;
  return a.offset < b.offset + b.count && b.offset < a.offset + a.count;
}

bool lockstep_free_dependency(const std::vector<Op>& ops, uint32_t i, uint32_t d) {
  const Op &a = ops[i], &b = ops[d];
  if (!is_transfer(a.kind) || !is_transfer(b.kind) || a.step != b.step) return false;
  if (b.kind == OpKind::Send) return true;
  return !overlap(b.dst, a.kind == OpKind::Send ? a.src : a.dst);
}

namespace {

std::string op_at(const std::vector<Op>& ops, uint32_t i) {
  return "op " + std::to_string(i) + " (step " + std::to_string(ops[i].step) + ")";
}

// A transfer that waits, through any chain of dependencies that count, for a transfer of its
// own step or a later one.
std::string waits_within_step(const std::vector<Op>& ops) {
  // latest[i]: the latest step op i waits for through such a chain (-1: none).
  std::vector<int64_t> latest(ops.size(), -1);
  for (uint32_t i = 0; i < ops.size(); ++i) {
    for (uint32_t d : ops[i].deps)
      if (!lockstep_free_dependency(ops, i, d))
        latest[i] = std::max(latest[i], is_transfer(ops[d].kind) ? static_cast<int64_t>(ops[d].step) : latest[d]);
    if (is_transfer(ops[i].kind) && latest[i] >= static_cast<int64_t>(ops[i].step))
      return op_at(ops, i) + ": waits for a transfer of its own or a later step, which lockstep cannot run";
  }
  return "";
}

// A receive that writes what a send of its step reads: the slices of each step's transfers,
// sorted by buffer and start, swept once per step.
std::string receives_into_sends(const std::vector<Op>& ops) {
  struct Span {
    uint32_t step;
    uint8_t buf;
    uint32_t index;
    uint64_t begin, end;
    uint32_t op;
    bool send;
  };
  std::vector<Span> spans;
  for (uint32_t i = 0; i < ops.size(); ++i) {
    if (!is_transfer(ops[i].kind)) continue;
    const bool send = ops[i].kind == OpKind::Send;
    const Slice& s = send ? ops[i].src : ops[i].dst;
    const bool wire = s.buf == BufKind::Wire;
    if (!wire && s.count == 0) continue;
    spans.push_back({ops[i].step, static_cast<uint8_t>(s.buf), s.index, wire ? 0 : s.offset,
                     wire ? std::numeric_limits<uint64_t>::max() : s.offset + s.count, i, send});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return std::tie(a.step, a.buf, a.index, a.begin, a.op) < std::tie(b.step, b.buf, b.index, b.begin, b.op);
  });
  // Per memory (step, buffer): the send and the receive seen so far that reach furthest.
  const Span* far[2] = {nullptr, nullptr};  // [send]
  for (size_t k = 0; k < spans.size(); ++k) {
    const Span& s = spans[k];
    if (k == 0 || std::tie(s.step, s.buf, s.index) != std::tie(spans[k - 1].step, spans[k - 1].buf, spans[k - 1].index))
      far[0] = far[1] = nullptr;
    const Span* other = far[!s.send];
    if (other && other->end > s.begin) {
      const Span& send = s.send ? s : *other;
      const Span& recv = s.send ? *other : s;
      return op_at(ops, recv.op) + ": receives into what op " + std::to_string(send.op) +
             " sends in the same step, which lockstep cannot run";
    }
    if (!far[s.send] || far[s.send]->end < s.end) far[s.send] = &s;
  }
  return "";
}

}  // namespace

std::string lockstep_problem(const RankProgram& prog) {
  std::string why = waits_within_step(prog.ops);
  return why.empty() ? receives_into_sends(prog.ops) : why;
}

std::string lockstep_problem(const Schedule& s) {
  for (int r = 0; r < s.size(); ++r) {
    const std::string why = lockstep_problem(s.ranks[static_cast<size_t>(r)]);
    if (!why.empty()) return "rank " + std::to_string(r) + " " + why;
  }
  return "";
}

StepGroups::StepGroups(const std::vector<Op>& ops, uint32_t per_iteration, size_t iterations)
    : per_iteration_(per_iteration), begin_() {
  for (uint32_t i = 0; i < per_iteration; ++i)
    if (is_transfer(ops[i].kind)) ops_.push_back(i);
  std::stable_sort(ops_.begin(), ops_.end(), [&](uint32_t a, uint32_t b) { return ops[a].step < ops[b].step; });
  for (uint32_t k = 0; k < ops_.size(); ++k)
    if (k == 0 || ops[ops_[k]].step != steps_.back()) {
      steps_.push_back(ops[ops_[k]].step);
      begin_.push_back(k);
    }
  begin_.push_back(static_cast<uint32_t>(ops_.size()));
  ready_.assign(steps_.size() * iterations, 0);
}

LockstepPlan plan_lockstep(const RankProgram& prog) {
  const auto& ops = prog.ops;
  const size_t n = ops.size();
  LockstepPlan plan;
  plan.problem = lockstep_problem(prog);
  if (!plan.problem.empty()) return plan;
  const StepGroups groups(ops, static_cast<uint32_t>(n), 1);
  plan.group_of.assign(n, UINT32_MAX);
  for (size_t g = 0; g < groups.steps(); ++g) {
    plan.groups.emplace_back(groups.members_begin(g), groups.members_end(g));
    for (uint32_t i : plan.groups.back()) plan.group_of[i] = static_cast<uint32_t>(g);
  }
  plan.dependents.assign(n, {});
  plan.dep_count.assign(n, 0);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t d : ops[i].deps)
      if (!lockstep_free_dependency(ops, i, d)) {
        plan.dependents[d].push_back(i);
        ++plan.dep_count[i];
      }
  return plan;
}

PeerSharing::PeerSharing(const std::vector<Op>& ops, uint32_t per_iteration) : count_(per_iteration, 0) {
  std::vector<uint32_t> sends;
  for (uint32_t i = 0; i < per_iteration; ++i)
    if (ops[i].kind == OpKind::Send) sends.push_back(i);
  auto key = [&](uint32_t i) { return std::make_pair(ops[i].step, ops[i].peer); };
  std::sort(sends.begin(), sends.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
  for (size_t b = 0; b < sends.size();) {
    size_t e = b;
    while (e < sends.size() && key(sends[e]) == key(sends[b])) ++e;
    const auto n = static_cast<uint16_t>(std::min<size_t>(e - b, UINT16_MAX));
    for (size_t k = b; k < e; ++k) count_[sends[k]] = n;
    b = e;
  }
}

}  // namespace compcoll::sched
