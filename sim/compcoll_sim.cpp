// compcoll-sim — what-if studies of compressed collectives on a SimGrid model of a cluster.
//
//   compcoll-sim EXPERIMENT.yaml [--set key.path=value]... [--out DIR] [--json] [--plans-only]
//                [--shard I/N] [--jobs K]
//   compcoll-sim EXPERIMENT.yaml [--set key.path=value]... --estimate N [--json]
//   compcoll-sim merge --out DIR [--command TEXT] SHARD_DIR...
//
// The study layer (shared/study) turns the experiment into cells (topology x group size x
// call x size) and each cell into its plans (the static plans and each policy's); this
// program simulates each plan once per cell in SimGrid (sim/simulator) and prints one
// nccl-tests style row (shared/report) as soon as a row's plans have finished. --out DIR
// writes results.csv (row by row) and results.json (the whole run, rewritten atomically at
// most every 10 s and at the end). --shard I/N runs a deterministic 1/N of the cells; merge
// puts shards together into the table one run writes. docs/compcoll-sim.md.
// Exit status: 0 all rows simulated, 1 some call failed, 2 bad input.
#include <xbt/base.h>  // before simgrid/version.h, which needs its macros
#include <simgrid/version.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>

#include "calibration/calibration.h"
#include "codec/codec.h"
#include "config/yaml_node.h"
#include "io/tensor_file.h"
#include "policy/policy.h"
#include "report/report.h"
#include "report/row.h"
#include "schedule/build.h"
#include "sim/results.h"
#include "sim/simulator.h"
#include "sim/workload_mode.h"
#include "study/study.h"
#include "topology/topology.h"
#include "util/text.h"

extern char** environ;

using namespace compcoll;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kWholeWorkload = "--shard and --jobs split a grid of calls; a workload runs whole";

constexpr const char* kUsage =
    "usage: compcoll-sim EXPERIMENT.yaml [--set key.path=value]... [--out DIR] [--json] [--plans-only]\n"
    "                    [--shard I/N] [--jobs K] [--back-to-back N]\n"
    "       compcoll-sim EXPERIMENT.yaml [--set key.path=value]... --estimate N [--json]\n"
    "       compcoll-sim merge --out DIR [--command TEXT] SHARD_DIR...\n"
    "  --set K=V     override one key of the experiment file (repeatable)\n"
    "  --out DIR     write DIR/results.csv (row by row) and DIR/results.json\n"
    "  --json        print the results as JSON on stdout instead of the table\n"
    "  --plans-only  print each policy's plan and predicted time per cell, simulate nothing\n"
    "                (the oracle is left out: it simulates); --out writes DIR/plans.csv\n"
    "  --shard I/N   run shard I of N: a deterministic 1/N of the cells, balanced by expected cost\n"
    "  --jobs K      run K shards side by side (processes, each its own SimGrid) and merge them\n"
    "                into --out DIR (each shard's output in DIR/shards/I)\n"
    "  --back-to-back N  time each plan as N calls back to back, as compcoll-run times a row with\n"
    "                run.iterations N: each rank's time per call, averaged over ranks (the model column)\n"
    "  --estimate N  simulate nothing: print the memory and time each of N shards (--shard I/N)\n"
    "                needs, from the sizes of their cells' plans (scripts/slurm-sweep.sh asks Slurm for them)\n"
    "  merge         merge shards' --out folders into the table one unsharded run writes\n"
    "  --command TEXT  merge: the command recorded in the merged results.json (default: the\n"
    "                first shard's, without its --shard)\n";

struct Args {
  std::string experiment, out, command, merge_command;
  std::vector<std::string> sets, merge;  // merge: the shard folders
  bool json = false, plans_only = false, is_merge = false;
  study::Shard shard;
  int jobs = 1;
  int back_to_back = 1;  // calls timed back to back (sim::Call::iterations)
  int estimate = 0;      // --estimate N: the resources of each of N shards, nothing simulated
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "compcoll-sim: " << msg << "\n" << kUsage;
  std::exit(2);
}

int positive(const std::string& flag, const std::string& v) {
  size_t used = 0;
  int k = 0;
  try {
    k = std::stoi(v, &used);
  } catch (const std::exception&) {
  }
  if (used != v.size() || k < 1) usage_error(flag + ": expected a positive integer, got '" + v + "'");
  return k;
}

Args parse_args(int argc, char** argv) {
  Args a;
  a.command = report::command_line(argc, argv);
  int i = 1;
  if (argc > 1 && std::string(argv[1]) == "merge") a.is_merge = true, ++i;
  for (; i < argc; ++i) {
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
    else if (s == "--out") {
      a.out = value("--out");
      if (a.out.empty()) usage_error("--out needs a folder, got an empty path");
    }
    else if (s == "--json") a.json = true;
    else if (s == "--plans-only") a.plans_only = true;
    else if (s == "--shard") {
      try {
        a.shard = study::parse_shard(value("--shard"));
      } catch (const std::invalid_argument& e) {
        usage_error(std::string("--shard: ") + e.what());
      }
    } else if (s == "--jobs") a.jobs = positive("--jobs", value("--jobs"));
    else if (s == "--back-to-back") a.back_to_back = positive("--back-to-back", value("--back-to-back"));
    else if (s == "--estimate") a.estimate = positive("--estimate", value("--estimate"));
    else if (s == "--command" && a.is_merge) a.merge_command = value("--command");
    else if (s.starts_with("-")) usage_error("unknown option " + s);
    else if (a.is_merge) a.merge.push_back(s);
    else if (a.experiment.empty()) a.experiment = s;
    else usage_error("one experiment file only (got " + a.experiment + " and " + s + ")");
  }
  if (a.is_merge && (a.out.empty() || a.merge.empty())) usage_error("merge needs --out DIR and the shard folders");
  if (!a.is_merge && a.experiment.empty()) usage_error("no experiment file");
  if (a.jobs > 1 && (a.out.empty() || !a.shard.all() || a.json))
    usage_error("--jobs needs --out DIR (the shards are merged there), and no --shard or --json");
  if (a.estimate && (!a.out.empty() || !a.shard.all() || a.jobs > 1 || a.plans_only))
    usage_error("--estimate N runs nothing: no --out, --shard, --jobs or --plans-only");
  return a;
}

