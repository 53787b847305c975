// shared/schedule/algorithms.h — builders of collective schedules. Each returns a Schedule
// that validate() accepts; none runs anything.
#pragma once

#include <optional>
#include <vector>

#include "schedule/schedule.h"

namespace compcoll::sched {

// Element range [begin, end) of block b when `count` elements are split into `parts` blocks
// as evenly as possible (the first count % parts blocks get one more element).
struct Block {
  uint64_t begin, end;
  uint64_t count() const { return end - begin; }
};
Block block_of(uint64_t count, int parts, int b);
// The element range of blocks [lo, hi) (empty when hi <= lo).
Block blocks_of(uint64_t count, int parts, int lo, int hi);

// Where compression goes in a schedule (docs/SCHEDULES.md).
enum class Placement : uint8_t {
  None,          // nothing compressed
  PerHop,        // every send compressed; a receiver decompresses (and reduces) at every hop
  CompressOnce,  // gather phases: compress a block once at its owner, forward the bytes unchanged
  ZipCCL,        // allreduce: reduce-scatter per hop, then allgather compress-once
};
std::string_view placement_name(Placement p);

// An empty schedule of n ranks for a builder to fill; its algorithm reads "NAME/PLACEMENT".
Schedule make_schedule(Collective c, std::string_view algorithm, Placement placement, int n, uint64_t count,
                       DType dtype);

// Splitting a message: `channels` parts run side by side, each cut into `chunks` pieces that
// follow each other through the algorithm one step apart (pipelining). Each piece's ops form
// their own dependency chain, so an executor may run pieces concurrently.
//
// `merge` (ring and rail-ring builders, chunks 1): the channels whose rings have the same
// members are built as one ring on one lane, carrying their pieces side by side, so that its
// messages each have the size of the messages they stand for together (the pieces of a group
// are laid out next to each other, and each of its blocks is the sum of theirs). Every ring
// must carry the same number of channels. A merged schedule is a valid collective of its own;
// the simulator and the cost model run it where the channels would move in lockstep
// (policy::flow_spec).
struct Pipelining {
  uint32_t chunks = 1;
  uint32_t channels = 1;
  bool merge = false;
  bool operator==(const Pipelining&) const = default;
};

// Ring allreduce (reduce-scatter then allgather around the ring r -> r+1): 2(n-1) steps
// (+ chunks-1 with pipelining), each rank sends 2(n-1)/n of the data (before compression).
// CompressOnce compresses only the allgather phase (a reduce-scatter block changes at every hop).
Schedule ring_allreduce(int nranks, uint64_t count, DType dtype, Placement placement = Placement::None,
                        const Pipelining& pipe = {});

// Recursive halving reduce-scatter and recursive doubling allgather: log2 n steps and (n-1)/n
// of the data per rank for n a power of two; the same block layout as the ring versions (rank
// r owns / gives block r). Other group sizes use recursive_allreduce's fix-up (two more
// steps): an even rank of the first 2(n - 2^k) hands its vector (reduce-scatter) or its block
// (allgather) to the odd rank above, which stands for both and gives it its block (the whole
// output) at the end. Placements: none, per-hop; the allgather also compress-once (each
// block compressed by its owner and forwarded unchanged: one message per block, so a rank
// sends 2^k messages at doubling step k).
Schedule recursive_reduce_scatter(int nranks, uint64_t count, DType dtype, Placement placement = Placement::None);
Schedule recursive_allgather(int nranks, uint64_t count, DType dtype, Placement placement = Placement::None);

// NCCL's PAT (Parallel Aggregated Trees; NCCL 2.23+ runs it at one GPU per node): Bruck's
// allgather with its dimensions reversed. In ceil(log2 n) steps, rank r sends at distance 2^d
// (d from the highest down) the blocks it holds of ranks r + t, t a multiple of 2^(d + 1) with
// t + 2^d < n, to rank r - 2^d, and receives the same from rank r + 2^d: one block travels
// farthest first, the n/2 blocks of the last step to the neighbouring rank. Each rank sends
// each block it does not own once, (n-1)/n of the data, for any n. The reduce-scatter runs the
// same exchange backwards (d from 0 up, partial sums added as they arrive). A message carries
// at most `aggregate` blocks (0: all a step has; NCCL bounds it by its buffers, policy::
// nccl_pat_launch); more than one are packed into scratch and unpacked after. Pipelining as
// the rings' (channels side by side, chunks one step apart), and `merge` builds the channels
// as one, carrying loop j of every channel as piece j: they run the same exchange in lockstep.
// Placements: none, per-hop.
Schedule pat_allgather(int nranks, uint64_t count, DType dtype, Placement placement = Placement::None,
                       const Pipelining& pipe = {}, uint32_t aggregate = 0);
Schedule pat_reduce_scatter(int nranks, uint64_t count, DType dtype, Placement placement = Placement::None,
                            const Pipelining& pipe = {}, uint32_t aggregate = 0);
// Per piece, all ranks together: the messages a PAT allgather or reduce-scatter of n ranks
// sends, and the blocks that travel in messages of more than one (each packed by its sender and
// unpacked by its receiver).
struct PatSize {
  uint64_t messages = 0, packed_blocks = 0;
};
PatSize pat_size(int nranks, uint32_t aggregate);

// Double binary tree allreduce (NCCL's idea): each half of the data is reduced up one binary
// tree and broadcast back down it; tree 0 is heap-ordered on r, tree 1 on n-1-r, so most
// inner ranks of one tree are leaves of the other. Placements: none, per-hop, compress-once
// (the broadcast forwards the root's bytes), zipccl (reduce per hop, broadcast once).
Schedule double_tree_allreduce(int nranks, uint64_t count, DType dtype, Placement placement = Placement::None);

// NCCL's tree allreduce (nodes x gpus_per_node ranks, rank = node * g + local): channel c is
// a tree over every rank, a chain inside each node from its head, local rank c mod g (the GPU
// of rail c mod g), through c+1, c+2, ..., and across nodes a binary tree of the heads. Across
// nodes the first half of the channels uses NCCL's in-order binary tree of nodes (node 0 the
// root: a node's parent clears its lowest set bit and sets the next), the second half its
// mirror (its shift for an odd node count), as NCCL's double binary tree; one channel uses
// the first only. Each channel carries 1/channels of the data, cut into `chunks` pieces that
// follow each other: a rank receives a chunk from each child, reduces it, sends it to its
// parent, then takes the sum from its parent and forwards it to its children, so reduction
// and broadcast of different chunks overlap. Steps: 2 x the depth + chunks. Placement none
// only; compcoll's own compressed trees are double_tree_allreduce and the hierarchical tree.
Schedule nccl_tree_allreduce(int nodes, int gpus_per_node, uint64_t count, DType dtype,
                             Placement placement = Placement::None, const Pipelining& pipe = {});
// NCCL's NVLS allreduce on one node of g GPUs (NVLink SHARP): ranks 0..g-1 are the GPUs and
// rank g the node's NVSwitch (Schedule::switches). The data is cut into pipe.channels x
// pipe.chunks pieces (a channel's pieces one after the other on its lane: NCCL's loops) and
// each piece into g parts, part h for head GPU h: every GPU sends each part to the switch,
// which reduces part h and sends the sum to GPU h; GPU h stores it back to the switch, which
// multicasts it to every GPU. Each GPU sends and receives (1 + 1/g) x the data, as NCCL's
// multimem loads and stores move it. Placement none only.
Schedule nvls_allreduce(int gpus, uint64_t count, DType dtype, Placement placement = Placement::None,
                        const Pipelining& pipe = {});
// NCCL's NVLS-Tree across nodes x g GPU ranks (rank = node * g + local) and a switch rank per
// node (rank nodes x g + node): as nvls_allreduce inside each node, and between the reduction
// and the multicast head h of every node runs NCCL's tree of nodes over part h (the first half
// of the channels NCCL's tree 0, the second its tree 1: nccl_tree_parents): it adds its
// children's sums to its node's, sends that up, takes the total from its parent and passes it
// down, then stores it to its switch. Across nodes a head sends and receives part h once up and
// once down per child (its NIC: about S/g each way). Placement none only.
Schedule nvls_tree_allreduce(int nodes, int gpus_per_node, uint64_t count, DType dtype,
                             Placement placement = Placement::None, const Pipelining& pipe = {});
// NCCL's binary tree of `n` nodes (the first tree of its double binary tree, tree 0, or the
// second, tree 1): each node's parent (-1 at the root).
std::vector<int> nccl_tree_parents(int n, int tree);

// The allreduce among the ranks of equal local rank in a hierarchical allreduce.
enum class InterAlgorithm : uint8_t { Ring, Recursive, Tree, Direct };
std::string_view inter_name(InterAlgorithm a);

// Hierarchical two-level allreduce over nodes x gpus_per_node ranks (rank = node * g + local):
// ring reduce-scatter inside each node (local rank l ends with block l), allreduce of block l
// across nodes among the ranks with local rank l (ring, recursive halving/doubling, double
// binary tree or direct: `inter`), ring allgather inside each node. 2(g-1) steps plus the inter-node
// algorithm's. Placements as for ring_allreduce, applied at both levels (and as for the
// inter-node algorithm across nodes), unless `intra` gives the node level its own (ZipCCL
// compresses only what crosses the network: intra = none). Pipelining as for ring_allreduce:
// each piece runs the three phases on its own chains (not with the tree across nodes).
Schedule hierarchical_allreduce(int nodes, int gpus_per_node, uint64_t count, DType dtype,
                                Placement placement = Placement::None, InterAlgorithm inter = InterAlgorithm::Ring,
                                const Pipelining& pipe = {}, std::optional<Placement> intra = std::nullopt);

// Hierarchical reduce-scatter and allgather, the ring versions' block layout (rank r's output
// / input is block r of n = nodes·g blocks): a ring inside each node over ranges of `nodes`
// blocks (local rank l: blocks [l·nodes, (l+1)·nodes)), a ring across nodes among the ranks of
// local rank l over that range, and one exchange of a block per rank (the transpose: rank
// (k, l) holds block l·nodes + k between the levels; none when nodes or g is 1): after the two
// rings for reduce-scatter, before them for allgather. Steps: (g-1) + (nodes-1) + 1. Bytes per
// rank: (g-1)/g · S in the node, (nodes-1)/(nodes·g) · S across, plus S/n for the exchange.
// Placements: none, per-hop; allgather also compress-once, applied per level (the owner of a
// level's block compresses it once and the ring forwards the bytes; the exchange is per hop).
Schedule hierarchical_reduce_scatter(int nodes, int gpus_per_node, uint64_t count, DType dtype,
                                     Placement placement = Placement::None);
Schedule hierarchical_allgather(int nodes, int gpus_per_node, uint64_t count, DType dtype,
                                Placement placement = Placement::None);

// Ring reduce-scatter: input `count` elements per rank, rank r's output is block r
// (block_of(count, n, r)) of the sum. n-1 steps, (n-1)/n of the data per rank. Placements:
// none, per-hop. Pipelining splits every block into chunks x channels pieces (so the layout
// stays), each its own ring and chain; chunk j runs j steps behind.
Schedule ring_reduce_scatter(int nranks, uint64_t count, DType dtype, Placement placement = Placement::None,
                             const Pipelining& pipe = {});

// Ring allgather: rank r's input is block r of `count` elements; every output is all `count`.
// n-1 steps, (n-1)/n of the data per rank. Placements: none, per-hop, compress-once.
// Pipelining as for ring_reduce_scatter.
Schedule ring_allgather(int nranks, uint64_t count, DType dtype, Placement placement = Placement::None,
                        const Pipelining& pipe = {});

// Rail rings: NCCL's rings on a cluster of nodes x gpus_per_node ranks (rank = node * g +
// local, local rank l on rail l: its NIC and leaf switch). Channel c is a ring that visits
// every GPU of a node before it moves on, in local order c, c+1, ... on even nodes and c-1,
// c-2, ... on odd ones, so every hop between nodes goes from a GPU to the GPU of the same rail
// (closing a ring over an odd number of nodes is the one hop that changes rail), and channels
// c = 0..g-1 leave and enter every node on g different rails: all NICs carry traffic at once,
// where a flat ring leaves each node through one. pipe.channels rings (channel c uses rail
// ring c mod g) each take their share of the data; chunks pipeline as in the flat rings.
// Layouts, steps, bytes and placements as ring_allreduce / ring_reduce_scatter /
// ring_allgather; with one node, channels rotate the ring inside it.
// `intra` none (with a placement other than none): the hops inside a node move data as it is
// and only the hops between nodes compress (ZipCCL's "compress what crosses the network" on
// NCCL's rings): a reduce-scatter hop out of a node compresses its block and the next GPU
// decompresses it; in the allgather the first hop out of a node compresses the block (again:
// a block that entered the node was decompressed there and moved on as it is), hops between
// nodes forward the stream they received (compress-once, zipccl), and the GPU a block enters a
// node at decompresses it. Unset or equal to the placement: every hop as the placement says.
std::vector<int> rail_ring_members(int nodes, int gpus_per_node, int channel);
Schedule rail_ring_allreduce(int nodes, int gpus_per_node, uint64_t count, DType dtype,
                             Placement placement = Placement::None, const Pipelining& pipe = {},
                             std::optional<Placement> intra = std::nullopt);
Schedule rail_ring_reduce_scatter(int nodes, int gpus_per_node, uint64_t count, DType dtype,
                                  Placement placement = Placement::None, const Pipelining& pipe = {},
                                  std::optional<Placement> intra = std::nullopt);
Schedule rail_ring_allgather(int nodes, int gpus_per_node, uint64_t count, DType dtype,
                             Placement placement = Placement::None, const Pipelining& pipe = {},
                             std::optional<Placement> intra = std::nullopt);

// Recursive halving/doubling allreduce (Rabenseifner): reduce-scatter by recursive halving,
// allgather by recursive doubling, 2·log2(n) steps and 2(n-1)/n of the data per rank for n a
// power of two. Otherwise the first 2·(n - 2^k) ranks pair up: even ones hand their data to
// the odd one above before, and get the result back after (two extra steps). Placements:
// none, per-hop, compress-once (raw halving; the doubling and the fix-up forward each block's
// bytes as recursive_allgather does: n-1 messages per rank, so not for large groups), zipccl
// (per hop in both phases: one message per step).
Schedule recursive_allreduce(int nranks, uint64_t count, DType dtype, Placement placement = Placement::None);

// Direct allreduce: a reduce-scatter in which each rank sends every other rank its block at
// once (block_of(count, n, j) to rank j) and adds the n - 1 blocks it receives to its own, in
// the order r - 1, r - 2, ..., then an allgather in which it sends its summed block to every
// other rank at once. 2 steps, n - 1 messages per rank and step, 2(n-1)/n of the data per rank:
// few steps for few ranks (each step pays the network's latency once). Placements: none;
// per-hop and zipccl (the same schedule: each block crosses one hop per phase) compress both
// phases, compress-once the allgather only; a phase's compressions are one batch and its
// decompressions one (Op::batched), so a call has at most four codec launches per rank.
Schedule direct_allreduce(int nranks, uint64_t count, DType dtype, Placement placement = Placement::None);

// Broadcast from `root` of `count` elements (root's input; every rank's output).
// chain: root -> root+1 -> ..., the data split into `chunks` pipelined pieces; n-1+chunks-1
// steps. binary tree: virtual rank v = r - root forwards to 2v+1 and 2v+2. Placements: none,
// per-hop (every sender compresses), compress-once (the root compresses, others forward).
Schedule chain_broadcast(int nranks, int root, uint64_t count, DType dtype, uint32_t chunks = 1,
                         Placement placement = Placement::None);
Schedule tree_broadcast(int nranks, int root, uint64_t count, DType dtype, Placement placement = Placement::None);

// One message from rank 0 to rank 1 of a group of two, cut into `pieces` pieces that follow
// each other (piece j at step j, its own dependency chain, all on one lane): rank 0's input
// becomes rank 1's output; rank 0 has no output (a broadcast from rank 0 that keeps no copy at
// the root). The plan of compcoll-bench pipeline: a message between two buffers over one link.
// Placements: none; per-hop = compress-once (rank 0 compresses each piece, rank 1 decompresses
// it).
Schedule point_to_point(uint64_t count, DType dtype, uint32_t pieces = 1, Placement placement = Placement::None);

// All-to-all(v): counts[i][j] elements go from rank i to rank j; rank i's input is its blocks
// for j = 0..n-1 in order, rank j's output the blocks from i = 0..n-1 in order. Direct posts
// every send then every receive (one step); pairwise exchanges with r+k / r-k at step k.
// One hop, so per-hop and compress-once are the same: each block compressed at its source.
enum class AllToAllOrder : uint8_t { Direct, Pairwise };
Schedule alltoall(const std::vector<std::vector<uint64_t>>& counts, DType dtype,
                  AllToAllOrder order = AllToAllOrder::Pairwise, Placement placement = Placement::None);

// Hierarchical all-to-all(v) over nodes of gpus_per_node ranks (rank = node * g + local), same
// layouts as alltoall(): inside each node, rank (k, l) sends local rank l' one packed message
// with everything it has for ranks (*, l'); then (k, l') sends each (k', l') one message with
// the blocks from node k to it. Two steps; g-1 + nodes-1 messages per rank instead of n-1.
// Placements: none, per-hop (each packed message compressed).
Schedule hierarchical_alltoall(const std::vector<std::vector<uint64_t>>& counts, int gpus_per_node, DType dtype,
                               Placement placement = Placement::None);

// All-to-all(v) in NCCL's point-to-point rounds with PXN, round by round (compcoll's own plan,
// one round a step; NCCL's own exchange, its rounds in work batches, is nccl_alltoall), same
// layouts as alltoall(): round (nd, ld) sends rank (k, l)'s block for (k + nd, l + ld), the
// rounds in NCCL's order (node deltas outside, local deltas inside, each in NCCL's quadratic
// order, nccl_p2p_deltas). A block for another node and another local rank goes over NVLink to
// (k, l + ld), the GPU on the destination's rail, which sends it on through its own NIC: every
// message across nodes stays on one rail. Placements: none, per-hop = compress-once (each block
// compressed at its source, relayed as it is). One node or one GPU per node: no relay.
Schedule pxn_alltoall(const std::vector<std::vector<uint64_t>>& counts, int gpus_per_node, DType dtype,
                      Placement placement = Placement::None);
// All-to-all(v) as NCCL's own exchange runs it (ncclSend / ncclRecv to every peer in one group,
// placement none), same layouts as alltoall(): each rank's sends and receives in NCCL's work
// batches (nccl_p2p.h: its rounds, their channels, at most 8 works a batch), a channel's batch
// starting once its previous batch's transfers are done (a join), its channels side by side,
// its relays (PXN, as pxn_alltoall: gpus_per_node > 1 on whole nodes, node-major) forwarding
// each block once they have it, outside any batch (NCCL's proxy forwards them). Algorithm name:
// pxn with relays, pairwise without. Throws ScheduleError if `rounds` is not over the ranks of
// `counts` (with relays: node-major whole nodes of gpus_per_node).
class NcclP2pRounds;
Schedule nccl_alltoall(const std::vector<std::vector<uint64_t>>& counts, DType dtype, const NcclP2pRounds& rounds,
                       int gpus_per_node);
// The deltas 0 .. m - 1 in NCCL's quadratic order (m = 16: 0, 1, 3, 6, 10, 15, 5, 12, 4, 13, 7,
// 2, 14, 11, 9, 8).
std::vector<int> nccl_p2p_deltas(int m);

}  // namespace compcoll::sched
