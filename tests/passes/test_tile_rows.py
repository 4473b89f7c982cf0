"""`tile-rows`: several rows per block, a group of `W` threads per row.

For RMSNorm, LayerNorm, softmax and a row sum with row lengths 1 .. 5000 and 1, 3 or 33
rows (partial last blocks included), the tile program after the pass, its kernel lowering
(segmented combines, race detector on) and the emitted CUDA C run on the CPU all compute
what PyTorch computes on random inputs.
"""

from __future__ import annotations

import pytest

from deplodock.dialects import tile
from deplodock.passes.tile.rows import choose, rows_per_block
from deplodock.passes.tile.schedule import read_knob
from tests.passes.reduction_rows import (
    LENGTHS,
    OPS,
    ROWS,
    check_all_levels,
    expression,
    kernels,
    schedule_tile,
)


def knobs_for(rows: int, length: int) -> dict[str, int]:
    """The heuristic's choice for a long grid (so that small tests exercise it too); a row
    too long for the heuristic gets 4 warps, 2 rows per block."""
    width, per_block = choose(max(rows, 2), length, max_threads=256, min_blocks=1)
    if width == 0:
        width, per_block = 128, 2
    return {"row_threads": width, "rows_per_block": per_block}


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.slow
def test_rows_match_pytorch_at_every_level(op: str, length: int, rows: int) -> None:
    expr = expression(op, rows, length)
    knobs = knobs_for(rows, length)
    module = schedule_tile(expr, knobs, skip=("tile-row-on-chip",))
    (kernel,) = kernels(module)
    if length == 1:
        # The reduction folds away: an elementwise kernel (tile-grid-stride's). RMSNorm of
        # one element, x * rsqrt(x * x + eps), is already 6e-5 off float64 at the tensor
        # level (before any scheduling), hence the looser bound here.
        check_all_levels(expr, module, tolerance=1e-4)
        return
    if rows == 1:  # no row loop at the loop level: one block runs the whole row
        assert kernel.grid.count == 1
        check_all_levels(expr, module)
        return
    width, per_block = knobs["row_threads"], knobs["rows_per_block"]
    assert read_knob(kernel, "threads", 0) == width * per_block
    assert kernel.grid.count == -(-rows // per_block)
    combines = [c for c in kernel.walk() if isinstance(c, tile.CombineOp)]
    assert combines and all(c.segment == (width if per_block > 1 else None) for c in combines)
    check_all_levels(expr, module)


@pytest.mark.parametrize(
    ("rows", "length", "expected"),
    [
        (4096, 100, (32, 8)),  # a warp per row, 8 rows per block
        (4096, 7, (8, 16)),  # 8 threads per row; 32 rows a block would leave 128 blocks
        (8192, 2048, (64, 4)),  # 2 warps per row
        (8192, 4096, (128, 2)),
        (8192, 16384, (0, 0)),  # a whole block per row: left to tile-rows-to-blocks
        (256, 512, (0, 0)),  # 2 rows a block: 128 blocks < 132 SMs, so one row a block
        (32, 2048, (0, 0)),  # few rows: one 256-thread block per row is better
        (1, 100, (0, 0)),
    ],
)
def test_default_heuristic(rows: int, length: int, expected: tuple[int, int]) -> None:
    assert choose(rows, length, max_threads=256, min_blocks=132) == expected


def test_default_pipeline_takes_many_short_rows_and_leaves_few_long_ones() -> None:
    many = schedule_tile(expression("softmax", 2048, 100), {})
    (kernel,) = kernels(many)
    assert read_knob(kernel, "row_threads", 0) == 32
    assert read_knob(kernel, "rows_per_block", 0) == 8
    few = schedule_tile(expression("rms_norm", 3, 2048), {})
    (kernel,) = kernels(few)
    assert read_knob(kernel, "row_threads", 0) == 0
    assert kernel.grid.count == 3  # tile-rows-to-blocks: one block per row


def test_row_nest_of_several_loops_is_delinearized_from_the_row() -> None:
    """Rows indexed by a 3-D nest (2 x 3 x 5 rows of 40): each group's row is split back
    into the nest's indices; 30 rows at 8 a block leave a partial last block."""
    expr = "torch.randn(2, 3, 5, 40).softmax(-1)"
    module = schedule_tile(expr, {}, {"tile-rows": {"min_blocks": 1}})
    (kernel,) = kernels(module)
    assert read_knob(kernel, "rows_per_block", 0) == 8 and kernel.grid.count == 4
    check_all_levels(expr, module)


def test_a_scheduled_width_alone_gets_rows_per_block_for_that_width() -> None:
    # 64 rows of 100: the heuristic gives 32 threads a row; a schedule asking for 4 threads
    # a row (and no rows_per_block) gets the R the heuristic would give 4-thread groups,
    # not the R it computed for 32, so the block stays whole warps.
    expr = expression("sum", 64, 100)
    module = schedule_tile(expr, {"row_threads": 4})
    (kernel,) = kernels(module)
    assert read_knob(kernel, "row_threads", 0) == 4
    per_block = rows_per_block(64, 4, max_threads=256, min_blocks=132)
    assert read_knob(kernel, "rows_per_block", 0) == per_block
    assert read_knob(kernel, "threads", 0) % 32 == 0
    check_all_levels(expr, module)
