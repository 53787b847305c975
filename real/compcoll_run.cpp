// compcoll-run — compressed collectives for real: MPI ranks on hosts, or NCCL ranks on GPUs.
//
//   mpirun -np N compcoll-run EXPERIMENT.yaml [--backend mpi|nccl] [--out DIR] [--set K=V]...
//
// Reads the same experiment file as compcoll-sim (docs/EXPERIMENTS.md; ranks = the MPI world,
// the topology gives the ranks per node of hierarchical algorithms), and plans it with the
// same study layer (shared/study: cells, the static plans, each policy's plan). Per cell it
// runs the library's own collective (MPI's or NCCL's), then each plan with the real executor
// (real/executor.h): warm-up, timed iterations, then a separate correctness pass on integer
// inputs against the closed-form result (lossy codecs: the error against the uncompressed
// schedule on the same data). Rank 0 prints nccl-tests style rows with #wrong and ends with
// "# OK" or "# FAILED"; --out DIR writes results.csv (row by row) and results.json (rewritten
// atomically after every row) with the columns of shared/report/row.h. docs/compcoll-run.md.
// Exit status: 0 all rows right, 1 some row wrong, 2 bad input (one line naming file and key,
// from rank 0, the same decision on every rank and before any communication). A failure in
// the middle of a run (a transport error, a damaged stream) aborts the job with the rank's
// message; a rank silent for run.timeout_s (dead, hung, never arrived) ends it through the
// watchdog (real/watchdog.h), exit status 3; the rows finished before stay written.
#include <mpi.h>
#include <sched.h>
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
#include <sstream>
#include <thread>

#include "calibration/calibration.h"
#include "codec/codec.h"
#include "codec/lowrank.h"
#ifdef COMPCOLL_HAVE_NVCOMP
#include "codec/cuda/nvcomp.h"
#endif
#include "config/yaml_node.h"
#include "io/float_convert.h"
#include "io/tensor_file.h"
#include "policy/cost_model.h"
#include "policy/entropy.h"
#include "policy/nccl_tuning.h"
#include "policy/policy.h"
#include "real/backend.h"
#include "real/baseline.h"
#include "real/edgc_run.h"
#include "real/executor.h"
#include "real/transport.h"
#include "real/transport_bench.h"
#include "real/verify.h"
#include "real/watchdog.h"
#include "report/model_check.h"
#include "report/report.h"
#include "report/row.h"
#include "schedule/build.h"
#include "study/study.h"
#include "topology/topology.h"
#include "util/text.h"
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
    "  --lockstep   post transfers step by step in groups (always on with nccl)\n"
    "  --no-transport-check  skip the transport check before the first row (the exchange at a few sizes,\n"
    "               measured now beside the model's time on the topology)\n"
    "  --no-kernel-check  skip the kernel check before the first row (mpi: copy and reduce at a few sizes,\n"
    "               measured now on every rank at once beside the calibration's time)\n";

// A bad command line or experiment: reported once (rank 0), exit status 2 on every rank.
struct BadInput : std::runtime_error {
  explicit BadInput(const std::string& what) : std::runtime_error(printable(what)) {}
};

struct Args {
  std::string experiment, out, backend, command;
  std::vector<std::string> sets;
  bool lockstep = false;
  bool transport_check = true;
  bool kernel_check = true;
  bool help = false;
};

Args parse_args(int argc, char** argv) {
  Args a;
  a.command = report::command_line(argc, argv);
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) throw BadInput(std::string(flag) + " needs a value");
      return argv[++i];
    };
    if (s == "--help" || s == "-h") a.help = true;
    else if (s == "--set") a.sets.push_back(value("--set"));
    else if (s.starts_with("--set=")) a.sets.push_back(s.substr(6));
    else if (s == "--out") {
      a.out = value("--out");
      if (a.out.empty()) throw BadInput("--out needs a folder, got an empty path");
    }
    else if (s == "--backend") a.backend = value("--backend");
    else if (s.starts_with("--backend=")) a.backend = s.substr(10);
    else if (s == "--lockstep") a.lockstep = true;
    else if (s == "--no-transport-check") a.transport_check = false;
    else if (s == "--no-kernel-check") a.kernel_check = false;
    else if (s.starts_with("-")) throw BadInput("unknown option " + s);
    else if (a.experiment.empty()) a.experiment = s;
    else throw BadInput("one experiment file only (got " + a.experiment + " and " + s + ")");
  }
  if (!a.help && a.experiment.empty()) throw BadInput("no experiment file");
  if (!a.backend.empty() && a.backend != "mpi" && a.backend != "nccl")
    throw BadInput("--backend: expected mpi or nccl, got '" + a.backend + "'");
  return a;
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

// --- the plan of the run ----------------------------------------------------------------

// One row of schedules: a static plan (the call as written, with one codec) or a policy's.
struct Entry {
  sched::BuildSpec spec;
  std::string policy = "static", algorithm, placement, codec;  // the row's labels
  double predicted_s = NAN;                                    // the policy's own estimate
  double model_s = NAN;  // the cost model's time for `spec` (lowrank rows: none)
  double model_kernel_s = NAN;  // its compress, decompress, reduce and copy ops' calibrated time, mean per rank
  double codec_exposed_s = NAN;  // the codec's exposed time in one call, the model's (policy::exposed_codec_s)
  // "lowrank:r=N" (the gradient compressor EDGC drives, codec/lowrank.h): `spec` allreduces
  // P (rows x rank, fp32), `q_spec` Q (cols x rank), the gradient taken as a rows x cols matrix.
  uint32_t lowrank = 0;
  uint64_t rows = 0, cols = 0;
  sched::BuildSpec q_spec;
  bool library = false;  // the library's own collective (policy::Plan::library), not the executor
};
// A call at a size: the library's own collective (on `baseline`'s buffers), then the entries.
struct Cell {
  study::Cell cell;
  sched::BuildSpec baseline;
  std::vector<Entry> entries;
};

struct Setup {
  study::Experiment exp;
  topo::Topology topo;
  calib::Calibration cal;  // what the policies and the model column price kernels with
  std::string backend;
  int gpus_per_node = 1;
  int ranks_on_host = 1;    // ranks MPI started on rank 0's host
  std::vector<Cell> cells;  // in run order
  uint64_t plans_hash = 0;  // of every row's plan: the ranks must agree (policies decide on each)
  std::vector<std::string> skipped;  // rows the experiment asks for that do not apply
  std::vector<std::string> unmodelled;  // why some rows have no model time
  std::vector<std::string> host_differences;  // the calibration's host against this one (mpi backend)
  // The network model the plans and the model column use: the experiment's, with NCCL's
  // channels per network peer as this run's communicators get them (configure_p2p).
  policy::NetFactors net;
  int plan_channels_per_net_peer = 0;  // > 0: the plans' communicator's (ncclConfig_t)
  std::string p2p_line;                // what they are, for the metadata; "" when not across nodes
  // run.entropy: the gradient trace, and the allreduce call whose algorithm carries it.
  std::optional<GradientTrace> trace;
  size_t entropy_call = 0;
};

// The machine as the experiment describes it: one topology, the MPI world, whole nodes.
void check_machine(Setup& st, const Args& args, int world, int local_size) {
  const study::Experiment& exp = st.exp;
  st.ranks_on_host = local_size;
  if (exp.topologies.size() != 1)
    throw BadInput(exp.file + ": topology: a real run has one topology (the machine it runs on), got " +
                   std::to_string(exp.topologies.size()));
  if (exp.ranks.size() > 1)
    throw BadInput(exp.file + ": ranks: a real run has one group size (the MPI world), got a list of " +
                   std::to_string(exp.ranks.size()));
  if (!exp.ranks.empty() && exp.ranks[0] != world)
    throw BadInput(exp.file + ": ranks: the experiment asks for " + std::to_string(exp.ranks[0]) + " ranks, mpirun started " +
                   std::to_string(world));
  st.topo = study::load_topology(exp, exp.topologies[0], world);
  st.backend = !args.backend.empty() ? args.backend : !exp.run.backend.empty() ? exp.run.backend : "mpi";
  st.topo.fused_decode = st.topo.fused_decode && st.backend == "nccl";  // the host executor never fuses
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
}

