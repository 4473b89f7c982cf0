"""Running a program on the CPU and checking it against its reference: the arguments, the
float64 reference outputs, the tolerance (PyTorch's own error for bf16/f16) and the report.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from deplodock.driver.program import Program
from deplodock.driver.sources import random_arguments
from deplodock.numerics import (
    FP32_TOLERANCE,
    NARROW_FLOAT_TOLERANCE,
    PYTORCH_ERROR_FACTOR,
    first_mismatch,
    first_nan_pair,
    max_relative_error,
)
from deplodock.passes.pipelines import STAGES, stages_between

if TYPE_CHECKING:
    import torch

    from deplodock.interpreters.common import BlockProgress


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
    (a deepcopy would not do: the generated expression wrapper closes over itself). So is
    the default dtype: a tensor the computation makes itself (`torch.where(mask, 0.0, -1.0)`,
    `torch.full(...)`) would otherwise be float32 beside float64 operands, where PyTorch does
    not always promote (SDPA reads a float32 mask of a float64 query differently).
    """
    import torch

    tensors = [t for t in [*module.parameters(), *module.buffers()] if t.is_floating_point()]
    originals = [t.data for t in tensors]
    wide = [x.double() if x.is_floating_point() else x for x in inputs]
    default = torch.get_default_dtype()
    try:
        for tensor, original in zip(tensors, originals, strict=True):
            tensor.data = original.double()
        torch.set_default_dtype(torch.float64)
        with torch.no_grad():
            outputs = module(*wide)
    finally:
        torch.set_default_dtype(default)
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
    #: Which weights a model ran with (`Program.weights`), said after the verdict.
    weights: str = field(default="", kw_only=True)

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
        if self.weights:
            where += f"; {self.weights}"
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
        program.stage,
        errors,
        tolerance,
        seconds,
        mismatch=mismatch,
        pytorch_error=own,
        weights=program.weights,
    )
