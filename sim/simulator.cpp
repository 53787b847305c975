// sim/simulator.cpp — see simulator.h.
#include "sim/simulator.h"

#include "policy/policy.h"

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xbt/log.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <limits>
#include <sstream>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "codec/format.h"
#include "policy/cost_model.h"
#include "report/row.h"
#include "schedule/lockstep.h"
#include "sim/platform.h"

namespace compcoll::sim {
namespace s4u = simgrid::s4u;
using sched::BufKind;
using sched::OpKind;

NetworkModel NetworkModel::defaults(const std::string& model) {
  const policy::NetFactors f = policy::flow_model_defaults(model);
  NetworkModel m;
  m.model = model;
  m.latency_factor = f.latency_factor;
  m.bandwidth_factor = f.bandwidth_factor;
  m.crosstraffic = f.crosstraffic;
  m.weight_s = f.weight_s;
  m.tcp_gamma = f.tcp_gamma;
  m.protocol_costs = f.protocol_costs;
  return m;
}

std::string NetworkModel::describe() const {
  std::ostringstream o;
  o << "SimGrid network/model " << (model == "cm02" ? "CM02" : "LV08") << ", latency-factor " << latency_factor
    << ", bandwidth-factor " << bandwidth_factor << ", crosstraffic " << (crosstraffic ? "on" : "off")
    << ", TCP-gamma " << tcp_gamma << " B, update " << update << ", precision " << precision << " s"
    << (protocol_costs ? ", NCCL protocol costs" : "")
    << (!protocol_costs                              ? ""
        : p2p_net_channels == policy::kP2pNcclDefault ? ", NCCL's point-to-point channels per peer"
        : p2p_net_channels > 0 ? ", " + std::to_string(p2p_net_channels) + " point-to-point channels per peer"
                               : "");
  return o.str();
}

double expected_peak_bytes(int gpus, int ranks, uint64_t ops) {
  // Above each of seven measured peaks, by 6.1% (nccl-like's rail rings on 256 ranks) to 37%
  // (4,096 ranks) (docs/compcoll-sim.md, "Memory"): what every process holds (the program, SimGrid,
  // the tensors the ratio model reads), then bytes per GPU of the platform, per rank of the
  // call and per schedule op (policy::plan_size's count).
  constexpr double kBase = 60e6, kPerGpu = 2'400, kPerRank = 30'000, kPerOp = 110;
  return kBase + kPerGpu * gpus + kPerRank * ranks + kPerOp * static_cast<double>(ops);
}

namespace {

// A number from the first line of `path` that starts with `key` (the whole first line when
// `key` is empty), times `scale`; negative when there is none.
double read_number(const char* path, const std::string& key, double scale) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!key.empty() && line.rfind(key, 0) != 0) continue;
    const std::string rest = line.substr(key.size());
    char* end = nullptr;
    const double v = std::strtod(rest.c_str(), &end);
    return end == rest.c_str() ? -1 : v * scale;
  }
  return -1;
}

}  // namespace

double available_memory_bytes() {
  double avail = std::numeric_limits<double>::infinity();
  if (const double m = read_number("/proc/meminfo", "MemAvailable:", 1024); m >= 0) avail = m;
  // The cgroup of this process (a container, a Slurm job's step): its limit less what it holds,
  // cgroup v2 (memory.max) or v1 (the memory controller's memory.limit_in_bytes).
  std::string v2, v1;
  {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("0::", 0) == 0) v2 = line.substr(3);
      const size_t m = line.find(":memory:");
      if (m != std::string::npos) v1 = line.substr(m + 8);
    }
  }
  auto cap = [&](const std::string& dir, const char* limit_file, const char* usage_file) {
    const double limit = read_number((dir + limit_file).c_str(), "", 1), used = read_number((dir + usage_file).c_str(), "", 1);
    if (limit > 0 && used >= 0) avail = std::min(avail, std::max(0.0, limit - used));
  };
  if (!v2.empty()) cap("/sys/fs/cgroup" + (v2 == "/" ? std::string() : v2), "/memory.max", "/memory.current");
  if (!v1.empty()) cap("/sys/fs/cgroup/memory" + (v1 == "/" ? std::string() : v1), "/memory.limit_in_bytes", "/memory.usage_in_bytes");
  struct rlimit rl {};
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) avail = std::min(avail, static_cast<double>(rl.rlim_cur));
  return avail;
}

namespace {

constexpr double kHostSpeed = 1e9;  // must match platform.cpp
constexpr uint32_t kPosted = UINT32_MAX;  // the sender's side of a message: its op already counts as done
constexpr int64_t kKernel = -2;             // Event::conn of a kernel
constexpr int64_t kAck = -3;                // Event::conn of a copied message's acknowledgement
constexpr int64_t kArrived = -1;            // Event::conn of a receive whose message arrived
constexpr uint32_t kNone = UINT32_MAX;

// What one message carries through the simulation: its wire size and what it decompresses to.
struct Payload {
  uint64_t wire = 0, raw = 0;
};

struct CallRun {
  const sched::Schedule* schedule = nullptr;
  const Call* call = nullptr;
  const calib::Calibration* cal = nullptr;
  const topo::Topology* topology = nullptr;
  double bandwidth_factor = 1;   // the flow model's (receive copies are charged at it)
  double footprint = 0;          // the call's bytes of buffers on a node (receive copies' factors)
  const Platform* platform = nullptr;
  policy::MessageCosts costs;    // NCCL's protocol costs of the call's messages (network.protocol_costs)
  int iterations = 1;            // the schedule is the call repeated this many times (sched::repeated)
  // Back to back within wire budgets (topo::Topology::wire_budget), of a call that compresses:
  // every rank starts its next iteration once all ranks are done with the last.
  bool together = false;
  uint64_t messages = 0, wire_bytes = 0, raw_bytes = 0;
  double codec_s = 0, reduce_s = 0, end = 0;
  std::vector<double> rank_end;  // each rank's last op done, its last send delivered
  std::vector<int> endpoint;     // each rank's GPU, or its node's switch (policy::rank_endpoints)
  // A message from rank `src` to rank `dst` is copied by its receiver (topology receive_copy).
  bool copied(int src, int dst) const {
    return topology->copies_on_receive(endpoint[static_cast<size_t>(src)], endpoint[static_cast<size_t>(dst)]);
  }
};

// A (peer, lane) pair as one key: messages queue per connection.
uint64_t connection(int peer, uint32_t lane) { return (uint64_t{lane} << 32) | static_cast<uint32_t>(peer); }

// One finished activity as the rank it belongs to sees it: the op (kPosted for a message
// that left), and what finished (the connection of a message that left, kKernel, kAck, kArrived).
struct Event {
  uint32_t rank, op;
  int64_t conn;
  bool operator<(const Event& o) const {
    return rank != o.rank ? rank < o.rank : op != o.op ? op < o.op : conn < o.conn;
  }
};

class Driver;

// The program of one rank as a state machine: starts every op whose dependencies are done and
// reacts to its activities' completions, which the driver hands over (finished()).
class RankState {
 public:
  RankState(Driver& d, CallRun& run, int r);
  void start_ready();
  void finished(uint32_t i, int64_t conn);
  // A message of this rank's arrived (the driver, at its completion): what it carries and the
  // sender's op (a copied message's acknowledgement names it).
  void arrived(uint32_t recv_op, const Payload& pl, uint32_t send_op) { received_[recv_op] = {pl, send_op}; }
  bool idle() const { return in_flight_ == 0 && ready_.empty(); }
  bool complete_program() const { return done_ == n_; }
  size_t left() const { return n_ - done_; }
  double codec_s() const { return codec_s_; }
  double reduce_s() const { return reduce_s_; }

