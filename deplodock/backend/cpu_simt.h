// cpu_simt.h: run CUDA C kernels on the CPU (SIMT emulation for deplodock's cuda level).
//
// The CUDA threads of a block are fibers on one host thread (user-level context switches,
// a few nanoseconds each), switched at __syncthreads and warp shuffles; several host
// threads run different blocks at once. See "the execution model" below. This is a
// correctness oracle for the emitted CUDA, not a fast path: keep shapes modest.
//
// The same header is the one home of the deplodock device primitives at the end (cp.async,
// vector accesses, mma.sync), whose GPU side (__CUDA_ARCH__) is inline PTX and whose CPU
// side emulates the PTX ISA's documented semantics. Under nvcc (__CUDACC__) the emulation
// is skipped and only they remain: that is the part a translation unit deplodock writes
// carries inline, so nvcc never needs this file.
#pragma once

#ifndef __CUDACC__

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <math.h>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

// ---- CUDA keywords --------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define __align__(n) __attribute__((aligned(n)))
#define __constant__ static const
#define __grid_constant__
// __restrict__ is a GNU keyword already.

struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x, y, z;
};

inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
static constexpr int warpSize = 32;

// ---- math -----------------------------------------------------------------------------
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return fminf(fmaxf(x, 0.0f), 1.0f); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
template <class T>
inline T __ldg(const T* p) {
  return *p;
}

// ---- vector types ---------------------------------------------------------------------
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

