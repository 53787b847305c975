// tests/codec/test_library_codec.cpp — nvcomp-ans, a library's chunks in the compcoll container
// (docs/FORMAT.md, "nvcomp-ans"). On the host: the layout (every chunk's data 16-byte aligned,
// whatever the chunk count), the host's stand-in that refuses to code, a stream the host reads
// but cannot decode, and the chunk checks and bytes the kernels share (library_bits.h) on
// damaged streams. With CUDA: the container kernels of codec_cuda.h against a stream built
// here byte by byte, and their per-chunk errors on the same damaged streams. With nvCOMP: the
// library loads and gives its bound (no GPU needed), and on a GPU nvcomp-ans round trips
// bit-exact, from aligned and unaligned buffers, also captured in a CUDA graph and replayed.
// Without a device the GPU cases say "SKIPPED".
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "codec/format.h"
#include "codec/library_bits.h"
#include "test_util.h"

#ifdef COMPCOLL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "codec/cuda/check.h"
#include "codec/cuda/codec_cuda.h"
#include "cuda_test_util.h"
#endif
#ifdef COMPCOLL_HAVE_NVCOMP
#include "codec/cuda/nvcomp.h"
#endif

using namespace compcoll;

namespace {

const LibraryCodec& ans() { return *find_library_codec(kNvcompAnsName); }

// The stream of docs/FORMAT.md around `chunks` (a library's compressed chunks), byte by byte.
std::vector<uint8_t> library_stream(DType dtype, uint64_t elements, const std::vector<std::vector<uint8_t>>& chunks) {
  const uint32_t ce = library_chunk_elements(ans(), dtype);
  const auto n = static_cast<uint32_t>(chunks.size());
  REQUIRE(n == format::chunk_count_for(elements, ce));
  const uint32_t prefix = format::library_prefix_bytes(n);
  std::vector<uint64_t> ends;
  uint64_t at = 0;
  for (const auto& c : chunks) ends.push_back(at += format::library_chunk_bytes(n, c.size()));
  const uint64_t payload_at = format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} * n;
  std::vector<uint8_t> s(payload_at + at, 0);
  std::memcpy(s.data(), format::kMagic, 4);
  s[format::kOffVersion] = format::kVersion;
  s[format::kOffCodec] = static_cast<uint8_t>(CodecId::NvcompAns);
  s[format::kOffDType] = static_cast<uint8_t>(dtype);
  format::store_u64(s.data() + format::kOffElements, elements);
  format::store_u32(s.data() + format::kOffChunkElements, ce);
  format::store_u32(s.data() + format::kOffChunkCount, n);
  format::store_u64(s.data() + format::kOffPayloadBytes, at);
  for (uint32_t j = 0; j < n; ++j) {
    format::store_u64(s.data() + format::kHeaderBytes + format::kOffsetEntryBytes * j, ends[j]);
    uint8_t* o = s.data() + payload_at + (j == 0 ? 0 : ends[j - 1]);
    format::store_u32(o, static_cast<uint32_t>(chunks[j].size()));
    std::memcpy(o + prefix, chunks[j].data(), chunks[j].size());
  }
  return s;
}

// Chunks of the given sizes, random bytes.
std::vector<std::vector<uint8_t>> fake_chunks(const std::vector<size_t>& sizes, uint64_t seed) {
  std::vector<std::vector<uint8_t>> out;
  for (size_t k = 0; k < sizes.size(); ++k) out.push_back(test::random_bytes(sizes[k], seed + k));
  return out;
}

// The stream of the damage cases: 3 chunks of bf16 (8-byte prefixes).
const std::vector<size_t> kDamageSizes = {100, 37, 5000};
constexpr uint64_t kDamageElements = 2 * 32768 + 9;

// A damaged copy of that stream and what each chunk's check finds in it (`header`: the
// stream's header is damaged, which the GPU finds before any chunk: BadHeader everywhere).
struct Damage {
  const char* what;
  std::vector<uint8_t> stream;
  std::vector<libbits::ChunkCheck> want;
  bool header = false;
};

