"""`tile-online-softmax`: the max and sum-of-exponentials sweeps fused into one.

Softmax with row lengths 1 .. 5000 and 1, 3 or 33 rows, fused (knob `online_softmax = 1`)
with the row left in memory, in registers or in a shared buffer, computes what PyTorch
computes at the tile level, after `convert-tile-to-kernel` and as emitted CUDA C on the
CPU. A causally masked softmax (rows starting with finite values, then -inf; threads that
see only -inf) stays free of NaN.
"""

from __future__ import annotations

import pytest

from deplodock.dialects import tile
from tests.passes.reduction_rows import (
    LENGTHS,
    ROWS,
    check_all_levels,
    expression,
    kernels,
    schedule_tile,
)

ROWS_OPTIONS = {"tile-rows": {"min_blocks": 1}}


def sweeps(module) -> list[tile.ForOp]:
    return [op for op in module.walk() if isinstance(op, tile.ForOp) and op.is_reduce]


@pytest.mark.parametrize("on_chip", [0, 1, 2])
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.slow
def test_online_softmax_matches_pytorch(length: int, rows: int, on_chip: int) -> None:
    expr = expression("softmax", rows, length)
    module = schedule_tile(expr, {"online_softmax": 1, "row_on_chip": on_chip}, ROWS_OPTIONS)
    (kernel,) = kernels(module)
    if length > 1 and on_chip != 1:
        (fused,) = sweeps(module)  # one reduce sweep carrying (max, sum)
        assert len(fused.inits) == 2
    check_all_levels(expr, module, tolerance=1e-4 if length == 1 else 1e-5)
    del kernel


MASKED = (
    "torch.randn(2, 40, 40).masked_fill(torch.arange(len(torch.randn(40)))[None, :]"
    " > torch.arange(len(torch.randn(40)))[:, None], float('-inf')).softmax(-1)"
)


@pytest.mark.parametrize("on_chip", [0, 2])
def test_masked_rows_with_minus_infinity(on_chip: int) -> None:
    module = schedule_tile(MASKED, {"online_softmax": 1, "row_on_chip": on_chip}, ROWS_OPTIONS)
    assert any(len(loop.inits) == 2 for loop in sweeps(module))
    check_all_levels(MASKED, module)


def test_default_fuses_only_rows_that_do_not_stay_in_registers() -> None:
    short = schedule_tile(expression("softmax", 33, 1000), {}, ROWS_OPTIONS)
    assert kernels(short)[0].schedule.data["online_softmax"].value.data == 0
    long = schedule_tile(expression("softmax", 3, 20000), {})
    assert kernels(long)[0].schedule.data["online_softmax"].value.data == 1
