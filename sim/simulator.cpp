// sim/simulator.cpp — see simulator.h.
#include "sim/simulator.h"

#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <simgrid/s4u.hpp>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xbt/log.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <sstream>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "codec/format.h"
#include "policy/cost_model.h"
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
  return m;
}

std::string NetworkModel::describe() const {
  std::ostringstream o;
  o << "SimGrid network/model " << (model == "cm02" ? "CM02" : "LV08") << ", latency-factor " << latency_factor
    << ", bandwidth-factor " << bandwidth_factor << ", crosstraffic " << (crosstraffic ? "on" : "off")
    << ", TCP-gamma " << tcp_gamma << " B, update " << update << ", precision " << precision << " s";
  return o.str();
}

uint64_t wire_message_bytes(const std::string& codec, DType dtype, uint64_t elements, double ratio) {
  const uint64_t raw = elements * dtype_size(dtype);
  const uint64_t chunks = (elements + format::kDefaultChunkElements - 1) / format::kDefaultChunkElements;
  const double payload = codec == "identity" ? static_cast<double>(raw) : ratio * static_cast<double>(raw);
  return format::kHeaderBytes + format::kOffsetEntryBytes * chunks + static_cast<uint64_t>(payload + 0.5);
}

namespace {

constexpr double kHostSpeed = 1e9;  // must match platform.cpp
constexpr uint32_t kPosted = UINT32_MAX;  // an active send whose op already counts as done
constexpr int64_t kKernel = -2;             // active_send_conn of a kernel
constexpr int64_t kAck = -3;                // active_send_conn of a copied message's acknowledgement

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
  bool resident = false;         // the call's buffers fit in the node's cache (receive copies' factors)
  const Platform* platform = nullptr;
  std::deque<Payload> payloads;  // stable addresses, one per message
  int iterations = 1;            // the schedule is the call repeated this many times (sched::repeated)
  uint64_t messages = 0, wire_bytes = 0, raw_bytes = 0;
  double codec_s = 0, reduce_s = 0, end = 0;
  std::vector<double> rank_end;  // each rank's last op done, its last send delivered
  std::string error;
};

// The k-th message from `from` to `to` has a rendezvous point of its own, so the IR's rule
// (messages between a pair match in program order) holds whatever order they become ready in.
s4u::Mailbox* mailbox(int from, int to, uint32_t lane, uint32_t seq, const char* kind = "") {
  return s4u::Mailbox::by_name(kind + std::to_string(from) + ">" + std::to_string(to) + "#" + std::to_string(seq) +
                               (lane ? "@" + std::to_string(lane) : std::string()));
}
// A message the receiver copies (topology receive_copy) is delivered when the copy is done, as
// an MPI rendezvous send completes once the receiver has pulled the data: the receiver then
// sends an empty acknowledgement back (it takes the route's latency), which the sender waits for.
s4u::Mailbox* ack_mailbox(int from, int to, uint32_t lane, uint32_t seq) { return mailbox(from, to, lane, seq, "ack "); }
int kAckToken = 0;  // what an acknowledgement carries (SimGrid sends no null payload)

// A (peer, lane) pair as one key: messages queue per connection.
uint64_t connection(int peer, uint32_t lane) { return (uint64_t{lane} << 32) | static_cast<uint32_t>(peer); }

// The actor of one rank: starts every op whose dependencies are done, waits for any running
// op, and repeats.
class RankActor {
 public:
  RankActor(CallRun& run, int r);
  void run();

 private:
  struct Outbox {
    struct Message {
      Payload* payload;
      uint32_t seq, op;  // sequence number on the connection, the send
    };
    std::deque<Message> pending;
    bool busy = false;
    uint32_t on_wire = 0;  // the send whose message is on the wire (busy)
  };
  void start_ready();
  void start_op(uint32_t i);
  void post_send(uint32_t i);
  void start_send(uint64_t conn);
  void start_kernel();
  struct Kernel;
  // Op i's kernel: its calibrated time (counted in codec_s_ or reduce_s_) and, with shared
  // memory, its work on the node.
  Kernel kernel(uint32_t i, calib::Op kind, uint64_t bytes);
  void track(s4u::ActivityPtr a, uint32_t op, int64_t conn);
  void complete(uint32_t i);
  void close(uint32_t i);
  void wait_one();
  void finished(uint32_t i, int64_t conn);

