// shared/workload/workload.cpp — see workload.h; the formulas are in docs/WORKLOADS.md.
#include "workload/workload.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace compcoll::workload {
namespace {

using sched::Collective;

double d(int v) { return static_cast<double>(v); }

// Whole elements, padded up to a multiple of the group for the collectives that split the
// buffer over ranks (frameworks pad their flat buffers the same way).
uint64_t call_bytes(double bytes, DType dtype, Collective c, int group) {
  const uint64_t es = dtype_size(dtype);
  uint64_t elems = static_cast<uint64_t>(std::ceil(bytes / static_cast<double>(es) - 1e-9));
  if (c != Collective::AllReduce && c != Collective::Broadcast && group > 1) {
    const uint64_t g = static_cast<uint64_t>(group);
    elems = (elems + g - 1) / g * g;
  }
  return elems * es;
}

// The first problem of a layout for a model, and the layout key it concerns ("" when none).
std::pair<std::string, std::string> layout_problem(const Model& m, const Parallel& p) {
  auto positive = [](int v) { return v >= 1; };
  if (!positive(p.dp)) return {"dp", "expected a positive integer"};
  if (!positive(p.tp)) return {"tp", "expected a positive integer"};
  if (!positive(p.pp)) return {"pp", "expected a positive integer"};
  if (!positive(p.ep)) return {"ep", "expected a positive integer"};
  if (!positive(p.micro_batches)) return {"micro_batches", "expected a positive integer"};
  if (p.zero_stage < 0 || p.zero_stage > 3) return {"zero_stage", "expected 0, 1, 2 or 3"};
  if (p.bucket_bytes == 0) return {"bucket", "expected a positive size"};
  const std::string ms = " of model " + m.name;
  if (m.heads % p.tp != 0)
    return {"tp", "tp " + std::to_string(p.tp) + " does not divide the " + std::to_string(m.heads) + " heads" + ms};
  if (m.kv_heads % p.tp != 0)
    return {"tp", "tp " + std::to_string(p.tp) + " does not divide the " + std::to_string(m.kv_heads) + " kv_heads" + ms};
  if (m.ffn % p.tp != 0)
    return {"tp", "tp " + std::to_string(p.tp) + " does not divide ffn " + std::to_string(m.ffn) + ms};
  if (m.layers % p.pp != 0)
    return {"pp", "pp " + std::to_string(p.pp) + " does not divide the " + std::to_string(m.layers) + " layers" + ms};
  if (p.ep > 1 && m.experts == 0) return {"ep", "ep " + std::to_string(p.ep) + " needs a model with experts; model " + m.name + " has none"};
  if (m.experts > 0 && m.experts % p.ep != 0)
    return {"ep", "ep " + std::to_string(p.ep) + " does not divide the " + std::to_string(m.experts) + " experts" + ms};
  if (p.dp % p.ep != 0)
    return {"ep", "ep " + std::to_string(p.ep) + " does not divide dp " + std::to_string(p.dp) +
                      " (expert parallel ranks are taken from the data-parallel group)"};
  if (p.sequence_parallel && p.tp == 1) return {"sequence_parallel", "needs tp > 1"};
  if (p.sequence_parallel && (static_cast<int64_t>(m.seq) * m.micro_batch) % p.tp != 0)
    return {"sequence_parallel", "tp " + std::to_string(p.tp) + " does not divide micro_batch x seq of model " + m.name};
  if (p.zero_stage >= 2 && p.pp > 1)
    return {"zero_stage", "ZeRO stage " + std::to_string(p.zero_stage) +
                              " with pp > 1 is not modelled (DeepSpeed and FSDP shard gradients per micro-batch; use stage 0 or 1)"};
  return {"", ""};
}

}  // namespace

std::string_view phase_name(Phase p) {
  switch (p) {
    case Phase::Forward: return "fwd";
    case Phase::Backward: return "bwd";
    case Phase::Step: return "step";
  }
  return "?";
}

