// tools/cuda-emu/emu_runtime.cpp — the CPU side of the kernel emulator (emu_cuda.h): a fiber for
// each CUDA thread of a block, the blocks of a grid one after another, and the part of the CUDA
// runtime API that compcoll's kernels and their tests call, over host memory. A stream's work
// waits in its queue until something needs it done (below, "streams, events and graphs"), or
// is recorded while the stream is captured and replayed by cudaGraphLaunch. Every misuse the
// emulator can see in a kernel ends the process with one line on stderr naming the block and
// the thread.
#include "emu_cuda.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

// Switches stacks: saves the callee-saved registers and the floating-point control words on
// the current stack, stores its pointer in *from and continues on `to` (x86-64 System V). A
// few instructions and no system call, where swapcontext saves the signal mask each time.
extern "C" void emu_switch(void** from, void* to);
asm(R"(
  .pushsection .text
  .globl emu_switch
  .type emu_switch, @function
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch, .-emu_switch
  .popsection
)");

namespace emu {

Coordinates cur;

namespace {

constexpr size_t kStackBytes = 256 * 1024;  // below it a guard page: an overflow faults
constexpr size_t kEntryFrames = 16 * 1024;
constexpr size_t kDefaultDynamicShared = 48 * 1024;  // without cudaFuncAttributeMaxDynamicSharedMemorySize
constexpr size_t kMaxDynamicShared = 227 * 1024;     // Hopper's opt-in limit
constexpr uint8_t kSharedPoison = 0xCB;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "cuda-emu: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

enum class State { Runnable, AtWarp, AtBlock, Done };

struct AsyncCopy {
  void* dst;
  const void* src;
  size_t bytes, zfill;
};

struct Fiber {
  void* sp = nullptr;  // its saved stack pointer while it does not run
  void* stack = nullptr;
  uint3 thread{};
  int lane = 0, warp = 0;
  State state = State::Runnable;
  // at a warp step
  WarpOp op = WarpOp::Sync;
  unsigned mask = 0;
  uint64_t value = 0;
  int src = 0;
  const char* what = "";
  WarpResult result{};
  // at a barrier
  int pred = 0;
  int count = 0;
  // cp.async: copies issued since the last commit, and the committed groups not yet waited for
  std::vector<AsyncCopy> async_open;
  std::deque<std::vector<AsyncCopy>> async_groups;
};

struct Block {
  std::vector<Fiber> fibers;
  Fiber* running = nullptr;
  void* scheduler_sp = nullptr;
  Body* body = nullptr;
  std::vector<uint8_t> dynamic;
#if EMU_ASAN
  const void* main_bottom = nullptr;  // the scheduler's stack, for AddressSanitizer's fiber calls
  size_t main_size = 0;
#endif
} g_block;

std::string where(const Fiber& f) {
  char b[160];
  std::snprintf(b, sizeof b, "block (%u,%u,%u) thread (%u,%u,%u) [warp %d lane %d]", cur.block.x, cur.block.y,
                cur.block.z, f.thread.x, f.thread.y, f.thread.z, f.warp, f.lane);
  return b;
}

void switch_to_scheduler(Fiber& f) {
#if EMU_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, g_block.main_bottom, g_block.main_size);
  emu_switch(&f.sp, g_block.scheduler_sp);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  emu_switch(&f.sp, g_block.scheduler_sp);
#endif
}

// A fiber's first frame: runs the kernel, then returns to the scheduler for good.
extern "C" [[noreturn]] void emu_fiber_entry() {
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &g_block.main_bottom, &g_block.main_size);
#endif
  (*g_block.body)();
  Fiber& f = *g_block.running;
  if (!f.async_open.empty() || !f.async_groups.empty())
    fail("cp.async copies never waited for (__pipeline_wait_prior) when the thread ends, at " + where(f));
  f.state = State::Done;
#if EMU_ASAN
  __sanitizer_start_switch_fiber(nullptr, g_block.main_bottom, g_block.main_size);
#endif
  void* dead = nullptr;
  emu_switch(&dead, g_block.scheduler_sp);
  std::abort();  // never resumed
}

// A new fiber's stack, laid out as emu_switch leaves a stack it switched away from: the
// control words, six registers and, as the return address, emu_fiber_entry, entered with the
// stack aligned as a call leaves it.
void* initial_stack(void* stack) {
#if EMU_ASAN
  // The frames that never returned (the last fiber's entry and switch) are still poisoned;
  // the kernel's own frames returned, and unpoisoned themselves.
  ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(stack) + kStackBytes - kEntryFrames, kEntryFrames);
#endif
  auto* top = reinterpret_cast<uint64_t*>(static_cast<char*>(stack) + kStackBytes);
  *--top = 0;  // emu_fiber_entry's own return address (none), keeps the call alignment
  *--top = reinterpret_cast<uint64_t>(&emu_fiber_entry);
  for (int r = 0; r < 6; ++r) *--top = 0;
  uint32_t mxcsr = 0;
  uint16_t fpucw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  *--top = static_cast<uint64_t>(mxcsr) | static_cast<uint64_t>(fpucw) << 32;
  return top;
}

