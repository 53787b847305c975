// shared/policy/nccl_tuning.cpp — see nccl_tuning.h. Constants: NCCL 2.23.4
// (src/graph/tuning.cc, commit a6979c9f) for the latency, bandwidth and protocol tables and
// formulas; src/graph/search.cc (2.22.3 / 2.25.1, the sm90 parts alike) for the speed arrays
// and channel duplication; src/graph/topo.h for SM90_NVLINK_BW. docs/FIDELITY.md lists them.
#include "policy/nccl_tuning.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

namespace compcoll::policy {

using sched::Collective;

namespace {

enum Algo { kTree = 0, kRing = 1, kNvls = 2, kNvlsTree = 3, kPat = 4 };
enum Proto { kLL = 0, kLL128 = 1, kSimple = 2 };
enum Hw { kHwNvlink = 0, kHwPci = 1, kHwNet = 2 };
constexpr const char* kAlgoName[] = {"tree", "ring", "nvls", "nvls-tree", "pat"};
constexpr const char* kProtoName[] = {"ll", "ll128", "simple"};

// tuning.cc: baseLat[algo][proto] and hwLat[hw][algo][proto], in us (PAT has no row).
constexpr double kBaseLat[5][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
constexpr double kHwLat[3][5][3] = {
    {{.6, 1.25, 4.0}, {.6, 1.9, 3.4}, {0, 0, 25}, {0, 0, 25}, {0, 0, 0}},    // NVLink
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}},     // PCI
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 18}, {0, 0, 14}, {0, 0, 0}}};  // network
// Hopper rows, by 1 / 2 / more nodes. llMaxBws for several nodes is chosen by CPU vendor in
// NCCL; compcoll takes the Intel row (DGX H100 hosts are Intel Xeon).
constexpr double kLLMaxBwOneNode = 141.0;
constexpr double kLLMaxBwIntel[3] = {39.0, 39.0, 20.4};
constexpr double kPerChMaxTreeBw[3] = {38.7, 41.4, 36.0};
constexpr double kPerChMaxRingLL128Bw = 36.7;
// tuning.cc, PAT's latency: 8 us, the network's latency / 3.5 per log2 step, 2.8 us per rank.
constexpr double kPatBaseUs = 8, kPatStepDivisor = 3.5, kPatPerRankUs = 2.8;
// paths.cc (2.29.2): NCCL_P2P_PER_CHANNEL_NET_BW, GB/s a point-to-point channel carries over
// the network; NCCL_MAX_DEV_WORK_P2P_PER_BATCH (include/device.h).
constexpr int kP2pPerChannelNetBw = 14;
constexpr int kP2pPerBatch = 8;
constexpr double kPerChMaxTreeLL128Bw[3] = {36.7, 36.7, 29.0};
constexpr double kTreeCorrection[3][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
// search.cc, sm90: the per-channel speeds the search tries, highest first (GB/s).
constexpr double kSpeedIntra[] = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
constexpr double kSpeedInter[] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12};
constexpr double kSm90NvlinkBw = 20.6;  // topo.h SM90_NVLINK_BW: GB/s NCCL counts per NVLink4 link
constexpr double kNvlink4LinkBw = 25e9; // bytes/s per direction of one NVLink4 link (H100: 18 links)
constexpr int kMaxChannels = 32;        // MAXCHANNELS

// The highest speed of `speeds` at most `limit` (the lowest when none is).
template <size_t N>
double speed_at_most(const double (&speeds)[N], double limit) {
  for (double s : speeds)
    if (s <= limit + 1e-9) return s;
  return speeds[N - 1];
}

// tuning.cc's per-step latencies (us): a step across nodes (at one rank per node the tree's
// network latency, as NCCL takes it whatever the algorithm), and a ring's step inside a node,
// at least NCCL's network overhead when the call spans nodes (Simple 3 us; LL, LL128 1 us: x86
// Intel).
double inter_step_us(int a, int p, bool one_per_node) {
  return one_per_node ? kHwLat[kHwNet][kTree][p] : kHwLat[kHwNet][a][p];
}
double ring_intra_step_us(Hw hw, int p, bool multi_node) {
  const double lat = kHwLat[hw][kRing][p];
  return multi_node ? std::max(lat, p == kSimple ? 3.0 : 1.0) : lat;
}

