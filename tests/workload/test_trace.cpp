// tests/workload/test_trace.cpp — the trace reader and replay (shared/workload/trace.h) on the
// shipped PyTorch profiler traces of tests/data/torch-trace: the calls found in each rank's
// trace are the calls the job logged (job.json: collective, size, group, order), the replay
// with free calls gives the trace's compute, scale-out grows the data-parallel groups, and bad
// traces get one line naming the file and the event; small synthetic jobs in the GPU (NCCL
// kernels) and CPU record_param_comms schemas.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <tuple>

#include "workload/trace.h"
#include "workload/trace_jobs.h"

using namespace compcoll;
using namespace compcoll::workload;
using nlohmann::json;
using test::gpu_rank;
using test::trace_event;

namespace {

const std::string kTraces = std::string(COMPCOLL_TEST_DATA_DIR) + "/torch-trace";

std::vector<std::string> files_of(const std::string& dir, int world) {
  std::vector<std::string> f;
  for (int r = 0; r < world; ++r) f.push_back(dir + "/rank" + std::to_string(r) + ".json");
  return f;
}

json load_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

std::string collective_of(const std::string& logged) {
  if (logged == "reduce_scatter") return "reduce-scatter";
  return logged;
}

// The job's own log of its last profiled step against what the reader found.
void check_against_job(const std::string& dir, const TraceLayout& layout) {
  const json job = load_json(dir + "/job.json");
  const int world = job["world"];
  const TraceJob t = load_trace(files_of(dir, world), layout);
  REQUIRE(t.world == world);
  REQUIRE(t.backend == "gloo");
  for (int r = 0; r < world; ++r) {
    const json& logged = job["calls"][static_cast<size_t>(r)].back();
    const RankTrace& rt = t.ranks[static_cast<size_t>(r)];
    INFO("rank " << r << " " << rt.file);
    REQUIRE(rt.calls.size() == logged.size());
    for (size_t c = 0; c < logged.size(); ++c) {
      const TraceCall& call = rt.calls[c];
      const json& l = logged[c];
      INFO("call " << c << " " << l.dump());
      CHECK(std::string(sched::collective_name(call.collective)) == collective_of(l["collective"]));
      CHECK(call.bytes == l["elements"].get<uint64_t>() * 4);
      CHECK(call.dtype == DType::FP32);
      CHECK(t.groups[call.group].ranks == l["group"].get<std::vector<int>>());
      const std::string kind = l["kind"];
      CHECK(t.groups[call.group].label == (kind.rfind("tp-", 0) == 0 ? "tp" : "dp"));
      CHECK(call.end_s > call.start_s);
      CHECK(call.start_s >= call.issue_s - 1e-6);
    }
  }
}

double total(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, x);
  return m;
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() / ("compcoll-trace-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const json& j) const {
    const auto p = path / name;
    std::ofstream(p) << j.dump();
    return p.string();
  }
};

