// tests/study/test_experiment.cpp — experiment files: defaults, overrides (--set), relative
// paths, size ranges, and one-line errors naming the file and key.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "calibration/calibration.h"
#include "codec/codec.h"
#include "study/experiment.h"
#include "study/study.h"
#include "config/yaml_node.h"

using namespace compcoll;
using namespace compcoll::config;
using namespace compcoll::study;

namespace {

const std::string kRoot = COMPCOLL_SOURCE_DIR;

std::string write_experiment(const std::string& name, const std::string& body) {
  const auto dir = std::filesystem::temp_directory_path() / "compcoll-test-exp";
  std::filesystem::create_directories(dir);
  const auto p = dir / (name + ".yaml");
  std::ofstream(p) << "name: " << name << "\ntopology: " << kRoot << "/topologies/dgx-h100.yaml\ncalibration: zero\n"
                   << body;
  return p.string();
}

}  // namespace

TEST_CASE("the shipped experiments load, with their relative paths resolved", "[config][experiment]") {
  for (const char* f : {"whatif-fattree.yaml", "dgx-h100-ring.yaml", "smoke-sim.yaml", "bench-sim.yaml"}) {
    CAPTURE(f);
    const Experiment e = load_experiment(kRoot + "/experiments/" + f);
    CHECK(!e.topologies.empty());
    for (const auto& t : e.topologies) CHECK(std::filesystem::exists(t));
    CHECK(std::filesystem::exists(e.calibration));
    CHECK(!e.calls.empty());
    CHECK(!e.codecs.empty());
  }
  const Experiment w = load_experiment(kRoot + "/experiments/whatif-fattree.yaml");
  CHECK(w.topologies.size() == 3);
  CHECK(w.sizes == std::vector<uint64_t>{1000000, 32000000, 1000000000});
  CHECK(w.calls[0].intra_placement == "none");
  CHECK(w.network.latency_factor == 1.0);
  CHECK_FALSE(w.network.tcp_gamma.has_value());
}