sim::NetworkModel network_model(const study::Experiment& exp) {
  sim::NetworkModel net = sim::NetworkModel::defaults(exp.network.model);
  const policy::NetFactors f = study::net_factors(exp);
  net.latency_factor = f.latency_factor, net.bandwidth_factor = f.bandwidth_factor;
  net.tcp_gamma = f.tcp_gamma, net.crosstraffic = f.crosstraffic, net.weight_s = f.weight_s;
  net.protocol_costs = f.protocol_costs;
  net.p2p_net_channels = f.p2p_net_channels;
  if (exp.network.update) net.update = *exp.network.update;
  if (exp.network.precision) net.precision = *exp.network.precision;
  return net;
}

// network.p2p_channels_per_net_peer as the experiment has it (null without protocol costs).
json p2p_channels_json(const sim::NetworkModel& n) {
  if (!n.protocol_costs) return json();
  if (n.p2p_net_channels == policy::kP2pFillNic) return "nic";
  if (n.p2p_net_channels == policy::kP2pNcclDefault) return "nccl";
  return n.p2p_net_channels;
}

std::string simgrid_version() {
  return std::to_string(SIMGRID_VERSION_MAJOR) + "." + std::to_string(SIMGRID_VERSION_MINOR) + "." +
         std::to_string(SIMGRID_VERSION_PATCH);
}

// What every part of a run reads and writes.
struct Run {
  Args args;
  study::Experiment exp;
  calib::Calibration cal;
  sim::NetworkModel net;
  std::unique_ptr<study::Ratios> ratios;
  json doc;
  fs::path out_dir;
  std::unique_ptr<std::ofstream> csv;
  bool has_oracle = false, any_error = false;
  report::Speedups speedups;
  std::unique_ptr<report::Progress> progress;
  std::chrono::steady_clock::time_point last_json = std::chrono::steady_clock::now();
};

std::string ratio_lines(const study::Ratios& ratios) {
  std::string s;
  for (const auto& [k, m] : ratios.all()) s += "# ratio " + k + " = " + report::fixed(m.ratio, 4) + ": " + m.source + "\n";
  return s;
}

void set_ratios(Run& r) {
  for (const auto& [k, m] : r.ratios->all()) r.doc["ratios"][k] = {{"ratio", m.ratio}, {"source", m.source}};
}

// Loads and checks the experiment, measures the ratios, prints the header.
void start(Run& r) {
  r.exp = study::load_experiment(r.args.experiment, r.args.sets);
  r.cal = study::load_calibration(r.exp);
  r.net = network_model(r.exp);
  study::check_codecs(r.exp, false);
  study::check_calls(r.exp);
  r.ratios = std::make_unique<study::Ratios>(r.exp, &r.cal);
  r.ratios->resolve_all();
  study::check_curves(r.exp, r.cal);
  r.has_oracle = std::count(r.exp.policies.begin(), r.exp.policies.end(), "oracle") > 0;
  const auto& exp = r.exp;
  r.doc = {{"experiment", {{"name", exp.name}, {"file", exp.file}, {"description", exp.description},
                           {"fingerprint", exp.fingerprint}}},
           {"versions", {{"compcoll", "0.1.0"}, {"simgrid", simgrid_version()}}},
           {"network_model", {{"model", r.net.model}, {"latency_factor", r.net.latency_factor},
                              {"bandwidth_factor", r.net.bandwidth_factor}, {"crosstraffic", r.net.crosstraffic},
                              {"tcp_gamma", r.net.tcp_gamma}, {"update", r.net.update}, {"precision", r.net.precision},
                              {"protocol_costs", r.net.protocol_costs},
                              {"p2p_channels_per_net_peer", p2p_channels_json(r.net)},
                              {"source", exp.network.source}}},
           {"calibration", {{"file", r.cal.file}, {"device", r.cal.device}, {"source", r.cal.source},
                            {"statement", r.cal.statement}, {"date", r.cal.date}}},
           {"message_sizes", "ratio model"},
           {"command", r.args.command},
           {"host", report::host_json()},
           {"topologies", json::array()},
           {"rows", json::array()}};
  if (!r.args.shard.all()) r.doc["shard"] = {{"index", r.args.shard.index + 1}, {"count", r.args.shard.count}};
  if (const std::string fused = study::fused_decode_line(exp, r.cal); !fused.empty()) r.doc["fused_decode"] = fused;
  set_ratios(r);
  if (r.args.json) return;
  std::cout << "# compcoll-sim " << exp.name << " (" << exp.file << ")"
            << (exp.description.empty() ? "" : ": " + exp.description) << "\n";
  std::cout << "# SimGrid " << simgrid_version() << "; " << r.net.describe() << "; from " << exp.network.source << "\n";
  std::cout << "# kernels: " << r.cal.label()
            << (r.cal.source == "derived" ? " -- DERIVED from stated figures, not measured" : "") << "\n";
  std::cout << ratio_lines(*r.ratios);
  std::cout << "# message sizes: ratio model (wire bytes = header + chunk table + ratio x uncompressed)\n";
  if (r.doc.contains("fused_decode")) std::cout << "# " << r.doc["fused_decode"].get<std::string>() << "\n";
  if (!r.args.shard.all())
    std::cout << "# shard " << r.args.shard.index + 1 << " of " << r.args.shard.count << ": its cells only\n";
  if (r.args.back_to_back > 1)
    std::cout << "# time: each plan run " << r.args.back_to_back
              << " times back to back, each rank's time per call averaged over ranks (as compcoll-run times a row)\n";
}

