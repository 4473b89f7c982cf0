"""`tile-row-on-chip`: a row swept several times is read from global memory once.

RMSNorm (2 sweeps), LayerNorm (3) and softmax (3) keep their row in registers
(`row_on_chip = 1`) or in a shared row buffer (`= 2`); a row sum has one sweep and is left
alone. On random inputs the tile program after the pass, its kernel lowering (race
detector on) and the emitted CUDA C run on the CPU compute what PyTorch computes, for row
lengths 1 .. 5000 and 1, 3 or 33 rows, scheduled by `tile-rows` (short rows) or
`tile-rows-to-blocks` (long ones). A planted sweep that reads another thread's elements of
the shared row without a barrier is reported by the race detector.
"""

from __future__ import annotations

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.backend.cuda_source import kernels_text
from deplodock.backend.nvcc import compile_cubin
from deplodock.dialects import cuda, tile
from deplodock.interpreters.shared_memory import RaceError
from deplodock.passes.pipelines import lower
from deplodock.passes.tile.row_on_chip import SHARED
from tests.backend.sass import needs_nvcc
from tests.passes.reduction_rows import (
    LENGTHS,
    OPS,
    ROWS,
    _reference,
    check_all_levels,
    expression,
    kernels,
    schedule_tile,
)

ROWS_OPTIONS = {"tile-rows": {"min_blocks": 1}}


def input_loads(module: ModuleOp) -> list[tile.LoadOp]:
    """The loads of the program's input `%x0` (the row)."""
    return [
        op for op in module.walk() if isinstance(op, tile.LoadOp) and op.memref.name_hint == "x0"
    ]


def strided_loops(module: ModuleOp) -> list[tile.ForOp]:
    return [
        op for op in module.walk() if isinstance(op, tile.ForOp) and tile.depends_on_thread(op.lb)
    ]


@pytest.mark.parametrize("mode", [1, 2])
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.slow
def test_row_on_chip_matches_pytorch_at_every_level(
    op: str, length: int, rows: int, mode: int
) -> None:
    expr = expression(op, rows, length)
    module = schedule_tile(expr, {"row_on_chip": mode}, ROWS_OPTIONS)
    (kernel,) = kernels(module)
    rereads = op != "sum" and length > 1
    if rereads and mode == 1:
        assert not strided_loops(module)  # unrolled into cells
        threads = next(o for o in kernel.walk() if isinstance(o, tile.ThreadsOp))
        per_group = threads.count // (
            kernel.schedule.data["rows_per_block"].value.data
            if "rows_per_block" in kernel.schedule.data
            else 1
        )
        assert len(input_loads(module)) == -(-length // per_group)  # one load per cell
    if rereads and mode == 2:
        assert any(isinstance(o, tile.SharedAllocOp) for o in kernel.walk())
        assert len(input_loads(module)) == 1  # the first sweep only
    check_all_levels(expr, module, tolerance=1e-4 if length == 1 else 1e-5)


def test_default_registers_for_short_rows_shared_for_long() -> None:
    short = schedule_tile(expression("rms_norm", 33, 2048), {})
    assert kernels(short)[0].schedule.data["row_on_chip"].value.data == 1  # 8 a thread
    long = schedule_tile(expression("softmax", 3, 10000), {})
    assert kernels(long)[0].schedule.data["row_on_chip"].value.data == SHARED  # 40 a thread
    too_long = schedule_tile(expression("softmax", 3, 20000), {})  # 80 KB: does not fit
    assert kernels(too_long)[0].schedule.data["row_on_chip"].value.data == 0


def test_planted_cross_thread_read_without_barrier_is_a_race() -> None:
    """The shared variant needs no barrier because each thread reads back only its own
    elements. Softmax over rows of 1000 gets a warp per row (`tile-rows`, 8 rows a block),
    so its combines are shuffles, without a barrier. Plant a last sweep that reads the
    mirrored element of the row buffer (another lane's): the race detector reports it; a
    `tile.barrier` before that sweep makes it legal again."""
    expr = expression("softmax", 33, 1000)
    module = schedule_tile(expr, {"row_on_chip": SHARED}, ROWS_OPTIONS)
    assert kernels(module)[0].schedule.data["row_threads"].value.data == 32
    arguments, _ = _reference(expr)

    def planted(with_barrier: bool) -> ModuleOp:
        copy = module.clone()
        row_loads = [
            op for op in copy.walk() if isinstance(op, tile.LoadOp) and op.memref.name_hint == "row"
        ]
        last = row_loads[-1]
        loop = last.parent_op()
        assert isinstance(loop, tile.ForOp)
        top = arith.ConstantOp(IntegerAttr(999, IndexType()))
        mirror = arith.SubiOp(top.result, last.indices[-1])
        Rewriter.insert_op([top, mirror], InsertPoint.before(last))
        last.operands[len(last.operands) - 1] = mirror.result
        if with_barrier:
            Rewriter.insert_op(tile.BarrierOp(), InsertPoint.before(loop))
        copy.verify()
        return lower(copy, "kernel", start="tile")

    with pytest.raises(RaceError, match="race on shared buffer %row"):
        run_on_cpu(planted(with_barrier=False), arguments)
    run_on_cpu(planted(with_barrier=True), arguments)  # legal (if not softmax any more)


@needs_nvcc
@pytest.mark.parametrize(
    ("op", "rows", "length", "knobs"),
    [
        ("rms_norm", 33, 2048, {}),  # one block a row, 8 cells a thread in registers
        ("layer_norm", 33, 100, {}),  # a warp a row, 4 cells
        ("softmax", 33, 1000, {}),  # a warp a row, 32 cells in registers
        ("softmax", 3, 5000, {}),  # one block a row, 20 cells in registers
        ("softmax", 3, 10000, {}),  # one block a row, 40 cells: shared row buffer
        ("softmax", 33, 1000, {"row_on_chip": 2}),  # a shared buffer of 8 rows
    ],
)
def test_emitted_kernels_compile_without_spills(
    op: str, rows: int, length: int, knobs: dict[str, int]
) -> None:
    module = schedule_tile(expression(op, rows, length), knobs, ROWS_OPTIONS)
    cuda_module = lower(module, "cuda", start="tile")
    emitted = [o for o in cuda_module.walk() if isinstance(o, cuda.KernelOp)]
    result = compile_cubin(kernels_text(emitted), arch="sm_90")
    assert result.kernels
    for name, report in result.kernels.items():
        assert not report.spills, f"{name} spills: {report}"