TEST_CASE("defaults of a call and --set overrides", "[config][experiment]") {
  const std::string f = write_experiment("defaults", "sizes: {from: 1KB, to: 1MB, factor: 10}\n"
                                                     "calls:\n  - {collective: reduce-scatter, algorithm: ring}\n"
                                                     "codecs: [identity]\n");
  const Experiment e = load_experiment(f);
  CHECK(e.sizes == std::vector<uint64_t>{1000, 10000, 100000, 1000000});
  CHECK(e.calls[0].placement == "per-hop");
  CHECK(e.calls[0].dtype == "bf16");
  CHECK(e.calls[0].chunks == 1);
  CHECK(e.network.model == "lv08");
  const Experiment o = load_experiment(f, {"calls.0.chunks=4", "codecs=[gauss-exp, identity]", "ranks=4",
                                           "network.model=cm02"});
  CHECK(o.calls[0].chunks == 4);
  CHECK(o.codecs == std::vector<std::string>{"gauss-exp", "identity"});
  CHECK(o.ranks == std::vector<int>{4});
  CHECK(o.network.model == "cm02");
  CHECK_FALSE(e.network.update.has_value());
  CHECK(load_experiment(f, {"network.model=lv08", "network.update=full"}).network.update == "full");
  CHECK(load_experiment(f, {"network.model=lv08", "network.precision=1e-12"}).network.precision == 1e-12);
  CHECK(load_experiment(f, {"ranks=[8, 64, 1024]"}).ranks == std::vector<int>{8, 64, 1024});
  CHECK(load_experiment(f, {"ranks=0"}).ranks.empty());
  CHECK(e.network.protocol_costs == true);  // no network key on a GPU fabric: NCCL's protocol costs
  CHECK(net_factors(e).protocol_costs);
  const Experiment keyed = load_experiment(f, {"network.model=lv08"});
  CHECK_FALSE(keyed.network.protocol_costs.has_value());  // a network key: only where it asks
  CHECK_FALSE(net_factors(keyed).protocol_costs);
  CHECK_NOTHROW(study::load_topology(e, kRoot + "/topologies/host-mpi.yaml"));  // defaults ask nothing of hosts
  const Experiment pc = load_experiment(f, {"network.model=lv08", "network.protocol_costs=true"});
  CHECK(pc.network.protocol_costs == true);
  CHECK(net_factors(pc).protocol_costs);
  CHECK_NOTHROW(study::load_topology(pc, kRoot + "/topologies/dgx-h100.yaml"));
  // The channels per network peer of the plans' communicator: filling the NIC unless set, NCCL's
  // own count, or a set one; only among the protocol costs.
  CHECK(net_factors(pc).p2p_net_channels == policy::kP2pFillNic);
  CHECK(net_factors(load_experiment(f, {"network.model=lv08", "network.protocol_costs=true",
                                        "network.p2p_channels_per_net_peer=nic"})).p2p_net_channels ==
        policy::kP2pFillNic);
  CHECK(net_factors(load_experiment(f, {"network.model=lv08", "network.protocol_costs=true",
                                        "network.p2p_channels_per_net_peer=nccl"})).p2p_net_channels ==
        policy::kP2pNcclDefault);
  CHECK(net_factors(load_experiment(f, {"network.model=lv08", "network.protocol_costs=true",
                                        "network.p2p_channels_per_net_peer=4"})).p2p_net_channels == 4);
  CHECK_THROWS_WITH(load_experiment(f, {"network.model=lv08", "network.p2p_channels_per_net_peer=nccl"}),
                    Catch::Contains("network.p2p_channels_per_net_peer") && Catch::Contains("protocol_costs: true"));
  CHECK_THROWS_WITH(load_experiment(f, {"network.model=lv08", "network.protocol_costs=true",
                                        "network.p2p_channels_per_net_peer=0"}),
                    Catch::Contains("network.p2p_channels_per_net_peer"));
  CHECK_THROWS_WITH(load_experiment(f, {"network.model=lv08", "network.protocol_costs=true",
                                        "network.p2p_channels_per_net_peer=all"}),
                    Catch::Contains("network.p2p_channels_per_net_peer") && Catch::Contains("expected nic, nccl"));
  CHECK_THROWS_WITH(study::load_topology(pc, kRoot + "/topologies/host-mpi.yaml"),
                    Catch::StartsWith(f + ": network.protocol_costs: " + kRoot + "/topologies/host-mpi.yaml runs MPI"));
  // PAT's allgather compresses per hop by default (it has no compress-once); `aggregate` reaches
  // the plan.
  const std::string pat = write_experiment("pat-defaults", "sizes: [1MB]\n"
                                                          "calls:\n  - {collective: allgather, algorithm: pat, aggregate: 4}\n"
                                                          "  - {collective: allgather, algorithm: ring}\n"
                                                          "codecs: [identity]\n");
  const Experiment pe = load_experiment(pat);
  CHECK(pe.calls[0].placement == "per-hop");
  CHECK(pe.calls[0].aggregate == 4);
  CHECK(pe.calls[1].placement == "compress-once");
  CHECK(pe.calls[1].aggregate == 0);
  CHECK(study::static_plan(pe.calls[0], "gauss-exp").aggregate == 4);
}

