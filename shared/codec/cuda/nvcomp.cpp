// shared/codec/cuda/nvcomp.cpp — nvcomp-ans (nvcomp.h) and the loader of libnvcomp.so.6
// (nvcomp_api.h). Built only where CMake found nvCOMP's headers.
#include "codec/cuda/nvcomp.h"

#include <dlfcn.h>

#include <algorithm>
#include <type_traits>

#include "codec/codec.h"
#include "codec/cuda/check.h"
#include "codec/cuda/codec_cuda.h"
#include "codec/cuda/nvcomp_api.h"

namespace compcoll {

const NvcompApi& nvcomp_api() {
  static const NvcompApi loaded = [] {
    NvcompApi a;
    void* lib = dlopen("libnvcomp.so.6", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      a.error = std::string("libnvcomp.so.6 not loadable (") + (e ? e : "?") +
                "): pip install nvidia-libnvcomp-cu13, or put its lib64 folder on LD_LIBRARY_PATH";
      return a;
    }
    auto load = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn && a.error.empty()) a.error = std::string("libnvcomp.so.6 has no ") + name;
    };
    load(a.nvcompBatchedANSCompressAsync, "nvcompBatchedANSCompressAsync");
    load(a.nvcompBatchedANSCompressGetMaxOutputChunkSize, "nvcompBatchedANSCompressGetMaxOutputChunkSize");
    load(a.nvcompBatchedANSCompressGetRequiredAlignments, "nvcompBatchedANSCompressGetRequiredAlignments");
    load(a.nvcompBatchedANSCompressGetTempSize, "nvcompBatchedANSCompressGetTempSize");
    load(a.nvcompBatchedANSDecompressAsync, "nvcompBatchedANSDecompressAsync");
    load(a.nvcompBatchedANSDecompressGetRequiredAlignments, "nvcompBatchedANSDecompressGetRequiredAlignments");
    load(a.nvcompBatchedANSDecompressGetTempSize, "nvcompBatchedANSDecompressGetTempSize");
    load(a.nvcompBatchedBitcompCompressAsync, "nvcompBatchedBitcompCompressAsync");
    load(a.nvcompBatchedBitcompCompressGetMaxOutputChunkSize, "nvcompBatchedBitcompCompressGetMaxOutputChunkSize");
    load(a.nvcompBatchedBitcompCompressGetRequiredAlignments, "nvcompBatchedBitcompCompressGetRequiredAlignments");
    load(a.nvcompBatchedBitcompCompressGetTempSize, "nvcompBatchedBitcompCompressGetTempSize");
    load(a.nvcompBatchedBitcompDecompressAsync, "nvcompBatchedBitcompDecompressAsync");
    load(a.nvcompBatchedBitcompDecompressGetRequiredAlignments, "nvcompBatchedBitcompDecompressGetRequiredAlignments");
    load(a.nvcompBatchedBitcompDecompressGetTempSize, "nvcompBatchedBitcompDecompressGetTempSize");
    load(a.nvcompGetProperties, "nvcompGetProperties");
    load(a.nvcompGetStatusString, "nvcompGetStatusString");
    return a;
  }();
  return loaded;
}

std::string nvcomp_unavailable() { return nvcomp_api().error; }

std::string nvcomp_version() {
  if (!nvcomp_api().error.empty()) return "nvCOMP (not loaded)";
  nvcompProperties_t p{};
  if (nvcomp_api().nvcompGetProperties(&p) != nvcompSuccess) return "nvCOMP (version unknown)";
  return "nvCOMP " + std::to_string(p.version / 1000) + "." + std::to_string(p.version % 1000 / 100) + "." +
         std::to_string(p.version % 100);
}

std::string nvcomp_library_file() {
  if (!nvcomp_api().error.empty()) return "";
  Dl_info info{};
  if (!dladdr(reinterpret_cast<const void*>(nvcomp_api().nvcompGetProperties), &info) || !info.dli_fname) return "";
  return info.dli_fname;
}

nvcompBatchedANSCompressOpts_t nvcomp_ans_compress_opts(DType dtype) {
  nvcompBatchedANSCompressOpts_t c = nvcompBatchedANSCompressDefaultOpts;
  c.data_type = dtype == DType::FP32 ? NVCOMP_TYPE_FLOAT32 : NVCOMP_TYPE_FLOAT16;
  return c;
}

nvcompBatchedANSDecompressOpts_t nvcomp_ans_decompress_opts(DType dtype) {
  nvcompBatchedANSDecompressOpts_t d = nvcompBatchedANSDecompressDefaultOpts;
  d.data_type = nvcomp_ans_compress_opts(dtype).data_type;
  return d;
}