void resume(Fiber& f) {
  g_block.running = &f;
  cur.thread = f.thread;
#if EMU_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, kStackBytes);
  emu_switch(&g_block.scheduler_sp, f.sp);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  emu_switch(&g_block.scheduler_sp, f.sp);
#endif
  g_block.running = nullptr;
}

// Completes the warp steps whose lanes have all arrived; returns whether any did.
bool complete_warp_steps() {
  bool progress = false;
  std::vector<Fiber>& fs = g_block.fibers;
  const size_t warps = (fs.size() + 31) / 32;
  for (size_t w = 0; w < warps; ++w) {
    const size_t base = w * 32;
    const size_t lanes = std::min<size_t>(32, fs.size() - base);
    for (size_t l = 0; l < lanes; ++l) {
      Fiber& f = fs[base + l];
      if (f.state != State::AtWarp) continue;
      bool all = true;
      for (size_t o = 0; o < 32 && all; ++o) {
        if (!(f.mask >> o & 1u)) continue;
        if (o >= lanes) fail(std::string(f.what) + ": mask names lane " + std::to_string(o) +
                             " beyond the block's threads, at " + where(f));
        const Fiber& g = fs[base + o];
        if (g.state == State::Done)
          fail(std::string(f.what) + ": mask names lane " + std::to_string(o) + ", which has left the kernel, at " +
               where(f));
        if (g.state != State::AtWarp) all = false;
      }
      if (!all) continue;
      // Every lane of the mask is at a warp step: the same one, with the same mask.
      for (size_t o = 0; o < 32; ++o) {
        if (!(f.mask >> o & 1u)) continue;
        const Fiber& g = fs[base + o];
        if (g.mask != f.mask || g.op != f.op)
          fail(std::string("lanes of one mask at different warp steps: ") + f.what + " mask " +
               std::to_string(f.mask) + " at " + where(f) + ", " + g.what + " mask " + std::to_string(g.mask) +
               " at " + where(g));
      }
      unsigned ballot = 0;
      for (size_t o = 0; o < 32; ++o)
        if ((f.mask >> o & 1u) && fs[base + o].value != 0) ballot |= 1u << o;
      for (size_t o = 0; o < 32; ++o) {
        if (!(f.mask >> o & 1u)) continue;
        Fiber& g = fs[base + o];
        switch (g.op) {
          case WarpOp::Sync: g.result = {0, 0}; break;
          case WarpOp::Shfl: {
            const int s = g.src;
            // A source outside the mask (or the block) gives an undefined value on the GPU.
            if (s < 0 || s >= 32 || !(f.mask >> s & 1u))
              fail(std::string(g.what) + ": reads lane " + std::to_string(s) + ", outside the mask " +
                   std::to_string(f.mask) + ", at " + where(g));
            g.result = {fs[base + s].value, 0};
            break;
          }
          case WarpOp::Ballot: g.result = {0, ballot}; break;
          case WarpOp::Any: g.result = {0, ballot != 0 ? 1u : 0u}; break;
          case WarpOp::All: g.result = {0, ballot == f.mask ? 1u : 0u}; break;
          case WarpOp::Match: {
            unsigned m = 0;
            for (size_t p = 0; p < 32; ++p)
              if ((f.mask >> p & 1u) && fs[base + p].value == g.value) m |= 1u << p;
            g.result = {0, m};
            break;
          }
        }
      }
      for (size_t o = 0; o < 32; ++o)
        if (f.mask >> o & 1u) fs[base + o].state = State::Runnable;
      progress = true;
    }
  }
  return progress;
}

