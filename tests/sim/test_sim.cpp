// tests/sim/test_sim.cpp — the SimGrid simulator against closed forms (plain latency/bandwidth
// model, contention-free single-switch node), the compression-ratio law, and the DGX-H100
// calibration against public nccl-tests figures.
#include <catch2/catch.hpp>

#include <cmath>

#include "study/experiment.h"
#include "sim/simulator.h"

using namespace compcoll;
using namespace compcoll::sim;

namespace {

// n GPUs on one non-blocking switch: each has its own up and down link, so a ring, recursive
// halving/doubling or a chain never puts two flows on one link.
constexpr double kBw = 100e9, kLat = 2e-6;  // per link; a message crosses two links
constexpr double kAlpha = 2 * kLat, kBeta = kBw;

topo::Topology star(int n) { return topo::single_node(n, topo::LinkSpec{kBw, kLat, 1.0}); }

std::vector<CallResult> run(const topo::Topology& t, const std::vector<Call>& calls, const NetworkModel& net,
                            const calib::Calibration& cal = calib::zero_calibration()) {
  Job job;
  job.topology = t;
  job.calibration = cal;
  job.network = net;
  job.calls = calls;
  std::vector<CallResult> out;
  const JobStats st = simulate(job, [&](const CallResult& r) { out.push_back(r); });
  INFO(st.error);
  REQUIRE(st.error.empty());
  REQUIRE(out.size() == calls.size());
  for (const auto& r : out) {
    INFO(r.error);
    REQUIRE(r.error.empty());
  }
  return out;
}

Call make_call(sched::Collective c, const std::string& algo, int n, uint64_t count, const std::string& codec = "identity",
               sched::Placement p = sched::Placement::None, double ratio = 1.0) {
  Call call;
  call.build.collective = c;
  call.build.algorithm = algo;
  call.build.nranks = n;
  call.build.count = count;
  call.build.dtype = DType::FP32;
  call.build.placement = p;
  call.build.gpus_per_node = n;
  call.codec = codec;
  call.ratio = ratio;
  return call;
}

}  // namespace

TEST_CASE("CM02, contention-free: ring allreduce takes 2(n-1)(alpha + S/(n beta))", "[sim][closed-form]") {
  for (int n : {2, 3, 4, 8, 16}) {
    const uint64_t count = 1 << 22;  // 16 MiB of fp32 ... per rank
    const uint64_t per_block = count / n;
    const uint64_t uneven = count - per_block * n;
    std::vector<Call> calls{make_call(sched::Collective::AllReduce, "ring", n, count - uneven)};
    const auto res = run(star(n), calls, NetworkModel::defaults("cm02"));
    const double S = static_cast<double>((count - uneven) * 4);
    const double expect = 2.0 * (n - 1) * (kAlpha + S / (n * kBeta));
    CAPTURE(n, res[0].time_s, expect);
    CHECK(res[0].time_s == Approx(expect).epsilon(0.01));
    CHECK(res[0].messages == static_cast<uint64_t>(2 * (n - 1) * n));
  }
}

TEST_CASE("CM02, contention-free: recursive halving/doubling takes 2(log2(n) alpha + (n-1)/n S/beta)", "[sim][closed-form]") {
  for (int n : {2, 4, 8, 16}) {
    const uint64_t count = 1 << 22;
    const auto res = run(star(n), {make_call(sched::Collective::AllReduce, "recursive", n, count)},
                         NetworkModel::defaults("cm02"));
    const double S = static_cast<double>(count * 4);
    const double expect = 2.0 * (std::log2(n) * kAlpha + (n - 1.0) / n * S / kBeta);
    CAPTURE(n, res[0].time_s, expect);
    CHECK(res[0].time_s == Approx(expect).epsilon(0.01));
  }
}

TEST_CASE("CM02, contention-free: a chain broadcast of k chunks takes (n-1+k-1)(alpha + S/(k beta))", "[sim][closed-form]") {
  for (int n : {2, 5, 8}) {
    for (uint32_t k : {1u, 4u}) {
      const uint64_t count = 1 << 22;
      Call c = make_call(sched::Collective::Broadcast, "chain", n, count);
      c.build.pipe.chunks = k;
      const auto res = run(star(n), {c}, NetworkModel::defaults("cm02"));
      const double S = static_cast<double>(count * 4);
      const double expect = (n - 1.0 + k - 1.0) * (kAlpha + S / (k * kBeta));
      CAPTURE(n, k, res[0].time_s, expect);
      CHECK(res[0].time_s == Approx(expect).epsilon(0.01));
    }
  }
}

