// tools/calibrate.cpp — the `calibrate` subcommand of compcoll-bench and its host device.
//   compcoll-bench calibrate [--device host|cuda] --out FILE.yaml [--max-bytes N] [--min-time S]
//                            [--quick] [--data DIR] [--dtype LIST] [--codec LIST] [--ops LIST]
//                            [--concurrent N] [--threads N] [--warm]
// For each dtype the bundled training tensors of that dtype (tests/data) are concatenated and
// tiled to the largest size once; every point times a prefix of that buffer. Rows are printed
// as they are measured. The file is rewritten (atomically: FILE.tmp, then renamed) after every
// finished curve with every curve so far whose checks passed: `complete: false` and a
// `missing` list until the last curve, `complete: true` then. A run killed at any point leaves
// a valid file. Errors in the arguments or the inputs: one line on stderr, exit 2.
// With --device cuda in a build with nvCOMP where libnvcomp.so.6 loads, nvCOMP's batched ANS
// (nvcomp-ans, tools/nvcomp_peer.h) is timed as a codec of the file on the same prefixes, after
// the compcoll codecs of each dtype; after each dtype's curves its ratio on the bundled tensors,
// per tensor kind, goes into the file's `ratios`.
#include "calibrate.h"

#include <sys/utsname.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

#include "bench_paths.h"
#include "codec/reduce.h"
#include "config/yaml_node.h"
#include "io/tensor_file.h"
#include "util/text.h"

#ifdef COMPCOLL_HAVE_NVCOMP
#include "nvcomp_peer.h"
#endif

#ifndef COMPCOLL_VERSION
#define COMPCOLL_VERSION "unknown"
#endif

namespace compcoll::bench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr DType kDTypes[] = {DType::BF16, DType::FP16, DType::FP32};
constexpr uint64_t kMinBytes = 4096;
// nvCOMP's batched ANS, the one library codec calibrate times (tools/nvcomp_peer.h). Its name
// is known to every build, so that asking for it where it cannot run says why.
const std::string kNvcompAns(kNvcompAnsName);

// ---- the host device -------------------------------------------------------------------

using calib::cpuinfo_field;

// Median of the samples of `fn`: one untimed warm-up, then samples until both minimums are
// met. Calls shorter than 20 us are timed in batches (the sample is the batch's mean) so the
// clock's own cost stays small against what it measures.
Measurement median_seconds(const std::function<void()>& fn, const TimingOptions& opt) {
  auto t0 = Clock::now();
  fn();
  const double warm = std::chrono::duration<double>(Clock::now() - t0).count();
  const int batch = warm >= 20e-6 ? 1 : static_cast<int>(std::min(10000.0, std::ceil(20e-6 / std::max(warm, 1e-9))));
  std::vector<double> samples;
  double total = 0;
  while (static_cast<int>(samples.size()) < opt.min_samples || total < opt.min_time) {
    t0 = Clock::now();
    for (int k = 0; k < batch; ++k) fn();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    samples.push_back(s / batch);
    total += s;
    if (samples.size() >= 100000) break;
  }
  Measurement m;
  m.seconds = median(samples);
  m.samples = static_cast<int>(samples.size());
  return m;
}

// The buffers an op is timed on: `copies` of the input's first `bytes` and an output for each
// (a copy of the input too), with a codec a stream for each (encoded up front with
// `encode_all`, for decompress), taken in turn (codec_buffer_copies).
struct OpBuffers {
  std::vector<std::vector<uint8_t>> in, stream, out;
  std::vector<size_t> encoded;
  uint32_t next = 0;
  OpBuffers(const Codec* codec, DType dtype, const uint8_t* input, uint64_t bytes, uint32_t copies, bool encode_all,
            uint32_t threads)
      : in(copies, std::vector<uint8_t>(input, input + bytes)), out(in), encoded(copies, 0) {
    if (!codec) return;
    const uint64_t n = bytes / dtype_size(dtype);
    stream.assign(copies, std::vector<uint8_t>(max_encoded_size(*codec, dtype, n), 0));
    EncodeOptions eo;
    eo.threads = threads;
    if (encode_all)
      for (uint32_t k = 0; k < copies; ++k)
        encoded[k] = encode(*codec, dtype, in[k].data(), n, stream[k].data(), stream[k].size(), eo);
  }
  uint32_t take() {
    const uint32_t k = next;
    next = next + 1 == in.size() ? 0 : next + 1;
    return k;
  }
};

// `threads` other threads running `op` on buffers of their own (copies of the input's first
// `bytes`, taken in turn as the timed op takes its own: OpBuffers) for as long as it lives,
// each already running when the constructor returns: the load of a host whose every rank runs
// the same kernel at once (--concurrent).
class Load {
 public:
  Load(int threads, calib::Op op, const Codec* codec, DType dtype, const uint8_t* input, uint64_t bytes,
       uint32_t copies) {
    for (int i = 0; i < threads; ++i)
      threads_.emplace_back([=, this] {
        const uint64_t n = bytes / dtype_size(dtype);
        OpBuffers b(codec, dtype, input, bytes, copies, op == calib::Op::Decompress, 1);
        ++running_;
        while (!stop_) {
          const uint32_t k = b.take();
          switch (op) {
            case calib::Op::Compress: encode(*codec, dtype, b.in[k].data(), n, b.stream[k].data(), b.stream[k].size()); break;
            case calib::Op::Decompress: decode(b.stream[k].data(), b.encoded[k], b.out[k].data(), bytes); break;
            case calib::Op::Reduce: reduce_add(dtype, b.out[k].data(), b.in[k].data(), n); break;
            case calib::Op::Copy: std::memcpy(b.out[k].data(), b.in[k].data(), bytes); break;
            case calib::Op::DecodeAdd: break;  // GPU only (parse_options refuses it here)
          }
        }
      });
    while (running_ < threads) std::this_thread::yield();
  }
  ~Load() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> running_{0};
  std::vector<std::thread> threads_;
};