// ---- f16 / bf16 (storage types with float arithmetic) ---------------------------------
namespace deplodock_simt {
inline uint32_t f2u(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float u2f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_half_bits(float f) {  // round to nearest even
  uint32_t x = f2u(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u) return sign | (mag > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (mag >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  if (mag < 0x38800000u) {                        // subnormal half (or zero)
    float a = u2f(mag) * 16777216.0f;             // scale by 2^24: the half ulp becomes 1
    return sign | (uint16_t)std::nearbyint(a);
  }
  uint32_t r = mag + 0xfffu + ((mag >> 13) & 1u);
  return sign | (uint16_t)((r - 0x38000000u) >> 13);
}
inline float half_bits_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) return u2f(sign) + (sign ? -1.0f : 1.0f) * (float)m * 5.9604644775390625e-8f;
  if (e == 31) return u2f(sign | 0x7f800000u | (m << 13));
  return u2f(sign | ((e + 112u) << 23) | (m << 13));
}
inline uint16_t float_to_bf16_bits(float f) {  // round to nearest even
  uint32_t x = f2u(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float bf16_bits_to_float(uint16_t b) { return u2f((uint32_t)b << 16); }
}  // namespace deplodock_simt

struct __half {
  uint16_t bits;
  __half() = default;
  __half(float f) : bits(deplodock_simt::float_to_half_bits(f)) {}
  operator float() const { return deplodock_simt::half_bits_to_float(bits); }
};
struct __nv_bfloat16 {
  uint16_t bits;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : bits(deplodock_simt::float_to_bf16_bits(f)) {}
  operator float() const { return deplodock_simt::bf16_bits_to_float(bits); }
};
inline float __half2float(__half h) { return (float)h; }
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return (float)b; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }

// ---- the execution model --------------------------------------------------------------
//
// A launch starts a few workers (host threads). A worker runs whole blocks, one after
// another: the block's CUDA threads are fibers (one stack each) on the worker, scheduled
// round-robin in thread order; a fiber runs until it reaches __syncthreads, a warp
// shuffle/__syncwarp, or the end of the kernel. When every live thread of a warp waits at
// a warp sync, that warp continues; when every live thread of the block waits at
// __syncthreads, the block continues. Threads that waited at different barriers forever are
// a deadlock: reported, then abort(). `__shared__` is `static thread_local`, so each worker
// has its own copy and blocks on different workers run in parallel.
namespace deplodock_simt {

enum class State : uint8_t { Run, AtBlockSync, AtWarpSync, AtMbarrier, Done };

struct Fiber;
struct Worker;
inline void yield(State s);

#if defined(__x86_64__) && !defined(DEPLODOCK_SIMT_UCONTEXT)
// Minimal context switch (System V x86-64): save the callee-saved registers and the SSE/x87
// control words on the current stack, store its pointer in *from, continue on `to`.
extern "C" void deplodock_simt_switch(void** from, void* to);
extern "C" void deplodock_simt_trampoline();
asm(R"(
  .text
  .p2align 4
  .hidden deplodock_simt_switch
  .globl deplodock_simt_switch
  .type deplodock_simt_switch, @function
deplodock_simt_switch:
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
  .size deplodock_simt_switch, .-deplodock_simt_switch

  .p2align 4
  .hidden deplodock_simt_trampoline
  .globl deplodock_simt_trampoline
  .type deplodock_simt_trampoline, @function
deplodock_simt_trampoline:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size deplodock_simt_trampoline, .-deplodock_simt_trampoline
)");

struct Context {
  void* sp = nullptr;
};
inline void switch_context(Context& from, Context& to) { deplodock_simt_switch(&from.sp, to.sp); }
// A fresh context whose first switch-in calls entry(arg) on the given stack.
inline void make_context(Context& c, char* stack, size_t size, void (*entry)(void*), void* arg) {
  uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t(15);
  auto* sp = reinterpret_cast<uint64_t*>(top);
  *--sp = reinterpret_cast<uint64_t>(&deplodock_simt_trampoline);  // return address
  *--sp = 0;                                                         // rbp
  *--sp = 0;                                                         // rbx
  *--sp = reinterpret_cast<uint64_t>(arg);                           // r12
  *--sp = reinterpret_cast<uint64_t>(entry);                         // r13
  *--sp = 0;                                                         // r14
  *--sp = 0;                                                         // r15
  *--sp = 0x1F80ull | (0x037Full << 32);                             // mxcsr, x87 control word
  c.sp = sp;
}
#else
// Portable fallback: ucontext (slower: a system call per switch).
}  // namespace deplodock_simt
#include <ucontext.h>
namespace deplodock_simt {
struct Context {
  ucontext_t uc;
};
inline thread_local void (*start_entry)(void*);
inline thread_local void* start_arg;
inline void start_fiber() {
  void (*entry)(void*) = start_entry;
  void* arg = start_arg;
  yield(State::Done);  // park until the first block
  entry(arg);
}
inline void switch_context(Context& from, Context& to) {
  if (swapcontext(&from.uc, &to.uc) != 0) std::abort();
}
inline void make_context(Context& c, char* stack, size_t size, void (*entry)(void*), void* arg) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, &start_fiber, 0);
  start_entry = entry;  // read by the fiber's first instructions, before the next make
  start_arg = arg;
}
#endif

inline constexpr size_t kFiberStack = 64 * 1024;

#ifdef DEPLODOCK_MEMCHECK
struct SharedTrack;  // the bookkeeping of one checked __shared__ array (memcheck, below)
// Counts the blocks a worker has started: a checked __shared__ array whose record is from an
// earlier count forgets what was written (each block starts with nothing initialized).
inline thread_local uint64_t block_serial = 0;
#endif

struct Fiber {
  Context ctx;
  Worker* worker = nullptr;
  char* stack = nullptr;  // mmap'ed, with a guard page below
  int tid = 0;
  int shfl_phase = 0;
  State state = State::Done;
  // cp.async emulation: this thread's copies in flight and its committed-group count.
  struct AsyncCopy {
    void* dst;
    unsigned char data[16];
    int bytes;
    int group;  // the commit count when issued: committed once commits > group
#ifdef DEPLODOCK_MEMCHECK
    SharedTrack* track = nullptr;  // a checked __shared__ destination: landing writes
    long long first = 0, count = 0;  // its elements [first, first + count)
#endif
  };
  std::vector<AsyncCopy> async_copies;
  int async_commits = 0;
  int mma_count = 0;       // the mma.sync calls of this thread in this block
  int ldmatrix_count = 0;  // ... and its ldmatrix calls
  size_t waits_on = 0;     // the mbarrier of its try_wait, while at State::AtMbarrier
};

// The A and B fragments each lane of a warp posted for one mma.sync (see mma_m16n8k16),
// as floats (exact for 16-bit inputs), and which of the lane's mma.sync calls posted them.
struct MmaExchange {
  float a[32][8];
  float b[32][4];
  int serial[32];  // the poster's mma_count after posting (0: nothing posted in this block)
};

// The matrix rows each lane of a warp posted for one ldmatrix (see `ldmatrix`): 8 16-bit
// elements, and which of the lane's ldmatrix calls posted them.
struct LdmatrixExchange {
  uint16_t rows[32][8];
  int serial[32];
};

// One TMA copy (cp.async.bulk.tensor) in flight: the bytes it read, where they land, and
// the mbarrier phase whose tx-count it completes (see "TMA and mbarriers" below).
struct TmaCopy {
  unsigned char* dst;
  std::vector<unsigned char> data;
#ifdef DEPLODOCK_MEMCHECK
  SharedTrack* track = nullptr;    // a checked __shared__ destination: landing writes
  long long first = 0, count = 0;  // its elements [first, first + count)
#endif
};

// Where a landed TMA copy's bytes sit: delivered by phase `phase` (counted from 0) of
// mbarrier `barrier`, and whether a later copy has written over them since.
struct Delivery {
  unsigned char* dst;
  size_t bytes;
  size_t barrier;
  long long phase;
  bool overwritten = false;
};

// The emulation's state of one mbarrier object (PTX ISA, "mbarrier"): the expected arrival
// count, the pending arrivals and tx-count of the current phase, how many phases completed
// (the current phase's parity is its low bit), and the copies in flight on the phase.
struct Mbarrier {
  const void* address;
  int init_thread;
  int expected;
  int pending;
  long long tx = 0;
  long long completed = 0;
  bool fenced = false;  // a fence.proxy.async by its initializing thread followed the init
  std::vector<TmaCopy> copies;
  std::vector<long long> waits;  // per thread: its completed waits on this barrier
};

struct Warp {
  alignas(64) uint64_t slots[2][32];  // double-buffered: one sync per shuffle
  MmaExchange mma[2];                 // double-buffered on the same phase as `slots`
  LdmatrixExchange ldmatrix[2];       // ... and so are these
};

struct Worker {
  Context ctx;
  void (*run)(void*) = nullptr;  // runs the kernel for the current fiber's thread
  void* launch = nullptr;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  bool first_block = true;
  std::vector<Mbarrier> mbarriers;  // this block's mbarrier objects, in init order
  std::vector<Delivery> deliveries;  // the bytes TMA copies have landed in this block
  uint64_t mbarrier_progress = 0;    // bumped by every change of an mbarrier's state
#ifdef DEPLODOCK_MEMCHECK
  bool abandoned = false;  // a check failed in the current block: it is not resumed
#endif
};

inline thread_local Fiber* current = nullptr;

inline void yield(State s) {
  Fiber* f = current;
  f->state = s;
  switch_context(f->ctx, f->worker->ctx);
}

inline void fiber_main(void* raw) {
  auto* f = static_cast<Fiber*>(raw);
  for (;;) {  // one iteration per block this fiber takes part in
    f->worker->run(f->worker->launch);
    if (!f->async_copies.empty()) {
      std::fprintf(stderr,
                   "cpu_simt: thread %d of block %u ends with %zu cp.async copies not waited "
                   "for (missing cp.async.wait_group)\n",
                   f->tid, blockIdx.x, f->async_copies.size());
      std::abort();
    }
    yield(State::Done);
  }
}

inline bool all_live(const Fiber* begin, const Fiber* end, State s) {
  bool any = false;
  for (const Fiber* f = begin; f != end; ++f) {
    if (f->state == State::Done) continue;
    if (f->state != s) return false;
    any = true;
  }
  return any;
}

// The mbarrier thread `f` waits on (`Fiber::waits_on`), as `report_mbarrier_hang` names it.
inline void report_mbarrier_hang(const Worker& w, const Fiber& f) {
  const Mbarrier& b = w.mbarriers[f.waits_on];
  std::fprintf(stderr,
               "cpu_simt: hang in block %u: thread %d waits for the phase of parity %d of "
               "mbarrier %zu, which can never complete (%d of %d arrivals pending, tx-count "
               "%lld bytes, %zu TMA copies in flight, every thread of the block waiting)\n",
               blockIdx.x, f.tid, (int)(b.completed & 1), f.waits_on, b.pending, b.expected,
               b.tx, b.copies.size());
  std::abort();
}

// Run one block on worker `w` (its fibers already exist).
inline void run_block(Worker& w) {
  const int n = (int)w.fibers.size();
#ifdef DEPLODOCK_MEMCHECK
  block_serial += 1;
#endif
  for (Fiber& f : w.fibers) {
    f.state = State::Run;
    f.shfl_phase = 0;
    f.async_copies.clear();
    f.async_commits = 0;
    f.mma_count = 0;
    f.ldmatrix_count = 0;
  }
  w.mbarriers.clear();
  w.deliveries.clear();
  for (Warp& warp : w.warps) {  // the previous block's postings must not pass for this one's
    for (MmaExchange& x : warp.mma) std::fill(std::begin(x.serial), std::end(x.serial), 0);
    for (LdmatrixExchange& x : warp.ldmatrix)
      std::fill(std::begin(x.serial), std::end(x.serial), 0);
  }
  for (;;) {
    // A thread at an mbarrier wait polls it again each round (its try_wait loop); a round in
    // which no thread ran past a wait and no mbarrier changed is a hang unless a barrier
    // releases below.
    const uint64_t progress = w.mbarrier_progress;
    bool moved = false;
    for (Fiber& f : w.fibers) {
      if (f.state != State::Run && f.state != State::AtMbarrier) continue;
      const bool polling = f.state == State::AtMbarrier;
      current = &f;
      threadIdx = {(unsigned)f.tid, 0u, 0u};
      switch_context(w.ctx, f.ctx);
      moved = moved || !polling || f.state != State::AtMbarrier;
#ifdef DEPLODOCK_MEMCHECK
      if (w.abandoned) return;
#endif
    }
    moved = moved || w.mbarrier_progress != progress;
    bool released = false;
    for (int base = 0; base < n; base += 32) {
      Fiber* begin = w.fibers.data() + base;
      Fiber* end = w.fibers.data() + std::min(n, base + 32);
      if (all_live(begin, end, State::AtWarpSync)) {
        for (Fiber* f = begin; f != end; ++f)
          if (f->state == State::AtWarpSync) f->state = State::Run;
        released = true;
      }
    }
    if (released) continue;
    Fiber* begin = w.fibers.data();
    if (all_live(begin, begin + n, State::AtBlockSync)) {
      for (Fiber& f : w.fibers)
        if (f.state == State::AtBlockSync) f.state = State::Run;
      continue;
    }
    if (moved) continue;
    for (const Fiber& f : w.fibers)
      if (f.state == State::AtMbarrier) report_mbarrier_hang(w, f);
    bool done = true;
    for (const Fiber& f : w.fibers) done = done && f.state == State::Done;
    if (done) return;
    std::fprintf(stderr,
                 "cpu_simt: deadlock in block %u: threads wait at different barriers "
                 "(__syncthreads vs warp sync), e.g. a barrier under divergent control flow\n",
                 blockIdx.x);
    std::abort();
  }
}

template <class T>
inline T shfl_from(T v, int src_lane) {
  static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
  Fiber* f = current;
  Worker& w = *f->worker;
  const int lane = f->tid & 31, warp = f->tid >> 5;
  const int size = std::min(32, (int)w.fibers.size() - 32 * warp);
  uint64_t(&slot)[32] = w.warps[warp].slots[f->shfl_phase];
  f->shfl_phase ^= 1;
  std::memcpy(&slot[lane], &v, sizeof(T));
  yield(State::AtWarpSync);
  if (src_lane < 0 || src_lane >= size) src_lane = lane;
  T r;
  std::memcpy(&r, &slot[src_lane], sizeof(T));
  return r;
}

inline int lane_id() { return current->tid & 31; }

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 (PTX ISA, "Warp-level
// matrix multiply-accumulate", "Matrix Fragments for mma.m16n8k16 with floating point
// type"): the warp computes D = A x B + C, A 16x16, B 16x8 (k x n), C and D 16x8 fp32. Lane
// l (group g = l >> 2, index in the group q = l % 4) holds
//   A a_i (i < 8) at row g + 8 * ((i >> 1) & 1), column 2q + (i & 1) + 8 * (i >> 2),
//   B b_i (i < 4) at row (k) 2q + (i & 1) + 8 * (i >> 1), column g,
//   C c_i, D d_i (i < 4) at row g + 8 * (i >> 1), column 2q + (i & 1),
// and pairs of 16-bit elements come packed in 32-bit registers, the lower-numbered element in
// the lower half. Every lane posts its A and B fragments, waits for the warp, then computes
// its own four D elements. The ISA leaves the order of the sums open; this adds the 16
// products of a dot product in order (k = 0..15) in fp32, then C, as `warp_mma` does in
// dialects/common/mma.py, so the interpreters and this emulation agree bit for bit. (The
// product of two 16-bit floats is exact in fp32, unless bf16's wide exponents overflow or
// underflow it, so a contracted multiply-add rounds the same.)
inline float mma_element(unsigned reg, int upper, bool bf16) {
  const uint16_t bits = (uint16_t)(upper ? reg >> 16 : reg & 0xffffu);
  return bf16 ? bf16_bits_to_float(bits) : half_bits_to_float(bits);
}

// Undefined on a GPU unless every lane of the warp runs the same warp-collective instruction
// (mma.sync, ldmatrix: `.sync.aligned`): a warp with fewer than 32 threads, or a lane that
// exited or took another branch (its `serial`, the count of its calls, differs from this
// lane's `count`), aborts the emulation. `serial` null: only the warp's size is checked.
inline void check_whole_warp(const Fiber& f, const int* serial, int count, const char* what) {
  const Worker& w = *f.worker;
  const int warp = f.tid >> 5;
  const int size = std::min(32, (int)w.fibers.size() - 32 * warp);
  if (size < 32) {
    std::fprintf(stderr,
                 "cpu_simt: thread %d of block %u runs %s in a warp of %d threads (a "
                 "block of %zu): %s needs all 32 lanes of the warp\n",
                 f.tid, blockIdx.x, what, size, w.fibers.size(), what);
    std::abort();
  }
  if (serial == nullptr) return;
  for (int l = 0; l < 32; ++l) {
    if (serial[l] != count) {
      std::fprintf(stderr,
                   "cpu_simt: thread %d of block %u runs %s without lane %d of its warp "
                   "(divergent control flow or an early exit): %s needs every lane of "
                   "the warp\n",
                   f.tid, blockIdx.x, what, l, what);
      std::abort();
    }
  }
}

inline void check_mma_warp(const Fiber& f, const MmaExchange* posted) {
  check_whole_warp(f, posted == nullptr ? nullptr : posted->serial, f.mma_count, "mma.sync");
}

inline void check_tf32(const Fiber& f, float v) {
  if (f2u(v) & 0x1fffu) {
    std::fprintf(stderr,
                 "cpu_simt: thread %d of block %u passes %.9g to a tf32 mma.sync, not a tf32 "
                 "value (split it with dd_split_tf32 first)\n",
                 f.tid, blockIdx.x, (double)v);
    std::abort();
  }
}

// The warp step both MMA shapes share: each lane posts its A and B fragments (as floats),
// waits for the warp, gathers the matrices by the K-deep shape's layout (above: K = 16, 8
// elements of A and 4 of B per lane; below: K = 8, tf32, 4 and 2), and computes its own four
// D elements, the K products in order in fp32, then C.
template <int K>
inline void warp_mma(Fiber* f, const float (&a)[K / 2], const float (&b)[K / 4],
                     const float (&c)[4], float (&d)[4]) {
  const int lane = f->tid & 31;
  MmaExchange& x = f->worker->warps[f->tid >> 5].mma[f->shfl_phase];
  f->shfl_phase ^= 1;
  for (int i = 0; i < K / 2; ++i) x.a[lane][i] = a[i];
  for (int i = 0; i < K / 4; ++i) x.b[lane][i] = b[i];
  x.serial[lane] = ++f->mma_count;
  yield(State::AtWarpSync);
  check_mma_warp(*f, &x);
  float A[16][K], B[K][8];  // the matrices, gathered from every lane's fragments
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, q = l & 3;
    for (int i = 0; i < K / 2; ++i) {
      if constexpr (K == 16)
        A[g + 8 * ((i >> 1) & 1)][2 * q + (i & 1) + 8 * (i >> 2)] = x.a[l][i];
      else
        A[g + 8 * (i & 1)][q + 4 * (i >> 1)] = x.a[l][i];
    }
    for (int i = 0; i < K / 4; ++i) {
      if constexpr (K == 16)
        B[2 * q + (i & 1) + 8 * (i >> 1)][g] = x.b[l][i];
      else
        B[q + 4 * i][g] = x.b[l][i];
    }
  }
  const int g = lane >> 2, q = lane & 3;
  for (int i = 0; i < 4; ++i) {  // d_i sits where this lane's c_i does
    const int row = g + 8 * (i >> 1), col = 2 * q + (i & 1);
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum += A[row][k] * B[k][col];
    d[i] = sum + c[i];
  }
}

inline void mma_m16n8k16(bool bf16, const unsigned (&a)[4], const unsigned (&b)[2],
                         const float (&c)[4], float (&d)[4]) {
  Fiber* f = current;
  check_mma_warp(*f, nullptr);
  float a_elements[8], b_elements[4];
  for (int i = 0; i < 8; ++i) a_elements[i] = mma_element(a[i >> 1], i & 1, bf16);
  for (int i = 0; i < 4; ++i) b_elements[i] = mma_element(b[i >> 1], i & 1, bf16);
  warp_mma<16>(f, a_elements, b_elements, c, d);
}

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 (PTX ISA, "Matrix Fragments for
// mma.m16n8k8", .tf32): A 16x8, B 8x8 (k x n), C and D 16x8 fp32; lane l (g = l >> 2,
// q = l % 4) holds a_i at row g + 8 * (i & 1), column q + 4 * (i >> 1); b_i at row (k)
// q + 4 * i, column g; c_i and d_i as in the m16n8k16 above. One element per register. An
// operand that is not a tf32 value (low 13 bits set) aborts: deplodock always splits them
// with dd_split_tf32 first, and the emulation does not guess what the tensor cores make of the
// dropped bits. Sums as mma_m16n8k16 does (k in order, in fp32, then C): the product of two
// tf32 values is exact in fp32.
inline void mma_m16n8k8_tf32(const float (&a)[4], const float (&b)[2], const float (&c)[4],
                             float (&d)[4]) {
  Fiber* f = current;
  check_mma_warp(*f, nullptr);
  for (float v : a) check_tf32(*f, v);
  for (float v : b) check_tf32(*f, v);
  warp_mma<8>(f, a, b, c, d);
}

// ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16 (PTX ISA, "Warp-level matrix load
// instruction: ldmatrix"): the warp loads N 8x8 matrices of 16-bit elements. Lane t gives the
// address of row t % 8 of matrix t / 8 (16 bytes; lanes from 8 N on give none that is used);
// lane l (g = l >> 2, q = l % 4) receives in register j the elements at row g, columns 2q
// and 2q + 1 of matrix j, or with .trans those at rows 2q and 2q + 1, column g, the
// lower-numbered in the lower 16 bits. Every lane posts its row, waits for the warp, then
// gathers its own elements (dialects/common/ldmatrix.py has the same rule for the
// interpreters).
template <int N, bool Trans>
inline void ldmatrix(const uint16_t* row, unsigned (&r)[N]) {
  Fiber* f = current;
  check_whole_warp(*f, nullptr, 0, "ldmatrix");
  const int lane = f->tid & 31;
  LdmatrixExchange& x = f->worker->warps[f->tid >> 5].ldmatrix[f->shfl_phase];
  f->shfl_phase ^= 1;
  if (lane < 8 * N) std::memcpy(x.rows[lane], row, sizeof x.rows[lane]);
  x.serial[lane] = ++f->ldmatrix_count;
  yield(State::AtWarpSync);
  check_whole_warp(*f, x.serial, f->ldmatrix_count, "ldmatrix");
  const int g = lane >> 2, q = lane & 3;
  for (int j = 0; j < N; ++j) {
    const uint16_t lo = Trans ? x.rows[8 * j + 2 * q][g] : x.rows[8 * j + g][2 * q];
    const uint16_t hi = Trans ? x.rows[8 * j + 2 * q + 1][g] : x.rows[8 * j + g][2 * q + 1];
    r[j] = (unsigned)lo | ((unsigned)hi << 16);
  }
}

// ---- TMA and mbarriers (sm_90) ----------------------------------------------------------
// An mbarrier (PTX ISA, "Parallel Synchronization and Communication Instructions: mbarrier")
// is a 64-bit object in shared memory. `mbarrier.init [b], n` starts phase 0 expecting n
// arrivals with tx-count 0. `mbarrier.arrive` counts one arrival; `mbarrier.arrive
// .expect_tx [b], bytes` first raises the tx-count by `bytes`, then arrives. A TMA copy
// (`cp.async.bulk.tensor ... .mbarrier::complete_tx::bytes`) lowers the tx-count of the
// current phase by the bytes it wrote once they have landed. The phase completes when every
// arrival is in and the tx-count is zero; the barrier then moves to the next phase (its
// parity flips) with n arrivals pending again. `mbarrier.try_wait.parity [b], p` succeeds
// once the phase of parity p has completed, i.e. while the current phase's parity is not p.
//
// The emulation keeps each barrier's state beside the block (Worker::mbarriers, found by
// address) and lands a phase's copies at the first arrival or poll of the barrier once its
// last arrival is in, a legal order: a copy may land at any time before its phase completes, and until
// then the destination's contents are undefined, which the emulation makes visible by
// filling them with 0xff bytes (NaN in every float type) at the copy's issue. It reports, and
// aborts on: a wait that can never be satisfied (a hang: a wrong expect-tx count, a missing
// arrival), copies that deliver more bytes than the phase expected, a TMA copy on a barrier
// whose init no fence.proxy.async made visible to the async proxy, a copy into bytes another
// copy is still writing, and a race of the async proxy with a consumer: a thread waits on a
// barrier for each of its phases in turn (its k-th wait consumes phase k, as in a pipeline),
// so when its k-th wait succeeds after a later copy already wrote over the bytes phase k
// delivered, it would read the wrong data (a stage reused before its consumers released it,
// e.g. one phase early).
[[noreturn]] inline void mbarrier_error(const char* message, size_t barrier) {
  std::fprintf(stderr, "cpu_simt: thread %d of block %u: mbarrier %zu: %s\n", current->tid,
               blockIdx.x, barrier, message);
  std::abort();
}

inline size_t find_mbarrier(const void* address, const char* what) {
  const std::vector<Mbarrier>& all = current->worker->mbarriers;
  for (size_t i = all.size(); i-- > 0;)
    if (all[i].address == address) return i;
  std::fprintf(stderr,
               "cpu_simt: thread %d of block %u runs %s on an mbarrier that was never "
               "initialized (mbarrier.init)\n",
               current->tid, blockIdx.x, what);
  std::abort();
}

inline void mbarrier_init(const void* address, unsigned count) {
  Worker& w = *current->worker;
  if (count == 0 || count >= (1u << 20))
    mbarrier_error("mbarrier.init expects between 1 and 2^20 - 1 arrivals", w.mbarriers.size());
  Mbarrier b{address, current->tid, (int)count, (int)count};
  b.waits.assign(w.fibers.size(), 0);
  w.mbarriers.push_back(std::move(b));  // a re-init starts a new object at the same address
  w.mbarrier_progress += 1;
}

#ifdef DEPLODOCK_MEMCHECK
// A checked TMA destination's elements: unwritten while the copy is in flight, written when
// it lands (memcheck, below).
inline void forget_shared_written(SharedTrack& t, long long index, long long count);
inline void mark_tma_landed(SharedTrack& t, long long index, long long count);
#endif

// The copies of the current phase land (each a complete_tx of its bytes) once every arrival
// is in; with the tx-count then at zero the phase completes.
inline void mbarrier_advance(Worker& w, size_t index) {
  Mbarrier& b = w.mbarriers[index];
  if (b.pending > 0) return;
  for (TmaCopy& copy : b.copies) {
    std::memcpy(copy.dst, copy.data.data(), copy.data.size());
#ifdef DEPLODOCK_MEMCHECK
    if (copy.track != nullptr) mark_tma_landed(*copy.track, copy.first, copy.count);
#endif
    b.tx -= (long long)copy.data.size();
    w.deliveries.push_back({copy.dst, copy.data.size(), index, b.completed});
  }
  b.copies.clear();
  if (b.tx < 0)
    mbarrier_error("TMA copies delivered more bytes than mbarrier.arrive.expect_tx announced",
                   index);
  if (b.tx > 0) return;
  b.completed += 1;
  b.pending = b.expected;
  w.mbarrier_progress += 1;
}

inline void mbarrier_arrive(const void* address, unsigned tx_bytes) {
  Worker& w = *current->worker;
  const size_t index = find_mbarrier(address, "mbarrier.arrive");
  Mbarrier& b = w.mbarriers[index];
  if (b.pending == 0)
    mbarrier_error("more arrivals than the phase expects (mbarrier.init count)", index);
  b.tx += tx_bytes;
  b.pending -= 1;
  w.mbarrier_progress += 1;
  mbarrier_advance(w, index);  // the last arrival completes a phase with nothing in flight
}

inline void mbarrier_wait(const void* address, unsigned parity) {
  Fiber* f = current;
  Worker& w = *f->worker;
  const size_t index = find_mbarrier(address, "mbarrier.try_wait");
  f->waits_on = index;
  for (;;) {
    mbarrier_advance(w, index);
    if ((w.mbarriers[index].completed & 1) != (long long)(parity & 1)) break;
    yield(State::AtMbarrier);
  }
  const long long phase = w.mbarriers[index].waits[f->tid]++;
  for (const Delivery& d : w.deliveries) {
    if (d.barrier != index || d.phase != phase || !d.overwritten) continue;
    std::fprintf(stderr,
                 "cpu_simt: thread %d of block %u: race: its wait %lld on mbarrier %zu is "
                 "for the bytes that phase delivered, but a later TMA copy already wrote "
                 "over them (a stage reused before its consumers released it: wait on its "
                 "empty barrier, with the right parity, first)\n",
                 f->tid, blockIdx.x, phase, index);
    std::abort();
  }
}

// fence.proxy.async: this thread's earlier generic-proxy accesses (here: its mbarrier.init)
// are ordered before its later async-proxy ones, as the CUDA programming guide's TMA example
// does after initializing the barrier a copy completes on.
inline void fence_proxy_async() {
  for (Mbarrier& b : current->worker->mbarriers)
    if (b.init_thread == current->tid) b.fenced = true;
}

inline bool overlaps(const unsigned char* a, size_t a_bytes, const unsigned char* b,
                     size_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

// A new copy into [dst, dst + bytes): no copy may still be writing there; earlier deliveries
// there are overwritten (their consumers' later waits report it, `mbarrier_wait`).
inline void check_stage_free(Worker& w, unsigned char* dst, size_t bytes) {
  for (size_t i = 0; i < w.mbarriers.size(); ++i)
    for (const TmaCopy& c : w.mbarriers[i].copies)
      if (overlaps(dst, bytes, c.dst, c.data.size()))
        mbarrier_error("race: a TMA copy into shared bytes that an earlier TMA copy (on this "
                       "mbarrier) is still writing",
                       i);
  for (Delivery& d : w.deliveries)
    if (overlaps(dst, bytes, d.dst, d.bytes)) d.overwritten = true;
}

// The emulation's tensor map (the GPU's is the driver's opaque CUtensorMap): a row-major 2-D
// tensor of `rows` x `cols` elements, `row_bytes` apart, and the box one copy moves, with its
// swizzle span in bytes (0: none). backend/tensor_map.py builds it on the host.
struct TensorMap2d {
  const unsigned char* base;
  long long rows, cols, row_bytes;
  int element_bytes, box_rows, box_cols, swizzle;
};

// The swizzled byte offset of byte `offset` of a box in shared memory (CUDA programming
// guide, "TMA Swizzle"; PTX ISA, "Tensor-copy swizzling modes"): the 16-byte chunk index
// (offset bits 4..) is XORed with the offset bits from 7 on, as many bits as the span has
// chunks (128 B: 3 bits, 64 B: 2, 32 B: 1); the pattern repeats every 8 x span bytes.
inline size_t swizzle_offset(size_t offset, int span) {
  const size_t mask = span == 128 ? 7 : span == 64 ? 3 : span == 32 ? 1 : 0;
  return offset ^ (((offset >> 7) & mask) << 4);
}

// cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes (PTX
// ISA, "Data Movement: cp.async.bulk.tensor"): the box at (row c1, column c0) of the tensor
// lands in shared memory at `dst`, rows of box_cols elements one after another (swizzled
// as above); elements outside the tensor (either coordinate, negative ones too) are zeros.
// The copy completes box bytes on the barrier's current phase.
inline void tma_load_2d(void* dst, const TensorMap2d& map, int c0, int c1, const void* bar) {
  Worker& w = *current->worker;
  const size_t index = find_mbarrier(bar, "cp.async.bulk.tensor");
  if (!w.mbarriers[index].fenced)
    mbarrier_error("a TMA copy completes on an mbarrier whose mbarrier.init no "
                   "fence.proxy.async made visible to the async proxy",
                   index);
  const size_t row_bytes = (size_t)map.box_cols * map.element_bytes;
  const size_t bytes = row_bytes * map.box_rows;
  if (row_bytes % 16 != 0 || (map.swizzle != 0 && row_bytes != (size_t)map.swizzle))
    mbarrier_error("a TMA box row must be a multiple of 16 bytes, and exactly the swizzle "
                   "span with a swizzle",
                   index);
  const size_t repeat = map.swizzle == 0 ? 128 : 8 * (size_t)map.swizzle;
  if (reinterpret_cast<uintptr_t>(dst) % repeat != 0)
    mbarrier_error("a TMA destination must be aligned to 128 bytes, and to 8 x the swizzle "
                   "span with a swizzle",
                   index);
  auto* out = static_cast<unsigned char*>(dst);
  check_stage_free(w, out, bytes);
  TmaCopy copy{out, std::vector<unsigned char>(bytes, 0)};
  for (int r = 0; r < map.box_rows; ++r) {
    const long long row = (long long)c1 + r;
    for (int c = 0; c < map.box_cols; ++c) {
      const long long col = (long long)c0 + c;
      if (row < 0 || row >= map.rows || col < 0 || col >= map.cols) continue;  // zero fill
      const size_t at = (size_t)r * row_bytes + (size_t)c * map.element_bytes;
      std::memcpy(&copy.data[swizzle_offset(at, map.swizzle)],
                  map.base + row * map.row_bytes + col * map.element_bytes,
                  map.element_bytes);
    }
  }
  std::memset(out, 0xff, bytes);  // undefined until the phase completes
  w.mbarriers[index].copies.push_back(std::move(copy));
  w.mbarrier_progress += 1;
}

}  // namespace deplodock_simt

inline void __syncthreads() { deplodock_simt::yield(deplodock_simt::State::AtBlockSync); }
inline unsigned __float_as_uint(float x) { return deplodock_simt::f2u(x); }
inline float __uint_as_float(unsigned x) { return deplodock_simt::u2f(x); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  deplodock_simt::yield(deplodock_simt::State::AtWarpSync);
}
inline void __threadfence_block() {}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <class T>
inline T __shfl_xor_sync(unsigned, T v, int lane_mask, int width = 32) {
  (void)width;
  return deplodock_simt::shfl_from(v, deplodock_simt::lane_id() ^ lane_mask);
}
template <class T>
inline T __shfl_sync(unsigned, T v, int src_lane, int width = 32) {
  int lane = deplodock_simt::lane_id();
  return deplodock_simt::shfl_from(v, (lane & ~(width - 1)) + (src_lane & (width - 1)));
}
template <class T>
inline T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
  int lane = deplodock_simt::lane_id();
  int src = lane + (int)delta;
  if ((src & ~(width - 1)) != (lane & ~(width - 1))) src = lane;
  return deplodock_simt::shfl_from(v, src);
}
template <class T>
inline T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
  int lane = deplodock_simt::lane_id();
  int src = lane - (int)delta;
  if (src < (lane & ~(width - 1))) src = lane;
  return deplodock_simt::shfl_from(v, src);
}