TEST_CASE("bad experiment files: one line naming the file and the key", "[config][experiment][errors]") {
  const std::string calls = "calls:\n  - {collective: allreduce, algorithm: ring}\ncodecs: [identity]\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"sizes: [1MB]\n" + calls + "colour: red\n", "(top level): unknown key 'colour'"},
      {"sizes: [1 parsec]\n" + calls, "sizes.0: expected a size"},
      {"sizes: [1MB]\nranks: [8, 0]\n" + calls, "ranks.1: "},
      {"sizes: [1MB]\nranks: [8, 8]\n" + calls, "ranks.1: group size 8 is listed twice"},
      {"sizes: [1MB]\nranks: []\n" + calls, "ranks: expected a group size or a list of them"},
      {"sizes: {from: 1MB, to: 1KB}\n" + calls, "sizes: expected 0 < from <= to"},
      {"sizes: {from: 1KB, to: 1GB, factor: 1.0000001}\n" + calls,
       "sizes: from 1000 to 1000000000 B by x1.0000001 is 1.382e+08 sizes; at most 10000"},
      {"sizes: [1MB]\ncalls:\n  - {collective: allreduce, algorithm: ring, chunks: 0}\ncodecs: [identity]\n",
       "calls.0.chunks: expected an integer in [1, 1024], got 0"},
      {"sizes: [1MB]\ncalls:\n  - {collective: allreduce, algorithm: ring, intra_placement: none}\ncodecs: [identity]\n",
       "calls.0.intra_placement: only a hierarchical allreduce and rail rings"},
      {"sizes: [1MB]\ncalls:\n  - {collective: allreduce, algorithm: rail-ring, intra_placement: per-hop}\ncodecs: [identity]\n",
       "calls.0.intra_placement: expected one of none"},
      {"sizes: [1MB]\ncalls:\n  - {collective: allgather, algorithm: ring, aggregate: 2}\ncodecs: [identity]\n",
       "calls.0.aggregate: only pat carries several blocks in a message"},
      {"sizes: [1MB]\ncalls:\n  - {collective: allgather, algorithm: pat, aggregate: -1}\ncodecs: [identity]\n",
       "calls.0.aggregate: expected an integer in [0, 1048576], got -1"},
      {"sizes: [1MB]\n" + calls + "network: {model: lv08, latency_factor: -1}\n", "network.latency_factor: expected a positive"},
      {"sizes: [1MB]\n" + calls + "network: {model: lv08, update: eager}\n", "network.update: "},
      {"sizes: [1MB]\n" + calls + "network: {model: lv08, precision: 0}\n", "network.precision: expected a positive"},
      {"sizes: [1MB]\n" + calls + "network: {model: lv08, protocol_costs: maybe}\n", "network.protocol_costs: "},
      {"sizes: [1MB]\n" + calls + "ratios: {fixed: {gauss-exp: 0}}\n", "ratios.fixed.gauss-exp: expected a ratio > 0"},
      {"sizes: [1MB]\ncodecs: [identity]\n", "(top level): missing key 'calls'"},
  };
  int i = 0;
  for (const auto& [body, expect] : cases) {
    const std::string f = write_experiment("bad" + std::to_string(i++), body);
    CAPTURE(body);
    try {
      load_experiment(f);
      FAIL("no error");
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      CHECK_THAT(msg, Catch::StartsWith(f + ": "));
      CHECK_THAT(msg, Catch::Contains(expect));
      CHECK(msg.find('\n') == std::string::npos);
    }
  }
  CHECK_THROWS_WITH(load_experiment(write_experiment("set", "sizes: [1MB]\n" + calls), {"calls"}),
                    Catch::Contains("--set calls: expected key.path=value"));
  // A value that is not YAML names the --set it came in.
  CHECK_THROWS_WITH(load_experiment(write_experiment("set", "sizes: [1MB]\n" + calls), {"sizes=[1MB, [2MB]"}),
                    Catch::Contains("--set sizes: the value is not YAML") && Catch::Contains("[1MB, [2MB]"));
  CHECK_THROWS_WITH(load_experiment(kRoot + "/experiments/none.yaml"), Catch::Contains("none.yaml: cannot open"));
}

