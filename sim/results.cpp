// sim/results.cpp — see results.h.
#include "sim/results.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "report/report.h"
#include "report/row.h"
#include "util/json_number.h"

namespace compcoll::sim {

namespace fs = std::filesystem;
using nlohmann::json;

json regret_summary(const json& rows) {
  struct Cell {
    double oracle = NAN, best_static = NAN;
    std::map<std::string, double> time;  // policy -> time
  };
  std::map<std::string, Cell> cells;  // by topology, ranks and cell
  for (const json& r : rows) {
    if (!r.value("error", std::string()).empty()) continue;
    const std::string key = r["topology"].get<std::string>() + "/" + std::to_string(r["ranks"].get<int>()) + "/" +
                            std::to_string(r["cell"].get<size_t>());
    Cell& c = cells[key];
    const std::string pol = r["policy"];
    const double t = r["time_us"].get<double>();
    if (pol == "oracle") c.oracle = t;
    else if (pol != "static") c.time[pol] = t;
    else if (r.value("note", json()).is_null())  // not a plan that runs only ungrouped (Row::note)
      c.best_static = std::isnan(c.best_static) ? t : std::min(c.best_static, t);
  }
  std::map<std::string, std::vector<double>> regrets;
  std::map<std::string, size_t> within, worse_static;
  for (const auto& [key, cell] : cells)
    for (const auto& [pol, t] : cell.time) {
      if (!(cell.oracle > 0)) continue;
      const double r = t / cell.oracle - 1;
      regrets[pol].push_back(r);
      if (r <= 0.05) ++within[pol];
      if (cell.best_static > 0 && t > 1.01 * cell.best_static) ++worse_static[pol];
    }
  json out = json::array();
  for (auto& [pol, v] : regrets) {
    std::sort(v.begin(), v.end());
    const double median = v[v.size() / 2], p95 = v[std::min(v.size() - 1, static_cast<size_t>(0.95 * v.size()))];
    out.push_back({{"policy", pol},          {"cells", v.size()},  {"within_5pct", within[pol]},
                   {"median_regret", median}, {"p95_regret", p95}, {"max_regret", v.back()},
                   {"worse_than_static_by_1pct", worse_static[pol]}});
  }
  return out;
}

std::string regret_lines(const json& summary) {
  std::string s;
  for (const json& p : summary) {
    const size_t n = p["cells"], within = p["within_5pct"];
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "# regret vs oracle, %s: %zu cells, %zu within 5%% (%.1f%%), median %.4f, p95 %.4f, max %.4f; "
                  "more than 1%% slower than static in %zu\n",
                  p["policy"].get<std::string>().c_str(), n, within, 100.0 * within / n, p["median_regret"].get<double>(),
                  p["p95_regret"].get<double>(), p["max_regret"].get<double>(),
                  p["worse_than_static_by_1pct"].get<size_t>());
    s += buf;
  }
  return s;
}

namespace {

json read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error(p.string() + ": cannot read (is it a shard's --out folder?)");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw std::runtime_error(p.string() + ": not a results file (" + e.what() + ")");
  }
}

// A CSV's lines after the header; a quoted field may hold a newline only when it is an
// error message, which compcoll-sim writes on one line, so lines are rows.
std::vector<std::string> csv_rows(const fs::path& p, std::string* header) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error(p.string() + ": cannot read");
  std::vector<std::string> lines;
  std::string line;
  if (!std::getline(in, *header)) throw std::runtime_error(p.string() + ": empty");
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

struct Shard {
  json doc;
  std::string header;
  std::vector<std::string> lines;
};

// The shards' rows (JSON with the CSV line beside), in the unsharded order: by cell, and within
// a cell in the order its shard wrote them.
void merge_rows(std::vector<Shard>& shards, const std::string& key, json& rows, std::vector<std::string>& lines) {
  struct Ref {
    size_t cell, shard, index;
  };
  std::vector<Ref> refs;
  for (size_t s = 0; s < shards.size(); ++s)
    for (size_t i = 0; i < shards[s].doc[key].size(); ++i) refs.push_back({shards[s].doc[key][i]["cell"].get<size_t>(), s, i});
  std::stable_sort(refs.begin(), refs.end(), [](const Ref& a, const Ref& b) { return a.cell < b.cell; });
  for (const Ref& r : refs) {
    rows.push_back(shards[r.shard].doc[key][r.index]);
    lines.push_back(shards[r.shard].lines[r.index]);
  }
}

