"""`tile-vectorize` on elementwise kernels: the loop program (loop interpreter) is the
reference; after grid-stride + vectorize the tile interpreter, the kernel interpreter and the
CPU-executed CUDA C compute the same on random inputs, for sizes that vectorize (1000, 4096)
and one that does not (1001, left alone). The vectorized kernel's SASS has 128-bit loads."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from deplodock.backend.cuda_source import kernels_text
from deplodock.dialects import cuda, make_context, tile
from deplodock.passes.convert_kernel_to_cuda import ConvertKernelToCudaPass
from deplodock.passes.convert_loop_to_tile import ConvertLoopToTilePass
from deplodock.passes.convert_tile_to_kernel import ConvertTileToKernelPass
from deplodock.passes.pipelines import STAGE_PASSES
from deplodock.passes.tile.grid_stride import TileGridStridePass
from deplodock.passes.tile.vectorize import TileVectorizePass
from tests.backend.sass import needs_nvcc, sass_of
from tests.helpers import parse, run


def program(n: int, rows: int = 1) -> str:
    """`o = exp(a) * b + a` over a `rows x n` buffer (1-D when rows is 1)."""
    t = f"memref<{rows}x{n}xf32>" if rows > 1 else f"memref<{n}xf32>"
    idx = "%i, %j" if rows > 1 else "%j"
    outer = f"loop.for %i = 0 to {rows} {{" if rows > 1 else ""
    close = "}" if rows > 1 else ""
    return f"""builtin.module {{
  loop.kernel @ew(%a: {t}, %b: {t}, %o: {t}) {{
    {outer}
    loop.for %j = 0 to {n} {{
      %av = loop.load %a[{idx}] : {t}
      %bv = loop.load %b[{idx}] : {t}
      %e = math.exp %av : f32
      %m = arith.mulf %e, %bv : f32
      %s = arith.addf %m, %av : f32
      loop.store %s, %o[{idx}] : {t}
    }}
    {close}
    loop.return
  }}
  func.func @forward(%a: {t}, %b: {t}) -> {t} {{
    %o = loop.alloc : {t}
    loop.launch @ew(%a, %b, %o) : ({t}, {t}, {t}) -> ()
    func.return %o : {t}
  }}
}}"""


def lowered(text: str, *passes) -> ModuleOp:
    ctx = make_context()
    module = parse(text)
    for p in passes:
        p.apply(ctx, module)
    module.verify()
    return module


def vectorized(module: ModuleOp) -> bool:
    return any(isinstance(op, tile.LoadVectorOp) for op in module.walk())


SCHEDULE = (ConvertLoopToTilePass(), TileGridStridePass(threads=64), TileVectorizePass())


@pytest.mark.parametrize(
    ("n", "rows", "expect"), [(1000, 1, True), (1001, 1, False), (4096, 1, True), (12, 5, True)]
)
def test_all_levels_match_the_loop_program(n: int, rows: int, expect: bool) -> None:
    text = program(n, rows)
    shape = (rows, n) if rows > 1 else (n,)
    rng = np.random.default_rng(n)
    a, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    (reference,) = run(parse(text), a, b)
    tiled = lowered(text, *SCHEDULE)
    assert vectorized(tiled) == expect
    kernel_level = lowered(text, *SCHEDULE, ConvertTileToKernelPass())
    cuda_level = lowered(text, *SCHEDULE, ConvertTileToKernelPass(), ConvertKernelToCudaPass())
    for module in (tiled, kernel_level, cuda_level):
        (out,) = run(module, a, b)
        np.testing.assert_allclose(out, reference, rtol=1e-6, atol=1e-6)
    source = next(op for op in cuda_level.ops if isinstance(op, cuda.KernelOp)).source.data
    assert ("dd_load_vector<float, 4>" in source) == expect


def test_runs_in_the_tile_stage_after_grid_stride_and_staging() -> None:
    stage = STAGE_PASSES["tile"]
    assert stage.index("tile-grid-stride") < stage.index("tile-vectorize")
    assert (
        stage.index("tile-stage") < stage.index("tile-vectorize") < stage.index("tile-pad-shared")
    )


@needs_nvcc
def test_vectorized_kernel_loads_128_bits(tmp_path) -> None:
    module = lowered(program(4096), *SCHEDULE, ConvertTileToKernelPass(), ConvertKernelToCudaPass())
    kernel = next(op for op in module.ops if isinstance(op, cuda.KernelOp))
    sass = sass_of(kernels_text([kernel]), tmp_path)
    assert "LDG.E.128" in sass
    assert "STG.E.128" in sass
