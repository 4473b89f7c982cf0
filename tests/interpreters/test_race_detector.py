"""The shared-memory race detector: `SharedBuffer` alone, then planted missing barriers.

The lowered RMSNorm-like kernel publishes per-warp partials through `%red` between two
barriers. Removing the barrier between the stores and the loads (a missing
`__syncthreads()`) must raise `RaceError` naming `%red` and `kernel.load`; removing the
trailing barrier makes the next combine overwrite partials other threads may still be
reading, which must raise too. With the barriers in place the kernel runs clean.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import InterpretationError

from deplodock.dialects import kernel, make_context
from deplodock.interpreters.shared_memory import (
    RaceError,
    SharedBuffer,
    UninitializedReadError,
)
from deplodock.passes.convert_tile_to_kernel import ConvertTileToKernelPass
from tests.helpers import parse, run

# --------------------------------------------------------------------------------------------
# SharedBuffer on its own


def lanes(*ids: int) -> np.ndarray:
    return np.array(ids, dtype=np.int64)


def test_race_error_is_an_interpretation_error() -> None:
    assert issubclass(RaceError, InterpretationError)


def test_read_after_write_by_another_thread_in_the_same_epoch() -> None:
    buf = SharedBuffer("%red", np.zeros(4, dtype=np.float32))
    buf.store([lanes(0, 1)], np.array([1.0, 2.0]), lanes(0, 32), epoch=0)
    message = (
        r"race on shared buffer %red: thread 3 reads element \[0\] written by thread 0 "
        r"in the same barrier epoch \(kernel.load\)"
    )
    with pytest.raises(RaceError, match=message):
        buf.load([lanes(0, 0)], lanes(0, 3), epoch=0, op_name="kernel.load")


def test_reads_of_own_writes_and_after_a_barrier_are_fine() -> None:
    buf = SharedBuffer("%s", np.zeros((2, 2), dtype=np.float32))
    buf.store([lanes(0, 1), lanes(1, 0)], np.array([5.0, 7.0]), lanes(4, 9), epoch=2)
    own = buf.load([lanes(0, 1), lanes(1, 0)], lanes(4, 9), epoch=2, op_name="kernel.load")
    np.testing.assert_array_equal(own, [5.0, 7.0])
    swapped = buf.load([lanes(1, 0), lanes(0, 1)], lanes(4, 9), epoch=3, op_name="kernel.load")
    np.testing.assert_array_equal(swapped, [7.0, 5.0])


def test_write_after_write_in_one_store_and_across_stores() -> None:
    buf = SharedBuffer("%a", np.zeros(8, dtype=np.float32))
    with pytest.raises(RaceError, match=r"thread 5 writes element \[2\] also written by thread 3"):
        buf.store([lanes(2, 2)], np.array([1.0, 1.0]), lanes(3, 5), epoch=0)
    buf.store([lanes(6)], np.array([1.0]), lanes(0), epoch=0)
    with pytest.raises(RaceError, match=r"thread 1 writes element \[6\] written by thread 0"):
        buf.store([lanes(6)], np.array([2.0]), lanes(1), epoch=0)
    buf.store([lanes(6)], np.array([2.0]), lanes(1), epoch=1)  # after a barrier: fine


def test_write_after_read_by_other_threads_in_the_same_epoch() -> None:
    buf = SharedBuffer("%red", np.zeros(2, dtype=np.float32))
    buf.store([lanes(0)], np.array([1.0]), lanes(0), epoch=0)
    buf.load([lanes(0, 0, 0)], lanes(0, 1, 2), epoch=1, op_name="kernel.load")
    with pytest.raises(RaceError, match=r"thread 0 writes element \[0\] read by several threads"):
        buf.store([lanes(0)], np.array([3.0]), lanes(0), epoch=1)


def test_out_of_bounds_shared_access() -> None:
    buf = SharedBuffer("%red", np.zeros(4, dtype=np.float32))
    with pytest.raises(InterpretationError, match=r"index 4 out of bounds .* shared buffer %red"):
        buf.load([lanes(4)], lanes(0), epoch=0, op_name="kernel.load")


def test_read_of_a_never_written_element_is_uninitialized() -> None:
    buf = SharedBuffer("%tile", np.zeros((2, 3), dtype=np.float32))
    buf.store([lanes(0, 0), lanes(0, 1)], np.array([1.0, 2.0]), lanes(0, 1), epoch=0)
    buf.load([lanes(0, 0), lanes(1, 0)], lanes(0, 1), epoch=1, op_name="kernel.load")
    message = (
        r"uninitialized read of shared buffer %tile: thread 5 reads element \[1, 2\], which "
        r"nothing in this block has written \(kernel.load\)"
    )
    with pytest.raises(UninitializedReadError, match=message):
        buf.load([lanes(0, 1), lanes(0, 2)], lanes(4, 5), epoch=1, op_name="kernel.load")


def test_a_landed_copy_initializes_its_elements() -> None:
    buf = SharedBuffer("%a", np.zeros(4, dtype=np.float32))
    buf.issue_copy(np.array([2]), lanes(7), epoch=0, op_name="kernel.cp_async")
    buf.land_copy(np.array([2]), np.array([9.0]), lanes(7), epoch=0)
    assert buf.load([lanes(2)], lanes(7), epoch=0, op_name="kernel.load")[0] == 9.0


# --------------------------------------------------------------------------------------------
# Planted missing barriers in materialized kernels


RMS_LIKE = """
tile.kernel @rms_like(%x: memref<3x256xf32>, %y: memref<3x256xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  tile.grid %b to 3 {
    tile.threads %t to 128 {
      %sum_p = tile.for %k = %t to 256 step 128 iter_args(%acc = %zero) -> (f32) {
        %v = tile.load %x[%b, %k] : memref<3x256xf32>
        %sq = arith.mulf %v, %v : f32
        %a = arith.addf %acc, %sq : f32
        tile.yield %a : f32
      }
      %sum = tile.combine add %sum_p : f32
      %r = math.rsqrt %sum : f32
      %mx = tile.combine max %sum_p : f32
      %q = arith.mulf %r, %mx : f32
      tile.for %j = %t to 256 step 128 {
        %xv = tile.load %x[%b, %j] : memref<3x256xf32>
        %o = arith.mulf %xv, %q : f32
        tile.store %o, %y[%b, %j] : memref<3x256xf32>
      }
    }
  }
  tile.return
}
func.func @forward(%x: memref<3x256xf32>) -> memref<3x256xf32> {
  %y = tile.alloc : memref<3x256xf32>
  tile.launch @rms_like(%x, %y) : (memref<3x256xf32>, memref<3x256xf32>) -> ()
  func.return %y : memref<3x256xf32>
}
"""


def materialized() -> ModuleOp:
    module = parse(RMS_LIKE)
    ConvertTileToKernelPass().apply(make_context(), module)
    module.verify()
    return module


def reference(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    partial = (x64 * x64).reshape(3, 2, 128).sum(axis=1)  # what each thread accumulates
    total = partial.sum(axis=1, keepdims=True)
    return x64 * (1.0 / np.sqrt(total)) * partial.max(axis=1, keepdims=True)


def barriers(module: ModuleOp) -> list[kernel.BarrierOp]:
    return [op for op in module.walk() if isinstance(op, kernel.BarrierOp)]


def plant_missing_barrier(barrier: kernel.BarrierOp) -> None:
    barrier.detach()
    barrier.erase()


@pytest.fixture
def x() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((3, 256)).astype(np.float32)


def test_with_its_barriers_the_kernel_is_race_free(x: np.ndarray) -> None:
    module = materialized()
    assert len(barriers(module)) == 4  # two per combine
    (y,) = run(module, x)
    assert float(np.max(np.abs(y - reference(x))) / np.max(np.abs(reference(x)))) <= 1e-5


def test_missing_barrier_between_shared_stores_and_loads_is_a_race(x: np.ndarray) -> None:
    module = materialized()
    publish = barriers(module)[0]
    assert isinstance(publish.prev_op, kernel.IfOp)  # right after the lane-0 stores to %red
    plant_missing_barrier(publish)
    with pytest.raises(
        RaceError,
        match=r"race on shared buffer %red \(@rms_like, block 0\): thread \d+ reads element "
        r"\[0\] written by "
        r"thread 0 in the same barrier epoch \(kernel.load\)",
    ):
        run(module, x)


def test_missing_trailing_barrier_lets_the_next_combine_clobber_partials(
    x: np.ndarray,
) -> None:
    module = materialized()
    trailing = barriers(module)[1]
    assert isinstance(trailing.prev_op, kernel.ForOp)  # right after the fold over %red
    plant_missing_barrier(trailing)
    with pytest.raises(
        RaceError,
        match=r"race on shared buffer %red \(@rms_like, block 0\): thread 0 writes element "
        r"\[0\] read by",
    ):
        run(module, x)


def test_a_wrong_guard_leaves_partials_unwritten_and_their_read_is_caught(
    x: np.ndarray,
) -> None:
    """Planted: the per-warp partials are stored by thread 0 alone (`t == 0` instead of
    `lane == 0`), so the fold reads elements 1-3 of %red that nothing wrote."""
    module = materialized()
    publish = next(op for op in module.walk() if isinstance(op, kernel.IfOp))
    func = publish.parent_op()
    assert isinstance(func, kernel.FuncOp)
    thread_id = next(op for op in func.walk() if isinstance(op, kernel.ThreadIdOp))
    zero = next(op for op in func.walk() if op.results and op.results[0].name_hint == "c0")
    is_thread0 = arith.CmpiOp(thread_id.results[0], zero.results[0], "eq")
    publish.parent_block().insert_op_before(is_thread0, publish)
    publish.operands[0] = is_thread0.result
    with pytest.raises(
        UninitializedReadError,
        match=r"uninitialized read of shared buffer %red \(@rms_like, block 0\): thread 0 "
        r"reads element \[1\]",
    ):
        run(module, x)
