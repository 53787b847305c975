// sim/entropy_run.h — EDGC over a training run, for compcoll-sim's workload mode
// (docs/WORKLOADS.md, "EDGC: the entropy policy over a gradient trace"): the entropy policy's
// controller (shared/policy/entropy.h) is fed a recorded gradient trace, one step at a time, and
// decides the lowrank rank of every step (0 = uncompressed during warm-up); the lowrank
// compressor (shared/codec/lowrank.h) runs on the same trace at the chosen ranks, with error
// feedback, and at each fixed rank of the workload for comparison, so the run's relative
// error is measured, not assumed. The workload mode prices each step's iteration at its rank.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "study/experiment.h"
#include "policy/entropy.h"

namespace compcoll::sim {

struct EntropyReplay {
  std::string trace;
  uint64_t steps = 0, rows = 0, cols = 0;
  policy::EntropyConfig config;
  std::vector<uint32_t> rank;        // per step: the controller's rank (0 = uncompressed)
  std::vector<double> bits;          // per step: the entropy estimate, NaN where none was made
  std::vector<double> error;         // per step: ||M - update|| / ||M||, M = grad + carried residual (0 uncompressed)
  std::vector<policy::EntropyController::WindowRecord> windows;
  // A fixed rank from the end of warm-up on (the workload's lowrank_ranks): per-step error.
  std::map<uint32_t, std::vector<double>> fixed_error;
  // The rank the compressor ran on the trace's matrix: min(rank, rows, cols).
  uint32_t trace_rank(uint32_t r) const;
};

// Loads the trace (.npy, bf16 bit patterns or float32, shape (steps, rows, cols)) and replays
// it. Bad input throws config::ConfigError naming `experiment_file` and workload.entropy.trace.
EntropyReplay replay_entropy(const study::EntropyRunSpec& spec, const std::string& experiment_file,
                             const std::vector<int>& fixed_ranks);

}  // namespace compcoll::sim
