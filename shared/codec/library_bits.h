// shared/codec/library_bits.h — the chunk layout of a library codec's stream (nvcomp-ans:
// docs/FORMAT.md), as functions shared by the host (its stand-in decoder, the tests) and the
// CUDA kernels that pack and check it (codec/cuda/library_kernels.cuh). No allocation, no
// exceptions; nothing is read outside the ranges the callers pass.
#pragma once

#include <cstdint>

#include "codec/format.h"
#include "util/hd.h"

namespace compcoll::libbits {

// What is wrong with a chunk of the container, in the order the checks run.
enum class ChunkCheck : uint8_t {
  Ok = 0,
  BadOffsets,    // its end offsets are out of order, past the payload, not multiples of 16, or
                 // the last does not end the payload, or it is shorter than its prefix
  SizeMismatch,  // its size prefix is 0 or does not match the chunk's size
  BadPrefix,     // a reserved prefix byte or a padding byte is not zero
};

// Byte b of chunk j's stream bytes ([0, library_chunk_bytes(chunks, c))) for c compressed bytes
// at `data`: the size prefix (u32 c, then zeros), the data, zero padding. What the packer writes.
COMPCOLL_HD inline uint8_t chunk_byte(uint32_t prefix, const uint8_t* data, uint64_t c, uint64_t b) {
  if (b < 4) return static_cast<uint8_t>(c >> (8 * b));
  if (b < prefix) return 0;
  return b - prefix < c ? data[b - prefix] : 0;
}

// Chunk j of a container whose header was checked: its range [begin, end) in the payload from
// the offset table at `table` (the stream's bytes from 32 on), checked against the payload's
// size (payload_bytes: what the stream holds after the table).
COMPCOLL_HD inline ChunkCheck chunk_range(const uint8_t* table, uint32_t chunks, uint64_t j, uint64_t payload_bytes,
                                          uint64_t& begin, uint64_t& end) {
  begin = j == 0 ? 0 : format::load_u64(table + format::kOffsetEntryBytes * (j - 1));
  end = format::load_u64(table + format::kOffsetEntryBytes * j);
  if (begin > end || end > payload_bytes || begin % format::kLibraryAlign != 0 || end % format::kLibraryAlign != 0 ||
      (j + 1 == chunks && end != payload_bytes) || end - begin < format::library_prefix_bytes(chunks))
    return ChunkCheck::BadOffsets;
  return ChunkCheck::Ok;
}

// The `size` bytes of one chunk at `o` (inside the payload of a container of `chunks` chunks):
// its size prefix against its size, its reserved and padding bytes; *c gets the library's
// compressed bytes, which start at o + library_prefix_bytes(chunks).
COMPCOLL_HD inline ChunkCheck check_chunk(const uint8_t* o, uint64_t size, uint32_t chunks, uint64_t* c) {
  const uint32_t prefix = format::library_prefix_bytes(chunks);
  *c = format::load_u32(o);
  if (*c == 0 || format::library_chunk_bytes(chunks, *c) != size) return ChunkCheck::SizeMismatch;
  for (uint32_t b = 4; b < prefix; ++b)
    if (o[b] != 0) return ChunkCheck::BadPrefix;
  for (uint64_t b = prefix + *c; b < size; ++b)
    if (o[b] != 0) return ChunkCheck::BadPrefix;
  return ChunkCheck::Ok;
}

}  // namespace compcoll::libbits