inline float atomicAdd(float* p, float v) {
  return std::atomic_ref<float>(*p).fetch_add(v, std::memory_order_relaxed);
}
inline int atomicAdd(int* p, int v) {
  return std::atomic_ref<int>(*p).fetch_add(v, std::memory_order_relaxed);
}

namespace deplodock_simt {

// ---- memcheck -------------------------------------------------------------------------
// `cpu_runner.run_kernel(..., memcheck=True)` builds the kernel with DEPLODOCK_MEMCHECK and
// with its source rewritten (`instrument` in backend/memcheck.py; the CPU build only: nvcc
// never sees it): every pointer parameter becomes a `GlobalArg<T>` and every `__shared__`
// array a `SharedArray<T, N>`. Their subscripts check bounds on both sides, exactly: an
// index below 0, or at or past the size, even inside the padding of the buffer's last
// 16-byte granule. A `SharedArray` also remembers which of its elements a thread of the
// current block wrote (plain stores, vector stores, atomics and landed cp.async copies), so
// reading one that nothing in this block wrote is reported too: on a GPU it holds the
// previous block's leftovers. A subscript yields a reference proxy that reads, writes or
// gives its address (`&a[i]`) to the device primitives, whose checked overloads (end of this
// header) check the whole span of a vector access or a cp.async. Checks are bounds checks,
// not page faults, so the buffers keep their 16-byte alignment (vector accesses need it) and
// still catch overflows inside the last granule and underflows.
// The run happens in a forked process (the parent reads the record): a failed check fills
// the shared `Fault` record (see `report_access` for which failure it keeps) and the launch
// ends the process with status 3; so does a fault on the guard page after every global
// buffer, a backstop for memory the checks do not reach.
enum FaultKind : int64_t {
  kGuardPage = 0,            // a hardware fault (an address past a buffer's guard page)
  kGlobalBounds = 1,         // a global buffer's subscript out of range
  kSharedBounds = 2,         // a __shared__ array's subscript out of range
  kSharedUninitialized = 3,  // a read of a __shared__ element not written in this block
};

struct Fault {  // read by backend/memcheck.py: keep the layout in step
  int64_t filled;  // 1 once a failure is recorded
  uint64_t address;
  int64_t block;
  int64_t thread;
  uint64_t pc;  // the faulting instruction (x86-64) or the failed check's call, for the line
  int64_t kind;
  int64_t argument;  // a global buffer: the kernel parameter's index
  int64_t element;   // the element touched (for a span, the first bad one)
  int64_t size;      // the buffer's elements
  char name[64];     // a __shared__ array: its C name
};
inline Fault* fault_record = nullptr;
inline std::atomic_flag fault_lock = ATOMIC_FLAG_INIT;  // a spin lock: signal handlers take it
// Elements of each launch argument (memcheck builds check global subscripts against them).
inline const int64_t* argument_sizes = nullptr;
inline int64_t argument_count = 0;

// A hardware fault: recorded at once (other workers may be mid-record: the lock waits for
// them), then the process ends. Async-signal-safe.
inline void on_fault(int, siginfo_t* info, void* context) {
  while (fault_lock.test_and_set(std::memory_order_acquire)) {
  }
  if (Fault* r = fault_record) {
    r->filled = 1;
    r->kind = kGuardPage;
    r->address = (uint64_t)info->si_addr;
    r->block = blockIdx.x;
    r->thread = current != nullptr ? current->tid : -1;
#if defined(__x86_64__) && defined(REG_RIP)
    r->pc = (uint64_t) static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP];
#else
    (void)context;
#endif
  }
  _exit(3);
}

