"""`tile-schedule` and the schedule as text: knobs written by a pipeline string replay the CUDA.

The tuner's contract (issue #11): the final `schedule` of each tile kernel, printed as
`schedule_pipeline(...)` and run from the loop level, gives byte-identical CUDA, for the
default schedule and for one that differs from it at several passes (a split GEMM whose
combine kernel has its own knobs, a row-reduction with other row threads).
"""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import loop, make_context, tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.driver import lower_program, program_from_expression, render
from deplodock.passes import get_all_passes
from deplodock.passes.pipelines import STAGE_PASSES, lower
from deplodock.passes.tile import schedule
from deplodock.passes.tile.set_schedule import (
    TileSchedulePass,
    parse_knobs,
    schedule_pipeline,
)

GEMM = "nn.Linear(256, 128)(torch.randn(1, 64, 256))"
RMSNORM = "nn.RMSNorm(512)(torch.randn(1, 16, 512))"

Schedules = dict[str, Schedule]


def loop_module(expression: str) -> ModuleOp:
    program = program_from_expression(expression)
    lower_program(program, "loop")
    return program.module


def tile_kernels(module: ModuleOp) -> dict[str, tile.KernelOp]:
    return {op.sym_name.data: op for op in module.ops if isinstance(op, tile.KernelOp)}


def knobs_of(kernel: tile.KernelOp) -> Schedule:
    assert kernel.schedule is not None
    return Schedule.of(kernel)


def lowered(module: ModuleOp, given: Schedules) -> tuple[Schedules, str]:
    """Runs the tile stage pass by pass, writing `given[kernel]` on each kernel as soon as it
    exists (as a tuner's walk does); returns the final schedules and the CUDA."""
    module = module.clone()
    passes = get_all_passes()
    for name in STAGE_PASSES["tile"]:
        passes[name]()().apply(make_context(), module)
        for kernel_name, kernel in tile_kernels(module).items():
            if kernel_name in given and name in (STAGE_PASSES["tile"][0], "tile-split-k"):
                schedule.write_knobs(kernel, given.pop(kernel_name))
    schedules = {name: knobs_of(kernel) for name, kernel in tile_kernels(module).items()}
    lower(module, "cuda", start="tile")
    return schedules, render(module, "cuda")


def replayed(module: ModuleOp, schedules: Schedules) -> str:
    """The CUDA of `module` lowered by the pipeline string of `schedules`."""
    module = module.clone()
    spec = schedule_pipeline(schedules)
    PassPipeline.parse_spec(get_all_passes(), spec).apply(make_context(), module)
    return render(module, "cuda")


# --- knob text -------------------------------------------------------------------------------


def test_knob_text_round_trips() -> None:
    knobs = Schedule({"bm": 128, "bn": 64, "group": 8, "splits": 1})
    assert knobs.format() == "bm=128 bn=64 group=8 splits=1"
    assert parse_knobs(knobs.format()) == knobs
    assert list(parse_knobs("  fn=2   fm=4 ")) == ["fn", "fm"]
    assert parse_knobs("") == {}


@pytest.mark.parametrize("text", ["bm=", "bm=x", "=3", "bm", "bm=1.5", "bm=4 bn=6=7"])
def test_malformed_knob_text_is_one_line_error(text: str) -> None:
    with pytest.raises(PassFailedException, match=r"^tile-schedule: malformed knob") as error:
        parse_knobs(text)
    assert "\n" not in str(error.value)


# --- the pass --------------------------------------------------------------------------------


def tile_level(expression: str) -> ModuleOp:
    module = loop_module(expression)
    get_all_passes()[STAGE_PASSES["tile"][0]]()().apply(make_context(), module)
    return module


def test_the_pass_writes_knobs_in_order_over_existing_ones() -> None:
    module = tile_level(GEMM)
    (kernel,) = tile_kernels(module).values()
    schedule.write_knobs(kernel, {"bm": 64, "group": 2})
    TileSchedulePass(kernel="linear_kernel", knobs="bn=32 bm=16").apply(make_context(), module)
    assert knobs_of(kernel) == {"bm": 16, "group": 2, "bn": 32}
    assert list(knobs_of(kernel)) == ["bm", "group", "bn"]


def test_the_pipeline_text_parses_quoted_options() -> None:
    spec = schedule_pipeline({"linear_kernel": Schedule({"bm": 128, "bn": 64})})
    assert spec.startswith(
        'convert-loop-to-tile,tile-schedule{kernel="linear_kernel" knobs="bm=128 bn=64"},'
    )
    assert spec.endswith(",".join(STAGE_PASSES["kernel"] + STAGE_PASSES["cuda"]))
    passes = PassPipeline.parse_spec(get_all_passes(), spec).passes
    assert passes[1] == TileSchedulePass(kernel="linear_kernel", knobs="bm=128 bn=64")
    later = STAGE_PASSES["kernel"] + STAGE_PASSES["cuda"]
    assert len(passes) == 1 + len(STAGE_PASSES["tile"]) + len(later)


def test_a_split_kernels_combine_is_set_after_tile_split_k() -> None:
    spec = schedule_pipeline(
        {"mm": Schedule({"splits": 2}), "mm_combine": Schedule({"threads": 128})}
    )
    names = [p.name for p in PassPipeline.parse_spec(get_all_passes(), spec).passes]
    assert names[:5] == [
        "convert-loop-to-tile",
        "tile-schedule",
        "tile-split-k",
        "tile-schedule",
        "tile-grid-stride",
    ]
    assert spec.index('kernel="mm_combine"') > spec.index("tile-split-k")


def test_an_unknown_kernel_names_the_kernels_there() -> None:
    module = tile_level(GEMM)
    with pytest.raises(PassFailedException, match=r"no tile\.kernel @mm \(the module has "):
        TileSchedulePass(kernel="mm", knobs="bm=16").apply(make_context(), module)


def test_a_module_without_tile_kernels_is_an_error_when_a_kernel_is_named() -> None:
    module = loop_module(GEMM)  # loop level: no tile.kernel yet
    assert any(isinstance(op, loop.KernelOp) for op in module.ops)
    with pytest.raises(PassFailedException, match=r"no tile\.kernel in the module"):
        TileSchedulePass(kernel="linear_kernel", knobs="bm=16").apply(make_context(), module)
    TileSchedulePass(knobs="bm=16").apply(make_context(), module)  # every kernel: none


# --- replay ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "given"),
    [
        (GEMM, {}),
        (
            GEMM,
            {
                "linear_kernel": {"splits": 2, "bm": 32, "bn": 64, "group": 4, "fm": 2},
                "linear_kernel_combine": {"threads": 128, "vector": 2},
            },
        ),
        (RMSNORM, {}),
        (RMSNORM, {"rms_norm_kernel": {"row_threads": 8, "rows_per_block": 4, "unroll": 0}}),
    ],
    ids=["gemm-default", "gemm-split", "rmsnorm-default", "rmsnorm-rows"],
)
def test_the_pipeline_string_replays_byte_identical_cuda(expression: str, given: Schedules) -> None:
    module = loop_module(expression)
    _, default_cuda = lowered(module, {})
    schedules, cuda = lowered(module, {name: Schedule(knobs) for name, knobs in given.items()})
    for name, knobs in given.items():
        assert knobs.items() <= schedules[name].items(), f"@{name} did not take {knobs}"
    assert (cuda == default_cuda) == (not given)
    assert replayed(module, schedules) == cuda
