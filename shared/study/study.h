// shared/study/study.h — the study layer: what compcoll-sim and compcoll-run do alike between
// reading an experiment and executing plans. The data path is
//
//   experiment -> groups (topology x group size) -> cells (group x call x size)
//              -> entries (the static plans, one per codec, and each policy's plan)
//              -> schedules -> execution (SimGrid, or a transport) -> rows (shared/report)
//
// and everything up to the schedules is here, once: the experiment's checks, the codecs and
// their ratios, the cells in output order, the plans of each cell with their row labels and
// build specs, and the split of the cells into shards. Only the executor is the program's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "calibration/calibration.h"
#include "calibration/ratio_model.h"
#include "policy/cost_model.h"
#include "policy/policy.h"
#include "schedule/build.h"
#include "study/experiment.h"
#include "topology/topology.h"

namespace compcoll::study {

// The experiment's checks both programs make before anything runs (config::ConfigError, one
// line naming the file and key): each call's algorithm (and a hierarchical allreduce's inter)
// known for its collective, each codec known (lowrank:r=N too where `allow_lowrank`).
void check_calls(const Experiment& exp);
void check_codecs(const Experiment& exp, bool allow_lowrank);
// Compress and decompress curves for every compressing codec and dtype the calls use (with
// adaptive or the oracle, for every codec and every call's dtype), and a reduce curve for
// every dtype a call reduces (none needed with the zero calibration).
void check_curves(const Experiment& exp, const calib::Calibration& cal);
// With run.fused_decode, one line (no newline) saying how the model prices each decode and
// add in one kernel of the experiment (topo::Topology::fused_decode): per codec with such a
// kernel (codec::gpu_decode_adds) and dtype a call reduces, at the calibration's decode_add
// curve or, without one, at its decompress and reduce curves together; empty otherwise.
std::string fused_decode_line(const Experiment& exp, const calib::Calibration& cal);
// The experiment's calibration: its file, or the zero calibration.
calib::Calibration load_calibration(const Experiment& exp);

// Compressed / uncompressed size of each codec on each dtype and tensor kind: fixed in the
// experiment, or measured once on its tensors (calib::measure_ratio); for a library codec (no
// host implementation, codec/codec.h) the ratio `cal` records, measured on a GPU.
class Ratios {
 public:
  explicit Ratios(const Experiment& exp, const calib::Calibration* cal = nullptr) : exp_(&exp), cal_(cal) {}
  const calib::MeasuredRatio& get(const std::string& codec, DType dtype, const std::string& tensor);
  const calib::MeasuredRatio& get(const std::string& codec, const CallSweep& call);
  // What policy::System::ratio takes.
  std::function<double(const std::string&, DType, const std::string&)> function();
  // Every ratio asked for so far, by "codec/dtype/kind".
  const std::map<std::string, calib::MeasuredRatio>& all() const { return ratios_; }
  // Measures (or fixes) every codec x call of the experiment now, so that bad tensor folders
  // fail before any row runs.
  void resolve_all();

