// shared/schedule/reference_executor.cpp — in-process executor over host buffers.
#include "schedule/reference_executor.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <deque>
#include <map>

#include "codec/reduce.h"
#include "io/float_convert.h"
#include "util/splitmix64.h"

namespace compcoll::sched {
namespace {

struct RankState {
  std::vector<uint8_t> input, output;
  std::vector<std::vector<uint8_t>> scratch, wire;
};

uint8_t* slice_ptr(RankState& st, const Slice& s, size_t es) {
  switch (s.buf) {
    case BufKind::Input: return st.input.data() + s.offset * es;
    case BufKind::Output: return st.output.data() + s.offset * es;
    case BufKind::Scratch: return st.scratch[s.index].data() + s.offset * es;
    case BufKind::Wire: return st.wire[s.index].data();
  }
  return nullptr;
}

}  // namespace

OutputError compare_outputs(DType dtype, const std::vector<std::vector<uint8_t>>& got,
                            const std::vector<std::vector<uint8_t>>& want) {
  if (got.size() != want.size())
    throw ScheduleError("compare_outputs: " + std::to_string(got.size()) + " outputs against " + std::to_string(want.size()));
  const size_t es = dtype_size(dtype);
  OutputError e;
  double diff2 = 0, ref2 = 0;
  for (size_t r = 0; r < got.size(); ++r) {
    if (got[r].size() != want[r].size())
      throw ScheduleError("compare_outputs: rank " + std::to_string(r) + " output sizes differ");
    for (uint64_t i = 0; i < got[r].size() / es; ++i) {
      const double g = load_as_float(dtype, got[r].data(), i), w = load_as_float(dtype, want[r].data(), i);
      double d = std::fabs(g - w);
      if (std::isnan(d)) d = (std::isnan(g) && std::isnan(w)) ? 0 : std::numeric_limits<double>::infinity();
      e.max_abs = std::max(e.max_abs, d);
      diff2 += d * d;
      if (std::isfinite(w)) ref2 += w * w;
      ++e.elements;
    }
  }
  e.rel_l2 = diff2 == 0 ? 0 : (ref2 == 0 ? std::numeric_limits<double>::infinity() : std::sqrt(diff2 / ref2));
  e.snr_db = diff2 == 0 ? std::numeric_limits<double>::infinity() : 10 * std::log10(ref2 / diff2);
  return e;
}

std::vector<std::vector<uint8_t>> run_reference(const Schedule& s,
                                                const std::vector<std::vector<uint8_t>>& inputs,
                                                const ReferenceOptions& opt) {
  validate(s);
  const int n = s.size();
  const size_t es = dtype_size(s.dtype);
  if (static_cast<int>(inputs.size()) != n)
    throw ScheduleError("run_reference: " + std::to_string(inputs.size()) + " inputs for " + std::to_string(n) + " ranks");
  std::vector<RankState> st(n);
  for (int r = 0; r < n; ++r) {
    const RankProgram& p = s.ranks[r];
    if (inputs[r].size() != p.input_count * es)
      throw ScheduleError("run_reference: rank " + std::to_string(r) + " input has " + std::to_string(inputs[r].size()) +
                          " bytes, the schedule needs " + std::to_string(p.input_count * es));
    st[r].input = inputs[r];
    st[r].output.assign(p.output_count * es, 0);
    for (uint64_t c : p.scratch_counts) st[r].scratch.emplace_back(c * es, 0);
    st[r].wire.resize(p.wire_buffers);
  }
  std::map<std::pair<int, int>, std::deque<std::vector<uint8_t>>> channel;
  // Runs op i of rank r; false when it is a recv whose message has not arrived yet.
  const auto execute = [&](int r, size_t i) -> bool {
    const Op& op = s.ranks[r].ops[i];
    RankState& me = st[r];
    switch (op.kind) {
      case OpKind::Send:
        if (op.src.buf == BufKind::Wire) {
          channel[{r, op.peer}].push_back(me.wire[op.src.index]);
        } else {
          const uint8_t* p = slice_ptr(me, op.src, es);
          channel[{r, op.peer}].emplace_back(p, p + op.src.count * es);
        }
        break;
      case OpKind::Recv: {
        auto& q = channel[{op.peer, r}];
        if (q.empty()) return false;
        if (op.dst.buf == BufKind::Wire) me.wire[op.dst.index] = std::move(q.front());
        else if (!q.front().empty()) std::memcpy(slice_ptr(me, op.dst, es), q.front().data(), q.front().size());
        q.pop_front();
        break;
      }
      case OpKind::Reduce:
        reduce_add(s.dtype, slice_ptr(me, op.dst, es), slice_ptr(me, op.src, es), op.src.count);
        break;
      case OpKind::Copy:
        if (op.src.count) std::memmove(slice_ptr(me, op.dst, es), slice_ptr(me, op.src, es), op.src.count * es);
        break;
      case OpKind::Compress:
        if (!opt.codec) throw ScheduleError("run_reference: the schedule compresses but no codec was given");
        me.wire[op.dst.index] = encode(*opt.codec, s.dtype, slice_ptr(me, op.src, es), op.src.count, opt.encode);
        break;
      case OpKind::Decompress: {
        const auto& w = me.wire[op.src.index];
        const StreamInfo info = decode(w.data(), w.size(), slice_ptr(me, op.dst, es), op.dst.count * es);
        if (info.elements != op.dst.count)
          throw ScheduleError("run_reference: rank " + std::to_string(r) + " op " + std::to_string(i) +
                              ": decompressed " + std::to_string(info.elements) + " elements into a slice of " +
                              std::to_string(op.dst.count));
        break;
      }
    }
    return true;
  };
  if (opt.order_seed == 0) {
    // Program order; validate() proved every recv's message arrives.
    std::vector<size_t> pc(n, 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < n; ++r)
        for (; pc[r] < s.ranks[r].ops.size() && execute(r, pc[r]); ++pc[r]) progress = true;
    }
  } else {
    // Any order the dependencies allow, drawn at random: an op runs once its deps are done,
    // and sends to (recvs from) one peer keep their program order, since messages between a
    // pair match in order. A builder that left out a dependency shows as a different result.
    SplitMix64 rng{opt.order_seed};
    std::vector<std::vector<char>> done(n);
    for (int r = 0; r < n; ++r) done[r].assign(s.ranks[r].ops.size(), 0);
    const auto ready = [&](int r, size_t i) {
      const auto& ops = s.ranks[r].ops;
      for (uint32_t d : ops[i].deps)
        if (!done[r][d]) return false;
      if (ops[i].kind == OpKind::Send || ops[i].kind == OpKind::Recv)
        for (size_t j = 0; j < i; ++j)
          if (!done[r][j] && ops[j].kind == ops[i].kind && ops[j].peer == ops[i].peer) return false;
      return true;
    };
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < n; ++r) {
        std::vector<size_t> candidates;
        for (size_t i = 0; i < s.ranks[r].ops.size(); ++i)
          if (!done[r][i] && ready(r, i)) candidates.push_back(i);
        while (!candidates.empty()) {
          const size_t pick = rng.next() % candidates.size();
          const size_t i = candidates[pick];
          candidates.erase(candidates.begin() + static_cast<long>(pick));
          if (execute(r, i)) {
            done[r][i] = 1;
            progress = true;
            break;  // the set of ready ops changed
          }
        }
      }
    }
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < done[r].size(); ++i)
        if (!done[r][i])
          throw ScheduleError("run_reference: rank " + std::to_string(r) + " op " + std::to_string(i) +
                              " never became ready in dependency order (a dependency cycle through messages)");
  }
  std::vector<std::vector<uint8_t>> out(n);
  for (int r = 0; r < n; ++r) out[r] = std::move(st[r].output);
  return out;
}

}  // namespace compcoll::sched