// An experiment without a `network` key runs the network model its topologies' fabric calls
// for (topo::network_default): RDMA on NVLink, InfiniBand and RoCE (LV08 without its TCP
// latency factor and cross-traffic, with NCCL's protocol costs, as the fidelity experiments and
// the studies set them by hand), LV08 as fitted to TCP on Ethernet over TCP, CM02 with no
// factors on a measured transport; a key given still wins, and topologies that call for
// different models are an error naming both.
TEST_CASE("network defaults follow the topology's fabric", "[config][experiment]") {
  const auto dir = std::filesystem::temp_directory_path() / "compcoll-test-exp";
  std::filesystem::create_directories(dir);
  const std::string cluster =
      "generator: fat-tree\nnode:\n  gpus: 8\n  fabric: nvswitch\n  gpu_link: {bandwidth: 450GB/s, latency: 0.5us}\n"
      "network:\n  nodes: 2\n  link: {bandwidth: 400Gb/s, latency: 1us}\n  tiers: 2\n  gpus_per_leaf: 16\n";
  const std::string tcp = (dir / "tcp-cluster.yaml").string(), roce = (dir / "roce-cluster.yaml").string();
  std::ofstream(tcp) << "name: tcp-cluster\n" << cluster << "  fabric: ethernet-tcp\n";
  std::ofstream(roce) << "name: roce-cluster\n" << cluster << "  fabric: roce\n";
  const auto experiment = [&](const std::string& name, const std::string& topologies, const std::string& extra = "") {
    const auto p = dir / ("fabric-" + name + ".yaml");  // names no other test case writes: ctest runs them at once
    std::ofstream(p) << "name: " << name << "\ntopology: " << topologies << "\ncalibration: zero\n"
                     << "sizes: [1MB]\ncalls:\n  - {collective: allreduce, algorithm: ring}\ncodecs: [identity]\n" << extra;
    return p.string();
  };
  const auto rdma = [](const Experiment& e) {
    return e.network.model == "lv08" && e.network.latency_factor == 1.0 && e.network.bandwidth_factor == 0.97 &&
           e.network.crosstraffic == false && e.network.protocol_costs == true;
  };
  const Experiment node = load_experiment(experiment("one-node", kRoot + "/topologies/dgx-h100.yaml"));
  CHECK(rdma(node));
  CHECK_THAT(node.network.source, Catch::Contains("one node, NVLink"));
  const Experiment ib = load_experiment(experiment("ib", "[" + kRoot + "/topologies/h100-64gpu.yaml, " + roce + "]"));
  CHECK(rdma(ib));
  CHECK_THAT(ib.network.source, Catch::Contains("network.fabric: infiniband"));
  const Experiment eth = load_experiment(experiment("eth", tcp));
  CHECK(eth.network.model == "lv08");
  CHECK_FALSE(eth.network.latency_factor.has_value());  // LV08's own 13.01, its cross-traffic on
  CHECK_FALSE(eth.network.crosstraffic.has_value());
  CHECK_FALSE(eth.network.protocol_costs.has_value());  // NCCL's costs are charged only where asked
  CHECK_THAT(eth.network.source, Catch::Contains("ethernet-tcp"));
  const Experiment host = load_experiment(experiment("host", kRoot + "/topologies/host-mpi.yaml"));
  CHECK(host.network.model == "cm02");
  CHECK_FALSE(host.network.latency_factor.has_value());
  CHECK_FALSE(host.network.protocol_costs.has_value());  // MPI on hosts: never charged
  CHECK_THAT(host.network.source, Catch::Contains("measured transport"));
  // A key given wins; so does --set.
  const Experiment keyed = load_experiment(experiment("keyed", tcp, "network: {model: cm02}\n"));
  CHECK(keyed.network.model == "cm02");
  CHECK(keyed.network.source == "the experiment's network key");
  CHECK(load_experiment(experiment("set", tcp), {"network.model=cm02"}).network.model == "cm02");
  // Topologies that call for different models: one line naming both.
  try {
    load_experiment(experiment("mixed", "[" + tcp + ", " + roce + "]"));
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("mixed.yaml: topology: the topologies call for different network models"));
    CHECK_THAT(std::string(e.what()), Catch::Contains("tcp-cluster.yaml: tcp"));
    CHECK_THAT(std::string(e.what()), Catch::Contains("roce-cluster.yaml: rdma"));
  }
}

