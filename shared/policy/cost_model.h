// shared/policy/cost_model.h — predicts how long a plan takes without running the simulator:
// the schedule's dependency graph is walked once in time order, each kernel taking its
// calibration duration (shared/calibration), compressed messages sized by the expected ratio,
// each message crossing the links of the route the simulator gives it (topo::sim_route). It
// follows the simulator's rules (sim/simulator.cpp): buffered sends, one message at a time from
// a rank to a peer in the order posted, a message leaves when both sides have posted it, one
// kernel at a time per GPU in the order they become ready.
//
// The network is SimGrid's flow model (CM02/LV08), evaluated directly: a message first waits
// its route's latency (x latency_factor), then its bytes flow at the rate weighted max-min
// sharing gives it among the messages flowing at that moment — each directed link a constraint
// of its bandwidth (and the reverse route's links at 5% with crosstraffic), each flow weighted
// by SimGrid's penalty (route latency + weight_s / bandwidth of each link), progressing at its
// share x bandwidth_factor — recomputed whenever a flow starts or ends. So flows that meet on a
// link, start at different instants or are held back by a bottleneck elsewhere on their route
// get the rates the simulator gives them, as does SimGrid's TCP-gamma cap on a flow's share
// (tcp_gamma / (2 x route latency)). Rates are recomputed only over the flows and links that
// the flows started or ended reach through shared links.
// A topology measured by compcoll-bench transport adds two things, as the simulator does: a
// bandwidth factor per message size (topo::LinkSpec::by_size) on each flow's progress, and
// with receive_copy a message within a node carries no bytes on its links: after its latency
// the receiver copies it, in its kernel queue (the host executor's one thread per rank; with a
// compute thread, topo::Topology::compute_thread, in a queue of its own beside the kernels), and
// the sender's send is delivered once that copy is done and an empty acknowledgement is back.
// With shared_memory (topo::Topology) a node's kernels and receive copies share the node, as
// the simulator runs them (one execution each on one host per node): each is work on the node
// (shared_work) bounded by what it can use alone, under the same weighted max-min sharing as
// the flows, so a rank's kernel ends when its work is done, not at a time known when it starts.
// tests/sim/test_cost_model.cpp: 0.9995-1.0000 of the simulated time in every case tried.
// Over the 1,080 plans of experiments/policy-validation.yaml: 1,056 within 0.5%, all within
// 0.94-1.06; the outliers, 1,024-rank hierarchical plans on contended topologies, are SimGrid's
// default approximations (lazy rate updates, 1e-9 s time precision): with network.update: full
// and network.precision: 1e-12 SimGrid gives the model's times to the last printed digit in
// every case tried (docs/compcoll-sim.md, docs/POLICIES.md).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "calibration/calibration.h"
#include "schedule/schedule.h"
#include "topology/sim_routes.h"
#include "topology/topology.h"