// Completes a barrier that every thread still in the kernel has reached.
bool complete_barrier() {
  int count = 0, waiting = 0, live = 0;
  for (const Fiber& f : g_block.fibers) {
    if (f.state == State::Done) continue;
    ++live;
    if (f.state == State::AtBlock) {
      ++waiting;
      count += f.pred != 0;
    }
  }
  if (live == 0 || waiting != live) return false;
  for (Fiber& f : g_block.fibers) {
    if (f.state != State::AtBlock) continue;
    f.count = count;
    f.state = State::Runnable;
  }
  return true;
}

[[noreturn]] void deadlock() {
  std::string s = "deadlock in block (" + std::to_string(cur.block.x) + "," + std::to_string(cur.block.y) + "," +
                  std::to_string(cur.block.z) + "):";
  int shown = 0;
  for (const Fiber& f : g_block.fibers) {
    if (f.state == State::Done) continue;
    if (shown++ < 6)
      s += std::string(" [warp ") + std::to_string(f.warp) + " lane " + std::to_string(f.lane) + " at " +
           (f.state == State::AtBlock ? "a block barrier" : f.what) +
           (f.state == State::AtWarp ? " mask " + std::to_string(f.mask) : std::string()) + "]";
  }
  fail(s);
}

std::vector<void*> g_stacks;
uint64_t g_block_generation = 0;
std::map<void*, uint64_t> g_shared_poisoned;  // a static shared variable: the block that poisoned it

void* take_stack(size_t i) {
  while (g_stacks.size() <= i) {
    void* p = mmap(nullptr, kStackBytes + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED || mprotect(p, 4096, PROT_NONE) != 0) fail("mmap of a fiber stack failed");
    g_stacks.push_back(static_cast<char*>(p) + 4096);
  }
  return g_stacks[i];
}

// An environment variable that chooses between two orders: true for `first` (also when unset),
// false for `second`; anything else ends the program.
bool env_order(const char* name, const std::string& first, const std::string& second) {
  const char* e = std::getenv(name);
  const std::string order = e != nullptr ? e : first;
  if (order != first && order != second)
    fail(std::string(name) + ": expected " + first + " or " + second + ", got '" + order + "'");
  return order == first;
}

// The order in which a block's threads run between steps: thread 0 first
// (EMU_THREAD_ORDER=forward, the default) or the last thread first (reverse). A read of what
// another thread writes before a missing barrier or __syncwarp finds the old value in one
// order or the other, whichever thread has the lower index.
bool lanes_reversed() {
  static const bool v = !env_order("EMU_THREAD_ORDER", "forward", "reverse");
  return v;
}