void write_json(Run& r) {
  if (!r.out_dir.empty()) report::write_atomic(r.out_dir / "results.json", report::json_text(r.doc, 1));
}

int finish(Run& r, bool ok) {
  r.doc["complete"] = true;
  write_json(r);
  if (r.args.json) std::cout << report::json_text(r.doc, 1) << "\n";
  else std::cout << (ok ? "# OK\n" : "# FAILED: some rows have errors (see stderr)\n");
  return ok ? 0 : 1;
}

// --- workloads --------------------------------------------------------------------------

int run_workloads(Run& r) {
  sim::WorkloadContext ctx;
  ctx.exp = &r.exp;
  ctx.cal = &r.cal;
  ctx.net = r.net;
  ctx.json = r.args.json;
  ctx.ratios = r.ratios.get();
  if (!r.args.out.empty()) {
    r.out_dir = ctx.out = r.args.out;
    fs::create_directories(ctx.out);
    for (const char* f : {"workload.csv", "entropy.csv"}) fs::remove(ctx.out / f);
  }
  r.doc["workload"] = json::array();
  bool ok = true;
  for (const auto& w : r.exp.workloads) {
    ctx.workload = &w;
    ok = sim::run_workload(ctx, r.doc) && ok;
    write_json(r);
  }
  if (!r.args.json) std::cout << ratio_lines(*r.ratios);
  set_ratios(r);
  r.doc["complete"] = true;
  write_json(r);
  if (r.args.json) std::cout << report::json_text(r.doc, 1) << "\n";
  else std::cout << (ok ? "# OK\n" : "# FAILED: some calls did not simulate (see stderr)\n");
  return ok ? 0 : 1;
}

// --- cells and their plans --------------------------------------------------------------

// A row to print: its plans' simulated calls (an oracle row: all its candidates, of which it
// keeps the fastest) and, with an oracle, the cell's oracle candidates for the regret.
struct Out {
  study::Cell cell;
  report::Row row;
  std::vector<size_t> calls;
  std::vector<policy::Plan> plans;
  std::vector<size_t> oracle_calls;
};

// The groups of the experiment and which of their cells this shard runs.
struct Sweep {
  std::vector<study::Group> groups;
  std::vector<study::Cell> cells;  // this shard's, in output order
  size_t total_rows = 0;
};

Sweep sweep_of(Run& r) {
  Sweep sw;
  std::vector<study::SkippedGroup> skipped;
  sw.groups = study::groups(r.exp, &skipped);
  for (const auto& s : skipped) {
    r.doc["skipped"].push_back({{"topology", s.topology}, {"ranks", s.ranks}, {"gpus", s.gpus}});
    if (!r.args.json)
      std::cout << "# skipped: " << s.topology << " has " << s.gpus << " GPUs, fewer than ranks " << s.ranks << "\n";
  }
  std::vector<study::Cell> all = study::cells(r.exp, sw.groups);
  std::vector<int> shard_of(all.size(), 0);
  if (!r.args.shard.all()) {
    std::vector<double> cost(all.size());
    for (size_t g = 0; g < sw.groups.size(); ++g) {
      const topo::Topology t = study::load_topology(r.exp, sw.groups[g].topology, sw.groups[g].ranks);
      for (auto& c : all)
        if (c.group == g) cost[c.index] = study::expected_cost(r.exp, c, t);
    }
    shard_of = study::assign_shards(cost, r.args.shard.count);
  }
  size_t per_cell = 0;
  for (const auto& pol : r.exp.policies) per_cell += pol == "static" ? r.exp.codecs.size() : 1;
  for (const auto& c : all)
    if (shard_of[c.index] == r.args.shard.index) sw.cells.push_back(c), sw.total_rows += per_cell;
  return sw;
}

// Fills a row's plan columns from a plan.
void label(Run& r, report::Row& w, const study::Cell& cell, const policy::Plan& p) {
  w.algorithm = policy::algorithm_label(p, cell.info.collective);
  w.placement = policy::placement_label(p);
  w.codec = p.codec;
  const auto& m = r.ratios->get(p.codec, r.exp.calls[cell.call]);
  w.ratio = m.ratio;
  w.ratio_source = m.source;
}

