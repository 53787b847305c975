// real/executor.cpp — see executor.h. One loop per run: poll what is in flight, post the
// transfers that may go, start one computation, repeat.
#include "real/executor.h"
#include "real/watchdog.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>

namespace compcoll::real {

using sched::BufKind;
using sched::OpKind;
using sched::ScheduleError;
using sched::is_transfer;
using sched::overlap;

namespace {
// The slice an op writes (none for a send), and whether it reads its src (all but a receive; a
// reduce also reads the dst it writes).
const sched::Slice* written(const sched::Op& op) { return op.kind == OpKind::Send ? nullptr : &op.dst; }
bool reads_src(const sched::Op& op) { return op.kind != OpKind::Recv; }
}  // namespace

Executor::Executor(const sched::Schedule& s, int rank, Transport& transport, DataBackend& backend,
                   const ExecutorOptions& opt)
    : prog_(s.ranks.at(static_cast<size_t>(rank))),
      dtype_(s.dtype),
      es_(dtype_size(s.dtype)),
      t_(transport),
      b_(backend),
      opt_(opt) {
  if (transport.memory() != backend.memory())
    throw TransportError("executor: transport " + std::string(transport.name()) + " and backend " + backend.describe() +
                         " use different memories");
  if (transport.size() != s.size())
    throw ScheduleError("executor: a schedule of " + std::to_string(s.size()) + " ranks on a transport of " +
                        std::to_string(transport.size()));
  if (transport.sends_wait_for_receives()) opt_.lockstep = true;
  const auto& ops = prog_.ops;
  const size_t n = ops.size();
  const std::string where = "executor: rank " + std::to_string(rank);

  // Wire buffer capacities: the largest stream any compress writes to or decompress reads from
  // it, or that a send or receive states (a relayed stream's elements: the wire slice's count).
  wire_capacity_.assign(prog_.wire_buffers, 0);
  for (const auto& op : ops) {
    const bool codec_op = op.kind == OpKind::Compress || op.kind == OpKind::Decompress;
    const sched::Slice& wire = op.kind == OpKind::Compress || op.kind == OpKind::Recv ? op.dst : op.src;
    if (!codec_op && (wire.buf != BufKind::Wire || wire.count == 0)) continue;
    if (!opt_.codec) throw ScheduleError(where + ": the schedule compresses but no codec was given");
    const uint64_t elements = codec_op ? (op.kind == OpKind::Compress ? op.src : op.dst).count : wire.count;
    wire_capacity_.at(wire.index) =
        std::max(wire_capacity_[wire.index], b_.max_encoded_size(*opt_.codec, dtype_, elements, opt_.encode));
  }
  for (uint32_t w = 0; w < prog_.wire_buffers; ++w)
    if (wire_capacity_[w] == 0)
      throw ScheduleError(where + ": wire buffer " + std::to_string(w) +
                          " is never compressed into nor decompressed from, so its size has no bound");

  if (opt_.wire_budget) {
    if (!(opt_.wire_budget_margin > -1) || !std::isfinite(opt_.wire_budget_margin))
      throw ScheduleError(where + ": a wire budget margin of " + std::to_string(opt_.wire_budget_margin) +
                          " (expected a number above -1)");
    // A budget is a stream's size grown by the margin: every wire buffer holds its largest
    // stream's bound grown so too, at both ends.
    if (opt_.wire_budget_margin > 0)
      for (size_t& c : wire_capacity_) c = grown(c);
  }

  input_ = b_.alloc(prog_.input_count * es_);
  output_ = b_.alloc(prog_.output_count * es_);
  for (uint64_t c : prog_.scratch_counts) scratch_.push_back(b_.alloc(c * es_));
  for (size_t c : wire_capacity_) wire_.push_back(b_.alloc(c));
  wire_size_.assign(prog_.wire_buffers, 0);

  dependents_.assign(n, {});
  dep_count_.assign(n, 0);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t d : ops[i].deps) {
      if (d >= i) throw ScheduleError(where + " op " + std::to_string(i) + ": depends on a later op " + std::to_string(d));
      dependents_[d].push_back(i);
      ++dep_count_[i];
    }

