// shared/schedule/schedule.cpp — names, validation, text form and byte counts of schedules.
#include "schedule/schedule.h"

#include <deque>
#include <map>
#include <set>
#include <sstream>

namespace compcoll::sched {
namespace {

std::string where(int rank, size_t op) {
  return "rank " + std::to_string(rank) + " op " + std::to_string(op);
}

uint64_t buffer_count(const RankProgram& p, const Slice& s) {
  switch (s.buf) {
    case BufKind::Input: return p.input_count;
    case BufKind::Output: return p.output_count;
    case BufKind::Scratch: return s.index < p.scratch_counts.size() ? p.scratch_counts[s.index] : 0;
    case BufKind::Wire: return 0;
  }
  return 0;
}

std::string slice_text(const Slice& s) {
  switch (s.buf) {
    case BufKind::Input: return "input[" + std::to_string(s.offset) + "+" + std::to_string(s.count) + "]";
    case BufKind::Output: return "output[" + std::to_string(s.offset) + "+" + std::to_string(s.count) + "]";
    case BufKind::Scratch:
      return "scratch" + std::to_string(s.index) + "[" + std::to_string(s.offset) + "+" + std::to_string(s.count) + "]";
    case BufKind::Wire: return "wire" + std::to_string(s.index);
  }
  return "?";
}

void check_slice(const Schedule& s, int rank, size_t i, const Slice& sl, bool typed, const char* role) {
  const RankProgram& p = s.ranks[rank];
  if (!typed) {
    if (sl.buf != BufKind::Wire || sl.index >= p.wire_buffers)
      throw ScheduleError(where(rank, i) + ": " + role + " must be a wire buffer < " + std::to_string(p.wire_buffers));
    return;
  }
  if (sl.buf == BufKind::Wire) throw ScheduleError(where(rank, i) + ": " + role + " must be a typed buffer");
  if (sl.buf == BufKind::Scratch && sl.index >= p.scratch_counts.size())
    throw ScheduleError(where(rank, i) + ": " + role + " names scratch" + std::to_string(sl.index) + ", which does not exist");
  const uint64_t cap = buffer_count(p, sl);
  if (sl.offset > cap || sl.count > cap - sl.offset)
    throw ScheduleError(where(rank, i) + ": " + role + " " + slice_text(sl) + " exceeds its buffer of " +
                        std::to_string(cap) + " elements");
}

bool is_typed(const Slice& s) { return s.buf != BufKind::Wire; }

}  // namespace

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "allreduce";
    case Collective::ReduceScatter: return "reduce-scatter";
    case Collective::AllGather: return "allgather";
    case Collective::Broadcast: return "broadcast";
    case Collective::AllToAll: return "all-to-all";
  }
  return "unknown";
}

std::string_view op_name(OpKind k) {
  switch (k) {
    case OpKind::Send: return "send";
    case OpKind::Recv: return "recv";
    case OpKind::Reduce: return "reduce";
    case OpKind::Copy: return "copy";
    case OpKind::Compress: return "compress";
    case OpKind::Decompress: return "decompress";
  }
  return "unknown";
}

void append_after(RankProgram& p, Op op, int64_t& last) {
  if (last >= 0) op.deps = {static_cast<uint32_t>(last)};
  last = static_cast<int64_t>(p.ops.size());
  p.ops.push_back(std::move(op));
}

void append_chained(RankProgram& p, Op op) {
  int64_t last = static_cast<int64_t>(p.ops.size()) - 1;
  append_after(p, std::move(op), last);
}

std::vector<uint32_t> append_batch(RankProgram& p, std::vector<Op> ops, const std::vector<uint32_t>& deps) {
  std::vector<uint32_t> at;
  const uint32_t lead = static_cast<uint32_t>(p.ops.size());
  for (size_t k = 0; k < ops.size(); ++k) {
    Op& op = ops[k];
    op.batched = k > 0;
    op.deps = k == 0 ? deps : std::vector<uint32_t>{lead};
    at.push_back(static_cast<uint32_t>(p.ops.size()));
    p.ops.push_back(std::move(op));
  }
  return at;
}

uint32_t append_join(RankProgram& p, const std::vector<uint32_t>& deps, uint32_t step) {
  const Slice none{BufKind::Output, 0, 0, 0};
  Op op{OpKind::Copy, -1, none, none, deps, step};
  p.ops.push_back(std::move(op));
  return static_cast<uint32_t>(p.ops.size() - 1);
}

