// shared/codec/cuda/codec_cuda.h — the CUDA encoder and decoder of the compcoll stream formats
// (identity, gauss-exp, entropy-exp, fp8-hadamard). The GPU writes streams byte-identical to the host
// encode() of codec/codec.h and reads any stream the host reads, with the same validation.
// Host header: no CUDA syntax beyond cudaStream_t. Every pointer says where it lives
// (`_dev`: device memory), its minimum size and whether it may be null.
// Library code: caller errors and damaged streams found on the host throw CodecError, CUDA
// failures std::runtime_error (check.h); damage found on the device is reported per chunk.
// Nothing here reads or writes out of bounds, whatever the stream holds.
// cuda_encode, cuda_decode and cuda_decode_add allocate nothing, copy nothing to the host and
// do not synchronise (unless check.h's debug switch is on), so a caller can capture them in a
// CUDA graph (the [graph] case of tests/codec/test_codec_cuda.cpp does).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "codec/codec.h"
#include "codec/fp8_hadamard.h"

namespace compcoll {

// ---- encode ------------------------------------------------------------------------------

// Device scratch bytes cuda_encode needs for `elements` elements (0 for identity). Asks the
// current device (the scan's temporary storage depends on it). Throws CodecError for bad
// options, like max_encoded_size().
size_t cuda_encode_scratch_bytes(CodecId codec, DType dtype, uint64_t elements,
                                 const EncodeOptions& opt = {});

// Encodes on `stream`, asynchronously; the stream is byte-identical to compcoll::encode().
//   in_dev       device, elements * dtype_size(dtype) bytes, aligned to dtype_size(dtype);
//                null only when elements == 0. Not modified.
//   out_dev      device, out_capacity >= max_encoded_size(...) bytes, 4-byte aligned, not null.
//   out_size_dev device, one u64 that receives the stream's size, not null.
//   scratch_dev  device, scratch_bytes >= cuda_encode_scratch_bytes(...) bytes, any
//                alignment; null only when that size is 0.
// Every argument is checked before anything is launched (CodecError on a caller error).
void cuda_encode(CodecId codec, DType dtype, const void* in_dev, uint64_t elements, void* out_dev,
                 size_t out_capacity, uint64_t* out_size_dev, void* scratch_dev,
                 size_t scratch_bytes, const EncodeOptions& opt, cudaStream_t stream);

// cuda_encode for fp8-hadamard with any parameters (cuda_encode's CodecId::Fp8Hadamard is
// the defaults, G = 128, E4M3); byte-identical to encode(fp8_hadamard_codec(params), ...).
// Same arguments and checks; out_capacity is against that codec's max_encoded_size, the
// scratch is cuda_encode_scratch_bytes(CodecId::Fp8Hadamard, ...). Throws CodecError for bad
// parameters.
void cuda_encode_fp8_hadamard(const Fp8HadamardParams& params, DType dtype, const void* in_dev,
                              uint64_t elements, void* out_dev, size_t out_capacity,
                              uint64_t* out_size_dev, void* scratch_dev, size_t scratch_bytes,
                              const EncodeOptions& opt, cudaStream_t stream);

// How cuda_encode runs gauss-exp; both write the same bytes.
//   Passes     measure every chunk (entropy-exp: build its code tables first), scan the sizes
//              with CUB, emit every chunk at its offset with its offset table entry, the
//              first warp writing the header and the size.
//   OneLaunch  one kernel (and a memset of its descriptors): each warp takes the next chunk,
//              measures it, learns its offset from the chunks before it (decoupled look-back)
//              and writes it; the last chunk's warp writes the header.
// Process-wide; the default is Passes, or the environment's COMPCOLL_CUDA_ENCODER
// (`passes` or `one-launch`, read at the first call). Safe to call from any thread.
enum class CudaEncoder { Passes, OneLaunch };
void set_cuda_encoder(CudaEncoder encoder);
CudaEncoder cuda_encoder();
// "passes" / "one-launch"; parse_cuda_encoder throws CodecError naming the value otherwise.
std::string_view cuda_encoder_name(CudaEncoder encoder);
CudaEncoder parse_cuda_encoder(std::string_view name);

// ---- decode ------------------------------------------------------------------------------

// Per-chunk decode status, one int32 per chunk: 0 = ok. The low byte is a CudaChunkStatus;
// for the Lane* values bits 8..15 hold the lane and bits 16..30 the element's position in
// the lane (element = lane + kLanes * position). A chunk with a non-zero status has
// unspecified output contents (still written only inside its own elements).
enum class CudaChunkStatus : uint8_t {
  Ok = 0,
  BadOffsets,        // its offset table entries are out of order, range or alignment
  SizeMismatch,      // its byte size disagrees with its contents (tables, lane word counts)
  BadMode,           // unknown chunk mode byte
  ReservedBytes,     // reserved chunk header bytes are not zero
  BadSymbolCount,    // entropy-exp code table has more symbols than the dtype's exponents
  BadCodeTable,      // entropy-exp code table entry out of order, range or length
  KraftViolation,    // entropy-exp code lengths violate the Kraft inequality
  LaneBadCode,       // a lane's bit pattern is no code
  LaneBadExponent,   // a decoded exponent is out of range for the chunk's reference
  LaneOverrun,       // a lane's bit stream ends before its elements do
  LaneTrailingBits,  // a lane's bit stream has bits after its last element
  Fp8BadHeader,      // fp8-hadamard: group size, fp8 format or reserved byte 3 invalid
  Fp8BadScale,       // fp8-hadamard: a scale is negative or not finite; bits 8..30: the group
  BadHeader,         // the stream's header is not the one `info` describes (every chunk says so)
  LibraryFailed,     // a library codec (nvcomp-ans) failed on the chunk; bits 8..30: its status
  LibraryBadChunk,   // a library codec's chunk: size prefix or padding bytes are not zero
  Truncated,         // StreamInfo::payload_at_most: the header's payload runs past the bytes given
};

// What a status word means, one line in the host decoder's words
// ("lane 3 element 99: bit pattern is no code"). Empty for 0.
std::string cuda_chunk_status_message(int32_t status);

// Reads and validates the header and chunk offset table of a stream in device memory, like
// read_stream_info(): copies the first 32 + 8 * chunk_count bytes to the host and
// synchronises `stream`. stream_dev: device, stream_bytes bytes, any alignment.
StreamInfo cuda_read_stream_info(const void* stream_dev, size_t stream_bytes, cudaStream_t stream);

// Decodes every chunk of a device stream on `stream`, asynchronously. `info` is what
// cuda_read_stream_info() returned, or what the caller knows of the stream
// (expected_stream_info(), codec/codec.h: nothing read back to the host); it is checked for
// consistency with itself, stream_bytes and out_capacity (CodecError). The stream's header
// (checked against `info`, byte for byte), each chunk's offsets and its contents are
// validated on the device; the result goes to status_dev. Allocates nothing and does not
// synchronise.
//   stream_dev  device, stream_bytes bytes, any alignment; not modified.
//   out_dev     device, out_capacity >= info.elements * dtype_size(info.dtype) bytes, aligned
//               to dtype_size; null only when info.elements == 0.
//   status_dev  device, info.chunk_count int32 (see CudaChunkStatus); null only when
//               info.chunk_count == 0.
void cuda_decode(const StreamInfo& info, const void* stream_dev, size_t stream_bytes, void* out_dev,
                 size_t out_capacity, int32_t* status_dev, cudaStream_t stream);

// cuda_decode that adds the decoded elements to what acc_dev holds (acc += decode(stream)),
// element for element as cuda_reduce_add adds: the decode and the reduction of a
// reduce-scatter or allreduce step in one pass, the decoded tensor never written out. The same
// arguments and checks (acc_dev for out_dev); identity, gauss-exp and entropy-exp (fp8-hadamard:
// CodecError). A chunk with a non-zero status leaves its elements of acc unspecified.
void cuda_decode_add(const StreamInfo& info, const void* stream_dev, size_t stream_bytes, void* acc_dev,
                     size_t acc_capacity, int32_t* status_dev, cudaStream_t stream);

// cuda_read_stream_info + cuda_decode, then synchronises `stream` and throws CodecError
// naming the first bad chunk and its byte offset, as decode() does. Returns the info.
// Allocates its status array stream-ordered (cudaMallocAsync) and frees it.
StreamInfo cuda_decode_checked(const void* stream_dev, size_t stream_bytes, void* out_dev,
                               size_t out_capacity, cudaStream_t stream);

// ---- batches: several messages in one launch a kernel ------------------------------------
// A collective step that codes several messages at once (the blocks a direct allreduce sends
// its peers, those it receives) codes them as a batch: one launch of each kernel that codes one
// message codes every message of the batch (gauss-exp and entropy-exp: measure, scan and emit
// for all; identity: one copy kernel; decoding: one kernel), so a batch pays a call's
// launches, not a call's launches a message. Each message's stream is the one cuda_encode
// writes, byte for byte, and is decoded, checked and reported as cuda_decode does it. The
// messages share the codec and dtype (and the encoder's options); their sizes and chunk sizes
// may differ. A batch larger than cuda_batch_messages() runs in groups of that many, one after
// another. fp8-hadamard runs a call per message, and gauss-exp's batch always runs the Passes
// kernels, whatever cuda_encoder() says. Same rules as the single calls: every argument checked
// before anything is launched (CodecError naming the message), nothing allocated, copied to the
// host or synchronised.
size_t cuda_batch_messages();  // 16

struct CudaEncodeItem {
  const void* in_dev;      // as cuda_encode's in_dev
  uint64_t elements;
  void* out_dev;           // as cuda_encode's out_dev, out_capacity and out_size_dev
  size_t out_capacity;
  uint64_t* out_size_dev;
};

// Device scratch bytes cuda_encode_batch needs for messages of these element counts.
size_t cuda_encode_batch_scratch_bytes(CodecId codec, DType dtype, const uint64_t* elements, size_t count,
                                       const EncodeOptions& opt = {});

// Encodes items[0, count) on `stream`, asynchronously; scratch as cuda_encode's, of
// cuda_encode_batch_scratch_bytes(...) bytes.
void cuda_encode_batch(CodecId codec, DType dtype, const CudaEncodeItem* items, size_t count, void* scratch_dev,
                       size_t scratch_bytes, const EncodeOptions& opt, cudaStream_t stream);

struct CudaDecodeItem {
  StreamInfo info;          // as cuda_decode's info, stream_dev, stream_bytes, out_dev,
  const void* stream_dev;   // out_capacity and status_dev
  size_t stream_bytes;
  void* out_dev;
  size_t out_capacity;
  int32_t* status_dev;
};

// Decodes items[0, count) on `stream`, asynchronously, as cuda_decode decodes each. Every
// message's info names the same codec and dtype.
void cuda_decode_batch(const CudaDecodeItem* items, size_t count, cudaStream_t stream);

// ---- library codecs: the compcoll container around a library's chunks -------------------
// A library codec (nvcomp-ans: codec/cuda/nvcomp.h) compresses a message's 64 KiB chunks in one
// batched call into slots of its own; these kernels put them into the container of
// docs/FORMAT.md ("nvcomp-ans") and find them in it again, on the device: nothing is read back
// to the host, allocated or synchronised, and the library's per-chunk status becomes the
// chunk's CudaChunkStatus. The stream (out_dev, stream_dev) must be 16-byte aligned
// (format::kLibraryAlign), so that every chunk's data is where the library may read it.

// ptrs_dev[j] = base_dev + j * chunk_bytes and, when sizes_dev is not null, sizes_dev[j] =
// min(chunk_bytes, bytes - j * chunk_bytes), for the ceil(bytes / chunk_bytes) chunks: the
// arrays of a batched call over `bytes` bytes at base_dev (or over slots of chunk_bytes each).
void cuda_library_chunk_table(void* base_dev, uint64_t bytes, uint64_t chunk_bytes, void** ptrs_dev,
                              size_t* sizes_dev, cudaStream_t stream);

// Device scratch bytes cuda_library_pack needs for `chunks` chunks.
size_t cuda_library_pack_scratch_bytes(uint32_t chunks);

// Writes the stream of `elements` elements of `dtype` in chunks of chunk_elements, coded by the
// library codec `codec`: chunk j is compressed_bytes_dev[j] bytes at slots_dev + j * slot_bytes
// (16-byte aligned, at most slot_bytes). *out_size_dev receives the stream's size. Where
// library_status_dev[j] (the library's status, 0: success; may be null) is not 0, or the size
// exceeds the slot, the chunk is written empty and status_dev[j] says so (LibraryFailed);
// otherwise status_dev[j] = 0. out_capacity must be library_max_encoded_size(...) for slot_bytes
// (codec.h) or more.
void cuda_library_pack(CodecId codec, DType dtype, uint64_t elements, uint32_t chunk_elements,
                       const void* slots_dev, uint64_t slot_bytes, const size_t* compressed_bytes_dev,
                       const int32_t* library_status_dev, void* out_dev, size_t out_capacity,
                       uint64_t* out_size_dev, int32_t* status_dev, void* scratch_dev, size_t scratch_bytes,
                       cudaStream_t stream);

// Reads the stream a receiver expects (`info`: library_stream_info(), codec.h): checks its
// header against `info` byte for byte, and each chunk's offsets, size prefix and padding. For a
// sound chunk: chunks_dev[j] its data, compressed_bytes_dev[j] the library's size of it and
// status_dev[j] = 0; for a damaged one, chunks_dev[j] = stream_dev, compressed_bytes_dev[j] = 0
// and status_dev[j] says what is wrong (the library is then handed an empty chunk).
void cuda_library_unpack(const StreamInfo& info, const void* stream_dev, size_t stream_bytes, void** chunks_dev,
                         size_t* compressed_bytes_dev, int32_t* status_dev, cudaStream_t stream);

// After the library's decompression of `chunks` chunks: status_dev[j], where still 0, becomes
// LibraryFailed (library_status_dev[j] is not 0) or SizeMismatch (decoded_bytes_dev[j] is not
// expected_bytes_dev[j]).
void cuda_library_finish(uint32_t chunks, const int32_t* library_status_dev, const size_t* decoded_bytes_dev,
                         const size_t* expected_bytes_dev, int32_t* status_dev, cudaStream_t stream);

}  // namespace compcoll
