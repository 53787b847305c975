// tests/workload/test_workload.cpp — the workload model: parameter counts and FLOPs of the
// shipped models, every call of the tiny model's iteration against bytes computed by hand
// (docs/WORKLOADS.md), group sizes against the layout, the overlap rules of estimate(), and
// one-line errors naming the file and key for bad model and layout files.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "config/yaml_node.h"
#include "workload/workload.h"

using namespace compcoll;
using namespace compcoll::workload;
using sched::Collective;

namespace {

const std::string kRoot = COMPCOLL_SOURCE_DIR;

Model tiny() { return load_model(kRoot + "/models/tiny.yaml"); }

Parallel layout(const std::string& yaml, const Model& m) {
  return parse_parallel(config::Node::load_string(yaml, "layout.yaml"), m);
}

// The calls of one kind and phase, in order.
std::vector<CommCall> calls_of(const Iteration& it, const std::string& kind, Phase ph) {
  std::vector<CommCall> out;
  for (const auto& c : it.calls)
    if (c.kind == kind && c.phase == ph) out.push_back(c);
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

std::string model_yaml(const std::string& extra_or_replacement) {
  // The tiny model with keys replaced or added: "key: value" lines win over the defaults.
  std::map<std::string, std::string> kv = {{"name", "t"},   {"layers", "4"},     {"hidden", "256"},     {"heads", "4"},
                                           {"ffn", "1024"}, {"vocab", "256"},    {"seq", "128"},        {"micro_batch", "8"},
                                           {"dtype", "bf16"}};
  std::string rest;
  size_t start = 0;
  while (start < extra_or_replacement.size()) {
    size_t end = extra_or_replacement.find('\n', start);
    if (end == std::string::npos) end = extra_or_replacement.size();
    const std::string line = extra_or_replacement.substr(start, end - start);
    const auto colon = line.find(':');
    if (colon != std::string::npos) {
      const std::string k = line.substr(0, colon), v = line.substr(colon + 1);
      if (v == " DELETE") kv.erase(k);
      else kv[k] = v.substr(1);
    }
    start = end + 1;
  }
  for (const auto& [k, v] : kv) rest += k + ": " + v + "\n";
  return rest;
}

}  // namespace

TEST_CASE("parameter counts of the shipped models come out close to their names", "[workload]") {
  const ParamCount g = param_count(load_model(kRoot + "/models/gpt-13b.yaml"));
  CHECK(g.total == Approx(13e9).epsilon(0.05));
  CHECK(g.expert == 0);
  CHECK(g.active == g.total);
  // 40 x 12 h^2 + V h + s h, exactly.
  CHECK(g.total == 40.0 * 12 * 5120 * 5120 + 50304.0 * 5120 + 2048.0 * 5120);

  const Model mx = load_model(kRoot + "/models/mixtral-8x7b-like.yaml");
  const ParamCount x = param_count(mx);
  CHECK(x.total == Approx(46.7e9).epsilon(0.01));   // Mixtral 8x7B: 46.7 B
  CHECK(x.active == Approx(12.9e9).epsilon(0.01));  // 12.9 B active
  CHECK(mx.moe_layers() == 32);

  // tests/data/README.md: 6.40 M parameters (with its 4,608 norm weights, left out here).
  const ParamCount t = param_count(tiny());
  CHECK(t.total == 6391808);
  CHECK(t.total + 4608 == Approx(6.40e6).epsilon(0.001));
  CHECK(t.attention_per_layer == 4 * 256 * 256);
  CHECK(t.ffn_per_dense_layer == 2 * 256 * 1024);
  CHECK(t.experts_per_moe_layer == 4 * 2 * 256 * 1024);
  CHECK(t.router_per_moe_layer == 256 * 4);
  CHECK(t.embeddings == 256 * 256 + 128 * 256);  // tied, learned positions
  CHECK(t.expert == 2 * t.experts_per_moe_layer);
  CHECK(t.dense == 2197504);
}

TEST_CASE("FLOPs: 24bsh^2 + 4bs^2h per dense layer, 2bshV logits, MoE FFN x top_k", "[workload]") {
  const Model g = load_model(kRoot + "/models/gpt-13b.yaml");
  const double b = g.micro_batch, s = g.seq, h = g.hidden, V = g.vocab;
  const Flops f = flops(g);
  CHECK(f.forward_per_dense_layer == 24 * b * s * h * h + 4 * b * s * s * h);
  CHECK(f.logits == 2 * b * s * h * V);
  CHECK(f.forward == 40 * f.forward_per_dense_layer + f.logits);

  const Flops t = flops(tiny());
  CHECK(t.forward_per_dense_layer == 1744830464.0);
  // attention 671,088,640 + 2 experts x 1,073,741,824 + router 2 x 1024 x 256 x 4
  CHECK(t.forward_per_moe_layer == 671088640.0 + 2 * 1073741824.0 + 2097152.0);
  CHECK(t.forward == 9265217536.0);

  // Per rank: divided by tp; the last pipeline stage carries the logits; backward = 2x.
  const Model m = tiny();
  const Iteration a = build_iteration(m, layout("dp: 4\ntp: 2\nep: 2\nmicro_batches: 2\n", m));
  CHECK(a.forward_flops_per_micro_batch == 9265217536.0 / 2);
  CHECK(a.backward_flops_per_micro_batch == 2 * a.forward_flops_per_micro_batch);
  const Iteration c = build_iteration(m, layout("tp: 2\npp: 2\nsequence_parallel: true\nmicro_batches: 4\n", m));
  CHECK(c.forward_flops_per_micro_batch == (1744830464.0 + 2820669440.0 + 134217728.0) / 2);
}

TEST_CASE("tiny model, dp 4 tp 2 ep 2, ZeRO-0: every call by hand", "[workload]") {
  const Model m = tiny();
  const Iteration it = build_iteration(m, layout("gpus: 8\ndp: 4\ntp: 2\nep: 2\nmicro_batches: 2\n", m));
  const uint64_t act = 8 * 128 * 256 * 2;  // micro_batch x seq x hidden x bf16 = 524,288

  for (Phase ph : {Phase::Forward, Phase::Backward}) {
    CAPTURE(phase_name(ph));
    const auto tp = calls_of(it, "tp-allreduce", ph);
    REQUIRE(tp.size() == 1);
    CHECK(tp[0].bytes == act);
    CHECK(tp[0].bytes == 524288);
    CHECK(tp[0].collective == Collective::AllReduce);
    CHECK(tp[0].count == 2 * 4 * 2);  // 2 per layer x 4 layers x 2 micro-batches
    CHECK(tp[0].group == "tp");
    CHECK(tp[0].group_size == 2);
    CHECK(tp[0].tensor == (ph == Phase::Forward ? "act" : "actgrad"));
    CHECK_FALSE(tp[0].overlappable);
    CHECK(tp[0].every_micro_batch);

    // tokens x top_k x hidden x bf16 = 1024 x 2 x 256 x 2, per MoE layer and micro-batch.
    for (const char* kind : {"moe-dispatch", "moe-combine"}) {
      const auto a2a = calls_of(it, kind, ph);
      REQUIRE(a2a.size() == 1);
      CHECK(a2a[0].bytes == 1048576);
      CHECK(a2a[0].collective == Collective::AllToAll);
      CHECK(a2a[0].count == 2 * 2);  // 2 MoE layers (1 and 3) x 2 micro-batches
      CHECK(a2a[0].group == "ep");
      CHECK(a2a[0].group_size == 2);
    }
    CHECK(calls_of(it, "moe-dispatch", ph)[0].tensor == (ph == Phase::Forward ? "moe-dispatch" : "actgrad"));
    CHECK(calls_of(it, "moe-combine", ph)[0].tensor == (ph == Phase::Forward ? "act" : "actgrad"));
  }
  // Gradients: dense params / tp x bf16 over dp 4, experts / (tp x ep) x bf16 over the 2 dp
  // ranks that hold the same experts; once per iteration, overlapping the backward.
  CHECK(it.grad_bytes_per_rank == 2197504 + 2097152);
  const auto g = calls_of(it, "dp-grad", Phase::Backward);
  REQUIRE(g.size() == 1);
  CHECK(g[0].bytes == 2197504);
  CHECK(g[0].collective == Collective::AllReduce);
  CHECK(g[0].group_size == 4);
  CHECK(g[0].count == 1);
  CHECK(g[0].tensor == "grad");
  CHECK(g[0].overlappable);
  CHECK_FALSE(g[0].every_micro_batch);
  const auto ge = calls_of(it, "dp-grad-expert", Phase::Backward);
  REQUIRE(ge.size() == 1);
  CHECK(ge[0].bytes == 2097152);
  CHECK(ge[0].group == "edp");
  CHECK(ge[0].group_size == 2);
  // Nothing else: no pipeline, no ZeRO gathers, no step calls.
  CHECK(it.calls.size() == 2 + 4 + 2);
  CHECK(calls_of(it, "zero-param-allgather", Phase::Step).empty());
  CHECK(calls_of(it, "pp-send", Phase::Forward).empty());

  // policy::CallInfo carries the same figures.
  const policy::CallInfo info = g[0].info();
  CHECK(info.bytes == 2197504);
  CHECK(info.nranks == 4);
  CHECK(info.tensor == "grad");
  CHECK(info.dtype == DType::BF16);
}

TEST_CASE("gradient buckets: full buckets then the remainder", "[workload]") {
  const Model m = tiny();
  const Iteration it = build_iteration(m, layout("dp: 4\ntp: 2\nep: 2\nbucket: 1MiB\n", m));
  const auto g = calls_of(it, "dp-grad", Phase::Backward);
  REQUIRE(g.size() == 2);
  CHECK(g[0].bytes == 1048576);
  CHECK(g[0].count == 2);
  CHECK(g[1].bytes == 2197504 - 2 * 1048576);
  CHECK(g[1].count == 1);
  const auto ge = calls_of(it, "dp-grad-expert", Phase::Backward);  // exactly 2 buckets
  REQUIRE(ge.size() == 1);
  CHECK(ge[0].bytes == 1048576);
  CHECK(ge[0].count == 2);
}

TEST_CASE("ZeRO-1/2 reduce-scatter gradients and gather the updated parameters at the step", "[workload]") {
  const Model m = tiny();
  const Iteration z1 = build_iteration(m, layout("dp: 4\ntp: 2\nep: 2\nzero_stage: 1\nmicro_batches: 3\n", m));
  // ZeRO-1: reduce-scatter once per iteration (not every micro-batch), gather at the step.
  CHECK(calls_of(z1, "dp-grad", Phase::Backward)[0].collective == Collective::ReduceScatter);
  CHECK(calls_of(z1, "dp-grad", Phase::Backward)[0].count == 1);
  CHECK_FALSE(calls_of(z1, "dp-grad", Phase::Backward)[0].every_micro_batch);
  const auto ag = calls_of(z1, "zero-param-allgather", Phase::Step);
  REQUIRE(ag.size() == 2);
  CHECK(ag[0].bytes == 2197504);  // allgather size = the output, every rank's shard
  CHECK(ag[0].group_size == 4);
  CHECK(ag[0].tensor == "param");
  CHECK(ag[1].bytes == 2097152);
  CHECK(ag[1].group_size == 2);
  CHECK_FALSE(ag[0].overlappable);

  const Iteration z2 = build_iteration(m, layout("dp: 4\ntp: 2\nep: 2\nzero_stage: 2\nmicro_batches: 3\n", m));
  const auto rs = calls_of(z2, "dp-grad", Phase::Backward);
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].collective == Collective::ReduceScatter);
  CHECK(rs[0].count == 3);  // every micro-batch
  CHECK(rs[0].every_micro_batch);
  CHECK(calls_of(z2, "zero-param-allgather", Phase::Step).size() == 2);
}