report::Row cell_row(const Run& r, const study::Cell& cell, const topo::Topology& topo) {
  const study::CallSweep& s = r.exp.calls[cell.call];
  report::Row w;
  w.topology = topo.name;
  w.ranks = cell.info.nranks;
  w.nodes = topo.nodes_spanned(cell.info.nranks);
  w.collective = s.collective;
  w.dtype = s.dtype;
  w.tensor = s.tensor;
  w.size = cell.size;
  w.count = policy::count_for(cell.info.collective, cell.size, cell.info.dtype, cell.info.nranks);
  w.call = cell.call;
  w.cell = cell.index;
  w.backend = "simgrid";
  w.calibration = r.cal.source;
  return w;
}

// The group's calls by plan key and size: each a list of job calls, told apart by sim::Call's ==.
using KnownCalls = std::map<std::pair<std::string, uint64_t>, std::vector<size_t>>;

// An oracle's candidates of at most this many schedule ops (policy::plan_size) leave their
// codec's exposed time to the fastest of them, whose row works it out in this process as it goes
// out (sim::codec_exposed_s), beside the call a child simulates meanwhile: the cost model twice,
// about 170 bytes an op at its peak (30 MB for the 177,472 ops of a 1 GB ring allreduce on 64
// GPUs), so at most about 45 MB here. Larger ones, and every other row's calls, have it worked
// out in their own process before SimGrid's peak (sim::Call::exposed). The oracle's candidates
// but its fastest would otherwise each run the cost model twice for a figure no row shows.
constexpr uint64_t kOracleExposedHere = 250'000;

// The cell's rows, each simulated call added to the job once: the same call on the group's
// platform gives the same simulated time, however many rows of however many cells choose it
// (the oracles of two calls of one collective share every candidate).
void plan_cell(Run& r, study::Planner& planner, const study::Cell& cell, sim::Job& job, KnownCalls& known,
               std::vector<Out>& outs) {
  auto add = [&](const policy::Plan& p, bool oracle) {
    sim::Call call;
    call.codec = p.codec;
    call.ratio = r.ratios->get(p.codec, r.exp.calls[cell.call]).ratio;
    call.build = planner.build_spec(p, cell);
    call.iterations = r.args.back_to_back;
    call.nccl_kernels = p.nccl_kernels;
    // NCCL's protocol costs only NCCL's kernels, and only with the protocol costs on; elsewhere
    // it is a label, and plans that differ by it alone are one call.
    if (p.nccl_kernels && job.network.protocol_costs) call.protocol = p.protocol;
    const bool exposed = !oracle || call.codec == "identity" ||
                         policy::plan_size(p, cell.info, policy::ranks_per_node(job.topology, cell.info.nranks)).ops >
                             kOracleExposedHere;
    std::vector<size_t>& same_key = known[{study::plan_key(p), cell.size}];
    for (size_t c : same_key) {
      call.exposed = job.calls[c].exposed;  // calls are told apart by what they simulate
      if (job.calls[c] == call) {
        job.calls[c].exposed = job.calls[c].exposed || exposed;  // a row that needs it has it from the call's process
        return c;
      }
    }
    call.exposed = exposed;
    same_key.push_back(job.calls.size());
    job.calls.push_back(std::move(call));
    return job.calls.size() - 1;
  };
  const size_t first = outs.size();
  std::vector<size_t> oracle_calls;
  for (study::Entry& e : planner.plan(cell, r.args.plans_only)) {
    Out o;
    o.cell = cell;
    o.row = cell_row(r, cell, job.topology);
    o.row.policy = e.policy;
    o.row.predicted_s = e.predicted_s;
    if (e.policy == "nccl-like") o.row.nccl_model_s = e.plan.nccl_s;
    o.row.error = e.error;
    o.plans = e.policy == "oracle" ? e.candidates : std::vector<policy::Plan>{e.plan};
    if (!e.error.empty()) o.plans.clear();
    for (const auto& p : o.plans) o.calls.push_back(add(p, e.policy == "oracle"));
    o.row.candidates = e.policy == "oracle" ? o.plans.size() : 0;
    if (o.plans.empty()) o.row.algorithm = o.row.placement = o.row.codec = "-";
    else label(r, o.row, cell, o.plans.front());
    if (e.policy == "oracle") oracle_calls = o.calls;
    outs.push_back(std::move(o));
  }
  for (size_t i = first; i < outs.size(); ++i)
    if (outs[i].row.policy != "oracle") outs[i].oracle_calls = oracle_calls;
}

// --- output -----------------------------------------------------------------------------

void print_plans(Run& r, const std::vector<Out>& outs) {
  if (!r.args.json)
    std::printf("#%12s %5s %15s %-9s %-24s %-13s %-11s %6s %14s\n", "size", "type", "collective", "policy", "algorithm",
                "placement", "codec", "ranks", "predicted(us)");
  for (const Out& o : outs) {
    const report::Row& w = o.row;
    if (w.policy == "oracle") continue;
    const std::string pred = std::isnan(w.predicted_s) ? "-" : report::fixed(w.predicted_s * 1e6, 3);
    if (!r.args.json)
      std::printf(" %12llu %5s %15s %-9s %-24s %-13s %-11s %6d %14s\n", static_cast<unsigned long long>(w.size),
                  w.dtype.c_str(), w.collective.c_str(), w.policy.c_str(), w.algorithm.c_str(), w.placement.c_str(),
                  w.codec.c_str(), w.ranks, pred.c_str());
    if (!w.error.empty()) {
      r.any_error = true;
      std::fflush(stdout);
      std::cerr << "compcoll-sim: " << w.topology << " " << w.collective << " size " << w.size << ": " << w.error << "\n";
    }
    r.doc["plans"].push_back({{"topology", w.topology}, {"ranks", w.ranks}, {"collective", w.collective},
                              {"dtype", w.dtype}, {"size_bytes", w.size}, {"call", w.call}, {"cell", w.cell},
                              {"policy", w.policy}, {"algorithm", w.algorithm}, {"placement", w.placement},
                              {"codec", w.codec},
                              {"predicted_us", std::isnan(w.predicted_s) ? json(nullptr) : json(w.predicted_s * 1e6)}});
    if (r.csv)
      *r.csv << report::csv_quote(w.topology) << "," << w.ranks << "," << w.collective << "," << w.dtype << "," << w.size
             << "," << w.call << "," << w.policy << "," << w.algorithm << "," << w.placement << "," << w.codec << ","
             << pred << "\n";
  }
  if (r.csv) r.csv->flush();
}

