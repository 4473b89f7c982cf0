"""`tile-register-prefetch` on the MLP's down projection with its fused `silu(gate) * up`
prologue: the prologue's loads move before the chunk's FMAs, its arithmetic and store after
them. Every schedule must match PyTorch at the tile level, the kernel level (race detector
and asynchronous `cp.async` on) and through the emitted CUDA C run on the CPU; storing into
the slot being read instead of the next one must be reported as a race.
"""

from __future__ import annotations

import pytest
from xdsl.dialects import math

from deplodock.dialects import tile
from deplodock.dialects.hardware import is_shared
from deplodock.driver import lower_program
from deplodock.interpreters.shared_memory import RaceError
from deplodock.passes.tile import schedule
from tests.helpers import random_inputs, run
from tests.passes.test_tile_stage_prologue import (
    PIPELINES,
    check_every_level,
    contraction,
    program_at_tile,
)

#: The 2 x 2 (and 2 x 1) register tiles of these small shapes are below the default
#: heuristic's 16 cells, so the tests ask for the prefetch with `min_cells=1`.
PREFETCH = ",tile-register-prefetch{min_cells=1}"
PREFETCHED = {
    "depth2": PIPELINES["async-depth2"] + PREFETCH,
    "split-k-depth3": PIPELINES["split-k"] + PREFETCH,
    "threads128": PIPELINES["async-depth2"].replace("fn=2}", "fn=1}") + PREFETCH,
}


def k_loop(kernel: tile.KernelOp) -> tile.ForOp:
    return next(
        op
        for op in kernel.walk()
        if isinstance(op, tile.ForOp) and op.induction_var.name_hint == "ko"
    )


def test_loads_before_the_fmas_arithmetic_and_stores_after() -> None:
    kernel = contraction(program_at_tile(40, PREFETCHED["depth2"]))
    assert schedule.read_knob(kernel, "register_prefetch", 0) == 1
    body = list(k_loop(kernel).body.block.ops)
    ki = next(i for i, op in enumerate(body) if isinstance(op, tile.ForOp) and op.is_reduce)
    early_loads = [
        op
        for op in body[:ki]
        if isinstance(op, tile.LoadVectorOp) and not is_shared(op.memref.type)
    ]
    assert {op.memref.name_hint for op in early_loads} == {"x0", "x1"}
    (stores,) = [op for op in body[ki:] if isinstance(op, tile.IfOp)]
    assert "register_prefetch" in stores.attributes
    assert any(isinstance(op, math.ExpOp) for op in stores.walk())
    assert [op.memref.name_hint for op in stores.walk() if isinstance(op, tile.StoreVectorOp)] == [
        "x0_x1_a_s"
    ]
    assert not any(isinstance(op, tile.LoadVectorOp | tile.LoadOp) for op in stores.walk())
    assert not any(isinstance(op, math.ExpOp) for op in body[:ki])


@pytest.mark.parametrize(("fm", "fn", "on"), [(2, 2, 0), (4, 4, 1)])
def test_the_default_prefetches_for_16_cells_or_more(fm: int, fn: int, on: int) -> None:
    pipeline = (
        f"tile-block{{bm=32 bn=32}},tile-thread{{fm={fm} fn={fn}}},tile-chunk-k{{bk=8}},"
        "tile-stage,tile-vectorize,tile-pad-shared,tile-multibuffer{depth=2},tile-pipeline,"
        "tile-async-copy,tile-register-prefetch"
    )
    kernel = contraction(program_at_tile(40, pipeline))
    assert schedule.read_knob(kernel, "register_prefetch", -1) == on
    moved = any(
        isinstance(op, tile.IfOp) and "register_prefetch" in op.attributes for op in kernel.walk()
    )
    assert moved == bool(on)


def test_off_leaves_the_copy_as_it_was() -> None:
    pipeline = PIPELINES["async-depth2"] + ",tile-register-prefetch{enable=false}"
    kernel = contraction(program_at_tile(40, pipeline))
    assert schedule.read_knob(kernel, "register_prefetch", 1) == 0
    reference = contraction(program_at_tile(40, PIPELINES["async-depth2"]))
    assert str(k_loop(kernel)) == str(k_loop(reference))


@pytest.mark.parametrize("name", sorted(PREFETCHED))
def test_every_level_matches_pytorch(name: str) -> None:
    program = program_at_tile(48 if "split" in name else 40, PREFETCHED[name])
    assert schedule.read_knob(contraction(program), "register_prefetch", 0) == 1
    check_every_level(program)


def test_bf16_matches_pytorch() -> None:
    program = program_at_tile(48, PREFETCHED["depth2"], bf16=True)
    assert schedule.read_knob(contraction(program), "register_prefetch", 0) == 1
    check_every_level(program)


@pytest.mark.parametrize("level", ["tile", "kernel"])
def test_storing_into_the_slot_being_read_is_a_race(level: str) -> None:
    program = program_at_tile(40, PREFETCHED["depth2"])
    loop = k_loop(contraction(program))
    (stores,) = [
        op
        for op in loop.body.block.ops
        if isinstance(op, tile.IfOp) and "register_prefetch" in op.attributes
    ]
    store = next(op for op in stores.walk() if isinstance(op, tile.StoreVectorOp))
    slot = next(
        op for op in loop.body.block.ops if op.results and op.results[0].name_hint == "slot"
    )
    store.operands[store.operands.index(store.indices[0])] = slot.results[0]  # the planted bug
    if level == "kernel":
        lower_program(program, "kernel")
    with pytest.raises(RaceError):
        run(program.module, *random_inputs(program.module, seed=3))
