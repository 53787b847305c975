// tools/bench_paths.cpp — see bench_paths.h. Reads /proc/self/exe to find the program's folder.
#include "bench_paths.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#ifndef COMPCOLL_BENCH_TO_SOURCE
#define COMPCOLL_BENCH_TO_SOURCE ".."  // the path from the program's folder to the source tree
#endif

namespace compcoll::bench {

namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

// `sub` (e.g. "tests/data") of the bundle or source tree the running program belongs to.
std::string beside_program(const char* sub) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return sub;  // no /proc: relative to the working folder, the repository's root
  const fs::path bin = exe.parent_path();
  const fs::path bundle = bin.parent_path();
  if (fs::exists(bundle / "env.sh", ec) && fs::is_directory(bundle / sub, ec)) return (bundle / sub).string();
  return (bin / COMPCOLL_BENCH_TO_SOURCE / sub).lexically_normal().string();
}

}  // namespace

std::string bundled_data_dir() { return beside_program("tests/data"); }

std::string default_data_dir() {
  const std::string v = env("COMPCOLL_TEST_DATA_DIR");
  return v.empty() ? bundled_data_dir() : v;
}

std::string tools_dir() {
  const std::string v = env("COMPCOLL_TOOLS_DIR");
  return v.empty() ? beside_program("tools") : v;
}

}  // namespace compcoll::bench
