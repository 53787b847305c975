// shared/codec/cuda/codec_cuda.cu — the API of codec_cuda.h: checks the caller's arguments on
// the host, then turns the runtime codec and dtype into template parameters in one place per
// entry point (a switch, and with_exponent_kernels for gauss-exp and entropy-exp) and calls the
// launchers of exponent_kernels.cuh and fp8_kernels.cuh. No kernel code here.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "codec/cuda/codec_cuda.h"
#include "codec/cuda/element_add.cuh"
#include "codec/cuda/exponent_kernels.cuh"
#include "codec/cuda/fp8_kernels.cuh"
#include "codec/cuda/library_kernels.cuh"

namespace compcoll {
namespace {

using expbits::Bf16Layout;
using expbits::Fp16Layout;
using expbits::Fp32Layout;
using gpu::Kind;

constexpr uint32_t dispatch_key(CodecId codec, DType dtype) {
  return (static_cast<uint32_t>(codec) << 8) | static_cast<uint32_t>(dtype);
}

[[noreturn]] void throw_no_kernel(const char* entry, CodecId codec, DType dtype) {
  throw CodecError(std::string(entry) + ": no kernel for codec id " +
                       std::to_string(static_cast<int>(codec)) + " and dtype code " +
                       std::to_string(static_cast<int>(dtype)),
                   0);
}

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// chunk_elements as EncodeOptions has it (format::kAutoChunk: by the stream's size).
gpu::Geometry geometry(uint64_t elements, uint32_t chunk_elements) {
  const uint32_t c = format::chunk_elements_for(chunk_elements, elements);
  return {elements, c, format::chunk_count_for(elements, c)};
}

Kind exponent_kind(CodecId codec) {
  return codec == CodecId::GaussExp ? Kind::Gauss : Kind::Entropy;
}

// Calls f(kind, layout), the exponent codec's gpu::Kind as a type and the dtype's layout; false
// for any other codec.
template <class F>
bool with_exponent_kernels(CodecId codec, DType dtype, F&& f) {
  const auto by_dtype = [&](auto kind) {
    switch (dtype) {
      case DType::BF16: f(kind, Bf16Layout{}); return true;
      case DType::FP16: f(kind, Fp16Layout{}); return true;
      case DType::FP32: f(kind, Fp32Layout{}); return true;
    }
    return false;
  };
  if (codec == CodecId::GaussExp) return by_dtype(std::integral_constant<Kind, Kind::Gauss>{});
  if (codec == CodecId::EntropyExp) return by_dtype(std::integral_constant<Kind, Kind::Entropy>{});
  return false;
}

// The stream's header and offset table, copied to the host, and what they say.
struct HostPrefix {
  StreamInfo info;
  std::vector<uint8_t> bytes;  // the stream's first 32 + 8 * chunk_count bytes (or all of it)
};

HostPrefix read_prefix(const void* stream_dev, size_t stream_bytes, cudaStream_t stream) {
  if (stream_dev == nullptr && stream_bytes > 0)
    throw CodecError("cuda_read_stream_info: stream_dev is null", 0);
  HostPrefix h;
  h.bytes.resize(std::min<size_t>(stream_bytes, format::kHeaderBytes));
  if (!h.bytes.empty())
    COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(h.bytes.data(), stream_dev, h.bytes.size(),
                                        cudaMemcpyDeviceToHost, stream));
  COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (h.bytes.size() == format::kHeaderBytes) {
    const uint64_t table_end =
        format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} *
                                   format::load_u32(h.bytes.data() + format::kOffChunkCount);
    // When the table does not fit, this is the whole (damaged) stream, so read_stream_info
    // sees every byte it may look at before it throws.
    const size_t have = static_cast<size_t>(std::min<uint64_t>(table_end, stream_bytes));
    if (have > h.bytes.size()) {
      const size_t at = h.bytes.size();
      h.bytes.resize(have);
      COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(h.bytes.data() + at,
                                          static_cast<const uint8_t*>(stream_dev) + at, have - at,
                                          cudaMemcpyDeviceToHost, stream));
      COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
  }
  // read_stream_info validates the header and the offset table only (codec.h), all of which
  // h.bytes holds; stream_bytes tells it the size of the whole stream.
  h.info = read_stream_info(h.bytes.data(), stream_bytes);
  return h;
}

}  // namespace

// ---- encode ------------------------------------------------------------------------------

namespace {
// -1: not yet read from the environment.
std::atomic<int> g_encoder{-1};
}  // namespace

std::string_view cuda_encoder_name(CudaEncoder encoder) {
  return encoder == CudaEncoder::OneLaunch ? "one-launch" : "passes";
}