  CallRun& run_;
  const int r_;
  const sched::RankProgram& p_;
  const size_t n_;
  const DType dtype_;
  const uint64_t dsize_;
  std::vector<uint32_t> missing_;
  std::vector<std::vector<uint32_t>> dependents_;
  std::vector<uint32_t> seq_;  // sends / receives: index among those to / from the peer on its lane
  std::vector<Payload> wire_;
  std::vector<void*> received_;
  void* ack_ = nullptr;  // where acknowledgements land (they carry nothing)
  std::vector<uint32_t> ready_, batch_, finished_;  // finished: ops that completed without an activity
  std::vector<s4u::ActivityPtr> active_;
  std::vector<uint32_t> active_op_;
  std::vector<int64_t> active_conn_;  // the connection of an active send, kKernel, kAck, or -1 for a receive
  std::vector<std::pair<uint32_t, int64_t>> done_now_;  // wait_one's finished activities (op, conn), reused
  std::unordered_map<uint64_t, Outbox> outbox_;  // per connection (peer, lane)
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
  std::deque<Kernel> kernels_;
  bool kernel_busy_ = false;
  int kernels_at_once_ = 1;  // shared memory: policy::kernel_concurrency
  double codec_s_ = 0, reduce_s_ = 0;
  size_t done_ = 0;
  // Back to back (CallRun::iterations): iteration k's ops are [k x per_iteration_, (k+1) x
  // per_iteration_); open_[k] counts its ops not done and sends not delivered, and the last one
  // makes iteration k + 1's first ops (roots_[k + 1]) ready.
  uint32_t per_iteration_ = 0;
  std::vector<uint32_t> open_;
  std::vector<std::vector<uint32_t>> roots_;
};

RankActor::RankActor(CallRun& run, int r)
    : run_(run),
      r_(r),
      p_(run.schedule->ranks[static_cast<size_t>(r)]),
      n_(p_.ops.size()),
      dtype_(run.schedule->dtype),
      dsize_(dtype_size(dtype_)),
      missing_(n_),
      dependents_(n_),
      seq_(n_, 0),
      wire_(p_.wire_buffers),
      received_(n_, nullptr),
      kernels_at_once_(policy::kernel_concurrency(*run.cal, *run.topology)) {
  std::unordered_map<uint64_t, uint32_t> sends_to, recvs_from;
  const auto iterations = static_cast<size_t>(std::max(run.iterations, 1));
  per_iteration_ = static_cast<uint32_t>(n_ / iterations);
  open_.assign(iterations, per_iteration_);
  roots_.resize(iterations);
  for (uint32_t i = 0; i < n_; ++i) {
    const auto& op = p_.ops[i];
    missing_[i] = static_cast<uint32_t>(op.deps.size());
    for (uint32_t d : op.deps) dependents_[d].push_back(i);
    if (op.kind == OpKind::Send) {
      seq_[i] = sends_to[connection(op.peer, op.lane)]++;
      ++open_[i / per_iteration_];  // and its delivery
    }
    if (op.kind == OpKind::Recv) seq_[i] = recvs_from[connection(op.peer, op.lane)]++;
    if (missing_[i]) continue;
    if (i < per_iteration_) ready_.push_back(i);
    else roots_[i / per_iteration_].push_back(i);
  }
}

void RankActor::close(uint32_t i) {
  const uint32_t k = i / per_iteration_;
  if (--open_[k] > 0 || k + 1 >= roots_.size()) return;
  ready_.insert(ready_.end(), roots_[k + 1].begin(), roots_[k + 1].end());
}

void RankActor::track(s4u::ActivityPtr a, uint32_t op, int64_t conn) {
  active_.push_back(std::move(a));
  active_op_.push_back(op);
  active_conn_.push_back(conn);
}

void RankActor::start_kernel() {
  const Kernel k = kernels_.front();
  kernels_.pop_front();
  kernel_busy_ = true;
  if (!run_.topology->shared_memory) {
    track(s4u::this_actor::exec_async(k.seconds * kHostSpeed), k.op, kKernel);
    return;
  }
  const topo::Topology& t = *run_.topology;
  s4u::Host* node = run_.platform->gpu_hosts[static_cast<size_t>(t.node_of(t.rank_to_gpu[static_cast<size_t>(r_)]) * t.gpus_per_node)];
  s4u::ExecPtr e = s4u::Exec::init()->set_flops_amount(k.w.work * kHostSpeed)->set_host(node);
  e->set_bound(k.w.bound * kHostSpeed);
  track(e->start(), k.op, kKernel);
}

