// shared/study/study.cpp — see study.h.
#include "study/study.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "codec/codec.h"
#include "config/yaml_node.h"

namespace compcoll::study {

using config::ConfigError;

void check_calls(const Experiment& exp) {
  for (size_t i = 0; i < exp.calls.size(); ++i) {
    const auto& s = exp.calls[i];
    const std::string key = exp.file + ": calls." + std::to_string(i);
    const auto names = sched::algorithm_names(sched::parse_collective(s.collective));
    if (std::find(names.begin(), names.end(), s.algorithm) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw ConfigError(key + ".algorithm: unknown " + s.collective + " algorithm '" + s.algorithm + "' (expected " + list +
                        ")");
    }
    if (s.algorithm == "hierarchical" && !sched::find_inter(s.inter))
      throw ConfigError(key + ".inter: expected " + sched::inter_choices() + ", got '" + s.inter + "'");
  }
}

void check_codecs(const Experiment& exp, bool allow_lowrank) {
  for (const auto& c : exp.codecs) {
    if (known_codec(c) || (allow_lowrank && policy::parse_lowrank_codec(c))) continue;
    throw ConfigError(exp.file + ": codecs: unknown codec '" + c + "'" +
                      (allow_lowrank ? " (or lowrank:r=N, the low-rank gradient compressor)" : ""));
  }
}

void check_curves(const Experiment& exp, const calib::Calibration& cal) {
  if (cal.source == "zero") return;
  auto need = [&](const std::string& codec, DType dt, const std::string& what) {
    for (auto op : {calib::Op::Compress, calib::Op::Decompress})
      if (!cal.has(op, codec, dt))
        throw ConfigError(cal.file + ": curves: no " + std::string(calib::op_name(op)) + " curve for codec " + codec + what);
  };
  // adaptive and the oracle may compress any call with any codec of the experiment.
  const bool searched = std::any_of(exp.policies.begin(), exp.policies.end(),
                                    [](const std::string& p) { return p == "adaptive" || p == "oracle"; });
  for (const auto& c : exp.codecs) {
    if (c == "identity" || !known_codec(c)) continue;
    for (const auto& s : exp.calls)
      if (s.placement != "none" || searched) need(c, *parse_dtype(s.dtype), ", dtype " + s.dtype);
    if (!exp.workloads.empty()) need(c, DType::BF16, "");
  }
  // A reduce curve for every dtype a call reduces (compcoll's plans reduce with a kernel).
  for (size_t i = 0; i < exp.calls.size(); ++i) {
    const auto& s = exp.calls[i];
    const bool reduces = s.collective == "allreduce" || s.collective == "reduce-scatter";
    if (reduces && !cal.has(calib::Op::Reduce, "", *parse_dtype(s.dtype)))
      throw ConfigError(cal.file + ": curves: no reduce curve for dtype " + s.dtype + ", which calls." +
                        std::to_string(i) + " (" + s.collective + ") reduces");
  }
  if (!exp.workloads.empty() && !cal.has(calib::Op::Reduce, "", DType::BF16))
    throw ConfigError(cal.file + ": curves: no reduce curve for dtype bf16 (the workload's gradients)");
}

std::string fused_decode_line(const Experiment& exp, const calib::Calibration& cal) {
  if (!exp.run.fused_decode) return "";
  std::vector<std::string> dtypes;
  for (const auto& s : exp.calls)
    if ((s.collective == "allreduce" || s.collective == "reduce-scatter") &&
        std::find(dtypes.begin(), dtypes.end(), s.dtype) == dtypes.end())
      dtypes.push_back(s.dtype);
  if (!exp.workloads.empty() && std::find(dtypes.begin(), dtypes.end(), "bf16") == dtypes.end()) dtypes.push_back("bf16");
  std::string curve, twice, none;
  for (const auto& c : exp.codecs) {
    if (!gpu_decode_adds(c)) {
      if (known_codec(c)) none += (none.empty() ? "" : ", ") + c;
      continue;
    }
    for (const auto& dt : dtypes) {
      std::string& list = cal.source == "zero" || cal.has(calib::Op::DecodeAdd, c, *parse_dtype(dt)) ? curve : twice;
      list += (list.empty() ? "" : ", ") + c + " " + dt;
    }
  }
  std::string line = "fused decode (run.fused_decode): where a GPU runs it, a reduce step's decompression and reduce "
                     "are one decode-and-add kernel";
  if (!curve.empty()) line += "; at the calibration's decode_add curve: " + curve;
  if (!twice.empty()) line += "; at its decompress and reduce curves together (no decode_add curve): " + twice;
  if (!none.empty()) line += "; not fused (no such kernel): " + none;
  return line;
}

calib::Calibration load_calibration(const Experiment& exp) {
  return exp.calibration == "zero" ? calib::zero_calibration() : calib::load_calibration(exp.calibration);
}

// --- ratios -----------------------------------------------------------------------------

const calib::MeasuredRatio& Ratios::get(const std::string& codec, DType dtype, const std::string& tensor) {
  const std::string key = codec + "/" + std::string(dtype_name(dtype)) + "/" + tensor;
  auto it = ratios_.find(key);
  if (it != ratios_.end()) return it->second;
  calib::MeasuredRatio m;
  if (codec == "identity") {
    m.source = "uncompressed";
  } else if (exp_->fixed_ratios.count(codec)) {
    m.ratio = exp_->fixed_ratios.at(codec);
    m.source = "fixed in " + exp_->file;
  } else if (const LibraryCodec* lib = find_library_codec(codec)) {
    // No host implementation to measure it with: the ratio the GPU reached when it was calibrated.
    const calib::CalibratedRatio* r = cal_ ? cal_->find_ratio(codec, dtype, tensor) : nullptr;
    if (!r)
      throw ConfigError((cal_ ? cal_->file : exp_->file) + ": ratios: no measured ratio of " + codec + " on " +
                        std::string(dtype_name(dtype)) + " " + tensor + " tensors (" + std::string(lib->library) +
                        " runs on a GPU only: `compcoll-bench calibrate --device cuda` measures it where " +
                        std::string(lib->library) + " loads), and no fixed ratio for it in " + exp_->file);
    m.ratio = r->ratio;
    m.bytes = r->bytes;
    m.source = "measured by " + std::string(lib->library) + " on " + std::to_string(r->bytes) + " bytes of " +
               std::string(dtype_name(dtype)) + " " + tensor + " tensors (" + cal_->file + ")";
  } else if (!exp_->tensors_dir.empty()) {
    m = calib::measure_ratio(codec, dtype, exp_->tensors_dir, tensor);
  } else {
    throw ConfigError(exp_->file + ": ratios: no tensors folder and no fixed ratio for codec " + codec);
  }
  return ratios_.emplace(key, m).first->second;
}

const calib::MeasuredRatio& Ratios::get(const std::string& codec, const CallSweep& call) {
  return get(codec, *parse_dtype(call.dtype), call.tensor);
}

std::function<double(const std::string&, DType, const std::string&)> Ratios::function() {
  return [this](const std::string& codec, DType dt, const std::string& tensor) { return get(codec, dt, tensor).ratio; };
}

void Ratios::resolve_all() {
  for (const auto& s : exp_->calls)
    for (const auto& c : exp_->codecs)
      if (known_codec(c)) get(c, s);
}

policy::NetFactors net_factors(const Experiment& exp) {
  policy::NetFactors f = policy::flow_model_defaults(exp.network.model);
  if (exp.network.latency_factor) f.latency_factor = *exp.network.latency_factor;
  if (exp.network.bandwidth_factor) f.bandwidth_factor = *exp.network.bandwidth_factor;
  if (exp.network.tcp_gamma) f.tcp_gamma = *exp.network.tcp_gamma;
  if (exp.network.crosstraffic) f.crosstraffic = *exp.network.crosstraffic;
  if (exp.network.protocol_costs) f.protocol_costs = *exp.network.protocol_costs;
  if (exp.network.p2p_net_channels) f.p2p_net_channels = *exp.network.p2p_net_channels;
  return f;
}

policy::System make_system(const topo::Topology& topo, const calib::Calibration& cal, const policy::NetFactors& net,
                           Ratios& ratios, const std::vector<std::string>& codecs) {
  policy::System sys;
  sys.topology = &topo;
  sys.calibration = &cal;
  sys.net = net;
  sys.ratio = ratios.function();
  sys.codecs = codecs;
  return sys;
}

// --- groups and cells -------------------------------------------------------------------

std::vector<Group> groups(const Experiment& exp, std::vector<SkippedGroup>* skipped) {
  std::vector<Group> out;
  int largest = 0;
  for (const auto& path : exp.topologies) {
    const int gpus = topo::load_topology(path).gpus();
    largest = std::max(largest, gpus);
    if (exp.ranks.empty()) out.push_back({path, 0, gpus});
    for (int r : exp.ranks) {
      if (r <= gpus) out.push_back({path, r, r});
      else if (skipped) skipped->push_back({path, r, gpus});
    }
  }
  if (out.empty())
    throw ConfigError(exp.file + ": ranks: no topology holds any of the group sizes (the largest has " +
                      std::to_string(largest) + " GPUs)");
  return out;
}

std::vector<Cell> cells(const Experiment& exp, const std::vector<Group>& groups) {
  std::vector<Cell> out;
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t c = 0; c < exp.calls.size(); ++c)
      for (uint64_t size : exp.sizes) {
        // What nccl-tests moves for the size: whole elements of the call's dtype (an all-to-all:
        // the same whole number to every rank), so the size is rounded down to them and the
        // row gives the bytes moved. A size that holds none is an error, not an empty call.
        const int n = groups[g].nranks;
        policy::CallInfo info = call_info(exp.calls[c], size, n);
        const bool a2a = info.collective == sched::Collective::AllToAll;
        const uint64_t count = policy::count_for(info.collective, size, info.dtype, n);
        if (count == 0)
          throw ConfigError(exp.file + ": sizes: " + std::to_string(size) + " B holds no whole " + exp.calls[c].dtype +
                            " element" + (a2a ? " for each of the " + std::to_string(n) + " ranks of" : " for") +
                            " calls." + std::to_string(c) + " (" + exp.calls[c].collective + ")");
        info.bytes = count * dtype_size(info.dtype) * (a2a ? static_cast<uint64_t>(n) : 1);
        Cell cell;
        cell.index = out.size();
        cell.group = g;
        cell.call = c;
        cell.size = info.bytes;
        cell.info = info;
        out.push_back(cell);
      }
  return out;
}

