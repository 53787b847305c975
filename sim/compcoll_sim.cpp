// compcoll-sim — what-if studies of compressed collectives on a SimGrid model of a cluster.
//
//   compcoll-sim EXPERIMENT.yaml [--set key.path=value]... [--out DIR] [--json]
//
// For each topology of the experiment, each collective call, size and codec, builds the
// schedule (shared/schedule), runs it in SimGrid (sim/simulator) and prints one nccl-tests
// style row as soon as it finishes. --out DIR writes results.csv (row by row) and
// results.json (the whole experiment, rewritten atomically at most every 10 s and at the end).
// docs/compcoll-sim.md.
// Exit status: 0 all rows simulated, 1 some call failed, 2 bad input.
#include <xbt/base.h>  // before simgrid/version.h, which needs its macros
#include <simgrid/version.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "calibration/calibration.h"
#include "calibration/ratio_model.h"
#include "codec/codec.h"
#include "config/experiment.h"
#include "config/yaml_node.h"
#include "io/tensor_file.h"
#include "policy/policy.h"
#include "report/report.h"
#include "schedule/build.h"
#include "sim/simulator.h"
#include "sim/workload_mode.h"
#include "topology/topology.h"

using namespace compcoll;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kUsage =
    "usage: compcoll-sim EXPERIMENT.yaml [--set key.path=value]... [--out DIR] [--json] [--plans-only]\n"
    "  --set K=V     override one key of the experiment file (repeatable)\n"
    "  --out DIR     write DIR/results.csv (row by row) and DIR/results.json\n"
    "  --json        print the results as JSON on stdout instead of the table\n"
    "  --plans-only  print each policy's plan and predicted time per cell, simulate nothing\n"
    "                (the oracle is left out: it simulates); --out writes DIR/plans.csv\n";

struct Args {
  std::string experiment, out;
  std::vector<std::string> sets;
  bool json = false;
  bool plans_only = false;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "compcoll-sim: " << msg << "\n" << kUsage;
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) usage_error(std::string(flag) + " needs a value");
      return argv[++i];
    };
    if (s == "--help" || s == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (s == "--set") a.sets.push_back(value("--set"));
    else if (s.starts_with("--set=")) a.sets.push_back(s.substr(6));
    else if (s == "--out") a.out = value("--out");
    else if (s == "--json") a.json = true;
    else if (s == "--plans-only") a.plans_only = true;
    else if (s.starts_with("-")) usage_error("unknown option " + s);
    else if (a.experiment.empty()) a.experiment = s;
    else usage_error("one experiment file only (got " + a.experiment + " and " + s + ")");
  }
  if (a.experiment.empty()) usage_error("no experiment file");
  return a;
}

struct Row {
  std::string topology, collective, algorithm, placement, codec, dtype, tensor, ratio_source, policy = "static";
  int ranks = 0;
  uint64_t size = 0, count = 0;
  double ratio = 1;
  sim::CallResult r;
  double speedup = NAN;
  double predicted_s = NAN;  // the policy's own estimate (adaptive: the cost model; nccl-like: NCCL's model)
  size_t candidates = 0;     // oracle: plans simulated
  double regret = NAN;       // with an oracle in the experiment: time / the oracle's time - 1
  size_t call = 0;           // index of the experiment's call (calls.N)
};

const char* kCsvHeader =
    "topology,ranks,collective,algorithm,placement,codec,dtype,tensor,size_bytes,count,time_us,algbw_gbps,busbw_gbps,"
    "ratio,wire_bytes,codec_us,reduce_us,messages,speedup_vs_identity,wall_s,calibration,policy,predicted_us,call,error,regret\n";