 private:
  struct Message {
    Payload payload;
    uint32_t seq, op;  // sequence number on the connection, the send
  };
  // A connection with messages waiting, on the wire or waiting out their latency; dropped
  // when it has none, so that a rank holds outboxes for the connections in use now, not for
  // every peer of its program. Queues are vectors read from a head index (a deque allocates
  // on construction).
  struct Outbox {
    std::vector<Message> pending;  // from pending_head
    size_t pending_head = 0;
    // Protocol costs: messages waiting out their latency, in post order, from `delayed_head`.
    std::vector<std::pair<double, Message>> delayed;
    size_t delayed_head = 0;
    bool busy = false;
    uint32_t on_wire = 0;  // the send whose message is on the wire (busy)
    bool has_pending() const { return pending_head < pending.size(); }
    bool idle() const { return !busy && !has_pending() && delayed_head == delayed.size(); }
  };
  // Kernels run one at a time, in the order they become ready, as on one CUDA stream (each
  // codec or reduce kernel has the GPU's memory bandwidth to itself). On a node whose ranks
  // share memory (topo::Topology::shared_memory) a kernel or receive copy is an execution of its
  // work (policy::shared_work) on one host per node, its node's first GPU's, bounded by what it
  // can use alone: SimGrid's CPU model shares that host among them by bounded max-min sharing.
  struct Kernel {
    uint32_t op;
    double seconds;  // without shared memory
    policy::SharedWork w;
  };
  struct Received {
    Payload payload;
    uint32_t send_op = kNone;
  };
  void start_op(uint32_t i);
  void run_op(uint32_t i);
  void post_send(uint32_t i);
  void start_send(uint64_t conn);
  void release(uint64_t conn);  // protocol costs: the messages whose latency has passed join the queue
  void start_kernel();
  void queue_kernel(const Kernel& k);
  void start_copy();
  void queue_copy(const Kernel& k);
  // Runs kernel or receive copy k as work on the node (shared memory) or on the rank's GPU.
  void start_exec(const Kernel& k);
  // Op i's kernel: its calibrated time (counted in codec_s_ or reduce_s_) and, with shared
  // memory, its work on the node.
  // `messages` > 1: a batch of that many codec ops in one call over `bytes` in all
  // (calib::Calibration::batch_seconds).
  Kernel kernel(uint32_t i, calib::Op kind, uint64_t bytes, uint32_t messages = 1);
  // Whether a batch of codec ops of this kind runs as one call (calib::Calibration::batches).
  bool batches(calib::Op kind) const { return run_.cal->batches(kind, run_.call->codec, dtype_); }
  // Codec op i's kernel: its own, or where its kind batches the call over the batch it leads
  // (sched::launch_elements); nothing for an op that rides in its batch's first op's call.
  Kernel codec_kernel(uint32_t i, calib::Op kind);
  void complete(uint32_t i);
  void close(uint32_t i);

 public:
  // Back to back: iteration k's first ops become ready (the rank starts them at its next
  // start_ready).
  void begin_iteration(size_t k) {
    if (k < roots_.size())
      for (const uint32_t i : roots_[k]) make_ready(i);
  }
  bool has_ops() const { return per_iteration_ > 0; }

 private:
  // Lockstep: a transfer of the posted group done (a receive: `receive`, else -1).
  void group_transfer_done(int64_t receive);

  Driver& d_;
  CallRun& run_;
  const int r_;
  const sched::RankProgram& p_;
  const size_t n_;
  const DType dtype_;
  const uint64_t dsize_;
  std::vector<uint32_t> missing_;
  std::vector<uint32_t> dependents_begin_, dependents_;  // op i's dependents: [begin[i], begin[i+1])
  std::vector<uint32_t> seq_;  // sends / receives: index among those to / from the peer on its lane
  std::vector<Payload> wire_;
  std::unordered_map<uint32_t, Received> received_;  // receives whose message arrived, until done
  // ready_: a min-heap of op indices (make_ready); finished_: ops that completed without an activity.
  std::vector<uint32_t> ready_, finished_;
  void make_ready(uint32_t i) {
    ready_.push_back(i);
    std::push_heap(ready_.begin(), ready_.end(), std::greater<>());
  }
  std::unordered_map<uint64_t, Outbox> outbox_;  // per connection (peer, lane)
  std::deque<Kernel> kernels_;
  bool kernel_busy_ = false;
  // With a compute thread (topo::Topology::compute_thread): the receive copies, in a queue of
  // their own beside the kernels' (a vector read from copies_head_: no allocation for ranks that
  // never use it).
  std::vector<Kernel> copies_;
  size_t copies_head_ = 0;
  bool copy_busy_ = false;
  int kernels_at_once_ = 1;  // shared memory: policy::kernel_concurrency
  uint32_t in_flight_ = 0;   // kernels running or queued, receives and sends not finished, acks awaited
  double codec_s_ = 0, reduce_s_ = 0;
  std::vector<policy::FusedOp> fused_;  // decode and add in one kernel (policy::fused_ops; empty: none)
  size_t done_ = 0;
  // Back to back (CallRun::iterations): iteration k's ops are [k x per_iteration_, (k+1) x
  // per_iteration_); open_[k] counts its ops not done and sends not delivered, and the last one
  // makes iteration k + 1's first ops (roots_[k + 1]) ready.
  uint32_t per_iteration_ = 0;
  std::vector<uint32_t> open_;
  std::vector<std::vector<uint32_t>> roots_;
  // Lockstep (policy::MessageCosts::lockstep): the transfers in step groups (sched::StepGroups);
  // a transfer's dependency on one of its own group does not count
  // (sched::lockstep_free_dependency).
  bool lockstep_ = false;
  sched::StepGroups groups_;

 public:
  // NCCL's point-to-point rate per peer (policy::MessageCosts::net_peer_rate): per send, the
  // sends of its step to the same peer; counts nothing when not charged.
  sched::PeerSharing sharing;
};

// The call: every rank's state, and the SimGrid activities that run for them. No actor: the
// activities are started from SimGrid's maestro and their completions come back through
// SimGrid's completion signals. The completions of one simulated instant are gathered and handed
// to their ranks together, in (rank, op) order, by a kernel timer set at that instant, so the
// order in which SimGrid reports simultaneous completions decides nothing (a kernel made ready
// by two of them queues in op order, as the cost model queues it).
class Driver {
 public:
  Driver(CallRun& run) : run_(run) {}
  void start();
  std::string check();  // after the run: empty, or why a rank did not finish; fills run's totals

