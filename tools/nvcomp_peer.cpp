// tools/nvcomp_peer.cpp — nvCOMP's batched ANS and Bitcomp (nvCOMP 6 C API) in
// `compcoll-bench codec --device cuda` and (ANS) `calibrate --device cuda`; see nvcomp_peer.h.
// Built only where CMake found nvCOMP's headers; the library is opened at run time.
//
// The input is cut into kNvcompChunkBytes (64 KiB) chunks, the batched API's usual size (its
// headers advise 64 KiB for ANS decode speed); chunk i starts at input_dev + i * 64 KiB, so
// every chunk is read in place from the buffer the compcoll kernels read. Compressed chunks go
// to slots of the API's maximum output size each, decoded chunks to a buffer of the input's
// size. One call of the API compresses (or decompresses) the whole batch; that call is what is
// timed. The chunk pointer and size arrays are built once, before timing.
//
// Data types, matched to the tensor's dtype where the API has one:
//   ANS      nvcomp-ans's options (codec/cuda/nvcomp_api.h: data_type NVCOMP_TYPE_FLOAT16 for
//            bf16 and fp16, NVCOMP_TYPE_FLOAT32 for fp32; everything else the default options:
//            rANS, 8 sub-chunks, exact histograms).
//   Bitcomp  lossless, algorithm 0 (default), data_type NVCOMP_TYPE_FLOAT16 for fp16,
//            NVCOMP_TYPE_FLOAT32 for fp32 and NVCOMP_TYPE_USHORT for bf16 (no bf16 type: the
//            16-bit words as unsigned integers).
// Decompression names the same data type (ANS; Bitcomp reads it from its stream) and leaves the
// backend to nvCOMP (NVCOMP_DECOMPRESS_BACKEND_DEFAULT).
#include "nvcomp_peer.h"


#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include "codec/cuda/check.h"
#include "codec/cuda/nvcomp_api.h"

