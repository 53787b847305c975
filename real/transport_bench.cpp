// real/transport_bench.cpp — the transport's own latency and bandwidth (transport_bench.h).
#include "real/transport_bench.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "config/yaml_node.h"
#include "topology/topology.h"

namespace compcoll::real {

namespace {

// The sizes of a sweep: the ones asked for, else 8 bytes, then powers of 2 from 4 KiB to
// max_bytes.
std::vector<uint64_t> sweep_sizes(const TransportBenchOptions& opt) {
  if (!opt.sizes.empty()) return opt.sizes;
  std::vector<uint64_t> v{8};
  for (uint64_t b = 4096; b <= opt.max_bytes; b *= 2) v.push_back(b);
  return v;
}

// One round of a pattern on this rank. Exchange: a send and a receive posted together (one
// transport group). Ping: send, then receive the answer; pong: receive, then answer.
struct Round {
  enum Kind { Idle, Exchange, Ping, Pong } kind = Idle;
  int send_to = -1, recv_from = -1;
};

void run_round(Transport& t, DataBackend& b, const Round& r, void* sbuf, void* rbuf, size_t bytes) {
  auto recv = [&] {
    return t.post_recv(rbuf, bytes, r.recv_from, t.reserve_seqs(Transport::Direction::Recv, r.recv_from, 1), true);
  };
  auto send = [&] {
    return t.post_send(sbuf, bytes, r.send_to, t.reserve_seqs(Transport::Direction::Send, r.send_to, 1), true);
  };
  auto one = [&](auto post) {
    t.group_start();
    const Request q = post();
    t.group_end();
    t.wait(q);
  };
  switch (r.kind) {
    case Round::Idle: break;
    case Round::Exchange: {
      t.group_start();
      const Request q = recv();
      const Request s = send();
      t.group_end();
      t.wait(q);
      t.wait(s);
      break;
    }
    case Round::Ping: one(send), one(recv); break;
    case Round::Pong: one(recv), one(send); break;
  }
  b.synchronize();
}

// Seconds per round of `r` at `bytes`: one untimed round, then opt.min_samples batches of
// rounds, together at least opt.min_time_s (rank 0 decides how many rounds a batch has); the
// median over batches of the slowest rank's mean round. Round i's messages come from and go to
// slot i % window of `bytes` (send and receive buffers window x bytes each): through
// kStreamWindow slots, as a collective's messages move through its input, output and staging
// buffers, several times a message's size, so that a message is cache-resident only where a
// collective of that size would be; through one, as the data of a collective whose buffers fit
// in the cache is sent again call after call; or through as many as make a footprint series'
// buffers.
double time_rounds(Transport& t, DataBackend& b, const Round& r, void* sbuf, void* rbuf, size_t bytes, int window,
                   const TransportBenchOptions& opt) {
  t.barrier();
  double t0 = MPI_Wtime();
  run_round(t, b, r, sbuf, rbuf, bytes);
  double once = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &once, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const int samples = std::max(1, opt.min_samples);
  int reps = static_cast<int>(std::ceil(opt.min_time_s / samples / std::max(once, 1e-7)));
  reps = std::clamp(reps, 1, 100000);
  MPI_Bcast(&reps, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<double> batch;
  for (int k = 0; k < samples; ++k) {
    t.barrier();
    t0 = MPI_Wtime();
    for (int i = 0; i < reps; ++i) {
      const size_t at = static_cast<size_t>(i % window) * bytes;
      run_round(t, b, r, static_cast<uint8_t*>(sbuf) + at, static_cast<uint8_t*>(rbuf) + at, bytes);
    }
    double mean = (MPI_Wtime() - t0) / reps;
    MPI_Allreduce(MPI_IN_PLACE, &mean, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    batch.push_back(mean);
  }
  std::sort(batch.begin(), batch.end());
  return batch[batch.size() / 2];
}

struct Layout {
  std::vector<std::vector<int>> hosts;  // ranks of each host, in rank order
  int host = 0, local = 0;              // this rank's
};

Layout layout(const std::vector<int>& host_of, int rank) {
  Layout l;
  for (size_t r = 0; r < host_of.size(); ++r) {
    const size_t h = static_cast<size_t>(host_of[r]);
    if (l.hosts.size() <= h) l.hosts.resize(h + 1);
    if (static_cast<int>(r) == rank) l.host = static_cast<int>(h), l.local = static_cast<int>(l.hosts[h].size());
    l.hosts[h].push_back(static_cast<int>(r));
  }
  return l;
}

// This rank's part of the exchange round within each host (every host's ranks in a ring, all
// hosts at once), or between hosts (rank (host h, local i) to (h+1, i), from (h-1, i): NCCL's
// rail rings); Idle when the round leaves it out.
Round exchange_round(const Layout& l, const std::string& between) {
  const auto& mine = l.hosts[static_cast<size_t>(l.host)];
  if (between == "host") {
    const size_t n = mine.size(), i = static_cast<size_t>(l.local);
    if (n < 2) return {};
    return {Round::Exchange, mine[(i + 1) % n], mine[(i + n - 1) % n]};
  }
  const size_t H = l.hosts.size(), h = static_cast<size_t>(l.host), i = static_cast<size_t>(l.local);
  return {Round::Exchange, l.hosts[(h + 1) % H][i], l.hosts[(h + H - 1) % H][i]};
}

// Whether measure_transport times the exchange within hosts (every host has two ranks or
// more) and between them (several hosts, each with as many ranks).
bool exchanges_within(const Layout& l) {
  for (const auto& h : l.hosts)
    if (h.size() < 2) return false;
  return true;
}
bool exchanges_between(const Layout& l) {
  if (l.hosts.size() < 2) return false;
  for (const auto& h : l.hosts)
    if (h.size() != l.hosts[0].size()) return false;
  return true;
}

TransportSeries sweep(Transport& t, DataBackend& b, const Round& r, const std::string& pattern,
                      const std::string& between, const TransportBenchOptions& opt, double per_round, int window) {
  TransportSeries s{pattern, between, {}, window};
  const std::vector<uint64_t> sizes = sweep_sizes(opt);
  const uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
  void* sbuf = b.alloc(window * largest);
  void* rbuf = b.alloc(window * largest);
  write_data(b, sbuf, window * largest);
  write_data(b, rbuf, window * largest);
  for (uint64_t bytes : sizes)
    s.points.emplace_back(static_cast<double>(bytes), time_rounds(t, b, r, sbuf, rbuf, bytes, window, opt) * per_round);
  b.release(sbuf);
  b.release(rbuf);
  return s;
}

// The footprint series of `footprint` bytes of buffers on a host of `per_host` ranks: every size
// of 4 KiB and more (the sizes the factors are read from) that divides each rank's send and
// receive buffers sent through as many slots as they hold (footprint_slots).
TransportSeries sweep_footprint(Transport& t, DataBackend& b, const Round& r, const std::string& pattern,
                                const TransportBenchOptions& opt, double per_round, uint64_t footprint, int per_host) {
  TransportSeries s{pattern, "host", {}, 0, footprint};
  const uint64_t side = footprint / (2 * static_cast<uint64_t>(per_host));
  if (!side) return s;
  void* sbuf = b.alloc(side);
  void* rbuf = b.alloc(side);
  write_data(b, sbuf, side);
  write_data(b, rbuf, side);
  for (uint64_t bytes : sweep_sizes(opt)) {
    const uint64_t slots = footprint_slots(footprint, per_host, bytes);
    if (bytes < 4096 || !slots) continue;
    s.points.emplace_back(static_cast<double>(bytes),
                          time_rounds(t, b, r, sbuf, rbuf, bytes, static_cast<int>(slots), opt) * per_round);
  }
  b.release(sbuf);
  b.release(rbuf);
  return s;
}

}  // namespace

uint64_t footprint_slots(uint64_t footprint, int per_host, uint64_t bytes) {
  const uint64_t ranks = static_cast<uint64_t>(std::max(per_host, 1)), side = footprint / (2 * ranks);
  if (!bytes || !side || bytes > side || side % bytes || 2 * ranks * side != footprint) return 0;
  return side / bytes;
}

std::vector<uint64_t> default_footprints(uint64_t cache_bytes) {
  const uint64_t c = cache_bytes ? cache_bytes : uint64_t{32} << 20;
  std::vector<uint64_t> out;
  for (const auto& [num, den] : std::vector<std::pair<uint64_t, uint64_t>>{{1, 8}, {1, 4}, {3, 8}, {1, 2}, {3, 4}, {1, 1}, {3, 2}, {2, 1}, {4, 1}})
    out.push_back(c * num / den);
  return out;
}

void write_data(DataBackend& b, void* p, uint64_t bytes) {
  std::vector<uint8_t> pattern(static_cast<size_t>(std::min<uint64_t>(bytes, uint64_t{1} << 20)));
  for (size_t i = 0; i + 1 < pattern.size(); i += 2) {
    const auto v = static_cast<uint16_t>(0x3C00 + (i / 2) % 512);
    std::memcpy(pattern.data() + i, &v, 2);
  }
  for (uint64_t at = 0; at < bytes; at += pattern.size())
    b.upload(static_cast<uint8_t*>(p) + at, pattern.data(), static_cast<size_t>(std::min<uint64_t>(pattern.size(), bytes - at)));
}

std::vector<int> hosts_of_world() {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int leader = rank;  // the lowest rank of this host
  MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, node);
  MPI_Comm_free(&node);
  std::vector<int> leaders(static_cast<size_t>(world));
  MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> sorted = leaders;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<int> host_of(static_cast<size_t>(world));
  for (size_t r = 0; r < leaders.size(); ++r)
    host_of[r] = static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), leaders[r]) - sorted.begin());
  return host_of;
}

