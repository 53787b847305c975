// tests/real/test_executor.cpp — the real executor on real MPI (any number of ranks): its
// output is bitwise the reference executor's for every algorithm, codec and both posting
// modes, with and without its fused decompress-and-reduce, on real tensor data and on the
// integer inputs of the correctness pass; the closed-form
// expected outputs equal the reference executor's; a wrong element is counted; lockstep refuses
// a program it cannot run; the MPI transport matches variable-length messages by number.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cstring>

#include "real/backend.h"
#include "real/executor.h"
#include "real/transport.h"
#include "real/verify.h"
#include "schedule/build.h"
#include "schedule/reference_executor.h"
#include "self_send.h"

using namespace compcoll;
using namespace compcoll::real;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

struct Case {
  const char* collective;
  const char* algorithm;
  const char* placement;        // for compressing codecs
  const char* intra = nullptr;  // rail rings: "none", only the hops between nodes compress
  const char* inter = nullptr;  // hierarchical allreduce: the algorithm across nodes
};

const Case kCases[] = {
    {"allreduce", "ring", "zipccl"},           {"allreduce", "ring", "per-hop"},
    {"allreduce", "recursive", "zipccl"},      {"allreduce", "tree", "per-hop"},
    {"allreduce", "hierarchical", "zipccl"},   {"reduce-scatter", "ring", "per-hop"},
    {"reduce-scatter", "recursive", "per-hop"}, {"reduce-scatter", "hierarchical", "per-hop"},
    {"allgather", "ring", "compress-once"},    {"allgather", "recursive", "compress-once"},
    {"allgather", "hierarchical", "compress-once"}, {"broadcast", "tree", "compress-once"},
    {"broadcast", "chain", "per-hop"},         {"all-to-all", "pairwise", "per-hop"},
    {"all-to-all", "direct", "per-hop"},       {"all-to-all", "hierarchical", "per-hop"},
    {"reduce-scatter", "pat", "per-hop"},      {"allgather", "pat", "per-hop"},
    {"all-to-all", "pxn", "per-hop"},          {"allreduce", "rail-ring", "zipccl"},
    {"allreduce", "rail-ring", "zipccl", "none"}, {"reduce-scatter", "rail-ring", "per-hop", "none"},
    {"allgather", "rail-ring", "compress-once", "none"}, {"allreduce", "direct", "zipccl"},
    {"allreduce", "direct", "compress-once"},  {"allreduce", "hierarchical", "zipccl", "none", "direct"},
};

sched::BuildSpec spec(const Case& c, const std::string& codec, int n, DType dtype, uint64_t count) {
  sched::BuildSpec b;
  b.collective = sched::parse_collective(c.collective);
  b.algorithm = c.algorithm;
  b.placement = sched::parse_placement(codec == "identity" ? "none" : c.placement);
  b.nranks = n;
  b.dtype = dtype;
  b.count = count;
  b.gpus_per_node = n % 2 == 0 ? 2 : 1;
  if (c.intra && codec != "identity") b.intra_placement = sched::parse_placement(c.intra);
  if (c.inter) b.inter = c.inter;
  if (b.algorithm == "chain") b.pipe.chunks = 3;
  if (b.algorithm == "pat") b.pipe.chunks = 2, b.aggregate = 2;  // packed messages, pieces side by side
  return b;
}

// Every rank's real gradient values for `s` (the timed pass's inputs) and the reference
// executor's outputs on them, with the executor's codec and options.
struct Reference {
  std::vector<std::vector<uint8_t>> in, out;
};
Reference reference_of(const sched::Schedule& s, const ExecutorOptions& opt) {
  sched::ReferenceOptions ropt;
  ropt.codec = opt.codec;
  ropt.encode = opt.encode;
  Reference r;
  for (int k = 0; k < s.size(); ++k)
    r.in.push_back(timing_input(s.dtype, s.ranks[k].input_count, k, COMPCOLL_TEST_DATA_DIR, "grad"));
  r.out = sched::run_reference(s, r.in, ropt);
  return r;
}

