// tests/schedule/test_matrix.cpp — every allreduce algorithm x placement x lossless codec x
// group size: the compressed schedule's output is bitwise the uncompressed one's.
#include <catch2/catch.hpp>

#include <functional>

#include "schedule/algorithms.h"
#include "schedule/reference_executor.h"
#include "test_util.h"

using namespace compcoll;
using namespace compcoll::sched;

TEST_CASE("allreduce algorithms x placements x codecs are lossless end to end", "[schedule][matrix]") {
  using Builder = std::function<Schedule(int, uint64_t, Placement)>;
  const std::vector<std::pair<const char*, Builder>> algorithms = {
      {"ring", [](int n, uint64_t c, Placement p) { return ring_allreduce(n, c, DType::BF16, p); }},
      {"ring-piped", [](int n, uint64_t c, Placement p) { return ring_allreduce(n, c, DType::BF16, p, {2, 2}); }},
      {"recursive", [](int n, uint64_t c, Placement p) { return recursive_allreduce(n, c, DType::BF16, p); }},
      {"double-tree", [](int n, uint64_t c, Placement p) { return double_tree_allreduce(n, c, DType::BF16, p); }},
      {"hierarchical", [](int n, uint64_t c, Placement p) {
         const int g = n % 4 == 0 ? 4 : 1;
         return hierarchical_allreduce(n / g, g, c, DType::BF16, p);
       }},
  };
  for (int n : {1, 2, 3, 4, 5, 7, 8, 16, 64}) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{1003}}) {
      std::vector<std::vector<uint8_t>> inputs(n);
      for (int r = 0; r < n; ++r) inputs[r] = test::gaussian_bytes(DType::BF16, count, 0.01, 500 + r);
      for (const auto& [name, build] : algorithms) {
        const auto plain = run_reference(build(n, count, Placement::None), inputs);
        for (Placement p : {Placement::PerHop, Placement::CompressOnce, Placement::ZipCCL}) {
          if (std::string(name) == "recursive" && p == Placement::CompressOnce) continue;  // not built
          for (auto codec : codec_names()) {
            ReferenceOptions opt;
            opt.codec = find_codec(codec);
            opt.encode.chunk_elements = 128;
            CAPTURE(name, n, count, placement_name(p), codec);
            REQUIRE(run_reference(build(n, count, p), inputs, opt) == plain);
          }
        }
      }
    }
  }
}
