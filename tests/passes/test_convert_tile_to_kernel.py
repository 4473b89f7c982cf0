"""`convert-tile-to-kernel`: structure of the materialized kernels, and its refusals.

Numerics of whole kernels are in tests/interpreters/test_kernel_interpreter.py; here we check
what the pass builds (launch configuration, shuffles, shared partials, barriers, guards) and
run the few shapes that only this file builds (several threads regions, integer combines).
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import kernel, make_context
from deplodock.passes.convert_tile_to_kernel import ConvertTileToKernelPass
from tests.helpers import parse, run


def lower(text: str) -> ModuleOp:
    module = parse(text)
    ConvertTileToKernelPass().apply(make_context(), module)
    module.verify()
    return module


def ops_of(module: ModuleOp, op_type: type[Operation]) -> list[Operation]:
    return [op for op in module.walk() if isinstance(op, op_type)]


def combine_kernel(threads: int, kinds: tuple[str, ...], element: str = "f32") -> str:
    """One row per block; each `kind` reduces the per-thread values into out[b, i]."""
    combines = "\n".join(
        f"""      %r{i} = tile.combine {kind} %v : {element}
      %c{i} = arith.constant {i} : index
      tile.store %r{i}, %out[%b, %c{i}] : memref<2x{len(kinds)}x{element}>"""
        for i, kind in enumerate(kinds)
    )
    n = len(kinds)
    return f"""