namespace compcoll::bench {

namespace {

// The library's functions, opened at run time (codec/cuda/nvcomp_api.h).
const NvcompApi& api() { return nvcomp_api(); }

// A peer's failure: its message becomes the result's error.
class PeerFailure : public std::runtime_error {
 public:
  using runtime_error::runtime_error;
};

void check(nvcompStatus_t status, const char* call) {
  if (status != nvcompSuccess)
    throw PeerFailure(std::string(call) + ": " + api().nvcompGetStatusString(status) + " (" +
                      std::to_string(static_cast<int>(status)) + ")");
}

struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceBuffer = std::unique_ptr<void, CudaFree>;

DeviceBuffer device_alloc(size_t bytes) {
  void* p = nullptr;
  if (bytes) COMPCOLL_CUDA_CHECK(cudaMalloc(&p, bytes));
  return DeviceBuffer(p);
}

bool aligned(const void* p, size_t alignment) {
  return alignment <= 1 || reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

size_t round_up(size_t n, size_t to) { return to <= 1 ? n : (n + to - 1) / to * to; }

// The device arrays one batched call takes, `n` entries each.
struct Batch {
  size_t n = 0, max_chunk = 0, total = 0;
  const void* const* in_ptrs = nullptr;  // into the context's input
  const size_t* in_bytes = nullptr;      // also the decoded buffers' sizes
  void* const* comp_ptrs = nullptr;
  size_t* comp_bytes = nullptr;
  void* const* out_ptrs = nullptr;
  size_t* out_bytes = nullptr;  // decoded bytes per chunk
  nvcompStatus_t* comp_status = nullptr;
  nvcompStatus_t* decomp_status = nullptr;
  void* comp_temp = nullptr;
  size_t comp_temp_bytes = 0;
  void* decomp_temp = nullptr;
  size_t decomp_temp_bytes = 0;
};

// One nvCOMP algorithm with its options bound: the calls of its batched C API.
struct Algorithm {
  std::string name;
  std::function<void(nvcompAlignmentRequirements_t& comp, nvcompAlignmentRequirements_t& decomp)> alignments;
  std::function<size_t(size_t max_chunk)> max_output_chunk;
  // Temporary bytes for compression and decompression of n chunks of at most max_chunk.
  std::function<std::pair<size_t, size_t>(size_t n, size_t max_chunk, size_t total, cudaStream_t)> temp_bytes;
  std::function<void(const Batch&, cudaStream_t)> compress, decompress;
};

Algorithm ans(DType dtype) {
  const nvcompBatchedANSCompressOpts_t c = nvcomp_ans_compress_opts(dtype);  // as nvcomp-ans runs it
  const nvcompBatchedANSDecompressOpts_t d = nvcomp_ans_decompress_opts(dtype);
  Algorithm a;
  a.name = kNvcompAnsName;
  a.alignments = [c, d](nvcompAlignmentRequirements_t& ca, nvcompAlignmentRequirements_t& da) {
    check(api().nvcompBatchedANSCompressGetRequiredAlignments(c, &ca), "nvcompBatchedANSCompressGetRequiredAlignments");
    check(api().nvcompBatchedANSDecompressGetRequiredAlignments(d, &da), "nvcompBatchedANSDecompressGetRequiredAlignments");
  };
  a.max_output_chunk = [c](size_t max_chunk) {
    size_t out = 0;
    check(api().nvcompBatchedANSCompressGetMaxOutputChunkSize(max_chunk, c, &out),
          "nvcompBatchedANSCompressGetMaxOutputChunkSize");
    return out;
  };
  a.temp_bytes = [c, d](size_t n, size_t max_chunk, size_t total, cudaStream_t s) {
    size_t ct = 0, dt = 0;
    check(api().nvcompBatchedANSCompressGetTempSize(n, max_chunk, c, &ct, total, s), "nvcompBatchedANSCompressGetTempSize");
    check(api().nvcompBatchedANSDecompressGetTempSize(n, max_chunk, d, &dt, total, s),
          "nvcompBatchedANSDecompressGetTempSize");
    return std::make_pair(ct, dt);
  };
  a.compress = [c](const Batch& b, cudaStream_t s) {
    check(api().nvcompBatchedANSCompressAsync(b.in_ptrs, b.in_bytes, b.max_chunk, b.n, b.comp_temp, b.comp_temp_bytes,
                                        b.comp_ptrs, b.comp_bytes, c, b.comp_status, s),
          "nvcompBatchedANSCompressAsync");
  };
  a.decompress = [d](const Batch& b, cudaStream_t s) {
    check(api().nvcompBatchedANSDecompressAsync(b.comp_ptrs, b.comp_bytes, b.in_bytes, b.out_bytes, b.n, b.decomp_temp,
                                          b.decomp_temp_bytes, b.out_ptrs, d, b.decomp_status, s),
          "nvcompBatchedANSDecompressAsync");
  };
  return a;
}

Algorithm bitcomp(DType dtype) {
  nvcompBatchedBitcompCompressOpts_t c = nvcompBatchedBitcompCompressDefaultOpts;
  c.data_type = dtype == DType::FP32 ? NVCOMP_TYPE_FLOAT32 : dtype == DType::FP16 ? NVCOMP_TYPE_FLOAT16 : NVCOMP_TYPE_USHORT;
  c.mode = BITCOMP_LOSSLESS;
  c.algorithm = 0;
  const nvcompBatchedBitcompDecompressOpts_t d = nvcompBatchedBitcompDecompressDefaultOpts;
  Algorithm a;
  a.name = "nvcomp-bitcomp";
  a.alignments = [c, d](nvcompAlignmentRequirements_t& ca, nvcompAlignmentRequirements_t& da) {
    check(api().nvcompBatchedBitcompCompressGetRequiredAlignments(c, &ca),
          "nvcompBatchedBitcompCompressGetRequiredAlignments");
    check(api().nvcompBatchedBitcompDecompressGetRequiredAlignments(d, &da),
          "nvcompBatchedBitcompDecompressGetRequiredAlignments");
  };
  a.max_output_chunk = [c](size_t max_chunk) {
    size_t out = 0;
    check(api().nvcompBatchedBitcompCompressGetMaxOutputChunkSize(max_chunk, c, &out),
          "nvcompBatchedBitcompCompressGetMaxOutputChunkSize");
    return out;
  };
  a.temp_bytes = [c, d](size_t n, size_t max_chunk, size_t total, cudaStream_t s) {
    size_t ct = 0, dt = 0;
    check(api().nvcompBatchedBitcompCompressGetTempSize(n, max_chunk, c, &ct, total, s),
          "nvcompBatchedBitcompCompressGetTempSize");
    check(api().nvcompBatchedBitcompDecompressGetTempSize(n, max_chunk, d, &dt, total, s),
          "nvcompBatchedBitcompDecompressGetTempSize");
    return std::make_pair(ct, dt);
  };
  a.compress = [c](const Batch& b, cudaStream_t s) {
    check(api().nvcompBatchedBitcompCompressAsync(b.in_ptrs, b.in_bytes, b.max_chunk, b.n, b.comp_temp, b.comp_temp_bytes,
                                            b.comp_ptrs, b.comp_bytes, c, b.comp_status, s),
          "nvcompBatchedBitcompCompressAsync");
  };
  // Not fully asynchronous (the header says it synchronises the stream to look at the
  // compressed data first); that wait is inside the timed call, as it is for any caller.
  a.decompress = [d](const Batch& b, cudaStream_t s) {
    check(api().nvcompBatchedBitcompDecompressAsync(b.comp_ptrs, b.comp_bytes, b.in_bytes, b.out_bytes, b.n,
                                              b.decomp_temp, b.decomp_temp_bytes, b.out_ptrs, d, b.decomp_status, s),
          "nvcompBatchedBitcompDecompressAsync");
  };
  return a;
}

template <typename T>
std::vector<T> to_host(const T* dev, size_t n, cudaStream_t s) {
  std::vector<T> v(n);
  if (n) COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(v.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost, s));
  COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(s));
  return v;
}

template <typename T>
DeviceBuffer to_device(const std::vector<T>& v, cudaStream_t s) {
  DeviceBuffer d = device_alloc(v.size() * sizeof(T));
  if (!v.empty()) COMPCOLL_CUDA_CHECK(cudaMemcpyAsync(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, s));
  COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(s));  // the host vectors may go before the copy ran
  return d;
}

