"""`tile-unroll`: the mark changes nothing a kernel computes, survives to `kernel.for`, and
becomes a `#pragma unroll` that the CUDA C still compiles and runs with.

The same random inputs go through the tile program before and after the pass, and through
the CUDA C it lowers to (executed on the CPU through the device header's emulation side):
the outputs are identical. The kernel's `unroll` knob records `max_trips`; a schedule that
already holds it (a replayed, tuned schedule) wins over the pass option.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp
from xdsl.utils.exceptions import PassFailedException

from deplodock.backend.cuda_source import kernels_text
from deplodock.backend.nvcc import compile_cubin, nvcc_available
from deplodock.dialects import cuda, kernel, make_context, tile
from deplodock.passes.pipelines import lower
from deplodock.passes.tile.unroll import UNROLL, TileUnrollPass
from tests.helpers import parse, random_inputs, run

NEST = """
tile.kernel @nest(%x: memref<6x4x8xf32>, %y: memref<6x4xf32>) {
  tile.grid %b to 6 {
    tile.threads %t to 32 {
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0.000000e+00 : f32
      tile.for %i = %c0 to 4 {
        %s = tile.for %j = %c0 to 8 step 2 iter_args(%a = %zero) -> (f32) {
          %v = tile.load %x[%b, %i, %j] : memref<6x4x8xf32>
          %n = arith.addf %a, %v : f32
          tile.yield %n : f32
        }
        tile.store %s, %y[%b, %i] : memref<6x4xf32>
      }
    }
  }
  tile.return
}
func.func @forward(%x: memref<6x4x8xf32>) -> memref<6x4xf32> {
  %y = tile.alloc : memref<6x4xf32>
  tile.launch @nest(%x, %y) : (memref<6x4x8xf32>, memref<6x4xf32>) -> ()
  func.return %y : memref<6x4xf32>
}
"""


def marked(module: ModuleOp, loop_type: type = tile.ForOp) -> list[str]:
    """The induction variable names of the loops marked `unroll`, in program order."""
    return [
        op.induction_var.name_hint or "?"
        for op in module.walk()
        if isinstance(op, loop_type) and UNROLL in op.attributes
    ]


def knob(module: ModuleOp) -> int:
    kernel_op = next(op for op in module.ops if isinstance(op, tile.KernelOp))
    assert kernel_op.schedule is not None
    value = kernel_op.schedule.data[UNROLL]
    assert isinstance(value, IntegerAttr)
    return value.value.data


@pytest.mark.parametrize(("max_trips", "expected"), [(64, ["i", "j"]), (8, ["j"]), (3, [])])
def test_marks_nests_up_to_max_trips_and_computes_the_same(
    max_trips: int, expected: list[str]
) -> None:
    module = parse(NEST)
    (x,) = random_inputs(module, seed=0)
    (before,) = run(module, x)
    TileUnrollPass(max_trips=max_trips).apply(make_context(), module)
    module.verify()
    assert marked(module) == expected  # 4 x 4 = 16 copies: both up to 16, inner (4) up to 8
    assert knob(module) == max_trips
    (after,) = run(module, x)
    np.testing.assert_array_equal(after, before)
    np.testing.assert_allclose(after, x.sum(axis=2, where=np.arange(8) % 2 == 0), rtol=1e-6)


def test_the_mark_reaches_kernel_for_and_the_cuda_c() -> None:
    module = parse(NEST)
    (x,) = random_inputs(module, seed=1)
    (reference,) = run(module, x)
    TileUnrollPass().apply(make_context(), module)
    lower(module, "kernel", start="tile")
    assert marked(module, kernel.ForOp) == ["i", "j"]
    (at_kernel,) = run(module, x)
    lower(module, "cuda", start="kernel")
    source = str(module)
    assert source.count("#pragma unroll") == 2
    (at_cuda,) = run(module, x)
    np.testing.assert_array_equal(at_kernel, reference)
    np.testing.assert_allclose(at_cuda, reference, rtol=1e-6)
    if nvcc_available():  # and nvcc takes the pragma (no warning about an unknown one)
        kernels = [op for op in module.ops if isinstance(op, cuda.KernelOp)]
        result = compile_cubin(kernels_text(kernels), arch="sm_90")
        assert result.cubin and "pragma" not in result.log


def test_a_replayed_schedule_wins_over_the_option() -> None:
    module = parse(NEST)
    kernel_op = next(op for op in module.ops if isinstance(op, tile.KernelOp))
    kernel_op.schedule = DictionaryAttr({UNROLL: IntegerAttr(0, 64)})
    TileUnrollPass(max_trips=64).apply(make_context(), module)
    assert marked(module) == [] and knob(module) == 0
    kernel_op.schedule = DictionaryAttr({UNROLL: IntegerAttr(4, 64)})
    TileUnrollPass(max_trips=64).apply(make_context(), module)
    assert marked(module) == ["j"] and knob(module) == 4


def test_a_negative_knob_is_refused() -> None:
    module = parse(NEST)
    with pytest.raises(PassFailedException, match="unroll -1 must be 0"):
        TileUnrollPass(max_trips=-1).apply(make_context(), module)