// Codecs, policies and what the policies need (their calibration, the codecs' ratios).
void check_inputs(Setup& st) {
  const study::Experiment& exp = st.exp;
  if (!exp.workloads.empty())
    throw BadInput(exp.file + ": workload: training iterations run in compcoll-sim only; compcoll-run runs an "
                              "experiment's calls and sizes (docs/compcoll-run.md)");
  study::check_codecs(exp, true);
  study::check_calls(exp);
  for (const auto& c : exp.codecs) {
    if (policy::parse_lowrank_codec(c) && st.backend == "nccl")
      throw BadInput(exp.file + ": codecs: " + c + ": lowrank runs on the host (the mpi backend) so far");
    if (const LibraryCodec* lib = find_library_codec(c)) {
      const std::string key = exp.file + ": codecs: " + c + ": ";
      if (st.backend != "nccl")
        throw BadInput(key + std::string(lib->library) + " codes on GPUs only: run it on the nccl backend (--backend nccl)");
#ifdef COMPCOLL_HAVE_NVCOMP
      if (const std::string why = nvcomp_unavailable(); !why.empty()) throw BadInput(key + why);
#else
      throw BadInput(key + "this compcoll-run was built without " + std::string(lib->library) + " (docs/compcoll-run.md)");
#endif
    }
  }
  try {
    inject_fault(-1, 0);  // only checks COMPCOLL_RUN_FAULT's form
  } catch (const std::invalid_argument& e) {
    throw BadInput(e.what());
  }
  for (const auto& pol : exp.policies)
    if (pol == "oracle")
      throw BadInput(exp.file + ": policies: oracle runs in compcoll-sim only (it simulates every candidate plan)");
  st.cal = study::load_calibration(exp);
  if (std::all_of(exp.policies.begin(), exp.policies.end(), [](const auto& p) { return p == "static"; })) return;
  if (exp.tensors_dir.empty())
    for (const auto& c : exp.codecs)
      if (c != "identity" && find_codec(c) && !exp.fixed_ratios.count(c))
        throw BadInput(exp.file + ": ratios: a policy needs the ratio of codec " + c + " (ratios.tensors, or a fixed ratio)");
}

// A schedule every rank can build and the backend can run (BadInput naming the call).
// `library`: the plan runs as the library's own collective; its schedule only prices it.
void check_spec(const Setup& st, const Args& args, const sched::BuildSpec& b, const std::string& key,
                const std::string& what, bool library = false) {
  std::string problem;
  bool switches = false;
  try {
    const sched::Schedule sch = sched::build_schedule(b);
    sched::validate(sch);
    switches = sch.switches > 0;
    if (library && switches) return;
    if (!switches && (args.lockstep || st.backend == "nccl")) problem = lockstep_problem(sch);
  } catch (const sched::ScheduleError& err) {
    throw BadInput(key + ": " + what + ": " + err.what());
  }
  if (switches)
    throw BadInput(key + ": " + what + " cannot run on real ranks: its schedule has NVSwitch ranks, which only the "
                   "simulator runs (NCCL's own allreduce, policy nccl-like, runs NVLS for real)");
  if (!problem.empty())
    throw BadInput(key + ": " + what + " cannot run with transfers in lockstep groups (the nccl backend, --lockstep): " +
                   problem);
}

// lowrank:r=N on an allreduce: P and Q allreduced in fp32 with the call's algorithm, uncompressed.
Entry lowrank_entry(const study::Planner& planner, const study::Cell& c, const study::CallSweep& s, uint32_t rank,
                    const std::string& codec, uint64_t count) {
  Entry e;
  std::tie(e.rows, e.cols) = policy::near_square_shape(count);
  e.lowrank = static_cast<uint32_t>(std::min<uint64_t>({rank, e.rows, e.cols}));
  sched::BuildSpec p = planner.build_spec(study::static_plan(s, "identity"), c);
  p.dtype = DType::FP32;
  e.q_spec = p;
  p.count = e.rows * e.lowrank;
  e.q_spec.count = e.cols * e.lowrank;
  e.spec = p;
  e.algorithm = "lowrank/" + (s.algorithm == "hierarchical" ? "hierarchical/" + s.inter : s.algorithm);
  e.placement = "none";
  e.codec = codec;
  return e;
}

// The cell's rows from the study layer's entries; lowrank codecs on other collectives skipped.
Cell plan_cell(Setup& st, const Args& args, study::Planner& planner, const study::Cell& c) {
  const study::CallSweep& s = st.exp.calls[c.call];
  const std::string key = st.exp.file + ": calls." + std::to_string(c.call);
  Cell cell;
  cell.cell = c;
  cell.baseline = planner.build_spec(study::static_plan(s, "identity"), c);
  if (cell.baseline.count == 0)
    throw BadInput(key + ": size " + std::to_string(c.size) + " is less than one element per rank");
  // NCCL's reduce-scatter and allgather take equal blocks (the baseline row of every cell).
  if (st.backend == "nccl" && (s.collective == "reduce-scatter" || s.collective == "allgather") &&
      cell.baseline.count % static_cast<uint64_t>(c.info.nranks))
    throw BadInput(key + ": size " + std::to_string(c.size) + ": " + std::to_string(cell.baseline.count) +
                   " elements are not a multiple of the " + std::to_string(c.info.nranks) + " ranks, which NCCL's " +
                   s.collective + " needs (the baseline row)");
  std::hash<std::string> hasher;
  for (const study::Entry& se : planner.plan(c)) {
    if (!se.error.empty()) throw BadInput(key + ": size " + std::to_string(c.size) + ": " + se.error);
    Entry e;
    if (const auto r = policy::parse_lowrank_codec(se.plan.codec)) {
      if (s.collective != "allreduce") {
        const std::string why = "calls." + std::to_string(c.call) + " (" + s.collective + "): " + se.plan.codec +
                                " compresses allreduced gradients only";
        if (std::find(st.skipped.begin(), st.skipped.end(), why) == st.skipped.end()) st.skipped.push_back(why);
        continue;
      }
      e = lowrank_entry(planner, c, s, *r, se.plan.codec, cell.baseline.count);
      check_spec(st, args, e.q_spec, key, s.collective + " " + s.algorithm + " " + se.plan.codec);
    } else {
      e.spec = planner.build_spec(se.plan, c);
      e.algorithm = se.algorithm, e.placement = se.placement, e.codec = se.plan.codec;
      // NCCL's NVLS (nccl-like's plan on one NVSwitch node): only NCCL's own allreduce runs it.
      e.library = se.plan.library || (se.plan.nccl_kernels && sched::has_switch_ranks(e.spec));
    }
    e.policy = se.policy;
    e.predicted_s = se.predicted_s;
    if (!e.lowrank) {
      try {
        // Back to back, as the row is timed: run.iterations calls, each rank's time averaged.
        const std::string protocol = e.library ? se.plan.protocol : "";
        const policy::PlanCost cost = planner.model(e.spec, e.codec, c, st.exp.run.iterations, e.library, protocol);
        e.model_s = cost.iteration_s;
        e.model_kernel_s = cost.kernel_s;
        if (e.codec != "identity") e.codec_exposed_s = planner.exposed_codec(e.spec, e.codec, c, e.library, protocol);
      } catch (const std::exception& err) {  // a curve the calibration lacks, a ratio with no tensors
        const std::string why = e.codec + ": " + err.what();
        if (std::find(st.unmodelled.begin(), st.unmodelled.end(), why) == st.unmodelled.end()) st.unmodelled.push_back(why);
      }
    }
    check_spec(st, args, e.spec, key,
               se.policy == "static" ? s.collective + " " + s.algorithm : se.policy + "'s plan " + se.plan.describe(),
               e.library);
    st.plans_hash = st.plans_hash * 1000003u ^ hasher(e.policy + " " + e.algorithm + " " + e.placement + " " + e.codec);
    cell.entries.push_back(std::move(e));
  }
  return cell;
}

