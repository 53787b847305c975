// tests/report/test_model_check.cpp — compcoll-run's check of the model against measured rows
// (shared/report/model_check.h): the ranking per cell, the policies' measured regret, the
// model's error over the run, the kernels' measured time against their calibration; and kernel
// times a row has not measured, written as no figure.
#include <catch2/catch.hpp>

#include <cmath>

#include "report/model_check.h"
#include "report/row.h"

using namespace compcoll::report;

namespace {

Row row(const std::string& algorithm, const std::string& codec, double time_us, double model_us,
        const std::string& policy = "static", uint64_t size = 1 << 20) {
  Row r;
  r.collective = "allreduce";
  r.algorithm = algorithm;
  r.placement = "none";
  r.codec = codec;
  r.size = size;
  r.policy = policy;
  r.time_s = time_us * 1e-6;
  r.model_s = model_us * 1e-6;
  return r;
}

}  // namespace

TEST_CASE("model check: the model's pick, pairs ordered as measured, each policy's measured regret", "[report]") {
  ModelCheck check;
  Row lib = row("MPI_Allreduce", "identity", 50, NAN);
  lib.library = true;
  check.add(lib);                                         // the library's row: not a plan
  check.add(row("ring", "identity", 100, 90));            // measured fastest
  check.add(row("ring", "gauss-exp", 150, 80));           // the model's fastest: measured +50%
  check.add(row("recursive", "identity", 105, 120));      // within 10% of ring: no pair with it
  check.add(row("ring", "gauss-exp", 160, 80, "adaptive"));  // the same plan as a static row
  check.add(row("recursive", "identity", 104, 120, "nccl-like"));
  const CellVerdict v = check.close_cell();
  CHECK(v.fastest == "ring none identity");
  CHECK(v.fastest_s == Approx(100e-6));
  CHECK(v.model_fastest == "ring none gauss-exp");
  CHECK(v.model_pick_regret == Approx(0.5));
  // Pairs whose measured times differ by more than 10%: ring/gauss-exp against each identity
  // plan; the model orders both the wrong way.
  CHECK(v.pairs == 2);
  CHECK(v.agree == 0);
  // A policy's regret is its own row's time.
  CHECK(v.regret.at("adaptive") == Approx(0.6));
  CHECK(v.regret.at("nccl-like") == Approx(0.04));
  CHECK_THAT(ModelCheck::cell_line(v), Catch::Contains("the model's fastest ring none gauss-exp measured +50.0%"));

  check.add(row("ring", "identity", 200, 190, "static", 1 << 16));
  check.add(row("recursive", "identity", 400, 300, "adaptive", 1 << 16));
  const CellVerdict w = check.close_cell();
  CHECK(w.model_fastest == w.fastest);
  CHECK(w.pairs == 1);
  CHECK(w.agree == 1);
  CHECK(w.regret.at("adaptive") == Approx(1.0));

  const std::string s = check.summary();
  // Errors: -10%, -46.7%, +14.3%, -50%, +15.4% (1 MiB rows) and -5%, -25% (64 KiB rows).
  const double logs[] = {std::log(0.9), std::log(80.0 / 150), std::log(120.0 / 105), std::log(0.5), std::log(120.0 / 104),
                         std::log(0.95), std::log(0.75)};
  double sum = 0;
  for (double l : logs) sum += std::fabs(l);
  const double geomean = std::exp(sum / 7) - 1;
  CHECK(check.to_json()["geomean_abs_err"].get<double>() == Approx(geomean));
  CHECK(check.to_json()["rows_with_model"] == 7);
  CHECK_THAT(s, Catch::Contains("# model: 7 rows"));
  CHECK_THAT(s, Catch::Contains("2/5 within 15%"));
  CHECK_THAT(s, Catch::Contains("worst -50.0%: allreduce ring none gauss-exp 1048576 (adaptive)"));
  CHECK_THAT(s, Catch::Contains("measured fastest in 1/2 cells"));
  CHECK_THAT(s, Catch::Contains("1/3 ordered as measured"));
  CHECK_THAT(s, Catch::Contains("adaptive mean 0.800, max 1.000 (fastest in 0/2)"));
  CHECK_THAT(s, !Catch::Contains("# kernels"));  // no row has a kernel time (a GPU run)
  CHECK(check.to_json()["kernel_factor_geomean"].is_null());
}

