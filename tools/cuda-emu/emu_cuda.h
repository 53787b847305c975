// tools/cuda-emu/emu_cuda.h — included first into every kernel file that tools/cuda-emu/build.sh
// compiles for the CPU. It gives device code what nvcc would: the thread coordinates, the block
// and warp synchronisation and exchanges, the atomics and the arithmetic intrinsics, each on the
// emulator's fibers (emu_runtime.cpp: one fiber a CUDA thread, a block at a time). The CUDA
// headers themselves are the toolkit's: the runtime API the host code calls is declared by them
// and defined by emu_runtime.cpp.
//
// What it checks that a CPU run of the same code would not: a warp exchange or __syncwarp whose
// mask leaves out the calling lane or names a lane that has left the kernel, lanes of one mask
// at different exchanges, a barrier some threads never reach (deadlock), shared memory read
// before it is written (poisoned for each block), an asynchronous copy (cp.async) read before
// its thread waits for it (it lands only then) or never waited for, dynamic shared memory past
// what the launch gave or past 48 KiB without cudaFuncSetAttribute, and (built with
// AddressSanitizer) out-of-bounds accesses of device allocations.
//
// What it does not show: timing, memory ordering between blocks (blocks run one after another,
// so a block that waits for a later one deadlocks here and a race between blocks cannot
// appear), and anything of the GPU's own behaviour. A pass here is not a GPU result.
#pragma once

#include <cuda_runtime.h>
#include <cuda/atomic>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace emu {

struct Coordinates {
  uint3 thread;
  uint3 block;
  dim3 block_dim;
  dim3 grid_dim;
};
extern Coordinates cur;  // the running fiber's

enum class WarpOp { Sync, Shfl, Ballot, Any, All, Match };
struct WarpResult {
  uint64_t value;
  unsigned mask;
};
// One warp-wide step: parks the calling lane until every lane of `mask` is at the same step,
// then returns lane `src`'s value (Shfl), the ballot of `pred` (Ballot, Any, All) or the lanes
// of `mask` whose value equals the caller's (Match).
WarpResult warp_op(WarpOp op, unsigned mask, uint64_t value, int src, const char* what);
// A block-wide barrier; returns how many threads passed a non-zero `pred`.
int block_barrier(int pred, const char* what);
void yield();
void* dynamic_shared();
void shared_var(void* p, size_t bytes);
// cp.async (cuda_pipeline_primitives.h): a copy from global to shared memory that the calling
// thread issues now and that lands when it waits for its group (async_wait), not before: its
// destination reads as the poison of unwritten shared memory until then.
void async_copy(void* dst_shared, const void* src_global, size_t size_and_align, size_t zfill);
void async_commit();
void async_wait(size_t prior);

using Body = std::function<void()>;
void launch_kernel(const void* fn, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Body body);

template <class F>
void launch_lambda(F body, const void* id, dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = 0) {
  launch_kernel(id, grid, block, smem, stream, Body(std::move(body)));
}
template <class... P>
const void* id_of(void (*fn)(P...)) {
  return reinterpret_cast<const void*>(fn);
}

template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "a warp exchange moves at most 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T>
T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}
inline int lane_id() {
  const Coordinates& c = cur;
  return static_cast<int>((c.thread.x + c.block_dim.x * (c.thread.y + c.block_dim.y * c.thread.z)) % 32);
}

}  // namespace emu

// ---- what nvcc gives device code ------------------------------------------------------------
#undef __shared__
#undef __launch_bounds__
#undef __grid_constant__
// Static shared memory: one instance, reused by each block in turn (blocks run one at a time);
// rewrite.py follows each declaration with emu::shared_var, which poisons it for each block.
#define __shared__ static
#define __launch_bounds__(...)
#define __grid_constant__
#define threadIdx (::emu::cur.thread)
#define blockIdx (::emu::cur.block)
#define blockDim (::emu::cur.block_dim)
#define gridDim (::emu::cur.grid_dim)

