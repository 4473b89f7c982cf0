"""`kernel-drop-barriers` on real and planted kernels, run with the shared-memory race detector.

The kernel interpreter gives every shared element the thread and barrier epoch that last
wrote (or read) it, so a barrier the pass wrongly removed shows up as a `RaceError`. Each
test runs a kernel before and after the pass on the same random inputs: the outputs must be
identical and race-free. And every barrier the pass keeps must be needed: removing any one
of them by hand makes the race detector fire.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import kernel, make_context
from deplodock.interpreters.shared_memory import RaceError
from deplodock.passes.convert_tile_to_kernel import ConvertTileToKernelPass
from deplodock.passes.kernel_drop_barriers import KernelDropBarriersPass
from tests.e2e.test_ops_all_levels import captured_expression, lowered_expression
from tests.helpers import parse, random_inputs, run
from tests.interpreters.test_race_detector import RMS_LIKE


def barriers(module: ModuleOp) -> list[kernel.BarrierOp]:
    return [op for op in module.walk() if isinstance(op, kernel.BarrierOp)]


def drop(module: ModuleOp) -> ModuleOp:
    KernelDropBarriersPass().apply(make_context(), module)
    module.verify()
    return module


def assert_each_barrier_needed(module: ModuleOp, inputs: list[np.ndarray]) -> None:
    """Removing any one remaining barrier (in a copy) makes the kernel race."""
    for position in range(len(barriers(module))):
        planted = module.clone()
        Rewriter.erase_op(barriers(planted)[position])
        with pytest.raises(RaceError):
            run(planted, *inputs)


# --------------------------------------------------------------------------------------------
# The reductions of today's pipeline (convert-tile-to-kernel output)

EXPRESSIONS = {
    # one combine: its trailing barrier orders nothing and goes
    "rmsnorm": ("nn.RMSNorm(2048)(torch.randn(1, 32, 2048))", 2, 1),
    # max then sum: the max's trailing barrier orders the sum's reuse of %red and stays
    "softmax": ("nn.Softmax(dim=-1)(torch.randn(2, 4, 128))", 4, 3),
    # three combines (mean, its one-step refinement, variance): the last trailing one goes
    "layernorm": ("nn.LayerNorm(256)(torch.randn(4, 256))", 6, 5),
}


@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_reductions_keep_every_needed_barrier(name: str) -> None:
    expr, before, after = EXPRESSIONS[name]
    _, arguments, expected = captured_expression(expr)
    module = lowered_expression(expr, "tile").clone()
    ConvertTileToKernelPass().apply(make_context(), module)
    assert len(barriers(module)) == before
    reference = run(module, *arguments)
    drop(module)
    assert len(barriers(module)) == after
    outputs = run(module, *arguments)  # race detector on: a needed barrier gone would raise
    for out, ref, exact in zip(outputs, reference, expected, strict=True):
        np.testing.assert_array_equal(out, ref)
        assert np.max(np.abs(out - exact)) <= 1e-5 * max(1.0, np.max(np.abs(exact)))
    assert_each_barrier_needed(module, arguments)


def test_two_combines_over_the_same_partials() -> None:
    """The race detector's own RMS-like kernel: four barriers, the last one goes."""
    module = parse(RMS_LIKE)
    ConvertTileToKernelPass().apply(make_context(), module)
    inputs = random_inputs(module, seed=1)
    reference = run(module, *inputs)
    assert len(barriers(drop(module))) == 3
    np.testing.assert_array_equal(run(module, *inputs)[0], reference[0])
    assert_each_barrier_needed(module, inputs)


# --------------------------------------------------------------------------------------------
# Planted barriers


def test_planted_redundant_barriers_are_dropped() -> None:
    module = parse(RMS_LIKE)
    ConvertTileToKernelPass().apply(make_context(), module)
    KernelDropBarriersPass().apply(make_context(), module)
    kept = barriers(module)
    func = next(op for op in module.ops if isinstance(op, kernel.FuncOp))
    # one at the very start, one doubling each kept barrier, one before the return
    Rewriter.insert_op(kernel.BarrierOp(), InsertPoint.at_start(func.body.block))
    for barrier in kept:
        Rewriter.insert_op(kernel.BarrierOp(), InsertPoint.after(barrier))
    Rewriter.insert_op(kernel.BarrierOp(), InsertPoint.before(func.body.block.last_op))
    inputs = random_inputs(module, seed=2)
    reference = run(module, *inputs)
    assert len(barriers(module)) == 2 * len(kept) + 2
    assert len(barriers(drop(module))) == len(kept)
    np.testing.assert_array_equal(run(module, *inputs)[0], reference[0])


STAGE_IN_A_LOOP = """
kernel.func @stages(%x: memref<4x32xf32>, %y: memref<4x32xf32>) grid 2 block 32 {
  %t = kernel.thread_id : index
  %c0 = arith.constant 0 : index
  %c31 = arith.constant 31 : index
  %s = kernel.shared_alloc : memref<32xf32, 3>
  kernel.for %i = %c0 to 4 {
    kernel.barrier
    %v = kernel.load %x[%i, %t] : memref<4x32xf32>
    kernel.store %v, %s[%t] : memref<32xf32, 3>
    kernel.barrier
    kernel.barrier
    %r = arith.subi %c31, %t : index
    %w = kernel.load %s[%r] : memref<32xf32, 3>
    kernel.store %w, %y[%i, %t] : memref<4x32xf32>
  }
  kernel.return
}
func.func @forward(%x: memref<4x32xf32>) -> memref<4x32xf32> {
  %y = kernel.alloc : memref<4x32xf32>
  kernel.launch @stages(%x, %y) : (memref<4x32xf32>, memref<4x32xf32>) -> ()
  func.return %y : memref<4x32xf32>
}
"""


def test_a_loop_body_wraps_around() -> None:
    """The barrier at the top of the body orders the previous iteration's reads of %s before
    this iteration's stores: it stays; the doubled barrier in the middle goes."""
    module = parse(STAGE_IN_A_LOOP)
    (x,) = random_inputs(module, seed=3)
    (y,) = run(drop(module), x)
    assert len(barriers(module)) == 2
    np.testing.assert_array_equal(y, x[:, ::-1])
    assert_each_barrier_needed(module, [x])


GLOBAL_ORDER = """
kernel.func @twice(%x: memref<32xf32>, %y: memref<32xf32>, %z: memref<32xf32>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %c31 = arith.constant 31 : index
  %v = kernel.load %x[%t] : memref<32xf32>
  kernel.store %v, %y[%t] : memref<32xf32>
  kernel.barrier
  %r = arith.subi %c31, %t : index
  %w = kernel.load %y[%r] : memref<32xf32>
  kernel.store %w, %z[%t] : memref<32xf32>
  kernel.return
}
func.func @forward(%x: memref<32xf32>) -> memref<32xf32> {
  %y = kernel.alloc : memref<32xf32>
  %z = kernel.alloc : memref<32xf32>
  kernel.launch @twice(%x, %y, %z) : (memref<32xf32>, memref<32xf32>, memref<32xf32>) -> ()
  func.return %z : memref<32xf32>
}
"""


def test_a_barrier_ordering_global_memory_stays() -> None:
    """Two inlined `tile.threads` regions may talk through a global buffer (here %y): the
    barrier between the store and the other threads' loads is kept."""
    module = drop(parse(GLOBAL_ORDER))
    assert len(barriers(module)) == 1
    (x,) = random_inputs(module, seed=4)
    np.testing.assert_array_equal(run(module, x)[0], x[::-1])
