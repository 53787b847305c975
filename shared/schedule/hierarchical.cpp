// shared/schedule/hierarchical.cpp — two-level collectives over nodes of g ranks (rank =
// node * g + local): a phase inside each node and a phase among the ranks of equal local rank
// across nodes, each a part (parts.h) of the flat algorithms, so the node-level data moved
// across nodes is 1/g of the vector.
#include "schedule/parts.h"

namespace compcoll::sched {

std::string_view inter_name(InterAlgorithm a) {
  switch (a) {
    case InterAlgorithm::Ring: return "ring";
    case InterAlgorithm::Recursive: return "recursive";
    case InterAlgorithm::Tree: return "tree";
    case InterAlgorithm::Direct: return "direct";
  }
  return "unknown";
}

namespace {

using namespace detail;

// The ranks of node k, and the ranks of local rank l on every node, in order.
std::vector<int> node_group(int k, int g) {
  std::vector<int> m(g);
  for (int i = 0; i < g; ++i) m[i] = k * g + i;
  return m;
}
std::vector<int> local_group(int l, int nodes, int g) {
  std::vector<int> m(nodes);
  for (int k = 0; k < nodes; ++k) m[k] = k * g + l;
  return m;
}

Schedule hierarchical_base(Collective c, const char* what, int nodes, int g, uint64_t count, DType dtype,
                           Placement placement, const std::string& algorithm) {
  if (nodes < 1 || g < 1)
    throw ScheduleError(std::string(what) + ": nodes and gpus_per_node must be >= 1, got " + std::to_string(nodes) +
                        " x " + std::to_string(g));
  return make_schedule(c, algorithm, placement, nodes * g, count, dtype);
}

// Reduce-scatter and allgather: the vector is n = nodes·g blocks; algorithm block l of a node
// is blocks [l·nodes, (l+1)·nodes) (Part::sub = nodes), and block k of that range is what
// member k of local group l owns. So after the two levels rank (k, l) holds block l·nodes + k,
// which belongs to rank l·nodes + k: the transpose of the layout. One exchange (S/n per rank)
// moves each block to its rank; it is the identity when nodes or g is 1.
int transposed_holder(int b, int nodes, int g) { return (b % nodes) * g + b / nodes; }  // holds block b
int transposed_block(int r, int nodes, int g) { return (r % g) * nodes + r / g; }       // block rank r holds

}  // namespace

Schedule hierarchical_allreduce(int nodes, int gpus_per_node, uint64_t count, DType dtype, Placement placement,
                                InterAlgorithm inter, const Pipelining& pipe, std::optional<Placement> intra) {
  const int g = gpus_per_node;
  Schedule s = hierarchical_base(Collective::AllReduce, "hierarchical_allreduce", nodes, g, count, dtype, placement,
                                 "hierarchical-" + std::string(inter_name(inter)));
  check_pipelining("hierarchical_allreduce", pipe);
  if (inter == InterAlgorithm::Tree && pipe.chunks * pipe.channels > 1)
    throw ScheduleError("hierarchical_allreduce: pipelining is not built with the tree across nodes; use ring or recursive");
  if (pipe.chunks > 1 || pipe.channels > 1)
    s.algorithm += " chunks=" + std::to_string(pipe.chunks) + " channels=" + std::to_string(pipe.channels);
  const Placement in_node = intra.value_or(placement);
  if (in_node != placement) s.algorithm += " intra=" + std::string(placement_name(in_node));
  const bool rs_compressed = in_node == Placement::PerHop || in_node == Placement::ZipCCL;
  allreduce_prologue(s, count);
  const Chains start = chains_after_last(s);
  // Each piece: ring reduce-scatter in the node (local rank l ends with block l), allreduce of
  // block l among the ranks of local rank l, ring allgather in the node.
  pipelined(s, count, pipe, [&](const Block& piece, uint32_t index, uint32_t delay) {
    Chains chains = start;
    uint32_t step = delay;
    std::vector<Part> node_parts(nodes);
    for (int k = 0; k < nodes; ++k)
      node_parts[k] = Part{node_group(k, g), piece.begin, piece.count(), BufKind::Output, 0, 1, index};
    for (const Part& part : node_parts) ring_reduce_scatter_part(s, part, 0, rs_compressed, step, chains);
    step += static_cast<uint32_t>(g - 1);
    uint32_t after = step;
    for (int l = 0; l < g; ++l) {
      const Block mine = node_parts[0].block(l);
      const Part across{local_group(l, nodes, g), piece.begin + mine.begin, mine.count(), BufKind::Output, 0, 1, index};
      switch (inter) {
        case InterAlgorithm::Ring: after = ring_allreduce_part(s, across, placement, step, chains); break;
        case InterAlgorithm::Recursive: after = recursive_allreduce_part(s, across, placement, step, chains); break;
        case InterAlgorithm::Tree: after = double_tree_allreduce_part(s, across, placement, step, chains); break;
        case InterAlgorithm::Direct: after = direct_allreduce_part(s, across, placement, step, chains); break;
      }
    }
    for (const Part& part : node_parts) ring_allgather_part(s, part, 0, in_node, after, chains);
  });
  return s;
}

Schedule hierarchical_reduce_scatter(int nodes, int gpus_per_node, uint64_t count, DType dtype, Placement placement) {
  const int g = gpus_per_node;
  if (placement == Placement::CompressOnce || placement == Placement::ZipCCL)
    throw ScheduleError("hierarchical_reduce_scatter: placement " + std::string(placement_name(placement)) +
                        " does not apply (blocks change at every hop); use none or per-hop");
  Schedule s = hierarchical_base(Collective::ReduceScatter, "hierarchical_reduce_scatter", nodes, g, count, dtype,
                                 placement, "hierarchical-ring");
  const int n = nodes * g;
  const bool compressed = placement == Placement::PerHop;
  // Scratch 0 accumulates the whole vector; scratch 1 receives.
  reduce_scatter_prologue(s, count);
  Chains chains = chains_after_last(s);
  uint32_t step = 0;
  for (int k = 0; k < nodes; ++k)
    ring_reduce_scatter_part(s, Part{node_group(k, g), 0, count, BufKind::Scratch, 0, nodes, 1}, 0, compressed, step,
                             chains);
  step += static_cast<uint32_t>(g - 1);
  for (int l = 0; l < g; ++l) {
    const Block range = blocks_of(count, n, l * nodes, (l + 1) * nodes);
    ring_reduce_scatter_part(s, Part{local_group(l, nodes, g), range.begin, range.count(), BufKind::Scratch, 0, 1, 1}, 0,
                             compressed, step, chains);
  }
  step += static_cast<uint32_t>(nodes - 1);
  for (int r = 0; r < n; ++r) {
    RankProgram& p = s.ranks[r];
    Chain c{p, chains[r]};
    const Block mine = block_of(count, n, r);
    p.output_count = mine.count();
    const Slice out{BufKind::Output, 0, 0, mine.count()};
    const int held = transposed_block(r, nodes, g);
    if (held == r) {
      c.add({OpKind::Copy, -1, Slice{BufKind::Scratch, 0, mine.begin, mine.count()}, out, {}, step});
      continue;
    }
    const Block b = block_of(count, n, held);
    c.send(held, Slice{BufKind::Scratch, 0, b.begin, b.count()}, compressed, step);
    c.recv(transposed_holder(r, nodes, g), out, compressed, step);
  }
  return s;
}

Schedule hierarchical_allgather(int nodes, int gpus_per_node, uint64_t count, DType dtype, Placement placement) {
  const int g = gpus_per_node;
  if (placement == Placement::ZipCCL)
    throw ScheduleError("hierarchical_allgather: placement zipccl is for allreduce; use none, per-hop or compress-once");
  Schedule s = hierarchical_base(Collective::AllGather, "hierarchical_allgather", nodes, g, count, dtype, placement,
                                 "hierarchical-ring");
  const int n = nodes * g;
  // First the transpose (see hierarchical_reduce_scatter): rank r's block goes to the rank that
  // holds it between the levels, then a ring allgather across nodes and one inside each node.
  uint32_t step = 0;
  for (int r = 0; r < n; ++r) {
    RankProgram& p = s.ranks[r];
    const Block mine = block_of(count, n, r);
    p.input_count = mine.count();
    p.output_count = count;
    const Slice in{BufKind::Input, 0, 0, mine.count()};
    const int holder = transposed_holder(r, nodes, g);
    if (holder == r) {
      append_chained(p, {OpKind::Copy, -1, in, Slice{BufKind::Output, 0, mine.begin, mine.count()}, {}, 0});
      continue;
    }
    const int held = transposed_block(r, nodes, g);
    const Block b = block_of(count, n, held);
    int64_t last = -1;
    Chain c{p, last};
    c.send(holder, in, placement != Placement::None, 0);
    c.recv(held, Slice{BufKind::Output, 0, b.begin, b.count()}, placement != Placement::None, 0);
    step = 1;
  }
  Chains chains = chains_after_last(s);
  for (int l = 0; l < g; ++l) {
    const Block range = blocks_of(count, n, l * nodes, (l + 1) * nodes);
    ring_allgather_part(s, Part{local_group(l, nodes, g), range.begin, range.count()}, 0, placement, step, chains);
  }
  step += static_cast<uint32_t>(nodes - 1);
  for (int k = 0; k < nodes; ++k)
    ring_allgather_part(s, Part{node_group(k, g), 0, count, BufKind::Output, 0, nodes}, 0, placement, step, chains);
  return s;
}

}  // namespace compcoll::sched
