// sim/workload_mode.cpp — see workload_mode.h.
#include "sim/workload_mode.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "policy/policy.h"
#include "sim/entropy_run.h"
#include "report/report.h"
#include "workload/trace.h"
#include "workload/workload.h"

namespace compcoll::sim {

std::vector<int> group_gpus(const workload::CommCall& call, const workload::Parallel& p) {
  if (!call.ranks.empty()) return call.ranks;
  // The representative group of the kind, in Megatron-LM's rank order
  // (rank = (pipeline stage x dp + dp rank) x tp + tp rank): it contains rank 0.
  std::vector<int> r(static_cast<size_t>(call.group_size));
  for (int k = 0; k < call.group_size; ++k) {
    if (call.group == "tp") r[k] = k;
    else if (call.group == "dp" || call.group == "ep") r[k] = k * p.tp;
    else if (call.group == "edp") r[k] = k * p.ep * p.tp;
    else if (call.group == "pp") r[k] = k * p.dp * p.tp;
    else throw std::runtime_error("workload: unknown process group '" + call.group + "'");
  }
  return r;
}

TraceCalls distinct_trace_calls(const workload::TraceJob& job) {
  TraceCalls out;
  std::map<std::string, size_t> index;
  out.call_of.assign(job.ranks.size(), {});
  std::vector<std::map<size_t, int>> per_rank(job.ranks.size());
  for (size_t r = 0; r < job.ranks.size(); ++r)
    for (const auto& c : job.ranks[r].calls) {
      const std::string key = std::to_string(c.group) + "/" + std::to_string(static_cast<int>(c.collective)) + "/" +
                              std::to_string(c.bytes) + "/" + std::string(dtype_name(c.dtype)) + "/" + c.tensor;
      auto [it, fresh] = index.try_emplace(key, out.distinct.calls.size());
      if (fresh) {
        workload::CommCall cc;
        cc.kind = c.kind;
        cc.collective = c.collective;
        cc.bytes = c.bytes;
        cc.dtype = c.dtype;
        cc.tensor = c.tensor;
        cc.group = job.groups[c.group].label;
        cc.ranks = job.groups[c.group].ranks;
        cc.group_size = static_cast<int>(cc.ranks.size());
        cc.phase = c.backward ? workload::Phase::Backward : workload::Phase::Forward;
        cc.count = 0;
        cc.overlappable = false;
        out.distinct.calls.push_back(cc);
      }
      out.call_of[r].push_back(it->second);
      per_rank[r][it->second]++;
    }
  for (const auto& m : per_rank)
    for (const auto& [d, n] : m) out.distinct.calls[d].count = std::max(out.distinct.calls[d].count, n);
  return out;
}

namespace {

struct Variant {
  std::string name;                 // nccl-like, adaptive, adaptive/gauss-exp, lowrank/r=8, ...
  std::string policy;               // nccl-like | adaptive
  std::vector<std::string> codecs;  // what the policy may use
  int lowrank = 0;                  // > 0: gradients go through lowrank at this rank
};

// A data-parallel gradient call of B bytes taken as a stack of weight matrices with `hidden`
// rows (docs/WORKLOADS.md): the lowrank protocol allreduces P (rows x r) and Q (cols x r) in
// fp32, and computes P = M Q, Q = M^T P (2 x 2 x rows x cols x r FLOPs) plus the
// orthonormalization (2 x rows x r^2).
struct LowRankShape {
  uint64_t rows = 0, cols = 0;
};
LowRankShape lowrank_shape(const workload::CommCall& call, int hidden) {
  const uint64_t elements = call.bytes / dtype_size(call.dtype);
  LowRankShape s;
  s.rows = static_cast<uint64_t>(hidden);
  s.cols = std::max<uint64_t>(1, elements / s.rows);
  return s;
}
bool lowrank_applies(const workload::CommCall& call) {
  return (call.kind == "dp-grad" || call.kind == "dp-grad-expert") && !call.point_to_point;
}

// EDGC's run: per window of the replay, its rank, entropy, iteration and communication time and
// the compressor's error; totals over the trace's steps against uncompressed and fixed ranks.
template <typename VariantOf>
nlohmann::json report_entropy(const EntropyReplay& rp, const std::string& topology, const std::string& model,
                              const std::vector<workload::Estimate>& est,
                              size_t uncompressed, VariantOf&& variant_of, const WorkloadContext& ctx, std::ofstream* csv) {
  const auto& cfg = rp.config;
  auto est_of = [&](uint32_t r) -> const workload::Estimate& { return est[r == 0 ? uncompressed : variant_of(r)]; };
  if (!ctx.json) {
    std::printf("# EDGC (entropy policy) over %s: %llu steps of a %llu x %llu gradient; warm-up %llu, window %llu, "
                "estimate every %llu on %.3g of the elements (>= %llu), ranks %u..%u\n",
                rp.trace.c_str(), static_cast<unsigned long long>(rp.steps), static_cast<unsigned long long>(rp.rows),
                static_cast<unsigned long long>(rp.cols), static_cast<unsigned long long>(cfg.warmup_steps),
                static_cast<unsigned long long>(cfg.window), static_cast<unsigned long long>(cfg.estimate_every),
                cfg.sample_fraction, static_cast<unsigned long long>(cfg.min_samples), cfg.rank_min, cfg.rank_max);
    std::printf("#%-9s %11s %13s %6s %12s %12s %10s\n", "window", "steps", "entropy(bits)", "rank", "iter(ms)", "comm(ms)",
                "rel.error");
  }
  nlohmann::json out{{"trace", rp.trace}, {"steps", rp.steps}, {"rows", rp.rows}, {"cols", rp.cols},
                     {"warmup_steps", cfg.warmup_steps}, {"window", cfg.window}, {"estimate_every", cfg.estimate_every},
                     {"sample_fraction", cfg.sample_fraction}, {"min_samples", cfg.min_samples},
                     {"rank_min", cfg.rank_min}, {"rank_max", cfg.rank_max}, {"windows", nlohmann::json::array()}};
  // Windows: the warm-up as one, then window after window (the last may be short).
  int64_t index = cfg.warmup_steps > 0 ? -1 : 0;
  double run_s = 0, error_sum = 0;
  uint64_t compressed_steps = 0;
  for (const auto& [first, end] : policy::entropy_windows(cfg, rp.steps)) {
    double bits = 0, error = 0, iter_s = 0, comm_s = 0;
    int estimates = 0;
    for (uint64_t s = first; s < end; ++s) {
      if (!std::isnan(rp.bits[s])) bits += rp.bits[s], ++estimates;
      error += rp.error[s];
      iter_s += est_of(rp.rank[s]).iteration_s;
      comm_s += est_of(rp.rank[s]).comm_s;
    }
    const double steps = static_cast<double>(end - first);
    const uint32_t rank = rp.rank[first];  // one rank per window
    run_s += iter_s;
    if (rank > 0) error_sum += error, compressed_steps += end - first;
    const std::string name = index < 0 ? "warm-up" : std::to_string(index);
    const double mean_bits = estimates ? bits / estimates : NAN;
    if (!ctx.json)
      std::printf(" %-9s %5llu-%-5llu %13s %6u %12s %12s %10s\n", name.c_str(), static_cast<unsigned long long>(first),
                  static_cast<unsigned long long>(end - 1), estimates ? report::fixed(mean_bits, 3).c_str() : "-", rank,
                  report::fixed(iter_s / steps * 1e3, 2).c_str(), report::fixed(comm_s / steps * 1e3, 2).c_str(),
                  report::fixed(error / steps, 4).c_str());
    out["windows"].push_back({{"window", name}, {"first_step", first}, {"steps", end - first},
                              {"entropy_bits", estimates ? nlohmann::json(mean_bits) : nlohmann::json(nullptr)},
                              {"rank", rank}, {"iteration_ms", iter_s / steps * 1e3}, {"comm_ms", comm_s / steps * 1e3},
                              {"relative_error", error / steps}});
    if (csv)
      *csv << topology << "," << model << "," << name << "," << first << "," << end - first << ","
           << (estimates ? report::fixed(mean_bits, 4) : "") << "," << rank << "," << report::fixed(iter_s / steps * 1e3, 4)
           << "," << report::fixed(comm_s / steps * 1e3, 4) << "," << report::fixed(error / steps, 5) << "\n";
    ++index;
  }
  const double steps = static_cast<double>(rp.steps);
  const double plain_s = est[uncompressed].iteration_s * steps;
  const double mean_error = compressed_steps ? error_sum / static_cast<double>(compressed_steps) : 0.0;
  out["run"] = {{"entropy_s", run_s}, {"uncompressed_s", plain_s}, {"speedup", plain_s / run_s},
                {"mean_relative_error", mean_error}, {"fixed", nlohmann::json::array()}};
  if (!ctx.json)
    std::printf("# run of %llu steps: entropy %s s, uncompressed (adaptive/identity) %s s, speed-up %s; mean relative "
                "error after warm-up %s\n",
                static_cast<unsigned long long>(rp.steps), report::fixed(run_s, 3).c_str(), report::fixed(plain_s, 3).c_str(),
                report::fixed(plain_s / run_s, 3).c_str(), report::fixed(mean_error, 4).c_str());
  for (const auto& [r, err] : rp.fixed_error) {
    const double warm = static_cast<double>(std::min(cfg.warmup_steps, rp.steps));
    const double fixed_s = est[uncompressed].iteration_s * warm + est_of(r).iteration_s * (steps - warm);
    double e = 0;
    for (uint64_t s = std::min(cfg.warmup_steps, rp.steps); s < rp.steps; ++s) e += err[s];
    const double me = steps > warm ? e / (steps - warm) : 0.0;
    out["run"]["fixed"].push_back({{"rank", r}, {"seconds", fixed_s}, {"speedup", plain_s / fixed_s}, {"mean_relative_error", me}});
    if (!ctx.json)
      std::printf("#   fixed rank %u after the same warm-up: %s s, speed-up %s, mean relative error %s\n", r,
                  report::fixed(fixed_s, 3).c_str(), report::fixed(plain_s / fixed_s, 3).c_str(), report::fixed(me, 4).c_str());
  }
  if (!ctx.json && rp.trace_rank(cfg.rank_max) < cfg.rank_max)
    std::printf("# errors at ranks above %u were measured at rank %u (the trace's matrix is %llu x %llu)\n",
                rp.trace_rank(cfg.rank_max), rp.trace_rank(cfg.rank_max), static_cast<unsigned long long>(rp.rows),
                static_cast<unsigned long long>(rp.cols));
  return out;
}


std::vector<Variant> make_variants(const study::Experiment& exp, const study::WorkloadSpec& spec) {
  // NCCL's choice (the baseline, never compressing); adaptive with each compressing codec
  // alone (so each codec's gain shows) and with all of them; lowrank at each fixed rank.
  std::vector<Variant> variants{{"nccl-like", "nccl-like", {"identity"}}};
  std::vector<std::string> compressing;
  for (const auto& c : exp.codecs)
    if (c != "identity") compressing.push_back(c);
  variants.push_back({"adaptive/identity", "adaptive", {"identity"}});
  for (const auto& c : compressing) variants.push_back({"adaptive/" + c, "adaptive", {"identity", c}});
  if (compressing.size() > 1) {
    std::vector<std::string> all{"identity"};
    all.insert(all.end(), compressing.begin(), compressing.end());
    variants.push_back({"adaptive", "adaptive", all});
  }
  for (int r : spec.lowrank_ranks) variants.push_back({"lowrank/r=" + std::to_string(r), "adaptive", {"identity"}, r});
  return variants;
}
constexpr size_t kUncompressed = 1;  // adaptive/identity

constexpr const char* kWorkloadCsvHeader =
    "topology,gpus,model,dp,tp,pp,ep,zero_stage,micro_batches,variant,iteration_ms,compute_ms,comm_ms,"
    "exposed_comm_ms,comm_speedup,iteration_speedup,calibration\n";

// The variant that runs lowrank at rank r (added when missing).
size_t lowrank_variant(std::vector<Variant>& variants, uint32_t r) {
  const std::string name = "lowrank/r=" + std::to_string(r);
  for (size_t v = 0; v < variants.size(); ++v)
    if (variants[v].name == name) return v;
  variants.push_back({name, "adaptive", {"identity"}, static_cast<int>(r)});
  return variants.size() - 1;
}

// OUT/NAME opened for appending (one file over the experiment's workloads), its header once.
std::unique_ptr<std::ofstream> append_csv(const std::filesystem::path& out, const char* name, const char* header) {
  if (out.empty()) return nullptr;
  const auto path = out / name;
  const bool fresh = !std::filesystem::exists(path) || std::filesystem::file_size(path) == 0;
  auto csv = std::make_unique<std::ofstream>(path, std::ios::app);
  if (fresh) *csv << header;
  return csv;
}

// The workload's layout on a topology (scale_dp: data parallelism over all its GPUs).
workload::Parallel layout_on(workload::Parallel par, const study::WorkloadSpec& spec, const topo::Topology& topo,
                             const std::string& file, const std::string& topo_path) {
  if (spec.scale_dp) {
    const int per = par.tp * par.pp;
    if (topo.gpus() % per)
      throw config::ConfigError(file + ": workload.scale_dp: " + std::to_string(topo.gpus()) +
                                " GPUs are not a multiple of tp x pp = " + std::to_string(per));
    par.dp = topo.gpus() / per;
  }
  if (par.world() > topo.gpus())
    throw config::ConfigError(file + ": workload.layout: dp x tp x pp = " + std::to_string(par.world()) + " ranks, but " +
                              topo_path + " has " + std::to_string(topo.gpus()) + " GPUs");
  return par;
}

// One topology's iteration: every distinct call planned by every variant, simulated per group.
struct Key {
  size_t call, variant;
};
struct Item {
  Key key;
  policy::Plan plan;
  workload::CommCall call;  // what is simulated: the call itself, or a part of it (lowrank)
};
struct Planned {
  std::map<std::string, topo::Topology> group_topo;  // "group/size" -> its ranks on the topology
  std::map<std::string, std::vector<Item>> by_group;
  std::vector<std::vector<double>> seconds, extra;   // [call][variant]: simulated; lowrank compute
  std::map<std::string, policy::Plan> plans;         // "call/variant", as shown
};

std::string group_key(const workload::CommCall& call) {
  std::string k = call.group + "/" + std::to_string(call.group_size);
  for (int r : call.ranks) k += "/" + std::to_string(r);
  return k;
}

Planned prepare(const workload::Iteration& it, const workload::Parallel& par, const topo::Topology& topo,
                size_t variants) {
  Planned p;
  p.seconds.assign(it.calls.size(), std::vector<double>(variants, NAN));
  p.extra.assign(it.calls.size(), std::vector<double>(variants, 0.0));
  for (const auto& call : it.calls) {
    const std::string gkey = group_key(call);
    if (p.group_topo.count(gkey)) continue;
    topo::Topology g = topo;
    g.rank_to_gpu.clear();
    g.rank_to_gpu = group_gpus(call, par);
    g.placement = call.group + " group";
    p.group_topo.emplace(gkey, std::move(g));
  }
  return p;
}

// A pipeline send: a chain, compressed once when the cost model says it pays.
policy::Plan pipeline_plan(const workload::CommCall& call, const Variant& variant, const policy::System& sys,
                           const calib::Calibration& cal, study::Ratios& ratios) {
  policy::Plan plan;
  plan.algorithm = "chain";
  plan.codec = variant.codecs.size() > 1 ? variant.codecs[1] : "identity";
  plan.placement = sched::Placement::CompressOnce;
  policy::Plan plain = plan;
  plain.codec = "identity";
  if (plan.codec == "identity") return plain;
  policy::RouteCache routes(*sys.topology);
  const policy::CallInfo info = call.info();
  auto time = [&](const policy::Plan& p, double ratio) {
    return policy::predict(sched::build_schedule(policy::build_spec(p, info, *sys.topology)), *sys.topology, cal, p.codec,
                           ratio, sys.net, routes)
        .time_s;
  };
  return time(plan, ratios.get(plan.codec, call.dtype, call.tensor).ratio) >= time(plain, 1.0) ? plain : plan;
}

// Plans call c under variant v into `p`.
void plan_call(Planned& p, const WorkloadContext& ctx, const workload::Iteration& it, size_t c, const Variant& variant,
               size_t v, policy::Policy& policy, const workload::Model& model, const workload::Device& device) {
  const auto& call = it.calls[c];
  const std::string gkey = group_key(call);
  policy::System sys = study::make_system(p.group_topo.at(gkey), *ctx.cal, ctx.net.factors(), *ctx.ratios, variant.codecs);
  sys.nccl_algorithms = ctx.exp->nccl_algo;
  const std::string shown = std::to_string(c) + "/" + std::to_string(v);
  if (variant.lowrank > 0 && lowrank_applies(call)) {
    // Two fp32 allreduces (P, then Q) in place of the gradient call, each planned by the
    // adaptive policy without compression; the compressor's compute is charged at the device rate.
    const LowRankShape sh = lowrank_shape(call, model.hidden);
    const uint64_t r = static_cast<uint64_t>(variant.lowrank);
    for (uint64_t part_bytes : {sh.rows * r * 4, sh.cols * r * 4}) {
      workload::CommCall part = call;
      part.collective = sched::Collective::AllReduce;
      part.dtype = DType::FP32;
      part.bytes = part_bytes;
      const policy::Plan plan = policy.choose(part.info(), sys, nullptr);
      p.by_group[gkey].push_back({{c, v}, plan, part});
      p.plans[shown] = plan;
      p.plans[shown].codec = "lowrank:r=" + std::to_string(r);
    }
    p.extra[c][v] = device.seconds(4.0 * sh.rows * sh.cols * r + 2.0 * sh.rows * r * r);
    return;
  }
  const policy::Plan plan = call.point_to_point ? pipeline_plan(call, variant, sys, *ctx.cal, *ctx.ratios)
                                                : policy.choose(call.info(), sys, nullptr);
  p.by_group[gkey].push_back({{c, v}, plan, call});
  p.plans[shown] = plan;
}

// Simulates each group's distinct (call, plan) once; returns the simulated messages.
uint64_t simulate_groups(Planned& p, const WorkloadContext& ctx, bool& ok) {
  uint64_t messages = 0;
  for (auto& [gkey, items] : p.by_group) {
    Job job;
    job.topology = std::move(p.group_topo.at(gkey));  // planning is done: the last use
    job.calibration = *ctx.cal;
    job.network = ctx.net;
    std::map<std::string, size_t> distinct;
    std::vector<std::vector<Key>> users;
    for (const auto& [key, plan, call] : items) {
      const std::string id = std::to_string(static_cast<int>(call.collective)) + "/" + std::to_string(call.bytes) + "/" +
                             std::string(dtype_name(call.dtype)) + "/" + call.tensor + "/" + plan.describe();
      auto d = distinct.find(id);
      if (d == distinct.end()) {
        Call sc;
        sc.codec = plan.codec;
        sc.ratio = plan.codec == "identity" ? 1.0 : ctx.ratios->get(plan.codec, call.dtype, call.tensor).ratio;
        sc.build = policy::build_spec(plan, call.info(), job.topology);
        sc.nccl_kernels = plan.nccl_kernels;
        sc.protocol = plan.protocol;
        job.calls.push_back(sc);
        users.emplace_back();
        d = distinct.emplace(id, job.calls.size() - 1).first;
      }
      users[d->second].push_back(key);
    }
    const JobStats st = simulate(job, [&](const CallResult& r) {
      if (!r.error.empty()) {
        ok = false;
        std::cerr << "compcoll-sim: workload " << gkey << " group: " << r.error << "\n";
        return;
      }
      messages += r.messages;
      for (const Key& k : users[r.index]) {  // a lowrank call is the sum of its parts
        double& t = p.seconds[k.call][k.variant];
        t = std::isnan(t) ? r.time_s : t + r.time_s;
      }
    });
    if (!st.error.empty()) {
      ok = false;
      std::cerr << "compcoll-sim: workload " << gkey << " group: " << st.error << "\n";
    }
  }
  return messages;
}

// The variants' table rows (speed-ups over nccl-like), their JSON and CSV lines.
nlohmann::json report_variants(const std::vector<Variant>& variants, const std::vector<workload::Estimate>& est,
                               const WorkloadContext& ctx, const std::string& csv_prefix, std::ofstream* csv) {
  if (!ctx.json)
    std::printf("#%-22s %12s %12s %12s %14s %10s %10s\n", "variant", "iter(ms)", "compute(ms)", "comm(ms)", "exposed(ms)",
                "comm x", "iter x");
  nlohmann::json out = nlohmann::json::array();
  for (size_t v = 0; v < variants.size(); ++v) {
    const auto& e = est[v];
    const double comm_x = e.comm_s > 0 ? est[0].comm_s / e.comm_s : NAN;
    const double iter_x = e.iteration_s > 0 ? est[0].iteration_s / e.iteration_s : NAN;
    const double ms[4] = {e.iteration_s * 1e3, e.compute_s * 1e3, e.comm_s * 1e3, e.exposed_comm_s * 1e3};
    if (!ctx.json)
      std::printf(" %-22s %12s %12s %12s %14s %10s %10s\n", variants[v].name.c_str(), report::fixed(ms[0], 2).c_str(),
                  report::fixed(ms[1], 2).c_str(), report::fixed(ms[2], 2).c_str(), report::fixed(ms[3], 2).c_str(),
                  report::fixed(comm_x, 3).c_str(), report::fixed(iter_x, 3).c_str());
    nlohmann::json vj{{"variant", variants[v].name}, {"iteration_ms", ms[0]}, {"compute_ms", ms[1]}, {"comm_ms", ms[2]},
                      {"exposed_comm_ms", ms[3]}, {"comm_speedup", comm_x}, {"iteration_speedup", iter_x},
                      {"comm_by_kind_ms", nlohmann::json::object()}, {"exposed_by_kind_ms", nlohmann::json::object()}};
    for (const auto& [k, s] : e.comm_by_kind) vj["comm_by_kind_ms"][k] = s * 1e3;
    for (const auto& [k, s] : e.exposed_by_kind) vj["exposed_by_kind_ms"][k] = s * 1e3;
    out.push_back(vj);
    if (csv)
      *csv << csv_prefix << variants[v].name << "," << report::fixed(ms[0], 4) << "," << report::fixed(ms[1], 4) << ","
           << report::fixed(ms[2], 4) << "," << report::fixed(ms[3], 4) << "," << report::fixed(comm_x, 4) << ","
           << report::fixed(iter_x, 4) << "," << ctx.cal->source << "\n";
  }
  return out;
}

nlohmann::json calls_json(const workload::Iteration& it, const std::vector<Variant>& variants, const Planned& p) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t c = 0; c < it.calls.size(); ++c) {
    const auto& call = it.calls[c];
    nlohmann::json cj{{"kind", call.kind}, {"collective", sched::collective_name(call.collective)},
                      {"bytes", call.bytes}, {"group", call.group}, {"group_size", call.group_size},
                      {"count", call.count}, {"phase", workload::phase_name(call.phase)},
                      {"overlappable", call.overlappable}, {"time_us", nlohmann::json::object()}};
    for (size_t v = 0; v < variants.size(); ++v) {
      cj["time_us"][variants[v].name] = (p.seconds[c][v] + p.extra[c][v]) * 1e6;
      cj["plan"][variants[v].name] = p.plans.at(std::to_string(c) + "/" + std::to_string(v)).describe();
    }
    out.push_back(cj);
  }
  return out;
}

