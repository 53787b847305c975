// shared/study/experiment.cpp — see experiment.h.
#include "study/experiment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "config/yaml_node.h"
#include "topology/topology.h"

namespace compcoll::study {
namespace fs = std::filesystem;
using config::ConfigError;
using config::Node;

policy::CallInfo call_info(const CallSweep& s, uint64_t bytes, int nranks) {
  policy::CallInfo info;
  info.collective = sched::parse_collective(s.collective);
  info.bytes = bytes;
  info.dtype = *parse_dtype(s.dtype);
  info.tensor = s.tensor;
  info.nranks = nranks;
  return info;
}

std::vector<uint64_t> size_range(uint64_t from, uint64_t to, double factor) {
  std::vector<uint64_t> out;
  for (double s = static_cast<double>(from); s <= static_cast<double>(to) * (1 + 1e-9); s *= factor)
    out.push_back(static_cast<uint64_t>(s + 0.5));
  return out;
}

namespace {

std::string resolve(const Node& n, const fs::path& exp_dir) {
  const std::string p = n.as_string();
  if (fs::path(p).is_absolute()) {
    if (!fs::exists(p)) n.fail("no such file '" + p + "'");
    return p;
  }
  for (const fs::path& base : {fs::current_path(), exp_dir, exp_dir.parent_path()})
    if (fs::exists(base / p)) return (base / p).lexically_normal().string();
  n.fail("no such file '" + p + "' (looked in the working directory, " + exp_dir.string() + " and its parent)");
}

// sizes and calls: a sweep of collective calls.
// A key that takes one value or a non-empty list of them: `each` on every value.
template <class F>
void one_or_list(const Node& n, const std::string& empty_message, F&& each) {
  if (!n.is_sequence()) return each(n);
  if (n.size() == 0) n.fail(empty_message);
  for (size_t i = 0; i < n.size(); ++i) each(n[i]);
}

void parse_sweep(const Node& root, Experiment& e) {
  const Node sizes = root.get("sizes");
  if (sizes.is_sequence()) {
    for (size_t i = 0; i < sizes.size(); ++i) e.sizes.push_back(sizes[i].as_bytes());
  } else if (sizes.is_map()) {
    const uint64_t from = sizes.get("from").as_bytes(), to = sizes.get("to").as_bytes();
    const double factor = sizes.get_double("factor", 2.0);
    if (!(factor > 1)) sizes.opt("factor").fail("expected a factor > 1");
    if (from == 0 || to < from) sizes.fail("expected 0 < from <= to");
    sizes.check_no_unknown_keys();
    // A factor just above 1 would ask for more sizes than memory holds; no sweep needs that many.
    constexpr double kMaxSizes = 10000;
    const double n = std::floor(std::log(static_cast<double>(to) / static_cast<double>(from)) / std::log(factor)) + 1;
    if (n > kMaxSizes) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "from %llu to %llu B by x%.10g is %.4g sizes; at most %.0f",
                    static_cast<unsigned long long>(from), static_cast<unsigned long long>(to), factor, n, kMaxSizes);
      sizes.fail(buf);
    }
    e.sizes = size_range(from, to, factor);
  } else {
    e.sizes.push_back(sizes.as_bytes());
  }
  if (e.sizes.empty()) sizes.fail("expected at least one size");