  const int np = transport.size();
  msg_index_.assign(n, 0);
  msgs_to_.assign(np, 0);
  msgs_from_.assign(np, 0);
  for (uint32_t i = 0; i < n; ++i) {
    if (ops[i].kind == OpKind::Send) msg_index_[i] = msgs_to_.at(ops[i].peer)++;
    if (ops[i].kind == OpKind::Recv) msg_index_[i] = msgs_from_.at(ops[i].peer)++;
  }

  if (opt_.lockstep) {
    LockstepPlan plan = plan_lockstep(prog_);
    if (!plan.problem.empty()) throw ScheduleError(where + " " + plan.problem);
    group_of_ = std::move(plan.group_of);
    groups_ = std::move(plan.groups);
    dependents_ = std::move(plan.dependents);
    dep_count_ = std::move(plan.dep_count);
  }
  deps_of_.assign(n, {});  // as the run counts them (lockstep's too; fusing adds some)
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t d : dependents_[i]) deps_of_[d].push_back(i);
  fused_into_.assign(n, kNotFused);
  fused_from_.assign(n, kNotFused);
  batch_lead_.assign(n, kNotFused);
  batch_end_.resize(n);
  std::iota(batch_end_.begin(), batch_end_.end(), 1u);
  if ((opt_.batch_compress || opt_.batch_decompress) && opt_.codec && b_.batches(*opt_.codec))
    for (uint32_t i = 0; i < n; ++i) {
      if (ops[i].batched || !(ops[i].kind == OpKind::Compress ? opt_.batch_compress
                              : ops[i].kind == OpKind::Decompress ? opt_.batch_decompress
                                                                  : false))
        continue;
      batch_end_[i] = sched::batch_end(ops, i);
      for (uint32_t j = i + 1; j < batch_end_[i]; ++j) batch_lead_[j] = i;
    }
  if (opt_.fuse_decode_add && opt_.codec && b_.decompress_adds(*opt_.codec)) fuse_decode_add();

  // No rank compresses: nothing to budget, and no agreement to end the runs with.
  if (!s.compresses()) opt_.wire_budget = false;
  if (opt_.wire_budget) learned_.assign(n, 0), budget_.assign(n, 0);
}

void Executor::fuse_decode_add() {
  for (const auto& [d, r] : sched::decode_add_pairs(prog_.ops)) {
    if (rides(d) || batch_end_[d] > d + 1) continue;  // in a batch run as one call
    // The fused op writes the reduce's destination: it waits for the reduce's other
    // dependencies too (none of which waits for d, whose one dependent is r: no cycle).
    for (uint32_t x : deps_of_[r])
      if (x != d) dependents_[x].push_back(d), deps_of_[d].push_back(x), ++dep_count_[d];
    fused_into_[d] = r;
    fused_from_[r] = d;
  }
}

Executor::Access Executor::access(uint32_t i) const {
  const sched::Op& op = prog_.ops[i];
  if (absorbed(i)) return {};
  if (fused_into_[i] != kNotFused) return {&op.src, &prog_.ops[fused_into_[i]].dst};
  return {reads_src(op) ? &op.src : nullptr, written(op)};
}

Executor::~Executor() {
  // After a device fault every CUDA call fails again: the error that unwinds past the
  // executor is the one to report, and a destructor that threw would end the process
  // (std::terminate) before it is. The memory is then left to the process's end.
  try {
    b_.synchronize();
    b_.release(input_);
    b_.release(output_);
    for (void* p : scratch_) b_.release(p);
    for (void* p : wire_) b_.release(p);
  } catch (const std::exception&) {
  }
}

