"""Run one fuzz program at every level and compare it with PyTorch; shrink what fails.

`check` captures the program with `torch.export`, then lowers it one stage at a time and runs
it at each (the interpreters for tensor, loop, tile and kernel; the CPU execution of the
emitted CUDA C for cuda), comparing every output with PyTorch's float64 result at the
program's tolerance (1e-5 fp32, 1e-4 with a matmul, 1e-2 bf16) or, where the output is
ill-conditioned, against PyTorch's own error in the program's dtype, or how far PyTorch's
output moves when its inputs move by one ulp, whichever is larger (`excess_error`). The
first stage that disagrees or fails decides the outcome. Everything runs in this process:
no start-up cost per program.

`shrink` makes a failing program small: it deletes statements (or replaces a value by an
operand of the same shape) while the failure persists, and `save_reproducer` writes the
result as a standalone `.py` plus the IR at the failing level.
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from deplodock.fuzz.generate import FuzzProgram

#: The levels a program is run at, in lowering order.
LEVELS = ("tensor", "loop", "tile", "kernel", "cuda")


@dataclass(frozen=True)
class Outcome:
    """What happened to one program: `ok`, `mismatch`, `crash` or `unsupported`."""

    status: str
    stage: str = ""
    error: float = 0.0
    message: str = ""
    seconds: float = 0.0
    ir: str = ""  # the module at the failing level (MLIR), for the reproducer

    @property
    def failed(self) -> bool:
        return self.status in ("mismatch", "crash")

    def line(self) -> str:
        if self.status == "ok":
            return "ok"
        where = f" at {self.stage}" if self.stage else ""
        detail = f"max relative error {self.error:.3e}" if self.status == "mismatch" else ""
        return f"{self.status}{where}: {', '.join(filter(None, [detail, self.message]))}"


def instantiate(program: FuzzProgram) -> tuple[Any, list[Any]]:
    """The program's nn.Module and its seeded random inputs."""
    import torch

    namespace: dict[str, Any] = {}
    exec(compile(program.source(), f"<fuzz {program.seed}>", "exec"), namespace)
    generator = torch.Generator().manual_seed(program.seed)
    inputs = [
        torch.randn(*shape, generator=generator).to(namespace["DTYPE"]) for shape in program.inputs
    ]
    return namespace["Program"](), inputs


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


def _mlir(module: Any) -> str:
    from xdsl.printer import Printer

    stream = io.StringIO()
    Printer(stream=stream).print_op(module)
    return stream.getvalue() + "\n"


def check(program: FuzzProgram, levels: Sequence[str] = LEVELS) -> Outcome:
    """Runs `program` at each of `levels` (see module doc); the first failure wins."""
    from deplodock.backend.cpu_runner import run_on_cpu
    from deplodock.driver import Program, arguments_and_reference, lower_program
    from deplodock.driver.cuda import tolerance_for
    from deplodock.frontend.capture import UnsupportedOpError, capture

    start = time.perf_counter()
    module, inputs = instantiate(program)
    try:
        captured = capture(module, inputs)
    except UnsupportedOpError as error:
        return Outcome("unsupported", "torch", message=_first_line(error))
    except Exception as error:
        return Outcome("crash", "torch", message=_first_line(error))
    lowered = Program(captured, "torch", module, tuple(inputs))
    tolerance = tolerance_for(captured)
    arguments, expected = arguments_and_reference(lowered, program.seed)
    eager = _eager_outputs(module, inputs)
    spreads = _perturbation_spreads(module, inputs, eager, program.seed)
    for stage in levels:
        try:
            lower_program(lowered, stage)
            actual = run_on_cpu(lowered.module, arguments)
        except Exception as error:
            return Outcome("crash", stage, message=_first_line(error), ir=_mlir(lowered.module))
        for a, e, t, d in zip(actual, expected, eager, spreads, strict=True):
            if (failure := excess_error(a, e, t, tolerance, d)) is not None:
                error, detail = failure
                return Outcome("mismatch", stage, error, detail, ir=_mlir(lowered.module))
    return Outcome("ok", seconds=time.perf_counter() - start)


#: How much less accurate than PyTorch (in the program's own dtype) deplodock may be.
SLACK = 4.0