// The correctness pass's integers through the executor, against their closed-form output.
void check_integer_pass(Executor& ex, const sched::Schedule& s, int rank) {
  const auto ints = integer_input(s, rank);
  std::memcpy(ex.input(), ints.data(), ints.size());
  std::memset(ex.output(), 0xff, ex.output_bytes());
  ex.run();
  std::vector<uint8_t> got(ex.output_bytes());
  std::memcpy(got.data(), ex.output(), got.size());
  CHECK(count_wrong(s.dtype, got, expected_output(s, rank)) == 0);
}

}  // namespace

TEST_CASE("expected_output is what the reference executor computes on the integer inputs", "[real][verify]") {
  for (int n : {1, 3, 4, 8})
    for (DType dt : {DType::BF16, DType::FP16, DType::FP32})
      for (const Case& c : kCases) {
        if (std::string(c.algorithm) == "hierarchical" && n % 2) continue;
        const sched::Schedule s = sched::build_schedule(spec(c, "identity", n, dt, 101 * static_cast<uint64_t>(n) + 5));
        std::vector<std::vector<uint8_t>> in;
        for (int r = 0; r < n; ++r) in.push_back(integer_input(s, r));
        const auto out = sched::run_reference(s, in);
        for (int r = 0; r < n; ++r) {
          INFO(c.collective << " " << c.algorithm << " n=" << n << " " << dtype_name(dt) << " rank " << r);
          REQUIRE(out[r].size() == s.ranks[r].output_count * dtype_size(dt));
          CHECK(count_wrong(dt, out[r], expected_output(s, r)) == 0);
        }
      }
}

TEST_CASE("count_wrong counts a flipped element, a poisoned output and a size mismatch", "[real][verify]") {
  const sched::Schedule s = sched::build_schedule(spec(kCases[0], "identity", 4, DType::BF16, 1000));
  const auto want = expected_output(s, 2);
  auto got = want;
  CHECK(count_wrong(DType::BF16, got, want) == 0);
  got[2 * 517] ^= 1;  // lowest mantissa bit of element 517
  CHECK(count_wrong(DType::BF16, got, want) == 1);
  CHECK(count_wrong(DType::BF16, std::vector<uint8_t>(want.size(), 0xff), want) == 1000);
  CHECK(count_wrong(DType::BF16, std::vector<uint8_t>(want.size() - 2), want) == 1000);
  // The integer values exercise signs and many magnitudes: an all-zero output must not pass.
  CHECK(count_wrong(DType::BF16, std::vector<uint8_t>(want.size(), 0), want) > 900);
}

TEST_CASE("integer inputs sum exactly for the group size", "[real][verify]") {
  CHECK(integer_bound(DType::BF16, 8) == 32);
  CHECK(integer_bound(DType::BF16, 64) == 4);
  CHECK(integer_bound(DType::FP16, 64) == 32);
  CHECK(integer_bound(DType::BF16, 1024) == 1);
}