void* Executor::slice_ptr(const sched::Slice& s) const {
  switch (s.buf) {
    case BufKind::Input: return static_cast<uint8_t*>(input_) + s.offset * es_;
    case BufKind::Output: return static_cast<uint8_t*>(output_) + s.offset * es_;
    case BufKind::Scratch: return static_cast<uint8_t*>(scratch_.at(s.index)) + s.offset * es_;
    case BufKind::Wire: return wire_.at(s.index);
  }
  return nullptr;
}

bool Executor::conflicts(uint32_t i, uint32_t other) const {
  const Access a = access(i), o = access(other);
  // What op i writes, another still reads (a send's buffer, a kernel's source) or writes; or
  // what op i reads, a kernel or receive still writes.
  if (a.writes && ((o.reads && overlap(*o.reads, *a.writes)) || (o.writes && overlap(*o.writes, *a.writes))))
    return true;
  return o.writes && a.reads && overlap(*a.reads, *o.writes);
}

bool Executor::conflicts_inflight(uint32_t i) const {
  for (uint32_t j = i; j < batch_end_[i]; ++j)
    if (std::any_of(running_.begin(), running_.end(), [&](const Running& r) { return conflicts(j, r.op); }))
      return true;
  return false;
}

void Executor::queue_waits(uint32_t i) {
  const bool transfer = is_transfer(prog_.ops[i].kind);
  const auto follow = [&](bool o_transfer, int handle) {
    if (o_transfer == transfer && (!transfer || t_.runs_in_order())) return;  // its own queue runs in order
    const QueueMark m = o_transfer ? t_.mark(handle) : b_.mark(handle);
    if (transfer) t_.queue_after(m);
    else b_.queue_after(m);
  };
  for (uint32_t d : deps_of_[i]) {
    const uint32_t w = work_of(d);  // an absorbed reduce's work is its decompression's, a batch's its lead's
    if (op_state_[w] == kRunning) follow(is_transfer(prog_.ops[w].kind), op_handle_[w]);
  }
  // Not the transfers of its own step group (posted with it, ordered by nothing; lockstep
  // posts a group whole, as without queues).
  const auto same_group = [&](const Running& r) {
    return opt_.lockstep && transfer && r.transfer && group_of_[r.op] == group_of_[i];
  };
  for (const Running& r : running_) {
    if (same_group(r) || !conflicts(i, r.op)) continue;
    if (!rides(r.op)) {
      follow(r.transfer, r.handle);
    } else if (const uint32_t lead = batch_lead_[r.op]; op_state_[lead] == kRunning) {
      follow(false, op_handle_[lead]);  // its lead's call does its work (once that is done, nothing to wait for)
    }
  }
}