// Host codecs, reduce_add and memcpy on one thread, on host buffers; with --concurrent N, timed
// while N - 1 other threads run the same op (Load).
class HostDevice : public CalibrationDevice {
 public:
  HostDevice(int concurrent, uint32_t threads, bool warm)
      : concurrent_(concurrent),
        threads_(threads),
        warm_(warm),
        cache_bytes_(calib::host_cache_bytes(&cache_source_)) {
    // Other processes share the cores: the load when the run began goes into the file.
    std::ifstream in("/proc/loadavg");
    std::getline(in, loadavg_);
  }
  std::string name() const override {
    const std::string model = cpuinfo_field("model name");
    return model.empty() ? "unknown CPU" : model;
  }
  std::vector<std::pair<std::string, std::string>> machine() const override {
    utsname u{};
    uname(&u);
    return {{"cpu", name()},
            {"cpu_mhz", cpuinfo_field("cpu MHz")},
            {"cache", cpuinfo_field("cache size")},
            {"logical_cpus", std::to_string(std::thread::hardware_concurrency())},
            {"threads_used", concurrent_ > 1 ? "1 timed, " + std::to_string(concurrent_ - 1) +
                                                   " running the same op on their own buffers (--concurrent)"
                                             : std::string("1")},
            {"codec_threads", std::to_string(threads_)},
            {"last_level_cache", cache_bytes_ ? cache_source_
                                              : "unknown (sysfs gives none): taken as " + config::format_bytes(kUnknownCacheBytes)},
            {"loadavg_at_start", loadavg_},
            {"kernel", std::string(u.sysname) + " " + u.release + " " + u.machine},
            {"compiler", __VERSION__},
            {"host_codec_path", std::string(host_codec_path())}};
  }
  std::string method() const override {
    return std::string("host codecs (compcoll::encode/decode") +
           (threads_ != 1 ? ", each stream's chunks on " + std::to_string(threads_) + " threads (--threads; 0: one per hardware thread)" : "") +
           "), reduce_add and memcpy on one thread" +
           (concurrent_ > 1 ? " while " + std::to_string(concurrent_ - 1) +
                                  " other thread(s) ran the same op on buffers of their own (--concurrent " +
                                  std::to_string(concurrent_) +
                                  ": every rank of a host running the kernel at once), and each point timed the same "
                                  "way with those threads idle (the `alone` points)"
                            : "") +
           (warm_ ? "; every op runs on one buffer, cache-warm up to the cache's size (--warm)"
                  : "; compress and decompress take their input, stream and output buffers in turn from enough copies of "
                    "each for the inputs to cover half the last-level cache (one copy past that size), so that a sample "
                    "reads data from the shared cache, not from what the last samples left in the core's own caches, as "
                    "in a collective, where another op or rank wrote it; reduce and copy run on one buffer") +
           "; steady_clock around each call (calls under 20 us timed in batches, the batch mean "
           "taken as the sample)";
  }
  void load(DType dtype, const std::vector<uint8_t>& input) override {
    dtype_ = dtype;
    input_ = &input;
    size_t cap = 0;
    for (auto n : codec_names()) cap = std::max(cap, max_encoded_size(*find_codec(n), dtype, input.size() / dtype_size(dtype)));
    stream_.assign(cap, 0);
    out_.assign(input.size(), 0);
    checked_.clear();
    reference_.reset(nullptr, dtype, input.data(), input.size());
  }
  Measurement measure(calib::Op op, const Codec* codec, uint64_t bytes, const TimingOptions& opt) override {
    const uint8_t* in = input_->data();
    const uint64_t elements = bytes / dtype_size(dtype_);
    const bool codec_op = op == calib::Op::Compress || op == calib::Op::Decompress;
    const uint32_t copies = codec_op && !warm_ ? codec_buffer_copies(bytes, cache_bytes_) : 1;
    // Codec ops only: reduce and copy run on out_ and the input, as the check pass does.
    std::optional<OpBuffers> buffers;
    if (codec_op) buffers.emplace(codec, dtype_, in, bytes, copies, op == calib::Op::Decompress, threads_);
    EncodeOptions eo;
    eo.threads = threads_;
    const auto time_op = [&] {
      switch (op) {
        case calib::Op::Compress:
          return median_seconds([&] {
            const uint32_t k = buffers->take();
            encode(*codec, dtype_, buffers->in[k].data(), elements, buffers->stream[k].data(), buffers->stream[k].size(), eo);
          }, opt);
        case calib::Op::Decompress:
          return median_seconds([&] {
            const uint32_t k = buffers->take();
            decode(buffers->stream[k].data(), buffers->encoded[k], buffers->out[k].data(), bytes, threads_);
          }, opt);
        case calib::Op::Reduce:
          // dst starts as the input and accumulates it: the values grow, the work does not change.
          std::memcpy(out_.data(), in, bytes);
          return median_seconds([&] { reduce_add(dtype_, out_.data(), in, elements); }, opt);
        case calib::Op::Copy: break;
        case calib::Op::DecodeAdd: throw std::logic_error("calibrate: decode_add is a GPU kernel");
      }
      return median_seconds([&] { std::memcpy(out_.data(), in, bytes); }, opt);
    };
    // With --concurrent N the op is timed twice: alone on the host, then while N - 1 other
    // threads run it too.
    const double alone = concurrent_ > 1 ? time_op().seconds : 0;
    Measurement m;
    {
      std::optional<Load> load;
      if (concurrent_ > 1) load.emplace(concurrent_ - 1, op, codec, dtype_, in, bytes, copies);
      m = time_op();
    }
    m.alone_seconds = alone;
    // The correctness pass, apart from the timing.
    switch (op) {
      case calib::Op::Compress:
      case calib::Op::Decompress: {
        // One check per codec and size serves both ops: the same encode and decode.
        const auto done = checked_.find({codec, elements});
        if (done != checked_.end()) {
          m.wrong = done->second;
          break;
        }
        const size_t size = encode_prefix(*codec, elements);
        std::memset(out_.data(), 0x5A, bytes);
        const std::vector<uint8_t> exact(stream_.begin(), stream_.begin() + size);
        try {
          decode(exact.data(), exact.size(), out_.data(), bytes);
          // A lossy codec (fp8-hadamard) is checked against a separate round trip of the same
          // elements, coded in pieces of whole chunks on several threads (RoundTripReference):
          // its output is deterministic and chunk by chunk (its error bounds are the codec
          // tests' business).
          const uint8_t* want = in;
          if (!codec->lossless()) {
            if (reference_.codec() != codec) reference_.reset(codec, dtype_, in, input_->size());
            want = reference_.get(bytes);
          }
          m.wrong = count_wrong(dtype_, out_.data(), want, bytes);
        } catch (const CodecError&) {
          m.wrong = static_cast<int64_t>(elements);
        }
        checked_[{codec, elements}] = m.wrong;
        break;
      }
      case calib::Op::Reduce:
        // x + x is exactly 2x in every dtype short of overflow: an independent check.
        std::memcpy(out_.data(), in, bytes);
        reduce_add(dtype_, out_.data(), in, elements);
        m.wrong = count_doubling_wrong(in, out_.data(), elements);
        break;
      case calib::Op::Copy:
        std::memset(out_.data(), 0x5A, bytes);
        std::memcpy(out_.data(), in, bytes);
        m.wrong = count_wrong(dtype_, out_.data(), in, bytes);
        break;
      case calib::Op::DecodeAdd: break;
    }
    return m;
  }

