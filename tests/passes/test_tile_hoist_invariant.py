"""`tile-hoist-invariant`: hoisting changes where work runs, never what a kernel computes.

Each kernel runs through the tile interpreter (threads in lock-step, the shared-memory race
detector on, global loads bounds-checked) before and after the pass on the same random
inputs; the outputs must be identical. The hand-written kernels cover what moves (pure ops,
read-only loads in a loop every thread runs, provably in-bounds loads) and what must not
(a load that would go out of bounds on threads that skip the loop, shared-memory loads
rewritten by a stage every iteration); the pipeline kernels are today's reductions and
attention.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import InterpretationError

from deplodock.dialects import make_context, tile
from deplodock.passes import get_all_passes
from deplodock.passes.pipelines import pipeline_pass_names
from deplodock.passes.tile.hoist_invariant import TileHoistInvariantPass, hoist_invariant
from tests.e2e.test_ops_all_levels import captured_expression, lowered_expression
from tests.helpers import parse, random_inputs, run


def hoist(module: ModuleOp) -> ModuleOp:
    TileHoistInvariantPass().apply(make_context(), module)
    module.verify()
    return module


def loop_of(module: ModuleOp, name: str) -> tile.ForOp:
    return next(
        op
        for op in module.walk()
        if isinstance(op, tile.ForOp) and op.induction_var.name_hint == name
    )


def names_in(loop: tile.ForOp) -> set[str]:
    return {r.name_hint for op in loop.body.block.ops for r in op.results if r.name_hint}


def same_outputs(text: str, seed: int = 0) -> ModuleOp:
    """Runs `text` before and after the pass on one set of random inputs; returns the
    hoisted module."""
    module = parse(text)
    inputs = random_inputs(module, seed)
    before = run(module, *inputs)
    after = run(hoist(module), *inputs)
    for b, a in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)
    return module


SCALE = """
tile.kernel @scale(%x: memref<16x32xf32>, %g: memref<8xf32>, %y: memref<8x16x32xf32>) {
  tile.grid %b to 8 {
    tile.threads %t to 32 {
      %c0 = arith.constant 0 : index
      %c8 = arith.constant 8 : index
      %half = arith.constant 5.000000e-01 : f32
      tile.for %i = %c0 to 16 {
        %gb = tile.load %g[%b] : memref<8xf32>
        %s = arith.mulf %gb, %half : f32
        %bi = arith.muli %b, %c8 : index
        %bj = arith.remsi %bi, %c8 : index
        tile.for %j = %c0 to 2 {
          %w = tile.load %g[%bj] : memref<8xf32>
          %e = math.exp %s : f32
          %v = tile.load %x[%i, %t] : memref<16x32xf32>
          %o = arith.mulf %v, %e : f32
          %o2 = arith.addf %o, %w : f32
          tile.store %o2, %y[%b, %i, %t] : memref<8x16x32xf32>
        }
      }
    }
  }
  tile.return
}
func.func @forward(%x: memref<16x32xf32>, %g: memref<8xf32>) -> memref<8x16x32xf32> {
  %y = tile.alloc : memref<8x16x32xf32>
  tile.launch @scale(%x, %g, %y) : (memref<16x32xf32>, memref<8xf32>, memref<8x16x32xf32>) -> ()
  func.return %y : memref<8x16x32xf32>
}
"""


def test_invariant_ops_climb_every_level_they_are_invariant_in() -> None:
    module = same_outputs(SCALE)
    # %gb, %s, %bi, %bj and (out of %j) %w and %e end up before the %i loop; what depends
    # on %i stays in it, out of the %j loop, which keeps only its store.
    assert names_in(loop_of(module, "i")) == {"v", "o", "o2"}
    assert names_in(loop_of(module, "j")) == set()
    hoisted = {r.name_hint for op in module.walk() for r in op.results if r.name_hint}
    assert {"gb", "s", "bi", "bj", "w", "e"} <= hoisted


GUARDED = """
tile.kernel @guarded(%x: memref<40xf32>, %g: memref<70xf32>, %y: memref<40xf32>) {
  tile.grid %b to 1 {
    tile.threads %t to 64 {
      %c5 = arith.constant 5 : index
      %c30 = arith.constant 30 : index
      tile.for %i = %t to 40 step 64 {
        %k = arith.addi %t, %c30 : index
        %gk = tile.load %g[%k] : memref<70xf32>
        %g5 = tile.load %g[%c5] : memref<70xf32>
        %v = tile.load %x[%i] : memref<40xf32>
        %o = arith.addf %v, %gk : f32
        %o2 = arith.addf %o, %g5 : f32
        tile.store %o2, %y[%i] : memref<40xf32>
      }
    }
  }
  tile.return
}
func.func @forward(%x: memref<40xf32>, %g: memref<70xf32>) -> memref<40xf32> {
  %y = tile.alloc : memref<40xf32>
  tile.launch @guarded(%x, %g, %y) : (memref<40xf32>, memref<70xf32>, memref<40xf32>) -> ()
  func.return %y : memref<40xf32>
}
"""


def test_a_load_that_could_go_out_of_bounds_stays_in_a_loop_some_threads_skip() -> None:
    module = same_outputs(GUARDED)
    assert names_in(loop_of(module, "i")) == {"gk", "v", "o", "o2"}
    # Hoisting %gk by hand makes threads 40..63 (which skip the loop) read %g[70..93].
    load = next(o for o in module.walk() if isinstance(o, tile.LoadOp) and o.res.name_hint == "gk")
    load.detach()
    loop = loop_of(module, "i")
    loop.parent_block().insert_op_before(load, loop)  # type: ignore[union-attr]
    with pytest.raises(InterpretationError, match=r"%g in tile.load: index 70 out of bounds"):
        run(module, *random_inputs(module, 0))


STAGES = """
tile.kernel @stages(%x: memref<4x32xf32>, %y: memref<4x32xf32>) {
  tile.grid %b to 2 {
    tile.threads %t to 32 {
      %c0 = arith.constant 0 : index
      %s = tile.shared_alloc : memref<32xf32, 3>
      tile.for %i = %c0 to 4 {
        tile.barrier
        %v = tile.load %x[%i, %t] : memref<4x32xf32>
        tile.store %v, %s[%t] : memref<32xf32, 3>
        tile.barrier
        %first = tile.load %s[%c0] : memref<32xf32, 3>
        %x0 = tile.load %x[%c0, %c0] : memref<4x32xf32>
        %o = arith.addf %first, %x0 : f32
        tile.store %o, %y[%i, %t] : memref<4x32xf32>
      }
    }
  }
  tile.return
}
func.func @forward(%x: memref<4x32xf32>) -> memref<4x32xf32> {
  %y = tile.alloc : memref<4x32xf32>
  tile.launch @stages(%x, %y) : (memref<4x32xf32>, memref<4x32xf32>) -> ()
  func.return %y : memref<4x32xf32>
}
"""


def test_shared_loads_stay_global_read_only_loads_move() -> None:
    """`%s[0]` has invariant indices but a stage rewrites `%s` every iteration."""
    module = same_outputs(STAGES)
    assert names_in(loop_of(module, "i")) == {"v", "first", "o"}
    (x,) = random_inputs(module, 0)
    np.testing.assert_array_equal(run(module, x)[0], np.broadcast_to(x[:, :1] + x[0, 0], (4, 32)))


# --------------------------------------------------------------------------------------------
# Today's pipeline kernels: the tile stage without, then with, the pass

PIPELINE = {
    "rmsnorm": "nn.RMSNorm(2048)(torch.randn(1, 32, 2048))",
    "softmax": "nn.Softmax(dim=-1)(torch.randn(2, 4, 128))",
    "attention": (
        "torch.nn.functional.scaled_dot_product_attention("
        "torch.randn(1, 2, 16, 32), torch.randn(1, 2, 16, 32), torch.randn(1, 2, 16, 32),"
        " is_causal=True)"
    ),
}


@pytest.mark.parametrize("name", list(PIPELINE))
def test_pipeline_kernels_compute_the_same(name: str) -> None:
    expr = PIPELINE[name]
    _, arguments, expected = captured_expression(expr)
    module = lowered_expression(expr, "loop").clone()
    passes = get_all_passes()
    for pass_name in pipeline_pass_names("tile", start="loop"):
        if pass_name != TileHoistInvariantPass.name:
            passes[pass_name]()().apply(make_context(), module)
    before = run(module, *arguments)
    kernels = [op for op in module.ops if isinstance(op, tile.KernelOp)]
    moved = sum(hoist_invariant(kernel) for kernel in kernels)
    module.verify()
    assert moved > 0 or name != "attention"  # the softmax guards leave the P @ V loops
    after = run(module, *arguments)
    for b, a, exact in zip(before, after, expected, strict=True):
        np.testing.assert_array_equal(a, b)
        assert np.max(np.abs(a - exact)) <= 1e-5 * max(1.0, np.max(np.abs(exact)))