std::vector<std::pair<uint32_t, uint32_t>> decode_add_pairs(const std::vector<Op>& ops) {
  constexpr uint32_t kNone = UINT32_MAX, kMany = UINT32_MAX - 1;
  const auto n = static_cast<uint32_t>(ops.size());
  std::vector<uint32_t> reader(n, kNone);  // a decompression's one dependent, or kMany
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t d : ops[i].deps)
      if (d < n && ops[d].kind == OpKind::Decompress) reader[d] = reader[d] == kNone ? i : kMany;
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  std::vector<uint8_t> taken(n, 0);
  for (uint32_t d = 0; d < n; ++d) {
    const uint32_t r = reader[d];
    if (ops[d].kind != OpKind::Decompress || ops[d].dst.buf != BufKind::Scratch || r >= kMany) continue;
    const Slice &a = ops[r].src, &b = ops[d].dst;
    if (ops[r].kind != OpKind::Reduce || taken[r] || a.buf != b.buf || a.index != b.index || a.offset != b.offset ||
        a.count != b.count)
      continue;
    taken[r] = 1;
    pairs.emplace_back(d, r);
  }
  return pairs;
}

void validate(const Schedule& s) {
  const int n = s.size();
  if (s.switches < 0 || s.switches > n || (s.switches > 0 && (s.switch_span < 1 || s.switch_span * s.switches != s.gpu_ranks())))
    throw ScheduleError("schedule " + s.algorithm + ": " + std::to_string(s.switches) + " switch ranks of span " +
                        std::to_string(s.switch_span) + " do not cover its " + std::to_string(s.gpu_ranks()) + " GPU ranks");
  for (int r = s.gpu_ranks(); r < n; ++r) {
    const RankProgram& p = s.ranks[r];
    if (p.input_count != 0 || p.output_count != 0)
      throw ScheduleError("rank " + std::to_string(r) + ": a switch rank holds no input or output");
    for (size_t i = 0; i < p.ops.size(); ++i)
      if (p.ops[i].kind == OpKind::Compress || p.ops[i].kind == OpKind::Decompress)
        throw ScheduleError(where(r, i) + ": a switch rank does not " + std::string(op_name(p.ops[i].kind)));
  }
  for (int r = 0; r < n; ++r) {
    const auto& ops = s.ranks[r].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      for (uint32_t d : op.deps)
        if (d >= i) throw ScheduleError(where(r, i) + ": depends on op " + std::to_string(d) + ", which is not earlier");
      if (op.batched) {
        const bool codec = op.kind == OpKind::Compress || op.kind == OpKind::Decompress;
        const bool led = op.deps.size() == 1 && !ops[op.deps[0]].batched && ops[op.deps[0]].kind == op.kind;
        const bool follows = i > 0 && (ops[i - 1].batched ? ops[i - 1].deps == op.deps
                                                          : op.deps == std::vector<uint32_t>{static_cast<uint32_t>(i - 1)});
        if (!codec || !led || !follows)
          throw ScheduleError(where(r, i) + ": a batched " + std::string(op_name(op.kind)) +
                              " must be a compress or decompress that depends only on its batch's first op, of its kind, "
                              "and follow it or another op of its batch");
      }
      switch (op.kind) {
        case OpKind::Send:
        case OpKind::Recv: {
          if (op.peer < 0 || op.peer >= n || op.peer == r)
            throw ScheduleError(where(r, i) + ": " + std::string(op_name(op.kind)) + " peer " + std::to_string(op.peer) +
                                " out of range or self (group of " + std::to_string(n) + ")");
          const Slice& sl = op.kind == OpKind::Send ? op.src : op.dst;
          check_slice(s, r, i, sl, is_typed(sl), op.kind == OpKind::Send ? "src" : "dst");
          break;
        }
        case OpKind::Reduce:
        case OpKind::Copy:
          check_slice(s, r, i, op.src, true, "src");
          check_slice(s, r, i, op.dst, true, "dst");
          if (op.src.count != op.dst.count)
            throw ScheduleError(where(r, i) + ": src and dst counts differ (" + std::to_string(op.src.count) + " vs " +
                                std::to_string(op.dst.count) + ")");
          break;
        case OpKind::Compress:
          check_slice(s, r, i, op.src, true, "src");
          check_slice(s, r, i, op.dst, false, "dst");
          break;
        case OpKind::Decompress:
          check_slice(s, r, i, op.src, false, "src");
          check_slice(s, r, i, op.dst, true, "dst");
          break;
      }
    }
  }
  // Matching and deadlock: each rank runs in program order; sends are buffered; a recv waits
  // for the next message from its peer.
  std::map<std::pair<int, int>, std::deque<std::pair<int, size_t>>> channel;  // (from,to) -> (rank, op)
  std::vector<size_t> pc(n, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      const auto& ops = s.ranks[r].ops;
      while (pc[r] < ops.size()) {
        const Op& op = ops[pc[r]];
        if (op.kind == OpKind::Send) {
          channel[{r, op.peer}].push_back({r, pc[r]});
        } else if (op.kind == OpKind::Recv) {
          auto& q = channel[{op.peer, r}];
          if (q.empty()) break;
          const Op& send = s.ranks[op.peer].ops[q.front().second];
          if (is_typed(send.src) != is_typed(op.dst) || (is_typed(op.dst) && send.src.count != op.dst.count))
            throw ScheduleError(where(r, pc[r]) + ": recv of " + slice_text(op.dst) + " matches " +
                                where(op.peer, q.front().second) + " send of " + slice_text(send.src));
          q.pop_front();
        }
        ++pc[r];
        progress = true;
      }
    }
  }
  for (int r = 0; r < n; ++r)
    if (pc[r] < s.ranks[r].ops.size())
      throw ScheduleError(where(r, pc[r]) + ": deadlock: recv from rank " + std::to_string(s.ranks[r].ops[pc[r]].peer) +
                          " is never matched by a send");
  for (const auto& [pair, q] : channel)
    if (!q.empty())
      throw ScheduleError(where(q.front().first, q.front().second) + ": send to rank " + std::to_string(pair.second) +
                          " is never received");
}

