// shared/policy/policy.h — who decides how a collective call runs. A policy maps a call
// (collective, bytes, dtype, tensor kind, group size) and what it knows of the system
// (topology, calibration, expected ratios) to a Plan: algorithm, codec, placement, chunking.
// The same code serves compcoll-sim and compcoll-run; neither executor decides anything.
//
//   static     the experiment's own plan (each call of the file, as written)
//   nccl-like  NCCL's choice as the baseline: NCCL 2.23's tuning model (nccl_tuning.h) picks
//              the algorithm, protocol and channels NCCL would run on the topology as its search
//              sees it; rings run as NCCL builds them (rail rings, its channel count, its
//              protocol); where NCCL would pick an algorithm compcoll does not simulate as NCCL
//              runs it (its pipelined tree, NVLS, NVLS-Tree, PAT), NCCL's fastest ring runs and
//              the row names both. It never compresses.
//   adaptive   ZipCCL's adaptive communication: every candidate plan (algorithms x placements
//              x codecs) priced by the cost model (cost_model.h), the cheapest wins
//   oracle     simulator only: compcoll-sim runs every candidate and keeps the fastest
//   entropy    EDGC: a lowrank gradient compressor whose rank follows the gradient entropy
//              (policy/entropy.h; stateful, fed with gradient samples by the trainer)
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "calibration/calibration.h"
#include "policy/cost_model.h"
#include "schedule/build.h"
#include "topology/topology.h"