CudaEncoder parse_cuda_encoder(std::string_view name) {
  if (name == "passes") return CudaEncoder::Passes;
  if (name == "one-launch") return CudaEncoder::OneLaunch;
  throw CodecError("CUDA encoder '" + std::string(name) + "': expected passes or one-launch", 0);
}

void set_cuda_encoder(CudaEncoder encoder) { g_encoder.store(static_cast<int>(encoder)); }

CudaEncoder cuda_encoder() {
  int e = g_encoder.load();
  if (e < 0) {
    const char* env = std::getenv("COMPCOLL_CUDA_ENCODER");
    const CudaEncoder from_env =
        env != nullptr && *env != '\0' ? parse_cuda_encoder(env) : CudaEncoder::Passes;
    int expected = -1;
    g_encoder.compare_exchange_strong(expected, static_cast<int>(from_env));
    e = g_encoder.load();
  }
  return static_cast<CudaEncoder>(e);
}

size_t cuda_encode_scratch_bytes(CodecId codec, DType dtype, uint64_t elements,
                                 const EncodeOptions& opt) {
  max_encoded_size(codec_by_id(codec), dtype, elements, opt);  // validates the options
  switch (codec) {
    case CodecId::Identity:
      return 0;
    case CodecId::Fp8Hadamard:  // chunk sizes, ends and the scan, as gauss-exp's
      return gpu::scratch_layout(Kind::Gauss, geometry(elements, opt.chunk_elements).chunks).total;
    case CodecId::GaussExp:
    case CodecId::EntropyExp:
      return gpu::scratch_layout(exponent_kind(codec), geometry(elements, opt.chunk_elements).chunks)
          .total;
    case CodecId::NvcompAns:  // max_encoded_size refused it above (codec/cuda/nvcomp.h codes it)
      break;
  }
  throw CodecError(
      "cuda_encode_scratch_bytes: unknown codec id " + std::to_string(static_cast<int>(codec)), 0);
}

namespace {
// A message's arguments, checked before anything is launched (CodecError, its text after
// `entry`: "cuda_encode: " or "cuda_encode_batch: message 3: ").
void check_encode_message(const std::string& entry, const Codec& c, DType dtype, const void* in_dev,
                          uint64_t elements, void* out_dev, size_t out_capacity, uint64_t* out_size_dev,
                          const EncodeOptions& opt) {
  const size_t need = max_encoded_size(c, dtype, elements, opt);
  if (elements / format::chunk_elements_for(opt.chunk_elements, elements) >= UINT32_MAX)
    throw CodecError(entry + "too many elements for one stream", 0);
  if (out_capacity < need)
    throw CodecError(entry + "output capacity " + std::to_string(out_capacity) + " < bound " + std::to_string(need),
                     0);
  if (out_dev == nullptr || !aligned(out_dev, 4))
    throw CodecError(entry + "out_dev must be a 4-byte aligned device pointer", 0);
  if (out_size_dev == nullptr) throw CodecError(entry + "out_size_dev is null", 0);
  if (elements > 0 && (in_dev == nullptr || !aligned(in_dev, dtype_size(dtype))))
    throw CodecError(entry + "in_dev must be a device pointer aligned to the element size", 0);
}

void check_scratch(const char* entry, void* scratch_dev, size_t scratch_bytes, size_t scratch_need) {
  if (scratch_bytes < scratch_need || (scratch_need > 0 && scratch_dev == nullptr))
    throw CodecError(std::string(entry) + ": scratch of " + std::to_string(scratch_bytes) + " bytes < " +
                         std::to_string(scratch_need) + " needed",
                     0);
}

void check_encode_args(const Codec& c, DType dtype, const void* in_dev, uint64_t elements,
                       void* out_dev, size_t out_capacity, uint64_t* out_size_dev,
                       void* scratch_dev, size_t scratch_bytes, const EncodeOptions& opt) {
  check_encode_message("cuda_encode: ", c, dtype, in_dev, elements, out_dev, out_capacity, out_size_dev, opt);
  check_scratch("cuda_encode", scratch_dev, scratch_bytes, cuda_encode_scratch_bytes(c.id(), dtype, elements, opt));
}
}  // namespace

