// shared/workload/workload.h — one training iteration of a dense or MoE transformer, as data:
// the compute of one rank (FLOPs per micro-batch, forward and backward) and the collective
// calls it makes (bytes, dtype, tensor kind, process group, how often, whether the framework
// overlaps it), from a model file (models/*.yaml) and a parallel layout (data, tensor,
// pipeline, expert parallel degrees; ZeRO stage). estimate() turns call times into iteration
// time with the overlap rules of docs/WORKLOADS.md. This file never runs a collective and never
// picks an algorithm or codec: that is the policy's and the executor's work.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "util/dtype.h"
#include "config/yaml_node.h"
#include "policy/policy.h"
#include "schedule/schedule.h"

namespace compcoll::workload {

// A decoder-only transformer (docs/WORKLOADS.md: every key, the parameter and FLOP formulas).
struct Model {
  std::string name;
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0;
  int seq = 0, micro_batch = 0;  // micro_batch: sequences per rank per micro-batch
  bool gated_ffn = false;        // SwiGLU: 3 FFN matrices instead of 2
  bool tied_embeddings = true;   // output layer shares the input embedding
  bool learned_positions = false;
  int experts = 0, top_k = 0;    // 0 experts: dense
  int moe_every = 1;             // every moe_every-th layer (1-based) is MoE
  double capacity_factor = 1.0;  // all-to-all bytes x this
  DType dtype = DType::BF16;

  bool is_moe_layer(int layer) const { return experts > 0 && (layer + 1) % moe_every == 0; }
  int moe_layers() const { return experts > 0 ? layers / moe_every : 0; }
};

// Parameter counts (matrices and embeddings; biases and norm weights are left out, < 0.1%).
struct ParamCount {
  double attention_per_layer = 0;  // q, k, v, o
  double ffn_per_dense_layer = 0;
  double experts_per_moe_layer = 0;  // every expert of one layer
  double router_per_moe_layer = 0;
  double embeddings = 0;             // input, output unless tied, learned positions
  double dense = 0;                  // everything but the experts (replicated over ep)
  double expert = 0;                 // all experts of all layers (sharded over ep)
  double total = 0;
  double active = 0;                 // used per token: dense + top_k experts per MoE layer
};
ParamCount param_count(const Model& m);

// FLOPs of one micro-batch of one sequence-batch through the whole model (no parallelism).
struct Flops {
  double forward_per_dense_layer = 0, forward_per_moe_layer = 0, logits = 0;
  double forward = 0;  // all layers + logits; backward is 2x
};
Flops flops(const Model& m);

struct Parallel {
  int dp = 1, tp = 1, pp = 1, ep = 1;  // ep splits the experts over ranks of the dp group
  int zero_stage = 0;                  // 0 DDP, 1 optimizer state, 2 + gradients, 3 + params (FSDP)
  int micro_batches = 1;               // per iteration per pipeline (gradient accumulation)
  bool sequence_parallel = false;      // TP: allgather + reduce-scatter instead of allreduce
  uint64_t bucket_bytes = 25ull << 20; // DP gradient buckets (PyTorch DDP's 25 MiB)
  int world() const { return dp * tp * pp; }
};

// Compute model: seconds = FLOPs / (peak_flops x efficiency).
struct Device {
  double peak_flops = 0;
  double efficiency = 0;
  double seconds(double f) const { return f / (peak_flops * efficiency); }
};

enum class Phase : uint8_t { Forward, Backward, Step };
std::string_view phase_name(Phase p);  // fwd | bwd | step

struct CommCall {
  std::string kind;     // tp-allreduce, tp-allgather, tp-reduce-scatter, dp-grad, dp-grad-expert,
                        // zero-param-allgather, fsdp-allgather, fsdp-allgather-expert, pp-send,
                        // moe-dispatch, moe-combine
  sched::Collective collective = sched::Collective::AllReduce;
  uint64_t bytes = 0;   // nccl-tests size (docs/compcoll-sim.md)
  DType dtype = DType::BF16;
  std::string tensor;   // ratio-model kind: grad, param, act, actgrad, moe-dispatch
  std::string group;    // dp, tp, pp, ep, edp (the dp ranks holding the same experts)
  int group_size = 1;
  Phase phase = Phase::Forward;
  int count = 1;                // calls of this size per iteration on one rank
  bool every_micro_batch = true;  // count / micro_batches in each micro-batch; else once
  bool point_to_point = false;  // pipeline send: a broadcast in a group of 2 (sender is root)
  bool overlappable = false;    // hidden behind the same phase's compute where it fits
  std::vector<int> ranks;       // the group's ranks when known (a traced job); empty: the layout's
                                // representative group of `group`
  policy::CallInfo info() const { return {collective, bytes, dtype, tensor, group_size}; }
};

struct Iteration {
  Model model;
  Parallel parallel;
  ParamCount params;
  uint64_t grad_bytes_per_rank = 0;   // dense + expert parameters held by one rank x dtype size
  double forward_flops_per_micro_batch = 0;   // one rank of the last (slowest) stage
  double backward_flops_per_micro_batch = 0;  // 2x forward
  std::vector<CommCall> calls;        // in the order a rank issues them (fwd, bwd, step)
};

// Model file (models/*.yaml); parse_model reads the same keys from any mapping.
Model load_model(const std::string& path);
Model parse_model(const config::Node& n);
// A layout (models/layouts/*.yaml, or a mapping inside an experiment), checked against the
// model: tp divides heads (and kv_heads), pp divides layers, ep divides dp and experts, ...
// `micro_batches` or `global_batch` (sequences per iteration = micro_batch x micro_batches x dp).
Parallel load_parallel(const std::string& path, const Model& m);
Parallel parse_parallel(const config::Node& n, const Model& m);
// {peak_flops: 989e12, efficiency: 0.45}
Device parse_device(const config::Node& n);

// Throws std::invalid_argument when the layout does not fit the model (the parse_* functions
// check the same with file and key in the message).
Iteration build_iteration(const Model& m, const Parallel& p);

// Iteration time from the time of one call of each CommCall (seconds, as the simulator or the
// cost model gives it), following docs/WORKLOADS.md.
struct Estimate {
  double iteration_s = 0;
  double compute_s = 0;        // the iteration with every call free
  double comm_s = 0;           // sum of all calls' time (count x seconds)
  double exposed_comm_s = 0;   // iteration_s - compute_s
  std::map<std::string, double> comm_by_kind;     // sum per CommCall::kind
  std::map<std::string, double> exposed_by_kind;  // iteration_s - iteration with that kind free
};
Estimate estimate(const Iteration& it, const Device& d, const std::function<double(const CommCall&)>& call_seconds);

}  // namespace compcoll::workload