TEST_CASE("model check: the kernels' measured time against their calibration", "[report]") {
  ModelCheck check;
  Row a = row("ring", "gauss-exp", 100, 80);
  a.codec_s = 30e-6, a.reduce_s = 10e-6, a.copy_s = 5e-6, a.model_kernel_s = 30e-6;  // 1.5x
  Row b = row("ring", "identity", 100, 90, "static", 1 << 16);
  b.reduce_s = 8e-6, b.model_kernel_s = 10e-6;  // 0.8x
  Row c = row("recursive", "identity", 100, 90);
  c.reduce_s = 8e-6;  // no calibrated kernel time: not counted
  CHECK(a.kernel_factor() == Approx(1.5));
  CHECK(std::isnan(c.kernel_factor()));
  check.add(a), check.add(b), check.add(c);
  check.close_cell();
  const double both = std::sqrt(1.5 * 0.8);
  CHECK(check.to_json()["kernel_factor_geomean"].get<double>() == Approx(both));
  const std::string s = check.summary();
  CHECK_THAT(s, Catch::Contains("# kernels: the rows' compress, decompress, reduce and copy ops took 1.10x their "
                                "calibrated time (geometric mean over 2 rows; rows of 1 MiB and more: 1.50x; from 0.80x, "
                                "allreduce ring none identity 65536 (static), to 1.50x, allreduce ring none gauss-exp "
                                "1048576 (static))"));
  CHECK_THAT(s, !Catch::Contains("# WARNING"));  // 1.10x: within the kernel check's 1.3x
  // Over the run 1.3x or more from the calibration (a loaded machine, a VM's slow spell): said.
  ModelCheck slow;
  Row d = row("ring", "gauss-exp", 100, 80);
  d.codec_s = 60e-6, d.model_kernel_s = 40e-6;  // 1.5x
  slow.add(d);
  slow.close_cell();
  const std::string w = slow.summary();
  CHECK_THAT(w, Catch::Contains("x their calibrated time (geometric mean over 1 rows"));
  CHECK_THAT(w, Catch::Contains("\n# WARNING: over the run the kernels took 1.50x the calibration's time, where the "
                                "kernel check before the first row allows 1.3x either way"));
  ModelCheck fast;
  d.codec_s = 20e-6;  // 0.5x
  fast.add(d);
  fast.close_cell();
  CHECK_THAT(fast.summary(), Catch::Contains("# WARNING: over the run the kernels took 0.50x"));
}

TEST_CASE("model check: no row with a model says so", "[report]") {
  ModelCheck check;
  check.add(row("ring", "identity", 100, NAN));
  check.close_cell();
  CHECK_THAT(check.summary(), Catch::Contains("no row has a model time"));
}

// A row whose kernels were not timed (compcoll-run on GPUs: NAN) writes no figure for them, in
// JSON (null), CSV (an empty field) and the table ("-"), and leaves the kernel check; a timed
// row writes its figures.
TEST_CASE("rows: kernel times not measured are no figure, not 0", "[report]") {
  Row gpu = row("ring", "gauss-exp", 100, 90);
  gpu.backend = "nccl";
  gpu.codec_s = gpu.reduce_s = gpu.copy_s = NAN;
  gpu.model_kernel_s = 20e-6;
  const auto j = to_json(gpu);
  CHECK(j["codec_us"].is_null());
  CHECK(j["reduce_us"].is_null());
  CHECK(j["copy_us"].is_null());
  CHECK(std::isnan(gpu.kernel_factor()));
  CHECK(csv_line(gpu).find(",,") != std::string::npos);
  CHECK(table_line(gpu, Table::Run).find(" - ") != std::string::npos);
  Row host = row("ring", "gauss-exp", 100, 90);
  host.backend = "mpi";
  host.codec_s = 10e-6, host.reduce_s = 5e-6, host.copy_s = 1e-6;
  const auto h = to_json(host);
  CHECK(h["codec_us"].get<double>() == Approx(10));
  CHECK(h["copy_us"].get<double>() == Approx(1));
  CHECK(csv_line(host).find("10.000,5.000") != std::string::npos);
}