ParamCount param_count(const Model& m) {
  ParamCount c;
  const double h = d(m.hidden), kv = d(m.hidden) * m.kv_heads / m.heads, mats = m.gated_ffn ? 3 : 2;
  c.attention_per_layer = h * (h + 2 * kv) + h * h;
  c.ffn_per_dense_layer = mats * h * d(m.ffn);
  c.experts_per_moe_layer = d(m.experts) * c.ffn_per_dense_layer;
  c.router_per_moe_layer = h * d(m.experts);
  c.embeddings = d(m.vocab) * h * (m.tied_embeddings ? 1 : 2) + (m.learned_positions ? d(m.seq) * h : 0);
  const int moe = m.moe_layers(), dense = m.layers - moe;
  c.expert = moe * c.experts_per_moe_layer;
  c.dense = m.layers * c.attention_per_layer + dense * c.ffn_per_dense_layer + moe * c.router_per_moe_layer + c.embeddings;
  c.total = c.dense + c.expert;
  c.active = c.dense + moe * d(m.top_k) * c.ffn_per_dense_layer;
  return c;
}

Flops flops(const Model& m) {
  Flops f;
  const double b = d(m.micro_batch), s = d(m.seq), h = d(m.hidden), kv = h * m.kv_heads / m.heads;
  const double mats = m.gated_ffn ? 3 : 2;
  // q,k,v and output projections, scores and scores x V, each a multiply-add (2 FLOPs).
  const double attention = 2 * b * s * h * (2 * h + 2 * kv) + 4 * b * s * s * h;
  const double ffn = 2 * b * s * h * d(m.ffn) * mats;
  f.forward_per_dense_layer = attention + ffn;
  f.forward_per_moe_layer = attention + ffn * m.top_k + 2 * b * s * h * m.experts;  // + router
  f.logits = 2 * b * s * h * d(m.vocab);
  const int moe = m.moe_layers();
  f.forward = (m.layers - moe) * f.forward_per_dense_layer + moe * f.forward_per_moe_layer + f.logits;
  return f;
}