TEST_CASE("buffers split over ranks are padded to whole elements per rank", "[workload]") {
  const Model m = tiny();
  // 2,197,504 dense elements (tp 1) over 3 ranks: padded to 3 x 732,502 for the reduce-scatter.
  const Iteration z2 = build_iteration(m, layout("dp: 3\nzero_stage: 2\n", m));
  CHECK(calls_of(z2, "dp-grad", Phase::Backward)[0].bytes == 3 * 732502 * 2);
  const Iteration z0 = build_iteration(m, layout("dp: 3\n", m));  // an allreduce needs no padding
  CHECK(calls_of(z0, "dp-grad", Phase::Backward)[0].bytes == 2197504 * 2);
}

TEST_CASE("ZeRO-3: every layer's parameters gathered in forward and backward", "[workload]") {
  const Model m = tiny();
  const Iteration it = build_iteration(m, layout("dp: 8\nep: 4\nzero_stage: 3\n", m));
  for (Phase ph : {Phase::Forward, Phase::Backward}) {
    CAPTURE(phase_name(ph));
    const auto ag = calls_of(it, "fsdp-allgather", ph);
    REQUIRE(ag.size() == 3);
    CHECK(ag[0].bytes == (256 * 256 + 128 * 256) * 2);  // embeddings
    CHECK(ag[0].count == 1);
    CHECK(ag[1].bytes == (262144 + 524288) * 2);  // dense layer: attention + FFN
    CHECK(ag[1].count == 2);
    CHECK(ag[2].bytes == (262144 + 1024) * 2);  // MoE layer without its experts: attention + router
    CHECK(ag[2].count == 2);
    for (const auto& c : ag) {
      CHECK(c.group_size == 8);
      CHECK(c.tensor == "param");
      CHECK(c.overlappable);
      CHECK(c.collective == Collective::AllGather);
    }
    const auto ex = calls_of(it, "fsdp-allgather-expert", ph);
    REQUIRE(ex.size() == 1);
    CHECK(ex[0].bytes == 2097152 / 4 * 2);  // one layer's experts / ep x bf16
    CHECK(ex[0].group_size == 2);
    CHECK(ex[0].count == 2);
  }
  const auto rs = calls_of(it, "dp-grad", Phase::Backward);
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].collective == Collective::ReduceScatter);
  CHECK(rs[0].bytes == 2197504 * 2);
  CHECK(calls_of(it, "dp-grad-expert", Phase::Backward)[0].bytes == 4194304 / 4 * 2);
  CHECK(calls_of(it, "zero-param-allgather", Phase::Step).empty());
}

