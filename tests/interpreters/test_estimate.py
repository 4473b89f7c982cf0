"""The interpretation estimate (op executions before a run) and the per-block progress the
tile and kernel interpreters report."""

from __future__ import annotations

import numpy as np
import pytest

from deplodock.driver import lower_program, program_from_expression
from deplodock.interpreters import run_module
from deplodock.interpreters.blocks import default_blocks_per_batch
from deplodock.interpreters.estimate import (
    SECONDS_PER_LANE_OP,
    SECONDS_PER_OP,
    estimate_interpretation,
)
from tests.helpers import parse

KERNEL = """
builtin.module {
  kernel.func @scale(%x: memref<8x40xf32>, %y: memref<8x40xf32>) grid 8 block 32 {
    %t = kernel.thread_id : index
    %b = kernel.block_id : index
    %two = arith.constant 2.000000e+00 : f32
    kernel.for %j = %t to 40 step 32 {
      %v = kernel.load %x[%b, %j] : memref<8x40xf32>
      %w = arith.mulf %v, %two : f32
      kernel.store %w, %y[%b, %j] : memref<8x40xf32>
    }
    kernel.return
  }
  func.func @forward(%x: memref<8x40xf32>) -> memref<8x40xf32> {
    %y = kernel.alloc : memref<8x40xf32>
    kernel.launch @scale(%x, %y) : (memref<8x40xf32>, memref<8x40xf32>) -> ()
    func.return %y : memref<8x40xf32>
  }
}
"""


def test_op_executions_count_each_loop_trip_and_each_batch() -> None:
    """Per block: 3 ops before the loop, the loop op, 2 trips (a per-thread start counts as
    0: 40 / 32 rounded up) of 4 ops (load, mulf, store, yield), the return = 13. The 8
    blocks run as one batch (13 dispatches on 8 * 32 lanes); plus alloc, launch and return
    in @forward."""
    estimate = estimate_interpretation(parse(KERNEL))
    assert default_blocks_per_batch(32) >= 8
    assert estimate.op_executions == 13 + 3
    assert estimate.lane_executions == 13 * 8 * 32
    assert estimate.seconds == pytest.approx(
        16 * SECONDS_PER_OP + 13 * 8 * 32 * SECONDS_PER_LANE_OP
    )
    assert estimate.heaviest == "@scale: 8 blocks of 32 threads"


def test_a_grid_of_several_batches_dispatches_its_body_once_per_batch() -> None:
    grid = 2 * default_blocks_per_batch(32) + 1  # two full batches and a short one
    text = KERNEL.replace("grid 8", f"grid {grid}").replace("8x40", f"{grid}x40")
    estimate = estimate_interpretation(parse(text))
    assert estimate.op_executions == 3 * 13 + 3
    assert estimate.lane_executions == 13 * grid * 32


def test_estimates_grow_with_the_work() -> None:
    def seconds(expression: str, stage: str) -> float:
        program = program_from_expression(expression)
        lower_program(program, stage)
        return estimate_interpretation(program.module).seconds

    for stage in ("tile", "kernel"):
        small = seconds("torch.randn(64, 128) @ torch.randn(128, 128)", stage)
        large = seconds("torch.randn(256, 128) @ torch.randn(128, 128)", stage)
        assert 1.5 * small < large < 5 * small  # 4x the blocks, the same work per block


@pytest.mark.parametrize(
    ("stage", "batch", "reports"),
    [
        ("tile", None, [6]),  # one batch holds all six blocks
        ("tile", 4, [4, 6]),
        ("kernel", 1, [1, 2, 3, 4, 5, 6]),
        ("kernel", 4, [4, 6]),  # after each batch of blocks, the last one short
    ],
)
def test_every_finished_block_is_reported_in_order(
    stage: str, batch: int | None, reports: list[int]
) -> None:
    program = program_from_expression("nn.RMSNorm(64)(torch.randn(1, 6, 64))")
    lower_program(program, stage)
    heard: list[tuple[str, int, int]] = []
    x = np.random.default_rng(0).standard_normal((1, 6, 64)).astype(np.float32)
    weight = np.ones(64, dtype=np.float32)
    run_module(
        program.module, [x, weight], progress=lambda *a: heard.append(a), blocks_per_batch=batch
    )
    assert heard == [("rms_norm_kernel", i, 6) for i in reports]
