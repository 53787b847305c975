// real/baseline.h — the libraries' own collectives, run on the same buffers as a schedule's
// rank program (same input and output layout), as the baseline row of every real experiment:
// MPI's (MPI_Allreduce, MPI_Reduce_scatter, MPI_Allgatherv, MPI_Bcast, MPI_Alltoall) on the mpi
// backend, NCCL's (real/nccl_transport.h) on the nccl backend. bf16 and fp16 reduce through a
// user-defined MPI_Op that adds in fp32 and rounds to nearest even (MPI has no such types).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "schedule/schedule.h"

namespace compcoll::real {

class Baseline {
 public:
  virtual ~Baseline() = default;
  virtual std::string name() const = 0;  // "MPI_Allreduce", "ncclAllReduce", ...
  // One call on `in` and `out` (the backend's memory, a rank program's layout); returns once
  // it is issued (the caller synchronises through the backend).
  virtual void run(const void* in, void* out) = 0;
};

// MPI's collective for schedule `s` (its collective, count, dtype and root) on host buffers.
std::unique_ptr<Baseline> make_mpi_baseline(MPI_Comm comm, const sched::Schedule& s);

}  // namespace compcoll::real
