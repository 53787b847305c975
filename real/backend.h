// real/backend.h — where the real executor's data lives and how it computes on it: buffers,
// copies, the reduce kernel and the codecs. HostBackend: host memory, the host codecs of
// codec/codec.h and codec/reduce.h; CudaBackend (real/cuda_backend.h): device memory, the CUDA
// kernels of codec/cuda/codec_cuda.h and codec/cuda/reduce_cuda.h, on one stream. The executor drives
// both through this interface; nothing here sends or receives.
//
// Operations are asynchronous: each returns a Completion the executor polls with done().
// The host backend finishes them before returning, or with a compute thread queues them for
// one worker thread per rank (run in submission order) while the rank's thread drives MPI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "codec/codec.h"
#include "real/transport.h"

namespace compcoll::real {

using Completion = int;  // -1: already complete

// After a decompress: the stream held `count` elements of `dtype`, as the schedule's slice
// says, or it is a CodecError (a message of another slice, or a damaged header).
inline void check_decoded(const StreamInfo& info, const Codec& codec, const EncodeOptions& opt, DType dtype,
                          uint64_t count) {
  if (info.elements != count || info.dtype != dtype)
    throw CodecError("a stream of " + std::to_string(info.elements) + " " + std::string(dtype_name(info.dtype)) +
                         " elements where " + std::to_string(count) + " " + std::string(dtype_name(dtype)) +
                         " were expected",
                     0);
  const uint32_t chunk = format::chunk_elements_for(opt.chunk_elements, count);
  if (info.codec != codec.id() || info.chunk_elements != chunk)
    throw CodecError("a " + std::string(codec_by_id(info.codec).name()) + " stream in chunks of " +
                         std::to_string(info.chunk_elements) + " elements where " + std::string(codec.name()) +
                         " in chunks of " + std::to_string(chunk) + " was expected",
                     0);
}

// A message of a batch (compress_batch, decompress_batch): compress's and decompress's arguments.
struct CompressItem {
  const void* src;
  uint64_t count;
  void* wire;
  size_t capacity;
  uint64_t* stream_bytes;
};
struct DecompressItem {
  const void* wire;
  size_t bytes;
  void* dst;
  uint64_t count;
};

class DataBackend {
 public:
  virtual ~DataBackend() = default;
  virtual MemorySpace memory() const = 0;
  virtual std::string describe() const = 0;  // "host (12 cores)", "NVIDIA H100 80GB HBM3 (sm_90)"

  virtual void* alloc(size_t bytes) = 0;  // zeroed; nullptr for 0 bytes
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;    // synchronous
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;  // synchronous

  // Upper bound of compress()'s stream of `count` elements: max_encoded_size (codec.h); the
  // CUDA backend asks a library codec (nvcomp-ans) for its own.
  virtual size_t max_encoded_size(const Codec& codec, DType dtype, uint64_t count, const EncodeOptions& opt) const {
    return compcoll::max_encoded_size(codec, dtype, count, opt);
  }