void cuda_encode(CodecId codec, DType dtype, const void* in_dev, uint64_t elements, void* out_dev,
                 size_t out_capacity, uint64_t* out_size_dev, void* scratch_dev,
                 size_t scratch_bytes, const EncodeOptions& opt, cudaStream_t stream) {
  if (codec == CodecId::Fp8Hadamard)
    return cuda_encode_fp8_hadamard({}, dtype, in_dev, elements, out_dev, out_capacity,
                                    out_size_dev, scratch_dev, scratch_bytes, opt, stream);
  check_encode_args(codec_by_id(codec), dtype, in_dev, elements, out_dev, out_capacity,
                    out_size_dev, scratch_dev, scratch_bytes, opt);
  const gpu::Geometry g = geometry(elements, opt.chunk_elements);
  auto* out = static_cast<uint8_t*>(out_dev);
  const bool one_launch = cuda_encoder() == CudaEncoder::OneLaunch;  // gauss-exp only
  if (codec == CodecId::Identity) return gpu::launch_identity_encode(dtype, in_dev, g, out, out_size_dev, stream);
  const bool launched = with_exponent_kernels(codec, dtype, [&](auto kind, auto layout) {
    using L = decltype(layout);
    gpu::launch_exponent_encode<decltype(kind)::value, L>(codec, dtype, static_cast<const typename L::Bits*>(in_dev),
                                                           g, out, out_size_dev, scratch_dev, one_launch, stream);
  });
  if (!launched) throw_no_kernel("cuda_encode", codec, dtype);
}

void cuda_encode_fp8_hadamard(const Fp8HadamardParams& params, DType dtype, const void* in_dev,
                              uint64_t elements, void* out_dev, size_t out_capacity,
                              uint64_t* out_size_dev, void* scratch_dev, size_t scratch_bytes,
                              const EncodeOptions& opt, cudaStream_t stream) {
  const Codec& c = fp8_hadamard_codec(params);  // validates the parameters
  check_encode_args(c, dtype, in_dev, elements, out_dev, out_capacity, out_size_dev, scratch_dev,
                    scratch_bytes, opt);
  const gpu::Geometry g = geometry(elements, opt.chunk_elements);
  auto* out = static_cast<uint8_t*>(out_dev);
  const uint32_t fmt = static_cast<uint32_t>(params.fp8);
  switch (dtype) {
    case DType::BF16:
      return gpu::launch_fp8_encode<fp8bits::Bf16Elem>(dtype, static_cast<const uint16_t*>(in_dev),
                                                       g, out, out_size_dev, scratch_dev,
                                                       params.group, fmt, stream);
    case DType::FP16:
      return gpu::launch_fp8_encode<fp8bits::Fp16Elem>(dtype, static_cast<const uint16_t*>(in_dev),
                                                       g, out, out_size_dev, scratch_dev,
                                                       params.group, fmt, stream);
    case DType::FP32:
      return gpu::launch_fp8_encode<fp8bits::Fp32Elem>(dtype, static_cast<const uint32_t*>(in_dev),
                                                       g, out, out_size_dev, scratch_dev,
                                                       params.group, fmt, stream);
  }
  throw_no_kernel("cuda_encode_fp8_hadamard", CodecId::Fp8Hadamard, dtype);
}

// ---- decode ------------------------------------------------------------------------------

std::string cuda_chunk_status_message(int32_t status) {
  const auto u = static_cast<uint32_t>(status);
  const uint32_t lane = (u >> 8) & 0xFFu;
  const uint32_t element = lane + format::kLanes * ((u >> 16) & 0x7FFFu);
  const std::string where = "lane " + std::to_string(lane) + " element " + std::to_string(element);
  switch (static_cast<CudaChunkStatus>(u & 0xFFu)) {
    case CudaChunkStatus::Ok:
      return {};
    case CudaChunkStatus::BadOffsets:
      return "chunk offsets out of order, range or alignment";
    case CudaChunkStatus::SizeMismatch:
      return "chunk size does not match its contents";
    case CudaChunkStatus::BadMode:
      return "unknown chunk mode at chunk byte 0";
    case CudaChunkStatus::ReservedBytes:
      return "reserved chunk header bytes 2..3 are not zero";
    case CudaChunkStatus::BadSymbolCount:
      return "code table symbol count exceeds the dtype's exponents";
    case CudaChunkStatus::BadCodeTable:
      return "code table entry is invalid";
    case CudaChunkStatus::KraftViolation:
      return "code table lengths violate the Kraft inequality";
    case CudaChunkStatus::LaneBadCode:
      return where + ": bit pattern is no code";
    case CudaChunkStatus::LaneBadExponent:
      return where + ": exponent out of range";
    case CudaChunkStatus::LaneOverrun:  // found after the lane's last element, as on the host
      return "lane " + std::to_string(lane) + ": bitstream exhausted before its last element";
    case CudaChunkStatus::LaneTrailingBits:
      return "lane " + std::to_string(lane) + ": trailing bits after the last element";
    case CudaChunkStatus::Fp8BadHeader:
      return "bad group size, fp8 format or reserved byte 3 in the chunk header";
    case CudaChunkStatus::Fp8BadScale:
      return "group " + std::to_string((u >> 8) & 0x7FFFFFu) + ": scale is negative or not finite";
    case CudaChunkStatus::BadHeader:
      return "the stream's header is not the expected one (codec, dtype, elements, chunk size or "
             "payload size)";
    case CudaChunkStatus::LibraryFailed:
      if (((u >> 8) & 0x7FFFFFu) == 0x7FFFFFu) return "the library's chunk is empty or larger than its slot";
      return "the library failed on it (its status " + std::to_string((u >> 8) & 0x7FFFFFu) + ")";
    case CudaChunkStatus::LibraryBadChunk:
      return "size prefix or padding bytes are not zero";
    case CudaChunkStatus::Truncated:
      return "the stream is cut short: its header states a payload past the bytes received";
  }
  return "unknown chunk status " + std::to_string(status);
}