#ifdef DEPLODOCK_MEMCHECK
#define DD_CHECK inline __attribute__((always_inline))

// The lowest block in which a check failed: workers start no block above it.
inline std::atomic<int64_t> failed_block{INT64_MAX};

// A failed check. Not inlined, so its return address lies in the kernel's code (the checks
// themselves are always inlined): minus one it is the call, whose line addr2line tells.
// Reports are deterministic whatever the workers' timing: within a block the fibers run in a
// fixed order and the block is abandoned at its first failure; across blocks the record
// keeps the lowest block's failure, and no block above it is started.
[[noreturn, gnu::noinline]] inline void report_access(int64_t kind, int64_t argument,
                                                      const char* name, int64_t element,
                                                      int64_t size) {
  const uint64_t pc = (uint64_t)__builtin_extract_return_addr(__builtin_return_address(0));
  Fault* r = fault_record;
  if (r == nullptr) {  // a memcheck build run without deplodock_simt_memcheck
    std::fprintf(stderr, "cpu_simt: memcheck: bad access to element %lld of %s\n",
                 (long long)element, name != nullptr ? name : "a global buffer");
    std::abort();
  }
  const int64_t block = blockIdx.x;
  while (fault_lock.test_and_set(std::memory_order_acquire)) {
  }
  if (!r->filled || block < r->block) {
    r->filled = 1;
    r->kind = kind;
    r->address = 0;
    r->block = block;
    r->thread = current->tid;
    r->pc = pc - 1;
    r->argument = argument;
    r->element = element;
    r->size = size;
    std::snprintf(r->name, sizeof r->name, "%s", name != nullptr ? name : "");
  }
  int64_t lowest = failed_block.load();
  while (block < lowest && !failed_block.compare_exchange_weak(lowest, block)) {
  }
  fault_lock.clear(std::memory_order_release);
  Fiber* f = current;  // abandon the block: back to the worker, never to resume
  f->worker->abandoned = true;
  f->state = State::Done;
  switch_context(f->ctx, f->worker->ctx);
  __builtin_unreachable();
}

