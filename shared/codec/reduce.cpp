// shared/codec/reduce.cpp — see reduce.h. The loops are written branch-free over whole
// elements so the compiler vectorizes them; the per-element rounding is float_convert.h's.
#include "codec/reduce.h"

#include <cstring>

#include "io/float_convert.h"

namespace compcoll {

namespace {

template <uint16_t (*Round)(float), float (*Widen)(uint16_t)>
void reduce_16(uint8_t* dst, const uint8_t* src, uint64_t elements) {
  for (uint64_t i = 0; i < elements; ++i) {
    uint16_t a, b;
    std::memcpy(&a, dst + 2 * i, 2);
    std::memcpy(&b, src + 2 * i, 2);
    const uint16_t sum = Round(Widen(a) + Widen(b));
    std::memcpy(dst + 2 * i, &sum, 2);
  }
}

void reduce_32(uint8_t* dst, const uint8_t* src, uint64_t elements) {
  for (uint64_t i = 0; i < elements; ++i) {
    float a, b;
    std::memcpy(&a, dst + 4 * i, 4);
    std::memcpy(&b, src + 4 * i, 4);
    a += b;
    std::memcpy(dst + 4 * i, &a, 4);
  }
}

}  // namespace

void reduce_add(DType dtype, void* dst, const void* src, uint64_t elements) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  switch (dtype) {
    case DType::BF16: return reduce_16<float_to_bf16_rne, bf16_to_float>(d, s, elements);
    case DType::FP16: return reduce_16<float_to_fp16_rne, fp16_to_float>(d, s, elements);
    case DType::FP32: return reduce_32(d, s, elements);
  }
}

}  // namespace compcoll
