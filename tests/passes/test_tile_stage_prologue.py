"""A contraction with a fused prologue (`silu(gate) * up` feeding a linear, the MLP's
down projection): `tile-stage` stages the *computed* operand, so the prologue runs once per
element and block in the copy instead of once per thread column in the K loop, and
`tile-vectorize` widens that copy (it computes, so `cp.async` cannot take it).

Every schedule must match PyTorch at the tile level, the kernel level (race detector and
asynchronous `cp.async` on) and through the emitted CUDA C run on the CPU, on random
inputs, with odd M and N and with K not a multiple of the vector width.
"""

from __future__ import annotations

import pytest
from xdsl.dialects import arith, math
from xdsl.ir import Operation

from deplodock.dialects import make_context, tile
from deplodock.dialects.hardware import is_shared
from deplodock.dialects.queries import constant_index
from deplodock.driver import Program, lower_program, program_from_expression, run_and_compare
from deplodock.interpreters.shared_memory import RaceError
from deplodock.passes.tile.copy_loops import copy_loops
from tests.helpers import random_inputs, run

SILU_MUL_DOWN = (
    "nn.Linear({k}, 18, bias=False{dt})"
    "(F.silu(torch.randn(20, {k}{dt})) * torch.randn(20, {k}{dt}))"
)

STAGED = (
    "tile-block{bm=16 bn=16},tile-thread{fm=2 fn=2},tile-shared-statistics,tile-chunk-k{bk=8},"
    "tile-stage"
)
PIPELINES = {
    "staged": STAGED,
    "vector": f"{STAGED},tile-vectorize,tile-pad-shared",
    "async-depth2": (
        f"{STAGED},tile-vectorize,tile-pad-shared,tile-multibuffer{{depth=2}},"
        "tile-pipeline,tile-async-copy"
    ),
    "split-k": (
        "tile-split-k{splits=2},tile-block{bm=16 bn=16},tile-thread{fm=2 fn=2},"
        "tile-chunk-k{bk=8},tile-stage,tile-vectorize,tile-pad-shared,"
        "tile-multibuffer{depth=3},tile-pipeline,tile-async-copy"
    ),
}


def program_at_tile(k: int, pipeline: str | None, bf16: bool = False) -> Program:
    """The expression lowered to the loop level, then scheduled by `pipeline` (the default
    `tile` stage when None)."""
    dt = ", dtype=torch.bfloat16" if bf16 else ""
    program = program_from_expression(SILU_MUL_DOWN.format(k=k, dt=dt), seed=1)
    if pipeline is None:
        lower_program(program, "tile")
        return program
    lower_program(program, "loop")
    apply_tile_pipeline(program, pipeline)
    return program


def apply_pipeline(program: Program, pipeline: str, stage: str) -> None:
    """Runs the `deplodock-opt` pipeline string on the program, which it leaves at `stage`."""
    from deplodock.cli.opt import DeplodockOptMain

    opt = DeplodockOptMain(args=["-p", pipeline])
    opt.setup_pipeline()
    opt.pipeline.apply(make_context(), program.module)
    program.module.verify()
    program.stage = stage


def unpadded_loop(program: Program, fusion: str = "loop-fusion") -> None:
    """Lowers a torch-level program to the loop level with attention's keys as they are
    (`convert-torch-to-tensor{pad-keys=false}`): over keys that are not whole 16-key chunks
    attention keeps its scores in a buffer of their own, the two-kernel form these tests
    schedule by hand."""
    apply_pipeline(
        program,
        f"convert-torch-to-tensor{{pad-keys=false}},convert-tensor-to-loop,{fusion},dedupe-kernels",
        "loop",
    )


def apply_tile_pipeline(program: Program, pipeline: str) -> None:
    """Lowers a loop-level program to the tile level with `pipeline` instead of the default
    scheduling passes."""
    apply_pipeline(program, f"convert-loop-to-tile,{pipeline}", "tile")


def contraction(program: Program) -> tile.KernelOp:
    return next(op for op in program.module.ops if isinstance(op, tile.KernelOp))


def check_every_level(program: Program) -> None:
    for stage in ("tile", "kernel", "cuda"):
        if stage != "tile":
            lower_program(program, stage)
        report = run_and_compare(program, seed=2)
        assert report.ok, f"{stage}: {report.summary()}"