StreamInfo cuda_read_stream_info(const void* stream_dev, size_t stream_bytes, cudaStream_t stream) {
  return read_prefix(stream_dev, stream_bytes, stream).info;
}

namespace {

// A stream's arguments to a decoder, checked (CodecError, its text after `entry`), and its
// geometry as the kernels take it.
gpu::DecodeGeometry decode_geometry(const std::string& entry, const StreamInfo& info, const void* stream_dev,
                                    size_t stream_bytes, void* out_dev, size_t out_capacity,
                                    int32_t* status_dev) {
  const uint32_t c = info.chunk_elements;
  if (!format::valid_chunk_elements(c))
    throw CodecError(entry + ": bad chunk_elements " + std::to_string(c), 0);
  if (info.elements > (uint64_t{1} << 48) ||
      info.chunk_count != format::chunk_count_for(info.elements, c))
    throw CodecError(entry + ": chunk_count " + std::to_string(info.chunk_count) +
                         " does not match elements " + std::to_string(info.elements),
                     0);
  const uint64_t table_end =
      format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} * info.chunk_count;
  if (table_end > stream_bytes || info.payload_bytes > stream_bytes - table_end)
    throw CodecError(entry + ": header, offset table and payload of " +
                         std::to_string(info.payload_bytes) + " bytes exceed the stream's " +
                         std::to_string(stream_bytes) + " bytes",
                     stream_bytes);
  if (stream_dev == nullptr) throw CodecError(entry + ": stream_dev is null", 0);
  const uint64_t need = info.elements * dtype_size(info.dtype);
  if (out_capacity < need)
    throw CodecError(entry + ": output capacity " + std::to_string(out_capacity) + " < " +
                         std::to_string(need) + " bytes needed",
                     0);
  if (info.elements > 0 && (out_dev == nullptr || !aligned(out_dev, dtype_size(info.dtype))))
    throw CodecError(entry + ": the output must be a device pointer aligned to the element size", 0);
  if (info.chunk_count > 0 && status_dev == nullptr)
    throw CodecError(entry + ": status_dev is null", 0);
  gpu::DecodeGeometry d{geometry(info.elements, c), table_end, info.payload_bytes, {}, info.payload_at_most};
  const gpu::HeaderPrefix prefix = gpu::make_header_prefix(info.codec, info.dtype, d.g);
  std::memcpy(d.header, prefix.bytes, format::kOffPayloadBytes);
  format::store_u64(d.header + format::kOffPayloadBytes, info.payload_bytes);
  return d;
}