 private:
  int concurrent_ = 1;
  uint32_t threads_ = 1;
  bool warm_ = false;
  std::string cache_source_;
  uint64_t cache_bytes_ = 0;
  // The stream of the input's first `elements` into stream_; its size.
  size_t encode_prefix(const Codec& codec, uint64_t elements) {
    EncodeOptions eo;
    eo.threads = threads_;
    return encode(codec, dtype_, input_->data(), elements, stream_.data(), stream_.size(), eo);
  }
  int64_t count_doubling_wrong(const uint8_t* in, const uint8_t* out, uint64_t elements) const {
    int64_t wrong = 0;
    for (uint64_t i = 0; i < elements; ++i) {
      if (dtype_ == DType::FP32) {
        float a, b;
        std::memcpy(&a, in + 4 * i, 4);
        std::memcpy(&b, out + 4 * i, 4);
        wrong += !(std::isnan(a) ? std::isnan(b) : b == std::ldexp(a, 1));
      } else {
        uint16_t a, b;
        std::memcpy(&a, in + 2 * i, 2);
        std::memcpy(&b, out + 2 * i, 2);
        const float fa = dtype_ == DType::BF16 ? bf16_to_float_exact(a) : fp16_to_float_exact(a);
        const float fb = dtype_ == DType::BF16 ? bf16_to_float_exact(b) : fp16_to_float_exact(b);
        const float twice = std::ldexp(fa, 1);
        const bool overflow = std::fabs(twice) > (dtype_ == DType::BF16 ? 3.3895314e38f : 65504.0f);
        wrong += !(std::isnan(fa) ? std::isnan(fb) : overflow ? std::isinf(fb) : fb == twice);
      }
    }
    return wrong;
  }
  // Independent of float_convert.h (which reduce_add uses): plain bit arithmetic.
  static float bf16_to_float_exact(uint16_t b) {
    const uint32_t bits = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  static float fp16_to_float_exact(uint16_t b) {
    const int e = (b >> 10) & 0x1f, mant = b & 0x3ff;
    const float sign = (b & 0x8000) ? -1.0f : 1.0f;
    if (e == 0x1f) return mant ? std::nanf("") : sign * INFINITY;
    if (e == 0) return sign * std::ldexp(static_cast<float>(mant), -24);
    return sign * std::ldexp(static_cast<float>(mant | 0x400), e - 25);
  }

  std::string loadavg_;
  DType dtype_ = DType::BF16;
  const std::vector<uint8_t>* input_ = nullptr;
  std::vector<uint8_t> stream_, out_;
  std::map<std::pair<const Codec*, uint64_t>, int64_t> checked_;  // (codec, elements) -> wrong
  RoundTripReference reference_;
};

// ---- the driver --------------------------------------------------------------------------

// decode_add: the GPU decoder's decode-and-add (cuda_decode_add), for the codecs that have one
// (codec::gpu_decode_adds); --device cuda only.
constexpr calib::Op kOps[] = {calib::Op::Compress, calib::Op::Decompress, calib::Op::DecodeAdd, calib::Op::Reduce,
                              calib::Op::Copy};

struct Options {
  std::string device = "host";
  std::string out;
  uint64_t max_bytes = uint64_t{1} << 30;
  std::optional<double> min_time;
  bool quick = false;
  std::string data_dir = default_data_dir();
  // The selection, in the order of a full run; all by default.
  std::vector<DType> dtypes;
  std::vector<const Codec*> codecs;
  std::vector<calib::Op> ops;
  bool selected = false;  // some of --dtype, --codec, --ops was given
  int concurrent = 1;     // host: threads running the op at once, one of them timed
  uint32_t threads = 1;   // host: threads coding each stream's chunks (EncodeOptions::threads)
  bool warm = false;      // host: compress and decompress on one buffer too
  // cuda: the chunk size the codecs code in (--chunk; format::kAutoChunk: by each stream's size)
  uint32_t chunk = format::kAutoChunk;
  bool nvcomp = false;    // nvcomp-ans is measured (curves and ratios)
  // cuda: the messages of the batch curves (--batch; 0: none), of the codecs with batch kernels
  uint32_t batch = 0;
  // Why nvcomp-ans is not measured though the selection (no --codec, or all) takes it; "" else.
  std::string nvcomp_skipped;
};

const char* const kUsage =
    "usage: compcoll-bench calibrate [--device host|cuda] --out FILE.yaml [--max-bytes N]\n"
    "                                [--min-time SECONDS] [--quick] [--data DIR]\n"
    "                                [--dtype LIST] [--codec LIST] [--ops LIST]\n"
    "                                [--concurrent N] [--threads N] [--warm] [--chunk N|auto]\n"
    "                                [--batch K]\n"
    "  --device     where the kernels run (default host: one CPU thread)\n"
    "  --out        the calibration file to write (docs/CALIBRATION.md); rewritten after every finished\n"
    "               curve, with complete: false until the run ends (an existing FILE is moved to FILE.bak)\n"
    "  --max-bytes  largest size timed (default 1GiB; 4KiB at least; KB/MB/GB = 10^3.., K/KiB/M/MiB/G/GiB = 2^10..)\n"
    "  --min-time   seconds of timed runs per point, at least (default 0.1, with --quick 0.01)\n"
    "  --quick      sizes in powers of 4 instead of 2, 3 samples per point instead of 5\n"
    "  --concurrent host: N threads run each op at once on their own buffers, one of them timed (default 1):\n"
    "               the kernels' speed when every rank of a host (N of them) runs one at the same time;\n"
    "               each point is also timed alone (the file's `alone` points and `concurrent: N`)\n"
    "  --threads    host: threads coding and decoding each stream's chunks (default 1; 0: one per hardware\n"
    "               thread): the codec curves of a rank that runs its codecs on that many threads\n"
    "  --warm       host: compress and decompress on one buffer, cache-warm, as reduce and copy (default: on\n"
    "               buffers taken in turn from the shared cache, as a collective's codec ops find their data)\n"
    "  --chunk      cuda: elements per chunk of compcoll's codecs (default auto: 4096 to 16384 by each\n"
    "               stream's size, docs/FORMAT.md; the file's chunk_elements). A host calibration codes\n"
    "               in chunks of 16384\n"
    "  --batch      cuda: the messages of each batch curve: gauss-exp's and entropy-exp's compress and\n"
    "               decompress of K messages in one call (cuda_encode_batch, cuda_decode_batch), at each\n"
    "               size of their curves, into the file's batch_curves (default: the most one call codes,\n"
    "               16; 2 to that; 0: none)\n"
    "  --data       directory of the real tensors (default $COMPCOLL_TEST_DATA_DIR, else the bundled tests/data)\n"
    "  --dtype      only these element types: bf16, fp16, fp32 (repeatable or a comma list; default all)\n"
    "  --codec      only these codecs' compress and decompress curves: identity, gauss-exp, entropy-exp,\n"
    "               fp8-hadamard, nvcomp-ans, or all (repeatable or a comma list; default all).\n"
    "               nvcomp-ans: nvCOMP's batched ANS in 64 KiB chunks, and its ratio per tensor kind of\n"
    "               the inputs; only with --device cuda, in a build with nvCOMP where libnvcomp.so.6\n"
    "               loads (all and the default take it there, and say why not elsewhere)\n"
    "  --ops        only these ops: compress, decompress, decode_add, reduce, copy (repeatable or a comma\n"
    "               list; default all; --ops compress,decompress measures no reduce or copy curve).\n"
    "               decode_add: a codec's decode and add in one kernel (cuda_decode_add; identity,\n"
    "               gauss-exp, entropy-exp), with --device cuda only\n"
    "  Curves are measured in a fixed order whatever the order of the lists: per dtype (bf16, fp16,\n"
    "  fp32) every selected codec (identity, gauss-exp, entropy-exp, fp8-hadamard, nvcomp-ans; a codec's\n"
    "  decode_add after its compress and decompress), then reduce; copy (dtype any) after the first\n"
    "  dtype; nvcomp-ans's ratios after each dtype's curves.\n";

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "compcoll-bench calibrate: %s\n", printable(msg).c_str());
  std::exit(2);
}

// comma_items(v); an empty item is an error of `flag`.
std::vector<std::string> split_list(const std::string& flag, const std::string& v, const std::string& expected) {
  std::vector<std::string> items = comma_items(v);
  for (const std::string& item : items)
    if (item.empty()) fail(flag + ": expected " + expected + ", got \"" + v + "\"");
  return items;
}

std::string codec_list() {
  std::string list;
  for (auto n : codec_names()) list += std::string(list.empty() ? "" : ", ") + std::string(n);
  return list + ", " + kNvcompAns;
}

// Why nvcomp-ans cannot be measured on `device` with this build; "" when it can.
std::string nvcomp_not_here(const std::string& device) {
#ifdef COMPCOLL_HAVE_NVCOMP
  if (device != "cuda") return "nvCOMP runs on the GPU: --device cuda only";
  return nvcomp_unavailable();
#else
  (void)device;
  return "this compcoll-bench was built without nvCOMP";
#endif
}

