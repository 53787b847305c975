// tests/sim/simulate_alone.h — the simulator tests' common step: one call simulated alone on a
// topology (a job of one call, its own engine), every error a test failure.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "sim/simulator.h"

namespace compcoll::test {

// A flow model as the shipped GPU experiments set it (the RDMA defaults of docs/TOPOLOGY.md,
// "Network defaults"): `model`'s own factors, but no TCP latency factor and no cross-traffic.
inline sim::NetworkModel rdma_network(const std::string& model = "lv08") {
  sim::NetworkModel net = sim::NetworkModel::defaults(model);
  net.latency_factor = 1.0;
  net.crosstraffic = false;
  return net;
}

// `call` simulated alone on `t`: its time and its mean iteration (sim::CallResult).
inline sim::CallResult simulate_alone(const topo::Topology& t, const calib::Calibration& cal,
                                      const sim::NetworkModel& net, const sim::Call& call) {
  sim::Job job;
  job.topology = t;
  job.calibration = cal;
  job.network = net;
  job.calls = {call};
  sim::CallResult out;
  const auto st = sim::simulate(job, [&](const sim::CallResult& r) {
    INFO(r.error);
    REQUIRE(r.error.empty());
    out = r;
  });
  REQUIRE(st.error.empty());
  return out;
}

}  // namespace compcoll::test
