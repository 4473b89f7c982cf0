"""Lowering a program stage by stage (layer by layer where it repeats), and what `compile`
prints of it: the IR or CUDA C, the kernel counts, the summary line.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipelineCallbackType
from xdsl.printer import Printer

from deplodock.dialects import make_context
from deplodock.dialects.queries import forward_function
from deplodock.driver.program import Program, StageProgress, announce_phase
from deplodock.passes.pipelines import (
    is_below,
    lower,
    previous_stage,
    stages_between,
)

if TYPE_CHECKING:
    from deplodock.tune.replay import Replay


def lower_stage(
    module: ModuleOp,
    stage: str,
    ctx: Context | None = None,
    callback: PassPipelineCallbackType | None = None,
    replay: Replay | None = None,
) -> None:
    """Runs the passes of `stage` on a module at the stage above it (`pipelines.lower`);
    before the tile stage, `replay` writes tuned schedules on the loop kernels."""
    if stage == "tile" and replay is not None:
        replay.attach(module)
    lower(module, stage, ctx, start=previous_stage(stage), callback=callback)


def check_lowerable(program: Program, stage: str) -> None:
    """Fails, in one line, when `program` is already below `stage` (IR is never raised)."""
    if is_below(program.stage, stage):
        raise ValueError(f"the program is already at stage '{program.stage}', below '{stage}'")


#: Told each stage and the whole program at it, as soon as the lowering reaches it
#: (`compile --html`): what `compile --ir <stage>` prints of it. The module may be lowered
#: further in place afterwards, so a listener that keeps it keeps a copy.
StageListener = Callable[[str, ModuleOp], None]


def lower_program(
    program: Program,
    stage: str,
    callback: PassPipelineCallbackType | None = None,
    progress: StageProgress | None = None,
    replay: Replay | None = None,
    reached: StageListener | None = None,
) -> dict[str, float]:
    """Lowers `program` in place to `stage`, one stage at a time; returns seconds per stage.

    A program with repeated layers (`layer_prefix`) lowered from the torch level to the
    loop level or below goes through `deplodock.stamp`: each distinct layer lowered once.
    `callback` sees the module between passes (`compile -v`: a diff per pass); `progress`
    hears each phase start; `replay` (`deplodock.tune.replay`) gives tuned kernels their
    cached schedules; `reached` hears each stage the program reaches, with the program there
    (one lowering gives every stage of `compile --html`).
    """
    ctx = make_context()
    check_lowerable(program, stage)
    stages = stages_between(program.stage, stage)
    stamped = program.layer_prefix is not None and program.op_paths is not None
    if stamped and program.stage == "torch" and "loop" in stages:
        return _lower_stamped(program, stages, ctx, callback, progress, replay, reached)
    for current in stages:
        announce_phase(progress, current)
        start = time.perf_counter()
        lower_stage(program.module, current, ctx, callback, replay)
        program.timings[current] = time.perf_counter() - start
        if reached is not None:
            reached(current, program.module)
    program.stage = stage
    return program.timings


def _lower_stamped(
    program: Program,
    stages: tuple[str, ...],
    ctx: Context,
    callback: PassPipelineCallbackType | None = None,
    progress: StageProgress | None = None,
    replay: Replay | None = None,
    reached: StageListener | None = None,
) -> dict[str, float]:
    from deplodock.stamp import lower_stamped

    assert program.layer_prefix is not None and program.op_paths is not None
    if reached is not None and "tensor" in stages:
        reached("tensor", _whole_at_tensor(program.module, ctx))
    module, report = lower_stamped(
        program.module,
        program.op_paths,
        program.layer_prefix,
        stages,
        lambda module, stage: lower_stage(module, stage, ctx, callback, replay),
        progress,
        reached,
    )
    program.module, program.stage, program.op_paths = module, stages[-1], None
    program.segments = (report.segments, report.unique)
    program.timings.update(report.timings)
    return program.timings


def _whole_at_tensor(module: ModuleOp, ctx: Context) -> ModuleOp:
    """A copy of a torch-level model lowered whole to the tensor level: what `compile --ir
    tensor` prints of it (a model is stamped only on its way to the loop level or below)."""
    whole = module.clone()
    lower_stage(whole, "tensor", ctx)
    return whole


def render(module: ModuleOp, stage: str) -> str:
    """The text `compile --ir <stage>` prints: MLIR, or CUDA C at the cuda stage."""
    if stage == "cuda":
        from deplodock.backend.cuda_source import module_to_cuda_source

        return module_to_cuda_source(module)
    stream = io.StringIO()
    Printer(stream=stream).print_op(module)
    return stream.getvalue() + "\n"


def kernel_counts(module: ModuleOp) -> tuple[int, int]:
    """(kernel launches in `@forward`, distinct kernel symbols) from the loop level on."""
    from xdsl.dialects.func import FuncOp

    kernels = sum(1 for op in module.ops if not isinstance(op, FuncOp))
    launches = sum(1 for op in forward_function(module).walk() if op.name.endswith(".launch"))
    return launches, kernels


def computes_nothing(program: Program) -> bool:
    """No kernel launches (from the loop level on) or no op but the return (above it): the
    outputs are the inputs or views of them, which a user who expected kernels should hear."""
    if not is_below("loop", program.stage):
        return kernel_counts(program.module)[0] == 0
    forward = forward_function(program.module)
    return all(op.name == "func.return" for op in forward.body.walk())


def compile_summary(program: Program) -> str:
    """`<source>: 393 kernel launches, 17 unique kernels` (or the op count above the loop
    level), then the seconds per stage."""
    if not is_below("loop", program.stage):
        launches, kernels = kernel_counts(program.module)
        counts = f"{launches} kernel launches, {kernels} unique kernels"
    else:
        ops = sum(1 for op in forward_function(program.module).walk())
        counts = f"{ops} ops at the {program.stage} level"
    times = ", ".join(f"{stage} {seconds:.2f} s" for stage, seconds in program.timings.items())
    return f"{program.name or 'program'}: {counts} ({times})"