void run_block(Body& body, dim3 block_dim) {
  const size_t n = size_t{block_dim.x} * block_dim.y * block_dim.z;
  g_block.fibers.assign(n, Fiber{});
  g_block.body = &body;
  ++g_block_generation;
  std::fill(g_block.dynamic.begin(), g_block.dynamic.end(), kSharedPoison);
  for (size_t i = 0; i < n; ++i) {
    Fiber& f = g_block.fibers[i];
    f.thread = {static_cast<unsigned>(i % block_dim.x), static_cast<unsigned>(i / block_dim.x % block_dim.y),
                static_cast<unsigned>(i / (size_t{block_dim.x} * block_dim.y))};
    f.lane = static_cast<int>(i % 32);
    f.warp = static_cast<int>(i / 32);
    f.stack = take_stack(i);
    f.sp = initial_stack(f.stack);
  }
  for (;;) {
    bool ran = false;
    for (size_t i = 0; i < n; ++i) {
      Fiber& f = g_block.fibers[lanes_reversed() ? n - 1 - i : i];
      if (f.state == State::Runnable) {
        resume(f);
        ran = true;
      }
    }
    const bool warp = complete_warp_steps();
    const bool barrier = complete_barrier();
    if (ran || warp || barrier) continue;
    const auto done = [](const Fiber& f) { return f.state == State::Done; };
    if (std::all_of(g_block.fibers.begin(), g_block.fibers.end(), done))
      break;
    deadlock();
  }
  cur.thread = {0, 0, 0};
}

// ---- streams, events and graphs -----------------------------------------------------------
//
// A stream's work waits in its queue until something needs it done: a synchronisation of the
// stream, of an event recorded in it or of the device, another stream's wait on such an event,
// a copy to pageable host memory, or the legacy default stream's implicit order with the
// blocking streams. So work that depends on another stream's without an event between them
// may run before what it depends on, as it may on a GPU, and read wrong data.

using Work = std::function<void()>;

struct Graph {
  std::vector<Work> work;
  std::vector<void*> owned;  // allocations made while capturing
};

struct Stream {
  bool blocking = true;  // synchronises with the legacy default stream
  bool capturing = false;
  Graph* graph = nullptr;
  std::deque<Work> queue;
  uint64_t enqueued = 0, done = 0;
};

struct Event {
  Stream* stream = nullptr;  // where it was last recorded
  uint64_t at = 0;           // the stream's work before it
  double time_ms = 0;        // when that work was done
  bool timing = true;
};

Stream g_legacy;
Stream g_per_thread;
std::vector<Stream*> g_streams = {&g_legacy, &g_per_thread};

std::map<const void*, size_t> g_max_dynamic;  // cudaFuncAttributeMaxDynamicSharedMemorySize
std::map<void*, size_t> g_allocations;
std::map<void*, size_t> g_pinned;
std::mutex g_mutex;
cudaError_t g_last = cudaSuccess;
int g_capturing = 0;  // streams capturing now

Stream* stream_of(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy) return &g_legacy;
  if (s == cudaStreamPerThread) return &g_per_thread;
  return reinterpret_cast<Stream*>(s);
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Runs `st`'s work up to (not including) its `upto`-th item.
void drain(Stream* st, uint64_t upto) {
  while (st->done < upto && !st->queue.empty()) {
    Work w = std::move(st->queue.front());
    st->queue.pop_front();
    ++st->done;
    w();
  }
}
void drain_all(Stream* st) { drain(st, st->enqueued); }
// The order in which a device-wide synchronisation runs the streams' work: the newest stream
// first (EMU_STREAM_ORDER=newest, the default: a consumer is often made after its producer),
// or with EMU_STREAM_ORDER=forward the oldest first. Run a check both ways to find a missing
// dependency either way round.
bool newest_first() {
  static const bool v = env_order("EMU_STREAM_ORDER", "newest", "forward");
  return v;
}
void drain_device() {
  for (bool more = true; more;) {
    more = false;
    const std::vector<Stream*> order = g_streams;
    for (size_t i = 0; i < order.size(); ++i) {
      Stream* st = order[newest_first() ? order.size() - 1 - i : i];
      if (!st->queue.empty()) {
        drain_all(st);
        more = true;
      }
    }
  }
}

