// tools/compcoll_bench.cpp — compcoll-bench: measures codecs on real or synthetic tensors.
//   compcoll-bench codec [--codec NAME[,NAME...]|all] [--dtype bf16|fp16|fp32] [--json] [--chunk N] [--peer zipnn]
//                        [--min-time SECONDS] [--threads N] [--device host|cuda] [--batch K] PATH...
// Per input and codec: ratio, the order-0 exponent-entropy bound, encode/decode GB/s (best of
// several timed runs after an untimed warm-up), then a separate check: bit-exact for lossless
// codecs; for lossy ones (fp8-hadamard) the max abs and relative L2 error, and a check that
// decoding succeeds and finite inputs stay finite. zstd -1 (plain
// and byte-grouped), lz4 and memcpy run on the same bytes in the same process as yardsticks;
// --peer zipnn runs ZipNN on them too, through Python (tools/zipnn_peer.py).
// --device cuda runs the CUDA kernels instead, through calibrate's CUDA device (same timing:
// CUDA events, median), and where the build found nvCOMP its ANS and Bitcomp on the same
// device buffer as yardsticks (tools/nvcomp_peer.h); --batch K also times each tensor as K
// messages coded in one batch and in K calls (calibrate.h's measure_cuda_batch).
//   compcoll-bench calibrate ...   (tools/calibrate.cpp: writes a calibration file)
//   compcoll-bench pipeline ...    (tools/pipeline_cmd.cpp: a message over PCIe on one GPU)
//   compcoll-bench version         (the build, and whether libnvcomp.so.6 loads; no GPU needed)
// The program decides exit codes; the libraries only report.
#include <lz4.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_paths.h"
#include "calibrate.h"
#include "codec/codec.h"
#include "io/float_convert.h"
#include "io/tensor_file.h"
#include "pipeline.h"
#include "util/text.h"
#ifdef COMPCOLL_HAVE_NVCOMP
#include "nvcomp_peer.h"
#endif

namespace {

using namespace compcoll;
using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<std::string> codecs;  // empty = all
  std::optional<DType> dtype;
  bool json = false;
  uint32_t chunk = format::kDefaultChunkElements;
  double min_time = 0.2;
  std::vector<std::string> inputs;
  bool zipnn = false;  // --peer zipnn: ZipNN through Python (tools/zipnn_peer.py) on the same bytes
  std::string device = "host";  // --device cuda: the CUDA kernels (and nvCOMP where built)
  uint32_t threads = 1;          // --threads N: host encode/decode on N threads (0: one per hardware thread)
  uint32_t batch = 0;            // --batch K (--device cuda): also as K messages, one batch against K calls
  // --chunk and --threads as the encoder takes them (the CUDA kernels ignore threads, which is 1
  // with --device cuda).
  EncodeOptions encode_options() const {
    EncodeOptions e;
    e.chunk_elements = chunk;
    e.threads = threads;
    return e;
  }
};

struct Row {
  std::string file, codec;
  DType dtype;
  size_t elements = 0;
  double ratio = 0, bound = 0, encode_gbps = 0, decode_gbps = 0, memcpy_gbps = 0;
  std::string check;  // "OK", "FAILED", or "-" for yardsticks that are not lossless checks
  double max_abs = -1, rel_l2 = -1;  // lossy codecs only; negative: not applicable
  std::string more_json{};            // more fields of its JSON line (", \"key\": value")
  std::string more_text{};            // a line under its table row ("#   ...")
};

// Errors of a lossy round trip: max |got - want| and ||got - want|| / ||want|| (in double, over
// the elements whose input is finite); `finite` says whether those stayed finite.
struct LossyError {
  double max_abs = 0, rel_l2 = 0;
  bool finite = true;
};
LossyError lossy_error(DType dtype, const uint8_t* got, const uint8_t* want, size_t elements) {
  LossyError e;
  double num = 0, den = 0;
  for (size_t i = 0; i < elements; ++i) {
    const double w = load_as_float(dtype, want, i), g = load_as_float(dtype, got, i);
    if (!std::isfinite(w)) continue;
    e.finite &= std::isfinite(g);
    e.max_abs = std::max(e.max_abs, std::abs(g - w));
    num += (g - w) * (g - w);
    den += w * w;
  }
  e.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return e;
}

