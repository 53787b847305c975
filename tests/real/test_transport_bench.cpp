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

// Every measured point (4 KiB and more) of `s`: the round on `t` in the cost model, the ranks
// on hosts `host_of`; where the round's buffers fit in the node's cache, the point of
// `resident` (the same sizes through one buffer per side) instead. Returns how many points
// were the resident series'.
int check_reproduces(const topo::Topology& t, const std::vector<int>& host_of, const real::TransportSeries& s,
                     const real::TransportSeries* resident = nullptr) {
  policy::RouteCache routes(t);
  int from_resident = 0;
  for (size_t i = 0; i < s.points.size(); ++i) {
    const double bytes = s.points[i].first;
    if (bytes < 4096) continue;
    const auto round = real::exchange_schedule(host_of, s.between, static_cast<uint64_t>(bytes));
    const bool in_cache = t.data_resident(policy::node_footprint_bytes(round, t));
    const double sec = in_cache && resident ? resident->points.at(i).second : s.points[i].second;
    from_resident += in_cache;
    const double model = policy::predict(round, t, calib::zero_calibration(), "identity", 1.0,
                                         policy::flow_model_defaults("cm02"), routes).time_s;
    CAPTURE(s.between, bytes, in_cache, model, sec);
    CHECK(model == Approx(sec).epsilon(1e-4));
  }
  return from_resident;
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
  real::Completion decompress(const void* wire, size_t bytes, DType dtype, void* dst, uint64_t count) override {
    return host_->decompress(wire, bytes, dtype, dst, count);
  }
  bool done(real::Completion c) override { return host_->done(c); }
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
  const auto series = real::measure_transport(t, b, std::vector<int>(static_cast<size_t>(n), 0), opt);
  REQUIRE(series.size() == 2);  // through 4 slots per side, then one (host buffers: the resident series)
  CHECK(series[0].window == real::kStreamWindow);
  CHECK(series[1].resident());
  CHECK(series[0].points.size() == 2);
  CHECK(series[1].points.size() == 2);
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
  CHECK(with_alone.cache_bytes == 0);  // no resident series: no cache written
  // Through one buffer per side (the resident series, 40% faster) and a 32 MiB cache: a round
  // whose buffers on the node fit (4 ranks x input and output: 8 x the message <= 32 MiB) takes
  // the resident series' time, a larger one the other's.
  real::TransportSeries host_resident = series("host", 1.5e-6, 7e9, true);
  real::TransportSeries pingpong_resident = series("host", 1.0e-6, 9e9, false);
  pingpong_resident.pattern = "pingpong";
  host_resident.window = pingpong_resident.window = 1;
  m.host_resident = &host_resident;
  m.host_alone_resident = &pingpong_resident;
  m.cache_bytes = uint64_t{32} << 20;
  m.cache_source = "a test";
  const std::string resident_text = real::topology_yaml(m);
  CHECK_THAT(resident_text, Catch::Contains("cache_bytes: 32 MiB"));
  const topo::Topology cached = load(resident_text, "transport-one-host-resident");
  CHECK(cached.cache_bytes == double(32 << 20));
  REQUIRE(cached.gpu_link.resident_by_size.size() == cached.gpu_link.by_size.size());
  REQUIRE(cached.gpu_link.resident_alone_by_size.size() == cached.gpu_link.by_size.size());
  CHECK(check_reproduces(cached, {0, 0, 0, 0}, host, &host_resident) == 11);  // 4 KiB .. 4 MiB
  for (const auto& [bytes, sec] : pingpong_resident.points)
    if (bytes >= 4096) {
      CAPTURE(bytes);
      CHECK(cached.receive_copy_alone_seconds(bytes, 1.0, true) == Approx(sec - 1.0e-6).epsilon(1e-4));
    }
  // Without the cache's size the resident series is left out.
  m.cache_bytes = 0;
  const topo::Topology uncached = load(real::topology_yaml(m), "transport-one-host-no-cache");
  CHECK(uncached.gpu_link.resident_by_size.empty());
  CHECK(check_reproduces(uncached, {0, 0, 0, 0}, host) == 0);
  m.host_resident = m.host_alone_resident = nullptr;
  m.host_alone = nullptr;
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
