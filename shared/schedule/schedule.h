// shared/schedule/schedule.h — a collective schedule as data: for each rank of a group, an
// ordered program of ops (send, recv, reduce, copy, compress, decompress) over named buffer
// slices, with explicit dependencies. Executors (reference, SimGrid, NCCL, MPI) interpret it;
// nothing here knows about any of them. docs/SCHEDULES.md describes the semantics.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "util/dtype.h"

namespace compcoll::sched {

enum class Collective : uint8_t { AllReduce, ReduceScatter, AllGather, Broadcast, AllToAll };
std::string_view collective_name(Collective c);

// Typed buffers hold elements of the schedule's dtype; a wire buffer holds one message of
// bytes (a compressed stream) whose length is known only when it is written.
enum class BufKind : uint8_t { Input, Output, Scratch, Wire };

struct Slice {
  BufKind buf = BufKind::Input;
  uint32_t index = 0;   // which scratch or wire buffer (0 for input/output)
  uint64_t offset = 0;  // elements; unused for wire buffers
  uint64_t count = 0;   // elements; for a wire buffer, where not 0, the most elements its
                        // stream holds (what bounds a stream a rank relays without decoding)
};

enum class OpKind : uint8_t { Send, Recv, Reduce, Copy, Compress, Decompress };
std::string_view op_name(OpKind k);

// send: src -> peer; recv: peer -> dst; reduce: dst += src; copy: dst = src;
// compress: typed src -> wire dst; decompress: wire src -> typed dst.
struct Op {
  OpKind kind = OpKind::Copy;
  int peer = -1;                // send / recv only
  Slice src, dst;
  std::vector<uint32_t> deps;   // indices of earlier ops of the same rank that must finish first
  uint32_t step = 0;            // algorithm step, for cost reports and traces
  uint32_t lane : 31 = 0;       // send / recv: the connection it travels on (the pipelining
                                // channel): messages between a pair leave one after the other
                                // per lane, as on one NCCL channel's connection, and lanes run
                                // side by side; messages match in program order per pair and lane
  uint32_t batched : 1 = 0;     // compress / decompress: runs in the launch of the batch's first
                                // op (see batch_end); a bit beside lane keeps an Op at 88 bytes
};

// Batches: a compress or decompress op marked `batched` has one dependency, the op that leads
// its batch, of the same kind and not batched itself, and follows it (or another op of its
// batch) directly in the program. A batch is one launch of the codec over all its ops' slices,
// as batched codec APIs run it (DietGPU's floatCompress and floatDecompress take a batch of
// buffers); a model whose calibration says so (calib::Calibration::batch_launch) charges the
// first op the batch's bytes and the others nothing, and otherwise each op its own. Executors
// that launch op by op run the batch in program order, which its dependencies allow.
// One past the last op of the batch that op `lead` leads (lead + 1 for an op that leads none).
inline uint32_t batch_end(const std::vector<Op>& ops, uint32_t lead) {
  uint32_t e = lead + 1;
  while (e < ops.size() && ops[e].batched) ++e;
  return e;
}
// The elements codec op i's launch covers: its own (a compress's source, a decompress's
// destination), or with batch launches those of every op of the batch it leads.
inline uint64_t launch_elements(const std::vector<Op>& ops, uint32_t i, bool batch_launch) {
  uint64_t n = 0;
  for (uint32_t j = i, end = batch_launch ? batch_end(ops, i) : i + 1; j < end; ++j)
    n += ops[j].kind == OpKind::Compress ? ops[j].src.count : ops[j].dst.count;
  return n;
}

// Decode and add in one kernel (the nccl executor's run.fused_decode; docs/SCHEDULES.md): a
// decompression into scratch whose one dependent is a reduce of exactly the block it wrote
// (nothing else reads it), paired with that reduce. The pairs (decompress, reduce) in
// decompress order; a reduce is in at most one. The executor runs a pair as one kernel that
// starts once both ops' other dependencies are done and writes the reduce's destination; the
// simulator and the cost model price it so (the decompression in no time, the reduce as the
// fused kernel over the block, which starts at the same instant).
std::vector<std::pair<uint32_t, uint32_t>> decode_add_pairs(const std::vector<Op>& ops);

struct RankProgram {
  uint64_t input_count = 0, output_count = 0;  // elements
  std::vector<uint64_t> scratch_counts;        // elements per scratch buffer
  uint32_t wire_buffers = 0;
  std::vector<Op> ops;
};

struct Schedule {
  Collective collective = Collective::AllReduce;
  std::string algorithm;
  DType dtype = DType::BF16;
  uint64_t count = 0;  // the collective's element count (per-rank input for allreduce)
  std::vector<RankProgram> ranks;
  // In-switch ranks (NVLink SHARP): the last `switches` ranks are no GPU but the NVSwitch of a
  // node, which receives, reduces in the switch and multicasts. Switch k serves GPU ranks
  // [k x switch_span, (k + 1) x switch_span); it holds no input or output and runs sends,
  // receives, reduces and copies only, at no cost of its own (its ports are the model's).
  int switches = 0, switch_span = 0;
  int size() const { return static_cast<int>(ranks.size()); }
  int gpu_ranks() const { return size() - switches; }  // the group: ranks 0 .. gpu_ranks() - 1
  bool is_switch(int rank) const { return rank >= gpu_ranks(); }
  // Whether any rank compresses (has a wire buffer).
  bool compresses() const {
    for (const RankProgram& p : ranks)
      if (p.wire_buffers > 0) return true;
    return false;
  }
};

// Builders' helpers. append_after adds `op` to `p` depending on op `last` (none if
// negative) and makes it the new `last`: one dependency chain, of which a rank may run several
// side by side. append_chained chains to the op before it in the program.
void append_after(RankProgram& p, Op op, int64_t& last);
void append_chained(RankProgram& p, Op op);
// A batch (Op::batched) of `ops`, all of one kind: the first depends on `deps`, the others
// on the first. Returns the index of each op.
std::vector<uint32_t> append_batch(RankProgram& p, std::vector<Op> ops, const std::vector<uint32_t>& deps);
// An op that waits for `deps` and does nothing: a copy of no elements, which every executor and
// model runs in no time. Returns its index.
uint32_t append_join(RankProgram& p, const std::vector<uint32_t>& deps, uint32_t step);
inline Slice wire_slice(uint32_t w) { return Slice{BufKind::Wire, w, 0, 0}; }

// A schedule that breaks a rule; what() names the rank and op.
class ScheduleError : public std::runtime_error {
 public:
  using runtime_error::runtime_error;
};

// Checks a schedule on its own: peers in range and not self, slices inside their buffers and
// of matching counts, dependencies pointing at earlier ops, every send matched by a recv of the
// same size (messages between a pair of ranks match in order), and no deadlock when each rank
// runs its program in order with buffered sends. Throws ScheduleError.
void validate(const Schedule& s);

// One line per op: "rank 2 op 5 step 3: recv from 1 -> scratch0[0+128] after 4".
std::string to_text(const Schedule& s);

// The call run `times` times back to back, as compcoll-run times it: every rank's ops repeated,
// copy k's dependencies inside copy k (op i of copy k is op k x ops + i). Nothing orders one
// copy after the last: a model of it starts a rank's copy k + 1 once all of the rank's copy k is
// done, its sends delivered (policy::predict, sim::Call::iterations). Messages between a pair
// keep matching in program order across copies.
Schedule repeated(const Schedule& s, int times);

// Bytes each rank sends and receives, per step, for typed messages (wire messages have
// run-time sizes and are reported by the executors; a compressed schedule's typed bytes are
// those of the slices it compresses, so compare it with its uncompressed twin).
struct StepBytes {
  uint32_t steps = 0;                            // number of distinct steps with a send
  std::vector<uint64_t> sent_bytes;              // per rank, all steps
  std::vector<uint64_t> max_step_bytes;          // per rank, the largest single step
  std::vector<std::vector<uint64_t>> sent, received;  // [rank][step], step = Op::step
};
StepBytes step_bytes(const Schedule& s);

}  // namespace compcoll::sched