// The usage lines: on stderr with the error and exit status 2, or (msg empty: --help) on stdout
// with status 0.
[[noreturn]] void usage_error(const std::string& msg) {
  FILE* out = msg.empty() ? stdout : stderr;
  if (!msg.empty()) std::fprintf(stderr, "compcoll-bench: %s\n", msg.c_str());
  std::fprintf(out,
               "usage: compcoll-bench codec [--codec NAME[,NAME...]|all] [--dtype bf16|fp16|fp32] [--json]\n"
               "                            [--chunk ELEMENTS|auto] [--min-time SECONDS] [--peer zipnn]\n"
               "                            [--threads N] [--device host|cuda] [--batch K] PATH...\n"
               "  PATH: file.npy | file.safetensors | synthetic:gaussian:N | synthetic:uniform-bits:N\n"
               "       compcoll-bench calibrate --out FILE.yaml [...]     (calibrate --help)\n"
               "       compcoll-bench pipeline [--codec ...] [--pieces 1,4,16] PATH...   (a message over PCIe on one GPU)\n"
               "       mpirun -np N compcoll-bench transport --out FILE.yaml [...]   (transport --help)\n"
               "       compcoll-bench version   (the build, and whether nvCOMP loads; no GPU needed)\n");
  std::exit(msg.empty() ? 0 : 2);
}

// Best time of repeated runs after one untimed warm-up; runs until min_time has elapsed and
// at least 3 timed runs are done.
double best_seconds(const std::function<void()>& fn, double min_time) {
  fn();
  double best = 1e30, total = 0;
  for (int runs = 0; runs < 3 || total < min_time; ++runs) {
    const auto t0 = Clock::now();
    fn();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, s);
    total += s;
    if (runs > 10000) break;
  }
  return best;
}

double gbps(size_t bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0; }

// The one place rows are printed, as a table or as JSON lines.
class RowPrinter {
 public:
  // device: empty for the host; with --device cuda the GPU's name, and `notes` for the header.
  // chunk: the elements per chunk compcoll's codecs code with (--chunk), in their JSON rows.
  // device_json: more JSON fields of a device's rows (", \"key\": value").
  explicit RowPrinter(bool json, std::string device = {}, std::vector<std::string> notes = {}, uint32_t threads = 1,
                      uint32_t chunk = format::kDefaultChunkElements, std::string device_json = {})
      : json_(json), device_(std::move(device)), notes_(std::move(notes)), threads_(threads), chunk_(chunk),
        device_json_(std::move(device_json)) {}
  void header() const {
    if (json_) return;
    std::printf("# compcoll-bench codec: ratio = original / compressed bytes; bound = order-0 exponent-entropy bound\n");
    std::printf("# lossy codecs: check = decodes, finite stays finite; maxabs, relL2 = their error\n");
    if (device_.empty())
      std::printf("# host codec path: %s (COMPCOLL_HOST_SIMD=0 selects the portable one; docs/compcoll-bench.md)\n",
                  std::string(host_codec_path()).c_str());
    for (const std::string& n : notes_) std::printf("# %s\n", n.c_str());
    std::printf("%-44s %-20s %5s %11s %7s %7s %9s %9s %9s %6s %10s %8s\n", "# file", "codec", "type",
                "elements", "ratio", "bound", "enc", "dec", "memcpy", "check", "maxabs", "relL2");
    std::printf("%-44s %-20s %5s %11s %7s %7s %9s %9s %9s %6s %10s %8s\n", "#", "", "", "(count)", "", "",
                "(GB/s)", "(GB/s)", "(GB/s)", "", "", "");
  }
  void row(const Row& r) const {
    if (json_) {
      std::printf("{\"file\": \"%s\", \"codec\": \"%s\", \"dtype\": \"%s\", \"elements\": %zu, "
                  "\"ratio\": %.5f, \"bound\": %.5f, \"encode_gbps\": %.4f, \"decode_gbps\": %.4f, "
                  "\"lossless_ok\": %s, \"memcpy_gbps\": %.4f, \"host_path\": \"%s\", \"threads\": %u%s%s%s}\n",
                  json_escape(r.file).c_str(), r.codec.c_str(), std::string(dtype_name(r.dtype)).c_str(),
                  r.elements, r.ratio, r.bound, r.encode_gbps, r.decode_gbps,
                  r.max_abs >= 0 ? "null" : r.check == "OK" ? "true" : (r.check == "FAILED" ? "false" : "null"),
                  r.memcpy_gbps, std::string(host_codec_path()).c_str(), threads_, (lossy_json(r) + r.more_json).c_str(),
                  find_codec(r.codec) ? chunk_json(r.elements).c_str() : "",
                  device_.empty() ? "" : (", \"device\": \"" + json_escape(device_) + "\"" + device_json_).c_str());
    } else {
      char err[32] = "         -        -";
      if (r.max_abs >= 0) std::snprintf(err, sizeof err, "%10.3g %8.5f", r.max_abs, r.rel_l2);
      std::printf("%-44s %-20s %5s %11zu %7.4f %7.4f %9.3f %9.3f %9.3f %6s %s\n", shorten(r.file).c_str(),
                  r.codec.c_str(), std::string(dtype_name(r.dtype)).c_str(), r.elements, r.ratio,
                  r.bound, r.encode_gbps, r.decode_gbps, r.memcpy_gbps, r.check.c_str(), err);
      if (!r.more_text.empty()) std::printf("#   %s\n", r.more_text.c_str());
    }
    std::fflush(stdout);
  }

