// compcoll-run — compressed collectives for real: MPI ranks on hosts, or NCCL ranks on GPUs.
//
//   mpirun -np N compcoll-run EXPERIMENT.yaml [--backend mpi|nccl] [--out DIR] [--set K=V]...
//
// Reads the same experiment file as compcoll-sim (docs/EXPERIMENTS.md; ranks = the MPI world,
// the topology gives the ranks per node of hierarchical algorithms). For each call, size and
// codec it builds the schedule, runs it with the real executor (real/executor.h): warm-up,
// timed iterations, then a separate correctness pass on integer inputs against the closed-form
// result; and before them one row of the library's own collective (MPI's or NCCL's). Rank 0
// prints nccl-tests style rows with #wrong and ends with "# OK" or "# FAILED"; --out DIR
// writes results.csv (row by row) and results.json (rewritten atomically after every row)
// with compcoll-sim's columns plus wrong, backend and policy. `policies:` as in compcoll-sim (static,
// nccl-like, adaptive: the same shared/policy code) adds one row per policy and call and size.
// docs/compcoll-run.md.
// Exit status: 0 all rows right, 1 some row wrong, 2 bad input (one line naming file and key,
// from rank 0, the same decision on every rank and before any communication). A failure in
// the middle of a run (a transport error, a damaged stream) aborts the job with the rank's
// message; a rank silent for run.timeout_s (dead, hung, never arrived) ends it through the
// watchdog (real/watchdog.h), exit status 3; the rows finished before stay written.
#include <mpi.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>

#include "calibration/calibration.h"
#include "calibration/ratio_model.h"
#include "codec/codec.h"
#include "codec/lowrank.h"
#include "config/experiment.h"
#include "config/yaml_node.h"
#include "io/float_convert.h"
#include "io/tensor_file.h"
#include "policy/entropy.h"
#include "policy/policy.h"
#include "real/backend.h"
#include "real/baseline.h"
#include "real/executor.h"
#include "real/transport.h"
#include "real/verify.h"
#include "real/watchdog.h"
#include "report/report.h"
#include "schedule/build.h"
#include "topology/topology.h"
#ifdef COMPCOLL_HAVE_NCCL
#include "real/nccl_transport.h"
#endif

using namespace compcoll;
using namespace compcoll::real;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kUsage =
    "usage: mpirun -np N compcoll-run EXPERIMENT.yaml [--backend mpi|nccl] [--out DIR] [--set key.path=value]...\n"
    "  --backend B  mpi: host buffers, MPI point-to-point, MPI's collectives as baseline;\n"
    "               nccl: one GPU per rank, NCCL point-to-point, NCCL's collectives as baseline\n"
    "               (default: run.backend of the experiment, else mpi)\n"
    "  --out DIR    rank 0 writes DIR/results.csv (row by row) and DIR/results.json\n"
    "  --set K=V    override one key of the experiment file (repeatable)\n"
    "  --lockstep   post transfers step by step in groups (always on with nccl)\n";

// A bad command line or experiment: reported once (rank 0), exit status 2 on every rank.
struct BadInput : std::runtime_error {
  using runtime_error::runtime_error;
};

struct Args {
  std::string experiment, out, backend;
  std::vector<std::string> sets;
  bool lockstep = false;
  bool help = false;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) throw BadInput(std::string(flag) + " needs a value");
      return argv[++i];
    };
    if (s == "--help" || s == "-h") a.help = true;
    else if (s == "--set") a.sets.push_back(value("--set"));
    else if (s.starts_with("--set=")) a.sets.push_back(s.substr(6));
    else if (s == "--out") a.out = value("--out");
    else if (s == "--backend") a.backend = value("--backend");
    else if (s.starts_with("--backend=")) a.backend = s.substr(10);
    else if (s == "--lockstep") a.lockstep = true;
    else if (s.starts_with("-")) throw BadInput("unknown option " + s);
    else if (a.experiment.empty()) a.experiment = s;
    else throw BadInput("one experiment file only (got " + a.experiment + " and " + s + ")");
  }
  if (!a.help && a.experiment.empty()) throw BadInput("no experiment file");
  if (!a.backend.empty() && a.backend != "mpi" && a.backend != "nccl")
    throw BadInput("--backend: expected mpi or nccl, got '" + a.backend + "'");
  return a;
}

// compcoll-sim's columns, then wrong, backend, policy and (lossy rows) the error metrics.
const char* kCsvHeader =
    "topology,ranks,collective,algorithm,placement,codec,dtype,tensor,size_bytes,count,time_us,algbw_gbps,busbw_gbps,"
    "ratio,wire_bytes,codec_us,reduce_us,messages,speedup_vs_identity,wall_s,error,wrong,backend,policy,max_abs,rel_l2,"
    "snr_db\n";

struct Row {
  std::string topology, collective, algorithm, placement, codec, dtype, tensor, backend, error, policy = "static";
  size_t call = 0;       // index of the experiment's call
  bool library = false;  // the library's own collective (MPI's or NCCL's)
  int ranks = 0;
  uint64_t size = 0, count = 0, wire_bytes = 0, messages = 0, wrong = 0;
  double time_s = 0, ratio = 1, codec_s = 0, reduce_s = 0, wall_s = 0, speedup = NAN;
  // Lossy codecs: the output on the timed runs' data against the uncompressed schedule's.
  bool lossy = false;
  double max_abs = NAN, rel_l2 = NAN, snr_db = NAN;
};

json row_json(const Row& w, double busf) {
  const double t = w.time_s;
  return json{{"topology", w.topology},     {"ranks", w.ranks},
              {"collective", w.collective}, {"algorithm", w.algorithm},
              {"placement", w.placement},   {"codec", w.codec},
              {"dtype", w.dtype},           {"tensor", w.tensor},
              {"size_bytes", w.size},       {"count", w.count},
              {"time_us", t * 1e6},         {"algbw_gbps", t > 0 ? w.size / t / 1e9 : 0.0},
              {"busbw_gbps", t > 0 ? w.size / t / 1e9 * busf : 0.0},
              {"ratio", w.ratio},           {"ratio_source", "measured (compress ops of the timed runs)"},
              {"wire_bytes", w.wire_bytes}, {"codec_us", w.codec_s * 1e6},
              {"reduce_us", w.reduce_s * 1e6}, {"messages", w.messages},
              {"speedup_vs_identity", std::isnan(w.speedup) ? json(nullptr) : json(w.speedup)},
              {"wall_s", w.wall_s},         {"error", w.error},
              {"wrong", w.wrong},           {"backend", w.backend},
              {"policy", w.policy},
              {"max_abs", w.lossy ? json(w.max_abs) : json(nullptr)},
              {"rel_l2", w.lossy ? json(w.rel_l2) : json(nullptr)},
              {"snr_db", w.lossy && std::isfinite(w.snr_db) ? json(w.snr_db) : json(nullptr)}};
}