  const Node calls = root.get("calls");
  if (!calls.is_sequence() || calls.size() == 0) calls.fail("expected a list of collective calls");
  for (size_t i = 0; i < calls.size(); ++i) {
    const Node c = calls[i];
    CallSweep s;
    s.collective = c.get("collective").as_choice({"allreduce", "reduce-scatter", "allgather", "broadcast", "all-to-all"});
    s.algorithm = c.get("algorithm").as_string();
    s.inter = c.get_string("inter", "ring");
    const Node pl = c.opt("placement");
    if (pl.defined()) s.placement = pl.as_choice({"none", "per-hop", "compress-once", "zipccl"});
    else
      s.placement = s.collective == "allreduce"                                  ? "zipccl"
                    : s.collective == "reduce-scatter" || s.algorithm == "pat" ? "per-hop"
                                                                                 : "compress-once";
    const Node ipl = c.opt("intra_placement");
    if (ipl.defined()) {
      const bool hierarchical = s.algorithm == "hierarchical" && s.collective == "allreduce";
      const bool rail_ring = s.algorithm == "rail-ring" && s.collective != "broadcast" && s.collective != "all-to-all";
      if (!hierarchical && !rail_ring)
        ipl.fail("only a hierarchical allreduce and rail rings have a placement of their own inside nodes");
      s.intra_placement =
          rail_ring ? ipl.as_choice({"none"}) : ipl.as_choice({"none", "per-hop", "compress-once", "zipccl"});
    }
    s.dtype = c.get_string("dtype", "bf16");
    if (s.dtype != "bf16" && s.dtype != "fp16" && s.dtype != "fp32") c.opt("dtype").fail("expected bf16, fp16 or fp32");
    s.tensor = c.get_string("tensor", "grad");
    s.chunks = static_cast<uint32_t>(c.get_int("chunks", 1, 1, 1024));
    s.channels = static_cast<uint32_t>(c.get_int("channels", 1, 1, 64));
    s.root = static_cast<int>(c.get_int("root", 0, 0, 1 << 22));
    const Node agg = c.opt("aggregate");
    if (agg.defined()) {
      if (s.algorithm != "pat") agg.fail("only pat carries several blocks in a message");
      s.aggregate = static_cast<uint32_t>(agg.as_int(0, 1 << 20));
    }
    c.check_no_unknown_keys();
    e.calls.push_back(s);
  }
}

// workload.entropy: the trace and the controller's knobs (policy::EntropyConfig, same names).
EntropyRunSpec parse_entropy_run(const Node& n, const fs::path& dir) {
  EntropyRunSpec r;
  r.trace = resolve(n.get("trace"), dir);
  auto& c = r.config;
  auto u64 = [&](const char* key, uint64_t& field, int64_t lo, int64_t hi) {
    field = static_cast<uint64_t>(n.get_int(key, static_cast<int64_t>(field), lo, hi));
  };
  u64("warmup_steps", c.warmup_steps, 0, int64_t{1} << 40);
  u64("window", c.window, 1, int64_t{1} << 40);
  u64("estimate_every", c.estimate_every, 1, int64_t{1} << 40);
  u64("min_samples", c.min_samples, 1, int64_t{1} << 40);
  u64("seed", c.seed, 0, INT64_MAX);
  c.rank_min = static_cast<uint32_t>(n.get_int("rank_min", c.rank_min, 1, 4096));
  c.rank_max = static_cast<uint32_t>(n.get_int("rank_max", c.rank_max, 1, 4096));
  c.rank_start = static_cast<uint32_t>(n.get_int("rank_start", c.rank_start, 0, 4096));
  c.mantissa_bits = static_cast<int>(n.get_int("mantissa_bits", c.mantissa_bits, 0, 7));
  c.sample_fraction = n.get_double("sample_fraction", c.sample_fraction);
  c.dead_band_bits = n.get_double("dead_band_bits", c.dead_band_bits);
  c.gain = n.get_double("gain", c.gain);
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    n.fail(std::string(e.what()).substr(std::string("entropy: ").size()));
  }
  n.check_no_unknown_keys();
  return r;
}

// workload.trace: one profiler trace per rank, the job's layout and the what-ifs.
TraceSpec parse_trace(const Node& n, const fs::path& dir) {
  TraceSpec t;
  const Node files = n.get("trace");
  one_or_list(files, "expected a trace file or a list of them, one per rank",
              [&](const Node& f) { t.files.push_back(resolve(f, dir)); });
  t.name = n.get_string("name", fs::path(t.files[0]).parent_path().filename().string());
  const Node lay = n.opt("layout");
  if (lay.defined()) {
    if (!lay.is_map()) lay.fail("expected the job's layout as a mapping, like {tp: 2, pp: 1}");
    t.dp = static_cast<int>(lay.get_int("dp", 0, 1, 1 << 24));
    t.tp = static_cast<int>(lay.get_int("tp", 1, 1, 1 << 24));
    t.pp = static_cast<int>(lay.get_int("pp", 1, 1, 1 << 24));
    lay.check_no_unknown_keys();
  }
  t.step = static_cast<int>(n.get_int("step", -1, 0, 1 << 30));
  if (const Node sp = n.opt("spmd"); sp.defined()) t.spmd = sp.as_bool();
  t.scale_dp = static_cast<int>(n.get_int("scale_dp", 1, 1, 1 << 16));
  t.compute_scale = n.get_double("compute_scale", 1.0);
  if (!(t.compute_scale > 0)) n.get("compute_scale").fail("expected a positive factor");
  for (const char* k : {"model", "device", "lowrank_ranks", "entropy"})
    if (n.has(k)) n.opt(k).fail("not used with a trace (the trace gives the calls and the compute)");
  n.check_no_unknown_keys();
  return t;
}

