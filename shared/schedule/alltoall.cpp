// shared/schedule/alltoall.cpp — all-to-all(v): direct and pairwise exchange, hierarchical,
// and NCCL's point-to-point schedule with PXN.
#include <algorithm>

#include "schedule/algorithms.h"
#include "schedule/nccl_p2p.h"

namespace compcoll::sched {
namespace {

// A block sent to (received from) `peer`, through a new wire buffer where it is compressed: the
// sender compresses it, the receiver decompresses it. The ops chain after `*last`
// (append_after), or where `last` is null after the op before them (append_chained).
void add_op(RankProgram& p, Op op, int64_t* last) {
  if (last) append_after(p, std::move(op), *last);
  else append_chained(p, std::move(op));
}
void send_block(RankProgram& p, bool compressed, int peer, const Slice& src, uint32_t step, uint32_t lane,
                int64_t* last = nullptr) {
  if (!compressed) return add_op(p, {OpKind::Send, peer, src, {}, {}, step, lane}, last);
  const uint32_t w = p.wire_buffers++;
  add_op(p, {OpKind::Compress, -1, src, wire_slice(w), {}, step}, last);
  add_op(p, {OpKind::Send, peer, wire_slice(w), {}, {}, step, lane}, last);
}
void recv_block(RankProgram& p, bool compressed, int peer, const Slice& dst, uint32_t step, uint32_t lane,
                int64_t* last = nullptr) {
  if (!compressed) return add_op(p, {OpKind::Recv, peer, {}, dst, {}, step, lane}, last);
  const uint32_t w = p.wire_buffers++;
  add_op(p, {OpKind::Recv, peer, {}, wire_slice(w), {}, step, lane}, last);
  add_op(p, {OpKind::Decompress, -1, wire_slice(w), dst, {}, step}, last);
}

// One step of a rank's program posted as one group where the executor posts groups (NCCL's
// ncclGroupStart/End): its computations (packing copies, compressions) run in one chain
// (`work`), each message in a buffer of its own, so that no send waits for a computation that
// waits for another send of its step (sched::lockstep_problem); each send follows the
// computation of its own message, the receives follow the step's last send and one another,
// and each decompression follows its own receive. `ends`: the step's sends and receive-side
// ends (receives, or decompressions), for what must wait for all of them.
struct GroupedStep {
  GroupedStep(RankProgram& program, bool compress, uint32_t step_index, int64_t after = -1)
      : p(program), compressed(compress), step(step_index), work(after) {}

  RankProgram& p;
  bool compressed;
  uint32_t step;
  int64_t work;  // the chain's last computation (-1: none yet)
  int64_t last_send = -1, recv_chain = -1;
  std::vector<uint32_t> ends;

