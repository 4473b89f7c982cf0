"""The kernel interpreter: materialized tile programs against the tile interpreter and numpy.

Each hand-written tile program runs on the tile interpreter (the reference), is lowered by
`convert-tile-to-kernel`, and runs again on the kernel interpreter (lock-step lanes, warp
shuffles, shared memory with barrier epochs). Both must match a float64 numpy reference.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import InterpretationError

from deplodock.dialects import make_context
from deplodock.passes.convert_tile_to_kernel import ConvertTileToKernelPass
from tests.helpers import parse, rel_err, run


def lower(module: ModuleOp) -> ModuleOp:
    ConvertTileToKernelPass().apply(make_context(), module)
    module.verify()
    assert not any(op.dialect_name() == "tile" for op in module.walk())
    return module


# An elementwise SiLU over 1000 elements: a grid-stride loop (start b * T + t, step G * T)
# with a ragged tail (1000 is not a multiple of 256).
SILU = """
tile.kernel @silu(%x: memref<1000xf32>, %y: memref<1000xf32>) {
  tile.grid %b to 4 {
    tile.threads %t to 64 {
      %c64 = arith.constant 64 : index
      %one = arith.constant 1.000000e+00 : f32
      %base = arith.muli %b, %c64 : index
      %start = arith.addi %base, %t : index
      tile.for %i = %start to 1000 step 256 {
        %v = tile.load %x[%i] : memref<1000xf32>
        %n = arith.negf %v : f32
        %e = math.exp %n : f32
        %d = arith.addf %one, %e : f32
        %o = arith.divf %v, %d : f32
        tile.store %o, %y[%i] : memref<1000xf32>
      }
    }
  }
  tile.return
}
func.func @forward(%x: memref<1000xf32>) -> memref<1000xf32> {
  %y = tile.alloc : memref<1000xf32>
  tile.launch @silu(%x, %y) : (memref<1000xf32>, memref<1000xf32>) -> ()
  func.return %y : memref<1000xf32>
}
"""


def silu_ref(x: np.ndarray) -> list[np.ndarray]:
    x = x.astype(np.float64)
    return [x / (1.0 + np.exp(-x))]


# RMSNorm over rows of 300 with 128 threads (4 warps): an add-combine through shared
# memory, and a per-row scale stored by one thread (no thread-dependent index).
RMS_NORM = """
tile.kernel @rms(%x: memref<5x300xf32>, %w: memref<300xf32>, %y: memref<5x300xf32>,
                 %s: memref<5xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  tile.grid %b to 5 {
    tile.threads %t to 128 {
      %n = arith.constant 3.000000e+02 : f32
      %eps = arith.constant 9.99999997e-07 : f32
      %sum_p = tile.for %k = %t to 300 step 128 iter_args(%acc = %zero) -> (f32) {
        %v = tile.load %x[%b, %k] : memref<5x300xf32>
        %sq = arith.mulf %v, %v : f32
        %a = arith.addf %acc, %sq : f32
        tile.yield %a : f32
      }
      %sum = tile.combine add %sum_p : f32
      %mean = arith.divf %sum, %n : f32
      %me = arith.addf %mean, %eps : f32
      %r = math.rsqrt %me : f32
      tile.store %r, %s[%b] : memref<5xf32>
      tile.for %j = %t to 300 step 128 {
        %xv = tile.load %x[%b, %j] : memref<5x300xf32>
        %wv = tile.load %w[%j] : memref<300xf32>
        %sc = arith.mulf %xv, %r : f32
        %o = arith.mulf %sc, %wv : f32
        tile.store %o, %y[%b, %j] : memref<5x300xf32>
      }
    }
  }
  tile.return
}
func.func @forward(%x: memref<5x300xf32>, %w: memref<300xf32>)
    -> (memref<5x300xf32>, memref<5xf32>) {
  %y = tile.alloc : memref<5x300xf32>
  %s = tile.alloc : memref<5xf32>
  tile.launch @rms(%x, %w, %y, %s)
    : (memref<5x300xf32>, memref<300xf32>, memref<5x300xf32>, memref<5xf32>) -> ()
  func.return %y, %s : memref<5x300xf32>, memref<5xf32>
}
"""


def rms_norm_ref(x: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
    x, w = x.astype(np.float64), w.astype(np.float64)
    r = 1.0 / np.sqrt((x * x).mean(axis=1) + 1e-6)
    return [x * r[:, None] * w, r]


# Softmax over rows of 200 with 64 threads: a max-combine then an add-combine, which reuse
# one shared array (the trailing barrier of the first combine makes that safe).
SOFTMAX = """
tile.kernel @softmax(%x: memref<3x200xf32>, %y: memref<3x200xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  tile.grid %b to 3 {
    tile.threads %t to 64 {
      %m_p = tile.for %k = %t to 200 step 64 iter_args(%a = %ninf) -> (f32) {
        %v = tile.load %x[%b, %k] : memref<3x200xf32>
        %mx = arith.maximumf %a, %v : f32
        tile.yield %mx : f32
      }
      %m = tile.combine max %m_p : f32
      %s_p = tile.for %k = %t to 200 step 64 iter_args(%a = %zero) -> (f32) {
        %v = tile.load %x[%b, %k] : memref<3x200xf32>
        %d = arith.subf %v, %m : f32
        %e = math.exp %d : f32
        %sum = arith.addf %a, %e : f32
        tile.yield %sum : f32
      }
      %s = tile.combine add %s_p : f32
      tile.for %j = %t to 200 step 64 {
        %v = tile.load %x[%b, %j] : memref<3x200xf32>
        %d = arith.subf %v, %m : f32
        %e = math.exp %d : f32
        %o = arith.divf %e, %s : f32
        tile.store %o, %y[%b, %j] : memref<3x200xf32>
      }
    }
  }
  tile.return
}
func.func @forward(%x: memref<3x200xf32>) -> memref<3x200xf32> {
  %y = tile.alloc : memref<3x200xf32>
  tile.launch @softmax(%x, %y) : (memref<3x200xf32>, memref<3x200xf32>) -> ()
  func.return %y : memref<3x200xf32>
}
"""


def softmax_ref(x: np.ndarray) -> list[np.ndarray]:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return [e / e.sum(axis=1, keepdims=True)]


# One warp: a min-combine is shuffles only; the row minimum is stored by thread 0.
ROW_MIN = """
tile.kernel @row_min(%x: memref<4x70xf32>, %m: memref<4xf32>) {
  %inf = arith.constant 0x7F800000 : f32
  tile.grid %b to 4 {
    tile.threads %t to 32 {
      %p = tile.for %k = %t to 70 step 32 iter_args(%a = %inf) -> (f32) {
        %v = tile.load %x[%b, %k] : memref<4x70xf32>
        %n = arith.minimumf %a, %v : f32
        tile.yield %n : f32
      }
      %min = tile.combine min %p : f32
      tile.store %min, %m[%b] : memref<4xf32>
    }
  }
  tile.return
}
func.func @forward(%x: memref<4x70xf32>) -> memref<4xf32> {
  %m = tile.alloc : memref<4xf32>
  tile.launch @row_min(%x, %m) : (memref<4x70xf32>, memref<4xf32>) -> ()
  func.return %m : memref<4xf32>
}
"""


def row_min_ref(x: np.ndarray) -> list[np.ndarray]:
    return [x.astype(np.float64).min(axis=1)]


CASES = {
    "silu": (SILU, [(1000,)], silu_ref),
    "rms_norm": (RMS_NORM, [(5, 300), (300,)], rms_norm_ref),
    "softmax": (SOFTMAX, [(3, 200)], softmax_ref),
    "row_min": (ROW_MIN, [(4, 70)], row_min_ref),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_level_matches_tile_level(name: str) -> None:
    text, shapes, reference = CASES[name]
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    expected = reference(*inputs)
    tile_out = run(parse(text), *inputs)
    kernel_out = run(lower(parse(text)), *inputs)
    assert len(tile_out) == len(kernel_out) == len(expected)
    for tile_value, kernel_value, ref in zip(tile_out, kernel_out, expected, strict=True):
        assert kernel_value.dtype == np.float32
        assert rel_err(kernel_value, tile_value.astype(np.float64)) <= 1e-5
        assert rel_err(kernel_value, ref) <= 1e-5


# --------------------------------------------------------------------------------------------
# Kernel-level semantics, on hand-written kernel IR


SHUFFLE = """
kernel.func @shuffle(%y: memref<3x64xf32>) grid 1 block 64 {
  %t = kernel.thread_id : index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %i = arith.index_cast %t : index to i32
  %v = arith.sitofp %i : i32 to f32
  %s1 = kernel.shfl_xor %v, 1 : f32
  %s16 = kernel.shfl_xor %v, 16 : f32
  %s31 = kernel.shfl_xor %v, 31 : f32
  kernel.store %s1, %y[%c0, %t] : memref<3x64xf32>
  kernel.store %s16, %y[%c1, %t] : memref<3x64xf32>
  kernel.store %s31, %y[%c2, %t] : memref<3x64xf32>
  kernel.return
}
func.func @forward() -> memref<3x64xf32> {
  %y = kernel.alloc : memref<3x64xf32>
  kernel.launch @shuffle(%y) : (memref<3x64xf32>) -> ()
  func.return %y : memref<3x64xf32>
}
"""


def test_shfl_xor_exchanges_within_each_warp() -> None:
    (y,) = run(parse(SHUFFLE))
    lanes = np.arange(64)
    for row, mask in enumerate((1, 16, 31)):
        np.testing.assert_array_equal(y[row], (lanes ^ mask).astype(np.float32))
    assert (y[2][:32] < 32).all() and (y[2][32:] >= 32).all()  # never crosses warps


PREDICATED = """
kernel.func @even(%x: memref<2x64xf32>, %y: memref<2x64xf32>) grid 2 block 64 {
  %t = kernel.thread_id : index
  %b = kernel.block_id : index
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %r = arith.remsi %t, %c2 : index
  %even = arith.cmpi eq, %r, %c0 : index
  kernel.if %even {
    %v = kernel.load %x[%b, %t] : memref<2x64xf32>
    kernel.store %v, %y[%b, %t] : memref<2x64xf32>
  }
  kernel.return
}
func.func @forward(%x: memref<2x64xf32>) -> memref<2x64xf32> {
  %y = kernel.alloc : memref<2x64xf32>
  kernel.launch @even(%x, %y) : (memref<2x64xf32>, memref<2x64xf32>) -> ()
  func.return %y : memref<2x64xf32>
}
"""


def test_if_runs_only_on_its_threads_and_alloc_is_nan_filled() -> None:
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    (y,) = run(parse(PREDICATED), x)
    np.testing.assert_array_equal(y[:, ::2], x[:, ::2])
    assert np.isnan(y[:, 1::2]).all()


DIVERGENT_BARRIER = """
kernel.func @bad(%y: memref<64xf32>) grid 1 block 64 {
  %t = kernel.thread_id : index
  %c0 = arith.constant 0 : index
  %p = arith.cmpi eq, %t, %c0 : index
  kernel.if %p {
    kernel.barrier
  }
  kernel.return
}
func.func @forward() -> memref<64xf32> {
  %y = kernel.alloc : memref<64xf32>
  kernel.launch @bad(%y) : (memref<64xf32>) -> ()
  func.return %y : memref<64xf32>
}
"""


def test_barrier_reached_by_some_threads_is_rejected() -> None:
    module = parse(DIVERGENT_BARRIER, verify=False)  # the verifier would refuse it
    with pytest.raises(InterpretationError, match=r"kernel.barrier: reached by only some"):
        run(module)


SHARED_PER_BLOCK = """
kernel.func @stage(%x: memref<2x64xf32>, %y: memref<2x64xf32>) grid 2 block 64 {
  %t = kernel.thread_id : index
  %b = kernel.block_id : index
  %c63 = arith.constant 63 : index
  %buf = kernel.shared_alloc : memref<64xf32, 3>
  %v = kernel.load %x[%b, %t] : memref<2x64xf32>
  kernel.store %v, %buf[%t] : memref<64xf32, 3>
  kernel.barrier
  %r = arith.subi %c63, %t : index
  %u = kernel.load %buf[%r] : memref<64xf32, 3>
  kernel.store %u, %y[%b, %t] : memref<2x64xf32>
  kernel.return
}
func.func @forward(%x: memref<2x64xf32>) -> memref<2x64xf32> {
  %y = kernel.alloc : memref<2x64xf32>
  kernel.launch @stage(%x, %y) : (memref<2x64xf32>, memref<2x64xf32>) -> ()
  func.return %y : memref<2x64xf32>
}
"""


def test_shared_array_staging_reverses_each_row() -> None:
    x = np.random.default_rng(2).standard_normal((2, 64)).astype(np.float32)
    (y,) = run(parse(SHARED_PER_BLOCK), x)
    np.testing.assert_array_equal(y, x[:, ::-1])