json row_json(const Row& w, double busf) {
  const double t = w.r.time_s;
  return json{{"topology", w.topology},     {"ranks", w.ranks},
              {"collective", w.collective}, {"algorithm", w.algorithm},
              {"placement", w.placement},   {"codec", w.codec},
              {"dtype", w.dtype},           {"tensor", w.tensor},
              {"size_bytes", w.size},       {"count", w.count},
              {"time_us", t * 1e6},         {"algbw_gbps", t > 0 ? w.size / t / 1e9 : 0.0},
              {"busbw_gbps", t > 0 ? w.size / t / 1e9 * busf : 0.0},
              {"ratio", w.ratio},           {"ratio_source", w.ratio_source},
              {"wire_bytes", w.r.wire_bytes}, {"raw_bytes", w.r.raw_bytes},
              {"codec_us", w.r.codec_s * 1e6}, {"reduce_us", w.r.reduce_s * 1e6},
              {"messages", w.r.messages},   {"ops", w.r.ops},
              {"speedup_vs_identity", std::isnan(w.speedup) ? json(nullptr) : json(w.speedup)},
              {"wall_s", w.r.wall_s},       {"error", w.r.error},
              {"policy", w.policy},         {"call", w.call},
              {"predicted_us", std::isnan(w.predicted_s) ? json(nullptr) : json(w.predicted_s * 1e6)},
              {"candidates", w.candidates},
              {"regret", std::isnan(w.regret) ? json(nullptr) : json(w.regret)}};
}