std::vector<TransportSeries> measure_transport(Transport& t, DataBackend& b, const std::vector<int>& host_of,
                                               const TransportBenchOptions& opt) {
  const Layout l = layout(host_of, t.rank());
  std::vector<TransportSeries> out;
  const bool host_buffers = b.memory() == MemorySpace::Host;
  const int per_host = static_cast<int>(l.hosts[static_cast<size_t>(l.host)].size());
  const auto within = [&](const Round& r, const char* pattern, double per_round) {
    out.push_back(sweep(t, b, r, pattern, "host", opt, per_round, host_buffers ? opt.window : kStreamWindow));
    if (host_buffers)
      for (const uint64_t f : opt.footprints) out.push_back(sweep_footprint(t, b, r, pattern, opt, per_round, f, per_host));
  };
  if (exchanges_within(l)) within(exchange_round(l, "host"), "exchange", 1.0);
  // Rank 0 and the next rank of its host, the others idle.
  if (opt.pingpong && l.hosts[0].size() >= 2) {
    Round r;
    const int peer = l.hosts[0][1];
    if (t.rank() == 0) r = {Round::Ping, peer, peer};
    else if (t.rank() == peer) r = {Round::Pong, 0, 0};
    within(r, "pingpong", 0.5);
  }
  if (l.hosts.size() >= 2) {
    if (exchanges_between(l))
      out.push_back(sweep(t, b, exchange_round(l, "network"), "exchange", "network", opt, 1.0, kStreamWindow));
    if (!opt.pingpong) return out;
    Round r;
    const int peer = l.hosts[1][0];
    if (t.rank() == 0) r = {Round::Ping, peer, peer};
    else if (t.rank() == peer) r = {Round::Pong, 0, 0};
    out.push_back(sweep(t, b, r, "pingpong", "network", opt, 0.5, kStreamWindow));
  }
  return out;
}

