// tools/pipeline_cmd.cpp — `compcoll-bench pipeline` (tools/pipeline.h): options, the link
// measurement, one row per input, piece count and codec (the message moved as it is, then
// compressed), each beside the cost model's time for it, as a table or JSON lines.
// Exit status: 0 every row checked OK; 1 some row failed its check; 2 bad options, an input that
// does not load, or no GPU.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "calibrate.h"
#include "calibration/calibration.h"
#include "codec/codec.h"
#include "config/yaml_node.h"
#include "io/tensor_file.h"
#include "pipeline.h"
#include "policy/cost_model.h"
#include "report/row.h"
#include "util/text.h"
#ifdef COMPCOLL_HAVE_CUDA
#include "codec/cuda/codec_cuda.h"
#endif
#ifdef COMPCOLL_HAVE_NVCOMP
#include "codec/cuda/nvcomp.h"
#endif

namespace compcoll::bench {
namespace {

struct PipelineOptions {
  std::vector<const Codec*> codecs;
  std::optional<DType> dtype;
  std::vector<uint32_t> pieces{1, 4, 16};
  uint64_t slot = uint64_t{1} << 20;
  uint64_t link_bytes = uint64_t{64} << 20;
  std::optional<uint32_t> chunk;  // --chunk; by default the calibration's, else 16384
  std::string calibration;
  double min_time = 0.2;
  bool json = false;
  std::vector<std::string> inputs;
};

// The usage lines: on stderr with the error and exit status 2, or (msg empty: --help) on stdout
// with status 0.
[[noreturn]] void pipeline_usage(const std::string& msg) {
  FILE* out = msg.empty() ? stdout : stderr;
  if (!msg.empty()) std::fprintf(stderr, "compcoll-bench pipeline: %s\n", msg.c_str());
  std::fprintf(out,
               "usage: compcoll-bench pipeline [--device cuda] [--codec gauss-exp,entropy-exp,identity,nvcomp-ans]\n"
               "         [--dtype bf16|fp16|fp32] [--pieces 1,4,16] [--slot BYTES] [--chunk ELEMENTS|auto]\n"
               "         [--calibration FILE.yaml] [--link-bytes BYTES] [--min-time SECONDS] [--json] PATH...\n"
               "  PATH as for `compcoll-bench codec`: file.npy | file.safetensors | synthetic:gaussian:N\n");
  std::exit(msg.empty() ? 0 : 2);
}

uint64_t bytes_option(const std::string& name, const std::string& v, uint64_t least) {
  uint64_t b = 0;
  try {
    b = config::parse_bytes(v);
  } catch (const std::exception& e) {
    pipeline_usage(name + ": " + e.what());
  }
  if (b < least) pipeline_usage(name + ": expected at least " + std::to_string(least) + " bytes, got \"" + v + "\"");
  return b;
}

PipelineOptions parse_pipeline_args(int argc, char** argv) {
  PipelineOptions opt;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) pipeline_usage(a + ": missing value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") pipeline_usage("");
    if (a == "--device") {
      const std::string v = value();
      if (v == "host")
        pipeline_usage("--device host: a host has no link of its own to move a message over; run "
                       "experiments/pipeline-cpu.yaml with compcoll-run (MPI between two ranks) instead");
      if (v != "cuda") pipeline_usage("--device: expected cuda, got \"" + v + "\"");
    } else if (a == "--codec") {
      opt.codecs.clear();
      for (const std::string& name : comma_items(value())) {
        if (name == kNvcompAnsName) {  // nvCOMP's ANS, as compcoll-run's GPU backend runs it
#ifdef COMPCOLL_HAVE_NVCOMP
          if (const std::string why = nvcomp_unavailable(); !why.empty()) pipeline_usage("--codec nvcomp-ans: " + why);
          opt.codecs.push_back(find_plan_codec(name));
          continue;
#else
          pipeline_usage("--codec nvcomp-ans: this compcoll-bench was built without nvCOMP");
#endif
        }
        const Codec* c = find_codec(name);
        if (!c || !(name == "identity" || name == "gauss-exp" || name == "entropy-exp"))
          pipeline_usage("--codec: expected gauss-exp, entropy-exp, identity (lossless codecs with CUDA kernels) or "
                         "nvcomp-ans, got \"" + name + "\"");
        opt.codecs.push_back(c);
      }
    } else if (a == "--dtype") {
      const std::string v = value();
      opt.dtype = parse_dtype(v);
      if (!opt.dtype) pipeline_usage("--dtype: expected bf16, fp16 or fp32, got \"" + v + "\"");
    } else if (a == "--pieces") {
      opt.pieces.clear();
      for (const std::string& p : comma_items(value())) {
        const auto n = whole_number(p, 1, 4096);
        if (!n) pipeline_usage("--pieces: expected a list of whole numbers 1 to 4096, got \"" + p + "\"");
        opt.pieces.push_back(static_cast<uint32_t>(*n));
      }
    } else if (a == "--slot") {
      opt.slot = bytes_option(a, value(), 4096);
    } else if (a == "--link-bytes") {
      opt.link_bytes = bytes_option(a, value(), 4096);
    } else if (a == "--chunk") {
      const std::string v = value();
      const auto c = chunk_elements_value(v);
      if (!c) pipeline_usage(chunk_elements_error(v));
      opt.chunk = *c;
    } else if (a == "--calibration") {
      opt.calibration = value();
    } else if (a == "--min-time") {
      const std::string v = value();
      const auto t = seconds_value(v);
      if (!t) pipeline_usage("--min-time: expected seconds >= 0, got \"" + v + "\"");
      opt.min_time = *t;
    } else if (a == "--json") {
      opt.json = true;
    } else if (a.rfind("--", 0) == 0) {
      pipeline_usage("unknown option " + a);
    } else {
      opt.inputs.push_back(a);
    }
  }
  if (opt.inputs.empty()) pipeline_usage("no input given");
  if (opt.codecs.empty()) opt.codecs.push_back(find_codec("gauss-exp"));
  return opt;
}

}  // namespace