// cuda_decode (kAdd false: decoded elements are stored) and cuda_decode_add (true: added with
// the dtype's adder): the checks, then the kernel.
template <bool kAdd>
void decode_into(const char* entry, const StreamInfo& info, const void* stream_dev, size_t stream_bytes,
                 void* out_dev, size_t out_capacity, int32_t* status_dev, cudaStream_t stream) {
  using PutBf16 = std::conditional_t<kAdd, gpu::AddElement<gpu::AddBf16>, expbits::StoreElement>;
  using PutFp16 = std::conditional_t<kAdd, gpu::AddElement<gpu::AddFp16>, expbits::StoreElement>;
  using PutFp32 = std::conditional_t<kAdd, gpu::AddElement<gpu::AddFp32>, expbits::StoreElement>;
  const gpu::DecodeGeometry d =
      decode_geometry(entry, info, stream_dev, stream_bytes, out_dev, out_capacity, status_dev);
  const auto* in = static_cast<const uint8_t*>(stream_dev);
  switch (dispatch_key(info.codec, info.dtype)) {
    case dispatch_key(CodecId::Identity, DType::BF16):
      return gpu::launch_identity_decode<uint16_t, PutBf16>(in, d, static_cast<uint16_t*>(out_dev),
                                                            status_dev, stream);
    case dispatch_key(CodecId::Identity, DType::FP16):
      return gpu::launch_identity_decode<uint16_t, PutFp16>(in, d, static_cast<uint16_t*>(out_dev),
                                                            status_dev, stream);
    case dispatch_key(CodecId::Identity, DType::FP32):
      return gpu::launch_identity_decode<uint32_t, PutFp32>(in, d, static_cast<uint32_t*>(out_dev),
                                                            status_dev, stream);
    default:
      break;
  }
  const bool launched = with_exponent_kernels(info.codec, info.dtype, [&](auto kind, auto layout) {
    using L = decltype(layout);
    using Put = std::conditional_t<std::is_same_v<L, Bf16Layout>, PutBf16,
                                   std::conditional_t<std::is_same_v<L, Fp16Layout>, PutFp16, PutFp32>>;
    gpu::launch_exponent_decode<decltype(kind)::value, L, Put>(in, d, static_cast<typename L::Bits*>(out_dev),
                                                               status_dev, stream);
  });
  if (launched) return;
  if (!kAdd) {
    switch (dispatch_key(info.codec, info.dtype)) {
      case dispatch_key(CodecId::Fp8Hadamard, DType::BF16):
        return gpu::launch_fp8_decode<fp8bits::Bf16Elem>(in, d, static_cast<uint16_t*>(out_dev),
                                                         status_dev, stream);
      case dispatch_key(CodecId::Fp8Hadamard, DType::FP16):
        return gpu::launch_fp8_decode<fp8bits::Fp16Elem>(in, d, static_cast<uint16_t*>(out_dev),
                                                         status_dev, stream);
      case dispatch_key(CodecId::Fp8Hadamard, DType::FP32):
        return gpu::launch_fp8_decode<fp8bits::Fp32Elem>(in, d, static_cast<uint32_t*>(out_dev),
                                                         status_dev, stream);
      default:
        break;
    }
  }
  throw_no_kernel(entry, info.codec, info.dtype);
}

}  // namespace

void cuda_decode(const StreamInfo& info, const void* stream_dev, size_t stream_bytes, void* out_dev,
                 size_t out_capacity, int32_t* status_dev, cudaStream_t stream) {
  decode_into<false>("cuda_decode", info, stream_dev, stream_bytes, out_dev, out_capacity, status_dev, stream);
}

void cuda_decode_add(const StreamInfo& info, const void* stream_dev, size_t stream_bytes, void* acc_dev,
                     size_t acc_capacity, int32_t* status_dev, cudaStream_t stream) {
  decode_into<true>("cuda_decode_add", info, stream_dev, stream_bytes, acc_dev, acc_capacity, status_dev, stream);
}

StreamInfo cuda_decode_checked(const void* stream_dev, size_t stream_bytes, void* out_dev,
                               size_t out_capacity, cudaStream_t stream) {
  const HostPrefix h = read_prefix(stream_dev, stream_bytes, stream);
  const StreamInfo& info = h.info;
  const size_t count = info.chunk_count;
  int32_t* status_dev = nullptr;
  if (count > 0)
    COMPCOLL_CUDA_CHECK(
        cudaMallocAsync(reinterpret_cast<void**>(&status_dev), count * sizeof(int32_t), stream));
  std::vector<int32_t> status(count);
  try {
    cuda_decode(info, stream_dev, stream_bytes, out_dev, out_capacity, status_dev, stream);
    if (count > 0)
      COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(status.data(), status_dev, count * sizeof(int32_t),
                                          cudaMemcpyDeviceToHost, stream));
  } catch (...) {
    if (status_dev != nullptr) cudaFreeAsync(status_dev, stream);  // already failing: best effort
    throw;
  }
  if (status_dev != nullptr) COMPCOLL_CUDA_CHECK(cudaFreeAsync(status_dev, stream));
  COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream));
  const uint64_t payload_at = format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} * count;
  for (size_t c = 0; c < count; ++c) {
    if (status[c] == 0) continue;
    const uint64_t begin = c == 0 ? 0
                                  : format::load_u64(h.bytes.data() + format::kHeaderBytes +
                                                     format::kOffsetEntryBytes * (c - 1));
    throw CodecError(std::string(codec_by_id(info.codec).name()) + " stream: chunk " +
                         std::to_string(c) + " at byte offset " +
                         std::to_string(payload_at + begin) + ": " +
                         cuda_chunk_status_message(status[c]),
                     payload_at + begin);
  }
  return info;
}

// ---- batches ---------------------------------------------------------------------------------

size_t cuda_batch_messages() { return gpu::kBatchItems; }

namespace {

// f(begin, end) for each group [begin, end) of at most gpu::kBatchItems messages, in order.
template <class F>
void for_each_group(size_t count, F&& f) {
  for (size_t at = 0; at < count; at += gpu::kBatchItems) f(at, std::min<size_t>(count, at + gpu::kBatchItems));
}

std::string message_entry(const char* entry, size_t i) {
  return std::string(entry) + ": message " + std::to_string(i);
}

}  // namespace

