// real/edgc_run.cpp — see edgc_run.h.
#include "real/edgc_run.h"

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

#include "codec/codec.h"
#include "policy/entropy.h"
#include "real/watchdog.h"
#include "report/report.h"

namespace compcoll::real {

using nlohmann::json;

void lowrank_step(DataBackend& backend, int world, lowrank::LowRankState& state, Executor& ex_p, Executor& ex_q, DType dt,
                  const void* grad, float* out, double& local_s, std::vector<float>& p, std::vector<float>& q) {
  p.resize(state.rows * state.rank);
  q.resize(state.cols * state.rank);
  auto timed = [&](auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    local_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  timed([&] {
    lowrank::begin(state, dt, grad);
    lowrank::compute_p(state, p.data());
  });
  backend.upload(ex_p.input(), p.data(), p.size() * 4);
  ex_p.run();
  backend.download(p.data(), ex_p.output(), p.size() * 4);
  timed([&] {
    lowrank::orthonormalize(p.data(), state.rows, state.rank);
    lowrank::compute_q(state, p.data(), q.data());
  });
  backend.upload(ex_q.input(), q.data(), q.size() * 4);
  ex_q.run();
  backend.download(q.data(), ex_q.output(), q.size() * 4);
  timed([&] { lowrank::finish(state, p.data(), q.data(), world, out); });
  heartbeat();
}

namespace {

// Per step: the controller's rank and entropy estimate, the step's time, the uncompressed
// allreduce's, lowrank's local steps' share, the update's error (means over ranks).
struct Steps {
  std::vector<double> step_s, plain_s, local_s, error, bits;
  std::vector<uint32_t> chosen;
};

// The executors of P and Q per rank the controller chose (map nodes stay put).
struct Factors {
  sched::Schedule sp, sq;
  std::unique_ptr<Executor> p, q;
};

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Steps measure_steps(const EntropyRun& run) {
  const GradientTrace& tr = *run.trace;
  const auto& cfg = run.exp->run.entropy->config;
  const uint64_t n = tr.rows * tr.cols;
  const DType dt = tr.data.dtype;
  ExecutorOptions opt;
  opt.codec = find_codec("identity");
  opt.lockstep = run.lockstep;
  const sched::Schedule full_s = sched::build_schedule(run.spec(dt, n));
  Executor full(full_s, run.rank, *run.transport, *run.backend, opt);
  full.run();  // warm-up: connections and buffers
  std::map<uint32_t, Factors> factors;
  auto factors_for = [&](uint32_t r) -> Factors& {
    auto [it, fresh] = factors.try_emplace(r);
    Factors& f = it->second;
    if (fresh) {
      f.sp = sched::build_schedule(run.spec(DType::FP32, tr.rows * r));
      f.sq = sched::build_schedule(run.spec(DType::FP32, tr.cols * r));
      f.p = std::make_unique<Executor>(f.sp, run.rank, *run.transport, *run.backend, opt);
      f.q = std::make_unique<Executor>(f.sq, run.rank, *run.transport, *run.backend, opt);
      f.p->run();
      f.q->run();
    }
    return f;
  };
  policy::EntropyController controller(cfg);
  std::optional<lowrank::LowRankState> state;
  std::vector<float> update(n), p, q;
  Steps st{std::vector<double>(tr.steps), std::vector<double>(tr.steps), std::vector<double>(tr.steps, 0.0),
           std::vector<double>(tr.steps, 0.0), std::vector<double>(tr.steps, NAN), std::vector<uint32_t>(tr.steps)};
  for (uint64_t s = 0; s < tr.steps; ++s) {
    set_activity("run.entropy step " + std::to_string(s));
    const uint8_t* g = tr.step_bytes(s);
    if (const auto b = controller.observe(s, dt, g, n)) st.bits[s] = *b;
    const uint32_t r = static_cast<uint32_t>(std::min<uint64_t>({controller.rank_for(s), tr.rows, tr.cols}));
    st.chosen[s] = r;
    run.backend->upload(full.input(), g, n * dtype_size(dt));
    run.transport->barrier();
    auto t0 = std::chrono::steady_clock::now();
    full.run();
    run.backend->synchronize();
    st.plain_s[s] = st.step_s[s] = since(t0);
    if (r > 0) {
      if (!state) state = lowrank::make_state(tr.rows, tr.cols, r, cfg.seed);
      else if (state->rank != r) lowrank::set_rank(*state, r);
      Factors& f = factors_for(r);
      run.transport->barrier();
      t0 = std::chrono::steady_clock::now();
      lowrank_step(*run.backend, run.world, *state, *f.p, *f.q, dt, g, update.data(), st.local_s[s], p, q);
      st.step_s[s] = since(t0);
      st.error[s] = lowrank::step_error(*state, update.data());
    }
    heartbeat();
  }
  for (auto* v : {&st.step_s, &st.plain_s, &st.local_s}) {
    MPI_Allreduce(MPI_IN_PLACE, v->data(), static_cast<int>(tr.steps), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (double& x : *v) x /= run.world;
  }
  return st;
}

void print_run_header(const EntropyRun& run) {
  const auto& exp = *run.exp;
  const GradientTrace& tr = *run.trace;
  const auto& cfg = exp.run.entropy->config;
  const study::CallSweep& call = exp.calls[run.call];
  const std::string algo = call.algorithm == "hierarchical" ? "hierarchical/" + call.inter : call.algorithm;
  std::printf("# EDGC (entropy policy) for real over %s: %llu steps of a %llu x %llu gradient, %d ranks; warm-up "
              "%llu, window %llu, estimate every %llu on %.3g of the elements (>= %llu), ranks %u..%u; "
              "allreduce %s (calls.%zu), P and Q in fp32\n",
              exp.run.entropy->trace.c_str(), static_cast<unsigned long long>(tr.steps),
              static_cast<unsigned long long>(tr.rows), static_cast<unsigned long long>(tr.cols), run.world,
              static_cast<unsigned long long>(cfg.warmup_steps), static_cast<unsigned long long>(cfg.window),
              static_cast<unsigned long long>(cfg.estimate_every), cfg.sample_fraction,
              static_cast<unsigned long long>(cfg.min_samples), cfg.rank_min, cfg.rank_max, algo.c_str(), run.call);
  std::printf("#%-9s %11s %13s %6s %10s %10s %17s %10s\n", "window", "steps", "entropy(bits)", "rank", "step(us)",
              "local(us)", "uncompressed(us)", "rel.error");
}

json run_json(const EntropyRun& run) {
  const auto& cfg = run.exp->run.entropy->config;
  const GradientTrace& tr = *run.trace;
  return json{{"trace", run.exp->run.entropy->trace}, {"steps", tr.steps}, {"rows", tr.rows}, {"cols", tr.cols},
              {"call", run.call}, {"warmup_steps", cfg.warmup_steps}, {"window", cfg.window},
              {"estimate_every", cfg.estimate_every}, {"sample_fraction", cfg.sample_fraction},
              {"min_samples", cfg.min_samples}, {"rank_min", cfg.rank_min}, {"rank_max", cfg.rank_max},
              {"windows", json::array()}};
}

// One row per window (rank 0 prints; every rank fills the JSON), then the run's totals.
void report_windows(const EntropyRun& run, const Steps& st, const std::filesystem::path& out_dir, json& ej) {
  const auto& cfg = run.exp->run.entropy->config;
  std::unique_ptr<std::ofstream> csv;
  if (run.rank == 0 && !out_dir.empty()) {
    csv = std::make_unique<std::ofstream>(out_dir / "entropy.csv");
    *csv << "window,first_step,steps,entropy_bits,rank,step_us,local_us,uncompressed_us,relative_error\n";
  }
  int64_t index = cfg.warmup_steps > 0 ? -1 : 0;
  double run_s = 0, plain_total = 0, error_sum = 0;
  uint64_t compressed = 0;
  for (const auto& [first, end] : policy::entropy_windows(cfg, run.trace->steps)) {
    double b = 0, e = 0, t = 0, l = 0, u = 0;
    int estimates = 0;
    for (uint64_t s = first; s < end; ++s) {
      if (!std::isnan(st.bits[s])) b += st.bits[s], ++estimates;
      e += st.error[s], t += st.step_s[s], l += st.local_s[s], u += st.plain_s[s];
    }
    const double k = static_cast<double>(end - first);
    run_s += t;
    plain_total += u;
    if (st.chosen[first] > 0) error_sum += e, compressed += end - first;
    const std::string name = index < 0 ? "warm-up" : std::to_string(index);
    ++index;
    const double mean_bits = estimates ? b / estimates : NAN;
    ej["windows"].push_back({{"window", name}, {"first_step", first}, {"steps", end - first},
                             {"entropy_bits", estimates ? json(mean_bits) : json(nullptr)}, {"rank", st.chosen[first]},
                             {"step_us", t / k * 1e6}, {"local_us", l / k * 1e6}, {"uncompressed_us", u / k * 1e6},
                             {"relative_error", e / k}});
    const std::string bits = estimates ? report::fixed(mean_bits, 3) : "-";
    if (run.rank == 0)
      std::printf(" %-9s %5llu-%-5llu %13s %6u %10s %10s %17s %10s\n", name.c_str(), static_cast<unsigned long long>(first),
                  static_cast<unsigned long long>(end - 1), bits.c_str(), st.chosen[first],
                  report::fixed(t / k * 1e6, 2).c_str(), report::fixed(l / k * 1e6, 2).c_str(),
                  report::fixed(u / k * 1e6, 2).c_str(), report::fixed(e / k, 4).c_str());
    if (csv)
      *csv << name << "," << first << "," << end - first << "," << (estimates ? report::fixed(mean_bits, 4) : "") << ","
           << st.chosen[first] << "," << report::fixed(t / k * 1e6, 3) << "," << report::fixed(l / k * 1e6, 3) << ","
           << report::fixed(u / k * 1e6, 3) << "," << report::fixed(e / k, 5) << "\n";
  }
  const double mean_error = compressed ? error_sum / static_cast<double>(compressed) : 0.0;
  ej["run"] = {{"entropy_s", run_s}, {"uncompressed_s", plain_total}, {"speedup", plain_total / run_s},
               {"mean_relative_error", mean_error}};
  if (run.rank == 0)
    std::printf("# run of %llu steps: entropy %s ms, uncompressed %s ms (measured, the same steps), speed-up %s; mean "
                "relative error after warm-up %s\n",
                static_cast<unsigned long long>(run.trace->steps), report::fixed(run_s * 1e3, 3).c_str(),
                report::fixed(plain_total * 1e3, 3).c_str(), report::fixed(plain_total / run_s, 3).c_str(),
                report::fixed(mean_error, 4).c_str());
}

}  // namespace

void run_entropy_trace(const EntropyRun& run, const std::filesystem::path& out_dir, json& doc) {
  const Steps st = measure_steps(run);
  if (run.rank == 0) print_run_header(run);
  json ej = run_json(run);
  report_windows(run, st, out_dir, ej);
  doc["entropy"] = ej;
}

}  // namespace compcoll::real