sched::Schedule exchange_schedule(const std::vector<int>& host_of, const std::string& between, uint64_t bytes) {
  sched::Schedule s;
  s.collective = sched::Collective::AllToAll;
  s.algorithm = "exchange";
  s.dtype = DType::BF16;
  s.count = bytes / 2;
  s.ranks.resize(host_of.size());
  // One layout for every rank (each rank's own host and place in it set in turn).
  Layout l = layout(host_of, 0);
  if (!(between == "host" ? exchanges_within(l) : exchanges_between(l))) return s;
  for (const auto& ranks : l.hosts)
    for (size_t i = 0; i < ranks.size(); ++i) {
      const auto r = static_cast<size_t>(ranks[i]);
      l.host = host_of[r];
      l.local = static_cast<int>(i);
      const Round round = exchange_round(l, between);
      if (round.kind != Round::Exchange) continue;
      sched::RankProgram& p = s.ranks[r];
      p.input_count = p.output_count = s.count;
      p.ops.push_back({sched::OpKind::Send, round.send_to, {sched::BufKind::Input, 0, 0, s.count}, {}, {}, 0, 0});
      p.ops.push_back({sched::OpKind::Recv, round.recv_from, {}, {sched::BufKind::Output, 0, 0, s.count}, {}, 0, 0});
    }
  return s;
}