// One entry per group: the statistics of every shard that simulated part of it, summed.
json merge_topologies(const std::vector<Shard>& shards) {
  std::map<size_t, json> by_group;
  for (const Shard& s : shards)
    for (const json& t : s.doc.value("topologies", json::array())) {
      const size_t g = t["group"];
      auto [it, fresh] = by_group.emplace(g, t);
      if (fresh) continue;
      json& m = it->second;
      for (const char* k : {"messages", "calls_wall_s"})
        if (t.contains(k)) m[k] = m[k].get<double>() + t[k].get<double>();
      for (const char* k : {"platform_wall_s", "peak_rss_kb"})
        if (t.contains(k)) m[k] = std::max(m[k].get<double>(), t[k].get<double>());
      if (t.contains("error")) m["error"] = t["error"];
    }
  json out = json::array();
  for (auto& [g, t] : by_group) {
    if (t.contains("messages")) {
      t["messages"] = static_cast<uint64_t>(t["messages"].get<double>());
      const double wall = t["calls_wall_s"].get<double>();
      t["messages_per_wall_s"] = wall > 0 ? t["messages"].get<double>() / wall : 0.0;
    }
    out.push_back(t);
  }
  return out;
}

}  // namespace

void merge_shards(const std::vector<fs::path>& dirs, const fs::path& out) {
  if (dirs.empty()) throw std::runtime_error("no shard folders");
  std::vector<Shard> shards;
  std::vector<int> seen;
  bool plans = false;
  for (const fs::path& d : dirs) {
    Shard s;
    const fs::path file = d / "results.json";
    s.doc = read_json(file);
    plans = s.doc.contains("plans");
    const std::string key = plans ? "plans" : "rows";
    const fs::path csv = d / (plans ? "plans.csv" : "results.csv");
    s.lines = csv_rows(csv, &s.header);
    int index = 0, count = 0;
    // What the merge reads of a shard, checked here so that a damaged file is named.
    try {
      // A whole number from 0 to 2^31 - 1 (a fraction would be cut short, a negative one wrap,
      // in silence).
      const auto whole = [](const json& v, const std::string& what) {
        const auto n = util::natural_number(v);
        if (!n || *n > INT32_MAX) throw std::runtime_error(what + " " + v.dump() + " is not a whole number from 0 to 2^31 - 1");
        return static_cast<int>(*n);
      };
      const json& sh = s.doc.value("shard", json{{"index", 1}, {"count", 1}});
      index = whole(sh.at("index"), "shard.index");
      count = whole(sh.at("count"), "shard.count");
      if (index < 1 || index > count)
        throw std::runtime_error("shard " + std::to_string(index) + " of " + std::to_string(count));
      if (!s.doc.at(key).is_array()) throw std::runtime_error("'" + key + "' is not a list");
      for (const json& r : s.doc[key]) whole(r.at("cell"), "a row's cell");
      for (const json& t : s.doc.value("topologies", json::array())) whole(t.at("group"), "a topology's group");
      if (!plans && s.doc.contains("regret_summary")) (void)regret_summary(s.doc[key]);
    } catch (const std::exception& e) {
      throw std::runtime_error(file.string() + ": not a results file of compcoll-sim (" + e.what() + ")");
    }
    const json& first = shards.empty() ? s.doc : shards[0].doc;
    if (first["experiment"] != s.doc["experiment"] || first.value("shard", json())["count"] != count ||
        first.contains("plans") != plans)
      throw std::runtime_error((d / "results.json").string() + ": not a shard of the same run as " +
                               (dirs[0] / "results.json").string() + " (experiment, its --set values, shard count or --plans-only differ)");
    if (std::find(seen.begin(), seen.end(), index) != seen.end())
      throw std::runtime_error((d / "results.json").string() + ": shard " + std::to_string(index) + " given twice");
    if (s.doc.value("complete", false) != true)
      throw std::runtime_error((d / "results.json").string() + ": the shard did not finish (no \"complete\": true)");
    if (s.lines.size() != s.doc[key].size())
      throw std::runtime_error(csv.string() + ": " + std::to_string(s.lines.size()) + " rows, but its results.json has " +
                               std::to_string(s.doc[key].size()));
    seen.push_back(index);
    shards.push_back(std::move(s));
  }
  const int count = shards[0].doc["shard"]["count"];
  if (static_cast<int>(shards.size()) != count)
    throw std::runtime_error(std::to_string(shards.size()) + " shard folders given, the run has " +
                             std::to_string(count) + " shards");
  const std::string key = plans ? "plans" : "rows";
  json doc = shards[0].doc;
  doc.erase("shard");
  // The command of the table: a shard's, without its --shard (its --out names the shard's folder).
  const std::string cmd = doc.value("command", std::string());
  const auto at = cmd.find(" --shard ");
  if (at != std::string::npos) doc["command"] = cmd.substr(0, at) + cmd.substr(std::min(cmd.size(), cmd.find(' ', at + 9)));
  doc["merged_shards"] = count;
  doc[key] = json::array();
  std::vector<std::string> lines;
  merge_rows(shards, key, doc[key], lines);
  doc["topologies"] = merge_topologies(shards);
  if (!plans && shards[0].doc.contains("regret_summary")) doc["regret_summary"] = regret_summary(doc["rows"]);
  fs::create_directories(out);
  std::string csv = shards[0].header + "\n";
  for (const auto& l : lines) csv += l + "\n";
  report::write_atomic(out / (plans ? "plans.csv" : "results.csv"), csv);
  report::write_atomic(out / "results.json", report::json_text(doc, 1));
}

}  // namespace compcoll::sim
