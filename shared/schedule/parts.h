// shared/schedule/parts.h — the building blocks the builders share (internal to
// shared/schedule): a collective's phase run by a subgroup of a schedule's ranks on a range of
// elements of their buffers. The flat builders (ring_allreduce, recursive_allreduce, ...) run
// one part over the whole group; the hierarchical ones run parts over the ranks of a node and
// over the ranks of equal local rank across nodes; pipelining runs one part per piece of the
// data and interleaves them.
#pragma once

#include <functional>
#include <vector>

#include "schedule/algorithms.h"

namespace compcoll::sched::detail {

// A subgroup and its data: members[i] is the real rank at position i of the algorithm (ring
// order, virtual rank); the data are the elements [base, base + count) of each member's typed
// buffer (buf, buf_index). That range is split into size() * sub "fine" blocks by block_of and
// algorithm block b is fine blocks [b * sub, (b + 1) * sub): with sub = 1 the usual blocks;
// hierarchical reduce-scatter and allgather use sub = nodes so that the blocks of a node are
// unions of blocks of the whole group. A ring part may also be piece `piece` of `pieces` of
// every block (pipelined reduce-scatter and allgather keep the block layout that way); ranges
// of blocks (blocks(lo, hi)) ignore pieces. Receives land in scratch buffer `scratch` (the
// part grows it as needed); pipelined pieces each get their own.
struct Part {
  std::vector<int> members;
  uint64_t base = 0, count = 0;
  BufKind buf = BufKind::Output;
  uint32_t buf_index = 0;
  int sub = 1;
  uint32_t scratch = 0;
  uint32_t pieces = 1, piece = 0;
  std::vector<int> order{};
  // Merged channels (Pipelining::merge). `bounds`: size() * sub + 1 offsets that replace
  // block_of's fine blocks. `piece_groups`: the group of each of the `pieces` pieces; the
  // pieces of a block are laid out by group, and the part carries group `piece`'s side by side.
  std::vector<uint64_t> bounds{};
  std::vector<uint32_t> piece_groups{};
  // > 0: a hop between two members of one node (ranks r and r' with r / node_size == r' /
  // node_size) carries no compressed bytes; only the hops between nodes compress (rings).
  int node_size = 0;

