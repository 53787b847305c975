// shared/report/report.h — the output conventions compcoll-sim and compcoll-run share
// (DESIGN.md, "Output conventions"): nccl-tests' bus-bandwidth factors, number formatting,
// CSV quoting, and results files replaced atomically so an interrupted run keeps what it wrote.
#pragma once

#include <filesystem>
#include <string>

#include "schedule/schedule.h"

namespace compcoll::report {

// nccl-tests' busbw = algbw x factor: 2(n-1)/n allreduce, 1 broadcast, (n-1)/n the others.
double bus_factor(sched::Collective c, int nranks);

// printf("%.*f").
std::string fixed(double v, int precision);

// A CSV field, quoted when it holds a comma, a quote or a newline.
std::string csv_quote(const std::string& s);

// The machine a program runs on, for results files: CPU model and logical cores ("cpu",
// "cores"), from /proc/cpuinfo where present.
struct Host {
  std::string cpu;
  unsigned cores = 0;
};
Host this_host();
// The command line, as one shell-quoted string (what a results file says made it).
std::string command_line(int argc, char** argv);

// Writes PATH.tmp then renames it over PATH.
void write_atomic(const std::filesystem::path& path, const std::string& text);

}  // namespace compcoll::report