// run.entropy's allreduces: `count` elements of `dtype`, uncompressed, with the call's algorithm.
sched::BuildSpec trace_spec(const Setup& st, const study::CallSweep& call, int world, DType dtype, uint64_t count) {
  sched::BuildSpec b = policy::build_spec(study::static_plan(call, "identity"), study::call_info(call, 0, world), st.topo);
  b.gpus_per_node = st.gpus_per_node;
  b.root = call.root;
  b.dtype = dtype;
  b.count = count;
  return b;
}

// run.entropy: the trace, and the first allreduce call, which must allreduce every size the
// controller may ask for.
void setup_entropy(Setup& st, int world) {
  const study::Experiment& exp = st.exp;
  const std::string key = exp.file + ": run.entropy";
  if (st.backend != "mpi") throw BadInput(key + ": lowrank runs on the host (the mpi backend) so far");
  const auto call = std::find_if(exp.calls.begin(), exp.calls.end(),
                                 [](const study::CallSweep& c) { return c.collective == "allreduce"; });
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
      sched::validate(sched::build_schedule(trace_spec(st, *call, world, DType::FP32, count)));
    } catch (const sched::ScheduleError& err) {
      throw BadInput(key + ": calls." + std::to_string(st.entropy_call) + " cannot allreduce " + std::to_string(count) +
                     " elements: " + err.what());
    }
  }
}

// NCCL's channels per peer on another node (network.p2p_channels_per_net_peer) as this run's
// plans get them: their communicator configured with the experiment's count (by default the
// count that fills the NIC), NCCL's own collectives on one of NCCL's defaults; where this NCCL
// cannot be configured so, or NCCL_NCHANNELS_PER_NET_PEER overrides every communicator, the
// model column prices what runs instead.
void configure_p2p(Setup& st, int world) {
  policy::NetFactors& f = st.net;
  if (st.backend != "nccl" || !f.protocol_costs || world <= st.gpus_per_node) return;
#ifdef COMPCOLL_HAVE_NCCL
  const policy::NcclP2pSetup s = policy::nccl_p2p_setup(policy::nccl_view(st.topo, world), f.p2p_net_channels,
                                                        nccl_env_channels_per_net_peer(),
                                                        nccl_net_peer_config_unavailable());
  f.p2p_net_channels = s.priced;
  st.plan_channels_per_net_peer = s.configure;
  st.p2p_line = s.line;
#else
  (void)world;
#endif
}