TEST_CASE("the real executor over MPI is bitwise the reference executor", "[real][executor][mpi]") {
  const int n = world_size(), rank = world_rank();
  MpiTransport t(MPI_COMM_WORLD);
  // Posted as ready, in lockstep, and with the kernels on a compute thread (as ready); then with
  // a backend that decodes and adds in one operation, on a compute thread and in lockstep (the
  // executor's fused decompress-and-reduce, as on the nccl backend).
  auto host = make_host_backend();
  auto threaded = make_host_backend(1, true);
  auto fusing = make_host_backend(1, false, true), fusing_threaded = make_host_backend(1, true, true);
  uint64_t fused = 0, fused_elsewhere = 0;
  // Queued (ExecutorOptions::queue_ahead) on the compute thread's queue and MPI's held posts:
  // the schedules that compress nothing (identity); the others run as ready, as their
  // transfers need the streams' sizes (queued with wire budgets: the next case).
  for (const std::string mode : {"as ready", "lockstep", "compute thread", "fused, compute thread", "fused, lockstep",
                                 "queued", "queued, lockstep"})
    for (const char* codec_name : {"identity", "gauss-exp", "entropy-exp"})
      for (DType dt : {DType::BF16, DType::FP32})
        for (const Case& c : kCases) {
          if (std::string(c.algorithm) == "hierarchical" && n % 2) continue;
          // Odd sizes: uneven blocks, partial codec chunks.
          const uint64_t count = std::string(c.collective) == "all-to-all" ? 333 : 4099;
          const sched::Schedule s = sched::build_schedule(spec(c, codec_name, n, dt, count));
          const bool lockstep = mode == "lockstep" || mode == "fused, lockstep" || mode == "queued, lockstep";
          const bool queued = mode.rfind("queued", 0) == 0;
          DataBackend& backend = mode == "compute thread" || queued ? *threaded
                                 : mode == "fused, compute thread"  ? *fusing_threaded
                                 : mode == "fused, lockstep"        ? *fusing
                                                                    : *host;
          INFO(c.collective << " " << c.algorithm << (c.intra ? " intra " : "") << (c.intra ? c.intra : "") << " "
                            << codec_name << " " << dtype_name(dt) << " " << mode << " n=" << n << " rank " << rank);
          ExecutorOptions opt;
          opt.codec = find_codec(codec_name);
          opt.encode.chunk_elements = 1024;
          opt.lockstep = lockstep;
          // The fusing backends with the option on; the host backend, able or not, with it off.
          opt.fuse_decode_add = mode.rfind("fused", 0) == 0;
          opt.queue_ahead = queued;
          if (lockstep && !lockstep_problem(s).empty()) {
            // Some schedules wait within a step (the double binary tree forwards; the compressed
            // recursive allgather compresses between transfers of one step): refused, with the
            // reason. The rings, the hierarchical allreduce (what real-64gpu runs on NCCL) and
            // the hierarchical and direct all-to-all never are.
            const std::string a = c.algorithm;
            CHECK(a != "ring");
            CHECK(a != "hierarchical");
            CHECK(!(a == "direct" && std::string(c.collective) == "all-to-all"));
            if (!plan_lockstep(s.ranks[rank]).problem.empty())
              CHECK_THROWS_AS(Executor(s, rank, t, backend, opt), sched::ScheduleError);
            continue;
          }
          Executor ex(s, rank, t, backend, opt);
          // Real gradient values (the timed pass's inputs), then the correctness pass's integers.
          const Reference reference = reference_of(s, opt);
          const auto& in = reference.in;
          std::memcpy(ex.input(), in[rank].data(), in[rank].size());
          const RunStats st = ex.run();
          (mode.rfind("fused", 0) == 0 ? fused : fused_elsewhere) += st.fused;
          // The pairs the simulator and the cost model price as one kernel (run.fused_decode).
          if (mode.rfind("fused", 0) == 0) CHECK(st.fused == sched::decode_add_pairs(s.ranks[rank].ops).size());
          CHECK(st.queued == (queued && s.ranks[rank].wire_buffers == 0 ? 1u : 0u));
          std::vector<uint8_t> got(ex.output_bytes());
          std::memcpy(got.data(), ex.output(), got.size());
          CHECK(count_wrong(dt, got, reference.out[rank]) == 0);
          if (std::string(codec_name) != "identity" && st.compress_in > 0) {
            CHECK(st.compress_out > 0);
            CHECK(st.codec_s > 0);  // timed where it ran, on the compute thread too
          }
          check_integer_pass(ex, s, rank);
          t.barrier();
        }
  // Reduce-scatters and allreduces decode a received block and add it (with 2 ranks and more):
  // fused where the backend can, never where it cannot.
  if (n > 1) CHECK(fused > 0);
  CHECK(fused_elsewhere == 0);
}

