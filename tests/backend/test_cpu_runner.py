"""The CPU SIMT emulation runs hand-written CUDA C kernels like a GPU would."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from deplodock.backend import cpu_runner
from deplodock.backend.cpu_runner import CpuCompileError, run_kernel

RNG = np.random.default_rng(0)

ELEMENTWISE = r"""
extern "C" __global__ void __launch_bounds__(128)
gelu_scale(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 1000) {
    float v = x[i];
    float g = 0.5f * v * (1.0f + erff(v * 0.707106781f));
    y[i] = g * w[i % 10] + rsqrtf(fabsf(v) + 1.0f) + tanhf(v) - fmaxf(v, 0.25f)
           + powf(fabsf(v), 1.5f) + expf(-v) * logf(2.0f + v * v);
  }
}
"""

REDUCTION = r"""
// rms_norm over rows of 512: cooperative strided loop, warp shuffles, shared memory.
extern "C" __global__ void __launch_bounds__(256)
rms_norm(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y) {
  __shared__ float red[8];
  const int t = threadIdx.x, b = blockIdx.x;
  float acc = 0.0f;
  for (int k = t; k < 512; k += 256) { float v = x[b * 512 + k]; acc += v * v; }
  for (int m = 16; m >= 1; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  if ((t & 31) == 0) red[t >> 5] = acc;
  __syncthreads();
  float s = t < 32 && t < 8 ? red[t] : 0.0f;
  if (t < 32) {
    for (int m = 16; m >= 1; m >>= 1) s += __shfl_xor_sync(0xffffffffu, s, m);
    if (t == 0) red[0] = s;
  }
  __syncthreads();
  const float inv = rsqrtf(red[0] / 512.0f + 1e-6f);
  for (int k = t; k < 512; k += 256) y[b * 512 + k] = x[b * 512 + k] * inv * w[k];
}
"""

MISC = r"""
#include <cuda_fp16.h>
// Threads of the last warp return early; the others still meet at the barrier.
extern "C" __global__ void early_exit(const float* __restrict__ x, float* __restrict__ y) {
  __shared__ float buf[96];
  const int t = threadIdx.x;
  if (t >= 64) return;
  buf[t] = x[blockIdx.x * 64 + t];
  __syncthreads();
  y[blockIdx.x * 64 + t] = buf[63 - t];
}
// Shuffle flavours and the id registers.
extern "C" __global__ void shuffles(float* __restrict__ y) {
  const int t = threadIdx.x;
  float v = (float)t;
  y[4 * t + 0] = __shfl_down_sync(0xffffffffu, v, 3);
  y[4 * t + 1] = __shfl_sync(0xffffffffu, v, 5);
  y[4 * t + 2] = __shfl_up_sync(0xffffffffu, v, 1);
  y[4 * t + 3] = (float)(blockDim.x * 1000 + gridDim.x);
}
// f16 storage with float arithmetic.
extern "C" __global__ void half_axpy(const __half* __restrict__ x, __half* __restrict__ y) {
  const int i = threadIdx.x;
  y[i] = __float2half_rn(2.0f * __half2float(x[i]) + __half2float(y[i]));
}
"""


def rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))


def test_elementwise() -> None:
    x = RNG.standard_normal(1000).astype(np.float32)
    w = RNG.standard_normal(10).astype(np.float32)
    y = np.full(1024, np.nan, np.float32)
    run_kernel(ELEMENTWISE, "gelu_scale", [x, w, y], grid=8, block=128)
    from math import erf

    v = x.astype(np.float64)
    g = 0.5 * v * (1.0 + np.vectorize(erf)(v * 0.707106781))
    ref = (
        g * w.astype(np.float64)[np.arange(1000) % 10]
        + 1.0 / np.sqrt(np.abs(v) + 1.0)
        + np.tanh(v)
        - np.maximum(v, 0.25)
        + np.abs(v) ** 1.5
        + np.exp(-v) * np.log(2.0 + v * v)
    )
    assert rel_err(y[:1000], ref) <= 1e-5
    assert np.isnan(y[1000:]).all()  # the guard kept the tail untouched


def test_block_reduction_with_shared_memory_and_shuffles() -> None:
    x = RNG.standard_normal((6, 512)).astype(np.float32)
    w = RNG.standard_normal(512).astype(np.float32)
    y = np.full((6, 512), np.nan, np.float32)
    run_kernel(REDUCTION, "rms_norm", [x, w, y], grid=6, block=256)
    xd = x.astype(np.float64)
    ref = xd / np.sqrt((xd * xd).mean(axis=1, keepdims=True) + 1e-6) * w
    assert rel_err(y, ref) <= 1e-5


def test_early_exit_threads_leave_the_barrier() -> None:
    x = RNG.standard_normal(3 * 64).astype(np.float32)
    y = np.full(3 * 64, np.nan, np.float32)
    run_kernel(MISC, "early_exit", [x, y], grid=3, block=96)
    np.testing.assert_array_equal(y.reshape(3, 64), x.reshape(3, 64)[:, ::-1])


def test_shuffle_variants() -> None:
    y = np.full(64 * 4, np.nan, np.float32)
    run_kernel(MISC, "shuffles", [y], grid=1, block=64)
    t = np.arange(64)
    lane, base = t % 32, t - t % 32
    out = y.reshape(64, 4)
    np.testing.assert_array_equal(out[:, 0], np.where(lane + 3 < 32, t + 3, t))
    np.testing.assert_array_equal(out[:, 1], base + 5)
    np.testing.assert_array_equal(out[:, 2], np.where(lane >= 1, t - 1, t))
    np.testing.assert_array_equal(out[:, 3], np.full(64, 64 * 1000 + 1))


def test_half_storage_rounds_like_numpy() -> None:
    x = (RNG.standard_normal(32) * 100).astype(np.float16)
    x[:4] = [65504, 6e-8, -3e-5, 0.1]
    y = (RNG.standard_normal(32)).astype(np.float16)
    with np.errstate(over="ignore"):  # 2 * 65504 rounds to inf, on both sides
        ref = (2.0 * x.astype(np.float32) + y.astype(np.float32)).astype(np.float16)
    run_kernel(MISC, "half_axpy", [x, y], grid=1, block=32)
    np.testing.assert_array_equal(y.view(np.uint16), ref.view(np.uint16))


def test_compiled_objects_are_cached_by_content(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    src = 'extern "C" __global__ void one(float* y) { y[threadIdx.x] = 1.0f; }'
    first = cpu_runner.compile_source(src, ["one"])
    assert first.parent == tmp_path / "deplodock" / "cpu-simt"
    mtime = first.stat().st_mtime_ns
    assert cpu_runner.compile_source(src, ["one"]) == first
    assert first.stat().st_mtime_ns == mtime  # not rebuilt
    y = np.zeros(32, np.float32)
    run_kernel(src, "one", [y], grid=1, block=32)
    assert (y == 1.0).all()


def test_the_header_is_precompiled_once_and_used(tmp_path, monkeypatch) -> None:
    """Two kernels share one precompiled header, and g++ reads it (`-H` marks a used
    precompiled header with `!`) rather than the header's text."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for value in ("1.0f", "2.0f"):
        src = f'extern "C" __global__ void k(float* y) {{ y[threadIdx.x] = {value}; }}'
        cpu_runner.compile_source(src, ["k"])
    headers = list((tmp_path / "deplodock" / "cpu-simt").glob("header-*/cpu_simt.h.gch"))
    assert len(headers) == 1
    tu = tmp_path / "k.cpp"
    tu.write_text(cpu_runner.translation_unit(src, ["k"], header=headers[0].with_suffix("")))
    flags = [*cpu_runner.CXX_FLAGS, f"-I{cpu_runner.STUB_INCLUDES}", "-H", "-fsyntax-only"]
    shown = subprocess.run(["g++", *flags, str(tu)], capture_output=True, text=True, check=True)
    assert f"! {headers[0]}" in shown.stderr


def test_a_compiler_without_precompiled_headers_includes_the_text(tmp_path, monkeypatch) -> None:
    """A compiler that fails to precompile (here g++ behind a script refusing
    `-x c++-header`) is noted once and still builds every kernel from the header's text."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    script = tmp_path / "cxx"
    script.write_text(
        '#!/bin/sh\ncase "$*" in *c++-header*) echo "no pch" >&2; exit 1;; esac\nexec g++ "$@"\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv(cpu_runner.CXX_ENV, str(script))
    src = 'extern "C" __global__ void three(float* y) { y[threadIdx.x] = 3.0f; }'
    y = np.zeros(32, np.float32)
    run_kernel(src, "three", [y], grid=1, block=32)
    assert (y == 3.0).all()
    cache = tmp_path / "deplodock" / "cpu-simt"
    assert [p.read_text() for p in cache.glob("header-*/not-precompiled")] == ["no pch\n"]
    assert not list(cache.glob("header-*/*.gch"))


def test_errors_are_clear() -> None:
    with pytest.raises(CpuCompileError, match=r"g\+\+ failed.*error"):
        cpu_runner.compile_source(
            'extern "C" __global__ void bad(float* y) { y[0] = nope; }', ["bad"]
        )
    with pytest.raises(CpuCompileError, match=r"missing. was not declared"):
        run_kernel(REDUCTION, "missing", [], grid=1, block=32)
    with pytest.raises(TypeError, match="C-contiguous"):
        run_kernel(MISC, "shuffles", [np.zeros((8, 8), np.float32).T], grid=1, block=32)
    with pytest.raises(ValueError, match="bad launch configuration"):
        run_kernel(MISC, "shuffles", [np.zeros(8, np.float32)], grid=1, block=2048)
    with pytest.raises(ValueError, match="workers -1"):
        run_kernel(MISC, "shuffles", [np.zeros(8, np.float32)], grid=1, block=32, workers=-1)


@pytest.mark.parametrize("workers", [1, 3, 0])
def test_any_number_of_host_threads_computes_the_same(workers: int) -> None:
    x = RNG.standard_normal((6, 512)).astype(np.float32)
    w = RNG.standard_normal(512).astype(np.float32)
    y = np.full((6, 512), np.nan, np.float32)
    run_kernel(REDUCTION, "rms_norm", [x, w, y], grid=6, block=256, workers=workers)
    xd = x.astype(np.float64)
    ref = xd / np.sqrt((xd * xd).mean(axis=1, keepdims=True) + 1e-6) * w
    assert rel_err(y, ref) <= 1e-5


def test_large_grid() -> None:
    src = r"""
extern "C" __global__ void __launch_bounds__(256) ids(float* __restrict__ y, int* __restrict__ g) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = (float)(blockIdx.x * 1000 + threadIdx.x);
  if (i == 0) g[0] = gridDim.x;
}
"""
    y = np.full(4096 * 256, np.nan, np.float32)
    g = np.zeros(1, np.int32)
    run_kernel(src, "ids", [y, g], grid=4096, block=256)
    b, t = np.divmod(np.arange(4096 * 256), 256)
    np.testing.assert_array_equal(y, (b * 1000 + t).astype(np.float32))
    assert g[0] == 4096


CONVERSIONS = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void widen(const __half* __restrict__ h, const __nv_bfloat16* __restrict__ b,
                                 float* __restrict__ hf, float* __restrict__ bf) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  hf[i] = __half2float(h[i]);
  bf[i] = __bfloat162float(b[i]);
}
extern "C" __global__ void narrow(const float* __restrict__ x, __half* __restrict__ h,
                                  __nv_bfloat16* __restrict__ b) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  h[i] = __float2half_rn(x[i]);
  b[i] = __float2bfloat16_rn(x[i]);
}
"""


