// shared/codec/lowrank.h — the `lowrank` gradient compressor (PowerSGD-style, EDGC's knob): a
// gradient matrix M (rows x cols, row-major) is sent as two thin factors P (rows x r) and
// Q (cols x r) with M ≈ P Qᵀ, one power iteration per step from a warm-started Q, with error
// feedback. Host reference; the CUDA twin is codec/cuda/lowrank_cuda.h (bit-identical, same
// arithmetic in lowrank_bits.h). docs/LOWRANK.md gives the protocol and its bytes.
//
// The steps are exposed so an executor can allreduce between them (data parallel, n ranks):
//
//   begin(state, dtype, grad)         M = grad + residual            (local, fp32)
//   compute_p(state, P)               P = M Q                        (local)
//     -- allreduce(P, sum) --         rows x r fp32
//   orthonormalize(P, rows, r)        P̂ = Gram-Schmidt(P)            (same bits on every rank)
//   compute_q(state, P̂, Q)            Q = Mᵀ P̂                       (local)
//     -- allreduce(Q, sum) --         cols x r fp32
//   finish(state, P̂, Q, n, out)       out = P̂ (Q/n)ᵀ (the mean update, same on every rank);
//                                     residual = M − out; warm start ← Q/n
//
// compress_step() runs them all for one rank (no allreduce). What the file must never do: talk
// to a transport, or keep state of its own — the caller owns one LowRankState per tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "util/dtype.h"

namespace compcoll::lowrank {

// Per tensor, kept by the caller between steps.
struct LowRankState {
  uint64_t rows = 0, cols = 0;
  uint32_t rank = 0;
  uint64_t seed = 0;            // warm-start values (identical on every rank that shares it)
  uint64_t step = 0;            // finished steps
  bool error_feedback = true;   // off: the residual is dropped (for comparison only)
  std::vector<float> q;         // cols x rank, row-major: the warm start of the next step
  std::vector<float> residual;  // rows x cols: what earlier steps did not send
  std::vector<float> m;         // rows x cols: this step's grad + residual (between begin and finish)
};

// A state for a rows x cols matrix at `rank` (1 <= rank <= min(rows, cols)): zero residual,
// seeded Q. Throws std::invalid_argument for a zero dimension or a rank out of range.
LowRankState make_state(uint64_t rows, uint64_t cols, uint32_t rank, uint64_t seed);

// Changes the rank between steps (EDGC moves it per window): the residual is kept, the first
// min(old, new) columns of the warm start are kept, new columns are seeded. Same checks.
void set_rank(LowRankState& state, uint32_t rank);

// Bytes on the wire per rank and step: P and Q in fp32, (rows + cols) x rank x 4.
constexpr uint64_t compressed_bytes(uint64_t rows, uint64_t cols, uint32_t rank) {
  return (rows + cols) * rank * 4;
}
// Uncompressed bytes / compressed bytes.
double compression_ratio(uint64_t rows, uint64_t cols, uint32_t rank, DType dtype);

// grad: host, rows x cols elements of `dtype`, not null. Throws std::invalid_argument when an
// element is NaN or infinite (the residual would carry it forever).
void begin(LowRankState& state, DType dtype, const void* grad);
// p: host, rows x rank floats (row-major), overwritten with M Q.
void compute_p(const LowRankState& state, float* p);
// In place: columns of p (rows x rank, row-major) made orthonormal by modified Gram-Schmidt
// with one re-orthogonalisation pass, in column order; a column dependent on the earlier ones
// (kDependentColumn) becomes zero. Deterministic.
void orthonormalize(float* p, uint64_t rows, uint32_t rank);
// q: host, cols x rank floats, overwritten with Mᵀ p_hat.
void compute_q(const LowRankState& state, const float* p_hat, float* q);
// q_sum: the allreduced (summed) Q of `nranks` ranks (nranks >= 1). out: host, rows x cols
// floats, may be null (then only the state advances). Advances state.step.
void finish(LowRankState& state, const float* p_hat, const float* q_sum, int nranks, float* out);

// One rank alone: every step above; out (rows x cols floats, may be null) gets the update.
void compress_step(LowRankState& state, DType dtype, const void* grad, float* out);

// The error of the step just finished: ||M - update|| / ||M||, M = the gradient plus the residual
// earlier steps carried (what the step had to send); M - update is the residual it leaves. In
// [0, 1] for the projection a step makes; 0 for a zero M. `update` is finish()'s output.
double step_error(const LowRankState& state, const float* update);

}  // namespace compcoll::lowrank