TransportFit fit_transport(const TransportSeries& s, double fit_from) {
  TransportFit f;
  f.between = s.between;
  f.fit_from = fit_from;
  if (s.points.empty()) return f;
  // The least time of any message: the smallest message's, unless noise made it slower.
  f.latency_s = s.points.front().second;
  for (const auto& p : s.points) f.latency_s = std::min(f.latency_s, p.second);
  for (size_t i = 1; i < s.points.size(); ++i) f.out_of_order += s.points[i].second < 0.9 * s.points[i - 1].second;
  std::vector<double> bw;
  for (const auto& [bytes, sec] : s.points)
    if (bytes >= fit_from && sec > f.latency_s) bw.push_back(bytes / (sec - f.latency_s));
  if (bw.empty())  // no point that large: the largest one
    bw.push_back(s.points.back().first / std::max(s.points.back().second - f.latency_s, 1e-12));
  std::sort(bw.begin(), bw.end());
  f.bandwidth_Bps = bw.size() % 2 ? bw[bw.size() / 2] : 0.5 * (bw[bw.size() / 2 - 1] + bw[bw.size() / 2]);
  for (const auto& [bytes, sec] : s.points)
    f.worst_rel_error = std::max(f.worst_rel_error, std::fabs((f.latency_s + bytes / f.bandwidth_Bps) / sec - 1));
  auto human = [](double b) { return config::format_bytes(static_cast<uint64_t>(b)); };
  f.source = s.pattern + ", latency the least time (at " + human(s.points.front().first) + " normally), bandwidth the median over " +
             human(fit_from) + " - " + human(s.points.back().first);
  return f;
}

namespace {

// A link of the topology from a series: half the latency per link (a route crosses two), the
// fit's bandwidth, the factor of every measured size, such that the exchange round takes its
// measured time in the model. `copied`: the receiver copies each message (receive_copy), and a
// send is delivered once the copy is done and the acknowledgement is back, so the round is
// latency + copy + latency, as the measured round (an MPI rendezvous) was.
std::string link_yaml(const TransportSeries& s, const std::string& indent, bool copied,
                      const TransportSeries* alone = nullptr, const std::vector<const TransportSeries*>& footprints = {},
                      const std::vector<const TransportSeries*>& alone_footprints = {}) {
  const TransportFit f = fit_transport(s);
  const double paid = (copied ? 2 : 1) * f.latency_s;  // the latencies in a round
  std::ostringstream y;
  y << indent << "bandwidth: " << config::yaml_number(f.bandwidth_Bps / 1e9) << "GB/s\n"
    << indent << "latency: " << config::yaml_number(f.latency_s / 2 * 1e6) << "us\n"
    << indent << "efficiency: 1\n"
    << indent << "# " << s.pattern << " between " << (s.between == "host" ? "ranks of a host" : "hosts") << ": latency "
    << config::yaml_number(f.latency_s * 1e6) << " us, bandwidth " << config::yaml_number(f.bandwidth_Bps / 1e9)
    << " GB/s (the median over 1 MiB and more; alone within " << config::yaml_number(100 * f.worst_rel_error) << "% of every point);\n"
    << indent << "# by_size: bytes / (time - " << (copied ? "2 x latency: the message's and its acknowledgement's" : "latency")
    << ") / bandwidth of each measured size\n"
    << indent << "by_size: ";
  // [[bytes, bytes / (time - paid) / the fit's bandwidth], ...] over a series' points of 4 KiB
  // and more that took longer than `paid`, but those whose factor would pass
  // topo::kMaxSizeFactor (timed within noise of the latency: a factor the loader refuses);
  // a comment line after the list counts them. Empty where no point is left (all timed within
  // noise of the latencies, as on a busy machine): an empty list is not one the loader reads.
  const auto list = [&](const TransportSeries& series, double paid_s, int* noise) {
    std::ostringstream o;
    bool first = true;
    for (const auto& [bytes, sec] : series.points) {
      if (bytes < 4096 || !(sec > paid_s)) continue;
      const double factor = bytes / (sec - paid_s) / f.bandwidth_Bps;
      if (!(factor <= topo::kMaxSizeFactor)) {
        ++*noise;
        continue;
      }
      o << (first ? "[" : ", ") << "[" << static_cast<uint64_t>(bytes) << ", " << config::yaml_number(factor) << "]";
      first = false;
    }
    return first ? std::string() : o.str() + "]";
  };
  const auto none_left = [](const TransportSeries& series) {
    return "none of its " + std::to_string(series.points.size()) +
           " point(s) of 4 KiB and more timed above the latencies with a factor the loader takes";
  };
  const auto noise_line = [&](std::ostream& o, int noise) {
    if (noise)
      o << indent << "# left out: " << noise << " point(s) timed within noise of the latency (a factor over "
        << config::yaml_number(topo::kMaxSizeFactor) << ")\n";
  };
  int noise = 0;
  const std::string by_size = list(s, paid, &noise);
  if (by_size.empty())  // a measured transport needs its by_size: nothing to write without it
    throw std::invalid_argument("the " + s.pattern + (s.between == "host" ? " within a host" : " between hosts") +
                                ": no by_size to write: " + none_left(s) + "; measure again on a quiet machine");
  y << by_size << "\n";
  noise_line(y, noise);
  // One message at a time: the pingpong's half round trip, less its least time (its latency).
  const auto alone_factors = [&](const TransportSeries& a_series, const char* key) {
    const TransportFit a = fit_transport(a_series);
    int a_noise = 0;
    const std::string l = list(a_series, a.latency_s, &a_noise);
    if (l.empty()) {
      y << indent << "# " << key << " left out: " << none_left(a_series) << " (a busy machine?)\n";
      return;
    }
    y << indent << "# " << key << ": the " << a_series.pattern
      << " (one message at a time, the other ranks idle): bytes / (time - " << config::yaml_number(a.latency_s * 1e6)
      << " us, its least time) / the bandwidth above\n"
      << indent << key << ": " << l << "\n";
    noise_line(y, a_noise);
  };
  if (alone && !alone->points.empty()) alone_factors(*alone, "alone_by_size");
  // Each footprint's list, its factors as by_size's and alone_by_size's (the pingpong's less the
  // least time of the pingpong above, where there is one).
  const double alone_paid = alone && !alone->points.empty() ? fit_transport(*alone).latency_s : paid;
  // A footprint with no point left is left out with a comment.
  const auto footprint_lists = [&](const std::vector<const TransportSeries*>& lists, const char* key, bool alone_list) {
    std::ostringstream entries, dropped;
    for (const TransportSeries* fs : lists) {
      if (!fs || fs->points.empty()) continue;
      int f_noise = 0;
      const std::string l = list(*fs, alone_list ? alone_paid : paid, &f_noise);
      if (l.empty()) {
        dropped << indent << "# " << key << ": footprint " << config::format_bytes(fs->footprint)
                << " left out: " << none_left(*fs) << " (a busy machine?)\n";
        continue;
      }
      entries << indent << "  - {footprint: " << config::format_bytes(fs->footprint) << ", by_size: " << l << "}\n";
      noise_line(entries, f_noise);
    }
    y << dropped.str();
    if (entries.str().empty()) return;
    y << indent << "# " << key << ": the " << (alone_list ? "pingpong" : s.pattern)
      << " through buffers that total the footprint on the node (as a plan's typed buffers), "
      << (alone_list ? "less the least time of alone_by_size's" : "the same latencies paid") << "\n"
      << indent << key << ":\n"
      << entries.str();
  };
  footprint_lists(footprints, "by_footprint", false);
  footprint_lists(alone_footprints, "alone_by_footprint", true);
  return y.str();
}

}  // namespace

