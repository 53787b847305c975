// shared/util/splitmix64.h — the splitmix64 generator (Steele, Lea, Flood): the one seeded
// random stream of the project, identical on every platform. Not for cryptography.
#pragma once

#include <cstdint>

namespace compcoll {

struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

}  // namespace compcoll