void enqueue(Stream* st, Work w) {
  if (st->capturing) {
    st->graph->work.push_back(std::move(w));
    return;
  }
  // The legacy default stream waits for the blocking streams' earlier work, and they for its.
  if (st == &g_legacy) {
    std::vector<std::pair<Stream*, uint64_t>> before;
    for (Stream* o : g_streams)
      if (o != st && o->blocking) before.emplace_back(o, o->enqueued);
    st->queue.push_back([before] {
      for (auto [o, at] : before) drain(o, at);
    });
    ++st->enqueued;
  } else if (st->blocking) {
    const uint64_t at = g_legacy.enqueued;
    st->queue.push_back([at] { drain(&g_legacy, at); });
    ++st->enqueued;
  }
  st->queue.push_back(std::move(w));
  ++st->enqueued;
}
void run_on(cudaStream_t s, Work w) { enqueue(stream_of(s), std::move(w)); }

cudaError_t refuse_while_capturing(const char* call) {
  if (g_capturing == 0) return cudaSuccess;
  std::fprintf(stderr, "cuda-emu: %s while a stream is captured (not allowed in thread-local capture)\n", call);
  return g_last = cudaErrorStreamCaptureUnsupported;
}

void* allocate(size_t bytes, std::map<void*, size_t>& into) {
  void* p = std::aligned_alloc(256, std::max<size_t>(256, (bytes + 255) / 256 * 256));
  if (p == nullptr) return nullptr;
#if !EMU_ASAN
  std::memset(p, 0xEE, std::max<size_t>(bytes, 1));  // fresh device memory is not zero
#endif
  std::lock_guard<std::mutex> lock(g_mutex);
  into[p] = bytes;
  return p;
}

bool pinned(const void* p) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_pinned.upper_bound(const_cast<void*>(p));
  if (it == g_pinned.begin()) return false;
  --it;
  return static_cast<const char*>(p) < static_cast<const char*>(it->first) + it->second;
}

bool device_memory(const void* p) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_allocations.upper_bound(const_cast<void*>(p));
  if (it == g_allocations.begin()) return false;
  --it;
  return static_cast<const char*>(p) < static_cast<const char*>(it->first) + std::max<size_t>(it->second, 1);
}

}  // namespace

void run_in_stream(cudaStream_t s, std::function<void()> work) { run_on(s, std::move(work)); }

WarpResult warp_op(WarpOp op, unsigned mask, uint64_t value, int src, const char* what) {
  Fiber& f = *g_block.running;
  if (!(mask >> f.lane & 1u))
    fail(std::string(what) + ": the mask " + std::to_string(mask) + " leaves out the calling lane, at " + where(f));
  f.op = op;
  f.mask = mask;
  f.value = value;
  f.src = src;
  f.what = what;
  f.state = State::AtWarp;
  switch_to_scheduler(f);
  return f.result;
}

int block_barrier(int pred, const char* what) {
  Fiber& f = *g_block.running;
  f.pred = pred;
  f.what = what;
  f.state = State::AtBlock;
  switch_to_scheduler(f);
  return f.count;
}

void yield() {
  Fiber& f = *g_block.running;
  switch_to_scheduler(f);
}

void shared_var(void* p, size_t bytes) {
  uint64_t& g = g_shared_poisoned[p];
  if (g == g_block_generation) return;
  g = g_block_generation;
  std::memset(p, kSharedPoison, bytes);
}

void async_copy(void* dst, const void* src, size_t bytes, size_t zfill) {
  Fiber& f = *g_block.running;
  if (bytes != 4 && bytes != 8 && bytes != 16)
    fail("__pipeline_memcpy_async of " + std::to_string(bytes) + " bytes (4, 8 or 16), at " + where(f));
  if (zfill > bytes) fail("__pipeline_memcpy_async: zfill past the copy, at " + where(f));
  if (reinterpret_cast<uintptr_t>(dst) % bytes != 0 || reinterpret_cast<uintptr_t>(src) % bytes != 0)
    fail("__pipeline_memcpy_async of " + std::to_string(bytes) + " bytes from or to an address not aligned to it, at " +
         where(f));
  std::memset(dst, kSharedPoison, bytes);  // unwritten until the thread waits for it
  f.async_open.push_back({dst, src, bytes, zfill});
}

