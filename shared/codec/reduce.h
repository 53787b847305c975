// shared/codec/reduce.h — the reduction kernel of the schedules' reduce op on the host:
// dst += src elementwise, for every dtype the codecs take. 16-bit types add in fp32 and round
// to nearest even (io/float_convert.h), as a GPU reduction kernel does, so a host run and a GPU
// run (codec/cuda/reduce_cuda.h) give the same bits for every input but NaN (a NaN sum stays
// NaN; its payload is the CPU's or the GPU's). Self-contained: the reference and real
// executors and compcoll-bench calibrate all call this one function. Never allocates, never
// throws, touches exactly `elements` elements of each buffer.
#pragma once

#include <cstdint>

#include "util/dtype.h"

namespace compcoll {

// dst[i] = dst[i] + src[i] for i < elements.
//   dst  host, elements * dtype_size(dtype) bytes, any alignment; null only when elements == 0.
//   src  host, as dst; may equal dst (doubling), must not otherwise overlap it.
void reduce_add(DType dtype, void* dst, const void* src, uint64_t elements);

}  // namespace compcoll