int log2i(double x) { return x < 1 ? 0 : static_cast<int>(std::floor(std::log2(x))); }

// A plan's protocol name (kProtoName; "" is Simple) as the tables' index; `what` names the
// caller in the error for any other name.
int protocol_index(const std::string& protocol, const char* what) {
  if (protocol.empty()) return kSimple;
  for (int p = kLL; p <= kSimple; ++p)
    if (protocol == kProtoName[p]) return p;
  throw std::invalid_argument(std::string(what) + ": protocol '" + protocol + "'");
}

// search.cc: a graph found at a speed of 25 GB/s or more has its channels doubled at half the
// speed, except on sm90 when the speed is under 50 and there are more than 4 channels.
NcclGraph duplicated(NcclGraph g) {
  if (g.bw_intra >= 25 && !(g.bw_intra < 50 && g.channels > 4) && 2 * g.channels <= kMaxChannels / 2) {
    g.channels *= 2;
    g.bw_intra /= 2;
    g.bw_inter /= 2;
  }
  return g;
}

}  // namespace

std::string NcclEstimate::label() const { return algorithm + "/" + protocol; }

NcclView nccl_view(const topo::Topology& t, int nranks) {
  NcclView v;
  v.nranks = std::max(1, nranks);
  v.nodes = t.nodes_spanned(v.nranks);
  v.ppn = v.nranks % v.nodes == 0 ? v.nranks / v.nodes : 1;
  v.nvlink = t.intra_fabric == "nvswitch";
  v.nvls = v.nvlink && t.nvls;
  v.nvlink_bw = v.nvlink ? t.gpu_link.bandwidth / kNvlink4LinkBw * kSm90NvlinkBw : t.gpu_link.bandwidth / 1e9;
  v.nic_bw = t.network_link.bandwidth / 1e9;
  v.nics_per_node = std::max(1, v.ppn * t.nics_per_gpu);

  // Rings (and trees, which take the ring graph's channels): inside a node every channel
  // passes every GPU, so channels x speed fit in a GPU's NVLink bandwidth; across nodes one
  // channel per NIC at the highest network speed the NIC carries.
  NcclGraph g;
  if (v.nodes == 1) {
    g.bw_intra = g.bw_inter = speed_at_most(kSpeedIntra, v.nvlink_bw);
    g.channels = std::clamp(static_cast<int>(std::floor(v.nvlink_bw / g.bw_intra + 1e-9)), 1, kMaxChannels / 2);
  } else {
    g.bw_intra = g.bw_inter = speed_at_most(kSpeedInter, v.nic_bw);
    g.channels = std::clamp(v.nics_per_node, 1, kMaxChannels / 2);
  }
  v.ring = v.tree = duplicated(g);
  v.ring_channels = std::min(kMaxChannels, 2 * v.ring.channels);
  // NVLS: one channel per GPU of the node (search.cc forces min = max = ngpus); the head GPU's
  // link carries (ppn + 1) x the speed; across nodes the network speed of a NIC.
  if (v.nvls && v.ppn > 2) {
    v.nvls_graph.channels = std::min(v.ppn, 16);
    double s = kSpeedIntra[std::size(kSpeedIntra) - 1];
    for (double x : kSpeedIntra)
      if ((v.ppn + 1) * x <= v.nvlink_bw + 1e-9) { s = x; break; }
    v.nvls_graph.bw_intra = s;
    v.nvls_graph.bw_inter = v.nodes > 1 ? speed_at_most(kSpeedInter, v.nic_bw) : kSpeedIntra[0];
  }
  return v;
}