 private:
  const Experiment* exp_;
  const calib::Calibration* cal_;
  std::map<std::string, calib::MeasuredRatio> ratios_;
};

// The flow model's factors of the experiment's `network` (policy::flow_model_defaults of its
// model, then the keys it sets): what compcoll-sim simulates with, so compcoll-run's plans and
// model column use the same.
policy::NetFactors net_factors(const Experiment& exp);

// What a policy sees of a system: the topology (its placement puts the call's ranks), the
// calibration, the network model's factors, the ratios, and the codecs it may use.
policy::System make_system(const topo::Topology& topo, const calib::Calibration& cal, const policy::NetFactors& net,
                           Ratios& ratios, const std::vector<std::string>& codecs);

// A group: the first `ranks` ranks of a topology's placement (0: every GPU).
struct Group {
  std::string topology;
  int ranks = 0;   // as the experiment says
  int nranks = 0;  // the ranks that run (ranks, or the topology's GPUs)
};
struct SkippedGroup {
  std::string topology;
  int ranks = 0, gpus = 0;
};
// The experiment's groups in order; group sizes larger than a topology go to `skipped`.
// ConfigError when no topology holds any of the sizes.
std::vector<Group> groups(const Experiment& exp, std::vector<SkippedGroup>* skipped);

// A cell: one call of the experiment at one size on one group.
struct Cell {
  size_t index = 0;  // over the whole experiment, in output order
  size_t group = 0;
  size_t call = 0;   // calls.N
  uint64_t size = 0;
  policy::CallInfo info;
};
// The cells of every group (group x call x size, in that order). A cell's size is the
// experiment's rounded down to whole elements of its call's dtype (for all-to-all, the same
// number for every rank), as nccl-tests rounds; ConfigError where that leaves none.
std::vector<Cell> cells(const Experiment& exp, const std::vector<Group>& groups);

// The static plan of a call: the call as written, with one codec.
policy::Plan static_plan(const CallSweep& call, const std::string& codec);
// Plans that run the same schedule have the same key (uncompressed plans ignore placements,
// and nccl-like's protocol and NCCL labels do not change the schedule):
// each is simulated once per cell, however many rows choose it.
std::string plan_key(const policy::Plan& plan);

// One row's plan.
struct Entry {
  std::string policy = "static";
  policy::Plan plan;
  std::string algorithm = "-", placement = "-";  // the row's labels
  double predicted_s = NAN;                      // the policy's own estimate
  std::string error;                             // the policy could not plan the call
  std::vector<policy::Plan> candidates;          // oracle: every plan it simulates, each once
};

// Plans the cells of one group: the static plans and each policy's, from the same code for
// both programs (shared/policy), on the group's topology, the experiment's calibration and
// the ratios.
class Planner {
 public:
  // `gpus_per_node`: ranks per node of the schedules (0: policy::ranks_per_node).
  Planner(const Experiment& exp, const topo::Topology& topo, const calib::Calibration& cal, const policy::NetFactors& net,
          Ratios& ratios, int gpus_per_node = 0);
  // A cell's rows in the experiment's policy order: per `static`, one entry per codec (the
  // call as written); per other policy its choice; the oracle's candidates are every
  // candidate plan and every plan another entry of the cell chose. `predict_static`: the cost
  // model's time for the static plans too (where small enough to build).
  std::vector<Entry> plan(const Cell& cell, bool predict_static = false);
  // The schedule of a plan of the cell (with the call's root).
  sched::BuildSpec build_spec(const policy::Plan& plan, const Cell& cell) const;
  // The cost model's prediction (shared/policy/cost_model.h) for schedule `b` of the cell as
  // built, `codec` at the ratio the policies use: what compcoll-sim would simulate for it;
  // with iterations > 1, back to back that many times (policy::predict).
  // `nccl_kernels`: NCCL's kernels run it (policy::Plan::nccl_kernels; its channels merged as
  // policy::flow_spec merges them), with NCCL protocol `protocol` (policy::Plan::protocol).
  policy::PlanCost model(const sched::BuildSpec& b, const std::string& codec, const Cell& cell, int iterations = 1,
                         bool nccl_kernels = false, const std::string& protocol = "");
  // The codec's exposed time in one call of `b` (policy::exposed_codec_s).
  double exposed_codec(const sched::BuildSpec& b, const std::string& codec, const Cell& cell, bool nccl_kernels = false,
                       const std::string& protocol = "");
  const policy::System& system() const { return system_; }
  // Whether the library's own collective is NCCL's (policy::System::nccl_library): false
  // where compcoll-run runs MPI's.
  void set_nccl_library(bool nccl) { system_.nccl_library = nccl; }
  int gpus_per_node() const { return gpus_per_node_; }

 private:
  void label(Entry& e, const Cell& cell) const;
  const Experiment& exp_;
  const topo::Topology& topo_;
  int gpus_per_node_;
  policy::System system_;
  policy::RouteCache routes_;
  std::map<std::string, std::unique_ptr<policy::Policy>> policies_;
};

// --shard I/N: cells split into N shards balanced by expected cost (the messages of the plans
// the cell's rows can run: its static plans, and with adaptive or the oracle every
// candidate), deterministically: largest cost first onto the least loaded shard.
struct Shard {
  int index = 0, count = 1;  // 0-based index
  bool all() const { return count == 1; }
};
// "I/N" with 1 <= I <= N; std::invalid_argument with the reason otherwise.
Shard parse_shard(const std::string& text);
double expected_cost(const Experiment& exp, const Cell& cell, const topo::Topology& topo);
// Which shard each cell goes to.
std::vector<int> assign_shards(const std::vector<double>& cost, int shards);

}  // namespace compcoll::study