  int size() const { return static_cast<int>(members.size()); }
  // Element range, relative to base, of algorithm blocks [lo, hi).
  Block blocks(int lo, int hi) const {
    if (!bounds.empty()) return {bounds[static_cast<size_t>(lo * sub)], bounds[static_cast<size_t>(hi * sub)]};
    return blocks_of(count, size() * sub, lo * sub, hi * sub);
  }
  // Element range of (this part's piece of) algorithm block b.
  Block block(int b) const {
    const int at = order.empty() ? b : order[static_cast<size_t>(b)];
    const Block whole = blocks(at, at + 1);
    if (pieces == 1) return whole;
    if (!piece_groups.empty()) {
      uint64_t begin = whole.begin, size = 0;
      for (uint32_t i = 0; i < pieces; ++i) {
        const uint64_t c = block_of(whole.count(), static_cast<int>(pieces), static_cast<int>(i)).count();
        if (piece_groups[i] < piece) begin += c;
        if (piece_groups[i] == piece) size += c;
      }
      return {begin, begin + size};
    }
    const Block p = block_of(whole.count(), static_cast<int>(pieces), static_cast<int>(piece));
    return {whole.begin + p.begin, whole.begin + p.end};
  }
  // The typed slice of the part's buffer holding the elements [b.begin, b.end) of the part.
  Slice slice(const Block& b) const { return Slice{buf, buf_index, base + b.begin, b.count()}; }
  Slice slice(int lo, int hi) const { return slice(blocks(lo, hi)); }
  Slice all() const { return Slice{buf, buf_index, base, count}; }
};

// The group 0..n-1 in order.
std::vector<int> whole_group(int n);

// Rank r's next op attaches after op chains[r] of its program (-1: after nothing).
using Chains = std::vector<int64_t>;

// Chains that start after each rank's last op so far (one chain per rank).
Chains chains_after_last(const Schedule& s);

// The opening op of every rank, shared by the flat and hierarchical builders:
//   allreduce:      output = input (the algorithm then works in place on the output);
//   reduce-scatter: scratch 0 = input (the whole vector accumulates there);
//   allgather:      the rank's input, block r of `count`, copied to its place in the output.
// Each also sets the rank's input and output counts (and scratch 0 for reduce-scatter).
void allreduce_prologue(Schedule& s, uint64_t count);
void reduce_scatter_prologue(Schedule& s, uint64_t count);
void allgather_prologue(Schedule& s, uint64_t count);

// Scratch buffer `index` of `p` holds at least `count` elements (created if missing).
void grow_scratch(RankProgram& p, uint32_t index, uint64_t count);

// One rank's dependency chain: ops appended after `last`, sends and receives compressed when
// asked (a compressed send compresses into a new wire buffer; a compressed receive lands in a
// new wire buffer and is decompressed into `dst`).
struct Chain {
  RankProgram& p;
  int64_t& last;
  void add(Op op) { append_after(p, std::move(op), last); }
  uint32_t new_wire() { return p.wire_buffers++; }
  void send(int peer, const Slice& src, bool compressed, uint32_t step);
  void recv(int peer, const Slice& dst, bool compressed, uint32_t step);
  // Wire versions for compress-once forwarding: compress `src` into a new wire and return it;
  // send wire `w`; receive into a new wire, decompress it into `dst` and return the wire.
  uint32_t compress(const Slice& src, uint32_t step);
  void send_wire(int peer, uint32_t w, uint32_t step);
  uint32_t recv_wire(int peer, const Slice& dst, uint32_t step);
};

// Phases over a part. Each appends every member's ops from `step` on, after chains[member],
// updates chains and returns the step after its last. `owned_shift`: member i owns algorithm
// block (i + owned_shift) mod size at the end of a reduce-scatter / start of an allgather.
uint32_t ring_reduce_scatter_part(Schedule& s, const Part& part, int owned_shift, bool compressed, uint32_t step,
                                  Chains& chains);
uint32_t ring_allgather_part(Schedule& s, const Part& part, int owned_shift, Placement placement, uint32_t step,
                             Chains& chains);
// Allreduce of the part's data among its members (the data start in the part's buffer and the
// sum ends there). Placements as for the flat builders of the same name.
uint32_t ring_allreduce_part(Schedule& s, const Part& part, Placement placement, uint32_t step, Chains& chains);
uint32_t recursive_allreduce_part(Schedule& s, const Part& part, Placement placement, uint32_t step, Chains& chains);
// Recursive halving / doubling of any group size (recursive.cpp): kind AllReduce,
// ReduceScatter (member i ends with block i of the part's buffer reduced) or AllGather
// (member i starts with block i in place).
uint32_t recursive_part(Schedule& s, const Part& part, Collective kind, Placement placement, uint32_t step,
                        Chains& chains);
uint32_t direct_allreduce_part(Schedule& s, const Part& part, Placement placement, uint32_t step, Chains& chains);
// A flat allreduce: the prologue, then `part` (one of the allreduce parts above) over the whole
// group of n ranks. `what` names the builder in errors; `algorithm` the schedule.
using AllreducePart = uint32_t (*)(Schedule&, const Part&, Placement, uint32_t, Chains&);
Schedule flat_allreduce(const char* what, const char* algorithm, AllreducePart part, int n, uint64_t count, DType dtype,
                        Placement placement);
uint32_t double_tree_allreduce_part(Schedule& s, const Part& part, Placement placement, uint32_t step,
                                    Chains& chains);

// Pipelining: splits `count` elements into pipe.channels x pipe.chunks pieces (piece
// c * chunks + j is part c * chunks + j of block_of), calls build(piece, index, delay) for each,
// with delay = j, the step at which the piece starts; then orders each rank's new ops by
// (step, piece), keeping each piece's own order, so a rank's program lists chunk j of a
// channel j steps behind chunk 0 and the channels side by side. Each piece must use its own
// chains and scratch buffers, and its ops' steps must not decrease along a rank's program
// (ScheduleError otherwise). Sends and their receives carry the same step, so messages
// between a pair of ranks still match in order. Steps are then renumbered so that each chunk's
// step is a group of its own in lockstep (sched::plan_lockstep): chunk j's base step k becomes
// k x chunks + j (a piece whose op has a step below its delay is a ScheduleError). The sends
// and receives of channel c's pieces get lane c (Op::lane); a builder that puts some of a piece's messages on lane L > 0 (a
// second connection between the same ranks) gets lane c + L x channels for them. Returns, per rank, the index of the last op
// of each piece that has ops on it (what an op after all pieces depends on).
// `ranges`: the pieces' element ranges, in place of block_of's (merged channels).
std::vector<std::vector<uint32_t>> pipelined(
    Schedule& s, uint64_t count, const Pipelining& pipe,
    const std::function<void(const Block& piece, uint32_t index, uint32_t delay)>& build,
    const std::vector<Block>* ranges = nullptr);
void check_pipelining(const char* what, const Pipelining& pipe);

}  // namespace compcoll::sched::detail
