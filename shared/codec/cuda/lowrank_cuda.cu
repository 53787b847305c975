// shared/codec/cuda/lowrank_cuda.cu — launches the lowrank kernels (lowrank_kernels.cuh).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "codec/cuda/check.h"
#include "codec/cuda/lowrank_cuda.h"
#include "codec/cuda/lowrank_kernels.cuh"

namespace compcoll::lowrank {

namespace {

constexpr unsigned kMaxBlocks = 65535u * 16u;

unsigned blocks_for(uint64_t work, unsigned per_block) {
  return static_cast<unsigned>(std::clamp<uint64_t>((work + per_block - 1) / per_block, 1, kMaxBlocks));
}

}  // namespace

void cuda_lowrank_begin(DType dtype, const void* grad_dev, const float* residual_dev, float* m_dev, uint64_t n,
                        int* nonfinite_dev, cudaStream_t stream) {
  if (n == 0) return;
  const unsigned blocks = blocks_for(n, 256);
  switch (dtype) {
    case DType::BF16:
      kernels::begin_kernel<DType::BF16><<<blocks, 256, 0, stream>>>(grad_dev, residual_dev, m_dev, n, nonfinite_dev);
      break;
    case DType::FP16:
      kernels::begin_kernel<DType::FP16><<<blocks, 256, 0, stream>>>(grad_dev, residual_dev, m_dev, n, nonfinite_dev);
      break;
    case DType::FP32:
      kernels::begin_kernel<DType::FP32><<<blocks, 256, 0, stream>>>(grad_dev, residual_dev, m_dev, n, nonfinite_dev);
      break;
    default:
      throw std::invalid_argument("cuda_lowrank_begin: unknown dtype " + std::to_string(static_cast<int>(dtype)));
  }
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

void cuda_lowrank_compute_p(const float* m_dev, const float* q_dev, float* p_dev, uint64_t rows, uint64_t cols,
                            uint32_t rank, cudaStream_t stream) {
  if (rows * rank == 0) return;
  kernels::compute_p_kernel<<<blocks_for(rows * rank, 1), kLanes, 0, stream>>>(m_dev, q_dev, p_dev, rows, cols, rank);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

void cuda_lowrank_orthonormalize(float* p_dev, uint64_t rows, uint32_t rank, cudaStream_t stream) {
  if (rows * rank == 0) return;
  kernels::orthonormalize_kernel<<<1, kLanes, 0, stream>>>(p_dev, rows, rank);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

void cuda_lowrank_compute_q(const float* m_dev, const float* p_hat_dev, float* q_dev, uint64_t rows, uint64_t cols,
                            uint32_t rank, cudaStream_t stream) {
  if (cols * rank == 0) return;
  kernels::compute_q_kernel<<<blocks_for(cols * rank, 1), kLanes, 0, stream>>>(m_dev, p_hat_dev, q_dev, rows, cols,
                                                                                rank);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

void cuda_lowrank_finish(const float* m_dev, const float* p_hat_dev, float* q_dev, int nranks, float* out_dev,
                         float* residual_dev, bool error_feedback, uint64_t seed, uint64_t next_step, uint64_t rows,
                         uint64_t cols, uint32_t rank, cudaStream_t stream) {
  if (nranks < 1) throw std::invalid_argument("cuda_lowrank_finish: nranks must be >= 1");
  if (rows * cols * rank == 0) return;
  kernels::divide_kernel<<<blocks_for(cols * rank, 256), 256, 0, stream>>>(q_dev, cols * rank,
                                                                            static_cast<float>(nranks));
  kernels::finish_kernel<<<blocks_for(rows * cols, 256), 256, 0, stream>>>(m_dev, p_hat_dev, q_dev, out_dev,
                                                                            residual_dev, error_feedback, rows, cols, rank);
  kernels::reseed_kernel<<<rank, 256, 0, stream>>>(q_dev, cols, rank, seed, next_step);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

}  // namespace compcoll::lowrank