// The first element of [index, index + count) outside [0, size).
DD_CHECK long long first_outside(long long index, long long size) {
  return index < 0 ? index : std::max(index, size);
}

// Elements of T a span of `bytes` covers (a 4-byte cp.async into bf16 covers two).
template <class T>
constexpr long long span_elements(long long bytes) {
  return (bytes + (long long)sizeof(T) - 1) / (long long)sizeof(T);
}

// -- global buffers: a kernel parameter `T* x` becomes `GlobalArg<T> x` --
template <class T>
struct GlobalPtr {  // `&x[i]`: for the device primitives, which check the whole span
  using Element = std::remove_cv_t<T>;
  T* base;
  long long index, size;
  int argument;
  DD_CHECK void check(long long count) const {
    if (index < 0 || index + count > size)
      report_access(kGlobalBounds, argument, nullptr, first_outside(index, size), size);
  }
  T* address() const { return base + index; }
};

template <class T>
struct GlobalRef {  // `x[i]`, already bounds-checked
  using Value = std::remove_cv_t<T>;
  T* base;
  long long index, size;
  int argument;
  DD_CHECK operator Value() const { return base[index]; }
  template <class V>
  DD_CHECK GlobalRef& operator=(const V& value) {
    base[index] = value;
    return *this;
  }
  DD_CHECK GlobalRef& operator=(const GlobalRef& other) { return *this = (Value)other; }
  DD_CHECK GlobalPtr<T> operator&() const { return {base, index, size, argument}; }
};

template <class T>
struct GlobalArg {
  T* base;
  long long size;
  int argument;
  // The launch's argument `argument` (a device pointer) with its size from the runner.
  static GlobalArg bind(void* pointer, size_t argument) {
    if ((int64_t)argument >= argument_count) {
      std::fprintf(stderr, "cpu_simt: memcheck build launched without buffer sizes\n");
      std::abort();
    }
    return {static_cast<T*>(pointer), (long long)argument_sizes[argument], (int)argument};
  }
  DD_CHECK GlobalRef<T> operator[](long long i) const {
    if (i < 0 || i >= size) report_access(kGlobalBounds, argument, nullptr, i, size);
    return {base, i, size, argument};
  }
};

template <class Q>
inline constexpr bool is_global_arg = false;
template <class T>
inline constexpr bool is_global_arg<GlobalArg<T>> = true;

// -- __shared__ arrays: `__shared__ T s[N]` becomes `__shared__ SharedArray<T, N> s{"s"}` --
struct SharedTrack {
  const char* name;
  long long size;
  uint64_t* written;  // one bit per element: written in block `serial`
  uint64_t serial;
};

// Forget the previous block's writes when a new block uses the array.
inline void refresh(SharedTrack& t) {
  if (t.serial == block_serial) return;
  std::memset(t.written, 0, sizeof(uint64_t) * (size_t)((t.size + 63) / 64));
  t.serial = block_serial;
}

DD_CHECK void check_shared_bounds(const SharedTrack& t, long long index, long long count) {
  if (index < 0 || index + count > t.size)
    report_access(kSharedBounds, -1, t.name, first_outside(index, t.size), t.size);
}

DD_CHECK void check_shared_written(SharedTrack& t, long long index, long long count) {
  refresh(t);
  for (long long e = index; e < index + count; ++e)
    if (((t.written[e >> 6] >> (e & 63)) & 1u) == 0)
      report_access(kSharedUninitialized, -1, t.name, e, t.size);
}

DD_CHECK void mark_shared_written(SharedTrack& t, long long index, long long count) {
  refresh(t);
  for (long long e = index; e < index + count; ++e) t.written[e >> 6] |= uint64_t(1) << (e & 63);
}
inline void mark_tma_landed(SharedTrack& t, long long index, long long count) {
  mark_shared_written(t, index, count);
}
inline void forget_shared_written(SharedTrack& t, long long index, long long count) {
  refresh(t);
  for (long long e = index; e < index + count; ++e) t.written[e >> 6] &= ~(uint64_t(1) << (e & 63));
}

template <class T>
struct SharedPtr {  // `&s[i]`: for the device primitives, which check the whole span
  using Element = std::remove_cv_t<T>;
  T* data;
  SharedTrack* track;
  long long index;
  DD_CHECK void check(long long count) const { check_shared_bounds(*track, index, count); }
  T* address() const { return data + index; }
};

template <class T>
struct SharedRef {  // `s[i]`, already bounds-checked
  T* data;
  SharedTrack* track;
  long long index;
  DD_CHECK operator T() const {
    check_shared_written(*track, index, 1);
    return data[index];
  }
  template <class V>
  DD_CHECK SharedRef& operator=(const V& value) {
    data[index] = value;
    mark_shared_written(*track, index, 1);
    return *this;
  }
  DD_CHECK SharedRef& operator=(const SharedRef& other) { return *this = (T)other; }
  DD_CHECK SharedPtr<T> operator&() const { return {data, track, index}; }
};

template <class T, long long N>
struct SharedArray {
  alignas(16) T data[N];
  uint64_t written[(N + 63) / 64];
  SharedTrack track;
  explicit SharedArray(const char* name) : track{name, N, written, ~uint64_t(0)} {}
  DD_CHECK SharedRef<T> operator[](long long i) {
    check_shared_bounds(track, i, 1);
    return {data, &track, i};
  }
};

// The span checks of the device primitives: bounds for both kinds; a read of a shared span
// must find it written, a write marks it (a cp.async's mark waits for the copy to land).
template <class T>
DD_CHECK T* checked_read(const GlobalPtr<T>& p, long long count) {
  p.check(count);
  return p.address();
}
template <class T>
DD_CHECK T* checked_write(const GlobalPtr<T>& p, long long count) {
  p.check(count);
  return p.address();
}
template <class T>
DD_CHECK T* checked_read(const SharedPtr<T>& p, long long count) {
  p.check(count);
  check_shared_written(*p.track, p.index, count);
  return p.address();
}
template <class T>
DD_CHECK T* checked_write(const SharedPtr<T>& p, long long count) {
  p.check(count);
  mark_shared_written(*p.track, p.index, count);
  return p.address();
}
template <class P>
inline constexpr bool is_checked_pointer = false;
template <class T>
inline constexpr bool is_checked_pointer<GlobalPtr<T>> = true;
template <class T>
inline constexpr bool is_checked_pointer<SharedPtr<T>> = true;
#endif  // DEPLODOCK_MEMCHECK

// Call f with the launch arguments: args[i] is a device pointer for a pointer parameter and
// points at the value for a scalar parameter.
template <class... P, size_t... I>
inline void call_kernel(void (*f)(P...), void** args, std::index_sequence<I...>) {
  auto arg = [&]<class Q>(void* a, size_t i) -> Q {
    (void)i;
    if constexpr (std::is_pointer_v<Q>)
      return static_cast<Q>(a);
#ifdef DEPLODOCK_MEMCHECK
    else if constexpr (is_global_arg<Q>)
      return Q::bind(a, i);  // a checked buffer parameter (memcheck's rewrite)
#endif
    else
      return *static_cast<std::remove_cv_t<Q>*>(a);
  };
  f(arg.template operator()<P>(args[I], I)...);
}

template <class... P>
struct Launch {
  void (*fn)(P...);
  void** args;
  int grid, block, workers;
};

template <class... P>
inline void run_kernel_body(void* raw) {
  auto* L = static_cast<Launch<P...>*>(raw);
  call_kernel(L->fn, L->args, std::index_sequence_for<P...>{});
}

struct WorkerArgs {
  void* launch;
  void (*run)(void*);
  int id, grid, block, workers;
  bool failed = false;
};

inline void* worker_main(void* raw) {
  auto* a = static_cast<WorkerArgs*>(raw);
  Worker w;
  w.run = a->run;
  w.launch = a->launch;
  w.fibers.resize(a->block);
  w.warps.resize((a->block + 31) / 32);
  const size_t page = 4096, bytes = kFiberStack + page;
  for (int t = 0; t < a->block; ++t) {
    Fiber& f = w.fibers[t];
    void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
      a->failed = true;
      break;
    }
    mprotect(mem, page, PROT_NONE);  // guard page: a stack overflow faults
    f.stack = static_cast<char*>(mem);
    f.worker = &w;
    f.tid = t;
    make_context(f.ctx, f.stack + page, kFiberStack, &fiber_main, &f);
#if !(defined(__x86_64__) && !defined(DEPLODOCK_SIMT_UCONTEXT))
    current = &f;  // ucontext: enter once so the fiber takes its start arguments and parks
    switch_context(w.ctx, f.ctx);
#endif
  }
  blockDim = {(unsigned)a->block, 1u, 1u};
  gridDim = {(unsigned)a->grid, 1u, 1u};
  for (int b = a->id; b < a->grid && !a->failed; b += a->workers) {
#ifdef DEPLODOCK_MEMCHECK
    if (w.abandoned || b > failed_block.load()) break;  // only a lower block can still fail
#endif
    blockIdx = {(unsigned)b, 0u, 0u};
    run_block(w);
  }
  for (Fiber& f : w.fibers)
    if (f.stack) munmap(f.stack, bytes);
  return nullptr;
}

// Run kernel `fn` over `grid` blocks of `block` threads on `workers` host threads (0: one
// per core); 0 on success.
template <class... P>
inline int launch(void (*fn)(P...), void** args, int grid, int block, int workers) {
  if (grid < 1 || block < 1 || block > 1024 || workers < 0) return 1;
  if (workers == 0) workers = (int)std::thread::hardware_concurrency();
  workers = std::max(1, std::min(grid, workers));
  Launch<P...> L{fn, args, grid, block, workers};
  std::vector<WorkerArgs> wargs(workers);
  std::vector<pthread_t> ids(workers);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 20);
  for (int i = 0; i < workers; ++i) {
    wargs[i] = WorkerArgs{&L, &run_kernel_body<P...>, i, grid, block, workers};
    if (pthread_create(&ids[i], &attr, &worker_main, &wargs[i]) != 0) {
      std::fprintf(stderr, "cpu_simt: could not start a worker thread\n");
      std::abort();
    }
  }
  pthread_attr_destroy(&attr);
  int status = 0;
  for (int i = 0; i < workers; ++i) {
    pthread_join(ids[i], nullptr);
    if (wargs[i].failed) status = 2;
  }
#ifdef DEPLODOCK_MEMCHECK
  if (fault_record != nullptr && fault_record->filled) _exit(3);  // for the runner to report
#endif
  return status;
}

}  // namespace deplodock_simt

