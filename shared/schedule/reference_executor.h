// shared/schedule/reference_executor.h — runs every rank's program of a schedule in-process
// over host buffers, with the host codecs for compress/decompress. It is what the tests use to
// prove a schedule computes its collective; it is not meant to be fast.
#pragma once

#include <cstdint>
#include <vector>

#include "codec/codec.h"
#include "schedule/schedule.h"

namespace compcoll::sched {

struct ReferenceOptions {
  const Codec* codec = nullptr;  // for compress ops; required if the schedule compresses
  EncodeOptions encode;
  // 0: every rank runs its program in order. Otherwise ops run in a random order (from this
  // seed) that respects only the dependencies and the per-peer message order: what a
  // concurrent executor may do. A schedule whose result changes has a missing dependency.
  uint64_t order_seed = 0;
};

// inputs[r]: rank r's input, input_count * dtype_size bytes. Returns each rank's output.
// Validates first (ScheduleError, deadlock included); a recv never blocks forever.
std::vector<std::vector<uint8_t>> run_reference(const Schedule& s,
                                                const std::vector<std::vector<uint8_t>>& inputs,
                                                const ReferenceOptions& opt = {});

// How far a (lossy) run's outputs are from a reference run's, over all ranks and elements:
// the largest absolute difference, the relative L2 error ||got - want|| / ||want|| (0 when
// both are 0) and the signal-to-noise ratio 10 log10(||want||² / ||got - want||²) in dB
// (infinite when exact). Non-finite differences count as infinite.
struct OutputError {
  double max_abs = 0;
  double rel_l2 = 0;
  double snr_db = 0;
  uint64_t elements = 0;
};
OutputError compare_outputs(DType dtype, const std::vector<std::vector<uint8_t>>& got,
                            const std::vector<std::vector<uint8_t>>& want);

}  // namespace compcoll::sched