// A row once its calls have finished: an oracle keeps its fastest candidate; the regret is
// against the cell's oracle. `exposed(c)`: the codec's exposed time of job call c, where its
// process did not work it out (sim::Call::exposed).
void emit(Run& r, Out& o, const std::vector<sim::CallResult>& results, const std::function<double(size_t)>& exposed) {
  report::Row& w = o.row;
  // A call's time: alone, from its start to its last op; back to back, each rank's per call.
  auto timed = [&](const sim::CallResult& c) { return r.args.back_to_back > 1 ? c.iteration_s : c.time_s; };
  size_t pick = 0;
  for (size_t k = 0; k < o.calls.size(); ++k) {
    const auto& rk = results[o.calls[k]];
    const auto& rb = results[o.calls[pick]];
    if (rk.error.empty() && (!rb.error.empty() || timed(rk) < timed(rb))) pick = k;
  }
  if (!o.calls.empty()) {
    const sim::CallResult& c = results[o.calls[pick]];
    w.time_s = timed(c);
    w.messages = c.messages, w.wire_bytes = c.wire_bytes, w.raw_bytes = c.raw_bytes;
    w.codec_s = c.codec_s, w.reduce_s = c.reduce_s, w.wall_s = c.wall_s, w.ops = c.ops, w.error = c.error;
    w.codec_exposed_s = c.error.empty() && std::isnan(c.codec_exposed_s) ? exposed(o.calls[pick]) : c.codec_exposed_s;
    if (!c.ungrouped.empty())
      w.note = "not in step groups: compcoll-run refuses it on NCCL (" + c.ungrouped +
               "); simulated with each transfer posted once ready";
  }
  double oracle_s = NAN;
  for (size_t c : o.oracle_calls)
    if (results[c].error.empty() && !(timed(results[c]) >= oracle_s)) oracle_s = timed(results[c]);
  if (w.policy == "oracle" && w.error.empty()) oracle_s = w.time_s;
  if (w.error.empty() && oracle_s > 0) w.regret = w.time_s / oracle_s - 1;
  if (o.plans.size() > 1) label(r, w, o.cell, o.plans[pick]);
  // A plan whose schedule has no compress op (placement none; or compressing only across nodes
  // on one node) moves its bytes as they are: its ratio is 1, as compcoll-run measures it.
  if (!o.calls.empty() && w.error.empty() && w.codec != "identity" && results[o.calls[pick]].compress_ops == 0) {
    w.ratio = 1;
    w.ratio_source = "nothing compressed (no compress op in the plan's schedule)";
  }
  r.speedups.record(w);
  r.speedups.apply(w);
  if (!w.error.empty()) {
    r.any_error = true;
    std::cerr << "compcoll-sim: " << w.topology << " " << w.collective << " " << w.algorithm << " " << w.codec << " size "
              << w.size << ": " << w.error << "\n";
  }
  if (!r.args.json) {
    std::cout << report::table_line(w, r.has_oracle ? report::Table::SimRegret : report::Table::Sim);
    if (!w.note.empty()) std::cout << "# note: the row above: " << w.note << "\n";
    std::cout.flush();
  }
  r.doc["rows"].push_back(report::to_json(w));
  if (r.csv) {
    *r.csv << report::csv_line(w);
    r.csv->flush();
    // The JSON is the whole document: rewriting it after every row costs O(rows^2) on large
    // grids, so it is rewritten at most every 10 s here, and at the end.
    const auto now = std::chrono::steady_clock::now();
    if (std::chrono::duration<double>(now - r.last_json).count() > 10) write_json(r), r.last_json = now;
  }
  r.progress->row_done();
}

