// shared/schedule/algorithms.h — builders of collective schedules. Each returns a Schedule
// that validate() accepts; none runs anything.
#pragma once

#include "schedule/schedule.h"

namespace compcoll::sched {

// Element range [begin, end) of block b when `count` elements are split into `parts` blocks
// as evenly as possible (the first count % parts blocks get one more element).
struct Block {
  uint64_t begin, end;
  uint64_t count() const { return end - begin; }
};
Block block_of(uint64_t count, int parts, int b);

// Ring allreduce (reduce-scatter then allgather around the ring r -> r+1), no compression:
// 2(n-1) steps, each rank sends 2(n-1)/n of the data.
Schedule ring_allreduce(int nranks, uint64_t count, DType dtype);

}  // namespace compcoll::sched