// Memcheck runs call this first, in the forked process: failures fill `record` (a
// `Fault`); `sizes` holds the elements of each of the `count` launch arguments.
extern "C" int deplodock_simt_memcheck(void* record, const int64_t* sizes, int64_t count) {
  deplodock_simt::fault_record = static_cast<deplodock_simt::Fault*>(record);
  deplodock_simt::argument_sizes = sizes;
  deplodock_simt::argument_count = count;
  struct sigaction action {};
  action.sa_sigaction = &deplodock_simt::on_fault;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  return sigaction(SIGSEGV, &action, nullptr) | sigaction(SIGBUS, &action, nullptr);
}

#endif  // !__CUDACC__

// ---- deplodock device primitives: cp.async, vector accesses, mma.sync -----------------
//
// The CUDA printer emits these calls; each is defined once, here, for both sides. A
// translation unit deplodock writes (`backend/cuda_source.py`) carries this part itself, as
// nvcc sees it (`backend/device_header.py`), so it builds with a plain `nvcc -c`; the guard
// below makes that copy step aside where this header comes first (the CPU emulation).
#ifndef DEPLODOCK_DEVICE_PRIMITIVES
#define DEPLODOCK_DEVICE_PRIMITIVES

// cp.async (PTX ISA, "Data Movement: cp.async"): `cp.async.{ca,cg}.shared.global [dst],
// [src], cp-size, src-size` copies cp-size bytes (4, 8, 16; .cg only 16) from global to
// shared memory asynchronously, and zero-fills the bytes past src-size (here src-size is
// cp-size or 0: a false predicate writes zeros and reads nothing). `cp.async.commit_group`
// closes the thread's pending copies into a group; `cp.async.wait_group N` waits until at
// most N of the thread's most recent groups are pending. Until the wait the data may land
// at any time (or not): the CPU emulation defers every copy to the wait that retires it, so
// code that reads without waiting sees the old contents, as it may on a GPU. Other threads
// see the data only after a barrier (__syncthreads), which the emulation's fibers order.
#ifdef __CUDACC__
#define DD_DEVICE __device__ __forceinline__
#else
#define DD_DEVICE inline
#endif

// Dynamic shared memory: a kernel whose shared arrays exceed the static 48 KiB declares each
// as `DD_DYNAMIC_SHARED(T, name, N, offset);`, a T[N] at `offset` bytes (a multiple of 16)
// into the block's dynamic shared memory, whose size its launch gives and opts in to. On the
// CPU it is an ordinary shared array (memcheck instruments it as one).
#ifdef __CUDACC__
extern __shared__ __align__(16) unsigned char dd_dynamic_shared[];
#define DD_DYNAMIC_SHARED(T, name, N, offset) \
  T(&name)[N] = *reinterpret_cast<T(*)[N]>(dd_dynamic_shared + (offset))
#else
#define DD_DYNAMIC_SHARED(T, name, N, offset) __shared__ __align__(16) T name[N]
#endif

template <int Bytes>
DD_DEVICE void dd_cp_async(void* smem, const void* gmem, bool pred) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async copies 4, 8 or 16 bytes");
#if defined(__CUDA_ARCH__)
  const unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
  const int src_size = pred ? Bytes : 0;
  if constexpr (Bytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
                 "r"(src_size)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(gmem),
                 "n"(Bytes), "r"(src_size)
                 : "memory");
  }
#elif !defined(__CUDACC__)
  deplodock_simt::Fiber::AsyncCopy copy{smem, {}, Bytes, deplodock_simt::current->async_commits};
  if (pred) std::memcpy(copy.data, gmem, Bytes);  // src-size 0: zero-fill, nothing read
  deplodock_simt::current->async_copies.push_back(copy);
#endif
}

DD_DEVICE void dd_cp_async_4(void* smem, const void* gmem, bool pred) {
  dd_cp_async<4>(smem, gmem, pred);
}
DD_DEVICE void dd_cp_async_8(void* smem, const void* gmem, bool pred) {
  dd_cp_async<8>(smem, gmem, pred);
}
DD_DEVICE void dd_cp_async_16(void* smem, const void* gmem, bool pred) {
  dd_cp_async<16>(smem, gmem, pred);
}

DD_DEVICE void dd_cp_async_commit() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#elif !defined(__CUDACC__)
  deplodock_simt::current->async_commits += 1;
#endif
}

template <int N>
DD_DEVICE void dd_cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group takes a non-negative group count");
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#elif !defined(__CUDACC__)
  // Land every copy of a committed group older than the N most recent ones, in issue order
  // (uncommitted copies belong to no group: wait_group does not wait for them).
  deplodock_simt::Fiber* f = deplodock_simt::current;
  const int limit = f->async_commits - N;
  auto& copies = f->async_copies;
  size_t kept = 0;
  for (size_t i = 0; i < copies.size(); ++i) {
    if (copies[i].group < limit) {
      std::memcpy(copies[i].dst, copies[i].data, copies[i].bytes);
#ifdef DEPLODOCK_MEMCHECK
      if (copies[i].track != nullptr)  // landed: a write of its destination
        deplodock_simt::mark_shared_written(*copies[i].track, copies[i].first, copies[i].count);
#endif
    } else
      copies[kept++] = copies[i];
  }
  copies.resize(kept);
#endif
}

// Vector accesses: N elements of T (4, 8 or 16 bytes) in one `ld/st.v2|v4` (LDS, .64, .128).
// The address must be aligned to the vector size (a GPU faults otherwise; the emulation
// reports it and aborts).
template <class T, int N>
struct alignas(sizeof(T) * N) dd_vec {
  T v[N];
};

#if !defined(__CUDACC__)
namespace deplodock_simt {
inline void check_vector_alignment(const void* p, size_t bytes) {
  if (reinterpret_cast<uintptr_t>(p) % bytes != 0) {
    std::fprintf(stderr, "cpu_simt: misaligned %zu-byte vector access at %p\n", bytes, p);
    std::abort();
  }
}
}  // namespace deplodock_simt
#endif

template <class T, int N>
DD_DEVICE dd_vec<T, N> dd_load_vector(const T* p) {
  static_assert(sizeof(T) * N == 4 || sizeof(T) * N == 8 || sizeof(T) * N == 16,
                "vector accesses are 4, 8 or 16 bytes");
#if !defined(__CUDACC__)
  deplodock_simt::check_vector_alignment(p, sizeof(T) * N);
#endif
  return *reinterpret_cast<const dd_vec<T, N>*>(p);
}

template <class T, int N>
DD_DEVICE void dd_store_vector(T* p, const dd_vec<T, N>& value) {
  static_assert(sizeof(T) * N == 4 || sizeof(T) * N == 8 || sizeof(T) * N == 16,
                "vector accesses are 4, 8 or 16 bytes");
#if !defined(__CUDACC__)
  deplodock_simt::check_vector_alignment(p, sizeof(T) * N);
#endif
  *reinterpret_cast<dd_vec<T, N>*>(p) = value;
}

// ---- mma.sync: one warp-wide m16n8k16 tensor-core MMA ----------------------------------
//
// `dd_mma_m16n8k16(d0, d1, d2, d3, a0, ..., a7, b0, ..., b3, c0, ..., c3)`: PTX
// `mma.sync.aligned.m16n8k16.row.col.f32.<t>.<t>.f32` with t = bf16 or f16 (the overload is
// the type of A and B), D = A x B + C for the whole warp from each lane's fragments (their
// layout: `mma_m16n8k16` in the emulation above, and dialects/common/mma.py). The pairs
// (a0, a1), (a2, a3), ... and (b0, b1), (b2, b3) are packed into 32-bit registers, the
// lower-numbered element in the lower 16 bits, as the PTX ISA places them. Every lane of the
// warp must call it (mma.sync.aligned): the emulation aborts on a partial or divergent warp.
#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

enum class dd_mma_input { bf16, f16 };

DD_DEVICE unsigned dd_pack_pair(__nv_bfloat16 lo, __nv_bfloat16 hi) {
#if defined(__CUDACC__)
  return (unsigned)__bfloat16_as_ushort(lo) | ((unsigned)__bfloat16_as_ushort(hi) << 16);
#else
  return (unsigned)lo.bits | ((unsigned)hi.bits << 16);
#endif
}

DD_DEVICE unsigned dd_pack_pair(__half lo, __half hi) {
#if defined(__CUDACC__)
  return (unsigned)__half_as_ushort(lo) | ((unsigned)__half_as_ushort(hi) << 16);
#else
  return (unsigned)lo.bits | ((unsigned)hi.bits << 16);
#endif
}

template <dd_mma_input T>
DD_DEVICE void dd_mma_m16n8k16_packed(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                      const float (&c)[4]) {
#if defined(__CUDA_ARCH__)
  // volatile: a warp-collective instruction must stay where every lane reaches it
  if constexpr (T == dd_mma_input::bf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
          "f"(c[1]), "f"(c[2]), "f"(c[3]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
          "f"(c[1]), "f"(c[2]), "f"(c[3]));
  }
#elif !defined(__CUDACC__)
  deplodock_simt::mma_m16n8k16(T == dd_mma_input::bf16, a, b, c, d);
#endif
}

DD_DEVICE void dd_mma_m16n8k16(float& d0, float& d1, float& d2, float& d3, __nv_bfloat16 a0,
                               __nv_bfloat16 a1, __nv_bfloat16 a2, __nv_bfloat16 a3,
                               __nv_bfloat16 a4, __nv_bfloat16 a5, __nv_bfloat16 a6,
                               __nv_bfloat16 a7, __nv_bfloat16 b0, __nv_bfloat16 b1,
                               __nv_bfloat16 b2, __nv_bfloat16 b3, float c0, float c1, float c2,
                               float c3) {
  float d[4];
  dd_mma_m16n8k16_packed<dd_mma_input::bf16>(
      d, {dd_pack_pair(a0, a1), dd_pack_pair(a2, a3), dd_pack_pair(a4, a5), dd_pack_pair(a6, a7)},
      {dd_pack_pair(b0, b1), dd_pack_pair(b2, b3)}, {c0, c1, c2, c3});
  d0 = d[0], d1 = d[1], d2 = d[2], d3 = d[3];
}

DD_DEVICE void dd_mma_m16n8k16(float& d0, float& d1, float& d2, float& d3, __half a0, __half a1,
                               __half a2, __half a3, __half a4, __half a5, __half a6, __half a7,
                               __half b0, __half b1, __half b2, __half b3, float c0, float c1,
                               float c2, float c3) {
  float d[4];
  dd_mma_m16n8k16_packed<dd_mma_input::f16>(
      d, {dd_pack_pair(a0, a1), dd_pack_pair(a2, a3), dd_pack_pair(a4, a5), dd_pack_pair(a6, a7)},
      {dd_pack_pair(b0, b1), dd_pack_pair(b2, b3)}, {c0, c1, c2, c3});
  d0 = d[0], d1 = d[1], d2 = d[2], d3 = d[3];
}

