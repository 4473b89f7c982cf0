"""Attention in one kernel: `loop-fusion` keeps no score matrix, `tile-prologue-product`
computes each K chunk's scores as a register tile (on tensor cores), `tile-streaming-softmax`
keeps running statistics, `tile-causal-skip` stops at the diagonal. Every level is compared
with PyTorch in float64; planted bugs (a missing rescale, a causal bound one chunk short, a
missing barrier before the scores read the K slab) must be caught."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import MemRefType

from deplodock.dialects import loop, tile
from deplodock.driver import lower_program, program_from_expression, run_and_compare
from deplodock.interpreters.shared_memory import RaceError
from deplodock.passes.pipelines import STAGE_PASSES
from deplodock.passes.tile import causal_skip, schedule, streaming_softmax
from tests.passes.test_tile_stage_prologue import apply_tile_pipeline

SDPA = (
    "F.scaled_dot_product_attention(torch.randn(1, {hq}, {sq}, {d}{dt}),"
    " torch.randn(1, {hk}, {sk}, {d}{dt}), torch.randn(1, {hk}, {sk}, {d}{dt}){extra})"
)


def expression(
    sq: int = 64,
    sk: int = 64,
    d: int = 32,
    hq: int = 2,
    hk: int = 2,
    causal: bool = True,
    bf16: bool = False,
    mask: str = "",
) -> str:
    extra = ", is_causal=True" if causal else ""
    if mask:
        extra += f", attn_mask={mask}"
    if hq != hk:
        extra += ", enable_gqa=True"
    dt = ", dtype=torch.bfloat16" if bf16 else ""
    return SDPA.format(hq=hq, hk=hk, sq=sq, sk=sk, d=d, dt=dt, extra=extra)


def at_loop(source: str):
    program = program_from_expression(source, seed=3)
    lower_program(program, "loop")
    return program


def check_levels(program, stages=("tile", "kernel", "cuda")) -> None:
    for stage in stages:
        lower_program(program, stage)
        report = run_and_compare(program, seed=4)
        assert report.ok, f"{stage}: {report.summary()}"


def kernels(program) -> list:
    return [op for op in program.module.walk() if isinstance(op, loop.KernelOp | tile.KernelOp)]


def test_sdpa_is_one_kernel_with_no_buffer_of_two_sequence_lengths() -> None:
    """48 queries over 64 keys: one loop kernel, and no memref holds both lengths."""
    program = at_loop(expression(sq=48, sk=64, causal=False))
    assert len(kernels(program)) == 1
    for op in program.module.walk():
        for value in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.args)):
            if isinstance(value.type, MemRefType):
                shape = value.type.get_shape()
                assert not (48 in shape and 64 in shape), f"{value.type}"


def two_lengths(program, lengths: set[int]) -> list:
    """The buffers `program` allocates (its inputs aside: a mask is the user's) with two
    dimensions whose sizes are sequence lengths."""
    return [
        op.results[0].type
        for op in program.module.walk()
        if isinstance(op, loop.AllocOp)
        and sum(n in lengths for n in op.results[0].type.get_shape()) >= 2
    ]


@pytest.mark.parametrize(
    "case",
    [
        dict(sq=40, sk=40, causal=True),
        dict(sq=40, sk=50, causal=False, mask="torch.randn(40, 50)"),
        dict(sq=24, sk=20, d=16, causal=False, mask="torch.rand(24, 20) > 0.3"),
        # K's slab (a computed copy) may take pad 4, V's (ldmatrix rows of 8) may not: the
        # one `pad_b` knob used to give V K's pad, and the kernel failed to verify
        dict(sq=40, sk=40, d=32, causal=False, bf16=True),
    ],
    ids=["causal-40", "additive-40x50", "bool-24x20", "bf16-40"],
)
def test_keys_not_a_whole_chunk_are_padded_and_stay_one_kernel(case: dict) -> None:
    """Key counts that are not a whole number of 16-key chunks: k and v are padded to the
    next chunk and the padded keys masked by their index (`torch_to_tensor/attention.py`),
    so attention is still one kernel with no buffer of two lengths; every level, the
    emitted C included, matches PyTorch."""
    program = at_loop(expression(**case))
    assert len(kernels(program)) == 1
    padded = -(-case["sk"] // 16) * 16
    assert not two_lengths(program, {case["sq"], case["sk"], padded})
    check_levels(program)


def test_padded_16_bit_keys_stay_on_tensor_cores() -> None:
    """bf16 keys and values are padded before they are widened to f32, so their slabs are
    staged as bf16 and both products run as `tile.mma_sync` (padded after the widening,
    the slabs were f32 and both products fell back to FMA)."""
    program = at_loop(expression(sq=64, sk=56, d=32, causal=False, bf16=True))
    lower_program(program, "tile")
    (kernel,) = kernels(program)
    assert len({op.parent_op() for op in kernel.walk() if isinstance(op, tile.MmaSyncOp)}) == 2
    check_levels(program, ("kernel",))


def test_padded_key_copies_are_predicated_async_copies() -> None:
    """The K and V slabs of padded keys are filled by `cp.async ... if %r < S`: a row past
    the last key reads nothing and lands zeros (`tile-async-copy`), instead of a load, a
    select and a store through registers."""
    program = at_loop(expression(sq=64, sk=56, d=64, causal=False, bf16=True))
    lower_program(program, "tile")
    copies = [op for op in program.module.walk() if isinstance(op, tile.CopyAsyncOp)]
    predicated = [op for op in copies if op.pred is not None]
    assert len(predicated) == 2 and len(copies) == 3  # K and V; Q's rows are all real
    assert not [op for op in program.module.walk() if isinstance(op, tile.LoadVectorOp)]
    check_levels(program, ("kernel",))


def test_padded_keys_left_unmasked_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the index mask the zero-padded keys score 0 and take a share of every row's
    softmax: the numerics check fails."""
    from deplodock.passes.torch_to_tensor import attention

    monkeypatch.setattr(attention, "real_key", lambda s, dim, valid: s.cmp("ge", s.index(dim), 0))
    program = at_loop(expression(sq=40, sk=40, causal=False))
    lower_program(program, "kernel")
    assert not run_and_compare(program, seed=4).ok


def test_a_decoding_step_keeps_its_keys_unpadded() -> None:
    """One query row: no streaming form to feed (decoding keeps its scores, softmax and
    product kernels), so nothing is padded."""
    program = at_loop(expression(sq=1, sk=40, causal=False))
    assert len(kernels(program)) == 3
    for op in program.module.walk():
        for value in op.results:
            if isinstance(value.type, MemRefType):
                assert 48 not in value.type.get_shape()


def test_a_product_of_products_is_no_score_matrix() -> None:
    """relu(x @ w1) @ w2 reads its intermediate only inside the second product's reduction,
    as a score matrix would, but no softmax reads it: it is not recomputed per column."""
    program = at_loop(
        "torch.relu(torch.randn(64, 128) @ torch.randn(128, 256)) @ torch.randn(256, 32)"
    )
    assert len(kernels(program)) == 2


def test_the_fused_kernel_runs_both_products_on_tensor_cores_with_running_statistics() -> None:
    """The default schedule: the scores and `P @ V` are `tile.mma_sync` loops, the softmax
    keeps `online_s` (no statistics sweeps before the K loop), the causal K loop is shifted
    to end at the diagonal, and every level matches PyTorch."""
    program = at_loop(expression())
    lower_program(program, "tile")
    (kernel,) = kernels(program)
    mma_loops = {op.parent_op() for op in kernel.walk() if isinstance(op, tile.MmaSyncOp)}
    assert len(mma_loops) == 2
    names = {op.result.name_hint for op in kernel.walk() if isinstance(op, tile.SharedAllocOp)}
    assert {"online_s", "scores_s", "row_sum_s"} <= names and "stats_s" not in names
    for knob in ("prologue_product", "streaming_softmax", "causal_skip"):
        assert schedule.read_knob(kernel, knob, 0) == 1, knob
    check_levels(program, ("kernel", "cuda"))


@pytest.mark.parametrize(
    "case",
    [
        dict(causal=False, sq=40, sk=64),  # a partial block of queries, no mask
        dict(causal=True, bf16=True, d=64),
    ],
    ids=["fp32-40x64", "bf16-causal-d64"],
)
def test_every_level_matches_pytorch(case: dict) -> None:
    check_levels(at_loop(expression(**case)))


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [
        dict(hq=7, hk=1, d=16, sq=32, sk=32),  # GQA 7:1
        dict(hq=4, hk=1, d=64, causal=False, bf16=True),  # GQA 4:1
        dict(d=80, sq=48, sk=48, bf16=True),  # head dim 80
        dict(d=128, sq=32, sk=32),  # head dim 128
        dict(hq=7, hk=1, d=80, sq=37, sk=37, bf16=True),  # GQA 7:1, 37 keys padded to 48
        dict(causal=False, mask="torch.randn(64, 64)"),  # an additive mask
        dict(causal=False, mask="torch.rand(64, 64) > 0.3"),  # a boolean mask
        dict(
            causal=False,
            mask="torch.zeros(64, 64).masked_fill(torch.arange(64) >= 40, float('-inf'))",
        ),
    ],
    ids=[
        "gqa7-d16",
        "gqa4-d64-bf16",
        "d80-bf16",
        "d128",
        "gqa7-d80-bf16-keys37",
        "additive",
        "bool",
        "padding",
    ],
)
def test_more_shapes_and_masks_match_pytorch(case: dict) -> None:
    check_levels(at_loop(expression(**case)))


