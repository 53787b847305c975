// tests/config/test_yaml_robust.cpp — damaged YAML never crashes a loader or slips through
// with another kind of error: every mutation of the shipped topology, experiment, calibration,
// model and layout files either loads or fails with one config::ConfigError line that names
// the file. (Deterministic mutations: deleted, replaced and inserted characters, duplicated and
// dropped lines, truncations.)
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "calibration/calibration.h"
#include "study/experiment.h"
#include "config/yaml_node.h"
#include "test_util.h"
#include "topology/topology.h"
#include "util/text.h"
#include "workload/workload.h"

using namespace compcoll;

namespace {

const std::string kRoot = COMPCOLL_SOURCE_DIR;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Relative paths inside experiment files, made absolute so a copy elsewhere still finds them.
std::string absolutize(std::string text) {
  for (const char* dir : {"topologies/", "calibration/", "models/", "tests/data"}) {
    size_t at = 0;
    const std::string from = std::string(" ") + dir, to = " " + kRoot + "/" + dir;
    while ((at = text.find(from, at)) != std::string::npos) {
      text.replace(at, from.size(), to);
      at += to.size();
    }
  }
  return text;
}

std::string mutate(const std::string& text, test::SplitMix64& rng) {
  static const std::string alphabet = ":-[]{}#,'\" \n\t0aZ.&*!|>%@`\x1b\xff\xc3";
  std::string t = text;
  if (t.empty()) return t;
  const size_t at = rng.next() % t.size();
  switch (rng.next() % 6) {
    case 0: t.erase(at, 1 + rng.next() % 3); break;
    case 1: t[at] = alphabet[rng.next() % alphabet.size()]; break;
    case 2: t.insert(at, 1, alphabet[rng.next() % alphabet.size()]); break;
    case 3: t.resize(at); break;
    case 4: {  // duplicate the line at `at`
      const size_t b = t.rfind('\n', at) == std::string::npos ? 0 : t.rfind('\n', at) + 1;
      const size_t e = t.find('\n', at);
      t.insert(b, t.substr(b, (e == std::string::npos ? t.size() : e + 1) - b));
      break;
    }
    default: {  // drop the line at `at`
      const size_t b = t.rfind('\n', at) == std::string::npos ? 0 : t.rfind('\n', at) + 1;
      const size_t e = t.find('\n', at);
      t.erase(b, (e == std::string::npos ? t.size() : e + 1) - b);
      break;
    }
  }
  return t;
}

void hammer(const std::string& original, const std::string& name, int rounds,
            const std::function<void(const std::string&)>& load) {
  const auto path = (std::filesystem::temp_directory_path() / ("compcoll-robust-" + name)).string();
  test::SplitMix64 rng(std::hash<std::string>{}(name));
  int refused = 0;
  for (int i = 0; i < rounds; ++i) {
    const std::string text = mutate(i % 5 == 4 ? mutate(original, rng) : original, rng);
    std::ofstream(path) << text;
    try {
      load(path);
    } catch (const config::ConfigError& e) {
      ++refused;
      const std::string msg = e.what();
      if (msg.rfind(path, 0) != 0 || msg != printable(msg)) {
        CAPTURE(name, i, text, msg);
        FAIL("the error does not start with the file's name, or is not one printable line");
      }
    } catch (const std::exception& e) {
      CAPTURE(name, i, text, e.what());
      FAIL("a damaged file gave an error that is not a ConfigError");
    }
  }
  CHECK(refused > rounds / 4);  // most damage is noticed
}

}  // namespace

TEST_CASE("damaged topology files: loaded or refused in one line, never another error", "[config][robust]") {
  for (const char* f : {"dgx-h100.yaml", "h100-64gpu.yaml", "torus-1k.yaml", "dragonfly-2k.yaml"})
    hammer(read(kRoot + "/topologies/" + f), f, 250, [](const std::string& p) { topo::load_topology(p); });
}

TEST_CASE("damaged experiment files: loaded or refused in one line, never another error", "[config][robust]") {
  for (const char* f : {"smoke-sim.yaml", "whatif-fattree.yaml", "zipccl-64gpu.yaml", "dgx-h100-ring.yaml"})
    hammer(absolutize(read(kRoot + "/experiments/" + f)), f, 250, [](const std::string& p) { study::load_experiment(p); });
}

TEST_CASE("damaged calibration, model and layout files: loaded or refused in one line", "[config][robust]") {
  hammer(read(kRoot + "/calibration/h100-derived.yaml"), "h100-derived.yaml", 250,
         [](const std::string& p) { calib::load_calibration(p); });
  hammer(read(kRoot + "/models/gpt-13b.yaml"), "gpt-13b.yaml", 250, [](const std::string& p) { workload::load_model(p); });
  const auto model = workload::load_model(kRoot + "/models/gpt-13b.yaml");
  hammer(read(kRoot + "/models/layouts/gpt-13b-64gpu.yaml"), "gpt-13b-64gpu.yaml", 250,
         [&](const std::string& p) { workload::load_parallel(p, model); });
}

