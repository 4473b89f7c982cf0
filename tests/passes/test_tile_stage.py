"""The tile stage on hand-written loop kernels: `convert-loop-to-tile` and the four baseline
scheduling passes (`passes/tile/`). After *every* pass the tile program must compute what the
loop program computes (loop interpreter = reference) on random inputs, and at the end what
numpy computes in float64 where the kernel is a known op."""

from __future__ import annotations

import re

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import make_context, tile
from deplodock.passes.convert_loop_to_tile import ConvertLoopToTilePass
from deplodock.passes.tile.cooperative_reduce import TileCooperativeReducePass
from deplodock.passes.tile.grid_stride import TileGridStridePass
from deplodock.passes.tile.loops_to_threads import TileLoopsToThreadsPass
from deplodock.passes.tile.rows_to_blocks import TileRowsToBlocksPass
from tests.helpers import parse, random_inputs, rel_err, run


def program(kernel: str, n_out: int = 1) -> str:
    """`kernel` plus a `@forward` that passes its inputs and allocates its outputs."""
    name = re.search(r"loop\.kernel @(\w+)\(", kernel).group(1)  # type: ignore[union-attr]
    args = re.findall(r"%(\w+): (memref<[^>]*>)", kernel.split("{")[0])
    ins, outs = args[: len(args) - n_out], args[len(args) - n_out :]
    sig = ", ".join(f"%{n}: {t}" for n, t in ins)
    allocs = "\n".join(f"    %{n} = loop.alloc : {t}" for n, t in outs)
    types = ", ".join(t for _, t in args)
    names = ", ".join(f"%{n}" for n, _ in args)
    results = ", ".join(f"%{n}" for n, _ in outs)
    result_types = ", ".join(t for _, t in outs)
    return f"""builtin.module {{
{kernel}
  func.func @forward({sig}) -> ({result_types}) {{
{allocs}
    loop.launch @{name}({names}) : ({types}) -> ()
    func.return {results} : {result_types}
  }}
}}"""


def tile_passes(block_size: int = 256, max_blocks: int = 1024) -> list[ModulePass]:
    """The `tile` stage with the block size capped at `block_size` (both mappings)."""
    return [
        ConvertLoopToTilePass(),
        TileGridStridePass(threads=block_size, max_blocks=max_blocks),
        TileRowsToBlocksPass(),
        TileLoopsToThreadsPass(max_threads=block_size),
        TileCooperativeReducePass(),
    ]


def lower_and_compare(text: str, seed: int = 0, **options: int) -> tuple[ModuleOp, list]:
    """Runs the loop program, then the tile program after each pass of the tile stage, on
    the same random inputs; returns the scheduled tile module and the last outputs."""
    module = parse(text)
    inputs = random_inputs(module, seed)
    reference = run(module, *inputs)
    for tile_pass in tile_passes(**options):
        tile_pass.apply(make_context(), module)
        module.verify()
        outputs = run(module, *inputs)
        for out, ref in zip(outputs, reference, strict=True):
            assert not np.isnan(out).any(), f"after {tile_pass.name}: an element was not written"
            assert rel_err(out, ref.astype(np.float64)) <= 1e-5, f"after {tile_pass.name}"
    assert not [op for op in module.walk() if op.dialect_name() == "loop"]
    return module, [inputs, outputs]


def grid_and_threads(module: ModuleOp) -> tuple[int, int]:
    kernel = next(op for op in module.ops if isinstance(op, tile.KernelOp))
    threads = next(op for op in kernel.walk() if isinstance(op, tile.ThreadsOp))
    return kernel.grid.count, threads.count


ELEMENTWISE = """
  loop.kernel @add_exp(%a: memref<10x30xf32>, %b: memref<30xf32>, %o: memref<10x30xf32>) {
    loop.for %i = 0 to 10 {
      loop.for %j = 0 to 30 {
        %av = loop.load %a[%i, %j] : memref<10x30xf32>
        %bv = loop.load %b[%j] : memref<30xf32>
        %s = arith.addf %av, %bv : f32
        %e = math.exp %s : f32
        loop.store %e, %o[%i, %j] : memref<10x30xf32>
      }
    }
    loop.return
  }"""