 private:
  // The chunk size of a row's streams (with --chunk auto, also that it was chosen by their size)
  // and the size --chunk auto picks for as many elements (tools/gpu_targets.py compares them).
  std::string chunk_json(uint64_t elements) const {
    return ", \"chunk_elements\": " + std::to_string(format::chunk_elements_for(chunk_, elements)) +
           (chunk_ == format::kAutoChunk ? ", \"chunk_policy\": \"auto\"" : "") +
           ", \"auto_chunk_elements\": " + std::to_string(format::auto_chunk_elements(elements));
  }
  static std::string lossy_json(const Row& r) {
    if (r.max_abs < 0) return {};
    char b[96];
    std::snprintf(b, sizeof b, ", \"lossy_ok\": %s, \"max_abs\": %.6g, \"rel_l2\": %.6g",
                  r.check == "OK" ? "true" : "false", r.max_abs, r.rel_l2);
    return b;
  }
  // printable first (no control characters left, and JSON text is UTF-8), then quotes and
  // backslashes escaped.
  static std::string json_escape(const std::string& s) {
    std::string o;
    for (char c : printable(s)) {
      if (c == '"' || c == '\\') o += '\\';
      o += c;
    }
    return o;
  }
  static std::string shorten(const std::string& s) {
    const size_t slash = s.rfind('/');
    std::string base = slash == std::string::npos ? s : s.substr(slash + 1);
    return base.size() > 44 ? "..." + base.substr(base.size() - 41) : base;
  }
  bool json_;
  std::string device_;
  std::vector<std::string> notes_;
  uint32_t threads_;
  uint32_t chunk_;
  std::string device_json_;
};

// Splits each element's bytes into planes (all byte 0s, all byte 1s, ...), the usual
// preconditioner that lets a byte-oriented compressor see the exponent bytes together.
std::vector<uint8_t> byte_grouped(const TensorData& t) {
  const size_t es = dtype_size(t.dtype), n = t.elements();
  std::vector<uint8_t> out(t.bytes.size());
  for (size_t i = 0; i < n; ++i)
    for (size_t b = 0; b < es; ++b) out[b * n + i] = t.bytes[i * es + b];
  return out;
}

struct Yardstick {
  std::string name;
  std::function<size_t(const std::vector<uint8_t>&, std::vector<uint8_t>&)> compress;
  std::function<bool(const std::vector<uint8_t>&, size_t, std::vector<uint8_t>&)> decompress;
  bool grouped;
};