Iteration build_iteration(const Model& m, const Parallel& p) {
  if (const auto [key, what] = layout_problem(m, p); !key.empty()) throw std::invalid_argument(key + ": " + what);
  Iteration it;
  it.model = m;
  it.parallel = p;
  it.params = param_count(m);
  const DType dt = m.dtype;
  const double es = static_cast<double>(dtype_size(dt));
  const int mb = p.micro_batches, edp = p.dp / p.ep;

  // One rank of the last stage: layers [L - L/pp, L) and the logits.
  const int first = m.layers - m.layers / p.pp;
  int stage_dense = 0, stage_moe = 0;
  for (int l = first; l < m.layers; ++l) (m.is_moe_layer(l) ? stage_moe : stage_dense)++;
  const int stage_layers = stage_dense + stage_moe;
  const Flops f = flops(m);
  it.forward_flops_per_micro_batch =
      (stage_dense * f.forward_per_dense_layer + stage_moe * f.forward_per_moe_layer + f.logits) / p.tp;
  it.backward_flops_per_micro_batch = 2 * it.forward_flops_per_micro_batch;

  // Parameters one rank holds (the average over stages).
  const double dense_bytes = it.params.dense / (p.tp * p.pp) * es;
  const double expert_bytes = it.params.expert / (d(p.tp) * p.pp * p.ep) * es;
  it.grad_bytes_per_rank = static_cast<uint64_t>(std::llround(dense_bytes + expert_bytes));

  auto add = [&](std::string kind, Collective c, double bytes, std::string tensor, std::string group, int gsize,
                 Phase ph, int count, bool every_mb, bool overlappable, bool p2p = false) {
    if (count <= 0 || bytes <= 0) return;
    CommCall call;
    call.kind = std::move(kind);
    call.collective = c;
    call.bytes = call_bytes(bytes, dt, c, gsize);
    call.dtype = dt;
    call.tensor = std::move(tensor);
    call.group = std::move(group);
    call.group_size = gsize;
    call.phase = ph;
    call.count = count;
    call.every_micro_batch = every_mb;
    call.overlappable = overlappable;
    call.point_to_point = p2p;
    it.calls.push_back(std::move(call));
  };
  // `total` bytes in buckets: full buckets, then the remainder.
  auto add_buckets = [&](const std::string& kind, Collective c, double total, const std::string& tensor,
                         const std::string& group, int gsize, Phase ph, int times, bool every_mb, bool overlappable) {
    if (gsize <= 1 || total <= 0) return;
    const double bucket = static_cast<double>(p.bucket_bytes);
    const int full = static_cast<int>(std::floor(total / bucket + 1e-12));
    const double rest = total - full * bucket;
    add(kind, c, bucket, tensor, group, gsize, ph, full * times, every_mb, overlappable);
    if (rest > 0.5) add(kind, c, rest, tensor, group, gsize, ph, times, every_mb, overlappable);
  };

  const double tokens = d(m.micro_batch) * m.seq;
  const double act = tokens * m.hidden * es;               // one [b, s, h] activation
  const double act_sp = p.sequence_parallel ? act / p.tp : act;
  const double layer_dense = (it.params.attention_per_layer) / p.tp * es;
  const double ffn_dense = it.params.ffn_per_dense_layer / p.tp * es;
  const double moe_router = it.params.router_per_moe_layer / p.tp * es;
  const double moe_experts = it.params.experts_per_moe_layer / (d(p.tp) * p.ep) * es;
  const double a2a = tokens / (p.sequence_parallel ? p.tp : 1) * m.top_k * m.capacity_factor * m.hidden * es;

  for (Phase ph : {Phase::Forward, Phase::Backward}) {
    const bool fwd = ph == Phase::Forward;
    const std::string act_kind = fwd ? "act" : "actgrad";
    // ZeRO-3 / FSDP: every layer's parameters gathered before its forward and its backward,
    // prefetched (overlapped with the previous layer's compute).
    if (p.zero_stage == 3 && p.dp > 1) {
      add("fsdp-allgather", Collective::AllGather, it.params.embeddings / (p.tp * p.pp) * es, "param", "dp", p.dp, ph, mb,
          true, true);
      add("fsdp-allgather", Collective::AllGather, layer_dense + ffn_dense, "param", "dp", p.dp, ph, stage_dense * mb,
          true, true);
      add("fsdp-allgather", Collective::AllGather, layer_dense + moe_router, "param", "dp", p.dp, ph, stage_moe * mb,
          true, true);
      if (edp > 1)
        add("fsdp-allgather-expert", Collective::AllGather, moe_experts, "param", "edp", edp, ph, stage_moe * mb, true,
            true);
    }
    // Tensor parallelism: after attention and after the MLP (Megatron-LM), or with sequence
    // parallelism an allgather before and a reduce-scatter after each.
    if (p.tp > 1) {
      if (!p.sequence_parallel) {
        add("tp-allreduce", Collective::AllReduce, act, act_kind, "tp", p.tp, ph, 2 * stage_layers * mb, true, false);
      } else {
        add("tp-allgather", Collective::AllGather, act, act_kind, "tp", p.tp, ph, 2 * stage_layers * mb, true, false);
        add("tp-reduce-scatter", Collective::ReduceScatter, act, act_kind, "tp", p.tp, ph, 2 * stage_layers * mb, true,
            false);
      }
    }
    // MoE: tokens to their experts' ranks and back, per MoE layer (gradients in backward).
    if (p.ep > 1) {
      add("moe-dispatch", Collective::AllToAll, a2a, fwd ? "moe-dispatch" : "actgrad", "ep", p.ep, ph, stage_moe * mb,
          true, false);
      add("moe-combine", Collective::AllToAll, a2a, fwd ? "act" : "actgrad", "ep", p.ep, ph, stage_moe * mb, true, false);
    }
    // Pipeline: a middle stage sends its output forward and its input gradient backward.
    if (p.pp > 1) add("pp-send", Collective::Broadcast, act_sp, act_kind, "pp", 2, ph, mb, true, false, true);
  }

  // Gradients, in buckets overlapped with backward: ZeRO 0 allreduces once per iteration (DDP
  // skips the sync on accumulation steps); ZeRO 1 reduce-scatters once (each rank updates its
  // shard: the ZeRO paper's and Megatron's distributed optimizer's 2x volume with the gather
  // below); ZeRO 2/3 reduce-scatter every micro-batch (the whole gradient is never kept).
  const bool every_mb = p.zero_stage >= 2;
  const Collective gc = p.zero_stage == 0 ? Collective::AllReduce : Collective::ReduceScatter;
  const int gtimes = every_mb ? mb : 1;
  add_buckets("dp-grad", gc, dense_bytes, "grad", "dp", p.dp, Phase::Backward, gtimes, every_mb, true);
  add_buckets("dp-grad-expert", gc, expert_bytes, "grad", "edp", edp, Phase::Backward, gtimes, every_mb, true);
  // ZeRO 1/2: each rank updates its shard, then the updated parameters are gathered.
  if (p.zero_stage == 1 || p.zero_stage == 2) {
    add_buckets("zero-param-allgather", Collective::AllGather, dense_bytes, "param", "dp", p.dp, Phase::Step, 1, false,
                false);
    add_buckets("zero-param-allgather", Collective::AllGather, expert_bytes, "param", "edp", edp, Phase::Step, 1, false,
                false);
  }
  return it;
}

