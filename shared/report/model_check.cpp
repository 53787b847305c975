// shared/report/model_check.cpp — see model_check.h.
#include "report/model_check.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "report/report.h"

namespace compcoll::report {

namespace {

std::string plan_of(const Row& r) { return r.algorithm + " " + r.placement + " " + r.codec; }

std::string percent(double v) { return (v >= 0 ? "+" : "") + fixed(100 * v, 1) + "%"; }

// exp(mean |ln(1 + e)|) - 1: the geometric mean of the model's factor off, either way.
double geomean_abs(const std::vector<double>& errs) {
  if (errs.empty()) return NAN;
  double s = 0;
  for (double e : errs) s += std::fabs(std::log1p(e));
  return std::exp(s / static_cast<double>(errs.size())) - 1;
}

}  // namespace

void ModelCheck::add(const Row& row) {
  if (row.library || !row.error.empty() || !(row.time_s > 0)) return;
  if (row.policy != "static") policy_time_[row.policy] = row.time_s;
  const std::string label = row.collective + " " + row.algorithm + " " + row.placement + " " + row.codec + " " +
                            std::to_string(row.size) + " (" + row.policy + ")";
  if (std::isfinite(row.model_err())) errors_.push_back({label, row.size, row.model_err()});
  if (std::isfinite(row.kernel_factor()) && row.kernel_factor() > 0)
    kernels_.push_back({label, row.size, row.kernel_factor() - 1});
  for (Row& r : cell_)
    if (plan_of(r) == plan_of(row)) {  // the same plan measured twice (a policy chose a static plan)
      if (row.time_s < r.time_s) r.time_s = row.time_s;
      return;
    }
  cell_.push_back(row);
}

CellVerdict ModelCheck::close_cell() {
  CellVerdict v;
  if (cell_.empty()) return v;
  v.label = cell_[0].collective + " " + std::to_string(cell_[0].size);
  const auto fastest = std::min_element(cell_.begin(), cell_.end(), [](const Row& a, const Row& b) { return a.time_s < b.time_s; });
  v.fastest = plan_of(*fastest);
  v.fastest_s = fastest->time_s;
  const Row* pick = nullptr;
  for (const Row& r : cell_)
    if (std::isfinite(r.model_s) && (!pick || r.model_s < pick->model_s)) pick = &r;
  if (pick) {
    v.model_fastest = plan_of(*pick);
    v.model_pick_regret = pick->time_s / v.fastest_s - 1;
  }
  for (size_t i = 0; i < cell_.size(); ++i)
    for (size_t j = i + 1; j < cell_.size(); ++j) {
      const Row &a = cell_[i], &b = cell_[j];
      if (!std::isfinite(a.model_s) || !std::isfinite(b.model_s)) continue;
      if (std::max(a.time_s, b.time_s) <= (1 + kRankingTolerance) * std::min(a.time_s, b.time_s)) continue;
      ++v.pairs;
      v.agree += (a.time_s < b.time_s) == (a.model_s < b.model_s);
    }
  for (const auto& [p, t] : policy_time_) v.regret[p] = t / v.fastest_s - 1;
  verdicts_.push_back(v);
  cell_.clear();
  policy_time_.clear();
  return v;
}

std::string ModelCheck::cell_line(const CellVerdict& v) {
  if (v.label.empty()) return "";
  std::string s = "#   " + v.label + ": fastest measured " + v.fastest + " (" + fixed(v.fastest_s * 1e6, 2) + " us)";
  if (!v.model_fastest.empty())
    s += v.model_fastest == v.fastest ? "; the model's fastest too"
                                      : "; the model's fastest " + v.model_fastest + " measured " + percent(v.model_pick_regret);
  if (v.pairs) s += "; pairs ordered as measured " + std::to_string(v.agree) + "/" + std::to_string(v.pairs);
  for (const auto& [p, r] : v.regret) s += "; " + p + " regret " + fixed(r, 3);
  return s + "\n";
}

std::pair<std::vector<double>, std::vector<double>> ModelCheck::split_errors() const {
  std::vector<double> all, large;
  for (const Err& e : errors_) {
    all.push_back(e.err);
    if (e.size >= (1u << 20)) large.push_back(e.err);
  }
  return {all, large};
}

double ModelCheck::kernel_geomean(bool large_only) const {
  double sum = 0;
  size_t n = 0;
  for (const Err& k : kernels_)
    if (!large_only || k.size >= (1u << 20)) sum += std::log1p(k.err), ++n;
  return n ? std::exp(sum / static_cast<double>(n)) : NAN;
}

std::string ModelCheck::summary() const {
  std::ostringstream o;
  const auto [all, large] = split_errors();
  const Err* worst = nullptr;
  int large_within = 0;
  for (const Err& e : errors_)
    if (!worst || std::fabs(std::log1p(e.err)) > std::fabs(std::log1p(worst->err))) worst = &e;
  for (double e : large) large_within += std::fabs(e) <= 0.15;
  if (!worst) {
    o << "# model: no row has a model time\n";
    return o.str();
  }
  o << "# model: " << all.size() << " rows, geometric-mean error " << fixed(100 * geomean_abs(all), 1) << "%";
  if (!large.empty())
    o << "; rows of 1 MiB and more: " << fixed(100 * geomean_abs(large), 1) << "%, " << large_within << "/" << large.size()
      << " within 15%";
  o << "; worst " << percent(worst->err) << ": " << worst->label << "\n";
  if (!kernels_.empty()) {
    const auto [lo, hi] =
        std::minmax_element(kernels_.begin(), kernels_.end(), [](const Err& a, const Err& b) { return a.err < b.err; });
    o << "# kernels: the rows' compress, decompress, reduce and copy ops took " << fixed(kernel_geomean(), 2)
      << "x their calibrated time (geometric mean over " << kernels_.size() << " rows";
    if (std::isfinite(kernel_geomean(true))) o << "; rows of 1 MiB and more: " << fixed(kernel_geomean(true), 2) << "x";
    o << "; from " << fixed(1 + lo->err, 2) << "x, " << lo->label << ", to " << fixed(1 + hi->err, 2) << "x, " << hi->label
      << "): that much of the model's error is the kernel calibration's\n";
    const double k = kernel_geomean();
    if (k >= kKernelWarning || k <= 1 / kKernelWarning)
      o << "# WARNING: over the run the kernels took " << fixed(k, 2)
        << "x the calibration's time, where the kernel check before the first row allows "
        << fixed(kKernelWarning, 1) << "x either way: the "
           "machine ran them unlike when they were calibrated (another load, or a slow spell of a shared VM: "
           "docs/compcoll-run.md), and the model column then judges the calibration more than the model: "
           "calibrate and run again on a quiet machine\n";
  }
  int cells = 0, picked = 0, close = 0, pairs = 0, agree = 0;
  std::map<std::string, std::vector<double>> regrets;
  for (const CellVerdict& v : verdicts_) {
    if (v.model_fastest.empty()) continue;
    ++cells;
    picked += v.model_fastest == v.fastest;
    close += v.model_pick_regret <= kRankingTolerance;
    pairs += v.pairs, agree += v.agree;
    regrets["the model's pick"].push_back(v.model_pick_regret);
    for (const auto& [p, r] : v.regret) regrets[p].push_back(r);
  }
  o << "# ranking: the model's fastest plan was measured fastest in " << picked << "/" << cells << " cells, within "
    << fixed(100 * kRankingTolerance, 0) << "% of it in " << close << "/" << cells << "; plan pairs whose measured times differ by more than "
    << fixed(100 * kRankingTolerance, 0) << "%: " << agree << "/" << pairs << " ordered as measured\n";
  o << "# measured regret (time / the cell's fastest measured plan - 1):";
  for (const auto& [p, v] : regrets) {
    double sum = 0, mx = 0;
    int zero = 0;
    for (double r : v) sum += r, mx = std::max(mx, r), zero += r == 0;
    o << " " << p << " mean " << fixed(sum / static_cast<double>(v.size()), 3) << ", max " << fixed(mx, 3) << " (fastest in "
      << zero << "/" << v.size() << ");";
  }
  o << "\n";
  return o.str();
}

nlohmann::json ModelCheck::to_json() const {
  nlohmann::json cells = nlohmann::json::array();
  for (const CellVerdict& v : verdicts_)
    cells.push_back({{"cell", v.label}, {"fastest", v.fastest}, {"fastest_us", v.fastest_s * 1e6},
                     {"model_fastest", v.model_fastest}, {"model_pick_regret", v.model_pick_regret}, {"pairs", v.pairs},
                     {"pairs_agree", v.agree}, {"regret", v.regret}});
  const auto [all, large] = split_errors();
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"rows_with_model", all.size()}, {"geomean_abs_err", num(geomean_abs(all))},
          {"geomean_abs_err_1mib", num(geomean_abs(large))}, {"ranking_tolerance", kRankingTolerance}, {"cells", cells},
          {"kernel_factor_geomean", num(kernel_geomean())}};
}

}  // namespace compcoll::report
