"""The buffering passes of a staged contraction: `tile-vectorize` (slab reads),
`tile-multibuffer`, `tile-pipeline`, `tile-async-copy`.

Every knob combination must compute what the loop program computes, on random inputs, at the
tile level, the kernel level (race detector and asynchronous `cp.async` on) and through the
emitted CUDA C run on the CPU; and the interpreters must catch a pipeline with its
`tile.async_wait` or its barrier removed.
"""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.rewriter import Rewriter

from deplodock.dialects import make_context, tile
from deplodock.interpreters.shared_memory import RaceError
from deplodock.passes.convert_kernel_to_cuda import ConvertKernelToCudaPass
from deplodock.passes.convert_tile_to_kernel import ConvertTileToKernelPass
from deplodock.passes.pipelines import lower
from tests.helpers import parse, random_inputs, rel_err, run
from tests.staged_contraction import LOOP, reference, scheduled

STAGED = "tile-block{bm=16 bn=16},tile-thread{fm=2 fn=2},tile-chunk-k{bk=8},tile-stage"

PIPELINES = {
    "staged": STAGED,
    "vector": f"{STAGED},tile-vectorize,tile-pad-shared",
    "depth2": f"{STAGED},tile-vectorize,tile-pad-shared,tile-multibuffer{{depth=2}}",
    "pipelined": f"{STAGED},tile-pad-shared,tile-multibuffer{{depth=2}},tile-pipeline",
    "async": (
        f"{STAGED},tile-vectorize,tile-pad-shared,tile-multibuffer{{depth=2}},"
        "tile-pipeline,tile-async-copy"
    ),
    "async-depth3": (
        f"{STAGED},tile-vectorize,tile-pad-shared,tile-multibuffer{{depth=3}},"
        "tile-pipeline,tile-async-copy"
    ),
    "async-unpipelined": f"{STAGED},tile-pad-shared,tile-multibuffer{{depth=2}},tile-async-copy",
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_every_level_matches_numpy(name: str) -> None:
    module = scheduled(PIPELINES[name])
    inputs = random_inputs(module, seed=3)
    expected = reference(inputs)
    (tiled,) = run(module, *inputs)
    assert rel_err(tiled, expected) < 1e-5
    ConvertTileToKernelPass().apply(make_context(), module)
    (kernel_level,) = run(module, *inputs)
    assert rel_err(kernel_level, expected) < 1e-5
    ConvertKernelToCudaPass().apply(make_context(), module)
    (cuda_level,) = run(module, *inputs)
    assert rel_err(cuda_level, expected) < 1e-5


def test_async_pipeline_has_its_structure() -> None:
    module = scheduled(PIPELINES["async-depth3"])
    ops = list(module.walk())
    assert sum(isinstance(op, tile.CopyAsyncOp) for op in ops) == 6  # 2 prologue chunks + loop
    waits = [op for op in ops if isinstance(op, tile.AsyncWaitOp)]
    assert [w.groups for w in waits] == [1]  # depth 3: the next chunk may stay in flight
    assert all(op.num_bytes == 16 for op in ops if isinstance(op, tile.CopyAsyncOp))


def _without(module: ModuleOp, op_type: type, index: int = 0) -> ModuleOp:
    found = [op for op in module.walk() if isinstance(op, op_type)]
    Rewriter.erase_op(found[index])
    return module


@pytest.mark.parametrize("level", ["tile", "kernel"])
def test_a_missing_wait_is_caught(level: str) -> None:
    module = _without(scheduled(PIPELINES["async"]), tile.AsyncWaitOp)
    if level == "kernel":
        ConvertTileToKernelPass().apply(make_context(), module)
    with pytest.raises(RaceError, match=r"cp\.async"):
        run(module, *random_inputs(module, seed=4))


@pytest.mark.parametrize("level", ["tile", "kernel"])
def test_a_missing_barrier_in_the_pipeline_is_caught(level: str) -> None:
    module = _without(scheduled(PIPELINES["pipelined"]), tile.BarrierOp)
    if level == "kernel":
        ConvertTileToKernelPass().apply(make_context(), module)
    with pytest.raises(RaceError):
        run(module, *random_inputs(module, seed=5))


def test_the_default_pipeline_schedules_a_contraction_fully() -> None:
    module = parse(LOOP)
    lower(module, "tile", start="loop")
    (kernel,) = [op for op in module.ops if isinstance(op, tile.KernelOp)]
    knobs = set(kernel.schedule.data)  # type: ignore[union-attr]
    assert {"bm", "bn", "fm", "fn", "bk", "stage", "depth", "pipeline", "async"} <= knobs
    inputs = random_inputs(module, seed=6)
    (out,) = run(module, *inputs)
    assert rel_err(out, reference(inputs)) < 1e-5


def chunk_of(expression: str) -> tuple[int, int]:
    from deplodock.driver import lower_program, program_from_expression
    from deplodock.passes.tile import schedule

    program = program_from_expression(expression)
    lower_program(program, "tile")
    kernels = [op for op in program.module.ops if isinstance(op, tile.KernelOp)]
    (kernel,) = [k for k in kernels if k.schedule and "bk" in k.schedule.data]
    return schedule.read_knob(kernel, "bk", 0), tile.shared_bytes(kernel)


def test_the_fma_pipe_takes_32_deep_chunks_where_their_slots_fit() -> None:
    """TinyLlama's q_proj at 512 tokens: 128 x 64 tiles, two slots of 32-deep chunks are
    55 KiB (dynamic shared memory); K = 48 holds no two chunks of 32, so it keeps 16; a fused
    prologue (its copy goes through registers) keeps 16 as well."""
    bk, used = chunk_of("nn.Linear(2048, 2048, bias=False)(torch.randn(512, 2048))")
    assert bk == 32 and 48 * 1024 < used <= 99 * 1024
    assert chunk_of("nn.Linear(48, 256, bias=False)(torch.randn(512, 48))")[0] == 16
    prologue = (
        "nn.Linear(2048, 1024, bias=False)(F.silu(torch.randn(512, 2048)) * torch.randn(512, 2048))"
    )
    assert chunk_of(prologue)[0] == 16