std::vector<Yardstick> yardsticks() {
  auto zc = [](const std::vector<uint8_t>& in, std::vector<uint8_t>& out) {
    out.resize(ZSTD_compressBound(in.size()));
    const size_t r = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 1);
    return ZSTD_isError(r) ? size_t{0} : r;
  };
  auto zd = [](const std::vector<uint8_t>& in, size_t n, std::vector<uint8_t>& out) {
    const size_t r = ZSTD_decompress(out.data(), out.size(), in.data(), n);
    return !ZSTD_isError(r) && r == out.size();
  };
  auto lc = [](const std::vector<uint8_t>& in, std::vector<uint8_t>& out) {
    out.resize(LZ4_compressBound(static_cast<int>(in.size())));
    return static_cast<size_t>(LZ4_compress_default(reinterpret_cast<const char*>(in.data()),
                                                    reinterpret_cast<char*>(out.data()),
                                                    static_cast<int>(in.size()), static_cast<int>(out.size())));
  };
  auto ld = [](const std::vector<uint8_t>& in, size_t n, std::vector<uint8_t>& out) {
    const int r = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out.data()),
                                      static_cast<int>(n), static_cast<int>(out.size()));
    return r >= 0 && static_cast<size_t>(r) == out.size();
  };
  return {{"zstd-1", zc, zd, false}, {"zstd-1-bytegrouped", zc, zd, true}, {"lz4", lc, ld, false}};
}

// --peer zipnn: the script (in tools_dir(): COMPCOLL_TOOLS_DIR, the bundle's or the source
// tree's tools/) and the Python that runs it (COMPCOLL_PYTHON, default python3).
std::string zipnn_command(const std::string& args) {
  const char* py = std::getenv("COMPCOLL_PYTHON");
  return std::string(py && *py ? py : "python3") + " '" + bench::tools_dir() + "/zipnn_peer.py' " + args + " 2>&1";
}

// Runs a command; its exit status and everything it printed.
std::pair<int, std::string> run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "cannot start: " + cmd};
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// ZipNN on the tensor's bytes (written to a file the script reads), one row like the others.
bool zipnn_row(const TensorData& t, const Options& opt, double bound, double memcpy_gbps, const RowPrinter& printer) {
  const std::string path = "/tmp/compcoll-bench-zipnn-" + std::to_string(getpid()) + ".bin";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
  }
  char min_time[32];
  std::snprintf(min_time, sizeof min_time, "%g", opt.min_time);
  const auto [rc, out] = run_command(zipnn_command("--dtype " + std::string(dtype_name(t.dtype)) + " --min-time " +
                                                   min_time + " '" + path + "'"));
  std::remove(path.c_str());
  nlohmann::json j;
  const size_t line = out.rfind('{');
  if (rc == 0 && line != std::string::npos) j = nlohmann::json::parse(out.substr(line), nullptr, false);
  if (rc != 0 || !j.is_object() || !j.contains("ok")) {
    std::fprintf(stderr, "compcoll-bench: %s: --peer zipnn failed (exit %d): %s\n", t.source.c_str(), rc, out.c_str());
    return false;
  }
  const bool good = j["ok"].get<bool>();
  printer.row({t.source, "zipnn-" + j.value("version", std::string("?")), t.dtype, t.elements(), j.value("ratio", 0.0),
               bound, j.value("encode_gbps", 0.0), j.value("decode_gbps", 0.0), memcpy_gbps, good ? "OK" : "FAILED"});
  return good;
}