Options parse_args(int argc, char** argv) {
  Options opt;
  std::vector<bool> dtype_on(std::size(kDTypes), false), op_on(std::size(kOps), false);
  const std::vector<std::string_view> names = codec_names();
  std::vector<bool> codec_on(names.size(), false);
  bool any_dtype = false, any_codec = false, any_op = false;
  bool nvcomp_named = false, nvcomp_all = false;  // --codec nvcomp-ans; --codec all
  bool chunk_given = false, batch_given = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(a + ": missing value");
      return argv[++i];
    };
    if (a == "--device") {
      opt.device = value();
      if (opt.device != "host" && opt.device != "cuda") fail("--device: expected host or cuda, got \"" + opt.device + "\"");
    } else if (a == "--out") {
      opt.out = value();
      if (opt.out.empty()) fail("--out: expected a file name");
    } else if (a == "--max-bytes") {
      const std::string v = value();
      try {
        opt.max_bytes = config::parse_bytes(v);
      } catch (const std::invalid_argument& e) {
        fail("--max-bytes: expected a size like 256MiB, got \"" + v + "\" (" + e.what() + ")");
      }
      if (opt.max_bytes < kMinBytes) fail("--max-bytes: expected at least 4KiB (4096), got \"" + v + "\"");
    } else if (a == "--min-time") {
      const std::string v = value();
      const auto t = seconds_value(v);
      if (!t) fail("--min-time: expected seconds >= 0, got \"" + v + "\"");
      opt.min_time = *t;
    } else if (a == "--quick") {
      opt.quick = true;
    } else if (a == "--concurrent") {
      const std::string v = value();
      const auto n = whole_number(v, 1, 1024);
      if (!n) fail("--concurrent: expected a number of threads in [1, 1024], got \"" + v + "\"");
      opt.concurrent = static_cast<int>(*n);
    } else if (a == "--warm") {
      opt.warm = true;
    } else if (a == "--threads") {
      const std::string v = value();
      const auto n = whole_number(v, 0, 1024);
      if (!n) fail("--threads: expected 0 (one per hardware thread) to 1024, got \"" + v + "\"");
      opt.threads = static_cast<uint32_t>(*n);
    } else if (a == "--chunk") {
      const std::string v = value();
      const auto c = chunk_elements_value(v);
      if (!c) fail(chunk_elements_error(v));
      opt.chunk = *c;
      chunk_given = true;
    } else if (a == "--batch") {
      const std::string v = value();
      const auto k = whole_number(v, 0, 1 << 20);
      if (!k || *k == 1) fail("--batch: expected 0 (no batch curves) or the messages of a batch, 2 or more, got \"" + v + "\"");
      opt.batch = static_cast<uint32_t>(*k);
      batch_given = true;
    } else if (a == "--data") {
      opt.data_dir = value();
    } else if (a == "--dtype") {
      const std::string expected = "bf16, fp16 or fp32 (or a comma list of them)";
      for (const std::string& item : split_list(a, value(), expected)) {
        const std::optional<DType> t = parse_dtype(item);
        if (!t) fail("--dtype: expected " + expected + ", got \"" + item + "\"");
        for (size_t k = 0; k < std::size(kDTypes); ++k) dtype_on[k] = dtype_on[k] || kDTypes[k] == *t;
      }
      any_dtype = true;
    } else if (a == "--codec") {
      const std::string expected = codec_list() + " or all (or a comma list of them)";
      for (const std::string& item : split_list(a, value(), expected)) {
        const auto it = std::find(names.begin(), names.end(), item);
        if (item == "all") {
          codec_on.assign(names.size(), true);
          nvcomp_all = true;
        } else if (item == kNvcompAns) {
          nvcomp_named = true;
        } else if (it == names.end()) {
          fail("--codec: expected " + expected + ", got \"" + item + "\"");
        } else {
          codec_on[it - names.begin()] = true;
        }
      }
      any_codec = true;
    } else if (a == "--ops") {
      const std::string expected = "compress, decompress, decode_add, reduce or copy (or a comma list of them)";
      for (const std::string& item : split_list(a, value(), expected)) {
        size_t k = 0;
        while (k < std::size(kOps) && item != calib::op_name(kOps[k])) ++k;
        if (k == std::size(kOps)) fail("--ops: expected " + expected + ", got \"" + item + "\"");
        op_on[k] = true;
      }
      any_op = true;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      fail("unknown argument \"" + a + "\" (see compcoll-bench calibrate --help)");
    }
  }
  if (opt.out.empty()) fail("missing --out FILE.yaml (see compcoll-bench calibrate --help)");
  if (opt.concurrent > 1 && opt.device != "host") fail("--concurrent: host only (a GPU runs one rank's kernels)");
  if (opt.threads != 1 && opt.device != "host") fail("--threads: host only");
  if (opt.warm && opt.device != "host") fail("--warm: host only (a GPU's ops run on one buffer)");
  if (chunk_given && opt.device != "cuda") fail("--chunk: cuda only (a host calibration codes in chunks of 16384)");
  if (opt.device != "cuda") opt.chunk = format::kDefaultChunkElements;
  // Batches: the GPU's (compcoll-run's MPI backend codes a batch op by op).
  if (batch_given && opt.device != "cuda" && opt.batch > 0)
    fail("--batch: cuda only (a host codes a batch's messages one call each)");
  if (opt.device == "cuda") {
    const uint32_t limit = cuda_batch_limit();
    if (!batch_given) opt.batch = limit;
    else if (opt.batch > limit)
      fail("--batch: at most " + std::to_string(limit) + ", the messages one call codes (a larger batch is " +
           "several calls), got " + std::to_string(opt.batch));
  }
  for (size_t k = 0; k < std::size(kDTypes); ++k)
    if (!any_dtype || dtype_on[k]) opt.dtypes.push_back(kDTypes[k]);
  for (size_t k = 0; k < names.size(); ++k)
    if (!any_codec || codec_on[k]) opt.codecs.push_back(find_codec(names[k]));
  for (size_t k = 0; k < std::size(kOps); ++k) {
    if (kOps[k] == calib::Op::DecodeAdd && opt.device != "cuda") {
      if (op_on[k]) fail("--ops decode_add: a GPU kernel (cuda_decode_add): --device cuda only");
      continue;
    }
    if (!any_op || op_on[k]) opt.ops.push_back(kOps[k]);
  }
  const auto has_op = [&](calib::Op op) { return std::find(opt.ops.begin(), opt.ops.end(), op) != opt.ops.end(); };
  if (any_codec && !has_op(calib::Op::Compress) && !has_op(calib::Op::Decompress) && !has_op(calib::Op::DecodeAdd))
    fail("--codec: --ops selects none of compress, decompress and decode_add, so no codec is measured");
  // nvcomp-ans: named, it must run; taken by all or by default, it runs where it can.
  if (nvcomp_named) {
    if (const std::string why = nvcomp_not_here(opt.device); !why.empty()) fail("--codec " + kNvcompAns + ": " + why);
    opt.nvcomp = true;
  } else if ((!any_codec || nvcomp_all) && (has_op(calib::Op::Compress) || has_op(calib::Op::Decompress))) {
    opt.nvcomp_skipped = nvcomp_not_here(opt.device);
    opt.nvcomp = opt.nvcomp_skipped.empty();
  }
  opt.selected = any_dtype || any_codec || any_op;
  return opt;
}

// The bundled tensors of one dtype, concatenated in file-name order: *.bf16.npy for bf16,
// *.fp32.npy for fp32, and the fp32 files rounded to nearest even for fp16 (there are no
// fp16 captures).
struct TensorPool {
  std::vector<uint8_t> bytes;
  std::vector<std::string> files;     // the paths, in file-name order
  std::vector<uint64_t> file_bytes;   // the bytes of each file in `bytes`, in that order
};

TensorPool tensor_pool(const std::string& dir, DType dtype) {
  const std::string suffix = dtype == DType::BF16 ? ".bf16.npy" : ".fp32.npy";
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      files.push_back(e.path().string());
  }
  if (ec) fail("--data: cannot read directory " + dir + " (" + ec.message() + ")");
  if (files.empty()) fail("--data: no *" + suffix + " tensors in " + dir + " for " + std::string(dtype_name(dtype)));
  std::sort(files.begin(), files.end());
  TensorPool pool;
  for (const std::string& f : files) {
    const size_t before = pool.bytes.size();
    try {
      for (const TensorData& t : load_tensors(f, dtype)) pool.bytes.insert(pool.bytes.end(), t.bytes.begin(), t.bytes.end());
    } catch (const TensorFileError& e) {
      fail(e.what());
    }
    pool.file_bytes.push_back(pool.bytes.size() - before);
  }
  if (pool.bytes.empty()) fail("--data: the " + std::string(dtype_name(dtype)) + " tensors in " + dir + " are empty");
  pool.files = std::move(files);
  return pool;
}

#ifdef COMPCOLL_HAVE_NVCOMP
// A pool's tensors by kind: the kind of tests/data/KIND.REST.DTYPE.npy is the text of its file
// name before the first '.' ("grad" for grad.layer1-attn-out-weight.step060.bf16.npy). Each
// kind's tensors concatenated in file-name order (not tiled), and how many files; by kind name.
struct TensorKind {
  std::vector<uint8_t> bytes;
  size_t files = 0;
};
std::map<std::string, TensorKind> tensor_kinds(const TensorPool& pool) {
  std::map<std::string, TensorKind> kinds;
  uint64_t at = 0;
  for (size_t i = 0; i < pool.files.size(); ++i) {
    const std::string name = std::filesystem::path(pool.files[i]).filename().string();
    std::string kind = name.substr(0, name.find('.'));
    if (kind.empty()) kind = name;  // ".x.bf16.npy": the whole name, never an empty kind
    TensorKind& k = kinds[kind];
    k.bytes.insert(k.bytes.end(), pool.bytes.begin() + at, pool.bytes.begin() + at + pool.file_bytes[i]);
    ++k.files;
    at += pool.file_bytes[i];
  }
  return kinds;
}
#endif

std::vector<uint8_t> tile(const std::vector<uint8_t>& pool, uint64_t bytes) {
  std::vector<uint8_t> out(bytes);
  for (uint64_t at = 0; at < bytes; at += pool.size())
    std::memcpy(out.data() + at, pool.data(), std::min<uint64_t>(pool.size(), bytes - at));
  return out;
}