tile.kernel @k(%x: memref<2x{threads}x{element}>, %out: memref<2x{n}x{element}>) {{
  tile.grid %b to 2 {{
    tile.threads %t to {threads} {{
      %v = tile.load %x[%b, %t] : memref<2x{threads}x{element}>
{combines}
    }}
  }}
  tile.return
}}
func.func @forward(%x: memref<2x{threads}x{element}>) -> memref<2x{n}x{element}> {{
  %out = tile.alloc : memref<2x{n}x{element}>
  tile.launch @k(%x, %out) : (memref<2x{threads}x{element}>, memref<2x{n}x{element}>) -> ()
  func.return %out : memref<2x{n}x{element}>
}}
"""


def test_launch_configuration_and_no_tile_op_left() -> None:
    module = lower(combine_kernel(256, ("add",)))
    (func,) = ops_of(module, kernel.FuncOp)
    assert isinstance(func, kernel.FuncOp)
    assert (func.grid_size, func.block_size) == (2, 256)
    assert not any(op.dialect_name() == "tile" for op in module.walk())
    assert len(ops_of(module, kernel.AllocOp)) == len(ops_of(module, kernel.LaunchOp)) == 1


def test_multi_warp_combines_share_one_partials_array() -> None:
    module = lower(combine_kernel(256, ("add", "max", "min", "mul")))
    shuffles = ops_of(module, kernel.ShflXorOp)
    assert [s.mask.value.data for s in shuffles] == [16, 8, 4, 2, 1] * 4
    (red,) = ops_of(module, kernel.SharedAllocOp)
    assert str(red.results[0].type) == "memref<8xf32, 3 : i64>"
    assert red.results[0].name_hint == "red"
    assert len(ops_of(module, kernel.BarrierOp)) == 8
    assert len(ops_of(module, arith.MaximumfOp)) == len(ops_of(module, arith.MinimumfOp)) == 6


def test_single_warp_combine_needs_no_shared_memory() -> None:
    module = lower(combine_kernel(32, ("add",)))
    assert len(ops_of(module, kernel.ShflXorOp)) == 5
    assert not ops_of(module, kernel.SharedAllocOp)
    assert not ops_of(module, kernel.BarrierOp)


def test_uniform_stores_are_guarded_by_thread_zero() -> None:
    module = lower(combine_kernel(64, ("add", "max")))
    out_stores = [s for s in ops_of(module, kernel.StoreOp) if s.memref.name_hint == "out"]
    assert len(out_stores) == 2
    for store in out_stores:
        guard = store.parent_op()
        assert isinstance(guard, kernel.IfOp)
        assert guard.cond.name_hint == "is_thread0"


@pytest.mark.parametrize(
    ("threads", "kinds", "element"),
    [(256, ("add", "max", "min", "mul"), "f32"), (64, ("add", "max", "min"), "i32")],
)
def test_combines_match_the_tile_level(threads: int, kinds: tuple[str, ...], element: str) -> None:
    rng = np.random.default_rng(3)
    if element == "f32":
        x = rng.uniform(0.9, 1.1, (2, threads)).astype(np.float32)  # keeps `mul` in range
    else:
        x = rng.integers(-1000, 1000, (2, threads)).astype(np.int32)
    (expected,) = run(parse(combine_kernel(threads, kinds, element)), x)
    (got,) = run(lower(combine_kernel(threads, kinds, element)), x)
    reduce = {"add": np.sum, "max": np.max, "min": np.min, "mul": np.prod}
    ref = np.stack([reduce[k](x.astype(np.float64), axis=1) for k in kinds], axis=1)
    assert float(np.max(np.abs(got - expected)) / np.max(np.abs(expected))) <= 1e-5
    assert float(np.max(np.abs(got - ref)) / np.max(np.abs(ref))) <= 1e-5


TWO_PHASES = """
tile.kernel @two_phases(%x: memref<128xf32>, %tmp: memref<128xf32>, %y: memref<128xf32>) {
  tile.grid %b to 1 {
    tile.threads %t to 128 {
      %v = tile.load %x[%t] : memref<128xf32>
      %two = arith.constant 2.000000e+00 : f32
      %d = arith.mulf %v, %two : f32
      tile.store %d, %tmp[%t] : memref<128xf32>
    }
    tile.threads %u to 128 {
      %c127 = arith.constant 127 : index
      %r = arith.subi %c127, %u : index
      %w = tile.load %tmp[%r] : memref<128xf32>
      tile.store %w, %y[%u] : memref<128xf32>
    }
  }
  tile.return
}
func.func @forward(%x: memref<128xf32>) -> memref<128xf32> {
  %tmp = tile.alloc : memref<128xf32>
  %y = tile.alloc : memref<128xf32>
  tile.launch @two_phases(%x, %tmp, %y) : (memref<128xf32>, memref<128xf32>, memref<128xf32>) -> ()
  func.return %y : memref<128xf32>
}
"""


def test_consecutive_threads_regions_are_separated_by_a_barrier() -> None:
    module = lower(TWO_PHASES)
    assert len(ops_of(module, kernel.BarrierOp)) == 1
    assert len(ops_of(module, kernel.ThreadIdOp)) == 1
    assert not ops_of(module, kernel.BlockIdOp)  # %b is unused
    x = np.random.default_rng(4).standard_normal(128).astype(np.float32)
    (y,) = run(module, x)
    np.testing.assert_array_equal(y, (2 * x)[::-1])


STRIDED_COMBINE = """
tile.kernel @bad(%x: memref<256xf32>, %y: memref<256xf32>) {
  tile.grid %b to 1 {
    tile.threads %t to 64 {
      tile.for %k = %t to 256 step 64 {
        %v = tile.load %x[%k] : memref<256xf32>
        %s = tile.combine add %v : f32
        tile.store %s, %y[%k] : memref<256xf32>
      }
    }
  }
  tile.return
}
"""


def test_combine_in_a_thread_strided_loop_is_refused() -> None:
    module = parse(STRIDED_COMBINE)
    with pytest.raises(PassFailedException, match=r"tile.combine: inside a thread-strided loop"):
        ConvertTileToKernelPass().apply(make_context(), module)


def test_module_without_tile_ops_is_left_alone() -> None:
    text = """
kernel.func @k(%x: memref<32xf32>) grid 1 block 32 {
  kernel.return
}
"""
    module = parse(text)
    before = str(module)
    ConvertTileToKernelPass().apply(make_context(), module)
    assert str(module) == before