// Simulates the group's job; rows go out in order, each once its calls have finished.
void simulate_group(Run& r, sim::Job& job, std::vector<Out>& outs, const std::string& topo_path) {
  if (!r.args.json) {
    std::cout << report::table_header(r.has_oracle ? report::Table::SimRegret : report::Table::Sim);
    std::cout.flush();
  }
  std::vector<sim::CallResult> results(job.calls.size());
  std::vector<char> finished(job.calls.size(), 0);
  const std::vector<sim::Call> planned = job.calls;
  const auto exposed = [&](size_t c) { return planned[c].exposed ? NAN : sim::codec_exposed_s(job, planned[c]); };
  size_t next = 0;
  auto done = [&](const std::vector<size_t>& calls) {
    return std::all_of(calls.begin(), calls.end(), [&](size_t c) { return finished[c]; });
  };
  auto emit_ready = [&] {
    while (next < outs.size() && done(outs[next].calls) && done(outs[next].oracle_calls)) emit(r, outs[next++], results, exposed);
  };
  emit_ready();
  // What each call needs against what this machine has, before anything is built: a platform
  // too large for it fails the whole group here, a call too large fails its rows, naming the
  // topology and what to change, not in the engine; the calls that fit still run.
  const int gpus = job.topology.gpus();
  const double avail = sim::available_memory_bytes();
  struct Need {
    double bytes = 0;
    int ranks = 0;
    uint64_t ops = 0;
  };
  std::vector<Need> need(job.calls.size(), Need{sim::expected_peak_bytes(gpus, 0, 0), 0, 0});
  for (const Out& o : outs)
    for (size_t k = 0; k < o.plans.size(); ++k) {
      const policy::Plan& p = o.plans[k];
      const uint64_t ops = policy::plan_size(p, o.cell.info, policy::ranks_per_node(job.topology, o.cell.info.nranks)).ops *
                           static_cast<uint64_t>(r.args.back_to_back);
      const double b = sim::expected_peak_bytes(gpus, o.cell.info.nranks, ops);
      if (b > need[o.calls[k]].bytes) need[o.calls[k]] = {b, o.cell.info.nranks, ops};
    }
  auto too_large = [&](const Need& n) {
    std::ostringstream why;
    why.precision(3);
    why << "simulating it needs about " << n.bytes / 1e9 << " GB (a platform of " << gpus << " GPUs";
    if (n.ranks) why << ", a call of " << n.ranks << " ranks and " << n.ops << " schedule ops";
    why << "), more than the " << avail / 1e9
        << " GB this process may take: run it on a machine with more memory (compcoll-sim --estimate; "
           "scripts/slurm-sweep.sh asks Slurm for it), or with fewer ranks (ranks:) or fewer chunks or channels";
    return why.str();
  };
  std::vector<sim::Call> all = std::move(job.calls);
  job.calls.clear();
  std::vector<size_t> index;  // job.calls (those that fit) -> all
  const Need* largest = nullptr;
  for (size_t c = 0; c < all.size(); ++c) {
    if (need[c].bytes <= avail) {
      index.push_back(c);
      job.calls.push_back(std::move(all[c]));
    } else {
      results[c].index = c;
      results[c].error = "not simulated: " + too_large(need[c]);
      finished[c] = 1;
      if (!largest || need[c].bytes > largest->bytes) largest = &need[c];
    }
  }
  if (largest) {
    const std::string why = too_large(*largest);
    std::cerr << "compcoll-sim: " << topo_path << ": " << why << " (" << all.size() - index.size() << " of its "
              << all.size() << " calls not simulated)\n";
    json& tj = r.doc["topologies"].back();
    tj["calls_not_simulated"] = all.size() - index.size();
    if (index.empty()) tj["error"] = why;
    r.any_error = true;
  }
  emit_ready();
  if (index.empty()) return;
  const auto stats = sim::simulate(job, [&](sim::CallResult c) {
    c.index = index[c.index];
    results[c.index] = c;
    finished[c.index] = 1;
    emit_ready();
  });
  uint64_t messages = 0;
  double wall = 0;
  for (size_t c = 0; c < results.size(); ++c)
    if (finished[c]) messages += results[c].messages, wall += results[c].wall_s;
  json& tj = r.doc["topologies"].back();
  tj["platform_wall_s"] = stats.platform_wall_s;
  tj["peak_rss_kb"] = stats.peak_rss_kb;
  tj["messages"] = messages;
  tj["calls_wall_s"] = wall;
  tj["messages_per_wall_s"] = wall > 0 ? messages / wall : 0.0;
  if (!r.args.json)
    std::printf("# %s: %llu simulated messages in %.2f s (%.0f per wall-second), platform built in %.2f s, peak "
                "memory %.0f MB\n",
                job.topology.name.c_str(), static_cast<unsigned long long>(messages), wall, wall > 0 ? messages / wall : 0.0,
                stats.platform_wall_s, stats.peak_rss_kb / 1024.0);
  if (!stats.error.empty()) {
    r.any_error = true;
    std::cerr << "compcoll-sim: " << topo_path << ": " << stats.error << "\n";
    tj["error"] = stats.error;
  }
}

// One group: its topology, its cells' plans, then the simulation (or the plans only).
void run_group(Run& r, size_t g, const study::Group& group, const std::vector<study::Cell>& cells) {
  sim::Job job;
  job.topology = study::load_topology(r.exp, group.topology, group.ranks);
  job.calibration = r.cal;
  job.network = r.net;
  const topo::Topology& topo = job.topology;
  r.doc["topologies"].push_back({{"file", group.topology}, {"name", topo.name}, {"group", g},
                                 {"ranks", static_cast<int>(topo.rank_to_gpu.size())}, {"description", describe(topo)}});
  if (!r.args.json) std::cout << describe(topo);
  study::Planner planner(r.exp, topo, r.cal, r.net.factors(), *r.ratios);
  std::vector<Out> outs;
  KnownCalls known;
  for (const auto& c : cells)
    if (c.group == g) plan_cell(r, planner, c, job, known, outs);
  if (r.args.plans_only) print_plans(r, outs);
  else simulate_group(r, job, outs, group.topology);
}

void open_csv(Run& r) {
  if (r.args.out.empty()) return;
  r.out_dir = r.args.out;
  fs::create_directories(r.out_dir);
  r.csv = std::make_unique<std::ofstream>(r.out_dir / (r.args.plans_only ? "plans.csv" : "results.csv"));
  if (r.args.plans_only) *r.csv << "topology,ranks,collective,dtype,size_bytes,call,policy,algorithm,placement,codec,predicted_us\n";
  else *r.csv << report::csv_header();
  r.csv->flush();
}