size_t cuda_encode_batch_scratch_bytes(CodecId codec, DType dtype, const uint64_t* elements, size_t count,
                                       const EncodeOptions& opt) {
  if (count > 0 && elements == nullptr) throw CodecError("cuda_encode_batch_scratch_bytes: elements is null", 0);
  size_t most = 0;
  if (codec != CodecId::GaussExp && codec != CodecId::EntropyExp) {  // a call a message, one after another
    for (size_t i = 0; i < count; ++i) most = std::max(most, cuda_encode_scratch_bytes(codec, dtype, elements[i], opt));
    return most;
  }
  // The per-chunk scratch of a group's messages together, one group after another.
  for_each_group(count, [&](size_t begin, size_t end) {
    uint64_t chunks = 0;
    for (size_t i = begin; i < end; ++i) {
      max_encoded_size(codec_by_id(codec), dtype, elements[i], opt);  // validates the options
      const uint32_t c = format::chunk_elements_for(opt.chunk_elements, elements[i]);
      chunks += (elements[i] + c - 1) / c;
    }
    if (chunks >= UINT32_MAX)
      throw CodecError("cuda_encode_batch_scratch_bytes: messages " + std::to_string(begin) + " to " +
                           std::to_string(end - 1) + " have too many chunks for one batch",
                       0);
    most = std::max(most, gpu::scratch_layout(exponent_kind(codec), static_cast<uint32_t>(chunks)).total);
  });
  return most;
}

void cuda_encode_batch(CodecId codec, DType dtype, const CudaEncodeItem* items, size_t count, void* scratch_dev,
                       size_t scratch_bytes, const EncodeOptions& opt, cudaStream_t stream) {
  constexpr const char* kEntry = "cuda_encode_batch";
  if (count > 0 && items == nullptr) throw CodecError("cuda_encode_batch: items is null", 0);
  const Codec& c = codec_by_id(codec);
  std::vector<uint64_t> elements(count);
  for (size_t i = 0; i < count; ++i) {
    const CudaEncodeItem& m = items[i];
    check_encode_message(message_entry(kEntry, i) + ": ", c, dtype, m.in_dev, m.elements, m.out_dev, m.out_capacity,
                         m.out_size_dev, opt);
    elements[i] = m.elements;
  }
  check_scratch(kEntry, scratch_dev, scratch_bytes,
                cuda_encode_batch_scratch_bytes(codec, dtype, elements.data(), count, opt));
  if (codec == CodecId::Fp8Hadamard) {  // no batch kernels: a call a message
    for (size_t i = 0; i < count; ++i)
      cuda_encode(codec, dtype, items[i].in_dev, items[i].elements, items[i].out_dev, items[i].out_capacity,
                  items[i].out_size_dev, scratch_dev, scratch_bytes, opt, stream);
    return;
  }
  for_each_group(count, [&](size_t begin, size_t end) {
    gpu::EncodeBatch b{};
    gpu::BatchShape shape;
    shape.n = static_cast<uint32_t>(end - begin);
    for (size_t i = begin; i < end; ++i) {
      const gpu::Geometry g = geometry(items[i].elements, opt.chunk_elements);
      b.items[i - begin] = {items[i].in_dev, g, static_cast<uint8_t*>(items[i].out_dev), items[i].out_size_dev,
                            shape.total_chunks, gpu::make_header_prefix(codec, dtype, g)};
      shape.max_chunks = std::max(shape.max_chunks, g.chunks);
      shape.max_chunk_elements = std::max(shape.max_chunk_elements, g.chunk_elements);
      shape.total_chunks += g.chunks;  // below UINT32_MAX: cuda_encode_batch_scratch_bytes checked it
    }
    if (codec == CodecId::Identity) {
      if (dtype_size(dtype) == 2) return gpu::launch_identity_encode_batch<uint16_t>(b, shape, stream);
      return gpu::launch_identity_encode_batch<uint32_t>(b, shape, stream);
    }
    const bool launched = with_exponent_kernels(codec, dtype, [&](auto kind, auto layout) {
      gpu::launch_exponent_encode_batch<decltype(kind)::value, decltype(layout)>(b, shape, scratch_dev, stream);
    });
    if (!launched) throw_no_kernel(kEntry, codec, dtype);
  });
}