TEST_CASE("sequence parallelism and pipeline sends", "[workload]") {
  const Model m = tiny();
  const Iteration it = build_iteration(m, layout("tp: 2\npp: 2\nsequence_parallel: true\nmicro_batches: 4\n", m));
  for (Phase ph : {Phase::Forward, Phase::Backward}) {
    CAPTURE(phase_name(ph));
    CHECK(calls_of(it, "tp-allreduce", ph).empty());
    for (const char* kind : {"tp-allgather", "tp-reduce-scatter"}) {
      const auto c = calls_of(it, kind, ph);
      REQUIRE(c.size() == 1);
      CHECK(c[0].bytes == 524288);  // the full [b, s, h] buffer (nccl-tests size)
      CHECK(c[0].count == 2 * 2 * 4);  // 2 per layer x 2 layers per stage x 4 micro-batches
    }
    const auto pp = calls_of(it, "pp-send", ph);
    REQUIRE(pp.size() == 1);
    CHECK(pp[0].collective == Collective::Broadcast);
    CHECK(pp[0].point_to_point);
    CHECK(pp[0].group_size == 2);
    CHECK(pp[0].bytes == 524288 / 2);  // sequence-parallel: 1/tp of the activation
    CHECK(pp[0].count == 4);
  }
  CHECK(calls_of(it, "dp-grad", Phase::Backward).empty());  // dp 1: nothing to reduce
}