// Communication by call kind, for the baseline and the variant with the fastest iteration.
void print_by_kind(const std::vector<Variant>& variants, const std::vector<workload::Estimate>& est, uint64_t messages) {
  size_t best = 0;
  for (size_t v = 1; v < variants.size(); ++v)
    if (est[v].iteration_s < est[best].iteration_s) best = v;
  std::printf("# by call kind (ms per iteration): %-18s %12s %12s\n", "kind", variants[0].name.c_str(),
              variants[best].name.c_str());
  for (const auto& [k, s] : est[0].comm_by_kind)
    std::printf("#   %-46s %12s %12s\n", k.c_str(), report::fixed(s * 1e3, 3).c_str(),
                report::fixed(est[best].comm_by_kind.count(k) ? est[best].comm_by_kind.at(k) * 1e3 : 0.0, 3).c_str());
  std::printf("# %llu simulated messages\n", static_cast<unsigned long long>(messages));
}

// What one workload needs on every topology.
struct WorkloadRun {
  const WorkloadContext* ctx;
  workload::Model model;
  workload::Parallel base;
  workload::Device device;
  std::vector<Variant> variants;
  std::optional<EntropyReplay> replay;
  std::unique_ptr<std::ofstream> csv, csv_entropy;
};

bool run_on_topology(WorkloadRun& w, const std::string& topo_path, nlohmann::json& doc) {
  const WorkloadContext& ctx = *w.ctx;
  const topo::Topology topo = study::load_topology(*ctx.exp, topo_path);
  const workload::Parallel par = layout_on(w.base, *ctx.workload, topo, ctx.exp->file, topo_path);
  const workload::Iteration it = workload::build_iteration(w.model, par);
  if (!ctx.json) {
    std::cout << describe(topo);
    std::printf("# workload %s (%.2f B parameters) on %d GPUs: dp %d, tp %d, pp %d, ep %d, ZeRO-%d, %d micro-batches; "
                "device %.3g FLOP/s x %.2f\n",
                w.model.name.c_str(), it.params.total / 1e9, par.world(), par.dp, par.tp, par.pp, par.ep, par.zero_stage,
                par.micro_batches, w.device.peak_flops, w.device.efficiency);
  }
  Planned p = prepare(it, par, topo, w.variants.size());
  for (size_t v = 0; v < w.variants.size(); ++v) {
    const std::unique_ptr<policy::Policy> policy = policy::make_policy(w.variants[v].policy);
    for (size_t c = 0; c < it.calls.size(); ++c) plan_call(p, ctx, it, c, w.variants[v], v, *policy, w.model, w.device);
  }
  bool ok = true;
  const uint64_t messages = simulate_groups(p, ctx, ok);
  std::vector<workload::Estimate> est(w.variants.size());
  for (size_t v = 0; v < w.variants.size(); ++v)
    est[v] = workload::estimate(it, w.device, [&](const workload::CommCall& call) {
      const size_t c = static_cast<size_t>(&call - it.calls.data());
      const double s = p.seconds[c][v];
      if (std::isnan(s)) throw std::runtime_error("workload: call " + call.kind + " was not simulated");
      return s + p.extra[c][v];
    });
  nlohmann::json tj{{"topology", topo.name}, {"gpus", topo.gpus()}, {"model", w.model.name},
                    {"layout", {{"dp", par.dp}, {"tp", par.tp}, {"pp", par.pp}, {"ep", par.ep},
                                {"zero_stage", par.zero_stage}, {"micro_batches", par.micro_batches}}},
                    {"params", it.params.total}};
  std::ostringstream prefix;
  prefix << topo.name << "," << topo.gpus() << "," << w.model.name << "," << par.dp << "," << par.tp << "," << par.pp << ","
         << par.ep << "," << par.zero_stage << "," << par.micro_batches << ",";
  tj["variants"] = report_variants(w.variants, est, ctx, prefix.str(), w.csv.get());
  tj["calls"] = calls_json(it, w.variants, p);
  if (!ctx.json) print_by_kind(w.variants, est, messages);
  if (w.replay)
    tj["entropy"] = report_entropy(*w.replay, topo.name, w.model.name, est, kUncompressed,
                                   [&](uint32_t r) { return lowrank_variant(w.variants, r); }, ctx, w.csv_entropy.get());
  doc["workload"].push_back(tj);
  return ok;
}

