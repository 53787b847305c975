// shared/config/yaml_node.cpp — see yaml_node.h.
#include "config/yaml_node.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "util/text.h"

namespace compcoll::config {
namespace {

// Splits "12.5GB/s" into 12.5 and "GB/s"; throws when there is no leading number.
std::pair<double, std::string> number_and_unit(const std::string& s) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw std::invalid_argument("no number");
  }
  std::string unit = s.substr(pos);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.erase(unit.begin());
  if (!std::isfinite(v) || v < 0) throw std::invalid_argument("not a finite non-negative number");
  return {v, unit};
}

}  // namespace

double parse_bandwidth(const std::string& s) {
  auto [v, unit] = number_and_unit(s);
  static const std::vector<std::pair<std::string, double>> units = {
      {"", 1},         {"B/s", 1},        {"Bps", 1},        {"kB/s", 1e3},    {"KB/s", 1e3},  {"MB/s", 1e6},
      {"GB/s", 1e9},   {"TB/s", 1e12},    {"kBps", 1e3},     {"KBps", 1e3},    {"MBps", 1e6},  {"GBps", 1e9},
      {"TBps", 1e12},  {"b/s", 1 / 8.0},  {"bps", 1 / 8.0},  {"kb/s", 1e3 / 8}, {"Kb/s", 1e3 / 8}, {"Mb/s", 1e6 / 8},
      {"Gb/s", 1e9 / 8}, {"Tb/s", 1e12 / 8}, {"Mbps", 1e6 / 8}, {"Gbps", 1e9 / 8}, {"Tbps", 1e12 / 8}};
  for (const auto& [name, f] : units)
    if (unit == name) return v * f;
  throw std::invalid_argument("unknown bandwidth unit '" + unit + "'");
}

double parse_time(const std::string& s) {
  auto [v, unit] = number_and_unit(s);
  static const std::vector<std::pair<std::string, double>> units = {
      {"", 1}, {"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
  for (const auto& [name, f] : units)
    if (unit == name) return v * f;
  throw std::invalid_argument("unknown time unit '" + unit + "'");
}

std::string yaml_quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o + "\"";
}

std::string yaml_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.5g", v);
  return buf;
}

uint64_t parse_bytes(const std::string& s) {
  auto [v, unit] = number_and_unit(s);
  static const std::vector<std::pair<std::string, double>> units = {
      {"", 1},     {"B", 1},          {"KB", 1e3},       {"kB", 1e3},        {"MB", 1e6},  {"GB", 1e9},
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0}};
  for (const auto& [name, f] : units)
    if (unit == name) {
      const double b = v * f;
      if (b > 1.8e19 || b != std::floor(b)) throw std::invalid_argument("not a whole number of bytes");
      return static_cast<uint64_t>(b);
    }
  throw std::invalid_argument("unknown size unit '" + unit + "'");
}

std::string format_bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && b >= 1024 && b % 1024 == 0) b /= 1024, ++u;
  return std::to_string(b) + " " + units[u];
}

Node::Node(YAML::Node n, std::shared_ptr<const std::string> file, std::string path, std::shared_ptr<ReadKeys> read)
    : node_(std::move(n)), file_(std::move(file)), path_(std::move(path)), read_(std::move(read)) {}

