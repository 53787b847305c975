// tools/transport_cmd.cpp — `compcoll-bench transport`: the transport compcoll-run uses,
// measured between the ranks of this job (real/transport_bench.h), written as a transport
// file (the points and their fit) and, for a job on one host, the topology file that lets
// compcoll-sim and compcoll-run's model column model this machine (docs/CALIBRATION.md).
//
//   mpirun -np 2 compcoll-bench transport --out calibration/host-mpi-transport.yaml
//          --topology-out topologies/host-mpi.yaml
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "calibrate.h"
#include "calibration/calibration.h"
#include "config/yaml_node.h"
#include "real/backend.h"
#include "real/transport.h"
#include "real/transport_bench.h"
#include "report/report.h"
#include "topology/topology.h"
#include "util/text.h"
#ifdef COMPCOLL_HAVE_NCCL
#include "real/nccl_transport.h"
#endif

namespace compcoll::bench {

namespace {

constexpr const char* kUsage =
    "usage: mpirun -np N compcoll-bench transport --out FILE.yaml [--topology-out FILE.yaml] [--name NAME]\n"
    "                                         [--backend mpi|nccl] [--max-bytes N] [--min-time SECONDS]\n"
    "                                         [--footprints LIST|none]\n"
    "  --out           the transport file: every point measured and the fit (docs/CALIBRATION.md)\n"
    "  --topology-out  a topology file of this machine from the measurement (one node, or a fat tree of the hosts)\n"
    "  --name          the topology's name (default host-<backend>)\n"
    "  --backend       mpi: host buffers, MPI point-to-point; nccl: one GPU per rank (default mpi)\n"
    "  --max-bytes     largest message timed (default 64MiB)\n"
    "  --min-time      seconds of timed messages per point, at least (default 0.1)\n"
    "  --footprints    mpi: the working sets (bytes of buffers on a host) the exchange and the pingpong are also\n"
    "                  timed through, comma-separated, or none (default: 1/8 to 4x the last-level cache, 4-128 MiB\n"
    "                  for 32 MiB)\n";

struct BadArgs : std::runtime_error {
  using runtime_error::runtime_error;
};

struct Options {
  std::string out, topology_out, name, backend = "mpi";
  real::TransportBenchOptions bench;
  bool footprints_given = false;  // --footprints (else the default around the host's cache)
  bool help = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw BadArgs(a + ": missing value");
      return argv[++i];
    };
    if (a == "--out") o.out = value();
    else if (a == "--topology-out") o.topology_out = value();
    else if (a == "--name") o.name = value();
    else if (a == "--backend") o.backend = value();
    else if (a == "--max-bytes") {
      const std::string v = value();
      try {
        o.bench.max_bytes = config::parse_bytes(v);
      } catch (const std::exception& e) {
        throw BadArgs("--max-bytes: expected a size like 64MiB, got \"" + v + "\"");
      }
      if (o.bench.max_bytes < 4096) throw BadArgs("--max-bytes: expected at least 4KiB, got \"" + v + "\"");
    } else if (a == "--min-time") {
      const std::string v = value();
      const auto t = seconds_value(v);
      if (!t) throw BadArgs("--min-time: expected seconds >= 0, got \"" + v + "\"");
      o.bench.min_time_s = *t;
    } else if (a == "--footprints") {
      const std::string v = value();
      o.footprints_given = true;
      if (v != "none") {
        std::stringstream list(v);
        for (std::string item; std::getline(list, item, ',');) {
          uint64_t f = 0;
          try {
            f = config::parse_bytes(item);
          } catch (const std::exception&) {
            throw BadArgs("--footprints: expected sizes like 16MiB,32MiB or none, got \"" + item + "\"");
          }
          if (f < 4096) throw BadArgs("--footprints: expected sizes of at least 4KiB, got \"" + item + "\"");
          if (!o.bench.footprints.empty() && f <= o.bench.footprints.back())
            throw BadArgs("--footprints: expected increasing sizes, got \"" + v + "\"");
          o.bench.footprints.push_back(f);
        }
      }
    } else if (a == "--help" || a == "-h") o.help = true;
    else throw BadArgs("unknown argument \"" + a + "\" (see compcoll-bench transport --help)");
  }
  if (o.help) return o;
  if (o.out.empty()) throw BadArgs("missing --out FILE.yaml (see compcoll-bench transport --help)");
  if (o.backend != "mpi" && o.backend != "nccl") throw BadArgs("--backend: expected mpi or nccl, got \"" + o.backend + "\"");
  if (o.name.empty()) o.name = "host-" + o.backend;
  if (!o.footprints_given && o.backend == "mpi") o.bench.footprints = real::default_footprints(calib::host_cache_bytes());
  return o;
}