#ifndef COMPCOLL_HAVE_CUDA
std::unique_ptr<LinkDevice> make_cuda_link_device(uint64_t) {
  throw DeviceUnavailable("--device cuda: this compcoll-bench was built without CUDA");
}
#endif

int run_pipeline(int argc, char** argv) {
  const PipelineOptions opt = parse_pipeline_args(argc, argv);
  // The model's kernels: the calibration file, or none (then only the uncompressed rows have a
  // model figure). Read before the GPU is touched, so that a bad file costs nothing.
  std::optional<calib::Calibration> cal;
  if (!opt.calibration.empty()) {
    try {
      cal = calib::load_calibration(opt.calibration);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "compcoll-bench pipeline: %s\n", printable(e.what()).c_str());
      return 2;
    }
  }
  std::unique_ptr<LinkDevice> device;
  try {
    device = make_cuda_link_device(opt.slot);
  } catch (const DeviceUnavailable& e) {
    std::fprintf(stderr, "compcoll-bench pipeline: %s\n", e.what());
    return 2;
  }
  // The chunks the calibration's codecs were timed in, so that the model prices the streams sent.
  const uint32_t chunk = opt.chunk.value_or(cal ? cal->chunk_elements : format::kDefaultChunkElements);
  EncodeOptions enc;
  enc.chunk_elements = chunk;

  const LinkFigures link = device->measure_link(opt.link_bytes, opt.min_time);
  // The model's link: the slower direction with both running, as every transfer runs them.
  const double link_bw = std::min(link.d2h_both, link.h2d_both);
  const calib::Calibration no_kernels = calib::zero_calibration();
  std::vector<std::string> notes;
  if (cal && cal->device.find(device->name()) == std::string::npos)
    notes.push_back("WARNING: the calibration's kernels were measured on \"" + cal->device + "\", this GPU is \"" +
                    device->name() + "\"");
  const std::string encoder =
#ifdef COMPCOLL_HAVE_CUDA
      std::string(cuda_encoder_name(cuda_encoder()));
#else
      "";
