"""`tile.combine ... width W`: a segmented all-reduce over aligned groups of `W` threads.

The same random per-thread values go through the tile interpreter (`LockstepState.combine`)
and, after `convert-tile-to-kernel`, through the kernel interpreter (warp shuffles below
`W`, shared partials folded per group past a warp, race detector on); both must give every
thread the reduction over its own group, as numpy computes it.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects import kernel, make_context
from deplodock.passes.convert_tile_to_kernel import ConvertTileToKernelPass
from tests.helpers import parse, run

PROGRAM = """
tile.kernel @k(%x: memref<2x{T}xf32>, %y: memref<2x{T}xf32>) {{
  tile.grid %b to 2 {{
    tile.threads %t to {T} {{
      %v = tile.load %x[%b, %t] : memref<2x{T}xf32>
      %r = tile.combine {kind} %v{width} : f32
      %s = tile.combine add %r{width} : f32
      %o = arith.addf %r, %s : f32
      tile.store %o, %y[%b, %t] : memref<2x{T}xf32>
    }}
  }}
  tile.return
}}
func.func @forward(%x: memref<2x{T}xf32>) -> memref<2x{T}xf32> {{
  %y = tile.alloc : memref<2x{T}xf32>
  tile.launch @k(%x, %y) : (memref<2x{T}xf32>, memref<2x{T}xf32>) -> ()
  func.return %y : memref<2x{T}xf32>
}}
"""


def program(threads: int, kind: str, width: int | None) -> str:
    suffix = "" if width is None else f" width {width}"
    return PROGRAM.format(T=threads, kind=kind, width=suffix)


def expected(x: np.ndarray, kind: str, width: int) -> np.ndarray:
    ufunc = {"add": np.add, "max": np.maximum, "min": np.minimum, "mul": np.multiply}[kind]
    groups = x.astype(np.float64).reshape(x.shape[0], -1, width)
    r = np.repeat(ufunc.reduce(groups, axis=2), width, axis=1)
    s = np.repeat(r.reshape(x.shape[0], -1, width).sum(axis=2), width, axis=1)
    return r + s


CASES = [
    (32, 1),
    (32, 2),
    (64, 8),
    (128, 32),
    (256, 64),
    (256, 128),
    (96, 32),
    (192, 96),
    (256, None),
]


@pytest.mark.parametrize("kind", ["add", "max", "min"])
@pytest.mark.parametrize(("threads", "width"), CASES)
def test_segmented_combine_tile_and_kernel(threads: int, width: int | None, kind: str) -> None:
    text = program(threads, kind, width)
    x = np.random.default_rng(threads + (width or 0)).standard_normal((2, threads))
    x = x.astype(np.float32)
    want = expected(x, kind, width or threads)
    (tile_out,) = run(text, x)
    np.testing.assert_allclose(tile_out, want, rtol=1e-5, atol=1e-5)
    module = parse(text)
    ConvertTileToKernelPass().apply(make_context(), module)
    module.verify()
    shuffles = [op for op in module.walk() if isinstance(op, kernel.ShflXorOp)]
    masks = {op.mask.value.data for op in shuffles}
    assert all(mask < min(width or threads, 32) for mask in masks)
    (kernel_out,) = run(module, x)
    np.testing.assert_allclose(kernel_out, want, rtol=1e-5, atol=1e-5)


def test_width_round_trips() -> None:
    text = program(64, "add", 8)
    assert "tile.combine add %v width 8 : f32" in str(parse(text))


@pytest.mark.parametrize(
    ("threads", "width", "message"),
    [
        (64, 12, "width 12 must be a power of two up to 32 or a multiple of 32"),
        (64, 48, "width 48 must be a power of two"),
        (96, 64, "width 64 does not divide the 96 threads of the block"),
    ],
)
def test_width_verifier(threads: int, width: int, message: str) -> None:
    module = parse(program(threads, "add", width), verify=False)
    with pytest.raises(VerifyException, match=message):
        module.verify()