// Runs every selected codec and the yardsticks on one tensor; returns false if a check failed.
bool bench_tensor(const TensorData& t, const Options& opt, const RowPrinter& printer) {
  const size_t bytes = t.bytes.size();
  const double bound = exponent_entropy(t.dtype, t.bytes.data(), t.elements()).bound;
  std::vector<uint8_t> copy(bytes);
  const double memcpy_gbps = gbps(bytes, best_seconds([&] { std::memcpy(copy.data(), t.bytes.data(), bytes); }, opt.min_time));
  bool ok = true;
  const std::vector<std::string> names = [&] {
    if (!opt.codecs.empty()) return opt.codecs;
    std::vector<std::string> all;
    for (auto n : codec_names()) all.emplace_back(n);
    return all;
  }();
  const EncodeOptions eopt = opt.encode_options();
  for (const std::string& name : names) {
    const Codec& codec = *find_codec(name);
    std::vector<uint8_t> stream(max_encoded_size(codec, t.dtype, t.elements(), eopt));
    size_t size = 0;
    const double enc = best_seconds([&] {
      size = encode(codec, t.dtype, t.bytes.data(), t.elements(), stream.data(), stream.size(), eopt);
    }, opt.min_time);
    std::vector<uint8_t> out(bytes);
    const double dec = best_seconds([&] { decode(stream.data(), size, out.data(), out.size(), opt.threads); }, opt.min_time);
    // Correctness pass, separate from timing: a fresh buffer, decoded from an exact-size copy.
    std::vector<uint8_t> exact(stream.begin(), stream.begin() + size);
    std::vector<uint8_t> check(bytes, 0x5A);
    bool good = true;
    LossyError err;
    try {
      decode(exact.data(), exact.size(), check.data(), check.size(), opt.threads);
      if (codec.lossless()) {
        good = check == t.bytes;
      } else {
        err = lossy_error(t.dtype, check.data(), t.bytes.data(), t.elements());
        good = err.finite;
      }
    } catch (const CodecError&) {
      good = false;
    }
    ok &= good;
    printer.row({t.source, name, t.dtype, t.elements(), size ? static_cast<double>(bytes) / size : 0, bound,
                 gbps(bytes, enc), gbps(bytes, dec), memcpy_gbps, good ? "OK" : "FAILED",
                 codec.lossless() ? -1.0 : err.max_abs, codec.lossless() ? -1.0 : err.rel_l2});
  }
  if (opt.zipnn) ok &= zipnn_row(t, opt, bound, memcpy_gbps, printer);
  if (!opt.codecs.empty()) return ok;
  for (const Yardstick& y : yardsticks()) {
    const std::vector<uint8_t> src = y.grouped ? byte_grouped(t) : t.bytes;
    std::vector<uint8_t> comp;
    size_t size = 0;
    const double enc = best_seconds([&] { size = y.compress(src, comp); }, opt.min_time);
    std::vector<uint8_t> out(bytes);
    bool good = size > 0 || bytes == 0;
    const double dec = best_seconds([&] { good &= y.decompress(comp, size, out); }, opt.min_time);
    good &= out == src;
    ok &= good;
    printer.row({t.source, y.name, t.dtype, t.elements(), size ? static_cast<double>(bytes) / size : 0, bound,
                 gbps(bytes, enc), gbps(bytes, dec), memcpy_gbps, good ? "OK" : "FAILED"});
  }
  return ok;
}

