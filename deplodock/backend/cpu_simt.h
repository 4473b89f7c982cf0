// cpu_simt.h: run CUDA C kernels on the CPU (SIMT emulation for deplodock's cuda level).
//
// One OS thread per CUDA thread. The blocks of a launch run one after another on the same
// `block` threads, so a `__shared__` array (a function-local `static`) is private to the
// block that runs. `__syncthreads` is a std::barrier over the block's threads, warp
// shuffles go through a per-warp exchange buffer guarded by a per-warp barrier. A thread
// that returns early drops out of both barriers for the rest of its block, as on the GPU.
// This is a correctness oracle, not a fast path: keep grids and blocks small.
#pragma once

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <math.h>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

// ---- CUDA keywords --------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__ static const
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
namespace deplodock_simt {

struct Warp {
  int size = 32;
  std::optional<std::barrier<>> bar;
  alignas(64) uint64_t slots[2][32];  // double-buffered: one barrier per shuffle
};

struct Block {
  int threads = 0;
  std::optional<std::barrier<>> sync;  // __syncthreads, rebuilt for every block
  std::vector<Warp> warps;
};

struct ThreadState {
  Block* block = nullptr;
  Warp* warp = nullptr;
  int lane = 0;
  int shfl_phase = 0;
};
inline thread_local ThreadState tl;

template <class T>
inline T shfl_from(T v, int src_lane) {
  static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
  Warp& w = *tl.warp;
  uint64_t(&slot)[32] = w.slots[tl.shfl_phase];
  tl.shfl_phase ^= 1;
  std::memcpy(&slot[tl.lane], &v, sizeof(T));
  w.bar->arrive_and_wait();
  if (src_lane < 0 || src_lane >= w.size) src_lane = tl.lane;
  T r;
  std::memcpy(&r, &slot[src_lane], sizeof(T));
  return r;
}

}  // namespace deplodock_simt

inline void __syncthreads() { deplodock_simt::tl.block->sync->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { deplodock_simt::tl.warp->bar->arrive_and_wait(); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <class T>
inline T __shfl_xor_sync(unsigned, T v, int lane_mask, int width = 32) {
  (void)width;
  return deplodock_simt::shfl_from(v, deplodock_simt::tl.lane ^ lane_mask);
}
template <class T>
inline T __shfl_sync(unsigned, T v, int src_lane, int width = 32) {
  int lane = deplodock_simt::tl.lane;
  return deplodock_simt::shfl_from(v, (lane & ~(width - 1)) + (src_lane & (width - 1)));
}
template <class T>
inline T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
  int lane = deplodock_simt::tl.lane;
  int src = lane + (int)delta;
  if ((src & ~(width - 1)) != (lane & ~(width - 1))) src = lane;
  return deplodock_simt::shfl_from(v, src);
}
template <class T>
inline T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
  int lane = deplodock_simt::tl.lane;
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

// Call f with the launch arguments: args[i] is a device pointer for a pointer parameter and
// points at the value for a scalar parameter.
template <class... P, size_t... I>
inline void call_kernel(void (*f)(P...), void** args, std::index_sequence<I...>) {
  auto arg = [&]<class Q>(void* a) -> Q {
    if constexpr (std::is_pointer_v<Q>)
      return static_cast<Q>(a);
    else
      return *static_cast<std::remove_cv_t<Q>*>(a);
  };
  f(arg.template operator()<P>(args[I])...);
}

template <class... P>
struct Launch {
  void (*fn)(P...);
  void** args;
  int grid;
  Block block;
  std::optional<std::barrier<>> block_done;
};

struct Worker {
  void* launch;
  int tid;
  void (*body)(void*, int);
};

template <class... P>
inline void run_thread(void* raw, int tid) {
  auto& L = *static_cast<Launch<P...>*>(raw);
  Block& B = L.block;
  tl.block = &B;
  tl.warp = &B.warps[tid / 32];
  tl.lane = tid % 32;
  threadIdx = {(unsigned)tid, 0u, 0u};
  blockDim = {(unsigned)B.threads, 1u, 1u};
  gridDim = {(unsigned)L.grid, 1u, 1u};
  for (int b = 0; b < L.grid; ++b) {
    blockIdx = {(unsigned)b, 0u, 0u};
    tl.shfl_phase = 0;
    call_kernel(L.fn, L.args, std::index_sequence_for<P...>{});
    B.sync->arrive_and_drop();  // an exited thread no longer holds up __syncthreads
    tl.warp->bar->arrive_and_drop();
    // Everyone is out of the block: thread 0 rebuilds the barriers for the next one.
    L.block_done->arrive_and_wait();
    if (tid == 0) {
      B.sync.emplace(B.threads);
      for (Warp& w : B.warps) w.bar.emplace(w.size);
    }
    L.block_done->arrive_and_wait();
  }
}

inline void* worker_main(void* p) {
  auto* w = static_cast<Worker*>(p);
  w->body(w->launch, w->tid);
  return nullptr;
}

// Run kernel `fn` over `grid` blocks of `block` threads; blocks run one after another.
template <class... P>
inline int launch(void (*fn)(P...), void** args, int grid, int block) {
  if (grid < 1 || block < 1 || block > 1024) return 1;
  Launch<P...> L{fn, args, grid, Block{}, std::nullopt};
  L.block.threads = block;
  L.block.sync.emplace(block);
  L.block.warps = std::vector<Warp>((block + 31) / 32);
  for (int w = 0; w < (int)L.block.warps.size(); ++w) {
    Warp& warp = L.block.warps[w];
    warp.size = std::min(32, block - 32 * w);
    warp.bar.emplace(warp.size);
  }
  L.block_done.emplace(block);

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);  // kernels keep little on the stack
  std::vector<Worker> workers(block);
  std::vector<pthread_t> ids(block);
  int err = 0;
  int started = 0;
  for (int t = 0; t < block; ++t) {
    workers[t] = Worker{&L, t, &run_thread<P...>};
    if (pthread_create(&ids[t], &attr, &worker_main, &workers[t]) != 0) {
      err = 2;
      break;
    }
    ++started;
  }
  pthread_attr_destroy(&attr);
  if (err) {  // cannot recover the threads already waiting at a barrier
    std::fprintf(stderr, "cpu_simt: could not start %d threads\n", block);
    std::abort();
  }
  for (int t = 0; t < started; ++t) pthread_join(ids[t], nullptr);
  return 0;
}

}  // namespace deplodock_simt
