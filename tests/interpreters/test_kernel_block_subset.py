"""`run_kernel(..., blocks=...)` runs only the chosen blocks of a launch (the tuner's
sampled correctness check): exactly their elements are written, with the values a whole
run gives, consecutive ids share a batch, and an id outside the grid is refused."""

from __future__ import annotations

import numpy as np
import pytest

from deplodock.dialects import kernel
from deplodock.interpreters import make_interpreter
from deplodock.interpreters.common import set_block_progress
from deplodock.interpreters.kernel import run_kernel
from tests.helpers import parse

#: Block b doubles the 1024 elements [1024 b, 1024 b + 1024) of a 4 x 1000 array.
DOUBLE = """
builtin.module {
  kernel.func @double(%x: memref<4x1000xf32>, %y: memref<4x1000xf32>) grid 4 block 256 {
    %t = kernel.thread_id : index
    %b = kernel.block_id : index
    %two = arith.constant 2.000000e+00 : f32
    %c256 = arith.constant 256 : index
    %c1000 = arith.constant 1000 : index
    %c4 = arith.constant 4 : index
    %0 = arith.muli %b, %c256 : index
    %start = arith.addi %0, %t : index
    %start4 = arith.muli %start, %c4 : index
    kernel.for %lin = %start4 to 4000 step 4096 {
      %i = arith.floordivsi %lin, %c1000 : index
      %j = arith.remsi %lin, %c1000 : index
      %1, %2, %3, %4 = kernel.load_vector %x[%i, %j] width 4 : memref<4x1000xf32>
      %5 = arith.mulf %1, %two : f32
      %6 = arith.mulf %2, %two : f32
      %7 = arith.mulf %3, %two : f32
      %8 = arith.mulf %4, %two : f32
      kernel.store_vector %5, %6, %7, %8, %y[%i, %j] : memref<4x1000xf32>
    }
    kernel.return
  }
  func.func @forward(%x: memref<4x1000xf32>, %y: memref<4x1000xf32>) -> memref<4x1000xf32> {
    kernel.launch @double(%x, %y) : (memref<4x1000xf32>, memref<4x1000xf32>) -> ()
    func.return %y : memref<4x1000xf32>
  }
}
"""


def run(blocks: list[int] | None, batch: int | None = None) -> tuple[np.ndarray, list]:
    """`@double` on random x with y poisoned: (y, the progress reports)."""
    module = parse(DOUBLE)
    (fn,) = [op for op in module.ops if isinstance(op, kernel.FuncOp)]
    interpreter = make_interpreter(module)
    reports: list[tuple[str, int, int]] = []
    set_block_progress(interpreter, lambda *report: reports.append(report))
    x = np.random.default_rng(0).standard_normal((4, 1000)).astype(np.float32)
    y = np.full((4, 1000), np.nan, dtype=np.float32)
    run_kernel(interpreter, fn, (x, y), blocks=blocks, blocks_per_batch=batch)
    return y, reports


def test_only_the_chosen_blocks_write_and_they_write_what_a_whole_run_does() -> None:
    whole, _ = run(None)
    assert not np.isnan(whole).any()
    part, reports = run([3, 0, 2, 2])
    written = ~np.isnan(part.reshape(-1))
    expected = np.zeros(4000, dtype=bool)
    for block in (0, 2, 3):
        expected[1024 * block : 1024 * block + 1024] = True
    np.testing.assert_array_equal(written, expected)
    np.testing.assert_array_equal(part.reshape(-1)[written], whole.reshape(-1)[written])
    assert reports == [("double", 1, 3), ("double", 3, 3)]  # blocks 0, then 2-3 together


def test_chosen_blocks_respect_the_batch_size() -> None:
    _, reports = run([0, 1, 2, 3], batch=3)
    assert reports == [("double", 3, 4), ("double", 4, 4)]
    _, reports = run(None, batch=3)
    assert reports == [("double", 3, 4), ("double", 4, 4)]


@pytest.mark.parametrize("block", [-1, 4])
def test_a_block_outside_the_grid_is_refused(block: int) -> None:
    with pytest.raises(ValueError, match=f"block {block} is outside the grid of 4 blocks"):
        run([0, block])
