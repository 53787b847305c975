// shared/calibration/calibration.cpp — see calibration.h.
#include "calibration/calibration.h"

#include <algorithm>
#include <fstream>
#include <thread>

#include "codec/codec.h"
#include "config/yaml_node.h"

namespace compcoll::calib {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::Compress: return "compress";
    case Op::Decompress: return "decompress";
    case Op::Reduce: return "reduce";
    case Op::Copy: return "copy";
    case Op::DecodeAdd: return "decode_add";
  }
  return "?";
}

namespace {

// The longest duration a calibration point may give: more than 11 days is no kernel, and the
// simulator's 1e-9 s resolution does not hold that far (config::kMaxLatency).
constexpr double kMaxKernelSeconds = 1e6;

// Piecewise linear in bytes through `points`; past the last point at the last segment's rate.
double interpolate(const std::vector<std::pair<double, double>>& points, double bytes) {
  if (points.empty()) return 0;
  if (points.size() == 1) return points[0].second * (bytes / points[0].first);
  size_t i = 1;
  while (i + 1 < points.size() && points[i].first < bytes) ++i;
  const auto [x0, y0] = points[i - 1];
  const auto [x1, y1] = points[i];
  if (bytes <= x0 && i == 1) {
    // Below the first point: no less than the first duration scaled down to the fixed part.
    const double slope = (y1 - y0) / (x1 - x0);
    return std::max(0.0, y0 - slope * (x0 - bytes));
  }
  return y0 + (y1 - y0) * (bytes - x0) / (x1 - x0);
}

}  // namespace

double Curve::seconds(double bytes) const { return interpolate(points, bytes); }
double Curve::alone_seconds(double bytes) const { return interpolate(alone.empty() ? points : alone, bytes); }

const Curve* Calibration::find(Op op, const std::string& codec, DType dtype) const {
  const Curve* best = nullptr;
  for (const auto& c : curves)
    if (c.op == op && (op == Op::Reduce || op == Op::Copy || c.codec == codec)) {
      if (c.dtype == dtype_name(dtype)) best = &c;
      else if (c.dtype == "any" && !best) best = &c;
    }
  return best;
}

const CalibratedRatio* Calibration::find_ratio(const std::string& codec, DType dtype, const std::string& tensor) const {
  for (const CalibratedRatio& r : ratios)
    if (r.codec == codec && r.dtype == dtype_name(dtype) && r.tensor == tensor) return &r;
  return nullptr;
}

bool Calibration::has(Op op, const std::string& codec, DType dtype) const { return find(op, codec, dtype) != nullptr; }

const Curve* Calibration::find_batch(Op op, const std::string& codec, DType dtype) const {
  const Curve* best = nullptr;
  for (const auto& c : batch_curves)
    if (c.op == op && c.codec == codec) {
      if (c.dtype == dtype_name(dtype)) best = &c;
      else if (c.dtype == "any" && !best) best = &c;
    }
  return best;
}

bool Calibration::batches(Op op, const std::string& codec, DType dtype) const {
  return (op == Op::Compress || op == Op::Decompress) && (batch_launch || find_batch(op, codec, dtype) != nullptr);
}

double Calibration::batch_seconds(Op op, const std::string& codec, DType dtype, uint32_t messages, double bytes) const {
  if (messages <= 1) return seconds(op, codec, dtype, bytes);
  const double per_message = bytes / messages;
  if (!batches(op, codec, dtype)) return messages * seconds(op, codec, dtype, per_message);
  const Curve* single = timed_curve(op, codec, dtype);
  if (single == nullptr) return 0;  // no kernel runs (identity, a zero calibration)
  const Curve* batch = find_batch(op, codec, dtype);
  double total = 0;
  for (uint32_t left = messages; left > 0;) {
    const uint32_t k = batch_messages > 0 ? std::min(left, batch_messages) : left;
    const double b = k == messages ? bytes : per_message * k;
    double t = single->seconds(b);
    if (batch != nullptr && k > 1) t += (batch->seconds(b) - t) * (k - 1) / (batch->messages - 1);
    total += std::max(0.0, t);
    left -= k;
  }
  return total;
}