def test_the_prologue_is_computed_in_the_copy_not_in_the_k_loop() -> None:
    kernel = contraction(program_at_tile(40, PIPELINES["staged"]))
    slabs = [op for op in kernel.walk() if isinstance(op, tile.SharedAllocOp)]
    assert sorted(s.result.name_hint for s in slabs) == ["p_0_weight_b_s", "x0_x1_a_s"]
    ki = next(
        op
        for op in kernel.walk()
        if isinstance(op, tile.ForOp) and op.is_reduce and op.induction_var.name_hint == "ki"
    )
    assert not any(isinstance(op, math.ExpOp) for op in ki.walk())
    threads = next(op for op in kernel.walk() if isinstance(op, tile.ThreadsOp))
    a_copy = next(c for c in copy_loops(threads) if c.store.memref.name_hint == "x0_x1_a_s")
    assert any(isinstance(op, math.ExpOp) for op in a_copy.loop.walk())
    assert not any(
        isinstance(op, tile.LoadOp) and not is_shared(op.memref.type) for op in ki.walk()
    )


def test_the_prologue_copy_moves_vectors_and_the_plain_copy_goes_async() -> None:
    kernel = contraction(program_at_tile(40, PIPELINES["async-depth2"]))
    vectors = [
        op
        for op in kernel.walk()
        if isinstance(op, tile.LoadVectorOp) and not is_shared(op.memref.type)
    ]
    assert {op.memref.name_hint for op in vectors} == {"x0", "x1"}
    assert all(op.width == 4 for op in vectors)
    stores = [op for op in kernel.walk() if isinstance(op, tile.StoreVectorOp)]
    assert stores and all(op.memref.name_hint == "x0_x1_a_s" for op in stores)
    copies = [op for op in kernel.walk() if isinstance(op, tile.CopyAsyncOp)]
    assert copies and all(op.num_bytes == 16 for op in copies)


def test_split_k_slices_still_copy_16_bytes() -> None:
    """The slice offset (`z * K/S`) is a multiple of the vector: the copies stay 16-byte."""
    kernel = contraction(program_at_tile(64, PIPELINES["split-k"]))
    copies = [op for op in kernel.walk() if isinstance(op, tile.CopyAsyncOp)]
    assert copies and all(op.num_bytes == 16 for op in copies)


def test_an_odd_k_keeps_scalar_copies() -> None:
    kernel = contraction(program_at_tile(37, PIPELINES["async-depth2"]))
    assert not any(
        isinstance(op, tile.LoadVectorOp) and not is_shared(op.memref.type) for op in kernel.walk()
    )


#: K = 37: no vector copies and a cleanup chunk; split K needs slices it divides evenly.
LEVEL_CASES = [
    (name, k) for name in sorted(PIPELINES) for k in (40, 37 if name != "split-k" else 48)
]


@pytest.mark.parametrize(("name", "k"), LEVEL_CASES)
def test_every_level_matches_pytorch(name: str, k: int) -> None:
    check_every_level(program_at_tile(k, PIPELINES[name]))


@pytest.mark.parametrize("k", [48, 37])
def test_bf16_default_schedule_matches_pytorch(k: int) -> None:
    program = program_at_tile(k, None, bf16=True)
    slabs = [op for op in contraction(program).walk() if isinstance(op, tile.SharedAllocOp)]
    assert "x0_x1_a_s" in {s.result.name_hint for s in slabs}
    check_every_level(program)


@pytest.mark.parametrize("level", ["tile", "kernel"])
def test_a_missing_barrier_before_the_prologue_reads_is_caught(level: str) -> None:
    from xdsl.rewriter import Rewriter

    program = program_at_tile(40, PIPELINES["vector"])
    barrier = next(op for op in program.module.walk() if isinstance(op, tile.BarrierOp))
    Rewriter.erase_op(barrier)
    if level == "kernel":
        lower_program(program, "kernel")
    with pytest.raises(RaceError):
        run(program.module, *random_inputs(program.module, seed=3))


#: softmax(s) @ v with its statistics as inputs: the prologue exp(s - max) / sum reads the
#: row max and sum once per row and the scores along K.
SOFTMAX_PV = "torch.softmax(torch.randn(2, 24, 40), dim=-1) @ torch.randn(2, 40, 16)"


