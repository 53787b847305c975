// shared/schedule/build.h — one entry point to every schedule builder, by name: what the
// simulator, the real executor and the policies call with a plan. Unknown names and
// combinations a builder does not support are ScheduleErrors naming them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schedule/algorithms.h"

namespace compcoll::sched {

struct BuildSpec {
  Collective collective = Collective::AllReduce;
  std::string algorithm = "ring";  // see algorithm_names()
  Placement placement = Placement::None;
  int nranks = 1;
  // allreduce: elements per rank; reduce-scatter: each rank's input; allgather: the output;
  // broadcast: elements; all-to-all: elements each rank sends each rank (unless `counts`).
  uint64_t count = 0;
  DType dtype = DType::BF16;
  Pipelining pipe{};             // ring allreduce / reduce-scatter / allgather, nccl-tree,
                                 // hierarchical allreduce, chain broadcast (chunks)
  int gpus_per_node = 1;         // hierarchical algorithms, rail rings, nccl-tree: nranks must be a multiple
  std::string inter = "ring";    // hierarchical allreduce across nodes: inter_choices()
  std::optional<Placement> intra_placement;  // hierarchical allreduce inside nodes (default: placement);
                                             // rail rings: none = only hops between nodes compress
  int root = 0;                  // broadcast
  std::vector<std::vector<uint64_t>> counts;  // all-to-all(v); empty = uniform `count`
  uint32_t aggregate = 0;        // pat: the blocks a message carries at most (0: a step's all)
  // all-to-all pairwise and pxn as NCCL's own exchange (nccl_alltoall; placement none): its
  // sends and receives in NCCL's work batches over this many point-to-point channels (0: not;
  // policy::flow_spec sets it where NCCL's kernels run the call), rank r on node
  // nccl_nodes[r] (empty: node-major whole nodes of gpus_per_node).
  int nccl_p2p_channels = 0;
  std::vector<int> nccl_nodes;
  bool operator==(const BuildSpec&) const = default;  // the same schedule
};

// The schedule the spec names (not validated: validate() it where needed). Algorithms, by
// collective (algorithm_names()):
//   allreduce       ring (pipe), rail-ring (gpus_per_node, pipe), recursive, tree,
//                   nccl-tree (gpus_per_node, pipe; placement none),
//                   nvls (one node: nranks = gpus_per_node; pipe; placement none; a switch rank added),
//                   nvls-tree (2+ whole nodes of gpus_per_node; pipe; placement none; a switch rank per node),
//                   hierarchical (gpus_per_node, inter, pipe; inter "tree" without pipelining)
//   reduce-scatter  ring (pipe), rail-ring (gpus_per_node, pipe), recursive, pat (pipe, aggregate),
//                   hierarchical (gpus_per_node)
//   allgather       ring (pipe), rail-ring (gpus_per_node, pipe), recursive, pat (pipe, aggregate),
//                   hierarchical (gpus_per_node)
//   broadcast       tree, chain (root; pipe.chunks, channels 1)
//   all-to-all      direct, pairwise, hierarchical, pxn (gpus_per_node; counts or uniform count)
// pipe must be {1, 1} where no pipelining is listed; inter is read by the hierarchical
// allreduce only. Throws ScheduleError with one line naming an unknown collective,
// algorithm, inter-node algorithm or placement, a placement the builder does not support, or
// a bad parameter (group size, root, nodes, counts, chunks).
Schedule build_schedule(const BuildSpec& spec);
// Whether the schedule the spec names has switch ranks (Schedule::switches): nvls, nvls-tree.
bool has_switch_ranks(const BuildSpec& spec);
std::vector<std::string> algorithm_names(Collective c);
Collective parse_collective(std::string_view name);  // allreduce, reduce-scatter, allgather, broadcast, all-to-all
Placement parse_placement(std::string_view name);    // none, per-hop, compress-once, zipccl
// The hierarchical allreduce's algorithms across nodes by name (inter_name's): nothing for an
// unknown one; inter_choices() lists them for errors ("ring, recursive, tree or direct").
std::optional<InterAlgorithm> find_inter(std::string_view name);
std::string inter_choices();

}  // namespace compcoll::sched
