"""The loop interpreter on hand-written kernels, against float64 numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from deplodock.interpreters import make_interpreter
from tests.helpers import parse, rel_err, run

RNG = np.random.default_rng(7)


RMS_NORM = """
loop.kernel @rms_norm(%x: memref<1x8x32xf32>, %w: memref<32xf32>, %y: memref<1x8x32xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.000000e+00 : f32
  %inv_n = arith.constant 3.125000e-02 : f32
  %eps = arith.constant 1.000000e-06 : f32
  loop.for %i = 0 to 8 {
    %sum = loop.for %k = 0 to 32 iter_args(%acc = %zero) -> (f32) {
      %v = loop.load %x[%c0, %i, %k] : memref<1x8x32xf32>
      %sq = arith.mulf %v, %v : f32
      %n = arith.addf %acc, %sq : f32
      loop.yield %n : f32
    }
    %mean = arith.mulf %sum, %inv_n : f32
    %var = arith.addf %mean, %eps : f32
    %r = math.rsqrt %var : f32
    loop.for %j = 0 to 32 {
      %a = loop.load %x[%c0, %i, %j] : memref<1x8x32xf32>
      %b = loop.load %w[%j] : memref<32xf32>
      %o = arith.mulf %a, %r : f32
      %p = arith.mulf %o, %b : f32
      loop.store %p, %y[%c0, %i, %j] : memref<1x8x32xf32>
    }
  }
  loop.return
}
func.func @forward(%x: memref<1x8x32xf32>, %w: memref<32xf32>) -> memref<1x8x32xf32> {
  %y = loop.alloc : memref<1x8x32xf32>
  loop.launch @rms_norm(%x, %w, %y) : (memref<1x8x32xf32>, memref<32xf32>, memref<1x8x32xf32>) -> ()
  func.return %y : memref<1x8x32xf32>
}
"""


def test_rms_norm_free_and_reduce_loops() -> None:
    x = RNG.standard_normal((1, 8, 32)).astype(np.float32)
    w = RNG.standard_normal(32).astype(np.float32)
    (y,) = run(RMS_NORM, x, w)
    x64 = x.astype(np.float64)
    ref = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6) * w
    assert y.dtype == np.float32 and y.shape == (1, 8, 32)
    assert rel_err(y, ref) <= 1e-5


MATMUL_T = """
loop.kernel @mm(%a: memref<6x5xf32>, %b: memref<5x7xf32>, %c: memref<7x6xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  loop.for %i = 0 to 6 {
    loop.for %j = 0 to 7 {
      %s = loop.for %k = 0 to 5 iter_args(%acc = %zero) -> (f32) {
        %x = loop.load %a[%i, %k] : memref<6x5xf32>
        %y = loop.load %b[%k, %j] : memref<5x7xf32>
        %m = arith.mulf %x, %y : f32
        %n = arith.addf %acc, %m : f32
        loop.yield %n : f32
      }
      loop.store %s, %c[%j, %i] : memref<7x6xf32>
    }
  }
  loop.return
}
func.func @forward(%a: memref<6x5xf32>, %b: memref<5x7xf32>) -> memref<7x6xf32> {
  %c = loop.alloc : memref<7x6xf32>
  loop.launch @mm(%a, %b, %c) : (memref<6x5xf32>, memref<5x7xf32>, memref<7x6xf32>) -> ()
  func.return %c : memref<7x6xf32>
}
"""


def test_matmul_with_transposed_store() -> None:
    a = RNG.standard_normal((6, 5)).astype(np.float32)
    b = RNG.standard_normal((5, 7)).astype(np.float32)
    (c,) = run(MATMUL_T, a, b)
    ref = (a.astype(np.float64) @ b.astype(np.float64)).T
    assert rel_err(c, ref) <= 1e-5


STRIDED = """
loop.kernel @k(%x: memref<10xf32>, %y: memref<10xf32>) {
  %two = arith.constant 2 : index
  loop.for %i = 1 to 10 step 3 {
    %v = loop.load %x[%i] : memref<10xf32>
    %n = arith.negf %v : f32
    loop.store %n, %y[%i] : memref<10xf32>
  }
  loop.return
}
func.func @forward(%x: memref<10xf32>) -> memref<10xf32> {
  %y = loop.alloc : memref<10xf32>
  loop.launch @k(%x, %y) : (memref<10xf32>, memref<10xf32>) -> ()
  func.return %y : memref<10xf32>
}
"""


def test_strided_loop_and_nan_poisoned_alloc() -> None:
    x = RNG.standard_normal(10).astype(np.float32)
    (y,) = run(STRIDED, x)
    written = np.arange(1, 10, 3)
    np.testing.assert_array_equal(y[written], -x[written])
    others = np.setdiff1d(np.arange(10), written)
    assert np.isnan(y[others]).all()  # never written: the poison shows


FREE_IN_REDUCE = """
loop.kernel @k(%x: memref<4x4xf32>, %y: memref<4x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %s = loop.for %k = 0 to 4 iter_args(%acc = %zero) -> (f32) {
    loop.for %j = 0 to 4 {
      %w = loop.load %x[%k, %j] : memref<4x4xf32>
      %o = arith.addf %w, %acc : f32
      loop.store %o, %y[%k, %j] : memref<4x4xf32>
    }
    %d = loop.load %x[%k, %k] : memref<4x4xf32>
    %n = arith.addf %acc, %d : f32
    loop.yield %n : f32
  }
  loop.return
}
func.func @forward(%x: memref<4x4xf32>) -> memref<4x4xf32> {
  %y = loop.alloc : memref<4x4xf32>
  loop.launch @k(%x, %y) : (memref<4x4xf32>, memref<4x4xf32>) -> ()
  func.return %y : memref<4x4xf32>
}
"""


def test_free_loop_inside_reduce_loop() -> None:
    """Row k gets x[k, :] plus the running sum of the diagonal before k."""
    x = RNG.standard_normal((4, 4)).astype(np.float32)
    (y,) = run(FREE_IN_REDUCE, x)
    x64 = x.astype(np.float64)
    prefix = np.concatenate([[0.0], np.cumsum(np.diag(x64))[:-1]])
    assert rel_err(y, x64 + prefix[:, None]) <= 1e-5


TWO_KERNELS = """
loop.kernel @exp(%x: memref<3x4xf32>, %e: memref<3x4xf32>) {
  loop.for %i = 0 to 3 {
    loop.for %j = 0 to 4 {
      %v = loop.load %x[%i, %j] : memref<3x4xf32>
      %w = math.exp %v : f32
      loop.store %w, %e[%i, %j] : memref<3x4xf32>
    }
  }
  loop.return
}
loop.kernel @max(%e: memref<3x4xf32>, %m: memref<1x4xf32>) {
  %c0 = arith.constant 0 : index
  %ninf = arith.constant 0xFF800000 : f32
  loop.for %j = 0 to 4 {
    %r = loop.for %i = 0 to 3 iter_args(%acc = %ninf) -> (f32) {
      %v = loop.load %e[%i, %j] : memref<3x4xf32>
      %n = arith.maximumf %acc, %v : f32
      loop.yield %n : f32
    }
    loop.store %r, %m[%c0, %j] : memref<1x4xf32>
  }
  loop.return
}
func.func @forward(%x: memref<3x4xf32>) -> (memref<3x4xf32>, memref<1x4xf32>) {
  %e = loop.alloc : memref<3x4xf32>
  loop.launch @exp(%x, %e) : (memref<3x4xf32>, memref<3x4xf32>) -> ()
  %m = loop.alloc : memref<1x4xf32>
  loop.launch @max(%e, %m) : (memref<3x4xf32>, memref<1x4xf32>) -> ()
  func.return %e, %m : memref<3x4xf32>, memref<1x4xf32>
}
"""


def test_host_sequence_of_launches() -> None:
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    e, m = run(TWO_KERNELS, x)
    ref = np.exp(x.astype(np.float64))
    assert rel_err(e, ref) <= 1e-5
    assert rel_err(m, ref.max(0, keepdims=True)) <= 1e-5


def test_inputs_are_not_modified_and_missing_kernel_fails() -> None:
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    before = x.copy()
    run(TWO_KERNELS, x)
    np.testing.assert_array_equal(x, before)
    module = parse(TWO_KERNELS)
    interpreter = make_interpreter(module)
    next(op for op in module.ops if op.name == "loop.kernel").detach()
    with pytest.raises(Exception, match=r"no loop\.kernel named @exp"):
        interpreter.call_op("forward", (x,))
