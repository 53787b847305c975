// tests/real/test_transport_bench.cpp — the topology compcoll-bench transport writes from its
// measurements (real/transport_bench.h): it loads, and the exchange round of every measured
// size takes its measured time in the cost model on it (exchange_schedule, policy::predict:
// what compcoll-run's transport check compares), within a host (MPI: the receiver copies, the
// sender waits for the acknowledgement) and between hosts. The measurement writes every buffer
// it sends from or receives into before its first round (here, on MPI); it runs in full in the
// ctest real_loop_cpu.
#include <catch2/catch.hpp>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <vector>

#include "calibration/calibration.h"
#include "policy/cost_model.h"
#include "real/transport_bench.h"
#include "topology/topology.h"

using namespace compcoll;

namespace {

// latency + bytes / bandwidth, with a bump at 64 KiB (cache) so that the factors matter.
// `acked`: an MPI rendezvous within a host, whose round also waits for the acknowledgement
// (a second latency) from 4 KiB on; the 8-byte message goes eagerly.
real::TransportSeries series(const std::string& between, double latency, double bandwidth, bool acked) {
  real::TransportSeries s{"exchange", between, {}};
  s.points.emplace_back(8.0, latency);
  for (double b = 4096; b <= double(64 << 20); b *= 2)
    s.points.emplace_back(b, (acked ? 2 : 1) * latency + b / (bandwidth * (b == 65536 ? 1.5 : 1.0)));
  return s;
}

topo::Topology load(const std::string& text, const std::string& name) {
  // One file per process: every rank of the MPI job runs the test.
  const std::string path = "/tmp/compcoll-test-" + name + "-" + std::to_string(getpid()) + ".yaml";
  std::ofstream(path) << text;
  topo::Topology t = topo::load_topology(path);
  std::remove(path.c_str());
  return t;
}

// Every measured point (4 KiB and more) of `s`: the round on `t` in the cost model (the ranks
// on hosts `host_of`) takes the point's time.
void check_reproduces(const topo::Topology& t, const std::vector<int>& host_of, const real::TransportSeries& s) {
  policy::RouteCache routes(t);
  for (size_t i = 0; i < s.points.size(); ++i) {
    const double bytes = s.points[i].first, sec = s.points[i].second;
    if (bytes < 4096) continue;
    const auto round = real::exchange_schedule(host_of, s.between, static_cast<uint64_t>(bytes));
    const double model = policy::predict(round, t, calib::zero_calibration(), "identity", 1.0,
                                         policy::flow_model_defaults("cm02"), routes).time_s;
    CAPTURE(s.between, bytes, model, sec);
    CHECK(model == Approx(sec).epsilon(1e-4));
  }
}

// The host backend, recording which bytes of the buffers it allocated were written by upload
// before the first round ended (measure_transport synchronizes after every round).
class RecordingBackend final : public real::DataBackend {
 public:
  real::MemorySpace memory() const override { return host_->memory(); }
  std::string describe() const override { return host_->describe(); }
  void* alloc(size_t bytes) override {
    void* p = host_->alloc(bytes);
    if (p) buffers_[static_cast<uint8_t*>(p)] = std::vector<bool>(bytes, false);
    return p;
  }
  void release(void* p) override {
    if (!rounds_) released_unchecked_ = true;
    host_->release(p);
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    host_->upload(dst, src, bytes);
    if (rounds_) return;
    auto* d = static_cast<uint8_t*>(dst);
    auto it = buffers_.upper_bound(d);
    if (it == buffers_.begin()) return;
    --it;
    for (size_t i = 0; i < bytes && static_cast<size_t>(d - it->first) + i < it->second.size(); ++i)
      it->second[static_cast<size_t>(d - it->first) + i] = true;
  }
  void download(void* dst, const void* src, size_t bytes) override { host_->download(dst, src, bytes); }
  real::Completion copy(void* dst, const void* src, size_t bytes) override { return host_->copy(dst, src, bytes); }
  real::Completion reduce(DType dtype, void* dst, const void* src, uint64_t count) override {
    return host_->reduce(dtype, dst, src, count);
  }
  real::Completion compress(const Codec& c, DType dtype, const void* src, uint64_t count, void* wire, size_t capacity,
                            const EncodeOptions& opt, uint64_t* stream_bytes) override {
    return host_->compress(c, dtype, src, count, wire, capacity, opt, stream_bytes);
  }
  real::Completion decompress(const Codec& codec, const EncodeOptions& opt, const void* wire, size_t bytes,
                              DType dtype, void* dst, uint64_t count) override {
    return host_->decompress(codec, opt, wire, bytes, dtype, dst, count);
  }
  bool done(real::Completion c, double* seconds) override { return host_->done(c, seconds); }
  void synchronize() override {
    if (!rounds_++) {
      for (const auto& [p, written] : buffers_) unwritten_ += static_cast<size_t>(std::count(written.begin(), written.end(), false));
      allocated_ = buffers_.size();
    }
    host_->synchronize();
  }
  void timer_start() override { host_->timer_start(); }
  double timer_stop() override { return host_->timer_stop(); }