std::vector<NcclEstimate> nccl_estimates(const CallInfo& call, const NcclView& v) {
  std::vector<NcclEstimate> out;
  const Collective c = call.collective;
  const int n = v.nranks, nodes = v.nodes, ppn = v.ppn;
  if (n <= 1) return out;
  const bool ar = c == Collective::AllReduce, gather = c == Collective::AllGather || c == Collective::ReduceScatter;
  const int nsteps = ar ? 2 * (n - 1) : gather ? n - 1 : n;
  const int node_index = nodes <= 2 ? nodes - 1 : 2;
  const double ll_max = nodes == 1 ? kLLMaxBwOneNode : kLLMaxBwIntel[node_index];
  const Hw intra_hw = v.nvlink ? kHwNvlink : kHwPci;
  for (int a = kTree; a <= kPat; ++a) {
    for (int p = kLL; p <= kSimple; ++p) {
      NcclEstimate e;
      e.algorithm = kAlgoName[a];
      e.protocol = kProtoName[p];
      // What NCCL enables (enqueue.cc, init.cc): trees and NVLS for allreduce, NVLS inside one
      // node, NVLS-Tree across nodes, PAT at one GPU per node; NVLS, NVLS-Tree and PAT Simple only.
      bool on = false;
      switch (a) {
        case kTree: on = ar; break;
        case kRing: on = ar || gather || c == Collective::Broadcast; break;
        case kNvls: on = (ar || gather) && nodes == 1 && v.nvls && ppn > 2; break;
        case kNvlsTree: on = ar && nodes > 1 && v.nvls && ppn > 2; break;
        case kPat: on = gather && nodes > 1 && ppn == 1; break;
      }
      if ((a == kNvls || a == kNvlsTree || a == kPat) && p != kSimple) on = false;
      if (!on) {
        out.push_back(e);
        continue;
      }
      const NcclGraph& g = a == kRing ? v.ring : (a == kNvls || a == kNvlsTree) ? v.nvls_graph : v.tree;
      double bw = nodes <= 2 ? g.bw_intra : g.bw_inter;
      if (a == kNvls) bw = std::min(g.bw_intra, g.bw_inter);
      if (a == kNvlsTree) bw = std::min(g.bw_intra, nodes <= 2 ? g.bw_inter : g.bw_inter / 2);
      double bus = g.channels * bw;
      if (a == kRing && p == kLL) bus = std::min(ll_max, bus * .5);
      if (a == kRing && p == kLL128) bus = std::min(bus * .92, g.channels * kPerChMaxRingLL128Bw);
      if (a == kTree && ar) bus = std::min(bus * .92, g.channels * kPerChMaxTreeBw[node_index]);
      if (a == kTree && p == kLL) bus = std::min(bus / 3.8, ll_max);
      if (a == kTree && p == kLL128)
        bus = std::min(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), g.channels * kPerChMaxTreeLL128Bw[node_index]);
      if (a == kPat) bus *= .85;
      e.bus_bw = bus;
      double alg = bus;
      if (!(a != kRing && gather)) {
        if (a == kRing) alg *= static_cast<double>(n) / nsteps;
        else if (a == kNvls || a == kNvlsTree) alg *= 5.0 / 6.0;
        else alg *= .5;
      }
      // Latency (us).
      double lat = kBaseLat[a][p];
      const double intra_lat = kHwLat[intra_hw][a][p];
      const double inter_lat = inter_step_us(a, p, ppn == 1);
      if (a == kRing) {
        if (c == Collective::Broadcast) {
          const Hw hw = nodes == 1 ? intra_hw : kHwNet;
          lat += nsteps * (p == kSimple ? kHwLat[hw][kTree][p] : kHwLat[hw][kRing][p]);
        } else {
          const int inter_steps = nodes == 1 ? 0 : ar ? 2 * (nodes - 1) : nodes - 1;
          lat += (nsteps - inter_steps) * ring_intra_step_us(intra_hw, p, nodes > 1) + inter_steps * inter_lat;
        }
      } else if (a == kTree) {
        lat += 2 * ((ppn - 1) * intra_lat + log2i(nodes) * inter_lat);
      } else if (a == kNvls) {
        lat = intra_lat + (nodes > 1 ? inter_lat : 0);
      } else if (a == kNvlsTree) {
        lat += intra_lat + 2 * log2i(nodes) * inter_lat;
      } else if (a == kPat) {
        lat = kPatBaseUs + log2i(nodes) * (inter_lat / kPatStepDivisor) + n * kPatPerRankUs;
      }
      e.channels = (a == kNvls || a == kNvlsTree) ? v.nvls_channels : v.ring_channels;
      // The time (enqueue.cc topoGetAlgoInfo): the tree correction for medium sizes and the
      // ring plateau across nodes.
      const double bytes = static_cast<double>(call.bytes);
      const int log_size = log2i(bytes / 64);
      if (a == kTree && ar && bytes >= 64 && log_size < 23) alg *= kTreeCorrection[p][log_size];
      if (a == kRing && p == kSimple && nodes > 1 && ar && bytes / (e.channels * n) >= 64) lat *= 1.4;
      e.alg_bw = alg;
      e.latency_us = lat;
      e.time_s = alg > 0 ? (lat + bytes / (1000.0 * alg)) * 1e-6 : -1;
      out.push_back(e);
    }
  }
  return out;
}