TEST_CASE("shipped layouts: group sizes match the layout, bytes split evenly", "[workload]") {
  struct Case {
    const char* model;
    const char* layout;
  };
  for (const Case& c : {Case{"gpt-13b", "gpt-13b-64gpu"}, Case{"gpt-13b", "gpt-13b-64gpu-3d"},
                        Case{"mixtral-8x7b-like", "mixtral-64gpu"}}) {
    CAPTURE(c.layout);
    const Model m = load_model(kRoot + "/models/" + c.model + ".yaml");
    const Parallel p = load_parallel(kRoot + "/models/layouts/" + c.layout + ".yaml", m);
    CHECK(p.world() == 64);
    const Iteration it = build_iteration(m, p);
    const std::map<std::string, int> sizes = {{"dp", p.dp}, {"tp", p.tp}, {"pp", 2}, {"ep", p.ep}, {"edp", p.dp / p.ep}};
    REQUIRE(!it.calls.empty());
    bool has_grad = false;
    for (const auto& call : it.calls) {
      CAPTURE(call.kind);
      CHECK(call.group_size == sizes.at(call.group));
      CHECK(call.group_size > 1);
      CHECK(call.count > 0);
      CHECK(call.bytes > 0);
      uint64_t unit = dtype_size(call.dtype);
      if (call.collective != Collective::AllReduce && call.collective != Collective::Broadcast)
        unit *= static_cast<uint64_t>(call.group_size);
      CHECK(call.bytes % unit == 0);
      if (call.every_micro_batch) CHECK(call.count % p.micro_batches == 0);
      has_grad |= call.kind == "dp-grad";
    }
    CHECK(has_grad);
    // Gradient bytes per rank: all parameters / (tp x pp), experts also / ep.
    const ParamCount pc = param_count(m);
    CHECK(it.grad_bytes_per_rank ==
          Approx((pc.dense / (p.tp * p.pp) + pc.expert / (p.tp * p.pp * p.ep)) * 2).epsilon(1e-9));
  }
  const Model mx = load_model(kRoot + "/models/mixtral-8x7b-like.yaml");
  const Parallel p = load_parallel(kRoot + "/models/layouts/mixtral-64gpu.yaml", mx);
  CHECK(p.micro_batches == 256 / 32);
  const Iteration it = build_iteration(mx, p);
  // 4096 tokens / tp 2 (sequence parallel) x top-2 x 4096 x bf16, 32 MoE layers x 8 micro-batches.
  const auto d = calls_of(it, "moe-dispatch", Phase::Forward);
  REQUIRE(d.size() == 1);
  CHECK(d[0].bytes == 2048ull * 2 * 4096 * 2);
  CHECK(d[0].count == 32 * 8);
}

