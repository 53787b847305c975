// shared/calibration/ratio_model.h — the compression ratio a plan can expect for a tensor kind
// and dtype, measured by compressing real tensors with the host codecs (the simulator's message
// sizes at scale, and later the cost model's). Ratio = payload bytes / uncompressed bytes; the
// stream header and chunk table are counted separately by whoever sizes a message.
#pragma once

#include <string>

#include "util/dtype.h"

namespace compcoll::calib {

struct MeasuredRatio {
  double ratio = 1.0;
  size_t files = 0;
  uint64_t bytes = 0;   // uncompressed bytes measured
  std::string source;   // "measured on N files DIR/KIND.*.DTYPE.npy (B bytes)" or "fixed in FILE"
};

// Compresses every DIR/KIND.*.DTYPE.npy with `codec` (default chunking). Throws
// std::runtime_error naming the folder and pattern when no file matches or the codec is unknown.
MeasuredRatio measure_ratio(const std::string& codec, DType dtype, const std::string& dir, const std::string& kind);

}  // namespace compcoll::calib