// --device cuda: every selected codec's CUDA kernels on one tensor, through calibrate's CUDA
// device (tools/calibrate_cuda.cpp): the same buffers, stream and timing (one untimed warm-up,
// CUDA-event samples until --min-time and at least 3; the median) and its check (decode of
// the device's own stream, bit-exact against the input, or for a lossy codec against the
// host round trip). The kernels write streams byte-identical to the host encoder
// (codec/cuda/codec_cuda.h), so the ratio (and a lossy codec's error) is taken from the host
// encoder, untimed. With --codec all, nvCOMP's codecs follow on the same device input where
// the build has nvCOMP, as the yardsticks do on the host. Returns false if a check failed.
bool bench_tensor_cuda(const TensorData& t, const Options& opt, const RowPrinter& printer,
                       bench::CalibrationDevice& device) {
  const size_t bytes = t.bytes.size();
  const double bound = exponent_entropy(t.dtype, t.bytes.data(), t.elements()).bound;
  bench::TimingOptions timing;
  timing.min_time = opt.min_time;
  timing.min_samples = 3;
  device.load(t.dtype, t.bytes);
  const bench::Measurement copy = device.measure(calib::Op::Copy, nullptr, bytes, timing);
  const double memcpy_gbps = gbps(bytes, copy.seconds);
  bool ok = true;
  if (copy.wrong != 0) {
    std::fprintf(stderr, "compcoll-bench: %s: device-to-device copy: %lld elements differ\n", t.source.c_str(),
                 static_cast<long long>(copy.wrong));
    ok = false;
  }
  const std::vector<std::string> names = [&] {
    if (!opt.codecs.empty()) return opt.codecs;
    std::vector<std::string> all;
    for (auto n : codec_names()) all.emplace_back(n);
    return all;
  }();
  // The reduce kernel on the same bytes, beside each codec's fused decode-and-add.
  std::optional<double> reduce_s;
  for (const std::string& name : names) {
    const Codec& codec = *find_codec(name);
    double enc = 0, dec = 0;
    size_t size = 0;
    bool good = false;
    LossyError err;
    std::string more, more_text;
    try {
      const bench::Measurement me = device.measure(calib::Op::Compress, &codec, bytes, timing);
      const bench::Measurement md = device.measure(calib::Op::Decompress, &codec, bytes, timing);
      enc = me.seconds;
      dec = md.seconds;
      good = me.wrong == 0 && md.wrong == 0;
      if (const auto ma = bench::measure_cuda_decode_add(device, codec, bytes, timing)) {
        if (!reduce_s) {
          const bench::Measurement mr = device.measure(calib::Op::Reduce, nullptr, bytes, timing);
          reduce_s = mr.seconds;
          good &= mr.wrong == 0;
        }
        good &= ma->wrong == 0;
        char b[96];
        std::snprintf(b, sizeof b, ", \"decode_add_gbps\": %.4f, \"reduce_gbps\": %.4f", gbps(bytes, ma->seconds),
                      gbps(bytes, *reduce_s));
        more = b;
      }
      if (const auto mb = opt.batch ? bench::measure_cuda_batch(device, codec, opt.batch, timing) : std::nullopt) {
        good &= mb->decode_batch.wrong == 0;
        const double be = gbps(bytes, mb->encode_batch.seconds), bd = gbps(bytes, mb->decode_batch.seconds);
        const double ce = gbps(bytes, mb->encode_calls.seconds), cd = gbps(bytes, mb->decode_calls.seconds);
        char b[192];
        std::snprintf(b, sizeof b,
                      ", \"batch_messages\": %u, \"batch_encode_gbps\": %.4f, \"batch_decode_gbps\": %.4f, "
                      "\"calls_encode_gbps\": %.4f, \"calls_decode_gbps\": %.4f",
                      opt.batch, be, bd, ce, cd);
        more += b;
        std::snprintf(b, sizeof b, "%u messages: one batch enc %.3f dec %.3f GB/s, %u calls enc %.3f dec %.3f GB/s%s",
                      opt.batch, be, bd, opt.batch, ce, cd, mb->decode_batch.wrong == 0 ? "" : " (batch FAILED)");
        more_text = b;
      }
      const std::vector<uint8_t> stream = encode(codec, t.dtype, t.bytes.data(), t.elements(), opt.encode_options());
      size = stream.size();
      if (!codec.lossless()) {
        std::vector<uint8_t> back(bytes);
        decode(stream.data(), stream.size(), back.data(), back.size());
        err = lossy_error(t.dtype, back.data(), t.bytes.data(), t.elements());
        good &= err.finite;
      }
    } catch (const std::exception& e) {  // CodecError, or a CUDA failure (codec/cuda/check.h)
      std::fprintf(stderr, "compcoll-bench: %s\n", printable(t.source + ": " + name + ": " + e.what()).c_str());
      good = false;
    }
    ok &= good;
    printer.row({t.source, name, t.dtype, t.elements(), size ? static_cast<double>(bytes) / size : 0, bound,
                 gbps(bytes, enc), gbps(bytes, dec), memcpy_gbps, good ? "OK" : "FAILED",
                 codec.lossless() ? -1.0 : err.max_abs, codec.lossless() ? -1.0 : err.rel_l2, more, more_text});
  }
  if (!opt.codecs.empty()) return ok;
#ifdef COMPCOLL_HAVE_NVCOMP
  // nvCOMP reads the input the kernels above read, on their stream, timed the same way.
  for (const bench::PeerResult& r : bench::run_nvcomp_peers(bench::cuda_peer_context(device, timing), t.bytes)) {
    if (!r.ok) std::fprintf(stderr, "compcoll-bench: %s: %s: %s\n", t.source.c_str(), r.codec.c_str(), r.error.c_str());
    ok &= r.ok;
    printer.row({t.source, r.codec, t.dtype, t.elements(),
                 r.ok && r.compressed_bytes ? static_cast<double>(bytes) / r.compressed_bytes : 0, bound,
                 r.ok ? gbps(bytes, r.encode_seconds) : 0, r.ok ? gbps(bytes, r.decode_seconds) : 0, memcpy_gbps,
                 r.ok ? "OK" : "FAILED"});
  }
#endif
  return ok;
}