std::string fingerprint(const YAML::Node& root) {
  YAML::Emitter out;
  out << root;
  uint64_t h = 14695981039346656037ull;  // FNV-1a, 64-bit
  for (const char ch : std::string(out.c_str(), out.size())) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace

Experiment load_experiment(const std::string& path, const std::vector<std::string>& overrides) {
  const Node root = Node::load_file(path, overrides);
  Experiment e;
  e.file = path;
  e.fingerprint = fingerprint(root.raw());
  const fs::path dir = fs::absolute(fs::path(path)).parent_path();
  e.name = root.get("name").as_string();
  e.description = root.get_string("description", "");

  one_or_list(root.get("topology"), "expected at least one topology file",
              [&](const Node& t) { e.topologies.push_back(resolve(t, dir)); });
  if (const Node ts = root.opt("topology_set"); ts.defined())
    one_or_list(ts, "expected a topology key to set, key.path=value, or a list of them", [&](const Node& x) {
      const std::string v = x.as_string();
      if (v.find('=') == std::string::npos || v.front() == '=') x.fail("expected key.path=value, got '" + v + "'");
      e.topology_set.push_back(v);
    });
  const Node rk = root.opt("ranks");
  if (rk.defined()) {
    auto one = [&](const Node& x) {
      const int v = static_cast<int>(x.as_int(rk.is_sequence() ? 1 : 0, 1 << 22));
      if (v == 0) return;  // 0: every GPU, as when absent
      if (std::find(e.ranks.begin(), e.ranks.end(), v) != e.ranks.end()) x.fail("group size " + std::to_string(v) + " is listed twice");
      e.ranks.push_back(v);
    };
    one_or_list(rk, "expected a group size or a list of them", one);
  }

  const Node cal = root.get("calibration");
  e.calibration = cal.as_string() == "zero" ? "zero" : resolve(cal, dir);

  const Node net = root.opt("network");
  if (net.defined()) {
    e.network.model = net.get("model").as_choice({"lv08", "cm02"});
    // Each knob in a range that leaves the flow model meaningful: outside it, a slip (a factor
    // of 1e-300, a precision of seconds) gives rows of absurd or collapsed times.
    auto num = [&](const char* k, std::optional<double>& v, double lo, double hi, const char* range) {
      const Node x = net.opt(k);
      if (x.defined()) {
        v = x.as_double();
        if (!(*v > 0)) x.fail("expected a positive number");
        if (!(*v >= lo && *v <= hi)) x.fail(std::string("expected a number in ") + range);
      }
    };
    num("latency_factor", e.network.latency_factor, 0, 1e3, "(0, 1000]");
    num("bandwidth_factor", e.network.bandwidth_factor, 1e-3, 1e3, "[0.001, 1000]");
    num("tcp_gamma", e.network.tcp_gamma, 1e3, 1e18, "[1000, 1e18] bytes");
    num("precision", e.network.precision, 1e-15, 1e-6, "[1e-15, 1e-6] seconds");
    const Node ct = net.opt("crosstraffic");
    if (ct.defined()) e.network.crosstraffic = ct.as_bool();
    const Node pc = net.opt("protocol_costs");
    if (pc.defined()) e.network.protocol_costs = pc.as_bool();
    const Node up = net.opt("update");
    if (up.defined()) e.network.update = up.as_choice({"lazy", "full"});
    const Node pp = net.opt("p2p_channels_per_net_peer");
    if (pp.defined()) {
      if (!e.network.protocol_costs.value_or(false))
        pp.fail("NCCL's point-to-point channels are among its protocol costs: set protocol_costs: true");
      const std::string v = pp.as_string();
      if (v == "nic") e.network.p2p_net_channels = policy::kP2pFillNic;
      else if (v == "nccl") e.network.p2p_net_channels = policy::kP2pNcclDefault;
      else if (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos)
        e.network.p2p_net_channels = static_cast<int>(pp.as_int(1, 64));
      else pp.fail("expected nic, nccl or a number of channels (1-64), got '" + v + "'");
    }
    net.check_no_unknown_keys();
  } else {
    // None given: what the topologies' fabric calls for (docs/TOPOLOGY.md, "Network defaults").
    // A topology that cannot be read is left to the load that names its problem.
    std::string kind, why, first;
    for (const auto& t : e.topologies) {
      topo::NetworkDefault d;
      try {
        d = topo::network_default(t);
      } catch (const std::exception&) {
        continue;
      }
      if (kind.empty()) {
        kind = d.kind, why = d.why, first = t;
      } else if (d.kind != kind) {
        root.get("topology").fail("the topologies call for different network models (" + first + ": " + kind + ", " +
                                  why + "; " + t + ": " + d.kind + ", " + d.why +
                                  "): give the experiment a network key");
      }
    }
    if (kind == "rdma") {
      // LV08 without its TCP latency factor and cross-traffic, and NCCL's protocol costs, as the
      // fidelity experiments and the studies set them (docs/TOPOLOGY.md, "Network defaults").
      e.network.latency_factor = 1.0;
      e.network.bandwidth_factor = 0.97;
      e.network.crosstraffic = false;
      e.network.protocol_costs = true;
    } else if (kind == "measured") {
      e.network.model = "cm02";
    }
    e.network.keyed = false;
    e.network.source = kind.empty() ? "SimGrid's LV08 defaults (no topology read)"
                                    : "the topology's fabric (" + why + "): " + kind + " defaults";
  }

  const Node wl = root.opt("workload");
  if (wl.defined()) {
    auto one = [&](const Node& n) {
      WorkloadSpec w;
      if (n.has("trace")) {
        w.trace = parse_trace(n, dir);
        e.workloads.push_back(w);
        return;
      }
      w.model = resolve(n.get("model"), dir);
      w.layout = resolve(n.get("layout"), dir);
      const Node dev = n.get("device");
      w.peak_flops = dev.get("peak_flops").as_double();
      w.efficiency = dev.get("efficiency").as_double();
      if (!(w.peak_flops > 0)) dev.get("peak_flops").fail("expected a positive number of FLOP/s, like 989e12");
      if (!(w.efficiency > 0 && w.efficiency <= 1)) dev.get("efficiency").fail("expected a fraction in (0, 1]");
      dev.check_no_unknown_keys();
      const Node sc = n.opt("scale_dp");
      if (sc.defined()) w.scale_dp = sc.as_bool();
      const Node lr = n.opt("lowrank_ranks");
      if (lr.defined()) {
        if (!lr.is_sequence()) lr.fail("expected a list of ranks, like [8, 32]");
        for (size_t i = 0; i < lr.size(); ++i) w.lowrank_ranks.push_back(static_cast<int>(lr[i].as_int(1, 4096)));
      }
      const Node en = n.opt("entropy");
      if (en.defined()) w.entropy = parse_entropy_run(en, dir);
      n.check_no_unknown_keys();
      e.workloads.push_back(w);
    };
    one_or_list(wl, "expected a workload or a list of them", one);
  }

  if (!e.workloads.empty()) {
    for (const char* k : {"sizes", "calls"})
      if (root.has(k)) root.opt(k).fail("not used with a workload (its iteration makes the calls)");
  } else {
    parse_sweep(root, e);
  }

  const Node codecs = root.get("codecs");
  if (!codecs.is_sequence() || codecs.size() == 0) codecs.fail("expected a list of codec names");
  for (size_t i = 0; i < codecs.size(); ++i) e.codecs.push_back(codecs[i].as_string());

  const Node pols = root.opt("policies");
  if (pols.defined() && !e.workloads.empty())
    pols.fail("not used with a workload (its variants are nccl-like and adaptive with each codec)");
  if (pols.defined()) {
    if (!pols.is_sequence() || pols.size() == 0) pols.fail("expected a list of policies");
    e.policies.clear();
    for (size_t i = 0; i < pols.size(); ++i)
      e.policies.push_back(pols[i].as_choice({"static", "nccl-like", "adaptive", "oracle"}));
  }

  if (const Node na = root.opt("nccl_algo"); na.defined())
    one_or_list(na, "expected an NCCL algorithm or a list of them", [&](const Node& x) {
      e.nccl_algo.push_back(x.as_choice({"ring", "tree", "nvls", "nvls-tree", "pat"}));
    });

  const Node ratios = root.opt("ratios");
  if (ratios.defined()) {
    const Node dirn = ratios.opt("tensors");
    if (dirn.defined()) {
      e.tensors_dir = resolve(dirn, dir);
      if (!fs::is_directory(e.tensors_dir)) dirn.fail("expected a folder of tensor files");
    }
    const Node fixed = ratios.opt("fixed");
    if (fixed.defined()) {
      for (const auto& k : fixed.keys()) {
        const double r = fixed.get(k).as_double();
        if (!(r > 0)) fixed.get(k).fail("expected a ratio > 0 (compressed / uncompressed)");
        e.fixed_ratios[k] = r;
      }
    }
    ratios.check_no_unknown_keys();
  }
  const Node run = root.opt("run");
  if (run.defined()) {
    e.run.warmup = static_cast<int>(run.get_int("warmup", e.run.warmup, 0, 1 << 20));
    e.run.iterations = static_cast<int>(run.get_int("iterations", e.run.iterations, 1, 1 << 20));
    const Node b = run.opt("backend");
    if (b.defined()) e.run.backend = b.as_choice({"mpi", "nccl"});
    e.run.gpus_per_node = static_cast<int>(run.get_int("gpus_per_node", 0, 0, 1 << 16));
    e.run.timeout_s = run.get_double("timeout_s", e.run.timeout_s);
    if (!(e.run.timeout_s > 0)) run.opt("timeout_s").fail("expected a positive number of seconds");
    e.run.codec_threads = static_cast<uint32_t>(run.get_int("codec_threads", 1, 0, 1024));
    if (run.has("compute_thread")) e.run.compute_thread = run.get("compute_thread").as_bool();
    if (run.has("fused_decode")) e.run.fused_decode = run.get("fused_decode").as_bool();
    if (run.has("wire_budget")) e.run.wire_budget = run.get("wire_budget").as_bool();
    if (run.has("queue_ahead")) e.run.queue_ahead = run.get("queue_ahead").as_bool();
    e.run.wire_budget_margin = run.get_double("wire_budget_margin", 0);
    if (!(e.run.wire_budget_margin >= 0 && e.run.wire_budget_margin <= 1))
      run.opt("wire_budget_margin").fail("expected a fraction from 0 to 1 (0.01: budgets 1% over the learned sizes)");
    const Node en = run.opt("entropy");
    if (en.defined()) e.run.entropy = parse_entropy_run(en, dir);
    run.check_no_unknown_keys();
  }
  root.check_no_unknown_keys();
  return e;
}

topo::Topology load_topology(const Experiment& e, const std::string& path, int ranks) {
  topo::Topology t;
  try {
    t = topo::load_topology(path, ranks, e.topology_set);
  } catch (const config::ConfigError& err) {
    if (e.topology_set.empty()) throw;
    throw config::ConfigError(e.file + ": topology_set: " + err.what());
  }
  // Asked for by a key (the fabric's defaults never ask for them on hosts; message_costs charges
  // nothing on receive_copy topologies either way).
  if (e.network.keyed && e.network.protocol_costs.value_or(false) && t.receive_copy)
    throw config::ConfigError(e.file + ": network.protocol_costs: " + path +
                              " runs MPI ranks on hosts (receive_copy), which NCCL's protocol costs do not apply to");
  if (e.run.compute_thread && t.receive_copy) {
    if (!t.shared_memory)
      throw config::ConfigError(e.file + ": run.compute_thread: " + path +
                               " has receive_copy without shared_memory; the compute threads share the host's cores "
                               "with the ranks' receive copies, which the model shares through node.shared_memory: true");
    t.compute_thread = true;
  }
  if (e.run.wire_budget) t.wire_budget = true, t.wire_budget_margin = e.run.wire_budget_margin;
  // The nccl executor fuses; the host executor (MPI, receive_copy) never does.
  if (e.run.fused_decode && !t.receive_copy && !t.shared_memory) t.fused_decode = true;
  return t;
}

}  // namespace compcoll::study