int local_rank_and_size(int* local_size) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int lr = 0;
  MPI_Comm_rank(node, &lr);
  MPI_Comm_size(node, local_size);
  MPI_Comm_free(&node);
  // The launcher's word first (srun may bind ranks of one host to different NUMA domains, but
  // the ids it hands out are the ones its GPU binding uses).
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return lr;
}

// A lossy row's output against the reference, this rank's part: sums of squares (error,
// reference), the largest absolute error, and elements non-finite where the reference is finite.
struct LossyError {
  double diff2 = 0, ref2 = 0, max_abs = 0;
  uint64_t nonfinite = 0;
};
LossyError lossy_error(DType dtype, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  LossyError e;
  const uint64_t n = std::min(got.size(), want.size()) / dtype_size(dtype);
  for (uint64_t i = 0; i < n; ++i) {
    const double g = load_as_float(dtype, got.data(), i), w = load_as_float(dtype, want.data(), i);
    if (!std::isfinite(w)) continue;
    if (!std::isfinite(g)) {
      ++e.nonfinite;
      continue;
    }
    const double d = g - w;
    e.diff2 += d * d;
    e.ref2 += w * w;
    e.max_abs = std::max(e.max_abs, std::fabs(d));
  }
  if (got.size() != want.size()) e.nonfinite += n;  // a different output size is all wrong
  return e;
}

