// shared/schedule/nccl_p2p.h — how NCCL 2.23.4 runs a group of point-to-point sends and
// receives (ncclGroupStart/End): its rounds of peers (src/init.cc), the channel of a round
// (src/include/channel.h) and its work batches (src/enqueue.cc). NCCL's all-to-all is such a
// group; nccl_alltoall (algorithms.h) builds it with these batches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace compcoll::sched {

// NCCL's point-to-point rounds: ranks on nodes numbered in order of their first rank, each
// rank's local index its place among its node's ranks; in round i rank (node k, local l) sends
// to the rank at (k + nd, l + ld) and receives from (k - nd, l - ld), the node deltas nd outside
// and the local deltas ld inside, each in NCCL's quadratic order (nccl_p2p_deltas). Where the
// nodes hold different numbers of ranks NCCL takes the ranks as one node ("flat"). Round i runs
// on channel (i / L) x divUp(L, 8) + (i mod L) / 8 on several nodes, i on one (L the ranks a
// node; ncclP2pChannelBaseForRound), modulo the comm's point-to-point channels (a power of 2;
// policy::nccl_p2p_channels): the first channel of a transfer (ncclP2pChannelForPart, part 0).
class NcclP2pRounds {
 public:
  // node_of[r]: the node of rank r (any labels).
  NcclP2pRounds(const std::vector<int>& node_of, int p2p_channels);
  // `ranks` ranks node-major in nodes of `local_ranks` (the last node may hold fewer).
  static NcclP2pRounds node_major(int ranks, int local_ranks, int p2p_channels);
  int ranks() const { return static_cast<int>(node_.size()); }
  int node(int rank) const { return node_[static_cast<size_t>(rank)]; }    // as the rounds take it
  int local(int rank) const { return local_of_[static_cast<size_t>(rank)]; }
  int nodes() const { return nodes_; }
  int channels() const { return channels_; }
  int send_round(int rank, int peer) const;  // the round in which `rank` sends to `peer`
  int recv_round(int rank, int peer) const;  // the round in which `rank` receives from `peer`
  int channel(int round) const;

 private:
  int round_of(int node_delta, int local_delta) const;
  int nodes_ = 1, local_ = 1, channels_ = 1;  // the rounds' (1 and the ranks where flat)
  int real_nodes_ = 1, max_local_ = 1;          // the comm's, which its channels follow
  std::vector<int> node_, local_of_;       // per rank, as NCCL numbers them
  std::vector<int> node_pos_, local_pos_;  // a delta's place in NCCL's order
};

// How sched::nccl_alltoall relays a block across nodes (PXN): in up to kNcclRelayMaxPieces
// pieces of at least kNcclRelayPieceBytes, as NCCL's proxy forwards it in network steps
// (NCCL_P2P_NET_CHUNKSIZE, 128 KiB) with NCCL_STEPS (8) in flight.
constexpr uint64_t kNcclRelayPieceBytes = 128 * 1024;
constexpr uint64_t kNcclRelayMaxPieces = 8;
// The pieces a relayed block of `bytes` travels in (at least 1).
constexpr uint64_t nccl_relay_pieces(uint64_t bytes) {
  const uint64_t k = (bytes + kNcclRelayPieceBytes - 1) / kNcclRelayPieceBytes;
  return k < 1 ? 1 : k > kNcclRelayMaxPieces ? kNcclRelayMaxPieces : k;
}

// Where NCCL runs each transfer of one rank's group (enqueue.cc, scheduleP2pTasksToPlan and
// addWorkBatchToPlan): passes over the rounds in order, each taking the first send waiting for
// the round's send peer and the first receive waiting for its receive peer as one work; a work
// joins its channel's open batch unless that holds 8 (NCCL_MAX_DEV_WORK_P2P_PER_BATCH) or one of
// the same round. A channel's batches run one after the other, a batch's works side by side
// (device/common.h). transfers: (peer, send) in the group's order; the result gives each its
// channel and its batch's place on the channel. One kernel launch is assumed to hold the group
// (NCCL splits a group whose works overflow a launch's arguments into launches one after the
// other), and each transfer its round's first channel (NCCL spreads a large one over the
// peer's channels).
struct NcclP2pSlot {
  int channel = 0;
  uint32_t batch = 0;
};
std::vector<NcclP2pSlot> nccl_p2p_batches(const NcclP2pRounds& rounds, int rank,
                                          const std::vector<std::pair<int, bool>>& transfers);

}  // namespace compcoll::sched
