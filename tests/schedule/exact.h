// tests/schedule/exact.h — inputs for the schedule tests whose sums are exact: small integers
// (-1, 0, 1, 2), so every partial sum over up to 64 ranks is exact in bf16, fp16 and fp32, any
// summation order gives the same bits, and a missed or doubled block shows.
#pragma once

#include <cstring>
#include <vector>

#include "io/float_convert.h"
#include "schedule/algorithms.h"

namespace compcoll::test {

inline int value_of(int rank, uint64_t i) { return static_cast<int>((rank * 7 + i * 3) % 4) - 1; }

inline std::vector<uint8_t> encode_values(DType dtype, const std::vector<int>& v) {
  std::vector<uint8_t> out(v.size() * dtype_size(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    store_from_float(dtype, out.data(), i, static_cast<float>(v[i]));
  }
  return out;
}

// n ranks' full vectors of `count` values and their elementwise sum.
struct ExactInputs {
  std::vector<std::vector<uint8_t>> inputs;  // rank r: count values
  std::vector<std::vector<uint8_t>> blocks;  // rank r: block r of rank r's values (allgather input)
  std::vector<int> sum;
  std::vector<int> gathered;                 // the blocks side by side (allgather output)
};
inline ExactInputs exact_inputs(DType dtype, int n, uint64_t count) {
  ExactInputs e;
  e.sum.assign(count, 0);
  e.gathered.assign(count, 0);
  for (int r = 0; r < n; ++r) {
    std::vector<int> v(count);
    for (uint64_t i = 0; i < count; ++i) e.sum[i] += v[i] = value_of(r, i);
    e.inputs.push_back(encode_values(dtype, v));
    const sched::Block b = sched::block_of(count, n, r);
    std::copy(v.begin() + b.begin, v.begin() + b.end, e.gathered.begin() + b.begin);
    e.blocks.push_back(encode_values(dtype, std::vector<int>(v.begin() + b.begin, v.begin() + b.end)));
  }
  return e;
}

// Block r of n of an encoded vector of values.
inline std::vector<uint8_t> encoded_block(DType dtype, const std::vector<int>& values, int n, int r) {
  const sched::Block b = sched::block_of(values.size(), n, r);
  return encode_values(dtype, std::vector<int>(values.begin() + b.begin, values.begin() + b.end));
}

}  // namespace compcoll::test