NcclStepCost nccl_step_cost(bool nvlink, bool tree, const std::string& protocol, bool multi_node, bool one_per_node) {
  const int p = protocol_index(protocol, "nccl_step_cost");
  const int a = tree ? kTree : kRing;
  NcclStepCost c;
  c.base_us = kBaseLat[a][p];
  const Hw hw = nvlink ? kHwNvlink : kHwPci;
  c.intra_us = tree ? kHwLat[hw][kTree][p] : ring_intra_step_us(hw, p, multi_node);
  c.inter_us = inter_step_us(a, p, one_per_node);
  c.wire_factor = p == kLL ? 2.0 : p == kLL128 ? 1.0 / .92 : 1.0;
  return c;
}

NcclTreeLaunch nccl_nvls_launch(uint64_t bytes, const NcclView& v) {
  NcclTreeLaunch l;
  l.channels = std::max(1, v.nvls_channels);
  const uint64_t heads = static_cast<uint64_t>(std::max(1, v.ppn));
  const uint64_t ops = static_cast<uint64_t>(l.channels) * heads;  // concurrentOps: channels x heads
  uint64_t chunk = 128 * 1024;                                     // nvlsChunkSize
  if (v.nodes == 1) {  // NVLS
    if (bytes < 64 * ops * chunk) chunk = 65536;
    if (bytes < 8 * ops * chunk) chunk = 32768;
    if (bytes < 2 * ops * chunk) chunk = 16384;
  } else {  // NVLS-Tree (NCCL_NVLSTREE_MAX_CHUNKSIZE unset: 64 KiB from 4 nodes)
    if (v.nodes >= 4) chunk = 65536;
    if (bytes < 4 * ops * chunk && chunk > 65536) chunk = 65536;
    if (bytes < ops * chunk && chunk > 32768) chunk = 32768;
  }
  l.chunk_bytes = chunk;
  l.chunks = std::max<uint64_t>(1, (bytes + ops * chunk - 1) / (ops * chunk));
  return l;
}

NcclStepCost nccl_nvls_cost(int nodes, bool tree) {
  NcclStepCost c;
  c.base_us = tree ? kHwLat[kHwNvlink][kNvlsTree][kSimple] + 2 * log2i(nodes) * kHwLat[kHwNet][kNvlsTree][kSimple]
                   : kHwLat[kHwNvlink][kNvls][kSimple] + (nodes > 1 ? kHwLat[kHwNet][kNvls][kSimple] : 0);
  return c;
}