TEST_CASE("a key written twice in one mapping is refused, naming the key, its mapping and both lines", "[config]") {
  const auto path = (std::filesystem::temp_directory_path() / "compcoll-twice.yaml").string();
  auto error_of = [&](const std::string& text) -> std::string {
    std::ofstream(path) << text;
    try {
      config::Node::load_file(path);
    } catch (const config::ConfigError& e) {
      return e.what();
    }
    return "";
  };
  CHECK(error_of("network:\n  nodes: 8\n  tiers: 2\n  tiers: 3\n") ==
        path + ": network: key 'tiers' twice in one mapping (lines 3 and 4)");
  CHECK(error_of("name: a\nname: b\n") == path + ": (top level): key 'name' twice in one mapping (lines 1 and 2)");
  CHECK(error_of("calls:\n  - {collective: allreduce, dtype: bf16, dtype: fp32}\n") ==
        path + ": calls.0: key 'dtype' twice in one mapping (lines 2 and 2)");
  // The same key in different mappings, and a mapping reused through an alias, are fine.
  CHECK(error_of("a: {x: 1}\nb: {x: 2}\nc: &m {y: 1}\nd: *m\n").empty());
}

TEST_CASE("YAML that is not UTF-8 is refused with its line and file text reaches messages printable", "[config]") {
  try {
    config::Node::load_string("name: x\ndescription: caf\xc3\xa9 \xff\n", "f.yaml");
    FAIL("loaded");
  } catch (const config::ConfigError& e) {
    CHECK(std::string(e.what()) == "f.yaml: line 2: not UTF-8 text (byte 0xff at offset 27)");
  }
  const auto path = (std::filesystem::temp_directory_path() / "compcoll-utf8.yaml").string();
  std::ofstream(path) << "name: x\n";
  CHECK_THROWS_WITH(config::Node::load_file(path, {"name=x\xc0\xaf"}),
                    Catch::Contains("--set name=x\\xc0\\xaf: not UTF-8 text"));
  // An escape sequence and a C1 control written as YAML escapes: valid UTF-8, escaped in the message.
  const auto n = config::Node::load_string("\"a\\e[31mb\\x9b\": 1\nname: x\n", "f.yaml");
  try {
    n.check_no_unknown_keys();
    FAIL("no error");
  } catch (const config::ConfigError& e) {
    CHECK(std::string(e.what()) == "f.yaml: (top level): unknown key 'a [31mb\\xc2\\x9b'");
  }
}

TEST_CASE("printable and valid_utf8", "[config][text]") {
  CHECK(valid_utf8("plain, caf\xc3\xa9, \xe2\x82\xac, \xf0\x9f\x98\x80"));
  size_t at = 0;
  CHECK_FALSE(valid_utf8("ab\xc0\xaf", &at));  // overlong '/'
  CHECK(at == 2);
  CHECK_FALSE(valid_utf8("\xed\xa0\x80"));      // a surrogate
  CHECK_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  CHECK_FALSE(valid_utf8("\xe2\x82"));           // cut short
  CHECK(printable("a\tb\nc\rd") == "a b c d");
  CHECK(printable("caf\xc3\xa9") == "caf\xc3\xa9");
  CHECK(printable("x\x7fy\xffz\xc2\x85") == "x\\x7fy\\xffz\\xc2\\x85");
  CHECK(printable("\x1b[2J") == " [2J");
}

TEST_CASE("bandwidths and latencies and kernel durations the simulator cannot resolve are refused", "[config]") {
  const auto node = [](const std::string& yaml) { return config::Node::load_string(yaml, "f.yaml"); };
  CHECK(node("b: 1kB/s\n").get("b").as_bandwidth() == 1e3);
  CHECK_THROWS_WITH(node("b: 1e-300GB/s\n").get("b").as_bandwidth(),
                    "f.yaml: b: expected a bandwidth of at least 1kB/s, got '1e-300GB/s'");
  CHECK(node("t: 10s\n").get("t").as_time() == 10);
  CHECK_THROWS_WITH(node("t: 1e30us\n").get("t").as_time(), "f.yaml: t: expected a latency of at most 10s, got '1e30us'");
  const auto path = (std::filesystem::temp_directory_path() / "compcoll-slow-kernel.yaml").string();
  std::ofstream(path) << "device: x\nsource: derived\ncurves:\n"
                         "  - {op: reduce, dtype: any, points: [[4096, 1.0e-5], [1073741824, 1.0e+300]]}\n";
  CHECK_THROWS_WITH(calib::load_calibration(path),
                    Catch::Contains("curves.0.points.1: expected at most 1e6 seconds (more than 11 days is no kernel)"));
}