// A batch of codec ops run as one call (ExecutorOptions::batch_compress, batch_decompress) on a backend that has one
// (the host backend's, the messages one after another in one operation): bitwise the reference
// executor's, in every posting mode, within wire budgets too (queued: the batch's ops end with
// its call, their dependents submitted behind it), with the fused pairs outside batches; one
// call a batch, and none without the option or on a backend without batches; with batches of
// compressions only, the decompressions op by op.
TEST_CASE("the real executor runs a batch of codec ops as one call", "[real][executor][mpi][batch]") {
  const int n = world_size(), rank = world_rank();
  MpiTransport t(MPI_COMM_WORLD);
  auto batching = make_host_backend(1, false, false, true), batching_threaded = make_host_backend(1, true, false, true);
  auto batching_fusing = make_host_backend(1, true, true, true), plain = make_host_backend(1, true);
  const Case cases[] = {{"allreduce", "direct", "zipccl"},
                        {"allreduce", "direct", "compress-once"},
                        {"allreduce", "hierarchical", "zipccl", "none", "direct"},
                        {"allreduce", "ring", "zipccl"}};
  uint64_t batched = 0;
  for (const std::string mode : {"as ready", "lockstep", "compute thread", "queued, budget", "queued, budget, fused",
                                 "lockstep, budget", "without batches", "option off", "compress only"})
    for (const char* codec_name : {"gauss-exp", "entropy-exp", "identity"})
      for (const Case& c : cases) {
        if (std::string(c.algorithm) == "hierarchical" && n % 2) continue;
        const DType dt = DType::BF16;
        const sched::Schedule s = sched::build_schedule(spec(c, codec_name, n, dt, 4099));
        const bool lockstep = mode.rfind("lockstep", 0) == 0;
        if (lockstep && !lockstep_problem(s).empty()) continue;
        const bool budget = mode.find("budget") != std::string::npos;
        DataBackend& backend = mode == "as ready" || mode == "lockstep, budget" || mode == "lockstep" ? *batching
                               : mode == "queued, budget, fused"                                    ? *batching_fusing
                               : mode == "without batches"                                          ? *plain
                                                                                                    : *batching_threaded;
        INFO(c.collective << " " << c.algorithm << " " << codec_name << " " << mode << " n=" << n << " rank " << rank);
        ExecutorOptions opt;
        opt.codec = find_codec(codec_name);
        opt.encode.chunk_elements = 1024;
        opt.lockstep = lockstep;
        opt.batch_compress = mode != "option off";
        opt.batch_decompress = opt.batch_compress && mode != "compress only";
        opt.wire_budget = budget;
        opt.wire_budget_margin = 0.05;  // a budget is not the stream's size
        opt.queue_ahead = mode.rfind("queued", 0) == 0;
        opt.fuse_decode_add = mode == "queued, budget, fused";
        Executor ex(s, rank, t, backend, opt);
        const Reference reference = reference_of(s, opt);
        std::vector<uint8_t> got(ex.output_bytes());
        // Batches of more than one op on this rank: each one call when the executor batches
        // their kind.
        const auto& ops = s.ranks[rank].ops;
        uint64_t batches = 0;
        for (uint32_t i = 0; i < ops.size(); ++i)
          if (((ops[i].kind == sched::OpKind::Compress && opt.batch_compress) ||
               (ops[i].kind == sched::OpKind::Decompress && opt.batch_decompress)) &&
              !ops[i].batched && sched::batch_end(ops, i) > i + 1)
            ++batches;
        const bool batches_here = backend.batches(*opt.codec);
        uint64_t exact_sent = 0;
        for (int pass = 0; pass < (budget ? 2 : 1); ++pass) {  // within budgets: the second pass
          CAPTURE(pass);
          std::memcpy(ex.input(), reference.in[rank].data(), reference.in[rank].size());
          std::memset(ex.output(), 0xff, ex.output_bytes());
          const RunStats st = ex.run();
          std::memcpy(got.data(), ex.output(), got.size());
          CHECK(count_wrong(dt, got, reference.out[rank]) == 0);
          CHECK(st.batches == (batches_here ? batches : 0));
          if (budget && pass == 1) {
            CHECK(st.queued == (opt.queue_ahead ? 1u : 0u));
            CHECK(st.reruns == 0);
            // Every stream goes as its budget, 5% over its size (a batch's ops' too).
            if (st.compress_in > 0) CHECK(st.sent_bytes > exact_sent);
          }
          exact_sent = st.sent_bytes;
          batched += st.batches;
        }
        check_integer_pass(ex, s, rank);
        t.barrier();
      }
  if (n > 2) CHECK(batched > 0);  // the direct allreduce's batches: n - 1 messages a phase
}

