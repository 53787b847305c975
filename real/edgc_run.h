// real/edgc_run.h — compcoll-run's EDGC for real (run.entropy, docs/compcoll-run.md): the
// entropy policy's controller (policy/entropy.h) over a recorded gradient trace, its lowrank
// steps (codec/lowrank.h) with P and Q allreduced by the executor, each step's gradient also
// allreduced uncompressed for the measured comparison; and the lowrank step the lowrank:r=N
// rows of the sweep time.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <vector>

#include "codec/lowrank.h"
#include "io/tensor_file.h"
#include "real/backend.h"
#include "real/executor.h"
#include "real/transport.h"
#include "schedule/build.h"
#include "study/experiment.h"

namespace compcoll::real {

// One lowrank step of this rank's gradient `grad` (dtype dt) at the state's rank: the local
// steps, with P and Q allreduced by `ex_p` and `ex_q` (fp32, uncompressed); the update goes
// to `out`, the time of the local steps is added to `local_s`. `p` and `q` are the caller's
// scratch for the factors (sized here; kept across steps so timed loops do not allocate).
void lowrank_step(DataBackend& backend, int world, lowrank::LowRankState& state, Executor& ex_p, Executor& ex_q, DType dt,
                  const void* grad, float* out, double& local_s, std::vector<float>& p, std::vector<float>& q);

struct EntropyRun {
  const study::Experiment* exp = nullptr;
  const GradientTrace* trace = nullptr;
  size_t call = 0;  // the allreduce call whose algorithm carries the trace
  // The call's schedule for `count` elements of `dtype`, uncompressed.
  std::function<sched::BuildSpec(DType dtype, uint64_t count)> spec;
  bool lockstep = false;
  int rank = 0, world = 1;
  Transport* transport = nullptr;
  DataBackend* backend = nullptr;
};

// Runs the trace: every rank feeds the controller the same step, so all choose the same rank
// at the same step; rank 0 prints one row per window and the run's total; `doc["entropy"]`
// and OUT/entropy.csv get the same. A step's time: from a barrier to the rank's update, mean
// over ranks. Throws on a transport or codec failure (the caller ends the job).
void run_entropy_trace(const EntropyRun& run, const std::filesystem::path& out_dir, nlohmann::json& doc);

}  // namespace compcoll::real