// Everything that can be wrong with the input, checked on every rank before any
// communication (BadInput / ConfigError / ScheduleError: one line).
Setup setup(const Args& args, int world, int local_size) {
  Setup st;
  st.exp = study::load_experiment(args.experiment, args.sets);
  check_machine(st, args, world, local_size);
  check_inputs(st);
  st.net = study::net_factors(st.exp);
  configure_p2p(st, world);
  // The same planning as compcoll-sim's (shared/study), on this machine's topology, the
  // experiment's calibration and the ratios measured on its tensors.
  study::Ratios ratios(st.exp);
  study::Planner planner(st.exp, st.topo, st.cal, st.net, ratios, st.gpus_per_node);
  // On the mpi backend the library's collective is MPI's, which the model cannot price: no
  // policy may choose it as if it were NCCL's.
  planner.set_nccl_library(st.backend == "nccl");
  for (const study::Cell& c : study::cells(st.exp, {study::Group{st.exp.topologies[0], world, world}}))
    st.cells.push_back(plan_cell(st, args, planner, c));
  if (st.exp.run.entropy) setup_entropy(st, world);
  if (st.backend == "mpi") st.host_differences = calib::host_differences(st.cal);
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

// --- the run ----------------------------------------------------------------------------

[[noreturn]] void abort_job(int rank, const std::string& what) {
  std::fprintf(stderr, "compcoll-run: rank %d: %s\n", rank, printable(what).c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

double mean_over_ranks(double v, int world) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return v / world;
}
uint64_t sum_over_ranks(uint64_t v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return v;
}

// The transport or kernel check's header lines and points (below), rank 0.
struct TransportCheck {
  std::vector<std::string> lines;
  json points;  // null when not run
};
using KernelCheck = TransportCheck;

// What every part of the run reads and writes.
struct Session {
  Args args;
  Setup st;
  int rank = 0, world = 1;
  std::unique_ptr<Transport> transport;
  std::unique_ptr<DataBackend> backend;
  json doc;
  fs::path out_dir;
  std::unique_ptr<std::ofstream> csv;
  report::Speedups speedups;
  report::ModelCheck model_check;  // rank 0
  TransportCheck transport_start;  // the transport check before the first row, rank 0
  KernelCheck kernel_start;        // the kernel check before the first row, rank 0
  std::unique_ptr<report::Progress> progress;
  uint64_t total_wrong = 0;
  size_t row_index = 0;  // for COMPCOLL_RUN_FAULT
};

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
void fill_lossy(report::Row& w, const LossyError& e) {
  double sums[2] = {e.diff2, e.ref2};
  MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double max_abs = e.max_abs;
  MPI_Allreduce(MPI_IN_PLACE, &max_abs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  w.lossy = true;
  w.max_abs = max_abs;
  w.rel_l2 = sums[0] == 0 ? 0 : sums[1] == 0 ? INFINITY : std::sqrt(sums[0] / sums[1]);
  w.snr_db = sums[0] == 0 ? INFINITY : 10 * std::log10(sums[1] / sums[0]);
  w.wrong = sum_over_ranks(e.nonfinite);
}

void make_transport(Session& s, int local_rank) {
#ifdef COMPCOLL_HAVE_NCCL
  if (s.st.backend == "nccl") {
    // A rank whose device or communicator cannot be set up (a GPU shared by two ranks: NCCL
    // refuses it) ends the job now, instead of leaving the others in ncclCommInitRank.
    try {
      auto pair = make_nccl_backend(MPI_COMM_WORLD, local_rank, s.st.plan_channels_per_net_peer);
      s.transport = std::move(pair.transport);
      s.backend = std::move(pair.backend);
    } catch (const std::exception& e) {
      abort_job(s.rank, std::string("nccl setup: ") + e.what());
    }
    return;
  }
#endif
  (void)local_rank;
  s.transport = std::make_unique<MpiTransport>(MPI_COMM_WORLD);
  s.backend = make_host_backend(s.st.exp.run.codec_threads, s.st.exp.run.compute_thread);
}

// A check run again after the last row: how much each of its points (`rows`, with "bytes" and
// "change") moved since the run's start, labelled by `label` (then the size); "" when none did.
template <typename Label>
std::string moved_line(const std::string& what, const json& rows, Label label) {
  std::ostringstream moved;
  for (const json& p : rows)
    if (p.contains("change")) {
      char change[32];
      std::snprintf(change, sizeof change, " %+.0f%%", 100 * p["change"].get<double>());
      moved << (moved.tellp() > 0 ? ", " : " ") << label(p) << config::format_bytes(p["bytes"].get<uint64_t>()) << change;
    }
  if (moved.tellp() == 0) return "";
  return "# " + what + " moved while the rows ran (after / before - 1):" + moved.str() +
         ": the rows' errors include such moves, which are the machine's, not the model's";
}

// The transport as it is now beside the topology the model column reads: the exchange round
// compcoll-bench transport times (every rank sending and receiving at once), at a few sizes up
// to the experiment's largest, measured here, and its time in the cost model on the run's
// topology. A topology measured on another day, another machine or under another MPI
// configuration shows here, before the first row; run again after the last row (`end`), it
// says how much the transport itself moved while the rows ran. Lines and JSON for rank 0.
TransportCheck transport_check(Session& s, bool end) {
  TransportCheck out;
  if (!s.args.transport_check) return out;
  const study::Experiment& exp = s.st.exp;
  const uint64_t largest = exp.sizes.empty() ? 0 : *std::max_element(exp.sizes.begin(), exp.sizes.end());
  TransportBenchOptions opt;
  for (const uint64_t b : {uint64_t{64} << 10, uint64_t{1} << 20, uint64_t{16} << 20})
    if (b <= std::max(largest, uint64_t{64} << 10)) opt.sizes.push_back(b);
  opt.pingpong = false;
  // Each size through the buffers the model takes its factor for: with factors by footprint, one
  // slot per side, the footprint of the round's schedule (topo::LinkSpec::by_footprint); else
  // the slots by_size was measured through.
  const topo::Topology& topo = s.st.topo;
  const bool by_footprint = !topo.gpu_link.by_footprint.empty();
  if (by_footprint) opt.window = 1;
  opt.min_time_s = 0.05;
  opt.min_samples = 3;
  const std::vector<int> host_of = hosts_of_world();
  std::vector<TransportSeries> series;
  try {
    series = measure_transport(*s.transport, *s.backend, host_of, opt);
  } catch (const std::exception& e) {
    abort_job(s.rank, std::string("transport check: ") + e.what());
  }
  if (s.rank != 0) return out;
  policy::RouteCache routes(s.st.topo);
  const policy::NetFactors& net = s.st.net;
  const calib::Calibration none = calib::zero_calibration();
  json rows = json::array();
  double worst = 0;
  std::string worst_at;
  for (const TransportSeries& ts : series) {
    std::ostringstream line;
    line << "# transport check" << (end ? " after the last row" : "") << ", exchange "
         << (ts.between == "host" ? "within a host" : "between hosts")
         << (ts.window == 1 ? ", one buffer per side" : "") << " (measured now / the model on "
         << exp.topologies[0] << "):";
    bool any = false;
    for (const auto& [bytes, measured] : ts.points) {
      const auto b = static_cast<uint64_t>(bytes);
      const sched::Schedule round = exchange_schedule(host_of, ts.between, b);
      any = true;
      const double model = policy::predict(round, topo, none, "identity", 1.0, net, routes).time_s;
      const double err = model / measured - 1;
      char cell[96];
      std::snprintf(cell, sizeof cell, " %s %.1f / %.1f us (%+.0f%%)", config::format_bytes(b).c_str(), measured * 1e6,
                    model * 1e6, 100 * err);
      line << (rows.empty() || rows.back()["between"] != ts.between ? "" : ",") << cell;
      rows.push_back({{"between", ts.between}, {"window", ts.window}, {"bytes", b}, {"measured_us", measured * 1e6},
                      {"model_us", model * 1e6}, {"err", err}});
      if (end)  // against the same point before the first row
        for (const json& before : s.transport_start.points)
          if (before["between"] == ts.between && before["bytes"] == b)
            rows.back()["change"] = measured * 1e6 / before["measured_us"].get<double>() - 1;
      if (b >= (uint64_t{1} << 20) && std::fabs(err) > std::fabs(worst)) worst = err, worst_at = config::format_bytes(b);
    }
    if (any) out.lines.push_back(line.str());
  }
  if (end) {
    const std::string moved = moved_line("the transport", rows, [](const json&) { return std::string(); });
    if (!moved.empty()) out.lines.push_back(moved);
  } else if (std::fabs(worst) > 0.2) {
    out.lines.push_back(
        "# WARNING: the topology does not describe this transport as it is now (" + worst_at + ": the model " +
        std::to_string(static_cast<int>(std::lround(100 * worst))) +
        "%): the model column then judges the topology, not the model. Measure this machine's: mpirun -np " +
        std::to_string(s.world) + " compcoll-bench transport --topology-out FILE (docs/CALIBRATION.md)");
  }
  out.points = rows;
  return out;
}

// The kernels as they run now beside the calibration the model column reads (mpi backend):
// every rank at once (as compcoll-bench calibrate --concurrent times them) runs the calibrated
// copy, and the reduce of the first call's dtype, over buffers of written data at 1 MiB and
// 16 MiB (up to the experiment's largest size, at least 64 KiB), the calibration's way: the same
// buffers again and again, 3 batches of at least 20 ms, the median batch, the mean over ranks.
// A calibration measured in another state of the machine shows here (on a shared VM, in spells,
// a cache-resident copy runs several times slower); run again after the last row (`end`), it
// says how much the kernels moved while the rows ran. Lines and JSON for rank 0.
KernelCheck kernel_check(Session& s, bool end) {
  KernelCheck out;
  if (!s.args.kernel_check || s.st.backend != "mpi") return out;
  const study::Experiment& exp = s.st.exp;
  const DType dtype = exp.calls.empty() ? DType::BF16 : parse_dtype(exp.calls[0].dtype).value_or(DType::BF16);
  struct Kernel {
    calib::Op op;
    std::string name;
  };
  std::vector<Kernel> kernels;
  if (s.st.cal.has(calib::Op::Copy, "", dtype)) kernels.push_back({calib::Op::Copy, "copy"});
  if (s.st.cal.has(calib::Op::Reduce, "", dtype)) kernels.push_back({calib::Op::Reduce, "reduce " + std::string(dtype_name(dtype))});
  if (kernels.empty()) return out;
  const uint64_t largest = exp.sizes.empty() ? 0 : *std::max_element(exp.sizes.begin(), exp.sizes.end());
  std::vector<uint64_t> sizes;
  for (const uint64_t b : {uint64_t{1} << 20, uint64_t{16} << 20})
    if (b <= std::max(largest, uint64_t{64} << 10)) sizes.push_back(b);
  if (sizes.empty()) sizes.push_back(uint64_t{64} << 10);
  DataBackend& b = *s.backend;
  const uint64_t most = sizes.back();
  void* src = b.alloc(most);
  void* dst = b.alloc(most);
  write_data(b, src, most);
  write_data(b, dst, most);
  json rows = json::array();
  std::ostringstream line;
  line << "# kernel check" << (end ? " after the last row" : "") << ", every rank at once (measured now / the calibration):";
  double worst = 1;  // the factor farthest from 1 either way
  std::string worst_at;
  for (const Kernel& k : kernels)
    for (const uint64_t bytes : sizes) {
      const uint64_t count = bytes / dtype_size(dtype);
      auto once = [&] {
        b.synchronize();
        if (k.op == calib::Op::Copy) b.copy(dst, src, bytes);
        else b.reduce(dtype, dst, src, count);
        b.synchronize();
      };
      once();  // warm
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      once();
      double one = MPI_Wtime() - t0;
      MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      const int reps = std::clamp(static_cast<int>(std::ceil(0.02 / std::max(one, 1e-7))), 1, 100000);
      std::vector<double> batch;
      for (int j = 0; j < 3; ++j) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < reps; ++i) once();
        batch.push_back((MPI_Wtime() - t0) / reps);
      }
      std::sort(batch.begin(), batch.end());
      const double measured = mean_over_ranks(batch[1], s.world);
      if (s.rank != 0) continue;
      const double cal = s.st.cal.seconds(k.op, "", dtype, static_cast<double>(bytes));
      const double factor = measured / cal;
      char cell[128];
      std::snprintf(cell, sizeof cell, "%s %s %s %.1f / %.1f us (%.3gx)", rows.empty() ? "" : ",", k.name.c_str(),
                    config::format_bytes(bytes).c_str(), measured * 1e6, cal * 1e6, factor);
      line << cell;
      rows.push_back({{"kernel", k.name}, {"bytes", bytes}, {"measured_us", measured * 1e6}, {"calibrated_us", cal * 1e6},
                      {"factor", factor}});
      if (end)
        for (const json& before : s.kernel_start.points)
          if (before["kernel"] == k.name && before["bytes"] == bytes)
            rows.back()["change"] = measured * 1e6 / before["measured_us"].get<double>() - 1;
      if (std::fabs(std::log(factor)) > std::fabs(std::log(worst)))
        worst = factor, worst_at = k.name + " " + config::format_bytes(bytes);
    }
  b.release(src);
  b.release(dst);
  if (s.rank != 0) return out;
  out.lines.push_back(line.str());
  if (end) {
    const std::string moved =
        moved_line("the kernels", rows, [](const json& p) { return p["kernel"].get<std::string>() + " "; });
    if (!moved.empty()) out.lines.push_back(moved);
  } else if (std::fabs(std::log(worst)) > std::log(report::kKernelWarning)) {
    char f[32];
    std::snprintf(f, sizeof f, "%.3gx", worst);
    out.lines.push_back("# WARNING: the calibration does not describe these kernels as they run now (" + worst_at +
                        ": " + f + " its time): the model column then judges the calibration, not the model. "
                        "Measure them here: compcoll-bench calibrate --device host --concurrent " +
                        std::to_string(s.st.gpus_per_node) + " ... (docs/CALIBRATION.md)");
  }
  out.points = rows;
  return out;
}

// MPI settings given through the environment (mpirun --mca X Y sets OMPI_MCA_X=Y; UCX_*,
// NCCL_*): they change the transport (Open MPI's single-copy mechanism, for one), so a run
// records them; not the bookkeeping Open MPI's launcher sets for every job.
std::vector<std::string> mpi_environment() {
  const char* const launcher[] = {"OMPI_MCA_orte_", "OMPI_MCA_ess", "OMPI_MCA_pmix", "OMPI_MCA_initial_wdir",
                                  "OMPI_MCA_shmem_RUNTIME_QUERY_hint", "OMPI_MCA_mpi_oversubscribe"};
  auto starts = [](const char* s, const char* p) { return std::strncmp(s, p, std::strlen(p)) == 0; };
  std::vector<std::string> v;
  for (char** e = environ; *e; ++e) {
    if (!starts(*e, "OMPI_MCA_") && !starts(*e, "UCX_") && !starts(*e, "NCCL_")) continue;
    if (std::any_of(std::begin(launcher), std::end(launcher), [&](const char* p) { return starts(*e, p); })) continue;
    v.emplace_back(*e);
  }
  std::sort(v.begin(), v.end());
  return v;
}

// The header lines (rank 0), the results document and the CSV.
void start_output(Session& s) {
  const study::Experiment& exp = s.st.exp;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int mpi_len = 0;
  MPI_Get_library_version(mpi_version, &mpi_len);
  std::string mpi_ver(mpi_version, static_cast<size_t>(mpi_len));
  mpi_ver = mpi_ver.substr(0, mpi_ver.find_first_of(",\n"));
  const std::vector<std::string> environment = mpi_environment();  // header and JSON
  s.doc = {{"experiment", {{"name", exp.name}, {"file", exp.file}, {"description", exp.description}}},
           {"versions", {{"compcoll", "0.1.0"}, {"mpi", mpi_ver}}},
           {"machine", {{"rank0_host", host}, {"backend", s.st.backend}, {"device", s.backend->describe()},
                        {"ranks", s.world}, {"ranks_per_node", s.st.gpus_per_node},
                        {"environment", environment}}},
           {"command", s.args.command},
           {"host", report::host_json()},
           {"run", {{"warmup", exp.run.warmup}, {"iterations", exp.run.iterations}, {"compute_thread", exp.run.compute_thread},
                    {"fused_decode", exp.run.fused_decode}, {"wire_budget", exp.run.wire_budget},
                    {"wire_budget_margin", exp.run.wire_budget_margin}, {"queue_ahead", exp.run.queue_ahead}}},
           {"topology", {{"file", exp.topologies[0]}, {"name", s.st.topo.name}}},
           {"rows", json::array()}};
  if (!s.transport_start.points.is_null()) s.doc["transport_check"] = s.transport_start.points;
  if (!s.kernel_start.points.is_null()) s.doc["kernel_check"] = s.kernel_start.points;
  if (!s.st.host_differences.empty()) s.doc["calibration_host_differences"] = s.st.host_differences;
#ifdef COMPCOLL_HAVE_NCCL
  if (s.st.backend == "nccl") s.doc["versions"]["nccl"] = nccl_version_string();
#endif
  if (!s.st.p2p_line.empty()) s.doc["machine"]["nccl_channels_per_net_peer"] = s.st.p2p_line;
  if (s.rank != 0) return;
  if (!s.args.out.empty()) {
    s.out_dir = s.args.out;
    fs::create_directories(s.out_dir);
    s.csv = std::make_unique<std::ofstream>(s.out_dir / "results.csv");
    *s.csv << report::csv_header();
    s.csv->flush();
  }
  std::cout << "# compcoll-run " << exp.name << " (" << exp.file << ")"
            << (exp.description.empty() ? "" : ": " + exp.description) << "\n";
  std::cout << "# backend " << s.st.backend << " on " << s.backend->describe() << "; " << s.world << " ranks, "
            << s.st.gpus_per_node << " per node; rank 0 on " << host << "; " << mpi_ver << "\n";
  for (const auto& e : environment) std::cout << "# environment: " << e << "\n";
  if (!s.st.p2p_line.empty()) std::cout << "# NCCL point-to-point channels: " << s.st.p2p_line << "\n";
  std::cout << "# warm-up " << exp.run.warmup << ", timed iterations " << exp.run.iterations
            << "; time = mean over ranks of each rank's mean iteration time; transfers "
            << (s.args.lockstep || s.transport->sends_wait_for_receives() ? "in lockstep groups by step"
                                                                          : "posted as soon as ready")
            << "\n";
  if (exp.run.compute_thread && s.st.backend == "mpi") {
    // The cores the compute threads need (docs/compcoll-run.md, "Compute thread").
    const unsigned hw = std::thread::hardware_concurrency();
    const int threads = 2 * s.st.ranks_on_host;
    cpu_set_t mask;
    CPU_ZERO(&mask);
    const int allowed = sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : 0;
    std::cout << "# compute thread: each rank's kernels on a thread of their own beside its MPI thread: "
              << s.st.ranks_on_host << " ranks x 2 threads on this host's " << hw << " hardware threads"
              << (hw > 0 && static_cast<unsigned>(threads) > hw ? " (more threads than cores: they take turns)" : "")
              << "; rank 0 may run on " << allowed << " of them"
              << (allowed == 1 ? " (bound to one core, as mpirun binds by default: its two threads take turns on it; "
                                 "mpirun --bind-to none or --map-by slot:PE=2 gives them two)"
                               : "")
              << "\n";
  }
  if (exp.run.wire_budget)
    std::cout << "# wire budget: compressed messages as exact transfers of their size in the run before"
              << (exp.run.wire_budget_margin > 0 ? " plus " + report::fixed(100 * exp.run.wire_budget_margin, 1) + "%" : "")
              << "; a run where a stream outgrows its budget is redone at exact sizes\n";
  if (exp.run.fused_decode)
    std::cout << "# " << (s.st.topo.fused_decode ? study::fused_decode_line(exp, s.st.cal)
                                                   : "fused decode (run.fused_decode): asked for, but the " + s.st.backend +
                                                         " backend runs a decompression and a reduce as two operations")
              << "\n";
  // Batches the calibration prices as one call that this backend codes op by op.
  {
    std::vector<std::string> dtypes, op_by_op;
    for (const auto& c : exp.calls)
      if (std::find(dtypes.begin(), dtypes.end(), c.dtype) == dtypes.end()) dtypes.push_back(c.dtype);
    for (const auto& codec : exp.codecs) {
      const Codec* c = codec == "identity" ? nullptr : find_plan_codec(codec);  // identity's batches cost nothing
      if (c == nullptr || s.backend->batches(*c)) continue;
      for (const auto& dt : dtypes)
        if (const auto t = parse_dtype(dt); t && (s.st.cal.batches(calib::Op::Compress, codec, *t) ||
                                                  s.st.cal.batches(calib::Op::Decompress, codec, *t)))
          op_by_op.push_back(codec + " " + dt);
    }
    if (!op_by_op.empty()) {
      std::string list;
      for (const auto& k : op_by_op) list += (list.empty() ? "" : ", ") + k;
      std::cout << "# batches: the calibration prices a batch of codec ops (the blocks a direct allreduce sends its "
                   "peers) as one call for "
                << list << ", which the " << s.st.backend
                << " backend codes op by op: the model column of plans with batches prices calls that do not run\n";
    }
  }
  if (exp.run.queue_ahead)
    std::cout << "# queued: "
              << (s.backend->queues() && s.transport->queues()
                      ? "each op submitted once what it depends on is submitted, kernels and transfers ordered on their "
                        "queues, in runs where no transfer needs a size from the host (within wire budgets, or "
                        "nothing compressed)"
                      : "asked for, but " + s.backend->describe() +
                            " has no queue of its own (the host backend queues with run.compute_thread): ops start "
                            "once what they depend on is done")
              << "\n";
  for (const auto& k : s.st.skipped) std::cout << "# skipped: " << k << "\n";
  std::cout << "# model(us): what compcoll-sim predicts for the row's plan (the cost model, shared/policy/cost_model.h) on "
            << exp.topologies[0] << ", " << s.st.cal.label() << ", network model " << exp.network.model << " (from "
            << exp.network.source << "); err = model / measured - 1\n";
  if (s.st.topo.shared_memory) {
    // What the model knows of the host's shared memory (docs/TOPOLOGY.md, "Shared memory").
    bool alone = false;
    for (const auto& c : s.st.cal.curves) alone = alone || !c.alone.empty();
    std::cout << "# shared memory (topology shared_memory): a kernel or receive copy alone on the node at its "
                 "alone time, "
              << policy::kernel_concurrency(s.st.cal, s.st.topo) << " kernels at once at their calibrated time"
              << (alone ? "" : "; the calibration has no alone points (compcoll-bench calibrate --concurrent N "
                               "writes them): a kernel alone is charged its calibrated time")
              << (s.st.topo.gpu_link.alone_by_size.empty()
                      ? "; the topology has no alone_by_size (compcoll-bench transport writes it): a copy alone is "
                        "charged its exchange time"
                      : "")
              << "\n";
  }
  for (const auto& k : s.st.unmodelled) std::cout << "# no model time for " << k << "\n";
  for (const auto& k : s.transport_start.lines) std::cout << k << "\n";
  for (const auto& k : s.kernel_start.lines) std::cout << k << "\n";
  if (!s.st.host_differences.empty()) {
    std::string d;
    for (const auto& k : s.st.host_differences) d += (d.empty() ? "" : "; ") + k;
    std::cout << "# WARNING: the calibration was measured on another host (" << d
              << "): the model column prices kernels this machine does not run. Measure them here: compcoll-bench "
                 "calibrate --device host --concurrent "
              << s.st.gpus_per_node << " ... (docs/CALIBRATION.md)\n";
  }
  // On a GPU: the calibration's device against this one (the backend describes it by name).
  if (s.st.backend == "nccl" && s.st.cal.source != "zero" && !s.st.cal.device.empty() &&
      s.backend->describe().find(s.st.cal.device) == std::string::npos)
    std::cout << "# WARNING: the calibration was made for " << s.st.cal.device << " (" << s.st.cal.source
              << "), this run's GPU is " << s.backend->describe()
              << ": the model column prices kernels this GPU does not run. Measure them here: compcoll-bench calibrate "
                 "--device cuda (docs/CALIBRATION.md)\n";
  std::cout << "# correctness: lossless rows on integer inputs, bitwise against the closed-form result (#wrong: "
               "elements, all ranks); lossy rows: rel.err = ||out - uncompressed|| / ||uncompressed|| on the timed "
               "runs' data (#wrong: non-finite elements)\n";
  std::cout << describe(s.st.topo) << report::table_header(report::Table::Run);
  std::cout.flush();
}

// A finished row (every rank calls it; rank 0 writes it).
void emit(Session& s, report::Row& w) {
  s.speedups.record(w);
  s.speedups.apply(w);
  s.total_wrong += w.wrong;
  if (s.rank != 0) return;
  s.model_check.add(w);
  s.progress->row_done();
  std::cout << report::table_line(w, report::Table::Run);
  if (!w.note.empty()) std::cout << "# note: the row above: " << w.note << "\n";
  std::cout.flush();
  s.doc["rows"].push_back(report::to_json(w));
  if (s.csv) {
    *s.csv << report::csv_line(w);
    s.csv->flush();
    report::write_atomic(s.out_dir / "results.json", report::json_text(s.doc, 1));
  }
}

report::Row cell_row(const Session& s, const Cell& cell) {
  const study::CallSweep& c = s.st.exp.calls[cell.cell.call];
  report::Row w;
  w.topology = s.st.topo.name;
  w.ranks = s.world;
  w.nodes = s.st.topo.nodes_spanned(s.world);
  w.collective = c.collective;
  w.dtype = c.dtype;
  w.tensor = c.tensor;
  w.size = cell.cell.size;
  w.count = cell.baseline.count;
  w.backend = s.st.backend;
  w.call = cell.cell.call;
  w.cell = cell.cell.index;
  w.calibration = s.st.cal.source;
  w.checked = true;
  w.ratio_source = "measured (compress ops of the timed runs)";
  return w;
}

// Uploads, runs, downloads a correctness pass; returns the wrong elements of all ranks. The
// output is first filled with 0xff bytes (NaNs), so an element nobody writes is wrong.
uint64_t check(Session& s, const sched::Schedule& sch, void* in, void* out, size_t out_bytes,
               const std::function<void()>& once) {
  const auto input = integer_input(sch, s.rank);
  s.backend->upload(in, input.data(), input.size());
  const std::vector<uint8_t> poison(out_bytes, 0xff);
  s.backend->upload(out, poison.data(), out_bytes);
  s.transport->barrier();
  heartbeat();
  once();
  s.backend->synchronize();
  heartbeat();
  std::vector<uint8_t> got(out_bytes);
  s.backend->download(got.data(), out, out_bytes);
  return sum_over_ranks(count_wrong(sch.dtype, got, expected_output(sch, s.rank)));
}

// The library's own collective on the identity schedule's buffers: the cell's library row, or
// a policy's row that chose it (`entry`: policy::Plan::library), with the policy's estimate and
// the model's time for it.
void library_row(Session& s, const Cell& cell, const Entry* entry = nullptr) {
  const auto wall0 = std::chrono::steady_clock::now();
  const auto& exp = s.st.exp;
  const sched::Schedule sch = sched::build_schedule(cell.baseline);
  report::Row w = cell_row(s, cell);
  w.placement = "none";
  w.codec = "identity";
  if (entry) w.policy = entry->policy, w.predicted_s = entry->predicted_s, w.model_s = entry->model_s;
  std::unique_ptr<Baseline> base;
  const size_t in_bytes = sch.ranks[s.rank].input_count * dtype_size(sch.dtype);
  const size_t out_bytes = sch.ranks[s.rank].output_count * dtype_size(sch.dtype);
  void* in = s.backend->alloc(in_bytes);
  void* out = s.backend->alloc(out_bytes);
#ifdef COMPCOLL_HAVE_NCCL
  if (s.st.backend == "nccl") base = make_nccl_baseline(*s.transport, sch);
#endif
  if (!base) base = make_mpi_baseline(MPI_COMM_WORLD, sch);
  w.algorithm = base->name();
  w.library = !entry;
  const auto tin = timing_input(sch.dtype, sch.ranks[s.rank].input_count, s.rank, exp.tensors_dir,
                                exp.calls[cell.cell.call].tensor);
  s.backend->upload(in, tin.data(), in_bytes);
  for (int i = 0; i < exp.run.warmup; ++i) base->run(in, out), heartbeat();
  s.backend->synchronize();
  s.transport->barrier();
  s.backend->timer_start();
  for (int i = 0; i < exp.run.iterations; ++i) base->run(in, out), heartbeat();
  w.time_s = mean_over_ranks(s.backend->timer_stop() / exp.run.iterations, s.world);
  w.wrong = check(s, sch, in, out, out_bytes, [&] { base->run(in, out); });
  s.backend->release(in);
  s.backend->release(out);
  w.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  emit(s, w);
}

ExecutorOptions options(const Session& s, const std::string& codec, DType dtype) {
  ExecutorOptions opt;
  opt.codec = find_plan_codec(codec);
  opt.lockstep = s.args.lockstep;
  opt.fuse_decode_add = s.st.exp.run.fused_decode;
  // A batch of codec ops as one call where the backend has one and the calibration, which
  // prices the model column, charges a batch so (batch_launch, or a batch curve).
  opt.batch_compress = s.st.cal.batches(calib::Op::Compress, codec, dtype);
  opt.batch_decompress = s.st.cal.batches(calib::Op::Decompress, codec, dtype);
  opt.wire_budget = s.st.exp.run.wire_budget;
  opt.wire_budget_margin = s.st.exp.run.wire_budget_margin;
  opt.queue_ahead = s.st.exp.run.queue_ahead;
  // The chunks the calibration's codecs were timed in, so that the model column prices the
  // streams the run codes.
  opt.encode.chunk_elements = s.st.cal.chunk_elements;
  return opt;
}

// The uncompressed schedule's output on the timed runs' data (what lossy rows are measured
// against).
std::vector<uint8_t> reference_output(Session& s, const Cell& cell) {
  const sched::Schedule sch = sched::build_schedule(cell.baseline);
  Executor ex(sch, s.rank, *s.transport, *s.backend, options(s, "identity", sch.dtype));
  const auto tin = timing_input(sch.dtype, sch.ranks[s.rank].input_count, s.rank, s.st.exp.tensors_dir,
                                s.st.exp.calls[cell.cell.call].tensor);
  s.backend->upload(ex.input(), tin.data(), tin.size());
  ex.run();
  s.backend->synchronize();
  std::vector<uint8_t> reference(ex.output_bytes());
  s.backend->download(reference.data(), ex.output(), reference.size());
  return reference;
}

// One plan with the executor: warm-up, timed iterations, then its correctness (lossless: the
// integer pass; lossy: the last timed output against `reference`).
void entry_row(Session& s, const Cell& cell, const Entry& entry, const std::vector<uint8_t>& reference) {
  const auto wall0 = std::chrono::steady_clock::now();
  const auto& exp = s.st.exp;
  const sched::Schedule sch = sched::build_schedule(entry.spec);
  report::Row w = cell_row(s, cell);
  w.algorithm = entry.algorithm, w.placement = entry.placement, w.codec = entry.codec, w.policy = entry.policy;
  w.predicted_s = entry.predicted_s;
  w.model_s = entry.model_s;
  w.codec_exposed_s = entry.codec_exposed_s;
  // The kernels' measured time is the host backend's (GPU kernels run asynchronously).
  if (s.backend->memory() == MemorySpace::Host) w.model_kernel_s = entry.model_kernel_s;
  const ExecutorOptions opt = options(s, entry.codec, sch.dtype);
  Executor ex(sch, s.rank, *s.transport, *s.backend, opt);
  const auto tin =
      timing_input(sch.dtype, sch.ranks[s.rank].input_count, s.rank, exp.tensors_dir, exp.calls[cell.cell.call].tensor);
  s.backend->upload(ex.input(), tin.data(), tin.size());
  for (int i = 0; i < exp.run.warmup; ++i) ex.run();
  s.backend->synchronize();
  s.transport->barrier();
  RunStats total;
  s.backend->timer_start();
  for (int i = 0; i < exp.run.iterations; ++i) {
    const RunStats r = ex.run();
    total += r;
  }
  const double t = s.backend->timer_stop();
  const int it = exp.run.iterations;
  w.time_s = mean_over_ranks(t / it, s.world);
  w.codec_s = mean_over_ranks(total.codec_s / it, s.world);
  w.reduce_s = mean_over_ranks(total.reduce_s / it, s.world);
  w.copy_s = mean_over_ranks(total.copy_s / it, s.world);
  // The GPU's kernels run on its streams, untimed on their own: not measured (no figure), not 0.
  if (s.st.backend == "nccl") w.codec_s = w.reduce_s = w.copy_s = NAN;
  w.messages = sum_over_ranks(total.messages) / it;
  w.wire_bytes = sum_over_ranks(total.sent_bytes) / it;
  const uint64_t cin = sum_over_ranks(total.compress_in), cout = sum_over_ranks(total.compress_out);
  w.ratio = cin ? static_cast<double>(cout) / static_cast<double>(cin) : 1.0;
  // Every rank redoes the same runs (Transport::any), so rank 0's count is the row's.
  if (total.reruns > 0)
    w.note = "wire budget: " + std::to_string(total.reruns) + " of " + std::to_string(it) +
             " timed runs redone at exact sizes (a stream outgrew its budget); their time and bytes included";
  if (opt.codec->lossless()) {
    w.wrong = check(s, sch, ex.input(), ex.output(), ex.output_bytes(), [&] { ex.run(); });
  } else {  // wrong = elements non-finite where the uncompressed output is finite
    std::vector<uint8_t> got(ex.output_bytes());
    s.backend->synchronize();
    s.backend->download(got.data(), ex.output(), got.size());
    fill_lossy(w, lossy_error(sch.dtype, got, reference));
  }
  w.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  emit(s, w);
}

// The lowrank protocol (codec/lowrank.h) for real: per iteration, P = M Q locally, allreduce
// P (the call's algorithm, fp32), orthonormalize, Q = Mᵀ P̂, allreduce Q, update = P̂ (Q/n)ᵀ,
// with error feedback across iterations. Timed like any row; then, from a fresh state, one
// step's update against the uncompressed mean gradient (rel.err, max_abs, SNR).
void lowrank_row(Session& s, const Cell& cell, const Entry& entry, const std::vector<uint8_t>& reference) {
  const auto wall0 = std::chrono::steady_clock::now();
  const auto& exp = s.st.exp;
  const sched::Schedule sp = sched::build_schedule(entry.spec), sq = sched::build_schedule(entry.q_spec);
  const ExecutorOptions opt = options(s, "identity", sp.dtype);
  Executor ex_p(sp, s.rank, *s.transport, *s.backend, opt), ex_q(sq, s.rank, *s.transport, *s.backend, opt);
  const DType dt = cell.baseline.dtype;
  const uint64_t n = entry.rows * entry.cols;
  const auto grad = timing_input(dt, n, s.rank, exp.tensors_dir, exp.calls[cell.cell.call].tensor);
  std::vector<float> update(n), p, q;
  double codec_s = 0;
  auto step = [&](lowrank::LowRankState& state) {
    lowrank_step(*s.backend, s.world, state, ex_p, ex_q, dt, grad.data(), update.data(), codec_s, p, q);
  };
  lowrank::LowRankState state = lowrank::make_state(entry.rows, entry.cols, entry.lowrank, 0x5eed);
  for (int i = 0; i < exp.run.warmup; ++i) step(state);
  s.transport->barrier();
  codec_s = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < exp.run.iterations; ++i) step(state);
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report::Row w = cell_row(s, cell);
  w.time_s = mean_over_ranks(t / exp.run.iterations, s.world);
  w.codec_s = mean_over_ranks(codec_s / exp.run.iterations, s.world);
  w.algorithm = entry.algorithm, w.placement = entry.placement, w.codec = entry.codec;
  w.wire_bytes = sum_over_ranks(lowrank::compressed_bytes(entry.rows, entry.cols, entry.lowrank));
  const double cr = lowrank::compression_ratio(entry.rows, entry.cols, entry.lowrank, dt);
  w.ratio = cr > 0 ? 1.0 / cr : 1.0;
  // One step from a fresh state (no residual yet) against the uncompressed mean.
  lowrank::LowRankState fresh = lowrank::make_state(entry.rows, entry.cols, entry.lowrank, 0x5eed);
  step(fresh);
  std::vector<uint8_t> mean_bytes(n * 4), got(n * 4);
  for (uint64_t i = 0; i < n; ++i) {
    const float m = static_cast<float>(load_as_float(dt, reference.data(), i) / s.world);
    std::memcpy(mean_bytes.data() + 4 * i, &m, 4);
  }
  std::memcpy(got.data(), update.data(), got.size());
  fill_lossy(w, lossy_error(DType::FP32, got, mean_bytes));
  w.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  emit(s, w);
}