void Executor::start(uint32_t i, RunStats& st) {
  if (batch_end_[i] > i + 1) return start_batch(i, st);
  const sched::Op& op = prog_.ops[i];
  if (queued_ && !absorbed(i)) queue_waits(i);  // an absorbed reduce submits nothing
  op_state_[i] = kRunning;
  const bool host = b_.memory() == MemorySpace::Host;
  const auto t0 = host ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  // A host kernel run on this thread (completion -1) is timed here; one on the compute thread
  // when it is done (add_kernel_time).
  auto timed = [&](Completion c) {
    if (host && c < 0) add_kernel_time(st, op.kind, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    running_.push_back({i, false, c});
    op_handle_[i] = c;
  };
  switch (op.kind) {
    case OpKind::Send: {
      // A stream goes at its size, or (budgeted) as an exact message of its budget.
      const bool wire = op.src.buf == BufKind::Wire;
      const size_t bytes = wire ? wire_size_[op.src.index] : op.src.count * es_;
      const Request r =
          t_.post_send(slice_ptr(op.src), bytes, op.peer, send_base_[op.peer] + msg_index_[i], !wire || budgeted_);
      ++st.messages;
      st.sent_bytes += bytes;
      running_.push_back({i, true, r});
      op_handle_[i] = r;
      return;
    }
    case OpKind::Recv: {
      const bool wire = op.dst.buf == BufKind::Wire;
      const size_t bytes = !wire ? op.dst.count * es_ : budgeted_ ? budget_[i] : wire_capacity_[op.dst.index];
      const uint64_t seq = recv_base_[op.peer] + msg_index_[i];
      const Request r = t_.post_recv(slice_ptr(op.dst), bytes, op.peer, seq, !wire || budgeted_);
      running_.push_back({i, true, r});
      op_handle_[i] = r;
      if (wire && budgeted_) wire_size_[op.dst.index] = bytes;  // known now: queued ops read it at once
      return;
    }
    case OpKind::Reduce:
      if (absorbed(i)) return running_.push_back({i, false, -1});  // its decompression added it
      return timed(b_.reduce(dtype_, slice_ptr(op.dst), slice_ptr(op.src), op.src.count));
    case OpKind::Copy: return timed(b_.copy(slice_ptr(op.dst), slice_ptr(op.src), op.src.count * es_));
    case OpKind::Compress:
      st.compress_in += op.src.count * es_;
      if (budgeted_) wire_size_[op.dst.index] = budget_[i];  // known now: queued ops read it at once
      return timed(b_.compress(*opt_.codec, dtype_, slice_ptr(op.src), op.src.count, wire_[op.dst.index],
                               wire_capacity_[op.dst.index], opt_.encode, &stream_bytes_[i]));
    case OpKind::Decompress: {
      // Budgeted, a stream may have been cut (its sender's overflow): its error waits for the
      // run's end, where the run is redone (run()).
      Completion c = -1;
      try {
        if (fused_into_[i] != kNotFused) {
          const sched::Op& r = prog_.ops[fused_into_[i]];
          ++st.fused;
          c = b_.decompress_add(*opt_.codec, opt_.encode, wire_[op.src.index], wire_size_[op.src.index], dtype_,
                                slice_ptr(r.dst), r.src.count);  // the block it decodes
        } else {
          c = b_.decompress(*opt_.codec, opt_.encode, wire_[op.src.index], wire_size_[op.src.index], dtype_,
                            slice_ptr(op.dst), op.dst.count);
        }
      } catch (const CodecError&) {
        hold_decode_error(i);
        c = -1;
      }
      return timed(c);
    }
  }
}

// Op `lead`'s batch as one call: every op of it running from now on, the others ending once the
// lead has (poll_running).
void Executor::start_batch(uint32_t lead, RunStats& st) {
  const uint32_t end = batch_end_[lead];
  const auto& ops = prog_.ops;
  if (queued_)
    for (uint32_t j = lead; j < end; ++j) queue_waits(j);
  const bool host = b_.memory() == MemorySpace::Host;
  const auto t0 = std::chrono::steady_clock::now();
  Completion c = -1;
  if (ops[lead].kind == OpKind::Compress) {
    std::vector<CompressItem> items;
    for (uint32_t j = lead; j < end; ++j) {
      const sched::Op& o = ops[j];
      st.compress_in += o.src.count * es_;
      if (budgeted_) wire_size_[o.dst.index] = budget_[j];  // known now: queued ops read it at once
      items.push_back({slice_ptr(o.src), o.src.count, wire_[o.dst.index], wire_capacity_[o.dst.index], &stream_bytes_[j]});
    }
    c = b_.compress_batch(*opt_.codec, dtype_, items.data(), items.size(), opt_.encode);
  } else {
    std::vector<DecompressItem> items;
    for (uint32_t j = lead; j < end; ++j) {
      const sched::Op& o = ops[j];
      items.push_back({wire_[o.src.index], wire_size_[o.src.index], slice_ptr(o.dst), o.dst.count});
    }
    try {  // as a single decompression's (start)
      c = b_.decompress_batch(*opt_.codec, opt_.encode, dtype_, items.data(), items.size());
    } catch (const CodecError&) {
      hold_decode_error(lead);
      c = -1;
    }
  }
  ++st.batches;
  if (host && c < 0) add_kernel_time(st, ops[lead].kind, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  for (uint32_t j = lead; j < end; ++j) {
    op_state_[j] = kRunning;
    running_.push_back({j, false, j == lead ? c : -1});
  }
  op_handle_[lead] = c;
}

void Executor::add_kernel_time(RunStats& st, sched::OpKind kind, double seconds) {
  if (kind == OpKind::Reduce) st.reduce_s += seconds;
  else if (kind == OpKind::Copy) st.copy_s += seconds;
  else st.codec_s += seconds;
}

struct Executor::Pass {
  RunStats st;
  std::vector<uint32_t> waiting;                        // per op: dependencies not done yet
  std::vector<uint32_t> ready_compute, ready_transfer;  // ready_transfer: not in lockstep
  std::vector<uint32_t> group_ready;                    // lockstep: ready transfers per group
  size_t next_group = 0, done = 0;
};

void Executor::make_ready(Pass& p, uint32_t i) {
  if (op_state_[i] != kWaiting) return;  // an op of a batch, started with its lead
  if (!is_transfer(prog_.ops[i].kind)) p.ready_compute.push_back(i);
  else if (opt_.lockstep) ++p.group_ready[group_of_[i]];
  else p.ready_transfer.push_back(i);
}

void Executor::finish(Pass& p, uint32_t i, size_t received) {
  const sched::Op& op = prog_.ops[i];
  if (op.kind == OpKind::Recv && op.dst.buf == BufKind::Wire) {
    wire_size_[op.dst.index] = received;  // budgeted: the budget
    if (opt_.wire_budget && !budgeted_) learned_[i] = received;
  }
  if (op.kind == OpKind::Compress) {
    p.st.compress_out += stream_bytes_[i];
    if (budgeted_) {
      wire_size_[op.dst.index] = budget_[i];
      if (stream_bytes_[i] > budget_[i]) ++p.st.overflows;
    } else {
      wire_size_[op.dst.index] = stream_bytes_[i];
      if (opt_.wire_budget) learned_[i] = stream_bytes_[i];
    }
  }
  op_state_[i] = kFinished;
  ++p.done;
  heartbeat();  // the watchdog's sign of life (real/watchdog.h)
  if (!released_[i]) release(p, i);
}

// Called in a CodecError's handler: within budgets a decompression's error waits for the run's
// end (a stream may have been cut: run()); any other is rethrown.
void Executor::hold_decode_error(uint32_t i) {
  if (!budgeted_ || prog_.ops[i].kind != OpKind::Decompress) throw;
  if (!decode_error_) decode_error_ = std::current_exception();
}

void Executor::release(Pass& p, uint32_t i) {
  released_[i] = 1;
  for (uint32_t d : dependents_[i])
    if (--p.waiting[d] == 0) make_ready(p, d);
}

// Starts op i; a send is done for its dependents at once.
void Executor::launch(Pass& p, uint32_t i) {
  start(i, p.st);
  if (prog_.ops[i].kind == OpKind::Send) finish(p, i, 0);
  else if (queued_)  // its dependents (and its batch's) may be submitted behind it
    for (uint32_t j = i; j < batch_end_[i]; ++j) release(p, j);
}

// Completes what has finished; true when anything did.
bool Executor::poll_running(Pass& p) {
  bool progress = false;
  for (size_t k = 0; k < running_.size();) {
    const Running r = running_[k];
    size_t received = 0;
    double seconds = 0;
    bool fin = false;
    try {
      if (!r.transfer && rides(r.op)) fin = op_state_[batch_lead_[r.op]] == kFinished;  // ends after its lead
      else fin = r.transfer ? t_.test(r.handle, &received) : b_.done(r.handle, &seconds);
    } catch (const CodecError&) {  // a decompression's, on the device or the compute thread
      hold_decode_error(r.op);
      fin = true;
    }
    if (!fin) {
      ++k;
      continue;
    }
    running_[k] = running_.back();
    running_.pop_back();
    if (seconds > 0) add_kernel_time(p.st, prog_.ops[r.op].kind, seconds);
    if (prog_.ops[r.op].kind != OpKind::Send) finish(p, r.op, received);
    progress = true;
  }
  return progress;
}

// Posts the transfers that may go: in lockstep, each step group once all of it is ready;
// otherwise every ready transfer in program order (held while it would overwrite a buffer a
// send still reads).
bool Executor::start_transfers(Pass& p) {
  bool progress = false;
  if (opt_.lockstep) {
    while (p.next_group < groups_.size() && p.group_ready[p.next_group] == groups_[p.next_group].size()) {
      const auto& g = groups_[p.next_group];
      if (!queued_ && std::any_of(g.begin(), g.end(), [&](uint32_t i) { return conflicts_inflight(i); })) break;
      t_.group_start();
      for (uint32_t i : g) start(i, p.st);
      t_.group_end();
      for (uint32_t i : g)
        if (prog_.ops[i].kind == OpKind::Send) finish(p, i, 0);
        else if (queued_) release(p, i);  // its group ended: its mark is recorded
      ++p.next_group;
      progress = true;
    }
    return progress;
  }
  if (p.ready_transfer.empty()) return false;
  std::sort(p.ready_transfer.begin(), p.ready_transfer.end());
  std::vector<uint32_t> held;
  for (size_t k = 0; k < p.ready_transfer.size(); ++k) {  // launch() may append to it
    const uint32_t i = p.ready_transfer[k];
    if (!queued_ && conflicts_inflight(i)) {
      held.push_back(i);
    } else {
      launch(p, i);
      progress = true;
    }
  }
  p.ready_transfer = std::move(held);
  return progress;
}

// Starts the first ready computation in program order: the computations a schedule lists
// first are on the critical path of the transfers after them.
bool Executor::start_compute(Pass& p) {
  if (queued_) {  // every ready one, in program order, each behind what it must follow
    if (p.ready_compute.empty()) return false;
    while (!p.ready_compute.empty()) {
      std::vector<uint32_t> now;
      now.swap(p.ready_compute);
      std::sort(now.begin(), now.end());
      for (uint32_t i : now) launch(p, i);  // may make more ready
    }
    return true;
  }
  uint32_t pick = UINT32_MAX;
  size_t at = 0;
  for (size_t k = 0; k < p.ready_compute.size(); ++k)
    if (p.ready_compute[k] < pick && !conflicts_inflight(p.ready_compute[k])) pick = p.ready_compute[k], at = k;
  if (pick == UINT32_MAX) return false;
  p.ready_compute[at] = p.ready_compute.back();
  p.ready_compute.pop_back();
  launch(p, pick);
  return true;
}

RunStats Executor::run() {
  if (!opt_.wire_budget) return run_pass(false);
  if (!budgets_ready_) {
    RunStats st = run_pass(false);
    learn_budgets();
    return st;
  }
  RunStats st = run_pass(true);
  const std::exception_ptr error = decode_error_;
  decode_error_ = nullptr;
  // A codec whose streams are sized by their elements never outgrows a budget of at least
  // their size: no agreement, and a failed decode is damage.
  const bool agree = !(opt_.codec->sized_by_elements() && opt_.wire_budget_margin >= 0);
  if (!agree) {
    if (st.overflows > 0) throw std::logic_error("executor: a " + std::string(opt_.codec->name()) +
                                                 " stream outgrew its budget, which its size cannot");
    if (error) std::rethrow_exception(error);
    return st;
  }
  if (!t_.any(st.overflows > 0 || error)) {
    // No stream was cut anywhere, so a stream that failed to decode was damaged.
    if (error) std::rethrow_exception(error);
    return st;
  }
  // A stream outgrew its budget somewhere: every rank redoes the run at exact sizes.
  st += run_pass(false);
  learn_budgets();
  st.reruns = 1;
  return st;
}

// Each message's budget from its size at exact sizes: the same function of the same number at
// both ends (the sender's stream, the receiver's message; a relay forwards what it received).
void Executor::learn_budgets() {
  for (size_t i = 0; i < learned_.size(); ++i) {
    budget_[i] = grown(learned_[i]);
    // A budget is never past its wire buffer (both grow from bounds of the same elements):
    // NCCL, which checks no size, would write past it.
    const sched::Op& op = prog_.ops[i];
    if ((op.kind == OpKind::Recv || op.kind == OpKind::Compress) && op.dst.buf == BufKind::Wire &&
        budget_[i] > wire_capacity_[op.dst.index])
      throw ScheduleError("executor: op " + std::to_string(i) + ": a wire budget of " + std::to_string(budget_[i]) +
                          " bytes past its wire buffer " + std::to_string(op.dst.index) + " of " +
                          std::to_string(wire_capacity_[op.dst.index]) + " bytes (a message longer than its stream bound)");
  }
  budgets_ready_ = true;
}

uint64_t Executor::grown(uint64_t bytes) const {
  return static_cast<uint64_t>(std::max(0.0, std::ceil(static_cast<double>(bytes) * (1 + opt_.wire_budget_margin))));
}

RunStats Executor::run_pass(bool budgeted) {
  budgeted_ = budgeted;
  // Queued where no transfer needs a size from the host (exact sizes: a stream's, after its
  // compress op is done).
  queued_ = opt_.queue_ahead && b_.queues() && t_.queues() && (budgeted || prog_.wire_buffers == 0);
  decode_error_ = nullptr;
  const size_t n = prog_.ops.size();
  const int np = t_.size();
  send_base_.assign(np, 0);
  recv_base_.assign(np, 0);
  for (int peer = 0; peer < np; ++peer) {
    if (msgs_to_[peer]) send_base_[peer] = t_.reserve_seqs(Transport::Direction::Send, peer, msgs_to_[peer]);
    if (msgs_from_[peer]) recv_base_[peer] = t_.reserve_seqs(Transport::Direction::Recv, peer, msgs_from_[peer]);
  }
  stream_bytes_.assign(n, 0);
  running_.clear();
  op_state_.assign(n, kWaiting);
  released_.assign(n, 0);
  op_handle_.assign(n, -1);
  Pass p;
  p.st.queued = queued_ ? 1 : 0;
  p.waiting = dep_count_;
  p.group_ready.assign(groups_.size(), 0);
  for (uint32_t i = 0; i < n; ++i)
    if (p.waiting[i] == 0) make_ready(p, i);
  while (p.done < n || !running_.empty()) {
    bool progress = poll_running(p);
    progress = start_transfers(p) || progress;
    progress = start_compute(p) || progress;
    if (!progress && running_.empty() && p.done < n)
      throw ScheduleError("executor: " + std::to_string(n - p.done) + " ops of " + std::to_string(n) +
                          " can never start (a dependency cycle?)");
    // Nothing to do but wait. With no transfer in flight, for the compute thread's next
    // completion (asleep: the core is the kernels'); else poll, giving the core away between
    // polls (MPI moves messages only while this thread polls it; ranks may outnumber cores, as
    // in CI, and a spinning rank then starves the one it waits for).
    if (!progress) {
      const bool transfers = std::any_of(running_.begin(), running_.end(), [](const Running& r) { return r.transfer; });
      if (transfers || !b_.wait_any()) std::this_thread::yield();
    }
  }
  return p.st;
}

}  // namespace compcoll::real
