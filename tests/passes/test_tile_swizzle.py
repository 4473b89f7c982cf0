"""The XOR swizzle of a shared slab: `tile.Swizzle`, its verifier, `tile-pad-shared`'s
`swizzle_a`/`swizzle_b` knobs and the index arithmetic `convert-tile-to-kernel` writes.

A swizzle must be a layout only: every schedule with one computes what the loop program
computes, at the tile level (indices stay logical), the kernel level (the XOR written out,
race detector and asynchronous `cp.async` on) and through the emitted CUDA C run on the CPU.
It must also do what it is for: spread a column read over the banks, in the pass's own
analysis and in the performance model's trace of the emitted kernel.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import BFloat16Type, Float32Type, ModuleOp
from xdsl.utils.exceptions import PassFailedException, VerifyException

from deplodock.dialects import kernel, make_context, tile
from deplodock.dialects.hardware import SWIZZLE_CHUNK_BYTES, shared_memref
from deplodock.passes.convert_kernel_to_cuda import ConvertKernelToCudaPass
from deplodock.passes.convert_tile_to_kernel import ConvertTileToKernelPass
from deplodock.passes.tile.banks import wavefronts
from deplodock.perf.trace import trace_kernel
from tests.helpers import parse, random_inputs, rel_err, run
from tests.staged_contraction import reference, scheduled

#: Rows of 16 fp32 (four 16-byte chunks); the weight slab is read 16 bytes down a column.
#: Threads row by row (`quads=0`): lanes 0-7 read eight rows of the weight slab, the column
#: read the swizzle is for (in quads, lanes read it in equal pairs, four rows per group).
STAGED = (
    "tile-block{bm=16 bn=16},tile-thread{fm=2 fn=2 quads=0},tile-chunk-k{bk=16},tile-stage,"
    "tile-vectorize"
)
BUFFERED = "tile-multibuffer{depth=2},tile-pipeline,tile-async-copy"

PIPELINES = {
    "b-phase2": f"{STAGED},tile-pad-shared{{swizzle_b=2}}",
    "both": f"{STAGED},tile-pad-shared{{swizzle_a=1 swizzle_b=2}}",
    "b-phase4-async": f"{STAGED},tile-pad-shared{{swizzle_b=4}},{BUFFERED}",
    "both-async": f"{STAGED},tile-pad-shared{{swizzle_a=2 swizzle_b=2}},{BUFFERED}",
}


def slabs(module: ModuleOp) -> dict[str, tile.SharedAllocOp]:
    return {
        op.attributes["stage"].data: op  # type: ignore[union-attr]
        for op in module.walk()
        if isinstance(op, tile.SharedAllocOp)
    }


# ---- the layout ------------------------------------------------------------------------------


@pytest.mark.parametrize("element", [Float32Type(), BFloat16Type()], ids=["f32", "bf16"])
@pytest.mark.parametrize("phase", [1, 2, 4, 8])
def test_a_swizzle_permutes_whole_chunks_of_each_row(element, phase: int) -> None:
    memref = shared_memref(element, [64, 64])
    layout = tile.Swizzle.of(memref, phase)
    columns = np.arange(64)
    chunk = layout.chunk_elements
    assert chunk * (4 if isinstance(element, Float32Type) else 2) == SWIZZLE_CHUNK_BYTES
    for row in range(64):
        physical = layout.column(row, columns)
        assert sorted(physical) == list(columns)  # a permutation of the row
        # each aligned 16-byte chunk lands whole and aligned, in order
        starts = physical[::chunk]
        assert all(s % chunk == 0 for s in starts)
        assert (physical.reshape(-1, chunk) - starts[:, None] == np.arange(chunk)).all()
    # rows of one phase share an order; the next phase's order differs
    assert (layout.column(0, columns) == layout.column(phase - 1, columns)).all()
    assert (layout.column(0, columns) != layout.column(phase, columns)).any()


@pytest.mark.parametrize(
    ("shape", "phase", "problem"),
    [
        ([16, 16], 3, "power of two"),
        ([16, 12], 2, "rows of 48 bytes"),
        ([16, 4], 1, "rows of 16 bytes"),
        ([64], 1, "needs rows"),
    ],
)
def test_the_verifier_rejects_a_swizzle_the_rows_cannot_take(shape, phase, problem) -> None:
    memref = f"memref<{'x'.join(map(str, shape))}xf32, 3 : i64>"
    text = f"""
    builtin.module {{
      tile.kernel @k(%a: memref<4xf32>) {{
        tile.grid %b to 1 {{
          tile.threads %t to 32 {{
            %s = tile.shared_alloc {{swizzle = {phase} : i64}} : {memref}
          }}
        }}
        tile.return
      }}
    }}"""
    with pytest.raises(VerifyException, match=problem):
        parse(text).verify()


# ---- numerics ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_every_level_matches_numpy(name: str) -> None:
    module = scheduled(PIPELINES[name])
    assert any(op.swizzle is not None for op in slabs(module).values())
    inputs = random_inputs(module, seed=7)
    expected = reference(inputs)
    (tiled,) = run(module, *inputs)
    assert rel_err(tiled, expected) < 1e-5
    ConvertTileToKernelPass().apply(make_context(), module)
    assert any(isinstance(op, kernel.SharedAllocOp) for op in module.walk())
    (kernel_level,) = run(module, *inputs)
    assert rel_err(kernel_level, expected) < 1e-5
    ConvertKernelToCudaPass().apply(make_context(), module)
    (cuda_level,) = run(module, *inputs)
    assert rel_err(cuda_level, expected) < 1e-5


def test_the_xor_is_computed_where_the_row_is_known() -> None:
    """One mask per row value, outside the K loop for a thread's fixed row: the loop body
    pays one XOR per read."""
    module = scheduled(PIPELINES["b-phase2"])
    ConvertTileToKernelPass().apply(make_context(), module)
    reads = [
        op for op in module.walk()
        if isinstance(op, kernel.LoadVectorOp) and op.memref.name_hint == "w_b_s"
    ]  # fmt: skip
    assert reads
    for read in reads:
        xor = read.indices[-1].owner
        assert xor.name == "arith.xori"
        mask = xor.operands[1].owner
        assert mask.name == "arith.muli"
        # the mask is defined next to the row index, not next to the read
        assert mask.parent_block() is read.indices[-2].owner.parent_block()
        assert mask.parent_block() is not read.parent_block()


def test_pad_and_swizzle_together_are_refused() -> None:
    with pytest.raises(PassFailedException, match=r"padded .* or swizzled .*, not both"):
        scheduled(f"{STAGED},tile-pad-shared{{pad_b=4 swizzle_b=2}}")


def test_a_swizzle_the_rows_cannot_take_is_refused_by_the_pass() -> None:
    # bk=8: rows of 32 bytes, two chunks; phase 3 is no power of two
    with pytest.raises(PassFailedException, match="swizzle = 3"):
        scheduled(STAGED.replace("bk=16", "bk=8") + ",tile-pad-shared{swizzle_b=3}")


# ---- what it is for ---------------------------------------------------------------------------


def test_a_swizzle_spreads_a_column_read_over_the_banks() -> None:
    """Eight lanes read 16 bytes each down a column of 64-byte rows: unswizzled, two rows
    share every 128 bytes and the quarter-warp conflicts 4-way; XOR by (row / 2) % 4 gives
    each of the eight rows its own four banks."""
    module = scheduled(STAGED)
    w_slab = slabs(module)["b"]
    reads = [u.operation for u in w_slab.result.uses if isinstance(u.operation, tile.LoadVectorOp)]
    assert reads and all(r.width == 4 for r in reads)
    layout = tile.Swizzle.of(w_slab.result.type, 2)  # type: ignore[arg-type]
    for read in reads:
        assert wavefronts(read, 16) == 16
        assert wavefronts(read, 16, swizzle=layout) == 4  # the float4 minimum: no conflict


def _traced_shared_wavefronts(pipeline: str) -> int:
    module = scheduled(pipeline)
    ConvertTileToKernelPass().apply(make_context(), module)
    (fn,) = [op for op in module.walk() if isinstance(op, kernel.FuncOp)]
    return trace_kernel(fn).total("shared_wavefronts")


def test_the_model_sees_the_conflicts_the_swizzle_removes() -> None:
    """The performance model traces the emitted kernel (the XOR included), so it counts what
    the pass's analysis predicted: fewer shared wavefronts than the plain layout."""
    plain = _traced_shared_wavefronts(f"{STAGED},tile-pad-shared{{pad_a=0 pad_b=0}}")
    swizzled = _traced_shared_wavefronts(f"{STAGED},tile-pad-shared{{pad_a=0 swizzle_b=2}}")
    assert swizzled < plain


def test_the_bank_analysis_counts_the_xor_it_costs() -> None:
    """With rows of two chunks a swizzle removes no conflict a pad could not: the default
    keeps padding, whose index math is free."""
    module = scheduled(STAGED.replace("bk=16", "bk=8") + ",tile-pad-shared")
    assert all(op.swizzle is None for op in slabs(module).values())
