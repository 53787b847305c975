// real/transport_bench.h — measures the transport itself (the one compcoll-run's executor
// uses: MPI point-to-point on host buffers, or NCCL's on device buffers) so the simulator can
// model the machine a real run is on. `compcoll-bench transport` (tools/transport_cmd.cpp)
// runs it under mpirun and writes the points, the fit and a topology file
// (docs/CALIBRATION.md, "The transport").
//
// Two patterns, each a message size swept in powers of 2:
//   exchange  every rank sends `bytes` to rank+1 and receives `bytes` from rank-1 at once (a
//             ring step, the pattern the schedules are made of), all ranks together; the time
//             of one exchange is the slowest rank's mean.
//   pingpong  rank 0 and one peer, the others idle: half the round trip.
// Between ranks of one host ("host"), and, when the job spans several hosts, between ranks of
// two hosts ("network": pingpong between rank 0 and the first rank of another host; the
// exchange then runs over a ring that alternates hosts where it can).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "real/backend.h"
#include "real/transport.h"
#include "schedule/schedule.h"

namespace compcoll::real {

constexpr int kStreamWindow = 4;  // buffer slots per side of a series that streams from memory

struct TransportSeries {
  std::string pattern;  // exchange | pingpong
  std::string between;  // host | network
  std::vector<std::pair<double, double>> points;  // (bytes, seconds per message)
  // Each round's messages from and into the next of `window` buffer slots of their size per
  // side: kStreamWindow, so that large messages come from memory as a large collective's do, or
  // 1, as the data of a collective whose buffers fit in the cache is sent again call after call.
  int window = kStreamWindow;
  // A footprint series (host buffers only; 0: not one): every size through as many slots as
  // make the buffers of the host's ranks total `footprint` bytes (window unused), so that its
  // messages are as cache-resident as those of a plan of that footprint on the node
  // (topo::LinkSpec::by_footprint). Sizes that do not divide it are left out.
  uint64_t footprint = 0;
};

// A message of `bytes` takes latency + bytes / bandwidth: what a link pair of the topology
// (CM02, no latency or bandwidth factor) gives a message.
struct TransportFit {
  std::string between;
  double latency_s = 0;       // the least time of any message (the smallest message's, normally)
  double bandwidth_Bps = 0;   // median over sizes >= fit_from of bytes / (time - latency)
  double fit_from = 0;        // bytes
  double worst_rel_error = 0; // the fit against every point of its series, largest |fit/measured - 1|
  int out_of_order = 0;       // points more than 10% faster than the next smaller message: a loaded machine
  std::string source;         // "exchange, 8 B - 64 MiB"
};

struct TransportBenchOptions {
  uint64_t max_bytes = uint64_t{64} << 20;
  double min_time_s = 0.1;   // of timed rounds per point, at least
  int min_samples = 5;       // batches of rounds per point; the median batch is the point
  std::vector<uint64_t> sizes;  // the sizes timed; empty: 8 B, then powers of 2 from 4 KiB to max_bytes
  bool pingpong = true;         // also the pingpong series (else the exchange series only)
  int window = kStreamWindow;   // buffer slots per side of the series of every size
  // Host buffers: the series within a host also through each of these footprints (bytes of
  // buffers on the host, TransportSeries::footprint), after the series of every size. Device
  // buffers never.
  std::vector<uint64_t> footprints;
};

// The buffer slots per side through which a footprint series of `footprint` bytes on a host of
// `per_host` ranks sends messages of `bytes`: each rank's send and receive buffers take
// footprint / (2 per_host) bytes each; 0 where `bytes` does not divide them (the size is left
// out).
uint64_t footprint_slots(uint64_t footprint, int per_host, uint64_t bytes);

// The footprints compcoll-bench transport times by default, around the host's last-level cache
// of `cache_bytes`: 1/8, 1/4, 3/8, 1/2, 3/4, 1, 3/2, 2 and 4 times it (4 to 128 MiB for 32 MiB).
std::vector<uint64_t> default_footprints(uint64_t cache_bytes);

// Writes data over `bytes` at `p` in the backend's memory: 16-bit words that are normal bf16
// and fp16 values (pairs of them, normal fp32 ones), so that a reduce over it runs at its usual
// speed. A host buffer the program never wrote reads as the kernel's one shared zero page, which
// stays in cache: a single-copy transport (Open MPI's CMA) moves a large message out of it far
// faster than out of a collective's data, which is always written (measured on the 2-core VM of
// docs/compcoll-run.md: an 8 MiB exchange 0.73-0.79 ms from unwritten pages, 1.06-1.17 ms from
// written ones), and a copy reads it from cache. measure_transport writes both sides (the
// receive side too, which keeps first-touch page faults out of the timing), as does
// compcoll-run's kernel check.
void write_data(DataBackend& b, void* p, uint64_t bytes);

// Every rank calls it (collective over `transport`'s ranks); every rank gets the series
// (rank 0's view). `host_of[r]` is rank r's host index.
std::vector<TransportSeries> measure_transport(Transport& transport, DataBackend& backend,
                                               const std::vector<int>& host_of, const TransportBenchOptions& opt);

// The exchange round of a series (`between`: "host" or "network") as a schedule of `bytes`
// per message (bf16 elements): each rank's one send and one receive, on the ring
// measure_transport times, so that the model's time for the round can be set beside the
// measured one (compcoll-run's transport check). Ranks outside the round have no ops.
sched::Schedule exchange_schedule(const std::vector<int>& host_of, const std::string& between, uint64_t bytes);

// The fit of one series (its smallest point gives the latency). `fit_from`: the smallest
// size the bandwidth is read from.
TransportFit fit_transport(const TransportSeries& s, double fit_from = double(1 << 20));

// The topology file of the machine a job measured (docs/TOPOLOGY.md), from its exchange series:
// each link half the fit's latency and the fit's bandwidth, and `by_size` the factor each
// measured size reached, so a message of a measured size takes its measured time in the model.
// With the mpi backend the ranks of a host copy each message themselves and share the host's
// memory (receive_copy, shared_memory), and `alone_by_size` gives, from the host pingpong, the
// factor of a message copied while no other rank copies (the pingpong's time less its least
// time, against the exchange fit's bandwidth).
// One host: a single node of `per_host` ranks (the mpi backend: receive_copy). Several hosts:
// a two-tier fat tree whose one leaf switch holds every rank's port, the network link from the
// between-hosts series, intra-node links from the within-host one (when per_host >= 2).
struct MachineTopology {
  std::string name, description;
  std::vector<std::string> comment;  // lines written first, each as a YAML comment
  std::string backend = "mpi";
  int hosts = 1, per_host = 1;
  const TransportSeries* host = nullptr;     // exchange within a host (per_host >= 2)
  const TransportSeries* host_alone = nullptr;  // pingpong within a host: alone_by_size (optional)
  // The same two through footprints (by_footprint, alone_by_footprint; optional), by
  // increasing footprint.
  std::vector<const TransportSeries*> host_footprints, host_alone_footprints;
  const TransportSeries* network = nullptr;  // exchange between hosts (hosts >= 2)
};

// std::invalid_argument when a series the machine needs is missing.
std::string topology_yaml(const MachineTopology& m);

// Host index of every rank of MPI_COMM_WORLD (ranks sharing memory share a host).
std::vector<int> hosts_of_world();

}  // namespace compcoll::real