std::string topology_yaml(const MachineTopology& m) {
  if (m.hosts > 1 && !m.network) throw std::invalid_argument("several hosts but no exchange measured between them");
  if (m.hosts > 1 && m.per_host < 1) throw std::invalid_argument("hosts run different numbers of ranks");
  if (m.per_host >= 2 && !m.host) throw std::invalid_argument("no exchange measured within a host");
  std::ostringstream y;
  for (const auto& c : m.comment) y << "# " << c << "\n";
  y << "name: " << m.name << "\ndescription: " << config::yaml_quote(m.description) << "\n"
    << "generator: " << (m.hosts > 1 ? "fat-tree" : "single-node") << "\nnode:\n  gpus: " << m.per_host
    << "\n  fabric: pcie\n";
  // With one rank per host nothing crosses the node's links; they take the network's figures.
  const bool copied = m.backend == "mpi" && m.per_host >= 2;
  if (copied)
    y << "  # MPI over shared memory: the receiving rank's core copies each message, in turn with its kernels\n"
      << "  receive_copy: true\n"
      << "  # the ranks' kernels and copies share the host's memory: alone on it, one runs at its alone speed\n"
      << "  shared_memory: true\n";
  y << "  gpu_link:\n"
    << link_yaml(m.per_host >= 2 ? *m.host : *m.network, "    ", copied, copied ? m.host_alone : nullptr,
                 copied ? m.host_footprints : std::vector<const TransportSeries*>{},
                 copied ? m.host_alone_footprints : std::vector<const TransportSeries*>{});
  if (m.hosts > 1)
    y << "network:\n  nodes: " << m.hosts << "\n  tiers: 2\n"
      << "  gpus_per_leaf: " << m.hosts * m.per_host << "   # every rank's port on one leaf switch\n"
      << "  link:\n" << link_yaml(*m.network, "    ", false);
  return y.str();
}

}  // namespace compcoll::real
