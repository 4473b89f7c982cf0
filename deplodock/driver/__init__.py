"""What the `compile` and `run` commands do, as functions the tests and the docs call too.

`run --device cuda` (build, run on the GPU, bench, profile) is `driver/cuda.py`.

A `Program` is a module plus, when it came from PyTorch, the `nn.Module` and example inputs
that define its meaning. Lowering, printing and checking against PyTorch all start from it.
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, ShapedType
from xdsl.ir import Attribute, Operation
from xdsl.parser import Parser
from xdsl.passes import PassPipelineCallbackType
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException

from deplodock.dialects import make_context
from deplodock.dialects.element_types import is_narrow_float, numpy_dtype
from deplodock.dialects.queries import forward_function
from deplodock.numerics import (
    FILE_TOLERANCES,
    FP32_TOLERANCE,
    MODEL_TOLERANCES,
    NARROW_FLOAT_TOLERANCE,
    PYTORCH_ERROR_FACTOR,
    first_mismatch,
    first_nan_pair,
    max_relative_error,
    random_array,
)
from deplodock.passes.pipelines import (
    STAGES,
    is_below,
    lower,
    previous_stage,
    stage_of,
    stages_between,
)

if TYPE_CHECKING:  # torch is imported where a program comes from PyTorch, not for .mlir
    import torch
    from torch.export import ExportedProgram

    from deplodock.interpreters.common import BlockProgress
    from deplodock.tune.replay import Replay


@dataclass
class Program:
    """A module at some stage, and (for PyTorch sources) what it must compute."""

    module: ModuleOp
    stage: str
    torch_module: torch.nn.Module | None = None
    example_inputs: tuple[torch.Tensor, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    #: One line naming the source (models: id, layers, sequence length, dtype).
    name: str = ""
    #: seed -> (`@forward` argument values, float64 reference outputs), for sources whose
    #: reference is not `torch_module(*example_inputs)` on random parameters (models).
    reference: Callable[[int], tuple[list[np.ndarray], list[np.ndarray]]] | None = None
    #: The `run` tolerance of this source, when it needs its own (models: 1e-4 in fp32).
    tolerance: float | None = None
    #: The stage of the module `reference` interprets, for a `.mlir` file (its own stage):
    #: run at that stage, the program would be compared with itself, so it is not compared.
    reference_stage: str | None = None
    #: Repeated layers (models: `model.layers`): torch-level ops whose module path is
    #: `<layer_prefix>.<i>...` form layer `i`, and identical layers are lowered once
    #: (`deplodock.stamp`). `op_paths` maps each torch-level op to its module path.
    layer_prefix: str | None = None
    op_paths: dict[Operation, str] | None = None
    #: After a stamped lowering: (segments, distinct segments lowered).
    segments: tuple[int, int] | None = None


def load_program(code: str | None, path: Path | None, seed: int = 0) -> Program:
    """A program from a `-c` expression or a `.mlir` file."""
    if code is not None:
        return program_from_expression(code, seed)
    assert path is not None
    return program_from_file(path)


def program_from_expression(code: str, seed: int = 0) -> Program:
    from deplodock.frontend.capture import capture
    from deplodock.frontend.expression import parse_expression

    torch_module, example_inputs, _ = parse_expression(code, seed=seed)
    start = time.perf_counter()
    module = capture(torch_module, example_inputs)
    program = Program(module, "torch", torch_module, tuple(example_inputs))
    program.timings["torch"] = time.perf_counter() - start
    if any(is_narrow_float(getattr(t, "element_type", None)) for t in _forward_types(module)):
        program.tolerance = NARROW_FLOAT_TOLERANCE  # bf16/f16 round where PyTorch does not
    return program


def compile_program_from_expression(code: str, seed: int = 0) -> Program:
    """`compile -c`: the torch-level module from the capture cache when it has this
    expression (no torch import: `driver.capture_cache`), else a fresh capture, kept for the
    next compile. The program has no PyTorch module, so it cannot be `run`."""
    from deplodock.driver import capture_cache

    start = time.perf_counter()
    text = capture_cache.load_cached(code, seed)
    if text is not None:
        try:
            module = Parser(make_context(), text, "<capture cache>").parse_module()
            module.verify()
        except (ParseError, VerifyException):  # a damaged or foreign entry: capture again
            text = None
        else:
            program = Program(module, "torch")
            program.timings["torch"] = time.perf_counter() - start
            return program
    program = program_from_expression(code, seed)
    capture_cache.store(code, seed, render(program.module, "torch"))
    return program


def program_from_model(
    name: str,
    layers: int | None = None,
    seq_len: int = 128,
    dtype: str = "fp32",
    seed: int = 0,
    progress: StageProgress | None = None,
) -> Program:
    """A Hugging Face causal LM (shipped id or local directory) captured on the meta device.

    Timings: `model` (config + meta-device construction) and `torch` (export + import).
    """
    from deplodock.frontend import models

    _starting(progress, "model")
    start = time.perf_counter()
    source = models.resolve_model(name)
    config = models.make_config(source, layers)
    models.check_seq_len(source, config, seq_len)
    if dtype not in models.DTYPES:
        raise ValueError(f"unknown dtype '{dtype}' (expected {', '.join(models.DTYPES)})")
    lm = models.build_causal_lm(config, models.DTYPES[dtype], device="meta")
    input_ids = models.example_input_ids(config.vocab_size, seq_len, seed)
    built = time.perf_counter()
    _starting(progress, "torch")
    program, _ = capture_causal_lm(lm, (input_ids,))
    program.timings["model"] = built - start
    program.timings["torch"] = time.perf_counter() - built
    program.name = models.describe(source, config, seq_len, models.DTYPES[dtype])
    program.reference = partial(_model_reference, program, source, config, seq_len)
    program.tolerance = MODEL_TOLERANCES[dtype]
    return program


def capture_causal_lm(
    lm: torch.nn.Module, example_inputs: Sequence[torch.Tensor]
) -> tuple[Program, ExportedProgram]:
    """A transformers causal LM as the torch-level program of `forward(input_ids) -> logits`,
    its decoder layers marked for stamping, and the exported program it was imported from
    (`deplodock.compile` needs its constants and output dtypes)."""
    from deplodock.frontend import models
    from deplodock.frontend.capture import export, import_exported_program

    wrapper = models.CausalLMLogits(lm)
    op_paths: dict[Operation, str] = {}
    with models.capture_ready(lm):
        ep = export(wrapper, example_inputs)
        module = import_exported_program(ep, op_paths=op_paths)
    program = Program(module, "torch", wrapper, tuple(example_inputs))
    program.layer_prefix, program.op_paths = models.LAYER_PREFIX, op_paths
    return program, ep


#: `run` builds the transformers reference on the CPU and interprets every kernel: tiny only.
MAX_RUN_PARAMETERS = 200_000_000


def _model_reference(
    program: Program, source: object, config: object, seq_len: int, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Binds the checkpoint (or seeded random weights) by name; transformers' logits in f64."""
    from deplodock.frontend import models
    from deplodock.frontend.weights import bind_arguments

    assert isinstance(source, models.ModelSource) and program.torch_module is not None
    count = sum(p.numel() for p in program.torch_module.parameters())
    if count > MAX_RUN_PARAMETERS:
        raise ValueError(
            f"{source.name} has {count:.2e} parameters: too many to interpret on the CPU "
            f"(at most {MAX_RUN_PARAMETERS:.0e}); run a smaller model"
        )
    reference = models.reference_model(source, config, seed)
    weights = models.checkpoint_weights(source, reference)
    input_ids = models.example_input_ids(config.vocab_size, seq_len, seed)  # type: ignore[attr-defined]
    buffers = {name: b.detach() for name, b in reference.named_buffers()}
    arguments = bind_arguments(program.module, [input_ids], weights, buffers)
    logits = models.reference_logits(reference, input_ids)
    return arguments, [logits.numpy()]


