// real/verify.h — the inputs and expected outputs of compcoll-run's correctness pass, and the
// inputs of its timed pass. Correctness inputs are small integers (nccl-tests' idea): any
// order of fp32 additions with RNE rounding to bf16/fp16 sums them exactly, so every algorithm,
// every placement of a lossless codec and every baseline must give the same bits, and the
// expected output has a closed form a rank computes for itself in O(its output). Nothing here
// communicates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedule/schedule.h"

namespace compcoll::real {

// Correctness input of `rank` for schedule `s` (input_count elements of s.dtype).
std::vector<uint8_t> integer_input(const sched::Schedule& s, int rank);
// What `rank`'s output must be, bit for bit, for those inputs (output_count elements).
std::vector<uint8_t> expected_output(const sched::Schedule& s, int rank);
// Elements whose bits differ (sizes must match; a size mismatch counts every element).
uint64_t count_wrong(DType dtype, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want);
// All-to-all: the elements each rank sends each rank (Schedule::count is the total);
// ScheduleError unless every pair exchanges the same count.
uint64_t alltoall_count(const sched::Schedule& s);
// The largest |value| the inputs use for a group of n ranks: sums of n such values stay exact.
int integer_bound(DType dtype, int nranks);

// Timed input of `rank`: `elements` elements of real data, so compression ratios are real:
// the first DIR/KIND.*.DTYPE.npy tensor (sorted by name) repeated, starting at an offset
// that differs per rank; or Gaussian N(0, 0.01²) when dir is empty. `source` receives what
// was used. Throws TensorFileError / std::runtime_error naming the folder and pattern.
std::vector<uint8_t> timing_input(DType dtype, uint64_t elements, int rank, const std::string& dir,
                                  const std::string& kind, std::string* source = nullptr);

}  // namespace compcoll::real
