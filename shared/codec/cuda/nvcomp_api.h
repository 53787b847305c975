// shared/codec/cuda/nvcomp_api.h — libnvcomp.so.6, opened at run time (dlopen): the functions of
// nvCOMP 6's C API that compcoll calls (batched ANS and Bitcomp, properties, status strings).
// A program built with nvCOMP's headers starts where the library is absent (a bundle,
// docs/BUNDLE.md) and only what needs it is refused. Found through the loader's path: the
// build's RPATH (the wheel's folder), LD_LIBRARY_PATH (the bundle's env.sh adds the wheel's),
// or the system. Built only where CMake found nvCOMP (COMPCOLL_HAVE_NVCOMP); includes its headers.
#pragma once

#include <nvcomp.h>
#include <nvcomp/ans.h>
#include <nvcomp/bitcomp.h>

#include <string>

#include "util/dtype.h"

namespace compcoll {

struct NvcompApi {
  decltype(&::nvcompBatchedANSCompressAsync) nvcompBatchedANSCompressAsync = nullptr;
  decltype(&::nvcompBatchedANSCompressGetMaxOutputChunkSize) nvcompBatchedANSCompressGetMaxOutputChunkSize = nullptr;
  decltype(&::nvcompBatchedANSCompressGetRequiredAlignments) nvcompBatchedANSCompressGetRequiredAlignments = nullptr;
  decltype(&::nvcompBatchedANSCompressGetTempSize) nvcompBatchedANSCompressGetTempSize = nullptr;
  decltype(&::nvcompBatchedANSDecompressAsync) nvcompBatchedANSDecompressAsync = nullptr;
  decltype(&::nvcompBatchedANSDecompressGetRequiredAlignments) nvcompBatchedANSDecompressGetRequiredAlignments = nullptr;
  decltype(&::nvcompBatchedANSDecompressGetTempSize) nvcompBatchedANSDecompressGetTempSize = nullptr;
  decltype(&::nvcompBatchedBitcompCompressAsync) nvcompBatchedBitcompCompressAsync = nullptr;
  decltype(&::nvcompBatchedBitcompCompressGetMaxOutputChunkSize) nvcompBatchedBitcompCompressGetMaxOutputChunkSize = nullptr;
  decltype(&::nvcompBatchedBitcompCompressGetRequiredAlignments) nvcompBatchedBitcompCompressGetRequiredAlignments = nullptr;
  decltype(&::nvcompBatchedBitcompCompressGetTempSize) nvcompBatchedBitcompCompressGetTempSize = nullptr;
  decltype(&::nvcompBatchedBitcompDecompressAsync) nvcompBatchedBitcompDecompressAsync = nullptr;
  decltype(&::nvcompBatchedBitcompDecompressGetRequiredAlignments) nvcompBatchedBitcompDecompressGetRequiredAlignments = nullptr;
  decltype(&::nvcompBatchedBitcompDecompressGetTempSize) nvcompBatchedBitcompDecompressGetTempSize = nullptr;
  decltype(&::nvcompGetProperties) nvcompGetProperties = nullptr;
  decltype(&::nvcompGetStatusString) nvcompGetStatusString = nullptr;
  std::string error;  // why the library or one of its functions is missing ("" when loaded)
};

// The library, opened at the first call (thread-safe); check `error` before calling anything.
const NvcompApi& nvcomp_api();

// nvCOMP's ANS options for a tensor of `dtype`, as nvcomp-ans and compcoll-bench's nvCOMP rows
// run it: data_type NVCOMP_TYPE_FLOAT16 for bf16 and fp16 (its header: "applicable to all
// half-precision data formats"), NVCOMP_TYPE_FLOAT32 for fp32; otherwise nvCOMP's defaults.
nvcompBatchedANSCompressOpts_t nvcomp_ans_compress_opts(DType dtype);
nvcompBatchedANSDecompressOpts_t nvcomp_ans_decompress_opts(DType dtype);

}  // namespace compcoll