  // Messages match in program order per (sender, receiver, lane): the seq-th send with the
  // seq-th receive, whichever is posted first; the transfer starts once both are.
  void post_send(int src, int dst, uint32_t lane, uint32_t seq, uint32_t send_op, const Payload& pl);
  void post_recv(int src, int dst, uint32_t lane, uint32_t seq, uint32_t recv_op);
  void start_exec(int rank, uint32_t op, s4u::Host* host, double flops, double bound);
  // A kernel alone on its rank's GPU (no memory shared with other ranks: one kernel at a time
  // per GPU, nothing else on its host) ends exactly its calibrated time after it starts: a
  // timer, which holds no SimGrid activity meanwhile (an execution's end is SimGrid's CPU
  // model's, computed with its own precision and lazy updates: docs/compcoll-sim.md).
  void start_kernel_timer(int rank, uint32_t op, double seconds);
  void start_ack(int receiver, int sender, uint32_t send_op);
  // Back to back within wire budgets (topo::Topology::wire_budget): a rank is done with
  // iteration k; once all are, every rank's iteration k + 1 begins (at the flush of this
  // instant), as compcoll-run's ranks end each run together.
  void iteration_done(size_t k);
  // NCCL's protocol costs: how long a message from rank src to rank dst waits, once posted,
  // before it joins its connection's queue (policy::MessageCosts; 0 without them).
  double message_delay(int src, int dst);
  s4u::Host* gpu_host(int rank) const { return run_.platform->host(run_.endpoint[static_cast<size_t>(rank)]); }

  // SimGrid's completion signals (connected once per process) land here.
  static void on_completion(const s4u::Activity& a);

 private:
  struct MessageKey {
    uint64_t pair, lane_seq;
    MessageKey(int src, int dst, uint32_t lane, uint32_t seq)
        : pair((uint64_t{static_cast<uint32_t>(src)} << 32) | static_cast<uint32_t>(dst)), lane_seq((uint64_t{lane} << 32) | seq) {}
    bool operator==(const MessageKey& o) const { return pair == o.pair && lane_seq == o.lane_seq; }
  };
  struct MessageKeyHash {
    size_t operator()(const MessageKey& k) const { return std::hash<uint64_t>()(k.pair * 0x9E3779B97F4A7C15ull ^ k.lane_seq); }
  };
  struct Posted {  // the half of a message posted first: the send (op, payload) or the receive (op)
    uint32_t op;
    Payload payload;
  };
  // What a running activity is for: a kernel or an acknowledgement (one rank's event), or a
  // message (the sender's event, then the receiver's).
  struct Running {
    s4u::ActivityPtr activity;
    Event first;
    uint32_t receiver = kNone, recv_op = 0, send_op = 0;
    Payload payload;
  };
  void transfer(int src, int dst, uint32_t lane, uint32_t send_op, const Payload& pl, uint32_t recv_op);
  uint32_t track(s4u::ActivityPtr a, const Running& r);
  // Lets rank r start what is ready; a rank with nothing left to do ends now.
  void start_ready(uint32_t r, double now) {
    ranks_[r].start_ready();
    if (ranks_[r].idle() && ranks_[r].complete_program()) run_.rank_end[r] = now;
  }
  void completed(uint32_t token);
  void flush_soon();
  void flush();

