"""What the `compile` and `run` commands do, as functions the tests and the docs call too.

A `Program` is a module plus, when it came from PyTorch, the `nn.Module` and example inputs
that define its meaning. Lowering, printing and checking against PyTorch all start from it.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.parser import Parser
from xdsl.printer import Printer

from deplodock.dialects import make_context
from deplodock.frontend.expression import randomize_parameters
from deplodock.interpreters import forward_function, run_module
from deplodock.passes.pipelines import STAGE_PASSES, STAGES, lower, stage_of


@dataclass
class Program:
    """A module at some stage, and (for PyTorch sources) what it must compute."""

    module: ModuleOp
    stage: str
    torch_module: torch.nn.Module | None = None
    example_inputs: tuple[torch.Tensor, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)


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
    return program


def program_from_file(path: Path) -> Program:
    try:
        text = path.read_text()
    except OSError as error:
        raise OSError(f"cannot read {path}: {error.strerror}") from None
    module = Parser(make_context(), text, str(path)).parse_module()
    module.verify()
    return Program(module, stage_of(module))


def lower_program(program: Program, stage: str) -> dict[str, float]:
    """Lowers `program` in place to `stage`, one stage at a time; returns seconds per stage."""
    ctx = make_context()
    start_index = STAGES.index(program.stage)
    if STAGES.index(stage) < start_index:
        raise ValueError(f"the program is already at stage '{program.stage}', below '{stage}'")
    for current in STAGES[start_index + 1 : STAGES.index(stage) + 1]:
        start = time.perf_counter()
        if STAGE_PASSES[current]:
            lower(program.module, current, ctx)
        program.module.verify()
        program.timings[current] = time.perf_counter() - start
    program.stage = stage
    return program.timings


def render(module: ModuleOp, stage: str) -> str:
    """The text `compile --ir <stage>` prints: MLIR, or CUDA C at the cuda stage."""
    if stage == "cuda":
        from deplodock.backend.cuda_source import module_to_cuda_source

        return module_to_cuda_source(module)
    stream = io.StringIO()
    Printer(stream=stream).print_op(module)
    return stream.getvalue() + "\n"


# --- running and checking ----------------------------------------------------------------


def forward_arguments(program: Program) -> list[np.ndarray]:
    """The values of `@forward`'s arguments: the example inputs, then the parameters by name."""
    assert program.torch_module is not None
    named = dict(program.torch_module.named_parameters()) | dict(
        program.torch_module.named_buffers()
    )
    func = forward_function(program.module)
    inputs = iter(program.example_inputs)
    values = []
    for attrs in func.arg_attrs.data if func.arg_attrs else [None] * len(func.args):
        param = attrs.data.get("deplodock.param") if attrs is not None else None
        tensor = named[param.data] if isinstance(param, StringAttr) else next(inputs)
        values.append(tensor.detach().numpy())
    return values


def reference_outputs(program: Program) -> list[np.ndarray]:
    """PyTorch's outputs computed in float64: the reference every stage is compared with.

    The module's floating tensors are switched to float64 for the call and then restored
    (a deepcopy would not do: the generated expression wrapper closes over itself).
    """
    assert program.torch_module is not None
    module = program.torch_module
    tensors = [t for t in [*module.parameters(), *module.buffers()] if t.is_floating_point()]
    originals = [t.data for t in tensors]
    inputs = [x.double() if x.is_floating_point() else x for x in program.example_inputs]
    try:
        for tensor, original in zip(tensors, originals, strict=True):
            tensor.data = original.double()
        with torch.no_grad():
            outputs = module(*inputs)
    finally:
        for tensor, original in zip(tensors, originals, strict=True):
            tensor.data = original
    outputs = outputs if isinstance(outputs, tuple | list) else (outputs,)
    return [output.numpy() for output in outputs]


def max_relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """max |actual - expected| / max |expected|: one number per output, robust near zeros."""
    actual64 = np.asarray(actual, dtype=np.float64)
    expected64 = np.asarray(expected, dtype=np.float64)
    if actual64.shape != expected64.shape:
        raise ValueError(f"shape {actual64.shape} differs from the reference {expected64.shape}")
    scale = max(float(np.max(np.abs(expected64), initial=0.0)), np.finfo(np.float64).tiny)
    error = np.max(np.abs(actual64 - expected64), initial=0.0)
    return float(error / scale) if np.isfinite(error) else float("inf")


@dataclass
class RunReport:
    stage: str
    errors: list[float]
    tolerance: float
    seconds: float

    @property
    def ok(self) -> bool:
        return all(error <= self.tolerance for error in self.errors)

    def summary(self) -> str:
        worst = max(self.errors, default=0.0)
        verdict = "OK" if self.ok else "MISMATCH"
        return (
            f"{verdict}: {self.stage}-level program on cpu, {len(self.errors)} output(s), "
            f"max relative error {worst:.3e} (tolerance {self.tolerance:.0e})"
        )


def run_and_compare(program: Program, seed: int = 0, tolerance: float = 1e-5) -> RunReport:
    """Interprets the program at its current stage and compares it with its reference."""
    if program.torch_module is None:
        raise ValueError("run needs a PyTorch source (-c EXPR) to compare against")
    randomize_parameters(program.torch_module, seed)
    arguments = forward_arguments(program)
    expected = reference_outputs(program)
    start = time.perf_counter()
    actual = run_module(program.module, arguments)
    seconds = time.perf_counter() - start
    errors = [max_relative_error(a, e) for a, e in zip(actual, expected, strict=True)]
    return RunReport(program.stage, errors, tolerance, seconds)
