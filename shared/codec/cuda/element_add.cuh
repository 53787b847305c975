// shared/codec/cuda/element_add.cuh — dst += src for one element of each dtype, on the bits the
// codecs handle, as the host's reduce_add() adds (codec/reduce.h; io/float_convert.h: 16-bit
// types add in fp32 and round to nearest even, fp32 adds without contraction). The reduce
// kernel and the fused decode-and-add (cuda_decode_add) both add with these.
// Include from .cu files only.
#pragma once

#include <cstdint>

#include "io/float_convert.h"

namespace compcoll::gpu {

struct AddBf16 {
  __device__ uint16_t operator()(uint16_t a, uint16_t b) const {
    return float_to_bf16_rne(bf16_to_float(a) + bf16_to_float(b));
  }
};
struct AddFp16 {
  __device__ uint16_t operator()(uint16_t a, uint16_t b) const {
    return float_to_fp16_rne(fp16_to_float(a) + fp16_to_float(b));
  }
};
struct AddFp32 {
  __device__ float operator()(float a, float b) const { return __fadd_rn(a, b); }
  __device__ uint32_t operator()(uint32_t a, uint32_t b) const {
    return __float_as_uint(__fadd_rn(__uint_as_float(a), __uint_as_float(b)));
  }
};

// A decoder's put (expbits::take_lane) that adds each decoded value to the output.
template <class Add>
struct AddElement {
  template <class Bits>
  __device__ void operator()(Bits* out, uint32_t k, Bits v) const {
    out[k] = Add{}(out[k], v);
  }
};

}  // namespace compcoll::gpu
