// shared/codec/codec.h — the host codec API: typed buffer -> self-describing chunked stream
// and back (docs/FORMAT.md specifies every byte). Host memory only; the CUDA kernels of the
// same formats are declared in codec/cuda/codec_cuda.h. Library code: errors are thrown as
// CodecError with what and where; nothing here aborts or touches memory out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/dtype.h"
#include "codec/format.h"

namespace compcoll {

// NvcompAns: nvCOMP's batched ANS in the compcoll container (docs/FORMAT.md); coded and decoded
// on a GPU only (codec/cuda/nvcomp.h). codec_by_id gives its name; its host functions refuse.
enum class CodecId : uint8_t { Identity = 0, GaussExp = 1, EntropyExp = 2, Fp8Hadamard = 3, NvcompAns = 4 };

// A damaged, truncated or hostile stream, or a caller error (buffer too small).
class CodecError : public std::runtime_error {
 public:
  CodecError(const std::string& what, uint64_t byte_offset)
      : std::runtime_error(what), byte_offset_(byte_offset) {}
  uint64_t byte_offset() const { return byte_offset_; }

 private:
  uint64_t byte_offset_;
};

struct EncodeOptions {
  // Elements per chunk: a multiple of 32 in [32, 65536], or format::kAutoChunk (0): by the
  // stream's size (format::auto_chunk_elements: smaller chunks for small messages, so that a
  // GPU codes them with more warps). The stream's header says which size it was coded in.
  uint32_t chunk_elements = format::kDefaultChunkElements;
  // Host threads coding chunks at once (chunks are independent); the stream is the same bytes
  // for any count. 0: one per hardware thread. Inputs of fewer than kMinChunksPerThread chunks
  // per thread use fewer threads. With several, the calling thread keeps the encoders' staging
  // slots (4 runs of about 128 KiB of input per thread) between calls. The CUDA kernels ignore it.
  uint32_t threads = 1;
};
inline constexpr uint32_t kMinChunksPerThread = 4;

// What a stream's header and offset table say, after validation.
struct StreamInfo {
  CodecId codec;
  DType dtype;
  uint64_t elements;
  uint32_t chunk_elements;
  uint32_t chunk_count;
  uint64_t payload_bytes;
  uint64_t total_bytes;  // header + offset table + payload: the stream's exact size
  // Only in what a receiver expects (expected_stream_info with `within`): the stream lies
  // within total_bytes, followed by bytes it does not own, and payload_bytes is the most its
  // header may state (the GPU decoder then reads the stream's own payload size).
  bool payload_at_most = false;
};

// One codec: a way of coding a chunk. The container (header, offset table) is common and
// handled by encode()/decode() below.
class Codec {
 public:
  virtual ~Codec() = default;
  virtual CodecId id() const = 0;
  virtual std::string_view name() const = 0;
  virtual bool lossless() const = 0;
  // Whether every chunk of n elements codes to exactly max_chunk_bytes(dtype, n), so that a
  // stream's size is a function of its elements alone (identity): a stream of it never outgrows
  // a wire budget learned from one of the same elements.
  virtual bool sized_by_elements() const { return false; }
  // Upper bound of one coded chunk of n elements.
  virtual size_t max_chunk_bytes(DType dtype, uint32_t n) const = 0;
  // The mean bytes a coded chunk carries whatever its size, beside what its elements code to
  // (its chunk header and tables, the padding of its lane streams; docs/FORMAT.md): what
  // coding the same elements in more, smaller chunks costs per chunk. The simulator sizes a
  // stream coded in other chunks than its ratio was measured in by it (policy::
  // wire_message_bytes).
  virtual double chunk_overhead_bytes(DType dtype) const {
    (void)dtype;
    return 0;
  }
  // Codes n elements at `in` into `out` (at least max_chunk_bytes); returns bytes written,
  // a multiple of format::kChunkAlign.
  virtual size_t encode_chunk(DType dtype, const uint8_t* in, uint32_t n, uint8_t* out) const = 0;
  // Decodes one chunk of exactly `bytes` bytes into n elements at `out`. Returns an empty
  // string on success, else what is wrong (the caller adds which chunk and where).
  virtual std::string decode_chunk(DType dtype, const uint8_t* in, size_t bytes, uint32_t n,
                                   uint8_t* out) const = 0;
  // One chunk to decode: `bytes` bytes at `in`, n elements to `out`.
  struct ChunkRef {
    const uint8_t* in;
    size_t bytes;
    uint32_t n;
    uint8_t* out;
  };
  // Decodes two chunks, each as decode_chunk does (err[i] its result; the outputs must not
  // overlap). `ahead`: the bytes the caller decodes next, which a codec may ask the memory
  // for while it works (a hint; may be empty). This default decodes one after the other; a
  // codec whose decoder waits on dependency chains runs the two at once.
  virtual void decode_chunk_pair(DType dtype, const ChunkRef (&chunk)[2], std::span<const uint8_t> ahead,
                                 std::string (&err)[2]) const {
    (void)ahead;
    for (uint32_t i = 0; i < 2; ++i) err[i] = decode_chunk(dtype, chunk[i].in, chunk[i].bytes, chunk[i].n, chunk[i].out);
  }
};

const Codec& codec_by_id(CodecId id);
// Looks a codec up by its name ("identity", "gauss-exp", "entropy-exp", "fp8-hadamard" and its
// parameterised names, codec/fp8_hadamard.h); nullptr if unknown.
const Codec* find_codec(std::string_view name);
// Names of all codecs, in id order.
std::vector<std::string_view> codec_names();

// nvCOMP's chunk: its batched API's usual size (its headers advise 64 KiB for ANS decode speed),
// in which compcoll-bench runs it, the GPU backend of compcoll-run codes messages and the
// simulator sizes them.
inline constexpr uint64_t kNvcompChunkBytes = format::kLibraryChunkBytes;
// The name of nvCOMP's ANS as a codec of compcoll's files: the library codec below, the
// calibration's curves and ratios, compcoll-bench's rows.
inline constexpr std::string_view kNvcompAnsName = "nvcomp-ans";

// A GPU library's codec that the simulator prices beside compcoll's own: its durations and its
// ratio come from a calibration measured on a GPU (`compcoll-bench calibrate --device cuda`:
// the file's curves and `ratios`, docs/CALIBRATION.md), since it has no host implementation
// here. "nvcomp-ans": nvCOMP's batched ANS over 64 KiB chunks. A message of one is priced as the
// compcoll container carries its chunks (docs/FORMAT.md, codec 4): the stream header, an offset
// entry per chunk and each compressed chunk behind its size prefix, padded to 16 bytes.
struct LibraryCodec {
  std::string_view name;     // "nvcomp-ans"
  std::string_view library;  // "nvCOMP"
  uint64_t chunk_bytes;      // uncompressed bytes per chunk
  CodecId id;                // its container's codec id (codec_by_id: the host's stand-in)
};
// nullptr if `name` is not one.
const LibraryCodec* find_library_codec(std::string_view name);
// Upper bound of a library codec's stream of `elements` elements, its chunks of at most
// `max_chunk_bytes` compressed bytes each (the library's bound; docs/FORMAT.md, "nvcomp-ans").
size_t library_max_encoded_size(const LibraryCodec& codec, DType dtype, uint64_t elements,
                                uint64_t max_chunk_bytes);
// Its chunk in elements: chunk_bytes / the element size.
uint32_t library_chunk_elements(const LibraryCodec& codec, DType dtype);
// What a receiver expects a library codec's stream of stream_bytes bytes to say (as
// expected_stream_info: the payload is what follows the offset table). Throws CodecError for a
// size too small for the header and offset table.
StreamInfo library_stream_info(const LibraryCodec& codec, DType dtype, uint64_t elements, uint64_t stream_bytes);
// compcoll's own (find_codec) or a library codec.
inline bool known_codec(std::string_view name) { return find_codec(name) || find_library_codec(name); }
// The codec a plan names: compcoll's own (find_codec), or a library codec's stand-in
// (codec_by_id of its id), which a GPU backend runs through the library; nullptr if neither.
inline const Codec* find_plan_codec(std::string_view name) {
  if (const LibraryCodec* lib = find_library_codec(name)) return &codec_by_id(lib->id);
  return find_codec(name);
}

// Codec::sized_by_elements of the plan codec `name` (false for a library codec or an unknown
// name).
inline bool stream_sized_by_elements(std::string_view name) {
  const Codec* c = find_codec(name);
  return c && c->sized_by_elements();
}

// Whether compcoll's GPU decoder of codec `id` has a decode-and-add kernel (cuda_decode_add:
// identity, gauss-exp, entropy-exp), so that the nccl executor can run a reduce step's
// decompression and reduce as one kernel (run.fused_decode). nvcomp-ans and fp8-hadamard have none.
inline bool gpu_decode_adds(CodecId id) {
  return id == CodecId::Identity || id == CodecId::GaussExp || id == CodecId::EntropyExp;
}
// The same for the plan codec `name` (false for a library codec or an unknown name).
inline bool gpu_decode_adds(std::string_view name) {
  const Codec* c = find_library_codec(name) ? nullptr : find_codec(name);
  return c && gpu_decode_adds(c->id());
}

// Upper bound of encode()'s output for `elements` elements.
size_t max_encoded_size(const Codec& codec, DType dtype, uint64_t elements,
                        const EncodeOptions& opt = {});

// Encodes `elements` elements of `dtype` at `in` (host, elements * dtype_size bytes, may be
// null when elements == 0) into `out` (host, out_capacity bytes, at least
// max_encoded_size). Returns the stream's size. Throws CodecError on bad options.
size_t encode(const Codec& codec, DType dtype, const void* in, uint64_t elements, void* out,
              size_t out_capacity, const EncodeOptions& opt = {});
std::vector<uint8_t> encode(const Codec& codec, DType dtype, const void* in, uint64_t elements,
                            const EncodeOptions& opt = {});

// Validates the header and the offset table of a stream of `bytes` bytes (host).
StreamInfo read_stream_info(const void* stream, size_t bytes);

// What a receiver that knows how a stream was made (codec, dtype, elements, the encoder's
// options) and its size expects its header to say, without reading it: the GPU decoder checks
// the stream's own header against this on the device (cuda_decode), so no header crosses to
// the host. Throws CodecError for bad options, or a size too small for the header and offset
// table, or one past what the codec can write for those elements. within: the stream lies
// within stream_bytes (a stream sent within a wire budget: StreamInfo::payload_at_most).
StreamInfo expected_stream_info(const Codec& codec, DType dtype, uint64_t elements,
                                const EncodeOptions& opt, uint64_t stream_bytes, bool within = false);

// Decodes a whole stream into `out` (host, out_capacity bytes, at least
// elements * dtype_size). Throws CodecError naming the chunk and byte offset of any damage
// (with several threads, the damaged chunk of lowest index). `threads` as EncodeOptions::threads.
StreamInfo decode(const void* stream, size_t bytes, void* out, size_t out_capacity, uint32_t threads = 1);
// Decodes chunks [first, first + count) into `out`, which receives the elements of those
// chunks only (a slice of the tensor; the rest of the stream is not read beyond its header
// and offset table).
void decode_chunks(const void* stream, size_t bytes, uint32_t first, uint32_t count, void* out,
                   size_t out_capacity);

// The yardstick of the exponent codecs: H, the empirical entropy of the exponent field over
// `elements` elements at `data` (host), and the order-0 bound bits / (bits - exponent bits + H)
// (16 / (8 + H) for bf16) that a perfect exponent coder with raw sign and mantissa reaches.
struct ExponentEntropy {
  double bits = 0;     // H, bits per exponent
  double bound = 1.0;  // compression ratio bound
};
ExponentEntropy exponent_entropy(DType dtype, const void* data, uint64_t elements);

// Which host implementation the codecs run here: "avx512" where the CPU has AVX-512
// F/BW/VL/DQ/VBMI/VBMI2 and the environment does not set COMPCOLL_HOST_SIMD=0 (gauss-exp then
// takes vector paths that write and read the same bytes), else "portable".
// Benchmarks and calibration files record it.
std::string_view host_codec_path();

}  // namespace compcoll