namespace {

// Sets root[a][b][c] = value for "a.b.c" (sequence indices where the node is a sequence).
void apply_override(YAML::Node root, const std::string& file, const std::string& spec) {
  if (!valid_utf8(spec)) throw ConfigError(file + ": --set " + spec + ": not UTF-8 text");
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(file + ": --set " + spec + ": expected key.path=value");
  const std::string keypath = spec.substr(0, eq), value = spec.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream ss(keypath);
  for (std::string part; std::getline(ss, part, '.');) {
    if (part.empty()) throw ConfigError(file + ": --set " + spec + ": empty key in the path");
    parts.push_back(part);
  }
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node cur = chain.back();
    if (cur.IsSequence()) {
      size_t idx = 0;
      try {
        idx = std::stoul(parts[i]);
      } catch (const std::exception&) {
        throw ConfigError(file + ": --set " + keypath + ": '" + parts[i] + "' is not an index of a list");
      }
      if (idx >= cur.size()) throw ConfigError(file + ": --set " + keypath + ": index " + parts[i] + " out of range");
      chain.push_back(cur[idx]);
    } else {
      if (cur.IsDefined() && !cur.IsNull() && !cur.IsMap())
        throw ConfigError(file + ": --set " + keypath + ": '" + parts[i] + "' is not a mapping");
      chain.push_back(cur[parts[i]]);
    }
  }
  YAML::Node parsed;
  try {
    parsed = YAML::Load(value);
  } catch (const YAML::Exception& e) {
    throw ConfigError(file + ": --set " + keypath + ": the value is not YAML (" + e.msg + "): " + value);
  }
  YAML::Node last = chain.back();
  if (last.IsSequence()) {
    size_t idx = 0;
    try {
      idx = std::stoul(parts.back());
    } catch (const std::exception&) {
      throw ConfigError(file + ": --set " + keypath + ": '" + parts.back() + "' is not an index of a list");
    }
    if (idx >= last.size()) throw ConfigError(file + ": --set " + keypath + ": index out of range");
    last[idx] = parsed;
  } else {
    last[parts.back()] = parsed;
  }
}

// A key written twice in one mapping: YAML forbids it and yaml-cpp keeps both, of which a lookup
// sees the first, so the second would be ignored without a word. ConfigError naming the path
// and both lines. (Aliased nodes are checked where they are written; depth bounds a node
// aliased inside itself.)
void check_unique_keys(const YAML::Node& n, const std::string& file, const std::string& path, int depth = 0) {
  if (depth > 256) return;
  auto child = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
  if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) check_unique_keys(n[i], file, child(std::to_string(i)), depth + 1);
  } else if (n.IsMap()) {
    std::map<std::string, int> seen;  // key -> its line
    for (const auto& kv : n) {
      if (!kv.first.IsScalar()) continue;  // Node::keys() names a key that is not plain
      const std::string k = kv.first.Scalar();
      const int line = kv.first.Mark().line + 1;
      const auto [it, fresh] = seen.emplace(k, line);
      if (!fresh)
        throw ConfigError(file + ": " + (path.empty() ? std::string("(top level)") : path) + ": key '" + k +
                          "' twice in one mapping (lines " + std::to_string(it->second) + " and " + std::to_string(line) +
                          ")");
      check_unique_keys(kv.second, file, child(k), depth + 1);
    }
  }
}

}  // namespace

Node Node::load_file(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  Node n = load_string(ss.str(), path);
  for (const auto& o : overrides) apply_override(n.node_, n.file(), o);
  return n;
}

Node Node::load_string(const std::string& text, const std::string& name) {
  // YAML is Unicode text: a byte that is not UTF-8 would reach names, messages and results
  // files (whose JSON must be UTF-8), so it is refused here, with its line.
  if (size_t bad = 0; !valid_utf8(text, &bad)) {
    const auto at = text.begin() + static_cast<std::ptrdiff_t>(bad);
    const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), at, '\n'));
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[bad]));
    throw ConfigError(name + ": line " + std::to_string(line) + ": not UTF-8 text (byte " + byte +
                      " at offset " + std::to_string(bad) + ")");
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(name + ": line " + std::to_string(e.mark.line + 1) + ": YAML syntax error: " + e.msg);
  }
  if (!root.IsMap()) throw ConfigError(name + ": expected a YAML mapping at the top level");
  check_unique_keys(root, name, "");
  return Node(root, std::make_shared<const std::string>(name), "", std::make_shared<ReadKeys>());
}

std::string Node::child_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

void Node::fail(const std::string& what) const {
  throw ConfigError(*file_ + ": " + (path_.empty() ? std::string("(top level)") : path_) + ": " + what);
}

bool Node::has(const std::string& key) const {
  const YAML::Node& c = node_;
  return c.IsMap() && c[key].IsDefined() && !c[key].IsNull();
}

Node Node::opt(const std::string& key) const {
  if (!node_.IsMap()) fail("expected a mapping with key '" + key + "'");
  (*read_)[path_].insert(key);
  const YAML::Node& c = node_;  // const lookup: never inserts the key
  return Node(c[key], file_, child_path(key), read_);
}

