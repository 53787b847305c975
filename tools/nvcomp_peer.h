// tools/nvcomp_peer.h — nvCOMP beside compcoll's CUDA codecs: its batched ANS and Bitcomp
// (nvCOMP 6, the C API of nvcomp/ans.h and nvcomp/bitcomp.h) on the device buffer the compcoll
// kernels read, on their stream, timed by their timing (calibrate_cuda.cpp: CUDA events around
// each call, median of the samples), each checked by a separate untimed round trip against the
// host input. `compcoll-bench codec --device cuda` runs both (run_nvcomp_peers); `calibrate
// --device cuda` runs ANS alone on each prefix of its input (run_nvcomp_peer).
// Host header; CUDA builds only. CudaPeerContext comes from calibrate_cuda.cpp (every CUDA
// build); run_nvcomp_peer(s) from nvcomp_peer.cpp, built only where CMake found nvCOMP
// (COMPCOLL_HAVE_NVCOMP, the top CMakeLists.txt).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "calibrate.h"
#include "codec/codec.h"
#include "codec/cuda/nvcomp.h"

namespace compcoll::bench {

// What a peer codec needs of the CUDA device of the run.
struct CudaPeerContext {
  const void* input_dev = nullptr;  // device: the loaded input, `bytes` bytes (cudaMalloc'd)
  uint64_t bytes = 0;
  DType dtype = DType::BF16;
  cudaStream_t stream = nullptr;  // the stream the compcoll kernels are timed on
  // Times `fn` (which enqueues work on `stream`) as the compcoll kernels are timed: one
  // untimed warm-up, then CUDA-event samples until the TimingOptions are met; the median.
  std::function<Measurement(const std::function<void()>& fn)> time;
};

// The context of a device from make_cuda_device() after load(): its input and stream, and its
// timing with `opt`. Valid until the next load() or the device's end. Throws std::logic_error
// for any other device.
CudaPeerContext cuda_peer_context(CalibrationDevice& device, const TimingOptions& opt);

// One peer codec's result on the input of a context.
struct PeerResult {
  std::string codec;              // "nvcomp-ans", "nvcomp-bitcomp"
  uint64_t compressed_bytes = 0;  // every chunk's compressed bytes + 8 per chunk (its size)
  uint64_t payload_bytes = 0;     // every chunk's compressed bytes alone (no sizes)
  double encode_seconds = 0, decode_seconds = 0;  // medians, as Measurement::seconds
  int encode_samples = 0, decode_samples = 0;     // as Measurement::samples
  bool ok = false;                // compressed, decoded and bit-exact
  std::string error;              // why not ok, one line ("" when ok)
};

// Uncompressed bytes per chunk of nvCOMP's batched API in these runs (the last chunk is the
// rest): compcoll::kNvcompChunkBytes (codec/codec.h), the chunk the simulator prices.

// Whether libnvcomp.so.6 loads, its version and file: nvcomp_unavailable(), nvcomp_version(),
// nvcomp_library_file() of codec/cuda/nvcomp.h.

// The peer codecs run_nvcomp_peers runs, in its order: "nvcomp-ans", "nvcomp-bitcomp".
std::vector<std::string> nvcomp_peer_names();

// One nvCOMP codec (a name of nvcomp_peer_names()) on the context's input: compress and
// decompress timed, then the untimed check. `host_input` starts with the context's `bytes`
// bytes (it may hold more: the reference of the check is its first ctx.bytes). A failure (the
// library not loaded, an unknown name, a status, a CUDA error, a wrong byte) is the result's
// error, never an exception.
PeerResult run_nvcomp_peer(const std::string& codec, const CudaPeerContext& ctx, const std::vector<uint8_t>& host_input);

// nvCOMP ANS, then Bitcomp, on the context's input (run_nvcomp_peer of each): a failure of one
// does not stop the other. No results when the library is not loaded (nvcomp_unavailable()).
std::vector<PeerResult> run_nvcomp_peers(const CudaPeerContext& ctx, const std::vector<uint8_t>& host_input);

}  // namespace compcoll::bench