  void copy(const Slice& from, const Slice& to) { append_after(p, {OpKind::Copy, -1, from, to, {}, step}, work); }
  void send(int peer, Slice src) {
    if (compressed) {
      const uint32_t w = p.wire_buffers++;
      append_after(p, {OpKind::Compress, -1, src, wire_slice(w), {}, step}, work);
      src = wire_slice(w);
    }
    last_send = work;
    append_after(p, {OpKind::Send, peer, src, {}, {}, step}, last_send);
    ends.push_back(static_cast<uint32_t>(last_send));
  }
  void recv(int peer, const Slice& dst) {
    if (recv_chain < 0) recv_chain = last_send;
    if (!compressed) {
      append_after(p, {OpKind::Recv, peer, {}, dst, {}, step}, recv_chain);
      ends.push_back(static_cast<uint32_t>(recv_chain));
      return;
    }
    const uint32_t w = p.wire_buffers++;
    append_after(p, {OpKind::Recv, peer, {}, wire_slice(w), {}, step}, recv_chain);
    int64_t after = recv_chain;
    append_after(p, {OpKind::Decompress, -1, wire_slice(w), dst, {}, step}, after);
    ends.push_back(static_cast<uint32_t>(after));
  }
};

// Offsets of i's block for j in i's input (send_at[i][j]) and of the block from i in j's output
// (recv_at[i][j]): every rank's blocks in rank order, in its input and in its output.
struct BlockOffsets {
  std::vector<std::vector<uint64_t>> send_at, recv_at;
};
BlockOffsets block_offsets(const std::vector<std::vector<uint64_t>>& counts) {
  const size_t n = counts.size();
  BlockOffsets o{std::vector<std::vector<uint64_t>>(n, std::vector<uint64_t>(n)),
                 std::vector<std::vector<uint64_t>>(n, std::vector<uint64_t>(n))};
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 1; j < n; ++j) o.send_at[i][j] = o.send_at[i][j - 1] + counts[i][j - 1];
  for (size_t j = 0; j < n; ++j)
    for (size_t i = 1; i < n; ++i) o.recv_at[i][j] = o.recv_at[i - 1][j] + counts[i - 1][j];
  return o;
}

// The nodes of n ranks in whole nodes of g (rank = node x g + local); `who` names the builder
// in the error.
int whole_nodes(const char* who, int n, int g) {
  if (g < 1 || n < 1 || n % g != 0)
    throw ScheduleError(std::string(who) + ": " + std::to_string(n) + " ranks is not a multiple of gpus_per_node " +
                        std::to_string(g));
  return n / g;
}

}  // namespace

Schedule alltoall(const std::vector<std::vector<uint64_t>>& counts, DType dtype, AllToAllOrder order,
                  Placement placement) {
  const int n = static_cast<int>(counts.size());
  if (n < 1) throw ScheduleError("alltoall: group size must be >= 1");
  for (int i = 0; i < n; ++i)
    if (static_cast<int>(counts[i].size()) != n)
      throw ScheduleError("alltoall: counts row " + std::to_string(i) + " has " + std::to_string(counts[i].size()) +
                          " entries, expected " + std::to_string(n));
  if (placement == Placement::ZipCCL)
    throw ScheduleError("alltoall: placement zipccl is for allreduce; use none, per-hop or compress-once");
  Schedule s = make_schedule(Collective::AllToAll, order == AllToAllOrder::Direct ? "direct" : "pairwise", placement,
                             n, 0, dtype);
  const auto [send_at, recv_at] = block_offsets(counts);
  for (int i = 0; i < n; ++i) {
    s.ranks[i].input_count = send_at[i][n - 1] + counts[i][n - 1];
    s.ranks[i].output_count = recv_at[n - 1][i] + counts[n - 1][i];
    s.count += s.ranks[i].input_count;
  }
  const bool compressed = placement != Placement::None;  // one hop: per-hop == compress-once
  auto send = [&](int i, int j, uint32_t step) {
    send_block(s.ranks[i], compressed, j, Slice{BufKind::Input, 0, send_at[i][j], counts[i][j]}, step, 0);
  };
  auto recv = [&](int i, int j, uint32_t step) {  // j receives from i
    recv_block(s.ranks[j], compressed, i, Slice{BufKind::Output, 0, recv_at[i][j], counts[i][j]}, step, 0);
  };
  for (int r = 0; r < n; ++r) {
    append_chained(s.ranks[r], {OpKind::Copy, -1, Slice{BufKind::Input, 0, send_at[r][r], counts[r][r]},
                     Slice{BufKind::Output, 0, recv_at[r][r], counts[r][r]}, {}, 0});
    if (order == AllToAllOrder::Direct && compressed) {
      // One step, as below, posted as one group (GroupedStep): every block compressed before
      // the sends.
      GroupedStep st{s.ranks[r], true, 0, static_cast<int64_t>(s.ranks[r].ops.size()) - 1};
      for (int k = 1; k < n; ++k) {
        const int j = (r + k) % n;
        st.send(j, Slice{BufKind::Input, 0, send_at[r][j], counts[r][j]});
      }
      for (int k = 1; k < n; ++k) {
        const int i = (r - k + n) % n;
        st.recv(i, Slice{BufKind::Output, 0, recv_at[i][r], counts[i][r]});
      }
    } else if (order == AllToAllOrder::Direct) {
      // Post every send, then every receive: one step, n-1 messages in flight per rank.
      for (int k = 1; k < n; ++k) send(r, (r + k) % n, 0);
      for (int k = 1; k < n; ++k) recv((r - k + n) % n, r, 0);
    } else {
      // Step k: send to r+k, receive from r-k (one partner each way per step).
      for (int k = 1; k < n; ++k) {
        send(r, (r + k) % n, static_cast<uint32_t>(k - 1));
        recv((r - k + n) % n, r, static_cast<uint32_t>(k - 1));
      }
    }
  }
  return s;
}