NcclPatLaunch nccl_pat_launch(sched::Collective c, uint64_t bytes, const NcclView& v) {
  constexpr uint64_t kMinTraffic = 16 << 10;  // enqueue.cc MinTrafficPerChannel
  constexpr uint64_t kStep = (uint64_t{1} << 22) / 8;  // DEFAULT_BUFFSIZE / NCCL_STEPS
  NcclPatLaunch l;
  const uint64_t n = static_cast<uint64_t>(std::max(1, v.nranks));
  l.channels = static_cast<int>(std::clamp<uint64_t>(bytes / kMinTraffic, 1, static_cast<uint64_t>(std::max(1, v.ring_channels))));
  const uint64_t nc = static_cast<uint64_t>(l.channels);
  const uint64_t per_channel = (bytes + nc - 1) / nc;  // calcCollChunking's bytes, one channel at a time
  const uint64_t cover = c == Collective::ReduceScatter ? 16 : 32;
  l.chunk_bytes = kStep;
  while (l.chunk_bytes * cover > per_channel && l.chunk_bytes > 65536) l.chunk_bytes /= 2;
  l.channel_bytes = std::max<uint64_t>(1, (per_channel + n - 1) / n);
  l.chunks = std::max<uint64_t>(1, (l.channel_bytes + l.chunk_bytes - 1) / l.chunk_bytes);
  while (l.chunk_bytes / (l.channel_bytes * l.aggregate) >= 2 && l.aggregate < n / 2) l.aggregate *= 2;
  return l;
}

NcclStepCost nccl_pat_cost(int nranks) {
  NcclStepCost c;
  c.base_us = kPatBaseUs + kPatPerRankUs * nranks;
  c.inter_us = inter_step_us(kPat, kSimple, true) / kPatStepDivisor;
  return c;
}

int nccl_launch_channels(const std::string& algorithm, const std::string& protocol, uint64_t bytes,
                         const NcclView& v, int channels) {
  const bool ring = algorithm == "ring";
  if (!ring && algorithm != "tree") throw std::invalid_argument("nccl_launch_channels: algorithm '" + algorithm + "'");
  const int p = protocol_index(protocol, "nccl_launch_channels");
  uint64_t threads = 512, threshold = 64;  // Simple (NCCL_SIMPLE_MAX_NTHREADS, NCCL_SIMPLE_THREAD_THRESHOLD)
  if (p == kLL) {
    threads = 512, threshold = 8;  // NCCL_LL_MAX_NTHREADS, NCCL_LL_THREAD_THRESHOLD
    if (ring) threshold *= static_cast<uint64_t>(v.nranks);
  } else if (p == kLL128) {
    threads = 640, threshold = 8;  // NCCL_LL128_MAX_NTHREADS, NCCL_LL128_THREAD_THRESHOLD
  } else if (ring && v.ring.bw_intra * v.ring.channels <= 12.0) {
    threads = 256;  // tuning.cc: simpleDefaultThreads where the ring's graph is within PCI_BW
  }
  int nc = std::max(1, channels);
  while (nc >= 2 && bytes < static_cast<uint64_t>(nc) * threads * threshold) --nc;
  return nc;
}

NcclTreeLaunch nccl_tree_launch(uint64_t bytes, const NcclView& v, int channels, const std::string& protocol) {
  constexpr uint64_t kSteps = 8;                                             // NCCL_STEPS
  constexpr uint64_t kLLBuff = 8 * 512 * kSteps * 16;                        // DEFAULT_LL_BUFFSIZE
  constexpr uint64_t kLL128Buff = 120 * 640 * kSteps * 8;                    // DEFAULT_LL128_BUFFSIZE
  constexpr uint64_t kSimpleBuff = uint64_t{1} << 22;                        // DEFAULT_BUFFSIZE
  const int p = protocol_index(protocol, "nccl_tree_launch");
  uint64_t chunk = kSimpleBuff / kSteps;                                     // Simple
  if (p == kLL) chunk = kLLBuff / kSteps / 2;
  else if (p == kLL128) chunk = kLL128Buff / kSteps / 16 * 15;
  NcclTreeLaunch l;
  l.channels = nccl_launch_channels("tree", protocol, bytes, v, channels);
  const uint64_t nc = static_cast<uint64_t>(l.channels);
  if (p == kLL128) {
    const double ppn = static_cast<double>(v.nranks) / v.nodes;
    const double steps = 1 + log2i(v.nodes) + 0.1 * ppn;
    while (static_cast<double>(bytes / (nc * chunk)) < steps * 64 / ppn && chunk > 131072) chunk /= 2;
    while (static_cast<double>(bytes / (nc * chunk)) < steps * 16 / ppn && chunk > 32768) chunk /= 2;
  }
  l.chunk_bytes = chunk;
  l.chunks = std::max<uint64_t>(1, (bytes + nc * chunk - 1) / (nc * chunk));
  return l;
}