def test_half_and_bfloat16_conversions_match_numpy_and_torch() -> None:
    import torch

    bits = np.arange(65536, dtype=np.uint16)
    hf = np.empty(65536, np.float32)
    bf = np.empty(65536, np.float32)
    run_kernel(CONVERSIONS, "widen", [bits, bits, hf, bf], grid=256, block=256)
    np.testing.assert_array_equal(hf, bits.view(np.float16).astype(np.float32))
    ref_bf = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(bf, ref_bf)

    scales = 2.0 ** RNG.integers(-30, 20, 65536)
    x = (RNG.standard_normal(65536) * scales).astype(np.float32)
    x[:6] = [np.inf, -np.inf, 65519.0, 65520.0, 2.0**-25, -(2.0**-24) * 1.5]
    h = np.empty(65536, np.uint16)
    b = np.empty(65536, np.uint16)
    run_kernel(CONVERSIONS, "narrow", [x, h, b], grid=256, block=256)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(h, x.astype(np.float16).view(np.uint16))
    ref_b = torch.from_numpy(x).bfloat16().view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(b, ref_b)


def test_portable_ucontext_fallback(monkeypatch) -> None:
    monkeypatch.setattr(
        cpu_runner, "CXX_FLAGS", (*cpu_runner.CXX_FLAGS, "-DDEPLODOCK_SIMT_UCONTEXT")
    )
    x = RNG.standard_normal((3, 512)).astype(np.float32)
    w = RNG.standard_normal(512).astype(np.float32)
    y = np.full((3, 512), np.nan, np.float32)
    run_kernel(REDUCTION, "rms_norm", [x, w, y], grid=3, block=256)
    xd = x.astype(np.float64)
    ref = xd / np.sqrt((xd * xd).mean(axis=1, keepdims=True) + 1e-6) * w
    assert rel_err(y, ref) <= 1e-5


def test_divergent_barrier_is_reported_as_a_deadlock(tmp_path) -> None:
    # Half a warp waits at __syncthreads, the other half at a shuffle: neither can finish.
    source = (
        'extern "C" __global__ void k(float* y) {\n'
        "  if (threadIdx.x < 16) __syncthreads();\n"
        "  else y[0] = __shfl_xor_sync(~0u, 1.f, 1);\n"
        "}\n"
    )
    script = tmp_path / "deadlock.py"
    script.write_text(
        "import numpy as np\n"
        "from deplodock.backend.cpu_runner import run_kernel\n"
        f"run_kernel({source!r}, 'k', [np.zeros(1, np.float32)], grid=1, block=32)\n"
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert result.returncode != 0
    assert "cpu_simt: deadlock in block 0" in result.stderr
