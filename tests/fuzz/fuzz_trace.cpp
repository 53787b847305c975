// tests/fuzz/fuzz_trace.cpp — libFuzzer target for the PyTorch profiler trace reader and its
// replay (shared/workload/trace.h), built with AddressSanitizer and UndefinedBehaviorSanitizer.
// The input is one or two trace files, whatever their bytes: the reader must return a job or
// throw std::runtime_error with one line, never crash, hang, throw another kind of exception
// (a JSON library's, say) or return a job its replay cannot run. A job it returns is replayed
// as traced and with free calls, and scaled to twice its data parallelism and replayed again.
//
// Each input is bounded work: a file whose world_size passes kMaxWorld is skipped (the reader's
// own bound, kMaxTraceRanks, is its unit tests'), since one rank's trace standing for a world of
// a million ranks (spmd) is legitimate work that grows with the world, not a defect.
// FUZZ_TRACE_VERBOSE=1 prints what became of each input (to read a saved input by hand).
//
// Input: byte 0 holds the options (bit 0: spmd; bit 1: two files, split at the first NUL byte;
// bit 2: tp = 2; bit 3: a step asked for, byte 1 mod 4); the rest is the file or files.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "workload/trace.h"
#include "../workload/trace_jobs.h"  // replay_problem

using namespace compcoll;
using namespace compcoll::workload;

namespace {

constexpr int64_t kMaxWorld = 64;

// Whether the bytes are a JSON document whose distributedInfo.world_size is a number above
// kMaxWorld (a document that does not parse is the reader's to refuse).
bool too_large(const uint8_t* data, size_t size) {
  const nlohmann::json doc = nlohmann::json::parse(data, data + size, nullptr, false);
  if (!doc.is_object()) return false;
  const auto di = doc.find("distributedInfo");
  if (di == doc.end() || !di->is_object()) return false;
  const auto w = di->find("world_size");
  return w != di->end() && w->is_number() && !(w->get<double>() <= kMaxWorld);
}

std::string write_file(int index, const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const char* t = std::getenv("TMPDIR");
    return std::string(t && *t ? t : "/tmp");
  }();
  const std::string path = dir + "/fuzz-trace-" + std::to_string(::getpid()) + "-" + std::to_string(index) + ".json";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

[[noreturn]] void fault(const std::string& what) {
  std::fprintf(stderr, "fuzz_trace: %s\n", what.c_str());
  std::abort();
}

void check_replay(const TraceJob& job) {
  if (const std::string problem = test::replay_problem(job); !problem.empty()) fault(problem);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t options = data[0];
  const bool spmd = options & 1, two = options & 2;
  TraceLayout layout;
  layout.tp = options & 4 ? 2 : 1;
  const int step = options & 8 ? data[1] % 4 : -1;
  data += 2;
  size -= 2;
  size_t split = size;
  if (two) {
    split = 0;
    while (split < size && data[split] != 0) ++split;
  }
  const size_t second = std::min(split + 1, size);
  if (too_large(data, split) || (two && too_large(data + second, size - second))) return 0;
  std::vector<std::string> files{write_file(0, data, split)};
  if (two) files.push_back(write_file(1, data + second, size - second));
  try {
    const TraceJob job = load_trace(files, layout, step, spmd);
    check_replay(job);
    check_replay(scale_data_parallel(job, 2));
    if (std::getenv("FUZZ_TRACE_VERBOSE")) std::fprintf(stderr, "read: %d ranks\n", job.world);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (std::getenv("FUZZ_TRACE_VERBOSE")) std::fprintf(stderr, "refused: %s\n", what.c_str());
    if (what.empty() || what.find('\n') != std::string::npos) fault("an error that is not one line: " + what);
  } catch (const std::exception& e) {
    fault(std::string("an exception that is not a runtime_error: ") + e.what());
  }
  for (const auto& f : files) std::remove(f.c_str());
  return 0;
}