int run(const Args& args) {
  Run r;
  r.args = args;
  start(r);
  if (!r.exp.workloads.empty()) {
    if (!args.shard.all() || args.jobs > 1)
      throw config::ConfigError(r.exp.file + ": workload: " + kWholeWorkload);
    return run_workloads(r);
  }
  open_csv(r);
  const Sweep sw = sweep_of(r);
  r.progress = std::make_unique<report::Progress>("compcoll-sim", sw.total_rows);
  for (size_t g = 0; g < sw.groups.size(); ++g)
    if (std::any_of(sw.cells.begin(), sw.cells.end(), [&](const study::Cell& c) { return c.group == g; }))
      run_group(r, g, sw.groups[g], sw.cells);
  if (r.has_oracle && !args.plans_only) {
    r.doc["regret_summary"] = sim::regret_summary(r.doc["rows"]);
    if (!args.json) std::cout << sim::regret_lines(r.doc["regret_summary"]);
  }
  return finish(r, !r.any_error);
}

// --- --estimate -------------------------------------------------------------------------

// --estimate N: what each of N shards (--shard I/N) needs, priced without planning, from the
// sizes of the plans its cells' rows can run (policy::plan_size: the static plans, nccl-like's
// choice, and with adaptive or the oracle every candidate, which bound adaptive's choice), as
// --shard balances them. Per shard:
//   memory = max over its groups of 256 MiB + 1.5 x sim::expected_peak_bytes(the topology's
//            GPUs, ranks, the ops of the largest schedule), at least 512 MiB, in steps of 256 MiB
//   time   = 10 min + per group 10 s + 2 ms x GPUs (topology, platform) + messages / 5,000 per s
// The margin: Slurm's accounting (jobacct_gather/linux) sums the RSS of the job's processes,
// and a call's process shares the platform's pages with the process it is forked from (both
// counted); plan_size's ops are up to 1.35x those simulated. Time: the runs of
// docs/compcoll-sim.md ("Performance") simulated 31,000-132,000 messages per wall-second and
// built a 131,072-GPU fat tree in 122-159 s (a 16,384-GPU one in 2-3 s).
int estimate(Args args) {
  const bool as_json = args.json;
  args.json = true;  // start() prints no header
  Run r;
  r.args = args;
  start(r);
  if (!r.exp.workloads.empty())
    throw config::ConfigError(r.exp.file + ": workload: --estimate prices a grid of calls; a workload runs whole");
  std::vector<study::SkippedGroup> skipped;
  const std::vector<study::Group> groups = study::groups(r.exp, &skipped);
  const std::vector<study::Cell> cells = study::cells(r.exp, groups);
  std::vector<double> cost(cells.size());  // what --shard balances (study::expected_cost)
  std::vector<uint64_t> ops(cells.size());  // the largest schedule of the cell's plans
  std::vector<int> gpus(groups.size());
  const uint64_t reps = static_cast<uint64_t>(args.back_to_back);
  for (size_t g = 0; g < groups.size(); ++g) {
    const topo::Topology t = study::load_topology(r.exp, groups[g].topology, groups[g].ranks);
    gpus[g] = t.gpus();
    std::vector<std::string> codecs;
    for (const auto& c : r.exp.codecs)
      if (known_codec(c)) codecs.push_back(c);
    policy::System sys = study::make_system(t, r.cal, r.net.factors(), *r.ratios, codecs);
    sys.nccl_algorithms = r.exp.nccl_algo;
    std::map<std::string, std::unique_ptr<policy::Policy>> chooser;  // nccl-like
    for (const auto& c : cells) {
      if (c.group != g) continue;
      cost[c.index] = study::expected_cost(r.exp, c, t);
      const int gpn = policy::ranks_per_node(t, c.info.nranks);
      auto add = [&](const policy::Plan& p) {
        ops[c.index] = std::max(ops[c.index], policy::plan_size(p, c.info, gpn).ops);
      };
      for (const auto& pol : r.exp.policies) {
        if (pol == "static") {
          for (const auto& codec : r.exp.codecs) add(study::static_plan(r.exp.calls[c.call], codec));
        } else if (pol == "adaptive" || pol == "oracle") {
          for (const auto& p : policy::candidates(c.info, sys)) add(p);
        } else {
          auto& p = chooser[pol];
          if (!p) p = policy::make_policy(pol);
          try {
            double predicted = NAN;
            add(p->choose(c.info, sys, &predicted));
          } catch (const std::runtime_error&) {  // that row's error when it runs: nothing simulated
          }
        }
      }
    }
  }
  const int n = args.estimate;
  const std::vector<int> shard_of = n > 1 ? study::assign_shards(cost, n) : std::vector<int>(cells.size(), 0);
  if (!as_json)
    std::cout << "# compcoll-sim --estimate " << n << ": " << r.exp.name << " (" << r.exp.file << "), " << cells.size()
              << " cells; memory and time each shard needs (docs/compcoll-sim.md)\n";
  json out = json::array();
  for (int s = 0; s < n; ++s) {
    size_t ncells = 0;
    double messages = 0, time_s = 600, mem_mib = 512;
    int ranks = 0, max_gpus = 0;
    uint64_t max_ops = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      uint64_t group_ops = 0;
      bool any = false;
      for (const auto& c : cells)
        if (c.group == g && shard_of[c.index] == s) {
          any = true, ++ncells;
          messages += cost[c.index] * static_cast<double>(reps);
          group_ops = std::max(group_ops, ops[c.index] * reps);
        }
      if (!any) continue;
      ranks = std::max(ranks, groups[g].nranks), max_gpus = std::max(max_gpus, gpus[g]);
      max_ops = std::max(max_ops, group_ops);
      time_s += 10 + 0.002 * gpus[g];
      const double peak = sim::expected_peak_bytes(gpus[g], groups[g].nranks, group_ops);
      mem_mib = std::max(mem_mib, 256 + 1.5 * peak / (1024.0 * 1024.0));
    }
    time_s += messages / 5000;
    const long mem = static_cast<long>(std::ceil(mem_mib / 256) * 256);
    const long secs = static_cast<long>(std::ceil(time_s / 60) * 60);
    out.push_back({{"shard", s + 1}, {"shards", n}, {"cells", ncells}, {"messages", messages}, {"ranks", ranks},
                   {"gpus", max_gpus}, {"ops", max_ops}, {"mem_mb", mem}, {"time_s", secs}});
    if (!as_json)
      std::printf("shard %d/%d: cells %zu messages %.0f ranks %d gpus %d ops %llu mem_mb %ld time_s %ld\n", s + 1, n,
                  ncells, messages, ranks, max_gpus, static_cast<unsigned long long>(max_ops), mem, secs);
  }
  if (as_json) std::cout << report::json_text(out, 1) << "\n";
  return 0;
}

