// shared/codec/cuda/lowrank_kernels.cuh — the kernels of lowrank_cuda.h. Every dot product is
// one block of kLanes threads: thread l sums elements l, l + kLanes, ... with fmaf, then the
// block adds the lanes as a tree, exactly the order lowrank_bits.h gives the host.
#pragma once

#include <cuda_runtime.h>

#include "codec/lowrank_bits.h"

namespace compcoll::lowrank::kernels {

// Tree sum of every thread's `acc` over the block (blockDim.x == kLanes); all threads get it.
__device__ inline float block_lane_sum(float acc, float* lanes) {
  const int l = threadIdx.x;
  lanes[l] = acc;
  __syncthreads();
  for (int s = kLanes / 2; s > 0; s /= 2) {
    if (l < s) lanes[l] = lanes[l] + lanes[l + s];
    __syncthreads();
  }
  const float sum = lanes[0];
  __syncthreads();  // lanes may be reused at once
  return sum;
}

template <DType D>
__global__ void begin_kernel(const void* grad, const float* residual, float* m, uint64_t n, int* nonfinite) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const float g = load_as_float(D, grad, i);
    if (nonfinite != nullptr && !isfinite(g)) atomicOr(nonfinite, 1);
    m[i] = g + residual[i];
  }
}

// One block per output P[i][j].
__global__ void compute_p_kernel(const float* m, const float* q, float* p, uint64_t rows, uint64_t cols, uint32_t r) {
  __shared__ float lanes[kLanes];
  for (uint64_t o = blockIdx.x; o < rows * r; o += gridDim.x) {
    const uint64_t i = o / r;
    const uint32_t j = static_cast<uint32_t>(o % r);
    float acc = 0.0f;
    for (uint64_t k = threadIdx.x; k < cols; k += kLanes) acc = lane_fma(acc, m[i * cols + k], q[k * r + j]);
    const float sum = block_lane_sum(acc, lanes);
    if (threadIdx.x == 0) p[o] = sum;
  }
}

// One block per output Q[k][j].
__global__ void compute_q_kernel(const float* m, const float* p, float* q, uint64_t rows, uint64_t cols, uint32_t r) {
  __shared__ float lanes[kLanes];
  for (uint64_t o = blockIdx.x; o < cols * r; o += gridDim.x) {
    const uint64_t k = o / r;
    const uint32_t j = static_cast<uint32_t>(o % r);
    float acc = 0.0f;
    for (uint64_t i = threadIdx.x; i < rows; i += kLanes) acc = lane_fma(acc, m[i * cols + k], p[i * r + j]);
    const float sum = block_lane_sum(acc, lanes);
    if (threadIdx.x == 0) q[o] = sum;
  }
}

// One block: modified Gram-Schmidt with one re-orthogonalisation pass, as the host's.
__global__ void orthonormalize_kernel(float* p, uint64_t rows, uint32_t r) {
  __shared__ float lanes[kLanes];
  auto dot = [&](uint32_t a, uint32_t b) {
    float acc = 0.0f;
    for (uint64_t e = threadIdx.x; e < rows; e += kLanes) acc = lane_fma(acc, p[e * r + a], p[e * r + b]);
    return block_lane_sum(acc, lanes);  // its barriers also order the column updates
  };
  for (uint32_t j = 0; j < r; ++j) {
    const float before = sqrtf(dot(j, j));
    for (int pass = 0; pass < 2; ++pass)
      for (uint32_t i = 0; i < j; ++i) {
        const float c = -dot(i, j);
        for (uint64_t e = threadIdx.x; e < rows; e += kLanes) p[e * r + j] = lane_fma(p[e * r + j], c, p[e * r + i]);
        __syncthreads();
      }
    const float after = sqrtf(dot(j, j));
    const bool keep = after > kDependentColumn * before;
    for (uint64_t e = threadIdx.x; e < rows; e += kLanes) p[e * r + j] = keep ? p[e * r + j] / after : 0.0f;
    __syncthreads();
  }
}

__global__ void divide_kernel(float* q, uint64_t n, float by) {
  for (uint64_t e = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    q[e] = q[e] / by;
}

__global__ void finish_kernel(const float* m, const float* p, const float* q, float* out, float* residual,
                              bool error_feedback, uint64_t rows, uint64_t cols, uint32_t r) {
  for (uint64_t e = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; e < rows * cols;
       e += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint64_t i = e / cols, k = e % cols;
    const float a = approx_element(p + i * r, q + k * r, r);
    if (out != nullptr) out[e] = a;
    residual[e] = error_feedback ? m[e] - a : 0.0f;
  }
}

// One block per column j of Q: an all-zero column is reseeded.
__global__ void reseed_kernel(float* q, uint64_t cols, uint32_t r, uint64_t seed, uint64_t step) {
  const uint32_t j = blockIdx.x;
  int nonzero = 0;
  for (uint64_t k = threadIdx.x; k < cols; k += blockDim.x) nonzero |= q[k * r + j] != 0.0f;
  if (__syncthreads_or(nonzero)) return;
  for (uint64_t k = threadIdx.x; k < cols; k += blockDim.x) q[k * r + j] = seeded_q(seed, step, j, k);
}

}  // namespace compcoll::lowrank::kernels
