"""The stage pipelines: `lower-to-<stage>` runs every pass from the torch level to `<stage>`.

`deplodock compile --ir loop` and `deplodock-opt -p lower-to-loop` mean the same thing
because both read `STAGE_PASSES`, and both run it through `lower` (the one pipeline runner).
Each conversion pass is a no-op on IR that has none of the ops it lowers, and each
scheduling pass on a kernel it has already scheduled, so a pipeline can start from any
earlier level.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline, PassPipelineCallbackType

from deplodock.passes.internal_errors import RunningPass, blame

#: The six levels, highest first.
STAGES: tuple[str, ...] = ("torch", "tensor", "loop", "tile", "kernel", "cuda")

#: The passes that lower a module from the previous stage into each stage.
STAGE_PASSES: dict[str, tuple[str, ...]] = {
    "torch": (),
    "tensor": ("convert-torch-to-tensor",),
    "loop": ("convert-tensor-to-loop", "loop-fusion", "loop-sibling-fusion", "dedupe-kernels"),
    "tile": (
        "convert-loop-to-tile",
        "tile-split-k",
        "tile-grid-stride",
        "tile-block",
        "tile-thread",
        "tile-shared-statistics",
        "tile-chunk-k",
        "tile-stage",
        "tile-prologue-product",
        "tile-streaming-softmax",
        "tile-mma",
        "tile-ldmatrix",
        "tile-vectorize",
        "tile-pad-shared",
        "tile-multibuffer",
        "tile-pipeline",
        "tile-async-copy",
        "tile-register-prefetch",
        "tile-causal-skip",
        "tile-rows",
        "tile-rows-to-blocks",
        "tile-loops-to-threads",
        "tile-cooperative-reduce",
        "tile-online-softmax",
        "tile-row-on-chip",
        "tile-block-rows",
        "tile-vectorize-rows",
        "tile-unroll",
        "tile-hoist-invariant",
        "tile-cse",
        "tile-clamp-masked-loads",
    ),
    "kernel": ("convert-tile-to-kernel", "kernel-drop-barriers", "dedupe-kernels"),
    "cuda": ("convert-kernel-to-cuda",),
}


def check_stage(stage: str) -> None:
    if stage not in STAGES:
        raise ValueError(f"unknown stage '{stage}' (expected one of {', '.join(STAGES)})")


def stages_between(start: str, stage: str) -> tuple[str, ...]:
    """The stages a module at `start` goes through to reach `stage`: those below `start`
    down to `stage` included (`stages_between("loop", "cuda")` is tile, kernel, cuda)."""
    check_stage(start)
    check_stage(stage)
    return STAGES[STAGES.index(start) + 1 : STAGES.index(stage) + 1]


def previous_stage(stage: str) -> str:
    """The stage above `stage`, whose IR the first pass of `stage` converts (torch for
    torch: nothing is above it)."""
    check_stage(stage)
    return STAGES[max(0, STAGES.index(stage) - 1)]


def is_below(stage: str, other: str) -> bool:
    """Whether `stage` is lower (nearer CUDA) than `other`."""
    return STAGES.index(stage) > STAGES.index(other)


def input_stage(pass_name: str) -> str | None:
    """The level a stage pass reads: a stage's first pass converts from the stage above,
    the others (fusion, scheduling) rework the stage itself; None for other passes."""
    for stage, names in STAGE_PASSES.items():
        if pass_name in names:
            return previous_stage(stage) if pass_name == names[0] else stage
    return None


def pipeline_pass_names(stage: str, start: str = "torch") -> tuple[str, ...]:
    """The passes that take a module from stage `start` down to `stage`, in order."""
    names: tuple[str, ...] = ()
    for current in stages_between(start, stage):
        names += STAGE_PASSES[current]
    return names


def pipeline_spec(stage: str) -> str:
    """The textual pipeline of a stage, as `deplodock-opt -p` accepts it."""
    return ",".join(pipeline_pass_names(stage))


def build_pipeline(stage: str, start: str = "torch") -> tuple[ModulePass, ...]:
    """The pass instances (default options) from stage `start` down to `stage`."""
    from deplodock.passes import get_all_passes

    passes = get_all_passes()
    return tuple(passes[name]()() for name in pipeline_pass_names(stage, start))


def lower(
    module: ModuleOp,
    stage: str,
    ctx: Context | None = None,
    start: str = "torch",
    callback: PassPipelineCallbackType | None = None,
) -> ModuleOp:
    """Lowers `module` in place from stage `start` (or anything between it and `stage`) to
    `stage`, verifies it and returns it. `callback` sees the module between passes
    (xDSL's `PassPipeline` callback: what `compile -v` diffs). A bug inside a pass comes out
    as an `InternalError` naming it (`internal_errors.py`)."""
    from deplodock.dialects import make_context

    running = RunningPass(callback)
    with running.blaming():
        PassPipeline(build_pipeline(stage, start), running).apply(ctx or make_context(), module)
    module.verify()
    return module


def stage_of(module: ModuleOp) -> str:
    """The lowest stage whose dialect appears in `module` (torch when none does)."""
    present = {op.dialect_name() for op in module.walk()}
    lowest = "torch"
    for stage in STAGES:
        if stage in present:
            lowest = stage
    return lowest


@dataclass(frozen=True)
class LowerToStagePass(ModulePass):
    """Runs the passes of every stage from the torch level down to `stage`."""

    stage: ClassVar[str]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for stage_pass in build_pipeline(self.stage):
            with blame(stage_pass.name):
                stage_pass.apply(ctx, op)


@dataclass(frozen=True)
class LowerToTorchPass(LowerToStagePass):
    """Nothing to do: the frontend already produces torch IR."""

    name = "lower-to-torch"
    stage = "torch"


@dataclass(frozen=True)
class LowerToTensorPass(LowerToStagePass):
    """torch -> tensor: each torch op decomposed into tensor primitives."""

    name = "lower-to-tensor"
    stage = "tensor"


@dataclass(frozen=True)
class LowerToLoopPass(LowerToStagePass):
    """... -> loop: tensor ops lifted into kernels, fused, identical kernels merged."""

    name = "lower-to-loop"
    stage = "loop"


@dataclass(frozen=True)
class LowerToTilePass(LowerToStagePass):
    """... -> tile: every kernel scheduled onto blocks and threads (the baseline passes)."""

    name = "lower-to-tile"
    stage = "tile"


@dataclass(frozen=True)
class LowerToKernelPass(LowerToStagePass):
    """... -> kernel: schedules materialized as thread ids, shuffles, shared memory."""

    name = "lower-to-kernel"
    stage = "kernel"


@dataclass(frozen=True)
class LowerToCudaPass(LowerToStagePass):
    """... -> cuda: every kernel printed as CUDA C with its launch metadata."""

    name = "lower-to-cuda"
    stage = "cuda"
