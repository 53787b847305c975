// shared/calibration/calibration.h — how long the kernels of a plan take on a device: for each
// op (compress, decompress, decode_add, reduce, copy), codec and dtype, a duration as a
// function of bytes.
// A calibration file is measured (`compcoll-bench calibrate`) or derived from stated
// figures; `source` says which and every output that uses the file repeats it.
//
// File format (YAML, docs/CALIBRATION.md):
//   device: "NVIDIA H100 80GB HBM3"
//   source: derived            # derived | measured | zero
//   statement: "where the figures come from"
//   date: 2026-11-23
//   complete: false            # optional, default true; false: a run that had not finished
//   concurrent: 2              # optional, default 1: the host ranks that ran each op at once
//   chunk_elements: auto       # optional, default 16384: the chunks compcoll's codecs coded in
//   missing: ["compress fp8-hadamard bf16", "reduce bf16"]   # with complete: false
//   ratios:                    # optional: ratios a GPU library codec reached (calibrate --device cuda)
//     - {codec: nvcomp-ans, dtype: bf16, tensor: grad, ratio: 0.68512, bytes: 4718592}
//   curves:
//     - {op: compress, codec: gauss-exp, dtype: bf16, latency: 6us, throughput: 350GB/s}
//     - {op: reduce, dtype: bf16, points: [[4096, 3.1e-6], [1048576, 5.2e-6], ...]}
//     - {op: copy, dtype: any, points: [...], alone: [[4096, 2.9e-6], ...]}   # with concurrent > 1
//     - {op: decode_add, codec: gauss-exp, dtype: bf16, points: [...]}   # optional (below)
//   batch_messages: 16         # optional: the most messages one batched launch codes
//   batch_curves:              # optional: a batch of codec ops as one call, measured
//     - {op: compress, codec: gauss-exp, dtype: bf16, messages: 16, points: [...]}
// `bytes` is always the uncompressed size of the data the op touches. Between points the
// duration is interpolated linearly; past the last point it grows at the last segment's rate.
// A partial file (complete: false, written by a calibrate run that had not finished) loads
// like any other: its curves are used, a missing one is refused as in any file (the error says
// the file is partial), and label() says PARTIAL, so every output that names the file does.
#pragma once

#include <string>
#include <vector>

#include "codec/format.h"
#include "util/dtype.h"

namespace compcoll::calib {

// DecodeAdd: a decompression and the reduce that adds its block to an accumulator, as one
// kernel (cuda_decode_add; the nccl executor's run.fused_decode). Optional in a file: where a
// codec has no such curve, seconds() gives the two kernels it replaces, one after the other.
enum class Op : uint8_t { Compress, Decompress, Reduce, Copy, DecodeAdd };
std::string_view op_name(Op op);

struct Curve {
  Op op = Op::Reduce;
  std::string codec;  // empty for reduce and copy
  std::string dtype;  // "bf16", "fp16", "fp32", or "any"
  std::vector<std::pair<double, double>> points;  // (bytes, seconds), bytes increasing
  // With Calibration::concurrent N > 1: the same op alone on the host (the other N - 1 ranks
  // idle), at the same sizes; empty: not measured.
  std::vector<std::pair<double, double>> alone;
  // A batch curve (Calibration::batch_curves): the messages of the batch each point timed, in
  // one call, `bytes` being all of theirs; 1 for every other curve.
  uint32_t messages = 1;
  double seconds(double bytes) const;
  double alone_seconds(double bytes) const;  // seconds() where `alone` is empty
};

// The ratio a codec without a host implementation (a GPU library's, codec/codec.h
// LibraryCodec) reached on the bundled tensors of one kind, measured where the file was:
// compressed payload / uncompressed bytes, as calib::MeasuredRatio counts it.
struct CalibratedRatio {
  std::string codec, dtype, tensor;  // "nvcomp-ans", "bf16", "grad"
  double ratio = 1.0;
  uint64_t bytes = 0;  // uncompressed bytes measured
};

struct Calibration {
  std::string file, device, source, statement, date;
  std::vector<Curve> curves;
  bool complete = true;               // false: the run that wrote the file had not finished
  std::vector<std::string> missing;   // the curves that run did not measure ("reduce bf16")
  std::vector<std::pair<std::string, std::string>> machine;  // the file's machine: (key, value), as written
  // The ranks of a host that ran each op at once when `points` were measured (calibrate
  // --concurrent N): a host kernel's speed beside N - 1 others. 1: alone, or a GPU.
  int concurrent = 1;
  // A batch of codec ops (sched::Op::batched) runs as one launch over all its bytes, as batched
  // codec APIs run it (file key batch_launch: true); false: each op is its own call, unless
  // batch_curves time the batch (below).
  bool batch_launch = false;
  // Batches measured (file key batch_curves, written by calibrate --device cuda): for a compress
  // or decompress of a codec and dtype, a batch of `messages` messages coded in one call, at
  // the same total bytes as its single-call curve. A batch of that op, codec and dtype runs as
  // one call, priced by batch_seconds(), whatever batch_launch says.
  std::vector<Curve> batch_curves;
  // The most messages one call codes (file key batch_messages; 0: no limit): a larger batch
  // runs as calls of at most that many, one after another (cuda_batch_messages()).
  uint32_t batch_messages = 0;
  // The chunk size compcoll's codecs coded in where the file was measured (file key
  // chunk_elements; EncodeOptions::chunk_elements, format::kAutoChunk: by each stream's size):
  // the chunks a plan priced by the file codes its messages in.
  uint32_t chunk_elements = format::kDefaultChunkElements;
  std::vector<CalibratedRatio> ratios;  // the file's `ratios`

