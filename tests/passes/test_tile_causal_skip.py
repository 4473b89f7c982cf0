"""`tile-causal-skip`: causal P.V blocks stop at their diagonal, and compute the same."""

from __future__ import annotations

import pytest
from xdsl.dialects import arith

from deplodock.dialects import kernel, tile
from deplodock.driver import lower_program, program_from_expression
from deplodock.passes.tile import schedule
from deplodock.passes.tile.causal_skip import first_chunk_copies, zero_when_masked
from deplodock.perf.trace import (
    VARYING_SAMPLES,
    representative_blocks,
    trace_kernel,
    varies_by_block,
)
from tests.passes.test_tile_stage_prologue import (
    apply_tile_pipeline,
    check_every_level,
    unpadded_loop,
)

#: Causal attention over 40 keys: P.V in blocks of 16 query rows and chunks of 8 keys, so
#: the blocks need 2, 4 and 5 of the 5 chunks.
CAUSAL = (
    "F.scaled_dot_product_attention(torch.randn(1, 2, 40, 16{dt}), torch.randn(1, 2, 40, 16{dt}),"
    " torch.randn(1, 2, 40, 16{dt}), is_causal=True)"
)
SCHEDULE = (
    "tile-block{{bm=16 bn=16}},tile-thread{{fm=2 fn=2}},tile-shared-statistics,"
    "tile-chunk-k{{bk=8}},tile-stage,"
    "tile-vectorize,tile-pad-shared,tile-multibuffer{{depth={depth}}},tile-pipeline,"
    "tile-async-copy,tile-register-prefetch{{enable={prefetch} min_cells=1}},tile-causal-skip"
)


def scheduled(depth: int = 2, prefetch: str = "false", bf16: bool = False, extra: str = ""):
    dt = ", dtype=torch.bfloat16" if bf16 else ""
    program = program_from_expression(CAUSAL.format(dt=dt), seed=1)
    unpadded_loop(program)
    apply_tile_pipeline(program, SCHEDULE.format(depth=depth, prefetch=prefetch) + extra)
    return program


def pv_kernel(program) -> tile.KernelOp:
    return [op for op in program.module.ops if isinstance(op, tile.KernelOp)][-1]


def k_loop_of(kernel: tile.KernelOp) -> tile.ForOp:
    threads = schedule.threads_of(kernel)
    assert threads is not None
    (loop,) = [loop for loop in schedule.top_loops(threads) if loop.is_reduce]
    return loop


@pytest.mark.parametrize("depth", [2, 3])
def test_the_k_loop_starts_at_the_blocks_skip(depth: int) -> None:
    """The P.V kernel's K loop runs from `%skip = K - kend` and recovers the chunk start
    `%ko = %j - %skip`; the next-chunk test compares with `kend`, not with K. Every level
    matches PyTorch's causal attention."""
    program = scheduled(depth)
    kernel = pv_kernel(program)
    loop = k_loop_of(kernel)
    assert loop.lb.name_hint == "skip" and loop.upper == 40
    assert schedule.read_knob(kernel, "causal_skip", 0) == 1
    first = loop.body.block.first_op
    assert isinstance(first, arith.SubiOp) and first.rhs is loop.lb
    has_next = [op for op in loop.body.block.ops if isinstance(op, arith.CmpiOp)]
    assert [op.rhs.name_hint for op in has_next] == ["kend"]
    check_every_level(program)


def test_the_register_prefetch_clamps_to_the_last_visible_chunk() -> None:
    """With `tile-register-prefetch` the next chunk's loads are clamped to `kend - BK`,
    the start of the block's last visible chunk, instead of to `K - BK`."""
    program = scheduled(prefetch="true")
    loop = k_loop_of(pv_kernel(program))
    clamps = [
        op
        for op in loop.body.block.ops
        if isinstance(op, arith.MinSIOp) and op.lhs.name_hint == "ko_next"
    ]
    assert [op.rhs.name_hint for op in clamps] == ["last_chunk"]
    check_every_level(program)


def test_bf16_probabilities_are_skipped_too() -> None:
    """bf16 P is rounded before `@ V` (`arith.truncf`): 0 stays 0, so the skip holds."""
    program = scheduled(bf16=True)
    assert k_loop_of(pv_kernel(program)).lb.name_hint == "skip"
    check_every_level(program)