// The one-rank schedule the [nccl] test runs on one GPU (tests/real/self_send.h), here on the
// host backend over MPI_COMM_SELF: a compute thread (so that it queues) and its decode-and-add.
TEST_CASE("one rank sends to itself: sizes, budgets, queues and the fused pair over MPI", "[real][executor]") {
  MpiTransport t(MPI_COMM_SELF);
  const auto b = make_host_backend(1, true, true);
  for (const char* codec : {"identity", "gauss-exp", "entropy-exp"})
    real::test::check_self_send(t, *b, codec, true, true);
  // Batches: one call each where the backend codes batches, op by op where it does not.
  const auto batching = make_host_backend(1, true, false, true), plain = make_host_backend(1, true);
  for (const char* codec : {"identity", "gauss-exp", "entropy-exp"}) {
    real::test::check_self_send_batch(t, *batching, codec, true);
    real::test::check_self_send_batch(t, *plain, codec, false);
  }
}

TEST_CASE("the host backend's compute thread runs kernels in order and reports a damaged stream at done()",
          "[real][executor]") {
  auto b = make_host_backend(1, true);
  std::vector<float> a(1000, 1.0f), x(1000, 2.0f);
  const Completion c1 = b->reduce(DType::FP32, a.data(), x.data(), a.size());
  const Completion c2 = b->reduce(DType::FP32, a.data(), x.data(), a.size());  // after c1, on the same data
  CHECK(c1 >= 0);
  double s1 = -1, s2 = -1;
  while (!b->done(c2, &s2)) b->wait_any();
  CHECK(b->done(c1, &s1));  // finished before c2
  CHECK(a[0] == 5.0f);
  CHECK(a[999] == 5.0f);
  CHECK(s1 >= 0);
  CHECK(s2 >= 0);
  CHECK_FALSE(b->wait_any());  // nothing pending: returns at once
  std::vector<uint8_t> junk(64, 0xab);
  const Codec& gauss = *find_codec("gauss-exp");
  const EncodeOptions opt;
  const Completion bad = b->decompress(gauss, opt, junk.data(), junk.size(), DType::FP32, a.data(), a.size());
  b->synchronize();
  CHECK_THROWS_AS(b->done(bad, nullptr), CodecError);
  // Without a compute thread the same calls finish before they return.
  auto inline_b = make_host_backend(1, false);
  CHECK(inline_b->reduce(DType::FP32, a.data(), x.data(), a.size()) == -1);
  CHECK(a[0] == 7.0f);
  CHECK_THROWS_AS(inline_b->decompress(gauss, opt, junk.data(), junk.size(), DType::FP32, a.data(), a.size()),
                  CodecError);
  // A sound stream, but not the one the plan sends: another codec or another chunk size.
  const std::vector<uint8_t> good = encode(gauss, DType::FP32, x.data(), x.size(), opt);
  CHECK(inline_b->decompress(gauss, opt, good.data(), good.size(), DType::FP32, a.data(), a.size()) == -1);
  CHECK(a[0] == 2.0f);
  CHECK_THROWS_WITH(inline_b->decompress(*find_codec("identity"), opt, good.data(), good.size(), DType::FP32,
                                         a.data(), a.size()),
                    Catch::Contains("identity in chunks of"));
  EncodeOptions other;
  other.chunk_elements = 1024;
  CHECK_THROWS_AS(inline_b->decompress(gauss, other, good.data(), good.size(), DType::FP32, a.data(), a.size()),
                  CodecError);
}

TEST_CASE("lockstep refuses a transfer that waits for a transfer of its own step", "[real][executor]") {
  const int n = world_size(), rank = world_rank();
  sched::Schedule s;
  s.dtype = DType::FP32;
  s.count = 4;
  s.ranks.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto& p = s.ranks[r];
    p.input_count = p.output_count = 4;
    p.scratch_counts = {4};
    const int peer = (r + 1) % n;
    sched::Op recv{sched::OpKind::Recv, peer, {}, {sched::BufKind::Scratch, 0, 0, 4}, {}, 0};
    sched::Op send{sched::OpKind::Send, peer, {sched::BufKind::Scratch, 0, 0, 4}, {}, {0}, 0};  // forwards it, same step
    p.ops = {recv, send};
  }
  MpiTransport t(MPI_COMM_WORLD);
  auto host = make_host_backend();
  ExecutorOptions opt;
  opt.lockstep = true;
  CHECK_THROWS_WITH(Executor(s, rank, t, *host, opt), Catch::Contains("op 1 (step 0): waits for a transfer of its own"));
  opt.lockstep = false;
  CHECK_NOTHROW(Executor(s, rank, t, *host, opt));
}