// `dd_split_tf32(x, hi, lo)`: x = hi + lo in two tf32 values (fp32 values whose low 13 bits
// are zero), what a tf32 MMA takes: hi is x to nearest on 10 mantissa bits, ties away from
// zero (half a tf32 unit added to the bits, the low 13 cleared); lo is the exact rest
// x - hi with its low 13 bits cleared (dialects/common/mma.py, split_tf32, says why). Plain
// C, the same on the GPU and in the emulation: an integer add and two masks, cheaper than
// cvt.rna.tf32.f32, which sm_90 has no single instruction for.
DD_DEVICE void dd_split_tf32(float x, float& hi, float& lo) {
  hi = __uint_as_float((__float_as_uint(x) + 0x1000u) & ~0x1fffu);
  lo = __uint_as_float(__float_as_uint(x - hi) & ~0x1fffu);
}

// `dd_mma_m16n8k8_tf32(d0, ..., d3, a0, ..., a3, b0, b1, c0, ..., c3)`: PTX
// `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`, D = A x B + C for the whole warp,
// one tf32 element (an fp32 value with its low 13 bits zero, `dd_split_tf32`) per register
// (layout: `mma_m16n8k8_tf32` above, and dialects/common/mma.py). Every lane must call it.
DD_DEVICE void dd_mma_m16n8k8_tf32(float& d0, float& d1, float& d2, float& d3, float a0, float a1,
                                   float a2, float a3, float b0, float b1, float c0, float c1,
                                   float c2, float c3) {
#if defined(__CUDA_ARCH__)
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
      : "r"(__float_as_uint(a0)), "r"(__float_as_uint(a1)), "r"(__float_as_uint(a2)),
        "r"(__float_as_uint(a3)), "r"(__float_as_uint(b0)), "r"(__float_as_uint(b1)), "f"(c0),
        "f"(c1), "f"(c2), "f"(c3));
#elif !defined(__CUDACC__)
  float d[4];
  deplodock_simt::mma_m16n8k8_tf32({a0, a1, a2, a3}, {b0, b1}, {c0, c1, c2, c3}, d);
  d0 = d[0], d1 = d[1], d2 = d[2], d3 = d[3];
#endif
}

// ---- ldmatrix: a warp's MMA fragments from shared memory -------------------------------
//
// `dd_ldmatrix<N, Trans>(&s[...], r0, ..., r(2N-1))`: PTX `ldmatrix.sync.aligned.m8n8.xN
// [.trans].shared.b16`, N = 1, 2 or 4 8x8 matrices of bf16 or f16 (layout: `ldmatrix` in the
// emulation above, and dialects/common/ldmatrix.py). The pointer is this lane's row: 8
// elements, 16-byte aligned, in shared memory. Register j comes back as the pair
// (r(2j), r(2j+1)), the lower 16 bits first, as the MMA helpers pack them. Every lane of the
// warp must call it: the emulation aborts on a partial or divergent warp.
template <int N, bool Trans>
DD_DEVICE void dd_ldmatrix_packed(unsigned (&r)[N], const void* row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
#if defined(__CUDA_ARCH__)
  const unsigned a = (unsigned)__cvta_generic_to_shared(row);
  // volatile and "memory": a warp-collective read of shared memory that must stay between
  // the barriers around it
  if constexpr (N == 1 && !Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0]) : "r"(a) : "memory");
  else if constexpr (N == 1)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0]) : "r"(a) : "memory");
  else if constexpr (N == 2 && !Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(a) : "memory");
  else if constexpr (N == 2)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(a) : "memory");
  else if constexpr (!Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a) : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a) : "memory");
#elif !defined(__CUDACC__)
  if (deplodock_simt::lane_id() < 8 * N) deplodock_simt::check_vector_alignment(row, 16);
  deplodock_simt::ldmatrix<N, Trans>(static_cast<const uint16_t*>(row), r);
#endif
}

DD_DEVICE void dd_unpack_pair(unsigned reg, __nv_bfloat16& lo, __nv_bfloat16& hi) {
#if defined(__CUDACC__)
  lo = __ushort_as_bfloat16((unsigned short)(reg & 0xffffu));
  hi = __ushort_as_bfloat16((unsigned short)(reg >> 16));
#else
  lo.bits = (uint16_t)(reg & 0xffffu);
  hi.bits = (uint16_t)(reg >> 16);
#endif
}

DD_DEVICE void dd_unpack_pair(unsigned reg, __half& lo, __half& hi) {
#if defined(__CUDACC__)
  lo = __ushort_as_half((unsigned short)(reg & 0xffffu));
  hi = __ushort_as_half((unsigned short)(reg >> 16));
#else
  lo.bits = (uint16_t)(reg & 0xffffu);
  hi.bits = (uint16_t)(reg >> 16);
#endif
}

template <int N, bool Trans, class T, class... R>
DD_DEVICE void dd_ldmatrix(const T* row, R&... out) {
  static_assert(sizeof(T) == 2 && sizeof...(R) == 2 * N, "ldmatrix gives 2 N 16-bit values");
  unsigned r[N];
  dd_ldmatrix_packed<N, Trans>(r, row);
  T* elements[] = {&out...};
  for (int j = 0; j < N; ++j) dd_unpack_pair(r[j], *elements[2 * j], *elements[2 * j + 1]);
}

// ---- TMA: 2-D tensor copies into shared memory, completed on mbarriers (sm_90) -----------
//
// `dd_tensor_map` is the tensor map a kernel takes as a `const __grid_constant__` parameter:
// on the GPU the driver's CUtensorMap (cuTensorMapEncodeTiled on the host), on the CPU the
// emulation's TensorMap2d (backend/tensor_map.py). An mbarrier is an `unsigned long long` in
// shared memory. Semantics, and what the emulation reports: "TMA and mbarriers" above.
//   dd_mbarrier_init(&bar, n)              mbarrier.init.shared::cta.b64
//   dd_fence_proxy_async()                 fence.proxy.async.shared::cta
//   dd_mbarrier_arrive(&bar)               mbarrier.arrive.shared::cta.b64
//   dd_mbarrier_arrive_expect_tx(&bar, b)  mbarrier.arrive.expect_tx.shared::cta.b64
//   dd_mbarrier_wait(&bar, parity)         a mbarrier.try_wait.parity.shared::cta.b64 loop
//   dd_tma_load_2d(&s[0], &map, c0, c1, &bar)
//       cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes,
//       the box at column c0, row c1 (the innermost coordinate first, as PTX orders them).
#ifdef __CUDACC__
#include <cuda.h>
typedef CUtensorMap dd_tensor_map;
#else
typedef deplodock_simt::TensorMap2d dd_tensor_map;
#endif

#if defined(__CUDA_ARCH__)
#define DD_SMEM_ADDRESS(p) ((unsigned)__cvta_generic_to_shared(p))
#endif

DD_DEVICE void dd_mbarrier_init(unsigned long long* bar, unsigned count) {
#if defined(__CUDA_ARCH__)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(DD_SMEM_ADDRESS(bar)),
               "r"(count)
               : "memory");
#elif !defined(__CUDACC__)
  deplodock_simt::mbarrier_init(bar, count);
#endif
}

DD_DEVICE void dd_fence_proxy_async() {
#if defined(__CUDA_ARCH__)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#elif !defined(__CUDACC__)
  deplodock_simt::fence_proxy_async();
#endif
}

DD_DEVICE void dd_mbarrier_arrive(unsigned long long* bar) {
#if defined(__CUDA_ARCH__)
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(
                   DD_SMEM_ADDRESS(bar))
               : "memory");
#elif !defined(__CUDACC__)
  deplodock_simt::mbarrier_arrive(bar, 0);
#endif
}

DD_DEVICE void dd_mbarrier_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
#if defined(__CUDA_ARCH__)
  asm volatile(
      "{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::
          "r"(DD_SMEM_ADDRESS(bar)),
      "r"(bytes)
      : "memory");
#elif !defined(__CUDACC__)
  deplodock_simt::mbarrier_arrive(bar, bytes);
#endif
}

DD_DEVICE void dd_mbarrier_wait(unsigned long long* bar, unsigned parity) {
#if defined(__CUDA_ARCH__)
  asm volatile(
      "{\n.reg .pred done;\nDD_WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra DD_WAIT_%=;\n}\n" ::"r"(DD_SMEM_ADDRESS(bar)),
      "r"(parity)
      : "memory");
#elif !defined(__CUDACC__)
  deplodock_simt::mbarrier_wait(bar, parity);
#endif
}

DD_DEVICE void dd_tma_load_2d(void* smem, const dd_tensor_map* map, int c0, int c1,
                              unsigned long long* bar) {
#if defined(__CUDA_ARCH__)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(DD_SMEM_ADDRESS(smem)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1),
      "r"(DD_SMEM_ADDRESS(bar))
      : "memory");
#elif !defined(__CUDACC__)
  deplodock_simt::tma_load_2d(smem, *map, c0, c1, bar);
