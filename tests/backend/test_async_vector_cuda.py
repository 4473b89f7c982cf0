"""cp.async and vector accesses in the emitted CUDA: the device header's CPU emulation
checked against the PTX ISA's rules, the printed kernels run on the CPU and compiled by nvcc,
and their SASS (when cuobjdump is installed: `pip install .[sass]`).

PTX rules tested (PTX ISA, cp.async / cp.async.commit_group / cp.async.wait_group): until
the wait that retires its group a copy need not have landed (the emulation defers it, so a
read before the wait sees the old value); `wait_group N` retires all but the N most recent
committed groups; copies not yet committed belong to no group; src-size 0 zero-fills.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from deplodock.backend.cpu_runner import run_kernel
from deplodock.backend.cuda_source import kernels_text
from deplodock.backend.nvcc import compile_cubin
from deplodock.dialects import cuda, make_context
from deplodock.passes.convert_kernel_to_cuda import ConvertKernelToCudaPass
from deplodock.passes.convert_tile_to_kernel import ConvertTileToKernelPass
from tests.backend.sass import needs_nvcc, sass_of
from tests.helpers import kernel_abort, parse, run
from tests.interpreters.test_async_copy import staged

# --------------------------------------------------------------------------------------------
# The emulation against the PTX rules (hand-written CUDA C using the header's primitives)

RULES = r"""
#include <cpu_simt.h>
extern "C" __global__ void rules(const float* __restrict__ x, float* __restrict__ out) {
  __shared__ __align__(16) float s[4 * 32];
  const int t = threadIdx.x;
  for (int k = 0; k < 4; ++k) s[4 * t + k] = -1.0f;
  // group 0: s[4t], group 1: s[4t+1]; uncommitted: s[4t+2]; zero-fill: s[4t+3]
  dd_cp_async_4(&s[4 * t], &x[4 * t], true);
  dd_cp_async_commit();
  dd_cp_async_4(&s[4 * t + 1], &x[4 * t + 1], true);
  dd_cp_async_commit();
  dd_cp_async_4(&s[4 * t + 2], &x[4 * t + 2], true);
  out[8 * t + 0] = s[4 * t];      // before any wait: the old value
  dd_cp_async_wait<1>();
  out[8 * t + 1] = s[4 * t];      // group 0 retired
  out[8 * t + 2] = s[4 * t + 1];  // group 1 (the newest) may still be pending
  dd_cp_async_wait<0>();
  out[8 * t + 3] = s[4 * t + 1];  // group 1 retired
  out[8 * t + 4] = s[4 * t + 2];  // uncommitted: no wait_group covers it
  dd_cp_async_commit();
  dd_cp_async_wait<0>();
  out[8 * t + 5] = s[4 * t + 2];
  dd_cp_async_16(&s[4 * t], &x[4 * t], false);  // src-size 0: zero-fill
  dd_cp_async_commit();
  dd_cp_async_wait<0>();
  out[8 * t + 6] = s[4 * t] + s[4 * t + 1] + s[4 * t + 2] + s[4 * t + 3];
  out[8 * t + 7] = 0.0f;
}
"""


def test_emulation_follows_the_ptx_rules() -> None:
    x = np.arange(1, 129, dtype=np.float32)
    out = np.full(8 * 32, np.nan, dtype=np.float32)
    run_kernel(RULES, "rules", [x, out], grid=1, block=32)
    got = out.reshape(32, 8)
    t = np.arange(32)
    np.testing.assert_array_equal(got[:, 0], -1.0)  # read before the wait: stale
    np.testing.assert_array_equal(got[:, 1], x[4 * t])  # wait_group 1 retires group 0
    np.testing.assert_array_equal(got[:, 2], -1.0)  # ... and leaves the newest pending
    np.testing.assert_array_equal(got[:, 3], x[4 * t + 1])
    np.testing.assert_array_equal(got[:, 4], -1.0)  # uncommitted copies are not waited for
    np.testing.assert_array_equal(got[:, 5], x[4 * t + 2])
    np.testing.assert_array_equal(got[:, 6], 0.0)  # zero-fill of all 16 bytes


def test_copies_left_in_flight_at_kernel_end_are_reported() -> None:
    source = (
        "#include <cpu_simt.h>\n"
        'extern "C" __global__ void k(const float* x) {\n'
        "  __shared__ __align__(16) float s[128];\n"
        "  dd_cp_async_16(&s[4 * threadIdx.x], &x[4 * threadIdx.x], true);\n"
        "  dd_cp_async_commit();\n"
        "}\n"
    )
    stderr = kernel_abort(source, "k", "[np.zeros(128, np.float32)]")
    assert "cp.async copies not waited for" in stderr


def test_misaligned_vector_access_is_reported() -> None:
    source = (
        "#include <cpu_simt.h>\n"
        'extern "C" __global__ void k(float* x) {\n'
        "  dd_vec<float, 4> v = dd_load_vector<float, 4>(&x[1]);\n"
        "  x[0] = v.v[0];\n"
        "}\n"
    )
    stderr = kernel_abort(source, "k", "[np.zeros(8, np.float32)]")
    assert "misaligned 16-byte vector access" in stderr


# --------------------------------------------------------------------------------------------
# Printed kernels: CPU execution, nvcc, SASS


def staged_cuda(text: str | None = None):
    ctx = make_context()
    module = parse(text or staged())
    ConvertTileToKernelPass().apply(ctx, module)
    ConvertKernelToCudaPass().apply(ctx, module)
    module.verify()
    return module


def test_printed_cp_async_kernel_runs_on_the_cpu_like_numpy() -> None:
    module = staged_cuda()
    (kernel,) = [op for op in module.ops if isinstance(op, cuda.KernelOp)]
    source = kernel.source.data
    assert "dd_cp_async_16(&s[col], &x[" in source
    assert "dd_cp_async_wait<1>();" in source and "__shared__ __align__(16) float s[256];" in source
    x = np.random.default_rng(1).standard_normal((4, 256)).astype(np.float32)
    (y,) = run(module, x)
    np.testing.assert_array_equal(y, x[:, ::-1])


@needs_nvcc
def test_cp_async_kernel_compiles_to_ldgsts(tmp_path: Path) -> None:
    kernels = [op for op in staged_cuda().ops if isinstance(op, cuda.KernelOp)]
    source = kernels_text(kernels)
    result = compile_cubin(source, arch="sm_90")
    assert set(result.kernels) == {"staged"}
    assert "LDGSTS" in sass_of(source, tmp_path)