  CallRun& run_;
  std::vector<RankState> ranks_;
  policy::RouteCache routes_{*run_.topology};  // route latencies, for the protocol costs' delay
  std::unordered_map<MessageKey, Posted, MessageKeyHash> posted_;
  std::vector<Running> running_;  // by token - 1
  std::vector<uint32_t> free_;    // tokens of running_ slots free for reuse
  std::vector<Event> events_;     // completions of this instant, not yet handed over
  std::vector<s4u::ActivityPtr> released_;  // finished activities, let go of at the next flush
  bool flush_set_ = false;
  std::vector<int> iteration_done_;  // per iteration: the ranks done with it (wire budgets)
  int ranks_with_ops_ = 0;
  bool begun_ = false;               // an iteration began on every rank: start them all
  static Driver* current_;
};

Driver* Driver::current_ = nullptr;

RankState::RankState(Driver& d, CallRun& run, int r)
    : d_(d),
      run_(run),
      r_(r),
      p_(run.schedule->ranks[static_cast<size_t>(r)]),
      n_(p_.ops.size()),
      dtype_(run.schedule->dtype),
      dsize_(dtype_size(dtype_)),
      missing_(n_),
      dependents_begin_(n_ + 1, 0),
      seq_(n_, 0),
      wire_(p_.wire_buffers),
      kernels_at_once_(policy::kernel_concurrency(*run.cal, *run.topology)),
      fused_(policy::fused_ops(*run.schedule, r, *run.topology, *run.cal, run.call->codec, run.call->nccl_kernels)),
      lockstep_(run.costs.lockstep) {
  std::unordered_map<uint64_t, uint32_t> sends_to, recvs_from;
  const auto iterations = static_cast<size_t>(std::max(run.iterations, 1));
  per_iteration_ = static_cast<uint32_t>(n_ / iterations);
  open_.assign(iterations, per_iteration_);
  roots_.resize(iterations);
  auto counts = [&](uint32_t i, uint32_t d) { return !lockstep_ || !sched::lockstep_free_dependency(p_.ops, i, d); };
  for (uint32_t i = 0; i < n_; ++i)
    for (uint32_t d : p_.ops[i].deps) dependents_begin_[d + 1] += counts(i, d);
  for (size_t i = 0; i < n_; ++i) dependents_begin_[i + 1] += dependents_begin_[i];
  dependents_.resize(dependents_begin_[n_]);
  std::vector<uint32_t> fill(dependents_begin_.begin(), dependents_begin_.end() - 1);
  for (uint32_t i = 0; i < n_; ++i) {
    const auto& op = p_.ops[i];
    missing_[i] = 0;
    for (uint32_t d : op.deps)
      if (counts(i, d)) dependents_[fill[d]++] = i, ++missing_[i];
    if (op.kind == OpKind::Send) {
      seq_[i] = sends_to[connection(op.peer, op.lane)]++;
      ++open_[i / per_iteration_];  // and its delivery
    }
    if (op.kind == OpKind::Recv) seq_[i] = recvs_from[connection(op.peer, op.lane)]++;
    if (missing_[i]) continue;
    if (i < per_iteration_) make_ready(i);
    else roots_[i / per_iteration_].push_back(i);
  }
  if (lockstep_) groups_ = sched::StepGroups(p_.ops, per_iteration_, iterations);
  if (run.costs.net_peer_rate > 0) sharing = sched::PeerSharing(p_.ops, per_iteration_);
}

// A transfer of the posted group is done (a send's message has arrived, a receive's message
// has); the last one completes the group's receives and posts the groups that may go next (a
// send is done for its dependents once posted).
void RankState::group_transfer_done(int64_t receive) {
  groups_.done(receive, [this](uint32_t i) { complete(i); }, [this](uint32_t i) { run_op(i); });
}

void RankState::close(uint32_t i) {
  const uint32_t k = i / per_iteration_;
  if (--open_[k] > 0 || k + 1 >= roots_.size()) return;
  if (run_.together) return d_.iteration_done(k);  // every rank's runs end together
  begin_iteration(k + 1);
}

void RankState::start_kernel() {
  const Kernel k = kernels_.front();
  kernels_.pop_front();
  kernel_busy_ = true;
  start_exec(k);
}

void RankState::start_copy() {
  const Kernel k = copies_[copies_head_++];
  if (copies_head_ == copies_.size()) copies_.clear(), copies_head_ = 0;
  copy_busy_ = true;
  start_exec(k);
}

void RankState::queue_copy(const Kernel& k) {
  ++in_flight_;
  copies_.push_back(k);
  if (!copy_busy_) start_copy();
}

void RankState::start_exec(const Kernel& k) {
  if (!run_.topology->shared_memory) {
    d_.start_kernel_timer(r_, k.op, k.seconds);
    return;
  }
  const topo::Topology& t = *run_.topology;
  s4u::Host* node = run_.platform->gpu_hosts[static_cast<size_t>(t.node_of(run_.endpoint[static_cast<size_t>(r_)]) * t.gpus_per_node)];
  d_.start_exec(r_, k.op, node, k.w.work * kHostSpeed, k.w.bound * kHostSpeed);
}

void RankState::queue_kernel(const Kernel& k) {
  ++in_flight_;
  kernels_.push_back(k);
  if (!kernel_busy_) start_kernel();
}

void RankState::start_send(uint64_t conn) {
  const int peer = static_cast<int>(static_cast<uint32_t>(conn));
  auto& q = outbox_[conn];
  const Message m = q.pending[q.pending_head++];
  if (q.pending_head == q.pending.size()) q.pending.clear(), q.pending_head = 0;
  q.busy = true;
  q.on_wire = m.op;
  d_.post_send(r_, peer, static_cast<uint32_t>(conn >> 32), m.seq, m.op, m.payload);
}

RankState::Kernel RankState::kernel(uint32_t i, calib::Op kind, uint64_t bytes, uint32_t messages) {
  const double b = static_cast<double>(bytes);
  Kernel k{i, messages > 1 ? run_.cal->batch_seconds(kind, run_.call->codec, dtype_, messages, b)
                           : run_.cal->seconds(kind, run_.call->codec, dtype_, b), {}};
  if (kind == calib::Op::Compress || kind == calib::Op::Decompress || kind == calib::Op::DecodeAdd) codec_s_ += k.seconds;
  else reduce_s_ += k.seconds;
  // A batch is a GPU call: no alone time of its own.
  if (run_.topology->shared_memory)
    k.w = policy::shared_work(k.seconds, messages > 1 ? k.seconds : run_.cal->alone_seconds(kind, run_.call->codec, dtype_, b),
                              kernels_at_once_);
  return k;
}

RankState::Kernel RankState::codec_kernel(uint32_t i, calib::Op kind) {
  if (!batches(kind)) return kernel(i, kind, sched::launch_elements(p_.ops, i, false) * dsize_);
  if (p_.ops[i].batched) return Kernel{i, 0, {}};
  return kernel(i, kind, sched::launch_elements(p_.ops, i, true) * dsize_, sched::batch_end(p_.ops, i) - i);
}

// Sends are buffered, as the IR says (validate() assumes it): what depends on a send may start
// once it is posted. Messages to one peer leave one after the other, as on one NCCL connection
// or MPI's ordered channel; the rank ends only when its last transfer has completed.
void RankState::post_send(uint32_t i) {
  const auto& op = p_.ops[i];
  Payload pl;
  if (op.src.buf == BufKind::Wire) pl = wire_[op.src.index];
  else pl.wire = pl.raw = op.src.count * dsize_;
  ++run_.messages;
  run_.wire_bytes += pl.wire;
  run_.raw_bytes += pl.raw;
  const uint64_t conn = connection(op.peer, op.lane);
  ++in_flight_;  // until it has left; a copied one also until its acknowledgement
  finished_.push_back(i);
  const Message m{pl, seq_[i], i};
  // With NCCL's protocol costs a message joins its connection's queue NCCL's step latency (less
  // its route's) after it is posted; the connection is not held meanwhile, so the latencies of
  // successive steps overlap as NCCL's pipelined steps do, and add up along the data's path.
  auto& q = outbox_[conn];
  if (const double delay = d_.message_delay(r_, op.peer); delay > 0) {
    // Released in post order (timers due at one instant may fire in any order).
    const double when = s4u::Engine::get_clock() + delay;
    q.delayed.emplace_back(when, m);
    simgrid::kernel::timer::Timer::set(when, [this, conn] { release(conn); });
    return;
  }
  q.pending.push_back(m);
  if (!q.busy) start_send(conn);
}

void RankState::release(uint64_t conn) {
  auto& q = outbox_[conn];
  const double now = s4u::Engine::get_clock();
  while (q.delayed_head < q.delayed.size() && q.delayed[q.delayed_head].first <= now)
    q.pending.push_back(q.delayed[q.delayed_head++].second);
  if (q.delayed_head == q.delayed.size()) q.delayed.clear(), q.delayed_head = 0;
  if (!q.busy && q.has_pending()) start_send(conn);
}

void RankState::start_op(uint32_t i) {
  if (lockstep_ && sched::is_transfer(p_.ops[i].kind))
    return groups_.ready(p_.ops, i, [this](uint32_t j) { run_op(j); });
  run_op(i);
}

void RankState::run_op(uint32_t i) {
  const auto& op = p_.ops[i];
  Kernel k{i, 0, {}};
  switch (op.kind) {
    case OpKind::Send: post_send(i); return;
    case OpKind::Recv:
      ++in_flight_;
      d_.post_recv(op.peer, r_, op.lane, seq_[i], i);
      return;
    case OpKind::Compress:
      wire_[op.dst.index] =
          Payload{policy::wire_message_bytes(run_.call->codec, dtype_, op.src.count, run_.call->ratio,
                                             run_.topology->wire_budget_margin, run_.cal->chunk_elements),
                  op.src.count * dsize_};
      k = codec_kernel(i, calib::Op::Compress);
      break;
    case OpKind::Decompress:
      if (!fused_.empty() && fused_[i] == policy::FusedOp::Absorbed) break;  // in its reduce's kernel
      k = codec_kernel(i, calib::Op::Decompress);
      break;
    case OpKind::Reduce:
      if (!fused_.empty() && fused_[i] == policy::FusedOp::DecodeAdd)  // its block decoded and added in one kernel
        k = kernel(i, calib::Op::DecodeAdd, op.dst.count * dsize_);
      else if (policy::charges_reduce_copy(*run_.schedule, r_, run_.call->nccl_kernels))
        k = kernel(i, calib::Op::Reduce, op.dst.count * dsize_);
      break;
    case OpKind::Copy:
      if (op.src.buf == BufKind::Wire && op.dst.buf == BufKind::Wire) wire_[op.dst.index] = wire_[op.src.index];
      if (op.dst.count > 0 && policy::charges_reduce_copy(*run_.schedule, r_, run_.call->nccl_kernels) &&
          run_.cal->has(calib::Op::Copy, "", dtype_))
        k = kernel(i, calib::Op::Copy, op.dst.count * dsize_);
      break;
  }
  if (k.seconds > 0) queue_kernel(k);
  else finished_.push_back(i);
}

void RankState::complete(uint32_t i) {
  ++done_;
  for (uint32_t e = dependents_begin_[i]; e < dependents_begin_[i + 1]; ++e)
    if (--missing_[dependents_[e]] == 0) make_ready(dependents_[e]);
  close(i);
}

// Starts what can start, one op at a time in program order (the order sends to a peer queue up
// in); a zero-time op completes at once, and what it makes ready starts in its turn, before any
// later op: so among the ops ready at one instant, a send earlier in the program always queues
// first on its connection, as in the cost model.
void RankState::start_ready() {
  auto drain = [this] {  // a lockstep group posted at a completion left its sends here
    while (!finished_.empty()) {
      const uint32_t i = finished_.back();
      finished_.pop_back();
      complete(i);
    }
  };
  drain();
  while (!ready_.empty()) {
    std::pop_heap(ready_.begin(), ready_.end(), std::greater<>());
    const uint32_t next = ready_.back();
    ready_.pop_back();
    start_op(next);
    drain();
  }
}

// What a finished activity of this rank does: op i's (a kernel, an arrived receive, a copied
// message's acknowledgement) or, with i == kPosted, the message on connection `conn` left.
void RankState::finished(uint32_t i, int64_t conn) {
  --in_flight_;
  if (conn == kAck) {  // a copied message's copy is done: its send is delivered
    close(i);
    return;
  }
  if (i == kPosted) {  // a message arrived (a copied one: its latency is paid)
    const auto it = outbox_.find(static_cast<uint64_t>(conn));
    Outbox& q = it->second;
    q.busy = false;
    const uint32_t sent = q.on_wire;
    if (q.has_pending()) start_send(static_cast<uint64_t>(conn));
    else if (q.idle()) outbox_.erase(it);
    if (run_.copied(r_, p_.ops[sent].peer))
      ++in_flight_;  // its acknowledgement
    else
      close(sent);
    if (lockstep_) group_transfer_done(-1);
    return;
  }
  const auto& op = p_.ops[i];
  if (conn == kKernel) {
    if (op.kind == OpKind::Recv && run_.topology->compute_thread) {  // a receive copy, in its own queue
      copy_busy_ = false;
      if (copies_head_ < copies_.size()) start_copy();
    } else {
      kernel_busy_ = false;
      if (!kernels_.empty()) start_kernel();
    }
    if (op.kind == OpKind::Recv) {  // a receive copy: the sender's send is delivered
      const auto it = received_.find(i);
      d_.start_ack(r_, op.peer, it->second.send_op);
      received_.erase(it);
    }
  }
  if (op.kind == OpKind::Recv && conn == kArrived) {  // the message arrived
    const auto it = received_.find(i);
    const Payload pl = it->second.payload;
    if (op.dst.buf == BufKind::Wire) wire_[op.dst.index] = pl;
    if (run_.copied(op.peer, r_)) {  // then the receiver copies it, in its kernel (or copy) queue
      const topo::Topology& t = *run_.topology;
      const double s = t.receive_copy_seconds(static_cast<double>(pl.wire), run_.bandwidth_factor, run_.footprint);
      if (s > 0) {
        Kernel k{i, s, {}};
        if (t.shared_memory)
          k.w = policy::shared_work(
              s, t.receive_copy_alone_seconds(static_cast<double>(pl.wire), run_.bandwidth_factor, run_.footprint),
              policy::copy_concurrency(t));
        if (t.compute_thread) queue_copy(k);  // on the rank's MPI thread, beside its kernels
        else queue_kernel(k);
        return;
      }
      d_.start_ack(r_, op.peer, it->second.send_op);  // nothing to copy
    }
    received_.erase(it);
    if (lockstep_) return group_transfer_done(i);  // it completes with its group
  }
  complete(i);
}

uint32_t Driver::track(s4u::ActivityPtr a, const Running& r) {
  uint32_t token;
  if (free_.empty()) {
    running_.push_back(r);
    token = static_cast<uint32_t>(running_.size());
  } else {
    token = free_.back();
    free_.pop_back();
    running_[token - 1] = r;
  }
  a->set_data(reinterpret_cast<void*>(static_cast<uintptr_t>(token)));
  running_[token - 1].activity = std::move(a);
  return token;
}

void Driver::start_exec(int rank, uint32_t op, s4u::Host* host, double flops, double bound) {
  s4u::ExecPtr e = s4u::Exec::init()->set_flops_amount(flops)->set_host(host);
  if (bound > 0) e->set_bound(bound);
  Running r;
  r.first = {static_cast<uint32_t>(rank), op, kKernel};
  track(e, r);
  e->start();
}

void Driver::start_kernel_timer(int rank, uint32_t op, double seconds) {
  const Event done{static_cast<uint32_t>(rank), op, kKernel};
  simgrid::kernel::timer::Timer::set(s4u::Engine::get_clock() + seconds, [this, done] {
    events_.push_back(done);
    flush_soon();
  });
}

// A message the receiver copies (topology receive_copy) carries no bytes on the links: it
// takes the route's latency, then the receiver's copy.
void Driver::transfer(int src, int dst, uint32_t lane, uint32_t send_op, const Payload& pl, uint32_t recv_op) {
  s4u::CommPtr c = s4u::Comm::sendto_init(gpu_host(src), gpu_host(dst));
  c->set_payload_size(run_.copied(src, dst) ? 0 : run_.costs.wire_bytes(pl.wire));
  const double cap = run_.costs.peer_rate(*run_.topology, run_.endpoint[static_cast<size_t>(src)],
                                          run_.endpoint[static_cast<size_t>(dst)], ranks_[static_cast<size_t>(src)].sharing.of(send_op));
  if (cap > 0) c->set_rate(cap);  // NCCL's channels to the peer (SimGrid divides it by the bandwidth factor)
  Running r;
  r.first = {static_cast<uint32_t>(src), kPosted, static_cast<int64_t>(connection(dst, lane))};
  r.receiver = static_cast<uint32_t>(dst);
  r.recv_op = recv_op;
  r.send_op = send_op;
  r.payload = pl;
  track(c, r);
  c->start();
}

void Driver::post_send(int src, int dst, uint32_t lane, uint32_t seq, uint32_t send_op, const Payload& pl) {
  const MessageKey key(src, dst, lane, seq);
  const auto it = posted_.find(key);
  if (it == posted_.end()) {
    posted_.emplace(key, Posted{send_op, pl});
    return;
  }
  const uint32_t recv_op = it->second.op;
  posted_.erase(it);
  transfer(src, dst, lane, send_op, pl, recv_op);
}

void Driver::post_recv(int src, int dst, uint32_t lane, uint32_t seq, uint32_t recv_op) {
  const MessageKey key(src, dst, lane, seq);
  const auto it = posted_.find(key);
  if (it == posted_.end()) {
    posted_.emplace(key, Posted{recv_op, {}});
    return;
  }
  const Posted s = it->second;
  posted_.erase(it);
  transfer(src, dst, lane, s.op, s.payload, recv_op);
}

// The acknowledgement of a copied message: an empty message from the receiver back to the
// sender (it takes the route's latency), after which the sender's send counts as delivered.
void Driver::start_ack(int receiver, int sender, uint32_t send_op) {
  s4u::CommPtr c = s4u::Comm::sendto_init(gpu_host(receiver), gpu_host(sender));
  c->set_payload_size(0);
  Running r;
  r.first = {static_cast<uint32_t>(sender), send_op, kAck};
  track(c, r);
  c->start();
}

void Driver::on_completion(const s4u::Activity& a) {
  if (current_ == nullptr) return;
  current_->completed(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(a.get_data<void>())));
}

