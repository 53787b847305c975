// sim/entropy_run.cpp — see entropy_run.h.
#include "sim/entropy_run.h"

#include <algorithm>
#include <cmath>

#include "codec/lowrank.h"
#include "config/yaml_node.h"
#include "io/float_convert.h"
#include "io/tensor_file.h"

namespace compcoll::sim {

uint32_t EntropyReplay::trace_rank(uint32_t r) const {
  return static_cast<uint32_t>(std::min<uint64_t>({r, rows, cols}));
}

EntropyReplay replay_entropy(const study::EntropyRunSpec& spec, const std::string& experiment_file,
                             const std::vector<int>& fixed_ranks) {
  auto fail = [&](const std::string& what) {
    throw config::ConfigError(experiment_file + ": workload.entropy.trace: " + what);
  };
  GradientTrace t;
  try {
    t = load_gradient_trace(spec.trace);
  } catch (const TensorFileError& e) {
    fail(e.what());
  }

  EntropyReplay out;
  out.trace = spec.trace;
  out.config = spec.config;
  out.steps = t.steps;
  out.rows = t.rows;
  out.cols = t.cols;
  const uint64_t n = out.rows * out.cols;
  policy::EntropyController controller(spec.config);
  out.rank.assign(out.steps, 0);
  out.bits.assign(out.steps, NAN);
  out.error.assign(out.steps, 0.0);

  // The compressor at the controller's ranks, and at each fixed rank, on the trace's matrix;
  // every one starts at the end of warm-up (uncompressed steps carry no residual).
  std::optional<lowrank::LowRankState> state;
  std::map<uint32_t, lowrank::LowRankState> fixed;
  for (int r : fixed_ranks) out.fixed_error[static_cast<uint32_t>(r)].assign(out.steps, 0.0);
  std::vector<float> grad(n), update(n);
  for (uint64_t s = 0; s < out.steps; ++s) {
    const uint8_t* bytes = t.step_bytes(s);
    for (uint64_t i = 0; i < n; ++i) grad[i] = load_as_float(t.data.dtype, bytes, i);
    if (const auto b = controller.observe(s, t.data.dtype, bytes, n)) out.bits[s] = *b;
    out.rank[s] = controller.rank_for(s);
    if (out.rank[s] > 0) {
      const uint32_t r = out.trace_rank(out.rank[s]);
      if (!state) state = lowrank::make_state(out.rows, out.cols, r, spec.config.seed);
      else if (state->rank != r) lowrank::set_rank(*state, r);
      lowrank::compress_step(*state, DType::FP32, grad.data(), update.data());
      out.error[s] = lowrank::step_error(*state, update.data());
    }
    if (s >= spec.config.warmup_steps)
      for (auto& [r, err] : out.fixed_error) {
        auto it = fixed.find(r);
        if (it == fixed.end()) it = fixed.emplace(r, lowrank::make_state(out.rows, out.cols, out.trace_rank(r), spec.config.seed)).first;
        lowrank::compress_step(it->second, DType::FP32, grad.data(), update.data());
        err[s] = lowrank::step_error(it->second, update.data());
      }
  }
  return out;
}

}  // namespace compcoll::sim