namespace compcoll::policy {

// The channels per network peer of an NCCL communicator (NetFactors::p2p_net_channels, as
// policy::nccl_p2p_net_channels takes them; N > 0: N channels, ncclConfig_t::nChannelsPerNetPeer).
inline constexpr int kP2pNcclDefault = 0;  // NCCL's own count
inline constexpr int kP2pFillNic = -1;     // the count that fills the GPU's NICs

// The network model's corrections the simulator applies (sim::NetworkModel), so the two agree.
struct NetFactors {
  double latency_factor = 1.0;
  double bandwidth_factor = 1.0;
  double weight_s = 0;        // SimGrid's network/weight-S (LV08 20537 bytes, CM02 0)
  bool crosstraffic = false;  // flows also load their reverse route at 5%
  double tcp_gamma = 0;       // > 0: a flow's share is capped at tcp_gamma / (2 x route latency)
  bool protocol_costs = false;  // NCCL's per-step latency and LL / LL128 wire bytes (MessageCosts)
  // With protocol_costs: the rate NCCL's point-to-point gives a pair of ranks of compcoll's plans
  // on different nodes (MessageCosts::net_peer_rate), from the channels per network peer of the
  // plans' communicator (policy::nccl_p2p_net_channels: kP2pNcclDefault NCCL's own count,
  // kP2pFillNic the count that fills the NIC, N > 0 N channels).
  int p2p_net_channels = kP2pFillNic;
};
// SimGrid's defaults of a flow model: lv08 (latency x 13.01, bandwidth x 0.97, weight-S 20537 B,
// cross-traffic, TCP-gamma 1e15 B) or cm02 (plain latency and bandwidth, TCP-gamma 1e15 B).
NetFactors flow_model_defaults(const std::string& model);

struct PlanCost {
  double time_s = 0;       // from the first op to the last one, all ranks (all iterations)
  double iteration_s = 0;  // mean over ranks of each rank's time (its last op done, its last send
                           // delivered) / iterations: compcoll-run's time column
  double codec_s = 0;      // compress + decompress time of the busiest rank, per iteration
  double kernel_s = 0;     // mean over ranks of each rank's compress, decompress, reduce and copy
                           // time per iteration (not the receive copies of topology receive_copy)
  uint64_t wire_bytes = 0; // all messages
  uint64_t messages = 0;
};

// A host kernel or receive copy on a node whose ranks share memory (topo::Topology::
// shared_memory), as work on the node: `concurrent` of them at once took `seconds` each and one
// alone `alone_seconds`. Its work is seconds / concurrent node-seconds and it can use at most
// `bound` of the node (work / alone_seconds, at most 1; alone_seconds taken as no more than
// `seconds`, since company does not speed an op up): alone it takes alone_seconds, beside
// concurrent - 1 like it `seconds`, and beside others what max-min sharing of the node leaves it.
// A kernel that could use more than its share alone (bound > 1 / concurrent) is slowed by
// company; one that uses no more than its share (a kernel bound by its core, not by memory)
// keeps its speed, but claims that share of the node all the same.
struct SharedWork {
  double work = 0;   // node-seconds
  double bound = 1;  // the most of the node it can use
};
SharedWork shared_work(double seconds, double alone_seconds, int concurrent);
// The `concurrent` of a node's kernels: the calibration's (calibrate --concurrent N), or for a
// calibration measured alone (1) the node's ranks: it says nothing of company, so the model
// charges none while no more kernels than ranks run.
int kernel_concurrency(const calib::Calibration& cal, const topo::Topology& t);
// A receive copy's: the node's ranks, all of which exchanged at once in the measured transport.
inline int copy_concurrency(const topo::Topology& t) { return t.gpus_per_node; }

// Where each rank of `s` runs: rank r < s.gpu_ranks() on GPU t.rank_to_gpu[r], a switch rank
// on its node's switch (topo::Topology::switch_of, the node of the first GPU rank it serves).
// Throws std::runtime_error naming the schedule and topology where the placement has fewer
// ranks, or a switch rank's GPUs are not all on one node of a topology with NVLink SHARP.
std::vector<int> rank_endpoints(const sched::Schedule& s, const topo::Topology& t);

// The bytes a message of `elements` elements compressed by `codec` carries: its payload at
// `ratio` (compressed / uncompressed; identity: the elements as they are) plus the stream's
// header and an offset entry per chunk (docs/FORMAT.md). compcoll's codecs code in chunks of
// `chunk_elements` (EncodeOptions::chunk_elements, format::kAutoChunk: by the message's size;
// the calibration's calib::Calibration::chunk_elements); `ratio` is the codec's in chunks of
// the default size (measured so, calib::measure_ratio), and each chunk more than that size
// gives the message adds the codec's Codec::chunk_overhead_bytes. For a library codec
// (codec/codec.h) chunks of the library's size, each at `ratio` behind its size prefix and
// padded to 16 bytes, as the container carries them.
// budget_margin: the stream is sent within a wire budget that much over its size
// (topo::Topology::wire_budget_margin: real::ExecutorOptions::wire_budget), as compcoll-run's
// executor sizes it: ceil(bytes x (1 + margin)). The simulator and the cost model size every
// compressed message with it.
uint64_t wire_message_bytes(const std::string& codec, DType dtype, uint64_t elements, double ratio,
                            double budget_margin = 0, uint32_t chunk_elements = format::kDefaultChunkElements);

// Whether compcoll-run's ranks end each run of `s` with `codec` together (real::Executor's
// agreement within wire budgets, topo::Topology::wire_budget): the schedule compresses and the
// codec's streams are not sized by their elements alone. The simulator and the cost model then
// start a call's next back-to-back iteration on every rank once all are done with the last.
bool wire_budget_agreement(const sched::Schedule& s, const topo::Topology& t, const std::string& codec);

// Whether rank `rank`'s reduce and copy ops are kernels of their own, at the calibration's
// times: not where NCCL's kernels run the call (they reduce inside the kernel that moves the
// data), not on a switch rank (the switch reduces at its ports' rate). The simulator and the
// cost model both ask.
inline bool charges_reduce_copy(const sched::Schedule& s, int rank, bool nccl_kernels) {
  return !nccl_kernels && !s.is_switch(rank);
}

// Decode and add in one kernel (topo::Topology::fused_decode: compcoll-run's run.fused_decode on
// its nccl backend), as the executor runs it: per op of rank `rank`, None, Absorbed (a
// decompression of a pair of sched::decode_add_pairs, in no time of its own) or DecodeAdd (the
// pair's reduce, priced as the fused kernel over its block: calib::Op::DecodeAdd). Empty where
// nothing fuses: fused_decode off, a codec without a decode-and-add kernel
// (codec::gpu_decode_adds), reduces that are no kernels of their own (charges_reduce_copy).
// Where a batch of decompressions runs as one call (calib::Calibration::batches) a
// decompression of a batch stays in its batch's call. The simulator and the cost model both ask.
enum class FusedOp : uint8_t { None, Absorbed, DecodeAdd };
std::vector<FusedOp> fused_ops(const sched::Schedule& s, int rank, const topo::Topology& t, const calib::Calibration& cal,
                               const std::string& codec, bool nccl_kernels);

// The most bytes of typed buffers (input, output and scratch, in the schedule's dtype) that the
// ranks placed on one node hold: the working set whose share of the node's cache sets how fast
// its messages move on a host (topo::LinkSpec::by_footprint). Compressed messages' buffers are
// not counted: they are smaller than the typed data they carry.
double node_footprint_bytes(const sched::Schedule& s, const topo::Topology& t);

// Routes between GPUs as the simulator takes them (topo::sim_route), cached per pair: the
// directed links in order and their summed latency.
struct RouteInfo {
  double latency = 0;
  uint32_t first = 0, count = 0;  // into RouteCache's link list
};

class RouteCache {
 public:
  explicit RouteCache(const topo::Topology& t) : t_(t) {}
  const RouteInfo& get(int src_gpu, int dst_gpu);
  const topo::NetLink* links(const RouteInfo& r) const { return links_.data() + r.first; }