def test_a_prologue_slab_follows_its_streamed_operand() -> None:
    """The P.V product's slab is `[E][BK]`, in the order of the scores `s[m, k]` that move
    with K, not of the per-row max and sum its prologue loads first: the copy then reads
    the scores along their rows (coalesced), which ordered by the row statistics it read
    one row per thread (28 sectors per request on Qwen2.5-7B's attention at 512 tokens)."""
    program = program_from_expression(SOFTMAX_PV, seed=1)
    lower_program(program, "loop")
    apply_tile_pipeline(program, STAGED)
    kernel = [op for op in program.module.ops if isinstance(op, tile.KernelOp)][-1]
    threads = next(op for op in kernel.walk() if isinstance(op, tile.ThreadsOp))
    (a_copy,) = [c for c in copy_loops(threads) if c.store.memref.name_hint.endswith("_a_s")]
    assert a_copy.store.memref.type.get_shape() == (16, 8)  # [BM][BK]
    assert any(isinstance(op, math.ExpOp) for op in a_copy.loop.walk())
    scores = [
        load
        for load in a_copy.loads
        if load.memref.type.get_shape()[-1] == 40  # s[.., m, k]: the last index is K
    ]
    assert scores and all(load.indices[-1] is not a_copy.row.result for load in scores)
    check_every_level(program)


def widened_prologue_copy(expression: str) -> tuple[Program, list[Operation]]:
    """The program staged and vectorized, and the body of its last kernel's copy into the
    A slab (the one that computes the prologue)."""
    program = program_from_expression(expression, seed=1)
    unpadded_loop(program)
    apply_tile_pipeline(program, f"{STAGED},tile-vectorize")
    kernel = [op for op in program.module.ops if isinstance(op, tile.KernelOp)][-1]
    (store,) = [
        op
        for op in kernel.walk()
        if isinstance(op, tile.StoreVectorOp) and op.memref.name_hint.endswith("_a_s")
    ]
    block = store.parent_block()
    assert block is not None
    return program, list(block.ops)


def test_per_row_values_of_a_prologue_stay_scalar_in_a_widened_copy() -> None:
    """`tile-vectorize` widens the P.V copy to 4 scores a load: the row max and sum (read
    from the shared array `tile-shared-statistics` fills), which do not depend on the
    column, stay one scalar load each, shared by the 4 elements (a vector load of them
    would read 4 rows' statistics). Every level matches PyTorch."""
    program, body = widened_prologue_copy(SOFTMAX_PV)
    vectors = [op for op in body if isinstance(op, tile.LoadVectorOp)]
    scalars = [op for op in body if isinstance(op, tile.LoadOp)]
    assert [len(op.res) for op in vectors] == [4]
    assert len(scalars) == 2 and all(op.memref.name_hint == "stats_s" for op in scalars)
    assert sum(isinstance(op, math.ExpOp) for op in body) == 4
    check_every_level(program)


#: Causal attention: the P.V prologue masks the scores by comparing their column (the key)
#: with their row (the query), an index that differs for each element of a vector.
CAUSAL_SDPA = (
    "F.scaled_dot_product_attention(torch.randn(1, 2, 24, 16), torch.randn(1, 2, 24, 16), "
    "torch.randn(1, 2, 24, 16), is_causal=True)"
)


def test_a_causal_mask_widens_with_an_index_per_element() -> None:
    """The causal P.V copy widens to 4 scores a load: its mask `key <= query` is repeated
    per element, element k comparing the vector's first key plus k (one comparison of the
    first key for all four would unmask keys past the diagonal). Every level matches
    PyTorch, whose causal result differs wherever a masked key leaks in."""
    program, body = widened_prologue_copy(CAUSAL_SDPA)
    assert [len(op.res) for op in body if isinstance(op, tile.LoadVectorOp)] == [4]
    compares = [op for op in body if isinstance(op, arith.CmpiOp)]
    assert len(compares) == 4
    keys = [op.lhs for op in compares]  # `key <= query`
    shifts = [(key.owner.lhs, constant_index(key.owner.rhs)) for key in keys[1:]]
    assert shifts == [(keys[0], 1), (keys[0], 2), (keys[0], 3)]
    check_every_level(program)