  size_t allocated_ = 0, unwritten_ = 0, rounds_ = 0;  // at the end of the first round
  bool released_unchecked_ = false;                     // a buffer freed before any round

 private:
  std::unique_ptr<real::DataBackend> host_ = real::make_host_backend();
  std::map<uint8_t*, std::vector<bool>> buffers_;
};

}  // namespace

TEST_CASE("transport bench: every buffer holds written data before the first round", "[transport][mpi]") {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n < 2) {
    WARN("SKIPPED: needs 2 MPI ranks (ctest runs it with 4)");
    return;
  }
  // An unwritten host buffer reads as the shared zero page, which a single-copy transport moves
  // out of cache: the bench would time a faster transport than any collective meets.
  real::MpiTransport t(MPI_COMM_WORLD);
  RecordingBackend b;
  real::TransportBenchOptions opt;
  opt.sizes = {4096, 65536};
  opt.min_time_s = 1e-4;
  opt.min_samples = 1;
  opt.pingpong = false;
  // One footprint the sizes divide (n ranks x send and receive x 4 slots of 64 KiB), one only
  // 4 KiB divides (3 slots of 4 KiB per side).
  opt.footprints = {uint64_t(n) * 2 * 4 * 65536, uint64_t(n) * 2 * 3 * 4096};
  const auto series = real::measure_transport(t, b, std::vector<int>(static_cast<size_t>(n), 0), opt);
  REQUIRE(series.size() == 3);  // through 4 slots per side, then through each footprint (host buffers)
  CHECK(series[0].window == real::kStreamWindow);
  CHECK(series[0].footprint == 0);
  CHECK(series[1].footprint == opt.footprints[0]);
  CHECK(series[2].footprint == opt.footprints[1]);
  CHECK(series[0].points.size() == 2);
  CHECK(series[1].points.size() == 2);
  REQUIRE(series[2].points.size() == 1);
  CHECK(series[2].points[0].first == 4096);
  CHECK(b.rounds_ > 0);
  CHECK(b.allocated_ == 2);  // the send and the receive window
  CHECK(b.unwritten_ == 0);
  CHECK_FALSE(b.released_unchecked_);
}

