// shared/report/row.h — one row of results, defined once for compcoll-sim and compcoll-run: a
// call at one size on one group, run by one plan (simulated or measured). Its columns, units,
// bus-bandwidth factor and JSON keys are here; both programs write their table, CSV and JSON
// through these functions (docs/compcoll-sim.md and docs/compcoll-run.md explain the columns).
// A column one program does not fill is empty in the CSV and null in the JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>

namespace compcoll::report {

struct Row {
  // The cell and the plan.
  std::string topology;
  int ranks = 0;
  int nodes = 0;                 // the nodes the ranks occupy (0 where no topology places them)
  std::string collective, algorithm, placement, codec, dtype, tensor;
  uint64_t size = 0, count = 0;  // nccl-tests "size" (bytes) and elements
  std::string policy = "static";
  size_t call = 0;               // calls.N of the experiment
  size_t cell = 0;               // the cell's index in the experiment's output order
  bool library = false;          // compcoll-run: the library's own collective (MPI's or NCCL's)
  // What it took.
  double time_s = 0;
  double ratio = 1;              // compressed / uncompressed
  std::string ratio_source;
  uint64_t wire_bytes = 0, raw_bytes = 0, messages = 0, ops = 0;
  double codec_s = 0, reduce_s = 0, wall_s = 0;
  double copy_s = 0;             // compcoll-run, host backend: time in copy ops (mean per rank)
  std::string error;
  std::string backend;           // simgrid | mpi | nccl
  std::string calibration;       // the kernel calibration's source (derived, measured, zero)
  // Derived within the cell.
  double speedup = NAN;          // over the static identity row of the cell
  double predicted_s = NAN;      // the policy's own estimate (adaptive: cost model; nccl-like: NCCL's)
  double nccl_model_s = NAN;     // nccl-like: NCCL's estimate for what NCCL would run (policy::Plan::nccl_s),
                                 // which is not the plan simulated where the row names another ([nccl nvls/simple])
  double model_s = NAN;          // compcoll-run: the cost model's time for the row's plan on the
                                 // experiment's topology and calibration (what compcoll-sim predicts)
  double model_err() const { return model_s / time_s - 1; }  // < 0: the model is faster than measured
  double model_kernel_s = NAN;   // compcoll-run: the calibrated time of the plan's compress, decompress,
                                 // reduce and copy ops, mean per rank (beside codec_s + reduce_s + copy_s)
  // Measured / calibrated kernel time (host backend rows with kernels); NAN otherwise.
  double kernel_factor() const {
    return model_kernel_s > 0 ? (codec_s + reduce_s + copy_s) / model_kernel_s : NAN;
  }
  double codec_exposed_s = NAN;  // the codec's exposed time in one call, the cost model's
                                 // (policy::exposed_codec_s); NAN where not computed
  size_t candidates = 0;         // compcoll-sim's oracle: plans simulated
  // compcoll-sim: what the reader must know of how the row ran (a plan that cannot run in step
  // groups, which compcoll-run refuses on NCCL, simulated ungrouped); empty otherwise.
  std::string note;
  double regret = NAN;           // compcoll-sim, with an oracle: time / the oracle's - 1
  // compcoll-run: correctness; lossy rows against the uncompressed output.
  bool checked = false;
  uint64_t wrong = 0;
  bool lossy = false;
  double max_abs = NAN, rel_l2 = NAN, snr_db = NAN;

  double algbw_gbps() const { return time_s > 0 ? static_cast<double>(size) / time_s / 1e9 : 0.0; }
  double busbw_gbps() const;  // algbw x nccl-tests' factor of the collective (bus_factor)
};

nlohmann::json to_json(const Row& row);
// The machine a results file was made on ({"cpu", "cores"}, report::this_host), read once.
nlohmann::json host_json();
// A results document as JSON text (indent as nlohmann::json::dump). A string that is not UTF-8
// (a path of other bytes, from the command line or a folder) has those bytes replaced by
// U+FFFD, so that writing what was computed never fails on it.
std::string json_text(const nlohmann::json& doc, int indent = -1);
// The CSV: one header for both programs, one line per row.
const char* csv_header();
std::string csv_line(const Row& row);

// The table on stdout, nccl-tests style. compcoll-sim's has a regret column when the
// experiment has an oracle; compcoll-run's has rel.err and #wrong.
enum class Table { Sim, SimRegret, Run };
std::string table_header(Table t);
std::string table_line(const Row& row, Table t);

// Speed-up over the cell's static uncompressed row: `record` every row in output order (the
// identity row comes first), then `apply` fills row.speedup.
class Speedups {
 public:
  void record(const Row& row);
  void apply(Row& row) const;

 private:
  static std::string key(const Row& row);
  std::map<std::string, double> identity_;
};

// "[compcoll-sim] 12/40 rows, 30%, 8 s elapsed" on stderr: redrawn on a terminal, every 10 s
// otherwise, and at the last row; nothing in the first 3 s.
class Progress {
 public:
  Progress(std::string program, size_t total);
  void row_done();

 private:
  std::string program_;
  size_t total_, done_ = 0;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace compcoll::report