struct CurveKey {
  calib::Op op;
  std::string codec, dtype;
  uint32_t messages = 1;  // > 1: a batch curve (the file's batch_curves)
  bool operator<(const CurveKey& o) const {
    return std::tie(op, codec, dtype, messages) < std::tie(o.op, o.codec, o.dtype, o.messages);
  }
  bool operator==(const CurveKey& o) const { return !(*this < o) && !(o < *this); }
  // "compress gauss-exp bf16", "reduce fp32", "copy any", "compress gauss-exp bf16 batch of
  // 16": the file's `missing:` entries.
  std::string name() const {
    return std::string(calib::op_name(op)) + (codec.empty() ? "" : " " + codec) + " " + dtype +
           (messages > 1 ? " batch of " + std::to_string(messages) : "");
  }
};

// The curves of `keys` in words, grouped by dtype: "bf16: fp8-hadamard compress and
// decompress, reduce; fp16: every curve (9); copy (any)". `all` is every curve the run was
// asked for, so a dtype none of whose curves is done reads "every curve".
std::string describe_curves(const std::vector<CurveKey>& keys, const std::vector<CurveKey>& all) {
  std::vector<std::string> parts;
  for (const char* dt : {"bf16", "fp16", "fp32", "any"}) {
    std::vector<CurveKey> mine;
    for (const CurveKey& k : keys)
      if (k.dtype == dt) mine.push_back(k);
    if (mine.empty()) continue;
    const size_t of = std::count_if(all.begin(), all.end(), [&](const CurveKey& k) { return k.dtype == dt; });
    if (std::string(dt) == "any") {
      parts.push_back("copy (dtype any)");
      continue;
    }
    if (mine.size() == of && of > 1) {
      parts.push_back(std::string(dt) + ": every curve (" + std::to_string(of) + ")");
      continue;
    }
    std::vector<std::string> items;
    for (size_t i = 0; i < mine.size(); ++i) {
      const CurveKey& k = mine[i];
      if (k.op == calib::Op::Reduce || k.op == calib::Op::Copy) {
        items.push_back(std::string(calib::op_name(k.op)));
        continue;
      }
      // compress and decompress of one codec, when both are there, as one item.
      const auto has = [&](calib::Op op) {
        return std::any_of(mine.begin(), mine.end(),
                           [&](const CurveKey& o) { return o.op == op && o.codec == k.codec && o.messages == k.messages; });
      };
      const bool both = k.op == calib::Op::Compress && has(calib::Op::Decompress);
      if (k.op == calib::Op::Decompress && has(calib::Op::Compress)) continue;
      items.push_back(k.codec + (both ? " compress and decompress" : " " + std::string(calib::op_name(k.op))) +
                      (k.messages > 1 ? " in batches of " + std::to_string(k.messages) : ""));
    }
    std::string joined;
    for (const std::string& it : items) joined += (joined.empty() ? "" : ", ") + it;
    parts.push_back(std::string(dt) + ": " + joined);
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f) fail("--out: cannot write " + tmp + " (" + std::strerror(errno) + ")");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail("--out: cannot rename " + tmp + " to " + path + " (" + ec.message() + ")");
}

}  // namespace

uint32_t codec_buffer_copies(uint64_t bytes, uint64_t cache_bytes) {
  const uint64_t cover = (cache_bytes ? cache_bytes : kUnknownCacheBytes) / 2;
  if (bytes == 0 || bytes >= cover) return 1;
  return static_cast<uint32_t>((cover + bytes - 1) / bytes);
}

int64_t count_wrong(DType dtype, const uint8_t* a, const uint8_t* b, uint64_t bytes) {
  if (bytes == 0 || std::memcmp(a, b, bytes) == 0) return 0;
  int64_t wrong = 0;
  if (dtype_size(dtype) == 4) {
    for (uint64_t i = 0; i + 4 <= bytes; i += 4) {
      uint32_t x, y;
      std::memcpy(&x, a + i, 4);
      std::memcpy(&y, b + i, 4);
      wrong += x != y;
    }
  } else {
    for (uint64_t i = 0; i + 2 <= bytes; i += 2) {
      uint16_t x, y;
      std::memcpy(&x, a + i, 2);
      std::memcpy(&y, b + i, 2);
      wrong += x != y;
    }
  }
  return wrong;
}

void RoundTripReference::reset(const Codec* codec, DType dtype, const uint8_t* input, uint64_t capacity) {
  codec_ = codec;
  dtype_ = dtype;
  input_ = input;
  out_.resize(capacity);
  whole_ = 0;
}

const uint8_t* RoundTripReference::get(uint64_t bytes) {
  if (!codec_) throw CodecError("RoundTripReference: no codec", 0);
  if (bytes > out_.size()) throw CodecError("RoundTripReference: prefix longer than the input", 0);
  const uint64_t es = dtype_size(dtype_);
  const uint64_t chunk_bytes = uint64_t{format::kDefaultChunkElements} * es;
  // Whole chunks of the last prefix that lie inside this one stay; the rest is coded anew.
  whole_ = std::min(whole_, bytes / chunk_bytes * chunk_bytes);
  const uint64_t first = whole_ / es, end = bytes / es;
  if (end > first) {
    const uint64_t chunks = (end - first + format::kDefaultChunkElements - 1) / format::kDefaultChunkElements;
    const unsigned hw = threads_ ? threads_ : std::clamp(std::thread::hardware_concurrency(), 1u, 64u);
    // Pieces of at least 4 chunks, so that small prefixes do not pay for threads.
    const uint64_t pieces = std::max<uint64_t>(1, std::min<uint64_t>(hw, chunks / 4));
    const uint64_t per_piece = (chunks + pieces - 1) / pieces * format::kDefaultChunkElements;
    std::vector<std::exception_ptr> errors(pieces);
    auto code = [&](uint64_t p) {
      try {
        const uint64_t a = first + p * per_piece, b = std::min(end, a + per_piece);
        if (a >= b) return;
        const std::vector<uint8_t> stream = encode(*codec_, dtype_, input_ + a * es, b - a);
        decode(stream.data(), stream.size(), out_.data() + a * es, (b - a) * es);
      } catch (...) {
        errors[p] = std::current_exception();
      }
    };
    if (pieces == 1) {
      code(0);
    } else {
      std::vector<std::thread> workers;
      for (uint64_t p = 1; p < pieces; ++p) workers.emplace_back(code, p);
      code(0);
      for (std::thread& w : workers) w.join();
    }
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
  }
  whole_ = bytes / chunk_bytes * chunk_bytes;
  return out_.data();
}

std::optional<long> whole_number(const std::string& v, long lo, long hi) {
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (!end || *end || n < lo || n > hi) return std::nullopt;
  return n;
}

std::optional<uint32_t> chunk_elements_value(const std::string& v) {
  if (v == "auto") return format::kAutoChunk;
  const auto c = whole_number(v, format::kMinChunkElements, format::kMaxChunkElements);
  if (!c || !format::valid_chunk_elements(static_cast<uint64_t>(*c))) return std::nullopt;
  return static_cast<uint32_t>(*c);
}

std::string chunk_elements_error(const std::string& v) {
  return "--chunk: expected auto or a multiple of 32 in [" + std::to_string(format::kMinChunkElements) + ", " +
         std::to_string(format::kMaxChunkElements) + "], got \"" + v + "\"";
}

std::string chunk_elements_name(uint32_t chunk) {
  return chunk == format::kAutoChunk ? "auto" : std::to_string(chunk);
}

std::vector<std::string> comma_items(const std::string& v) {
  std::vector<std::string> items;
  size_t at = 0;
  while (true) {
    const size_t comma = v.find(',', at);
    std::string item = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    items.push_back(item);
    if (comma == std::string::npos) return items;
    at = comma + 1;
  }
}

std::optional<double> seconds_value(const std::string& v) {
  char* end = nullptr;
  const double t = std::strtod(v.c_str(), &end);
  if (v.empty() || !end || *end || !(t >= 0) || !std::isfinite(t)) return std::nullopt;
  return t;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2) return v[mid];
  const double upper = v[mid];
  return (*std::max_element(v.begin(), v.begin() + mid) + upper) / 2;
}

std::unique_ptr<CalibrationDevice> make_host_device(int concurrent, uint32_t threads, bool warm) {
  return std::make_unique<HostDevice>(concurrent, threads, warm);
}