namespace {

// Calls that may hide behind `window` seconds of compute: all but the last call of the set.
double exposed_overlap(double total, double one_call, double window) {
  if (total <= 0) return 0;
  return std::max(one_call, total - window);
}

double iteration_time(const Iteration& it, const Device& dev, const std::function<double(const CommCall&)>& t,
                      const std::string& free_kind, bool all_free) {
  const int m = it.parallel.micro_batches, pp = it.parallel.pp;
  const double tf = dev.seconds(it.forward_flops_per_micro_batch), tb = dev.seconds(it.backward_flops_per_micro_batch);
  double block[2] = {0, 0}, ovl[2] = {0, 0}, ovl_one[2] = {0, 0};
  double once_ovl = 0, once_one = 0, once_block = 0, step = 0;
  for (const CommCall& c : it.calls) {
    const double s = (all_free || c.kind == free_kind) ? 0.0 : t(c);
    if (c.phase == Phase::Step) {
      step += s * c.count;
      continue;
    }
    const int i = c.phase == Phase::Forward ? 0 : 1;
    if (c.every_micro_batch) {
      const double per_mb = s * c.count / m;
      if (c.overlappable) {
        ovl[i] += per_mb;
        ovl_one[i] = s;
      } else {
        block[i] += per_mb;
      }
    } else if (c.overlappable) {
      once_ovl += s * c.count;
      once_one = s;
    } else {
      once_block += s * c.count;
    }
  }
  const double mb_fwd = tf + block[0] + exposed_overlap(ovl[0], ovl_one[0], tf);
  const double mb_bwd = tb + block[1] + exposed_overlap(ovl[1], ovl_one[1], tb);
  // 1F1B: (m + pp - 1) micro-batch slots of forward + backward; the gradients sent once per
  // iteration hide behind the last micro-batch's backward.
  return (m + pp - 1) * (mb_fwd + mb_bwd) + exposed_overlap(once_ovl, once_one, tb) + once_block + step;
}

}  // namespace

Estimate estimate(const Iteration& it, const Device& dev, const std::function<double(const CommCall&)>& call_seconds) {
  if (!(dev.peak_flops > 0) || !(dev.efficiency > 0)) throw std::invalid_argument("device: peak_flops and efficiency must be positive");
  Estimate e;
  std::map<const CommCall*, double> cache;
  auto t = [&](const CommCall& c) {
    auto [pos, fresh] = cache.try_emplace(&c, 0.0);
    if (fresh) pos->second = call_seconds(c);
    return pos->second;
  };
  e.iteration_s = iteration_time(it, dev, t, "", false);
  e.compute_s = iteration_time(it, dev, t, "", true);
  e.exposed_comm_s = e.iteration_s - e.compute_s;
  for (const CommCall& c : it.calls) {
    e.comm_s += t(c) * c.count;
    e.comm_by_kind[c.kind] += t(c) * c.count;
  }
  for (const auto& [kind, total] : e.comm_by_kind) e.exposed_by_kind[kind] = e.iteration_s - iteration_time(it, dev, t, kind, false);
  return e;
}

// --- files -----------------------------------------------------------------------------------

