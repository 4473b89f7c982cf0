"""`tile-shared-statistics`: a narrow contraction's row statistics, once per block row.

Every schedule must match PyTorch at the tile level, the kernel level (race detector on) and
through the emitted CUDA C run on the CPU, on random inputs: causal and plain attention with
rows that are no multiple of a warp, rows that do not divide among the warps, bf16, and the
statistics of other norms (RMSNorm, LayerNorm) before a linear of few columns.
"""

from __future__ import annotations

import pytest
from xdsl.rewriter import Rewriter

from deplodock.dialects import tile
from deplodock.driver import lower_program, program_from_expression, run_and_compare
from deplodock.interpreters.shared_memory import RaceError
from deplodock.passes.tile import schedule
from deplodock.passes.tile.shared_statistics import STATISTICS_ATTR
from tests.helpers import random_inputs, run
from tests.passes.test_tile_stage_prologue import (
    apply_tile_pipeline,
    check_every_level,
    unpadded_loop,
)

#: Causal attention over 40 keys (two cells a lane, the second for 8 lanes), head dim 24.
CAUSAL = (
    "F.scaled_dot_product_attention(torch.randn(1, 2, 40, 24{dt}), torch.randn(1, 2, 40, 24{dt}),"
    " torch.randn(1, 2, 40, 24{dt}), is_causal=True)"
)
#: softmax over 72 keys, then @ V of 40 columns.
SOFTMAX_PV = "torch.softmax(torch.randn(3, 20, 72), dim=-1) @ torch.randn(3, 72, 40)"
NORMS = {
    "rmsnorm": "nn.Linear(48, 40, bias=False)(nn.RMSNorm(48)(torch.randn(3, 7, 48)))",
    "layernorm": "nn.Linear(64, 24)(nn.LayerNorm(64)(torch.randn(36, 64)))",
}
#: 16 x 96 tiles of 1 x 4 cells: 384 threads, 12 warps for 16 rows (two trips, the second
#: for 4 warps).
UNEVEN = "tile-block{bm=16 bn=96},tile-thread{fm=1 fn=4},tile-shared-statistics"
SCHEDULED = f"{UNEVEN},tile-chunk-k{{bk=8}},tile-stage,tile-vectorize,tile-unroll,tile-cse"


def _product(program) -> tile.KernelOp:
    return [op for op in program.module.ops if isinstance(op, tile.KernelOp)][-1]


def _statistics(kernel: tile.KernelOp) -> list[tile.SharedAllocOp]:
    return [
        op
        for op in kernel.walk()
        if isinstance(op, tile.SharedAllocOp) and STATISTICS_ATTR in op.attributes
    ]


@pytest.mark.parametrize("bf16", [False, True])
def test_causal_attention_is_two_kernels_and_matches_at_every_level(bf16: bool) -> None:
    """The scores, then one kernel for softmax and P.V whose warps compute the row max and
    sum into shared memory (default schedule); every level matches PyTorch."""
    program = program_from_expression(CAUSAL.format(dt=", dtype=torch.bfloat16" if bf16 else ""))
    unpadded_loop(program)  # 40 keys kept: the two-kernel form
    lower_program(program, "tile")
    kernels = [op for op in program.module.ops if isinstance(op, tile.KernelOp)]
    assert len(kernels) == 2
    assert len(_statistics(kernels[-1])) == 1
    assert schedule.read_knob(kernels[-1], "shared_statistics", 0) == 1
    check_every_level(program)


@pytest.mark.parametrize("expression", [SOFTMAX_PV, *NORMS.values()])
def test_rows_that_do_not_divide_among_the_warps(expression: str) -> None:
    """12 warps for 16 rows: the second trip's extra warps recompute the last row and do not
    store it; every level matches PyTorch (the race detector would see a second store)."""
    program = program_from_expression(expression, seed=1)
    lower_program(program, "loop")
    apply_tile_pipeline(program, SCHEDULED)
    (array,) = _statistics(_product(program))
    assert array.result.type.get_shape()[-1] == 16
    check_every_level(program)


@pytest.mark.parametrize("name", sorted(NORMS))
def test_the_default_schedule_of_a_norm_before_a_narrow_linear(name: str) -> None:
    """RMSNorm's mean square and LayerNorm's mean and variance are statistics like
    softmax's: one kernel, every level matches PyTorch."""
    program = program_from_expression(NORMS[name], seed=1)
    lower_program(program, "tile")
    kernels = [op for op in program.module.ops if isinstance(op, tile.KernelOp)]
    assert len(kernels) == 1 and _statistics(kernels[0])
    check_every_level(program)


def test_each_lane_reads_its_elements_of_a_row_once() -> None:
    """The sum reuses the values the max loaded: the statistics loop holds one load of the
    input per cell of a lane (72 keys: 3 cells), none in a loop of its own."""
    program = program_from_expression(SOFTMAX_PV, seed=1)
    lower_program(program, "loop")
    apply_tile_pipeline(program, UNEVEN)
    kernel = _product(program)
    (phase,) = [
        op
        for op in kernel.walk()
        if isinstance(op, tile.ForOp)
        and any(isinstance(o, tile.CombineOp) for o in op.body.block.ops)
    ]
    loads = [op for op in phase.walk() if isinstance(op, tile.LoadOp)]
    assert len(loads) == 3
    assert not [op for op in phase.walk() if isinstance(op, tile.ForOp) and op is not phase]


def test_off_every_thread_computes_its_own_rows() -> None:
    """`enable=0` records the knob and leaves the per-cell loops; still correct."""
    program = program_from_expression(SOFTMAX_PV, seed=1)
    lower_program(program, "loop")
    apply_tile_pipeline(program, UNEVEN.replace("statistics", "statistics{enable=0}"))
    kernel = _product(program)
    assert schedule.read_knob(kernel, "shared_statistics", 1) == 0 and not _statistics(kernel)
    report = run_and_compare(program, seed=2)
    assert report.ok, report.summary()


@pytest.mark.parametrize("level", ["tile", "kernel"])
def test_a_missing_barrier_after_the_statistics_is_caught(level: str) -> None:
    """Without the barrier, the reads of the shared statistics race with the warps that
    write them: the race detector reports it at the tile and the kernel level."""
    program = program_from_expression(SOFTMAX_PV, seed=1)
    lower_program(program, "loop")
    apply_tile_pipeline(program, UNEVEN)
    (barrier,) = [op for op in _product(program).walk() if isinstance(op, tile.BarrierOp)]
    Rewriter.erase_op(barrier)
    if level == "kernel":
        lower_program(program, "kernel")
    with pytest.raises(RaceError):
        run(program.module, *random_inputs(program.module, seed=3))