// In SimGrid's completion signal: note what finished, and make sure a flush runs at this instant.
void Driver::completed(uint32_t token) {
  if (token == 0 || token > running_.size()) return;
  Running& r = running_[token - 1];
  events_.push_back(r.first);
  if (r.receiver != kNone) {
    ranks_[r.receiver].arrived(r.recv_op, r.payload, r.send_op);
    events_.push_back({r.receiver, r.recv_op, kArrived});
  }
  released_.push_back(std::move(r.activity));  // SimGrid is still using it: let go of it at the flush
  r = Running{};
  free_.push_back(token);
  flush_soon();
}

double Driver::message_delay(int src, int dst) {
  const topo::Topology& t = *run_.topology;
  return run_.costs.delay_s(t, routes_, run_.endpoint[static_cast<size_t>(src)], run_.endpoint[static_cast<size_t>(dst)]);
}

// Makes sure a flush runs at this instant.
void Driver::flush_soon() {
  if (!flush_set_) {
    flush_set_ = true;
    simgrid::kernel::timer::Timer::set(s4u::Engine::get_clock(), [this] { flush(); });
  }
}

// Hands this instant's completions to their ranks, in (rank, op) order, and lets each start
// what is ready.
void Driver::flush() {
  flush_set_ = false;
  released_.clear();
  std::sort(events_.begin(), events_.end());
  std::vector<Event> events;
  events.swap(events_);
  const double now = s4u::Engine::get_clock();
  for (size_t e = 0; e < events.size();) {
    const uint32_t r = events[e].rank;
    RankState& rank = ranks_[r];
    for (; e < events.size() && events[e].rank == r; ++e) rank.finished(events[e].op, events[e].conn);
    start_ready(r, now);
  }
  if (begun_) {
    begun_ = false;
    for (uint32_t r = 0; r < ranks_.size(); ++r) start_ready(r, now);
  }
}