Model parse_model(const config::Node& n) {
  Model m;
  m.name = n.get("name").as_string();
  n.get_string("description", "");
  auto pos_int = [&](const char* key) { return static_cast<int>(n.get(key).as_int(1, 1 << 30)); };
  m.layers = pos_int("layers");
  m.hidden = pos_int("hidden");
  m.heads = pos_int("heads");
  m.kv_heads = static_cast<int>(n.get_int("kv_heads", m.heads, 1, 1 << 30));
  m.ffn = pos_int("ffn");
  m.vocab = pos_int("vocab");
  m.seq = pos_int("seq");
  m.micro_batch = pos_int("micro_batch");
  auto flag = [&](const char* key, bool dflt) {
    const config::Node x = n.opt(key);
    return x.defined() ? x.as_bool() : dflt;
  };
  m.gated_ffn = flag("gated_ffn", false);
  m.tied_embeddings = flag("tied_embeddings", true);
  m.learned_positions = flag("learned_positions", false);
  m.experts = static_cast<int>(n.get_int("experts", 0, 0, 1 << 20));
  m.top_k = static_cast<int>(n.get_int("top_k", 0, 0, 1 << 20));
  m.moe_every = static_cast<int>(n.get_int("moe_every", 1, 1, 1 << 30));
  m.capacity_factor = n.get_double("capacity_factor", 1.0);
  const config::Node dt = n.get("dtype");
  m.dtype = *parse_dtype(dt.as_choice({"bf16", "fp16", "fp32"}));
  n.check_no_unknown_keys();

  if (m.hidden % m.heads != 0)
    n.get("heads").fail("the " + std::to_string(m.heads) + " heads do not divide hidden " + std::to_string(m.hidden));
  if (m.heads % m.kv_heads != 0)
    n.get("kv_heads").fail("kv_heads " + std::to_string(m.kv_heads) + " does not divide the " + std::to_string(m.heads) + " heads");
  if (m.experts == 0) {
    if (m.top_k != 0) n.get("top_k").fail("top_k needs experts > 0");
    if (n.has("moe_every")) n.get("moe_every").fail("moe_every needs experts > 0");
    if (n.has("capacity_factor")) n.get("capacity_factor").fail("capacity_factor needs experts > 0");
  } else {
    if (m.experts < 2) n.get("experts").fail("expected 0 (dense) or at least 2 experts");
    if (m.top_k < 1 || m.top_k > m.experts)
      n.opt("top_k").fail("expected top_k in [1, " + std::to_string(m.experts) + "] for " + std::to_string(m.experts) + " experts");
    if (m.moe_every > m.layers) n.get("moe_every").fail("moe_every exceeds the " + std::to_string(m.layers) + " layers");
    if (!(m.capacity_factor > 0)) n.get("capacity_factor").fail("expected a positive number");
  }
  return m;
}

Model load_model(const std::string& path) { return parse_model(config::Node::load_file(path)); }

Parallel parse_parallel(const config::Node& n, const Model& m) {
  Parallel p;
  auto deg = [&](const char* key) { return static_cast<int>(n.get_int(key, 1, 1, 1 << 24)); };
  p.dp = deg("dp");
  p.tp = deg("tp");
  p.pp = deg("pp");
  p.ep = deg("ep");
  p.zero_stage = static_cast<int>(n.get_int("zero_stage", 0, 0, 3));
  const config::Node sp = n.opt("sequence_parallel");
  p.sequence_parallel = sp.defined() && sp.as_bool();
  const config::Node bucket = n.opt("bucket");
  if (bucket.defined()) {
    p.bucket_bytes = bucket.as_bytes();
    if (p.bucket_bytes < 1024) bucket.fail("expected a bucket of at least 1KiB");
  }
  const config::Node mbs = n.opt("micro_batches"), gb = n.opt("global_batch");
  if (mbs.defined() && gb.defined()) gb.fail("give micro_batches or global_batch, not both");
  if (mbs.defined()) p.micro_batches = static_cast<int>(mbs.as_int(1, 1 << 24));
  if (gb.defined()) {
    const int64_t g = gb.as_int(1, INT64_C(1) << 40), per = static_cast<int64_t>(m.micro_batch) * p.dp;
    if (g % per != 0)
      gb.fail("global batch " + std::to_string(g) + " is not a multiple of micro_batch x dp = " + std::to_string(per));
    p.micro_batches = static_cast<int>(g / per);
  }
  const config::Node gpus = n.opt("gpus");
  if (gpus.defined() && gpus.as_int(1, INT64_C(1) << 30) != p.world())
    gpus.fail("dp x tp x pp = " + std::to_string(p.dp) + " x " + std::to_string(p.tp) + " x " + std::to_string(p.pp) +
              " = " + std::to_string(p.world()) + ", not " + gpus.as_string());
  n.check_no_unknown_keys();
  if (const auto [key, what] = layout_problem(m, p); !key.empty()) n.opt(key).fail(what);
  return p;
}

Parallel load_parallel(const std::string& path, const Model& m) {
  return parse_parallel(config::Node::load_file(path), m);
}

Device parse_device(const config::Node& n) {
  Device dev;
  const config::Node peak = n.get("peak_flops"), eff = n.get("efficiency");
  dev.peak_flops = peak.as_double();
  if (!(dev.peak_flops > 0)) peak.fail("expected a positive number of FLOP/s, like 989e12");
  dev.efficiency = eff.as_double();
  if (!(dev.efficiency > 0 && dev.efficiency <= 1)) eff.fail("expected a fraction in (0, 1]");
  n.check_no_unknown_keys();
  return dev;
}

}  // namespace compcoll::workload