const Curve* Calibration::timed_curve(Op op, const std::string& codec, DType dtype) const {
  if (source == "zero") return nullptr;
  if ((op == Op::Compress || op == Op::Decompress) && codec == "identity") return nullptr;
  const Curve* best = find(op, codec, dtype);
  if (!best)
    throw config::ConfigError(file + ": curves: no curve for op " + std::string(op_name(op)) +
                              (codec.empty() || op == Op::Reduce || op == Op::Copy ? "" : ", codec " + codec) +
                              ", dtype " + std::string(dtype_name(dtype)) +
                              (complete ? "" : " (the file is PARTIAL, complete: false: the calibrate run that wrote it "
                                               "did not measure every curve)"));
  return best;
}

double Calibration::seconds(Op op, const std::string& codec, DType dtype, double bytes) const {
  if (op == Op::DecodeAdd && source != "zero" && !find(op, codec, dtype))
    return seconds(Op::Decompress, codec, dtype, bytes) + seconds(Op::Reduce, codec, dtype, bytes);
  const Curve* c = timed_curve(op, codec, dtype);
  return c ? c->seconds(bytes) : 0;
}

double Calibration::alone_seconds(Op op, const std::string& codec, DType dtype, double bytes) const {
  if (op == Op::DecodeAdd && source != "zero" && !find(op, codec, dtype))
    return alone_seconds(Op::Decompress, codec, dtype, bytes) + alone_seconds(Op::Reduce, codec, dtype, bytes);
  const Curve* c = timed_curve(op, codec, dtype);
  return c ? c->alone_seconds(bytes) : 0;
}

std::string Calibration::label() const {
  std::string l = source + " calibration (" + device + ", " + (date.empty() ? "undated" : date) + ", " + file + ")";
  if (chunk_elements == format::kAutoChunk)
    l += ", codecs in chunks by each message's size";
  else if (chunk_elements != format::kDefaultChunkElements)
    l += ", codecs in chunks of " + std::to_string(chunk_elements) + " elements";
  if (!batch_curves.empty())
    l += ", batches of codec ops as measured (batch_curves" +
         (batch_messages > 0 ? ", at most " + std::to_string(batch_messages) + " messages a call)" : std::string(")"));
  if (!complete)
    l += " -- PARTIAL (complete: false): " + std::to_string(curves.size()) + " curves; " +
         (missing.empty() ? std::string("the run that wrote it did not finish")
                          : std::to_string(missing.size()) + " not measured");
  return l;
}

Calibration zero_calibration() {
  Calibration c;
  c.file = "(none)";
  c.device = "none";
  c.source = "zero";
  c.statement = "every kernel takes no time: the network alone";
  return c;
}