namespace {

static_assert(sizeof(nvcompStatus_t) == sizeof(int32_t), "the container kernels read nvCOMP's statuses as int32");

const NvcompApi& api() {
  const NvcompApi& a = nvcomp_api();
  if (!a.error.empty()) throw CodecError("nvcomp-ans: " + a.error, 0);
  return a;
}

void check(nvcompStatus_t status, const char* call) {
  if (status != nvcompSuccess)
    throw CodecError(std::string("nvcomp-ans: ") + call + ": " + nvcomp_api().nvcompGetStatusString(status) + " (" +
                         std::to_string(static_cast<int>(status)) + ")",
                     0);
}

const LibraryCodec& ans_codec() { return *find_library_codec(kNvcompAnsName); }

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// A message: its bytes, chunks and nvCOMP's largest compressed chunk, rounded to the container's
// alignment (the slot of each compressed chunk).
struct Message {
  uint64_t bytes = 0;
  uint32_t chunk_elements = 0, chunks = 0;
  size_t max_chunk = 0;   // uncompressed bytes of the largest chunk
  uint64_t slot = 0;      // bytes per compressed slot
};

Message message(DType dtype, uint64_t elements) {
  Message m;
  m.bytes = elements * dtype_size(dtype);
  m.chunk_elements = library_chunk_elements(ans_codec(), dtype);
  m.chunks = format::chunk_count_for(elements, m.chunk_elements);
  m.max_chunk = static_cast<size_t>(std::min<uint64_t>(m.bytes, kNvcompChunkBytes));
  size_t most = 0;
  check(api().nvcompBatchedANSCompressGetMaxOutputChunkSize(kNvcompChunkBytes, nvcomp_ans_compress_opts(dtype),
                                                            &most),
        "nvcompBatchedANSCompressGetMaxOutputChunkSize");
  m.slot = format::align_up64(most, format::kLibraryAlign);
  return m;
}

// The scratch of one call, carved at 256-byte boundaries from an arbitrary base. Encode: the
// staging copy of a misaligned input, the batch's arrays, the slots, nvCOMP's temporary memory
// and cuda_library_pack's; decode: the staging output, the arrays, nvCOMP's temporary memory.
struct Scratch {
  uint8_t* staging = nullptr;
  void** data_ptrs = nullptr;   // uncompressed chunks
  size_t* data_bytes = nullptr;
  void** comp_ptrs = nullptr;   // compressed chunks (encode: the slots)
  size_t* comp_bytes = nullptr;
  size_t* decoded_bytes = nullptr;  // decode
  nvcompStatus_t* status = nullptr;
  uint8_t* slots = nullptr;         // encode
  void* temp = nullptr;
  size_t temp_bytes = 0;
  void* pack = nullptr;  // encode
  size_t pack_bytes = 0;
  size_t total = 0;  // with the slack that aligns the base
};

Scratch layout(bool encode, DType dtype, const Message& m, void* base) {
  constexpr size_t kAlign = 256;
  Scratch s;
  if (m.chunks == 0) return s;
  if (encode)
    check(api().nvcompBatchedANSCompressGetTempSize(m.chunks, m.max_chunk, nvcomp_ans_compress_opts(dtype),
                                                    &s.temp_bytes, m.bytes, nullptr),
          "nvcompBatchedANSCompressGetTempSize");
  else
    check(api().nvcompBatchedANSDecompressGetTempSize(m.chunks, m.max_chunk, nvcomp_ans_decompress_opts(dtype),
                                                      &s.temp_bytes, m.bytes, nullptr),
          "nvcompBatchedANSDecompressGetTempSize");
  if (encode) s.pack_bytes = cuda_library_pack_scratch_bytes(m.chunks);
  // Offsets from the aligned base; pointers only where there is a base (the sizes are asked
  // without one).
  const uintptr_t aligned_base = format::align_up64(reinterpret_cast<uintptr_t>(base), kAlign);
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t offset = at;
    at += format::align_up64(bytes, kAlign);
    return base ? reinterpret_cast<uint8_t*>(aligned_base + offset) : nullptr;
  };
  const size_t n = m.chunks;
  s.staging = take(m.bytes);
  s.data_ptrs = reinterpret_cast<void**>(take(n * sizeof(void*)));
  s.data_bytes = reinterpret_cast<size_t*>(take(n * sizeof(size_t)));
  s.comp_ptrs = reinterpret_cast<void**>(take(n * sizeof(void*)));
  s.comp_bytes = reinterpret_cast<size_t*>(take(n * sizeof(size_t)));
  s.status = reinterpret_cast<nvcompStatus_t*>(take(n * sizeof(nvcompStatus_t)));
  if (encode) {
    s.slots = take(n * m.slot);
    s.pack = take(s.pack_bytes);
  } else {
    s.decoded_bytes = reinterpret_cast<size_t*>(take(n * sizeof(size_t)));
  }
  s.temp = take(s.temp_bytes);
  s.total = kAlign + at;  // with the slack
  return s;
}

void check_scratch(const char* entry, const Scratch& s, void* scratch, size_t scratch_bytes) {
  if (s.total > 0 && (scratch == nullptr || scratch_bytes < s.total))
    throw CodecError(std::string(entry) + ": scratch of " + std::to_string(scratch_bytes) + " bytes, " +
                         std::to_string(s.total) + " needed",
                     0);
}

}  // namespace

