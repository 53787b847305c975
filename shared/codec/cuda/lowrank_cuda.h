// shared/codec/cuda/lowrank_cuda.h — the GPU twin of codec/lowrank.h: the same protocol steps
// on device buffers, with the same arithmetic (codec/lowrank_bits.h: fixed 256-lane summation
// order, explicit fmaf, correctly rounded sqrt and division), so every output is bit-identical
// to the host reference. Host header: no CUDA syntax beyond cudaStream_t. All calls are
// asynchronous on `stream`; launch failures throw std::runtime_error (check.h).
// Layouts as on the host: M and residual rows x cols, P rows x rank, Q cols x rank, row-major
// fp32. Simple kernels (one 256-thread block per output of P and Q, one block for the
// orthonormalisation): correct first, not tuned.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "util/dtype.h"

namespace compcoll::lowrank {

// m_dev = float(grad_dev) + residual_dev (n = rows x cols elements).
//   grad_dev      device, n elements of dtype, not null (n > 0).
//   residual_dev  device, n floats.   m_dev: device, n floats (may not alias the others).
//   nonfinite_dev device int, nullable: set to 1 when an element of grad is NaN or infinite
//                 (never cleared here; the host reference throws instead).
void cuda_lowrank_begin(DType dtype, const void* grad_dev, const float* residual_dev, float* m_dev, uint64_t n,
                        int* nonfinite_dev, cudaStream_t stream);
// p_dev (rows x rank) = M Q.
void cuda_lowrank_compute_p(const float* m_dev, const float* q_dev, float* p_dev, uint64_t rows, uint64_t cols,
                            uint32_t rank, cudaStream_t stream);
// In place, as lowrank::orthonormalize.
void cuda_lowrank_orthonormalize(float* p_dev, uint64_t rows, uint32_t rank, cudaStream_t stream);
// q_dev (cols x rank) = Mᵀ P̂.
void cuda_lowrank_compute_q(const float* m_dev, const float* p_hat_dev, float* q_dev, uint64_t rows, uint64_t cols,
                            uint32_t rank, cudaStream_t stream);
// As lowrank::finish: q_dev holds the summed Q on entry and the next warm start on return
// (Q / nranks, all-zero columns reseeded for step `next_step` = the state's step after this
// one); out_dev (nullable) gets P̂ (Q/n)ᵀ; residual_dev gets M − out (zero without feedback).
void cuda_lowrank_finish(const float* m_dev, const float* p_hat_dev, float* q_dev, int nranks, float* out_dev,
                         float* residual_dev, bool error_feedback, uint64_t seed, uint64_t next_step, uint64_t rows,
                         uint64_t cols, uint32_t rank, cudaStream_t stream);

}  // namespace compcoll::lowrank