namespace compcoll::policy {

struct CallInfo {
  sched::Collective collective = sched::Collective::AllReduce;
  uint64_t bytes = 0;   // nccl-tests "size" (docs/compcoll-sim.md)
  DType dtype = DType::BF16;
  std::string tensor = "grad";
  int nranks = 1;
};

struct Plan {
  std::string algorithm = "ring";
  std::string inter = "recursive";  // hierarchical allreduce across nodes
  sched::Placement placement = sched::Placement::None;
  std::optional<sched::Placement> intra;  // hierarchical allreduce inside nodes
  std::string codec = "identity";
  uint32_t chunks = 1;
  uint32_t channels = 1;  // rings side by side (rail-ring: channel c on rail c mod gpus per node)
  uint32_t aggregate = 0; // pat: the blocks a message carries at most (NCCL's, nccl_pat_launch); 0: a step's all
  std::string protocol;   // nccl-like: the NCCL protocol its tuning model picked (ll, ll128, simple)
  std::string nccl;       // nccl-like: what NCCL would run when compcoll simulates something else ("nvls/simple")
  // nccl-like: NCCL's own estimate of its time for what NCCL would run (`nccl` where set, else
  // this plan's algorithm and protocol); NAN where NCCL's model does not rate the call.
  double nccl_s = std::numeric_limits<double>::quiet_NaN();
  // nccl-like on GPUs: NCCL's own kernels run the call, reducing (and reading the input) inside
  // the kernels that move the data, so the simulator and the cost model charge no reduce or
  // copy kernel for it (sim::Call::nccl_kernels), as docs/FIDELITY.md models NCCL. Not on a
  // host over MPI (topo::Topology::receive_copy), and not in compcoll-run, which runs the plan
  // through its own executor and kernels.
  bool nccl_kernels = false;
  // The library's own collective (candidates(): "run it as NCCL runs it"): nccl-like's plan,
  // simulated and priced as nccl-like's (NCCL's kernels), run by compcoll-run as the backend's
  // collective (ncclAllReduce, ...; MPI's on the mpi backend) rather than by its executor.
  bool library = false;
  std::string describe() const;  // "hierarchical/recursive zipccl/none gauss-exp"; "... (nccl kernels)"
};

// A plan's row labels, as compcoll-sim and compcoll-run print them: the algorithm
// ("hierarchical/ring" for a hierarchical allreduce, "ringx2" when pipelined in 2 chunks,
// "rail-ring/simple 16ch" for nccl-like's 16 rail rings with NCCL's Simple protocol, and
// " [nccl nvls/simple]" added where NCCL would run an algorithm compcoll does not simulate;
// "nccl:rail-ring/simple 16ch" for the library's own collective, Plan::library) and
// the placement ("none" uncompressed; "zipccl/none": across nodes / inside nodes).
std::string algorithm_label(const Plan& p, sched::Collective c);
std::string placement_label(const Plan& p);

// What a policy may look at.
struct System {
  const topo::Topology* topology = nullptr;  // its placement puts the call's ranks
  const calib::Calibration* calibration = nullptr;
  NetFactors net;
  std::function<double(const std::string& codec, DType dtype, const std::string& tensor)> ratio;
  std::vector<std::string> codecs;  // the codecs a policy may use
  // The algorithms nccl-like's NCCL may pick (NCCL_ALGO: ring, tree, nvls, nvls-tree, pat);
  // empty: every one its model rates.
  std::vector<std::string> nccl_algorithms;
  // Whether the library's own collective is NCCL's, and so a candidate (Plan::library) on a
  // GPU topology. compcoll-run's mpi backend runs MPI's collectives instead, whose algorithm
  // is MPI's choice and which no model here prices: there it is false.
  bool nccl_library = true;
};

// How many of the first `nranks` ranks of the placement share a node, when they come in whole
// nodes in rank order (rank = node x g + local, what the hierarchical schedules assume); 1
// otherwise (a group strided across nodes, such as a data-parallel group of one GPU per node).
int ranks_per_node(const topo::Topology& t, int nranks);

// Whether NCCL sends the all-to-all of the first `nranks` ranks through PXN (its default,
// NCCL_P2P_PXN_LEVEL=2, src/graph/search.cc): GPU ranks in whole nodes of more than one GPU,
// more than one node, NVLink between a node's GPUs and a NIC for every GPU, so that a block
// for another node's GPU l can leave through this node's GPU l's NIC (sched::pxn_alltoall).
bool pxn_applies(const topo::Topology& t, int nranks);

// Elements of the collective for a nccl-tests size (per destination for all-to-all).
uint64_t count_for(sched::Collective c, uint64_t bytes, DType dtype, int nranks);
sched::BuildSpec build_spec(const Plan& plan, const CallInfo& call, const topo::Topology& t);

// The spec the simulator and the cost model run for a plan's spec `b`: `b` itself, or `b` with
// the channels of each ring merged into one flow (sched::Pipelining::merge) where they move in
// lockstep. They do when NCCL's kernels run the call (`nccl_kernels`: no kernel time), nothing is
// compressed, the channels are not chunked, and the channels whose rings have the same members
// (every channel of a flat ring; channels c, c + g, c + 2g, ... of a rail ring over g GPUs a
// node) start together on pieces of equal size over the same routes. In a max-min flow model
// (SimGrid's and the cost model's) k such flows get together, on every link, what one flow of k
// times their size gets, provided every flow of the call is in a group of the same k (the
// channel count a multiple of the distinct rings), no window caps a flow (NetFactors::tcp_gamma
// over the topology's fastest link at its shortest latency) and no size factor applies
// (topo::LinkSpec::by_size); otherwise `b` is returned. The merged schedule's messages have the
// sizes of the messages they stand for together, so the merge is exact where the count is a
// multiple of channels x ranks; otherwise the pieces of a group differ by an element and its
// flows part by that much (tests/sim/test_merged_channels.cpp). An all-to-all that NCCL's
// kernels run (nccl-like's pairwise or pxn, uncompressed, on GPUs) is NCCL's own exchange: `b`
// with NCCL's point-to-point channels and its ranks' nodes (BuildSpec::nccl_p2p_channels), so
// that its sends and receives go in NCCL's work batches (sched::nccl_alltoall), over at most
// kMaxBatchedExchange ranks. Above, its peers side by side (up to 128 a rank on 16 channels)
// make every flow's completion re-solve the sharing of nearly all of them, in SimGrid and in the
// cost model (1,024 ranks: 2 million messages, over 5 minutes for one 4 KB call where round by
// round takes 9 s), so `b` runs as built: NCCL's rounds one after the other.
constexpr int kMaxBatchedExchange = 256;
sched::BuildSpec flow_spec(const sched::BuildSpec& b, bool nccl_kernels, const topo::Topology& t, const NetFactors& net);

// The size of a plan's schedule, estimated without building it (what limits the candidates),
// with a nccl-like plan's channels merged as flow_spec merges them:
// its messages (exact for the schedules of a power-of-two group, give or take the hierarchical
// transposes), its ops (2 to 5 per message, plus the copies), and whether the messages grow as n^2 —
// flat rings and pairwise exchanges, and rings and pairwise exchanges across nodes, which
// grow as n x nodes.
struct PlanSize {
  uint64_t messages = 0, ops = 0;
  bool quadratic = false;
};
PlanSize plan_size(const Plan& plan, const CallInfo& call, int gpus_per_node);

// Every plan worth pricing for the call: the algorithms of the collective (hierarchical where
// the ranks fill whole nodes of several; pipelined rings of 2 and 4 chunks where small), each
// uncompressed and with each codec in each placement that applies; and on GPUs (not on a host
// over MPI, topo::Topology::receive_copy), where the library is NCCL (System::nccl_library),
// the call as NCCL runs it: nccl-like's plan as the library's own collective (Plan::library),
// so that a policy choosing among the candidates is never slower, by its model, than NCCL.
// Left out, so that pricing stays cheap and the oracle can simulate every candidate
// (plan_size): plans whose schedule
// would exceed `max_ops` ops, and plans whose messages grow as n^2 above `max_flat_messages`
// messages (a flat allreduce ring over more than 500 ranks, a reduce-scatter or allgather
// ring, a pairwise all-to-all or a compress-once recursive allgather, which forwards one
// message per block, over more than 707; a hierarchical plan whose ring or pairwise exchange
// across nodes takes it over the same limit: with 8 ranks a node, an allreduce ring across
// more than 173 nodes, a reduce-scatter or allgather ring across more than 246, an all-to-all
// across more than 247). When that leaves nothing, the smallest of
// them is kept if it has at most 2 x max_ops ops; otherwise the list is empty (an all-to-all
// of 16,384 ranks: every schedule of it has hundreds of millions of ops).
// The direct allreduce (flat, or across nodes in a hierarchical plan) and the direct
// all-to-all are candidates only over groups of at most kMaxDirectGroup: each rank posts n - 1
// messages at once, and neither the simulator nor the cost model charges a rank for posting a
// message (only its route's latency and bytes), so over many peers at small sizes it would win
// on what a real NIC's message rate and a library's per-peer setup would take back.
constexpr uint64_t kMaxPlanOps = 20'000'000;
constexpr uint64_t kMaxFlatMessages = 500'000;
constexpr int kMaxDirectGroup = 16;
std::vector<Plan> candidates(const CallInfo& call, const System& sys, uint64_t max_ops = kMaxPlanOps,
                             uint64_t max_flat_messages = kMaxFlatMessages);
// With NCCL's protocol costs on a GPU topology compcoll's plans run as compcoll-run's NCCL
// executor runs them, in step groups (MessageCosts::lockstep): why `plan` cannot run so (its
// schedule's step_group_problem, cost_model.h: the double binary tree, the compressed recursive
// allgather), which makes it no candidate and a plan compcoll-run refuses on NCCL; "" where it
// can, or where nothing runs in step groups.
std::string step_group_problem(const Plan& plan, const CallInfo& call, const System& sys);

// The cost model's time for a plan of the call, in seconds (what adaptive compares); routes
// are cached in `routes` across the plans of one topology.
double predict_plan(const Plan& plan, const CallInfo& call, const System& sys, RouteCache& routes);

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  // The plan, and the time the policy expects (0 when it has no estimate).
  virtual Plan choose(const CallInfo& call, const System& sys, double* predicted_s) = 0;
};

// "nccl-like" or "adaptive"; throws std::invalid_argument for other names.
std::unique_ptr<Policy> make_policy(const std::string& name);
std::vector<std::string> policy_names();  // static, nccl-like, adaptive, oracle


}  // namespace compcoll::policy