Options parse_args(int argc, char** argv) {
  Options opt;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + ": missing value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") usage_error("");
    if (a == "--codec") {  // repeatable, and a comma list as calibrate and pipeline take
      for (const std::string& v : bench::comma_items(value())) {
        if (v == "all") continue;
        if (!find_codec(v)) {
          std::string names;
          for (auto n : codec_names()) names += (names.empty() ? "" : ", ") + std::string(n);
          usage_error("--codec: unknown codec \"" + v + "\" (expected all, " + names + ", or a comma list of them)");
        }
        opt.codecs.push_back(v);
      }
    } else if (a == "--dtype") {
      const std::string v = value();
      opt.dtype = parse_dtype(v);
      if (!opt.dtype) usage_error("--dtype: expected bf16, fp16 or fp32, got \"" + v + "\"");
    } else if (a == "--json") {
      opt.json = true;
    } else if (a == "--peer") {
      const std::string v = value();
      if (v != "zipnn") usage_error("--peer: expected zipnn, got \"" + v + "\"");
      const auto [rc, out] = run_command(zipnn_command("--check"));
      if (rc != 0) usage_error("--peer zipnn: " + out.substr(0, out.find('\n')));
      opt.zipnn = true;
    } else if (a == "--chunk") {
      const std::string v = value();
      const auto c = bench::chunk_elements_value(v);
      if (!c) usage_error(bench::chunk_elements_error(v));
      opt.chunk = *c;
    } else if (a == "--min-time") {
      const std::string v = value();
      const auto t = bench::seconds_value(v);
      if (!t) usage_error("--min-time: expected seconds >= 0, got \"" + v + "\"");
      opt.min_time = *t;
    } else if (a == "--threads") {
      const std::string v = value();
      const auto t = bench::whole_number(v, 0, 1024);
      if (!t) usage_error("--threads: expected 0 (one per hardware thread) to 1024, got \"" + v + "\"");
      opt.threads = static_cast<uint32_t>(*t);
    } else if (a == "--batch") {
      const std::string v = value();
      const auto k = bench::whole_number(v, 1, 1024);
      if (!k) usage_error("--batch: expected messages from 1 to 1024, got \"" + v + "\"");
      opt.batch = static_cast<uint32_t>(*k);
    } else if (a == "--device") {
      opt.device = value();
      if (opt.device != "host" && opt.device != "cuda")
        usage_error("--device: expected host or cuda, got \"" + opt.device + "\"");
    } else if (a.rfind("--", 0) == 0) {
      usage_error("unknown option " + a);
    } else {
      opt.inputs.push_back(a);
    }
  }
  if (opt.inputs.empty()) usage_error("no input given");
  if (opt.device == "cuda") {
    if (opt.zipnn) usage_error("--peer zipnn: runs on the host, not with --device cuda");
    if (opt.threads != 1) usage_error("--threads: host threads, not with --device cuda");
  } else if (opt.batch) {
    usage_error("--batch: the CUDA kernels' batches, only with --device cuda");
  }
  return opt;
}

