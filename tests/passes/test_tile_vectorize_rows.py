"""`tile-vectorize-rows` on row reductions: a GEMV (the decode step's `M = 1` projection),
a sum of squares; fp32 and bf16. The widened program is compared with PyTorch in
float64 through the emitted CUDA C on the CPU, a planted wrong width or a lost element is
caught, and the bf16 GEMV's SASS loads 128 bits at a time."""

from __future__ import annotations

import pytest

from deplodock.backend.cuda_source import kernels_text
from deplodock.dialects import cuda, tile
from deplodock.driver import lower_program, program_from_expression, run_and_compare
from deplodock.passes.pipelines import STAGE_PASSES
from deplodock.passes.tile import vectorize_rows
from tests.backend.sass import needs_nvcc, sass_of

GEMV = "F.linear(torch.randn(1, {k}){cast}, torch.randn({n}, {k}){cast})"
CASES = {  # expression -> the width its row loops read at
    "gemv-bf16-rows": (GEMV.format(k=3584, n=4096, cast=".bfloat16()"), 8),  # tile-rows: 128 lanes
    "gemv-bf16-ragged": (GEMV.format(k=1000, n=64, cast=".bfloat16()"), 8),  # 1000 = 3.9 x 256
    "gemv-bf16-block": (GEMV.format(k=4096, n=64, cast=".bfloat16()"), 8),  # a block per row
    "gemv-fp32": (GEMV.format(k=2048, n=64, cast=""), 4),
    "sum-of-squares": ("(torch.randn(12, 1024) ** 2).sum(-1)", 4),
}


def widths(module) -> set[int]:
    return {len(op.res) for op in module.walk() if isinstance(op, tile.LoadVectorOp)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_widened_rows_match_pytorch_through_the_emitted_c(case: str) -> None:
    expression, width = CASES[case]
    program = program_from_expression(expression)
    lower_program(program, "tile")
    assert width in widths(program.module), case
    lower_program(program, "cuda")
    report = run_and_compare(program)
    assert report.ok, report.summary()


def test_a_dropped_element_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: each trip reads `width` elements but sums only the first `width - 1`."""

    def drop_last(kernel, width=None):
        used = real(kernel, width)
        for op in kernel.walk():
            if isinstance(op, tile.ForOp) and op.is_reduce and len(op.body.block.ops) > 3:
                yielded = op.body.block.last_op
                last_add = yielded.operands[0].owner
                yielded.operands = [last_add.operands[0]]  # skip the last element's add
                break
        return used

    real = vectorize_rows.vectorize_rows
    monkeypatch.setattr(vectorize_rows, "vectorize_rows", drop_last)
    program = program_from_expression(GEMV.format(k=2048, n=64, cast=""))
    lower_program(program, "cuda")
    assert not run_and_compare(program).ok


def test_runs_after_the_rows_are_split_and_before_unrolling() -> None:
    stage = STAGE_PASSES["tile"]
    assert stage.index("tile-rows") < stage.index("tile-vectorize-rows")
    assert stage.index("tile-cooperative-reduce") < stage.index("tile-vectorize-rows")
    assert stage.index("tile-vectorize-rows") < stage.index("tile-unroll")


@needs_nvcc
def test_the_bf16_gemv_loads_128_bits(tmp_path) -> None:
    program = program_from_expression(GEMV.format(k=4096, n=64, cast=".bfloat16()"))
    lower_program(program, "cuda")
    kernel = next(op for op in program.module.ops if isinstance(op, cuda.KernelOp))
    assert "LDG.E.128" in sass_of(kernels_text([kernel]), tmp_path)