void cuda_decode_batch(const CudaDecodeItem* items, size_t count, cudaStream_t stream) {
  constexpr const char* kEntry = "cuda_decode_batch";
  if (count == 0) return;
  if (items == nullptr) throw CodecError("cuda_decode_batch: items is null", 0);
  const CodecId codec = items[0].info.codec;
  const DType dtype = items[0].info.dtype;
  std::vector<gpu::DecodeGeometry> d(count);
  for (size_t i = 0; i < count; ++i) {
    const CudaDecodeItem& m = items[i];
    if (m.info.codec != codec || m.info.dtype != dtype)
      throw CodecError(message_entry(kEntry, i) + ": codec id " + std::to_string(static_cast<int>(m.info.codec)) +
                           " and dtype code " + std::to_string(static_cast<int>(m.info.dtype)) +
                           " where message 0 has " + std::to_string(static_cast<int>(codec)) + " and " +
                           std::to_string(static_cast<int>(dtype)) + ": a batch is of one codec and dtype",
                       0);
    d[i] = decode_geometry(message_entry(kEntry, i), m.info, m.stream_dev, m.stream_bytes, m.out_dev,
                           m.out_capacity, m.status_dev);
  }
  if (codec == CodecId::Fp8Hadamard) {  // no batch kernels: a call a message
    for (size_t i = 0; i < count; ++i)
      cuda_decode(items[i].info, items[i].stream_dev, items[i].stream_bytes, items[i].out_dev,
                  items[i].out_capacity, items[i].status_dev, stream);
    return;
  }
  for_each_group(count, [&](size_t begin, size_t end) {
    gpu::DecodeBatch b{};
    gpu::BatchShape shape;
    shape.n = static_cast<uint32_t>(end - begin);
    for (size_t i = begin; i < end; ++i) {
      b.items[i - begin] = {static_cast<const uint8_t*>(items[i].stream_dev), d[i], items[i].out_dev,
                            items[i].status_dev};
      shape.max_chunks = std::max(shape.max_chunks, d[i].g.chunks);
      shape.max_chunk_elements = std::max(shape.max_chunk_elements, d[i].g.chunk_elements);
    }
    if (codec == CodecId::Identity) {
      if (dtype_size(dtype) == 2) return gpu::launch_identity_decode_batch<uint16_t>(b, shape, stream);
      return gpu::launch_identity_decode_batch<uint32_t>(b, shape, stream);
    }
    const bool launched = with_exponent_kernels(codec, dtype, [&](auto kind, auto layout) {
      gpu::launch_exponent_decode_batch<decltype(kind)::value, decltype(layout)>(b, shape, stream);
    });
    if (!launched) throw_no_kernel(kEntry, codec, dtype);
  });
}

// ---- library codecs ------------------------------------------------------------------------

