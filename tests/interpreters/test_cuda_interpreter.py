"""The cuda level runs the printed CUDA C on the CPU and agrees with the kernel interpreter.

Each module under tests/backend/inputs is hand-written kernel-level IR; it runs once with the
kernel interpreter (numpy SIMT) and once after `convert-kernel-to-cuda`, where `cuda.launch`
compiles the kernel source with the SIMT emulation header. Both are compared with a float64
numpy reference, so a printer bug and an interpreter bug cannot cancel out.
"""

from __future__ import annotations

import json
from math import erf
from pathlib import Path

import numpy as np
import pytest
import torch
from xdsl.dialects.builtin import ModuleOp

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.dialects import cuda, make_context
from deplodock.passes.convert_kernel_to_cuda import ConvertKernelToCudaPass
from tests.helpers import parse, rel_err

INPUTS = Path(__file__).resolve().parents[1] / "backend" / "inputs"
RNG = np.random.default_rng(1)


def load(name: str) -> ModuleOp:
    return parse((INPUTS / name).read_text())


def to_cuda(module: ModuleOp) -> ModuleOp:
    lowered = module.clone()
    ConvertKernelToCudaPass().apply(make_context(), lowered)
    lowered.verify()
    assert not any(op.dialect_name() == "kernel" for op in lowered.walk())
    assert any(isinstance(op, cuda.KernelOp) for op in lowered.walk())
    return lowered


def both_levels(name: str, inputs: list[np.ndarray]) -> tuple[list, list]:
    module = load(name)
    return run_on_cpu(module, inputs), run_on_cpu(to_cuda(module), inputs)


def check(outs: list[np.ndarray], ref: np.ndarray, tol: float = 1e-5) -> None:
    for out in outs:
        assert out.shape == ref.shape
        assert not np.isnan(out).any()
        assert rel_err(out, ref) <= tol


def test_rms_norm() -> None:
    x = RNG.standard_normal((1, 8, 512)).astype(np.float32)
    w = RNG.standard_normal(512).astype(np.float32)
    (k,), (c,) = both_levels("rms_norm.mlir", [x, w])
    xd = x.astype(np.float64)
    check([k, c], xd / np.sqrt((xd * xd).mean(-1, keepdims=True) + 1e-6) * w)


def test_elementwise_math() -> None:
    x = (RNG.standard_normal((4, 300)) * 2).astype(np.float32)
    (k,), (c,) = both_levels("elementwise.mlir", [x])
    v = x.astype(np.float64)
    gelu = 0.5 * v * (1 + np.vectorize(erf)(v * 0.707106769))
    av = np.abs(v)
    ref = (
        np.where(v < 0, gelu, -gelu)
        + np.tanh(v) * np.exp(-av)
        + np.log(v * v + 1)
        - np.sqrt(av)
        - (np.maximum(v, 0) + np.minimum(v, 0))
        + av**1.5 / (av + 1)
    )
    check([k, c], ref)


def test_online_softmax_and_swapped_iter_args() -> None:
    x = (RNG.standard_normal((8, 96)) * 3).astype(np.float32)
    (k,), (c,) = both_levels("softmax.mlir", [x])
    ref = torch.softmax(torch.from_numpy(x).double(), dim=-1).numpy()
    check([k, c], ref)


def test_f16_transpose_through_shared_memory() -> None:
    x = RNG.standard_normal((32, 64)).astype(np.float16)
    (k,), (c,) = both_levels("transpose_f16.mlir", [x])
    ref = ((x * np.float16(2)).astype(np.float32) + 1).astype(np.float16).T
    assert k.dtype == c.dtype == np.float16
    np.testing.assert_array_equal(c, ref)  # one rounding per op on both sides: bit-exact
    np.testing.assert_array_equal(k, ref)


def test_two_kernels_intermediate_buffer_and_bf16() -> None:
    x = RNG.standard_normal((16, 60)).astype(np.float32)
    w_bf16 = torch.from_numpy(RNG.standard_normal(60).astype(np.float32)).bfloat16()
    w = w_bf16.float().numpy()
    (ky, kz), (cy, cz) = both_levels("two_kernels.mlir", [x, w])
    xd = x.astype(np.float64)
    rs = np.arange(16)[:, None] - 8
    ref_y = xd - xd.mean(1, keepdims=True) + (rs // 3) * 0.5 + (-(-rs // 3)) * 0.25
    check([ky, cy], ref_y)
    ref_z = (torch.from_numpy(cy).bfloat16().float() * w_bf16.float()).bfloat16().float().numpy()
    np.testing.assert_array_equal(cz, ref_z)
    check([kz, cz], ref_z.astype(np.float64), tol=1e-2)


def test_launch_checks_buffer_shapes() -> None:
    module = to_cuda(load("rms_norm.mlir"))
    x = RNG.standard_normal((1, 8, 512)).astype(np.float32)
    with pytest.raises(ValueError, match="expected shape"):
        run_on_cpu(module, [x[:, :4], np.ones(512, np.float32)])


FIRST = r"""extern "C" __global__ void first(const float* x, float* y) {
  if (threadIdx.x < 60) y[threadIdx.x] = x[threadIdx.x] + 1.0f;
}"""
SECOND = r"""extern "C" __global__ void second(const float* y, float* z) {
  const int i = blockIdx.x * 32 + threadIdx.x;
  z[i] = 2.0f * y[i];
}"""
T = "memref<64xf32>"
HAND_WRITTEN = f"""
builtin.module {{
  cuda.kernel @first grid 1 block 64 smem 0 args [{T}, {T}]
    readonly [true, false] includes [] source {json.dumps(FIRST)}
  cuda.kernel @second grid 2 block 32 smem 0 args [{T}, {T}]
    readonly [true, false] includes [] source {json.dumps(SECOND)}
  func.func @forward(%x: {T}) -> ({T}, {T}) {{
    %y = cuda.alloc : {T}
    %z = cuda.alloc : {T}
    cuda.launch @first(%x, %y) : ({T}, {T}) -> ()
    cuda.launch @second(%y, %z) : ({T}, {T}) -> ()
    func.return %y, %z : {T}, {T}
  }}
}}
"""


def test_hand_written_cuda_module_and_nan_filled_allocs() -> None:
    module = parse(HAND_WRITTEN)
    x = RNG.standard_normal(64).astype(np.float32)
    y, z = run_on_cpu(module, [x])
    np.testing.assert_array_equal(y[:60], x[:60] + 1)
    assert np.isnan(y[60:]).all() and np.isnan(z[60:]).all()  # never written: still NaN
    np.testing.assert_array_equal(z[:60], 2 * (x[:60] + 1))


def test_the_cuda_level_needs_a_runner_of_cuda_c() -> None:
    """Running C is the backend's service: the interpreters alone say so in one line."""
    from xdsl.utils.exceptions import InterpretationError

    from deplodock.interpreters import run_module

    module = to_cuda(load("rms_norm.mlir"))
    x = RNG.standard_normal((1, 8, 512)).astype(np.float32)
    with pytest.raises(InterpretationError, match="no runner for CUDA C was given"):
        run_module(module, [x, np.ones(512, np.float32)])
    calls: list[tuple[str, int, int]] = []
    run_module(
        module,
        [x, np.ones(512, np.float32)],
        cuda_runner=lambda source, name, args, grid, block: calls.append((name, grid, block)),
    )
    assert [name for name, _, _ in calls] == [
        k.sym_name.data for k in module.ops if isinstance(k, cuda.KernelOp)
    ]