#ifndef COMPCOLL_HAVE_CUDA
std::unique_ptr<CalibrationDevice> make_cuda_device(const EncodeOptions&) {
  throw DeviceUnavailable("--device cuda: this compcoll-bench was built without CUDA (no nvcc at configure time)");
}
std::optional<Measurement> measure_cuda_decode_add(CalibrationDevice&, const Codec&, uint64_t, const TimingOptions&) {
  return std::nullopt;
}
std::optional<BatchMeasurement> measure_cuda_batch(CalibrationDevice&, const Codec&, uint32_t, const TimingOptions&,
                                                   uint64_t, bool) {
  return std::nullopt;
}
uint32_t cuda_batch_limit() { return 0; }
bool cuda_batches(const Codec&) { return false; }
#endif

int run_calibrate(int argc, char** argv) {
  const Options opt = parse_args(argc, argv);
  TimingOptions timing;
  timing.min_time = opt.min_time.value_or(opt.quick ? 0.01 : 0.1);
  timing.min_samples = opt.quick ? 3 : 5;

  std::unique_ptr<CalibrationDevice> device;
  try {
    EncodeOptions encode;
    encode.chunk_elements = opt.chunk;
    device = opt.device == "cuda" ? make_cuda_device(encode) : make_host_device(opt.concurrent, opt.threads, opt.warm);
  } catch (const DeviceUnavailable& e) {
    fail(e.what());
  }

  // Fail on an unwritable output now, not after an hour of measuring.
  const std::string tmp = opt.out + ".tmp";
  {
    std::ofstream probe(tmp);
    if (!probe) fail("--out: cannot write " + tmp + " (" + std::strerror(errno) + ")");
  }
  std::filesystem::remove(tmp);

  std::vector<uint64_t> sizes;
  for (uint64_t b = kMinBytes; b <= opt.max_bytes; b *= opt.quick ? 4 : 2) sizes.push_back(b);
  const uint64_t largest = sizes.back();

  // Every input is read before the first row, so a bad --data fails at once.
  std::vector<TensorPool> pools;
  for (DType dtype : opt.dtypes) pools.push_back(tensor_pool(opt.data_dir, dtype));

  const auto has_op = [&](calib::Op op) { return std::find(opt.ops.begin(), opt.ops.end(), op) != opt.ops.end(); };
  // Batch curves: the codecs whose batches the model prices (identity's cost nothing).
  const auto batch_curves_of = [&](const Codec& codec) {
    return opt.batch > 1 && codec.id() != CodecId::Identity && cuda_batches(codec);
  };
  // Every curve this run is asked for, in the order it measures them.
  std::vector<CurveKey> wanted;
  for (DType dtype : opt.dtypes) {
    const std::string dt(dtype_name(dtype));
    for (const Codec* codec : opt.codecs) {
      for (calib::Op op : {calib::Op::Compress, calib::Op::Decompress})
        if (has_op(op)) wanted.push_back({op, std::string(codec->name()), dt});
      if (has_op(calib::Op::DecodeAdd) && gpu_decode_adds(codec->id()))
        wanted.push_back({calib::Op::DecodeAdd, std::string(codec->name()), dt});
      if (batch_curves_of(*codec))
        for (calib::Op op : {calib::Op::Compress, calib::Op::Decompress})
          if (has_op(op)) wanted.push_back({op, std::string(codec->name()), dt, opt.batch});
    }
    if (opt.nvcomp)
      for (calib::Op op : {calib::Op::Compress, calib::Op::Decompress})
        if (has_op(op)) wanted.push_back({op, kNvcompAns, dt});
    if (has_op(calib::Op::Reduce)) wanted.push_back({calib::Op::Reduce, "", dt});
    if (has_op(calib::Op::Copy) && dtype == opt.dtypes.front()) wanted.push_back({calib::Op::Copy, "", "any"});
  }

  std::printf("# compcoll-bench calibrate: %s (%s), sizes %s to %s, median of >= %d samples and >= %g s per point\n",
              device->name().c_str(), opt.device.c_str(), config::format_bytes(sizes.front()).c_str(),
              config::format_bytes(largest).c_str(), timing.min_samples, timing.min_time);
  std::printf("# %zu curves; %s is rewritten after each one\n", wanted.size(), opt.out.c_str());
  std::printf("# inputs: the tensors of %s\n", opt.data_dir.c_str());
  if (opt.batch > 1)
    std::printf("# batch curves: a prefix as %u messages coded in one call (codec column CODEC/%u), after each "
                "codec's other curves\n", opt.batch, opt.batch);
  if (!opt.nvcomp_skipped.empty()) std::printf("# %s: not measured (%s)\n", kNvcompAns.c_str(), opt.nvcomp_skipped.c_str());
  std::string nvcomp_version_text;  // "nvCOMP 6.0.0" when nvcomp-ans is measured
#ifdef COMPCOLL_HAVE_NVCOMP
  if (opt.nvcomp) {
    nvcomp_version_text = nvcomp_version();
    std::printf("# %s: %s (%s), batched ANS in %llu KiB chunks, after the compcoll codecs of each dtype; "
                "then its ratio per tensor kind\n",
                kNvcompAns.c_str(), nvcomp_version_text.c_str(), nvcomp_library_file().c_str(),
                static_cast<unsigned long long>(kNvcompChunkBytes / 1024));
  }
#endif
  const bool alone = opt.concurrent > 1;  // a column of the time alone
  std::printf("%12s %5s %-10s %-12s %12s %9s %8s %7s%s\n", "# size", "type", "op", "codec", "time", "algbw",
              "samples", "#wrong", alone ? "        alone" : "");
  std::printf("%12s %5s %-10s %-12s %12s %9s %8s %7s%s\n", "# (B)", "", "", "", "(us)", "(GB/s)", "", "",
              alone ? "         (us)" : "");
  std::fflush(stdout);

  // ---- what goes into the file ----
  char date[32], stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(date, sizeof date, "%Y-%m-%d", &utc);
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::string command = "compcoll-bench";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  std::ostringstream inputs;
  for (size_t d = 0; d < opt.dtypes.size(); ++d)
    inputs << " " << dtype_name(opt.dtypes[d]) << ": " << pools[d].files.size() << " files, " << pools[d].bytes.size()
           << " bytes" << (opt.dtypes[d] == DType::FP16 ? " (the fp32 files rounded to nearest even)" : "") << ";";
  std::string selection;
  if (opt.selected) {
    const auto join = [](const auto& items, auto name) {
      std::string s;
      for (const auto& x : items) s += (s.empty() ? "" : ", ") + std::string(name(x));
      return s;
    };
    selection = " Selection (--dtype, --codec, --ops): dtypes " +
                join(opt.dtypes, [](DType t) { return dtype_name(t); }) + "; codecs " +
                join(opt.codecs, [](const Codec* c) { return c->name(); }) +
                (opt.nvcomp ? (opt.codecs.empty() ? "" : ", ") + kNvcompAns : std::string()) + "; ops " +
                join(opt.ops, [](calib::Op op) { return calib::op_name(op); }) +
                "; the run was asked for these curves only (" + std::to_string(wanted.size()) + ").";
  }

  // A curve's points (bytes, seconds) and, with --concurrent N > 1, its points alone on the host.
  struct Points {
    std::vector<std::pair<uint64_t, double>> timed, alone;
  };
  std::map<CurveKey, Points> curves;  // finished curves whose checks passed
  std::vector<CurveKey> failed;       // finished curves with a failed check
  // nvcomp-ans's ratios per dtype and tensor kind (payload / uncompressed), as measured; and
  // those whose check failed ("bf16 grad"), left out of the file.
  struct Ratio {
    std::string dtype, tensor;
    double ratio = 0;
    uint64_t bytes = 0;
  };
  std::vector<Ratio> ratios;
  std::vector<std::string> ratio_failed;
  bool moved_old = false;
  const auto start = Clock::now();

  // Writes the file with every finished curve that passed its checks; complete: true only
  // when those are all the curves the run was asked for. Atomic: FILE.tmp, then renamed.
  const auto save = [&](bool finished) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<CurveKey> missing;
    for (const CurveKey& k : wanted)
      if (!curves.count(k)) missing.push_back(k);
    const bool complete = missing.empty();
    std::ostringstream statement;
    if (!complete) {
      std::vector<CurveKey> not_measured;
      for (const CurveKey& k : missing)
        if (std::find(failed.begin(), failed.end(), k) == failed.end()) not_measured.push_back(k);
      statement << "PARTIAL (complete: false): " << curves.size() << " of the " << wanted.size()
                << " curves this run was asked for. ";
      if (!not_measured.empty())
        statement << (finished ? "Not measured: "
                                     : "Not yet measured when this file was written (the run rewrites it after every "
                                       "finished curve; if this is its last version, the run stopped before these): ")
                  << describe_curves(not_measured, wanted) << ". ";
      if (!failed.empty())
        statement << "Left out because a correctness check FAILED: " << describe_curves(failed, wanted) << ". ";
    }
    if (!ratio_failed.empty()) {
      statement << "Ratios left out because a correctness check FAILED: " << kNvcompAns;
      for (size_t i = 0; i < ratio_failed.size(); ++i) statement << (i ? ", " : " ") << ratio_failed[i];
      statement << ". ";
    }
    statement << "MEASURED by compcoll-bench calibrate --device " << opt.device << " (compcoll " << COMPCOLL_VERSION
              << ") " << (complete || finished ? "in " : "after ") << std::lround(elapsed) << " s. " << device->method()
              << ". Each point: one untimed warm-up, then the median of at least " << timing.min_samples
              << " samples and " << timing.min_time
              << " s of samples; a separate untimed pass checks every result (round trip bit-exact, lossy codecs "
              << "against the host round trip, decode_add against the host's decode then reduce, reduce x + x = 2x, "
              << "copy). Sizes " << config::format_bytes(sizes.front()) << " to "
              << config::format_bytes(largest) << " in powers of " << (opt.quick ? 4 : 2)
              << (largest < (uint64_t{1} << 30) ? " (capped by --max-bytes below 1 GiB)" : "")
              << "; bytes are always the uncompressed bytes." << selection << " Inputs: the real training tensors of "
              << (opt.data_dir == bundled_data_dir() ? std::string("tests/data (README there)") : opt.data_dir)
              << ", per dtype concatenated in file-name order and tiled to the largest size; each "
              << "point times the prefix of that buffer (small sizes therefore hold one kind of tensor and run "
              << "cache-warm):" << inputs.str()
              << " reduce: dst += src over the given bytes of each (16-bit types add in fp32 and round to nearest "
              << "even). copy: memcpy of the " << dtype_name(opt.dtypes.front())
              << " input, charged for any dtype. identity curves are measured for "
              << "completeness; the simulator charges identity compress and decompress no time."
              << (has_op(calib::Op::DecodeAdd)
                      ? " decode_add: the codec's decode of its stream added to an accumulator that holds the input, "
                        "in one kernel (the fused decode-and-add of run.fused_decode)."
                      : "");
    if (opt.batch > 1)
      statement << " batch_curves: each size's prefix split into " << opt.batch
                << " messages as a collective splits a buffer (equal, the first ones an element larger), coded in "
                << "one call (cuda_encode_batch) and decoded in one (cuda_decode_batch), on the same stream and with "
                << "the same timing; the check decodes the batch's streams with the batch decoder against the input. "
                << "batch_messages: the most messages one call codes (cuda_batch_messages()).";
#ifdef COMPCOLL_HAVE_NVCOMP
    if (opt.nvcomp)
      statement << " " << kNvcompAns << ": nvCOMP's batched ANS (" << nvcomp_version_text
                << ", libnvcomp.so.6 opened at run time; data_type FLOAT16 for bf16 and fp16, FLOAT32 for fp32, "
                << "otherwise its default options) on the same prefixes, on the same stream and with the same "
                << "CUDA-event timing, as compcoll-run's GPU backend runs it (nvcomp_ans_encode and "
                << "nvcomp_ans_decode, codec/cuda/nvcomp.h), each prefix cut into " << (kNvcompChunkBytes / 1024)
                << " KiB chunks read in place (the last holds the rest). compress times the chunk tables, one "
                << "nvcompBatchedANSCompressAsync over all the chunks into slots of the API's maximum compressed "
                << "chunk size each and their packing into compcoll's container (docs/FORMAT.md); decompress "
                << "the container's check, one nvcompBatchedANSDecompressAsync into a buffer of the prefix's size "
                << "and the chunks' statuses. Each point is checked as compcoll's codecs are: one more, untimed "
                << "round trip into a poisoned buffer, every chunk's status and every byte against the input. "
                << "ratios: " << kNvcompAns << "'s compressed payload (the chunks' "
                << "compressed bytes, without their sizes) over the uncompressed bytes, per dtype and tensor kind "
                << "of the inputs (a file's kind is its name up to the first '.'), each kind's tensors concatenated "
                << "in file-name order, not tiled, and checked the same way; bytes: the uncompressed bytes "
                << "measured.";
#endif

    std::ostringstream y;
    y << "# MEASURED, written by `" << command << "` (started " << stamp << ").\n";
    if (!complete)
      y << "# PARTIAL: " << curves.size() << " of " << wanted.size()
        << " curves (complete: false; `missing` lists the others).\n";
    y << "# Durations in seconds per uncompressed bytes; see docs/CALIBRATION.md.\n";
    y << "device: " << config::yaml_quote(device->name()) << "\n";
    y << "source: measured\n";
    y << "complete: " << (complete ? "true" : "false") << "\n";
    if (!complete) {
      y << "missing:\n";
      for (const CurveKey& k : missing) y << "  - " << config::yaml_quote(k.name()) << "\n";
    }
    y << "date: " << date << "\n";
    if (opt.concurrent > 1) y << "concurrent: " << opt.concurrent << "\n";
    y << "chunk_elements: " << chunk_elements_name(opt.chunk) << "\n";
    y << "statement: " << config::yaml_quote(statement.str()) << "\n";
    y << "machine:\n";
    for (const auto& [k, v] : device->machine()) y << "  " << k << ": " << config::yaml_quote(v) << "\n";
    if (opt.nvcomp) y << "  nvcomp: " << config::yaml_quote(nvcomp_version_text) << "\n";
    y << "  compcoll_version: " << config::yaml_quote(COMPCOLL_VERSION) << "\n";
    y << "  command: " << config::yaml_quote(command) << "\n";
    y << "  measured_at: " << config::yaml_quote(stamp) << "\n";
    char num[64];
    // Single calls under curves, batches under batch_curves.
    const auto write_curves = [&](bool batches) {
      for (const auto& [key, points] : curves) {
        if ((key.messages > 1) != batches) continue;
        y << "  - {op: " << calib::op_name(key.op);
        if (!key.codec.empty()) y << ", codec: " << key.codec;
        const auto list = [&](const char* name, const std::vector<std::pair<uint64_t, double>>& pts) {
          y << ", " << name << ": [";
          for (size_t i = 0; i < pts.size(); ++i) {
            std::snprintf(num, sizeof num, "%s[%llu, %.5g]", i ? ", " : "", static_cast<unsigned long long>(pts[i].first),
                          pts[i].second);
            y << num;
          }
          y << "]";
        };
        y << ", dtype: " << key.dtype;
        if (key.messages > 1) y << ", messages: " << key.messages;
        list("points", points.timed);
        if (!points.alone.empty()) list("alone", points.alone);
        y << "}\n";
      }
    };
    const size_t batch_count =
        std::count_if(curves.begin(), curves.end(), [](const auto& c) { return c.first.messages > 1; });
    y << "curves:" << (curves.size() == batch_count ? " []" : "") << "\n";
    write_curves(false);
    if (batch_count > 0) {
      y << "batch_messages: " << cuda_batch_limit() << "\n";
      y << "batch_curves:\n";
      write_curves(true);
    }
    if (!ratios.empty()) {
      y << "ratios:\n";
      for (const Ratio& r : ratios)
        y << "  - {codec: " << kNvcompAns << ", dtype: " << r.dtype << ", tensor: " << config::yaml_quote(r.tensor)
          << ", ratio: " << config::yaml_number(r.ratio) << ", bytes: " << r.bytes << "}\n";
    }
    // The first write replaces the file: an older one at that name is kept as FILE.bak.
    if (!moved_old && std::filesystem::exists(opt.out)) {
      std::error_code ec;
      std::filesystem::rename(opt.out, opt.out + ".bak", ec);
      if (ec) fail("--out: cannot move the existing " + opt.out + " to " + opt.out + ".bak (" + ec.message() + ")");
      std::printf("# moved the existing %s to %s.bak\n", opt.out.c_str(), opt.out.c_str());
    }
    moved_old = true;
    write_atomically(opt.out, y.str());
    if (!finished)
      std::printf("# saved %s: %zu of %zu curves (complete: %s), %.0f s\n", opt.out.c_str(), curves.size(),
                  wanted.size(), complete ? "true" : "false", elapsed);
    std::fflush(stdout);
  };

  std::map<CurveKey, std::pair<bool, Points>> in_progress;  // ok, points
  // A point: its row, and its place in its curve (codec "" for reduce and copy). `wrong`: the
  // #wrong column (default: m.wrong, "-" when unchecked); m.wrong > 0 fails the curve.
  // `messages` > 1: a batch curve's point (its codec column says "gauss-exp/16").
  auto record = [&](calib::Op op, const std::string& codec, DType dtype, const std::string& curve_dtype,
                    uint64_t bytes, const Measurement& m, const std::string& wrong = "", uint32_t messages = 1) {
    const std::string codec_column = codec.empty() ? "-" : messages > 1 ? codec + "/" + std::to_string(messages) : codec;
    std::printf("%12llu %5s %-10s %-12s %12.3f %9.3f %8d %7s", static_cast<unsigned long long>(bytes),
                std::string(dtype_name(dtype)).c_str(), std::string(calib::op_name(op)).c_str(),
                codec_column.c_str(), m.seconds * 1e6, m.seconds > 0 ? bytes / m.seconds / 1e9 : 0.0,
                m.samples, !wrong.empty() ? wrong.c_str() : m.wrong < 0 ? "-" : std::to_string(m.wrong).c_str());
    if (alone) std::printf(" %12.3f", m.alone_seconds * 1e6);
    std::printf("\n");
    std::fflush(stdout);
    auto [it, fresh] = in_progress.try_emplace({op, codec, curve_dtype, messages});
    if (fresh) it->second.first = true;
    it->second.first = it->second.first && m.wrong <= 0;
    it->second.second.timed.emplace_back(bytes, m.seconds);
    if (m.alone_seconds > 0) it->second.second.alone.emplace_back(bytes, m.alone_seconds);
  };
  auto row = [&](calib::Op op, const Codec* codec, DType dtype, const std::string& curve_dtype, uint64_t bytes) {
    const Measurement m = device->measure(op, codec, bytes, timing);
    record(op, codec ? std::string(codec->name()) : "", dtype, curve_dtype, bytes, m);
  };
  // The curves in progress are finished: those that passed go into the file, which is saved.
  const auto finish = [&] {
    if (in_progress.empty()) return;
    for (auto& [key, state] : in_progress) {
      if (state.first) curves[key] = std::move(state.second);
      else failed.push_back(key);
    }
    in_progress.clear();
    // The last curve is written by the end of the run, with its final line.
    if (!curves.empty() && curves.size() + failed.size() < wanted.size()) save(false);
  };

  for (size_t d = 0; d < opt.dtypes.size(); ++d) {
    const DType dtype = opt.dtypes[d];
    const std::string dt(dtype_name(dtype));
    {
      // The tiled input is made once per dtype; every point times a prefix of it.
      const std::vector<uint8_t> input = tile(pools[d].bytes, largest);
      device->load(dtype, input);
      for (const Codec* codec : opt.codecs) {
        if (!has_op(calib::Op::Compress) && !has_op(calib::Op::Decompress) && !has_op(calib::Op::DecodeAdd)) break;
        for (uint64_t b : sizes)
          for (calib::Op op : {calib::Op::Compress, calib::Op::Decompress})
            if (has_op(op)) row(op, codec, dtype, dt, b);
        finish();
        if (has_op(calib::Op::DecodeAdd) && gpu_decode_adds(codec->id())) {
          for (uint64_t b : sizes) row(calib::Op::DecodeAdd, codec, dtype, dt, b);
          finish();
        }
        // A batch of opt.batch messages at each size, both ways in one measurement.
        if (batch_curves_of(*codec)) {
          for (uint64_t b : sizes) {
            const auto mb = measure_cuda_batch(*device, *codec, opt.batch, timing, b, false);
            if (!mb) throw std::logic_error("calibrate: no batch measurement of " + std::string(codec->name()));
            if (has_op(calib::Op::Compress))
              record(calib::Op::Compress, std::string(codec->name()), dtype, dt, b, mb->encode_batch, "", opt.batch);
            if (has_op(calib::Op::Decompress))
              record(calib::Op::Decompress, std::string(codec->name()), dtype, dt, b, mb->decode_batch, "", opt.batch);
          }
          finish();
        }
      }
#ifdef COMPCOLL_HAVE_NVCOMP
      // nvcomp-ans on the same prefixes of the same input on the device, as compcoll-run's GPU
      // backend runs it (codec/cuda/nvcomp.h: nvCOMP's batched calls and the container), timed
      // and checked as compcoll's codecs are.
      if (opt.nvcomp) {
        for (uint64_t b : sizes)
          for (calib::Op op : {calib::Op::Compress, calib::Op::Decompress})
            if (has_op(op)) row(op, &codec_by_id(CodecId::NvcompAns), dtype, dt, b);
        finish();
      }
#endif
      if (has_op(calib::Op::Reduce)) {
        for (uint64_t b : sizes) row(calib::Op::Reduce, nullptr, dtype, dt, b);
        finish();
      }
      // A copy moves bytes whatever they hold: measured once, on the first dtype's input, for any dtype.
      if (has_op(calib::Op::Copy) && d == 0) {
        for (uint64_t b : sizes) row(calib::Op::Copy, nullptr, dtype, "any", b);
        finish();
      }
    }
#ifdef COMPCOLL_HAVE_NVCOMP
    // nvcomp-ans's ratio on each tensor kind of this dtype, its tensors as they are (not
    // tiled): each kind loaded on the device in turn, one untimed compress and the check.
    if (opt.nvcomp) {
      for (const auto& [kind, k] : tensor_kinds(pools[d])) {
        if (k.bytes.empty()) continue;
        device->load(dtype, k.bytes);
        CudaPeerContext ctx = cuda_peer_context(*device, timing);
        ctx.time = [](const std::function<void()>& fn) {  // once, untimed: the ratio is the point
          fn();
          Measurement m;
          m.samples = 1;
          return m;
        };
        const PeerResult r = run_nvcomp_peer(kNvcompAns, ctx, k.bytes);
        if (r.ok) {
          ratios.push_back({dt, kind, static_cast<double>(r.payload_bytes) / k.bytes.size(), k.bytes.size()});
          std::printf("# ratio %s %s %s: %s (payload %llu of %zu bytes, %zu file%s)\n", kNvcompAns.c_str(), dt.c_str(),
                      kind.c_str(), config::yaml_number(ratios.back().ratio).c_str(),
                      static_cast<unsigned long long>(r.payload_bytes), k.bytes.size(), k.files, k.files == 1 ? "" : "s");
        } else {
          ratio_failed.push_back(dt + " " + kind);
          std::printf("# ratio %s %s %s: FAILED: %s\n", kNvcompAns.c_str(), dt.c_str(), kind.c_str(), r.error.c_str());
        }
        std::fflush(stdout);
      }
      // Saved now unless the run's last curve is still to come (it saves at the end).
      if (!curves.empty() && curves.size() + failed.size() < wanted.size()) save(false);
    }
#endif
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  if (failed.empty() && !ratio_failed.empty()) {
    save(true);
    std::printf("# FAILED: a correctness check of %s's ratios failed; %s holds every curve and the ratios whose "
                "checks passed\n", kNvcompAns.c_str(), opt.out.c_str());
    return 1;
  }
  if (!failed.empty()) {
    if (curves.empty()) {
      std::printf("# FAILED: a correctness check failed in every curve; %s not written\n", opt.out.c_str());
    } else {
      save(true);
      std::printf("# FAILED: a correctness check failed; %s holds the %zu curves whose checks passed (complete: false)\n",
                  opt.out.c_str(), curves.size());
    }
    return 1;
  }
  save(true);
  std::printf("# OK: wrote %s (%zu curves, %zu sizes, %.0f s)\n", opt.out.c_str(), curves.size(), sizes.size(), elapsed);
  return 0;
}

}  // namespace compcoll::bench
