"""Schedules are data: the knobs the tile passes write on a kernel replay to the same CUDA.

A contraction lowered with non-default pass options records its knobs on the kernel's
`schedule` attribute; the same loop-level kernel carrying that attribute, lowered with the
*default* pipeline (other options), must give byte-identical CUDA, because every pass reads
its knob before its option.
"""

from __future__ import annotations

from xdsl.dialects.builtin import DictionaryAttr

from deplodock.dialects import cuda, loop, make_context, tile
from deplodock.passes.pipelines import STAGE_PASSES, lower
from tests.helpers import parse
from tests.passes.test_tile_buffering import LOOP, scheduled


def cuda_sources(module) -> list[str]:
    return [op.source.data for op in module.walk() if isinstance(op, cuda.KernelOp)]


def test_a_recorded_schedule_replays_byte_for_byte() -> None:
    options = {
        "tile-block": "tile-block{bm=16 bn=16 group=2}",
        "tile-thread": "tile-thread{fm=2 fn=2}",
        "tile-chunk-k": "tile-chunk-k{bk=8}",
        "tile-multibuffer": "tile-multibuffer{depth=3}",
    }
    stage = [options.get(name, name) for name in STAGE_PASSES["tile"][1:]]
    tuned = scheduled(",".join(stage))
    (kernel,) = [op for op in tuned.ops if isinstance(op, tile.KernelOp)]
    knobs = kernel.schedule
    assert isinstance(knobs, DictionaryAttr)
    lower(tuned, "cuda", start="tile")
    replay = parse(LOOP)
    (loop_kernel,) = [op for op in replay.ops if isinstance(op, loop.KernelOp)]
    loop_kernel.attributes["schedule"] = knobs
    lower(replay, "cuda", make_context(), start="loop")
    assert cuda_sources(replay) == cuda_sources(tuned)


def test_the_default_schedule_is_deterministic() -> None:
    first, second = parse(LOOP), parse(LOOP)
    lower(first, "cuda", start="loop")
    lower(second, "cuda", start="loop")
    assert cuda_sources(first) == cuda_sources(second)
