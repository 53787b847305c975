// real/executor.h — the real executor: runs one rank's program of a schedule (shared/schedule)
// over a Transport (MPI or NCCL) and a DataBackend (host codecs on host memory, or CUDA
// kernels on device memory). One executor for both transports: it owns the rank's buffers,
// starts every op once its dependencies are done, keeps transfers in flight while it
// computes, and polls for completions. It never decides what to run (no policy) and never
// checks results (real/verify.h does). docs/compcoll-run.md describes the design.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "real/backend.h"
#include "real/transport.h"
#include "schedule/lockstep.h"
#include "schedule/schedule.h"

namespace compcoll::real {

struct ExecutorOptions {
  const Codec* codec = nullptr;  // required when the schedule compresses
  EncodeOptions encode;
  // Post transfers step by step (Op::step), each step's transfers in one transport group, in
  // (step, program) order. Forced on when the transport's sends wait for their receives
  // (NCCL); optional otherwise (to run that mode on MPI). Computation is never held back.
  bool lockstep = false;
  // Where the backend decodes and adds in one operation (DataBackend::decompress_adds), a
  // decompression whose block only one reduce reads, and that reduce (sched::decode_add_pairs),
  // run as that one operation (decompress_add into the reduce's destination, once both ops'
  // dependencies are done): the bits are the same, the decoded block is never written out.
  // Off by default (run.fused_decode; the simulator and the cost model price what runs).
  bool fuse_decode_add = false;
  // Where the backend codes a batch of messages in one call (DataBackend::batches), a batch of
  // compress or decompress ops (Op::batched, sched::batch_end) runs as that one call when the
  // op that leads it starts (once everything the batch depends on is done), and its other ops
  // end with it; their ops are then not fused with reduces. Off: each op its own call.
  // batch_compress for batches of compress ops, batch_decompress for decompress ops;
  // compcoll-run sets each where its calibration prices such a batch as one call
  // (calib::Calibration::batches).
  bool batch_compress = false, batch_decompress = false;
  // Compressed messages within a wire budget, so that no stream's size is needed on the host
  // before its transfer is posted (docs/compcoll-run.md, "Variable-length messages"). A run
  // that sends every stream at its exact size (the first, and any redone) teaches each message
  // its size; from then on the message goes as an exact transfer of its budget: that size plus
  // wire_budget_margin of it, the same on both ends (the wire buffers grow by the margin too).
  // A receive is then posted at once with its size (NCCL needs no size exchange, MPI no
  // probe), the stream followed by bytes its decoder does not read. A stream longer than its
  // budget goes cut; the run ends with Transport::any on every rank, and where any stream
  // anywhere outgrew its budget the whole run is redone with exact sizes and its budgets
  // learned anew (RunStats::reruns). Off: every stream at its exact size, every run. A
  // schedule no rank of which compresses runs as with it off; a codec whose streams are sized
  // by their elements (Codec::sized_by_elements: identity) cannot outgrow its budgets, so its
  // runs end without the agreement.
  bool wire_budget = false;
  double wire_budget_margin = 0;  // > -1; below 0 only to force overflows (the tests)
  // Queued mode, where the backend and the transport both have one (DataBackend::queues,
  // Transport::queues: CUDA and NCCL; the host's compute thread and MPI) and no transfer needs a
  // size from the host (a run within wire budgets, or a schedule that compresses nothing): an
  // op is submitted as soon as everything it depends on is submitted, and waits for what it
  // must follow on its queue (a kernel for a transfer's end, a transfer for a kernel's:
  // QueueMark) instead of the host waiting for it. On a GPU no host poll stands between a
  // step's kernels and its transfers. Off: an op starts once its dependencies are done.
  bool queue_ahead = false;
};

// What one run of the program did on this rank.
struct RunStats {
  uint64_t messages = 0;       // sends
  uint64_t sent_bytes = 0;     // bytes sent (compressed streams as they went: exact, or their budget)
  uint64_t compress_in = 0;    // bytes given to compress ops
  uint64_t compress_out = 0;   // stream bytes they produced
  uint64_t fused = 0;          // decompress-and-reduce pairs run as one decode-and-add
  uint64_t batches = 0;        // batches of codec ops run as one call (ExecutorOptions::batch_compress, batch_decompress)
  uint64_t overflows = 0;      // wire budget: this rank's streams longer than their budget
  uint64_t reruns = 0;         // wire budget: 1 when the run was redone with exact sizes (then
                               // every other count is of both passes)
  uint64_t queued = 0;         // passes run in queued mode (ExecutorOptions::queue_ahead)
  double codec_s = 0, reduce_s = 0, copy_s = 0;  // host backend only: time in (de)compress, reduce, copy ops

  // Every count and time summed (several runs, or a run and its redone pass).
  RunStats& operator+=(const RunStats& o) {
    messages += o.messages, sent_bytes += o.sent_bytes, compress_in += o.compress_in;
    compress_out += o.compress_out, fused += o.fused, batches += o.batches, overflows += o.overflows;
    reruns += o.reruns;
    queued += o.queued, codec_s += o.codec_s, reduce_s += o.reduce_s, copy_s += o.copy_s;
    return *this;
  }
};

// Lockstep posting (the transfers of each step in one group): sched::plan_lockstep.
using sched::LockstepPlan;
using sched::lockstep_problem;
using sched::plan_lockstep;

class Executor {
 public:
  // Allocates the rank's buffers; `s` must outlive the executor. Throws sched::ScheduleError
  // when the program cannot run here (no codec for a compressing schedule; in lockstep, a
  // transfer that depends on a transfer of its own step), TransportError when the transport
  // and backend disagree on where memory is.
  Executor(const sched::Schedule& s, int rank, Transport& transport, DataBackend& backend,
           const ExecutorOptions& opt);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // The rank's input and output buffers, in the backend's memory.
  void* input() const { return input_; }
  void* output() const { return output_; }
  size_t input_bytes() const { return prog_.input_count * es_; }
  size_t output_bytes() const { return prog_.output_count * es_; }

