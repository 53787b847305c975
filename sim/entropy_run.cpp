// sim/entropy_run.cpp — see entropy_run.h.
#include "sim/entropy_run.h"

#include <algorithm>
#include <cmath>

#include "codec/lowrank.h"
#include "config/yaml_node.h"
#include "io/float_convert.h"
#include "io/tensor_file.h"

namespace compcoll::sim {

namespace {

// The step's compression error: ||M - update|| / ||M||, where M = gradient + the residual the
// earlier steps carried (what the step had to send) and M - update is the residual it leaves.
// In [0, 1] for the orthogonal projection lowrank makes; 0 for a zero M.
double relative_error(const lowrank::LowRankState& state, const std::vector<float>& update) {
  double left = 0, total = 0;
  for (size_t i = 0; i < update.size(); ++i) {
    const double r = state.residual[i], m = r + update[i];
    left += r * r;
    total += m * m;
  }
  return total > 0 ? std::sqrt(left / total) : 0.0;
}

}  // namespace

uint32_t EntropyReplay::trace_rank(uint32_t r) const {
  return static_cast<uint32_t>(std::min<uint64_t>({r, rows, cols}));
}

EntropyReplay replay_entropy(const config::EntropyRunSpec& spec, const std::string& experiment_file,
                             const std::vector<int>& fixed_ranks) {
  auto fail = [&](const std::string& what) {
    throw config::ConfigError(experiment_file + ": workload.entropy.trace: " + what);
  };
  std::vector<TensorData> tensors;
  try {
    tensors = load_tensors(spec.trace, DType::BF16);
  } catch (const TensorFileError& e) {
    fail(e.what());
  }
  const TensorData& t = tensors.front();
  if (t.shape.size() != 3 || t.shape[0] == 0 || t.shape[1] == 0 || t.shape[2] == 0)
    fail(spec.trace + ": expected a .npy of shape (steps, rows, cols), got " + std::to_string(t.shape.size()) +
         " dimension(s)");

  EntropyReplay out;
  out.trace = spec.trace;
  out.config = spec.config;
  out.steps = t.shape[0];
  out.rows = t.shape[1];
  out.cols = t.shape[2];
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
    const uint8_t* bytes = t.bytes.data() + s * n * dtype_size(t.dtype);
    for (uint64_t i = 0; i < n; ++i) grad[i] = load_as_float(t.dtype, bytes, i);
    for (float g : grad)
      if (!std::isfinite(g)) fail(spec.trace + ": step " + std::to_string(s) + " holds a NaN or infinite value");
    if (const auto b = controller.observe(s, t.dtype, bytes, n)) out.bits[s] = *b;
    out.rank[s] = controller.rank_for(s);
    if (out.rank[s] > 0) {
      const uint32_t r = out.trace_rank(out.rank[s]);
      if (!state) state = lowrank::make_state(out.rows, out.cols, r, spec.config.seed);
      else if (state->rank != r) lowrank::set_rank(*state, r);
      lowrank::compress_step(*state, DType::FP32, grad.data(), update.data());
      out.error[s] = relative_error(*state, update);
    }
    if (s >= spec.config.warmup_steps)
      for (auto& [r, err] : out.fixed_error) {
        auto it = fixed.find(r);
        if (it == fixed.end()) it = fixed.emplace(r, lowrank::make_state(out.rows, out.cols, out.trace_rank(r), spec.config.seed)).first;
        lowrank::compress_step(it->second, DType::FP32, grad.data(), update.data());
        err[s] = relative_error(it->second, update);
      }
  }
  return out;
}

}  // namespace compcoll::sim
