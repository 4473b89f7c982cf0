"""`tile-split-k`: a contraction split into S partial sums over K slices and a combine kernel.

The split program must compute what the loop program computes, on random inputs, at the tile
level, the kernel level (race detector on) and through the emitted CUDA C run on the CPU, with
the rest of the default tile pipeline scheduling both kernels; the heuristic must split the
small-M GEMMs that leave SMs idle and nothing else; bad knobs must be refused by name.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import make_context, tile
from deplodock.passes.convert_kernel_to_cuda import ConvertKernelToCudaPass
from deplodock.passes.convert_tile_to_kernel import ConvertTileToKernelPass
from deplodock.passes.pipelines import STAGE_PASSES
from tests.helpers import parse, random_inputs, rel_err, run


def loop_ir(m: int, n: int, k: int, init: str = "0.000000e+00") -> str:
    """A linear `relu(x @ w.T + bias)` at the loop level (the epilogue has a load and a max)."""
    return f"""
builtin.module {{
  loop.kernel @mm(%x: memref<{m}x{k}xf32>, %w: memref<{n}x{k}xf32>, %bias: memref<{n}xf32>,
                  %y: memref<{m}x{n}xf32>) {{
    %init = arith.constant {init} : f32
    %zero = arith.constant 0.000000e+00 : f32
    loop.for %i = 0 to {m} {{
      loop.for %j = 0 to {n} {{
        %s = loop.for %r = 0 to {k} iter_args(%acc = %init) -> (f32) {{
          %a = loop.load %x[%i, %r] : memref<{m}x{k}xf32>
          %b = loop.load %w[%j, %r] : memref<{n}x{k}xf32>
          %p = arith.mulf %a, %b : f32
          %q = arith.addf %acc, %p : f32
          loop.yield %q : f32
        }}
        %c = loop.load %bias[%j] : memref<{n}xf32>
        %o = arith.addf %s, %c : f32
        %relu = arith.maximumf %o, %zero : f32
        loop.store %relu, %y[%i, %j] : memref<{m}x{n}xf32>
      }}
    }}
    loop.return
  }}
  func.func @forward(%x: memref<{m}x{k}xf32>, %w: memref<{n}x{k}xf32>, %bias: memref<{n}xf32>)
      -> memref<{m}x{n}xf32> {{
    %y = loop.alloc : memref<{m}x{n}xf32>
    loop.launch @mm(%x, %w, %bias, %y)
        : (memref<{m}x{k}xf32>, memref<{n}x{k}xf32>, memref<{n}xf32>, memref<{m}x{n}xf32>) -> ()
    func.return %y : memref<{m}x{n}xf32>
  }}
}}
"""


def reference(inputs: list[np.ndarray]) -> np.ndarray:
    x, w, bias = (a.astype(np.float64) for a in inputs)
    return np.maximum(x @ w.T + bias, 0.0)


def tile_stage(text: str, split: str, block: str = "tile-block") -> ModuleOp:
    """The default tile stage with `tile-split-k` (and `tile-block`) replaced by `split`."""
    from deplodock.cli.opt import DeplodockOptMain

    names = [
        {"tile-split-k": split, "tile-block": block}.get(name, name)
        for name in STAGE_PASSES["tile"]
    ]
    module = parse(text)
    opt = DeplodockOptMain(args=["-p", ",".join(names)])
    opt.setup_pipeline()
    opt.pipeline.apply(make_context(), module)
    module.verify()
    return module


def kernels(module: ModuleOp) -> dict[str, tile.KernelOp]:
    return {op.sym_name.data: op for op in module.ops if isinstance(op, tile.KernelOp)}


def launches(module: ModuleOp) -> list[str]:
    return [op.callee.string_value() for op in module.walk() if isinstance(op, tile.LaunchOp)]


#: Odd M and N (17 rows, 100 columns: no multiple of a tile or of 4), K = 96.
ODD = loop_ir(17, 100, 96)


@pytest.mark.parametrize("splits", [2, 4, 8])
def test_every_level_matches_numpy(splits: int) -> None:
    module = tile_stage(ODD, f"tile-split-k{{splits={splits}}}", "tile-block{bm=16 bn=32}")
    assert launches(module) == ["mm", "mm_combine"]
    inputs = random_inputs(module, seed=splits)
    expected = reference(inputs)
    (tiled,) = run(module, *inputs)
    assert rel_err(tiled, expected) < 1e-5
    ConvertTileToKernelPass().apply(make_context(), module)
    (kernel_level,) = run(module, *inputs)
    assert rel_err(kernel_level, expected) < 1e-5
    ConvertKernelToCudaPass().apply(make_context(), module)
    (cuda_level,) = run(module, *inputs)
    assert rel_err(cuda_level, expected) < 1e-5


def test_the_split_is_a_batch_axis_and_the_combine_sums_in_order() -> None:
    module = tile_stage(ODD, "tile-split-k{splits=4}", "tile-block{bm=16 bn=32}")
    found = kernels(module)
    partial, combine = found["mm"], found["mm_combine"]
    assert partial.grid.count == 4 * 2 * 4  # splits x ceil(17/16) x ceil(100/32)
    knobs = partial.schedule.data  # type: ignore[union-attr]
    assert knobs["splits"].value.data == 4  # type: ignore[attr-defined]
    # The partial kernel writes only the workspace; the epilogue moved to the combine.
    (ws,) = [a for a in partial.body.block.args if a.type.get_shape() == (4, 17, 100)]
    stores = [op for op in partial.walk() if isinstance(op, tile.StoreOp)]
    assert stores and all(op.memref is ws for op in stores)
    assert not any(op.name == "arith.maximumf" for op in partial.walk())
    assert any(op.name == "arith.maximumf" for op in combine.walk())
    # The combine is elementwise: the 4 partials of an output added in order, by one thread.
    assert not any(isinstance(op, tile.ForOp) and op.is_reduce for op in combine.walk())
    assert not any(isinstance(op, tile.CombineOp) for op in combine.walk())
    adds = [op for op in combine.walk() if op.name == "arith.addf"]
    assert len(adds) == 3 + 1  # three to sum four partials, one for the bias


@pytest.mark.parametrize(
    ("shape", "split"),
    [
        ((32, 512, 2048), True),  # TinyLlama kv_proj, 32 tokens: 16 blocks of 32 x 32
        ((32, 3584, 18944), True),  # Qwen2.5-7B down_proj, 32 tokens
        ((512, 2048, 2048), False),  # 512 tokens fill the SMs on their own
        ((32, 512, 96), False),  # K too short to slice
    ],
)
def test_the_heuristic_splits_small_m_gemms(shape: tuple[int, int, int], split: bool) -> None:
    from deplodock.dialects import tile as tile_dialect
    from deplodock.passes.convert_loop_to_tile import ConvertLoopToTilePass
    from deplodock.passes.tile.split_k import TileSplitKPass

    module = parse(loop_ir(*shape))
    ConvertLoopToTilePass().apply(make_context(), module)
    TileSplitKPass().apply(make_context(), module)
    names = [op.sym_name.data for op in module.ops if isinstance(op, tile_dialect.KernelOp)]
    assert names == (["mm", "mm_combine"] if split else ["mm"])


def test_a_zero_free_init_is_not_split() -> None:
    module = tile_stage(loop_ir(17, 100, 96, init="1.500000e+00"), "tile-split-k{splits=4}")
    assert launches(module) == ["mm"]
    inputs = random_inputs(module, seed=9)
    (out,) = run(module, *inputs)
    x, w, bias = (a.astype(np.float64) for a in inputs)
    assert rel_err(out, np.maximum(x @ w.T + 1.5 + bias, 0.0)) < 1e-5


@pytest.mark.parametrize("splits", [3, 64])
def test_an_illegal_split_is_refused_by_name(splits: int) -> None:
    with pytest.raises(PassFailedException, match=rf"@mm: splits {splits} must be one of"):
        tile_stage(ODD, f"tile-split-k{{splits={splits}}}")


def test_a_schedule_knob_wins_over_the_option() -> None:
    from deplodock.passes.convert_loop_to_tile import ConvertLoopToTilePass
    from deplodock.passes.tile import schedule
    from deplodock.passes.tile.split_k import TileSplitKPass

    module = parse(ODD)
    ConvertLoopToTilePass().apply(make_context(), module)
    schedule.write_knob(kernels(module)["mm"], "splits", 2)
    TileSplitKPass(splits=8).apply(make_context(), module)
    ws = kernels(module)["mm_combine"].body.block.args[-1]
    assert ws.type.get_shape()[0] == 2  # type: ignore[attr-defined]


# --- atomic=true: slices add into a zeroed output ------------------------------------------


def plain_loop_ir(m: int, n: int, k: int) -> str:
    """`x @ w.T` with nothing after the sum: the epilogue is the store alone."""
    text = loop_ir(m, n, k)
    text = text.replace(
        f"""        %c = loop.load %bias[%j] : memref<{n}xf32>
        %o = arith.addf %s, %c : f32
        %relu = arith.maximumf %o, %zero : f32
        loop.store %relu, %y[%i, %j] : memref<{m}x{n}xf32>""",
        f"        loop.store %s, %y[%i, %j] : memref<{m}x{n}xf32>",
    )
    assert "%relu" not in text
    return text


PLAIN = plain_loop_ir(17, 100, 96)


def plain_reference(inputs: list[np.ndarray]) -> np.ndarray:
    x, w, _ = (a.astype(np.float64) for a in inputs)
    return x @ w.T


@pytest.mark.parametrize("splits", [2, 8])
def test_atomic_slices_match_numpy_at_every_level(splits: int) -> None:
    split = f"tile-split-k{{splits={splits} atomic=true}}"
    module = tile_stage(PLAIN, split, "tile-block{bm=16 bn=32}")
    assert launches(module) == ["mm_zero", "mm"]
    partial = kernels(module)["mm"]
    assert any(isinstance(op, tile.AtomicAddOp) for op in partial.walk())
    assert partial.schedule.data["split_atomic"].value.data == 1  # type: ignore[union-attr, attr-defined]
    inputs = random_inputs(module, seed=splits)
    expected = plain_reference(inputs)
    (tiled,) = run(module, *inputs)
    assert rel_err(tiled, expected) < 1e-5
    ConvertTileToKernelPass().apply(make_context(), module)
    (kernel_level,) = run(module, *inputs)
    assert rel_err(kernel_level, expected) < 1e-5
    ConvertKernelToCudaPass().apply(make_context(), module)
    (cuda_level,) = run(module, *inputs)
    assert rel_err(cuda_level, expected) < 1e-5


@pytest.mark.slow
def test_atomic_slices_before_scheduling_add_once_per_block() -> None:
    """Unscheduled, every thread runs the whole nest: the uniform atomic adds once."""
    module = parse(PLAIN)
    from deplodock.passes.convert_loop_to_tile import ConvertLoopToTilePass
    from deplodock.passes.tile.split_k import TileSplitKPass

    ConvertLoopToTilePass().apply(make_context(), module)
    TileSplitKPass(splits=4, atomic=True).apply(make_context(), module)
    inputs = random_inputs(module, seed=3)
    (out,) = run(module, *inputs)
    assert rel_err(out, plain_reference(inputs)) < 1e-5
    ConvertTileToKernelPass().apply(make_context(), module)
    (kernel_level,) = run(module, *inputs)
    assert rel_err(kernel_level, plain_reference(inputs)) < 1e-5


def test_atomic_is_only_taken_for_a_plain_store() -> None:
    """With a bias and a ReLU after the sum, slices cannot add into the output: the
    deterministic combine is used instead."""
    module = tile_stage(ODD, "tile-split-k{splits=4 atomic=true}")
    assert launches(module) == ["mm", "mm_combine"]
    assert "split_atomic" not in kernels(module)["mm"].schedule.data  # type: ignore[union-attr]
