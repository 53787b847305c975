// tools/bench_paths.h — where compcoll-bench finds the repository files it reads at run time:
// the real tensors of `calibrate` (tests/data) and the ZipNN peer script (tools/zipnn_peer.py).
// In order: the environment (COMPCOLL_TEST_DATA_DIR, COMPCOLL_TOOLS_DIR; a bundle's env.sh sets
// both), then a relocatable bundle's own folders (the program in OUT/bin beside OUT/env.sh:
// OUT/tests/data, OUT/tools), then the source tree the program was built from, found by the
// path from the program's folder to it that the build compiled in (relative, so that no
// absolute path of the build machine is in the program: docs/BUNDLE.md).
// Never fails: a folder that does not exist is returned as it is, and the caller's error names it.
#pragma once

#include <string>

namespace compcoll::bench {

// The tensors calibrate reads by default: $COMPCOLL_TEST_DATA_DIR, else bundled_data_dir().
std::string default_data_dir();

// tests/data of the bundle or the source tree this program belongs to (no environment).
std::string bundled_data_dir();

// The folder of zipnn_peer.py: $COMPCOLL_TOOLS_DIR, else the bundle's or the source tree's tools/.
std::string tools_dir();

}  // namespace compcoll::bench
