// real/watchdog.h — a rank that dies or never arrives must not hang the others:
// the main thread beats (heartbeat(): the executor at every finished op, compcoll-run at every
// timed run, barrier and row); a Watchdog thread ends the process, with one line naming the
// rank, the row and the silence, when no beat came for `timeout_s`. It calls no MPI (the
// library is initialised for one thread): it prints and _exit()s, and the launcher (mpirun,
// srun) then ends the job, as it does when any rank exits without MPI_Finalize. Rows already
// finished are in the CSV and JSON (written row by row).
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

namespace compcoll::real {

// Marks progress now (cheap: one atomic store). Safe without a Watchdog.
void heartbeat();
// What the rank is doing, for the message (a row's description).
void set_activity(const std::string& what);

class Watchdog {
 public:
  Watchdog(int rank, double timeout_s);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void loop();
  int rank_;
  double timeout_s_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Test hook (docs/compcoll-run.md): COMPCOLL_RUN_FAULT="hang:RANK:ROW" or "exit:RANK:ROW"
// makes RANK hang forever (or exit with status 9, as if killed) when it reaches row ROW (0 =
// the first row, in run order); nothing otherwise. Throws std::invalid_argument on a
// malformed value.
void inject_fault(int rank, size_t row);

}  // namespace compcoll::real
