// shared/codec/cuda/reduce_cuda.h — the GPU twin of codec/reduce.h: dst += src elementwise on
// a stream, with the same per-element arithmetic (io/float_convert.h: 16-bit types add in fp32
// and round to nearest even), so it is bit-exact against reduce_add() for every non-NaN input.
// Host header: no CUDA syntax beyond cudaStream_t. Launch failures throw std::runtime_error
// (check.h); nothing here synchronises unless the debug switch of check.h is on.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "util/dtype.h"

namespace compcoll {

// dst_dev[i] += src_dev[i] for i < elements, asynchronously on `stream`.
//   dst_dev  device, elements * dtype_size(dtype) bytes, aligned to dtype_size(dtype); null
//            only when elements == 0.
//   src_dev  device, as dst_dev; may equal dst_dev, must not otherwise overlap it.
void cuda_reduce_add(DType dtype, void* dst_dev, const void* src_dev, uint64_t elements,
                     cudaStream_t stream);

}  // namespace compcoll