// A cell: the library's row, the reference lossy rows need, each entry's row. A failure
// aborts the job naming the row.
void run_cell(Session& s, const Cell& cell) {
  const auto& call = s.st.exp.calls[cell.cell.call];
  const std::string where = "calls." + std::to_string(cell.cell.call) + " (" + call.collective + " " + call.algorithm +
                            ") size " + std::to_string(cell.cell.size);
  auto guarded = [&](const std::string& what, const std::function<void()>& f, bool row = true) {
    set_activity(where + ", " + what);
    if (row) inject_fault(s.rank, s.row_index++);
    try {
      f();
    } catch (const std::exception& e) {
      abort_job(s.rank, where + ", " + what + ": " + e.what());
    }
  };
  guarded("the library's collective", [&] { library_row(s, cell); });
  std::vector<uint8_t> reference;
  if (std::any_of(cell.entries.begin(), cell.entries.end(),
                  [](const Entry& e) { return e.lowrank || !find_plan_codec(e.codec)->lossless(); }))
    guarded("the uncompressed reference for lossy rows", [&] { reference = reference_output(s, cell); }, false);
  for (const Entry& entry : cell.entries) {
    guarded(entry.policy + " " + entry.algorithm + " " + entry.codec, [&] {
      if (entry.lowrank) lowrank_row(s, cell, entry, reference);
      else if (entry.library) library_row(s, cell, &entry);
      else entry_row(s, cell, entry, reference);
    });
  }
  if (s.rank != 0) return;
  std::cout << report::ModelCheck::cell_line(s.model_check.close_cell());
  std::cout.flush();
  s.doc["model_check"] = s.model_check.to_json();
}