def program_from_file(path: Path) -> Program:
    """A `.mlir` file: parsed and verified, never executed. Its reference (`run`) is the
    file's own level interpreted on random inputs."""
    try:
        text = path.read_text()
    except OSError as error:
        raise OSError(f"cannot read {path}: {error.strerror}") from None
    if not text.strip():
        raise ValueError(f"{path} is empty: no IR to compile")
    module = Parser(make_context(), text, str(path)).parse_module()
    module.verify()
    program = Program(module, stage_of(module))
    program.reference = partial(_own_level_reference, module.clone())
    program.reference_stage = program.stage
    narrow = any(is_narrow_float(getattr(t, "element_type", None)) for t in _forward_types(module))
    program.tolerance = FILE_TOLERANCES["narrow" if narrow else "fp32"]
    return program


def _forward_types(module: ModuleOp) -> list[Attribute]:
    function_type = forward_function(module).function_type
    return [*function_type.inputs.data, *function_type.outputs.data]


def _own_level_reference(
    original: ModuleOp, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Random `@forward` arguments and the outputs of the unlowered module on them."""
    from deplodock.backend.cpu_runner import run_on_cpu

    arguments = random_arguments(original, seed)
    return arguments, run_on_cpu(original.clone(), arguments)


def random_arguments(module: ModuleOp, seed: int) -> list[np.ndarray]:
    """Random values of `@forward`'s arguments, for a program without PyTorch inputs.

    `numerics.random_array`'s values: floats standard normal, booleans fair coins, integers
    zeros, the one value valid as any index (a `gather`'s indices), so a file's integer
    inputs are exercised only weakly.
    """
    rng = np.random.default_rng(seed)
    arguments = []
    for arg_type in forward_function(module).function_type.inputs.data:
        assert isinstance(arg_type, ShapedType)
        dtype = numpy_dtype(arg_type.get_element_type())
        arguments.append(random_array(rng, arg_type.get_shape(), dtype))
    return arguments


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


def lower_program(
    program: Program,
    stage: str,
    callback: PassPipelineCallbackType | None = None,
    progress: StageProgress | None = None,
    replay: Replay | None = None,
) -> dict[str, float]:
    """Lowers `program` in place to `stage`, one stage at a time; returns seconds per stage.

    A program with repeated layers (`layer_prefix`) lowered from the torch level to the
    loop level or below goes through `deplodock.stamp`: each distinct layer lowered once.
    `callback` sees the module between passes (`compile -v`: a diff per pass); `progress`
    hears each phase start; `replay` (`deplodock.tune.replay`) gives tuned kernels their
    cached schedules.
    """
    ctx = make_context()
    check_lowerable(program, stage)
    stages = stages_between(program.stage, stage)
    stamped = program.layer_prefix is not None and program.op_paths is not None
    if stamped and program.stage == "torch" and "loop" in stages:
        return _lower_stamped(program, stages, ctx, callback, progress, replay)
    for current in stages:
        _starting(progress, current)
        start = time.perf_counter()
        lower_stage(program.module, current, ctx, callback, replay)
        program.timings[current] = time.perf_counter() - start
    program.stage = stage
    return program.timings


def _lower_stamped(
    program: Program,
    stages: tuple[str, ...],
    ctx: Context,
    callback: PassPipelineCallbackType | None = None,
    progress: StageProgress | None = None,
    replay: Replay | None = None,
) -> dict[str, float]:
    from deplodock.stamp import lower_stamped

    assert program.layer_prefix is not None and program.op_paths is not None
    module, report = lower_stamped(
        program.module,
        program.op_paths,
        program.layer_prefix,
        stages,
        lambda module, stage: lower_stage(module, stage, ctx, callback, replay),
        progress,
    )
    program.module, program.stage, program.op_paths = module, stages[-1], None
    program.segments = (report.segments, report.unique)
    program.timings.update(report.timings)
    return program.timings


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


# --- running and checking ----------------------------------------------------------------


def forward_arguments(program: Program) -> list[np.ndarray]:
    """The values of `@forward`'s arguments: the example inputs, then the parameters by name
    (`weights.bind_arguments`: bf16 carried as float32, as the interpreters carry it)."""
    from deplodock.frontend.weights import bind_arguments

    assert program.torch_module is not None
    module = program.torch_module
    named = dict(module.named_parameters()) | dict(module.named_buffers())
    return bind_arguments(program.module, program.example_inputs, named)


def reference_outputs(program: Program) -> list[np.ndarray]:
    """PyTorch's outputs computed in float64: the reference every stage is compared with."""
    assert program.torch_module is not None
    outputs = float64_outputs(program.torch_module, program.example_inputs)
    from deplodock.frontend.capture import to_numpy

    return [to_numpy(output) for output in outputs]


def float64_outputs(module: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """`module(*inputs)` in float64, on the inputs' device (the GPU check calls it there too).

    The module's floating tensors are switched to float64 for the call and then restored
    (a deepcopy would not do: the generated expression wrapper closes over itself).
    """
    import torch

    tensors = [t for t in [*module.parameters(), *module.buffers()] if t.is_floating_point()]
    originals = [t.data for t in tensors]
    wide = [x.double() if x.is_floating_point() else x for x in inputs]
    try:
        for tensor, original in zip(tensors, originals, strict=True):
            tensor.data = original.double()
        with torch.no_grad():
            outputs = module(*wide)
    finally:
        for tensor, original in zip(tensors, originals, strict=True):
            tensor.data = original
    return list(outputs) if isinstance(outputs, tuple | list) else [outputs]


def pytorch_own_error(
    module: torch.nn.Module, inputs: Sequence[torch.Tensor], expected: Sequence[object]
) -> float:
    """PyTorch's max relative error in the module's own dtypes against the float64 reference
    `expected` (tensors or arrays), on the inputs' device."""
    import torch

    from deplodock.frontend.capture import to_numpy

    with torch.no_grad():
        result = module(*inputs)
    outputs = list(result) if isinstance(result, tuple | list) else [result]
    return max(
        (
            max_relative_error(to_numpy(a), e if isinstance(e, np.ndarray) else to_numpy(e))
            for a, e in zip(outputs, expected, strict=True)
        ),
        default=0.0,
    )


def narrow_float_tolerance(pytorch_error: float) -> float:
    """A bf16/f16 program's tolerance, given PyTorch's own error on the same inputs."""
    return max(NARROW_FLOAT_TOLERANCE, PYTORCH_ERROR_FACTOR * pytorch_error)


def check_tolerance(
    tolerance: float,
    module: torch.nn.Module | None,
    inputs: Sequence[torch.Tensor],
    expected: Sequence[object],
) -> tuple[float, float | None]:
    """(the tolerance a check applies, PyTorch's own error when that decided it): a program
    held to the flat bf16/f16 tolerance and compared with a PyTorch module follows
    `narrow_float_tolerance`; any other keeps `tolerance`. The CPU run and the GPU check
    both ask here."""
    if tolerance != NARROW_FLOAT_TOLERANCE or module is None:
        return tolerance, None
    own = pytorch_own_error(module, inputs, expected)
    return narrow_float_tolerance(own), own


@dataclass
class RunReport:
    stage: str
    errors: list[float]
    tolerance: float
    seconds: float
    #: Where the first failing output first differs: `output 0 at [3, 1]: nan (expected 0.5)`.
    mismatch: str = field(default="", kw_only=True)
    #: PyTorch's own error in the program's narrow float type, when the tolerance follows it.
    pytorch_error: float | None = field(default=None, kw_only=True)
    #: Why nothing was compared, when the run had no reference (`errors` is then empty, and
    #: `outputs` counts what it computed): the verdict is UNCHECKED, never OK.
    no_reference: str = field(default="", kw_only=True)
    outputs: int = field(default=0, kw_only=True)

    @property
    def ok(self) -> bool:
        return not self.no_reference and all(error <= self.tolerance for error in self.errors)

    @property
    def subject(self) -> str:
        """What ran, for the summary (the GPU check's report names its device instead)."""
        return f"{self.stage}-level program on cpu"

    def summary(self) -> str:
        """`OK`, `MISMATCH`, or `UNCHECKED` where no output is off but one is NaN against a
        NaN reference (`max_relative_error`) or where there is no reference at all: nothing
        was compared there, so not OK either."""
        if self.no_reference:
            return (
                f"UNCHECKED: {self.subject}, {self.outputs} output(s), no reference: "
                f"{self.no_reference}"
            )
        compared = [error for error in self.errors if not math.isnan(error)]
        worst = max(compared, default=0.0)
        unchecked = len(compared) < len(self.errors) and worst <= self.tolerance
        worst = float("nan") if unchecked else worst
        verdict = "OK" if self.ok else "UNCHECKED" if unchecked else "MISMATCH"
        where = f"; {self.mismatch}" if self.mismatch and not self.ok else ""
        if unchecked:
            where += " (NaN against NaN checks nothing)"
        return (
            f"{verdict}: {self.subject}, {len(self.errors)} output(s), "
            f"max relative error {worst:.3e} ({self.tolerance_text()}){where}"
        )

    def tolerance_text(self) -> str:
        if self.pytorch_error is None or self.tolerance <= NARROW_FLOAT_TOLERANCE:
            return f"tolerance {self.tolerance:.0e}"
        return (
            f"tolerance {self.tolerance:.2e}: {PYTORCH_ERROR_FACTOR:g}x PyTorch's own "
            f"{self.pytorch_error:.2e} in this dtype"
        )


def describe_mismatch(
    actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], tolerance: float
) -> str:
    """`output 0 at [3, 1]: nan (expected 0.5)` for the first output that fails, else
    `output 0 at [2, 0]: nan (expected nan)` for the first NaN against NaN, else ''."""
    pairs = list(zip(actual, expected, strict=True))
    for number, (a, e) in enumerate(pairs):
        found = first_mismatch(a, e, tolerance)
        if found is not None:
            index, got, want = found
            return f"output {number} at {list(index)}: {got:.6g} (expected {want:.6g})"
    for number, (a, e) in enumerate(pairs):
        if (nan_index := first_nan_pair(a, e)) is not None:
            return f"output {number} at {list(nan_index)}: nan (expected nan)"
    return ""


def arguments_and_reference(
    program: Program, seed: int = 0
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The values of `@forward`'s arguments and the float64 outputs they must produce."""
    if program.reference is not None:
        return program.reference(seed)
    if program.torch_module is None:
        raise ValueError("run needs a PyTorch source (-c EXPR or a model) to compare against")
    from deplodock.frontend.expression import randomize_parameters

    randomize_parameters(program.torch_module, seed)
    return forward_arguments(program), reference_outputs(program)


#: Told the name of each phase of a compile as it starts (`model`, `torch`, `segment`, the
#: stages, `stitch`): what a progress bar shows.
StageProgress = Callable[[str], None]


def _starting(progress: StageProgress | None, phase: str) -> None:
    if progress is not None:
        progress(phase)


#: A CPU run estimated to take longer than this is announced before it starts.
LONG_RUN_SECONDS = 60.0


def long_run_warning(program: Program) -> str | None:
    """One line announcing a tile- or kernel-level CPU run estimated at over
    `LONG_RUN_SECONDS` (`interpreters.estimate`), else None."""
    if program.stage not in ("tile", "kernel"):
        return None  # the tensor and loop interpreters work on whole arrays; cuda runs C
    from deplodock.interpreters.estimate import estimate_interpretation

    estimate = estimate_interpretation(program.module)
    if estimate.seconds <= LONG_RUN_SECONDS:
        return None
    minutes = estimate.seconds / 60
    return (
        f"the {program.stage}-level CPU run will take about {minutes:.0f} min "
        f"({estimate.op_executions:,} interpreted ops; the costliest launch is "
        f"{estimate.heaviest}); --ir cuda runs the emitted C much faster, Ctrl-C stops it"
    )


def has_reference(program: Program) -> bool:
    """Whether `run` has something to compare the program with at its current stage: not
    a file run at its own level, which would be compared with itself."""
    return program.reference_stage is None or program.reference_stage != program.stage


def no_reference_note(stage: str) -> str:
    """What `run` says of a file run at its own level: nothing compared, what checked the
    run instead, and how to compare a lowering with the file."""
    below = stages_between(stage, STAGES[-1])
    checked = (
        "memcheck found no bad access"
        if stage == "cuda"
        else f"--ir {below[0]} compares its lowering with it"
    )
    return f"the file is at the {stage} level, the level it runs at ({checked})"


def run_unchecked(
    program: Program, seed: int = 0, progress: BlockProgress | None = None
) -> RunReport:
    """Runs a program that has no reference at its stage (`has_reference`) on random
    inputs: at the cuda level under memcheck (the other levels' interpreters always check
    bounds), so the run still checks what it can, and says that nothing was compared."""
    from deplodock.backend.cpu_runner import run_on_cpu

    start = time.perf_counter()
    arguments = random_arguments(program.module, seed)
    memcheck = program.stage == "cuda"
    outputs = run_on_cpu(program.module, arguments, progress=progress, memcheck=memcheck)
    seconds = time.perf_counter() - start
    note = no_reference_note(program.stage)
    return RunReport(program.stage, [], 0.0, seconds, no_reference=note, outputs=len(outputs))


def run_and_compare(
    program: Program,
    seed: int = 0,
    tolerance: float | None = None,
    progress: BlockProgress | None = None,
    memcheck: bool = False,
) -> RunReport:
    """Interprets the program at its current stage and compares it with its reference;
    `progress` hears of every block the tile and kernel interpreters finish; `memcheck` runs
    cuda-level C with guard pages after every buffer (`cpu_runner.run_kernel`). Without a
    reference (`has_reference`) nothing is compared: `run_unchecked`."""
    if not has_reference(program):
        return run_unchecked(program, seed, progress)
    if tolerance is None:
        tolerance = program.tolerance if program.tolerance is not None else FP32_TOLERANCE
    arguments, expected = arguments_and_reference(program, seed)
    tolerance, own = check_tolerance(
        tolerance, program.torch_module, program.example_inputs, expected
    )
    start = time.perf_counter()
    from deplodock.backend.cpu_runner import run_on_cpu  # not loaded by `compile`

    actual = run_on_cpu(program.module, arguments, progress=progress, memcheck=memcheck)
    seconds = time.perf_counter() - start
    errors = [max_relative_error(a, e) for a, e in zip(actual, expected, strict=True)]
    mismatch = describe_mismatch(actual, expected, tolerance)
    return RunReport(
        program.stage, errors, tolerance, seconds, mismatch=mismatch, pytorch_error=own
    )