// --- plans ------------------------------------------------------------------------------

Planner::Planner(const Experiment& exp, const topo::Topology& topo, const calib::Calibration& cal,
                 const policy::NetFactors& net, Ratios& ratios, int gpus_per_node)
    : exp_(exp), topo_(topo), gpus_per_node_(gpus_per_node), routes_(topo) {
  std::vector<std::string> codecs;  // the codecs a policy may use (not lowrank:r=N)
  for (const auto& c : exp.codecs)
    if (known_codec(c)) codecs.push_back(c);
  system_ = make_system(topo, cal, net, ratios, codecs);
  system_.nccl_algorithms = exp.nccl_algo;
}

policy::Plan static_plan(const CallSweep& s, const std::string& codec) {
  policy::Plan p;
  p.algorithm = s.algorithm;
  p.inter = s.inter;
  p.placement = sched::parse_placement(s.placement);
  if (!s.intra_placement.empty()) p.intra = sched::parse_placement(s.intra_placement);
  p.codec = codec;
  p.chunks = s.chunks;
  p.channels = s.channels;
  p.aggregate = s.aggregate;
  return p;
}

sched::BuildSpec Planner::build_spec(const policy::Plan& plan, const Cell& cell) const {
  sched::BuildSpec b = policy::build_spec(plan, cell.info, topo_);
  if (gpus_per_node_ > 0) b.gpus_per_node = gpus_per_node_;
  b.root = exp_.calls[cell.call].root;
  return b;
}