std::string error_of(const std::vector<std::string>& files, TraceLayout layout = {}) {
  try {
    load_trace(files, layout);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("trace: the DDP + tensor-parallel job's calls are the ones it logged", "[workload][trace]") {
  check_against_job(kTraces + "/ddp-tp2-dp2", {0, 2, 1});
}

TEST_CASE("trace: the ZeRO job's reduce-scatters and allgathers are the ones it logged", "[workload][trace]") {
  check_against_job(kTraces + "/zero-dp2", {});
}

TEST_CASE("trace: kinds, tensors and phases of the DDP + tensor-parallel job", "[workload][trace]") {
  const TraceJob t = load_trace(files_of(kTraces + "/ddp-tp2-dp2", 4), {0, 2, 1});
  REQUIRE(t.layout.dp == 2);
  REQUIRE(t.groups.size() == 4);  // two tp pairs, two dp pairs
  int act = 0, actgrad = 0, grad = 0;
  for (const auto& c : t.ranks[0].calls) {
    if (c.kind == "tp-allreduce") {
      (c.backward ? actgrad : act) += 1;
      CHECK(c.tensor == (c.backward ? "actgrad" : "act"));
    }
    if (c.kind == "dp-allreduce") {
      ++grad;
      CHECK(c.tensor == "grad");
      CHECK(c.backward);
    }
  }
  CHECK(act == 4);      // 2 layers x (attention out, MLP down)
  CHECK(actgrad == 4);  // 2 layers x (qkv input, MLP up input)
  CHECK(grad == 7);     // 0.25 MiB buckets
}

TEST_CASE("trace: replay with free calls gives the traced compute, with the traced call times the step",
          "[workload][trace]") {
  const TraceJob t = load_trace(files_of(kTraces + "/ddp-tp2-dp2", 4), {0, 2, 1});
  const auto free = replay(t, [](int, size_t) { return 0.0; });
  const auto own = traced_call_seconds(t);
  const auto traced = replay(t, [&](int r, size_t c) { return own[static_cast<size_t>(r)][c]; });
  double compute = 0;
  for (size_t r = 0; r < 4; ++r) {
    const RankTrace& rt = t.ranks[r];
    INFO("rank " << r);
    double items = 0;
    int waits = 0;
    std::vector<bool> issued(rt.calls.size(), false);
    for (const auto& it : rt.items) {
      items += it.seconds;
      if (it.type == TraceItem::Type::Issue) issued[it.call] = true;
      if (it.type == TraceItem::Type::Wait) {
        ++waits;
        CHECK(issued[it.call]);
      }
    }
    CHECK(items == Approx(rt.compute_s).epsilon(1e-9));
    // The tensor-parallel allreduces block (async_op=False): a wait after each one that had
    // not finished when its op returned.
    CHECK(waits >= 2);
    CHECK(rt.compute_s < rt.step_s);
    CHECK(rt.compute_s > 0.5 * rt.step_s);
    // Free calls: the rank's compute, plus what it waits for slower members to issue theirs.
    CHECK(free[r] >= rt.compute_s - 1e-9);
    // The traced call times: each rank's step, less the skew it started the step with.
    CHECK(traced[r] == Approx(rt.step_s).epsilon(0.10));
    CHECK(traced[r] >= free[r]);
    compute = std::max(compute, rt.compute_s);
  }
  // Not exact: with free calls a rank still waits at each call for the group's slower members
  // to issue it, so the slowest rank's replay ends a little after the largest compute (0.24%
  // on this job: 215.62 against 215.10 ms).
  CHECK(total(free) >= compute);
  CHECK(total(free) <= compute * 1.005);
  // Slower calls never make the iteration faster.
  const auto slow = replay(t, [&](int r, size_t c) { return 2 * own[static_cast<size_t>(r)][c]; });
  CHECK(total(slow) >= total(traced));
}

TEST_CASE("trace: eight times the data parallelism", "[workload][trace]") {
  const TraceJob t = load_trace(files_of(kTraces + "/ddp-tp2-dp2", 4), {0, 2, 1});
  const TraceJob s = scale_data_parallel(t, 8);
  REQUIRE(s.world == 32);
  REQUIRE(s.layout.dp == 16);
  int dp = 0, tp = 0;
  for (const auto& g : s.groups) {
    if (g.label == "dp") {
      ++dp;
      CHECK(g.ranks.size() == 16);
    }
    if (g.label == "tp") {
      ++tp;
      CHECK(g.ranks.size() == 2);
      CHECK(g.ranks[1] == g.ranks[0] + 1);
    }
  }
  CHECK(dp == 2);
  CHECK(tp == 16);
  for (size_t r = 0; r < 32; ++r) {
    const RankTrace& rt = s.ranks[r];
    REQUIRE(rt.rank == static_cast<int>(r));
    const RankTrace& orig = t.ranks[r % 4];  // replica k of rank r is rank 4k + r here (pp 1)
    REQUIRE(rt.calls.size() == orig.calls.size());
    for (size_t c = 0; c < rt.calls.size(); ++c) CHECK(rt.calls[c].bytes == orig.calls[c].bytes);  // allreduces
  }
  // Replicas are copies: with free calls every replica ends where its original does.
  const auto free = replay(s, [](int, size_t) { return 0.0; });
  const auto free1 = replay(t, [](int, size_t) { return 0.0; });
  for (size_t r = 0; r < 32; ++r) CHECK(free[r] == Approx(free1[r % 4]).epsilon(1e-12));

  const TraceJob z = scale_data_parallel(load_trace(files_of(kTraces + "/zero-dp2", 2), {}), 4);
  const TraceJob z1 = load_trace(files_of(kTraces + "/zero-dp2", 2), {});
  for (size_t c = 0; c < z.ranks[0].calls.size(); ++c) CHECK(z.ranks[0].calls[c].bytes == 4 * z1.ranks[0].calls[c].bytes);
}

TEST_CASE("trace: bad traces get one line naming the file and the event", "[workload][trace]") {
  TempDir tmp;
  const std::string dir = kTraces + "/zero-dp2";
  const json r0 = load_json(dir + "/rank0.json"), r1 = load_json(dir + "/rank1.json");
  const std::string f0 = tmp.write("rank0.json", r0), f1 = tmp.write("rank1.json", r1);
  REQUIRE(error_of({f0, f1}).empty());

  auto has = [](const std::string& msg, const std::string& file, const std::string& what) {
    INFO(msg);
    CHECK(msg.find(file) != std::string::npos);
    CHECK(msg.find(what) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  };
  {
    const auto p = tmp.path / "broken.json";
    std::ofstream(p) << "{\"traceEvents\": [";
    has(error_of({p.string()}), "broken.json", "not a JSON trace");
  }
  has(error_of({tmp.write("x.json", json{{"a", 1}})}), "x.json", "no traceEvents");
  {
    json j = r0;
    j.erase("distributedInfo");
    has(error_of({tmp.write("noinfo.json", j), f1}), "noinfo.json", "no distributedInfo");
  }
  {
    json j = r0;
    for (auto& e : j["traceEvents"])
      if (e.value("name", "").rfind("ProfilerStep#", 0) == 0) e["name"] = "step";
    has(error_of({tmp.write("nostep.json", j), f1}), "nostep.json", "no ProfilerStep#N");
  }
  {
    json j = r0;
    for (auto& e : j["traceEvents"])
      if (e.value("name", "").rfind("c10d::", 0) == 0) e["name"] = "aten::add";
    has(error_of({tmp.write("nocoll.json", j), f1}), "nocoll.json", "no collective call in ProfilerStep#");
  }
  {
    json j = r0;  // an older NCCL schema: annotations only
    for (auto& e : j["traceEvents"]) {
      const std::string n = e.value("name", "");
      if (n.rfind("c10d::", 0) == 0) e["name"] = "aten::add";
      if (n.rfind("gloo:", 0) == 0) e["name"] = "nccl:all_reduce";
    }
    has(error_of({tmp.write("old.json", j), f1}), "old.json", "nccl:all_reduce annotations but neither record_param_comms");
  }
  has(error_of({f0}), "rank0.json", "no trace of rank 1");
  has(error_of({f0, f0}), "rank0.json", "rank 0 again");
  {
    json j = r1;
    j["distributedInfo"]["world_size"] = 4;
    j["distributedInfo"]["rank"] = 3;
    has(error_of({f0, tmp.write("world.json", j)}), "world.json", "world_size 4");
  }
  // rank and world_size: whole numbers, none cut short to fit an int, no world allocated past
  // kMaxTraceRanks.
  for (const auto& [key, value, what] :
       {std::tuple<const char*, json, std::string>{"rank", 1.0, "rank 1.0 is not a whole number >= 0"},
        {"rank", -1e308, "rank -1e+308 is not a whole number >= 0"},
        {"rank", "1", "rank \"1\" is not a whole number >= 0"},
        {"world_size", -2, "world_size -2 is not a whole number >= 0"},
        {"world_size", (int64_t{1} << 32) + 2, "world_size 4294967298 passes the 1048576 ranks a trace may have"},
        {"world_size", 2000000000, "world_size 2000000000 passes the 1048576 ranks"}}) {
    json j = r1;
    j["distributedInfo"][key] = value;
    has(error_of({f0, tmp.write("info.json", j)}), "info.json: distributedInfo: ", what);
  }
  {
    const TraceJob job = load_trace({f0, f1}, {});
    CHECK(scale_data_parallel(job, 4).world == 8);
    try {
      scale_data_parallel(job, kMaxTraceRanks / 2 + 1);
      FAIL("a job past kMaxTraceRanks ranks");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "scale_dp 524289: 2 x 524289 ranks pass the 1048576 ranks a job may have");
    }
  }
  {
    json j = r1;  // rank 1 gathers a different size: the ranks disagree
    for (auto& e : j["traceEvents"])
      if (e.value("name", "") == "c10d::_allgather_base_") {
        auto& dims = e["args"]["Input Dims"];
        dims[0][0] = dims[0][0].get<int64_t>() + 2;
        break;
      }
    has(error_of({f0, tmp.write("mismatch.json", j)}), "mismatch.json", "on the dp group of ranks [0,1] is c10d::_allgather_base_ of");
  }
  {
    json j = r0;  // a collective issued from a second thread (a GPU job's autograd thread)
    for (auto& e : j["traceEvents"])
      if (e.value("name", "") == "c10d::_allgather_base_") {
        e["tid"] = 999999;
        break;
      }
    has(error_of({tmp.write("thread.json", j), f1}), "thread.json", "is on another thread than the step's");
  }
  {
    // The tp 2 x dp 2 job read as tp 4: its pairs are neither tp groups (4 ranks) nor dp
    // groups (1 rank) of that layout.
    const auto ddp = files_of(kTraces + "/ddp-tp2-dp2", 4);
    const std::string msg = error_of(ddp, {0, 4, 1});
    has(msg, "ddp-tp2-dp2/rank0.json: c10d::allreduce_ at ",
        " us into the step: its group of ranks [0,1] is none of the tp, dp, pp or world groups of the layout "
        "dp 1 x tp 4 x pp 1: the layout does not fit the traced groups");
    CHECK(error_of(ddp, {0, 2, 1}).empty());
  }
  has(error_of({f0, f1}, {0, 4, 1}), "", "the job's 2 ranks are not a multiple of tp x pp = 4");
  has(error_of({f0, f1}, {4, 1, 1}), "", "layout dp x tp x pp = 4, but the job has 2 ranks");
}

TEST_CASE("trace: without a step asked for, the last step every rank has", "[workload][trace]") {
  TempDir tmp;
  const std::string dir = kTraces + "/ddp-tp2-dp2";
  std::vector<std::string> files;
  for (int r = 0; r < 4; ++r) {
    json j = load_json(dir + "/rank" + std::to_string(r) + ".json");
    if (r == 1) {  // rank 1's trace ends a step early
      auto& ev = j["traceEvents"];
      for (auto it = ev.begin(); it != ev.end(); ++it)
        if (it->value("name", "") == "ProfilerStep#3") {
          ev.erase(it);
          break;
        }
    }
    files.push_back(tmp.write("rank" + std::to_string(r) + ".json", j));
  }
  const TraceJob t = load_trace(files, {0, 2, 1});
  for (const auto& r : t.ranks) CHECK(r.step == "ProfilerStep#2");
  const TraceJob t3 = load_trace(files_of(dir, 4), {0, 2, 1}, 3);
  for (const auto& r : t3.ranks) CHECK(r.step == "ProfilerStep#3");
  CHECK(error_of({files[1], files[0], files[2], files[3]}, {0, 2, 1}).empty());
  try {
    load_trace(files, {0, 2, 1}, 3);
    FAIL("rank 1 has no ProfilerStep#3");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("rank1.json: no ProfilerStep#3 (the trace has 2)") != std::string::npos);
  }
}

TEST_CASE("trace: a GPU job's timeline is its GPU work", "[workload][trace]") {
  TempDir tmp;
  const std::vector<std::string> files{tmp.write("g0.json", gpu_rank(0)), tmp.write("g1.json", gpu_rank(1))};
  const TraceJob t = load_trace(files, {0, 2, 1});
  REQUIRE(t.backend == "nccl");
  REQUIRE(t.groups.size() == 1);
  CHECK(t.groups[0].label == "tp");
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    const RankTrace& rt = t.ranks[static_cast<size_t>(r)];
    REQUIRE(rt.calls.size() == 2);
    CHECK(rt.calls[0].bytes == 4096);
    CHECK(rt.calls[0].tensor == "act");      // launched from the main thread
    CHECK(rt.calls[1].tensor == "actgrad");  // launched inside autograd's evaluate_function
    CHECK(rt.step_s == Approx(800e-6));      // first GPU work to last; the later launch left out
    // The compute resumed 10 us after the forward allreduce ended: a wait from the gap's start
    // (rank 0) or from the kernel's start when it came later (rank 1: 20 us later).
    CHECK(rt.compute_s == Approx(800e-6 - 100e-6 + r * 20e-6));
  }
  const auto free = replay(t, [](int, size_t) { return 0.0; });
  const auto own = traced_call_seconds(t);
  CHECK(own[0][0] == Approx(80e-6));  // rank 1's kernel started 20 us later: 320..400
  const auto traced = replay(t, [&](int r, size_t c) { return own[static_cast<size_t>(r)][c]; });
  CHECK(free[0] == Approx(720e-6));  // rank 0 waits for rank 1 to issue the forward allreduce
  CHECK(traced[0] == Approx(800e-6));

  json old = gpu_rank(0);  // an NCCL kernel without the collective's args: an older schema
  for (auto& e : old["traceEvents"])
    if (e["cat"] == "kernel" && e["name"].get<std::string>().rfind("nccl", 0) == 0) e["args"].erase("Collective name");
  const std::string msg = error_of({tmp.write("old-gpu.json", old), files[1]});
  INFO(msg);
  CHECK(msg.find("old-gpu.json: ncclDevKernel_AllReduce_Sum_f32_RING_LL at 200 us into the step's GPU work: an NCCL "
                 "kernel without 'Collective name'") != std::string::npos);
}