// run.compute_thread: the host executor's kernels on a thread of their own. The topology an
// experiment's runs use says so where ranks copy their messages (receive_copy), and a host
// topology without shared_memory, where the threads' sharing of the cores cannot be modelled,
// is refused with one line naming both files.
TEST_CASE("run.compute_thread reaches the topologies its runs use", "[config][experiment]") {
  const std::string calls = "sizes: [1MB]\ncalls:\n  - {collective: allreduce, algorithm: ring}\ncodecs: [identity]\n";
  const std::string f = write_experiment("thread", calls + "run: {compute_thread: true}\n");
  const Experiment e = load_experiment(f);
  CHECK(e.run.compute_thread);
  CHECK_FALSE(load_experiment(write_experiment("nothread", calls)).run.compute_thread);
  CHECK(study::load_topology(e, kRoot + "/topologies/host-mpi.yaml").compute_thread);
  CHECK_FALSE(study::load_topology(load_experiment(f, {"run.compute_thread=false"}), kRoot + "/topologies/host-mpi.yaml")
                  .compute_thread);
  CHECK_FALSE(study::load_topology(e, kRoot + "/topologies/dgx-h100.yaml").compute_thread);  // no receive copies
  const auto dir = std::filesystem::temp_directory_path() / "compcoll-test-exp";
  std::ifstream in(kRoot + "/topologies/host-mpi.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = text.find("shared_memory: true");
  REQUIRE(at != std::string::npos);
  text.replace(at, 19, "shared_memory: false");
  const std::string unshared = (dir / "host-unshared.yaml").string();
  std::ofstream(unshared) << text;
  try {
    study::load_topology(e, unshared);
    FAIL("no error");
  } catch (const ConfigError& err) {
    const std::string msg = err.what();
    CHECK_THAT(msg, Catch::StartsWith(f + ": run.compute_thread: " + unshared));
    CHECK_THAT(msg, Catch::Contains("shared_memory"));
    CHECK(msg.find('\n') == std::string::npos);
  }
}

// run.fused_decode: off unless asked for (the nccl executor's decode-and-add kernel); a
// boolean. The model prices it on GPU topologies, where that executor runs, not on hosts over
// MPI, whose executor never fuses.
TEST_CASE("run.fused_decode is off unless the experiment turns it on", "[config][experiment]") {
  const std::string calls = "sizes: [1MB]\ncalls:\n  - {collective: allreduce, algorithm: ring}\ncodecs: [identity]\n";
  const Experiment unfused = load_experiment(write_experiment("unfused", calls));
  CHECK_FALSE(unfused.run.fused_decode);
  CHECK_FALSE(study::load_topology(unfused, kRoot + "/topologies/dgx-h100.yaml").fused_decode);
  const Experiment fused = load_experiment(write_experiment("fused", calls + "run: {fused_decode: true}\n"));
  CHECK(fused.run.fused_decode);
  CHECK(study::load_topology(fused, kRoot + "/topologies/dgx-h100.yaml").fused_decode);
  CHECK_FALSE(study::load_topology(fused, kRoot + "/topologies/host-mpi.yaml").fused_decode);
  const std::string bad = write_experiment("fused-bad", calls + "run: {fused_decode: maybe}\n");
  CHECK_THROWS_WITH(load_experiment(bad), bad + ": run.fused_decode: expected true or false, got 'maybe'");
}

// run.wire_budget: off unless asked for; its margin a fraction from 0 to 1.
TEST_CASE("run.wire_budget is off unless the experiment turns it on and its margin is a fraction",
          "[config][experiment]") {
  const std::string calls = "sizes: [1MB]\ncalls:\n  - {collective: allreduce, algorithm: ring}\ncodecs: [identity]\n";
  const auto off = load_experiment(write_experiment("exact-sizes", calls)).run;
  CHECK_FALSE(off.wire_budget);
  CHECK(off.wire_budget_margin == 0);
  const auto on =
      load_experiment(write_experiment("budget", calls + "run: {wire_budget: true, wire_budget_margin: 0.02}\n")).run;
  CHECK(on.wire_budget);
  CHECK(on.wire_budget_margin == 0.02);
  const std::string bad = write_experiment("budget-bad", calls + "run: {wire_budget: true, wire_budget_margin: 2}\n");
  CHECK_THROWS_WITH(load_experiment(bad),
                    Catch::Contains(bad + ": run.wire_budget_margin: expected a fraction from 0 to 1"));
  const std::string negative = write_experiment("budget-negative", calls + "run: {wire_budget_margin: -0.1}\n");
  CHECK_THROWS_WITH(load_experiment(negative), Catch::Contains("run.wire_budget_margin: expected a fraction"));
  // The model sizes budgeted messages through the topology (policy::wire_message_bytes); a margin
  // without run.wire_budget changes nothing.
  const std::string dgx = kRoot + "/topologies/dgx-h100.yaml";
  const std::string budget =
      write_experiment("budget-model", calls + "run: {wire_budget: true, wire_budget_margin: 0.02}\n");
  CHECK(study::load_topology(load_experiment(budget), dgx).wire_budget_margin == 0.02);
  CHECK(study::load_topology(load_experiment(budget, {"run.wire_budget=false"}), dgx).wire_budget_margin == 0);
  // Queued mode: off unless asked for.
  CHECK_FALSE(off.queue_ahead);
  CHECK(load_experiment(budget, {"run.queue_ahead=true"}).run.queue_ahead);
}

// topology_set changes every topology as it loads (NVLink SHARP off, as NCCL_NVLS_ENABLE=0);
// nccl_algo restricts what nccl-like's NCCL picks (NCCL_ALGO): on one H100 node a 1 GB
// allreduce is NVLS by default, a ring either way.
TEST_CASE("topology_set and nccl_algo: NVLS off, or NCCL's rings only", "[config][experiment][nvls]") {
  const std::string base = "sizes: [1GB]\ncalls:\n  - {collective: allreduce, algorithm: ring}\ncodecs: [identity]\n"
                           "policies: [nccl-like]\n";
  const auto chosen = [&](const Experiment& e) {
    const topo::Topology t = load_topology(e, e.topologies[0], 8);
    policy::System sys;
    sys.topology = &t;
    sys.nccl_algorithms = e.nccl_algo;
    policy::CallInfo call;
    call.bytes = 1'000'000'000;
    call.nranks = 8;
    return policy::make_policy("nccl-like")->choose(call, sys, nullptr).algorithm;
  };
  CHECK(chosen(load_experiment(write_experiment("nvls-default", base))) == "nvls");
  const Experiment off = load_experiment(write_experiment("nvls-off", base + "topology_set: node.nvls=false\n"));
  CHECK(off.topology_set == std::vector<std::string>{"node.nvls=false"});
  CHECK_FALSE(load_topology(off, off.topologies[0], 8).nvls);
  CHECK(chosen(off) == "rail-ring");
  const Experiment rings = load_experiment(write_experiment("nccl-ring", base + "nccl_algo: ring\n"));
  CHECK(rings.nccl_algo == std::vector<std::string>{"ring"});
  CHECK(chosen(rings) == "rail-ring");
  const Experiment bad = load_experiment(write_experiment("bad-set", base + "topology_set: [node.nvlz=false]\n"));
  CHECK_THROWS_WITH(load_topology(bad, bad.topologies[0], 8),
                    Catch::Contains("bad-set.yaml: topology_set: ") && Catch::Contains("nvlz"));
  CHECK_THROWS_WITH(load_experiment(write_experiment("bad-set2", base + "topology_set: nvls\n")),
                    Catch::Contains("topology_set: expected key.path=value"));
  CHECK_THROWS_WITH(load_experiment(write_experiment("bad-algo", base + "nccl_algo: [ring, collnet]\n")),
                    Catch::Contains("nccl_algo") && Catch::Contains("collnet"));
}

// A GPU library's codec (nvcomp-ans, codec/codec.h): an experiment may name it; its ratio comes
// from the calibration's `ratios` (measured where the file was), its durations from the file's
// curves; without either the run is refused in one line naming the file and what to do.
TEST_CASE("a library codec takes its ratio and curves from the calibration", "[config][experiment][library-codec]") {
  REQUIRE(find_library_codec("nvcomp-ans"));
  CHECK(find_library_codec("nvcomp-ans")->chunk_bytes == 65536);
  CHECK_FALSE(find_library_codec("gauss-exp"));
  CHECK_FALSE(find_codec("nvcomp-ans"));  // no host implementation: not in the host registry
  CHECK(known_codec("nvcomp-ans"));
  CHECK(known_codec("gauss-exp"));
  CHECK_FALSE(known_codec("nvcomp-lz4"));

  const auto dir = std::filesystem::temp_directory_path() / "compcoll-test-exp";
  std::filesystem::create_directories(dir);
  const std::string header = "device: \"test GPU\"\nsource: measured\ndate: 2026-01-01\nstatement: made up\n";
  const std::string curves =
      "curves:\n  - {op: compress, codec: nvcomp-ans, dtype: bf16, latency: 20us, throughput: 1000GB/s}\n"
      "  - {op: decompress, codec: nvcomp-ans, dtype: bf16, latency: 16us, throughput: 2000GB/s}\n"
      "  - {op: reduce, dtype: any, latency: 0us, throughput: 1000GB/s}\n";
  const std::string with_ratio = (dir / "lib-cal.yaml").string(), without = (dir / "lib-cal-noratio.yaml").string(),
                    no_curves = (dir / "lib-cal-nocurves.yaml").string();
  std::ofstream(with_ratio) << header
                            << "ratios:\n  - {codec: nvcomp-ans, dtype: bf16, tensor: grad, ratio: 0.69764, bytes: 4718592}\n"
                            << curves;
  std::ofstream(without) << header << curves;
  std::ofstream(no_curves) << header
                           << "ratios:\n  - {codec: nvcomp-ans, dtype: bf16, tensor: grad, ratio: 0.69764, bytes: 4718592}\n"
                           << "curves:\n  - {op: copy, dtype: any, points: [[4096, 1e-6]]}\n";
  const std::string body = "sizes: [1MB]\ncalls:\n  - {collective: allreduce, algorithm: ring, dtype: bf16, tensor: grad}\n"
                           "codecs: [identity, nvcomp-ans]\nratios:\n  tensors: " + kRoot + "/tests/data\n";
  const Experiment exp = load_experiment(write_experiment("library", body));
  CHECK_NOTHROW(check_codecs(exp, false));

  const calib::Calibration cal = calib::load_calibration(with_ratio);
  CHECK_NOTHROW(check_curves(exp, cal));
  Ratios ratios(exp, &cal);
  const calib::MeasuredRatio& m = ratios.get("nvcomp-ans", DType::BF16, "grad");
  CHECK(m.ratio == 0.69764);
  CHECK_THAT(m.source, Catch::Contains("measured by nvCOMP on 4718592 bytes of bf16 grad tensors") &&
                           Catch::Contains("lib-cal.yaml"));
  // The host codecs are still measured on the experiment's tensors.
  CHECK_THAT(ratios.get("gauss-exp", DType::BF16, "grad").source, Catch::Contains("measured on"));

  // No measured ratio for this dtype or kind, or no calibration at all: refused, naming the file.
  const calib::Calibration bare = calib::load_calibration(without);
  Ratios no_ratio(exp, &bare);
  CHECK_THROWS_WITH(no_ratio.get("nvcomp-ans", DType::BF16, "grad"),
                    Catch::StartsWith(without + ": ratios: no measured ratio of nvcomp-ans on bf16 grad tensors") &&
                        Catch::Contains("compcoll-bench calibrate --device cuda"));
  CHECK_THROWS_WITH(Ratios(exp, &cal).get("nvcomp-ans", DType::BF16, "param"),
                    Catch::Contains("no measured ratio of nvcomp-ans on bf16 param tensors"));
  CHECK_THROWS_WITH(Ratios(exp).get("nvcomp-ans", DType::BF16, "grad"), Catch::StartsWith(exp.file + ": ratios: "));
  // A fixed ratio in the experiment still wins, as for any codec.
  const Experiment fixed = load_experiment(write_experiment("library-fixed", body + "  fixed: {nvcomp-ans: 0.7}\n"));
  CHECK(Ratios(fixed, &bare).get("nvcomp-ans", DType::BF16, "grad").ratio == 0.7);
  // Its curves are required like any codec's.
  CHECK_THROWS_WITH(check_curves(exp, calib::load_calibration(no_curves)),
                    Catch::Contains("lib-cal-nocurves.yaml: curves: no compress curve for codec nvcomp-ans, dtype bf16"));
  // And a reduce curve for the dtype a call reduces.
  const std::string no_reduce = (dir / "lib-cal-noreduce.yaml").string();
  std::ofstream(no_reduce) << header << curves.substr(0, curves.find("  - {op: reduce"));
  CHECK_THROWS_WITH(check_curves(exp, calib::load_calibration(no_reduce)),
                    no_reduce + ": curves: no reduce curve for dtype bf16, which calls.0 (allreduce) reduces");
  // A call written uncompressed needs no codec curve, unless a policy may compress it.
  const std::string reduce_only = (dir / "reduce-only.yaml").string();
  std::ofstream(reduce_only) << header << "curves:\n  - {op: reduce, dtype: any, latency: 0us, throughput: 1000GB/s}\n";
  const std::string plain = "sizes: [1MB]\ncalls:\n  - {collective: allreduce, algorithm: ring, dtype: bf16, tensor: grad, "
                            "placement: none}\ncodecs: [identity, gauss-exp]\nratios:\n  fixed: {gauss-exp: 0.7}\n";
  CHECK_NOTHROW(check_curves(load_experiment(write_experiment("plain", plain)), calib::load_calibration(reduce_only)));
  CHECK_THROWS_WITH(
      check_curves(load_experiment(write_experiment("plain-adaptive", plain + "policies: [static, adaptive]\n")),
                   calib::load_calibration(reduce_only)),
      reduce_only + ": curves: no compress curve for codec gauss-exp, dtype bf16");
}

TEST_CASE("a cell moves whole elements: its size rounded down as nccl-tests rounds, none an error", "[config][experiment]") {
  const std::string f = write_experiment("rounding", "sizes: [1001B, 4000B]\n"
                                                     "calls:\n  - {collective: allreduce, algorithm: ring, dtype: bf16}\n"
                                                     "  - {collective: all-to-all, algorithm: pairwise, dtype: fp32}\n"
                                                     "codecs: [identity]\nranks: [3]\n");
  const Experiment e = load_experiment(f);
  const auto groups = study::groups(e, nullptr);
  REQUIRE(groups.size() == 1);
  const auto cs = study::cells(e, groups);
  REQUIRE(cs.size() == 4);
  // allreduce of bf16: 1001 B holds 500 elements; all-to-all of fp32 on 3 ranks: 83 to each (996 B),
  // 4000 B holds 333 each (3996 B).
  CHECK(cs[0].size == 1000);
  CHECK(cs[1].size == 4000);
  CHECK(cs[2].size == 996);
  CHECK(cs[3].size == 3996);
  for (const auto& c : cs) CHECK(c.info.bytes == c.size);
  CHECK(policy::count_for(cs[2].info.collective, cs[2].size, cs[2].info.dtype, 3) == 83);

  const Experiment tiny = load_experiment(write_experiment(
      "tiny", "sizes: [64B, 8B]\ncalls:\n  - {collective: all-to-all, algorithm: pairwise, dtype: fp32}\ncodecs: [identity]\n"));
  try {
    study::cells(tiny, study::groups(tiny, nullptr));
    FAIL("8 B hold no fp32 element for each of 8 ranks");
  } catch (const ConfigError& err) {
    CHECK(std::string(err.what()) ==
          tiny.file + ": sizes: 8 B holds no whole fp32 element for each of the 8 ranks of calls.0 (all-to-all)");
  }
}