int run_codec_bench(int argc, char** argv) {
  const Options opt = parse_args(argc, argv);
  // --device cuda: the GPU, or one line and exit 2 before any input is read (no GPU, or a
  // build without CUDA), as calibrate --device cuda does.
  std::unique_ptr<bench::CalibrationDevice> device;
  std::vector<std::string> notes;
  std::string device_json;  // more fields of a --device cuda row
  if (opt.device == "cuda") {
    try {
      device = bench::make_cuda_device(opt.encode_options());
    } catch (const bench::DeviceUnavailable& e) {
      std::fprintf(stderr, "compcoll-bench: %s\n", e.what());
      return 2;
    }
    notes.push_back("device: " + device->name() + " (--device cuda: enc, dec = median of CUDA-event samples on one stream; "
                    "memcpy = device to device; ratio from the host encoder, whose bytes the kernels write; chunks of " +
                    (opt.chunk == format::kAutoChunk ? std::string("4096-16384 elements by each stream's size (--chunk auto)")
                                                     : std::to_string(opt.chunk) + " elements") + ")");
    for (const auto& [key, value] : device->machine())
      if (key == "cuda_encoder") {
        notes.push_back("gauss-exp's CUDA encoder: " + value + " (COMPCOLL_CUDA_ENCODER; docs/compcoll-bench.md)");
        device_json = ", \"cuda_encoder\": \"" + value + "\"";
      }
#ifdef COMPCOLL_HAVE_NVCOMP
    if (const std::string why = nvcomp_unavailable(); !why.empty())
      notes.push_back("yardsticks: none (nvCOMP: " + why + ")");
    else
      notes.push_back("yardsticks: " + nvcomp_version() + " nvcomp-ans, nvcomp-bitcomp (batched API, " +
                      std::to_string(kNvcompChunkBytes / 1024) + " KiB chunks; ratio counts 8 bytes per chunk for its size)");
#else
    notes.push_back("yardsticks: none (this compcoll-bench was built without nvCOMP; docs/compcoll-bench.md)");
#endif
  }
  if (!device && opt.threads != 1)
    notes.push_back("host threads: " + std::to_string(opt.threads) + (opt.threads == 0 ? " (one per hardware thread: " +
                    std::to_string(std::thread::hardware_concurrency()) + ")" : "") +
                    " code and decode the chunks of each stream (at least 4 chunks a thread); memcpy and the yardsticks run on one");
  const RowPrinter printer(opt.json, device ? device->name() : std::string(), notes, opt.threads, opt.chunk,
                           device_json);
  printer.header();
  bool ok = true, input_error = false;
  for (const std::string& in : opt.inputs) {
    std::vector<TensorData> tensors;
    try {
      tensors = load_tensors(in, opt.dtype);
    } catch (const TensorFileError& e) {
      // Report and go on: the rows already printed and those of the other inputs stay valid.
      std::fprintf(stderr, "compcoll-bench: %s\n", e.what());
      input_error = true;
      continue;
    }
    for (const TensorData& t : tensors)
      ok &= device ? bench_tensor_cuda(t, opt, printer, *device) : bench_tensor(t, opt, printer);
  }
  if (!opt.json) std::printf("# %s\n", ok && !input_error ? "OK" : (ok ? "INPUT ERRORS" : "FAILED"));
  return input_error ? 2 : (ok ? 0 : 1);
}

// `compcoll-bench version`: what this program was built with and what it finds at run time,
// without a GPU: the host codec path, CUDA, and whether libnvcomp.so.6 opens with every
// function the nvCOMP rows call (the loading of `codec --device cuda`). Exit 0; the lines say
// what is missing.
int run_version() {
  std::printf("compcoll-bench %s\n", COMPCOLL_VERSION);
  std::printf("host codec path: %s\n", std::string(host_codec_path()).c_str());
#ifdef COMPCOLL_HAVE_CUDA
  std::printf("cuda: built with CUDA (codec --device cuda, calibrate --device cuda)\n");
#else
  std::printf("cuda: built without CUDA\n");
#endif
#ifdef COMPCOLL_HAVE_NVCOMP
  if (const std::string why = nvcomp_unavailable(); !why.empty())
    std::printf("nvcomp: not loadable: %s\n", why.c_str());
  else
    std::printf("nvcomp: loaded %s from %s\n", nvcomp_version().c_str(), nvcomp_library_file().c_str());
#else
  std::printf("nvcomp: built without nvCOMP (docs/compcoll-bench.md)\n");
#endif
  return 0;
}

}  // namespace

namespace compcoll::bench {
int run_transport(int argc, char** argv);  // tools/transport_cmd.cpp, built with MPI
}

int main(int argc, char** argv) {
  if (argc < 2) usage_error("missing command (codec, calibrate, pipeline, transport or version)");
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") usage_error("");
  try {
    if (cmd == "version" || cmd == "--version") return run_version();
    if (cmd == "codec") return run_codec_bench(argc, argv);
    if (cmd == "calibrate") return bench::run_calibrate(argc, argv);
    if (cmd == "pipeline") return bench::run_pipeline(argc, argv);
    if (cmd == "transport") {
#ifdef COMPCOLL_HAVE_TRANSPORT_BENCH
      return bench::run_transport(argc, argv);
#else
      std::fprintf(stderr, "compcoll-bench: transport: this compcoll-bench was built without MPI\n");
      return 2;
#endif
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compcoll-bench: %s\n", printable(e.what()).c_str());
    return 2;
  }
  usage_error("unknown command \"" + cmd + "\" (expected codec, calibrate, pipeline, transport or version)");
}