std::string now_utc(const char* fmt) {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, fmt, std::gmtime(&t));
  return buf;
}

// The file (parent folders made), written atomically.
void write_file(const std::string& path, const std::string& text) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  report::write_atomic(p, text);
}

std::string mpi_library() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, static_cast<size_t>(len));
  return s.substr(0, s.find_first_of(",\n"));
}


struct Job {
  int ranks = 1, hosts = 1, per_host = 1;  // per_host: 0 when hosts differ
  std::string library, device, command, date, measured_at, loadavg;
};

std::string transport_yaml(const Job& j, const Options& o, const std::vector<real::TransportSeries>& series,
                           const std::vector<real::TransportFit>& fits) {
  std::ostringstream y;
  y << "# MEASURED by `" << j.command << "` on " << j.measured_at << ".\n"
    << "# The transport compcoll-run uses, between the ranks of this job; docs/CALIBRATION.md (The transport).\n"
    << "kind: transport\nsource: measured\ndate: " << j.date << "\n"
    << "statement: " << config::yaml_quote("MEASURED by compcoll-bench transport (compcoll " COMPCOLL_VERSION ") over " + o.backend +
                               " point-to-point (real/transport.h, the executor's transport), " +
                               std::to_string(j.ranks) + " ranks on " + std::to_string(j.hosts) +
                               " host(s). exchange: every rank sends a message to the next rank and receives one "
                               "from the previous at once (a ring step), all rings at once; the slowest rank's mean "
                               "time per exchange. pingpong: rank 0 and one peer, the others idle; half the round "
                               "trip. A round's messages rotate through 4 buffer slots of their size on each side (a collective's "
                               "messages move through buffers several times their size); with host buffers each series within a host "
                               "is also timed through working sets of fixed size (footprint: the bytes of send and receive buffers of "
                               "the host's ranks together, as a plan's typed buffers on a node; every size that divides them, through "
                               "as many slots as they hold); every slot written with data before the first "
                               "round (as a collective's data is). Each point: one untimed round, then 5 batches of rounds, " +
                               config::yaml_number(o.bench.min_time_s) + " s in all, MPI_Wtime around each batch; the median batch. fit: latency = the "
                               "least time of any message (the smallest message's, normally), bandwidth = the median of bytes / (time - latency) over "
                               "messages of 1 MiB and more.")
    << "\n"
    << "backend: " << o.backend << "\nlibrary: " << config::yaml_quote(j.library) << "\nranks: " << j.ranks << "\nhosts: " << j.hosts
    << "\nranks_per_host: " << j.per_host << "\n"
    << "machine: {device: " << config::yaml_quote(j.device) << ", logical_cpus: " << std::thread::hardware_concurrency()
    << ", loadavg_at_start: " << config::yaml_quote(j.loadavg) << ", command: " << config::yaml_quote(j.command) << "}\n"
    << "series:\n";
  for (const auto& s : series) {
    y << "  - {pattern: " << s.pattern << ", between: " << s.between << ", "
      << (s.footprint ? "footprint: " + config::format_bytes(s.footprint) : "window: " + std::to_string(s.window)) << ", points: [";
    for (size_t i = 0; i < s.points.size(); ++i)
      y << (i ? ", " : "") << "[" << static_cast<uint64_t>(s.points[i].first) << ", " << config::yaml_number(s.points[i].second) << "]";
    y << "]}\n";
  }
  y << "fit:\n";
  for (const auto& f : fits)
    y << "  - {between: " << f.between << ", latency: " << config::yaml_number(f.latency_s * 1e6) << "us, bandwidth: "
      << config::yaml_number(f.bandwidth_Bps / 1e9) << "GB/s, worst_rel_error: " << config::yaml_number(f.worst_rel_error)
      << ", out_of_order: " << f.out_of_order << ", from: " << config::yaml_quote(f.source)
      << "}\n";
  return y.str();
}