inline void __syncthreads() { ::emu::block_barrier(0, "__syncthreads"); }
inline int __syncthreads_or(int p) { return ::emu::block_barrier(p != 0, "__syncthreads_or") > 0; }
inline int __syncthreads_and(int p) {
  const int live = ::emu::block_barrier(1, "__syncthreads_and (count)");
  return ::emu::block_barrier(p != 0, "__syncthreads_and") == live;
}
inline int __syncthreads_count(int p) { return ::emu::block_barrier(p != 0, "__syncthreads_count"); }
inline void __syncwarp(unsigned mask = 0xFFFFFFFFu) { ::emu::warp_op(::emu::WarpOp::Sync, mask, 0, 0, "__syncwarp"); }
template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  const int lane = ::emu::lane_id();
  const int s = (lane & ~(width - 1)) + (src & (width - 1));
  return ::emu::from_bits<T>(::emu::warp_op(::emu::WarpOp::Shfl, mask, ::emu::to_bits(v), s, "__shfl_sync").value);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  const int lane = ::emu::lane_id();
  int s = lane ^ lane_mask;
  if (s >= ((lane & ~(width - 1)) + width)) s = lane;
  return ::emu::from_bits<T>(::emu::warp_op(::emu::WarpOp::Shfl, mask, ::emu::to_bits(v), s, "__shfl_xor_sync").value);
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int lane = ::emu::lane_id();
  const int s = (lane & (width - 1)) >= static_cast<int>(delta) ? lane - static_cast<int>(delta) : lane;
  return ::emu::from_bits<T>(::emu::warp_op(::emu::WarpOp::Shfl, mask, ::emu::to_bits(v), s, "__shfl_up_sync").value);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int lane = ::emu::lane_id();
  const int s = (lane & (width - 1)) + static_cast<int>(delta) < width ? lane + static_cast<int>(delta) : lane;
  return ::emu::from_bits<T>(::emu::warp_op(::emu::WarpOp::Shfl, mask, ::emu::to_bits(v), s, "__shfl_down_sync").value);
}
inline unsigned __ballot_sync(unsigned mask, int p) {
  return ::emu::warp_op(::emu::WarpOp::Ballot, mask, p != 0, 0, "__ballot_sync").mask;
}
inline int __any_sync(unsigned mask, int p) {
  return ::emu::warp_op(::emu::WarpOp::Any, mask, p != 0, 0, "__any_sync").mask != 0;
}
inline int __all_sync(unsigned mask, int p) {
  return ::emu::warp_op(::emu::WarpOp::All, mask, p != 0, 0, "__all_sync").mask != 0;
}
template <class T>
unsigned __match_any_sync(unsigned mask, T v) {
  return ::emu::warp_op(::emu::WarpOp::Match, mask, ::emu::to_bits(v), 0, "__match_any_sync").mask;
}
inline unsigned __activemask() { return 0xFFFFFFFFu; }
inline void __nanosleep(unsigned) { ::emu::yield(); }
// The toolkit's cuda_pipeline_primitives.h is replaced by these (its include guard, defined here,
// makes a later include of it empty).
#define _CUDA_PIPELINE_PRIMITIVES_H_
inline void __pipeline_memcpy_async(void* dst_shared, const void* src_global, size_t size_and_align,
                                    size_t zfill = 0) {
  ::emu::async_copy(dst_shared, src_global, size_and_align, zfill);
}
inline void __pipeline_commit() { ::emu::async_commit(); }
inline void __pipeline_wait_prior(size_t prior) { ::emu::async_wait(prior); }
inline void __threadfence() {}
inline void __threadfence_block() {}

inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
  s &= 31;
  return s == 0 ? hi : (hi << s) | (lo >> (32 - s));
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
  s &= 31;
  return s == 0 ? lo : (lo >> s) | (hi << (32 - s));
}
// Byte n of the result is byte ((s >> 4n) & 7) of the 8 bytes y:x (x the low four).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long v = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned r = 0;
  for (unsigned n = 0; n < 4; ++n) r |= static_cast<unsigned>((v >> (8 * ((s >> (4 * n)) & 7u))) & 0xFFu) << (8 * n);
  return r;
}
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline int __float_as_int(float f) { return std::bit_cast<int>(f); }
inline float __int_as_float(int u) { return std::bit_cast<float>(u); }
// The host's float arithmetic (SSE) rounds to nearest even, one rounding per operation, as
// these intrinsics do.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }

// Atomics: the fibers of one block run one at a time, so a plain read-modify-write is atomic.
namespace emu {
template <class T, class F>
T read_modify_write(T* p, F f) {
  const T old = *p;
  *p = f(old);
  return old;
}
}  // namespace emu
template <class T>
T atomicAdd(T* p, T v) { return ::emu::read_modify_write(p, [v](T o) { return static_cast<T>(o + v); }); }
template <class T>
T atomicMin(T* p, T v) { return ::emu::read_modify_write(p, [v](T o) { return v < o ? v : o; }); }
template <class T>
T atomicMax(T* p, T v) { return ::emu::read_modify_write(p, [v](T o) { return o < v ? v : o; }); }
template <class T>
T atomicOr(T* p, T v) { return ::emu::read_modify_write(p, [v](T o) { return static_cast<T>(o | v); }); }
template <class T>
T atomicAnd(T* p, T v) { return ::emu::read_modify_write(p, [v](T o) { return static_cast<T>(o & v); }); }
template <class T>
T atomicExch(T* p, T v) { return ::emu::read_modify_write(p, [v](T) { return v; }); }
template <class T>
T atomicCAS(T* p, T compare, T v) { return ::emu::read_modify_write(p, [=](T o) { return o == compare ? v : o; }); }

// CUDA's global min, max and isfinite of device code, and the runtime's templates over a
// kernel's pointer.
template <class A, class B>
std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(b) < static_cast<C>(a) ? static_cast<C>(b) : static_cast<C>(a);
}
template <class A, class B>
std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b) : static_cast<C>(a);
}
using std::isfinite;
using std::isinf;
using std::isnan;
template <class T>
cudaError_t cudaFuncSetAttribute(T* fn, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(fn), attr, value);
}
template <class T>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, T* fn, int threads, size_t smem) {
  return ::cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, reinterpret_cast<const void*>(fn), threads, smem);
}

// Code shared by the host and the kernels takes its device branches.
#define __CUDA_ARCH__ 900