TEST_CASE("trace: a value not of the profiler's form gets one line naming the file, the event and the key",
          "[workload][trace]") {
  TempDir tmp;
  const std::string ok1 = tmp.write("g1.json", gpu_rank(1));
  REQUIRE(error_of({tmp.write("g0.json", gpu_rank(0)), ok1}).empty());
  // Each case changes every NCCL kernel of rank 0's trace (or its step) and expects the error.
  struct Case {
    const char* name;
    std::function<void(json&)> change;  // of an NCCL kernel event
    const char* expect;
  };
  const std::string at = "ncclDevKernel_AllReduce_Sum_f32_RING_LL at 200 us into the step's GPU work: ";
  const std::vector<Case> cases{
      {"negative", [](json& e) { e["args"]["In msg nelems"] = -5; }, "'In msg nelems' is -5, not a count of elements"},
      {"fraction", [](json& e) { e["args"]["In msg nelems"] = 3.5; }, "'In msg nelems' is 3.5, not a count of elements"},
      {"string", [](json& e) { e["args"]["In msg nelems"] = "1024"; }, "'In msg nelems' is \"1024\", not a count"},
      {"null", [](json& e) { e["args"]["In msg nelems"] = nullptr; }, "no 'In msg nelems' (a count of elements)"},
      {"other count", [](json& e) { e["args"]["Out msg nelems"] = -1; }, "'Out msg nelems' is -1, not a count"},
      {"overflow", [](json& e) { e["args"]["In msg nelems"] = uint64_t{1} << 63; },
       "9223372036854775808 elements of 4 bytes pass 2^64 bytes"},
      {"dtype", [](json& e) { e["args"]["dtype"] = 7; }, "'dtype' is 7, not a string"},
      {"collective", [](json& e) { e["args"]["Collective name"] = 7; }, "'Collective name' is 7, not a string"},
      {"ranks", [](json& e) { e["args"]["Process Group Ranks"] = "[0; 1]"; },
       "rank list '[0; 1]' is not of the form [0, 1, ...]"},
      {"rank", [](json& e) { e["args"]["Process Group Ranks"] = json::array({0, -1}); }, "rank list [0,-1]: -1 is not a rank"},
      {"time", [](json& e) { e["dur"] = -1; }, "an NCCL kernel without a time (ts 300.0, dur -1)"},
      {"correlation", [](json& e) { e["args"]["correlation"] = "2"; },
       "an NCCL kernel without an integer 'correlation' in its args"},
      {"name", [](json& e) { e["name"] = 5; }, "'name' is 5, not a string"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    json j = gpu_rank(0);
    for (auto& e : j["traceEvents"])
      if (e["cat"] == "kernel" && e["name"].get<std::string>().rfind("nccl", 0) == 0) c.change(e);
    const std::string file = tmp.write(std::string("bad-") + c.name + ".json", j);
    const std::string msg = error_of({file, ok1});
    INFO(msg);
    CHECK(msg.find(file + ": ") == 0);
    CHECK(msg.find(c.expect) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
    if (std::string(c.name) == "negative") CHECK(msg.find(at) != std::string::npos);  // the event, by its time
  }
  // A rank list as an array is read as the string form is.
  json arr = gpu_rank(0);
  for (auto& e : arr["traceEvents"])
    if (e["args"].contains("Process Group Ranks")) e["args"]["Process Group Ranks"] = json::array({0, 1});
  CHECK(error_of({tmp.write("array.json", arr), ok1}).empty());
  // The step's own event without a thread: nothing can be told to be on its thread.
  json nostep = gpu_rank(0);
  for (auto& e : nostep["traceEvents"])
    if (e["name"] == "ProfilerStep#1") e.erase("tid");
  const std::string msg = error_of({tmp.write("no-tid.json", nostep), ok1});
  CHECK(msg.find("no-tid.json: ProfilerStep#1: no pid and tid") != std::string::npos);
}

TEST_CASE("trace: record_param_comms events on the CPU", "[workload][trace]") {
  TempDir tmp;
  std::vector<std::string> files;
  for (int rank = 0; rank < 2; ++rank) files.push_back(tmp.write("c" + std::to_string(rank) + ".json", test::cpu_rank(rank)));
  const TraceJob t = load_trace(files, {});
  for (const auto& r : t.ranks) {
    REQUIRE(r.calls.size() == 1);  // the wait pseudo-call is skipped
    CHECK(r.calls[0].collective == sched::Collective::AllGather);
    CHECK(r.calls[0].bytes == 1024);  // the output: 512 bf16 elements
    CHECK(r.calls[0].dtype == DType::BF16);
    CHECK(r.calls[0].tensor == "param");
    CHECK(r.step == "ProfilerStep#7");
  }
  CHECK(t.groups.at(0).ranks == std::vector<int>{0, 1});
}

TEST_CASE("trace: a call on a group outside the job or without its rank is named with its time", "[workload][trace]") {
  TempDir tmp;
  auto job = [&](const std::string& ranks0) {  // rank 0 gives its allgather's group as ranks0
    std::vector<std::string> files;
    for (int rank = 0; rank < 2; ++rank) {
      json ev = json::array();
      auto x = [&](const char* cat, const std::string& name, double ts, double dur, json args) {
        ev.push_back(trace_event(cat, name, ts, dur, 5, 1, args));
      };
      x("user_annotation", "ProfilerStep#7", 1000, 400, json::object());
      x("cpu_op", "aten::mm", 1000, 100, json::object());
      x("cpu_op", "record_param_comms", 1250, 10,
        {{"Collective name", "allgather"}, {"In msg nelems", 256}, {"Out msg nelems", 512}, {"dtype", "BFloat16"},
         {"Process Group Ranks", rank == 0 ? ranks0 : "[0, 1]"}});
      files.push_back(tmp.write("p" + std::to_string(rank) + ".json",
                                {{"distributedInfo", {{"backend", "gloo"}, {"rank", rank}, {"world_size", 2}}},
                                 {"traceEvents", ev}}));
    }
    return files;
  };
  CHECK(error_of(job("[0, 1]")).empty());
  CHECK(error_of(job("[0, 5]")).find("p0.json: allgather at 250 us into the step: group rank 5 is outside the job of 2 "
                                     "ranks") != std::string::npos);
  CHECK(error_of(job("[1]")).find("p0.json: allgather at 250 us into the step: its group [1] does not hold this rank (0)") !=
        std::string::npos);
}

TEST_CASE("trace: scale_dp refuses a group the layout does not name, with its first call", "[workload][trace]") {
  TraceJob t = load_trace(files_of(kTraces + "/ddp-tp2-dp2", 4), {0, 2, 1});
  REQUIRE(scale_data_parallel(t, 2).world == 8);
  // load_trace refuses such a group; a job built otherwise may still carry one.
  const size_t g = t.ranks[0].calls[0].group;
  REQUIRE(t.groups[g].ranks == std::vector<int>{0, 1});
  t.groups[g].label = "group";
  try {
    scale_data_parallel(t, 2);
    FAIL("the unnamed group was scaled");
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("ddp-tp2-dp2/rank0.json: scale_dp: c10d::allreduce_ at ") != std::string::npos);
    CHECK(msg.find("us into the step: its group of ranks [0,1] is none of the tp, dp, pp or world groups of the layout "
                   "dp 2 x tp 2 x pp 1") != std::string::npos);
  }
}

TEST_CASE("trace: one rank's trace stands for every rank of an SPMD job (spmd)", "[workload][trace]") {
  // The bundled tp 2 x dp 2 job is SPMD: any one of its traces, with spmd, gives every rank the
  // calls the job made (collectives, sizes, kinds and the very groups), and that rank's compute.
  const auto all = files_of(kTraces + "/ddp-tp2-dp2", 4);
  const TraceJob full = load_trace(all, {0, 2, 1});
  for (int given : {0, 3}) {
    CAPTURE(given);
    const TraceJob one = load_trace({all[static_cast<size_t>(given)]}, {0, 2, 1}, -1, true);
    REQUIRE(one.world == 4);
    REQUIRE(one.ranks.size() == 4);
    for (int r = 0; r < 4; ++r) {
      CAPTURE(r);
      const auto& a = full.ranks[static_cast<size_t>(r)].calls;
      const auto& b = one.ranks[static_cast<size_t>(r)].calls;
      REQUIRE(b.size() == a.size());
      for (size_t c = 0; c < a.size(); ++c) {
        CHECK(b[c].collective == a[c].collective);
        CHECK(b[c].bytes == a[c].bytes);
        CHECK(b[c].kind == a[c].kind);
        CHECK(one.groups[b[c].group].ranks == full.groups[a[c].group].ranks);
      }
      CHECK(one.ranks[static_cast<size_t>(r)].compute_s == one.ranks[static_cast<size_t>(given)].compute_s);
    }
  }
  const auto error_of = [](const std::vector<std::string>& files, bool spmd) -> std::string {
    try {
      load_trace(files, {0, 2, 1}, -1, spmd);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return {};
  };
  CHECK(error_of({all[0], all[1]}, true).find("spmd: one rank's trace stands for every rank; 2 files given") !=
        std::string::npos);
  CHECK(error_of({all[0]}, false).find("no trace of rank 1, 2, 3 (give one file per rank, or one with spmd: true)") !=
        std::string::npos);
}
