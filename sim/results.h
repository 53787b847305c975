// sim/results.h — compcoll-sim's results files beyond the rows themselves: the regret summary
// (per policy, against the oracle, from the rows), and the merge of shards (--shard I/N)
// into the table one unsharded run writes.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace compcoll::sim {

// Per policy (not static, not oracle), over the cells whose oracle simulated: regret = time /
// the oracle's - 1; cells within 5% of the oracle; cells more than 1% slower than the cell's
// fastest static row that can run (not one with a note: a plan compcoll-run refuses on NCCL,
// simulated ungrouped) (the targets of docs/POLICIES.md). From the rows of results.json.
nlohmann::json regret_summary(const nlohmann::json& rows);
// Its lines for the table ("# regret vs oracle, adaptive: ...").
std::string regret_lines(const nlohmann::json& summary);

// Merges the results of shards (each DIR holds results.json and results.csv, or plans.json
// data and plans.csv from --plans-only) into OUT: rows ordered as an unsharded run orders
// them, CSV lines carried verbatim, the topologies' statistics summed, the regret summary
// recomputed. Throws std::runtime_error naming the file when a shard is missing, incomplete,
// from another experiment or shard count, or given twice.
void merge_shards(const std::vector<std::filesystem::path>& shards, const std::filesystem::path& out);

}  // namespace compcoll::sim