TEST_CASE("compressing with ratio r shortens a bandwidth-bound transfer r-fold when codecs cost nothing", "[sim][ratio]") {
  const int n = 4;
  const uint64_t count = uint64_t{1} << 28;  // 1 GiB of fp32 per rank: bandwidth-bound
  for (double r : {0.5, 0.8}) {
    const std::vector<Call> calls = {
        make_call(sched::Collective::AllGather, "ring", n, count),
        make_call(sched::Collective::AllGather, "ring", n, count, "gauss-exp", sched::Placement::CompressOnce, r)};
    const auto res = run(star(n), calls, NetworkModel::defaults("cm02"));
    CAPTURE(r, res[0].time_s, res[1].time_s);
    CHECK(res[1].time_s / res[0].time_s == Approx(r).epsilon(0.01));
    CHECK(static_cast<double>(res[1].wire_bytes) / res[0].wire_bytes == Approx(r).epsilon(0.001));
  }
}

TEST_CASE("codec time from the calibration file lengthens a compressed call", "[sim][calibration]") {
  const auto cal = calib::load_calibration(std::string(COMPCOLL_SOURCE_DIR) + "/calibration/h100-derived.yaml");
  const int n = 4;
  const uint64_t count = 1 << 24;
  const std::vector<Call> calls = {
      make_call(sched::Collective::AllGather, "ring", n, count, "gauss-exp", sched::Placement::CompressOnce, 0.7)};
  const auto zero = run(star(n), calls, NetworkModel::defaults("cm02"));
  const auto timed = run(star(n), calls, NetworkModel::defaults("cm02"), cal);
  CHECK(timed[0].codec_s > 0);
  CHECK(zero[0].codec_s == 0);
  CHECK(timed[0].time_s > zero[0].time_s);
}

TEST_CASE("dgx-h100: a simulated 1 GB ring allreduce reaches 370 GB/s busbw within 10%", "[sim][calibration][dgx]") {
  // The same settings as experiments/dgx-h100-ring.yaml, read from it.
  const auto exp = study::load_experiment(std::string(COMPCOLL_SOURCE_DIR) + "/experiments/dgx-h100-ring.yaml");
  const auto t = topo::load_topology(exp.topologies.at(0));
  NetworkModel net = NetworkModel::defaults(exp.network.model);
  net.latency_factor = exp.network.latency_factor.value_or(net.latency_factor);
  net.bandwidth_factor = exp.network.bandwidth_factor.value_or(net.bandwidth_factor);
  net.crosstraffic = exp.network.crosstraffic.value_or(net.crosstraffic);
  const auto cal = calib::load_calibration(exp.calibration);
  Call c = make_call(sched::Collective::AllReduce, "ring", 8, 500'000'000);  // 1 GB of bf16
  c.build.dtype = DType::BF16;
  c.build.pipe.chunks = exp.calls.at(0).chunks;
  const auto res = run(t, {c}, net, cal);
  const double busbw = 1e9 / res[0].time_s * 2 * 7 / 8 / 1e9;
  CAPTURE(busbw);
  CHECK(busbw == Approx(370).epsilon(0.10));
}

TEST_CASE("the graph's routes and SimGrid's agree: one small message takes the graph route's latency", "[sim][topology]") {
  // CM02 without factors: a 4-byte message costs its route's latency (+ 4 bytes / bandwidth).
  for (const char* file : {"h100-64gpu.yaml", "fat-tree-4k-2to1.yaml", "torus-1k.yaml", "dragonfly-2k.yaml"}) {
    topo::Topology t = topo::load_topology(std::string(COMPCOLL_SOURCE_DIR) + "/topologies/" + file);
    const std::vector<std::pair<int, int>> pairs = {
        {0, 1}, {0, t.gpus_per_node}, {0, t.gpus_per_node + 1}, {0, t.gpus() / 2 + 3}, {5, t.gpus() - 1}};
    std::vector<Call> calls;
    topo::Topology two = t;
    for (const auto& [a, b] : pairs) {
      Call c = make_call(sched::Collective::Broadcast, "chain", 2, 1);
      calls.push_back(c);
    }
    // One job per pair: the placement puts rank 0 on a and rank 1 on b.
    for (size_t i = 0; i < pairs.size(); ++i) {
      two.rank_to_gpu = {pairs[i].first, pairs[i].second};
      const auto res = run(two, {calls[i]}, NetworkModel::defaults("cm02"));
      const auto r = topo::route(t, pairs[i].first, pairs[i].second);
      CAPTURE(file, pairs[i].first, pairs[i].second, r.hops(), res[0].time_s, r.latency);
      CHECK(res[0].time_s == Approx(r.latency + 4 / r.bandwidth).epsilon(0.01));
    }
  }
}
