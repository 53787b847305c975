// tests/real/test_transport_bench.cpp — the topology compcoll-bench transport writes from its
// measurements (real/transport_bench.h): it loads, and the exchange round of every measured
// size takes its measured time in the cost model on it (exchange_schedule, policy::predict:
// what compcoll-run's transport check compares), within a host (MPI: the receiver copies, the
// sender waits for the acknowledgement) and between hosts. The measurement itself runs in the
// ctest real_loop_cpu.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>

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
// on hosts `host_of`.
void check_reproduces(const topo::Topology& t, const std::vector<int>& host_of, const real::TransportSeries& s) {
  policy::RouteCache routes(t);
  for (const auto& [bytes, sec] : s.points) {
    if (bytes < 4096) continue;
    const auto round = real::exchange_schedule(host_of, s.between, static_cast<uint64_t>(bytes));
    const double model = policy::predict(round, t, calib::zero_calibration(), "identity", 1.0,
                                         policy::flow_model_defaults("cm02"), routes).time_s;
    CAPTURE(s.between, bytes, model, sec);
    CHECK(model == Approx(sec).epsilon(1e-4));
  }
}

}  // namespace

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
  m.backend = "nccl";  // GPUs: copy engines move the bytes; the round has one latency
  const auto gpu_host = series("host", 1.5e-6, 5e9, false);
  m.host = &gpu_host;
  const topo::Topology gpus = load(real::topology_yaml(m), "transport-one-host-nccl");
  CHECK_FALSE(gpus.receive_copy);
  check_reproduces(gpus, {0, 0, 0, 0}, gpu_host);
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