size_t nvcomp_ans_max_encoded_size(DType dtype, uint64_t elements) {
  const Message m = message(dtype, elements);
  return library_max_encoded_size(ans_codec(), dtype, elements, m.slot);
}

size_t nvcomp_ans_encode_scratch_bytes(DType dtype, uint64_t elements) {
  return layout(true, dtype, message(dtype, elements), nullptr).total;
}

size_t nvcomp_ans_decode_scratch_bytes(DType dtype, uint64_t elements) {
  return layout(false, dtype, message(dtype, elements), nullptr).total;
}

void nvcomp_ans_encode(DType dtype, const void* in_dev, uint64_t elements, void* out_dev, size_t out_capacity,
                       uint64_t* out_size_dev, int32_t* status_dev, void* scratch_dev, size_t scratch_bytes,
                       cudaStream_t stream) {
  const Message m = message(dtype, elements);
  const size_t most = library_max_encoded_size(ans_codec(), dtype, elements, m.slot);
  if (out_capacity < most)
    throw CodecError("nvcomp_ans_encode: output capacity " + std::to_string(out_capacity) + " < " +
                         std::to_string(most) + " bytes (nvcomp_ans_max_encoded_size)",
                     0);
  if (m.chunks > 0 && (in_dev == nullptr || !aligned(in_dev, dtype_size(dtype)) || status_dev == nullptr))
    throw CodecError("nvcomp_ans_encode: the input must be a device pointer aligned to the element size, and "
                     "status_dev not null",
                     0);
  const Scratch s = layout(true, dtype, m, scratch_dev);
  check_scratch("nvcomp_ans_encode", s, scratch_dev, scratch_bytes);
  if (m.chunks > 0) {
    const void* in = in_dev;
    if (!aligned(in, format::kLibraryAlign)) {  // nvCOMP reads chunks at 16-byte boundaries
      COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(s.staging, in_dev, m.bytes, cudaMemcpyDeviceToDevice, stream));
      in = s.staging;
    }
    cuda_library_chunk_table(const_cast<void*>(in), m.bytes, kNvcompChunkBytes, s.data_ptrs, s.data_bytes, stream);
    cuda_library_chunk_table(s.slots, uint64_t{m.chunks} * m.slot, m.slot, s.comp_ptrs, nullptr, stream);
    check(api().nvcompBatchedANSCompressAsync(s.data_ptrs, s.data_bytes, m.max_chunk, m.chunks, s.temp, s.temp_bytes,
                                              s.comp_ptrs, s.comp_bytes, nvcomp_ans_compress_opts(dtype), s.status,
                                              stream),
          "nvcompBatchedANSCompressAsync");
  }
  cuda_library_pack(CodecId::NvcompAns, dtype, elements, m.chunk_elements, s.slots, m.slot, s.comp_bytes,
                    reinterpret_cast<const int32_t*>(s.status), out_dev, out_capacity, out_size_dev, status_dev, s.pack,
                    s.pack_bytes, stream);
}

void nvcomp_ans_decode(DType dtype, uint64_t elements, const void* stream_dev, size_t stream_bytes, void* out_dev,
                       int32_t* status_dev, void* scratch_dev, size_t scratch_bytes, cudaStream_t stream) {
  StreamInfo info = library_stream_info(ans_codec(), dtype, elements, stream_bytes);
  info.payload_at_most = true;  // the stream within stream_bytes, as decode() reads a stream
  const Message m = message(dtype, elements);
  if (m.chunks == 0) return;
  if (out_dev == nullptr || !aligned(out_dev, dtype_size(dtype)))
    throw CodecError("nvcomp_ans_decode: the output must be a device pointer aligned to the element size", 0);
  const Scratch s = layout(false, dtype, m, scratch_dev);
  check_scratch("nvcomp_ans_decode", s, scratch_dev, scratch_bytes);
  void* out = aligned(out_dev, format::kLibraryAlign) ? out_dev : s.staging;
  cuda_library_unpack(info, stream_dev, stream_bytes, s.comp_ptrs, s.comp_bytes, status_dev, stream);
  cuda_library_chunk_table(out, m.bytes, kNvcompChunkBytes, s.data_ptrs, s.data_bytes, stream);
  check(api().nvcompBatchedANSDecompressAsync(s.comp_ptrs, s.comp_bytes, s.data_bytes, s.decoded_bytes, m.chunks,
                                              s.temp, s.temp_bytes, s.data_ptrs, nvcomp_ans_decompress_opts(dtype), s.status,
                                              stream),
        "nvcompBatchedANSDecompressAsync");
  cuda_library_finish(m.chunks, reinterpret_cast<const int32_t*>(s.status), s.decoded_bytes, s.data_bytes, status_dev,
                      stream);
  if (out != out_dev) COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(out_dev, out, m.bytes, cudaMemcpyDeviceToDevice, stream));
}

}  // namespace compcoll
