// tools/pipeline.h — `compcoll-bench pipeline`: a message moved between two buffers of one GPU
// over a real link, PCIe through pinned host memory (each slot copied device to host, then host
// to device, the two directions at once), uncompressed and compressed with a codec whose
// kernels run beside the copies: each piece encoded on a stream of its own, its stream copied
// once it is encoded, decoded once it has arrived. Printed beside the cost model's time for the
// same pieces (policy::predict_link_transfer) over the link as measured in the same run, with
// the kernels of a calibration file. tools/pipeline_cmd.cpp runs it; tools/pipeline_cuda.cpp is
// the CUDA side (built only with CUDA); docs/compcoll-bench.md says what it measures.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "codec/codec.h"
#include "io/tensor_file.h"

namespace compcoll::bench {

// The link as measured alone: copies of `slot` bytes through pinned host memory.
struct LinkFigures {
  double d2h_alone = 0, h2d_alone = 0;  // bytes/s, one direction at a time
  double d2h_both = 0, h2d_both = 0;    // bytes/s, both directions at once (what a transfer does)
  double latency_s = 0;                 // one 4 KiB message device -> host -> device, median
  uint64_t slot_bytes = 0;
};

struct TransferResult {
  double seconds = 0;         // median of the timed runs, CUDA events: the first copy or encode
                              // starts to the last copy or decode done
  double fastest = 0, slowest = 0;
  int runs = 0;
  uint64_t link_bytes = 0;    // what crossed the link: the message, or the pieces' streams
  std::string error;          // empty: the far buffer held the message bit for bit afterwards
};

// One GPU and its link through host memory.
class LinkDevice {
 public:
  virtual ~LinkDevice() = default;
  virtual std::string name() const = 0;
  // Copies of slot_bytes through pinned host memory, `bytes` each way, timed at least
  // min_time per figure.
  virtual LinkFigures measure_link(uint64_t bytes, double min_time) = 0;
  // Makes `t` the message of the following transfers (uploaded to the near buffer).
  virtual void load(const TensorData& t) = 0;
  // The message in `pieces` pieces (sched::block_of's split of its elements), moved as it is
  // (codec null) or each piece as a stream of `codec` (lossless) with `opt`; timed runs after
  // one untimed one, for at least min_time and 5 runs, then a checked run into a poisoned far
  // buffer.
  virtual TransferResult transfer(const Codec* codec, const EncodeOptions& opt, uint32_t pieces,
                                  double min_time) = 0;
};

// Device 0, copies in slots of slot_bytes. Throws DeviceUnavailable (calibrate.h) without a
// usable GPU or in a build without CUDA.
std::unique_ptr<LinkDevice> make_cuda_link_device(uint64_t slot_bytes);

int run_pipeline(int argc, char** argv);

}  // namespace compcoll::bench