Schedule hierarchical_alltoall(const std::vector<std::vector<uint64_t>>& counts, int gpus_per_node, DType dtype,
                               Placement placement) {
  const int n = static_cast<int>(counts.size()), g = gpus_per_node;
  const int nodes = whole_nodes("hierarchical_alltoall", n, g);
  if (placement == Placement::CompressOnce || placement == Placement::ZipCCL)
    throw ScheduleError("hierarchical_alltoall: placement " + std::string(placement_name(placement)) +
                        " is not built (blocks are repacked between phases); use none or per-hop");
  // The direct schedule fixes the input and output layouts; its programs are replaced.
  Schedule s = alltoall(counts, dtype, AllToAllOrder::Direct, Placement::None);
  s.algorithm = "hierarchical/" + std::string(placement_name(placement));
  const bool compressed = placement == Placement::PerHop;
  const auto rank_of = [g](int node, int local) { return node * g + local; };
  const auto [send_at, recv_at] = block_offsets(counts);
  for (int me = 0; me < n; ++me) {
    RankProgram& p = s.ranks[me];
    p.ops.clear();
    p.wire_buffers = 0;
    const int k = me / g, l = me % g;
    // Scratch 0, "gathered": after phase 1, for each source local rank sl (in order) the blocks
    // from (k, sl) to (dk, l) for each node dk (in order). Scratch 1: packing area.
    std::vector<std::vector<uint64_t>> gathered_at(g, std::vector<uint64_t>(nodes + 1));
    uint64_t total = 0;
    for (int sl = 0; sl < g; ++sl) {
      for (int dk = 0; dk < nodes; ++dk) {
        gathered_at[sl][dk] = total;
        total += counts[rank_of(k, sl)][rank_of(dk, l)];
      }
      gathered_at[sl][nodes] = total;
    }
    p.scratch_counts = {total, std::max<uint64_t>(p.input_count, total)};
    // Each phase is one step in step groups (GroupedStep), each packed message in its own part
    // of scratch 1.
    // Both phases go round the ring of peers, as the flat schedules do: this rank sends to
    // the j-th peer after it (local rank l + j, node k + j) and receives from the j-th before
    // it (l - j, k - j). Receives run one at a time, so if every rank received from peers in
    // the same order (local rank 0 first, then 1, ...), all of a node (all of a rail) would
    // pull from one rank at once: g - 1 flows sharing its link, and the phase would take
    // g(g - 1)/2 message times instead of g - 1 (tests/sim/test_cost_model.cpp).
    // Phase 1, inside the node: to each local rank dl, everything this rank has for ranks
    // (*, dl), packed node by node; its own share first, into the gathered area.
    GroupedStep phase1{p, compressed, 0};
    uint64_t packed = 0;
    for (int j = 0; j < g; ++j) {
      const int dl = (l + j) % g;
      const uint64_t at = packed;
      for (int dk = 0; dk < nodes; ++dk) {
        const int dst = rank_of(dk, dl);
        const uint64_t c = counts[me][dst];
        const Slice from{BufKind::Input, 0, send_at[me][dst], c};
        const Slice to = dl == l ? Slice{BufKind::Scratch, 0, gathered_at[l][dk], c} : Slice{BufKind::Scratch, 1, packed, c};
        if (c) phase1.copy(from, to);
        if (dl != l) packed += c;
      }
      if (dl != l) phase1.send(rank_of(k, dl), Slice{BufKind::Scratch, 1, at, packed - at});
    }
    for (int j = 1; j < g; ++j) {
      const int sl = (l - j + g) % g;
      const uint64_t from_sl = gathered_at[sl][nodes] - gathered_at[sl][0];
      phase1.recv(rank_of(k, sl), Slice{BufKind::Scratch, 0, gathered_at[sl][0], from_sl});
    }
    // Phase 2, across nodes, once every block of phase 1 is in and every send of phase 1 (which
    // reads scratch 1) is posted: to (dk, l), the blocks from (k, *) to it, packed by source
    // local rank — which is exactly their order in its output; this node's own share first.
    GroupedStep phase2{p, compressed, 1, phase1.ends.empty() ? phase1.work : append_join(p, phase1.ends, 1)};
    packed = 0;
    for (int j = 0; j < nodes; ++j) {
      const int dk = (k + j) % nodes;
      const int dst = rank_of(dk, l);
      const bool local = dk == k;
      const uint64_t at = packed;
      for (int sl = 0; sl < g; ++sl) {
        const uint64_t c = counts[rank_of(k, sl)][dst];
        const Slice from{BufKind::Scratch, 0, gathered_at[sl][dk], c};
        const Slice to = local ? Slice{BufKind::Output, 0, recv_at[rank_of(k, sl)][me], c} : Slice{BufKind::Scratch, 1, packed, c};
        if (c) phase2.copy(from, to);
        if (!local) packed += c;
      }
      if (!local) phase2.send(dst, Slice{BufKind::Scratch, 1, at, packed - at});
    }
    for (int j = 1; j < nodes; ++j) {
      const int sk = (k - j + nodes) % nodes;
      const int first = rank_of(sk, 0);
      const uint64_t c = recv_at[first + g - 1][me] + counts[first + g - 1][me] - recv_at[first][me];
      phase2.recv(rank_of(sk, l), Slice{BufKind::Output, 0, recv_at[first][me], c});
    }
  }
  return s;
}