TEST_CASE("transport topology: one host, every measured size reproduced, receive copies for MPI", "[transport]") {
  const auto host = series("host", 1.5e-6, 5e9, true);
  real::MachineTopology m;
  m.name = "test-host";
  m.description = "4 ranks";
  m.comment = {"a comment"};
  m.per_host = 4;
  m.host = &host;
  const std::string text = real::topology_yaml(m);
  CHECK(text.rfind("# a comment\n", 0) == 0);
  const topo::Topology t = load(text, "transport-one-host");
  CHECK(t.generator == topo::Generator::SingleNode);
  CHECK(t.gpus() == 4);
  CHECK(t.receive_copy);
  CHECK(topo::route(t, 0, 3).latency == Approx(1.5e-6));
  check_reproduces(t, {0, 0, 0, 0}, host);
  CHECK(t.shared_memory);  // MPI ranks of a host: their kernels and copies share its memory
  CHECK(t.gpu_link.alone_by_size.empty());  // no pingpong given
  // With the pingpong (one message at a time, 30% faster than the exchange): alone_by_size
  // gives a copy alone its time less the pingpong's least time; the exchange still reproduces.
  real::TransportSeries pingpong = series("host", 1.0e-6, 6.5e9, false);
  pingpong.pattern = "pingpong";
  m.host_alone = &pingpong;
  const topo::Topology with_alone = load(real::topology_yaml(m), "transport-one-host-alone");
  REQUIRE(with_alone.gpu_link.alone_by_size.size() == with_alone.gpu_link.by_size.size());
  for (const auto& [bytes, sec] : pingpong.points)
    if (bytes >= 4096) {
      CAPTURE(bytes);
      CHECK(with_alone.receive_copy_alone_seconds(bytes, 1.0) == Approx(sec - 1.0e-6).epsilon(1e-4));
    }
  check_reproduces(with_alone, {0, 0, 0, 0}, host);
  CHECK(with_alone.gpu_link.by_footprint.empty());  // no footprint series: no lists written
  // Through two footprints (8 and 32 MiB of buffers on the node: 40% faster and 10% slower than
  // the stream, the pingpong's 60% faster and 5% slower): each list holds the sizes its series
  // timed, and a round whose buffers total a list's footprint takes that series' time.
  const auto at_footprint = [](real::TransportSeries s, uint64_t footprint, double paid, double by) {
    s.footprint = footprint;
    s.window = 0;
    std::vector<std::pair<double, double>> kept;
    for (const auto& [bytes, sec] : s.points)  // the sizes 4 ranks x send and receive divide
      if (bytes >= 4096 && 8 * bytes <= double(footprint)) kept.emplace_back(bytes, paid + (sec - paid) / by);
    s.points = kept;
    return s;
  };
  const real::TransportSeries host8 = at_footprint(host, 8 << 20, 3.0e-6, 1.4);
  const real::TransportSeries host32 = at_footprint(host, 32 << 20, 3.0e-6, 0.9);
  const real::TransportSeries ping8 = at_footprint(pingpong, 8 << 20, 1.0e-6, 1.6);
  const real::TransportSeries ping32 = at_footprint(pingpong, 32 << 20, 1.0e-6, 0.95);
  m.host_footprints = {&host8, &host32};
  m.host_alone_footprints = {&ping8, &ping32};
  const std::string lists_text = real::topology_yaml(m);
  CHECK_THAT(lists_text, Catch::Contains("  - {footprint: 8 MiB, by_size: [[4096, "));
  const topo::Topology lists = load(lists_text, "transport-one-host-footprints");
  REQUIRE(lists.gpu_link.by_footprint.size() == 2);
  REQUIRE(lists.gpu_link.alone_by_footprint.size() == 2);
  CHECK(lists.gpu_link.by_footprint[0].footprint == double(8 << 20));
  CHECK(lists.gpu_link.by_footprint[0].by_size.size() == host8.points.size());  // 4 KiB .. 1 MiB
  CHECK(lists.gpu_link.by_footprint[1].by_size.size() == host32.points.size());  // 4 KiB .. 4 MiB
  policy::RouteCache routes(lists);
  for (const real::TransportSeries* fs : {&host8, &host32})
    for (const auto& [bytes, sec] : fs->points) {
      const double copy = lists.receive_copy_seconds(bytes, 1.0, double(fs->footprint));
      CAPTURE(fs->footprint, bytes);
      CHECK(2 * 1.5e-6 + copy == Approx(sec).epsilon(1e-4));
    }
  for (const real::TransportSeries* fs : {&ping8, &ping32})
    for (const auto& [bytes, sec] : fs->points) {
      CAPTURE(fs->footprint, bytes);
      CHECK(lists.receive_copy_alone_seconds(bytes, 1.0, double(fs->footprint)) == Approx(sec - 1.0e-6).epsilon(1e-4));
    }
  // Between the footprints, the two lists' factors interpolated in log(footprint); a round of
  // 2 MiB (4 ranks x input and output: 16 MiB on the node) only the 32 MiB list spans.
  const topo::LinkSpec& g = lists.gpu_link;
  CHECK(g.size_factor(1 << 20, 16 << 20) == Approx(0.5 * (g.size_factor(1 << 20, 8 << 20) + g.size_factor(1 << 20, 32 << 20))));
  CHECK(g.size_factor(1 << 20, 8 << 20) / g.size_factor(1 << 20, 32 << 20) == Approx(1.4 / 0.9).epsilon(1e-3));
  const auto round = real::exchange_schedule({0, 0, 0, 0}, "host", 2 << 20);
  REQUIRE(policy::node_footprint_bytes(round, lists) == double(16 << 20));
  CHECK(policy::predict(round, lists, calib::zero_calibration(), "identity", 1.0, policy::flow_model_defaults("cm02"),
                        routes).time_s == Approx(2 * 1.5e-6 + lists.receive_copy_seconds(2 << 20, 1.0, 32 << 20)).epsilon(1e-9));
  m.host_footprints.clear();
  m.host_alone_footprints.clear();
  m.backend = "nccl";  // GPUs: copy engines move the bytes; the round has one latency
  const auto gpu_host = series("host", 1.5e-6, 5e9, false);
  m.host = &gpu_host;
  const topo::Topology gpus = load(real::topology_yaml(m), "transport-one-host-nccl");
  CHECK_FALSE(gpus.receive_copy);
  CHECK_FALSE(gpus.shared_memory);
  check_reproduces(gpus, {0, 0, 0, 0}, gpu_host);
}