TEST_CASE("estimate: pipeline slots, blocking calls, gradients hidden behind the last backward", "[workload]") {
  const Model m = tiny();
  const Iteration it = build_iteration(m, layout("dp: 4\ntp: 2\nep: 2\nmicro_batches: 2\n", m));
  const Device dev{it.forward_flops_per_micro_batch * 2, 0.5};  // forward 1 s, backward 2 s
  const std::map<std::string, double> secs = {{"tp-allreduce", 0.01}, {"moe-dispatch", 0.02}, {"moe-combine", 0.02},
                                              {"dp-grad", 3.0},        {"dp-grad-expert", 0.3}};
  const Estimate e = estimate(it, dev, [&](const CommCall& c) { return secs.at(c.kind); });
  // Per micro-batch: forward 1 + (16 x 0.01 + 8 x 0.02) / 2, backward 2 + the same; 2 of each.
  // Gradients 3.3 s behind a 2 s backward: 1.3 s exposed.
  CHECK(e.compute_s == Approx(6.0));
  CHECK(e.iteration_s == Approx(2 * (1.16 + 2.16) + 1.3));
  CHECK(e.exposed_comm_s == Approx(e.iteration_s - 6.0));
  CHECK(e.comm_s == Approx(32 * 0.01 + 16 * 0.02 + 3.3));
  CHECK(e.comm_by_kind.at("tp-allreduce") == Approx(0.32));
  CHECK(e.comm_by_kind.at("dp-grad") == Approx(3.0));
  CHECK(e.exposed_by_kind.at("tp-allreduce") == Approx(0.32));
  // dp-grad free: the 0.3 s expert gradients are the last call, never hidden: 1.3 - 0.3 saved.
  CHECK(e.exposed_by_kind.at("dp-grad") == Approx(1.0));

  // Small gradients hide, except the last bucket, which no compute follows.
  const std::map<std::string, double> small = {{"tp-allreduce", 0}, {"moe-dispatch", 0}, {"moe-combine", 0},
                                               {"dp-grad", 0.5},    {"dp-grad-expert", 0.3}};
  const Estimate s = estimate(it, dev, [&](const CommCall& c) { return small.at(c.kind); });
  CHECK(s.iteration_s == Approx(6.0 + 0.3));

  // Pipeline: (m + pp - 1) slots.
  const Iteration pp = build_iteration(m, layout("pp: 2\nmicro_batches: 4\n", m));
  const Device dev2{pp.forward_flops_per_micro_batch, 1.0};  // forward 1 s
  const Estimate pe = estimate(pp, dev2, [](const CommCall&) { return 0.1; });
  CHECK(pe.compute_s == Approx((4 + 1) * 3.0));
  CHECK(pe.iteration_s == Approx((4 + 1) * (3.0 + 0.1 + 0.1)));
  CHECK_THROWS_AS(estimate(pp, Device{0, 0.5}, [](const CommCall&) { return 0.0; }), std::invalid_argument);
}

