// shared/codec/cuda/nvcomp.h — nvcomp-ans: nvCOMP's batched ANS (nvCOMP 6) as a codec of
// compcoll's collectives on a GPU, in the compcoll container (docs/FORMAT.md, "nvcomp-ans"):
// a message's 64 KiB chunks compressed in one batched call, then packed behind the stream's
// header and offset table on the device; on the receiving side the stream is checked on the
// device and decoded in one batched call. Nothing is read back to the host, nothing allocated
// per call (the caller gives the scratch), nothing synchronised, as cuda_encode / cuda_decode.
// The data type nvCOMP is told: NVCOMP_TYPE_FLOAT16 for bf16 and fp16 (its header: "applicable
// to all half-precision data formats"), NVCOMP_TYPE_FLOAT32 for fp32; the rest of nvCOMP's
// default options, as `compcoll-bench codec --device cuda` and `calibrate` run it.
// Host header: no CUDA syntax beyond cudaStream_t, no nvCOMP header. Built only where CMake
// found nvCOMP (COMPCOLL_HAVE_NVCOMP); libnvcomp.so.6 is opened at the first call. Caller
// errors and an absent library throw CodecError; CUDA failures std::runtime_error (check.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/dtype.h"

namespace compcoll {

// "" when libnvcomp.so.6 was loaded with every function compcoll calls, else why not, one line.
// Needs no GPU.
std::string nvcomp_unavailable();
// "nvCOMP 6.0.0" as the loaded library reports it.
std::string nvcomp_version();
// The file the loader took libnvcomp.so.6 from ("" when not loaded).
std::string nvcomp_library_file();

// Upper bound of an nvcomp-ans stream of `elements` elements (nvCOMP's bound per chunk, in the
// container). Asks the library; no GPU needed.
size_t nvcomp_ans_max_encoded_size(DType dtype, uint64_t elements);
// Device scratch bytes nvcomp_ans_encode / nvcomp_ans_decode need for `elements` elements
// (nvCOMP's temporary memory, the batch's arrays, the compressed slots or an aligned staging
// buffer for an input or output that is not 16-byte aligned). Asks the current device.
size_t nvcomp_ans_encode_scratch_bytes(DType dtype, uint64_t elements);
size_t nvcomp_ans_decode_scratch_bytes(DType dtype, uint64_t elements);

// Encodes on `stream`, asynchronously: the stream's size to *out_size_dev and a status per
// chunk to status_dev (0, or CudaChunkStatus::LibraryFailed where nvCOMP failed on a chunk,
// which is then written empty; a caller checks them as after a decode).
//   in_dev      device, elements * dtype_size bytes, aligned to the element size (an input
//               not 16-byte aligned is first copied to the scratch).
//   out_dev     device, 16-byte aligned, out_capacity >= nvcomp_ans_max_encoded_size(...).
//   status_dev  device, one int32 per 64 KiB chunk; null only when elements == 0.
void nvcomp_ans_encode(DType dtype, const void* in_dev, uint64_t elements, void* out_dev, size_t out_capacity,
                       uint64_t* out_size_dev, int32_t* status_dev, void* scratch_dev, size_t scratch_bytes,
                       cudaStream_t stream);

// Decodes the stream of stream_bytes bytes at stream_dev (16-byte aligned), which
// nvcomp_ans_encode wrote for `elements` elements of `dtype`, into out_dev (elements *
// dtype_size bytes, aligned to the element size; staged through the scratch when not 16-byte
// aligned). The header is checked against that on the device, and each chunk's container
// bytes; nvCOMP checks each chunk's data. status_dev: one int32 per chunk (CudaChunkStatus,
// codec_cuda.h; a chunk with a non-zero status has unspecified output). Throws CodecError
// when stream_bytes cannot hold the header and offset table.
void nvcomp_ans_decode(DType dtype, uint64_t elements, const void* stream_dev, size_t stream_bytes, void* out_dev,
                       int32_t* status_dev, void* scratch_dev, size_t scratch_bytes, cudaStream_t stream);

}  // namespace compcoll