// --- a traced job ------------------------------------------------------------------------

// One traced job on every topology: its calls, merged into distinct (group, collective, size,
// dtype, tensor) calls; each planned by every variant on its group's ranks and simulated once;
// the ranks' timelines replayed with each variant's call times.
struct TraceRun {
  const WorkloadContext* ctx;
  workload::TraceJob job;        // as traced (scale 1)
  workload::TraceJob scaled;     // what is replayed
  std::vector<Variant> variants;
  TraceCalls calls;              // the scaled job's distinct calls
  std::unique_ptr<std::ofstream> csv;
};

// Iteration, compute, communication (the busiest rank's sum) and exposed time of one variant:
// replays of the ranks' timelines (all calls, none, all but one kind).
workload::Estimate replay_estimate(const TraceRun& w, const std::function<double(size_t)>& call_s, double compute_scale) {
  const auto& job = w.scaled;
  workload::TraceJob scaled_compute;
  const workload::TraceJob* j = &job;
  if (compute_scale != 1.0) {
    scaled_compute = job;
    for (auto& r : scaled_compute.ranks)
      for (auto& it : r.items) it.seconds *= compute_scale;
    j = &scaled_compute;
  }
  auto run = [&](const std::string& free_kind, bool all_free) {
    const auto t = workload::replay(*j, [&](int r, size_t c) {
      const size_t d = w.calls.call_of[static_cast<size_t>(r)][c];
      if (all_free || w.calls.distinct.calls[d].kind == free_kind) return 0.0;
      return call_s(d);
    });
    return *std::max_element(t.begin(), t.end());
  };
  workload::Estimate e;
  e.iteration_s = run("", false);
  e.compute_s = run("", true);
  e.exposed_comm_s = e.iteration_s - e.compute_s;
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    double comm = 0;
    std::map<std::string, double> by_kind;
    for (size_t c = 0; c < job.ranks[r].calls.size(); ++c) {
      const size_t d = w.calls.call_of[r][c];
      comm += call_s(d);
      by_kind[w.calls.distinct.calls[d].kind] += call_s(d);
    }
    if (comm >= e.comm_s) e.comm_s = comm, e.comm_by_kind = by_kind;
  }
  for (const auto& [kind, total] : e.comm_by_kind) e.exposed_by_kind[kind] = e.iteration_s - run(kind, false);
  return e;
}

