// tests/sim/test_policy.cpp — the policies (shared/policy): NCCL's tuning model computed by
// hand for one case and its known choices; the adaptive policy against the simulator.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "policy/nccl_tuning.h"
#include "policy/policy.h"
#include "schedule/lockstep.h"
#include "sim/simulator.h"
#include "sim/simulate_alone.h"

using namespace compcoll;
using namespace compcoll::policy;

namespace {

const std::string kRoot = COMPCOLL_SOURCE_DIR;

CallInfo allreduce(uint64_t bytes, int n) {
  CallInfo c;
  c.collective = sched::Collective::AllReduce;
  c.bytes = bytes;
  c.dtype = DType::BF16;
  c.tensor = "grad";
  c.nranks = n;
  return c;
}

System system_of(const topo::Topology& t, const calib::Calibration& cal, std::vector<std::string> codecs) {
  System s;
  s.topology = &t;
  s.calibration = &cal;
  s.net = {1.0, 0.97};
  s.codecs = std::move(codecs);
  s.ratio = [](const std::string&, DType, const std::string&) { return 0.6858; };  // gauss-exp on bf16 grads
  return s;
}

double simulate_plan(const topo::Topology& t, const calib::Calibration& cal, const Plan& p, const CallInfo& info) {
  sim::Job job;
  job.topology = t;
  job.calibration = cal;
  job.network = test::rdma_network();
  sim::Call call;
  call.codec = p.codec;
  call.ratio = 0.6858;
  call.build = build_spec(p, info, t);
  call.nccl_kernels = p.nccl_kernels;
  job.calls = {call};
  double time = -1;
  sim::simulate(job, [&](const sim::CallResult& r) {
    INFO(r.error);
    REQUIRE(r.error.empty());
    time = r.time_s;
  });
  return time;
}

// Another policy's plan is run by NCCL's kernels only where it is NCCL's own collective.
bool adaptive_nccl_only_as_library(const System& sys) {
  auto adaptive = make_policy("adaptive");
  for (uint64_t bytes : {uint64_t{64} << 10, uint64_t{1'000'000'000}}) {
    const Plan p = adaptive->choose(allreduce(bytes, 64), sys, nullptr);
    if (p.nccl_kernels != p.library) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("NCCL's tuning model, by hand: one 8-GPU NVSwitch node", "[policy][nccl]") {
  const auto t = topo::load_topology(kRoot + "/topologies/dgx-h100.yaml");
  const NcclView v = nccl_view(t, 8);
  // 18 NVLinks x 20.6 GB/s = 370.8; the search finds 6 rings at 60 GB/s, doubled to 12 at 30;
  // 24 execution channels. NVLS: 8 channels at 40 (9 x 40 <= 370.8 < 9 x 50).
  CHECK(v.nvlink_bw == Approx(370.8));
  CHECK(v.ring.channels == 12);
  CHECK(v.ring.bw_intra == Approx(30));
  CHECK(v.ring_channels == 24);
  CHECK(v.nvls_graph.channels == 8);
  CHECK(v.nvls_graph.bw_intra == Approx(40));
  const auto call = allreduce(1'000'000'000, 8);
  NcclEstimate ring, nvls;
  for (const auto& e : nccl_estimates(call, v)) {
    if (e.label() == "ring/simple") ring = e;
    if (e.label() == "nvls/simple") nvls = e;
  }
  // Ring Simple: busBw 12 x 30 = 360, algBw 360 x 8/14; latency 8.4 + 14 x 3.4 us.
  CHECK(ring.bus_bw == Approx(360));
  CHECK(ring.time_s == Approx((8.4 + 14 * 3.4 + 1e9 / (1000.0 * 360 * 8 / 14)) * 1e-6));
  // NVLS: busBw 8 x 40, algBw x 5/6; latency 25 us. NCCL picks it.
  CHECK(nvls.time_s == Approx((25 + 1e9 / (1000.0 * 320 * 5 / 6)) * 1e-6));
  CHECK(nccl_pick(call, v).label() == "nvls/simple");
  // Without NVLS (nvls: false in the topology), the ring.
  auto no_nvls = t;
  no_nvls.nvls = false;
  CHECK(nccl_pick(call, nccl_view(no_nvls, 8)).label() == "ring/simple");
}

TEST_CASE("NCCL's tuning model, by hand: 8 nodes of 8 GPUs, one 400 Gb/s NIC each", "[policy][nccl]") {
  const auto t = topo::load_topology(kRoot + "/topologies/h100-64gpu.yaml");
  const NcclView v = nccl_view(t, 64);
  CHECK(v.nodes == 8);
  CHECK(v.ppn == 8);
  CHECK(v.ring.channels == 8);  // one per NIC at 48 GB/s (not doubled: under 50 with more than 4)
  CHECK(v.ring.bw_inter == Approx(48));
  CHECK(v.ring_channels == 16);
  // 64 KB: tree LL. busBw min(384 x .92, 8 x 36.0) = 288, LL: min(288 / 3.8, 20.4); algBw x .5
  // x the tree correction .6 at log2(64K / 64) = 10; latency 6.8 + 2(7 x .6 + 3 x 5.0).
  const NcclEstimate small = nccl_pick(allreduce(64 << 10, 64), v);
  CHECK(small.label() == "tree/ll");
  CHECK(small.time_s == Approx((6.8 + 2 * (7 * .6 + 3 * 5.0) + 65536 / (1000.0 * 20.4 * .5 * .6)) * 1e-6));
  // 1 GB: ring Simple. busBw 384, algBw x 64/126; latency (8.4 + 112 x 3.4 + 14 x 14) x 1.4.
  const NcclEstimate big = nccl_pick(allreduce(1'000'000'000, 64), v);
  CHECK(big.label() == "ring/simple");
  CHECK(big.time_s == Approx(((8.4 + 112 * 3.4 + 14 * 14) * 1.4 + 1e9 / (1000.0 * 384 * 64 / 126)) * 1e-6));
  CHECK(big.channels == 16);
  // The tree as NCCL launches it (enqueue.cc). LL128, 16 MiB: the chunk of 576,000 bytes halves
  // while a channel would move fewer than (1 + 3 + 0.8) x 64 / 8 = 38.4 of them and it is over
  // 128 KiB: 288,000, 144,000, 72,000; then 14 >= 9.6 chunks: 72,000 stays, 15 chunks a channel.
  const NcclTreeLaunch ll128 = nccl_tree_launch(16 << 20, v, 16, "ll128");
  CHECK(ll128.channels == 16);
  CHECK(ll128.chunk_bytes == 72000);
  CHECK(ll128.chunks == 15);
  // Simple, 64 KiB: channels drop while 64 KiB < channels x 512 x 64, to 2; one 512 KiB chunk.
  const NcclTreeLaunch simple = nccl_tree_launch(64 << 10, v, 16, "simple");
  CHECK(simple.channels == 2);
  CHECK(simple.chunk_bytes == 512 << 10);
  CHECK(simple.chunks == 1);
  // LL, 1 MiB: 32 KiB chunks (64 KiB steps, half of them flags), 2 a channel.
  const NcclTreeLaunch ll = nccl_tree_launch(1 << 20, v, 16, "ll");
  CHECK(ll.channels == 16);
  CHECK(ll.chunk_bytes == 32768);
  CHECK(ll.chunks == 2);
  CHECK_THROWS_AS(nccl_tree_launch(1 << 20, v, 16, "ll64"), std::invalid_argument);
  // A ring's channels (enqueue.cc): LL's thread threshold is 8 x the 64 ranks, so 16 channels
  // need 16 x 512 x 512 bytes; 1 MB keeps 3 (1,000,000 >= 3 x 262,144), 4 KB keeps 1. LL128
  // (640 x 8 a channel) and Simple (512 x 64) keep all 16 at 1 MB.
  CHECK(nccl_launch_channels("ring", "ll", 1'000'000, v, 16) == 3);
  CHECK(nccl_launch_channels("ring", "ll", 4'000, v, 16) == 1);
  CHECK(nccl_launch_channels("ring", "ll128", 1'000'000, v, 16) == 16);
  CHECK(nccl_launch_channels("ring", "simple", 1'000'000, v, 16) == 16);
  CHECK(nccl_launch_channels("tree", "ll", 1'000'000, v, 16) == 16);  // a tree's LL threshold is 8
  CHECK_THROWS_AS(nccl_launch_channels("nvls", "simple", 1'000'000, v, 16), std::invalid_argument);
  // nccl-like's rail rings take them: a 4 KB allgather on 64 GPUs is one rail ring.
  const auto cal = calib::zero_calibration();
  const System sys = system_of(t, cal, {"identity"});
  CallInfo tiny = allreduce(4'000, 64);
  tiny.collective = sched::Collective::AllGather;
  const Plan one = make_policy("nccl-like")->choose(tiny, sys, nullptr);
  CHECK(one.algorithm == "rail-ring");
  CHECK(one.protocol == "ll");
  CHECK(one.channels == 1);
}

TEST_CASE("NCCL's PAT, by hand: 8 nodes of one GPU each, and nccl-like runs it where NCCL picks it", "[policy][nccl][pat]") {
  const auto t = topo::load_topology(kRoot + "/topologies/h100-64gpu-dp.yaml");
  const NcclView v = nccl_view(t, 8);
  REQUIRE(v.ppn == 1);
  REQUIRE(v.ring_channels == 4);
  // 1 MB allgather: 4 channels of 250,000 bytes; the 512 KiB chunk halves while 32 of it would
  // cover them, to 64 KiB; a channel's share of a block is 31,250 bytes, one loop; messages of
  // 2 blocks (65,536 / 31,250 >= 2, / 62,500 < 2).
  const NcclPatLaunch ag = nccl_pat_launch(sched::Collective::AllGather, 1'000'000, v);
  CHECK(ag.channels == 4);
  CHECK(ag.chunk_bytes == 65536);
  CHECK(ag.channel_bytes == 31250);
  CHECK(ag.chunks == 1);
  CHECK(ag.aggregate == 2);
  // 64 KB: 3 channels (16 KiB each at least), blocks of 2,667 bytes, aggregated up to half the ranks.
  const NcclPatLaunch small = nccl_pat_launch(sched::Collective::ReduceScatter, 64'000, v);
  CHECK(small.channels == 3);
  CHECK(small.aggregate == 4);
  // 256 MB: 512 KiB chunks (32 of them under a channel's 64 MB), 8 MB a block: 16 loops, one
  // block a message.
  const NcclPatLaunch big = nccl_pat_launch(sched::Collective::AllGather, 256'000'000, v);
  CHECK(big.chunk_bytes == 524288);
  CHECK(big.chunks == 16);
  CHECK(big.aggregate == 1);
  // Reduce-scatter halves the chunk only while 16 of it would cover a channel: 4 MB a channel
  // keeps 128 KiB (16 x 128 KiB <= 4 MB) where the allgather goes down to 64 KiB.
  CHECK(nccl_pat_launch(sched::Collective::ReduceScatter, 16'000'000, v).chunk_bytes == 131072);
  CHECK(nccl_pat_launch(sched::Collective::AllGather, 16'000'000, v).chunk_bytes == 65536);
  // NCCL's cost of PAT: 8 + 2.8 x 8 us once, the network's 14 us / 3.5 a step.
  CHECK(nccl_pat_cost(8).base_us == Approx(30.4));
  CHECK(nccl_pat_cost(8).inter_us == Approx(4.0));
  const auto cal = calib::zero_calibration();
  System sys = system_of(t, cal, {"identity"});
  CallInfo call = allreduce(1'000'000, 8);
  call.collective = sched::Collective::AllGather;
  REQUIRE(nccl_pick(call, v).algorithm == "pat");
  const Plan p = make_policy("nccl-like")->choose(call, sys, nullptr);
  CHECK(p.algorithm == "pat");
  CHECK(p.protocol == "simple");
  CHECK(p.nccl.empty());
  CHECK(p.channels == 4);
  CHECK(p.chunks == 1);
  CHECK(p.aggregate == 2);
  CHECK(p.nccl_s == Approx(nccl_pick(call, v).time_s));
  CHECK(algorithm_label(p, call.collective) == "pat/simple 4ch");
  // It simulates, and faster than the ring NCCL would run without PAT (NCCL_ALGO=RING).
  const double pat_s = simulate_plan(t, cal, p, call);
  sys.nccl_algorithms = {"ring"};
  const Plan ring = make_policy("nccl-like")->choose(call, sys, nullptr);
  CHECK(ring.algorithm == "ring");
  CHECK(pat_s < simulate_plan(t, cal, ring, call));
  // At 1 GB NCCL's model takes the ring.
  call.bytes = 1'000'000'000;
  sys.nccl_algorithms.clear();
  CHECK(make_policy("nccl-like")->choose(call, sys, nullptr).algorithm == "ring");
}

TEST_CASE("nccl-like runs NCCL's rings and names NCCL's choice where it differs; never compresses",
          "[policy][nccl]") {
  const auto t = topo::load_topology(kRoot + "/topologies/h100-64gpu.yaml");
  const auto cal = calib::zero_calibration();
  const System sys = system_of(t, cal, {"identity", "gauss-exp"});
  auto nccl = make_policy("nccl-like");
  double predicted = 0;
  // Small: NCCL's tree with LL, as NCCL launches it: 16 channels (64 KiB is not under
  // 16 x 512 threads x 8), each one chunk of 4 KiB (LL's 32 KiB chunks are not filled).
  const Plan small = nccl->choose(allreduce(64 << 10, 64), sys, &predicted);
  CHECK(small.algorithm == "nccl-tree");
  CHECK(small.protocol == "ll");
  CHECK(small.channels == 16);
  CHECK(small.chunks == 1);
  CHECK(small.nccl.empty());
  CHECK(algorithm_label(small, sched::Collective::AllReduce) == "nccl-tree/ll 16ch");
  // 16 MB on 2 nodes: NCCL runs NVLS-Tree, as NCCL launches it: 16 channels of 8 heads x
  // 64 KiB (16 MiB is under 4 loops of 128 KiB chunks), 2 loops.
  const Plan mid = nccl->choose(allreduce(16 << 20, 16), sys, &predicted);
  CHECK(mid.algorithm == "nvls-tree");
  CHECK(mid.channels == 16);
  CHECK(mid.chunks == 2);
  CHECK(mid.nccl.empty());
  CHECK(predicted > 0);
  CHECK(nccl_nvls_launch(16 << 20, nccl_view(t, 16)).chunk_bytes == 65536);
  CHECK(nccl_nvls_launch(4 << 20, nccl_view(t, 16)).chunk_bytes == 32768);  // under one loop of 64 KiB
  CHECK(nccl_nvls_launch(uint64_t{8} << 30, nccl_view(t, 16)).chunk_bytes == 131072);  // 2 nodes: 128 KiB
  CHECK(nccl_nvls_launch(uint64_t{8} << 30, nccl_view(t, 32)).chunk_bytes == 65536);   // 4 nodes: 64 KiB
  // Large: NCCL's rings, 16 rail rings (two per NIC), Simple.
  const Plan big = nccl->choose(allreduce(1'000'000'000, 64), sys, &predicted);
  CHECK(big.algorithm == "rail-ring");
  CHECK(big.channels == 16);
  CHECK(big.protocol == "simple");
  CHECK(big.nccl.empty());
  CHECK(big.codec == "identity");
  CHECK(algorithm_label(big, sched::Collective::AllReduce) == "rail-ring/simple 16ch");
  // One NVSwitch node: NCCL runs NVLS, as NCCL launches it: 16 channels, 1 GB (under 64 loops
  // of 16 channels x 8 heads x 128 KiB) in loops of 8 heads x 64 KiB a channel: 120 loops.
  // Its allgather is a ring in NCCL's model.
  const auto node = topo::load_topology(kRoot + "/topologies/dgx-h100.yaml");
  const System one = system_of(node, cal, {"identity"});
  const Plan in_node = nccl->choose(allreduce(1'000'000'000, 8), one, &predicted);
  CHECK(in_node.algorithm == "nvls");
  CHECK(in_node.channels == 16);
  CHECK(in_node.chunks == 120);  // ceil(1e9 / (16 x 8 x 65,536))
  CHECK(in_node.nccl.empty());
  CHECK(algorithm_label(in_node, sched::Collective::AllReduce) == "nvls/simplex120 16ch");
  CHECK(in_node.nccl_s == Approx(nccl_pick(allreduce(1'000'000'000, 8), nccl_view(node, 8)).time_s));
  CHECK(in_node.nccl_s == Approx(predicted));
  CallInfo gather = allreduce(1'000'000'000, 8);
  gather.collective = sched::Collective::AllGather;
  const Plan gather_plan = nccl->choose(gather, one, &predicted);
  CHECK(gather_plan.algorithm == "rail-ring");
  CHECK(gather_plan.nccl.empty());
  // With NVLS off (NCCL_NVLS_ENABLE=0) NCCL runs its rings.
  const auto off = topo::load_topology(kRoot + "/topologies/dgx-h100.yaml", 0, {"node.nvls=false"});
  const Plan ring = nccl->choose(allreduce(1'000'000'000, 8), system_of(off, cal, {"identity"}), &predicted);
  CHECK(ring.algorithm == "rail-ring");
  CHECK(ring.channels == 24);
  CHECK(ring.nccl.empty());
  // NCCL's NVLS launch: the chunk shrinks where a channel would run few loops.
  const NcclView v8 = nccl_view(node, 8);
  CHECK(nccl_nvls_launch(uint64_t{1} << 30, v8).chunk_bytes == 131072);   // 64 loops of 16 x 8 x 128 KiB
  CHECK(nccl_nvls_launch(uint64_t{256} << 20, v8).chunk_bytes == 65536);  // under 64 loops: 64 KiB
  CHECK(nccl_nvls_launch(uint64_t{16} << 20, v8).chunk_bytes == 32768);   // under 8 loops of 64 KiB
  CHECK(nccl_nvls_launch(uint64_t{1} << 20, v8).chunk_bytes == 16384);    // under 2 loops of 32 KiB
  CHECK(nccl_nvls_launch(uint64_t{1} << 20, v8).chunks == 1);
  CHECK(big.nccl_s > 0);
  // On GPUs NCCL's kernels run its plans, every collective's; on a host over MPI compcoll's
  // executor does.
  CHECK(small.nccl_kernels);
  CHECK(big.nccl_kernels);
  CHECK(in_node.nccl_kernels);
  CHECK(nccl->choose(allreduce(1 << 20, 64), sys, nullptr).describe().find("(nccl kernels)") != std::string::npos);
  const auto host = topo::load_topology(kRoot + "/topologies/host-mpi.yaml");
  const System on_host = system_of(host, cal, {"identity"});
  CHECK_FALSE(nccl->choose(allreduce(1 << 20, 2), on_host, &predicted).nccl_kernels);
  CHECK(adaptive_nccl_only_as_library(sys));
}

TEST_CASE("nccl-like's all-to-all goes through PXN where NCCL's does", "[policy][nccl][pxn]") {
  const auto cal = calib::zero_calibration();
  auto nccl = make_policy("nccl-like");
  CallInfo a2a = allreduce(uint64_t{256} << 20, 64);
  a2a.collective = sched::Collective::AllToAll;
  // Whole nodes of 8 H100 on NVSwitch, a NIC each: PXN.
  const auto t = topo::load_topology(kRoot + "/topologies/h100-64gpu.yaml");
  CHECK(pxn_applies(t, 64));
  CHECK(nccl->choose(a2a, system_of(t, cal, {"identity"}), nullptr).algorithm == "pxn");
  // compcoll's own plans may compress it.
  bool compressed_pxn = false;
  for (const Plan& p : candidates(a2a, system_of(t, cal, {"identity", "gauss-exp"})))
    compressed_pxn |= p.algorithm == "pxn" && p.codec == "gauss-exp" && !p.library;
  CHECK(compressed_pxn);
  // One node: no network, no relay.
  a2a.nranks = 8;
  CHECK_FALSE(pxn_applies(t, 8));
  CHECK(nccl->choose(a2a, system_of(t, cal, {"identity"}), nullptr).algorithm == "pairwise");
  // One GPU per node: every GPU's own NIC is the destination's rail.
  const auto strided = topo::load_topology(kRoot + "/topologies/fat-tree-1k.yaml", 0, {"placement=round-robin"});
  a2a.nranks = 10;
  CHECK_FALSE(pxn_applies(strided, 10));
  CHECK(nccl->choose(a2a, system_of(strided, cal, {"identity"}), nullptr).algorithm == "pairwise");
  // GPUs of a node on PCIe (no NVLink to relay over), and ranks of a host over MPI.
  const auto pcie = topo::load_topology(kRoot + "/topologies/h100-64gpu.yaml", 0, {"node.fabric=pcie"});
  CHECK_FALSE(pxn_applies(pcie, 64));
  const auto host = topo::load_topology(kRoot + "/topologies/host-mpi.yaml");
  CHECK_FALSE(pxn_applies(host, 2));
}

TEST_CASE("NCCL's own all-to-all runs in NCCL's work batches, its peers side by side, up to 256 ranks",
          "[policy][nccl][pxn][p2p]") {
  const auto cal = calib::zero_calibration();
  const auto t = topo::load_topology(kRoot + "/topologies/h100-64gpu.yaml");
  const System sys = system_of(t, cal, {"identity"});
  CallInfo a2a = allreduce(4096, 64);
  a2a.collective = sched::Collective::AllToAll;
  const Plan p = make_policy("nccl-like")->choose(a2a, sys, nullptr);
  REQUIRE(p.nccl_kernels);
  const sched::BuildSpec b = build_spec(p, a2a, t);
  const sched::BuildSpec f = flow_spec(b, true, t, sys.net);
  CHECK(f.nccl_p2p_channels == 16);  // 16 channels across nodes, already a power of 2
  REQUIRE(f.nccl_nodes.size() == 64);
  CHECK(f.nccl_nodes[63] == 7);
  CHECK(sched::build_schedule(f).algorithm == "pxn");
  // compcoll's own exchange (step groups on NCCL) and a compressed one are built as they are.
  CHECK(flow_spec(b, false, t, sys.net).nccl_p2p_channels == 0);
  sched::BuildSpec compressed = b;
  compressed.placement = sched::Placement::PerHop;
  CHECK(flow_spec(compressed, true, t, sys.net).nccl_p2p_channels == 0);
  // At 4 KB on 8 nodes one batch on each of 8 channels: every peer's block at once, where the
  // rounds one after the other pay a route's latency each (63 of them).
  const double batched = simulate_plan(t, cal, p, a2a);
  Plan rounds = p;
  rounds.nccl_kernels = false;
  const double one_by_one = simulate_plan(t, cal, rounds, a2a);
  CAPTURE(batched, one_by_one);
  CHECK(batched * 10 < one_by_one);
  // Over more than kMaxBatchedExchange ranks NCCL's rounds go one after the other.
  const auto big = topo::load_topology(kRoot + "/topologies/fat-tree-1k.yaml");
  for (int n : {kMaxBatchedExchange, 2 * kMaxBatchedExchange}) {
    CallInfo c = a2a;
    c.nranks = n;
    const Plan q = make_policy("nccl-like")->choose(c, system_of(big, cal, {"identity"}), nullptr);
    CHECK(flow_spec(build_spec(q, c, big), true, big, sys.net).nccl_p2p_channels == (n <= kMaxBatchedExchange ? 16 : 0));
  }
}

TEST_CASE("adaptive weighs compression against NCCL's rail rings, as the simulator does", "[policy][adaptive][slow]") {
  const auto t = topo::load_topology(kRoot + "/topologies/h100-64gpu.yaml");
  const auto cal = calib::load_calibration(kRoot + "/calibration/h100-derived.yaml");
  const System sys = system_of(t, cal, {"identity", "gauss-exp"});
  auto adaptive = make_policy("adaptive");
  auto nccl = make_policy("nccl-like");
  double small_pred = 0, big_pred = 0, nccl_pred = 0;
  const Plan small = adaptive->choose(allreduce(1 << 20, 64), sys, &small_pred);
  const Plan big = adaptive->choose(allreduce(1'000'000'000, 64), sys, &big_pred);
  CAPTURE(small.describe(), big.describe());
  CHECK(small.codec == "identity");
  // 1 GB on 8 nodes with 8 NICs each: rail rings keep every NIC busy. With the derived H100
  // kernel figures each of a compressed ring's 126 steps pays a compress and a decompress launch
  // on its critical path, so compression gains nothing worth having: the best compressed rail
  // ring (compressing only the hops between nodes) is within 1% of the best uncompressed one.
  CHECK(big.algorithm == "rail-ring");
  RouteCache best_routes(t);
  double best_identity = 1e30, best_compressed = 1e30;
  for (const Plan& p : candidates(allreduce(1'000'000'000, 64), sys))
    if (p.algorithm == "rail-ring" && !p.library) {
      double& best = p.codec == "identity" ? best_identity : best_compressed;
      best = std::min(best, predict_plan(p, allreduce(1'000'000'000, 64), sys, best_routes));
    }
  CAPTURE(best_identity, best_compressed);
  CHECK(best_compressed > best_identity * 0.99);
  CHECK(big_pred == Approx(std::min(best_identity, best_compressed)).epsilon(1e-12));
  // Its prediction is the simulator's answer within 5%, and it is not slower than nccl-like.
  const double big_sim = simulate_plan(t, cal, big, allreduce(1'000'000'000, 64));
  CHECK(big_pred == Approx(big_sim).epsilon(0.05));
  const Plan base = nccl->choose(allreduce(1'000'000'000, 64), sys, &nccl_pred);
  CHECK(big_sim <= simulate_plan(t, cal, base, allreduce(1'000'000'000, 64)) * (1 + 1e-9));
  // The compressed hierarchical plan that won against flat rings is priced, and slower.
  Plan zipccl;
  zipccl.algorithm = "hierarchical";
  zipccl.inter = "recursive";
  zipccl.codec = "gauss-exp";
  zipccl.placement = sched::Placement::ZipCCL;
  zipccl.intra = sched::Placement::None;
  RouteCache routes(t);
  CHECK(predict_plan(zipccl, allreduce(1'000'000'000, 64), sys, routes) > big_pred);
}

// NCCL's own collective is a candidate on GPUs: adaptive is never slower than it by its model,
// and takes it where compcoll's kernels cost more than compression saves (the kernels measured
// on one H200). On a host over MPI there is no such candidate.
TEST_CASE("adaptive never slower than NCCL's own collective by its model", "[policy][adaptive][slow]") {
  const auto t = topo::load_topology(kRoot + "/topologies/h100-64gpu.yaml");
  const auto h200 = calib::load_calibration(kRoot + "/calibration/h200.yaml");
  const System sys = system_of(t, h200, {"identity", "gauss-exp"});
  auto adaptive = make_policy("adaptive");
  RouteCache routes(t);
  for (auto coll : {sched::Collective::AllReduce, sched::Collective::ReduceScatter, sched::Collective::AllGather}) {
    for (uint64_t bytes : {uint64_t{1} << 20, uint64_t{64} << 20, uint64_t{1} << 30}) {
      CallInfo info = allreduce(bytes, 64);
      info.collective = coll;
      const auto plans = candidates(info, sys);
      const auto libs = std::count_if(plans.begin(), plans.end(), [](const Plan& p) { return p.library; });
      REQUIRE(libs == 1);
      const Plan lib = *std::find_if(plans.begin(), plans.end(), [](const Plan& p) { return p.library; });
      CHECK(lib.nccl_kernels);
      CHECK(lib.codec == "identity");
      CHECK(algorithm_label(lib, coll).rfind("nccl:", 0) == 0);
      double chosen = 0;
      const Plan p = adaptive->choose(info, sys, &chosen);
      CAPTURE(static_cast<int>(coll), bytes, p.describe(), chosen);
      CHECK(chosen <= predict_plan(lib, info, sys, routes) * (1 + 1e-12));
      if (coll == sched::Collective::AllReduce && bytes == uint64_t{1} << 30) CHECK(p.library);
    }
  }
  // Where the library is MPI's (compcoll-run's mpi backend), NCCL's collective is no candidate.
  System mpi = sys;
  mpi.nccl_library = false;
  const auto on_mpi = candidates(allreduce(1 << 20, 64), mpi);
  CHECK(!on_mpi.empty());
  CHECK(std::none_of(on_mpi.begin(), on_mpi.end(), [](const Plan& p) { return p.library; }));
  const auto host = topo::load_topology(kRoot + "/topologies/host-mpi.yaml");
  const auto cal = calib::zero_calibration();
  const auto on_host = candidates(allreduce(1 << 20, 2), system_of(host, cal, {"identity"}));
  CHECK(std::none_of(on_host.begin(), on_host.end(), [](const Plan& p) { return p.library; }));
  // Over 1,024 ranks NCCL's rail rings grow as n^2 (8 rings of 1,023 steps a rank), past the
  // message limit of compcoll's own rings, and are still a candidate: what NCCL runs there.
  const auto ft = topo::load_topology(kRoot + "/topologies/fat-tree-1k.yaml");
  CallInfo rs = allreduce(uint64_t{1} << 30, 1024);
  rs.collective = sched::Collective::ReduceScatter;
  const auto large = candidates(rs, system_of(ft, cal, {"identity"}));
  const auto lib = std::find_if(large.begin(), large.end(), [](const Plan& p) { return p.library; });
  REQUIRE(lib != large.end());
  CHECK(lib->algorithm == "rail-ring");
  CHECK(plan_size(*lib, rs, ft.gpus_per_node).messages > kMaxFlatMessages);
  CHECK(std::none_of(large.begin(), large.end(),
                     [](const Plan& p) { return !p.library && p.algorithm == "rail-ring"; }));
}

TEST_CASE("candidates with NCCL's protocol costs: only plans compcoll-run can post in step groups on NCCL, and "
          "rail rings in 2 chunks", "[policy][lockstep]") {
  const auto t = topo::load_topology(kRoot + "/topologies/h100-64gpu.yaml");
  const auto cal = calib::zero_calibration();
  System sys = system_of(t, cal, {"identity", "gauss-exp"});
  auto refused = [&](const Plan& p, const CallInfo& info) {
    const auto s = sched::build_schedule(build_spec(p, info, t));
    return s.switches == 0 && !sched::lockstep_problem(s).empty();
  };
  CallInfo gather = allreduce(64 << 20, 64);
  gather.collective = sched::Collective::AllGather;
  for (const CallInfo& info : {allreduce(64 << 20, 64), gather}) {
    sys.net.protocol_costs = false;
    const auto all = candidates(info, sys);
    sys.net.protocol_costs = true;
    const auto grouped = candidates(info, sys);
    CAPTURE(static_cast<int>(info.collective), all.size(), grouped.size());
    std::set<std::string> kept, added;
    for (const Plan& p : grouped) kept.insert(p.describe());
    size_t n_refused = 0;
    for (const Plan& p : all) {
      CAPTURE(p.describe());
      if (refused(p, info)) ++n_refused;
      else CHECK(kept.count(p.describe()) == 1);
    }
    CHECK(n_refused > 0);  // the double binary tree; the recursive allgather, compressed
    CHECK(std::none_of(grouped.begin(), grouped.end(), [&](const Plan& p) { return refused(p, info); }));
    CHECK(std::count_if(grouped.begin(), grouped.end(), [](const Plan& p) { return p.library; }) == 1);
    // Added: the rail rings in 2 chunks (in step groups their codec overlaps only across chunks),
    // uncompressed and with each codec's placements.
    for (const Plan& p : grouped)
      if (std::none_of(all.begin(), all.end(), [&](const Plan& q) { return q.describe() == p.describe(); }))
        added.insert(p.describe());
    CHECK(!added.empty());
    for (const Plan& p : grouped)
      if (added.count(p.describe())) CHECK((p.algorithm == "rail-ring" && p.chunks == 2 && p.channels == 8));
    CHECK(grouped.size() + n_refused == all.size() + added.size());
  }
}

TEST_CASE("a group of one rank: every policy plans it, nothing moves, NCCL's estimate is 0", "[policy][nccl]") {
  const auto t = topo::load_topology(kRoot + "/topologies/h100-64gpu.yaml");
  const auto cal = calib::load_calibration(kRoot + "/calibration/h100-derived.yaml");
  const System sys = system_of(t, cal, {"identity", "gauss-exp"});
  RouteCache routes(t);
  for (auto coll : {sched::Collective::AllReduce, sched::Collective::ReduceScatter, sched::Collective::AllGather,
                    sched::Collective::Broadcast, sched::Collective::AllToAll}) {
    CallInfo info = allreduce(uint64_t{1} << 20, 1);
    info.collective = coll;
    CAPTURE(static_cast<int>(coll));
    double estimate = -1;
    const Plan nccl = make_policy("nccl-like")->choose(info, sys, &estimate);
    CHECK(estimate == 0);
    CHECK(nccl.nccl_s == 0);
    CHECK(nccl.nccl_kernels);
    CHECK(predict_plan(nccl, info, sys, routes) == 0);
    CHECK(simulate_plan(t, cal, nccl, info) == 0);
    const auto plans = candidates(info, sys);
    CHECK(std::count_if(plans.begin(), plans.end(), [](const Plan& p) { return p.library; }) == 1);
    double chosen = -1;
    make_policy("adaptive")->choose(info, sys, &chosen);
    CHECK(chosen == 0);
  }
}

TEST_CASE("candidates: every plan builds; none too large to price", "[policy]") {
  const auto t = topo::load_topology(kRoot + "/topologies/fat-tree-16k.yaml");
  const auto cal = calib::zero_calibration();
  const System sys = system_of(t, cal, {"identity", "gauss-exp"});
  const auto c = candidates(allreduce(1 << 30, 16384), sys);
  for (const auto& p : c) CHECK(p.algorithm != "ring");  // 16,384-rank flat ring: left out
  CHECK(std::any_of(c.begin(), c.end(), [](const Plan& p) { return p.algorithm == "hierarchical"; }));
  const auto t64 = topo::load_topology(kRoot + "/topologies/h100-64gpu.yaml");
  const System s64 = system_of(t64, cal, {"identity", "gauss-exp"});
  for (auto coll : {sched::Collective::AllReduce, sched::Collective::AllGather, sched::Collective::ReduceScatter,
                    sched::Collective::Broadcast, sched::Collective::AllToAll}) {
    CallInfo info = allreduce(1 << 20, 64);
    info.collective = coll;
    const auto plans = candidates(info, s64);
    CHECK(plans.size() >= 2);
    for (const auto& p : plans) {
      CAPTURE(p.describe());
      CHECK_NOTHROW(sched::validate(sched::build_schedule(build_spec(p, info, t64))));
    }
  }
}

TEST_CASE("candidates: the direct allreduce over groups of at most 16, flat or across nodes", "[policy][direct]") {
  const auto cal = calib::zero_calibration();
  auto has = [](const std::vector<Plan>& plans, const char* algorithm, const char* inter) {
    return std::any_of(plans.begin(), plans.end(), [&](const Plan& p) {
      return p.algorithm == algorithm && (std::string(algorithm) != "hierarchical" || p.inter == inter);
    });
  };
  auto t = topo::load_topology(kRoot + "/topologies/h100-64gpu.yaml");
  const System s64 = system_of(t, cal, {"identity", "gauss-exp"});
  // 64 ranks on 8 nodes: direct across the nodes, not over the 64 ranks.
  const auto whole = candidates(allreduce(1 << 22, 64), s64);
  CHECK(has(whole, "hierarchical", "direct"));
  CHECK_FALSE(has(whole, "direct", ""));
  // Compressed: zipccl across nodes (with and without the nodes), never per-hop, its twin.
  for (const Plan& p : whole)
    if (p.algorithm == "hierarchical" && p.inter == "direct" && p.codec != "identity")
      CHECK(p.placement == sched::Placement::ZipCCL);
  // The data-parallel group, one GPU of each of 8 nodes: the flat direct allreduce, zipccl and
  // compress-once.
  t.rank_to_gpu = {0, 8, 16, 24, 32, 40, 48, 56};
  const System dp = system_of(t, cal, {"identity", "gauss-exp"});
  std::set<sched::Placement> placed;
  for (const Plan& p : candidates(allreduce(1 << 22, 8), dp))
    if (p.algorithm == "direct") placed.insert(p.placement);
  CHECK(placed == std::set<sched::Placement>{sched::Placement::None, sched::Placement::ZipCCL,
                                             sched::Placement::CompressOnce});
  // 256 ranks on 32 nodes: no direct exchange across them.
  const auto ft = topo::load_topology(kRoot + "/topologies/fat-tree-1k.yaml");
  const System s256 = system_of(ft, cal, {"identity"});
  const auto large = candidates(allreduce(1 << 22, 256), s256);
  CHECK(has(large, "hierarchical", "recursive"));
  CHECK_FALSE(has(large, "hierarchical", "direct"));
  CHECK_FALSE(has(large, "direct", ""));
}

TEST_CASE("candidates: the direct all-to-all over groups of at most 16, in step groups with NCCL's protocol costs",
          "[policy][direct][alltoall]") {
  const auto cal = calib::zero_calibration();
  const auto t = topo::load_topology(kRoot + "/topologies/h100-64gpu.yaml");
  System sys = system_of(t, cal, {"identity", "gauss-exp"});
  sys.net.protocol_costs = true;
  auto a2a = [](int n) {
    CallInfo c = allreduce(1 << 22, n);
    c.collective = sched::Collective::AllToAll;
    return c;
  };
  auto count = [](const std::vector<Plan>& plans, const char* algorithm) {  // compcoll's, not NCCL's own
    return std::count_if(plans.begin(), plans.end(),
                         [&](const Plan& p) { return !p.library && p.algorithm == algorithm; });
  };
  // One node: direct, uncompressed and compressed, beside the pairwise exchange.
  const auto node = candidates(a2a(8), sys);
  CHECK(count(node, "direct") == 2);
  CHECK(count(node, "pairwise") == 2);
  // 64 ranks on 8 nodes: the hierarchical exchange (both), no direct one over 64 peers.
  const auto whole = candidates(a2a(64), sys);
  CHECK(count(whole, "direct") == 0);
  CHECK(count(whole, "hierarchical") == 2);
}

TEST_CASE("ranks per node: whole nodes in rank order, or 1 for a group strided across nodes", "[policy]") {
  auto t = topo::load_topology(kRoot + "/topologies/h100-64gpu.yaml");
  CHECK(ranks_per_node(t, 64) == 8);
  CHECK(ranks_per_node(t, 16) == 8);
  CHECK(ranks_per_node(t, 4) == 4);  // part of one node
  t.rank_to_gpu = {0, 8, 16, 24, 32, 40, 48, 56};  // a data-parallel group: one GPU per node
  CHECK(ranks_per_node(t, 8) == 1);
  t.rank_to_gpu = {0, 1, 8, 9, 2, 3};  // node 0 appears twice: not whole nodes in order
  CHECK(ranks_per_node(t, 6) == 1);
  // A strided group never gets a hierarchical candidate.
  t.rank_to_gpu = {0, 8, 16, 24, 32, 40, 48, 56};
  const auto cal = calib::zero_calibration();
  const System sys = system_of(t, cal, {"identity"});
  for (const auto& p : candidates(allreduce(1 << 20, 8), sys)) CHECK(p.algorithm != "hierarchical");
}

namespace {

// The messages (sends) and ops of the schedule a spec builds: what plan_size estimates.
std::pair<uint64_t, uint64_t> built_size(const sched::BuildSpec& spec) {
  const auto s = sched::build_schedule(spec);
  uint64_t messages = 0, ops = 0;
  for (const auto& r : s.ranks) {
    ops += r.ops.size();
    for (const auto& op : r.ops) messages += op.kind == sched::OpKind::Send;
  }
  return {messages, ops};
}

}  // namespace

TEST_CASE("plan_size: the messages and ops of the schedules the builders make", "[policy]") {
  // Every algorithm of every collective, uncompressed and compressed, pipelined in 4 chunks
  // where it pipelines, on 64 ranks (8 a node) and on 256 of 8 and of 1 a node: the estimate is what the candidates' limits read, so it
  // must track the built schedule — messages within 2%, ops within a factor of 1.6. PAT's
  // messages carry every block of a step here (aggregate 0); NCCL's aggregation is below.
  for (int n : {64, 256}) {
    for (int g : {1, 8}) {
      for (auto coll : {sched::Collective::AllReduce, sched::Collective::ReduceScatter, sched::Collective::AllGather,
                        sched::Collective::Broadcast, sched::Collective::AllToAll}) {
        for (const std::string& algo : sched::algorithm_names(coll)) {
          if ((algo == "hierarchical") != (g > 1) && algo != "nccl-tree" && algo != "pxn") continue;
          if (algo == "nvls" || algo == "nvls-tree") continue;  // a node's GPUs each: below
          const bool allreduce_hier = algo == "hierarchical" && coll == sched::Collective::AllReduce;
          for (const char* inter : {"ring", "recursive", "tree", "direct"}) {
            if (!allreduce_hier && std::string(inter) != "ring") continue;
            const bool pipelines = (algo == "ring" && coll != sched::Collective::AllToAll) || algo == "chain" ||
                                   algo == "nccl-tree" ||
                                   (allreduce_hier && std::string(inter) != "tree");
            for (uint32_t chunks : {1u, 4u})
            for (const char* codec : {"identity", "gauss-exp"}) {
              if (chunks > 1 && !pipelines) continue;
              if (algo == "nccl-tree" && std::string(codec) != "identity") continue;  // NCCL's: raw data only
              Plan p;
              p.algorithm = algo;
              p.inter = inter;
              p.chunks = chunks;
              p.codec = codec;
              p.placement = std::string(codec) == "identity" ? sched::Placement::None
                            : (coll == sched::Collective::AllGather || coll == sched::Collective::Broadcast) && algo != "pat"
                                ? sched::Placement::CompressOnce
                                : sched::Placement::PerHop;
              if (coll == sched::Collective::AllToAll && algo == "direct" && p.placement != sched::Placement::None)
                continue;
              CallInfo info = allreduce(uint64_t{1} << 22, n);
              info.collective = coll;
              sched::BuildSpec spec;
              spec.collective = coll;
              spec.algorithm = algo;
              spec.placement = p.placement;
              spec.nranks = n;
              spec.count = count_for(coll, info.bytes, info.dtype, n);
              spec.gpus_per_node = g;
              spec.inter = inter;
              spec.pipe.chunks = chunks;
              const auto [messages, ops] = built_size(spec);
              const PlanSize z = plan_size(p, info, g);
              CAPTURE(n, g, p.describe(), sched::collective_name(coll), messages, ops, z.messages, z.ops);
              CHECK(static_cast<double>(z.messages) == Approx(static_cast<double>(messages)).epsilon(0.02));
              CHECK(z.ops <= 1.6 * static_cast<double>(ops));
              CHECK(z.ops >= static_cast<double>(ops) / 1.6);
              CHECK(z.quadratic == (algo == "ring" || algo == "rail-ring" || algo == "pairwise" || algo == "direct" ||
                                    algo == "pxn" ||
                                    (algo == "hierarchical" && (coll != sched::Collective::AllReduce ||
                                                                std::string(inter) == "ring" ||
                                                                std::string(inter) == "direct")) ||
                                    (algo == "recursive" && p.placement == sched::Placement::CompressOnce)));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("plan_size: NCCL's own PXN exchange, its relayed blocks in pieces", "[policy][pxn][p2p]") {
  // 64 ranks, 8 a node: at 4 MB a block is 64 KiB (one piece); at 1 GB 16 MiB (8 pieces).
  for (uint64_t bytes : {uint64_t{4} << 20, uint64_t{1} << 30}) {
    CallInfo info = allreduce(bytes, 64);
    info.collective = sched::Collective::AllToAll;
    Plan p;
    p.algorithm = "pxn";
    p.nccl_kernels = true;
    sched::BuildSpec spec;
    spec.collective = info.collective;
    spec.algorithm = "pxn";
    spec.nranks = 64;
    spec.count = count_for(info.collective, info.bytes, info.dtype, 64);
    spec.gpus_per_node = 8;
    spec.nccl_p2p_channels = 16;  // NCCL's own exchange, as flow_spec sets it
    const auto [messages, ops] = built_size(spec);
    const PlanSize z = plan_size(p, info, 8);
    CAPTURE(bytes, messages, ops, z.messages, z.ops);
    CHECK(z.messages == messages);
    CHECK(z.ops <= 1.6 * static_cast<double>(ops));
    CHECK(z.ops >= static_cast<double>(ops) / 1.6);
  }
}

TEST_CASE("plan_size: NVLS on one node and NVLS-Tree across nodes, NCCL's channels and loops, merged or not",
          "[policy][nvls]") {
  for (auto [nodes, g] : std::vector<std::pair<int, int>>{{1, 4}, {1, 8}, {2, 8}, {5, 4}})
    for (uint32_t chunks : {1u, 7u})
    for (bool nccl_kernels : {false, true}) {  // NCCL's: its channels merged (flow_spec)
      const int n = nodes * g;
      Plan p;
      p.algorithm = nodes == 1 ? "nvls" : "nvls-tree";
      p.channels = 16;
      p.chunks = chunks;
      p.nccl_kernels = nccl_kernels;
      const CallInfo info = allreduce(uint64_t{64} << 20, n);
      sched::BuildSpec spec;
      spec.algorithm = p.algorithm;
      spec.nranks = n;
      spec.gpus_per_node = g;
      spec.count = count_for(info.collective, info.bytes, info.dtype, n);
      spec.pipe = {chunks, 16, nccl_kernels};
      const auto [messages, ops] = built_size(spec);
      const PlanSize z = plan_size(p, info, g);
      CAPTURE(nodes, g, chunks, nccl_kernels, messages, ops, z.messages, z.ops);
      CHECK(z.messages == messages);
      CHECK(z.ops <= 1.6 * static_cast<double>(ops));
      CHECK(z.ops >= static_cast<double>(ops) / 1.6);
      CHECK_FALSE(z.quadratic);  // at most a node's GPUs squared, times the nodes
    }
}

TEST_CASE("plan_size: PAT with NCCL's aggregation, channels and loops, merged or not", "[policy][pat]") {
  for (int n : {8, 13, 64})
    for (uint32_t aggregate : {0u, 1u, 2u, 8u})
      for (uint32_t chunks : {1u, 3u})
        for (bool nccl_kernels : {false, true})  // NCCL's: its channels merged (flow_spec)
          for (auto coll : {sched::Collective::AllGather, sched::Collective::ReduceScatter}) {
            Plan p;
            p.algorithm = "pat";
            p.channels = 4;
            p.chunks = chunks;
            p.aggregate = aggregate;
            p.nccl_kernels = nccl_kernels;
            CallInfo info = allreduce(uint64_t{16} << 20, n);
            info.collective = coll;
            sched::BuildSpec spec;
            spec.collective = coll;
            spec.algorithm = "pat";
            spec.nranks = n;
            spec.count = count_for(coll, info.bytes, info.dtype, n);
            spec.pipe = {chunks, 4, nccl_kernels};
            spec.aggregate = aggregate;
            const auto [messages, ops] = built_size(spec);
            const PlanSize z = plan_size(p, info, 1);
            CAPTURE(n, aggregate, chunks, nccl_kernels, sched::collective_name(coll), messages, ops, z.messages, z.ops);
            CHECK(z.messages == messages);
            CHECK(z.ops <= 1.6 * static_cast<double>(ops));
            CHECK(z.ops >= static_cast<double>(ops) / 1.6);
            CHECK(z.quadratic == (aggregate == 1));
          }
}

TEST_CASE("candidates at 16,384 ranks: only schedules small enough to build, price and simulate", "[policy]") {
  // The hierarchical allreduce with a ring across 2,048 nodes has about 200 million ops
  // (planning it took more than 18 GB); the hierarchical reduce-scatter, allgather and
  // all-to-all ring or exchange across the nodes too. What is left is built here, each under
  // the ops limit.
  const auto t = topo::load_topology(kRoot + "/topologies/fat-tree-16k.yaml");
  const auto cal = calib::zero_calibration();
  const System sys = system_of(t, cal, {"identity", "gauss-exp"});
  const auto ar = candidates(allreduce(1 << 28, 16384), sys);
  std::set<std::string> algos;
  for (const auto& p : ar) algos.insert(algorithm_label(p, sched::Collective::AllReduce));
  CHECK(algos == std::set<std::string>{"recursive", "tree", "hierarchical/recursive", "hierarchical/tree"});
  for (const auto& p : ar) {
    if (p.codec == "identity") continue;  // the compressed twin has every op of it and more
    CAPTURE(p.describe());
    const auto s = sched::build_schedule(build_spec(p, allreduce(1 << 28, 16384), t));
    uint64_t ops = 0;
    for (const auto& r : s.ranks) ops += r.ops.size();
    CHECK(ops <= 20'000'000u);
  }
  CallInfo rs = allreduce(1 << 28, 16384);
  rs.collective = sched::Collective::ReduceScatter;
  for (const auto& p : candidates(rs, sys)) CHECK(p.algorithm == "recursive");
  CallInfo a2a = rs;
  a2a.collective = sched::Collective::AllToAll;
  CHECK(candidates(a2a, sys).empty());
  double predicted = 0;
  CHECK_THROWS_WITH(make_policy("adaptive")->choose(a2a, sys, &predicted),
                    Catch::Contains("no candidate plan for all-to-all over 16384 ranks"));
}