  // Runs the program once; returns when every op of this rank is done. With a wire budget,
  // collective (Transport::any) once the budgets are learned.
  RunStats run();

 private:
  void* slice_ptr(const sched::Slice& s) const;
  void start(uint32_t i, RunStats& st);
  void start_batch(uint32_t lead, RunStats& st);
  struct Pass;  // one run's progress (executor.cpp)
  RunStats run_pass(bool budgeted);
  void learn_budgets();
  // ceil(bytes x (1 + the budget's margin)): a budget from a size, a capacity from a bound.
  uint64_t grown(uint64_t bytes) const;
  void make_ready(Pass& p, uint32_t i);
  void finish(Pass& p, uint32_t i, size_t received);
  void launch(Pass& p, uint32_t i);
  bool poll_running(Pass& p);
  bool start_transfers(Pass& p);
  bool start_compute(Pass& p);
  // True when op i writes memory that an op still in flight reads or writes (a send, a kernel
  // on the compute thread, a receive), or reads memory one still writes.
  bool conflicts_inflight(uint32_t i) const;  // of a batch's lead: of any op of its batch
  bool conflicts(uint32_t i, uint32_t o) const;  // op i against op o in flight, as above
  // Queued mode: op i, about to be submitted, waits on its queue for each dependency still
  // running and each op in flight it conflicts with, where that op is on the other queue (or
  // on the transport's, where transfers may run out of order).
  void queue_waits(uint32_t i);
  void release(Pass& p, uint32_t i);  // op i's dependents: one dependency fewer each
  void hold_decode_error(uint32_t i);
  // What op i reads and writes as it runs here (a fused decompression: the wire and its
  // reduce's destination; the reduce it absorbed: nothing).
  struct Access {
    const sched::Slice* reads = nullptr;
    const sched::Slice* writes = nullptr;
  };
  Access access(uint32_t i) const;
  // Pairs a decompression with the one reduce that reads its block, where the backend fuses.
  void fuse_decode_add();
  static void add_kernel_time(RunStats& st, sched::OpKind kind, double seconds);

  const sched::RankProgram& prog_;
  DType dtype_;
  size_t es_;
  Transport& t_;
  DataBackend& b_;
  ExecutorOptions opt_;
  void* input_ = nullptr;
  void* output_ = nullptr;
  std::vector<void*> scratch_, wire_;
  std::vector<size_t> wire_capacity_;
  std::vector<uint64_t> wire_size_;

  std::vector<std::vector<uint32_t>> dependents_;
  std::vector<uint32_t> dep_count_;
  std::vector<uint64_t> msg_index_;   // send/recv: its number among this rank's messages to/from the peer
  std::vector<uint64_t> msgs_to_, msgs_from_;  // per peer
  std::vector<uint32_t> group_of_;    // lockstep: the step group of a transfer
  std::vector<std::vector<uint32_t>> groups_;  // lockstep: transfers per step, in (step, index) order
  // fused_into_[d]: the reduce a decompression d adds into; fused_from_[r]: the decompression
  // that does reduce r's work (kNotFused: none). An absorbed reduce only marks that op's end.
  static constexpr uint32_t kNotFused = UINT32_MAX;
  std::vector<uint32_t> fused_into_, fused_from_;
  bool absorbed(uint32_t r) const { return fused_from_[r] != kNotFused; }
  // batch_lead_[i]: for an op of a batch that runs as one call (ExecutorOptions::batch_compress, batch_decompress),
  // the op that leads it (kNotFused: none, or it leads); batch_end_[lead]: one past its batch's
  // last op (lead + 1 for every other op). Such an op starts with its lead and ends after it.
  std::vector<uint32_t> batch_lead_, batch_end_;
  bool rides(uint32_t i) const { return batch_lead_[i] != kNotFused; }
  // The op whose call does op d's work: an absorbed reduce's decompression, a batch's lead, or d.
  uint32_t work_of(uint32_t d) const { return absorbed(d) ? fused_from_[d] : rides(d) ? batch_lead_[d] : d; }

  // Wire budget: per compress op and per receive into a wire buffer, the stream's size in the
  // last run at exact sizes (learned_) and its budget (budget_).
  std::vector<uint64_t> learned_, budget_;
  bool budgets_ready_ = false;

  // Per op, as the run counts them (lockstep's and fused dependencies too): what it depends on.
  std::vector<std::vector<uint32_t>> deps_of_;

  // Per run.
  bool budgeted_ = false;
  bool queued_ = false;
  enum : uint8_t { kWaiting, kRunning, kFinished };
  std::vector<uint8_t> op_state_, released_;
  std::vector<int> op_handle_;  // while kRunning: its Request or Completion
  std::exception_ptr decode_error_;  // budgeted: the first decompression that failed
  std::vector<uint64_t> send_base_, recv_base_;
  std::vector<uint64_t> stream_bytes_;  // compress ops: the stream's size once done
  // A send counts as done for its dependents once posted (sends are buffered in the
  // schedule's semantics); it stays here, in flight, until the transport says its buffer may
  // be reused, and an op that would overwrite that buffer waits for it.
  struct Running {
    uint32_t op;
    bool transfer;
    int handle;  // Request or Completion
  };
  std::vector<Running> running_;
};

}  // namespace compcoll::real