std::vector<int> nccl_p2p_deltas(int m) {
  // NCCL's p2p schedule (init.cc): delta_{i+1} = (delta_i + i + 1) mod 2^ceil(log2 m), which
  // visits every residue of the power of two once; deltas >= m are skipped.
  std::vector<int> out;
  if (m < 1) return out;
  uint32_t pow2 = 1;
  while (pow2 < static_cast<uint32_t>(m)) pow2 <<= 1;
  uint32_t delta = 0;
  for (uint32_t round = 0; round < pow2;) {
    if (delta < static_cast<uint32_t>(m)) out.push_back(static_cast<int>(delta));
    ++round;
    delta = (delta + round) & (pow2 - 1);
  }
  return out;
}

Schedule pxn_alltoall(const std::vector<std::vector<uint64_t>>& counts, int gpus_per_node, DType dtype,
                      Placement placement) {
  const int n = static_cast<int>(counts.size()), g = gpus_per_node;
  const int nodes = whole_nodes("pxn_alltoall", n, g);
  if (placement == Placement::ZipCCL)
    throw ScheduleError("pxn_alltoall: placement zipccl is for allreduce; use none, per-hop or compress-once");
  // The direct schedule checks the counts and fixes the input and output layouts.
  Schedule s = alltoall(counts, dtype, AllToAllOrder::Direct, Placement::None);
  s.algorithm = "pxn";
  const bool compressed = placement != Placement::None;  // at the source; the relay forwards the stream
  const auto rank_of = [g](int node, int local) { return node * g + local; };
  const auto [send_at, recv_at] = block_offsets(counts);
  // NCCL's rounds: node deltas outside, local deltas inside, both in its quadratic order.
  std::vector<std::pair<int, int>> rounds;
  for (int nd : nccl_p2p_deltas(nodes))
    for (int ld : nccl_p2p_deltas(g)) rounds.emplace_back(nd, ld);
  // Lanes: a rank's direct messages (NVLink inside the node, its own NIC across) on one, the
  // relayed ones (to the relay over NVLink, and on from the relay's NIC) on another, as NCCL
  // runs point-to-point and PXN over connections of their own.
  constexpr uint32_t kDirect = 0, kRelayed = 1;
  for (int me = 0; me < n; ++me) {
    RankProgram& p = s.ranks[me];
    p.ops.clear();
    p.wire_buffers = 0;
    const int k = me / g, l = me % g;
    // Four chains: this rank's own blocks going out, the blocks it relays, the blocks it
    // receives from its own node (NVLink) and those from other nodes (the network). Each runs
    // in NCCL's round order; sends are buffered, so a rank's own blocks leave as fast as their
    // connections take them, and a relay forwards each block once it has it; the two receive
    // chains run side by side, as NCCL's point-to-point channels over NVLink and over the
    // network progress each on its own.
    int64_t out = -1, relay = -1, in_node = -1, in_net = -1;
    uint64_t relayed = 0;  // scratch 0: the blocks this rank relays, in round order
    append_after(p, {OpKind::Copy, -1, Slice{BufKind::Input, 0, send_at[me][me], counts[me][me]},
                     Slice{BufKind::Output, 0, recv_at[me][me], counts[me][me]}, {}, 0}, out);
    for (size_t r = 1; r < rounds.size(); ++r) {
      const auto [nd, ld] = rounds[r];
      // Two steps a round: the first hop, then the relayed blocks' second (a step's transfers
      // can be posted together, as a lockstep executor posts them).
      const uint32_t step = static_cast<uint32_t>(2 * (r - 1));
      const bool relay_round = nd != 0 && ld != 0;
      // Out: to (k + nd, l + ld), through (k, l + ld) when both differ.
      const int to = rank_of((k + nd) % nodes, (l + ld) % g);
      const Slice mine{BufKind::Input, 0, send_at[me][to], counts[me][to]};
      send_block(p, compressed, relay_round ? rank_of(k, (l + ld) % g) : to, mine, step, relay_round ? kRelayed : kDirect,
                 &out);
      // Relay: the block of (k, l - ld) for (k + nd, l), from NVLink to this rank's NIC.
      if (relay_round) {
        const int from = rank_of(k, (l - ld + g) % g), dst = rank_of((k + nd) % nodes, l);
        const uint64_t c = counts[from][dst];
        // A relayed stream is never decoded here: its wire slice states the elements it holds,
        // which bound its size (at least one, as 0 states nothing).
        const Slice hold = compressed ? Slice{BufKind::Wire, p.wire_buffers++, 0, std::max<uint64_t>(c, 1)}
                                      : Slice{BufKind::Scratch, 0, relayed, c};
        relayed += compressed ? 0 : c;
        append_after(p, {OpKind::Recv, from, {}, hold, {}, step, kRelayed}, relay);
        append_after(p, {OpKind::Send, dst, hold, {}, {}, step + 1, kRelayed}, relay);
      }
      // In: from (k - nd, l - ld), through (k - nd, l) when both differ.
      const int from = rank_of((k - nd + nodes) % nodes, (l - ld + g) % g);
      const Slice dst{BufKind::Output, 0, recv_at[from][me], counts[from][me]};
      recv_block(p, compressed, relay_round ? rank_of((k - nd + nodes) % nodes, l) : from, dst,
                 relay_round ? step + 1 : step, relay_round ? kRelayed : kDirect, nd == 0 ? &in_node : &in_net);
    }
    if (!compressed && nodes > 1 && g > 1) p.scratch_counts = {relayed};
  }
  return s;
}