void Driver::iteration_done(size_t k) {
  if (++iteration_done_[k] < ranks_with_ops_) return;
  for (RankState& rank : ranks_) rank.begin_iteration(k + 1);
  begun_ = true;
  flush_soon();
}

void Driver::start() {
  current_ = this;
  const int n = run_.schedule->size();
  ranks_.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) ranks_.emplace_back(*this, run_, r);
  if (run_.together) {
    iteration_done_.assign(static_cast<size_t>(std::max(run_.iterations, 1)), 0);
    ranks_with_ops_ = static_cast<int>(
        std::count_if(ranks_.begin(), ranks_.end(), [](const RankState& rank) { return rank.has_ops(); }));
  }
  auto go = [this, n] {
    const double now = s4u::Engine::get_clock();
    for (uint32_t r = 0; r < static_cast<uint32_t>(n); ++r) start_ready(r, now);
  };
  if (run_.costs.base_s > 0)  // NCCL's base latency: its kernels start the call this late
    simgrid::kernel::timer::Timer::set(s4u::Engine::get_clock() + run_.costs.base_s, go);
  else
    go();
}

std::string Driver::check() {
  current_ = nullptr;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const RankState& rank = ranks_[r];
    if (!rank.complete_program())
      return "rank " + std::to_string(r) + " cannot progress: " + std::to_string(rank.left()) +
             " ops wait for dependencies that never finish";
    if (run_.schedule->is_switch(static_cast<int>(r))) continue;  // its messages end on the GPUs
    run_.codec_s = std::max(run_.codec_s, rank.codec_s());
    run_.reduce_s = std::max(run_.reduce_s, rank.reduce_s());
    run_.end = std::max(run_.end, run_.rank_end[r]);
  }
  return "";
}

// size_factors: the bandwidth factor comes from a callback (size_factors() below), which
// SimGrid does not take together with network/bandwidth-factor.
void configure(const NetworkModel& m, bool size_factors = false) {
  s4u::Engine::set_config("network/model:" + std::string(m.model == "cm02" ? "CM02" : "LV08"));
  // SimGrid takes its factors as a text (a constant, or factors by message size).
  auto exact = [](double v) {
    std::ostringstream o;
    o.precision(17);
    o << v;
    return o.str();
  };
  s4u::Engine::set_config("network/latency-factor:" + exact(m.latency_factor));
  if (!size_factors) s4u::Engine::set_config("network/bandwidth-factor:" + exact(m.bandwidth_factor));
  s4u::Engine::set_config("network/crosstraffic", m.crosstraffic);
  s4u::Engine::set_config("network/TCP-gamma", m.tcp_gamma);
  s4u::Engine::set_config("network/weight-S", m.weight_s);
  s4u::Engine::set_config("network/optim:" + std::string(m.update == "full" ? "Full" : "Lazy"));
  s4u::Engine::set_config("precision/timing", m.precision);
}

