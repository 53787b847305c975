// shared/policy/nccl_tuning.h — NCCL's own tuning model: how NCCL 2.23 predicts the time of a
// collective for each algorithm and protocol and picks the fastest (src/graph/tuning.cc), on
// the topology as NCCL's graph search would see it (src/graph/search.cc, sm90 speeds). The
// nccl-like policy asks it what NCCL would run; compcoll-sim prints its time beside the
// simulated one. Every constant and formula is NCCL's; docs/FIDELITY.md cites each one, with
// the NCCL version it comes from. Nothing here simulates anything.
#pragma once

#include <string>
#include <vector>

#include "policy/policy.h"
#include "topology/topology.h"

namespace compcoll::policy {

// What NCCL's topology search finds for a group of ranks: nodes, GPUs per node, and each
// graph's channels and per-channel bandwidth (GB/s) from the sm90 speed arrays.
struct NcclGraph {
  int channels = 0;          // search channels (what the tuning model multiplies by)
  double bw_intra = 0, bw_inter = 0;
};
struct NcclView {
  int nranks = 1, nodes = 1, ppn = 1;  // ranks per node (1 for a group strided across nodes)
  bool nvlink = true;        // GPUs of a node on NVSwitch (NCCL's LINK_NVL), else PCIe
  bool nvls = false;         // NVLink SHARP: NVSwitch multicast and in-switch reduction
  double nvlink_bw = 0;      // GB/s per GPU into the fabric as NCCL counts it (sm90: 20.6 per NVLink)
  double nic_bw = 0;         // GB/s per NIC port (line rate)
  int nics_per_node = 1;
  NcclGraph ring, tree, nvls_graph;
  int ring_channels = 1;     // execution channels of rings and trees (2 x the search's)
  int nvls_channels = 16;    // execution channels of NVLS (NCCL_NVLS_NCHANNELS default)
};
NcclView nccl_view(const topo::Topology& t, int nranks);

// One (algorithm, protocol) of NCCL's model for a call. algorithm: ring, tree, nvls,
// nvls-tree, pat; protocol: ll, ll128, simple. time_s < 0: NCCL would not use it.
struct NcclEstimate {
  std::string algorithm, protocol;
  double bus_bw = 0;         // GB/s, NCCL's busBw after its refinements
  double alg_bw = 0;         // GB/s, what its time uses
  double latency_us = 0;
  double time_s = -1;
  int channels = 0;          // execution channels NCCL would launch
  std::string label() const; // "ring/simple" ...
};

// Every algorithm and protocol NCCL's model rates for the call (those NCCL does not enable
// for it carry time_s < 0), and the one it picks (the smallest time).
std::vector<NcclEstimate> nccl_estimates(const CallInfo& call, const NcclView& v);
NcclEstimate nccl_pick(const CallInfo& call, const NcclView& v);
// The fastest enabled estimate of `estimates` (of `algorithm` only, when given); time_s < 0
// when there is none.
NcclEstimate nccl_fastest(const std::vector<NcclEstimate>& estimates, const std::string& algorithm = "");

// The channels NCCL 2.23 launches a ring or tree collective of `bytes` on (enqueue.cc,
// topoGetAlgoInfo): from `channels`, one fewer while bytes < channels x threads x the
// protocol's thread threshold — LL 512 x 8 (a ring's x the ranks), LL128 640 x 8, Simple
// 512 x 64 (a ring's 256 threads where its channels carry no more than PCI's 12 GB/s). bytes:
// nccl-tests' size (allgather and reduce-scatter: the whole buffer, as NCCL counts it).
int nccl_launch_channels(const std::string& algorithm, const std::string& protocol, uint64_t bytes,
                         const NcclView& v, int channels);

// How NCCL 2.23 launches its tree allreduce of `bytes` (enqueue.cc): the channels it keeps
// (nccl_launch_channels), and the chunk each
// channel moves per step (calcCollChunking: a step of the protocol's buffer, 4 MiB / 8 Simple,
// 64 KiB / 8 halved for LL's flags, 4.69 MB / 8 with 15 of 16 words LL128; LL128 halves it
// down to 128 KiB while a channel would move fewer than (1 + log2 nodes + ppn / 10) x 64 / ppn
// chunks, then to 32 KiB below x 16 / ppn). chunks: a channel's share in chunks, at least 1.
struct NcclTreeLaunch {
  int channels = 1;
  uint64_t chunk_bytes = 0;
  uint64_t chunks = 1;
};
NcclTreeLaunch nccl_tree_launch(uint64_t bytes, const NcclView& v, int channels, const std::string& protocol);

// How NCCL launches NVLS on one node, or NVLS-Tree across nodes (enqueue.cc, NCCL 2.23.4):
// NcclView::nvls_channels channels; a channel's loop gives each of the node's GPUs (its heads)
// one chunk of 128 KiB (NCCL_NVLS_CHUNKSIZE). NVLS cuts it to 64, 32 and 16 KiB while the call
// is under 64, 8 and 2 loops of every channel; NVLS-Tree takes 64 KiB from 4 nodes, and cuts it
// to 64 and 32 KiB under 4 loops and 1. chunks: the loops per channel, at least 1.
NcclTreeLaunch nccl_nvls_launch(uint64_t bytes, const NcclView& v);

// How NCCL 2.23.4 launches PAT, its allgather and reduce-scatter at one GPU per node (enqueue.cc,
// device/all_gather.h, include/collectives.h): every channel NCCL has (PAT is not thinned by
// the thread rule), fewer where the call would give a channel under 16 KiB; a channel moves
// its share of every rank's block (channel_bytes) in chunks of a Simple step, 512 KiB, halved
// down to 64 KiB while 32 chunks (16 for reduce-scatter) would cover the channel's share of the
// whole buffer; chunks: a channel's loops over its share. A message carries at most
// `aggregate` blocks (PAT's postFreq): doubled while a chunk holds twice the channel's share
// of a block that many times, up to half the ranks. bytes: the whole buffer (nccl-tests' size).
struct NcclPatLaunch {
  int channels = 1;
  uint64_t chunk_bytes = 0, channel_bytes = 0;
  uint64_t chunks = 1;
  uint32_t aggregate = 1;
};
NcclPatLaunch nccl_pat_launch(sched::Collective c, uint64_t bytes, const NcclView& v);

// What one step of NCCL's ring (tree: of its tree) costs beyond moving its bytes, as NCCL's
// model charges it (tuning.cc): the per-step latency of a step inside a node (over NVLink, or
// PCI) and of one across nodes, for protocol ll, ll128 or simple ("" is simple); a ring's step
// inside a node of a call that spans nodes at least NCCL's network overhead (3 us Simple, 1 us
// LL / LL128);
// across nodes at one rank per node the tree's network latency, as NCCL takes it. And the bytes
// the protocol puts on the wire per byte of data: LL 2 (4 flag bytes per 8), LL128 1 / 0.92,
// Simple 1 (NCCL's bandwidth factors 0.5 and 0.92). And the call's base latency (baseLat).
struct NcclStepCost {
  double base_us = 0, intra_us = 0, inter_us = 0, wire_factor = 1;
};
NcclStepCost nccl_step_cost(bool nvlink, bool tree, const std::string& protocol, bool multi_node, bool one_per_node);
// NVLS and NVLS-Tree (`tree`; Simple): NCCL's model charges their latency once per call
// (tuning.cc: the NVLink latency of NVLS, plus the network's across nodes; NVLS-Tree's NVLink
// latency plus 2 log2(nodes) network latencies) and nothing per step.
NcclStepCost nccl_nvls_cost(int nodes, bool tree);
// NCCL's point-to-point across nodes (ncclSend / ncclRecv: compcoll's own plans, and NCCL's
// all-to-all): the channels a pair of ranks on different nodes moves its data on, and the
// rate those carry, as NCCL 2.29.2 sets them (src/graph/paths.cc, ncclTopoGetNchannels and
// ncclTopoComputeP2pChannels). A remote peer gets at least one channel per NIC and enough
// channels of NCCL_P2P_PER_CHANNEL_NET_BW (14 GB/s, NCCL's figure of what one channel carries)
// to fill the GPU's NIC (divUp(NIC GB/s, 14)), or `configured` (NCCL_NCHANNELS_PER_NET_PEER,
// > 0); rounded up to a power of 2. The comm's point-to-point channels are its collective
// channels (NcclView::ring_channels) rounded up to a power of 2; with more than one node and
// no configured count, the per-peer count is halved while it x divUp(ranks, 8) (NCCL_MAX_DEV_
// WORK_P2P_PER_BATCH) exceeds them; with a configured count, it is at most them.
// `configured` kP2pFillNic (cost_model.h): the count that fills the GPU's NICs (max(NICs,
// divUp(NIC GB/s, 14))) set as the comm's count, so never halved: what compcoll-run configures
// for its plans by default.
int nccl_p2p_net_channels(const NcclView& v, int configured = kP2pNcclDefault);
// What a pair of ranks on different nodes moves at most, bytes/s: those channels x 14 GB/s.
double nccl_p2p_net_peer_rate(const NcclView& v, int configured = kP2pNcclDefault);
// How compcoll-run sets up the communicator of compcoll's plans across nodes for `setting`
// (NetFactors::p2p_net_channels), and what its model column then prices. `env_channels` > 0:
// NCCL_NCHANNELS_PER_NET_PEER is set, which NCCL applies to every communicator over its
// configuration; `config_unavailable` non-empty: why this NCCL takes no nChannelsPerNetPeer
// (then the plans get NCCL's own count).
struct NcclP2pSetup {
  int configure = 0;                // > 0: ncclConfig_t::nChannelsPerNetPeer of the plans' comm
  int priced = kP2pNcclDefault;     // the NetFactors::p2p_net_channels the model prices
  int channels = 0;                 // the channels per peer on another node the plans get
  std::string line;                 // what each communicator gets, for the run's header
};
NcclP2pSetup nccl_p2p_setup(const NcclView& v, int setting, int env_channels, const std::string& config_unavailable);
// The comm's point-to-point channels (NCCL 2.23.4 src/graph/paths.cc,
// ncclTopoComputeP2pChannels): its collective channels (NcclView::ring_channels) rounded up to a
// power of 2, at most 32 (sched::NcclP2pRounds).
int nccl_p2p_channels(const NcclView& v);

// PAT (Simple, one rank per node): NCCL's model charges 8 us and 2.8 us per rank once per call
// (tuning.cc, "still a linear part"), and the network's tree latency / 3.5 per step.
NcclStepCost nccl_pat_cost(int nranks);

}  // namespace compcoll::policy
