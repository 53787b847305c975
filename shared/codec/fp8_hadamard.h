// shared/codec/fp8_hadamard.h — the lossy fp8-hadamard codec (TACO-style, for tensor-parallel
// activations): per group of G elements an RMS scale, a Walsh–Hadamard rotation, a max-abs
// quantization scale and FP8 codes (docs/FORMAT.md "fp8-hadamard"). Host API; no CUDA syntax.
// The registry's "fp8-hadamard" is G = 128, E4M3; other parameters are reached by name
// (find_codec) or here. Decoding needs no parameters: every chunk states its own.
#pragma once

#include <cstdint>
#include <string>

#include "codec/codec.h"

namespace compcoll {

enum class Fp8Format : uint8_t { E4M3 = 0, E5M2 = 1 };

struct Fp8HadamardParams {
  uint32_t group = format::kFp8DefaultGroup;  // a power of two in [32, 512]
  Fp8Format fp8 = Fp8Format::E4M3;
};

// The codec with these parameters (one static instance each). Throws CodecError for a group
// size that is not a power of two in [32, 512].
const Codec& fp8_hadamard_codec(const Fp8HadamardParams& params = {});

// Its name: "fp8-hadamard" for the defaults, else "fp8-hadamard" + "-e5m2" (E5M2) + "-g<G>"
// (G != 128), e.g. "fp8-hadamard-e5m2-g64". find_codec accepts every such name.
std::string fp8_hadamard_name(const Fp8HadamardParams& params);

// Parses such a name; false if it is not one (or names a bad group size).
bool parse_fp8_hadamard_name(std::string_view name, Fp8HadamardParams& params);

}  // namespace compcoll
