"""The quad thread order of `tile.thread_tile` (`tile-thread` knob `quads`).

Threads in 2 x 2 quads put lanes n and n ^ 1 on one row and lanes n and n ^ 2 on one column,
so both operands' 16-byte shared reads of a scalar GEMM come in pairs of equal addresses,
which shared memory packs (`hardware.shared_wavefronts`). Checked here: the order is a
bijection with the same warp footprint as row order, the verifier's limits, the knob's
default, the numerics of quad-ordered schedules against PyTorch at the tile and kernel
levels (race detector on) and through the emitted CUDA C, and the halved shared traffic the
model counts for them.
"""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects import tile
from deplodock.dialects.hardware import WARP_SIZE
from deplodock.driver import lower_program, program_from_expression
from deplodock.perf.devices import device_model
from deplodock.perf.profile import model_program
from tests.helpers import fma_tile_pipeline, parse
from tests.passes.test_tile_mma import at_tile, check


def thread_tiles(grid: tuple[int, int], order: str = "quads"):
    thread = Block(arg_types=[IndexType()]).args[0]
    rows = tile.ThreadTileOp(thread, 0, grid, 1, "blocked", order)
    cols = tile.ThreadTileOp(thread, 1, grid, 1, "interleaved", order)
    return rows, cols


@pytest.mark.parametrize("grid", [(16, 16), (16, 8), (8, 4), (2, 32), (4, 2)])
def test_quads_are_a_bijection_with_the_row_order_warp_footprint(grid):
    quads, _ = thread_tiles(grid)
    rows, _ = thread_tiles(grid, "rows")
    count = grid[0] * grid[1]
    seen = {quads.coordinates(t) for t in range(count)}
    assert seen == {(r, c) for r in range(grid[0]) for c in range(grid[1])}
    for thread in range(count):
        partner_row = quads.coordinates(thread ^ 1)
        partner_col = quads.coordinates(thread ^ 2)
        assert partner_row[0] == quads.coordinates(thread)[0]  # n ^ 1: same row
        assert partner_col[1] == quads.coordinates(thread)[1]  # n ^ 2: same column
    if grid[1] <= WARP_SIZE // 2 and WARP_SIZE % grid[1] == 0:
        for warp in range(count // WARP_SIZE):
            lanes = range(warp * WARP_SIZE, (warp + 1) * WARP_SIZE)
            assert {quads.coordinates(t) for t in lanes} == {rows.coordinates(t) for t in lanes}


def test_thread_37_of_a_16_by_16_grid():
    # quad 9 is quad row 1, quad column 1 of an 8-quad-wide grid; lane 1 of the quad is its
    # top right thread
    quads, cols = thread_tiles((16, 16))
    assert quads.coordinates(37) == (2, 3)
    assert (quads.position(37, 0), cols.position(37, 0)) == (2, 3)


def test_the_order_round_trips_and_the_verifier_names_its_limits():
    ok = """
    builtin.module {
      tile.kernel @k() {
        tile.grid %b to 1 {
          tile.threads %t to 64 {
            %mm:2 = tile.thread_tile %t dim 0 of [8, 8] cells 2 interleaved quads
          }
        }
        tile.return
      }
    }
    """
    module = parse(ok)
    assert "cells 2 interleaved quads" in str(module)
    with pytest.raises(VerifyException, match=r"quads need an even thread grid.* 4x1 threads"):
        parse(ok.replace("64", "4").replace("[8, 8]", "[4, 1]"))
    with pytest.raises(VerifyException, match=r"quads need .* mma"):
        parse(ok.replace("interleaved quads", "mma quads"))


def knobs(program) -> dict[str, int]:
    (kernel,) = [op for op in program.module.ops if isinstance(op, tile.KernelOp)]
    return {key: value.value.data for key, value in kernel.schedule.data.items()}


LINEAR = "nn.Linear(96, 72, bias=True)(torch.randn(40, 96))"


def test_the_default_orders_fp32_threads_in_quads_and_the_option_turns_it_off():
    assert knobs(at_tile(LINEAR, fma_tile_pipeline()))["quads"] == 1
    assert "quads" not in knobs(at_tile(LINEAR))  # tf32x3 MMA cells: no quads
    rows = at_tile(LINEAR, "tile-block{bm=32 bn=32},tile-thread{quads=0 tf32x3=0}")
    assert knobs(rows)["quads"] == 0
    assert all(
        op.thread_order == "rows" for op in rows.module.walk() if isinstance(op, tile.ThreadTileOp)
    )
    # a 1-thread-wide grid cannot form quads: no knob is written
    narrow = at_tile(LINEAR, "tile-block{bm=32 bn=8},tile-thread{fm=1 fn=8}")
    assert "quads" not in knobs(narrow)


def test_quads_on_an_odd_grid_is_a_one_line_error():
    from xdsl.utils.exceptions import PassFailedException

    with pytest.raises(PassFailedException, match=r"quads need an even thread grid, got 32x1"):
        at_tile(LINEAR, "tile-block{bm=32 bn=8},tile-thread{fm=1 fn=8 quads=1}")


PIPELINES = {
    "default": fma_tile_pipeline(),
    "staged-vector": (
        "tile-block{bm=32 bn=32},tile-thread{fm=4 fn=2},tile-chunk-k{bk=16},tile-stage,"
        "tile-vectorize,tile-pad-shared,tile-multibuffer{depth=2},tile-pipeline,"
        "tile-async-copy,tile-unroll,tile-hoist-invariant,tile-cse"
    ),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_quad_schedules_match_pytorch(name):
    program = at_tile("nn.Linear(96, 72, bias=True)(torch.randn(37, 96))", PIPELINES[name])
    assert knobs(program)["quads"] == 1
    check(program, ("tile", "kernel", "cuda"))


def shared_wavefronts(quads: int) -> float:
    program = program_from_expression(
        "torch.nn.functional.linear(torch.randn(128, 256), torch.randn(128, 256))", seed=1
    )
    lower_program(program, "loop")
    from tests.passes.test_tile_stage_prologue import apply_tile_pipeline

    apply_tile_pipeline(
        program,
        f"tile-block{{bm=128 bn=128}},tile-thread{{fm=8 fn=8 quads={quads}}},tile-chunk-k{{bk=16}},"
        "tile-stage,tile-vectorize,tile-pad-shared",
    )
    lower_program(program, "kernel")
    estimate = model_program(program.module, device_model("h100"), {})
    ((kernel, *_),) = estimate.kernels
    return kernel.counters.total("shared_wavefronts")


def test_quads_halve_the_shared_wavefronts_of_a_vectorized_gemm():
    """8 x 8 cells read as float4s: in row order A's reads pair up (a warp row shares them)
    but B's do not; in quads both do."""
    rows, quads = shared_wavefronts(0), shared_wavefronts(1)
    assert quads < 0.8 * rows