// Every compressing codec needs curves for the dtypes the job sends.
void check_trace_curves(const TraceRun& w, const WorkloadContext& ctx) {
  if (ctx.cal->source == "zero") return;
  for (const auto& c : w.calls.distinct.calls)
    for (const auto& codec : ctx.exp->codecs)
      for (auto op : {calib::Op::Compress, calib::Op::Decompress})
        if (codec != "identity" && !c.tensor.empty() && !ctx.cal->has(op, codec, c.dtype))
          throw config::ConfigError(ctx.cal->file + ": curves: no " + std::string(calib::op_name(op)) + " curve for codec " +
                                    codec + ", dtype " + std::string(dtype_name(c.dtype)) + " (the trace's " + c.kind +
                                    " calls)");
}

bool run_trace_on_topology(TraceRun& w, const std::string& topo_path, nlohmann::json& doc) {
  const WorkloadContext& ctx = *w.ctx;
  const study::TraceSpec& spec = *ctx.workload->trace;
  const topo::Topology topo = study::load_topology(*ctx.exp, topo_path);
  const auto& job = w.scaled;
  if (job.world > topo.gpus()) {
    // Job rank r runs on GPU r: every rank needs a GPU, not only the largest group's.
    const auto largest = std::max_element(job.groups.begin(), job.groups.end(), [](const auto& a, const auto& b) {
      return a.ranks.size() < b.ranks.size();
    });
    throw config::ConfigError(ctx.exp->file + ": workload.trace: " + spec.files.front() + ": the job's " +
                              std::to_string(job.world) + " ranks" +
                              (spec.scale_dp > 1 ? " (scale_dp " + std::to_string(spec.scale_dp) + ")" : "") +
                              ", its largest group the " + largest->label + " group of " +
                              std::to_string(largest->ranks.size()) + " ranks, but " + topo_path + " has " +
                              std::to_string(topo.gpus()) + " GPUs (job rank r runs on GPU r)");
  }
  // The trace as it ran: its step, its compute and the replay with its own call times.
  double step_s = 0, compute_s = 0;
  for (const auto& r : w.job.ranks) step_s = std::max(step_s, r.step_s), compute_s = std::max(compute_s, r.compute_s);
  const auto traced = workload::traced_call_seconds(w.job);
  const auto own = workload::replay(w.job, [&](int r, size_t c) { return traced[static_cast<size_t>(r)][c]; });
  const double own_s = *std::max_element(own.begin(), own.end());
  const auto& l = job.layout;
  if (!ctx.json) {
    std::cout << describe(topo);
    std::printf("# workload trace %s: %zu file%s, %s backend, %s of rank 0; %d ranks as traced, dp %d, tp %d, pp %d",
                spec.name.c_str(), spec.files.size(), spec.files.size() == 1 ? "" : "s", w.job.backend.c_str(),
                w.job.ranks[0].step.c_str(), w.job.world, w.job.layout.dp, w.job.layout.tp, w.job.layout.pp);
    if (spec.spmd) std::printf("; spmd: one rank's trace for every rank");
    if (spec.scale_dp > 1) std::printf("; replayed at %dx data parallelism: %d ranks, dp %d", spec.scale_dp, job.world, l.dp);
    if (spec.compute_scale != 1.0) std::printf("; compute x %g", spec.compute_scale);
    std::printf("\n# traced: step %s ms, compute %s ms (slowest rank); replayed with the trace's own call times: %s ms\n",
                report::fixed(step_s * 1e3, 2).c_str(), report::fixed(compute_s * 1e3, 2).c_str(),
                report::fixed(own_s * 1e3, 2).c_str());
  }
  Planned p = prepare(w.calls.distinct, {}, topo, w.variants.size());
  workload::Model no_model;
  workload::Device no_device;
  for (size_t v = 0; v < w.variants.size(); ++v) {
    const std::unique_ptr<policy::Policy> policy = policy::make_policy(w.variants[v].policy);
    for (size_t c = 0; c < w.calls.distinct.calls.size(); ++c) {
      // Integer data (no tensor kind) is not compressed: the variant without codecs plans it.
      const Variant& var = w.calls.distinct.calls[c].tensor.empty() ? w.variants[kUncompressed] : w.variants[v];
      plan_call(p, ctx, w.calls.distinct, c, var, v, *policy, no_model, no_device);
    }
  }
  bool ok = true;
  const uint64_t messages = simulate_groups(p, ctx, ok);
  std::vector<workload::Estimate> est(w.variants.size());
  for (size_t v = 0; v < w.variants.size(); ++v)
    est[v] = replay_estimate(w, [&](size_t d) {
      const double s = p.seconds[d][v];
      if (std::isnan(s)) throw std::runtime_error("workload: call " + w.calls.distinct.calls[d].kind + " was not simulated");
      return s;
    }, spec.compute_scale);
  nlohmann::json tj{{"topology", topo.name}, {"gpus", topo.gpus()}, {"model", "trace:" + spec.name},
                    {"layout", {{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"ep", 1}}},
                    {"trace", {{"files", spec.files}, {"backend", w.job.backend}, {"step", w.job.ranks[0].step},
                               {"ranks", w.job.world}, {"spmd", spec.spmd}, {"scale_dp", spec.scale_dp}, {"compute_scale", spec.compute_scale},
                               {"traced_step_ms", step_s * 1e3}, {"traced_compute_ms", compute_s * 1e3},
                               {"replayed_own_times_ms", own_s * 1e3}}}};
  std::ostringstream prefix;
  prefix << topo.name << "," << topo.gpus() << ",trace:" << spec.name << "," << l.dp << "," << l.tp << "," << l.pp
         << ",1,,1,";
  tj["variants"] = report_variants(w.variants, est, ctx, prefix.str(), w.csv.get());
  tj["calls"] = calls_json(w.calls.distinct, w.variants, p);
  if (!ctx.json) print_by_kind(w.variants, est, messages);
  doc["workload"].push_back(tj);
  return ok;
}