// A measured topology's bandwidth factors by message size (topo::LinkSpec::by_size): SimGrid
// asks for each message's factor when it starts; the configured bandwidth-factor times the
// topology's, as the cost model charges.
void size_factors(const Job& job, const Platform& platform) {
  auto gpu_of = std::make_shared<std::unordered_map<const s4u::Host*, int>>();
  for (size_t g = 0; g < platform.gpu_hosts.size(); ++g) (*gpu_of)[platform.gpu_hosts[g]] = static_cast<int>(g);
  for (size_t n = 0; n < platform.switch_hosts.size(); ++n)
    (*gpu_of)[platform.switch_hosts[n]] = job.topology.switch_of(static_cast<int>(n));
  const topo::Topology* t = &job.topology;
  const double global = job.network.bandwidth_factor;
  s4u::Engine::get_instance()->get_netzone_root()->set_bandwidth_factor_cb(
      [gpu_of, t, global](double size, const s4u::Host* src, const s4u::Host* dst, const std::vector<s4u::Link*>&,
                          const std::unordered_set<s4u::NetZone*>&) {
        return global * t->message_factor(gpu_of->at(src), gpu_of->at(dst), size);
      });
}

void write_line(FILE* out, char tag, const nlohmann::json& j) {
  const std::string s = report::json_text(j);
  std::fprintf(out, "%c %s\n", tag, s.c_str());
  std::fflush(out);
}

// In a forked child only: SimGrid allows one engine per process.
s4u::Engine make_engine() {
  static int argc = 1;
  static char arg0[] = "compcoll-sim";
  static char* argv[] = {arg0, nullptr};
  xbt_log_control_set("root.thresh:critical");
  return s4u::Engine(&argc, argv);
}

// codec_exposed_s of the call whose one-call schedule (policy::flow_spec) is `schedule`, of `ops` ops.
double exposed_in(const Job& job, const Call& call, const sched::Schedule& schedule, uint64_t ops) {
  if (call.codec == "identity" || ops > kMaxExposedOps) return NAN;
  policy::RouteCache routes(job.topology);
  try {  // a figure beside the row: where the model cannot price the call, the row still runs
    return policy::exposed_codec_s(schedule, job.topology, job.calibration, call.codec, call.ratio,
                                   job.network.factors(), routes, call.nccl_kernels, call.protocol);
  } catch (const std::exception&) {
    return NAN;
  }
}

// One call on the engine as the platform left it (the caller forked for it).
CallResult run_call(const Job& job, const Platform& platform, s4u::Engine& engine, size_t c) {
  const auto w0 = std::chrono::steady_clock::now();
  CallResult res;
  res.index = c;
  double model_wall = 0;  // the cost model's runs for the codec's exposed time
  try {
    const Call& call = job.calls[c];
    if (call.build.nranks > static_cast<int>(job.topology.rank_to_gpu.size()))
      throw std::runtime_error("the call has " + std::to_string(call.build.nranks) + " ranks, the placement " +
                               std::to_string(job.topology.rank_to_gpu.size()));
    const int iterations = std::max(call.iterations, 1);
    // Channels that move in lockstep run as one flow (policy::flow_spec).
    sched::Schedule schedule =
        sched::build_schedule(policy::flow_spec(call.build, call.nccl_kernels, job.topology, job.network.factors()));
    uint64_t ops = 0;
    for (const auto& rp : schedule.ranks) {
      ops += rp.ops.size();
      for (const auto& op : rp.ops) res.compress_ops += op.kind == sched::OpKind::Compress;
    }
    if (call.exposed) {  // one call's, whatever the iterations; not counted in the call's wall time
      const auto e0 = std::chrono::steady_clock::now();
      res.codec_exposed_s = exposed_in(job, call, schedule, ops);
      model_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
    }
    CallRun run;
    run.iterations = iterations;
    run.together = policy::wire_budget_agreement(schedule, job.topology, call.codec);
    run.footprint = policy::node_footprint_bytes(schedule, job.topology);
    run.endpoint = policy::rank_endpoints(schedule, job.topology);
    run.costs = policy::message_costs(schedule, job.topology, job.network.factors(), call.nccl_kernels, call.protocol);
    res.ungrouped = run.costs.ungrouped;
    if (iterations > 1) schedule = sched::repeated(schedule, iterations);  // one copy held, not two
    run.schedule = &schedule;
    run.call = &call;
    run.cal = &job.calibration;
    run.topology = &job.topology;
    run.bandwidth_factor = job.network.bandwidth_factor;
    run.platform = &platform;
    for (const auto& rp : schedule.ranks) res.ops += rp.ops.size() / static_cast<size_t>(iterations);
    const double start = s4u::Engine::get_clock();
    run.end = start;
    run.rank_end.assign(static_cast<size_t>(schedule.size()), start);
    Driver driver(run);
    driver.start();
    engine.run();
    if (const std::string error = driver.check(); !error.empty()) throw std::runtime_error(error);
    res.time_s = run.end - start;
    const int gpus = schedule.gpu_ranks();  // the group's mean: a switch rank is no GPU
    for (int r = 0; r < gpus; ++r) res.iteration_s += (run.rank_end[static_cast<size_t>(r)] - start) / gpus / iterations;
    // Per call, whatever the iterations.
    res.messages = run.messages / static_cast<uint64_t>(iterations);
    res.wire_bytes = run.wire_bytes / static_cast<uint64_t>(iterations);
    res.raw_bytes = run.raw_bytes / static_cast<uint64_t>(iterations);
    res.codec_s = run.codec_s / iterations;
    res.reduce_s = run.reduce_s / iterations;
  } catch (const std::exception& e) {
    res.error = e.what();
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count() - model_wall;
  return res;
}

void write_result(FILE* out, const CallResult& res) {
  write_line(out, 'R',
             {{"index", res.index}, {"time_s", res.time_s}, {"iteration_s", res.iteration_s}, {"messages", res.messages}, {"wire_bytes", res.wire_bytes},
              {"raw_bytes", res.raw_bytes}, {"codec_s", res.codec_s}, {"reduce_s", res.reduce_s}, {"wall_s", res.wall_s},
              {"codec_exposed_s", std::isnan(res.codec_exposed_s) ? nlohmann::json(nullptr) : nlohmann::json(res.codec_exposed_s)},
              {"ops", res.ops}, {"compress_ops", res.compress_ops}, {"ungrouped", res.ungrouped}, {"error", res.error}});
}

// The child: one engine, one platform; every call runs in a process of its own forked from it,
// so that each starts from the freshly built platform at time 0. A call's result then does not
// depend on which calls ran before it (in one engine, with the clock and state earlier calls
// leave, results differ by up to 0.8%), so a shard of the cells simulates each exactly as a
// whole run does; and a call that crashes its process costs that call only.
[[noreturn]] void child_main(const Job& job, int fd) {
  // A crash here is the parent's to report (it names the calls that did not finish), not
  // whatever handler the parent process had installed.
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, SIG_DFL);
  FILE* out = fdopen(fd, "w");
  try {
    s4u::Engine engine = make_engine();
    configure(job.network, job.topology.has_size_factors());
    s4u::Comm::on_completion_cb([](const s4u::Comm& c) { Driver::on_completion(c); });
    s4u::Exec::on_completion_cb([](const s4u::Exec& e) { Driver::on_completion(e); });
    const auto t0 = std::chrono::steady_clock::now();
    bool switches = false;
    for (const Call& call : job.calls) switches = switches || sched::has_switch_ranks(call.build);
    const Platform platform = build_platform(job.topology, switches);
    if (job.topology.has_size_factors()) size_factors(job, platform);
    write_line(out, 'P', {{"platform_wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}});
    long peak_kb = 0;
    for (size_t c = 0; c < job.calls.size(); ++c) {
      std::fflush(out);
      const pid_t pid = fork();
      if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
      if (pid == 0) {
        write_result(out, run_call(job, platform, engine, c));
        std::fclose(out);
        _exit(0);
      }
      int status = 0;
      struct rusage ru {};
      wait4(pid, &status, 0, &ru);
      peak_kb = std::max(peak_kb, ru.ru_maxrss);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        CallResult res;
        res.index = c;
        res.error = WIFSIGNALED(status) ? "the simulator process of this call was killed by signal " +
                                              std::to_string(WTERMSIG(status))
                                        : "the simulator process of this call exited with status " +
                                              std::to_string(WEXITSTATUS(status));
        write_result(out, res);
      }
    }
    write_line(out, 'M', {{"peak_rss_kb", peak_kb}});
  } catch (const std::exception& e) {
    write_line(out, 'E', {{"error", e.what()}});
    std::fclose(out);
    _exit(3);
  }
  std::fclose(out);
  _exit(0);
}

}  // namespace

namespace {

// Forks a child that runs `child` on the write end of a pipe (and must not return); the parent
// gets the child's pid and the read end.
std::pair<pid_t, FILE*> fork_with_pipe(const std::function<void(int fd)>& child) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    child(fds[1]);
    _exit(4);
  }
  close(fds[1]);
  return {pid, fdopen(fds[0], "r")};
}