// Every rank sets up on its own; the first failing rank's message is printed by it, and every
// rank exits 2, before any other communication. Then the ranks must have chosen the same plans.
bool agree_on_setup(Session& s, int local_size) {
  std::string error;
  try {
    s.st = setup(s.args, s.world, local_size);
  } catch (const std::exception& e) {  // BadInput, ConfigError, ScheduleError, TensorFileError
    error = e.what();
  }
  int first_bad = error.empty() ? s.world : s.rank;
  MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first_bad < s.world) {
    if (s.rank == first_bad) std::cerr << "compcoll-run: " << error << "\n";
    return false;
  }
  uint64_t hashes[2] = {s.st.plans_hash, ~s.st.plans_hash};
  MPI_Allreduce(MPI_IN_PLACE, hashes, 2, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  if (hashes[0] != ~hashes[1]) {
    if (s.rank == 0)
      std::cerr << "compcoll-run: " << s.st.exp.file
                << ": policies: the ranks chose different plans (do they read the same calibration and tensor files?)\n";
    return false;
  }
  // The same communicators on every rank: a rank that would configure a second one for the
  // plans (its channels per peer on another node) waits for the others in its set-up forever.
  int channels[2] = {s.st.plan_channels_per_net_peer, -s.st.plan_channels_per_net_peer};
  MPI_Allreduce(MPI_IN_PLACE, channels, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (channels[0] != -channels[1]) {
    if (s.rank == 0)
      std::cerr << "compcoll-run: the ranks would configure NCCL's channels per peer on another node differently ("
                << channels[0] << " to " << -channels[1]
                << "; 0: NCCL's own): NCCL_NCHANNELS_PER_NET_PEER is set on some ranks only (mpirun -x passes it to "
                   "every node), or their NCCL libraries differ\n";
    return false;
  }
  return true;
}

void run_trace(Session& s) {
  if (!s.st.trace) return;
  EntropyRun run;
  run.exp = &s.st.exp;
  run.trace = &*s.st.trace;
  run.call = s.st.entropy_call;
  const study::CallSweep& call = s.st.exp.calls[run.call];
  run.spec = [&](DType dtype, uint64_t count) { return trace_spec(s.st, call, s.world, dtype, count); };
  run.lockstep = s.args.lockstep;
  run.rank = s.rank, run.world = s.world;
  run.transport = s.transport.get(), run.backend = s.backend.get();
  try {
    run_entropy_trace(run, s.out_dir, s.doc);
  } catch (const std::exception& e) {
    abort_job(s.rank, "run.entropy: " + std::string(e.what()));
  }
}

int run(const Args& args) {
  Session s;
  s.args = args;
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.world);
  int local_size = 1;
  const int local_rank = local_rank_and_size(&local_size);
  if (!agree_on_setup(s, local_size)) return 2;
  // From here a silent rank ends the job within run.timeout_s instead of hanging it.
  Watchdog watchdog(s.rank, s.st.exp.run.timeout_s);
  make_transport(s, local_rank);
  s.transport_start = transport_check(s, false);
  s.kernel_start = kernel_check(s, false);
  start_output(s);
  size_t total_rows = 0;
  for (const auto& cell : s.st.cells) total_rows += 1 + cell.entries.size();
  s.progress = std::make_unique<report::Progress>("compcoll-run", total_rows);
  for (const Cell& cell : s.st.cells) run_cell(s, cell);
  if (s.rank == 0) std::cout << s.model_check.summary();
  if (!s.st.cells.empty()) {
    const TransportCheck c = transport_check(s, true);
    for (const auto& k : c.lines) std::cout << k << "\n";
    if (!c.points.is_null()) s.doc["transport_check_end"] = c.points;
    const KernelCheck k = kernel_check(s, true);
    for (const auto& l : k.lines) std::cout << l << "\n";
    if (!k.points.is_null()) s.doc["kernel_check_end"] = k.points;
  }
  run_trace(s);
  if (!s.out_dir.empty()) report::write_atomic(s.out_dir / "results.json", report::json_text(s.doc, 1));
  if (s.rank == 0) std::cout << (s.total_wrong ? "# FAILED: " + std::to_string(s.total_wrong) + " wrong elements\n" : "# OK\n");
  std::cout.flush();
  // Torn down while the watchdog still watches (NCCL's communicators, the device's memory), in
  // the order the session's members would be.
  s.backend.reset();
  s.transport.reset();
  return s.total_wrong ? 1 : 0;
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