struct Endpoint {
  std::unique_ptr<real::Transport> transport;
  std::unique_ptr<real::DataBackend> backend;
};

Endpoint make_endpoint(const std::string& backend, int local_rank) {
  Endpoint e;
  if (backend == "nccl") {
#ifdef COMPCOLL_HAVE_NCCL
    const std::string why = real::nccl_unavailable_reason();
    if (!why.empty()) throw BadArgs("--backend nccl: " + why);
    auto pair = real::make_nccl_backend(MPI_COMM_WORLD, local_rank);
    e.transport = std::move(pair.transport);
    e.backend = std::move(pair.backend);
    return e;
#else
    (void)local_rank;
    throw BadArgs("--backend nccl: this compcoll-bench was built without CUDA and NCCL");
#endif
  }
  e.transport = std::make_unique<real::MpiTransport>(MPI_COMM_WORLD);
  e.backend = real::make_host_backend();
  return e;
}

int measure(const Options& o, int argc, char** argv) {
  int rank = 0;
  Job j;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &j.ranks);
  if (j.ranks < 2) throw BadArgs("needs at least 2 ranks (mpirun -np 2 compcoll-bench transport ...)");
  const std::vector<int> host_of = real::hosts_of_world();
  std::vector<int> count;
  for (int h : host_of) {
    if (count.size() <= static_cast<size_t>(h)) count.resize(static_cast<size_t>(h) + 1);
    ++count[static_cast<size_t>(h)];
  }
  j.hosts = static_cast<int>(count.size());
  j.per_host = std::all_of(count.begin(), count.end(), [&](int c) { return c == count[0]; }) ? count[0] : 0;
  if (!o.topology_out.empty() && j.hosts > 1 && !j.per_host)
    throw BadArgs("--topology-out: the hosts of this job run different numbers of ranks; a topology needs the "
                  "same number on every host");
  int local = 0;
  for (int r = 0; r < rank; ++r) local += host_of[static_cast<size_t>(r)] == host_of[static_cast<size_t>(rank)];
  // A rank whose endpoint cannot be set up (no GPU for it) stops the job: the first one says why.
  Endpoint ep;
  std::string why;
  try {
    ep = make_endpoint(o.backend, local);
  } catch (const std::exception& e) {
    why = e.what();
  }
  int first_bad = why.empty() ? j.ranks : rank;
  MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first_bad < j.ranks) {
    if (rank == first_bad) std::cerr << "compcoll-bench transport: rank " << rank << ": " << why << "\n";
    return 2;
  }
  j.library = mpi_library();
  j.device = ep.backend->memory() == real::MemorySpace::Host ? report::this_host().cpu : ep.backend->describe();
  j.command = report::command_line(argc, argv);
  j.date = now_utc("%Y-%m-%d");
  j.measured_at = now_utc("%Y-%m-%dT%H:%M:%SZ");
  {
    std::ifstream in("/proc/loadavg");
    std::getline(in, j.loadavg);
  }
  const auto series = real::measure_transport(*ep.transport, *ep.backend, host_of, o.bench);
  if (rank != 0) return 0;
  std::vector<real::TransportFit> fits;
  std::printf("# compcoll-bench transport: %s, %d ranks on %d host(s)\n", o.backend.c_str(), j.ranks, j.hosts);
  std::printf("%-9s %-8s %6s %10s %12s %12s %10s\n", "#pattern", "between", "slots", "footprint", "bytes", "time(us)", "GB/s");
  for (const auto& s : series) {
    for (const auto& [b, t] : s.points) {
      const int slots = s.footprint ? static_cast<int>(real::footprint_slots(s.footprint, j.per_host, static_cast<uint64_t>(b)))
                                    : s.window;
      std::printf("%-9s %-8s %6d %10s %12.0f %12.2f %10.3f\n", s.pattern.c_str(), s.between.c_str(), slots,
                  s.footprint ? config::format_bytes(s.footprint).c_str() : "-", b, t * 1e6, b / t / 1e9);
    }
    if (s.pattern == "exchange" && !s.footprint) fits.push_back(real::fit_transport(s));
  }
  for (const auto& f : fits) {
    std::printf("# fit %s: %.3g us + bytes / %.4g GB/s (within %.0f%% of every point; %s)\n", f.between.c_str(),
                f.latency_s * 1e6, f.bandwidth_Bps / 1e9, 100 * f.worst_rel_error, f.source.c_str());
    if (f.out_of_order)
      std::printf("# warning: %d %s exchange point(s) more than 10%% faster than the next smaller message: the machine "
                  "was busy; measure again on a quiet one\n", f.out_of_order, f.between.c_str());
  }
  write_file(o.out, transport_yaml(j, o, series, fits));
  std::printf("# wrote %s\n", o.out.c_str());
  if (!o.topology_out.empty()) {
    real::MachineTopology m;
    m.name = o.name;
    m.backend = o.backend;
    m.hosts = j.hosts;
    m.per_host = j.per_host;
    for (const auto& x : series) {
      if (x.footprint) (x.pattern == "exchange" ? m.host_footprints : m.host_alone_footprints).push_back(&x);
      else if (x.pattern == "exchange") (x.between == "host" ? m.host : m.network) = &x;
      else if (x.between == "host") m.host_alone = &x;
    }
    m.description = std::to_string(j.ranks) + " " + o.backend + " ranks on " + std::to_string(j.hosts) + " host(s) (" +
                    j.device + "), measured transport";
    m.comment = {"MEASURED: the " + o.backend + " transport between the ranks of this job, written by",
                 "`" + j.command + "` on " + j.measured_at + " (every point and the fit: " + o.out + ").",
                 "A message takes its route's latency + bytes / (bandwidth x by_size factor), as measured in the",
                 "exchange pattern (every rank sending and receiving at once, as in a ring step); each link carries",
                 "half the latency. Use it with network: {model: cm02}: the figures are the transport's, with no",
                 "flow-model factors on top. Within a host, a message of a plan whose typed buffers on the node",
                 "total F bytes takes the factor measured through buffers of F bytes (by_footprint)."};
    try {
      write_file(o.topology_out, real::topology_yaml(m));
    } catch (const std::invalid_argument& e) {
      throw BadArgs(std::string("--topology-out: ") + e.what());
    }
    topo::load_topology(o.topology_out);  // what it wrote must load
    std::printf("# wrote %s\n", o.topology_out.c_str());
  }
  return 0;
}

}  // namespace

int run_transport(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, rc = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    const Options o = parse(argc, argv);
    if (o.help) {
      if (rank == 0) std::cout << kUsage;
    } else {
      rc = measure(o, argc, argv);
    }
  } catch (const std::exception& e) {  // the same on every rank: arguments and the job's shape
    if (rank == 0) std::cerr << "compcoll-bench transport: " << printable(e.what()) << "\n";
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}

}  // namespace compcoll::bench
