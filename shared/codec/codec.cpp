// shared/codec/codec.cpp — the stream container common to all codecs: header, chunk offset
// table, validation, and the codec registry. Chunk contents belong to each codec.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "codec/codec.h"
#include "codec/codec_internal.h"
#include "codec/exponent_avx512.h"
#include "codec/fp8_hadamard.h"

namespace compcoll {
namespace {

using namespace format;

std::string hex_offset(uint64_t off) { return "byte offset " + std::to_string(off); }

void check_options(const EncodeOptions& opt) {
  const uint32_t c = opt.chunk_elements;
  if (c == kAutoChunk) return;
  if (!valid_chunk_elements(c))
    throw CodecError("encode: chunk_elements must be a multiple of " + std::to_string(kLanes) +
                         " in [" + std::to_string(kMinChunkElements) + ", " +
                         std::to_string(kMaxChunkElements) + "] or 0 (by the stream's size), got " + std::to_string(c),
                     0);
}

// Threads for `chunks` chunks: the request (0: the hardware's), at most one per
// kMinChunksPerThread chunks, at least 1.
uint32_t threads_for(uint32_t requested, uint32_t chunks) {
  uint32_t t = requested ? requested : std::max(1u, std::thread::hardware_concurrency());
  return std::max(1u, std::min(t, chunks / kMinChunksPerThread));
}

// Runs f(t, first, count) for T contiguous ranges of `chunks` chunks, range 0 on the calling
// thread; rethrows the exception of the lowest range that threw.
template <typename F>
void for_chunk_ranges(uint32_t chunks, uint32_t threads, F&& f) {
  std::vector<std::exception_ptr> errors(threads);
  auto range = [&](uint32_t t) {
    const uint32_t first = static_cast<uint32_t>(uint64_t{chunks} * t / threads);
    const uint32_t end = static_cast<uint32_t>(uint64_t{chunks} * (t + 1) / threads);
    try {
      f(t, first, end - first);
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (uint32_t t = 1; t < threads; ++t) pool.emplace_back(range, t);
  range(0);
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Codes a stream's chunks; a chunk's offset table entry is written relative to the run of
// chunks it was coded with (the caller adds where the run lands).
struct ChunkCoder {
  const Codec& codec;
  DType dtype;
  const uint8_t* src;
  uint64_t elements;
  uint32_t chunk_elements;
  uint8_t* table;

  // Chunks [first, end) back to back at `out`; returns their bytes.
  uint64_t code(uint32_t first, uint32_t end, uint8_t* out) const {
    const size_t esize = dtype_size(dtype);
    uint64_t pos = 0;
    for (uint32_t c = first; c < end; ++c) {
      const uint64_t e0 = uint64_t{c} * chunk_elements;
      const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(chunk_elements, elements - e0));
      pos += codec.encode_chunk(dtype, src + e0 * esize, n, out + pos);
      store_u64(table + size_t{kOffsetEntryBytes} * c, pos);
    }
    return pos;
  }
};

// Encoding on several threads. The chunks go out in units of consecutive chunks (about
// kUnitBytes of input), in order, to whichever thread asks next; a thread codes a unit into the
// next of its kStageUnits staging slots (small enough to stay in its core's cache), and the units
// are copied into the stream in order, one at a time, by whichever thread finds the next one
// coded. A thread waits only when all its slots hold units not yet copied (it is kStageUnits
// units ahead), so no thread idles while another finishes, and the stream is written once, in
// order: the same bytes as one thread. The staging slots are kept by the calling thread between
// calls.
constexpr size_t kUnitBytes = size_t{128} << 10;
constexpr uint32_t kStageUnits = 4;

uint64_t encode_staged(const ChunkCoder& coder, uint32_t chunks, uint32_t threads, uint8_t* payload) {
  const uint64_t chunk_bytes = uint64_t{coder.chunk_elements} * dtype_size(coder.dtype);
  const uint32_t unit_chunks = static_cast<uint32_t>(std::max<uint64_t>(1, kUnitBytes / chunk_bytes));
  const uint32_t units = (chunks + unit_chunks - 1) / unit_chunks;
  const size_t slot_bytes = size_t{unit_chunks} * coder.codec.max_chunk_bytes(coder.dtype, coder.chunk_elements);
  thread_local std::vector<uint8_t> staging;
  if (staging.size() < size_t{threads} * kStageUnits * slot_bytes) staging.resize(size_t{threads} * kStageUnits * slot_bytes);
  uint8_t* const stage = staging.data();  // the workers' own thread_local would be another vector

  struct Coded {
    const uint8_t* bytes = nullptr;
    uint64_t size = 0;
    uint32_t thread = 0;
  };
  std::vector<Coded> coded(units);
  std::vector<uint64_t> copied(threads, 0);  // per thread: its units copied into the stream
  std::mutex m;
  std::condition_variable slot_free;
  uint32_t next_unit = 0, next_copy = 0;
  uint64_t pos = 0;
  bool copying = false, failed = false;
  std::exception_ptr error;

  auto work = [&](uint32_t t) {
    uint8_t* slots = stage + size_t{t} * kStageUnits * slot_bytes;
    uint64_t mine = 0;  // units this thread has coded
    std::unique_lock lk(m);
    try {
      for (;;) {
        slot_free.wait(lk, [&] { return failed || mine - copied[t] < kStageUnits; });
        if (failed || next_unit == units) return;
        const uint32_t u = next_unit++;
        lk.unlock();
        uint8_t* slot = slots + (mine++ % kStageUnits) * slot_bytes;
        const uint32_t first = u * unit_chunks, end = std::min(chunks, first + unit_chunks);
        const uint64_t size = coder.code(first, end, slot);
        lk.lock();
        coded[u] = {slot, size, t};
        if (copying) continue;  // the thread copying takes this unit too when its turn comes
        copying = true;
        while (next_copy < units && coded[next_copy].bytes) {
          const uint32_t v = next_copy;
          const uint64_t at = pos;
          lk.unlock();
          std::memcpy(payload + at, coded[v].bytes, coded[v].size);
          for (uint32_t c = v * unit_chunks, e = std::min(chunks, c + unit_chunks); c < e; ++c) {
            uint8_t* entry = coder.table + size_t{kOffsetEntryBytes} * c;
            store_u64(entry, load_u64(entry) + at);
          }
          lk.lock();
          pos += coded[v].size;
          ++next_copy;
          ++copied[coded[v].thread];
          slot_free.notify_all();
        }
        copying = false;
      }
    } catch (...) {
      if (!lk.owns_lock()) lk.lock();
      if (!error) error = std::current_exception();
      failed = true;
      slot_free.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (uint32_t t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
  return pos;
}

std::string stream_prefix(const StreamInfo& info) {
  return std::string(codec_by_id(info.codec).name()) + " stream";
}

}  // namespace

namespace detail {
void throw_bad_dtype(uint8_t value) {
  throw CodecError("unknown dtype code " + std::to_string(value), 0);
}
}  // namespace detail

const Codec& codec_by_id(CodecId id) {
  switch (id) {
    case CodecId::Identity: return detail::identity_codec();
    case CodecId::GaussExp: return detail::gauss_exp_codec();
    case CodecId::EntropyExp: return detail::entropy_exp_codec();
    case CodecId::Fp8Hadamard: return detail::fp8_hadamard_codec_default();
    case CodecId::NvcompAns: return detail::nvcomp_ans_host_codec();
  }
  throw CodecError("unknown codec id " + std::to_string(static_cast<int>(id)), 0);
}

const Codec* find_codec(std::string_view name) {
  for (CodecId id : {CodecId::Identity, CodecId::GaussExp, CodecId::EntropyExp})
    if (codec_by_id(id).name() == name) return &codec_by_id(id);
  if (Fp8HadamardParams p; parse_fp8_hadamard_name(name, p)) return &fp8_hadamard_codec(p);
  return nullptr;
}

const LibraryCodec* find_library_codec(std::string_view name) {
  static constexpr LibraryCodec kCodecs[] = {{kNvcompAnsName, "nvCOMP", kNvcompChunkBytes, CodecId::NvcompAns}};
  for (const LibraryCodec& c : kCodecs)
    if (c.name == name) return &c;
  return nullptr;
}

uint32_t library_chunk_elements(const LibraryCodec& codec, DType dtype) {
  return static_cast<uint32_t>(codec.chunk_bytes / dtype_size(dtype));
}

size_t library_max_encoded_size(const LibraryCodec& codec, DType dtype, uint64_t elements,
                                uint64_t max_chunk_bytes) {
  return library_stream_bound(chunk_count_for(elements, library_chunk_elements(codec, dtype)), max_chunk_bytes);
}

StreamInfo library_stream_info(const LibraryCodec& codec, DType dtype, uint64_t elements, uint64_t stream_bytes) {
  StreamInfo info{};
  info.codec = codec.id;
  info.dtype = dtype;
  info.elements = elements;
  info.chunk_elements = library_chunk_elements(codec, dtype);
  info.chunk_count = chunk_count_for(elements, info.chunk_elements);
  const uint64_t table_end = kHeaderBytes + uint64_t{kOffsetEntryBytes} * info.chunk_count;
  if (stream_bytes < table_end)
    throw CodecError(stream_prefix(info) + ": a stream of " + std::to_string(stream_bytes) +
                         " bytes cannot hold its header and offset table (" + std::to_string(table_end) + " bytes)",
                     stream_bytes);
  info.payload_bytes = stream_bytes - table_end;
  info.total_bytes = stream_bytes;
  return info;
}

std::vector<std::string_view> codec_names() {
  std::vector<std::string_view> names;
  for (CodecId id : {CodecId::Identity, CodecId::GaussExp, CodecId::EntropyExp, CodecId::Fp8Hadamard})
    names.push_back(codec_by_id(id).name());
  return names;
}

size_t max_encoded_size(const Codec& codec, DType dtype, uint64_t elements,
                        const EncodeOptions& opt) {
  check_options(opt);
  const uint32_t c = chunk_elements_for(opt.chunk_elements, elements);
  const uint32_t chunks = chunk_count_for(elements, c);
  size_t total = kHeaderBytes + size_t{kOffsetEntryBytes} * chunks;
  if (chunks > 0) {
    total += size_t{chunks - 1} * codec.max_chunk_bytes(dtype, c);
    const uint32_t last = static_cast<uint32_t>(elements - uint64_t{chunks - 1} * c);
    total += codec.max_chunk_bytes(dtype, last);
  }
  return total;
}

size_t encode(const Codec& codec, DType dtype, const void* in, uint64_t elements, void* out,
              size_t out_capacity, const EncodeOptions& opt) {
  check_options(opt);
  const uint32_t c = chunk_elements_for(opt.chunk_elements, elements);
  if (elements / c >= UINT32_MAX)
    throw CodecError("encode: too many elements for one stream", 0);
  const size_t need = max_encoded_size(codec, dtype, elements, opt);
  if (out_capacity < need)
    throw CodecError("encode: output capacity " + std::to_string(out_capacity) + " < bound " +
                         std::to_string(need),
                     0);
  auto* o = static_cast<uint8_t*>(out);
  const uint32_t chunks = chunk_count_for(elements, c);
  uint8_t* table = o + kHeaderBytes;
  uint8_t* payload = table + size_t{kOffsetEntryBytes} * chunks;
  const ChunkCoder coder{codec, dtype, static_cast<const uint8_t*>(in), elements, c, table};
  const uint32_t threads = threads_for(opt.threads, chunks);
  const uint64_t pos = threads > 1 ? encode_staged(coder, chunks, threads, payload) : coder.code(0, chunks, payload);
  std::memcpy(o + kOffMagic, kMagic, 4);
  o[kOffVersion] = kVersion;
  o[kOffCodec] = static_cast<uint8_t>(codec.id());
  o[kOffDType] = static_cast<uint8_t>(dtype);
  o[kOffFlags] = 0;
  store_u64(o + kOffElements, elements);
  store_u32(o + kOffChunkElements, c);
  store_u32(o + kOffChunkCount, chunks);
  store_u64(o + kOffPayloadBytes, pos);
  return static_cast<size_t>(payload + pos - o);
}

std::vector<uint8_t> encode(const Codec& codec, DType dtype, const void* in, uint64_t elements,
                            const EncodeOptions& opt) {
  std::vector<uint8_t> out(max_encoded_size(codec, dtype, elements, opt));
  out.resize(encode(codec, dtype, in, elements, out.data(), out.size(), opt));
  return out;
}

StreamInfo expected_stream_info(const Codec& codec, DType dtype, uint64_t elements,
                                const EncodeOptions& opt, uint64_t stream_bytes, bool within) {
  const size_t most = max_encoded_size(codec, dtype, elements, opt);  // checks the options
  StreamInfo info{};
  info.codec = codec.id();
  info.dtype = dtype;
  info.elements = elements;
  info.chunk_elements = chunk_elements_for(opt.chunk_elements, elements);
  info.chunk_count = chunk_count_for(elements, info.chunk_elements);
  const uint64_t table_end = kHeaderBytes + uint64_t{kOffsetEntryBytes} * info.chunk_count;
  // Within a budget the bytes may run past the longest stream the codec writes (a budget of
  // a stream at that bound, grown by its margin): the stream is at most that long.
  if (within) stream_bytes = std::min<uint64_t>(stream_bytes, most);
  if (stream_bytes < table_end || stream_bytes > most)
    throw CodecError(stream_prefix(info) + ": a stream of " + std::to_string(stream_bytes) +
                         " bytes cannot hold it (" + std::to_string(table_end) + " to " +
                         std::to_string(most) + " bytes)",
                     std::min<uint64_t>(stream_bytes, table_end));
  info.payload_bytes = stream_bytes - table_end;
  info.total_bytes = stream_bytes;
  info.payload_at_most = within;
  return info;
}

StreamInfo read_stream_info(const void* stream, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(stream);
  if (bytes < kHeaderBytes)
    throw CodecError("stream truncated: " + std::to_string(bytes) + " bytes, header needs " +
                         std::to_string(kHeaderBytes),
                     bytes);
  if (std::memcmp(p + kOffMagic, kMagic, 4) != 0)
    throw CodecError("not a compcoll stream: bad magic at byte offset 0", 0);
  if (p[kOffVersion] != kVersion)
    throw CodecError("unsupported stream version " + std::to_string(p[kOffVersion]) +
                         " at byte offset " + std::to_string(kOffVersion) + " (this build reads " +
                         std::to_string(kVersion) + ")",
                     kOffVersion);
  if (p[kOffCodec] > static_cast<uint8_t>(CodecId::NvcompAns))
    throw CodecError("unknown codec id " + std::to_string(p[kOffCodec]) + " at byte offset " +
                         std::to_string(kOffCodec),
                     kOffCodec);
  if (p[kOffDType] > static_cast<uint8_t>(DType::FP32))
    throw CodecError("unknown dtype code " + std::to_string(p[kOffDType]) + " at byte offset " +
                         std::to_string(kOffDType),
                     kOffDType);
  if (p[kOffFlags] != 0)
    throw CodecError("unknown flags at byte offset " + std::to_string(kOffFlags), kOffFlags);
  StreamInfo info{};
  info.codec = static_cast<CodecId>(p[kOffCodec]);
  info.dtype = static_cast<DType>(p[kOffDType]);
  info.elements = load_u64(p + kOffElements);
  info.chunk_elements = load_u32(p + kOffChunkElements);
  info.chunk_count = load_u32(p + kOffChunkCount);
  info.payload_bytes = load_u64(p + kOffPayloadBytes);
  const std::string what = stream_prefix(info) + ": ";
  const uint32_t c = info.chunk_elements;
  if (!valid_chunk_elements(c))
    throw CodecError(what + "bad chunk_elements " + std::to_string(c) + " at byte offset " +
                         std::to_string(kOffChunkElements),
                     kOffChunkElements);
  if (info.elements > (uint64_t{1} << 48) ||
      info.chunk_count != chunk_count_for(info.elements, c))
    throw CodecError(what + "chunk_count " + std::to_string(info.chunk_count) +
                         " does not match elements " + std::to_string(info.elements) +
                         " at byte offset " + std::to_string(kOffChunkCount),
                     kOffChunkCount);
  const uint64_t table_end = kHeaderBytes + uint64_t{kOffsetEntryBytes} * info.chunk_count;
  if (table_end > bytes)
    throw CodecError(what + "truncated in the chunk offset table (" + std::to_string(bytes) +
                         " bytes, table ends at " + std::to_string(table_end) + ")",
                     bytes);
  if (info.payload_bytes > bytes - table_end)
    throw CodecError(what + "truncated: payload of " + std::to_string(info.payload_bytes) +
                         " bytes declared, " + std::to_string(bytes - table_end) + " present",
                     bytes);
  uint64_t prev = 0;
  for (uint32_t i = 0; i < info.chunk_count; ++i) {
    const uint64_t at = kHeaderBytes + uint64_t{kOffsetEntryBytes} * i;
    const uint64_t end = load_u64(p + at);
    if (end < prev || end > info.payload_bytes || end % kChunkAlign != 0)
      throw CodecError(what + "chunk " + std::to_string(i) + " end offset " + std::to_string(end) +
                           " out of order or out of range, at " + hex_offset(at),
                       at);
    prev = end;
  }
  if (prev != info.payload_bytes)
    throw CodecError(what + "last chunk ends at " + std::to_string(prev) + ", payload is " +
                         std::to_string(info.payload_bytes) + " bytes, at " +
                         hex_offset(kOffPayloadBytes),
                     kOffPayloadBytes);
  info.total_bytes = table_end + info.payload_bytes;
  return info;
}

namespace {
void decode_range(const StreamInfo& info, const void* stream, uint32_t first, uint32_t count,
                  void* out, size_t out_capacity) {
  if (first > info.chunk_count || count > info.chunk_count - first)
    throw CodecError(stream_prefix(info) + ": chunks [" + std::to_string(first) + ", " +
                         std::to_string(uint64_t{first} + count) + ") out of range (" +
                         std::to_string(info.chunk_count) + " chunks)",
                     0);
  const auto* p = static_cast<const uint8_t*>(stream);
  const uint8_t* table = p + kHeaderBytes;
  const uint64_t payload_at = kHeaderBytes + uint64_t{kOffsetEntryBytes} * info.chunk_count;
  const size_t esize = dtype_size(info.dtype);
  const uint64_t first_elem = uint64_t{first} * info.chunk_elements;
  const uint64_t end_elem =
      std::min<uint64_t>(uint64_t{first + count} * info.chunk_elements, info.elements);
  const uint64_t need = (end_elem - std::min(first_elem, end_elem)) * esize;
  if (out_capacity < need)
    throw CodecError(stream_prefix(info) + ": output capacity " + std::to_string(out_capacity) +
                         " < " + std::to_string(need) + " bytes needed",
                     0);
  const Codec& codec = codec_by_id(info.codec);
  auto* o = static_cast<uint8_t*>(out);
  // Chunk c's bytes in the payload: [chunk_end(c - 1), chunk_end(c)).
  const auto chunk_end = [&](uint32_t c) { return load_u64(table + uint64_t{kOffsetEntryBytes} * c); };
  const auto chunk_begin = [&](uint32_t c) { return c == 0 ? uint64_t{0} : chunk_end(c - 1); };
  const auto chunk_ref = [&](uint32_t c) {
    const uint64_t begin = chunk_begin(c);
    const uint64_t e0 = uint64_t{c} * info.chunk_elements;
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(info.chunk_elements, info.elements - e0));
    return Codec::ChunkRef{p + payload_at + begin, chunk_end(c) - begin, n, o + (e0 - first_elem) * esize};
  };
  const auto check = [&](uint32_t c, const std::string& err) {
    if (err.empty()) return;
    const uint64_t at = payload_at + chunk_begin(c);
    throw CodecError(stream_prefix(info) + ": chunk " + std::to_string(c) + " at " + hex_offset(at) + ": " + err, at);
  };
  // Two chunks at a time (codecs that gain from it decode them at once), the lower one's
  // error first.
  uint32_t c = first;
  for (; c + 1 < first + count; c += 2) {
    const Codec::ChunkRef pair[2] = {chunk_ref(c), chunk_ref(c + 1)};
    // The next pair's bytes (or the last chunk's), for the codec to ask for while it decodes
    // these.
    std::span<const uint8_t> ahead;
    if (c + 2 < first + count) {
      const uint64_t next = chunk_begin(c + 2);
      ahead = {p + payload_at + next, chunk_end(std::min(c + 3, first + count - 1)) - next};
    }
    std::string err[2];
    codec.decode_chunk_pair(info.dtype, pair, ahead, err);
    check(c, err[0]);
    check(c + 1, err[1]);
  }
  if (c < first + count) {
    const Codec::ChunkRef one = chunk_ref(c);
    check(c, codec.decode_chunk(info.dtype, one.in, one.bytes, one.n, one.out));
  }
}
}  // namespace

void decode_chunks(const void* stream, size_t bytes, uint32_t first, uint32_t count, void* out,
                   size_t out_capacity) {
  decode_range(read_stream_info(stream, bytes), stream, first, count, out, out_capacity);
}

StreamInfo decode(const void* stream, size_t bytes, void* out, size_t out_capacity, uint32_t threads) {
  const StreamInfo info = read_stream_info(stream, bytes);
  const uint32_t t = threads_for(threads, info.chunk_count);
  if (t == 1) {
    decode_range(info, stream, 0, info.chunk_count, out, out_capacity);
    return info;
  }
  if (out_capacity < info.elements * dtype_size(info.dtype))  // the whole check, before any thread
    decode_range(info, stream, 0, info.chunk_count, out, out_capacity);
  const size_t esize = dtype_size(info.dtype);
  for_chunk_ranges(info.chunk_count, t, [&](uint32_t, uint32_t first, uint32_t count) {
    const uint64_t e0 = uint64_t{first} * info.chunk_elements;
    decode_range(info, stream, first, count, static_cast<uint8_t*>(out) + e0 * esize, out_capacity - e0 * esize);
  });
  return info;
}

std::string_view host_codec_path() { return detail::avx512::enabled() ? "avx512" : "portable"; }

}  // namespace compcoll