std::vector<Damage> damages(const std::vector<uint8_t>& good) {
  using C = libbits::ChunkCheck;
  const uint64_t payload_at = format::kHeaderBytes + 3 * format::kOffsetEntryBytes;
  const uint32_t prefix = format::library_prefix_bytes(3);
  const uint64_t chunk1 = payload_at + format::library_chunk_bytes(3, kDamageSizes[0]);  // chunk 1 in the stream
  std::vector<Damage> d;
  d.push_back({"none", good, {C::Ok, C::Ok, C::Ok}});
  d.push_back({"a reserved prefix byte", good, {C::Ok, C::BadPrefix, C::Ok}});
  d.back().stream[chunk1 + 5] = 1;
  d.push_back({"a padding byte after the data", good, {C::Ok, C::BadPrefix, C::Ok}});
  d.back().stream[chunk1 + prefix + kDamageSizes[1]] = 1;
  d.push_back({"a size past its chunk", good, {C::Ok, C::SizeMismatch, C::Ok}});
  format::store_u32(d.back().stream.data() + chunk1, 4000);
  d.push_back({"a size of 0", good, {C::Ok, C::SizeMismatch, C::Ok}});
  format::store_u32(d.back().stream.data() + chunk1, 0);
  d.push_back({"an end offset out of order", good, {C::BadOffsets, C::BadOffsets, C::Ok}});
  format::store_u64(d.back().stream.data() + format::kHeaderBytes, 1u << 20);
  d.push_back({"an end offset off the 16-byte grid", good, {C::BadOffsets, C::BadOffsets, C::Ok}});
  format::store_u64(d.back().stream.data() + format::kHeaderBytes, format::library_chunk_bytes(3, kDamageSizes[0]) + 8);
  // Cut short: the last chunk ends past the payload the receiver has.
  d.push_back({"16 bytes short", good, {C::Ok, C::Ok, C::BadOffsets}});
  d.back().stream.resize(good.size() - 16);
  format::store_u64(d.back().stream.data() + format::kOffPayloadBytes, good.size() - 16 - payload_at);
  d.push_back({"the header", good, {}, true});
  d.back().stream[format::kOffElements] ^= 1;
  return d;
}

// What each chunk's check finds in a container of `chunks` chunks, on the host (library_bits.h,
// which the GPU kernel calls too).
std::vector<libbits::ChunkCheck> host_checks(const std::vector<uint8_t>& s, uint32_t chunks) {
  const uint64_t payload_at = format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} * chunks;
  std::vector<libbits::ChunkCheck> out;
  for (uint32_t j = 0; j < chunks; ++j) {
    uint64_t begin = 0, end = 0, c = 0;
    libbits::ChunkCheck r =
        libbits::chunk_range(s.data() + format::kHeaderBytes, chunks, j, s.size() - payload_at, begin, end);
    if (r == libbits::ChunkCheck::Ok) r = libbits::check_chunk(s.data() + payload_at + begin, end - begin, chunks, &c);
    out.push_back(r);
  }
  return out;
}

// Where chunk j's data starts in a stream of n chunks whose chunks have these sizes.
uint64_t data_offset(uint32_t n, const std::vector<size_t>& sizes, uint32_t j) {
  uint64_t at = format::kHeaderBytes + uint64_t{format::kOffsetEntryBytes} * n;
  for (uint32_t k = 0; k < j; ++k) at += format::library_chunk_bytes(n, sizes[k]);
  return at + format::library_prefix_bytes(n);
}

}  // namespace

TEST_CASE("nvcomp-ans layout: every chunk's data at a 16-byte offset for any chunk count", "[codec][library]") {
  for (uint32_t n = 1; n <= 6; ++n) {
    std::vector<size_t> sizes;
    for (uint32_t k = 0; k < n; ++k) sizes.push_back(1 + 37 * k * k);
    for (uint32_t j = 0; j < n; ++j) CHECK(data_offset(n, sizes, j) % format::kLibraryAlign == 0);
    for (size_t c : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{65536}}) {
      const uint64_t bytes = format::library_chunk_bytes(n, c);
      CHECK(bytes % format::kLibraryAlign == 0);
      CHECK(bytes >= format::library_prefix_bytes(n) + c);
      CHECK(bytes < format::library_prefix_bytes(n) + c + format::kLibraryAlign);
    }
  }
  CHECK(library_chunk_elements(ans(), DType::BF16) == 32768);
  CHECK(library_chunk_elements(ans(), DType::FP32) == 16384);
  // A bound of the container around chunks of at most 1000 bytes: 3 chunks of bf16.
  CHECK(library_max_encoded_size(ans(), DType::BF16, 3 * 32768 - 7, 1000) ==
        format::kHeaderBytes + 3 * format::kOffsetEntryBytes + 3 * format::library_chunk_bytes(3, 1000));
}