TEST_CASE("MpiTransport matches variable-length messages by number, whatever the posting order", "[real][transport][mpi]") {
  const int n = world_size(), rank = world_rank();
  if (n < 2) {
    WARN("SKIPPED: needs 2 MPI ranks (ctest runs it with 4)");
    return;
  }
  MpiTransport t(MPI_COMM_WORLD);
  const std::vector<size_t> sizes{10, 1000, 100003};  // eager and rendezvous
  if (rank == 0) {
    const uint64_t first = t.reserve_seqs(Transport::Direction::Send, 1, sizes.size());
    std::vector<std::vector<uint8_t>> msgs;
    for (size_t k = 0; k < sizes.size(); ++k) msgs.emplace_back(sizes[k], static_cast<uint8_t>(k + 1));
    std::vector<Request> reqs;
    for (size_t k = 0; k < sizes.size(); ++k) reqs.push_back(t.post_send(msgs[k].data(), sizes[k], 1, first + k, false));
    for (Request r : reqs) t.wait(r);
  } else if (rank == 1) {
    const uint64_t first = t.reserve_seqs(Transport::Direction::Recv, 0, sizes.size());
    std::vector<std::vector<uint8_t>> bufs(sizes.size(), std::vector<uint8_t>(200000, 0));
    std::vector<Request> reqs(sizes.size());
    for (size_t k = sizes.size(); k-- > 0;) reqs[k] = t.post_recv(bufs[k].data(), bufs[k].size(), 0, first + k, false);
    for (size_t k = 0; k < sizes.size(); ++k) {
      CHECK(t.wait(reqs[k]) == sizes[k]);
      CHECK(bufs[k][0] == k + 1);
      CHECK(bufs[k][sizes[k] - 1] == k + 1);
      CHECK(bufs[k][sizes[k]] == 0);
    }
  }
  // A message larger than its receive buffer is an error naming both sizes.
  if (rank == 0) {
    std::vector<uint8_t> big(1000, 7);  // eager: the send completes unreceived
    t.wait(t.post_send(big.data(), big.size(), 1, t.reserve_seqs(Transport::Direction::Send, 1, 1), false));
  } else if (rank == 1) {
    std::vector<uint8_t> small(100);
    const Request r = t.post_recv(small.data(), small.size(), 0, t.reserve_seqs(Transport::Direction::Recv, 0, 1), false);
    CHECK_THROWS_WITH(t.wait(r), Catch::Contains("1000-byte message from rank 0 exceeds its 100-byte receive buffer"));
  }
  t.barrier();
}