 private:
  const topo::Topology& t_;
  std::unordered_map<uint64_t, RouteInfo> cache_;
  std::vector<topo::NetLink> links_;
};

// NCCL's protocol costs (NetFactors::protocol_costs), charged by the simulator and the cost
// model alike on GPU topologies (not on hosts over MPI, topo::Topology::receive_copy): each
// message of a call joins its connection's queue NCCL's per-step latency for its link
// (nccl_step_cost: inside a node or across nodes; NCCL's kernels with the plan's protocol and
// algorithm, ring or tree; compcoll's own plans, which move over NCCL's point-to-point, Simple
// and ring) less its route's latency (x latency_factor), which the flow model already charges,
// after it is posted, the connection not held meanwhile (so successive steps' latencies overlap,
// as NCCL's pipelined steps do); and NCCL's kernels with LL or LL128 put wire_factor bytes on
// the links per byte of data. A
// call by NCCL's kernels also starts NCCL's base latency late (once per row, not per back-to-back
// iteration). compcoll's own plans (not NCCL's kernels, no NVLS switch) run as compcoll-run's
// NCCL executor posts them, where the schedule allows it (sched::lockstep_problem empty): each
// rank's transfers of one step as one group once all are ready, after its previous group has
// completed, its receives done when the whole group is (`lockstep`).
struct MessageCosts {
  bool on = false;
  bool lockstep = false;
  std::string ungrouped;  // a plan of compcoll's that cannot run in step groups: why (lockstep_problem)
  double base_s = 0;                // NCCL's per-call base latency: every rank starts this late
  double intra_s = 0, inter_s = 0;  // the per-step latency inside a node, across nodes
  double wire_factor = 1;
  double latency_factor = 1;        // the flow model's, on the route's latency it charges
  // NCCL's point-to-point of compcoll's own plans: bytes/s at most that the messages of one
  // step group from a rank to a peer on another node share (0: no cap), as the plans'
  // communicator's channels per peer carry them (policy::nccl_p2p_net_peer_rate).
  double net_peer_rate = 0;
  // The cap on one message from src_gpu to dst_gpu, bytes/s (0: none): net_peer_rate over
  // `sharing`, the messages of its group to the same peer.
  double peer_rate(const topo::Topology& t, int src_gpu, int dst_gpu, uint32_t sharing) const {
    return net_peer_rate > 0 && t.node_of(src_gpu) != t.node_of(dst_gpu) ? net_peer_rate / std::max(1u, sharing) : 0;
  }
  // The wait before a message from src_gpu to dst_gpu joins its queue (0 when off; the route's
  // latency from `routes`, looked up only when on).
  double delay_s(const topo::Topology& t, RouteCache& routes, int src_gpu, int dst_gpu) const;
  uint64_t wire_bytes(uint64_t bytes) const;  // the bytes on the links for `bytes` of data
};
MessageCosts message_costs(const sched::Schedule& s, const topo::Topology& t, const NetFactors& net, bool nccl_kernels,
                           const std::string& protocol);
// Why compcoll's schedule `s` cannot run in step groups as compcoll-run's NCCL executor runs it
// with NCCL's protocol costs (sched::lockstep_problem: MessageCosts::ungrouped); "" where it can,
// or where nothing runs in step groups (no protocol costs, ranks on hosts, one rank, NCCL's own
// kernels, NVSwitch ranks).
std::string step_group_problem(const sched::Schedule& s, const topo::Topology& t, const NetFactors& net,
                               bool nccl_kernels);

// Ranks of `s` sit on t.rank_to_gpu. Throws std::runtime_error if the schedule cannot finish.
// iterations > 1: the call back to back that many times, as compcoll-run times it
// (sched::repeated): each rank starts its next iteration once all of its ops of the last one are
// done and its sends delivered (the message has arrived; with receive_copy, the receiver's copy
// is done and its acknowledgement is back), not waiting for the other ranks, as the simulator
// does with sim::Call::iterations. nccl_kernels: NCCL's own kernels run the call (Plan::
// nccl_kernels), so its reduce and copy ops take no time, as in the simulator. protocol: the
// plan's NCCL protocol (Plan::protocol), for its protocol costs (MessageCosts).
PlanCost predict(const sched::Schedule& s, const topo::Topology& t, const calib::Calibration& cal,
                 const std::string& codec, double ratio, const NetFactors& net, RouteCache& routes,
                 int iterations = 1, bool nccl_kernels = false, const std::string& protocol = "");

// The codec's exposed time in one call of `s`: what its compress and decompress kernels add to
// the call, the cost model's time for it less its time with every compress and decompress
// taking no time (codec work hidden behind transfers adds nothing; work on the critical path
// adds its duration); never negative, 0 for identity.
double exposed_codec_s(const sched::Schedule& s, const topo::Topology& t, const calib::Calibration& cal,
                       const std::string& codec, double ratio, const NetFactors& net, RouteCache& routes,
                       bool nccl_kernels = false, const std::string& protocol = "");

// compcoll-bench pipeline's model of a message moved over one measured link: sched::
// point_to_point of `count` elements in `pieces` pieces from one GPU to the other of a PCIe node
// (topo::single_node) whose route carries `bandwidth` bytes/s each way and takes `latency`
// seconds a message (the flow model's factors 1: the figures are the link's as measured).
// `codec` empty: the message moved as it is; otherwise each piece compressed by it into
// `stream_fraction` of its bytes (predict's `ratio`: stream bytes / uncompressed bytes) and
// decompressed at the far end, its kernels at `cal`'s times. The cost model's time for the
// message, in seconds.
double predict_link_transfer(uint64_t count, DType dtype, uint32_t pieces, const std::string& codec,
                             double stream_fraction, double bandwidth, double latency, const calib::Calibration& cal);

}  // namespace compcoll::policy
