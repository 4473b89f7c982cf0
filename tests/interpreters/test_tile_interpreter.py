"""The tile interpreter on hand-written tile-level programs, against numpy (float64)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.utils.exceptions import InterpretationError

from tests.helpers import parse, rel_err, run

RMS_NORM = """
tile.kernel @rms(%x: memref<1x6x100xf32>, %w: memref<100xf32>, %y: memref<1x6x100xf32>) {
  tile.grid %b to 6 {
    tile.threads %t to 64 {
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0.000000e+00 : f32
      %n = arith.constant 1.000000e+02 : f32
      %eps = arith.constant 9.99999997e-07 : f32
      %sum_p = tile.for %k = %t to 100 step 64 iter_args(%acc = %zero) -> (f32) {
        %v = tile.load %x[%c0, %b, %k] : memref<1x6x100xf32>
        %sq = arith.mulf %v, %v : f32
        %a = arith.addf %acc, %sq : f32
        tile.yield %a : f32
      }
      %sum = tile.combine add %sum_p : f32
      %mean = arith.divf %sum, %n : f32
      %me = arith.addf %mean, %eps : f32
      %r = math.rsqrt %me : f32
      tile.for %j = %t to 100 step 64 {
        %xv = tile.load %x[%c0, %b, %j] : memref<1x6x100xf32>
        %wv = tile.load %w[%j] : memref<100xf32>
        %s = arith.mulf %xv, %r : f32
        %o = arith.mulf %s, %wv : f32
        tile.store %o, %y[%c0, %b, %j] : memref<1x6x100xf32>
      }
    }
  }
  tile.return
}
func.func @forward(%x: memref<1x6x100xf32>, %w: memref<100xf32>) -> memref<1x6x100xf32> {
  %y = tile.alloc : memref<1x6x100xf32>
  tile.launch @rms(%x, %w, %y) : (memref<1x6x100xf32>, memref<100xf32>, memref<1x6x100xf32>) -> ()
  func.return %y : memref<1x6x100xf32>
}
"""


def test_rms_norm_cooperative_reduce_and_strided_store():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 6, 100)).astype(np.float32)
    w = rng.standard_normal(100).astype(np.float32)
    (y,) = run(parse(RMS_NORM), x, w)
    x64 = x.astype(np.float64)
    ref = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6) * w
    assert rel_err(y, ref) <= 1e-5


GRID_STRIDE = """
tile.kernel @add(%a: memref<10x30xf32>, %b: memref<30xf32>, %o: memref<10x30xf32>) {
  tile.grid %blk to 2 {
    tile.threads %t to 64 {
      %c64 = arith.constant 64 : index
      %c30 = arith.constant 30 : index
      %base = arith.muli %blk, %c64 : index
      %start = arith.addi %base, %t : index
      tile.for %lin = %start to 300 step 128 {
        %i = arith.floordivsi %lin, %c30 : index
        %j = arith.remsi %lin, %c30 : index
        %av = tile.load %a[%i, %j] : memref<10x30xf32>
        %bv = tile.load %b[%j] : memref<30xf32>
        %s = arith.addf %av, %bv : f32
        %e = math.exp %s : f32
        tile.store %e, %o[%i, %j] : memref<10x30xf32>
      }
    }
  }
  tile.return
}
func.func @forward(%a: memref<10x30xf32>, %b: memref<30xf32>) -> memref<10x30xf32> {
  %o = tile.alloc : memref<10x30xf32>
  tile.launch @add(%a, %b, %o) : (memref<10x30xf32>, memref<30xf32>, memref<10x30xf32>) -> ()
  func.return %o : memref<10x30xf32>
}
"""


def test_grid_stride_elementwise_covers_every_element():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((10, 30)).astype(np.float32)
    b = rng.standard_normal(30).astype(np.float32)
    (o,) = run(parse(GRID_STRIDE), a, b)
    assert not np.isnan(o).any()
    assert rel_err(o, np.exp(a.astype(np.float64) + b)) <= 1e-5


MAX_AND_SERIAL = """
tile.kernel @rowmax(%x: memref<3x40xf32>, %y: memref<3x2xf32>) {
  tile.grid %b to 3 {
    tile.threads %t to 32 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %ninf = arith.constant -3.40282347e+38 : f32
      %zero = arith.constant 0.000000e+00 : f32
      %m_p = tile.for %k = %t to 40 step 32 iter_args(%acc = %ninf) -> (f32) {
        %v = tile.load %x[%b, %k] : memref<3x40xf32>
        %a = arith.maximumf %acc, %v : f32
        tile.yield %a : f32
      }
      %m = tile.combine max %m_p : f32
      tile.store %m, %y[%b, %c0] : memref<3x2xf32>
      %s = tile.for %k = %c0 to 40 iter_args(%acc = %zero) -> (f32) {
        %v = tile.load %x[%b, %k] : memref<3x40xf32>
        %a = arith.addf %acc, %v : f32
        tile.yield %a : f32
      }
      tile.store %s, %y[%b, %c1] : memref<3x2xf32>
    }
  }
  tile.return
}
func.func @forward(%x: memref<3x40xf32>) -> memref<3x2xf32> {
  %y = tile.alloc : memref<3x2xf32>
  tile.launch @rowmax(%x, %y) : (memref<3x40xf32>, memref<3x2xf32>) -> ()
  func.return %y : memref<3x2xf32>
}
"""


def test_combine_max_and_serial_loop_with_uniform_store():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 40)).astype(np.float32)
    (y,) = run(parse(MAX_AND_SERIAL), x)
    ref = np.stack([x.max(1), x.astype(np.float64).sum(1)], axis=1)
    assert rel_err(y, ref) <= 1e-5


def test_out_of_bounds_load_names_buffer_and_op():
    bad = GRID_STRIDE.replace("%bv = tile.load %b[%j]", "%bv = tile.load %b[%i]")
    bad = bad.replace("memref<30xf32>", "memref<8xf32>")
    a = np.ones((10, 30), np.float32)
    with pytest.raises(InterpretationError, match=r"buffer %b in tile.load: index 8 out of bounds"):
        run(parse(bad), a, np.ones(8, np.float32))


def test_alloc_is_nan_filled_so_unwritten_elements_show():
    partial = GRID_STRIDE.replace("to 300 step 128", "to 290 step 128")
    (o,) = run(parse(partial), np.ones((10, 30), np.float32), np.ones(30, np.float32))
    assert np.isnan(o[9, 20:]).all() and not np.isnan(o[:9]).any()
