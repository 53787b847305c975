// tools/calibrate.h — `compcoll-bench calibrate`: times every codec's encode and decode, the
// reduce kernel and a plain copy over sizes on real tensors and writes the calibration file
// the simulator reads (docs/CALIBRATION.md). A CalibrationDevice hides where the kernels run
// (host codecs or CUDA kernels); the driver in calibrate.cpp owns sizes, inputs, the selection
// (--dtype, --codec, --ops), the table and the file, which it rewrites after every finished
// curve (complete: false until the last one). Nothing here invents a figure: every point is the
// median of timed runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
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
  // Host with --concurrent N > 1: the same op timed the same way with the other threads idle
  // (the op alone on the host); 0: not measured.
  double alone_seconds = 0;
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
  // Times `op` over the first `bytes` bytes of the loaded input (codec: compress, decompress
  // and decode_add only; decode_add on a GPU only), then checks the result in a separate
  // untimed pass. Compress and
  // decompress of one codec and size share one check (an encode and a decode of that size):
  // the second of them reuses the first one's count.
  virtual Measurement measure(calib::Op op, const Codec* codec, uint64_t bytes, const TimingOptions& opt) = 0;
};

// Host compress and decompress are timed on buffers taken in turn, `copies` of each (input,
// stream, output), so that a sample reads its data from the shared cache, not from what the
// last samples left in the core's own caches: enough copies of `bytes` to cover half the
// last-level cache (`cache_bytes`, 0: unknown, taken as 32 MiB), one for sizes past that.
// Inside a collective a codec op's data was written by another op or rank; timed on one warm
// buffer the codecs ran 1.1-1.3x faster than they do there (docs/CALIBRATION.md).
constexpr uint64_t kUnknownCacheBytes = uint64_t{32} << 20;
uint32_t codec_buffer_copies(uint64_t bytes, uint64_t cache_bytes);

// Elements of `dtype` that differ between `a` and `b` (`bytes` bytes each, a multiple of the
// element size). One memcmp when they agree; element by element only when they do not.
int64_t count_wrong(DType dtype, const uint8_t* a, const uint8_t* b, uint64_t bytes);

// The host round trip (encode, then decode) of growing prefixes of one input: what a lossy
// codec's result is checked against. Chunks are encoded and decoded independently of each
// other (docs/FORMAT.md), so the round trip of the first n elements agrees, chunk for chunk,
// with the round trip of the first m > n elements wherever n ends on a chunk boundary. get()
// therefore keeps the whole chunks of the last prefix and codes only what is new, in pieces of
// whole chunks on several threads; a prefix that ends inside a chunk codes that chunk alone.
// Each piece is a complete encode() and decode() of its elements. The calibrate tests check
// that the result equals one encode() and decode() of the whole prefix.
class RoundTripReference {
 public:
  // Forgets what was coded. `input` must hold `capacity` bytes and outlive the next get()s.
  void reset(const Codec* codec, DType dtype, const uint8_t* input, uint64_t capacity);
  // The round trip of the first `bytes` bytes of the input (bytes <= capacity, a multiple of
  // the element size); valid until the next get() or reset(). Throws CodecError if the
  // host codec fails on the input.
  const uint8_t* get(uint64_t bytes);
  const Codec* codec() const { return codec_; }
  // Threads get() may use (default: the hardware's, at most 64).
  void set_threads(unsigned threads) { threads_ = threads ? threads : 1; }

 private:
  const Codec* codec_ = nullptr;
  DType dtype_ = DType::BF16;
  const uint8_t* input_ = nullptr;
  std::vector<uint8_t> out_;
  uint64_t whole_ = 0;  // bytes at the start of out_ that hold whole chunks' round trips
  unsigned threads_ = 0;
};

// concurrent: threads running each op at once, one of them timed (--concurrent); threads: the
// threads each codec call codes its stream's chunks on (--threads, EncodeOptions::threads).
std::unique_ptr<CalibrationDevice> make_host_device(int concurrent = 1, uint32_t threads = 1, bool warm = false);
// Throws DeviceUnavailable when this build has no CUDA or no device is present. `encode`: the
// options its encoder codes with (compcoll-bench codec --chunk; calibrate takes the defaults).
std::unique_ptr<CalibrationDevice> make_cuda_device(const EncodeOptions& encode = {});
// With a device of make_cuda_device(): cuda_decode_add (acc += decode(stream), codec/cuda/
// codec_cuda.h) of the loaded input's first `bytes` as `codec` encodes them, timed as measure()
// times, and checked against the host's decode then reduce_add. Nothing for another device or a
// codec without the fused kernel (codec::gpu_decode_adds: not fp8-hadamard, not nvcomp-ans); a
// build without CUDA has none. measure(calib::Op::DecodeAdd, ...) of such a device runs this.
std::optional<Measurement> measure_cuda_decode_add(CalibrationDevice& device, const Codec& codec, uint64_t bytes,
                                                   const TimingOptions& opt);

// With a device of make_cuda_device(): the loaded input as `messages` messages (split as a
// collective splits a buffer into blocks: equal, the first ones an element larger), coded as one
// batch (cuda_encode_batch, cuda_decode_batch: codec/cuda/codec_cuda.h) and as a call a message,
// each way timed as measure() times (all the messages a sample); the batch's streams decoded
// checked against the input (`wrong` of each). Nothing for another device, for a codec without
// batch kernels (fp8-hadamard, nvcomp-ans) or in a build without CUDA.
struct BatchMeasurement {
  Measurement encode_batch, decode_batch, encode_calls, decode_calls;
};
// `bytes`: the loaded input's first bytes (0: all of it); `calls`: also time the K calls
// (encode_calls, decode_calls; otherwise left empty).
std::optional<BatchMeasurement> measure_cuda_batch(CalibrationDevice& device, const Codec& codec, uint32_t messages,
                                                   const TimingOptions& opt, uint64_t bytes = 0, bool calls = true);
// The most messages one batch call of compcoll's CUDA codecs codes (cuda_batch_messages()); 0
// in a build without CUDA.
uint32_t cuda_batch_limit();
// Whether `codec` has batch kernels (cuda_encode_batch: identity, gauss-exp, entropy-exp).
bool cuda_batches(const Codec& codec);

// Median of the values (sorts a copy); 0 for none.
double median(std::vector<double> v);

// A command-line value read as a whole number (strtol, base 10) in [lo, hi]; nothing otherwise.
std::optional<long> whole_number(const std::string& v, long lo, long hi);
// A command-line value read as seconds (--min-time): a finite number >= 0; nothing otherwise.
std::optional<double> seconds_value(const std::string& v);
// A command-line value read as elements per chunk (--chunk): a multiple of 32 in [32, 65536],
// or "auto" (format::kAutoChunk: by each stream's size).
std::string chunk_elements_name(uint32_t chunk);  // "auto" or the number
// --chunk's error for value v, as every command that takes --chunk words it.
std::string chunk_elements_error(const std::string& v);
std::optional<uint32_t> chunk_elements_value(const std::string& v);
// "a,b, c" -> {"a", "b", "c"}: a comma list's items, blanks around them removed (an empty item
// stays, for the caller's check to refuse).
std::vector<std::string> comma_items(const std::string& v);

// `compcoll-bench calibrate ...`; returns the exit code (0 ok, 1 a check failed, 2 bad input).
// Exits 2 itself (one line on stderr) on bad arguments, inputs or an unwritable --out.
int run_calibrate(int argc, char** argv);

}  // namespace compcoll::bench
