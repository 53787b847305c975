#pragma once
// tests/workload/trace_jobs.h — small jobs of two ranks in the three schemas the trace reader
// meets, one rank's trace each: NCCL kernels on the GPU, record_param_comms on the CPU, and
// gloo's annotations (tests/fuzz/make_seeds.py writes jobs of the same form as the trace
// fuzzer's seeds); and what a job the reader returns must do (replay_problem), for the tests
// and the trace fuzzer alike.

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "workload/trace.h"

namespace compcoll::test {

using nlohmann::json;

// One complete ("X") event of a Chrome trace.
inline json trace_event(const char* cat, const std::string& name, double ts, double dur, int pid, int tid, json args) {
  return {{"ph", "X"}, {"cat", cat}, {"name", name}, {"ts", ts}, {"dur", dur}, {"pid", pid}, {"tid", tid}, {"args", args}};
}

inline json distributed_info(const char* backend, int rank) {
  return {{"backend", backend}, {"rank", rank}, {"world_size", 2},
          {"pg_config", json::array({{{"pg_name", "0"}, {"ranks", {0, 1}}}})}};
}

// A GPU (NCCL) job in PyTorch's schema: CPU launches (cuda_runtime, by correlation id) inside
// ProfilerStep#1, compute kernels on stream 7, NCCL kernels with their args on stream 20: a
// forward allreduce the compute waits for, a backward one (launched from autograd's thread) it
// does not, and a kernel launched after the step.
inline json gpu_rank(int rank) {
  json ev = json::array();
  auto x = [&](const char* cat, const std::string& name, double ts, double dur, int pid, int tid, json args) {
    ev.push_back(trace_event(cat, name, ts, dur, pid, tid, args));
  };
  x("user_annotation", "ProfilerStep#1", 0, 1000, 10, 1, json::object());
  x("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 500, 300, 10, 2, json::object());
  for (auto [corr, ts, tid] : {std::tuple{1, 10, 1}, {2, 20, 1}, {3, 30, 1}, {4, 600, 2}, {5, 610, 1}, {99, 2000, 1}})
    x("cuda_runtime", "cudaLaunchKernel", ts, 5, 10, tid, {{"correlation", corr}});
  const json nccl{{"Collective name", "allreduce"}, {"In msg nelems", 1024}, {"Out msg nelems", 1024}, {"dtype", "Float"},
                  {"Process Group Ranks", "[0, 1]"}, {"Process Group Name", "0"}};
  x("kernel", "gemm", 100, 200, 0, 7, {{"correlation", 1}});
  json a = nccl;
  a["correlation"] = 2;
  x("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", 300 + rank * 20, 100 - rank * 20, 0, 20, a);
  x("kernel", "gemm", 410, 190, 0, 7, {{"correlation", 3}});
  a["correlation"] = 4;
  x("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", 620, 80, 0, 20, a);
  x("kernel", "gemm", 605, 295, 0, 7, {{"correlation", 5}});
  x("kernel", "gemm", 2100, 50, 0, 7, {{"correlation", 99}});
  return {{"distributedInfo", distributed_info("nccl", rank)}, {"traceEvents", ev}};
}

// A CPU job: record_param_comms events (an allgather of 512 bf16 elements, and the wait
// pseudo-call the reader skips) between two matrix products, in ProfilerStep#7.
inline json cpu_rank(int rank) {
  json ev = json::array();
  auto x = [&](const char* cat, const std::string& name, double ts, double dur, json args) {
    ev.push_back(trace_event(cat, name, ts, dur, 5, 1, args));
  };
  x("user_annotation", "ProfilerStep#7", 0, 400, json::object());
  x("cpu_op", "aten::mm", 0, 100, json::object());
  x("cpu_op", "record_param_comms", 100, 10,
    {{"Collective name", "allgather"}, {"In msg nelems", 256}, {"Out msg nelems", 512}, {"dtype", "BFloat16"},
     {"Process Group Name", "0"}});
  x("cpu_op", "record_param_comms", 110, 5, {{"Collective name", "wait"}, {"In msg nelems", 0}, {"dtype", "Byte"}});
  x("cpu_op", "aten::mm", 120, 280, json::object());
  return {{"distributedInfo", distributed_info("gloo", rank)}, {"traceEvents", ev}};
}

// A gloo job: c10d::allreduce_ on the main thread (7) and the gloo:* work it queued on a
// worker thread (8), in ProfilerStep#2.
inline json gloo_rank(int rank) {
  json ev = json::array();
  auto x = [&](const char* cat, const std::string& name, double ts, double dur, int tid, json args) {
    ev.push_back(trace_event(cat, name, ts, dur, 7, tid, args));
  };
  x("user_annotation", "ProfilerStep#2", 0, 5000, 7, json::object());
  x("user_annotation", "gloo:all_reduce", 1000, 400, 8, {{"Input type", {"float"}}, {"Input Dims", {{65536}}}});
  x("cpu_op", "c10d::allreduce_", 990, 20, 7, {{"Input type", {"float"}}, {"Input Dims", {{65536}}}});
  x("user_annotation", "gloo:all_gather", 2000, 300, 8, {{"Input type", {"float"}}, {"Input Dims", {{1024}}}});
  return {{"distributedInfo", distributed_info("gloo", rank)}, {"traceEvents", ev}};
}

// What is wrong with the job's replay, as traced and with free calls ("" where nothing is):
// one row of traced call times per rank and one figure per call, one end per rank, each a
// finite time >= 0.
inline std::string replay_problem(const workload::TraceJob& job) {
  const std::vector<std::vector<double>> traced = workload::traced_call_seconds(job);
  if (traced.size() != job.ranks.size()) return "traced_call_seconds: not one row per rank";
  for (size_t r = 0; r < traced.size(); ++r)
    if (traced[r].size() != job.ranks[r].calls.size()) return "traced_call_seconds: not one figure per call";
  for (const auto& seconds : {std::function<double(int, size_t)>([&](int r, size_t c) {
                                return traced[static_cast<size_t>(r)][c];
                              }),
                              std::function<double(int, size_t)>([](int, size_t) { return 0.0; })}) {
    const std::vector<double> ends = workload::replay(job, seconds);
    if (ends.size() != job.ranks.size()) return "replay: not one end per rank";
    for (double e : ends)
      if (!(e >= 0) || !std::isfinite(e)) return "replay: an end that is not a finite time >= 0";
  }
  return "";
}

}  // namespace compcoll::test
