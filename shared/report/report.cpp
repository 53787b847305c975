// shared/report/report.cpp — see report.h.
#include "report/report.h"

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace compcoll::report {

double bus_factor(sched::Collective c, int n) {
  if (n <= 1) return 0;
  switch (c) {
    case sched::Collective::AllReduce: return 2.0 * (n - 1) / n;
    case sched::Collective::Broadcast: return 1.0;
    default: return static_cast<double>(n - 1) / n;
  }
}

Host this_host() {
  Host h;
  h.cores = std::thread::hardware_concurrency();
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      h.cpu = line.substr(line.find(':') + 2);
      break;
    }
  return h;
}

std::string command_line(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,") ==
                                         std::string::npos;
    if (!plain) {
      std::string q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      a = q + "'";
    }
    out += (i ? " " : "") + a;
  }
  return out;
}

std::string fixed(double v, int precision) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", precision, v);
  return b;
}

std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

void write_atomic(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream o(tmp);
    o << text;
    if (!o) throw std::runtime_error("cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace compcoll::report