policy::PlanCost Planner::model(const sched::BuildSpec& b, const std::string& codec, const Cell& cell, int iterations,
                                bool nccl_kernels, const std::string& protocol) {
  const double ratio = codec == "identity" ? 1.0 : system_.ratio(codec, cell.info.dtype, cell.info.tensor);
  return policy::predict(sched::build_schedule(policy::flow_spec(b, nccl_kernels, topo_, system_.net)), topo_,
                         *system_.calibration, codec, ratio, system_.net, routes_, iterations, nccl_kernels, protocol);
}

double Planner::exposed_codec(const sched::BuildSpec& b, const std::string& codec, const Cell& cell, bool nccl_kernels,
                              const std::string& protocol) {
  if (codec == "identity") return 0;
  const double ratio = system_.ratio(codec, cell.info.dtype, cell.info.tensor);
  return policy::exposed_codec_s(sched::build_schedule(policy::flow_spec(b, nccl_kernels, topo_, system_.net)), topo_,
                                 *system_.calibration, codec, ratio, system_.net, routes_, nccl_kernels, protocol);
}

void Planner::label(Entry& e, const Cell& cell) const {
  e.algorithm = policy::algorithm_label(e.plan, cell.info.collective);
  e.placement = policy::placement_label(e.plan);
}