@pytest.mark.parametrize(("block_size", "max_blocks"), [(256, 1024), (32, 2), (64, 1)])
def test_elementwise_grid_stride(block_size: int, max_blocks: int):
    module, (inputs, (out,)) = lower_and_compare(
        program(ELEMENTWISE), block_size=block_size, max_blocks=max_blocks
    )
    a, b = inputs
    assert rel_err(out, np.exp(a.astype(np.float64) + b)) <= 1e-5
    assert grid_and_threads(module) == (min(-(-300 // block_size), max_blocks), block_size)


INDEX_MAPS = """
  loop.kernel @maps(%a: memref<3x8xf32>, %t: memref<8x3xf32>, %r: memref<4x6xf32>) {
    %c6 = arith.constant 6 : index
    %c8 = arith.constant 8 : index
    loop.for %i = 0 to 8 {
      loop.for %j = 0 to 3 {
        %v = loop.load %a[%j, %i] : memref<3x8xf32>
        loop.store %v, %t[%i, %j] : memref<8x3xf32>
      }
    }
    loop.for %i = 0 to 4 {
      %row = arith.muli %i, %c6 : index
      loop.for %j = 0 to 6 {
        %lin = arith.addi %row, %j : index
        %p = arith.floordivsi %lin, %c8 : index
        %q = arith.remsi %lin, %c8 : index
        %v = loop.load %a[%p, %q] : memref<3x8xf32>
        loop.store %v, %r[%i, %j] : memref<4x6xf32>
      }
    }
    loop.return
  }"""


def test_index_maps_transpose_and_reshape_as_sibling_nests():
    _, ([a], (t, r)) = lower_and_compare(program(INDEX_MAPS, n_out=2))
    assert np.array_equal(t, a.T) and np.array_equal(r, a.reshape(4, 6))


CONCAT = """
  loop.kernel @cat(%a: memref<4x8xf32>, %b: memref<4x5xf32>, %o: memref<4x13xf32>) {
    loop.for %i = 0 to 4 {
      loop.for %j = 0 to 8 {
        %v = loop.load %a[%i, %j] : memref<4x8xf32>
        loop.store %v, %o[%i, %j] : memref<4x13xf32>
      }
    }
    %c8 = arith.constant 8 : index
    loop.for %i = 0 to 4 {
      loop.for %j = 8 to 13 {
        %jb = arith.subi %j, %c8 : index
        %v = loop.load %b[%i, %jb] : memref<4x5xf32>
        loop.store %v, %o[%i, %j] : memref<4x13xf32>
      }
    }
    loop.return
  }"""


def test_concat_sibling_nests_with_offset_lower_bound():
    _, ([a, b], (o,)) = lower_and_compare(program(CONCAT), block_size=32)
    assert np.array_equal(o, np.concatenate([a, b], axis=1))


def test_scalar_kernel_without_loops():
    text = """
  loop.kernel @neg(%a: memref<1xf32>, %o: memref<1xf32>) {
    %c0 = arith.constant 0 : index
    %v = loop.load %a[%c0] : memref<1xf32>
    %n = arith.negf %v : f32
    loop.store %n, %o[%c0] : memref<1xf32>
    loop.return
  }"""
    module, _ = lower_and_compare(program(text))
    assert grid_and_threads(module) == (1, 32)


REDUCE_ROWS = """
  loop.kernel @sum_max(%x: memref<5x37xf32>, %s: memref<5x1xf32>, %m: memref<5x1xf32>) {
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.000000e+00 : f32
    %ninf = arith.constant 0xFF800000 : f32
    loop.for %i = 0 to 5 {
      %sum, %max = loop.for %k = 0 to 37 iter_args(%a = %zero, %b = %ninf) -> (f32, f32) {
        %v = loop.load %x[%i, %k] : memref<5x37xf32>
        %a2 = arith.addf %a, %v : f32
        %b2 = arith.maximumf %b, %v : f32
        loop.yield %a2, %b2 : f32, f32
      }
      loop.store %sum, %s[%i, %c0] : memref<5x1xf32>
      loop.store %max, %m[%i, %c0] : memref<5x1xf32>
    }
    loop.return
  }"""


def test_row_reduction_two_results():
    module, ([x], (s, m)) = lower_and_compare(program(REDUCE_ROWS, n_out=2))
    assert rel_err(s[:, 0], x.astype(np.float64).sum(1)) <= 1e-5
    assert np.array_equal(m[:, 0], x.max(1))
    assert grid_and_threads(module) == (5, 64)
    combines = [op.kind.data for op in module.walk() if isinstance(op, tile.CombineOp)]
    assert combines == ["add", "max"]


def test_column_reduction_and_non_identity_init():
    text = """
  loop.kernel @colsum(%x: memref<6x40xf32>, %o: memref<1x40xf32>) {
    %c0 = arith.constant 0 : index
    %init = arith.constant 1.500000e+00 : f32
    loop.for %j = 0 to 40 {
      %s = loop.for %i = 0 to 6 iter_args(%a = %init) -> (f32) {
        %v = loop.load %x[%i, %j] : memref<6x40xf32>
        %a2 = arith.addf %v, %a : f32
        loop.yield %a2 : f32
      }
      loop.store %s, %o[%c0, %j] : memref<1x40xf32>
    }
    loop.return
  }"""
    _, ([x], (o,)) = lower_and_compare(program(text))
    assert rel_err(o[0], x.astype(np.float64).sum(0) + 1.5) <= 1e-5


def test_full_reduction_flattens_the_reduce_nest():
    text = """
  loop.kernel @total(%x: memref<7x9xf32>, %o: memref<1x1xf32>) {
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.000000e+00 : f32
    %s = loop.for %i = 0 to 7 iter_args(%a = %zero) -> (f32) {
      %s2 = loop.for %j = 0 to 9 iter_args(%b = %a) -> (f32) {
        %v = loop.load %x[%i, %j] : memref<7x9xf32>
        %b2 = arith.addf %b, %v : f32
        loop.yield %b2 : f32
      }
      loop.yield %s2 : f32
    }
    loop.store %s, %o[%c0, %c0] : memref<1x1xf32>
    loop.return
  }"""
    module, ([x], (o,)) = lower_and_compare(program(text))
    assert rel_err(o, x.astype(np.float64).sum(keepdims=True)) <= 1e-5
    assert grid_and_threads(module) == (1, 64)
    strided = [op for op in module.walk() if isinstance(op, tile.ForOp)]
    assert len(strided) == 1 and strided[0].upper == 63


def test_non_plain_reduction_stays_serial_per_thread():
    text = """
  loop.kernel @decay(%x: memref<3x20xf32>, %o: memref<3xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    %half = arith.constant 5.000000e-01 : f32
    loop.for %i = 0 to 3 {
      %s = loop.for %k = 0 to 20 iter_args(%a = %zero) -> (f32) {
        %v = loop.load %x[%i, %k] : memref<3x20xf32>
        %h = arith.mulf %a, %half : f32
        %a2 = arith.addf %h, %v : f32
        loop.yield %a2 : f32
      }
      loop.store %s, %o[%i] : memref<3xf32>
    }
    loop.return
  }"""
    module, _ = lower_and_compare(program(text))
    assert not [op for op in module.walk() if isinstance(op, tile.CombineOp)]


RMS_NORM = """
  loop.kernel @rms_norm(%x: memref<1x6x100xf32>, %w: memref<100xf32>, %y: memref<1x6x100xf32>) {
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.000000e+00 : f32
    %n = arith.constant 1.000000e+02 : f32
    %eps = arith.constant 9.99999997e-07 : f32
    loop.for %i = 0 to 6 {
      %sum = loop.for %k = 0 to 100 iter_args(%acc = %zero) -> (f32) {
        %v = loop.load %x[%c0, %i, %k] : memref<1x6x100xf32>
        %sq = arith.mulf %v, %v : f32
        %a = arith.addf %acc, %sq : f32
        loop.yield %a : f32
      }
      %mean = arith.divf %sum, %n : f32
      %me = arith.addf %mean, %eps : f32
      %r = math.rsqrt %me : f32
      loop.for %j = 0 to 100 {
        %xv = loop.load %x[%c0, %i, %j] : memref<1x6x100xf32>
        %wv = loop.load %w[%j] : memref<100xf32>
        %s = arith.mulf %xv, %r : f32
        %o = arith.mulf %s, %wv : f32
        loop.store %o, %y[%c0, %i, %j] : memref<1x6x100xf32>
      }
    }
    loop.return
  }"""


def test_fused_rms_norm():
    module, ([x, w], (y,)) = lower_and_compare(program(RMS_NORM))
    x64 = x.astype(np.float64)
    assert rel_err(y, x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6) * w) <= 1e-5
    assert grid_and_threads(module) == (6, 128)


SOFTMAX = """
  loop.kernel @softmax(%x: memref<4x50xf32>, %y: memref<4x50xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    %ninf = arith.constant 0xFF800000 : f32
    loop.for %i = 0 to 4 {
      %m = loop.for %k = 0 to 50 iter_args(%a = %ninf) -> (f32) {
        %v = loop.load %x[%i, %k] : memref<4x50xf32>
        %a2 = arith.maximumf %a, %v : f32
        loop.yield %a2 : f32
      }
      %s = loop.for %k = 0 to 50 iter_args(%a = %zero) -> (f32) {
        %v = loop.load %x[%i, %k] : memref<4x50xf32>
        %d = arith.subf %v, %m : f32
        %e = math.exp %d : f32
        %a2 = arith.addf %a, %e : f32
        loop.yield %a2 : f32
      }
      loop.for %j = 0 to 50 {
        %v = loop.load %x[%i, %j] : memref<4x50xf32>
        %d = arith.subf %v, %m : f32
        %e = math.exp %d : f32
        %q = arith.divf %e, %s : f32
        loop.store %q, %y[%i, %j] : memref<4x50xf32>
      }
    }
    loop.return
  }"""


def test_fused_softmax():
    _, ([x], (y,)) = lower_and_compare(program(SOFTMAX), block_size=32)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    assert rel_err(y, e / e.sum(1, keepdims=True)) <= 1e-5


MATMUL_RELU = """
  loop.kernel @mm(%x: memref<2x5x24xf32>, %b: memref<24xf32>, %w: memref<24x7xf32>,
                  %o: memref<2x5x7xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    loop.for %p = 0 to 2 {
      loop.for %m = 0 to 5 {
        loop.for %n = 0 to 7 {
          %acc = loop.for %k = 0 to 24 iter_args(%a = %zero) -> (f32) {
            %xv = loop.load %x[%p, %m, %k] : memref<2x5x24xf32>
            %bv = loop.load %b[%k] : memref<24xf32>
            %s = arith.addf %xv, %bv : f32
            %wv = loop.load %w[%k, %n] : memref<24x7xf32>
            %t = arith.mulf %s, %wv : f32
            %a2 = arith.addf %a, %t : f32
            loop.yield %a2 : f32
          }
          %r = arith.maximumf %acc, %zero : f32
          loop.store %r, %o[%p, %m, %n] : memref<2x5x7xf32>
        }
      }
    }
    loop.return
  }"""


def test_fused_matmul_relu_rows_are_output_elements():
    module, ([x, b, w], (o,)) = lower_and_compare(program(MATMUL_RELU))
    ref = np.maximum((x.astype(np.float64) + b) @ w, 0)
    assert rel_err(o, ref) <= 1e-5
    assert grid_and_threads(module) == (70, 32)


def test_free_loop_with_inner_reduce_stays_serial_inside_strided_loop():
    text = """
  loop.kernel @rowdot(%x: memref<3x4x10xf32>, %o: memref<3x4xf32>, %f: memref<3xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    loop.for %i = 0 to 3 {
      loop.for %j = 0 to 4 {
        %s = loop.for %k = 0 to 10 iter_args(%a = %zero) -> (f32) {
          %v = loop.load %x[%i, %j, %k] : memref<3x4x10xf32>
          %a2 = arith.addf %a, %v : f32
          loop.yield %a2 : f32
        }
        loop.store %s, %o[%i, %j] : memref<3x4xf32>
      }
      %c0 = arith.constant 0 : index
      %v0 = loop.load %x[%i, %c0, %c0] : memref<3x4x10xf32>
      loop.store %v0, %f[%i] : memref<3xf32>
    }
    loop.return
  }"""
    module, ([x], (o, f)) = lower_and_compare(program(text, n_out=2))
    assert rel_err(o, x.astype(np.float64).sum(2)) <= 1e-5
    assert np.array_equal(f, x[:, 0, 0])
    assert grid_and_threads(module) == (3, 32)
    loops = [op for op in module.walk() if isinstance(op, tile.ForOp)]
    assert [(op.upper, op.step_value, len(op.inits)) for op in loops] == [(4, 32, 0), (10, 1, 1)]


def test_sibling_nest_reading_an_earlier_output_is_rejected():
    text = """
  loop.kernel @chain(%a: memref<8xf32>, %t: memref<8xf32>, %o: memref<8xf32>) {
    loop.for %i = 0 to 8 {
      %v = loop.load %a[%i] : memref<8xf32>
      loop.store %v, %t[%i] : memref<8xf32>
    }
    loop.for %i = 0 to 8 {
      %v = loop.load %t[%i] : memref<8xf32>
      loop.store %v, %o[%i] : memref<8xf32>
    }
    loop.return
  }"""
    module = parse(program(text, n_out=2))
    ConvertLoopToTilePass().apply(make_context(), module)
    with pytest.raises(PassFailedException, match="reads %t after a sibling loop nest writes it"):
        TileGridStridePass().apply(make_context(), module)


def test_bad_block_size_is_rejected():
    module = parse(program(ELEMENTWISE))
    ConvertLoopToTilePass().apply(make_context(), module)
    with pytest.raises(PassFailedException, match="threads 100 must be a multiple of 32"):
        TileGridStridePass(threads=100).apply(make_context(), module)


# --- the unscheduled form, the knobs, and re-running ----------------------------------------


ALL_PROGRAMS = {
    "elementwise": program(ELEMENTWISE),
    "index_maps": program(INDEX_MAPS, n_out=2),
    "concat": program(CONCAT),
    "rows": program(REDUCE_ROWS, n_out=2),
    "rms_norm": program(RMS_NORM),
    "softmax": program(SOFTMAX),
    "matmul_relu": program(MATMUL_RELU),
}


@pytest.mark.parametrize("name", list(ALL_PROGRAMS))
def test_unscheduled_kernel_is_one_warp_running_everything(name: str):
    module = parse(ALL_PROGRAMS[name])
    ConvertLoopToTilePass().apply(make_context(), module)
    assert grid_and_threads(module) == (1, 32)
    kernel = next(op for op in module.ops if isinstance(op, tile.KernelOp))
    assert kernel.schedule is None
    loops = [op for op in kernel.walk() if isinstance(op, tile.ForOp)]
    assert loops and all(isinstance(loop.lb.owner, arith.ConstantOp) for loop in loops)


@pytest.mark.parametrize("name", list(ALL_PROGRAMS))
def test_passes_record_their_knobs_and_rerunning_changes_nothing(name: str):
    module = parse(ALL_PROGRAMS[name])
    for tile_pass in tile_passes():
        tile_pass.apply(make_context(), module)
    kernel = next(op for op in module.ops if isinstance(op, tile.KernelOp))
    assert kernel.schedule is not None
    assert kernel.schedule.data["threads"].value.data == grid_and_threads(module)[1]
    once = str(module)
    for tile_pass in tile_passes()[1:]:
        tile_pass.apply(make_context(), module)
    assert str(module) == once


def test_a_schedule_on_the_loop_kernel_is_replayed():
    """`schedule = {threads = 64}` written on the loop kernel wins over the pass defaults."""
    text = program(RMS_NORM).replace(
        "loop.kernel @rms_norm(%x: memref<1x6x100xf32>, %w: memref<100xf32>, "
        "%y: memref<1x6x100xf32>) {",
        "loop.kernel @rms_norm(%x: memref<1x6x100xf32>, %w: memref<100xf32>, "
        "%y: memref<1x6x100xf32>) attributes {schedule = {threads = 64 : i64}} {",
    )
    assert text != program(RMS_NORM)
    module, _ = lower_and_compare(text)
    assert grid_and_threads(module) == (6, 64)
    steps = {op.step_value for op in module.walk() if isinstance(op, tile.ForOp)}
    assert steps == {64}


def test_a_bad_knob_is_one_line_naming_the_kernel():
    module = parse(program(RMS_NORM))
    ConvertLoopToTilePass().apply(make_context(), module)
    kernel = next(op for op in module.ops if isinstance(op, tile.KernelOp))
    kernel.schedule = DictionaryAttr({"threads": IntegerAttr(48, 64)})
    with pytest.raises(PassFailedException, match="@rms_norm: threads 48 must be a multiple"):
        TileLoopsToThreadsPass().apply(make_context(), module)