void RankActor::start_send(uint64_t conn) {
  const int peer = static_cast<int>(static_cast<uint32_t>(conn));
  auto& q = outbox_[conn];
  const auto [pl, k, op] = q.pending.front();
  q.pending.pop_front();
  q.busy = true;
  q.on_wire = op;
  // A message the receiver copies (topology receive_copy) carries no bytes on the links: it
  // takes the route's latency, then the receiver's copy (wait_one).
  const int src = run_.topology->rank_to_gpu[static_cast<size_t>(r_)];
  const int dst = run_.topology->rank_to_gpu[static_cast<size_t>(peer)];
  const bool copied = run_.topology->copies_on_receive(src, dst);
  const auto lane = static_cast<uint32_t>(conn >> 32);
  track(mailbox(r_, peer, lane, k)->put_async(pl, copied ? 0 : pl->wire), kPosted, static_cast<int64_t>(conn));
  if (copied) track(ack_mailbox(r_, peer, lane, k)->get_async<void>(&ack_), op, kAck);
}

RankActor::Kernel RankActor::kernel(uint32_t i, calib::Op kind, uint64_t bytes) {
  Kernel k{i, run_.cal->seconds(kind, run_.call->codec, dtype_, static_cast<double>(bytes)), {}};
  if (kind == calib::Op::Compress || kind == calib::Op::Decompress) codec_s_ += k.seconds;
  else reduce_s_ += k.seconds;
  if (run_.topology->shared_memory)
    k.w = policy::shared_work(k.seconds, run_.cal->alone_seconds(kind, run_.call->codec, dtype_, static_cast<double>(bytes)),
                              kernels_at_once_);
  return k;
}

// Sends are buffered, as the IR says (validate() assumes it): what depends on a send may start
// once it is posted. Messages to one peer leave one after the other, as on one NCCL connection
// or MPI's ordered channel; the rank ends only when its last transfer has completed.
void RankActor::post_send(uint32_t i) {
  const auto& op = p_.ops[i];
  Payload pl;
  if (op.src.buf == BufKind::Wire) pl = wire_[op.src.index];
  else pl.wire = pl.raw = op.src.count * dsize_;
  run_.payloads.push_back(pl);
  ++run_.messages;
  run_.wire_bytes += pl.wire;
  run_.raw_bytes += pl.raw;
  const uint64_t conn = connection(op.peer, op.lane);
  auto& q = outbox_[conn];
  q.pending.push_back({&run_.payloads.back(), seq_[i], i});
  if (!q.busy) start_send(conn);
  finished_.push_back(i);
}

void RankActor::start_op(uint32_t i) {
  const auto& op = p_.ops[i];
  Kernel k{i, 0, {}};
  switch (op.kind) {
    case OpKind::Send: post_send(i); return;
    case OpKind::Recv: track(mailbox(op.peer, r_, op.lane, seq_[i])->get_async<void>(&received_[i]), i, -1); return;
    case OpKind::Compress:
      wire_[op.dst.index] =
          Payload{wire_message_bytes(run_.call->codec, dtype_, op.src.count, run_.call->ratio), op.src.count * dsize_};
      k = kernel(i, calib::Op::Compress, op.src.count * dsize_);
      break;
    case OpKind::Decompress: k = kernel(i, calib::Op::Decompress, op.dst.count * dsize_); break;
    case OpKind::Reduce:
      if (!run_.call->nccl_kernels) k = kernel(i, calib::Op::Reduce, op.dst.count * dsize_);
      break;
    case OpKind::Copy:
      if (op.src.buf == BufKind::Wire && op.dst.buf == BufKind::Wire) wire_[op.dst.index] = wire_[op.src.index];
      if (!run_.call->nccl_kernels && run_.cal->has(calib::Op::Copy, "", dtype_))
        k = kernel(i, calib::Op::Copy, op.dst.count * dsize_);
      break;
  }
  if (k.seconds > 0) {
    kernels_.push_back(k);
    if (!kernel_busy_) start_kernel();
  } else {
    finished_.push_back(i);
  }
}

void RankActor::complete(uint32_t i) {
  ++done_;
  for (uint32_t d : dependents_[i])
    if (--missing_[d] == 0) ready_.push_back(d);
  close(i);
}

// Starts what can start, in program order (the order sends to a peer queue up in); zero-time
// ops complete at once and may make others ready.
void RankActor::start_ready() {
  while (!ready_.empty()) {
    std::sort(ready_.begin(), ready_.end());
    batch_.swap(ready_);
    ready_.clear();
    for (const uint32_t i : batch_) start_op(i);
    while (!finished_.empty()) {
      const uint32_t i = finished_.back();
      finished_.pop_back();
      complete(i);
    }
  }
}