int run(const Args& args) {
  const auto t_start = std::chrono::steady_clock::now();
  const config::Experiment exp = config::load_experiment(args.experiment, args.sets);
  const calib::Calibration cal = exp.calibration == "zero" ? calib::zero_calibration() : calib::load_calibration(exp.calibration);
  sim::NetworkModel net = sim::NetworkModel::defaults(exp.network.model);
  if (exp.network.latency_factor) net.latency_factor = *exp.network.latency_factor;
  if (exp.network.bandwidth_factor) net.bandwidth_factor = *exp.network.bandwidth_factor;
  if (exp.network.tcp_gamma) net.tcp_gamma = *exp.network.tcp_gamma;
  if (exp.network.crosstraffic) net.crosstraffic = *exp.network.crosstraffic;
  if (exp.network.update) net.update = *exp.network.update;
  if (exp.network.precision) net.precision = *exp.network.precision;

  // Check every codec and call before any simulation starts.
  for (const auto& c : exp.codecs)
    if (!find_codec(c)) throw config::ConfigError(exp.file + ": codecs: unknown codec '" + c + "'");
  std::map<std::string, calib::MeasuredRatio> ratios;  // codec/dtype/kind
  auto ratio_of = [&](const std::string& codec, const config::CallSweep& s) -> const calib::MeasuredRatio& {
    const std::string key = codec + "/" + s.dtype + "/" + s.tensor;
    auto it = ratios.find(key);
    if (it != ratios.end()) return it->second;
    calib::MeasuredRatio m;
    if (codec == "identity") {
      m.source = "uncompressed";
    } else if (exp.fixed_ratios.count(codec)) {
      m.ratio = exp.fixed_ratios.at(codec);
      m.source = "fixed in " + exp.file;
    } else if (!exp.tensors_dir.empty()) {
      m = calib::measure_ratio(codec, *parse_dtype(s.dtype), exp.tensors_dir, s.tensor);
    } else {
      throw config::ConfigError(exp.file + ": ratios: no tensors folder and no fixed ratio for codec " + codec);
    }
    return ratios.emplace(key, m).first->second;
  };
  for (size_t i = 0; i < exp.calls.size(); ++i) {
    const auto& s = exp.calls[i];
    const auto names = sched::algorithm_names(sched::parse_collective(s.collective));
    if (std::find(names.begin(), names.end(), s.algorithm) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw config::ConfigError(exp.file + ": calls." + std::to_string(i) + ".algorithm: unknown " + s.collective +
                                " algorithm '" + s.algorithm + "' (expected " + list + ")");
    }
    if (s.algorithm == "hierarchical" && s.inter != "ring" && s.inter != "recursive" && s.inter != "tree")
      throw config::ConfigError(exp.file + ": calls." + std::to_string(i) + ".inter: expected ring, recursive or tree, got '" +
                                s.inter + "'");
  }
  for (const auto& s : exp.calls)
    for (const auto& c : exp.codecs) {
      ratio_of(c, s);
      if (c != "identity" && s.placement != "none") {
        const DType dt = *parse_dtype(s.dtype);
        for (auto op : {calib::Op::Compress, calib::Op::Decompress})
          if (cal.source != "zero" && !cal.has(op, c, dt))
            throw config::ConfigError(cal.file + ": curves: no " + std::string(calib::op_name(op)) + " curve for codec " +
                                      c + ", dtype " + s.dtype);
      }
    }

  // Metadata.
  std::ostringstream meta;
  meta << "# compcoll-sim " << exp.name << " (" << exp.file << ")" << (exp.description.empty() ? "" : ": " + exp.description)
       << "\n";
  meta << "# SimGrid " << SIMGRID_VERSION_MAJOR << "." << SIMGRID_VERSION_MINOR << "." << SIMGRID_VERSION_PATCH << "; "
       << net.describe() << "\n";
  meta << "# kernels: " << cal.label() << (cal.source == "derived" ? " -- DERIVED from stated figures, not measured" : "")
       << "\n";
  for (const auto& [k, m] : ratios) meta << "# ratio " << k << " = " << report::fixed(m.ratio, 4) << ": " << m.source << "\n";
  meta << "# message sizes: ratio model (wire bytes = header + chunk table + ratio x uncompressed)\n";

  json doc{{"experiment", {{"name", exp.name}, {"file", exp.file}, {"description", exp.description}}},
           {"versions", {{"compcoll", "0.1.0"}, {"simgrid", std::to_string(SIMGRID_VERSION_MAJOR) + "." +
                                                               std::to_string(SIMGRID_VERSION_MINOR) + "." +
                                                               std::to_string(SIMGRID_VERSION_PATCH)}}},
           {"network_model", {{"model", net.model}, {"latency_factor", net.latency_factor},
                              {"bandwidth_factor", net.bandwidth_factor}, {"crosstraffic", net.crosstraffic},
                              {"tcp_gamma", net.tcp_gamma}, {"update", net.update},
                              {"precision", net.precision}}},
           {"calibration", {{"file", cal.file}, {"device", cal.device}, {"source", cal.source},
                            {"statement", cal.statement}, {"date", cal.date}}},
           {"message_sizes", "ratio model"},
           {"topologies", json::array()},
           {"rows", json::array()}};
  for (const auto& [k, m] : ratios) doc["ratios"][k] = {{"ratio", m.ratio}, {"source", m.source}};

  if (!args.json) std::cout << meta.str();
  if (!exp.workloads.empty()) {
    for (const auto& c : exp.codecs)
      for (auto op : {calib::Op::Compress, calib::Op::Decompress})
        if (c != "identity" && cal.source != "zero" && !cal.has(op, c, DType::BF16))
          throw config::ConfigError(cal.file + ": curves: no " + std::string(calib::op_name(op)) + " curve for codec " + c);
    sim::WorkloadContext ctx;
    ctx.exp = &exp;
    ctx.cal = &cal;
    ctx.net = net;
    ctx.json = args.json;
    if (!args.out.empty()) {
      ctx.out = args.out;
      fs::create_directories(ctx.out);
    }
    ctx.ratio = [&](const std::string& codec, DType dt, const std::string& tensor) {
      config::CallSweep cs;
      cs.dtype = std::string(dtype_name(dt));
      cs.tensor = tensor;
      return ratio_of(codec, cs).ratio;
    };
    doc["workload"] = json::array();
    if (!args.out.empty())
      for (const char* f : {"workload.csv", "entropy.csv"}) fs::remove(fs::path(args.out) / f);
    bool ok = true;
    for (const auto& w : exp.workloads) {
      ctx.workload = &w;
      ok = sim::run_workload(ctx, doc) && ok;
      if (!args.out.empty()) report::write_atomic(fs::path(args.out) / "results.json", doc.dump(1));
    }
    if (!args.json)
      for (const auto& [k, m] : ratios) std::cout << "# ratio " << k << " = " << report::fixed(m.ratio, 4) << ": " << m.source << "\n";
    for (const auto& [k, m] : ratios) doc["ratios"][k] = {{"ratio", m.ratio}, {"source", m.source}};
    if (!args.out.empty()) report::write_atomic(fs::path(args.out) / "results.json", doc.dump(1));
    if (args.json) std::cout << doc.dump(1) << "\n";
    else std::cout << (ok ? "# OK\n" : "# FAILED: some calls did not simulate (see stderr)\n");
    return ok ? 0 : 1;
  }
  std::unique_ptr<std::ofstream> csv;
  fs::path out_dir;
  if (!args.out.empty()) {
    out_dir = args.out;
    fs::create_directories(out_dir);
    if (args.plans_only) {
      csv = std::make_unique<std::ofstream>(out_dir / "plans.csv");
      *csv << "topology,ranks,collective,dtype,size_bytes,call,policy,algorithm,placement,codec,predicted_us\n";
    } else {
      csv = std::make_unique<std::ofstream>(out_dir / "results.csv");
      *csv << kCsvHeader;
    }
    csv->flush();
  }
  const bool tty = isatty(STDERR_FILENO);
  // One simulation job per topology and group size (ranks: N, or a list of them).
  std::vector<std::pair<std::string, int>> groups;  // topology file, ranks (0: every GPU)
  int largest = 0;
  for (const auto& topo_path : exp.topologies) {
    if (exp.ranks.empty()) {
      groups.emplace_back(topo_path, 0);
      continue;
    }
    const int gpus = topo::load_topology(topo_path).gpus();
    largest = std::max(largest, gpus);
    for (int r : exp.ranks) {
      if (r <= gpus) {
        groups.emplace_back(topo_path, r);
      } else {
        doc["skipped"].push_back({{"topology", topo_path}, {"ranks", r}, {"gpus", gpus}});
        if (!args.json)
          std::cout << "# skipped: " << topo_path << " has " << gpus << " GPUs, fewer than ranks " << r << "\n";
      }
    }
  }
  if (groups.empty())
    throw config::ConfigError(exp.file + ": ranks: no topology holds any of the group sizes (the largest has " +
                              std::to_string(largest) + " GPUs)");
  size_t total_rows = 0, done_rows = 0;
  for (size_t t = 0; t < groups.size(); ++t)
    for (const auto& pol : exp.policies)
      total_rows += exp.calls.size() * exp.sizes.size() * (pol == "static" ? exp.codecs.size() : 1);
  auto last_progress = std::chrono::steady_clock::now();
  auto last_json = std::chrono::steady_clock::now();
  bool any_error = false;
  const bool has_oracle = std::find(exp.policies.begin(), exp.policies.end(), "oracle") != exp.policies.end();
  // Per cell (group, call, size): the oracle's time and the best static row, for the summary.
  struct Cell {
    double oracle = NAN, best_static = NAN;
    std::map<std::string, double> time;  // policy -> time (not static, not oracle)
  };
  std::map<std::string, Cell> cells;

  for (const auto& [topo_path, group_ranks] : groups) {
    topo::Topology topo = topo::load_topology(topo_path, group_ranks);
    const int n = static_cast<int>(topo.rank_to_gpu.size());
    doc["topologies"].push_back(
        {{"file", topo_path}, {"name", topo.name}, {"ranks", n}, {"description", describe(topo)}});
    if (!args.json) std::cout << describe(topo);

    sim::Job job;
    job.calibration = cal;
    job.network = net;
    // Output rows in order; each names the simulated calls it needs (an oracle row: all the
    // candidates, of which it keeps the fastest) and is printed once they have all finished.
    struct Out {
      Row w;
      size_t sweep = 0;
      std::vector<size_t> calls;
      std::vector<policy::Plan> plans;
      std::vector<size_t> oracle_calls;  // the cell's oracle candidates, for the regret
    };
    std::vector<Out> outs;
    policy::System system;
    system.topology = &topo;
    system.calibration = &cal;
    system.net = net.factors();
    system.codecs = exp.codecs;
    system.ratio = [&](const std::string& codec, DType dt, const std::string& tensor) {
      config::CallSweep cs;
      cs.dtype = std::string(dtype_name(dt));
      cs.tensor = tensor;
      return ratio_of(codec, cs).ratio;
    };
    std::map<std::string, std::unique_ptr<policy::Policy>> policy_objects;
    policy::RouteCache routes(topo);
    auto fill = [&](Row& w, const config::CallSweep& s, const policy::CallInfo& info, const policy::Plan& p) {
      w.algorithm = policy::algorithm_label(p, info.collective);
      w.placement = policy::placement_label(p);
      w.codec = p.codec;
      const auto& m = ratio_of(p.codec, s);
      w.ratio = m.ratio;
      w.ratio_source = m.source;
    };
    // A plan is simulated once per cell, however many policies choose it (and the oracle
    // includes it): the same plan, call and size give the same simulated time.
    std::map<std::string, size_t> cell_calls;  // plan key -> call index, for the current cell
    auto add_call = [&](const config::CallSweep& s, const policy::CallInfo& info, const policy::Plan& p) {
      policy::Plan key = p;
      if (key.codec == "identity") key.placement = sched::Placement::None, key.intra.reset();
      auto [it, fresh] = cell_calls.emplace(key.describe(), job.calls.size());
      if (!fresh) return it->second;
      sim::Call call;
      call.codec = p.codec;
      call.ratio = ratio_of(p.codec, s).ratio;
      call.build = policy::build_spec(p, info, topo);
      call.build.root = s.root;
      job.calls.push_back(call);
      return job.calls.size() - 1;
    };
    for (size_t si = 0; si < exp.calls.size(); ++si) {
      const auto& s = exp.calls[si];
      for (uint64_t size : exp.sizes) {
        const policy::CallInfo info = config::call_info(s, size, n);
        cell_calls.clear();
        std::map<std::string, Out> made;  // policy -> its row(s); static rows follow in `statics`
        std::vector<Out> statics;
        // The oracle is made last, so that its candidates include every other policy's plan.
        std::vector<std::string> order;
        for (const auto& pol : exp.policies)
          if (pol != "oracle") order.push_back(pol);
        if (has_oracle) order.push_back("oracle");
        for (const auto& pol : order) {
          Out o;
          o.sweep = si;
          Row& w = o.w;
          w.call = si;
          w.topology = topo.name;
          w.ranks = n;
          w.collective = s.collective;
          w.dtype = s.dtype;
          w.tensor = s.tensor;
          w.size = size;
          w.count = policy::count_for(info.collective, size, info.dtype, n);
          w.policy = pol;
          if (pol == "static") {
            for (const auto& codec : exp.codecs) {
              policy::Plan p;
              p.algorithm = s.algorithm;
              p.inter = s.inter;
              p.placement = sched::parse_placement(s.placement);
              if (!s.intra_placement.empty()) p.intra = sched::parse_placement(s.intra_placement);
              p.codec = codec;
              p.chunks = s.chunks;
              p.channels = s.channels;
              Out oc = o;
              fill(oc.w, s, info, p);
              // --plans-only: what the cost model says of the plan as written, where it is
              // small enough to build (policy::plan_size).
              if (args.plans_only && policy::plan_size(p, info, policy::ranks_per_node(topo, n)).ops <= policy::kMaxPlanOps)
                oc.w.predicted_s = policy::predict_plan(p, info, system, routes);
              oc.calls = {add_call(s, info, p)};
              oc.plans = {p};
              statics.push_back(oc);
            }
            continue;
          }
          if (pol == "oracle") {
            o.plans = policy::candidates(info, system);
            for (const auto& x : statics) o.plans.push_back(x.plans.at(0));
            for (const auto& [name, x] : made) o.plans.push_back(x.plans.at(0));
            // Keep each plan once (the first of equal keys), in candidate order.
            std::vector<policy::Plan> unique;
            std::vector<size_t> seen;
            for (const auto& p : o.plans) {
              const size_t c = add_call(s, info, p);
              if (std::find(seen.begin(), seen.end(), c) != seen.end()) continue;
              seen.push_back(c);
              unique.push_back(p);
            }
            o.plans = unique;
            o.calls = seen;
            o.w.candidates = o.plans.size();
            if (o.plans.empty()) o.w.r.error = "oracle: no plan to simulate (every candidate is over the size limits)";
            else fill(o.w, s, info, o.plans.at(0));
          } else {
            auto& obj = policy_objects[pol];
            if (!obj) obj = policy::make_policy(pol);
            double predicted = NAN;
            // A call the policy cannot plan is that row's error; the other rows still run.
            try {
              const policy::Plan p = obj->choose(info, system, &predicted);
              o.w.predicted_s = predicted;
              fill(o.w, s, info, p);
              o.calls = {add_call(s, info, p)};
              o.plans = {p};
            } catch (const std::runtime_error& e) {
              o.w.r.error = e.what();
            }
          }
          if (o.plans.empty()) o.w.algorithm = o.w.placement = o.w.codec = "-";
          made[pol] = o;
        }
        // Rows in the experiment's policy order; with an oracle, each waits for its candidates.
        const std::vector<size_t> oracle_calls = has_oracle ? made.at("oracle").calls : std::vector<size_t>{};
        for (const auto& pol : exp.policies) {
          if (pol == "static") {
            for (auto& x : statics) {
              x.oracle_calls = oracle_calls;
              outs.push_back(x);
            }
          } else {
            Out& x = made.at(pol);
            if (pol != "oracle") x.oracle_calls = oracle_calls;
            outs.push_back(x);
          }
        }
      }
    }
    job.topology = std::move(topo);

    if (args.plans_only) {  // what each policy would run, from its own model; nothing simulated
      if (!args.json)
        std::printf("#%12s %5s %15s %-9s %-24s %-13s %-11s %6s %14s\n", "size", "type", "collective", "policy",
                    "algorithm", "placement", "codec", "ranks", "predicted(us)");
      for (const Out& o : outs) {
        const Row& w = o.w;
        if (w.policy == "oracle") continue;
        const std::string pred = std::isnan(w.predicted_s) ? "-" : report::fixed(w.predicted_s * 1e6, 3);
        if (!args.json)
          std::printf(" %12llu %5s %15s %-9s %-24s %-13s %-11s %6d %14s\n", static_cast<unsigned long long>(w.size),
                      w.dtype.c_str(), w.collective.c_str(), w.policy.c_str(), w.algorithm.c_str(), w.placement.c_str(),
                      w.codec.c_str(), w.ranks, pred.c_str());
        if (!w.r.error.empty()) {
          any_error = true;
          std::fflush(stdout);
          std::cerr << "compcoll-sim: " << w.topology << " " << w.collective << " size " << w.size << ": " << w.r.error
                    << "\n";
        }
        doc["plans"].push_back({{"topology", w.topology}, {"ranks", w.ranks}, {"collective", w.collective},
                                {"dtype", w.dtype}, {"size_bytes", w.size}, {"call", w.call}, {"policy", w.policy},
                                {"algorithm", w.algorithm}, {"placement", w.placement}, {"codec", w.codec},
                                {"predicted_us", std::isnan(w.predicted_s) ? json(nullptr) : json(w.predicted_s * 1e6)}});
        if (csv)
          *csv << report::csv_quote(w.topology) << "," << w.ranks << "," << w.collective << "," << w.dtype << "," << w.size
               << "," << w.call << "," << w.policy << "," << w.algorithm << "," << w.placement << "," << w.codec << ","
               << pred << "\n";
      }
      if (csv) csv->flush();
      continue;
    }

    if (!args.json) {
      std::printf("#%12s %12s %5s %15s %-24s %-13s %-11s %6s %12s %9s %9s %7s %10s %8s %-9s%s\n", "size", "count", "type",
                  "collective", "algorithm", "placement", "codec", "ranks", "time(us)", "algbw", "busbw", "ratio",
                  "codec(us)", "speedup", "policy", has_oracle ? "   regret" : "");
      std::fflush(stdout);
    }
    std::map<std::string, double> identity_time;  // sweep/size -> time of the static identity row
    std::vector<sim::CallResult> results(job.calls.size());
    std::vector<char> finished(job.calls.size(), 0);
    size_t next_out = 0;
    auto emit = [&](Out& o) {
      Row& w = o.w;
      // An oracle keeps the fastest candidate that simulated. A row with no plan carries its
      // planning error.
      size_t pick = 0;
      for (size_t k = 0; k < o.calls.size(); ++k) {
        const auto& rk = results[o.calls[k]];
        const auto& rb = results[o.calls[pick]];
        if (rk.error.empty() && (!rb.error.empty() || rk.time_s < rb.time_s)) pick = k;
      }
      if (!o.calls.empty()) w.r = results[o.calls[pick]];
      double oracle_s = NAN;
      for (size_t c : o.oracle_calls)
        if (results[c].error.empty() && !(results[c].time_s >= oracle_s)) oracle_s = results[c].time_s;
      if (w.policy == "oracle" && w.r.error.empty()) oracle_s = w.r.time_s;
      if (w.r.error.empty() && oracle_s > 0) w.regret = w.r.time_s / oracle_s - 1;
      if (w.r.error.empty() && has_oracle) {
        Cell& cell = cells[std::to_string(doc["topologies"].size()) + "/" + std::to_string(o.sweep) + "/" + std::to_string(w.size)];
        cell.oracle = oracle_s;
        if (w.policy == "static") cell.best_static = std::isnan(cell.best_static) ? w.r.time_s : std::min(cell.best_static, w.r.time_s);
        else if (w.policy != "oracle") cell.time[w.policy] = w.r.time_s;
      }
      if (o.plans.size() > 1) {
        const config::CallSweep& s = exp.calls[o.sweep];
        policy::CallInfo info;
        info.collective = sched::parse_collective(s.collective);
        fill(w, s, info, o.plans[pick]);
      }
      const auto& r = w.r;
      const std::string key = std::to_string(o.sweep) + "/" + std::to_string(w.size);
      if (r.error.empty() && w.codec == "identity" && w.policy == "static") identity_time[key] = r.time_s;
      if (r.error.empty() && identity_time.count(key) && r.time_s > 0) w.speedup = identity_time[key] / r.time_s;
      const double busf = report::bus_factor(sched::parse_collective(w.collective), w.ranks);
      const json j = row_json(w, busf);
      if (!r.error.empty()) {
        any_error = true;
        std::cerr << "compcoll-sim: " << w.topology << " " << w.collective << " " << w.algorithm << " " << w.codec
                  << " size " << w.size << ": " << r.error << "\n";
      }
      if (!args.json) {
        char regret_col[32] = "";
        if (has_oracle) std::snprintf(regret_col, sizeof regret_col, " %8s", std::isnan(w.regret) ? "-" : report::fixed(w.regret, 4).c_str());
        std::printf(" %12llu %12llu %5s %15s %-24s %-13s %-11s %6d %12s %9s %9s %7s %10s %8s %-9s%s\n",
                    static_cast<unsigned long long>(w.size), static_cast<unsigned long long>(w.count), w.dtype.c_str(),
                    w.collective.c_str(), w.algorithm.c_str(), w.placement.c_str(), w.codec.c_str(), w.ranks,
                    r.error.empty() ? report::fixed(r.time_s * 1e6, 2).c_str() : "FAILED",
                    report::fixed(j["algbw_gbps"].get<double>(), 2).c_str(), report::fixed(j["busbw_gbps"].get<double>(), 2).c_str(),
                    report::fixed(w.ratio, 4).c_str(), report::fixed(r.codec_s * 1e6, 2).c_str(),
                    std::isnan(w.speedup) ? "-" : report::fixed(w.speedup, 3).c_str(), w.policy.c_str(),
                    regret_col);
        std::fflush(stdout);
      }
      doc["rows"].push_back(j);
      if (csv) {
        *csv << report::csv_quote(w.topology) << "," << w.ranks << "," << w.collective << "," << w.algorithm << ","
             << w.placement << "," << w.codec << "," << w.dtype << "," << w.tensor << "," << w.size << "," << w.count
             << "," << report::fixed(r.time_s * 1e6, 3) << "," << report::fixed(j["algbw_gbps"].get<double>(), 4) << ","
             << report::fixed(j["busbw_gbps"].get<double>(), 4) << "," << report::fixed(w.ratio, 5) << "," << r.wire_bytes << ","
             << report::fixed(r.codec_s * 1e6, 3) << "," << report::fixed(r.reduce_s * 1e6, 3) << "," << r.messages << ","
             << (std::isnan(w.speedup) ? "" : report::fixed(w.speedup, 4)) << "," << report::fixed(r.wall_s, 3) << "," << cal.source
             << "," << w.policy << "," << (std::isnan(w.predicted_s) ? "" : report::fixed(w.predicted_s * 1e6, 3)) << ","
             << w.call << "," << report::csv_quote(r.error) << "," << (std::isnan(w.regret) ? "" : report::fixed(w.regret, 5))
             << "\n";
        csv->flush();
        // The JSON is the whole document: rewriting it after every row costs O(rows^2) on
        // large grids, so it is rewritten at most every 10 s here, and at the end.
        const auto now = std::chrono::steady_clock::now();
        if (std::chrono::duration<double>(now - last_json).count() > 10) {
          report::write_atomic(out_dir / "results.json", doc.dump(1));
          last_json = now;
        }
      }
      ++done_rows;
      const auto now = std::chrono::steady_clock::now();
      const double elapsed = std::chrono::duration<double>(now - t_start).count();
      if (elapsed > 3 && (tty || std::chrono::duration<double>(now - last_progress).count() > 10 || done_rows == total_rows)) {
        std::fprintf(stderr, "%s[compcoll-sim] %zu/%zu rows, %.0f%%, %.0f s elapsed%s", tty ? "\r" : "", done_rows,
                     total_rows, 100.0 * done_rows / total_rows, elapsed, tty && done_rows < total_rows ? "" : "\n");
        last_progress = now;
      }
    };
    // Rows go out in order, each once its calls have finished (a row with no plan at once).
    auto emit_ready = [&] {
      while (next_out < outs.size() &&
             std::all_of(outs[next_out].calls.begin(), outs[next_out].calls.end(), [&](size_t c) { return finished[c]; }) &&
             std::all_of(outs[next_out].oracle_calls.begin(), outs[next_out].oracle_calls.end(),
                         [&](size_t c) { return finished[c]; }))
        emit(outs[next_out++]);
    };
    emit_ready();
    const auto stats = sim::simulate(job, [&](const sim::CallResult& r) {
      results[r.index] = r;
      finished[r.index] = 1;
      emit_ready();
    });
    uint64_t messages = 0;
    double sim_wall = 0;
    for (size_t c = 0; c < results.size(); ++c)
      if (finished[c]) {
        messages += results[c].messages;
        sim_wall += results[c].wall_s;
      }
    auto& tj = doc["topologies"].back();
    tj["platform_wall_s"] = stats.platform_wall_s;
    tj["peak_rss_kb"] = stats.peak_rss_kb;
    tj["messages"] = messages;
    tj["calls_wall_s"] = sim_wall;
    tj["messages_per_wall_s"] = sim_wall > 0 ? messages / sim_wall : 0.0;
    if (!args.json)
      std::printf("# %s: %llu simulated messages in %.2f s (%.0f per wall-second), platform built in %.2f s, peak "
                  "memory %.0f MB\n",
                  job.topology.name.c_str(), static_cast<unsigned long long>(messages), sim_wall,
                  sim_wall > 0 ? messages / sim_wall : 0.0, stats.platform_wall_s, stats.peak_rss_kb / 1024.0);
    if (!stats.error.empty()) {
      any_error = true;
      std::cerr << "compcoll-sim: " << topo_path << ": " << stats.error << "\n";
      doc["topologies"].back()["error"] = stats.error;
    }
  }
  if (has_oracle) {
    // Regret = a policy's time / the oracle's - 1, per cell (group, call, size); the targets of
    // docs/POLICIES.md: within 5% of the oracle, and never more than 1% slower than static.
    std::map<std::string, std::vector<double>> regrets;
    std::map<std::string, size_t> within, worse_static;
    for (const auto& [key, cell] : cells)
      for (const auto& [pol, t] : cell.time) {
        if (!(cell.oracle > 0)) continue;
        const double r = t / cell.oracle - 1;
        regrets[pol].push_back(r);
        if (r <= 0.05) ++within[pol];
        if (cell.best_static > 0 && t > 1.01 * cell.best_static) ++worse_static[pol];
      }
    for (auto& [pol, v] : regrets) {
      std::sort(v.begin(), v.end());
      const double median = v[v.size() / 2], p95 = v[std::min(v.size() - 1, static_cast<size_t>(0.95 * v.size()))];
      json sj{{"policy", pol},          {"cells", v.size()},           {"within_5pct", within[pol]},
              {"median_regret", median}, {"p95_regret", p95},          {"max_regret", v.back()},
              {"worse_than_static_by_1pct", worse_static[pol]}};
      doc["regret_summary"].push_back(sj);
      if (!args.json)
        std::printf("# regret vs oracle, %s: %zu cells, %zu within 5%% (%.1f%%), median %.4f, p95 %.4f, max %.4f; "
                    "more than 1%% slower than static in %zu\n",
                    pol.c_str(), v.size(), within[pol], 100.0 * within[pol] / v.size(), median, p95, v.back(),
                    worse_static[pol]);
    }
  }
  if (!out_dir.empty()) report::write_atomic(out_dir / "results.json", doc.dump(1));
  if (args.json) std::cout << doc.dump(1) << "\n";
  else std::cout << (any_error ? "# FAILED: some rows have errors (see stderr)\n" : "# OK\n");
  return any_error ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  try {
    return run(args);
  } catch (const config::ConfigError& e) {
    std::cerr << "compcoll-sim: " << e.what() << "\n";
    return 2;
  } catch (const sched::ScheduleError& e) {
    std::cerr << "compcoll-sim: " << args.experiment << ": calls: " << e.what() << "\n";
    return 2;
  } catch (const TensorFileError& e) {
    std::cerr << "compcoll-sim: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "compcoll-sim: " << args.experiment << ": " << e.what() << "\n";
    return 2;
  }
}
