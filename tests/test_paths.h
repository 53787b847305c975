// tests/test_paths.h — where the tests find the repository's files (models, topologies,
// experiments, calibration, tests/data): the source tree the tests were built from, unless the
// environment says otherwise (COMPCOLL_SOURCE_DIR, COMPCOLL_TEST_DATA_DIR), as the relocatable
// bundle's test runner does (scripts/bundle.sh). Included into every test file by the build.
#pragma once

#include <cstdlib>

namespace compcoll::test {
inline const char* env_or(const char* name, const char* built) {
  const char* v = std::getenv(name);
  return v && *v ? v : built;
}
}  // namespace compcoll::test

#define COMPCOLL_SOURCE_DIR ::compcoll::test::env_or("COMPCOLL_SOURCE_DIR", COMPCOLL_SOURCE_DIR_BUILT)
#define COMPCOLL_TEST_DATA_DIR ::compcoll::test::env_or("COMPCOLL_TEST_DATA_DIR", COMPCOLL_TEST_DATA_DIR_BUILT)
