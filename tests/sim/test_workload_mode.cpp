// tests/sim/test_workload_mode.cpp — where compcoll-sim runs a traced job's groups
// (sim/workload_mode.h): the bundled tp 2 x dp 2 job (tests/data/torch-trace/ddp-tp2-dp2) at 8x
// data parallelism on 64 H100s, its distinct calls placed by group_gpus as the simulation places
// them: job rank r on GPU r, so the tensor-parallel pairs stay inside a node and each
// data-parallel group takes every other GPU of the first four nodes.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "sim/workload_mode.h"
#include "topology/topology.h"
#include "workload/trace.h"

using namespace compcoll;

TEST_CASE("workload: a traced job at scale_dp 8 on h100-64gpu, group by group", "[sim][workload][trace]") {
  const std::string root = COMPCOLL_SOURCE_DIR;
  std::vector<std::string> files;
  for (int r = 0; r < 4; ++r) files.push_back(root + "/tests/data/torch-trace/ddp-tp2-dp2/rank" + std::to_string(r) + ".json");
  const workload::TraceJob job = workload::scale_data_parallel(workload::load_trace(files, {0, 2, 1}), 8);
  const topo::Topology topo = topo::load_topology(root + "/topologies/h100-64gpu.yaml");
  REQUIRE(topo.gpus_per_node == 8);
  REQUIRE(job.world == 32);

  const sim::TraceCalls calls = sim::distinct_trace_calls(job);
  std::set<std::vector<int>> dp_groups, tp_groups;
  for (const auto& call : calls.distinct.calls) {
    const std::vector<int> gpus = sim::group_gpus(call, {});
    INFO(call.kind << " on GPUs " << gpus.size());
    REQUIRE(static_cast<int>(gpus.size()) == call.group_size);
    std::map<int, int> per_node;
    for (int g : gpus) {
      REQUIRE(g >= 0);
      REQUIRE(g < job.world);  // the job's first 32 GPUs
      ++per_node[topo.node_of(g)];
    }
    if (call.group == "tp") {
      tp_groups.insert(gpus);
      CHECK(gpus.size() == 2);
      CHECK(per_node.size() == 1);  // a tensor-parallel pair inside one node
    } else {
      REQUIRE(call.group == "dp");
      CHECK(call.kind == "dp-allreduce");
      dp_groups.insert(gpus);
      // 16 ranks, 4 in each of nodes 0-3: every other GPU (the other tp rank's dp group takes the rest)
      CHECK(per_node == std::map<int, int>{{0, 4}, {1, 4}, {2, 4}, {3, 4}});
    }
  }
  std::vector<int> even, odd;
  for (int g = 0; g < 32; g += 2) even.push_back(g), odd.push_back(g + 1);
  CHECK(dp_groups == std::set<std::vector<int>>{even, odd});
  CHECK(tp_groups.size() == 16);  // pairs (2k, 2k+1), one per replica and dp rank
  for (const auto& g : tp_groups) CHECK((g[0] % 2 == 0 && g[1] == g[0] + 1));

  // Every call of every rank is one of the distinct calls, on its own group's ranks.
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    REQUIRE(calls.call_of[r].size() == job.ranks[r].calls.size());
    for (size_t c = 0; c < job.ranks[r].calls.size(); ++c) {
      const auto& d = calls.distinct.calls[calls.call_of[r][c]];
      CHECK(d.ranks == job.groups[job.ranks[r].calls[c].group].ranks);
      CHECK(d.bytes == job.ranks[r].calls[c].bytes);
    }
  }
}