TEST_CASE("a wire budget sends streams as exact messages and redoes a run whose stream outgrew it",
          "[real][executor][mpi][budget]") {
  const int n = world_size(), rank = world_rank();
  MpiTransport t(MPI_COMM_WORLD);
  auto host = make_host_backend();
  auto threaded = make_host_backend(1, true);
  // Streams relayed as received (allgather), recompressed each hop (ring, recursive), packed
  // (all-to-all), in two phases (hierarchical, rail rings).
  const Case cases[] = {{"allreduce", "ring", "zipccl"},          {"allgather", "ring", "compress-once"},
                        {"reduce-scatter", "recursive", "per-hop"}, {"allreduce", "hierarchical", "zipccl"},
                        {"all-to-all", "pairwise", "per-hop"},     {"allreduce", "rail-ring", "zipccl", "none"},
                        {"broadcast", "chain", "per-hop"}};
  const auto same_everywhere = [](uint64_t v) {
    uint64_t lo = 0, hi = 0;
    MPI_Allreduce(&v, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&v, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
  };
  uint64_t overflowed = 0;
  // Queued (ExecutorOptions::queue_ahead): the runs within budgets need no size from the host.
  auto fusing_threaded = make_host_backend(1, true, true);
  for (const std::string mode :
       {"as ready", "lockstep", "compute thread", "queued", "queued, lockstep", "queued, fused"})
    for (const char* codec_name : {"identity", "gauss-exp", "entropy-exp"})  // identity: no agreement at margins >= 0
      for (DType dt : {DType::BF16, DType::FP32})
        for (const Case& c : cases) {
          if (std::string(c.algorithm) == "hierarchical" && n % 2) continue;
          const uint64_t count = std::string(c.collective) == "all-to-all" ? 333 : 4099;
          const sched::Schedule s = sched::build_schedule(spec(c, codec_name, n, dt, count));
          const bool lockstep = mode == "lockstep" || mode == "queued, lockstep";
          const bool queued = mode.rfind("queued", 0) == 0;
          if (lockstep && !lockstep_problem(s).empty()) continue;
          for (double margin : {0.0, 0.05, -0.25}) {
            INFO(c.collective << " " << c.algorithm << " " << codec_name << " " << dtype_name(dt) << " " << mode
                              << " margin " << margin << " n=" << n << " rank " << rank);
            ExecutorOptions opt;
            opt.codec = find_codec(codec_name);
            opt.encode.chunk_elements = 1024;
            opt.lockstep = lockstep;
            opt.wire_budget = true;
            opt.wire_budget_margin = margin;
            opt.queue_ahead = queued;
            // Fused: an absorbed reduce's dependents follow its decompression's mark.
            opt.fuse_decode_add = mode == "queued, fused";
            DataBackend& backend = mode == "queued, fused" ? *fusing_threaded
                                   : mode == "compute thread" || queued ? *threaded
                                                                        : *host;
            Executor ex(s, rank, t, backend, opt);
            const Reference reference = reference_of(s, opt);
            const auto& in = reference.in;
            const auto& ref = reference.out;
            std::vector<uint8_t> got(ex.output_bytes());
            const auto run_checked = [&] {
              std::memcpy(ex.input(), in[rank].data(), in[rank].size());
              std::memset(ex.output(), 0xff, ex.output_bytes());
              const RunStats st = ex.run();
              std::memcpy(got.data(), ex.output(), got.size());
              CHECK(count_wrong(dt, got, ref[rank]) == 0);
              CHECK(same_everywhere(st.reruns));
              return st;
            };
            // The first run learns each message's size at exact sizes; the second sends each
            // within its budget, on the same data.
            const RunStats exact = run_checked();
            CHECK(exact.reruns == 0);
            CHECK(exact.overflows == 0);
            CHECK(exact.queued == (queued && s.ranks[rank].wire_buffers == 0 ? 1u : 0u));  // no sizes needed
            const RunStats budgeted = run_checked();
            CHECK(budgeted.queued == (queued ? 1u : 0u));  // a redone pass at exact sizes is not
            // Redone, every count is of both passes (the cut pass compressed blocks that cut
            // streams left wrong, of other sizes).
            CHECK(budgeted.compress_in == (budgeted.reruns ? 2 : 1) * exact.compress_in);
            if (budgeted.reruns == 0) CHECK(budgeted.compress_out == exact.compress_out);
            if (margin == 0) {  // the budgets are the sizes: the same bytes go, nothing is redone
              CHECK(budgeted.reruns == 0);
              CHECK(budgeted.sent_bytes == exact.sent_bytes);
            } else if (margin > 0) {  // up to 5% more bytes, nothing redone
              CHECK(budgeted.reruns == 0);
              CHECK(budgeted.sent_bytes >= exact.sent_bytes);
              CHECK(budgeted.sent_bytes <= exact.sent_bytes + exact.sent_bytes / 20 + budgeted.messages);
            } else {
              // Budgets a quarter short: every compressed stream outgrows its own, and every rank
              // redoes the run at exact sizes (a rank that compresses nothing too).
              uint64_t compressed = 0;  // anywhere (rail rings on one node compress nothing)
              MPI_Allreduce(&exact.compress_in, &compressed, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
              if (exact.compress_in > 0) CHECK(budgeted.overflows > 0);
              CHECK(budgeted.reruns == (compressed > 0 ? 1u : 0u));
              overflowed += budgeted.overflows;
            }
            // Other data (the correctness pass's integers) within the same budgets: right
            // either way, redone where a stream outgrew its budget.
            const auto ints = integer_input(s, rank);
            std::memcpy(ex.input(), ints.data(), ints.size());
            const RunStats other = ex.run();
            std::memcpy(got.data(), ex.output(), got.size());
            CHECK(count_wrong(dt, got, expected_output(s, rank)) == 0);
            CHECK(same_everywhere(other.reruns));
            t.barrier();
          }
        }
  if (n > 1) CHECK(overflowed > 0);
}
