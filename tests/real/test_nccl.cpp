// tests/real/test_nccl.cpp — the GPU side of the real executor with one rank: an NCCL
// communicator of size 1 (bootstrapped over MPI_COMM_SELF), the CUDA backend with the codec
// kernels (and, where the build has nvCOMP, nvcomp-ans) inside the executor, and NCCL's own
// allreduce. Prints "SKIPPED" (a Catch2 warning) and checks nothing where no GPU is present;
// built only with CUDA and NCCL.
#include <catch2/catch.hpp>
#include <mpi.h>

#ifdef COMPCOLL_HAVE_NCCL
#ifdef COMPCOLL_HAVE_NVCOMP
#include "codec/cuda/nvcomp.h"
#endif
#include "real/executor.h"
#include "real/nccl_transport.h"
#include "real/verify.h"
#include "schedule/build.h"
#include "self_send.h"

using namespace compcoll;
using namespace compcoll::real;

#define SKIP_WITHOUT_GPU()                                              \
  do {                                                                  \
    const std::string why = nccl_unavailable_reason();                  \
    if (!why.empty()) {                                                 \
      WARN("SKIPPED: " << why << " (the nccl backend needs one GPU)");  \
      return;                                                           \
    }                                                                   \
  } while (0)

namespace {

std::vector<uint8_t> download(DataBackend& b, const void* p, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  b.download(out.data(), p, bytes);
  return out;
}

}  // namespace

TEST_CASE("nccl: CUDA codecs inside the executor round-trip real gradients bit-exactly", "[real][nccl][cuda]") {
  SKIP_WITHOUT_GPU();
  NcclSetup g = make_nccl_backend(MPI_COMM_SELF, 0);
  REQUIRE(g.transport->size() == 1);
  std::vector<std::string> codecs = {"gauss-exp", "entropy-exp"};
#ifdef COMPCOLL_HAVE_NVCOMP
  // nvCOMP's batched ANS through the backend, where libnvcomp.so.6 loads.
  if (const std::string why = nvcomp_unavailable(); why.empty()) codecs.push_back(std::string(kNvcompAnsName));
  else WARN("nvcomp-ans not run: " << why);
#endif
  for (const std::string& codec_name : codecs) {
    INFO(codec_name);
    // compress input -> wire0 -> decompress -> output: one rank, no transfers.
    sched::Schedule s;
    s.dtype = DType::BF16;
    s.count = 300001;
    s.ranks.resize(1);
    auto& p = s.ranks[0];
    p.input_count = p.output_count = s.count;
    p.wire_buffers = 1;
    p.ops = {{sched::OpKind::Compress, -1, {sched::BufKind::Input, 0, 0, s.count}, sched::wire_slice(0), {}, 0},
             {sched::OpKind::Decompress, -1, sched::wire_slice(0), {sched::BufKind::Output, 0, 0, s.count}, {0}, 0}};
    ExecutorOptions opt;
    opt.codec = find_plan_codec(codec_name);
    Executor ex(s, 0, *g.transport, *g.backend, opt);
    const auto in = timing_input(DType::BF16, s.count, 0, COMPCOLL_TEST_DATA_DIR, "grad");
    g.backend->upload(ex.input(), in.data(), in.size());
    const RunStats st = ex.run();
    g.backend->synchronize();
    CHECK(download(*g.backend, ex.output(), ex.output_bytes()) == in);
    CHECK(st.compress_in == in.size());
    CHECK(st.compress_out < st.compress_in);  // real gradients compress
  }
}

// NCCL's transfers with one GPU: a rank that sends to itself (NCCL's send and receive to its own
// rank in one group) at exact sizes (the size over MPI), within wire budgets (no size exchange),
// queued on the streams and with the fused decode-and-add, and with its codec work in batches,
// bitwise (tests/real/self_send.h).
TEST_CASE("nccl: one rank sends to itself: sizes, budgets, queues and the fused kernel", "[real][nccl][cuda]") {
  SKIP_WITHOUT_GPU();
  NcclSetup g = make_nccl_backend(MPI_COMM_SELF, 0);
  std::vector<std::string> codecs = {"identity", "gauss-exp", "entropy-exp"};
#ifdef COMPCOLL_HAVE_NVCOMP
  if (nvcomp_unavailable().empty()) codecs.push_back(std::string(kNvcompAnsName));
#endif
  for (const std::string& codec : codecs) {
    real::test::check_self_send(*g.transport, *g.backend, codec, gpu_decode_adds(find_plan_codec(codec)->id()) &&
                                                               !find_library_codec(codec), true);
    // Batches: cuda_encode_batch and cuda_decode_batch (not nvcomp-ans: op by op).
    real::test::check_self_send_batch(*g.transport, *g.backend, codec, g.backend->batches(*find_plan_codec(codec)));
  }
}

TEST_CASE("nccl: a one-rank schedule and ncclAllReduce give the input back", "[real][nccl][cuda]") {
  SKIP_WITHOUT_GPU();
  NcclSetup g = make_nccl_backend(MPI_COMM_SELF, 0);
  sched::BuildSpec b;
  b.nranks = 1;
  b.count = 4099;
  b.dtype = DType::BF16;
  b.placement = sched::Placement::ZipCCL;
  const sched::Schedule s = sched::build_schedule(b);
  ExecutorOptions opt;
  opt.codec = find_codec("gauss-exp");
  Executor ex(s, 0, *g.transport, *g.backend, opt);
  const auto in = integer_input(s, 0);
  g.backend->upload(ex.input(), in.data(), in.size());
  ex.run();
  g.backend->synchronize();
  CHECK(count_wrong(s.dtype, download(*g.backend, ex.output(), ex.output_bytes()), expected_output(s, 0)) == 0);

  auto base = make_nccl_baseline(*g.transport, s);
  CHECK(base->name() == "ncclAllReduce");
  void* out = g.backend->alloc(ex.output_bytes());
  base->run(ex.input(), out);
  g.backend->synchronize();
  CHECK(count_wrong(s.dtype, download(*g.backend, out, ex.output_bytes()), expected_output(s, 0)) == 0);
  g.backend->release(out);
}

#else

TEST_CASE("nccl: built without CUDA and NCCL", "[real][nccl]") {
  WARN("SKIPPED: this build has no CUDA or no NCCL; the nccl backend is not compiled");
}

#endif