// Waits for any running activity, then takes every activity finished by now, in op order:
// SimGrid hands simultaneous completions over one at a time in an order of its own, which would
// decide which of two kernels made ready at the same instant runs first (and differ between
// ranks of a symmetric schedule). In op order they queue as the cost model queues them.
void RankActor::wait_one() {
  size_t k = static_cast<size_t>(s4u::Activity::wait_any(active_));
  done_now_.clear();
  while (true) {
    done_now_.emplace_back(active_op_[k], active_conn_[k]);
    active_[k] = active_.back();
    active_.pop_back();
    active_op_[k] = active_op_.back();
    active_op_.pop_back();
    active_conn_[k] = active_conn_.back();
    active_conn_.pop_back();
    if (active_.empty()) break;
    const ssize_t next = s4u::Activity::test_any(active_);  // one finished by now, or -1
    if (next < 0) break;
    k = static_cast<size_t>(next);
  }
  std::sort(done_now_.begin(), done_now_.end());
  for (const auto& [i, conn] : done_now_) finished(i, conn);
}

// What finishing activity `i` (an op, or kPosted for a message on the wire) does.
void RankActor::finished(uint32_t i, int64_t conn) {
  if (conn == kAck) {  // a copied message's copy is done: its send is delivered
    close(i);
    return;
  }
  if (i == kPosted) {  // a message arrived (a copied one: its latency is paid)
    auto& q = outbox_[static_cast<uint64_t>(conn)];
    q.busy = false;
    const auto& op = p_.ops[q.on_wire];
    if (!run_.topology->copies_on_receive(run_.topology->rank_to_gpu[static_cast<size_t>(r_)],
                                          run_.topology->rank_to_gpu[static_cast<size_t>(op.peer)]))
      close(q.on_wire);
    if (!q.pending.empty()) start_send(static_cast<uint64_t>(conn));
    return;
  }
  const auto& op = p_.ops[i];
  if (conn == kKernel) {
    kernel_busy_ = false;
    if (!kernels_.empty()) start_kernel();
    if (op.kind == OpKind::Recv)  // a receive copy: the sender's send is delivered
      ack_mailbox(op.peer, r_, op.lane, seq_[i])->put_init(&kAckToken, 0)->detach();
  }
  if (op.kind == OpKind::Recv && conn != kKernel) {  // the message arrived
    const Payload& pl = *static_cast<const Payload*>(received_[i]);
    if (op.dst.buf == BufKind::Wire) wire_[op.dst.index] = pl;
    const int src = run_.topology->rank_to_gpu[static_cast<size_t>(op.peer)];
    const int dst = run_.topology->rank_to_gpu[static_cast<size_t>(r_)];
    if (run_.topology->copies_on_receive(src, dst)) {  // then the receiver copies it, in its kernel queue
      const double s =
          run_.topology->receive_copy_seconds(static_cast<double>(pl.wire), run_.bandwidth_factor, run_.resident);
      if (s > 0) {
        Kernel k{i, s, {}};
        if (run_.topology->shared_memory)
          k.w = policy::shared_work(s,
                                    run_.topology->receive_copy_alone_seconds(static_cast<double>(pl.wire),
                                                                              run_.bandwidth_factor, run_.resident),
                                    policy::copy_concurrency(*run_.topology));
        kernels_.push_back(k);
        if (!kernel_busy_) start_kernel();
        return;
      }
      ack_mailbox(op.peer, r_, op.lane, seq_[i])->put_init(&kAckToken, 0)->detach();  // nothing to copy
    }
  }
  complete(i);
}

void RankActor::run() {
  while (done_ < n_ || !active_.empty()) {
    start_ready();
    if (done_ == n_ && active_.empty()) break;
    if (active_.empty()) {
      run_.error = "rank " + std::to_string(r_) + " cannot progress: " + std::to_string(n_ - done_) +
                   " ops wait for dependencies that never finish";
      return;
    }
    wait_one();
  }
  run_.codec_s = std::max(run_.codec_s, codec_s_);
  run_.reduce_s = std::max(run_.reduce_s, reduce_s_);
  run_.end = std::max(run_.end, s4u::Engine::get_clock());
  run_.rank_end[static_cast<size_t>(r_)] = s4u::Engine::get_clock();
}

void run_rank(CallRun& run, int r) { RankActor(run, r).run(); }

// size_factors: the bandwidth factor comes from a callback (size_factors() below), which
// SimGrid does not take together with network/bandwidth-factor.
void configure(const NetworkModel& m, bool size_factors = false) {
  s4u::Engine::set_config("network/model:" + std::string(m.model == "cm02" ? "CM02" : "LV08"));
  s4u::Engine::set_config("network/latency-factor", m.latency_factor);
  if (!size_factors) s4u::Engine::set_config("network/bandwidth-factor", m.bandwidth_factor);
  s4u::Engine::set_config("network/crosstraffic", m.crosstraffic);
  s4u::Engine::set_config("network/TCP-gamma", m.tcp_gamma);
  s4u::Engine::set_config("network/weight-S", m.weight_s);
  s4u::Engine::set_config("network/optim:" + std::string(m.update == "full" ? "Full" : "Lazy"));
  s4u::Engine::set_config("surf/precision", m.precision);
  s4u::Engine::set_config("contexts/stack-size", 128);  // KiB per actor: 16k ranks stay small
}