Schedule nccl_alltoall(const std::vector<std::vector<uint64_t>>& counts, DType dtype, const NcclP2pRounds& rounds,
                       int gpus_per_node) {
  const int n = static_cast<int>(counts.size()), g = std::max(gpus_per_node, 1);
  if (rounds.ranks() != n)
    throw ScheduleError("nccl_alltoall: NCCL's rounds are over " + std::to_string(rounds.ranks()) + " ranks, the counts over " +
                        std::to_string(n));
  const bool relays = g > 1 && n > g;  // PXN
  const int nodes = relays ? whole_nodes("nccl_alltoall", n, g) : 1;
  if (relays)
    for (int r = 0; r < n; ++r)
      if (rounds.node(r) != r / g || rounds.local(r) != r % g)
        throw ScheduleError("nccl_alltoall: PXN needs ranks node-major on whole nodes of " + std::to_string(g) + "; rank " +
                            std::to_string(r) + " is NCCL's local rank " + std::to_string(rounds.local(r)) + " of node " +
                            std::to_string(rounds.node(r)));
  // The direct schedule checks the counts and fixes the input and output layouts.
  Schedule s = alltoall(counts, dtype, AllToAllOrder::Direct, Placement::None);
  s.algorithm = relays ? "pxn" : "pairwise";
  const auto [send_at, recv_at] = block_offsets(counts);
  const auto rank_of = [g](int node, int local) { return node * g + local; };
  // A block relayed through (k, l + ld) when it changes both node and local rank.
  const auto relayed = [&](int from, int to) { return relays && from / g != to / g && from % g != to % g; };
  // Lanes: a direct message on lane 0; a relayed block on a lane of its own, 1 + its round, on
  // both hops, as NCCL's PXN gives each pair of ranks its own connection through the relay.
  constexpr uint32_t kDirect = 0;
  const auto relayed_lane = [](int round) { return static_cast<uint32_t>(1 + round); };
  // A relayed block in pieces, which the relay forwards each once it has it, as NCCL's proxy
  // forwards a block step by step (NCCL_STEPS = 8 steps in flight of a network step of
  // NCCL_P2P_NET_CHUNKSIZE = 128 KiB): at most 8 pieces of at least 128 KiB (the block itself
  // where it is smaller), so that the relay's hop across nodes overlaps its hop inside the node.
  const auto pieces = [&](const Slice& block) {
    const auto k = static_cast<int>(nccl_relay_pieces(block.count * dtype_size(dtype)));
    std::vector<Slice> out;
    for (int j = 0; j < k; ++j) {
      const Block b = block_of(block.count, k, j);
      out.push_back(Slice{block.buf, block.index, block.offset + b.begin, b.count()});
    }
    return out;
  };
  // Steps: round i's first hop 2 (i - 1), a relayed block's second 2 (i - 1) + 1.
  const auto step_of = [](int round) { return static_cast<uint32_t>(2 * (round - 1)); };
  for (int me = 0; me < n; ++me) {
    RankProgram& p = s.ranks[me];
    p.ops.clear();
    p.wire_buffers = 0;
    const int k = me / g, l = me % g;
    int64_t none = -1;
    append_after(p, {OpKind::Copy, -1, Slice{BufKind::Input, 0, send_at[me][me], counts[me][me]},
                     Slice{BufKind::Output, 0, recv_at[me][me], counts[me][me]}, {}, 0}, none);
    // The kernel's transfers: a send to and a receive from every peer, each in its round.
    std::vector<std::pair<int, bool>> transfers;
    std::vector<int> round;
    for (int peer = 0; peer < n; ++peer)
      if (peer != me) {
        transfers.emplace_back(peer, true), round.push_back(rounds.send_round(me, peer));
        transfers.emplace_back(peer, false), round.push_back(rounds.recv_round(me, peer));
      }
    const std::vector<NcclP2pSlot> slots = nccl_p2p_batches(rounds, me, transfers);
    // Each round's send and receive (their transfer; -1: none).
    std::vector<int64_t> send_of(static_cast<size_t>(n), -1), recv_of(static_cast<size_t>(n), -1);
    for (uint32_t t = 0; t < transfers.size(); ++t)
      (transfers[t].second ? send_of : recv_of)[static_cast<size_t>(round[t])] = t;
    // Per channel: its open batch, that batch's transfers so far, and the join of the batch
    // before it, which the open batch's transfers wait for.
    struct Channel {
      int64_t batch = -1;
      std::vector<uint32_t> ops;
      std::vector<uint32_t> after;
    };
    std::vector<Channel> channels(static_cast<size_t>(rounds.channels()));
    auto kernel_op = [&](uint32_t t) {
      Channel& ch = channels[static_cast<size_t>(slots[t].channel)];
      if (static_cast<int64_t>(slots[t].batch) != ch.batch) {
        if (!ch.ops.empty()) ch.after = {append_join(p, ch.ops, step_of(round[t]))};
        ch.ops.clear();
        ch.batch = slots[t].batch;
      }
      const auto [peer, send] = transfers[t];
      const uint32_t step = step_of(round[t]);
      if (send) {
        const bool via = relayed(me, peer);
        const Slice block{BufKind::Input, 0, send_at[me][peer], counts[me][peer]};
        for (const Slice& piece : via ? pieces(block) : std::vector<Slice>{block}) {
          p.ops.push_back({OpKind::Send, via ? rank_of(k, peer % g) : peer, piece, {}, ch.after, step,
                           via ? relayed_lane(round[t]) : kDirect});
          ch.ops.push_back(static_cast<uint32_t>(p.ops.size() - 1));
        }
      } else {
        const bool via = relayed(peer, me);
        const Slice block{BufKind::Output, 0, recv_at[peer][me], counts[peer][me]};
        for (const Slice& piece : via ? pieces(block) : std::vector<Slice>{block}) {
          p.ops.push_back({OpKind::Recv, via ? rank_of(peer / g, l) : peer, {}, piece, ch.after, via ? step + 1 : step,
                           via ? relayed_lane(round[t]) : kDirect});
          ch.ops.push_back(static_cast<uint32_t>(p.ops.size() - 1));
        }
      }
    };
    // Round by round (so that every rank's program runs in its order, and the blocks on one
    // connection, to or from a relay, go in one order at both ends): the kernel's send; the
    // block this rank relays in this round, from (k, l - ld) for (k + nd, l), forwarded once it
    // is here, outside any batch (NCCL's proxy forwards it); the kernel's receive.
    uint64_t scratch = 0;  // scratch 0: the blocks this rank relays
    const std::vector<int> node_deltas = nccl_p2p_deltas(nodes), local_deltas = nccl_p2p_deltas(g);
    for (int i = 1; i < n; ++i) {
      if (send_of[static_cast<size_t>(i)] >= 0) kernel_op(static_cast<uint32_t>(send_of[static_cast<size_t>(i)]));
      const int nd = relays ? node_deltas[static_cast<size_t>(i / g)] : 0;
      const int ld = relays ? local_deltas[static_cast<size_t>(i % g)] : 0;
      if (nd != 0 && ld != 0) {
        const int from = rank_of(k, (l - ld + g) % g), to = rank_of((k + nd) % nodes, l);
        const uint64_t c = counts[from][to];
        for (const Slice& hold : pieces(Slice{BufKind::Scratch, 0, scratch, c})) {
          p.ops.push_back({OpKind::Recv, from, {}, hold, {}, step_of(i), relayed_lane(i)});
          p.ops.push_back({OpKind::Send, to, hold, {}, {static_cast<uint32_t>(p.ops.size() - 1)}, step_of(i) + 1,
                           relayed_lane(i)});
        }
        scratch += c;
      }
      if (recv_of[static_cast<size_t>(i)] >= 0) kernel_op(static_cast<uint32_t>(recv_of[static_cast<size_t>(i)]));
    }
    if (relays) p.scratch_counts = {scratch};
  }
  return s;
}

}  // namespace compcoll::sched