std::vector<Entry> Planner::plan(const Cell& cell, bool predict_static) {
  const CallSweep& s = exp_.calls[cell.call];
  const int gpn = gpus_per_node_ > 0 ? gpus_per_node_ : policy::ranks_per_node(topo_, cell.info.nranks);
  std::vector<Entry> statics;
  std::map<std::string, Entry> chosen;  // policy -> its entry
  for (const auto& pol : exp_.policies) {
    if (pol == "oracle") continue;
    if (pol == "static") {
      for (const auto& codec : exp_.codecs) {
        Entry e;
        e.plan = static_plan(s, codec);
        if (policy::parse_lowrank_codec(codec)) {  // compcoll-run's lowrank rows label themselves
          statics.push_back(e);
          continue;
        }
        label(e, cell);
        if (predict_static && policy::plan_size(e.plan, cell.info, gpn).ops <= policy::kMaxPlanOps)
          e.predicted_s = policy::predict_plan(e.plan, cell.info, system_, routes_);
        statics.push_back(e);
      }
      continue;
    }
    Entry e;
    e.policy = pol;
    auto& obj = policies_[pol];
    if (!obj) obj = policy::make_policy(pol);
    try {  // a call the policy cannot plan is that row's error; the other rows still run
      double predicted = NAN;
      e.plan = obj->choose(cell.info, system_, &predicted);
      e.predicted_s = predicted;
      label(e, cell);
    } catch (const std::runtime_error& err) {
      e.error = err.what();
    }
    chosen[pol] = e;
  }
  std::vector<Entry> out;
  for (const auto& pol : exp_.policies) {
    if (pol == "static") {
      out.insert(out.end(), statics.begin(), statics.end());
    } else if (pol != "oracle") {
      out.push_back(chosen.at(pol));
    } else {
      Entry o;
      o.policy = "oracle";
      std::vector<policy::Plan> all = policy::candidates(cell.info, system_);
      // The static plans that can run (not those compcoll-run refuses on NCCL: a static row
      // simulates them ungrouped, to show them, not as a choice).
      for (const auto& x : statics)
        if (!policy::parse_lowrank_codec(x.plan.codec) &&
            policy::step_group_problem(x.plan, cell.info, system_).empty())
          all.push_back(x.plan);
      for (const auto& [name, x] : chosen)
        if (x.error.empty()) all.push_back(x.plan);
      std::vector<std::string> seen;
      for (const auto& p : all) {
        const std::string key = plan_key(p);
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
        seen.push_back(key);
        o.candidates.push_back(p);
      }
      if (o.candidates.empty()) o.error = "oracle: no plan to simulate (every candidate is over the size limits)";
      else o.plan = o.candidates.front(), label(o, cell);
      out.push_back(o);
    }
  }
  return out;
}

std::string plan_key(const policy::Plan& p) {
  policy::Plan key = p;
  if (key.codec == "identity") key.placement = sched::Placement::None, key.intra.reset();
  key.protocol.clear();  // nccl-like's labels: the schedule is the same
  key.nccl.clear();
  return key.describe();
}

// --- shards -----------------------------------------------------------------------------

Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  Shard s;
  try {
    if (slash == std::string::npos) throw std::invalid_argument("");
    size_t a = 0, b = 0;
    const int i = std::stoi(text.substr(0, slash), &a), n = std::stoi(text.substr(slash + 1), &b);
    if (a != slash || b != text.size() - slash - 1 || n < 1 || i < 1 || i > n) throw std::invalid_argument("");
    s.index = i - 1;
    s.count = n;
  } catch (const std::exception&) {
    throw std::invalid_argument("expected I/N with 1 <= I <= N (such as 2/8), got '" + text + "'");
  }
  return s;
}

double expected_cost(const Experiment& exp, const Cell& cell, const topo::Topology& topo) {
  const int gpn = policy::ranks_per_node(topo, cell.info.nranks);
  const CallSweep& s = exp.calls[cell.call];
  double cost = 0;
  auto add = [&](const policy::Plan& p) { cost += static_cast<double>(policy::plan_size(p, cell.info, gpn).messages); };
  // What sizes the plans: the topology and the codecs (nccl-like and the candidates need no
  // calibration to be chosen or listed).
  policy::System sys;
  sys.topology = &topo;
  sys.codecs = {exp.codecs.begin(), exp.codecs.end()};
  sys.nccl_algorithms = exp.nccl_algo;
  bool search = false;
  for (const auto& pol : exp.policies) {
    if (pol == "static") {
      for (const auto& codec : exp.codecs) add(static_plan(s, codec));
    } else if (pol == "adaptive" || pol == "oracle") {
      search = true;
    } else if (pol == "nccl-like") {
      add(policy::make_policy(pol)->choose(cell.info, sys, nullptr));
    } else {
      cost += cell.info.nranks;  // one plan of the policy's
    }
  }
  if (search)
    for (const auto& p : policy::candidates(cell.info, sys)) add(p);
  return cost + 1;
}

std::vector<int> assign_shards(const std::vector<double>& cost, int shards) {
  std::vector<size_t> order(cost.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  std::vector<double> load(static_cast<size_t>(std::max(shards, 1)), 0.0);
  std::vector<int> out(cost.size(), 0);
  for (size_t c : order) {
    const size_t s = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    out[c] = static_cast<int>(s);
    load[s] += cost[c];
  }
  return out;
}

}  // namespace compcoll::study