Node Node::get(const std::string& key) const {
  Node n = opt(key);
  if (!n.defined()) fail("missing key '" + key + "'");
  return n;
}

std::string Node::key_text(const YAML::Node& key) const {
  if (!key.IsScalar())
    fail("expected plain keys, got a " + std::string(key.IsMap() ? "mapping" : key.IsSequence() ? "list" : "null") +
         " as a key at line " + std::to_string(key.Mark().line + 1));
  return key.Scalar();
}

std::vector<std::string> Node::keys() const {
  std::vector<std::string> out;
  if (!node_.IsMap()) return out;
  for (const auto& kv : node_) out.push_back(key_text(kv.first));
  return out;
}

size_t Node::size() const {
  if (!node_.IsSequence()) fail("expected a list");
  return node_.size();
}

Node Node::operator[](size_t i) const {
  if (!node_.IsSequence()) fail("expected a list");
  const YAML::Node& c = node_;
  return Node(c[i], file_, child_path(std::to_string(i)), read_);
}

std::string Node::as_string() const {
  if (!node_.IsScalar()) fail("expected a scalar value");
  return node_.Scalar();
}

int64_t Node::as_int(int64_t lo, int64_t hi) const {
  const std::string s = as_string();
  size_t pos = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &pos, 0);
  } catch (const std::exception&) {
    fail("expected an integer, got '" + s + "'");
  }
  if (pos != s.size()) fail("expected an integer, got '" + s + "'");
  if (v < lo || v > hi)
    fail("expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + s);
  return v;
}

double Node::as_double() const {
  const std::string s = as_string();
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    fail("expected a number, got '" + s + "'");
  }
  if (pos != s.size() || !std::isfinite(v)) fail("expected a finite number, got '" + s + "'");
  return v;
}

bool Node::as_bool() const {
  const std::string s = as_string();
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  fail("expected true or false, got '" + s + "'");
}

double Node::as_bandwidth() const {
  const std::string s = as_string();
  double v = 0;
  try {
    v = parse_bandwidth(s);
  } catch (const std::invalid_argument& e) {
    fail("expected a bandwidth like 450GB/s or 400Gb/s, got '" + s + "' (" + e.what() + ")");
  }
  if (v <= 0) fail("expected a positive bandwidth, got '" + s + "'");
  // Far below any link or kernel, and the flow model would not resolve it: a slip of the unit.
  if (v < kMinBandwidth) fail("expected a bandwidth of at least 1kB/s, got '" + s + "'");
  return v;
}

double Node::as_time() const {
  const std::string s = as_string();
  double v = 0;
  try {
    v = parse_time(s);
  } catch (const std::invalid_argument& e) {
    fail("expected a time like 1us or 500ns, got '" + s + "' (" + e.what() + ")");
  }
  if (v > kMaxLatency) fail("expected a latency of at most 10s, got '" + s + "'");
  return v;
}

uint64_t Node::as_bytes() const {
  const std::string s = as_string();
  try {
    return parse_bytes(s);
  } catch (const std::invalid_argument& e) {
    fail("expected a size like 1MB, 64KiB or 1048576, got '" + s + "' (" + e.what() + ")");
  }
}

std::string Node::get_string(const std::string& key, const std::string& dflt) const {
  Node n = opt(key);
  return n.defined() ? n.as_string() : dflt;
}

int64_t Node::get_int(const std::string& key, int64_t dflt, int64_t lo, int64_t hi) const {
  Node n = opt(key);
  return n.defined() ? n.as_int(lo, hi) : dflt;
}

double Node::get_double(const std::string& key, double dflt) const {
  Node n = opt(key);
  return n.defined() ? n.as_double() : dflt;
}

std::string Node::as_choice(const std::vector<std::string>& allowed) const {
  const std::string s = as_string();
  for (const auto& a : allowed)
    if (s == a) return s;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  fail("expected one of " + list + ", got '" + s + "'");
}

void Node::check_no_unknown_keys() const {
  if (!node_.IsMap()) return;
  const auto it = read_->find(path_);
  for (const auto& kv : node_) {
    const std::string k = key_text(kv.first);
    if (it == read_->end() || !it->second.count(k)) fail("unknown key '" + k + "'");
  }
}

}  // namespace compcoll::config
