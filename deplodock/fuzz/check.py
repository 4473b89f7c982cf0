"""Run one fuzz program at every level and compare it with PyTorch; shrink what fails.

`check` captures the program with `torch.export`, then lowers it one stage at a time and runs
it at each (the interpreters for tensor, loop, tile and kernel; the CPU execution of the
emitted CUDA C for cuda), comparing every output with PyTorch's float64 result at the
program's tolerance (1e-5 fp32, 1e-4 with a matmul, 1e-2 bf16). The first stage that
disagrees or fails decides the outcome. Everything runs in this process: no start-up cost
per program.

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
        return f"{self.status}{where}: {detail or self.message}"


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
    from deplodock.driver import Program, lower_program, run_and_compare
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
    for stage in levels:
        try:
            lower_program(lowered, stage)
            report = run_and_compare(lowered, program.seed, tolerance)
        except Exception as error:
            return Outcome("crash", stage, message=_first_line(error), ir=_mlir(lowered.module))
        if not report.ok:
            worst = max(report.errors)
            return Outcome("mismatch", stage, worst, ir=_mlir(lowered.module))
    return Outcome("ok", seconds=time.perf_counter() - start)


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
