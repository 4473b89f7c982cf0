"""`tile-clamp-masked-loads`: causal softmax statistics read the scores below the diagonal."""

from __future__ import annotations

from xdsl.dialects import arith

from deplodock.dialects import kernel, tile
from deplodock.driver import lower_program, program_from_expression, run_and_compare
from deplodock.passes.pipelines import STAGE_PASSES
from deplodock.perf.trace import trace_kernel
from tests.passes.test_tile_stage_prologue import apply_tile_pipeline, unpadded_loop

CAUSAL = (
    "F.scaled_dot_product_attention(torch.randn(1, 2, 40, 16), torch.randn(1, 2, 40, 16),"
    " torch.randn(1, 2, 40, 16), is_causal=True)"
)


def statistics_phase(program) -> tile.ForOp:
    """The loop of the P.V kernel in which its warps compute the row max and sum of the
    scores (`tile-shared-statistics`): the one that writes the `statistics` array."""
    pv = [op for op in program.module.ops if isinstance(op, tile.KernelOp)][-1]
    return next(
        op
        for op in pv.walk()
        if isinstance(op, tile.ForOp)
        and any(isinstance(s, tile.StoreOp) and s.memref.name_hint == "stats_s" for s in op.walk())
    )


def test_the_statistics_read_the_diagonal_past_it() -> None:
    """In the default schedule the score loads of the statistics (computed by the P.V
    kernel's warps, a row each) read at `min(key, query)`, and every level still matches
    PyTorch's causal attention."""
    program = program_from_expression(CAUSAL, seed=1)
    unpadded_loop(program)  # 40 keys kept: the scores a kernel of their own
    lower_program(program, "tile")
    loads = [op for op in statistics_phase(program).walk() if isinstance(op, tile.LoadOp)]
    clamped = [load for load in loads if isinstance(load.indices[-1].owner, arith.MinSIOp)]
    assert loads and clamped == loads
    for stage in ("tile", "kernel", "cuda"):
        if stage != "tile":
            lower_program(program, stage)
        report = run_and_compare(program, seed=2)
        assert report.ok, f"{stage}: {report.summary()}"


def _statistics_bytes(clamp: bool) -> float:
    """Distinct bytes of the scores the traced statistics kernel reads (kept a kernel of its
    own, `loop-fusion{row-statistics=false}`, to be traced alone)."""
    program = program_from_expression(CAUSAL, seed=1)
    unpadded_loop(program, "loop-fusion{row-statistics=false}")
    names = [n for n in STAGE_PASSES["tile"][1:] if clamp or n != "tile-clamp-masked-loads"]
    apply_tile_pipeline(program, ",".join(names))
    lower_program(program, "kernel")
    fn = [op for op in program.module.ops if isinstance(op, kernel.FuncOp)][1]
    counters = trace_kernel(fn, blocks=list(range(fn.grid_size)))
    return counters.footprint_bytes("load")


def test_the_masked_half_of_the_scores_is_not_fetched() -> None:
    """Traced over every block, the statistics of both heads read the scores on and below
    the diagonal, in whole 32-byte sectors (a row of 40 floats starts on a sector), not
    all 40 x 40."""
    full, clamped = _statistics_bytes(clamp=False), _statistics_bytes(clamp=True)
    assert full == 2 * 40 * 40 * 4
    assert clamped == 2 * sum(-(-(row + 1) * 4 // 32) * 32 for row in range(40))