void cuda_library_chunk_table(void* base_dev, uint64_t bytes, uint64_t chunk_bytes, void** ptrs_dev,
                              size_t* sizes_dev, cudaStream_t stream) {
  if (chunk_bytes == 0) throw CodecError("cuda_library_chunk_table: chunk_bytes is 0", 0);
  const uint64_t chunks = (bytes + chunk_bytes - 1) / chunk_bytes;
  if (chunks == 0) return;
  if (base_dev == nullptr || ptrs_dev == nullptr)
    throw CodecError("cuda_library_chunk_table: a device pointer is null", 0);
  gpu::library_table_kernel<<<gpu::library_blocks(chunks, gpu::kLibraryThreads), gpu::kLibraryThreads, 0, stream>>>(
      static_cast<uint8_t*>(base_dev), bytes, chunk_bytes, chunks, ptrs_dev, sizes_dev);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

size_t cuda_library_pack_scratch_bytes(uint32_t chunks) { return gpu::library_pack_layout(chunks).total; }

void cuda_library_pack(CodecId codec, DType dtype, uint64_t elements, uint32_t chunk_elements,
                       const void* slots_dev, uint64_t slot_bytes, const size_t* compressed_bytes_dev,
                       const int32_t* library_status_dev, void* out_dev, size_t out_capacity,
                       uint64_t* out_size_dev, int32_t* status_dev, void* scratch_dev, size_t scratch_bytes,
                       cudaStream_t stream) {
  const gpu::Geometry g = geometry(elements, chunk_elements);
  const uint64_t need = format::library_stream_bound(g.chunks, slot_bytes);
  if (chunk_elements == 0 || out_dev == nullptr || out_size_dev == nullptr)
    throw CodecError("cuda_library_pack: no chunk size, or a null output", 0);
  if (!aligned(out_dev, format::kLibraryAlign) || (g.chunks > 0 && !aligned(slots_dev, format::kLibraryAlign)) ||
      slot_bytes % format::kLibraryAlign != 0)
    throw CodecError("cuda_library_pack: the stream, the slots and their size must be 16-byte aligned", 0);
  if (out_capacity < need)
    throw CodecError("cuda_library_pack: output capacity " + std::to_string(out_capacity) + " < " +
                         std::to_string(need) + " bytes needed",
                     0);
  const gpu::LibraryPackLayout layout = gpu::library_pack_layout(g.chunks);
  if (g.chunks > 0 && (compressed_bytes_dev == nullptr || status_dev == nullptr || scratch_bytes < layout.total ||
                       scratch_dev == nullptr))
    throw CodecError("cuda_library_pack: null sizes or statuses, or scratch under " + std::to_string(layout.total) +
                         " bytes",
                     0);
  auto* out = static_cast<uint8_t*>(out_dev);
  const gpu::HeaderPrefix header = gpu::make_header_prefix(codec, dtype, g);
  if (g.chunks == 0) return gpu::launch_finish(out, header, g, nullptr, out_size_dev, stream);
  const gpu::LibraryPackScratch s = gpu::bind_library_scratch(layout, scratch_dev);
  const uint32_t blocks = gpu::library_blocks(g.chunks, gpu::kLibraryThreads);
  gpu::library_sizes_kernel<<<blocks, gpu::kLibraryThreads, 0, stream>>>(compressed_bytes_dev, library_status_dev,
                                                                         g.chunks, slot_bytes, s.chunk_bytes, status_dev);
  size_t temp = s.scan_temp_bytes;
  COMPCOLL_CUDA_CHECK(cub::DeviceScan::InclusiveSum(s.scan_temp, temp, s.chunk_bytes, s.chunk_end, g.chunks, stream));
  const uint64_t payload_at = format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} * g.chunks;
  gpu::library_pack_kernel<<<std::min<uint32_t>(g.chunks, 65535), gpu::kLibraryThreads, 0, stream>>>(
      static_cast<const uint8_t*>(slots_dev), slot_bytes, compressed_bytes_dev, status_dev, s.chunk_end, g.chunks,
      payload_at, out);
  gpu::launch_finish(out, header, g, s.chunk_end, out_size_dev, stream);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

void cuda_library_unpack(const StreamInfo& info, const void* stream_dev, size_t stream_bytes, void** chunks_dev,
                         size_t* compressed_bytes_dev, int32_t* status_dev, cudaStream_t stream) {
  const uint32_t c = info.chunk_elements;
  if (c == 0 || info.chunk_count != format::chunk_count_for(info.elements, c))
    throw CodecError("cuda_library_unpack: chunk_count " + std::to_string(info.chunk_count) +
                         " does not match elements " + std::to_string(info.elements),
                     0);
  const uint64_t table_end = format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} * info.chunk_count;
  if (table_end > stream_bytes || info.payload_bytes != stream_bytes - table_end)
    throw CodecError("cuda_library_unpack: header, offset table and payload of " + std::to_string(info.payload_bytes) +
                         " bytes are not the stream's " + std::to_string(stream_bytes) + " bytes",
                     stream_bytes);
  if (info.chunk_count == 0) return;
  if (stream_dev == nullptr || chunks_dev == nullptr || compressed_bytes_dev == nullptr || status_dev == nullptr)
    throw CodecError("cuda_library_unpack: a device pointer is null", 0);
  if (!aligned(stream_dev, format::kLibraryAlign))
    throw CodecError("cuda_library_unpack: the stream must be 16-byte aligned", 0);
  gpu::DecodeGeometry d{geometry(info.elements, c), table_end, info.payload_bytes, {}, info.payload_at_most};
  const gpu::HeaderPrefix prefix = gpu::make_header_prefix(info.codec, info.dtype, d.g);
  std::memcpy(d.header, prefix.bytes, format::kOffPayloadBytes);
  format::store_u64(d.header + format::kOffPayloadBytes, info.payload_bytes);
  gpu::library_unpack_kernel<<<gpu::library_blocks(info.chunk_count, gpu::kLibraryThreads), gpu::kLibraryThreads, 0,
                               stream>>>(static_cast<const uint8_t*>(stream_dev), d, chunks_dev, compressed_bytes_dev,
                                         status_dev);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

void cuda_library_finish(uint32_t chunks, const int32_t* library_status_dev, const size_t* decoded_bytes_dev,
                         const size_t* expected_bytes_dev, int32_t* status_dev, cudaStream_t stream) {
  if (chunks == 0) return;
  if (library_status_dev == nullptr || decoded_bytes_dev == nullptr || expected_bytes_dev == nullptr ||
      status_dev == nullptr)
    throw CodecError("cuda_library_finish: a device pointer is null", 0);
  gpu::library_finish_kernel<<<gpu::library_blocks(chunks, gpu::kLibraryThreads), gpu::kLibraryThreads, 0, stream>>>(
      chunks, library_status_dev, decoded_bytes_dev, expected_bytes_dev, status_dev);
  COMPCOLL_CUDA_CHECK_LAUNCHES(stream);
}

}  // namespace compcoll