#endif
}
// ==== wgmma: sm_90a warpgroup MMA (begin) ================================================
//
// The ops of dialects/common/wgmma.py (its docstring has the ISA's rules this follows). The
// printer writes `wgmma.mma_async` itself as inline PTX (its operand list grows with N) under
// a `__CUDA_ARCH__` conditional, and `dd_wgmma_emulate<N>(...)` for the CPU; the descriptor,
// fence, commit and wait are these helpers. A descriptor's start address is the operand's
// shared-window address on the GPU and its byte offset within its array on the CPU (the
// printer aligns such arrays to 1024 bytes, so the swizzle sees the same address bits).
//
// The CPU emulation is per thread: a wgmma reads A and B from shared memory, so each thread
// computes its own N / 2 accumulator registers (row 16 w + l / 4 + 8 ((i / 2) % 2), column
// 8 (i / 4) + 2 (l % 4) + i % 2 for warp w, lane l of the warpgroup) by summing the products
// in k order in fp32, then adding C. The result is deferred, as on a GPU: it lands in the
// registers only at the `dd_wgmma_wait<N>` that retires its group, so code that reads the
// accumulators without waiting sees the old values; a next wgmma on the same registers
// chains onto the pending value. A wgmma without a fence since the thread's start or its
// last wait aborts. Not modelled: memcheck of the operand reads, a partial warpgroup.
#if !defined(__CUDACC__)
#include <unordered_map>
namespace deplodock_simt {

struct WgmmaPending {
  float* target;
  float value;
  int group;  // the commit group it belongs to (the thread's commit count when issued)
};

struct WgmmaState {
  unsigned block = ~0u;
  bool fenced = false;
  int commits = 0;
  std::vector<WgmmaPending> pending;
};

// The running thread's wgmma state, fresh for each block it runs.
inline WgmmaState& wgmma_state() {
  static thread_local std::unordered_map<const Fiber*, WgmmaState> states;
  WgmmaState& s = states[current];
  if (s.block != blockIdx.x) s = WgmmaState{blockIdx.x};
  return s;
}

[[noreturn]] inline void wgmma_fail(const char* what) {
  std::fprintf(stderr, "cpu_simt: thread %u of block %u: %s\n", threadIdx.x, blockIdx.x, what);
  std::abort();
}

// Byte offset of byte `b` (along K) of row `r` of a K-major operand the descriptor describes:
// the canonical layout of dialects/common/wgmma.py (core matrices of 8 rows x 16 bytes, LBO
// along K, SBO between 8-row groups; swizzled: rows of S bytes, address bits 4.. XOR 7..).
inline uint64_t wgmma_address(uint64_t desc, int r, int b) {
  const uint64_t start = (desc & 0x3FFF) << 4, lbo = ((desc >> 16) & 0x3FFF) << 4;
  const uint64_t sbo = ((desc >> 32) & 0x3FFF) << 4, mode = desc >> 62;
  if ((desc >> 49) & 7) wgmma_fail("wgmma descriptor base offset is not modelled (use 0)");
  const uint64_t width = mode == 0 ? 0 : mode == 1 ? 128 : mode == 2 ? 64 : 32;
  const uint64_t group = (uint64_t)(r / 8) * sbo;
  if (width == 0) return start + group + (b / 16) * lbo + (r % 8) * 16 + b % 16;
  const uint64_t a = start + group + (b / width) * lbo + (r % 8) * width + b % width;
  return a ^ (((a >> 7) & (width / 16 - 1)) << 4);
}

template <class T>
inline float wgmma_element(const T* array, uint64_t desc, int r, int k) {
  const T value = *reinterpret_cast<const T*>(reinterpret_cast<const char*>(array) +
                                              wgmma_address(desc, r, k * (int)sizeof(T)));
  if constexpr (sizeof(T) == 4) {  // tf32: the low 13 mantissa bits must be zero
    if (f2u(value) & 0x1FFF) wgmma_fail("a tf32 wgmma reads a value that is not tf32");
  }
  return (float)value;
}

}  // namespace deplodock_simt

template <int N, class T>
inline void dd_wgmma_emulate(uint64_t da, uint64_t db, const T* a, const T* b,
                             float* const (&d)[N / 2]) {
  using namespace deplodock_simt;
  WgmmaState& s = wgmma_state();
  if (!s.fenced) wgmma_fail("wgmma without a wgmma_fence since its start or its last wait");
  constexpr int K = 32 / (int)sizeof(T);
  const int t = (int)(threadIdx.x % 128), warp = t / 32, lane = t % 32;
  for (int i = 0; i < N / 2; ++i) {
    const int row = 16 * warp + lane / 4 + 8 * ((i / 2) % 2);
    const int col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
    float c = *d[i];
    for (auto it = s.pending.rbegin(); it != s.pending.rend(); ++it) {
      if (it->target == d[i]) {
        c = it->value;  // chained onto a wgmma still in flight
        break;
      }
    }
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum += wgmma_element(a, da, row, k) * wgmma_element(b, db, col, k);
    s.pending.push_back({d[i], sum + c, s.commits});
  }
}
#endif

DD_DEVICE unsigned long long dd_wgmma_desc(const void* p, const void* base,
                                           unsigned long long fields) {
#if defined(__CUDA_ARCH__)
  (void)base;
  const unsigned long long address = (unsigned long long)__cvta_generic_to_shared(p);
#else
  const unsigned long long address =
      (unsigned long long)(static_cast<const char*>(p) - static_cast<const char*>(base));
#endif
  return fields | ((address & 0x3FFFF) >> 4);
}

DD_DEVICE void dd_wgmma_fence() {
#if defined(__CUDA_ARCH__)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#elif !defined(__CUDACC__)
  deplodock_simt::wgmma_state().fenced = true;
#endif
}

DD_DEVICE void dd_wgmma_commit() {
#if defined(__CUDA_ARCH__)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#elif !defined(__CUDACC__)
  deplodock_simt::wgmma_state().commits += 1;
#endif
}

template <int N>
DD_DEVICE void dd_wgmma_wait() {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0 to 7");
#if defined(__CUDA_ARCH__)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#elif !defined(__CUDACC__)
  // Land, in issue order, every result of a committed group older than the N newest.
  deplodock_simt::WgmmaState& s = deplodock_simt::wgmma_state();
  const int limit = s.commits - N;
  size_t kept = 0;
  for (size_t i = 0; i < s.pending.size(); ++i) {
    if (s.pending[i].group < limit) {
      *s.pending[i].target = s.pending[i].value;
    } else {
      s.pending[kept++] = s.pending[i];
    }
  }
  s.pending.resize(kept);
  s.fenced = false;
#endif
}
// ==== wgmma (end) ========================================================================
#endif  // DEPLODOCK_DEVICE_PRIMITIVES

// ---- memcheck: checked device primitives ----------------------------------------------
// Overloads for memcheck's `&x[i]` (a GlobalPtr or SharedPtr, see "memcheck" above): each
// checks the whole span it touches, then runs the primitive on the plain address. A cp.async
// checks its source only when its predicate reads it; its destination counts as written
// when the copy lands (dd_cp_async_wait), as it does on a GPU.
#if defined(DEPLODOCK_MEMCHECK) && !defined(__CUDACC__)
template <int Bytes, class T, class S>
DD_CHECK void dd_cp_async_checked(const deplodock_simt::SharedPtr<T>& dst, const S& src,
                                  bool pred) {
  using deplodock_simt::span_elements;
  const long long count = span_elements<T>(Bytes);
  dst.check(count);
  const void* from = src.address();
  if (pred) from = deplodock_simt::checked_read(src, span_elements<typename S::Element>(Bytes));
  dd_cp_async<Bytes>(dst.address(), from, pred);
  deplodock_simt::Fiber::AsyncCopy& copy = deplodock_simt::current->async_copies.back();
  copy.track = dst.track;
  copy.first = dst.index;
  copy.count = count;
}
template <class T, class S>
DD_CHECK void dd_cp_async_4(const deplodock_simt::SharedPtr<T>& dst, const S& src, bool pred) {
  dd_cp_async_checked<4>(dst, src, pred);
}
template <class T, class S>
DD_CHECK void dd_cp_async_8(const deplodock_simt::SharedPtr<T>& dst, const S& src, bool pred) {
  dd_cp_async_checked<8>(dst, src, pred);
}
template <class T, class S>
DD_CHECK void dd_cp_async_16(const deplodock_simt::SharedPtr<T>& dst, const S& src, bool pred) {
  dd_cp_async_checked<16>(dst, src, pred);
}

template <class T, int N, class P>
  requires deplodock_simt::is_checked_pointer<P>
DD_CHECK dd_vec<T, N> dd_load_vector(const P& p) {
  return dd_load_vector<T, N>(deplodock_simt::checked_read(p, N));
}

template <class T, int N, class P>
  requires deplodock_simt::is_checked_pointer<P>
DD_CHECK void dd_store_vector(const P& p, const dd_vec<T, N>& value) {
  dd_store_vector<T, N>(deplodock_simt::checked_write(p, N), value);
}

// ldmatrix: only the lanes whose address the instruction uses (below 8 N) read their row.
template <int N, bool Trans, class P, class... R>
  requires deplodock_simt::is_checked_pointer<P>
DD_CHECK void dd_ldmatrix(const P& row, R&... out) {
  const bool used = deplodock_simt::lane_id() < 8 * N;
  dd_ldmatrix<N, Trans>(used ? deplodock_simt::checked_read(row, 8) : row.address(), out...);
}

// TMA and mbarriers: an mbarrier's element is bounds-checked (its state lives beside the
// block); a TMA copy's destination box is bounds-checked, unwritten until the copy lands and
// written then, so a read of a stage before its full barrier completes is reported as a read
// of unwritten shared memory.
template <class B>
  requires deplodock_simt::is_checked_pointer<B>
DD_CHECK void dd_mbarrier_init(const B& bar, unsigned count) {
  bar.check(1);
  dd_mbarrier_init(bar.address(), count);
}
template <class B>
  requires deplodock_simt::is_checked_pointer<B>
DD_CHECK void dd_mbarrier_arrive(const B& bar) {
  bar.check(1);
  dd_mbarrier_arrive(bar.address());
}
template <class B>
  requires deplodock_simt::is_checked_pointer<B>
DD_CHECK void dd_mbarrier_arrive_expect_tx(const B& bar, unsigned bytes) {
  bar.check(1);
  dd_mbarrier_arrive_expect_tx(bar.address(), bytes);
}
template <class B>
  requires deplodock_simt::is_checked_pointer<B>
DD_CHECK void dd_mbarrier_wait(const B& bar, unsigned parity) {
  bar.check(1);
  dd_mbarrier_wait(bar.address(), parity);
}
template <class T, class B>
  requires deplodock_simt::is_checked_pointer<B>
DD_CHECK void dd_tma_load_2d(const deplodock_simt::SharedPtr<T>& dst, const dd_tensor_map* map,
                             int c0, int c1, const B& bar) {
  using deplodock_simt::span_elements;
  const long long count = span_elements<T>((long long)map->box_rows * map->box_cols *
                                           map->element_bytes);
  dst.check(count);
  bar.check(1);
  dd_tma_load_2d(dst.address(), map, c0, c1, bar.address());
  deplodock_simt::forget_shared_written(*dst.track, dst.index, count);
  auto& all = deplodock_simt::current->worker->mbarriers;
  deplodock_simt::TmaCopy& copy =
      all[deplodock_simt::find_mbarrier(bar.address(), "cp.async.bulk.tensor")].copies.back();
  copy.track = dst.track;
  copy.first = dst.index;
  copy.count = count;
}

template <class P, class V>
  requires deplodock_simt::is_checked_pointer<P>
DD_CHECK auto atomicAdd(const P& p, V value) {  // reads the element, then writes it
  deplodock_simt::checked_read(p, 1);
  return atomicAdd(deplodock_simt::checked_write(p, 1), value);
}
#endif  // DEPLODOCK_MEMCHECK && !__CUDACC__
