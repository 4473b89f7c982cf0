"""Structure of the lowered programs: one kernel per fused example, and CUDA that nvcc takes.

The numerics of these programs are checked in test_ops_all_levels.py; here we check what
fusion promised (one kernel; the matmul's (M, K, N) broadcast product never becomes a
buffer) and that every kernel the printer emits compiles for sm_90 without register spills.
"""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import MemRefType

from deplodock.backend.cuda_source import kernels_text
from deplodock.backend.nvcc import compile_cubin, nvcc_available
from deplodock.dialects import cuda, kernel, loop
from tests.e2e.test_ops_all_levels import OPS, lowered

FUSED = {
    "fused_rmsnorm": "RMSNorm",
    "fused_softmax": "softmax",
    "fused_matmul_relu": "relu((x + b) @ w)",
}


@pytest.mark.parametrize("name", list(FUSED))
def test_fused_example_is_one_kernel_at_every_lower_level(name: str) -> None:
    for stage, kernel_type in (
        ("loop", loop.KernelOp),
        ("kernel", kernel.FuncOp),
        ("cuda", cuda.KernelOp),
    ):
        module = lowered(name, stage)
        kernels = [op for op in module.ops if isinstance(op, kernel_type)]
        assert len(kernels) == 1, f"{FUSED[name]} at {stage}: {len(kernels)} kernels"


def test_matmul_broadcast_product_is_never_a_buffer() -> None:
    """relu((x + b) @ w) with x 16x64, w 64x16: no 16x64x16 memref exists after fusion."""
    for stage in ("loop", "tile", "kernel", "cuda"):
        module = lowered("fused_matmul_relu", stage)
        shapes = {
            tuple(value.type.get_shape())
            for op in module.walk()
            for value in (*op.results, *(a for r in op.regions for a in r.block.args))
            if isinstance(value.type, MemRefType)
        }
        assert (16, 64, 16) not in shapes, f"a 16x64x16 buffer exists at {stage}"
        assert (16, 1, 16) not in shapes, f"the un-squeezed product exists at {stage}"


@pytest.mark.nvcc
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH: cannot compile for sm_90")
@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.slow
def test_emitted_cuda_compiles_for_sm90_without_spills(name: str) -> None:
    module = lowered(name, "cuda")
    for kernel_op in (op for op in module.ops if isinstance(op, cuda.KernelOp)):
        result = compile_cubin(kernels_text([kernel_op]), arch="sm_90")
        assert kernel_op.sym_name.data in result.kernels, result.log
        for kernel_name, resources in result.kernels.items():
            assert not resources.spills, f"{name}: kernel {kernel_name} spills: {resources}"
