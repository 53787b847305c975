// shared/io/tensor_file.h — loads real or synthetic tensors as raw element bit patterns for the
// codec bench and tests. Must never read outside the file's bytes, whatever the file claims, and
// never silently change values: the only conversion is fp32 → bf16/fp16 with round-to-nearest-
// even, and every other dtype mismatch is an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "util/dtype.h"

namespace compcoll {

struct TensorData {
  // "PATH" for .npy, "PATH:tensor_name" for .safetensors, the spec itself for synthetic input.
  std::string source;
  DType dtype = DType::BF16;
  // Element bit patterns, little-endian, exactly elements() * dtype_size(dtype) bytes.
  std::vector<uint8_t> bytes;
  // The array's shape, C order, for .npy files (empty for the other sources: flat).
  std::vector<uint64_t> shape;

  size_t elements() const { return bytes.size() / dtype_size(dtype); }
};

// what() is one line: "<file or spec>: <what went wrong> (at byte offset N)" or "(key K)" where
// a location helps. Newlines from hostile names are replaced so the message stays one line.
class TensorFileError : public std::runtime_error {
 public:
  using runtime_error::runtime_error;
};

// Loads every tensor named by spec and returns them in file order (by data offset for
// .safetensors; never empty).
//
// spec: one of
//   "PATH.npy"                    NumPy v1/v2/v3; <f4 (fp32), <f2 (fp16), or <u2 taken as bf16
//                                 bit patterns (only when requested == BF16); any shape,
//                                 flattened in C order.
//   "PATH.safetensors"            every BF16/F16/F32 tensor; tensors of other dtypes are skipped
//                                 as long as at least one usable tensor remains.
//   "synthetic:gaussian:N[:SCALE]" N samples of N(0, SCALE²) (SCALE defaults to 1), generated
//                                 bit-identically on every platform.
//   "synthetic:uniform-bits:N"    N elements of uniformly random bit patterns (incompressible).
//   N takes an optional k/M/G suffix (powers of 1024): "synthetic:gaussian:64M".
// requested: the dtype the caller wants, or nullopt to keep each tensor's own dtype (synthetic
//   input then defaults to BF16). fp32 data converts to BF16/FP16 by round-to-nearest-even; any
//   other mismatch throws.
// Throws TensorFileError for every problem with the spec or the file's contents.
std::vector<TensorData> load_tensors(const std::string& spec, std::optional<DType> requested);

// A gradient over training steps (tools/capture_tensors.py --trace): a .npy of shape
// (steps, rows, cols), bf16 bit patterns or float32, every value finite. Step s is the rows x cols
// matrix at bytes step_bytes(s). Throws TensorFileError naming the file (and the step holding
// a NaN or infinite value).
struct GradientTrace {
  TensorData data;
  uint64_t steps = 0, rows = 0, cols = 0;
  const uint8_t* step_bytes(uint64_t s) const { return data.bytes.data() + s * rows * cols * dtype_size(data.dtype); }
};
GradientTrace load_gradient_trace(const std::string& path);

}  // namespace compcoll
