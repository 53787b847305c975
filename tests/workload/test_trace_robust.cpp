// tests/workload/test_trace_robust.cpp — damaged traces never crash the trace reader, slip
// through with another kind of error or give a job its replay cannot run: in small jobs of the
// three schemas (tests/workload/trace_jobs.h), every value of rank 0's trace, one at a time, is
// replaced by each of a list of odd values (numbers past int, fractions, negatives, strings,
// empty and nested containers) or deleted. The reader must refuse the pair of files with one
// printable line that starts with a file's name, or return a job of the world size and rank
// the trace says whose replay (as traced, with free calls, and scaled to twice its data
// parallelism) ends every rank at a finite time >= 0.
// (Deterministic: the structured mutations that libFuzzer's byte mutations rarely reach.)
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <unistd.h>
#include <vector>

#include "util/text.h"
#include "workload/trace.h"
#include "workload/trace_jobs.h"

using namespace compcoll;
using namespace compcoll::workload;
using nlohmann::json;

namespace {

const std::vector<json>& odd_values() {
  static const std::vector<json> v{
      nullptr, true, 0, -1, 1.5, -1e308, 1e308,
      uint64_t{4294967298},  // 2^32 + 2: read as 2 by a cast to int
      uint64_t{1} << 63, std::numeric_limits<uint64_t>::max(), std::numeric_limits<int64_t>::min(),
      2000000000,  // a world of two billion ranks
      "", "x", "[0, 1]", "-1", json::array(), json::object(), json::array({nullptr}), json::array({0, -1}),
      json::object({{"a", 1}})};
  return v;
}

// Every value of the document, by its JSON pointer (the document itself left out).
void pointers(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) {
      out.push_back(at / it.key());
      pointers(it.value(), at / it.key(), out);
    }
  else if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i) {
      out.push_back(at / i);
      pointers(j[i], at / i, out);
    }
}

// The world size and rank 0's rank as its trace says (a number not cut short: 2^32 + 2 ranks
// are not 2).
bool read_as_written(const TraceJob& job, const json& doc, const std::string& path) {
  const auto di = doc.find("distributedInfo");
  if (di == doc.end() || !di->is_object() || json(job.world) != di->value("world_size", json())) return false;
  for (const RankTrace& rt : job.ranks)
    if (rt.file == path && json(rt.rank) != di->value("rank", json())) return false;
  return true;
}

struct Tally {
  int loaded = 0, refused = 0;
};

// Rank 0's trace as `doc`, rank 1's as written in `clean`: one line naming a file, or a job
// that replays.
void expect_sane(const json& doc, const std::string& path, const std::string& clean, const std::string& change,
                 Tally& tally) {
  std::ofstream(path) << doc.dump();
  try {
    const TraceJob job = load_trace({path, clean}, {});
    ++tally.loaded;
    if (!read_as_written(job, doc, path)) {
      CAPTURE(change, job.world);
      FAIL("a job the reader returned has another world size or rank than its trace says");
    }
    if (!test::replay_problem(job).empty() || !test::replay_problem(scale_data_parallel(job, 2)).empty()) {
      CAPTURE(change);
      FAIL("a job the reader returned does not replay to finite times >= 0");
    }
  } catch (const std::runtime_error& e) {
    ++tally.refused;
    const std::string msg = e.what();
    if ((msg.rfind(path + ": ", 0) != 0 && msg.rfind(clean + ": ", 0) != 0) || msg != printable(msg)) {
      CAPTURE(change, msg);
      FAIL("the error does not start with a file's name, or is not one printable line");
    }
  } catch (const std::exception& e) {
    CAPTURE(change, e.what());
    FAIL("a damaged trace gave an error that is not a runtime_error");
  }
}

void hammer(const std::string& name, const std::function<json(int)>& rank) {
  const auto dir = std::filesystem::temp_directory_path() / ("compcoll-trace-robust-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  struct Gone {  // the folder goes when the case ends, failed or not
    std::filesystem::path dir;
    ~Gone() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } gone{dir};
  const std::string path = (dir / (name + "0.json")).string(), clean = (dir / (name + "1.json")).string();
  std::ofstream(clean) << rank(1).dump();
  const json original = rank(0);
  std::ofstream(path) << original.dump();
  REQUIRE_NOTHROW(load_trace({path, clean}, {}));  // the undamaged job loads
  std::vector<json::json_pointer> at;
  pointers(original, json::json_pointer(), at);
  Tally tally;
  for (const auto& p : at) {
    for (const json& v : odd_values()) {
      json doc = original;
      doc[p] = v;
      expect_sane(doc, path, clean, p.to_string() + " = " + v.dump(), tally);
    }
    json doc = original;  // deleted
    doc[p.parent_pointer()].is_object() ? (void)doc[p.parent_pointer()].erase(p.back())
                                        : doc[p.parent_pointer()].erase(std::stoul(p.back()));
    expect_sane(doc, path, clean, "deleted " + p.to_string(), tally);
  }
  INFO(name << ": " << at.size() << " values, " << tally.loaded << " loads, " << tally.refused << " refusals");
  CHECK(tally.refused > 0);
  CHECK(tally.loaded > 0);
}

}  // namespace

TEST_CASE("trace: every value of a small job replaced by odd values or deleted: one line or a job that replays",
          "[workload][trace][robust]") {
  SECTION("NCCL kernels") { hammer("gpu", test::gpu_rank); }
  SECTION("record_param_comms") { hammer("cpu", test::cpu_rank); }
  SECTION("gloo") { hammer("gloo", test::gloo_rank); }
}
