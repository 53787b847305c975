// shared/codec/codec_internal.h — how codec.cpp reaches the codec implementations; not part
// of the public API.
#pragma once

#include "codec/codec.h"

namespace compcoll::detail {

const Codec& identity_codec();
const Codec& gauss_exp_codec();
const Codec& entropy_exp_codec();
const Codec& fp8_hadamard_codec_default();  // G = 128, E4M3
const Codec& nvcomp_ans_host_codec();       // refuses to code (library_codec.cpp)

// Runtime dtype -> template layout, in one place; an unknown value fails loudly.
[[noreturn]] void throw_bad_dtype(uint8_t value);

}  // namespace compcoll::detail