def test_the_knob_turns_it_off() -> None:
    """`causal_skip = 0` on the schedule (a tuner's choice) leaves every chunk."""
    program = program_from_expression(CAUSAL.format(dt=""), seed=1)
    unpadded_loop(program)
    apply_tile_pipeline(
        program, SCHEDULE.format(depth=2, prefetch="false").removesuffix(",tile-causal-skip")
    )
    kernel = pv_kernel(program)
    schedule.write_knob(kernel, "causal_skip", 0)
    apply_tile_pipeline(program, "tile-causal-skip")
    assert isinstance(k_loop_of(kernel).lb.owner, arith.ConstantOp)
    assert schedule.read_knob(kernel, "causal_skip", 1) == 0


def test_a_mask_input_is_not_a_causal_mask() -> None:
    """Attention written out with an additive mask *input*: nothing says which keys the
    mask hides, so every chunk stays."""
    program = program_from_expression(
        "torch.softmax(torch.randn(1, 2, 40, 16) @ torch.randn(1, 2, 40, 16).transpose(-1, -2)"
        " + torch.randn(1, 1, 40, 40), dim=-1) @ torch.randn(1, 2, 40, 16)",
        seed=1,
    )
    lower_program(program, "loop")
    apply_tile_pipeline(program, SCHEDULE.format(depth=2, prefetch="false"))
    kernel = pv_kernel(program)
    assert not schedule.read_knob(kernel, "causal_skip", 0)
    assert isinstance(k_loop_of(kernel).lb.owner, arith.ConstantOp)


def test_a_value_that_survives_the_mask_is_not_skipped() -> None:
    """The proof that a masked element is 0 fails when the stored value is the raw score:
    `select(mask, s, -inf)` is -inf past the diagonal, not 0."""
    program = scheduled()
    kernel = pv_kernel(program)
    threads = schedule.threads_of(kernel)
    assert threads is not None
    (copy,) = [
        c for c in first_chunk_copies(threads) if c.stores[0].memref.name_hint.endswith("a_s")
    ]
    assert zero_when_masked(copy)
    for store in copy.stores:  # store the masked score itself instead of its probability
        values = store.values if isinstance(store, tile.StoreVectorOp) else [store.value]
        for index, value in enumerate(values):
            masked = _masked_score(value)
            store.operands[index] = masked
    assert zero_when_masked(copy) == []


def _masked_score(value):
    """The `select(mask, score, -inf)` that `value` is computed from."""
    work = [value]
    while work:
        current = work.pop()
        owner = current.owner
        if isinstance(owner, arith.SelectOp) and isinstance(owner.cond.owner, arith.CmpiOp):
            return current
        if hasattr(owner, "operands"):
            work.extend(owner.operands)
    raise AssertionError("no masked score")


def _traced_pv(skip: bool):
    """The P.V kernel of `CAUSAL` at the kernel level, traced for the performance model
    (its statistics a kernel of their own: only the product's work varies by block)."""
    program = program_from_expression(CAUSAL.format(dt=""), seed=1)
    unpadded_loop(program, "loop-fusion{row-statistics=false}")
    pipeline = SCHEDULE.format(depth=2, prefetch="false")
    apply_tile_pipeline(program, pipeline if skip else pipeline.removesuffix(",tile-causal-skip"))
    lower_program(program, "kernel")
    (fn,) = [op for op in program.module.ops if isinstance(op, kernel.FuncOp)][-1:]
    return fn, trace_kernel(fn)


def test_the_model_traces_blocks_that_do_unequal_work() -> None:
    """The trace samples blocks across the grid when a block's K loop starts at a value of
    the block id, and records the heaviest block: here the blocks of rows 0-15, 16-31 and
    32-39 run 2, 4 and 5 of the 5 chunks, so the grid issues 11/15 of the unskipped
    product's FMAs and the heaviest block 15/11 of the mean."""
    plain_fn, plain = _traced_pv(skip=False)
    skipped_fn, skipped = _traced_pv(skip=True)
    assert not varies_by_block(plain_fn) and varies_by_block(skipped_fn)
    assert plain.heaviest_block == 1.0
    assert sum(skipped.weights) == skipped.grid == 6
    chunks = [2, 4, 5]  # per block of rows, both heads alike
    mean = sum(chunks) / len(chunks)
    fma = skipped.instructions["fma"] / plain.instructions["fma"]
    assert fma == pytest.approx(mean / 5, rel=0.05)
    assert skipped.heaviest_block == pytest.approx(5 / mean, rel=0.1)


def test_representative_blocks_cover_the_grid() -> None:
    for grid in (4, 7, 112, 2048):
        ids, weights = representative_blocks(grid, varying=True)
        assert sum(weights) == grid and len(ids) == len(set(ids)) <= VARYING_SAMPLES
        assert all(0 <= i < grid for i in ids)
    assert representative_blocks(112) == ([0, 56, 111], [1, 110, 1])