  // The measured ratio of `codec` on `dtype` tensors of kind `tensor`; nullptr if the file has none.
  const CalibratedRatio* find_ratio(const std::string& codec, DType dtype, const std::string& tensor) const;

  // The duration of `op` over `bytes` uncompressed bytes. Identity compress/decompress cost
  // nothing (no kernel runs). A decode_add without a curve of its own: the decompress's and
  // the reduce's. Throws config::ConfigError naming the file and what is missing.
  double seconds(Op op, const std::string& codec, DType dtype, double bytes) const;
  // The same op alone on the host (Curve::alone; seconds() where the curve has none).
  double alone_seconds(Op op, const std::string& codec, DType dtype, double bytes) const;
  // Whether a curve exists (no throw).
  bool has(Op op, const std::string& codec, DType dtype) const;
  // Whether a batch of `op` (compress or decompress) of `codec` over `dtype` runs as one call
  // here: batch_launch, or a batch curve for it.
  bool batches(Op op, const std::string& codec, DType dtype) const;
  // The batch curve of `op`, `codec` and `dtype` (or of dtype any); null if the file has none.
  const Curve* find_batch(Op op, const std::string& codec, DType dtype) const;
  // A batch of `messages` equal messages of `bytes` uncompressed bytes in all, as calls of at
  // most batch_messages messages one after another. A call of k messages over b bytes costs,
  // with a batch curve of m messages, the single call's seconds(b) plus (k - 1) / (m - 1) of
  // what the curve's batch adds to it at b (linear in the messages: exact at 1 and m); without
  // one (batch_launch) the single call's seconds(b). Where batches() is false: `messages`
  // calls of bytes / messages each. Throws as seconds() does.
  double batch_seconds(Op op, const std::string& codec, DType dtype, uint32_t messages, double bytes) const;
  // The curve seconds() uses: the op's (and codec's) curve of this dtype, else of dtype any.
  const Curve* find(Op op, const std::string& codec, DType dtype) const;
  // find()'s curve for an op that takes time; null for one that takes none (a zero
  // calibration, identity compress/decompress). Throws as seconds() does.
  const Curve* timed_curve(Op op, const std::string& codec, DType dtype) const;
  // "measured calibration (device, date, file)", with the codecs' chunks where they are not the
  // default ("..., codecs in chunks by each message's size"), the batch curves where there are
  // some and " -- PARTIAL: ..." for a partial file: one line for outputs.
  std::string label() const;
};

Calibration load_calibration(const std::string& path);

// A field of this host's /proc/cpuinfo ("model name", "cache size"); empty when absent.
std::string cpuinfo_field(const std::string& key);
// The last-level cache of cpu0, from sysfs (0 if unknown), and a line saying which (level,
// size, the CPUs sharing it).
uint64_t host_cache_bytes(std::string* source = nullptr);
// How the host `cal` was measured on differs from this one, in what decides a host kernel's
// speed: the CPU model, its cache, the logical CPUs and the host codec path (AVX-512 or
// portable). One "key: X there, Y here" per difference among the keys the file's machine has;
// empty for the same host, and for files that do not say (derived, GPU).
std::vector<std::string> host_differences(const Calibration& cal);
// Every duration zero (tests of the network alone).
Calibration zero_calibration();

}  // namespace compcoll::calib