NcclEstimate nccl_fastest(const std::vector<NcclEstimate>& estimates, const std::string& algorithm) {
  NcclEstimate best;
  for (const NcclEstimate& e : estimates)
    if (e.time_s >= 0 && (algorithm.empty() || e.algorithm == algorithm) && (best.time_s < 0 || e.time_s < best.time_s))
      best = e;
  return best;
}

NcclEstimate nccl_pick(const CallInfo& call, const NcclView& v) { return nccl_fastest(nccl_estimates(call, v)); }

int nccl_p2p_net_channels(const NcclView& v, int configured) {
  auto pow2_up = [](int x) { return static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(x, 1)))); };
  const int nics = std::max(1, v.nics_per_node / std::max(1, v.ppn));
  const int net_bw = static_cast<int>(v.nic_bw * nics);  // NCCL's (int)netBw, GB/s
  const int by_bw = (net_bw + kP2pPerChannelNetBw - 1) / kP2pPerChannelNetBw;
  if (configured == kP2pFillNic) configured = std::max(nics, by_bw);
  int per_peer = pow2_up(configured > 0 ? configured : std::max(nics, by_bw));
  const int p2p_channels = pow2_up(std::min(v.ring_channels, kMaxChannels));
  if (v.nodes > 1 && configured == kP2pNcclDefault) {
    const int rounds = (v.nranks + kP2pPerBatch - 1) / kP2pPerBatch;
    while (per_peer * rounds > p2p_channels && per_peer > 1) per_peer /= 2;
  } else {
    per_peer = std::min(per_peer, p2p_channels);
  }
  return per_peer;
}

double nccl_p2p_net_peer_rate(const NcclView& v, int configured) {
  return nccl_p2p_net_channels(v, configured) * (kP2pPerChannelNetBw * 1e9);
}

NcclP2pSetup nccl_p2p_setup(const NcclView& v, int setting, int env_channels, const std::string& config_unavailable) {
  NcclP2pSetup s;
  if (env_channels > 0) {
    s.priced = env_channels;
    s.channels = nccl_p2p_net_channels(v, env_channels);
    s.line = "NCCL_NCHANNELS_PER_NET_PEER=" + std::to_string(env_channels) + " on every communicator: " +
             std::to_string(s.channels) + " per peer on another node";
    return s;
  }
  const bool unavailable = setting != kP2pNcclDefault && !config_unavailable.empty();
  s.priced = unavailable ? kP2pNcclDefault : setting;
  s.channels = nccl_p2p_net_channels(v, s.priced);
  if (s.priced != kP2pNcclDefault) s.configure = s.channels;
  s.line = std::to_string(s.channels) + " per peer on another node for compcoll's plans (" +
           (s.configure ? "ncclConfig_t::nChannelsPerNetPeer" : "NCCL's own count") +
           (unavailable ? ": " + config_unavailable : "") + ")" +
           (s.configure ? "; NCCL's own collectives on a communicator of NCCL's defaults" : "");
  return s;
}

int nccl_p2p_channels(const NcclView& v) {
  return static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::clamp(v.ring_channels, 1, kMaxChannels))));
}

}  // namespace compcoll::policy