Calibration load_calibration(const std::string& path) {
  using config::Node;
  const Node root = Node::load_file(path);
  const Node kind = root.opt("kind");
  if (kind.defined() && kind.as_string() == "transport")
    kind.fail("a transport file (compcoll-bench transport), not a calibration of kernels: its topology file "
              "(--topology-out) carries what the model needs");
  Calibration cal;
  cal.file = path;
  cal.device = root.get("device").as_string();
  cal.source = root.get("source").as_choice({"derived", "measured", "zero"});
  cal.statement = root.get_string("statement", "");
  cal.date = root.get_string("date", "");
  // Partial files (calibrate writes one after every finished curve): complete: false and the
  // curves not measured. Files without the key are complete.
  if (const Node c = root.opt("complete"); c.defined()) cal.complete = c.as_bool();
  cal.concurrent = static_cast<int>(root.get_int("concurrent", 1, 1, 1024));
  if (const Node b = root.opt("batch_launch"); b.defined()) cal.batch_launch = b.as_bool();
  if (const Node c = root.opt("chunk_elements"); c.defined()) {
    const std::string v = c.as_string();
    if (v == "auto") {
      cal.chunk_elements = format::kAutoChunk;
    } else {
      const bool digits = !v.empty() && v.size() <= 6 && std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      const long n = digits ? std::stol(v) : 0;
      if (!format::valid_chunk_elements(static_cast<uint64_t>(n)))
        c.fail("expected auto or a multiple of 32 in [32, 65536], got '" + v + "'");
      cal.chunk_elements = static_cast<uint32_t>(n);
    }
  }
  if (const Node m = root.opt("missing"); m.defined()) {
    if (cal.complete) m.fail("only with complete: false");
    if (!m.is_sequence()) m.fail("expected a list of curves, like [\"reduce bf16\"]");
    for (size_t i = 0; i < m.size(); ++i) cal.missing.push_back(m[i].as_string());
  }
  // Free-form metadata written by calibrate (driver, clocks, ...): its scalars are kept.
  if (const Node m = root.opt("machine"); m.defined() && m.is_map())
    for (const std::string& k : m.keys())
      if (m.get(k).is_scalar()) cal.machine.emplace_back(k, m.get(k).as_string());
  if (const Node rs = root.opt("ratios"); rs.defined()) {
    if (!rs.is_sequence()) rs.fail("expected a list of {codec, dtype, tensor, ratio, bytes}");
    for (size_t i = 0; i < rs.size(); ++i) {
      const Node r = rs[i];
      CalibratedRatio cr;
      cr.codec = r.get("codec").as_string();
      cr.dtype = r.get("dtype").as_choice({"bf16", "fp16", "fp32"});
      cr.tensor = r.get("tensor").as_string();
      if (cr.codec.empty() || cr.tensor.empty()) r.fail("codec and tensor must not be empty");
      const Node ratio = r.get("ratio");
      cr.ratio = ratio.as_double();
      // A lossless codec's payload is at most a little over its input (stored chunks).
      if (!(cr.ratio > 0 && cr.ratio <= 2)) ratio.fail("expected a ratio (compressed / uncompressed) in (0, 2]");
      cr.bytes = static_cast<uint64_t>(r.get("bytes").as_int(1));
      r.check_no_unknown_keys();
      for (const CalibratedRatio& o : cal.ratios)
        if (o.codec == cr.codec && o.dtype == cr.dtype && o.tensor == cr.tensor)
          r.fail("a second ratio for " + cr.codec + " " + cr.dtype + " " + cr.tensor);
      cal.ratios.push_back(std::move(cr));
    }
  }
  // One entry of curves (batch: false) or of batch_curves (batch: true: a codec op with its
  // messages, and no alone points).
  const auto read_curve = [&cal](const Node& c, bool batch) {
    Curve cv;
    const std::string op = batch ? c.get("op").as_choice({"compress", "decompress"})
                                 : c.get("op").as_choice({"compress", "decompress", "decode_add", "reduce", "copy"});
    cv.op = op == "compress"     ? Op::Compress
            : op == "decompress" ? Op::Decompress
            : op == "decode_add" ? Op::DecodeAdd
            : op == "reduce"     ? Op::Reduce
                                 : Op::Copy;
    if (cv.op == Op::Compress || cv.op == Op::Decompress || cv.op == Op::DecodeAdd) cv.codec = c.get("codec").as_string();
    cv.dtype = c.get("dtype").as_choice({"bf16", "fp16", "fp32", "any"});
    // A batch of one message is a single call: its curve belongs in curves.
    if (batch) cv.messages = static_cast<uint32_t>(c.get("messages").as_int(2, 65536));
    const auto read_points = [](const Node& pts, std::vector<std::pair<double, double>>& out) {
      if (!pts.is_sequence()) pts.fail("expected a list of [bytes, seconds]");
      for (size_t k = 0; k < pts.size(); ++k) {
        const Node p = pts[k];
        if (!p.is_sequence() || p.size() != 2) p.fail("expected [bytes, seconds]");
        const double b = p[0].as_double(), s = p[1].as_double();
        if (b <= 0 || s < 0) p.fail("expected bytes > 0 and seconds >= 0");
        // A kernel's duration, in the range the simulator resolves (kMaxKernelSeconds).
        if (s > kMaxKernelSeconds) p.fail("expected at most 1e6 seconds (more than 11 days is no kernel)");
        if (!out.empty() && b <= out.back().first) p.fail("bytes must increase from point to point");
        out.emplace_back(b, s);
      }
      if (out.empty()) pts.fail("expected at least one point");
    };
    const Node pts = c.opt("points");
    if (pts.defined()) {
      read_points(pts, cv.points);
      if (const Node alone = c.opt("alone"); alone.defined()) {
        if (batch) alone.fail("a batch curve has no alone points (batches are GPU calls)");
        if (cal.concurrent < 2) alone.fail("only with concurrent: N > 1 (points measured beside other ranks)");
        read_points(alone, cv.alone);
      }
    } else {
      // latency + bytes / throughput, as two points.
      const double lat = c.get("latency").as_time();
      const double thr = c.get("throughput").as_bandwidth();
      cv.points = {{1.0, lat + 1.0 / thr}, {1e12, lat + 1e12 / thr}};
    }
    c.check_no_unknown_keys();
    // One curve per (op, codec, dtype): find() would take one and drop the other unseen.
    const std::vector<Curve>& list = batch ? cal.batch_curves : cal.curves;
    for (size_t k = 0; k < list.size(); ++k) {
      const Curve& o = list[k];
      if (o.op == cv.op && o.codec == cv.codec && o.dtype == cv.dtype)
        c.fail("a second " + op + (batch ? " batch" : "") + " curve for " +
               (cv.codec.empty() ? "" : "codec " + cv.codec + ", ") + "dtype " + cv.dtype + " (" +
               (batch ? "batch_curves." : "curves.") + std::to_string(k) + " is the first)");
    }
    // A batch of more messages than one call codes was several calls, not the batch a call is.
    if (batch && cal.batch_messages > 0 && cv.messages > cal.batch_messages)
      c.fail("messages " + std::to_string(cv.messages) + " is more than batch_messages (" +
             std::to_string(cal.batch_messages) + "), the most one call codes");
    return cv;
  };
  cal.batch_messages = static_cast<uint32_t>(root.get_int("batch_messages", 0, 2, 65536));
  const Node curves = root.get("curves");
  for (size_t i = 0; i < curves.size(); ++i) cal.curves.push_back(read_curve(curves[i], false));
  if (const Node bc = root.opt("batch_curves"); bc.defined()) {
    if (!bc.is_sequence()) bc.fail("expected a list of {op, codec, dtype, messages, points}");
    for (size_t i = 0; i < bc.size(); ++i) cal.batch_curves.push_back(read_curve(bc[i], true));
  }
  root.check_no_unknown_keys();
  return cal;
}