TEST_CASE("bad model files: one line naming the file and the key", "[workload]") {
  auto model_error = [](const std::string& edits) {
    return error_of([&] { parse_model(config::Node::load_string(model_yaml(edits), "bad-model.yaml")); });
  };
  CHECK(model_error("") == "(no ConfigError)");  // the base model is fine
  CHECK(model_error("hidden: DELETE") == "bad-model.yaml: (top level): missing key 'hidden'");
  CHECK(model_error("layers: six") == "bad-model.yaml: layers: expected an integer, got 'six'");
  CHECK(model_error("layers: 0").rfind("bad-model.yaml: layers: expected an integer in [1, ", 0) == 0);
  CHECK(model_error("hiden: 256") == "bad-model.yaml: (top level): unknown key 'hiden'");
  CHECK(model_error("dtype: int8") == "bad-model.yaml: dtype: expected one of bf16, fp16, fp32, got 'int8'");
  CHECK(model_error("heads: 3") == "bad-model.yaml: heads: the 3 heads do not divide hidden 256");
  CHECK(model_error("kv_heads: 3") == "bad-model.yaml: kv_heads: kv_heads 3 does not divide the 4 heads");
  CHECK(model_error("top_k: 2") == "bad-model.yaml: top_k: top_k needs experts > 0");
  CHECK(model_error("experts: 4\ntop_k: 5") == "bad-model.yaml: top_k: expected top_k in [1, 4] for 4 experts");
  CHECK(model_error("experts: 4") == "bad-model.yaml: top_k: expected top_k in [1, 4] for 4 experts");
  CHECK(model_error("experts: 4\ntop_k: 1\nmoe_every: 5") == "bad-model.yaml: moe_every: moe_every exceeds the 4 layers");
  CHECK(model_error("gated_ffn: maybe") == "bad-model.yaml: gated_ffn: expected true or false, got 'maybe'");

  const std::string missing = error_of([] { load_model("/nonexistent/model.yaml"); });
  CHECK(missing == "/nonexistent/model.yaml: cannot open the file");
}

TEST_CASE("bad layouts: one line naming the file and the key", "[workload]") {
  const Model m = tiny();
  auto layout_error = [&](const std::string& yaml) { return error_of([&] { layout(yaml, m); }); };
  CHECK(layout_error("dp: 4\n") == "(no ConfigError)");
  CHECK(layout_error("tp: 3\n") == "layout.yaml: tp: tp 3 does not divide the 4 heads of model tiny");
  CHECK(layout_error("pp: 3\n") == "layout.yaml: pp: pp 3 does not divide the 4 layers of model tiny");
  CHECK(layout_error("dp: 6\nep: 3\n") == "layout.yaml: ep: ep 3 does not divide the 4 experts of model tiny");
  CHECK(layout_error("dp: 2\nep: 4\n").rfind("layout.yaml: ep: ep 4 does not divide dp 2", 0) == 0);
  CHECK(layout_error("dp: 4\ntp: 2\ngpus: 16\n") == "layout.yaml: gpus: dp x tp x pp = 4 x 2 x 1 = 8, not 16");
  CHECK(layout_error("dp: 4\nglobal_batch: 40\n") ==
        "layout.yaml: global_batch: global batch 40 is not a multiple of micro_batch x dp = 32");
  CHECK(layout_error("micro_batches: 2\nglobal_batch: 64\n") ==
        "layout.yaml: global_batch: give micro_batches or global_batch, not both");
  CHECK(layout_error("zero_stage: 4\n") == "layout.yaml: zero_stage: expected an integer in [0, 3], got 4");
  CHECK(layout_error("pp: 2\nzero_stage: 3\n").rfind("layout.yaml: zero_stage: ZeRO stage 3 with pp > 1", 0) == 0);
  CHECK(layout_error("sequence_parallel: true\n") == "layout.yaml: sequence_parallel: needs tp > 1");
  CHECK(layout_error("tensor: 2\n") == "layout.yaml: (top level): unknown key 'tensor'");
  CHECK(layout_error("bucket: 25QB\n").rfind("layout.yaml: bucket: expected a size like", 0) == 0);
  for (const std::string& y : {"tp: 3\n", "gpus: 2\n", "zero_stage: x\n"})
    CHECK(layout_error(y).find('\n') == std::string::npos);

  const Model dense = load_model(kRoot + "/models/gpt-13b.yaml");
  CHECK(error_of([&] { layout("ep: 2\ndp: 2\n", dense); }) ==
        "layout.yaml: ep: ep 2 needs a model with experts; model gpt-13b has none");
  // The same checks without a file, for layouts built in code.
  Parallel p;
  p.tp = 3;
  CHECK_THROWS_AS(build_iteration(m, p), std::invalid_argument);

  CHECK(error_of([] { parse_device(config::Node::load_string("peak_flops: 989e12\nefficiency: 1.5\n", "dev.yaml")); }) ==
        "dev.yaml: efficiency: expected a fraction in (0, 1]");
  const Device dev = parse_device(config::Node::load_string("peak_flops: 989e12\nefficiency: 0.5\n", "dev.yaml"));
  CHECK(dev.seconds(989e12) == Approx(2.0));
}
