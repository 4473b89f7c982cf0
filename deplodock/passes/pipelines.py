"""The stage pipelines: `lower-to-<stage>` runs every pass from the torch level to `<stage>`.

`deplodock compile --ir loop` and `deplodock-opt -p lower-to-loop` mean the same thing
because both read `STAGE_PASSES`. Each conversion pass is a no-op on IR that has none of the
ops it lowers, so a pipeline can start from any earlier level.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline

#: The six levels, highest first.
STAGES: tuple[str, ...] = ("torch", "tensor", "loop", "tile", "kernel", "cuda")

#: The passes that lower a module from the previous stage into each stage.
STAGE_PASSES: dict[str, tuple[str, ...]] = {
    "torch": (),
    "tensor": ("convert-torch-to-tensor",),
    "loop": ("convert-tensor-to-loop", "loop-fusion", "dedupe-kernels"),
    "tile": ("convert-loop-to-tile",),
    "kernel": ("convert-tile-to-kernel",),
    "cuda": ("convert-kernel-to-cuda",),
}


def pipeline_pass_names(stage: str) -> tuple[str, ...]:
    """Every pass from the torch level down to `stage`, in order."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage '{stage}' (expected one of {', '.join(STAGES)})")
    names: tuple[str, ...] = ()
    for current in STAGES[: STAGES.index(stage) + 1]:
        names += STAGE_PASSES[current]
    return names


def pipeline_spec(stage: str) -> str:
    """The textual pipeline of a stage, as `deplodock-opt -p` accepts it."""
    return ",".join(pipeline_pass_names(stage))


def build_pipeline(stage: str) -> list[ModulePass]:
    from deplodock.passes import get_all_passes

    passes = get_all_passes()
    return [passes[name]()() for name in pipeline_pass_names(stage)]


def lower(module: ModuleOp, stage: str, ctx: Context | None = None) -> ModuleOp:
    """Lowers `module` in place to `stage` and returns it."""
    from deplodock.dialects import make_context

    PassPipeline(tuple(build_pipeline(stage))).apply(ctx or make_context(), module)
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
class _LowerToStage(ModulePass):
    stage: ClassVar[str]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for stage_pass in build_pipeline(self.stage):
            stage_pass.apply(ctx, op)


def _lower_to(stage: str, doc: str = "") -> type[_LowerToStage]:
    """The `lower-to-<stage>` pass class: the six differ only in their stage, so they are
    made here rather than written out (the pass registry imports them by name)."""
    class_name = f"LowerTo{stage.capitalize()}Pass"
    doc = doc or f"Every pass from the torch level down to the {stage} level."
    namespace = {"name": f"lower-to-{stage}", "stage": stage, "__doc__": doc}
    namespace |= {"__module__": __name__, "__qualname__": class_name}
    return dataclass(frozen=True)(type(class_name, (_LowerToStage,), namespace))


LowerToTorchPass = _lower_to("torch", "Nothing to do: the frontend already produces torch IR.")
LowerToTensorPass = _lower_to("tensor")
LowerToLoopPass = _lower_to("loop")
LowerToTilePass = _lower_to("tile")
LowerToKernelPass = _lower_to("kernel")
LowerToCudaPass = _lower_to("cuda")
