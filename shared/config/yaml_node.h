// shared/config/yaml_node.h — reading YAML with errors a user can act on. Every value is read
// through a Node that knows its file and key path ("topology.yaml: node.gpu_link.bandwidth:
// expected a bandwidth like 450GB/s, got 'fast'"), and every mapping is checked for keys that
// nobody read: an unknown (misspelled) key is an error, never silently ignored.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "util/text.h"

namespace compcoll::config {

// One line: "FILE: KEY.PATH: what was expected, what was found", printable whatever the file
// holds (util/text.h).
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(const std::string& what) : std::runtime_error(printable(what)) {}
};

// The range of the figures the simulator takes from topology and calibration files: a
// bandwidth far below any link or kernel, or a latency of more than seconds, is a slip of the
// unit, and would put simulated times where the flow model and its 1e-9 s resolution do not
// hold (a clock past 1e7 s has steps of more than 1e-9 s).
constexpr double kMinBandwidth = 1e3;  // bytes/s
constexpr double kMaxLatency = 10;     // seconds

class Node {
 public:
  // Parses a file (ConfigError naming the file and line on a syntax error). Each override
  // "key.path=value" replaces or adds that scalar before anything is read (--set); a key path
  // through a sequence uses indices ("sweep.0.codec=identity").
  static Node load_file(const std::string& path, const std::vector<std::string>& overrides = {});
  // Parses text; `name` stands for the file in messages.
  static Node load_string(const std::string& text, const std::string& name);

  const std::string& file() const { return *file_; }
  const std::string& path() const { return path_; }  // "node.gpu_link" ("" at the root)
  bool is_map() const { return node_.IsMap(); }
  bool is_sequence() const { return node_.IsSequence(); }
  bool is_scalar() const { return node_.IsScalar(); }

  // Mapping access. has() marks nothing; get/opt mark the key as read.
  bool has(const std::string& key) const;
  Node get(const std::string& key) const;        // ConfigError when missing
  Node opt(const std::string& key) const;        // an undefined Node when missing (defined() false)
  bool defined() const { return node_.IsDefined() && !node_.IsNull(); }
  std::vector<std::string> keys() const;

  // Sequence access.
  size_t size() const;
  Node operator[](size_t i) const;

  // Scalars, with the expected form named in the error.
  std::string as_string() const;
  int64_t as_int(int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const;
  double as_double() const;
  bool as_bool() const;
  // bytes/s: "450GB/s", "400Gb/s", "25GBps", or a number of bytes/s; at least kMinBandwidth.
  double as_bandwidth() const;
  // seconds: "1us", "500ns", "2.5ms", "1s", or a number of seconds; at most kMaxLatency.
  double as_time() const;
  uint64_t as_bytes() const;    // "1MB" (10^6), "1MiB" (2^20), "4KB", or a number

  // Defaults for absent keys.
  std::string get_string(const std::string& key, const std::string& dflt) const;
  int64_t get_int(const std::string& key, int64_t dflt, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const;
  double get_double(const std::string& key, double dflt) const;

  // Throws unless `value` is one of `allowed`, naming them.
  std::string as_choice(const std::vector<std::string>& allowed) const;

  // Throws ConfigError naming the first key of this mapping that no get/opt read.
  void check_no_unknown_keys() const;

  [[noreturn]] void fail(const std::string& what) const;

  const YAML::Node& raw() const { return node_; }

 private:
  using ReadKeys = std::map<std::string, std::set<std::string>>;  // mapping path -> keys read
  Node(YAML::Node n, std::shared_ptr<const std::string> file, std::string path, std::shared_ptr<ReadKeys> read);
  std::string child_path(const std::string& key) const;
  std::string key_text(const YAML::Node& key) const;  // a mapping key as text; fail() if it is not a scalar

  YAML::Node node_;
  std::shared_ptr<const std::string> file_;
  std::string path_;
  std::shared_ptr<ReadKeys> read_;  // shared by every Node of one document
};

// Unit parsing shared with command-line --set values. Throw std::invalid_argument.
double parse_bandwidth(const std::string& s);
double parse_time(const std::string& s);
uint64_t parse_bytes(const std::string& s);
// The other way: "64 KiB", "1 MiB", "8 B" (the largest binary unit that divides it).
std::string format_bytes(uint64_t b);

// Writing the files the tools generate: a double-quoted YAML string (quotes and backslashes
// escaped, control characters dropped) and a number with 5 significant digits.
std::string yaml_quote(const std::string& s);
std::string yaml_number(double v);

}  // namespace compcoll::config
