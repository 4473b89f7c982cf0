"""The published memory-bound H100 rows (`bench/perfdata/`) as deplodock programs.

Each row names a PyTorch op and its input shapes; `row_program` builds the same op as a
deplodock program at the kernel level, so the performance model can predict it and be
compared with the published time. Shapes reach 4 GB per tensor, so the capture runs under
PyTorch's `FakeTensorMode`: tensors have shapes and dtypes but no storage.
"""

from __future__ import annotations

import ast
import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from xdsl.dialects.builtin import ModuleOp

from deplodock.backend.cost import kernel_cost, launch_counts
from deplodock.dialects import kernel
from deplodock.perf.devices import Device
from deplodock.perf.model import Constants, model_kernel
from deplodock.perf.profile import estimate_registers, ptxas_registers
from deplodock.perf.trace import KernelCounters, trace_kernel

DATA = Path(__file__).resolve().parent / "perfdata"
MEMORY_BOUND_CSV = DATA / "h100-eager-memory-bound-fp32.csv"
#: The device model of the GPU the rows were measured on (an H100 80GB HBM3 SXM): what the
#: constants are fitted for and checked on.
PUBLISHED_DEVICE = "h100"

#: Which family a published op belongs to (the validation report groups by it).
FAMILIES = {"softmax": "softmax", "layer_norm": "layer norm"}


@dataclass(frozen=True)
class PublishedRow:
    op: str
    input_shapes: tuple[tuple[int, ...], ...]
    latency_us: float

    @property
    def family(self) -> str:
        return FAMILIES.get(self.op, "elementwise")

    @property
    def label(self) -> str:
        shapes = " ".join("x".join(map(str, s)) for s in self.input_shapes)
        return f"{self.op} {shapes}"


def memory_bound_rows(path: Path = MEMORY_BOUND_CSV) -> list[PublishedRow]:
    with path.open() as handle:
        return [
            PublishedRow(
                row["op"],
                tuple(tuple(shape) for shape in ast.literal_eval(row["input_shapes"])),
                float(row["latency_us"]),
            )
            for row in csv.DictReader(handle)
        ]


def _forward(row: PublishedRow) -> Callable[..., object]:
    """The op as a function of the row's input tensors (a scalar where PyTorch had one)."""
    two = len(row.input_shapes) >= 2
    ops: dict[str, Callable[..., object]] = {
        "add": (lambda x, y: x + y) if two else (lambda x: x + 1.5),
        "mul": (lambda x, y: x * y) if two else (lambda x: x * 1.5),
        "div": (lambda x, y: x / y) if two else (lambda x: x / 8.0),
        "tanh": torch.tanh,
        "pow": lambda x: torch.pow(x, 3.0),
        "gelu": F.gelu,
        "where": lambda c, x, y: torch.where(c > 0, x, y),
        "softmax": lambda x: torch.softmax(x, -1),
    }
    return ops[row.op]


class _Op(torch.nn.Module):
    def __init__(self, fn: Callable[..., object]):
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> object:
        return self.fn(*args)


def row_program(row: PublishedRow) -> ModuleOp:
    """The row's op captured on fake tensors and lowered to the kernel level."""
    from deplodock.driver import Program, lower_program
    from deplodock.frontend.capture import capture

    with FakeTensorMode(allow_non_fake_inputs=True):
        inputs = [torch.randn(*shape) for shape in row.input_shapes]
        if row.op == "layer_norm":
            module: torch.nn.Module = torch.nn.LayerNorm(row.input_shapes[0][-1])
        else:
            module = _Op(_forward(row))
        captured = capture(module, inputs)
    program = Program(captured, "torch")
    lower_program(program, "kernel")
    return program.module


@dataclass
class TracedRow:
    """A published row with its program traced once: the model re-runs on it cheaply."""

    row: PublishedRow
    kernels: list[tuple[KernelCounters, int, float, int]]  # counters, registers, flops, launches

    def modeled_us(self, device: Device, constants: Constants) -> float:
        return sum(
            model_kernel(counters, device, registers, flops, constants).time_us * launches
            for counters, registers, flops, launches in self.kernels
        )

    def limiter(self, device: Device, constants: Constants) -> str:
        counters, registers, flops, _ = self.kernels[0]
        return model_kernel(counters, device, registers, flops, constants).limiter


def trace_row(row: PublishedRow, device: Device) -> TracedRow:
    """Builds, traces and gets registers (ptxas when nvcc is present) for one row."""
    module = row_program(row)
    registers = ptxas_registers(module, device.capability)
    launches = launch_counts(module)
    kernels = []
    for fn in module.ops:
        if isinstance(fn, kernel.FuncOp) and fn.sym_name.data in launches:
            name = fn.sym_name.data
            count = registers[name] if registers else estimate_registers(fn)
            kernels.append((trace_kernel(fn), count, kernel_cost(fn).flops, launches[name]))
    return TracedRow(row, kernels)


def fit_split(rows: list[PublishedRow]) -> tuple[list[int], list[int]]:
    """Row indices the constants are fitted on (even) and checked on (odd): a fixed split,
    so the validation error is measured on rows the fit never saw."""
    indices = list(range(len(rows)))
    return indices[0::2], indices[1::2]