TEST_CASE("nvcomp-ans on the host: named, read, never coded", "[codec][library][bad-input]") {
  const Codec& c = codec_by_id(CodecId::NvcompAns);
  CHECK(c.name() == "nvcomp-ans");
  CHECK(c.lossless());
  CHECK(find_codec("nvcomp-ans") == nullptr);  // not one of compcoll's own
  for (std::string_view name : codec_names()) CHECK(name != "nvcomp-ans");
  const std::vector<uint8_t> in(64, 0);
  CHECK_THROWS_WITH(encode(c, DType::BF16, in.data(), 32), Catch::Contains("nvCOMP codes on a GPU only"));
  CHECK_THROWS_WITH(max_encoded_size(c, DType::BF16, 32), Catch::Contains("nvCOMP codes on a GPU only"));

  const std::vector<size_t> sizes = {100, 37, 5000};
  const std::vector<uint8_t> s = library_stream(DType::BF16, 2 * 32768 + 9, fake_chunks(sizes, 7));
  const StreamInfo info = read_stream_info(s.data(), s.size());
  CHECK(info.codec == CodecId::NvcompAns);
  CHECK(info.chunk_count == 3);
  CHECK(info.total_bytes == s.size());
  const StreamInfo expected = library_stream_info(ans(), DType::BF16, 2 * 32768 + 9, s.size());
  CHECK(expected.payload_bytes == info.payload_bytes);
  CHECK(expected.chunk_elements == info.chunk_elements);
  CHECK_THROWS_WITH(library_stream_info(ans(), DType::BF16, 2 * 32768 + 9, 40), Catch::Contains("cannot hold"));
  std::vector<uint8_t> out((2 * 32768 + 9) * 2);
  try {
    decode(s.data(), s.size(), out.data(), out.size());
    FAIL("the host decoded an nvcomp-ans stream");
  } catch (const CodecError& e) {
    CHECK_THAT(e.what(), Catch::Contains("chunk 0") && Catch::Contains("only nvCOMP on a GPU decodes"));
  }
  std::vector<uint8_t> bad = s;
  bad[format::kOffCodec] = 5;
  CHECK_THROWS_WITH(read_stream_info(bad.data(), bad.size()), Catch::Contains("unknown codec id 5"));
}

TEST_CASE("nvcomp-ans chunks: the checks the GPU runs find every damage on the host", "[codec][library][bad-input]") {
  const std::vector<uint8_t> good = library_stream(DType::BF16, kDamageElements, fake_chunks(kDamageSizes, 3));
  for (const Damage& d : damages(good)) {
    if (d.header) continue;  // the header is the kernel's check, before these
    INFO(d.what);
    CHECK(host_checks(d.stream, 3) == d.want);
  }
  // The packer's bytes are the format's: chunk_byte over a chunk rebuilds it.
  const auto chunks = fake_chunks(kDamageSizes, 3);
  const uint64_t payload_at = format::kHeaderBytes + 3 * format::kOffsetEntryBytes;
  uint64_t at = payload_at;
  for (size_t j = 0; j < 3; ++j) {
    const uint64_t size = format::library_chunk_bytes(3, kDamageSizes[j]);
    for (uint64_t b = 0; b < size; ++b)
      REQUIRE(libbits::chunk_byte(format::library_prefix_bytes(3), chunks[j].data(), kDamageSizes[j], b) == good[at + b]);
    at += size;
  }
  CHECK(at == good.size());
}

#ifdef COMPCOLL_HAVE_CUDA

