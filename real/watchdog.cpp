// real/watchdog.cpp — see watchdog.h.
#include "real/watchdog.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace compcoll::real {

namespace {

std::atomic<int64_t> g_last_beat_ns{0};
std::mutex g_activity_mutex;
std::string g_activity = "setup";

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void heartbeat() { g_last_beat_ns.store(now_ns(), std::memory_order_relaxed); }

void set_activity(const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(g_activity_mutex);
    g_activity = what;
  }
  heartbeat();
}

Watchdog::Watchdog(int rank, double timeout_s) : rank_(rank), timeout_s_(timeout_s) {
  heartbeat();
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  stop_ = true;
  thread_.join();
}

void Watchdog::loop() {
  const int64_t limit = static_cast<int64_t>(timeout_s_ * 1e9);
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int64_t silent = now_ns() - g_last_beat_ns.load(std::memory_order_relaxed);
    if (silent <= limit) continue;
    std::string what;
    {
      std::lock_guard<std::mutex> lock(g_activity_mutex);
      what = g_activity;
    }
    std::fprintf(stderr,
                 "compcoll-run: rank %d: no progress for %.0f s (run.timeout_s) in %s: a rank died, hangs or never "
                 "arrived; stopping (finished rows are written)\n",
                 rank_, static_cast<double>(silent) / 1e9, what.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    _exit(3);
  }
}

void inject_fault(int rank, size_t row) {
  const char* v = std::getenv("COMPCOLL_RUN_FAULT");
  if (!v || !*v) return;
  const std::string s = v;
  const size_t a = s.find(':'), b = a == std::string::npos ? a : s.find(':', a + 1);
  if (b == std::string::npos) throw std::invalid_argument("COMPCOLL_RUN_FAULT: expected hang:RANK:ROW or exit:RANK:ROW, got '" + s + "'");
  const std::string kind = s.substr(0, a);
  int r = 0;
  unsigned long long at = 0;
  try {
    r = std::stoi(s.substr(a + 1, b - a - 1));
    at = std::stoull(s.substr(b + 1));
  } catch (const std::exception&) {
    throw std::invalid_argument("COMPCOLL_RUN_FAULT: expected hang:RANK:ROW or exit:RANK:ROW, got '" + s + "'");
  }
  if (kind != "hang" && kind != "exit")
    throw std::invalid_argument("COMPCOLL_RUN_FAULT: expected hang:RANK:ROW or exit:RANK:ROW, got '" + s + "'");
  if (r != rank || at != row) return;
  if (kind == "exit") _exit(9);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // hangs: no heartbeat
}

}  // namespace compcoll::real
