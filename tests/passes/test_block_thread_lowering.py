"""`tile.block_tile` and `tile.thread_tile` state their formulas twice: as numpy semantics in
the dialect (`grouped_tile_indices`, `ThreadTileOp.position`, what the tile-level interpreter
runs) and as arith in `convert-tile-to-kernel` (what the kernel level and the CUDA run).
Every output cell is computed by exactly one (block, thread, cell), so a disagreement between
the two shows as a wrong or missing output at one level: both levels must match numpy over
raster groups that do and do not divide the tile rows, partial tiles, and several cell
layouts.
"""

from __future__ import annotations

import numpy as np
import pytest

from deplodock.dialects import make_context
from deplodock.passes.convert_tile_to_kernel import ConvertTileToKernelPass
from deplodock.passes.tile.block import default_block, tile_reuse, tile_score
from tests.helpers import random_inputs, rel_err, run
from tests.passes.test_tile_split_k import loop_ir, reference, tile_stage

#: 37 x 50 outputs: 3 x 4 tiles of 16 x 16, the last row and column of tiles partial.
LINEAR = loop_ir(37, 50, 24)


@pytest.mark.parametrize("group", [1, 2, 3, 5])
@pytest.mark.parametrize(("fm", "fn"), [(1, 1), (2, 2), (4, 2)])
@pytest.mark.parametrize("quads", [0, 1])
def test_tile_and_kernel_levels_agree_with_numpy(group: int, fm: int, fn: int, quads: int) -> None:
    module = tile_stage(
        LINEAR,
        "tile-split-k{splits=1}",
        f"tile-block{{bm=16 bn=16 group={group}}},tile-thread{{fm={fm} fn={fn} quads={quads}}}",
    )
    inputs = random_inputs(module, seed=group * 10 + fm + 100 * quads)
    expected = reference(inputs)
    (tiled,) = run(module, *inputs)
    assert rel_err(tiled, expected) < 1e-5
    ConvertTileToKernelPass().apply(make_context(), module)
    (kernel_level,) = run(module, *inputs)
    np.testing.assert_array_equal(kernel_level, tiled)


@pytest.mark.parametrize(
    ("dtype", "thread", "cells"),
    [
        ("float32", "tile-thread", (8, 8)),
        ("bfloat16", "tile-thread{mma=0}", (8, 4)),
        ("bfloat16", "tile-thread", (4, 8)),
    ],
)
def test_a_128x64_tile_gets_cells_by_operand_width(
    dtype: str, thread: str, cells: tuple[int, int]
) -> None:
    """The default cells of a 128 x 64 tile: 8 x 8 on 128 threads for fp32 operands (the
    shared pipe binds 8 x 4 cells), 8 x 4 on 256 threads for bf16 on the FMA pipe
    (`default_cells`), and 4 x 8 MMA cells on 256 threads (32 x 32 warp tiles: the fewest
    fragment bytes per MMA, `mma_grid`) for bf16 on tensor cores."""
    from deplodock.dialects import tile
    from deplodock.driver import lower_program, program_from_expression
    from tests.passes.test_tile_stage_prologue import apply_tile_pipeline

    dt = f"dtype=torch.{dtype}"
    program = program_from_expression(
        f"nn.Linear(64, 64, bias=False, {dt})(torch.randn(128, 64, {dt}))"
    )
    lower_program(program, "loop")
    apply_tile_pipeline(program, f"tile-block{{bm=128 bn=64}},{thread}")
    (kernel,) = [op for op in program.module.ops if isinstance(op, tile.KernelOp)]
    knobs = kernel.schedule.data  # type: ignore[union-attr]
    assert (knobs["fm"].value.data, knobs["fn"].value.data) == cells
    assert knobs["threads"].value.data == 128 * 64 // (cells[0] * cells[1])


@pytest.mark.parametrize(
    ("m", "n", "tensor_cores", "tile"),
    [
        # fp32 on the FMA pipe: 128 x 64 gets 8 x 8 cells (full reuse), and 9 rounds of its
        # 1184 blocks balance the SMs better than 5 rounds of 128 x 128
        (512, 18944, False, (128, 64)),
        # a bf16 product on tensor cores: the block's reuse pays up to 256 x 128, whose 296
        # blocks fill the SMs
        (512, 18944, True, (256, 128)),
        # ... but not where the large tiles would leave more than half the SMs idle (14 tiles
        # of 128 x 256), nor past an extent of the product (a 256-row tile of 128 rows)
        (128, 3584, True, (64, 64)),
        (128, 18944, True, (128, 96)),
        # 128 blocks of 128 x 112 on 132 SMs, against 112 of 128 x 128
        (512, 3584, False, (128, 112)),
        (512, 3584, True, (128, 112)),
        (512, 5632, True, (256, 128)),  # 88 blocks: two thirds of the SMs
        # 128 rows: 56 tiles of 128 x 64 (8 x 8 cells) score as 112 of 64 x 64 (4 x 4 cells);
        # the 56 leave more than half the SMs idle
        (128, 3584, False, (64, 64)),
    ],
)
def test_the_default_tile_weighs_reuse_by_the_pipe(
    m: int, n: int, tensor_cores: bool, tile: tuple[int, int]
) -> None:
    assert default_block(m, n, 1, 132, tensor_cores) == tile


def test_reuse_on_the_fma_pipe_is_that_of_the_register_cells() -> None:
    assert tile_reuse(128, 128) == tile_reuse(128, 64) == 1.0  # 8 x 8 cells either way
    assert tile_reuse(64, 64) == 0.5  # 4 x 4 cells: 2 multiply-adds per value read
    assert tile_reuse(128, 64, tensor_cores=True) < tile_reuse(128, 128, tensor_cores=True) < 1
    assert tile_reuse(256, 128, tensor_cores=True) == tile_reuse(128, 256, tensor_cores=True) == 1


def test_a_tie_goes_to_the_larger_tile() -> None:
    """A fused prologue is recomputed per tile: on a tie the fewer, larger tiles win."""
    # attention's P.V over 28 heads in fp32 (512 x 128 each): 112 tiles of 128 x 128 or 224
    # of 128 x 64 both give the busiest SM 16384 outputs, at full reuse
    scores = {t: tile_score(512, 128, 28, *t, 132) for t in [(128, 128), (128, 64)]}
    assert scores[(128, 128)] == scores[(128, 64)]
    assert default_block(512, 128, 28, 132) == (128, 128)