// A point timed within noise of the latency (a 4 KiB round a nanosecond over its two
// latencies: factor 4096 B / 1 ns / 5 GB/s = 819) is left out of the factors, and said so, so
// that the file the bench writes is one the loader takes; the other points still reproduce.
TEST_CASE("transport topology: a point within noise of the latency is left out, not written", "[transport]") {
  auto host = series("host", 1.5e-6, 5e9, true);
  host.points[1].second = 2 * 1.5e-6 + 1e-9;  // 4 KiB
  real::MachineTopology m;
  m.name = "test-noisy";
  m.description = "2 ranks";
  m.per_host = 2;
  m.host = &host;
  const std::string text = real::topology_yaml(m);
  CHECK_THAT(text, Catch::Contains("# left out: 1 point(s) timed within noise of the latency (a factor over 100)"));
  const topo::Topology t = load(text, "transport-noisy");
  REQUIRE_FALSE(t.gpu_link.by_size.empty());
  CHECK(t.gpu_link.by_size.front().first == 8192);
  for (const auto& [bytes, f] : t.gpu_link.by_size) CHECK(f <= topo::kMaxSizeFactor);
}

// A footprint whose every point was timed within noise of the latencies (a busy machine) is
// left out with a comment, and the others are written: the file stays one the loader takes
// (an empty list of factors is not one).
TEST_CASE("transport topology: a footprint with no usable point is left out, not written empty", "[transport]") {
  auto host = series("host", 1.5e-6, 5e9, true);
  auto busy = host, quiet = host;
  busy.footprint = 16 << 20;
  for (auto& [bytes, sec] : busy.points) sec = 2 * 1.5e-6;  // no round above its two latencies
  quiet.footprint = 32 << 20;
  real::MachineTopology m;
  m.name = "test-busy";
  m.description = "2 ranks";
  m.per_host = 2;
  m.host = &host;
  m.host_footprints = {&busy, &quiet};
  const std::string text = real::topology_yaml(m);
  CHECK_THAT(text, Catch::Contains("# by_footprint: footprint 16 MiB left out: none of its"));
  CHECK_THAT(text, Catch::Contains("  - {footprint: 32 MiB, by_size: [[4096, "));
  CHECK_THAT(text, !Catch::Contains("by_size: []"));
  const topo::Topology t = load(text, "transport-busy");
  REQUIRE(t.gpu_link.by_footprint.size() == 1);
  CHECK(t.gpu_link.by_footprint.front().footprint == double(32 << 20));
  // All of them busy: no by_footprint key at all.
  m.host_footprints = {&busy};
  const std::string none = real::topology_yaml(m);
  CHECK_THAT(none, !Catch::Contains("by_footprint:\n"));
  CHECK(load(none, "transport-busy-all").gpu_link.by_footprint.empty());
  // A busy pingpong: alone_by_size left out the same way; the file still loads.
  m.host_footprints = {};
  auto busy_alone = series("host", 1.0e-6, 6.5e9, false);
  for (auto& [bytes, sec] : busy_alone.points) sec = 1.0e-6;
  m.host_alone = &busy_alone;
  const std::string no_alone = real::topology_yaml(m);
  CHECK_THAT(no_alone, Catch::Contains("# alone_by_size left out: none of its"));
  CHECK_THAT(no_alone, !Catch::Contains("alone_by_size: "));
  CHECK(load(no_alone, "transport-busy-alone").gpu_link.alone_by_size.empty());
  // A busy exchange itself: a measured transport needs its by_size, so nothing is written.
  m.host_alone = nullptr;
  m.host = &busy;
  CHECK_THROWS_WITH(real::topology_yaml(m), Catch::StartsWith("the exchange within a host: no by_size to write: none "
                                                               "of its") &&
                                                Catch::EndsWith("; measure again on a quiet machine"));
}

TEST_CASE("transport topology: several hosts, a fat tree with the network measured between them", "[transport]") {
  const auto host = series("host", 1e-6, 8e9, true), network = series("network", 4e-6, 20e9, false);
  real::MachineTopology m;
  m.name = "test-hosts";
  m.description = "2 x 4 ranks";
  m.hosts = 2;
  m.per_host = 4;
  m.host = &host;
  m.network = &network;
  const topo::Topology t = load(real::topology_yaml(m), "transport-hosts");
  CHECK(t.generator == topo::Generator::FatTree);
  CHECK(t.gpus() == 8);
  CHECK(t.nodes == 2);
  CHECK(t.copies_on_receive(0, 1));
  CHECK_FALSE(t.copies_on_receive(0, 4));  // across hosts the NIC moves the bytes
  check_reproduces(t, {0, 0, 0, 0, 1, 1, 1, 1}, host);
  check_reproduces(t, {0, 0, 0, 0, 1, 1, 1, 1}, network);
  // One rank per host: nothing crosses a node's links.
  m.per_host = 1;
  m.host = nullptr;
  const topo::Topology one = load(real::topology_yaml(m), "transport-hosts-one");
  CHECK(one.gpus() == 2);
  check_reproduces(one, {0, 1}, network);
  // Missing series: said, not guessed.
  m.network = nullptr;
  CHECK_THROWS_WITH(real::topology_yaml(m), Catch::Contains("no exchange measured between"));
}