// The first chunk whose status is not nvcompSuccess, as "chunk I: STATUS"; "" when none.
std::string first_bad(const std::vector<nvcompStatus_t>& status) {
  for (size_t i = 0; i < status.size(); ++i)
    if (status[i] != nvcompSuccess)
      return "chunk " + std::to_string(i) + " of " + std::to_string(status.size()) + ": " +
             api().nvcompGetStatusString(status[i]);
  return {};
}

// The algorithm of a peer's name, its options for `dtype`; nothing for another name.
std::optional<Algorithm> algorithm(const std::string& name, DType dtype) {
  if (name == kNvcompAnsName) return ans(dtype);
  if (name == "nvcomp-bitcomp") return bitcomp(dtype);
  return std::nullopt;
}

void run_one(const Algorithm& algo, const CudaPeerContext& ctx, const std::vector<uint8_t>& host_input,
             PeerResult& r) {
  const cudaStream_t s = ctx.stream;
  const uint64_t bytes = ctx.bytes;
  if (bytes == 0) throw PeerFailure("empty input");
  if (host_input.size() < bytes) throw PeerFailure("the host input is shorter than the device input");
  const size_t n = (bytes + kNvcompChunkBytes - 1) / kNvcompChunkBytes;
  const size_t max_chunk = std::min<uint64_t>(bytes, kNvcompChunkBytes);

  nvcompAlignmentRequirements_t ca{}, da{};
  algo.alignments(ca, da);
  const size_t slot = round_up(algo.max_output_chunk(max_chunk), std::max({ca.output, da.input, size_t{8}}));
  const auto [comp_temp_bytes, decomp_temp_bytes] = algo.temp_bytes(n, max_chunk, bytes, s);

  DeviceBuffer comp = device_alloc(slot * n), out = device_alloc(bytes);
  DeviceBuffer comp_temp = device_alloc(comp_temp_bytes), decomp_temp = device_alloc(decomp_temp_bytes);
  // Every chunk starts at a multiple of 64 KiB (or of `slot`) from a cudaMalloc'd base.
  if (!aligned(ctx.input_dev, ca.input) || kNvcompChunkBytes % std::max<size_t>(ca.input, 1) ||
      !aligned(out.get(), da.output) || kNvcompChunkBytes % std::max<size_t>(da.output, 1) ||
      !aligned(comp.get(), std::max(ca.output, da.input)) || !aligned(comp_temp.get(), ca.temp) ||
      !aligned(decomp_temp.get(), da.temp))
    throw PeerFailure("a buffer misses the alignment nvCOMP asks for");

  std::vector<const void*> in_ptrs(n);
  std::vector<void*> comp_ptrs(n), out_ptrs(n);
  std::vector<size_t> in_bytes(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t at = i * kNvcompChunkBytes;
    in_ptrs[i] = static_cast<const uint8_t*>(ctx.input_dev) + at;
    in_bytes[i] = std::min<uint64_t>(kNvcompChunkBytes, bytes - at);
    comp_ptrs[i] = static_cast<uint8_t*>(comp.get()) + i * slot;
    out_ptrs[i] = static_cast<uint8_t*>(out.get()) + at;
  }
  DeviceBuffer in_ptrs_d = to_device(in_ptrs, s), in_bytes_d = to_device(in_bytes, s);
  DeviceBuffer comp_ptrs_d = to_device(comp_ptrs, s), out_ptrs_d = to_device(out_ptrs, s);
  DeviceBuffer comp_bytes_d = device_alloc(n * sizeof(size_t)), out_bytes_d = device_alloc(n * sizeof(size_t));
  DeviceBuffer comp_status_d = device_alloc(n * sizeof(nvcompStatus_t));
  DeviceBuffer decomp_status_d = device_alloc(n * sizeof(nvcompStatus_t));

  Batch b;
  b.n = n;
  b.max_chunk = max_chunk;
  b.total = bytes;
  b.in_ptrs = static_cast<const void* const*>(in_ptrs_d.get());
  b.in_bytes = static_cast<const size_t*>(in_bytes_d.get());
  b.comp_ptrs = static_cast<void* const*>(comp_ptrs_d.get());
  b.comp_bytes = static_cast<size_t*>(comp_bytes_d.get());
  b.out_ptrs = static_cast<void* const*>(out_ptrs_d.get());
  b.out_bytes = static_cast<size_t*>(out_bytes_d.get());
  b.comp_status = static_cast<nvcompStatus_t*>(comp_status_d.get());
  b.decomp_status = static_cast<nvcompStatus_t*>(decomp_status_d.get());
  b.comp_temp = comp_temp.get();
  b.comp_temp_bytes = comp_temp_bytes;
  b.decomp_temp = decomp_temp.get();
  b.decomp_temp_bytes = decomp_temp_bytes;

  // Compress: timed (the warm-up is the first run), then its statuses and sizes.
  const Measurement enc = ctx.time([&] { algo.compress(b, s); });
  r.encode_seconds = enc.seconds;
  r.encode_samples = enc.samples;
  COMPCOLL_CUDA_CHECK(cudaGetLastError());
  if (const std::string bad = first_bad(to_host(b.comp_status, n, s)); !bad.empty())
    throw PeerFailure("compress: " + bad);
  const std::vector<size_t> comp_bytes = to_host(b.comp_bytes, n, s);
  r.compressed_bytes = r.payload_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    if (comp_bytes[i] > slot) throw PeerFailure("compress: chunk " + std::to_string(i) + " overruns its slot");
    r.payload_bytes += comp_bytes[i];
    r.compressed_bytes += comp_bytes[i] + sizeof(uint64_t);  // the decoder needs each chunk's size
  }

  // Decompress: timed into the output buffer.
  const Measurement dec = ctx.time([&] { algo.decompress(b, s); });
  r.decode_seconds = dec.seconds;
  r.decode_samples = dec.samples;
  COMPCOLL_CUDA_CHECK(cudaGetLastError());

  // The check, untimed: a poisoned output, one more decode, every status, size and byte.
  COMPCOLL_CUDA_CHECK(cudaMemsetAsync(out.get(), 0x5A, bytes, s));
  COMPCOLL_CUDA_CHECK(cudaMemsetAsync(b.out_bytes, 0, n * sizeof(size_t), s));
  algo.decompress(b, s);
  if (const std::string bad = first_bad(to_host(b.decomp_status, n, s)); !bad.empty())
    throw PeerFailure("decompress: " + bad);
  const std::vector<size_t> out_bytes = to_host(b.out_bytes, n, s);
  for (size_t i = 0; i < n; ++i)
    if (out_bytes[i] != in_bytes[i])
      throw PeerFailure("decompress: chunk " + std::to_string(i) + " decoded to " + std::to_string(out_bytes[i]) +
                        " bytes, not " + std::to_string(in_bytes[i]));
  const std::vector<uint8_t> got = to_host(static_cast<const uint8_t*>(out.get()), bytes, s);
  if (std::memcmp(got.data(), host_input.data(), bytes) != 0) {
    const size_t at = std::mismatch(got.begin(), got.end(), host_input.begin()).first - got.begin();
    throw PeerFailure("round trip differs from the input at byte " + std::to_string(at));
  }
  r.ok = true;
}

}  // namespace