  virtual Completion copy(void* dst, const void* src, size_t bytes) = 0;
  // dst += src, elementwise; 16-bit types add in fp32 and round to nearest even (the
  // reference executor's rule, so results are bitwise the same).
  virtual Completion reduce(DType dtype, void* dst, const void* src, uint64_t count) = 0;
  // Encodes `count` elements at src into `wire` (capacity bytes, at least max_encoded_size);
  // the stream's size is in *stream_bytes (host) once the completion is done.
  virtual Completion compress(const Codec& codec, DType dtype, const void* src, uint64_t count, void* wire,
                              size_t capacity, const EncodeOptions& opt, uint64_t* stream_bytes) = 0;
  // Decodes the stream at `wire`, which `codec` wrote with `opt`, into exactly `count`
  // elements at dst. The stream lies within the `bytes` bytes at wire: its own header says
  // where it ends (docs/FORMAT.md), and bytes after that are not read (a stream sent within a
  // wire budget, executor.h). Damage, a stream cut short, or a stream that is not such a one
  // throws CodecError (from done(), where the check runs on the device).
  virtual Completion decompress(const Codec& codec, const EncodeOptions& opt, const void* wire, size_t bytes,
                                DType dtype, void* dst, uint64_t count) = 0;
  // Whether decompress_add runs for `codec` here; false (the default): the executor decodes,
  // then reduces.
  virtual bool decompress_adds(const Codec& codec) const {
    (void)codec;
    return false;
  }
  // acc += the stream decoded (`count` elements at acc), in one operation, the bits a decompress
  // then a reduce would leave; the stream as for decompress. Only where decompress_adds(codec).
  virtual Completion decompress_add(const Codec& codec, const EncodeOptions& opt, const void* wire, size_t bytes,
                                    DType dtype, void* acc, uint64_t count) {
    (void)opt, (void)wire, (void)bytes, (void)dtype, (void)acc, (void)count;
    throw std::logic_error("decompress_add: this backend does not decode and add " + std::string(codec.name()) +
                           " in one operation");
  }
  // Whether compress_batch and decompress_batch code a batch of `codec`'s messages in one call
  // here; false (the default): the executor runs a batch's ops one by one.
  virtual bool batches(const Codec& codec) const {
    (void)codec;
    return false;
  }
  // compress of each item, in one call (each stream's size in its *stream_bytes once the
  // completion is done); decompress of each item, in one call, the streams as for decompress
  // (damage in any throws CodecError from done()). Only where batches(codec).
  virtual Completion compress_batch(const Codec& codec, DType dtype, const CompressItem* items, size_t count,
                                    const EncodeOptions& opt) {
    (void)dtype, (void)items, (void)count, (void)opt;
    throw std::logic_error("compress_batch: this backend does not code a batch of " + std::string(codec.name()) +
                           " messages in one call");
  }
  virtual Completion decompress_batch(const Codec& codec, const EncodeOptions& opt, DType dtype,
                                      const DecompressItem* items, size_t count) {
    (void)opt, (void)dtype, (void)items, (void)count;
    throw std::logic_error("decompress_batch: this backend does not decode a batch of " + std::string(codec.name()) +
                           " messages in one call");
  }
  // True once c finished (c is then released); an error the operation raised (a CodecError)
  // is thrown here. host_seconds, if given, gets how long a host operation run on the compute
  // thread took (the executor times those it runs itself).
  virtual bool done(Completion c, double* host_seconds) = 0;
  // Nothing to do but wait for this backend: blocks until its next completion, true; false at
  // once when none of its operations is pending, or it cannot block (the caller polls).
  virtual bool wait_any() { return false; }
  virtual void synchronize() = 0;

  // Queued mode (ExecutorOptions::queue_ahead): operations run in submission order on one
  // queue (a CUDA stream; the host's compute thread), and can be made to wait there for a
  // transport's mark without the host waiting. false: neither.
  virtual bool queues() const { return false; }
  // The end of operation c (submitted, not yet done()) as a mark.
  virtual QueueMark mark(Completion c) {
    (void)c;
    throw std::logic_error("mark: " + describe() + " has no queued mode");
  }
  // The next operation submitted starts once `m` (a transport's) has passed.
  virtual void queue_after(const QueueMark& m) {
    (void)m;
    throw std::logic_error("queue_after: " + describe() + " has no queued mode");
  }

  // Seconds between timer_start() and timer_stop() of the work submitted in between (CUDA
  // events on the device; the wall clock on the host).
  virtual void timer_start() = 0;
  virtual double timer_stop() = 0;
};

// codec_threads: threads coding (and decoding) each stream's chunks (EncodeOptions::threads).
// compute_thread: kernels (codecs, reduce, copy) on a worker thread of their own, so that a
// rank's receive copies (MPI's progress, on the rank's thread) run beside its kernels.
// decode_add: decompress_add for every codec (a decode into a buffer of its own, then the
// reduce), so that the executor's fused path runs on hosts too (the tests); compcoll-run's MPI
// backend leaves it off. batch: compress_batch and decompress_batch for every codec (the
// messages one after another, in one operation), so that the executor's batched path runs on
// hosts too (the tests); compcoll-run's MPI backend leaves it off.
std::unique_ptr<DataBackend> make_host_backend(uint32_t codec_threads = 1, bool compute_thread = false,
                                               bool decode_add = false, bool batch = false);

}  // namespace compcoll::real
