// shared/report/model_check.h — compcoll-run's check of the simulator against what it measured:
// every row carries the model's time (Row::model_s); per cell, whether the model ranks the
// plans as they were measured and each policy's measured regret; over the run, the model's
// error, and how much slower or faster the rows' kernels ran than their calibration says
// (the part of the error the kernel calibration explains). docs/compcoll-run.md ("Predicted beside measured") explains the figures.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "report/row.h"

namespace compcoll::report {

// Two plans' measured times "differ" when the slower is more than this much slower.
constexpr double kRankingTolerance = 0.10;
// Kernels this many times slower or faster than their calibration get a warning: compcoll-run's
// kernel check before the first row, and the run's kernels over all its rows (summary()).
constexpr double kKernelWarning = 1.3;

struct CellVerdict {
  std::string label;              // "allreduce ring 1048576"
  std::string fastest;            // the fastest measured plan ("ring none gauss-exp")
  double fastest_s = 0;
  std::string model_fastest;      // the plan the model ranks fastest (empty: no row has a model)
  double model_pick_regret = 0;   // its measured time / the fastest's - 1
  int pairs = 0, agree = 0;       // plan pairs whose measured times differ (kRankingTolerance), and
                                  // those of them the model orders the same way
  std::map<std::string, double> regret;  // per policy but static: its row's measured regret
};

class ModelCheck {
 public:
  // The rows of the current cell, in any order (the library's row and failed rows are
  // ignored; for the ranking, rows of the same plan count once, the faster measurement; a
  // policy's regret is its own row's time against the cell's fastest).
  void add(const Row& row);
  // Judges the cell's rows added since the last call, and starts the next cell.
  CellVerdict close_cell();
  // One comment line per cell.
  static std::string cell_line(const CellVerdict& v);
  // The run's summary: comment lines (model error, ranking, regrets).
  std::string summary() const;
  nlohmann::json to_json() const;

 private:
  std::vector<Row> cell_;                     // one row per plan, the faster measurement
  std::map<std::string, double> policy_time_;  // the cell's policy rows: their measured time
  std::vector<CellVerdict> verdicts_;
  struct Err {
    std::string label;
    uint64_t size;
    double err;
  };
  std::vector<Err> errors_;  // every row with a model
  std::vector<Err> kernels_;  // every row with a kernel factor (Row::kernel_factor - 1 as err)
  // The errors of every row with a model, and of those of 1 MiB and more.
  std::pair<std::vector<double>, std::vector<double>> split_errors() const;
  // The geometric mean of the kernel factors (signed: the kernels' own speed against their
  // calibration), over every row or over rows of 1 MiB and more; NAN for none.
  double kernel_geomean(bool large_only = false) const;
};

}  // namespace compcoll::report
