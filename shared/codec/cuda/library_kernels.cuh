// shared/codec/cuda/library_kernels.cuh — the compcoll container around a library codec's
// chunks (codec_cuda.h, "library codecs"; docs/FORMAT.md, "nvcomp-ans"), on the device: the
// chunk tables of a batched call, the packing of the library's slots into the stream (sizes,
// CUB's scan, the chunks behind their size prefixes, then finish_kernel's offset table and
// header), and on the receiving side the check of the stream and of every chunk before the
// library reads it. Included by codec_cuda.cu after exponent_kernels.cuh, whose container
// helpers it uses.
#pragma once

#include <cub/device/device_scan.cuh>

#include <cstdint>

#include "codec/cuda/check.h"
#include "codec/cuda/codec_cuda.h"
#include "codec/format.h"
#include "codec/library_bits.h"

namespace compcoll::gpu {

constexpr uint32_t kLibraryThreads = 128;

inline uint32_t library_blocks(uint64_t items, uint32_t per_block) {
  return static_cast<uint32_t>(std::clamp<uint64_t>((items + per_block - 1) / per_block, 1, 65535));
}

__global__ void library_table_kernel(uint8_t* base, uint64_t bytes, uint64_t chunk_bytes, uint64_t chunks,
                                     void** ptrs, size_t* sizes) {
  for (uint64_t j = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < chunks; j += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t at = j * chunk_bytes;
    ptrs[j] = base + at;
    if (sizes != nullptr) sizes[j] = static_cast<size_t>(bytes - at < chunk_bytes ? bytes - at : chunk_bytes);
  }
}

__device__ inline int32_t library_failed(int32_t library_status) {
  return static_cast<int32_t>(static_cast<uint32_t>(CudaChunkStatus::LibraryFailed) |
                              ((static_cast<uint32_t>(library_status) & 0x7FFFFFu) << 8));
}

// Each chunk's size in the stream, and its status: a chunk the library failed on (or whose size
// is past its slot) is written without data.
__global__ void library_sizes_kernel(const size_t* compressed, const int32_t* library_status, uint32_t chunks,
                                     uint64_t slot_bytes, uint64_t* chunk_bytes, int32_t* status) {
  for (uint64_t j = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < chunks; j += uint64_t{gridDim.x} * blockDim.x) {
    const int32_t lib = library_status != nullptr ? library_status[j] : 0;
    const bool ok = lib == 0 && compressed[j] > 0 && compressed[j] <= slot_bytes;
    status[j] = ok ? 0 : library_failed(lib != 0 ? lib : -1);
    chunk_bytes[j] = format::library_chunk_bytes(chunks, ok ? compressed[j] : 0);
  }
}

// One block a chunk (grid-stride): its size prefix (u32, then zeros), its data (whole 16-byte
// words from its slot where they lie inside the library's bytes), then zeros to its end.
__global__ void library_pack_kernel(const uint8_t* slots, uint64_t slot_bytes, const size_t* compressed,
                                    const int32_t* status, const uint64_t* chunk_end, uint32_t chunks,
                                    uint64_t payload_at, uint8_t* out) {
  const uint32_t prefix = format::library_prefix_bytes(chunks);
  for (uint64_t j = blockIdx.x; j < chunks; j += gridDim.x) {
    const uint64_t begin = j == 0 ? 0 : chunk_end[j - 1];
    const uint64_t size = chunk_end[j] - begin;
    const uint64_t c = status[j] == 0 ? compressed[j] : 0;
    uint8_t* o = out + payload_at + begin;
    const uint8_t* in = slots + j * slot_bytes;
    for (uint32_t b = threadIdx.x; b < prefix; b += blockDim.x) o[b] = libbits::chunk_byte(prefix, in, c, b);
    // The data in 16-byte words (the stream is 16-byte aligned, so is o + prefix), those that
    // hold the data's end or padding byte by byte.
    const uint64_t words = (size - prefix) / 16;
    for (uint64_t w = threadIdx.x; w < words; w += blockDim.x) {
      const uint64_t at = prefix + 16 * w;
      if (16 * w + 16 <= c) {
        reinterpret_cast<uint4*>(o + prefix)[w] = reinterpret_cast<const uint4*>(in)[w];
      } else {
        for (uint32_t i = 0; i < 16; ++i) o[at + i] = libbits::chunk_byte(prefix, in, c, at + i);
      }
    }
    for (uint64_t b = prefix + 16 * words + threadIdx.x; b < size; b += blockDim.x)
      o[b] = libbits::chunk_byte(prefix, in, c, b);
  }
}

__device__ inline int32_t library_status(libbits::ChunkCheck check) {
  switch (check) {
    case libbits::ChunkCheck::Ok: return 0;
    case libbits::ChunkCheck::BadOffsets: return status_of(CudaChunkStatus::BadOffsets);
    case libbits::ChunkCheck::SizeMismatch: return status_of(CudaChunkStatus::SizeMismatch);
    case libbits::ChunkCheck::BadPrefix: return status_of(CudaChunkStatus::LibraryBadChunk);
  }
  return status_of(CudaChunkStatus::LibraryBadChunk);
}

// One thread a chunk: the stream's header against the expected one, then the chunk's offsets,
// size prefix and padding (codec/library_bits.h); its data and size for the library, or an
// empty chunk.
__global__ void library_unpack_kernel(const uint8_t* stream, const __grid_constant__ DecodeGeometry d, void** chunks_out,
                                      size_t* compressed, int32_t* status) {
  const uint32_t chunks = d.g.chunks;
  const uint32_t prefix = format::library_prefix_bytes(chunks);
  for (uint64_t j = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < chunks; j += uint64_t{gridDim.x} * blockDim.x) {
    int32_t st = 0;
    // The payload size's bytes are compared only where the caller knows it (stream_payload).
    const uint32_t compared = d.payload_at_most ? format::kOffPayloadBytes : format::kHeaderBytes;
    for (uint32_t i = 0; i < compared && st == 0; ++i)
      if (stream[i] != d.header[i]) st = status_of(CudaChunkStatus::BadHeader);
    bool truncated = false;
    const uint64_t payload = st == 0 ? stream_payload(stream, d, &truncated) : 0;
    if (truncated) st = status_of(CudaChunkStatus::Truncated);
    uint64_t begin = 0, end = 0, c = 0;
    const uint8_t* o = stream;
    if (st == 0)
      st = library_status(libbits::chunk_range(stream + format::kHeaderBytes, chunks, j, payload, begin, end));
    if (st == 0) {
      o = stream + d.payload_at + begin;
      st = library_status(libbits::check_chunk(o, end - begin, chunks, &c));
    }
    chunks_out[j] = const_cast<uint8_t*>(st == 0 ? o + prefix : stream);
    compressed[j] = st == 0 ? static_cast<size_t>(c) : 0;
    status[j] = st;
  }
}

__global__ void library_finish_kernel(uint32_t chunks, const int32_t* library_status, const size_t* decoded,
                                      const size_t* expected, int32_t* status) {
  for (uint64_t j = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < chunks; j += uint64_t{gridDim.x} * blockDim.x) {
    if (status[j] != 0) continue;
    if (library_status[j] != 0) status[j] = library_failed(library_status[j]);
    else if (decoded[j] != expected[j]) status[j] = status_of(CudaChunkStatus::SizeMismatch);
  }
}

// cuda_library_pack's scratch: each chunk's size in the stream, their inclusive sums, CUB's
// scan storage; each at a 256-byte boundary of the (aligned) base. The layout is computed once
// a call (CUB's storage size is a query), then bound to the base.
constexpr size_t kLibraryScratchAlign = 256;
struct LibraryPackLayout {
  size_t array = 0, scan_temp_bytes = 0;
  size_t total = 0;  // with the slack that aligns the base
};
struct LibraryPackScratch {
  uint64_t* chunk_bytes;
  uint64_t* chunk_end;
  void* scan_temp;
  size_t scan_temp_bytes;
};

inline LibraryPackLayout library_pack_layout(uint32_t chunks) {
  LibraryPackLayout l;
  if (chunks == 0) return l;
  l.array = format::align_up64(sizeof(uint64_t) * chunks, kLibraryScratchAlign);
  l.scan_temp_bytes = cub_scan_temp_bytes(chunks);
  l.total = kLibraryScratchAlign + 2 * l.array + l.scan_temp_bytes;
  return l;
}

inline LibraryPackScratch bind_library_scratch(const LibraryPackLayout& l, void* scratch) {
  const uintptr_t at = format::align_up64(reinterpret_cast<uintptr_t>(scratch), kLibraryScratchAlign);
  auto* base = reinterpret_cast<uint8_t*>(at);
  return {reinterpret_cast<uint64_t*>(base), reinterpret_cast<uint64_t*>(base + l.array), base + 2 * l.array,
          l.scan_temp_bytes};
}

}  // namespace compcoll::gpu