def _eager_outputs(module: Any, inputs: Sequence[Any]) -> list[np.ndarray]:
    """PyTorch's outputs in the program's dtype (the accuracy deplodock must match)."""
    import torch

    with torch.no_grad():
        outputs = module(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    return [o.detach().double().numpy() for o in outputs]


def _perturbation_spreads(
    module: Any, inputs: Sequence[Any], eager: Sequence[np.ndarray], seed: int, trials: int = 2
) -> list[float]:
    """How far PyTorch's own outputs move when every float input moves by one unit of
    rounding (times +-1 at random), the most over `trials`: the accuracy an output can be
    held to. PyTorch may get an output that cancels to zero exactly by luck of its rounding
    order; any other order is off by about this much."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    spreads = [0.0] * len(eager)
    for _ in range(trials):
        moved = []
        for x in inputs:
            if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
                moved.append(x)
                continue
            signs = torch.randint(0, 2, x.shape, generator=generator) * 2.0 - 1.0
            eps = torch.finfo(x.dtype).eps
            moved.append((x.double() * (1.0 + eps * signs)).to(x.dtype))
        outputs = _eager_outputs(module, moved)
        for i, (new, old) in enumerate(zip(outputs, eager, strict=True)):
            finite = np.isfinite(new) & np.isfinite(old)
            change = np.abs(new - old)[finite]
            spreads[i] = max(spreads[i], float(np.max(change, initial=0.0)))
    return spreads


def excess_error(
    actual: np.ndarray,
    expected: np.ndarray,
    eager: np.ndarray,
    tolerance: float,
    spread: float = 0.0,
) -> tuple[float, str] | None:
    """None when `actual` is as close to the float64 `expected` as the program allows: within
    `tolerance` of the output's scale, or within `SLACK` times PyTorch's own error in the same
    dtype or its `spread` under one-ulp input changes (`_perturbation_spreads`: an output that
    cancels to about zero, or an ill-conditioned one, has a tiny scale and PyTorch misses it
    by as much, or hits it by luck). Otherwise (relative error, a description)."""
    actual64 = np.asarray(actual, dtype=np.float64)
    expected64 = np.asarray(expected, dtype=np.float64)
    if actual64.shape != expected64.shape:
        return float("inf"), f"shape {actual64.shape}, expected {expected64.shape}"
    nan = np.isnan(expected64)
    if not np.array_equal(np.isnan(actual64), nan):
        return float("inf"), "NaN where PyTorch has none, or none where it has one"
    scale = max(float(np.max(np.abs(expected64[~nan]), initial=0.0)), 1e-30)
    error = float(np.max(np.abs(actual64 - expected64)[~nan], initial=0.0))
    eager_error = float(np.max(np.abs(eager - expected64)[~nan], initial=0.0))
    if error <= tolerance * scale or error <= SLACK * max(eager_error, spread) + 1e-30:
        return None
    return error / scale, (
        f"max abs error {error:.3e}, PyTorch's own {eager_error:.3e} "
        f"(and {spread:.3e} under one-ulp input changes)"
    )


# --- shrinking --------------------------------------------------------------------------------


def _defined(line: str) -> str:
    return line.split(" = ", 1)[0]


def _operands(line: str) -> list[str]:
    return re.findall(r"\bv\d+\b", line.split(" = ", 1)[1])


def _without(program: FuzzProgram, index: int, substitute: str | None) -> FuzzProgram | None:
    """`program` without statement `index`; its uses become `substitute` (or there must be
    none)."""
    name = _defined(program.statements[index])
    rest = program.statements[index + 1 :]
    if substitute is None and any(name in _operands(line) for line in rest):
        return None
    pattern = re.compile(rf"\b{name}\b")
    renamed = [pattern.sub(substitute, line) if substitute else line for line in rest]
    statements = [*program.statements[:index], *renamed]
    if not statements:
        return None
    position = len(program.inputs) + index
    shapes = [*program.shapes[:position], *program.shapes[position + 1 :]]
    # Later values keep their names: the gap in numbering is harmless to Python.
    return replace(program, statements=statements, shapes=shapes)


def _candidates(program: FuzzProgram) -> list[FuzzProgram]:
    """Smaller programs: drop one statement, or replace its value by a same-shaped operand."""
    found = []
    shape_of = {f"v{i}": s for i, s in enumerate(program.inputs)}
    for line, shape in zip(program.statements, program.shapes[len(program.inputs) :], strict=True):
        shape_of[_defined(line)] = shape
    for index in reversed(range(len(program.statements))):
        line = program.statements[index]
        if (smaller := _without(program, index, None)) is not None:
            found.append(smaller)
        for operand in dict.fromkeys(_operands(line)):
            if shape_of.get(operand) == shape_of[_defined(line)]:
                if (smaller := _without(program, index, operand)) is not None:
                    found.append(smaller)
    return found


def shrink(
    program: FuzzProgram, still_fails: Callable[[FuzzProgram], bool], budget: int = 200
) -> FuzzProgram:
    """The smallest variant of `program` (greedy) for which `still_fails` holds."""
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for candidate in _candidates(program):
            tries += 1
            if still_fails(candidate):
                program, improved = candidate, True
                break
            if tries >= budget:
                break
    return program


def save_reproducer(program: FuzzProgram, outcome: Outcome, directory: Path) -> Path:
    """`fuzz-<seed>.py` (runs the check when executed) and `fuzz-<seed>.<stage>.mlir`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"fuzz-{program.seed}.py"
    header = f'"""deplodock fuzz reproducer: {outcome.line()}"""\n\n'
    runner = (
        "\n\nif __name__ == '__main__':\n"
        "    from deplodock.fuzz.check import check_source\n\n"
        "    print(check_source(__file__).line())\n"
    )
    path.write_text(header + program.source() + runner)
    if outcome.ir:
        (directory / f"fuzz-{program.seed}.{outcome.stage}.mlir").write_text(outcome.ir)
    return path


def check_source(path: str, levels: Sequence[str] = LEVELS) -> Outcome:
    """Re-checks a saved reproducer (its `Program`, `INPUTS`, `DTYPE` and `SEED`)."""
    return check(program_from_source(Path(path).read_text()), levels)


def program_from_source(source: str) -> FuzzProgram:
    """The `FuzzProgram` a reproducer file was written from."""
    namespace: dict[str, Any] = {}
    exec(compile(source, "<reproducer>", "exec"), namespace)
    lines = source.split("    def forward(", 1)[1].split("\n")[1:]
    statements = [line.strip() for line in lines if line.startswith("        ") and " = " in line]
    dtype = "bf16" if "bfloat16" in str(namespace["DTYPE"]) else "fp32"
    inputs = [tuple(shape) for shape in namespace["INPUTS"]]
    # Shapes of intermediate values are not needed to re-run a program, only to shrink it.
    return FuzzProgram(namespace["SEED"], dtype, inputs, statements, list(inputs))