// --- jobs and merge ---------------------------------------------------------------------

// --jobs K: K shards as child processes of this program, then their merge.
int run_jobs(Args args, const char* self) {
  // No more shards than cells: a shard without a cell is a process that does nothing (--jobs
  // 99999 on a small grid started thousands).
  {
    const study::Experiment exp = study::load_experiment(args.experiment, args.sets);
    if (!exp.workloads.empty()) throw config::ConfigError(exp.file + ": workload: " + kWholeWorkload);
    const size_t cells = study::cells(exp, study::groups(exp, nullptr)).size();
    if (static_cast<size_t>(args.jobs) > cells) {
      std::cout << "# --jobs " << args.jobs << ": the experiment has " << cells << " cell" << (cells == 1 ? "" : "s")
                << "; running " << cells << " shard" << (cells == 1 ? "" : "s") << "\n";
      args.jobs = static_cast<int>(cells);
    }
  }
  std::vector<pid_t> pids;
  const fs::path out = args.out;
  for (int k = 1; k <= args.jobs; ++k) {
    const fs::path dir = out / "shards" / std::to_string(k);
    fs::create_directories(dir);
    std::vector<std::string> argv{self, args.experiment, "--out", dir.string(), "--shard",
                                  std::to_string(k) + "/" + std::to_string(args.jobs)};
    for (const auto& s : args.sets) argv.insert(argv.end(), {"--set", s});
    if (args.plans_only) argv.push_back("--plans-only");
    if (args.back_to_back > 1) argv.insert(argv.end(), {"--back-to-back", std::to_string(args.back_to_back)});
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, (dir / "stdout.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, cargv.data(), environ) != 0)
      throw std::runtime_error("--jobs: cannot start a shard process");
    posix_spawn_file_actions_destroy(&fa);
    pids.push_back(pid);
  }
  int worst = 0;
  std::vector<fs::path> dirs;
  for (int k = 1; k <= args.jobs; ++k) {
    int status = 0;
    waitpid(pids[k - 1], &status, 0);
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 3;
    if (rc == 2) return 2;  // bad input: the shard said why on stderr
    worst = std::max(worst, rc);
    dirs.push_back(out / "shards" / std::to_string(k));
  }
  sim::merge_shards(dirs, out);
  std::cout << "# " << args.jobs << " shards merged into " << out.string() << " (each shard's table: "
            << (out / "shards" / "I" / "stdout.txt").string() << ")\n";
  return worst;
}

int merge(const Args& args) {
  std::vector<fs::path> dirs(args.merge.begin(), args.merge.end());
  sim::merge_shards(dirs, args.out);
  json doc = json::parse(std::ifstream(fs::path(args.out) / "results.json"));
  if (!args.merge_command.empty()) {
    doc["command"] = args.merge_command;
    report::write_atomic(fs::path(args.out) / "results.json", report::json_text(doc, 1));
  }
  const size_t rows = doc.contains("plans") ? doc["plans"].size() : doc["rows"].size();
  std::cout << "# merged " << dirs.size() << " shards: " << rows << " rows into " << args.out << "\n";
  if (doc.contains("regret_summary")) std::cout << sim::regret_lines(doc["regret_summary"]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  try {
    if (args.is_merge) return merge(args);
    if (args.estimate) return estimate(args);
    if (args.jobs > 1) return run_jobs(args, argv[0]);
    return run(args);
  } catch (const config::ConfigError& e) {
    std::cerr << "compcoll-sim: " << e.what() << "\n";
  } catch (const sched::ScheduleError& e) {
    std::cerr << "compcoll-sim: " << printable(args.experiment + ": calls: " + e.what()) << "\n";
  } catch (const TensorFileError& e) {
    std::cerr << "compcoll-sim: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "compcoll-sim: " << printable((args.is_merge ? std::string("merge") : args.experiment) + ": " + e.what())
              << "\n";
  }
  return 2;
}