// Reads the child's lines ("T {json}", written by write_line) until it closes the pipe, hands
// each tag and parsed object to `each` (unparsable lines are skipped), and closes `in`.
void read_lines(FILE* in, const std::function<void(char tag, const nlohmann::json& j)>& each) {
  char* line = nullptr;
  size_t cap = 0;
  while (getline(&line, &cap, in) > 0) {
    if (std::strlen(line) < 3) continue;
    const auto j = nlohmann::json::parse(line + 2, nullptr, false);
    if (!j.is_discarded()) each(line[0], j);
  }
  free(line);
  std::fclose(in);
}

}  // namespace

double codec_exposed_s(const Job& job, const Call& call) {
  if (call.codec == "identity") return NAN;
  try {
    const sched::Schedule schedule =
        sched::build_schedule(policy::flow_spec(call.build, call.nccl_kernels, job.topology, job.network.factors()));
    uint64_t ops = 0;
    for (const auto& rp : schedule.ranks) ops += rp.ops.size();
    return exposed_in(job, call, schedule, ops);
  } catch (const std::exception&) {
    return NAN;
  }
}

JobStats simulate(const Job& job, const std::function<void(const CallResult&)>& on_result) {
  JobStats stats;
  long calls_peak_kb = 0;
  const auto [pid, in] = fork_with_pipe([&](int fd) { child_main(job, fd); });
  size_t reported = 0;
  read_lines(in, [&](char tag, const nlohmann::json& j) {
    if (tag == 'P') {
      stats.platform_wall_s = j.value("platform_wall_s", 0.0);
    } else if (tag == 'M') {
      calls_peak_kb = j.value("peak_rss_kb", 0L);
    } else if (tag == 'E') {
      stats.error = j.value("error", std::string("unknown error"));
    } else if (tag == 'R') {
      CallResult r;
      r.index = j.value("index", size_t{0});
      r.time_s = j.value("time_s", 0.0);
      r.iteration_s = j.value("iteration_s", 0.0);
      r.messages = j.value("messages", uint64_t{0});
      r.wire_bytes = j.value("wire_bytes", uint64_t{0});
      r.raw_bytes = j.value("raw_bytes", uint64_t{0});
      r.codec_s = j.value("codec_s", 0.0);
      r.reduce_s = j.value("reduce_s", 0.0);
      if (j.contains("codec_exposed_s") && j["codec_exposed_s"].is_number()) r.codec_exposed_s = j["codec_exposed_s"];
      r.wall_s = j.value("wall_s", 0.0);
      r.ops = j.value("ops", uint64_t{0});
      r.compress_ops = j.value("compress_ops", uint64_t{0});
      r.ungrouped = j.value("ungrouped", std::string());
      r.error = j.value("error", std::string());
      ++reported;
      on_result(r);
    }
  });
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  stats.peak_rss_kb = std::max(ru.ru_maxrss, calls_peak_kb);
  if (stats.error.empty() && reported < job.calls.size()) {
    std::string why = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                          : "exited with status " + std::to_string(WEXITSTATUS(status));
    stats.error = "the simulator process " + why + " after " + std::to_string(reported) + " of " +
                  std::to_string(job.calls.size()) + " calls";
  }
  return stats;
}

std::vector<std::vector<SimGridLink>> simgrid_routes(const topo::Topology& t,
                                                     const std::vector<std::pair<int, int>>& pairs) {
  const auto [pid, in] = fork_with_pipe([&](int fd) {
    FILE* out = fdopen(fd, "w");
    int code = 0;
    try {
      s4u::Engine engine = make_engine();
      configure(NetworkModel::defaults("cm02"));
      bool switches = false;
      for (const auto& [a, b] : pairs) switches = switches || t.is_switch(a) || t.is_switch(b);
      const Platform platform = build_platform(t, switches);
      std::vector<s4u::Link*> links;
      for (const auto& [a, b] : pairs) {
        links.clear();
        double latency = 0;
        platform.host(a)->route_to(platform.host(b), links, &latency);
        nlohmann::json names = nlohmann::json::array();
        for (const auto* l : links) names.push_back({l->get_name(), l->get_bandwidth(), l->get_latency()});
        write_line(out, 'L', names);
      }
    } catch (const std::exception& e) {
      write_line(out, 'E', {{"error", e.what()}});
      code = 3;
    }
    std::fclose(out);
    _exit(code);
  });
  std::vector<std::vector<SimGridLink>> routes;
  std::string error;
  read_lines(in, [&](char tag, const nlohmann::json& j) {
    if (tag == 'L') {
      auto& r = routes.emplace_back();
      for (const auto& l : j) r.push_back({l.at(0).get<std::string>(), l.at(1).get<double>(), l.at(2).get<double>()});
    }
    if (tag == 'E') error = j.value("error", std::string("unknown error"));
  });
  int status = 0;
  waitpid(pid, &status, 0);
  if (!error.empty()) throw std::runtime_error("simgrid_routes: " + error);
  if (routes.size() != pairs.size())
    throw std::runtime_error("simgrid_routes: the SimGrid process stopped after " + std::to_string(routes.size()) +
                             " of " + std::to_string(pairs.size()) + " routes");
  return routes;
}

}  // namespace compcoll::sim
