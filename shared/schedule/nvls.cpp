// shared/schedule/nvls.cpp — NCCL's NVLS allreduce (NVLink SHARP: each node's NVSwitch reduces
// and multicasts), inside one node and, as NVLS-Tree, across nodes with NCCL's trees between
// the nodes' heads (algorithms.h: nvls_allreduce, nvls_tree_allreduce).
#include "schedule/parts.h"

#include <array>
#include <string>

namespace compcoll::sched {

namespace {

// nodes x g GPU ranks (rank = node x g + local), then one switch rank per node. With one node
// the heads' sums go straight back to their switch; with more, head h of every node runs NCCL's
// tree of nodes over part h between the reduction and the multicast.
Schedule nvls_build(const char* what, int nodes, int g, uint64_t count, DType dtype, Placement placement,
                    const Pipelining& pipe) {
  if (nodes < 1 || g < 2)
    throw ScheduleError(std::string(what) + ": a node needs at least 2 GPUs and there must be a node, got " +
                        std::to_string(nodes) + " node(s) of " + std::to_string(g));
  if (placement != Placement::None)
    throw ScheduleError(std::string(what) + ": placement " + std::string(placement_name(placement)) +
                        " does not apply (the switch reduces raw data)");
  detail::check_pipelining(what, Pipelining{pipe.chunks, pipe.channels, false});  // merged: chunks too
  // Merged channels: those that move in lockstep (every channel on one node, a tree's across
  // nodes) as one, carrying their pieces side by side.
  const uint32_t groups = nodes == 1 ? 1u : std::min(pipe.channels, 2u);
  if (pipe.merge && pipe.channels % groups)
    throw ScheduleError(std::string(what) + ": " + std::to_string(pipe.channels) +
                        " channels do not merge into NCCL's two trees");
  const int n = nodes * g;
  Schedule s = make_schedule(Collective::AllReduce, nodes == 1 ? "nvls" : "nvls-tree", placement, n + nodes, count, dtype);
  if (pipe.chunks > 1 || pipe.channels > 1)
    s.algorithm += " chunks=" + std::to_string(pipe.chunks) + " channels=" + std::to_string(pipe.channels) +
                   (pipe.merge ? " merged" : "");
  s.switches = nodes;
  s.switch_span = g;
  detail::allreduce_prologue(s, count);
  for (int k = 0; k < nodes; ++k) {
    RankProgram& sw = s.ranks[static_cast<size_t>(n + k)];
    sw.ops.clear();
    sw.input_count = sw.output_count = 0;
  }
  // The trees of nodes: the first half of the channels NCCL's tree 0, the second its tree 1.
  const std::array<std::vector<int>, 2> parent{nccl_tree_parents(nodes, 0), nccl_tree_parents(nodes, 1)};
  std::array<std::vector<std::vector<int>>, 2> kids;
  std::array<std::vector<int>, 2> depth;
  std::array<int, 2> height{};
  for (int t = 0; t < 2; ++t) {
    kids[t].assign(static_cast<size_t>(nodes), {});
    depth[t].assign(static_cast<size_t>(nodes), 0);
    for (int k = 0; k < nodes; ++k) {
      if (parent[t][k] >= 0) kids[t][static_cast<size_t>(parent[t][k])].push_back(k);
      for (int v = k; parent[t][v] >= 0; v = parent[t][v]) ++depth[t][k];
      height[t] = std::max(height[t], depth[t][k]);
    }
  }
  // A head's scratch buffers per piece: the sum, and one per child node in either tree.
  size_t slots = 1;
  for (const auto& tree : kids)
    for (const auto& children : tree) slots = std::max(slots, children.size() + 1);
  const Pipelining run = pipe.merge ? Pipelining{pipe.chunks, groups, false} : pipe;
  const uint32_t half = (run.channels + 1) / 2;
  // Connections (lanes of a piece): part h's data in and out of a switch on lane h, as each
  // head's loads and stores are a stream of their own in NCCL; the heads' round trips with their
  // switch on lane g, behind no part's data; the trees' messages between nodes on lane g + 1.
  const auto round_trip = static_cast<uint32_t>(g), across = static_cast<uint32_t>(g + 1);
  std::vector<detail::Chains> after(run.channels, detail::chains_after_last(s));
  detail::pipelined(s, count, run, [&](const Block& piece, uint32_t index, uint32_t delay) {
    if (piece.count() == 0) return;
    const uint64_t m = piece.count();
    const uint32_t channel = index / run.chunks;
    const int t = channel < half ? 0 : 1;
    const auto H = static_cast<uint32_t>(height[t]);
    // Head h reduces, carries across nodes and multicasts part h of the piece (block_of(m, g, h)),
    // as NCCL's loop of a channel gives each of its heads one chunk.
    const auto part = [&](int h) { return block_of(m, g, h); };
    const auto out = [&](int h) { return Slice{BufKind::Output, 0, piece.begin + part(h).begin, part(h).count()}; };
    // Steps: the parts in at `delay`, the node's sums out to the heads at +1; across nodes a head
    // at depth e sends up at +2 + H - e, the root sends down at `down`, a head at depth e gets
    // the sum at down + e - 1 and passes it on, and stores it to its switch, at down + e; the
    // switch multicasts at down + e + 1.
    const uint32_t down = delay + 3 + H;
    for (int k = 0; k < nodes; ++k) {
      RankProgram& sw = s.ranks[static_cast<size_t>(n + k)];
      const auto e = static_cast<uint32_t>(depth[t][k]);
      // The switch: every GPU's piece lands in a buffer of its own (the receives wait on
      // nothing, so the messages flow at once), the sum of part h accumulates in the first
      // buffer, goes to head h, comes back from it and is multicast to every GPU of the node.
      // Phase by phase, so that messages between the switch and a GPU keep one order on both sides.
      const auto buf = [&](int j) { return index * static_cast<uint32_t>(g) + static_cast<uint32_t>(j); };
      for (int j = 0; j < g; ++j) detail::grow_scratch(sw, buf(j), m);
      const auto at = [&] { return static_cast<uint32_t>(sw.ops.size()); };
      const auto scratch = [&](int j, int h) { return Slice{BufKind::Scratch, buf(j), part(h).begin, part(h).count()}; };
      std::vector<uint32_t> sums(static_cast<size_t>(g)), up(static_cast<size_t>(g)), back(static_cast<size_t>(g));
      for (int h = 0; h < g; ++h) {
        if (part(h).count() == 0) continue;
        std::vector<uint32_t> recvs;
        for (int j = 0; j < g; ++j) {
          recvs.push_back(at());
          sw.ops.push_back({OpKind::Recv, k * g + j, {}, scratch(j, h), {}, delay, static_cast<uint32_t>(h)});
        }
        sums[h] = recvs[0];
        for (int j = 1; j < g; ++j) {
          const uint32_t op = at();
          sw.ops.push_back({OpKind::Reduce, -1, scratch(j, h), scratch(0, h), {sums[h], recvs[static_cast<size_t>(j)]}, delay});
          sums[h] = op;
        }
      }
      for (int h = 0; h < g; ++h)
        if (part(h).count() > 0) {
          up[h] = at();
          sw.ops.push_back({OpKind::Send, k * g + h, scratch(0, h), {}, {sums[h]}, delay + 1, round_trip});
        }
      const uint32_t stored = nodes == 1 ? delay + 2 : down + e;
      for (int h = 0; h < g; ++h)
        if (part(h).count() > 0) {
          back[h] = at();
          sw.ops.push_back({OpKind::Recv, k * g + h, {}, scratch(0, h), {up[h]}, stored, round_trip});
        }
      for (int h = 0; h < g; ++h)
        if (part(h).count() > 0)
          for (int j = 0; j < g; ++j)
            sw.ops.push_back({OpKind::Send, k * g + j, scratch(0, h), {}, {back[h]}, stored + 1, static_cast<uint32_t>(h)});
    }
    // The GPUs: each sends every part to its switch; head h takes the node's sum of part h, runs
    // the tree across nodes with the heads h of the other nodes, and stores the total to its
    // switch's multicast; every GPU receives each part's multicast into its output. A channel's
    // pieces leave each GPU in order: piece j's parts after piece j - 1's.
    detail::Chains& chains = after[channel];
    for (int r = 0; r < n; ++r) {
      const int k = r / g, h = r % g, sw = n + k;
      RankProgram& p = s.ranks[static_cast<size_t>(r)];
      detail::Chain ch{p, chains[static_cast<size_t>(r)]};
      for (int x = 0; x < g; ++x)
        if (part(x).count() > 0) ch.add({OpKind::Send, sw, out(x), {}, {}, delay, static_cast<uint32_t>(x)});
      const int64_t sent = chains[static_cast<size_t>(r)];
      const Block own = part(h);
      if (own.count() > 0) {
        const std::vector<int>& children = kids[t][static_cast<size_t>(k)];
        const auto e = static_cast<uint32_t>(depth[t][k]);
        const auto tmp = [&](size_t i) { return static_cast<uint32_t>(index * slots + i); };
        for (size_t i = 0; i <= children.size(); ++i) detail::grow_scratch(p, tmp(i), own.count());
        const auto buf = [&](size_t i) { return Slice{BufKind::Scratch, tmp(i), 0, own.count()}; };
        ch.add({OpKind::Recv, sw, {}, buf(0), {}, delay + 1, round_trip});
        // The children's partial sums land beside it (their receives wait on nothing else).
        for (size_t i = 0; i < children.size(); ++i) {
          const auto recv = static_cast<uint32_t>(p.ops.size());
          p.ops.push_back({OpKind::Recv, children[i] * g + h, {}, buf(i + 1), {static_cast<uint32_t>(sent)},
                           delay + 1 + H - e, across});
          const auto last = static_cast<uint32_t>(chains[static_cast<size_t>(r)]);  // the sum so far
          chains[static_cast<size_t>(r)] = static_cast<int64_t>(p.ops.size());
          p.ops.push_back({OpKind::Reduce, -1, buf(i + 1), buf(0), {last, recv}, delay + 1 + H - e});
        }
        const int up = parent[t][k];
        if (up >= 0) {
          ch.add({OpKind::Send, up * g + h, buf(0), {}, {}, delay + 2 + H - e, across});
          ch.add({OpKind::Recv, up * g + h, {}, buf(0), {}, down + e - 1, across});
        }
        for (int kid : children) ch.add({OpKind::Send, kid * g + h, buf(0), {}, {}, down + e, across});
        ch.add({OpKind::Send, sw, buf(0), {}, {}, nodes == 1 ? delay + 2 : down + e, round_trip});
      }
      // The multicast parts land side by side (each part's receive waits only on the GPU's own
      // parts having left: it overwrites them).
      const uint32_t multicast = (nodes == 1 ? delay + 2 : down + static_cast<uint32_t>(depth[t][k])) + 1;
      for (int x = 0; x < g; ++x)
        if (part(x).count() > 0)
          p.ops.push_back({OpKind::Recv, sw, {}, out(x), {static_cast<uint32_t>(sent)}, multicast, static_cast<uint32_t>(x)});
      chains[static_cast<size_t>(r)] = sent;
    }
  });
  return s;
}

}  // namespace

Schedule nvls_allreduce(int g, uint64_t count, DType dtype, Placement placement, const Pipelining& pipe) {
  if (g < 2) throw ScheduleError("nvls_allreduce: a node needs at least 2 GPUs, got " + std::to_string(g));
  return nvls_build("nvls_allreduce", 1, g, count, dtype, placement, pipe);
}

Schedule nvls_tree_allreduce(int nodes, int g, uint64_t count, DType dtype, Placement placement, const Pipelining& pipe) {
  if (nodes < 2 || g < 2)
    throw ScheduleError("nvls_tree_allreduce: at least 2 nodes of at least 2 GPUs, got " + std::to_string(nodes) +
                        " of " + std::to_string(g));
  return nvls_build("nvls_tree_allreduce", nodes, g, count, dtype, placement, pipe);
}

}  // namespace compcoll::sched
