"""cp.async with real asynchrony and vector accesses in the tile and kernel interpreters.

A staged kernel: every thread of block `b` copies 16 bytes (4 floats) of row `b` of `%x`
into the shared array `%s` in two groups (columns 0-127, then 128-255), waits, and after a
barrier the block writes the row reversed (each thread reads elements other threads copied).
Planted bugs: a missing wait (the read sees a copy in flight), a missing barrier after the
wait (the landed data is another thread's write of this epoch), `wait 1` leaving the newest
group in flight, and copies never waited for at the end of the kernel.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.utils.exceptions import InterpretationError

from deplodock.dialects import make_context
from deplodock.interpreters.shared_memory import RaceError, SharedBuffer
from deplodock.passes.convert_tile_to_kernel import ConvertTileToKernelPass
from tests.helpers import parse, run

STAGED = """
tile.kernel @staged(%x: memref<4x256xf32>, %y: memref<4x256xf32>) {
  tile.grid %b to 4 {
    tile.threads %t to 32 {
      %c4 = arith.constant 4 : index
      %c128 = arith.constant 128 : index
      %c255 = arith.constant 255 : index
      %s = tile.shared_alloc : memref<256xf32, 3 : i64>
      %col = arith.muli %t, %c4 : index
      %col2 = arith.addi %col, %c128 : index
      tile.copy_async %s[%col], %x[%b, %col], 16 : memref<256xf32, 3 : i64>, memref<4x256xf32>
      tile.async_commit
      tile.copy_async %s[%col2], %x[%b, %col2], 16 : memref<256xf32, 3 : i64>, memref<4x256xf32>
      tile.async_commit
      WAIT
      BARRIER
      READ_FIRST_HALF
      tile.async_wait 0
      tile.barrier
      tile.for %j = %t to 256 step 32 {
        %r = arith.subi %c255, %j : index
        %v = tile.load %s[%r] : memref<256xf32, 3 : i64>
        tile.store %v, %y[%b, %j] : memref<4x256xf32>
      }
    }
  }
  tile.return
}
func.func @forward(%x: memref<4x256xf32>) -> memref<4x256xf32> {
  %y = tile.alloc : memref<4x256xf32>
  tile.launch @staged(%x, %y) : (memref<4x256xf32>, memref<4x256xf32>) -> ()
  func.return %y : memref<4x256xf32>
}
"""

#: Thread t reads element 124 - 4t of the first half: copied by another thread.
READ_FIRST = """%o = arith.subi %c128, %col : index
      %o1 = arith.subi %o, %c4 : index
      %u = tile.load %s[%o1] : memref<256xf32, 3 : i64>"""


def staged(wait: str = "tile.async_wait 1", barrier: str = "tile.barrier", read: bool = True):
    text = STAGED.replace("WAIT", wait).replace("BARRIER", barrier)
    return text.replace("READ_FIRST_HALF", READ_FIRST if read else "")


def lowered(text: str):
    module = parse(text)
    ConvertTileToKernelPass().apply(make_context(), module)
    module.verify()
    return module


LEVELS = [pytest.param(parse, id="tile"), pytest.param(lowered, id="kernel")]


@pytest.fixture
def x() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((4, 256)).astype(np.float32)


@pytest.mark.parametrize("level", LEVELS)
def test_staged_copy_matches_numpy(level, x: np.ndarray) -> None:
    (y,) = run(level(staged()), x)
    np.testing.assert_array_equal(y, x[:, ::-1])


@pytest.mark.parametrize("level", LEVELS)
def test_missing_wait_is_caught(level, x: np.ndarray) -> None:
    with pytest.raises(
        RaceError,
        match=r"race on shared buffer %s \(@\w+, block 0\): thread 0 reads element \[124\] "
        r"while a cp.async of "
        r"thread 31 to it is in flight: cp.async not yet waited for",
    ):
        run(level(staged(wait="")), x)


@pytest.mark.parametrize("level", LEVELS)
def test_missing_barrier_after_the_wait_is_caught(level, x: np.ndarray) -> None:
    with pytest.raises(
        RaceError,
        match=r"race on shared buffer %s \(@\w+, block 0\): thread 0 reads element \[124\] "
        r"written by thread 31 "
        r"in the same barrier epoch",
    ):
        run(level(staged(barrier="")), x)


@pytest.mark.parametrize("level", LEVELS)
def test_wait_1_leaves_exactly_the_newest_group_in_flight(level, x: np.ndarray) -> None:
    # After `wait 1` the first group (columns 0-127) has landed: reading it is fine. Reading
    # the second group (columns 128-255) is a race until `wait 0`.
    run(level(staged()), x)
    second = READ_FIRST.replace("%o1]", "%o2]").replace(
        "%u = ", "%o2 = arith.addi %o1, %c128 : index\n      %u = "
    )
    text = STAGED.replace("WAIT", "tile.async_wait 1").replace("BARRIER", "tile.barrier")
    with pytest.raises(RaceError, match=r"element \[252\] .* cp.async not yet waited for"):
        run(level(text.replace("READ_FIRST_HALF", second)), x)


def test_copies_never_waited_for_are_an_error_at_kernel_end(x: np.ndarray) -> None:
    text = staged(read=False).replace("tile.async_wait 0\n", "")
    text = text.replace("WAIT", "").replace(
        "tile.for %j = %t to 256 step 32 {", "tile.for %j = %t to 0 step 32 {"
    )
    with pytest.raises(InterpretationError, match=r"not yet waited for \(missing cp.async wait"):
        run(parse(text), x)
    with pytest.raises(InterpretationError, match=r"not yet waited for \(missing cp.async wait"):
        run(lowered(text), x)


ZFILL = """
kernel.func @zfill(%x: memref<64xf32>, %y: memref<64xf32>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %s = kernel.shared_alloc : memref<64xf32, 3 : i64>
  %i = arith.muli %t, %c2 : index
  %p = arith.cmpi ult, %t, %c8 : index
  kernel.cp_async %s[%i], %x[%i], 8 if %p : memref<64xf32, 3 : i64>, memref<64xf32>
  kernel.cp_async_commit
  kernel.cp_async_wait 0
  %a, %b = kernel.load_vector %s[%i] width 2 : memref<64xf32, 3 : i64>
  kernel.store_vector %a, %b, %y[%i] : memref<64xf32>
  kernel.return
}
func.func @forward(%x: memref<64xf32>) -> memref<64xf32> {
  %y = kernel.alloc : memref<64xf32>
  kernel.launch @zfill(%x, %y) : (memref<64xf32>, memref<64xf32>) -> ()
  func.return %y : memref<64xf32>
}
"""


def test_false_predicate_zero_fills_and_a_thread_reads_its_own_copy_after_its_wait() -> None:
    x = np.arange(64, dtype=np.float32) + 1
    (y,) = run(ZFILL, x)
    np.testing.assert_array_equal(y, np.where(np.arange(64) < 16, x, 0))


MISALIGNED = """
kernel.func @mis(%x: memref<64xf32>, %y: memref<64xf32>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %c1 = arith.constant 1 : index
  %i = arith.addi %t, %c1 : index
  %c16 = arith.constant 16 : index
  %p = arith.cmpi ult, %t, %c16 : index
  kernel.if %p {
    %a, %b = kernel.load_vector %x[%i] width 2 : memref<64xf32>
    kernel.store %a, %y[%t] : memref<64xf32>
  }
  kernel.return
}
func.func @forward(%x: memref<64xf32>) -> memref<64xf32> {
  %y = kernel.alloc : memref<64xf32>
  kernel.launch @mis(%x, %y) : (memref<64xf32>, memref<64xf32>) -> ()
  func.return %y : memref<64xf32>
}
"""


def test_misaligned_vector_access_is_an_error_naming_the_buffer() -> None:
    with pytest.raises(
        InterpretationError,
        match=r"kernel.load_vector: misaligned access to buffer %x: innermost index 1 is not "
        r"a multiple of 2 \(thread 0",
    ):
        run(MISALIGNED, np.zeros(64, dtype=np.float32))


def test_shared_buffer_copy_in_flight_then_landed() -> None:
    buf = SharedBuffer("%s", np.zeros(8, dtype=np.float32))
    ids = np.array([0, 0, 1, 1], dtype=np.int64)
    buf.issue_copy(np.array([0, 1, 2, 3]), ids, epoch=0, op_name="kernel.cp_async")
    with pytest.raises(RaceError, match=r"thread 0 reads element \[0\] .* thread 0 .* in flight"):
        buf.load([np.array([0])], np.array([0]), epoch=0, op_name="kernel.load")
    with pytest.raises(RaceError, match=r"thread 3 writes element \[3\] .* not yet waited for"):
        buf.store([np.array([3])], np.array([1.0]), np.array([3]), epoch=0)
    buf.land_copy(np.array([0, 1, 2, 3]), np.array([1.0, 2.0, 3.0, 4.0]), ids, epoch=0)
    assert buf.load([np.array([1])], np.array([0]), epoch=0, op_name="kernel.load")[0] == 2.0
    with pytest.raises(RaceError, match=r"thread 0 reads element \[2\] written by thread 1"):
        buf.load([np.array([2])], np.array([0]), epoch=0, op_name="kernel.load")
    assert buf.load([np.array([2])], np.array([0]), epoch=1, op_name="kernel.load")[0] == 3.0