#endif
  if (!opt.json) {
    std::printf("# compcoll-bench pipeline: a message between two buffers of one GPU over PCIe, through pinned host memory\n"
                "#   in slots of %s (device to host, then host to device; the two directions at once)\n",
                config::format_bytes(opt.slot).c_str());
    std::printf("# device: %s; gauss-exp's CUDA encoder: %s; streams in chunks of %s elements\n", device->name().c_str(),
                encoder.c_str(), chunk == format::kAutoChunk ? "4096-16384 (by each piece's size)"
                                                              : std::to_string(chunk).c_str());
    std::printf("# link (%s each way, medians): device->host %.1f GB/s, host->device %.1f GB/s alone; %.1f and %.1f GB/s "
                "both at once; a 4 KiB message %.1f us\n",
                config::format_bytes(opt.link_bytes).c_str(), link.d2h_alone / 1e9, link.h2d_alone / 1e9,
                link.d2h_both / 1e9, link.h2d_both / 1e9, link.latency_s * 1e6);
    std::printf("# model: the cost model (policy::predict_link_transfer, the simulator's rules) over a link of "
                "%.1f GB/s each way and %.1f us a message; kernels: %s\n",
                link_bw / 1e9, link.latency_s * 1e6, cal ? cal->label().c_str() : "none (--calibration FILE: none given)");
    for (const std::string& n : notes) std::printf("# %s\n", n.c_str());
    std::printf("# GB/s = the message's bytes / time; vs none = the same pieces moved uncompressed / this row; "
                "err = (model - measured) / measured\n");
    std::printf("%-34s %5s %9s %6s %-12s %6s %9s %8s %9s %7s %7s  %s\n", "# input", "dtype", "MiB", "pieces", "codec",
                "ratio", "ms", "GB/s", "model_ms", "err", "vs_none", "check");
  }

  bool ok = true, input_error = false;
  for (const std::string& in : opt.inputs) {
    std::vector<TensorData> tensors;
    try {
      tensors = load_tensors(in, opt.dtype);
    } catch (const TensorFileError& e) {
      std::fprintf(stderr, "compcoll-bench pipeline: %s\n", e.what());
      input_error = true;
      continue;
    }
    for (const TensorData& t : tensors) {
      const uint32_t most = *std::max_element(opt.pieces.begin(), opt.pieces.end());
      if (t.elements() < most) {
        std::fprintf(stderr, "compcoll-bench pipeline: %s: %zu elements, fewer than the %u pieces asked for\n",
                     t.source.c_str(), t.elements(), most);
        input_error = true;
        continue;
      }
      device->load(t);
      const double bytes = static_cast<double>(t.bytes.size());
      for (uint32_t pieces : opt.pieces) {
        double plain_s = NAN;  // this piece count's uncompressed row, the first of the loop
        for (size_t k = 0; k <= opt.codecs.size(); ++k) {
          const Codec* codec = k == 0 ? nullptr : opt.codecs[k - 1];
          const std::string name = codec ? std::string(codec->name()) : "none";
          // A failure inside the run (a CUDA error, a stream the encoder sized wrongly) fails the
          // row and the run goes on: the rows before it stay printed.
          TransferResult r;
          try {
            r = device->transfer(codec, enc, pieces, opt.min_time);
          } catch (const std::exception& e) {
            r = TransferResult{};
            r.error = printable(e.what());
          }
          if (!codec) plain_s = r.seconds;
          const double ratio = r.link_bytes && r.error.empty() ? bytes / static_cast<double>(r.link_bytes) : 0;
          // The model: the measured stream bytes as its ratio. NaN: no figure.
          double model_s = NAN;
          const bool kernels = !codec || (cal && cal->has(calib::Op::Compress, name, t.dtype) &&
                                          cal->has(calib::Op::Decompress, name, t.dtype));
          if (kernels && ratio > 0)
            model_s = policy::predict_link_transfer(t.elements(), t.dtype, pieces, codec ? name : "",
                                                    codec ? 1 / ratio : 1.0, link_bw, link.latency_s,
                                                    codec ? *cal : no_kernels);
          const bool good = r.error.empty();
          ok &= good;
          if (!good) std::fprintf(stderr, "compcoll-bench pipeline: %s: %s, %u pieces: %s\n", t.source.c_str(),
                                  name.c_str(), pieces, r.error.c_str());
          const double err = r.seconds > 0 ? (model_s - r.seconds) / r.seconds : NAN;
          const double vs = codec && r.seconds > 0 ? plain_s / r.seconds : NAN;
          const double gbps = r.seconds > 0 ? bytes / r.seconds / 1e9 : NAN;
          auto or_null = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
          if (opt.json) {
            nlohmann::json j{{"input", t.source},
                             {"dtype", std::string(dtype_name(t.dtype))},
                             {"bytes", t.bytes.size()},
                             {"pieces", pieces},
                             {"codec", name},
                             {"chunk_elements", chunk == format::kAutoChunk ? nlohmann::json("auto") : nlohmann::json(chunk)},
                             {"ratio", ratio},
                             {"link_bytes", r.link_bytes},
                             {"seconds", r.seconds},
                             {"fastest_seconds", r.fastest},
                             {"slowest_seconds", r.slowest},
                             {"runs", r.runs},
                             {"gbps", or_null(gbps)},
                             {"model_seconds", or_null(model_s)},
                             {"model_error", or_null(err)},
                             {"vs_none", or_null(vs)},
                             {"check", good ? "OK" : "FAILED"},
                             {"error", r.error},
                             {"device", device->name()},
                             {"cuda_encoder", encoder},
                             {"slot_bytes", opt.slot},
                             {"link", {{"d2h_alone_gbps", link.d2h_alone / 1e9},
                                       {"h2d_alone_gbps", link.h2d_alone / 1e9},
                                       {"d2h_both_gbps", link.d2h_both / 1e9},
                                       {"h2d_both_gbps", link.h2d_both / 1e9},
                                       {"latency_us", link.latency_s * 1e6}}},
                             {"calibration", cal ? cal->file : ""}};
            std::printf("%s\n", report::json_text(j).c_str());
          } else {
            char model[16] = "-", e[16] = "-", v[16] = "-";
            if (!std::isnan(model_s)) std::snprintf(model, sizeof model, "%.3f", model_s * 1e3);
            if (!std::isnan(err)) std::snprintf(e, sizeof e, "%+.1f%%", err * 100);
            if (!std::isnan(vs)) std::snprintf(v, sizeof v, "%.3f", vs);
            std::printf("%-34s %5s %9.2f %6u %-12s %6.3f %9.3f %8.2f %9s %7s %7s  %s\n", t.source.c_str(),
                        std::string(dtype_name(t.dtype)).c_str(), bytes / (1 << 20), pieces, name.c_str(), ratio,
                        r.seconds * 1e3, gbps, model, e, v, good ? "OK" : "FAILED");
          }
          std::fflush(stdout);
        }
      }
    }
  }
  if (!opt.json) std::printf("# %s\n", ok && !input_error ? "OK" : (ok ? "INPUT ERRORS" : "FAILED"));
  return input_error ? 2 : (ok ? 0 : 1);
}

}  // namespace compcoll::bench