// Sums a lossy row's per-rank errors over all ranks into the row: rel.err, max abs, SNR, and
// the non-finite elements as #wrong.
void fill_lossy(Row& w, const LossyError& e) {
  double sums[2] = {e.diff2, e.ref2};
  MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double max_abs = e.max_abs;
  MPI_Allreduce(MPI_IN_PLACE, &max_abs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  uint64_t nonfinite = e.nonfinite;
  MPI_Allreduce(MPI_IN_PLACE, &nonfinite, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  w.lossy = true;
  w.max_abs = max_abs;
  w.rel_l2 = sums[0] == 0 ? 0 : sums[1] == 0 ? INFINITY : std::sqrt(sums[0] / sums[1]);
  w.snr_db = sums[0] == 0 ? INFINITY : 10 * std::log10(sums[1] / sums[0]);
  w.wrong = nonfinite;
}

// One row of schedules: a static plan (the call as written, with one codec) or a policy's.
struct Entry {
  sched::BuildSpec spec;
  std::string policy = "static", algorithm, placement, codec;  // the row's labels
  // "lowrank:r=N" (the gradient compressor EDGC drives, codec/lowrank.h): `spec` allreduces
  // P (rows x rank, fp32), `q_spec` Q (cols x rank), the gradient taken as a rows x cols matrix.
  uint32_t lowrank = 0;
  uint64_t rows = 0, cols = 0;
  sched::BuildSpec q_spec;
};
// A call at a size: the library's own collective (on `baseline`'s buffers), then the entries.
struct Cell {
  size_t call = 0;
  uint64_t size = 0;
  sched::BuildSpec baseline;
  std::vector<Entry> entries;
};

struct Setup {
  config::Experiment exp;
  topo::Topology topo;
  std::string backend;
  int gpus_per_node = 1;
  std::vector<Cell> cells;  // in run order
  uint64_t plans_hash = 0;  // of every row's plan: the ranks must agree (policies decide on each)
  std::vector<std::string> skipped;  // rows the experiment asks for that do not apply
  // run.entropy: the gradient trace, and the allreduce call whose algorithm carries it.
  std::optional<GradientTrace> trace;
  size_t entropy_call = 0;
};

sched::BuildSpec spec_for(const config::CallSweep& s, const std::string& codec, uint64_t size, int n, int gpn) {
  sched::BuildSpec b;
  b.collective = sched::parse_collective(s.collective);
  b.algorithm = s.algorithm;
  b.placement = sched::parse_placement(codec == "identity" ? "none" : s.placement);
  b.nranks = n;
  b.dtype = *parse_dtype(s.dtype);
  b.count = policy::count_for(b.collective, size, b.dtype, n);
  b.pipe = {s.chunks, s.channels};
  b.gpus_per_node = gpn;
  b.inter = s.inter;
  b.root = s.root;
  return b;
}

// run.entropy's allreduces: `count` elements of `dtype`, uncompressed, with the call's algorithm.
sched::BuildSpec trace_spec(const config::CallSweep& call, DType dtype, uint64_t count, int n, int gpn) {
  sched::BuildSpec b = spec_for(call, "identity", 0, n, gpn);
  b.dtype = dtype;
  b.count = count;
  return b;
}

// Everything that can be wrong with the input, checked on every rank before any
// communication (BadInput / ConfigError / ScheduleError: one line).
Setup setup(const Args& args, int world, int local_size) {
  Setup st;
  config::Experiment& exp = st.exp;
  exp = config::load_experiment(args.experiment, args.sets);
  if (exp.topologies.size() != 1)
    throw BadInput(exp.file + ": topology: a real run has one topology (the machine it runs on), got " +
                   std::to_string(exp.topologies.size()));
  if (exp.ranks.size() > 1)
    throw BadInput(exp.file + ": ranks: a real run has one group size (the MPI world), got a list of " +
                   std::to_string(exp.ranks.size()));
  if (!exp.ranks.empty() && exp.ranks[0] != world)
    throw BadInput(exp.file + ": ranks: the experiment asks for " + std::to_string(exp.ranks[0]) + " ranks, mpirun started " +
                   std::to_string(world));
  st.topo = topo::load_topology(exp.topologies[0], world);
  st.backend = !args.backend.empty() ? args.backend : !exp.run.backend.empty() ? exp.run.backend : "mpi";
  if (exp.run.gpus_per_node > 0) {
    st.gpus_per_node = std::min(exp.run.gpus_per_node, world);
  } else {
    st.gpus_per_node = std::min(st.topo.gpus_per_node, world);
    if (local_size != st.gpus_per_node)
      throw BadInput(exp.topologies[0] + ": node.gpus: the topology puts " + std::to_string(st.gpus_per_node) +
                     " ranks on a node, but " + std::to_string(local_size) +
                     " run on this host (launch that many per host, or set run.gpus_per_node in " + exp.file + ")");
  }
  if (world % st.gpus_per_node)
    throw BadInput(exp.file + ": run.gpus_per_node: " + std::to_string(world) + " ranks are not whole nodes of " +
                   std::to_string(st.gpus_per_node));
  std::vector<std::string> codecs;  // the real codecs, for the policies
  for (const auto& c : exp.codecs) {
    if (policy::parse_lowrank_codec(c)) {
      if (st.backend == "nccl")
        throw BadInput(exp.file + ": codecs: " + c + ": lowrank runs on the host (the mpi backend) so far");
      continue;
    }
    const Codec* codec = find_codec(c);
    if (!codec)
      throw BadInput(exp.file + ": codecs: unknown codec '" + c + "' (or lowrank:r=N, the low-rank gradient compressor)");
    codecs.push_back(c);
  }
  try {
    inject_fault(-1, 0);  // only checks COMPCOLL_RUN_FAULT's form
  } catch (const std::invalid_argument& e) {
    throw BadInput(e.what());
  }
  // Policies: the same code as in compcoll-sim (shared/policy), deciding on this machine's
  // topology, the experiment's calibration and the ratios measured on its tensors.
  for (const auto& pol : exp.policies)
    if (pol == "oracle")
      throw BadInput(exp.file + ": policies: oracle runs in compcoll-sim only (it simulates every candidate plan)");
  const bool any_policy = std::any_of(exp.policies.begin(), exp.policies.end(), [](const auto& p) { return p != "static"; });
  calib::Calibration cal;  // what the policies price kernels with
  if (any_policy) {
    cal = exp.calibration == "zero" ? calib::zero_calibration() : calib::load_calibration(exp.calibration);
    if (exp.tensors_dir.empty())
      for (const auto& c : codecs)
        if (c != "identity" && !exp.fixed_ratios.count(c))
          throw BadInput(exp.file + ": ratios: a policy needs the ratio of codec " + c +
                         " (ratios.tensors, or a fixed ratio)");
  }
  std::map<std::string, double> ratios;
  auto ratio = [&](const std::string& codec, DType dt, const std::string& tensor) {
    if (codec == "identity") return 1.0;
    if (exp.fixed_ratios.count(codec)) return exp.fixed_ratios.at(codec);
    const std::string key = codec + "/" + std::string(dtype_name(dt)) + "/" + tensor;
    auto it = ratios.find(key);
    if (it == ratios.end()) it = ratios.emplace(key, calib::measure_ratio(codec, dt, exp.tensors_dir, tensor).ratio).first;
    return it->second;
  };
  policy::System sys;
  sys.topology = &st.topo;
  sys.calibration = &cal;
  sys.codecs = codecs;
  sys.ratio = ratio;
  std::map<std::string, std::unique_ptr<policy::Policy>> policies;
  std::hash<std::string> hasher;

  for (size_t i = 0; i < exp.calls.size(); ++i) {
    const auto& s = exp.calls[i];
    const std::string key = exp.file + ": calls." + std::to_string(i);
    const auto names = sched::algorithm_names(sched::parse_collective(s.collective));
    if (std::find(names.begin(), names.end(), s.algorithm) == names.end()) {
      std::string list;
      for (const auto& nme : names) list += (list.empty() ? "" : ", ") + nme;
      throw BadInput(key + ".algorithm: unknown " + s.collective + " algorithm '" + s.algorithm + "' (expected " + list + ")");
    }
    for (uint64_t size : exp.sizes) {
      Cell cell;
      cell.call = i;
      cell.size = size;
      cell.baseline = spec_for(s, "identity", size, world, st.gpus_per_node);
      if (cell.baseline.count == 0)
        throw BadInput(key + ": size " + std::to_string(size) + " is less than one element per rank");
      // NCCL's reduce-scatter and allgather take equal blocks (the baseline row of every cell).
      if (st.backend == "nccl" && (s.collective == "reduce-scatter" || s.collective == "allgather") &&
          cell.baseline.count % static_cast<uint64_t>(world))
        throw BadInput(key + ": size " + std::to_string(size) + ": " + std::to_string(cell.baseline.count) +
                       " elements are not a multiple of the " + std::to_string(world) +
                       " ranks, which NCCL's " + s.collective + " needs (the baseline row)");
      auto check_spec = [&](const sched::BuildSpec& b, const std::string& what) {
        std::string problem;
        try {
          const sched::Schedule sch = sched::build_schedule(b);
          sched::validate(sch);
          if (args.lockstep || st.backend == "nccl") problem = lockstep_problem(sch);
        } catch (const sched::ScheduleError& err) {
          throw BadInput(key + ": " + what + ": " + err.what());
        }
        if (!problem.empty())
          throw BadInput(key + ": " + what + " cannot run with transfers in lockstep groups (the nccl backend, --lockstep): " +
                         problem);
      };
      auto add = [&](const sched::BuildSpec& b, Entry e, const std::string& what) {
        check_spec(b, what);
        if (e.lowrank) check_spec(e.q_spec, what);
        e.spec = b;
        st.plans_hash = st.plans_hash * 1000003u ^ hasher(e.policy + " " + e.algorithm + " " + e.placement + " " + e.codec);
        cell.entries.push_back(std::move(e));
      };
      for (const auto& pol : exp.policies) {
        if (pol == "static") {
          for (const auto& codec : exp.codecs) {
            if (const auto r = policy::parse_lowrank_codec(codec)) {
              if (s.collective != "allreduce") {
                const std::string why = "calls." + std::to_string(i) + " (" + s.collective + "): " + codec +
                                        " compresses allreduced gradients only";
                if (std::find(st.skipped.begin(), st.skipped.end(), why) == st.skipped.end()) st.skipped.push_back(why);
                continue;
              }
              // P and Q allreduced in fp32 with the call's algorithm, uncompressed.
              Entry e;
              std::tie(e.rows, e.cols) = policy::near_square_shape(cell.baseline.count);
              e.lowrank = static_cast<uint32_t>(std::min<uint64_t>({*r, e.rows, e.cols}));
              sched::BuildSpec p = spec_for(s, "identity", size, world, st.gpus_per_node);
              p.dtype = DType::FP32;
              e.q_spec = p;
              p.count = e.rows * e.lowrank;
              e.q_spec.count = e.cols * e.lowrank;
              e.algorithm = "lowrank/" + (s.algorithm == "hierarchical" ? "hierarchical/" + s.inter : s.algorithm);
              e.placement = "none";
              e.codec = codec;
              add(p, e, s.collective + " " + s.algorithm + " " + codec);
              continue;
            }
            const sched::BuildSpec b = spec_for(s, codec, size, world, st.gpus_per_node);
            Entry e;
            e.algorithm = s.algorithm == "hierarchical" && s.collective == "allreduce" ? "hierarchical/" + s.inter : s.algorithm;
            e.placement = std::string(sched::placement_name(b.placement));
            e.codec = codec;
            add(b, e, s.collective + " " + s.algorithm);
          }
          continue;
        }
        auto& obj = policies[pol];
        if (!obj) obj = policy::make_policy(pol);
        const policy::CallInfo info = config::call_info(s, size, world);
        policy::Plan plan;
        try {
          plan = obj->choose(info, sys, nullptr);
        } catch (const std::runtime_error& err) {  // no plan small enough (policy::candidates)
          throw BadInput(key + ": size " + std::to_string(size) + ": " + err.what());
        }
        Entry e;
        e.policy = pol;
        e.algorithm = policy::algorithm_label(plan, info.collective);
        e.placement = policy::placement_label(plan);
        e.codec = plan.codec;
        add(policy::build_spec(plan, info, st.topo), e, pol + "'s plan " + plan.describe());
      }
      st.cells.push_back(std::move(cell));
    }
  }
  if (exp.run.entropy) {
    // EDGC for real: the trace's gradient, its lowrank factors at every rank the controller may
    // choose, allreduced with the first allreduce call's algorithm.
    const std::string key = exp.file + ": run.entropy";
    if (st.backend != "mpi") throw BadInput(key + ": lowrank runs on the host (the mpi backend) so far");
    const auto call = std::find_if(exp.calls.begin(), exp.calls.end(),
                                   [](const config::CallSweep& c) { return c.collective == "allreduce"; });
    if (call == exp.calls.end())
      throw BadInput(key + ": needs an allreduce call (its algorithm allreduces the gradient and the lowrank factors)");
    st.entropy_call = static_cast<size_t>(call - exp.calls.begin());
    try {
      st.trace = load_gradient_trace(exp.run.entropy->trace);
    } catch (const TensorFileError& e) {
      throw BadInput(key + ".trace: " + e.what());
    }
    const auto& cfg = exp.run.entropy->config;
    for (const uint64_t count : {st.trace->rows * st.trace->cols, st.trace->rows * cfg.rank_min,
                                 std::max(st.trace->rows, st.trace->cols) * cfg.rank_max}) {
      try {
        sched::validate(sched::build_schedule(trace_spec(*call, DType::FP32, count, world, st.gpus_per_node)));
      } catch (const sched::ScheduleError& err) {
        throw BadInput(key + ": calls." + std::to_string(st.entropy_call) + " cannot allreduce " + std::to_string(count) +
                       " elements: " + err.what());
      }
    }
  }
  if (st.backend == "nccl") {
#ifndef COMPCOLL_HAVE_NCCL
    throw BadInput("--backend nccl: this compcoll-run was built without CUDA and NCCL");
#else
    const std::string why = nccl_unavailable_reason();
    if (!why.empty()) throw BadInput("--backend nccl: " + why);
#endif
  }
  return st;
}

[[noreturn]] void abort_job(int rank, const std::string& what) {
  std::fprintf(stderr, "compcoll-run: rank %d: %s\n", rank, what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

// One lowrank step of this rank's gradient `grad` (dtype dt) at the state's rank: the local
// steps, with P and Q allreduced by `ex_p` and `ex_q` (fp32, uncompressed); the update goes
// to `out`, the time of the local steps is added to `local_s`. `p` and `q` are the caller's
// scratch for the factors (sized here; kept across steps so timed loops do not allocate).
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

// EDGC for real (run.entropy): the entropy policy's controller over the gradient trace. Every
// rank feeds it the same step, so all choose the same rank at the same step (what lowrank
// needs); warm-up steps allreduce the gradient uncompressed, later steps run lowrank at the
// controller's rank with P and Q allreduced by the executor (the call's algorithm, fp32).
// Each step's gradient is also allreduced uncompressed, for the measured comparison. A step's
// time: from a barrier to the rank's update, mean over ranks.
void run_entropy_trace(const Setup& st, const Args& args, int rank, int world, Transport& transport, DataBackend& backend,
                       const fs::path& out_dir, json& doc) {
  if (!st.trace) return;
  const config::Experiment& exp = st.exp;
  const GradientTrace& tr = *st.trace;
  const auto& cfg = exp.run.entropy->config;
  const config::CallSweep& call = exp.calls[st.entropy_call];
  const uint64_t n = tr.rows * tr.cols;
  const DType dt = tr.data.dtype;
  try {
    ExecutorOptions opt;
    opt.codec = find_codec("identity");
    opt.lockstep = args.lockstep;
    auto build = [&](DType dtype, uint64_t count) {
      return sched::build_schedule(trace_spec(call, dtype, count, world, st.gpus_per_node));
    };
    const sched::Schedule full_s = build(dt, n);
    Executor full(full_s, rank, transport, backend, opt);
    full.run();  // warm-up: connections and buffers
    struct Factors {
      sched::Schedule sp, sq;
      std::unique_ptr<Executor> p, q;
    };
    std::map<uint32_t, Factors> factors;  // per rank the controller chose (map nodes stay put)
    auto factors_for = [&](uint32_t r) -> Factors& {
      auto [it, fresh] = factors.try_emplace(r);
      Factors& f = it->second;
      if (fresh) {
        f.sp = build(DType::FP32, tr.rows * r);
        f.sq = build(DType::FP32, tr.cols * r);
        f.p = std::make_unique<Executor>(f.sp, rank, transport, backend, opt);
        f.q = std::make_unique<Executor>(f.sq, rank, transport, backend, opt);
        f.p->run();
        f.q->run();
      }
      return f;
    };
    policy::EntropyController controller(cfg);
    std::optional<lowrank::LowRankState> state;
    std::vector<float> update(n), p, q;
    // Per step: its time, the uncompressed allreduce's, lowrank's local steps' share of it.
    std::vector<double> step_s(tr.steps), plain_s(tr.steps), local_s(tr.steps, 0.0), error(tr.steps, 0.0),
        bits(tr.steps, NAN);
    std::vector<uint32_t> chosen(tr.steps);
    auto since = [](std::chrono::steady_clock::time_point t0) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    for (uint64_t s = 0; s < tr.steps; ++s) {
      set_activity("run.entropy step " + std::to_string(s));
      const uint8_t* g = tr.step_bytes(s);
      if (const auto b = controller.observe(s, dt, g, n)) bits[s] = *b;
      const uint32_t r = static_cast<uint32_t>(std::min<uint64_t>({controller.rank_for(s), tr.rows, tr.cols}));
      chosen[s] = r;
      backend.upload(full.input(), g, n * dtype_size(dt));
      transport.barrier();
      auto t0 = std::chrono::steady_clock::now();
      full.run();
      backend.synchronize();
      plain_s[s] = step_s[s] = since(t0);
      if (r > 0) {
        if (!state) state = lowrank::make_state(tr.rows, tr.cols, r, cfg.seed);
        else if (state->rank != r) lowrank::set_rank(*state, r);
        Factors& f = factors_for(r);
        transport.barrier();
        t0 = std::chrono::steady_clock::now();
        lowrank_step(backend, world, *state, *f.p, *f.q, dt, g, update.data(), local_s[s], p, q);
        step_s[s] = since(t0);
        error[s] = lowrank::step_error(*state, update.data());
      }
      heartbeat();
    }
    MPI_Allreduce(MPI_IN_PLACE, step_s.data(), static_cast<int>(tr.steps), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, plain_s.data(), static_cast<int>(tr.steps), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, local_s.data(), static_cast<int>(tr.steps), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (uint64_t s = 0; s < tr.steps; ++s) step_s[s] /= world, plain_s[s] /= world, local_s[s] /= world;
    if (rank == 0) {
      const std::string algo = call.algorithm == "hierarchical" ? "hierarchical/" + call.inter : call.algorithm;
      std::printf("# EDGC (entropy policy) for real over %s: %llu steps of a %llu x %llu gradient, %d ranks; warm-up "
                  "%llu, window %llu, estimate every %llu on %.3g of the elements (>= %llu), ranks %u..%u; "
                  "allreduce %s (calls.%zu), P and Q in fp32\n",
                  exp.run.entropy->trace.c_str(), static_cast<unsigned long long>(tr.steps),
                  static_cast<unsigned long long>(tr.rows), static_cast<unsigned long long>(tr.cols), world,
                  static_cast<unsigned long long>(cfg.warmup_steps), static_cast<unsigned long long>(cfg.window),
                  static_cast<unsigned long long>(cfg.estimate_every), cfg.sample_fraction,
                  static_cast<unsigned long long>(cfg.min_samples), cfg.rank_min, cfg.rank_max, algo.c_str(),
                  st.entropy_call);
      std::printf("#%-9s %11s %13s %6s %10s %10s %17s %10s\n", "window", "steps", "entropy(bits)", "rank", "step(us)",
                  "local(us)", "uncompressed(us)", "rel.error");
    }
    json ej{{"trace", exp.run.entropy->trace}, {"steps", tr.steps}, {"rows", tr.rows}, {"cols", tr.cols},
            {"call", st.entropy_call}, {"warmup_steps", cfg.warmup_steps}, {"window", cfg.window},
            {"estimate_every", cfg.estimate_every}, {"sample_fraction", cfg.sample_fraction},
            {"min_samples", cfg.min_samples}, {"rank_min", cfg.rank_min}, {"rank_max", cfg.rank_max},
            {"windows", json::array()}};
    std::unique_ptr<std::ofstream> ecsv;
    if (rank == 0 && !out_dir.empty()) {
      ecsv = std::make_unique<std::ofstream>(out_dir / "entropy.csv");
      *ecsv << "window,first_step,steps,entropy_bits,rank,step_us,local_us,uncompressed_us,relative_error\n";
    }
    int64_t index = cfg.warmup_steps > 0 ? -1 : 0;
    double run_s = 0, plain_total = 0, error_sum = 0;
    uint64_t compressed = 0;
    for (const auto& [first, end] : policy::entropy_windows(cfg, tr.steps)) {
      double b = 0, e = 0, t = 0, l = 0, u = 0;
      int estimates = 0;
      for (uint64_t s = first; s < end; ++s) {
        if (!std::isnan(bits[s])) b += bits[s], ++estimates;
        e += error[s];
        t += step_s[s];
        l += local_s[s];
        u += plain_s[s];
      }
      const double k = static_cast<double>(end - first);
      run_s += t;
      plain_total += u;
      if (chosen[first] > 0) error_sum += e, compressed += end - first;
      const std::string name = index < 0 ? "warm-up" : std::to_string(index);
      ++index;
      const double mean_bits = estimates ? b / estimates : NAN;
      ej["windows"].push_back({{"window", name}, {"first_step", first}, {"steps", end - first},
                               {"entropy_bits", estimates ? json(mean_bits) : json(nullptr)}, {"rank", chosen[first]},
                               {"step_us", t / k * 1e6}, {"local_us", l / k * 1e6}, {"uncompressed_us", u / k * 1e6},
                               {"relative_error", e / k}});
      if (rank == 0)
        std::printf(" %-9s %5llu-%-5llu %13s %6u %10s %10s %17s %10s\n", name.c_str(),
                    static_cast<unsigned long long>(first), static_cast<unsigned long long>(end - 1),
                    estimates ? report::fixed(mean_bits, 3).c_str() : "-", chosen[first],
                    report::fixed(t / k * 1e6, 2).c_str(), report::fixed(l / k * 1e6, 2).c_str(),
                    report::fixed(u / k * 1e6, 2).c_str(), report::fixed(e / k, 4).c_str());
      if (ecsv)
        *ecsv << name << "," << first << "," << end - first << "," << (estimates ? report::fixed(mean_bits, 4) : "") << ","
              << chosen[first] << "," << report::fixed(t / k * 1e6, 3) << "," << report::fixed(l / k * 1e6, 3) << ","
              << report::fixed(u / k * 1e6, 3) << "," << report::fixed(e / k, 5) << "\n";
    }
    const double mean_error = compressed ? error_sum / static_cast<double>(compressed) : 0.0;
    ej["run"] = {{"entropy_s", run_s}, {"uncompressed_s", plain_total}, {"speedup", plain_total / run_s},
                 {"mean_relative_error", mean_error}};
    doc["entropy"] = ej;
    if (rank == 0)
      std::printf("# run of %llu steps: entropy %s ms, uncompressed %s ms (measured, the same steps), speed-up %s; mean "
                  "relative error after warm-up %s\n",
                  static_cast<unsigned long long>(tr.steps), report::fixed(run_s * 1e3, 3).c_str(),
                  report::fixed(plain_total * 1e3, 3).c_str(), report::fixed(plain_total / run_s, 3).c_str(),
                  report::fixed(mean_error, 4).c_str());
  } catch (const std::exception& e) {
    abort_job(rank, "run.entropy: " + std::string(e.what()));
  }
}

int run(const Args& args) {
  int rank = 0, world = 1, local_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const int local_rank = local_rank_and_size(&local_size);

  // Input checks on every rank; the first failing rank's message is printed by it, and every
  // rank exits 2, before any other communication.
  Setup st;
  std::string error;
  try {
    st = setup(args, world, local_size);
  } catch (const std::exception& e) {  // BadInput, ConfigError, ScheduleError, TensorFileError
    error = e.what();
  }
  int first_bad = error.empty() ? world : rank;
  MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first_bad < world) {
    if (rank == first_bad) std::cerr << "compcoll-run: " << error << "\n";
    return 2;
  }
  // Every rank planned on its own: the same files give the same plans, unless they differ.
  uint64_t hashes[2] = {st.plans_hash, ~st.plans_hash};
  MPI_Allreduce(MPI_IN_PLACE, hashes, 2, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  if (hashes[0] != ~hashes[1]) {
    if (rank == 0)
      std::cerr << "compcoll-run: " << st.exp.file
                << ": policies: the ranks chose different plans (do they read the same calibration and tensor files?)\n";
    return 2;
  }
  // From here a silent rank ends the job within run.timeout_s instead of hanging it.
  Watchdog watchdog(rank, st.exp.run.timeout_s);
  const config::Experiment& exp = st.exp;
  const bool nccl = st.backend == "nccl";

  std::unique_ptr<Transport> transport;
  std::unique_ptr<DataBackend> backend;
#ifdef COMPCOLL_HAVE_NCCL
  if (nccl) {
    // A rank whose device or communicator cannot be set up (a GPU shared by two ranks: NCCL
    // refuses it) ends the job now, instead of leaving the others in ncclCommInitRank.
    try {
      auto pair = make_nccl_backend(MPI_COMM_WORLD, local_rank);
      transport = std::move(pair.transport);
      backend = std::move(pair.backend);
    } catch (const std::exception& e) {
      abort_job(rank, std::string("nccl setup: ") + e.what());
    }
  }
#endif
  if (!nccl) {
    transport = std::make_unique<MpiTransport>(MPI_COMM_WORLD);
    backend = make_host_backend();
  }
  (void)local_rank;

  // Metadata.
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int mpi_len = 0;
  MPI_Get_library_version(mpi_version, &mpi_len);
  std::string mpi_ver(mpi_version, static_cast<size_t>(mpi_len));
  mpi_ver = mpi_ver.substr(0, mpi_ver.find_first_of(",\n"));
  std::ostringstream meta;
  meta << "# compcoll-run " << exp.name << " (" << exp.file << ")" << (exp.description.empty() ? "" : ": " + exp.description)
       << "\n";
  meta << "# backend " << st.backend << " on " << backend->describe() << "; " << world << " ranks, " << st.gpus_per_node
       << " per node; rank 0 on " << host << "; " << mpi_ver << "\n";
  meta << "# warm-up " << exp.run.warmup << ", timed iterations " << exp.run.iterations
       << "; time = mean over ranks of each rank's mean iteration time; transfers "
       << (args.lockstep || transport->sends_wait_for_receives() ? "in lockstep groups by step" : "posted as soon as ready")
       << "\n";
  for (const auto& k : st.skipped) meta << "# skipped: " << k << "\n";
  meta << "# correctness: lossless rows on integer inputs, bitwise against the closed-form result (#wrong: elements, "
          "all ranks); lossy rows: rel.err = ||out - uncompressed|| / ||uncompressed|| on the timed runs' data "
          "(#wrong: non-finite elements)\n";

  std::unique_ptr<std::ofstream> csv;
  fs::path out_dir;
  if (rank == 0 && !args.out.empty()) {
    out_dir = args.out;
    fs::create_directories(out_dir);
    csv = std::make_unique<std::ofstream>(out_dir / "results.csv");
    *csv << kCsvHeader;
    csv->flush();
  }
  json doc{{"experiment", {{"name", exp.name}, {"file", exp.file}, {"description", exp.description}}},
           {"versions", {{"compcoll", "0.1.0"}, {"mpi", mpi_ver}}},
           {"machine", {{"rank0_host", host}, {"backend", st.backend}, {"device", backend->describe()}, {"ranks", world},
                        {"ranks_per_node", st.gpus_per_node}}},
           {"run", {{"warmup", exp.run.warmup}, {"iterations", exp.run.iterations}}},
           {"topology", {{"file", exp.topologies[0]}, {"name", st.topo.name}}},
           {"rows", json::array()}};
#ifdef COMPCOLL_HAVE_NCCL
  if (nccl) doc["versions"]["nccl"] = nccl_version_string();
#endif
  if (rank == 0) {
    std::cout << meta.str() << describe(st.topo);
    std::printf("#%12s %12s %5s %15s %-22s %-13s %-12s %6s %12s %9s %9s %7s %10s %8s %8s %7s %s\n", "size", "count", "type",
                "collective", "algorithm", "placement", "codec", "ranks", "time(us)", "algbw", "busbw", "ratio",
                "codec(us)", "speedup", "rel.err", "#wrong", "policy");
    std::fflush(stdout);
  }

  const auto t_start = std::chrono::steady_clock::now();
  auto last_progress = t_start;
  const bool tty = isatty(STDERR_FILENO);
  std::map<std::string, double> identity_time;
  uint64_t total_wrong = 0;
  size_t done_rows = 0;
  size_t total_rows = 0;
  for (const auto& cell : st.cells) total_rows += 1 + cell.entries.size();

  auto emit = [&](Row& w) {
    const double busf = report::bus_factor(sched::parse_collective(w.collective), w.ranks);
    // Speed-up: over the call's own schedule uncompressed (the static identity row of the cell).
    const std::string key = std::to_string(w.call) + "/" + std::to_string(w.size);
    if (w.codec == "identity" && w.policy == "static" && !w.library) identity_time[key] = w.time_s;
    if (identity_time.count(key) && w.time_s > 0) w.speedup = identity_time[key] / w.time_s;
    total_wrong += w.wrong;
    ++done_rows;
    if (rank != 0) return;
    const json j = row_json(w, busf);
    std::printf(" %12llu %12llu %5s %15s %-22s %-13s %-12s %6d %12s %9s %9s %7s %10s %8s %8s %7llu %s\n",
                static_cast<unsigned long long>(w.size), static_cast<unsigned long long>(w.count), w.dtype.c_str(),
                w.collective.c_str(), w.algorithm.c_str(), w.placement.c_str(), w.codec.c_str(), w.ranks,
                report::fixed(w.time_s * 1e6, 2).c_str(), report::fixed(j["algbw_gbps"].get<double>(), 2).c_str(),
                report::fixed(j["busbw_gbps"].get<double>(), 2).c_str(), report::fixed(w.ratio, 4).c_str(),
                w.backend == "nccl" && w.codec != "identity" ? "-" : report::fixed(w.codec_s * 1e6, 2).c_str(),
                std::isnan(w.speedup) ? "-" : report::fixed(w.speedup, 3).c_str(),
                w.lossy ? report::fixed(w.rel_l2, 5).c_str() : "-", static_cast<unsigned long long>(w.wrong),
                w.policy.c_str());
    std::fflush(stdout);
    doc["rows"].push_back(j);
    if (csv) {
      *csv << report::csv_quote(w.topology) << "," << w.ranks << "," << w.collective << "," << w.algorithm << "," << w.placement
           << "," << w.codec << "," << w.dtype << "," << w.tensor << "," << w.size << "," << w.count << ","
           << report::fixed(w.time_s * 1e6, 3) << "," << report::fixed(j["algbw_gbps"].get<double>(), 4) << ","
           << report::fixed(j["busbw_gbps"].get<double>(), 4) << "," << report::fixed(w.ratio, 5) << "," << w.wire_bytes << ","
           << report::fixed(w.codec_s * 1e6, 3) << "," << report::fixed(w.reduce_s * 1e6, 3) << "," << w.messages << ","
           << (std::isnan(w.speedup) ? "" : report::fixed(w.speedup, 4)) << "," << report::fixed(w.wall_s, 3) << "," << report::csv_quote(w.error)
           << "," << w.wrong << "," << w.backend << "," << w.policy << ","
           << (w.lossy ? report::fixed(w.max_abs, 6) : "") << "," << (w.lossy ? report::fixed(w.rel_l2, 6) : "") << ","
           << (w.lossy && std::isfinite(w.snr_db) ? report::fixed(w.snr_db, 3) : "") << "\n";
      csv->flush();
      report::write_atomic(out_dir / "results.json", doc.dump(1));
    }
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - t_start).count();
    if (elapsed > 3 && (tty || std::chrono::duration<double>(now - last_progress).count() > 10 || done_rows == total_rows)) {
      std::fprintf(stderr, "%s[compcoll-run] %zu/%zu rows, %.0f%%, %.0f s elapsed%s", tty ? "\r" : "", done_rows,
                   total_rows, 100.0 * done_rows / total_rows, elapsed, tty && done_rows < total_rows ? "" : "\n");
      last_progress = now;
    }
  };
  auto base_row = [&](const sched::BuildSpec& b, const config::CallSweep& s, uint64_t size) {
    Row w;
    w.topology = st.topo.name;
    w.ranks = world;
    w.collective = s.collective;
    w.dtype = s.dtype;
    w.tensor = s.tensor;
    w.size = size;
    w.count = b.count;
    w.backend = st.backend;
    w.call = static_cast<size_t>(&s - exp.calls.data());
    return w;
  };
  // Mean over ranks of a per-rank value.
  auto mean = [&](double v) {
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return v / world;
  };
  auto sum = [&](uint64_t v) {
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return v;
  };
  // Uploads, runs, downloads a correctness pass; returns this rank's wrong elements. The
  // output is first filled with 0xff bytes (NaNs), so an element nobody writes is wrong.
  auto check = [&](const sched::Schedule& s, void* in, void* out, size_t out_bytes, const std::function<void()>& once) {
    const auto input = integer_input(s, rank);
    backend->upload(in, input.data(), input.size());
    const std::vector<uint8_t> poison(out_bytes, 0xff);
    backend->upload(out, poison.data(), out_bytes);
    transport->barrier();
    heartbeat();
    once();
    backend->synchronize();
    heartbeat();
    std::vector<uint8_t> got(out_bytes);
    backend->download(got.data(), out, out_bytes);
    return count_wrong(s.dtype, got, expected_output(s, rank));
  };

  // The lowrank protocol (codec/lowrank.h) for real: per iteration, P = M Q locally, allreduce
  // P (the call's algorithm, fp32), orthonormalize, Q = Mᵀ P̂, allreduce Q, update = P̂ (Q/n)ᵀ,
  // with error feedback across iterations. Timed like any row; then, from a fresh state, one
  // step's update against the uncompressed mean gradient (rel.err, max_abs, SNR).
  auto run_lowrank = [&](const Entry& entry, const Cell& cell, const config::CallSweep& call,
                         const std::vector<uint8_t>& reference, Row& w) {
    const auto wall0 = std::chrono::steady_clock::now();
    const sched::Schedule sp = sched::build_schedule(entry.spec), sq = sched::build_schedule(entry.q_spec);
    ExecutorOptions opt;
    opt.codec = find_codec("identity");
    opt.lockstep = args.lockstep;
    Executor exp_p(sp, rank, *transport, *backend, opt), exp_q(sq, rank, *transport, *backend, opt);
    const DType dt = cell.baseline.dtype;
    const uint64_t n = entry.rows * entry.cols;
    const auto grad = timing_input(dt, n, rank, exp.tensors_dir, call.tensor);
    std::vector<float> update(n), p, q;
    double codec_s = 0;
    auto step = [&](lowrank::LowRankState& state, float* out) {
      lowrank_step(*backend, world, state, exp_p, exp_q, dt, grad.data(), out, codec_s, p, q);
    };
    lowrank::LowRankState state = lowrank::make_state(entry.rows, entry.cols, entry.lowrank, 0x5eed);
    for (int i = 0; i < exp.run.warmup; ++i) step(state, update.data());
    transport->barrier();
    codec_s = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < exp.run.iterations; ++i) step(state, update.data());
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int it = exp.run.iterations;
    w.time_s = mean(t / it);
    w.codec_s = mean(codec_s / it);
    w.algorithm = entry.algorithm;
    w.placement = entry.placement;
    w.codec = entry.codec;
    w.messages = 0;
    w.wire_bytes = sum(lowrank::compressed_bytes(entry.rows, entry.cols, entry.lowrank));
    w.ratio = lowrank::compression_ratio(entry.rows, entry.cols, entry.lowrank, dt) > 0
                  ? 1.0 / lowrank::compression_ratio(entry.rows, entry.cols, entry.lowrank, dt)
                  : 1.0;
    // One step from a fresh state (no residual yet) against the uncompressed mean.
    lowrank::LowRankState fresh = lowrank::make_state(entry.rows, entry.cols, entry.lowrank, 0x5eed);
    step(fresh, update.data());
    std::vector<uint8_t> mean_bytes(n * 4);
    for (uint64_t i = 0; i < n; ++i) {
      const float m = static_cast<float>(load_as_float(dt, reference.data(), i) / world);
      std::memcpy(mean_bytes.data() + 4 * i, &m, 4);
    }
    std::vector<uint8_t> got(n * 4);
    std::memcpy(got.data(), update.data(), got.size());
    fill_lossy(w, lossy_error(DType::FP32, got, mean_bytes));
    w.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  };

  size_t row_index = 0;
  for (const Cell& cell : st.cells) {
    const auto& call = exp.calls[cell.call];
    const uint64_t size = cell.size;
    {
      const std::string where = "calls." + std::to_string(cell.call) + " (" + call.collective + " " + call.algorithm +
                                ") size " + std::to_string(size);
      // Baseline: the library's own collective on the identity schedule's buffers.
      set_activity(where + ", the library's collective");
      inject_fault(rank, row_index++);
      try {
        const auto wall0 = std::chrono::steady_clock::now();
        const sched::BuildSpec& b = cell.baseline;
        const sched::Schedule s = sched::build_schedule(b);
        Row w = base_row(b, call, size);
        w.placement = "none";
        w.codec = "identity";
        std::unique_ptr<Baseline> base;
        const size_t in_bytes = s.ranks[rank].input_count * dtype_size(s.dtype);
        const size_t out_bytes = s.ranks[rank].output_count * dtype_size(s.dtype);
        void* in = backend->alloc(in_bytes);
        void* out = backend->alloc(out_bytes);
#ifdef COMPCOLL_HAVE_NCCL
        if (nccl) base = make_nccl_baseline(*transport, s);
#endif
        if (!nccl) base = make_mpi_baseline(MPI_COMM_WORLD, s);
        w.algorithm = base->name();
        w.library = true;
        const auto tin = timing_input(s.dtype, s.ranks[rank].input_count, rank, exp.tensors_dir, call.tensor);
        backend->upload(in, tin.data(), in_bytes);
        for (int i = 0; i < exp.run.warmup; ++i) base->run(in, out), heartbeat();
        backend->synchronize();
        transport->barrier();
        backend->timer_start();
        for (int i = 0; i < exp.run.iterations; ++i) base->run(in, out), heartbeat();
        w.time_s = mean(backend->timer_stop() / exp.run.iterations);
        w.wrong = sum(check(s, in, out, out_bytes, [&] { base->run(in, out); }));
        backend->release(in);
        backend->release(out);
        w.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
        emit(w);
      } catch (const std::exception& e) {
        abort_job(rank, where + ", baseline: " + e.what());
      }
      // Lossy rows are measured against the uncompressed schedule's output on the same data.
      std::vector<uint8_t> reference;
      if (std::any_of(cell.entries.begin(), cell.entries.end(),
                      [](const Entry& e) { return e.lowrank || !find_codec(e.codec)->lossless(); })) {
        set_activity(where + ", the uncompressed reference for lossy rows");
        try {
          const sched::Schedule s = sched::build_schedule(cell.baseline);
          ExecutorOptions opt;
          opt.codec = find_codec("identity");
          opt.lockstep = args.lockstep;
          Executor ex(s, rank, *transport, *backend, opt);
          const auto tin = timing_input(s.dtype, s.ranks[rank].input_count, rank, exp.tensors_dir, call.tensor);
          backend->upload(ex.input(), tin.data(), tin.size());
          ex.run();
          backend->synchronize();
          reference.resize(ex.output_bytes());
          backend->download(reference.data(), ex.output(), reference.size());
        } catch (const std::exception& e) {
          abort_job(rank, where + ", uncompressed reference: " + e.what());
        }
      }
      for (const Entry& entry : cell.entries) {
        const sched::BuildSpec& b = entry.spec;
        set_activity(where + ", " + entry.policy + " " + entry.algorithm + " " + entry.codec);
        inject_fault(rank, row_index++);
        if (entry.lowrank) {
          try {
            Row w = base_row(cell.baseline, call, size);
            run_lowrank(entry, cell, call, reference, w);
            emit(w);
          } catch (const std::exception& e) {
            abort_job(rank, where + ", " + entry.algorithm + " " + entry.codec + ": " + e.what());
          }
          continue;
        }
        try {
          const auto wall0 = std::chrono::steady_clock::now();
          const sched::Schedule s = sched::build_schedule(b);
          Row w = base_row(b, call, size);
          w.algorithm = entry.algorithm;
          w.placement = entry.placement;
          w.codec = entry.codec;
          w.policy = entry.policy;
          ExecutorOptions opt;
          opt.codec = find_codec(entry.codec);
          opt.lockstep = args.lockstep;
          Executor ex(s, rank, *transport, *backend, opt);
          const auto tin = timing_input(s.dtype, s.ranks[rank].input_count, rank, exp.tensors_dir, call.tensor);
          backend->upload(ex.input(), tin.data(), tin.size());
          for (int i = 0; i < exp.run.warmup; ++i) ex.run();
          backend->synchronize();
          transport->barrier();
          RunStats total;
          backend->timer_start();
          for (int i = 0; i < exp.run.iterations; ++i) {
            const RunStats r = ex.run();
            total.messages += r.messages;
            total.sent_bytes += r.sent_bytes;
            total.compress_in += r.compress_in;
            total.compress_out += r.compress_out;
            total.codec_s += r.codec_s;
            total.reduce_s += r.reduce_s;
          }
          const double t = backend->timer_stop();
          const int it = exp.run.iterations;
          w.time_s = mean(t / it);
          w.codec_s = mean(total.codec_s / it);
          w.reduce_s = mean(total.reduce_s / it);
          w.messages = sum(total.messages) / it;
          w.wire_bytes = sum(total.sent_bytes) / it;
          const uint64_t cin = sum(total.compress_in), cout = sum(total.compress_out);
          w.ratio = cin ? static_cast<double>(cout) / static_cast<double>(cin) : 1.0;
          if (opt.codec->lossless()) {
            w.wrong = sum(check(s, ex.input(), ex.output(), ex.output_bytes(), [&] { ex.run(); }));
          } else {
            // Lossy: the last timed run's output (real data) against the uncompressed
            // schedule's on the same inputs; wrong = elements non-finite where it is finite.
            std::vector<uint8_t> got(ex.output_bytes());
            backend->synchronize();
            backend->download(got.data(), ex.output(), got.size());
            fill_lossy(w, lossy_error(s.dtype, got, reference));
          }
          w.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
          emit(w);
        } catch (const std::exception& e) {
          abort_job(rank, where + ", " + entry.policy + " " + entry.algorithm + " " + entry.codec + ": " + e.what());
        }
      }
    }
  }
  run_entropy_trace(st, args, rank, world, *transport, *backend, out_dir, doc);
  if (!out_dir.empty()) report::write_atomic(out_dir / "results.json", doc.dump(1));
  if (rank == 0) std::cout << (total_wrong ? "# FAILED: " + std::to_string(total_wrong) + " wrong elements\n" : "# OK\n");
  std::cout.flush();
  return total_wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = 0;
  try {
    const Args args = parse_args(argc, argv);
    if (args.help) {
      if (rank == 0) std::cout << kUsage;
    } else {
      rc = run(args);
    }
  } catch (const BadInput& e) {  // command line: the same on every rank
    if (rank == 0) std::cerr << "compcoll-run: " << e.what() << " (--help for usage)\n";
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
