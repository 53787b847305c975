// shared/study/experiment.h — an experiment file (experiments/*.yaml, docs/EXPERIMENTS.md):
// which topologies, which collective calls at which sizes, which codecs and placements, which
// calibration and network model. compcoll-sim and compcoll-run read the same file. Every key
// is checked; errors are one line naming the file and the key path (config::ConfigError).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "policy/entropy.h"
#include "topology/topology.h"

namespace compcoll::study {

struct CallSweep {
  std::string collective = "allreduce";  // allreduce | reduce-scatter | allgather | broadcast | all-to-all
  std::string algorithm = "ring";
  std::string inter = "ring";            // hierarchical allreduce: the inter-node algorithm
  std::string placement = "zipccl";      // for compressing codecs; identity always runs uncompressed
  std::string intra_placement;           // hierarchical allreduce inside nodes ("" = placement)
  std::string dtype = "bf16";
  std::string tensor = "grad";           // tensor kind for the ratio model (tests/data/README.md)
  uint32_t chunks = 1, channels = 1;
  uint32_t aggregate = 0;                // pat: the blocks a message carries at most (0: a step's all)
  int root = 0;
};

struct NetworkSpec {
  std::string model = "lv08";  // lv08 | cm02
  // Where the model comes from: the experiment's `network` key, or, without one, the defaults
  // its topologies' fabric calls for (topo::network_default).
  std::string source = "the experiment's network key";
  bool keyed = true;  // false: no `network` key, the fabric's defaults
  std::optional<double> latency_factor, bandwidth_factor, tcp_gamma, precision;
  std::optional<bool> crosstraffic;
  std::optional<bool> protocol_costs;  // NCCL's per-step latency and LL / LL128 wire bytes (policy::MessageCosts)
  std::optional<std::string> update;  // SimGrid's network/optim: lazy (its default) or full
  // The channels per peer on another node of the communicator compcoll's own plans run on
  // (policy::NetFactors::p2p_net_channels): policy::kP2pFillNic "nic" (unset), kP2pNcclDefault
  // "nccl", N > 0 N.
  std::optional<int> p2p_net_channels;
};

// EDGC over a training run (docs/WORKLOADS.md): the entropy policy's controller is fed a
// recorded gradient trace step by step and picks the lowrank rank per window; compcoll-sim
// (workload.entropy) prices each step's iteration at that rank and reports the run's time and
// the compressor's error on the trace; compcoll-run (run.entropy) runs the steps for real.
struct EntropyRunSpec {
  std::string trace;               // resolved path: .npy of shape (steps, rows, cols)
  policy::EntropyConfig config;    // every knob (its defaults unless the file sets them)
};

// How compcoll-run runs the calls for real (docs/compcoll-run.md); compcoll-sim ignores it but
// for compute_thread, fused_decode and the wire budget, which change what both model.
struct RunSpec {
  int warmup = 2, iterations = 10;  // untimed runs, then timed runs, per row
  std::string backend;              // mpi | nccl; empty: compcoll-run's --backend or mpi
  int gpus_per_node = 0;            // ranks per node for hierarchical algorithms; 0: the topology's
  double timeout_s = 300;           // a rank silent this long ends the job (real/watchdog.h)
  uint32_t codec_threads = 1;       // host codecs (MPI backend): threads per rank coding a stream's chunks
  // MPI backend: each rank runs its kernels on a compute thread beside the thread that drives
  // MPI (whose receive copies then overlap the kernels). compcoll-sim models it too
  // (topo::Topology::compute_thread, set by study::load_topology).
  bool compute_thread = false;
  // nccl backend: a decompression whose block only one reduce reads runs with that reduce as
  // one decode-and-add kernel (real::ExecutorOptions::fuse_decode_add); false (the default):
  // two kernels. compcoll-sim and the model column price what runs (topo::Topology::fused_decode).
  bool fused_decode = false;
  // Compressed messages as exact transfers of a learned budget (real::ExecutorOptions::wire_budget):
  // no stream size crosses to the host before its transfer is posted (on NCCL, no size
  // exchange per step); a stream that outgrows its budget makes every rank redo that run at
  // exact sizes. wire_budget_margin: the budget over the size learned (0.01: 1% more).
  bool wire_budget = false;
  double wire_budget_margin = 0;
  // Queued mode (real::ExecutorOptions::queue_ahead): each rank submits an op as soon as what
  // it depends on is submitted, kernels and transfers ordered on their queues (CUDA streams
  // and events; the host's compute thread and MPI) instead of by the host, in runs where no
  // transfer needs a size from the host (within wire budgets, or nothing compressed).
  bool queue_ahead = false;
  // EDGC for real (run.entropy, docs/compcoll-run.md): the entropy policy over a gradient trace,
  // its lowrank steps allreduced by the executor.
  std::optional<EntropyRunSpec> entropy;
};

// A job's profiler traces (docs/WORKLOADS.md, "Trace replay"), instead of a model.
struct TraceSpec {
  std::string name;                 // the workload's name in the tables (default: the first file's folder)
  std::vector<std::string> files;   // resolved paths, one per rank
  int dp = 0, tp = 1, pp = 1;       // the job's layout in Megatron-LM order (dp 0: world / (tp x pp))
  int step = -1;                    // ProfilerStep#N; -1: the last one
  bool spmd = false;                // one rank's trace stands for every rank
  int scale_dp = 1;                 // replay with K times the data parallelism
  double compute_scale = 1.0;       // the traced compute x this (a faster or slower device)
};

// A training workload (docs/WORKLOADS.md): the iteration's collective calls replace `calls`.
struct WorkloadSpec {
  std::string model, layout;        // resolved paths
  double peak_flops = 0, efficiency = 0;
  bool scale_dp = false;            // per topology: dp = its GPUs / (tp x pp) (weak scaling)
  std::vector<int> lowrank_ranks;   // also run gradients through lowrank (PowerSGD) at these ranks
  std::optional<EntropyRunSpec> entropy;
  std::optional<TraceSpec> trace;   // a traced job: model, layout file and device unused
};

struct Experiment {
  std::string file, name, description;
  std::vector<std::string> topologies;  // resolved paths
  // `topology_set`: "key.path=value" overrides applied to every topology file as it loads
  // (what a run changed, `node.nvls=false` for one that turned NVLS off).
  std::vector<std::string> topology_set;
  // Group sizes: the call runs on the first N ranks of each topology's placement, once per N.
  // Empty: every GPU of each topology. compcoll-sim skips an N larger than a topology.
  std::vector<int> ranks;
  std::string calibration;              // resolved path, or "zero"
  NetworkSpec network;
  std::vector<uint64_t> sizes;          // bytes, nccl-tests "size"
  std::vector<CallSweep> calls;
  std::vector<std::string> codecs;
  std::vector<WorkloadSpec> workloads;  // one or a list; when present, no calls or sizes
  std::vector<std::string> policies{"static"};  // static | nccl-like | adaptive | oracle (shared/policy)
  // `nccl_algo`: the algorithms NCCL may pick, as NCCL_ALGO restricts them (ring, tree, nvls,
  // nvls-tree, pat); empty: every one (policy::System::nccl_algorithms).
  std::vector<std::string> nccl_algo;
  std::string tensors_dir;              // ratio model measured on TENSORS_DIR/<kind>.*.<dtype>.npy
  std::map<std::string, double> fixed_ratios;  // codec -> compressed/uncompressed, instead of measuring
  RunSpec run;
  // The experiment as read, --set overrides applied: 16 hex digits of a 64-bit FNV-1a hash of
  // its YAML. Shards of one run share it (compcoll-sim merge checks).
  std::string fingerprint;
};

// Relative paths in the file are looked up from the working directory, then the experiment's
// folder, then its parent (so experiments/x.yaml may say topologies/y.yaml).
Experiment load_experiment(const std::string& path, const std::vector<std::string>& overrides = {});

// A topology of the experiment as its runs execute on it: topo::load_topology, with
// run.compute_thread applied (which needs a host topology's shared_memory where it has
// receive_copy: the threads share the host's cores; a config::ConfigError names both files).
topo::Topology load_topology(const Experiment& e, const std::string& path, int ranks = 0);

// "1MB:1GB:x4" style ranges are accepted as well as lists; see docs/EXPERIMENTS.md.
std::vector<uint64_t> size_range(uint64_t from, uint64_t to, double factor);

// What a policy sees of a call of the sweep at `bytes` on `nranks` ranks (the file's names are
// checked by load_experiment).
policy::CallInfo call_info(const CallSweep& s, uint64_t bytes, int nranks);

}  // namespace compcoll::study