bool run_trace_workload(const WorkloadContext& ctx, nlohmann::json& doc) {
  const study::TraceSpec& spec = *ctx.workload->trace;
  TraceRun w;
  w.ctx = &ctx;
  try {  // bad traces are bad input: one line naming the experiment, the file and the event
    w.job = workload::load_trace(spec.files, {spec.dp, spec.tp, spec.pp}, spec.step, spec.spmd);
    w.scaled = workload::scale_data_parallel(w.job, spec.scale_dp);
  } catch (const std::runtime_error& e) {
    throw config::ConfigError(ctx.exp->file + ": workload.trace: " + e.what());
  }
  w.variants = make_variants(*ctx.exp, *ctx.workload);
  w.calls = distinct_trace_calls(w.scaled);
  check_trace_curves(w, ctx);
  w.csv = append_csv(ctx.out, "workload.csv", kWorkloadCsvHeader);
  bool ok = true;
  for (const auto& topo_path : ctx.exp->topologies) ok = run_trace_on_topology(w, topo_path, doc) && ok;
  return ok;
}

}  // namespace

bool run_workload(const WorkloadContext& ctx, nlohmann::json& doc) {
  const study::WorkloadSpec& spec = *ctx.workload;
  if (spec.trace) return run_trace_workload(ctx, doc);
  WorkloadRun w;
  w.ctx = &ctx;
  w.model = workload::load_model(spec.model);
  w.base = workload::load_parallel(spec.layout, w.model);
  w.device.peak_flops = spec.peak_flops;
  w.device.efficiency = spec.efficiency;
  w.variants = make_variants(*ctx.exp, spec);
  // EDGC: the controller decides each step's rank from the trace; every rank it picks is priced
  // as a lowrank variant (warm-up steps as adaptive/identity, the uncompressed plan).
  if (spec.entropy) {
    w.replay = replay_entropy(*spec.entropy, ctx.exp->file, spec.lowrank_ranks);
    for (uint32_t r : w.replay->rank)
      if (r > 0) lowrank_variant(w.variants, r);
  }
  w.csv = append_csv(ctx.out, "workload.csv", kWorkloadCsvHeader);
  if (w.replay)
    w.csv_entropy = append_csv(ctx.out, "entropy.csv",
                               "topology,model,window,first_step,steps,entropy_bits,rank,iteration_ms,comm_ms,relative_error\n");
  bool ok = true;
  for (const auto& topo_path : ctx.exp->topologies) ok = run_on_topology(w, topo_path, doc) && ok;
  if (!ctx.json) {
    const std::string kernels = ctx.cal->source == "measured" ? "measured" : "NOT measured (" + ctx.cal->source + ")";
    std::printf("# for comparison: ZipCCL (2026) reports up to 1.35x communication and 1.18x end-to-end speed-up on 64 "
                "H100s; kernel times here are %s\n",
                kernels.c_str());
  }
  return ok;
}

}  // namespace compcoll::sim