@pytest.mark.parametrize(
    "pipeline",
    ["tile-streaming-softmax{enable=false}", "tile-prologue-product{enable=false}"],
)
def test_each_step_can_be_turned_off(pipeline: str) -> None:
    """Without running statistics the sweeps stay; without the register tile each element
    of `P` computes its own dot product in the copy. Both still match PyTorch."""
    passes = list(STAGE_PASSES["tile"])
    name = pipeline.split("{")[0]
    passes[passes.index(name)] = pipeline
    program = at_loop(expression())
    apply_tile_pipeline(program, ",".join(passes[1:]))
    (kernel,) = kernels(program)
    assert schedule.read_knob(kernel, name.removeprefix("tile-").replace("-", "_"), 1) == 0
    check_levels(program, ("tile", "kernel"))


def test_a_missing_rescale_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without `acc *= alpha` the chunks before a new row maximum are summed at the wrong
    scale: the numerics check fails."""
    monkeypatch.setattr(streaming_softmax, "_rescale", lambda *args: None)
    program = at_loop(expression(causal=False))
    lower_program(program, "tile")
    assert not run_and_compare(program, seed=4).ok


def test_a_causal_bound_one_chunk_short_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A K loop that ends one chunk before the diagonal (but runs at least one) drops the
    keys the last queries of the blocks past the first chunk see: the numerics fail."""
    real = causal_skip._chunk_end

    def short(build, pool, masks, bound, chunk):
        end = real(build, pool, masks, bound, chunk)
        less = build.add(causal_skip.arith.SubiOp(end, pool.index(chunk)), "short")
        return build.add(causal_skip.arith.MaxSIOp(less, pool.index(chunk)), "short")

    monkeypatch.setattr(causal_skip, "_chunk_end", short)
    program = at_loop(expression())
    lower_program(program, "tile")
    assert not run_and_compare(program, seed=4).ok


def test_a_missing_barrier_before_the_scores_read_the_k_slab_is_caught() -> None:
    """The barrier between the copy of a K chunk and the product that reads it, erased:
    the race detector reports the read of a slab other threads are still writing."""
    program = at_loop(expression(causal=False))
    lower_program(program, "tile")
    (kernel,) = kernels(program)
    threads = schedule.threads_of(kernel)
    assert threads is not None
    ko = next(op for op in schedule.top_loops(threads) if op.is_reduce)
    body = list(ko.body.block.ops)
    product = next(op for op in body if isinstance(op, tile.ForOp) and op.is_reduce)
    barrier = product.prev_op
    while not isinstance(barrier, tile.BarrierOp):
        barrier = barrier.prev_op
    barrier.detach()
    barrier.erase()
    with pytest.raises(RaceError):
        run_and_compare(program, seed=4)