namespace {

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { COMPCOLL_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 1))); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  template <class T = void>
  T* as(size_t byte_offset = 0) const {
    return reinterpret_cast<T*>(static_cast<uint8_t*>(p) + byte_offset);
  }
};

template <class T>
std::vector<T> down(const void* dev, size_t count) {
  std::vector<T> v(count);
  if (count) COMPCOLL_CUDA_CHECK(cudaMemcpy(v.data(), dev, count * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

void up(void* dev, const void* host, size_t bytes) {
  if (bytes) COMPCOLL_CUDA_CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
}

// cuda_library_unpack of `stream` on the device: each chunk's status, and (where 0) its data
// offset in the stream and size.
struct Unpacked {
  std::vector<int32_t> status;
  std::vector<uint64_t> offset;
  std::vector<size_t> bytes;
};

// within: the receiver knows only that the stream lies within its bytes (a wire budget).
Unpacked unpack(const std::vector<uint8_t>& stream, DType dtype, uint64_t elements, bool within = false) {
  StreamInfo info = library_stream_info(ans(), dtype, elements, stream.size());
  info.payload_at_most = within;
  const uint32_t n = info.chunk_count;
  Dev s(stream.size()), ptrs(n * sizeof(void*)), sizes(n * sizeof(size_t)), status(n * sizeof(int32_t));
  up(s.p, stream.data(), stream.size());
  cuda_library_unpack(info, s.p, stream.size(), ptrs.as<void*>(), sizes.as<size_t>(), status.as<int32_t>(), nullptr);
  COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
  Unpacked u{down<int32_t>(status.p, n), {}, down<size_t>(sizes.p, n)};
  for (void* p : down<void*>(ptrs.p, n)) u.offset.push_back(static_cast<uint8_t*>(p) - s.as<uint8_t>());
  return u;
}

uint8_t kind(int32_t status) { return static_cast<uint8_t>(status & 0xFF); }

}  // namespace

TEST_CASE("cuda: the library container is packed as the format says and unpacked again", "[cuda][library]") {
  SKIP_WITHOUT_CUDA();
  for (const std::vector<size_t>& sizes :
       {std::vector<size_t>{100, 37, 5000}, std::vector<size_t>{16, 65536}, std::vector<size_t>{1}}) {
    const auto n = static_cast<uint32_t>(sizes.size());
    const DType dtype = DType::BF16;
    const uint64_t elements = uint64_t{n - 1} * 32768 + 11;
    const auto chunks = fake_chunks(sizes, 100 + n);
    const std::vector<uint8_t> want = library_stream(dtype, elements, chunks);
    // The slots as the library leaves them: each chunk at the start of its own slot. The
    // output holds the bound for that slot (cuda_library_pack's contract), not only the stream.
    const uint64_t slot = format::align_up64(65536 + 100, format::kLibraryAlign);
    const size_t cap = library_max_encoded_size(ans(), dtype, elements, slot);
    REQUIRE(cap >= want.size());
    Dev slots(n * slot), comp(n * sizeof(size_t)), out(cap), size(sizeof(uint64_t)), status(n * sizeof(int32_t)),
        scratch(cuda_library_pack_scratch_bytes(n));
    for (uint32_t j = 0; j < n; ++j) up(slots.as(j * slot), chunks[j].data(), chunks[j].size());
    up(comp.p, sizes.data(), n * sizeof(size_t));
    COMPCOLL_CUDA_CHECK(cudaMemset(out.p, 0xAB, cap));
    COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
    cuda_library_pack(CodecId::NvcompAns, dtype, elements, 32768, slots.p, slot, comp.as<size_t>(), nullptr, out.p,
                      cap, size.as<uint64_t>(), status.as<int32_t>(), scratch.p, cuda_library_pack_scratch_bytes(n),
                      nullptr);
    COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
    REQUIRE(down<uint64_t>(size.p, 1)[0] == want.size());
    CHECK(down<uint8_t>(out.p, want.size()) == want);
    for (int32_t st : down<int32_t>(status.p, n)) CHECK(st == 0);
    const Unpacked u = unpack(want, dtype, elements);
    for (uint32_t j = 0; j < n; ++j) {
      CHECK(u.status[j] == 0);
      CHECK(u.offset[j] == data_offset(n, sizes, j));
      CHECK(u.bytes[j] == sizes[j]);
    }
  }
}

TEST_CASE("cuda: a library container within more bytes unpacks, a cut one says so in every chunk",
          "[cuda][library][budget]") {
  SKIP_WITHOUT_CUDA();
  const std::vector<size_t> sizes = {100, 37, 5000};
  const uint64_t elements = 2 * 32768 + 11;
  const std::vector<uint8_t> good = library_stream(DType::BF16, elements, fake_chunks(sizes, 7));
  auto padded = good;
  padded.resize(good.size() + 48, 0xC3);
  const Unpacked u = unpack(padded, DType::BF16, elements, true);
  for (uint32_t j = 0; j < 3; ++j) {
    CHECK(u.status[j] == 0);
    CHECK(u.offset[j] == data_offset(3, sizes, j));
    CHECK(u.bytes[j] == sizes[j]);
  }
  // Without `within`, the same bytes disagree with the header's payload size.
  for (int32_t st : unpack(padded, DType::BF16, elements).status)
    CHECK(kind(st) == static_cast<uint8_t>(CudaChunkStatus::BadHeader));
  const std::vector<uint8_t> cut(good.begin(), good.end() - 32);
  for (int32_t st : unpack(cut, DType::BF16, elements, true).status)
    CHECK(kind(st) == static_cast<uint8_t>(CudaChunkStatus::Truncated));
}

TEST_CASE("cuda: a chunk the library failed on is packed empty and reported", "[cuda][library]") {
  SKIP_WITHOUT_CUDA();
  const std::vector<size_t> sizes = {100, 200};
  const uint64_t slot = 256;
  Dev slots(2 * slot), comp(2 * sizeof(size_t)), lib(2 * sizeof(int32_t)), out(4096), size(sizeof(uint64_t)),
      status(2 * sizeof(int32_t)), scratch(cuda_library_pack_scratch_bytes(2));
  const std::vector<int32_t> lib_status = {0, 11};
  up(comp.p, sizes.data(), 2 * sizeof(size_t));
  up(lib.p, lib_status.data(), 2 * sizeof(int32_t));
  cuda_library_pack(CodecId::NvcompAns, DType::FP32, 20000, 16384, slots.p, slot, comp.as<size_t>(), lib.as<int32_t>(),
                    out.p, 4096, size.as<uint64_t>(), status.as<int32_t>(), scratch.p, cuda_library_pack_scratch_bytes(2),
                    nullptr);
  COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<int32_t> st = down<int32_t>(status.p, 2);
  CHECK(st[0] == 0);
  CHECK(kind(st[1]) == static_cast<uint8_t>(CudaChunkStatus::LibraryFailed));
  CHECK_THAT(cuda_chunk_status_message(st[1]), Catch::Contains("status 11"));
  // The empty chunk's prefix says 0 bytes, which a receiver refuses.
  const std::vector<uint8_t> stream = down<uint8_t>(out.p, down<uint64_t>(size.p, 1)[0]);
  CHECK(kind(unpack(stream, DType::FP32, 20000).status[1]) == static_cast<uint8_t>(CudaChunkStatus::SizeMismatch));
}

TEST_CASE("cuda: damaged library containers give per-chunk errors, never a crash", "[cuda][library][bad-input]") {
  SKIP_WITHOUT_CUDA();
  const std::vector<uint8_t> good = library_stream(DType::BF16, kDamageElements, fake_chunks(kDamageSizes, 3));
  const auto status_of = [](libbits::ChunkCheck c) {
    switch (c) {
      case libbits::ChunkCheck::Ok: return CudaChunkStatus::Ok;
      case libbits::ChunkCheck::BadOffsets: return CudaChunkStatus::BadOffsets;
      case libbits::ChunkCheck::SizeMismatch: return CudaChunkStatus::SizeMismatch;
      case libbits::ChunkCheck::BadPrefix: return CudaChunkStatus::LibraryBadChunk;
    }
    return CudaChunkStatus::BadHeader;
  };
  for (const Damage& d : damages(good)) {
    INFO(d.what);
    const Unpacked u = unpack(d.stream, DType::BF16, kDamageElements);
    for (size_t j = 0; j < 3; ++j) {
      const CudaChunkStatus want = d.header ? CudaChunkStatus::BadHeader : status_of(d.want[j]);
      CHECK(kind(u.status[j]) == static_cast<uint8_t>(want));
      if (want != CudaChunkStatus::Ok) CHECK(u.bytes[j] == 0);
    }
  }
}

#endif  // COMPCOLL_HAVE_CUDA

#ifdef COMPCOLL_HAVE_NVCOMP

// Where libnvcomp.so.6 does not load (a bundle without it), the nvCOMP cases say so and stop;
// in the build tree it must load (ctest bench_nvcomp_loads fails otherwise).
#define SKIP_WITHOUT_NVCOMP()                                            \
  do {                                                                   \
    if (const std::string why = nvcomp_unavailable(); !why.empty()) {    \
      WARN("SKIPPED: " << why);                                          \
      return;                                                            \
    }                                                                    \
  } while (0)

TEST_CASE("nvcomp: the library loads and bounds nvcomp-ans without a GPU", "[nvcomp]") {
  SKIP_WITHOUT_NVCOMP();
  CHECK_THAT(nvcomp_version(), Catch::StartsWith("nvCOMP 6."));
  // nvCOMP's bound for a 64 KiB chunk exceeds it (ANS may expand), in the container.
  const size_t most = nvcomp_ans_max_encoded_size(DType::BF16, 3 * 32768 + 5);
  CHECK(most > 4 * 65536);
  CHECK((most - format::kHeaderBytes - 4 * format::kOffsetEntryBytes) % format::kLibraryAlign == 0);
}

TEST_CASE("cuda: nvcomp-ans round trips bit-exact from aligned and unaligned buffers", "[cuda][nvcomp]") {
  SKIP_WITHOUT_CUDA();
  SKIP_WITHOUT_NVCOMP();
  for (DType dtype : {DType::BF16, DType::FP16, DType::FP32}) {
    const uint64_t per_chunk = library_chunk_elements(ans(), dtype);
    for (uint64_t elements : {uint64_t{1}, per_chunk, 2 * per_chunk, 3 * per_chunk + 5, 40 * per_chunk + 1}) {
      for (size_t shift : {size_t{0}, dtype_size(dtype)}) {  // 0: 16-byte aligned; else staged
        INFO(dtype_name(dtype) << " " << elements << " elements, buffers shifted " << shift << " bytes");
        const size_t bytes = elements * dtype_size(dtype);
        const std::vector<uint8_t> in = test::gaussian_bytes(dtype, elements, 0.02, elements + shift);
        const uint32_t n = format::chunk_count_for(elements, static_cast<uint32_t>(per_chunk));
        const size_t most = nvcomp_ans_max_encoded_size(dtype, elements);
        const size_t scratch_bytes =
            std::max(nvcomp_ans_encode_scratch_bytes(dtype, elements), nvcomp_ans_decode_scratch_bytes(dtype, elements));
        Dev src(bytes + 16), dst(bytes + 16), wire(most), size(sizeof(uint64_t)), status(n * sizeof(int32_t)),
            scratch(scratch_bytes);
        up(src.as(shift), in.data(), bytes);
        nvcomp_ans_encode(dtype, src.as(shift), elements, wire.p, most, size.as<uint64_t>(), status.as<int32_t>(),
                          scratch.p, scratch_bytes, nullptr);
        COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
        for (int32_t st : down<int32_t>(status.p, n)) REQUIRE(st == 0);
        const uint64_t stream_bytes = down<uint64_t>(size.p, 1)[0];
        REQUIRE(stream_bytes <= most);
        const std::vector<uint8_t> stream = down<uint8_t>(wire.p, stream_bytes);
        CHECK(read_stream_info(stream.data(), stream.size()).codec == CodecId::NvcompAns);
        if (dtype == DType::BF16 && elements >= per_chunk) CHECK(stream_bytes < 0.8 * bytes);
        COMPCOLL_CUDA_CHECK(cudaMemset(status.p, 0x7F, n * sizeof(int32_t)));
        nvcomp_ans_decode(dtype, elements, wire.p, stream_bytes, dst.as(shift), status.as<int32_t>(), scratch.p,
                          scratch_bytes, nullptr);
        COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
        for (int32_t st : down<int32_t>(status.p, n)) CHECK(st == 0);
        CHECK(down<uint8_t>(dst.as(shift), bytes) == in);
        // The same stream with its header damaged: every chunk says so, nothing crashes.
        const uint8_t flipped = down<uint8_t>(wire.as(format::kOffElements), 1)[0] ^ 1;
        up(wire.as(format::kOffElements), &flipped, 1);
        nvcomp_ans_decode(dtype, elements, wire.p, stream_bytes, dst.as(shift), status.as<int32_t>(), scratch.p,
                          scratch_bytes, nullptr);
        COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());
        for (int32_t st : down<int32_t>(status.p, n)) CHECK(kind(st) == static_cast<uint8_t>(CudaChunkStatus::BadHeader));
      }
    }
  }
}

TEST_CASE("cuda: nvcomp-ans encode and decode captured in a CUDA graph, replayed", "[cuda][nvcomp][graph]") {
  SKIP_WITHOUT_CUDA();
  SKIP_WITHOUT_NVCOMP();
  const DType dtype = DType::BF16;
  const uint64_t elements = 5 * 32768 + 3;
  const size_t bytes = elements * 2, most = nvcomp_ans_max_encoded_size(dtype, elements);
  const uint32_t n = 6;
  const size_t scratch_bytes =
      std::max(nvcomp_ans_encode_scratch_bytes(dtype, elements), nvcomp_ans_decode_scratch_bytes(dtype, elements));
  const std::vector<uint8_t> in = test::gaussian_bytes(dtype, elements, 0.02, 42);
  Dev src(bytes), dst(bytes), wire(most), size(sizeof(uint64_t)), enc_status(n * sizeof(int32_t)),
      dec_status(n * sizeof(int32_t)), enc_scratch(scratch_bytes), dec_scratch(scratch_bytes);
  up(src.p, in.data(), bytes);
  COMPCOLL_CUDA_CHECK(cudaDeviceSynchronize());  // the copy is done before the non-blocking stream reads it
  // The receiver's size is the sender's bound here: a graph fixes its arguments when captured,
  // so the decode is given the stream's size from an eager run first.
  cudaStream_t stream = nullptr;
  COMPCOLL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  nvcomp_ans_encode(dtype, src.p, elements, wire.p, most, size.as<uint64_t>(), enc_status.as<int32_t>(), enc_scratch.p,
                    scratch_bytes, stream);
  COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream));
  const uint64_t stream_bytes = down<uint64_t>(size.p, 1)[0];
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  COMPCOLL_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  std::string failed;  // a call the capture refused: the capture is ended before reporting it
  try {
    nvcomp_ans_encode(dtype, src.p, elements, wire.p, most, size.as<uint64_t>(), enc_status.as<int32_t>(),
                      enc_scratch.p, scratch_bytes, stream);
    nvcomp_ans_decode(dtype, elements, wire.p, stream_bytes, dst.p, dec_status.as<int32_t>(), dec_scratch.p,
                      scratch_bytes, stream);
  } catch (const std::exception& e) {
    failed = e.what();
  }
  const cudaError_t captured = cudaStreamEndCapture(stream, &graph);
  cudaGetLastError();  // a refused capture leaves its error behind
  INFO(failed);
  REQUIRE(failed.empty());
  INFO(cudaGetErrorString(captured));
  REQUIRE(captured == cudaSuccess);
  COMPCOLL_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    COMPCOLL_CUDA_CHECK(cudaMemsetAsync(dst.p, 0x5A, bytes, stream));
    COMPCOLL_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    COMPCOLL_CUDA_CHECK(cudaStreamSynchronize(stream));
    CHECK(down<uint64_t>(size.p, 1)[0] == stream_bytes);  // the same bytes each time
    for (int32_t st : down<int32_t>(dec_status.p, n)) CHECK(st == 0);
    CHECK(down<uint8_t>(dst.p, bytes) == in);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

#endif  // COMPCOLL_HAVE_NVCOMP
