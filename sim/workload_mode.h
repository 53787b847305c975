// sim/workload_mode.h — compcoll-sim on a training workload (docs/WORKLOADS.md): one iteration
// of a model under a parallel layout becomes its collective calls (shared/workload); each
// policy plans every call; each distinct call is simulated once on a representative group of
// its kind (tensor-parallel ranks inside a node, data-parallel ranks one per node, ...); the
// iteration's time, communication time (total and exposed) and speed-ups follow from
// workload::estimate. A traced job (workload.trace, shared/workload/trace.h) instead: its
// distinct calls are planned and simulated on their groups' own ranks, and the ranks'
// timelines replayed with each variant's call times.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <string>

#include "calibration/calibration.h"
#include "study/experiment.h"
#include "study/study.h"
#include "sim/simulator.h"
#include "workload/trace.h"
#include "workload/workload.h"

namespace compcoll::sim {

struct WorkloadContext {
  const study::Experiment* exp = nullptr;
  const study::WorkloadSpec* workload = nullptr;
  const calib::Calibration* cal = nullptr;
  NetworkModel net;
  study::Ratios* ratios = nullptr;  // the codecs' ratios (the study layer's, shared with the rest of the run)
  bool json = false;          // no table on stdout
  std::filesystem::path out;  // where workload.csv goes (empty: nowhere)
};

// Runs one workload of the experiment on every topology; appends to doc["workload"] and to
// OUT/workload.csv. Returns true when every call simulated.
bool run_workload(const WorkloadContext& ctx, nlohmann::json& doc);

// The GPUs a call's group runs on, member by member (topo::Topology::rank_to_gpu): the call's own
// ranks when it has them (a traced job: job rank r on GPU r), else the representative group of
// its kind in Megatron-LM's rank order (tensor-parallel ranks 0..tp-1, data-parallel ranks
// strided by tp, ...).
std::vector<int> group_gpus(const workload::CommCall& call, const workload::Parallel& par);

// A traced job's distinct calls, one per (group, collective, size, dtype, tensor kind), each
// with its group's job ranks; count: how often the busiest rank makes it per iteration.
struct TraceCalls {
  workload::Iteration distinct;
  std::vector<std::vector<size_t>> call_of;  // [rank][call] -> index into distinct.calls
};
TraceCalls distinct_trace_calls(const workload::TraceJob& job);

}  // namespace compcoll::sim
