// tests/fuzz/fuzz_tensor_file.cpp — libFuzzer target for the tensor file readers
// (shared/io/tensor_file.h: .npy, .safetensors, gradient traces), built with AddressSanitizer
// and UndefinedBehaviorSanitizer. Whatever the file's bytes, a reader must return tensors whose
// bytes are exactly their elements' (and, for .npy, their shape's) or throw TensorFileError
// with one line naming the file, never crash, read outside the file or throw another kind of
// exception.
//
// Input: byte 0 holds the options (bits 0-1: requested dtype: none, bf16, fp16, fp32; bit 2:
// .safetensors rather than .npy; bit 3: also read a .npy as a gradient trace); the rest is the
// file.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <unistd.h>

#include "io/tensor_file.h"

using namespace compcoll;

namespace {

[[noreturn]] void fault(const std::string& what) {
  std::fprintf(stderr, "fuzz_tensor_file: %s\n", what.c_str());
  std::abort();
}

void check_error(const std::string& path, const TensorFileError& e) {
  const std::string what = e.what();
  if (what.find('\n') != std::string::npos) fault("an error that is not one line: " + what);
  if (what.rfind(path, 0) != 0) fault("an error that does not start with the file's name: " + what);
  if (std::getenv("FUZZ_TENSOR_VERBOSE")) std::fprintf(stderr, "refused: %s\n", what.c_str());
}

void check_tensor(const TensorData& t) {
  const size_t size = dtype_size(t.dtype);
  if (t.bytes.size() % size) fault(t.source + ": bytes not a whole number of elements");
  if (!t.shape.empty()) {
    uint64_t n = 1;
    for (uint64_t d : t.shape) n *= d;
    if (n != t.elements()) fault(t.source + ": the shape's elements are not the tensor's");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t options = data[0];
  const std::optional<DType> requested[] = {std::nullopt, DType::BF16, DType::FP16, DType::FP32};
  const bool safetensors = options & 4;
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/fuzz-tensor-" + std::to_string(::getpid()) +
                           (safetensors ? ".safetensors" : ".npy");
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  try {
    const auto tensors = load_tensors(path, requested[options & 3]);
    if (tensors.empty()) fault("no tensors and no error");
    for (const auto& t : tensors) {
      check_tensor(t);
      if (requested[options & 3] && t.dtype != *requested[options & 3]) fault(t.source + ": not the dtype requested");
    }
  } catch (const TensorFileError& e) {
    check_error(path, e);
  } catch (const std::exception& e) {
    fault(std::string("an exception that is not a TensorFileError: ") + e.what());
  }
  if (!safetensors && (options & 8)) {
    try {
      const GradientTrace g = load_gradient_trace(path);
      check_tensor(g.data);
      if (g.steps * g.rows * g.cols != g.data.elements()) fault("a gradient trace whose steps x rows x cols is not its elements");
    } catch (const TensorFileError& e) {
      check_error(path, e);
    } catch (const std::exception& e) {
      fault(std::string("an exception that is not a TensorFileError: ") + e.what());
    }
  }
  std::remove(path.c_str());
  return 0;
}
