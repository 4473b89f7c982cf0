"""`tile-block-rows` on GEMVs (the decode step's `M = 1` projections): each block computes
several rows in one pass over K, reading the shared vector once. The tiled programs are
compared with PyTorch in float64 through the emitted CUDA C on the CPU (bf16 and fp32, a
block per row and a warp per row, the default tile and forced ones); a copy writing the
wrong row is caught; kernels with no operand shared by their rows are left alone; and the
model's L2 traffic shows the vector read once per tile instead of once per row."""

from __future__ import annotations

import pytest

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.driver import lower_program, program_from_expression, run_and_compare
from deplodock.passes.pipelines import STAGE_PASSES
from deplodock.passes.tile import block_rows, schedule
from deplodock.tune.kernels import loop_kernels

GEMV = "F.linear(torch.randn(1, {k}){cast}, torch.randn({n}, {k}){cast})"
BF16 = ".bfloat16()"
CASES = {  # name -> (expression, forced block_rows or None for the default, rows expected)
    # tile-rows: 2 rows of 128 lanes a block, 1056 blocks; 8 would leave 132 < 264
    "bf16-rows-default-4": (GEMV.format(k=4096, n=2112, cast=BF16), None, 4),
    "fp32-block-default-4": (GEMV.format(k=6144, n=1056, cast=""), None, 4),  # a block per row
    "bf16-warp-per-row": (GEMV.format(k=512, n=1024, cast=BF16), 2, 2),  # tile-rows: 32 lanes
    "fp32-ragged-k": (GEMV.format(k=1000, n=64, cast=""), 8, 8),  # 1000 = 3.9 trips of 256
    "fp32-bias": (
        "F.linear(torch.randn(1, 768), torch.randn(96, 768), torch.randn(96))",
        4,
        4,
    ),
}


def lowered(expression: str, rows: int | None, stage: str = "cuda"):
    program = program_from_expression(expression)
    lower_program(program, "loop")
    if rows is not None:
        for kernel in loop_kernels(program.module):
            Schedule({block_rows.KNOB: rows}).write_on(kernel)
    lower_program(program, stage)
    return program


def tiles(program) -> list[int]:
    """The `block_rows` each kernel recorded."""
    return [
        schedule.read_knob(op, block_rows.KNOB, 1)
        for op in program.module.walk()
        if isinstance(op, tile.KernelOp)
    ]


@pytest.mark.parametrize("case", sorted(CASES))
def test_tiled_gemvs_match_pytorch_through_the_emitted_c(case: str) -> None:
    expression, forced, rows = CASES[case]
    program = lowered(expression, forced, stage="tile")
    assert rows in tiles(program), case
    lower_program(program, "cuda")
    report = run_and_compare(program)
    assert report.ok, report.summary()


def test_a_copy_writing_the_wrong_row_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: the second copy of the store writes the first copy's row (its own is never
    written)."""

    def misplaced(kernel, threads, rows):
        real(kernel, threads, rows)
        stores = [op for op in threads.walk() if isinstance(op, tile.StoreOp)]
        stores[1].operands = [*stores[1].operands[:-1], stores[0].operands[-1]]

    real = block_rows.block_rows
    monkeypatch.setattr(block_rows, "block_rows", misplaced)
    program = lowered(GEMV.format(k=256, n=64, cast=""), 4)
    assert not run_and_compare(program).ok


@pytest.mark.parametrize(
    "expression",
    ["torch.softmax(torch.randn(600, 512), -1)", "(torch.randn(600, 512) ** 2).mean(-1)"],
)
def test_rows_that_share_no_operand_are_left_alone(expression: str) -> None:
    assert set(tiles(lowered(expression, None, stage="tile"))) <= {1}


def test_the_vector_crosses_l2_once_per_tile() -> None:
    """The model's L1-L2 bytes of a GEMV with a block per row (rows of 8192 bf16): a block
    per row reads the weights once and the vector once per row; tiles of 8 rows read the
    vector an eighth as often."""
    from deplodock.perf.devices import device_model
    from deplodock.perf.profile import model_program

    device = device_model("h100")
    expression = GEMV.format(k=8192, n=1024, cast=BF16)
    traffic = {}
    for rows in (1, 8):
        program = lowered(expression, rows, stage="kernel")
        modeled = model_program(program.module, device, None)
        traffic[rows] = sum(estimate.l2_bytes for estimate, _ in modeled.kernels)
    weights = 1024 * 8192 * 2
    vector_once_per_row = 1024 * (8192 * 2)
    assert traffic[1] >= weights + vector_once_per_row
    assert traffic[8] <= 1.05 * (weights + vector_once_per_row / 8)


def test_runs_after_the_rows_are_mapped_and_before_the_rows_are_widened() -> None:
    stage = STAGE_PASSES["tile"]
    assert stage.index("tile-rows") < stage.index("tile-block-rows")
    assert stage.index("tile-cooperative-reduce") < stage.index("tile-block-rows")
    assert stage.index("tile-block-rows") < stage.index("tile-vectorize-rows")