void async_commit() {
  Fiber& f = *g_block.running;
  f.async_groups.push_back(std::move(f.async_open));
  f.async_open.clear();
}

void async_wait(size_t prior) {
  Fiber& f = *g_block.running;
  while (f.async_groups.size() > prior) {
    for (const AsyncCopy& c : f.async_groups.front()) {
      std::memcpy(c.dst, c.src, c.bytes - c.zfill);
      std::memset(static_cast<char*>(c.dst) + (c.bytes - c.zfill), 0, c.zfill);
    }
    f.async_groups.pop_front();
  }
}

void* dynamic_shared() {
  if (g_block.dynamic.empty()) return nullptr;
  return g_block.dynamic.data();
}

void launch_kernel(const void* fn, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Body body) {
  const size_t threads = size_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535 || block.z > 64) {
    std::fprintf(stderr, "cuda-emu: invalid launch configuration: grid (%u,%u,%u) block (%u,%u,%u)\n", grid.x, grid.y,
                 grid.z, block.x, block.y, block.z);
    g_last = cudaErrorInvalidConfiguration;
    return;
  }
  size_t limit = kDefaultDynamicShared;
  if (auto it = g_max_dynamic.find(fn); it != g_max_dynamic.end()) limit = it->second;
  if (smem > limit) {
    std::fprintf(stderr, "cuda-emu: launch asks %zu bytes of dynamic shared memory; the kernel allows %zu\n", smem,
                 limit);
    g_last = cudaErrorInvalidValue;
    return;
  }
  run_on(stream, [grid, block, smem, body = std::move(body)]() mutable {
    g_block.dynamic.assign(smem, kSharedPoison);
    cur.grid_dim = grid;
    cur.block_dim = block;
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
          cur.block = {x, y, z};
          run_block(body, block);
        }
  });
}

}  // namespace emu

// ---- the CUDA runtime API, as far as compcoll and its tests call it ----------------------------

using emu::g_last;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : (g_last = cudaErrorInvalidDevice); }
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 4; return cudaSuccess;  // a small GPU: few resident blocks
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 227 * 1024; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    case cudaDevAttrWarpSize: *value = 32; return cudaSuccess;
    case cudaDevAttrClockRate: *value = 1000000; return cudaSuccess;        // kHz
    case cudaDevAttrMemoryClockRate: *value = 1000000; return cudaSuccess;  // kHz
    case cudaDevAttrGlobalMemoryBusWidth: *value = 64; return cudaSuccess;  // bits
    default: std::fprintf(stderr, "cuda-emu: cudaDeviceGetAttribute(%d) not emulated\n", static_cast<int>(attr));
      return g_last = cudaErrorInvalidValue;
  }
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return g_last = cudaErrorInvalidDevice;
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "%s", "cuda-emu (CPU emulation, not a GPU)");
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 4;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->totalGlobalMem = size_t{16} << 30;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = 227 * 1024;
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void*, int threads, size_t smem) {
  // Two blocks of 128 threads a multiprocessor, fewer where they are larger or use much
  // shared memory: enough for grids that wrap around their work.
  int b = std::max(1, 256 / std::max(threads, 1));
  if (smem > 100 * 1024) b = 1;
  *blocks = b;
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void* fn, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<size_t>(value) > emu::kMaxDynamicShared) return g_last = cudaErrorInvalidValue;
    emu::g_max_dynamic[fn] = static_cast<size_t>(value);
  }
  return cudaSuccess;
}
cudaError_t cudaGetLastError() {
  const cudaError_t e = g_last;
  g_last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return g_last; }
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    default: return "cudaError (emulated)";
  }
}
const char* cudaGetErrorString(cudaError_t e) { return cudaGetErrorName(e); }

cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (cudaError_t e = emu::refuse_while_capturing("cudaMalloc"); e != cudaSuccess) return e;
  *p = emu::allocate(bytes, emu::g_allocations);
  return *p != nullptr ? cudaSuccess : (g_last = cudaErrorMemoryAllocation);
}
cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  if (cudaError_t e = emu::refuse_while_capturing("cudaFree"); e != cudaSuccess) return e;
  emu::drain_device();  // cudaFree waits for the device
  {
    std::lock_guard<std::mutex> lock(emu::g_mutex);
    if (emu::g_allocations.erase(p) == 0) {
      std::fprintf(stderr, "cuda-emu: cudaFree of a pointer cudaMalloc did not return\n");
      return g_last = cudaErrorInvalidValue;
    }
  }
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t s) {
  *p = emu::allocate(bytes, emu::g_allocations);
  if (*p == nullptr) return g_last = cudaErrorMemoryAllocation;
  if (emu::Stream* st = emu::stream_of(s); st->capturing) st->graph->owned.push_back(*p);
  return cudaSuccess;
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t s) {
  if (p == nullptr) return cudaSuccess;
  emu::Stream* st = emu::stream_of(s);
  if (st->capturing) return cudaSuccess;  // the graph owns it (freed with the graph)
  emu::enqueue(st, [p] {
    std::lock_guard<std::mutex> lock(emu::g_mutex);
    if (emu::g_allocations.erase(p) == 0) emu::fail("cudaFreeAsync of a pointer no allocation returned");
    std::free(p);
  });
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  *p = emu::allocate(bytes, emu::g_pinned);
  return *p != nullptr ? cudaSuccess : (g_last = cudaErrorMemoryAllocation);
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned) { return cudaMallocHost(p, bytes); }
cudaError_t cudaFreeHost(void* p) {
  if (p == nullptr) return cudaSuccess;
  emu::drain_device();
  {
    std::lock_guard<std::mutex> lock(emu::g_mutex);
    if (emu::g_pinned.erase(p) == 0) return g_last = cudaErrorInvalidValue;
  }
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
  emu::Stream* st = emu::stream_of(s);
  if (bytes == 0) return cudaSuccess;
  const bool to_host = kind == cudaMemcpyDeviceToHost || (kind == cudaMemcpyDefault && !emu::device_memory(dst));
  const bool from_host = kind == cudaMemcpyHostToDevice || (kind == cudaMemcpyDefault && !emu::device_memory(src));
  if (from_host && !emu::pinned(src) && !st->capturing) {
    // From pageable memory the data is staged before the call returns.
    auto staged = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(src),
                                                         static_cast<const uint8_t*>(src) + bytes);
    emu::enqueue(st, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
    return cudaSuccess;
  }
  emu::enqueue(st, [=] { std::memmove(dst, src, bytes); });
  // To pageable memory the call returns once the copy is done.
  if (to_host && !emu::pinned(dst) && !st->capturing) emu::drain_all(st);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (cudaError_t e = emu::refuse_while_capturing("cudaMemcpy"); e != cudaSuccess) return e;
  emu::enqueue(&emu::g_legacy, [=] {
    if (bytes > 0) std::memmove(dst, src, bytes);
  });
  (void)kind;
  emu::drain_all(&emu::g_legacy);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int v, size_t bytes, cudaStream_t s) {
  emu::run_on(s, [=] { std::memset(p, v, bytes); });
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int v, size_t bytes) {
  if (cudaError_t e = emu::refuse_while_capturing("cudaMemset"); e != cudaSuccess) return e;
  emu::enqueue(&emu::g_legacy, [=] { std::memset(p, v, bytes); });
  emu::drain_all(&emu::g_legacy);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  auto* st = new emu::Stream;
  st->blocking = (flags & cudaStreamNonBlocking) == 0;
  emu::g_streams.push_back(st);
  *s = reinterpret_cast<cudaStream_t>(st);
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  emu::Stream* st = emu::stream_of(s);
  if (st == &emu::g_legacy || st == &emu::g_per_thread) return g_last = cudaErrorInvalidValue;
  emu::drain_all(st);  // its work still completes
  emu::g_streams.erase(std::find(emu::g_streams.begin(), emu::g_streams.end(), st));
  delete st;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  emu::Stream* st = emu::stream_of(s);
  if (st->capturing) {
    std::fprintf(stderr, "cuda-emu: cudaStreamSynchronize on a stream being captured\n");
    return g_last = cudaErrorStreamCaptureUnsupported;
  }
  emu::drain_all(st);
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t e = emu::refuse_while_capturing("cudaDeviceSynchronize"); e != cudaSuccess) return e;
  emu::drain_device();
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  auto* ev = new emu::Event;
  ev->timing = (flags & cudaEventDisableTiming) == 0;
  *e = reinterpret_cast<cudaEvent_t>(ev);
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<emu::Event*>(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  auto* ev = reinterpret_cast<emu::Event*>(e);
  emu::Stream* st = emu::stream_of(s);
  if (st->capturing) {
    std::fprintf(stderr, "cuda-emu: cudaEventRecord in a captured stream is not emulated\n");
    return g_last = cudaErrorNotSupported;
  }
  emu::enqueue(st, [ev] { ev->time_ms = emu::now_ms(); });
  ev->stream = st;
  ev->at = st->enqueued;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  auto* ev = reinterpret_cast<emu::Event*>(e);
  if (ev->stream != nullptr) emu::drain(ev->stream, ev->at);
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  auto* ev = reinterpret_cast<emu::Event*>(e);
  return ev->stream == nullptr || ev->stream->done >= ev->at ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  auto* x = reinterpret_cast<emu::Event*>(a);
  auto* y = reinterpret_cast<emu::Event*>(b);
  if (!x->timing || !y->timing || x->stream == nullptr || y->stream == nullptr)
    return g_last = cudaErrorInvalidResourceHandle;
  if (x->stream->done < x->at || y->stream->done < y->at) return cudaErrorNotReady;
  *ms = static_cast<float>(y->time_ms - x->time_ms);
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  auto* ev = reinterpret_cast<emu::Event*>(e);
  if (ev->stream == nullptr) return cudaSuccess;  // never recorded: nothing to wait for
  emu::Stream* from = ev->stream;
  const uint64_t at = ev->at;
  emu::enqueue(emu::stream_of(s), [from, at] { emu::drain(from, at); });
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  emu::Stream* st = emu::stream_of(s);
  if (st == &emu::g_legacy || st->capturing) return g_last = cudaErrorInvalidValue;
  emu::drain_all(st);
  st->capturing = true;
  st->graph = new emu::Graph;
  ++emu::g_capturing;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  emu::Stream* st = emu::stream_of(s);
  if (!st->capturing) return g_last = cudaErrorInvalidValue;
  st->capturing = false;
  --emu::g_capturing;
  *graph = reinterpret_cast<cudaGraph_t>(st->graph);
  st->graph = nullptr;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  *exec = reinterpret_cast<cudaGraphExec_t>(graph);
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  emu::Graph* g = reinterpret_cast<emu::Graph*>(exec);
  emu::run_on(s, [g] {
    for (auto& w : g->work) w();
  });
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t) { return cudaSuccess; }
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  emu::drain_device();
  emu::Graph* g = reinterpret_cast<emu::Graph*>(graph);
  for (void* p : g->owned) cudaFree(p);
  delete g;
  return cudaSuccess;
}

}  // extern "C"
