// shared/codec/lowrank_bits.h — the arithmetic of the lowrank compressor (lowrank.h) that the
// host reference and the CUDA kernels (cuda/lowrank_kernels.cuh) share, so the two produce the
// same bits: the fixed summation order of every dot product, the seeded warm-start values and
// the per-element finish. Every multiply-add is an explicit fmaf and every other operation is a
// single correctly rounded IEEE operation, so no compiler contraction can change a result.
// Must never depend on the rounding mode, on FTZ/DAZ, or on how many threads run a dot product.
#pragma once

#include <cmath>
#include <cstdint>

#include "util/dtype.h"
#include "util/hd.h"
#include "io/float_convert.h"

namespace compcoll::lowrank {

// Every dot product of length n is summed in kLanes lanes: lane l accumulates the products of
// elements l, l + kLanes, l + 2 kLanes, ... in increasing order (fmaf), then the lanes are
// added pairwise as a tree (lane l += lane l + s for s = kLanes/2, ..., 1). A CUDA block of
// kLanes threads does exactly this; the host emulates it with an array of kLanes floats.
inline constexpr int kLanes = 256;

// Columns whose norm after projection falls below this fraction of their norm before are
// numerically in the span of the earlier columns: orthonormalize() sets them to zero.
inline constexpr float kDependentColumn = 1e-4f;

COMPCOLL_HD inline float lane_fma(float acc, float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, acc);
#else
  return std::fma(a, b, acc);
#endif
}

// lanes[0] = the tree sum of lanes[0..kLanes) (host emulation of the block reduction).
COMPCOLL_HD inline float lane_tree_sum(float* lanes) {
  for (int s = kLanes / 2; s > 0; s /= 2)
    for (int l = 0; l < s; ++l) lanes[l] = lanes[l] + lanes[l + s];
  return lanes[0];
}

// The warm-start value of Q[k][j] (re)seeded at `step`: uniform in [-1, 1), a splitmix64 hash
// of (seed, step, j, k), the same on every rank and device.
COMPCOLL_HD inline float seeded_q(uint64_t seed, uint64_t step, uint32_t j, uint64_t k) {
  uint64_t z = seed ^ (step * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(j) << 40) ^ (k * 0xD1B54A32D192ED03ull);
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  // 24 random bits -> [0, 2) exactly representable, minus 1.
  return static_cast<float>(z >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

// One element of the decompressed update: sum_j p_row[j] * q_row[j], j in order, from 0.
COMPCOLL_HD inline float approx_element(const float* p_row, const float* q_row, uint32_t rank) {
  float acc = 0.0f;
  for (uint32_t j = 0; j < rank; ++j) acc = lane_fma(acc, p_row[j], q_row[j]);
  return acc;
}

}  // namespace compcoll::lowrank
