// shared/report/row.cpp — see row.h.
#include "report/row.h"

#include <unistd.h>

#include <cstdio>

#include "report/report.h"
#include "schedule/build.h"

namespace compcoll::report {

using nlohmann::json;

namespace {

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
std::string fixed_or_empty(double v, int precision) { return std::isnan(v) ? "" : fixed(v, precision); }

}  // namespace

double Row::busbw_gbps() const { return algbw_gbps() * bus_factor(sched::parse_collective(collective), ranks); }

json to_json(const Row& w) {
  return json{{"topology", w.topology},
              {"ranks", w.ranks},
              {"nodes", w.nodes},
              {"collective", w.collective},
              {"algorithm", w.algorithm},
              {"placement", w.placement},
              {"codec", w.codec},
              {"dtype", w.dtype},
              {"tensor", w.tensor},
              {"size_bytes", w.size},
              {"count", w.count},
              {"policy", w.policy},
              {"call", w.call},
              {"cell", w.cell},
              {"time_us", w.time_s * 1e6},
              {"algbw_gbps", w.algbw_gbps()},
              {"busbw_gbps", w.busbw_gbps()},
              {"ratio", w.ratio},
              {"ratio_source", w.ratio_source},
              {"wire_bytes", w.wire_bytes},
              {"raw_bytes", w.raw_bytes},
              {"codec_us", number_or_null(w.codec_s * 1e6)},  // null: not measured (compcoll-run on GPUs)
              {"reduce_us", number_or_null(w.reduce_s * 1e6)},
              {"messages", w.messages},
              {"ops", w.ops},
              {"wall_s", w.wall_s},
              {"error", w.error},
              {"backend", w.backend},
              {"calibration", w.calibration},
              {"speedup_vs_identity", number_or_null(w.speedup)},
              {"predicted_us", number_or_null(w.predicted_s * 1e6)},
              {"nccl_model_us", number_or_null(w.nccl_model_s * 1e6)},
              {"candidates", w.candidates},
              {"regret", number_or_null(w.regret)},
              {"wrong", w.checked ? json(w.wrong) : json(nullptr)},
              {"max_abs", w.lossy ? number_or_null(w.max_abs) : json(nullptr)},
              {"rel_l2", w.lossy ? number_or_null(w.rel_l2) : json(nullptr)},
              {"snr_db", w.lossy ? number_or_null(w.snr_db) : json(nullptr)},
              {"copy_us", number_or_null(w.copy_s * 1e6)},
              {"model_us", number_or_null(w.model_s * 1e6)},
              {"model_err", number_or_null(w.model_err())},
              {"model_kernel_us", number_or_null(w.model_kernel_s * 1e6)},
              {"codec_exposed_us", number_or_null(w.codec_exposed_s * 1e6)},
              {"note", w.note.empty() ? json(nullptr) : json(w.note)}};
}

json host_json() {
  const Host h = this_host();
  return json{{"cpu", h.cpu}, {"cores", h.cores}};
}

std::string json_text(const json& doc, int indent) {
  return doc.dump(indent, ' ', false, json::error_handler_t::replace);
}

const char* csv_header() {
  return "topology,ranks,collective,algorithm,placement,codec,dtype,tensor,size_bytes,count,time_us,algbw_gbps,busbw_gbps,"
         "ratio,wire_bytes,codec_us,reduce_us,messages,speedup_vs_identity,wall_s,calibration,policy,predicted_us,call,error,"
         "regret,wrong,backend,max_abs,rel_l2,snr_db,model_us,model_err,copy_us,model_kernel_us,codec_exposed_us\n";
}

std::string csv_line(const Row& w) {
  std::string s;
  auto field = [&](const std::string& v) { s += (s.empty() ? "" : ",") + v; };
  field(csv_quote(w.topology));
  field(std::to_string(w.ranks));
  field(w.collective);
  field(w.algorithm);
  field(w.placement);
  field(w.codec);
  field(w.dtype);
  field(w.tensor);
  field(std::to_string(w.size));
  field(std::to_string(w.count));
  field(fixed(w.time_s * 1e6, 3));
  field(fixed(w.algbw_gbps(), 4));
  field(fixed(w.busbw_gbps(), 4));
  field(fixed(w.ratio, 5));
  field(std::to_string(w.wire_bytes));
  field(fixed_or_empty(w.codec_s * 1e6, 3));
  field(fixed_or_empty(w.reduce_s * 1e6, 3));
  field(std::to_string(w.messages));
  field(fixed_or_empty(w.speedup, 4));
  field(fixed(w.wall_s, 3));
  field(w.calibration);
  field(w.policy);
  field(fixed_or_empty(w.predicted_s * 1e6, 3));
  field(std::to_string(w.call));
  field(csv_quote(w.error));
  field(fixed_or_empty(w.regret, 5));
  field(w.checked ? std::to_string(w.wrong) : "");
  field(w.backend);
  field(w.lossy ? fixed_or_empty(w.max_abs, 6) : "");
  field(w.lossy ? fixed_or_empty(w.rel_l2, 6) : "");
  field(w.lossy && std::isfinite(w.snr_db) ? fixed(w.snr_db, 3) : "");
  field(fixed_or_empty(w.model_s * 1e6, 3));
  field(std::isfinite(w.model_err()) ? fixed(w.model_err(), 4) : "");
  field(fixed_or_empty(w.copy_s * 1e6, 3));
  field(fixed_or_empty(w.model_kernel_s * 1e6, 3));
  field(fixed_or_empty(w.codec_exposed_s * 1e6, 3));
  return s + "\n";
}

std::string table_header(Table t) {
  char buf[512];
  if (t == Table::Run)
    std::snprintf(buf, sizeof buf, "#%12s %12s %5s %15s %-22s %-13s %-12s %6s %12s %12s %7s %9s %9s %7s %10s %8s %8s %7s %s\n",
                  "size", "count", "type", "collective", "algorithm", "placement", "codec", "ranks", "time(us)", "model(us)",
                  "err", "algbw", "busbw", "ratio", "codec(us)", "speedup", "rel.err", "#wrong", "policy");
  else
    std::snprintf(buf, sizeof buf, "#%12s %12s %5s %15s %-24s %-13s %-11s %6s %12s %9s %9s %7s %10s %8s %-9s%s\n", "size",
                  "count", "type", "collective", "algorithm", "placement", "codec", "ranks", "time(us)", "algbw", "busbw",
                  "ratio", "codec(us)", "speedup", "policy", t == Table::SimRegret ? "   regret" : "");
  return buf;
}

std::string table_line(const Row& w, Table t) {
  char buf[1024];
  const std::string speedup = std::isnan(w.speedup) ? "-" : fixed(w.speedup, 3);
  if (t == Table::Run) {
    const double err = w.model_err();
    std::snprintf(buf, sizeof buf,
                  " %12llu %12llu %5s %15s %-22s %-13s %-12s %6d %12s %12s %7s %9s %9s %7s %10s %8s %8s %7llu %s\n",
                  static_cast<unsigned long long>(w.size), static_cast<unsigned long long>(w.count), w.dtype.c_str(),
                  w.collective.c_str(), w.algorithm.c_str(), w.placement.c_str(), w.codec.c_str(), w.ranks,
                  fixed(w.time_s * 1e6, 2).c_str(), std::isnan(w.model_s) ? "-" : fixed(w.model_s * 1e6, 2).c_str(),
                  std::isfinite(err) ? (fixed(100 * err, 1) + "%").c_str() : "-", fixed(w.algbw_gbps(), 2).c_str(),
                  fixed(w.busbw_gbps(), 2).c_str(),
                  fixed(w.ratio, 4).c_str(),
                  std::isnan(w.codec_s) ? "-" : fixed(w.codec_s * 1e6, 2).c_str(), speedup.c_str(),
                  w.lossy ? fixed(w.rel_l2, 5).c_str() : "-", static_cast<unsigned long long>(w.wrong), w.policy.c_str());
    return buf;
  }
  char regret[32] = "";
  if (t == Table::SimRegret)
    std::snprintf(regret, sizeof regret, " %8s", std::isnan(w.regret) ? "-" : fixed(w.regret, 4).c_str());
  std::snprintf(buf, sizeof buf, " %12llu %12llu %5s %15s %-24s %-13s %-11s %6d %12s %9s %9s %7s %10s %8s %-9s%s\n",
                static_cast<unsigned long long>(w.size), static_cast<unsigned long long>(w.count), w.dtype.c_str(),
                w.collective.c_str(), w.algorithm.c_str(), w.placement.c_str(), w.codec.c_str(), w.ranks,
                w.error.empty() ? fixed(w.time_s * 1e6, 2).c_str() : "FAILED", fixed(w.algbw_gbps(), 2).c_str(),
                fixed(w.busbw_gbps(), 2).c_str(), fixed(w.ratio, 4).c_str(), fixed(w.codec_s * 1e6, 2).c_str(),
                speedup.c_str(), w.policy.c_str(), regret);
  return buf;
}

std::string Speedups::key(const Row& w) {
  return w.topology + "/" + std::to_string(w.ranks) + "/" + std::to_string(w.call) + "/" + std::to_string(w.size);
}

void Speedups::record(const Row& w) {
  if (w.error.empty() && w.codec == "identity" && w.policy == "static" && !w.library) identity_[key(w)] = w.time_s;
}

void Speedups::apply(Row& w) const {
  const auto it = identity_.find(key(w));
  if (w.error.empty() && it != identity_.end() && w.time_s > 0) w.speedup = it->second / w.time_s;
}

Progress::Progress(std::string program, size_t total)
    : program_(std::move(program)),
      total_(total),
      tty_(isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void Progress::row_done() {
  ++done_;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (elapsed > 3 && (tty_ || std::chrono::duration<double>(now - last_).count() > 10 || done_ == total_)) {
    std::fprintf(stderr, "%s[%s] %zu/%zu rows, %.0f%%, %.0f s elapsed%s", tty_ ? "\r" : "", program_.c_str(), done_, total_,
                 total_ ? 100.0 * done_ / total_ : 100.0, elapsed, tty_ && done_ < total_ ? "" : "\n");
    last_ = now;
  }
}

}  // namespace compcoll::report
