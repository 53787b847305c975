// tools/calibrate.h — `compcoll-bench calibrate`: times every codec's encode and decode, the
// reduce kernel and a plain copy over sizes on real tensors and writes the calibration file
// the simulator reads (docs/CALIBRATION.md). A CalibrationDevice hides where the kernels run
// (host codecs or CUDA kernels); the driver in calibrate.cpp owns sizes, inputs, the table and
// the file. Nothing here invents a figure: every point is the median of timed runs.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "calibration/calibration.h"
#include "codec/codec.h"

namespace compcoll::bench {

// The device asked for cannot run here (no GPU, a build without CUDA). One line.
class DeviceUnavailable : public std::runtime_error {
 public:
  using runtime_error::runtime_error;
};

struct TimingOptions {
  double min_time = 0.1;  // seconds of timed runs per point, at least
  int min_samples = 5;    // timed samples per point, at least (after one untimed warm-up)
};

struct Measurement {
  double seconds = 0;  // median of the samples
  int samples = 0;
  int64_t wrong = -1;  // elements that differ in the separate correctness pass; -1: no check
};

class CalibrationDevice {
 public:
  virtual ~CalibrationDevice() = default;
  // The `device:` line of the file ("AMD EPYC 7763 64-Core Processor", "NVIDIA H100 ...").
  virtual std::string name() const = 0;
  // Free-form `machine:` entries (key, value), written as YAML strings.
  virtual std::vector<std::pair<std::string, std::string>> machine() const = 0;
  // How a sample is taken, for the file's statement.
  virtual std::string method() const = 0;
  // Makes `input` (host, the largest size) the data of every following measure().
  virtual void load(DType dtype, const std::vector<uint8_t>& input) = 0;
  // Times `op` over the first `bytes` bytes of the loaded input (codec: compress and
  // decompress only), then checks the result in a separate untimed pass.
  virtual Measurement measure(calib::Op op, const Codec* codec, uint64_t bytes, const TimingOptions& opt) = 0;
};

std::unique_ptr<CalibrationDevice> make_host_device();
// Throws DeviceUnavailable when this build has no CUDA or no device is present.
std::unique_ptr<CalibrationDevice> make_cuda_device();

// Median of the values (sorts a copy); 0 for none.
double median(std::vector<double> v);

// `compcoll-bench calibrate ...`; returns the exit code (0 ok, 1 a check failed, 2 bad input).
int run_calibrate(int argc, char** argv);

}  // namespace compcoll::bench