// A measured topology's bandwidth factors by message size (topo::LinkSpec::by_size): SimGrid
// asks for each message's factor when it starts; the configured bandwidth-factor times the
// topology's, as the cost model charges.
void size_factors(const Job& job, const Platform& platform) {
  auto gpu_of = std::make_shared<std::unordered_map<const s4u::Host*, int>>();
  for (size_t g = 0; g < platform.gpu_hosts.size(); ++g) (*gpu_of)[platform.gpu_hosts[g]] = static_cast<int>(g);
  const topo::Topology* t = &job.topology;
  const double global = job.network.bandwidth_factor;
  s4u::Engine::get_instance()->get_netzone_root()->get_network_model()->set_bw_factor_cb(
      [gpu_of, t, global](double size, const s4u::Host* src, const s4u::Host* dst, const std::vector<s4u::Link*>&,
                          const std::unordered_set<s4u::NetZone*>&) {
        return global * t->message_factor(gpu_of->at(src), gpu_of->at(dst), size);
      });
}

void write_line(FILE* out, char tag, const nlohmann::json& j) {
  const std::string s = j.dump();
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

// One call on the engine as the platform left it (the caller forked for it).
CallResult run_call(const Job& job, const Platform& platform, s4u::Engine& engine, size_t c) {
  const auto w0 = std::chrono::steady_clock::now();
  CallResult res;
  res.index = c;
  try {
    const Call& call = job.calls[c];
    if (call.build.nranks > static_cast<int>(job.topology.rank_to_gpu.size()))
      throw std::runtime_error("the call has " + std::to_string(call.build.nranks) + " ranks, the placement " +
                               std::to_string(job.topology.rank_to_gpu.size()));
    const int iterations = std::max(call.iterations, 1);
    const sched::Schedule one = sched::build_schedule(call.build);
    const sched::Schedule schedule = sched::repeated(one, iterations);
    CallRun run;
    run.iterations = iterations;
    run.resident = job.topology.data_resident(policy::node_footprint_bytes(one, job.topology));
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
    for (int r = 0; r < schedule.size(); ++r) {
      s4u::Host* host = platform.gpu_hosts[static_cast<size_t>(job.topology.rank_to_gpu[static_cast<size_t>(r)])];
      s4u::Actor::create("rank-" + std::to_string(r), host, [&run, r] { run_rank(run, r); });
    }
    engine.run();
    if (!run.error.empty()) throw std::runtime_error(run.error);
    res.time_s = run.end - start;
    for (const double e : run.rank_end) res.iteration_s += (e - start) / schedule.size() / iterations;
    // Per call, whatever the iterations.
    res.messages = run.messages / static_cast<uint64_t>(iterations);
    res.wire_bytes = run.wire_bytes / static_cast<uint64_t>(iterations);
    res.raw_bytes = run.raw_bytes / static_cast<uint64_t>(iterations);
    res.codec_s = run.codec_s / iterations;
    res.reduce_s = run.reduce_s / iterations;
  } catch (const std::exception& e) {
    res.error = e.what();
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  return res;
}

void write_result(FILE* out, const CallResult& res) {
  write_line(out, 'R',
             {{"index", res.index}, {"time_s", res.time_s}, {"iteration_s", res.iteration_s}, {"messages", res.messages}, {"wire_bytes", res.wire_bytes},
              {"raw_bytes", res.raw_bytes}, {"codec_s", res.codec_s}, {"reduce_s", res.reduce_s}, {"wall_s", res.wall_s},
              {"ops", res.ops}, {"error", res.error}});
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
    const auto t0 = std::chrono::steady_clock::now();
    const Platform platform = build_platform(job.topology);
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
      r.wall_s = j.value("wall_s", 0.0);
      r.ops = j.value("ops", uint64_t{0});
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
      const Platform platform = build_platform(t);
      std::vector<s4u::Link*> links;
      for (const auto& [a, b] : pairs) {
        links.clear();
        double latency = 0;
        platform.gpu_hosts.at(static_cast<size_t>(a))->route_to(platform.gpu_hosts.at(static_cast<size_t>(b)), links, &latency);
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