std::vector<std::string> nvcomp_peer_names() { return {std::string(kNvcompAnsName), "nvcomp-bitcomp"}; }

PeerResult run_nvcomp_peer(const std::string& codec, const CudaPeerContext& ctx, const std::vector<uint8_t>& host_input) {
  PeerResult r;
  r.codec = codec;
  if (!api().error.empty()) {
    r.error = api().error;
    return r;
  }
  try {
    const std::optional<Algorithm> algo = algorithm(codec, ctx.dtype);
    if (!algo) throw PeerFailure("not an nvCOMP codec of this bench (nvcomp-ans, nvcomp-bitcomp)");
    run_one(*algo, ctx, host_input, r);
  } catch (const std::exception& e) {  // PeerFailure, or a CUDA error (check.h)
    r.ok = false;
    r.error = e.what();
    cudaStreamSynchronize(ctx.stream);  // let nothing of this codec run into what follows
    cudaGetLastError();                 // clears a non-sticky error; a sticky one stays
  }
  return r;
}

std::vector<PeerResult> run_nvcomp_peers(const CudaPeerContext& ctx, const std::vector<uint8_t>& host_input) {
  std::vector<PeerResult> results;
  if (!api().error.empty()) return results;
  for (const std::string& name : nvcomp_peer_names()) results.push_back(run_nvcomp_peer(name, ctx, host_input));
  return results;
}

}  // namespace compcoll::bench