std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return "";
}

uint64_t host_cache_bytes(std::string* source) {
  // The highest cache level of cpu0 (sysfs: index*/level, size like "32768K", shared_cpu_list).
  uint64_t best = 0;
  int best_level = 0;
  std::string shared;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_in(dir + "level"), size_in(dir + "size"), type_in(dir + "type"), cpus_in(dir + "shared_cpu_list");
    int level = 0;
    std::string size, type, cpus;
    if (!(level_in >> level) || !(size_in >> size)) continue;
    type_in >> type;
    cpus_in >> cpus;
    if (type == "Instruction" || level < best_level) continue;
    uint64_t bytes = 0;
    try {
      bytes = config::parse_bytes(size.back() == 'K' ? size.substr(0, size.size() - 1) + "KiB"
                                  : size.back() == 'M' ? size.substr(0, size.size() - 1) + "MiB"
                                                       : size);
    } catch (const std::exception&) {
      continue;
    }
    best = bytes, best_level = level, shared = cpus;
  }
  if (source && best)
    *source = "L" + std::to_string(best_level) + " of cpu0, " + config::format_bytes(best) + ", shared by CPUs " + shared +
              ", from /sys/devices/system/cpu";
  return best;
}

std::vector<std::string> host_differences(const Calibration& cal) {
  const std::pair<std::string, std::string> here[] = {
      {"cpu", cpuinfo_field("model name")},
      {"cache", cpuinfo_field("cache size")},
      {"logical_cpus", std::to_string(std::thread::hardware_concurrency())},
      {"host_codec_path", std::string(host_codec_path())}};
  std::vector<std::string> out;
  for (const auto& [key, value] : here)
    for (const auto& [k, v] : cal.machine)
      if (k == key && v != value) out.push_back(key + ": " + v + " there, " + value + " here");
  return out;
}

}  // namespace compcoll::calib
