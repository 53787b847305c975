// tests/real/main_mpi.cpp — Catch2's main for compcoll_real_tests, inside MPI_Init /
// MPI_Finalize: the real executor's tests run on real MPI (no mocks), under mpirun with any
// number of ranks (ctest runs them with 1 and with 4).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Catch::Session session;
  int rc = session.applyCommandLine(argc, argv);
  if (rc == 0) rc = session.run();
  // Every rank must pass: the worst result wins.
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