Schedule repeated(const Schedule& s, int times) {
  Schedule out = s;
  if (times <= 1) return out;
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    const auto& ops = s.ranks[r].ops;
    auto& rep = out.ranks[r].ops;
    rep.reserve(ops.size() * static_cast<size_t>(times));
    for (int k = 1; k < times; ++k)
      for (const Op& op : ops) {
        Op copy = op;
        for (uint32_t& d : copy.deps) d += static_cast<uint32_t>(k * ops.size());
        rep.push_back(std::move(copy));
      }
  }
  return out;
}

std::string to_text(const Schedule& s) {
  std::ostringstream o;
  o << collective_name(s.collective) << " " << s.algorithm << " n=" << s.size() << " count=" << s.count << " "
    << dtype_name(s.dtype) << "\n";
  for (int r = 0; r < s.size(); ++r) {
    const auto& ops = s.ranks[r].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      o << "rank " << r << " op " << i << " step " << op.step << ": " << op_name(op.kind);
      switch (op.kind) {
        case OpKind::Send: o << " " << slice_text(op.src) << " to " << op.peer; break;
        case OpKind::Recv: o << " from " << op.peer << " -> " << slice_text(op.dst); break;
        default: o << " " << slice_text(op.src) << " -> " << slice_text(op.dst); break;
      }
      if (op.batched) o << " batched";
      if (!op.deps.empty()) {
        o << " after";
        for (uint32_t d : op.deps) o << " " << d;
      }
      o << "\n";
    }
  }
  return o.str();
}

StepBytes step_bytes(const Schedule& s) {
  StepBytes b;
  const size_t es = dtype_size(s.dtype);
  const int n = s.size();
  uint32_t last_step = 0;
  for (const auto& rp : s.ranks)
    for (const Op& op : rp.ops) last_step = std::max(last_step, op.step);
  std::set<uint32_t> steps;
  b.sent_bytes.assign(n, 0);
  b.max_step_bytes.assign(n, 0);
  b.sent.assign(n, std::vector<uint64_t>(last_step + 1, 0));
  b.received.assign(n, std::vector<uint64_t>(last_step + 1, 0));
  for (int r = 0; r < n; ++r) {
    for (const Op& op : s.ranks[r].ops) {
      if (op.kind == OpKind::Send && is_typed(op.src)) {
        b.sent[r][op.step] += op.src.count * es;
        steps.insert(op.step);
      } else if (op.kind == OpKind::Recv && is_typed(op.dst)) {
        b.received[r][op.step] += op.dst.count * es;
      }
    }
    for (uint64_t bytes : b.sent[r]) {
      b.sent_bytes[r] += bytes;
      b.max_step_bytes[r] = std::max(b.max_step_bytes[r], bytes);
    }
  }
  b.steps = static_cast<uint32_t>(steps.size());
  return b;
}

}  // namespace compcoll::sched
