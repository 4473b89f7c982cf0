"""Measured rows the performance model is fitted on and checked against, each traced once.

Three sources, one row type (`TracedRow`: what was measured, on which device, and the traced
kernels that ran):

- our own suite on a GPU (`bench.kernels`, e.g. the H200 run of 2026-11-26): the kernels of
  the commit that ran, rebuilt there (`bench.measured_kernels`);
- published PyTorch-eager memory-bound ops on an H100 (`bench/perfdata/`): each op and shape
  built as a deplodock program (`memory_bound_program`), its default schedule;
- published cuBLAS GEMMs on an H100: cuBLAS' own schedule built in deplodock
  (`bench.published_gemm`).

Shapes of the published rows reach 4 GB per tensor, so their capture runs under PyTorch's
`FakeTensorMode`: tensors have shapes and dtypes but no storage. Each built program is cached
(`~/.cache/deplodock/published-memory-bound/`) and each trace too (`bench.trace_cache`).
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from bench.trace_cache import TracedKernel, traced_kernels
from deplodock.files import cache_root, write_atomic
from deplodock.perf.devices import device_model
from deplodock.perf.model import Calibration, Constants, model_kernel

DATA = Path(__file__).resolve().parent / "perfdata"
MEMORY_BOUND_CSV = DATA / "h100-eager-memory-bound-fp32.csv"
GEMM_CSV = DATA / "h100-eager-gemm-fp32.csv"
MEMORY_BOUND_COLUMNS = frozenset({"op", "input_shapes", "latency_us"})
#: A measured row at or above this many us is *GPU-bound*: the launch and host time that a
#: latency measurement holds cannot dominate it.
GPU_BOUND_US = 200.0
#: The device model of the GPU the rows were measured on (an H100 80GB HBM3 SXM): what the
#: constants are fitted for and checked on.
PUBLISHED_DEVICE = "h100"

#: Which sub-family a published memory-bound op belongs to (the report's detail column).
KINDS = {"softmax": "softmax", "layer_norm": "layer norm"}


T = TypeVar("T")


class RowError(ValueError):
    """A row that cannot be built or modeled: the reason is printed on its line."""


@dataclass(frozen=True)
class PublishedRow:
    """A published memory-bound op: its name, input shapes and time."""

    op: str
    input_shapes: tuple[tuple[int, ...], ...]
    latency_us: float

    @property
    def kind(self) -> str:
        return KINDS.get(self.op, "elementwise")

    @property
    def label(self) -> str:
        shapes = " ".join("x".join(map(str, s)) for s in self.input_shapes)
        return f"{self.op} {shapes}"


def parse_memory_bound(row: dict[str, str]) -> PublishedRow:
    """A CSV row of the memory-bound files (a `RowError` when it does not parse)."""
    try:
        shapes = tuple(tuple(int(d) for d in s) for s in ast.literal_eval(row["input_shapes"]))
        latency = float(row["latency_us"])
    except (KeyError, ValueError, TypeError, SyntaxError):
        raise RowError("input_shapes or latency_us does not parse") from None
    if not shapes or latency <= 0:
        raise RowError("no input shape, or no positive latency")
    if row.get("op") not in OPS:
        raise RowError(f"op {row.get('op')!r} is not one deplodock builds from this file")
    return PublishedRow(row["op"], shapes, latency)


def read_csv(
    path: Path, parse: Callable[[dict[str, str]], T]
) -> Iterator[tuple[dict, T | RowError]]:
    """Each row of a CSV as it is and as `parse` reads it (or the `RowError` it raised)."""
    with path.open(newline="") as handle:
        for raw in csv.DictReader(handle):
            try:
                yield raw, parse(raw)
            except RowError as error:
                yield raw, error


def read_memory_bound(path: Path) -> Iterator[tuple[dict, PublishedRow | RowError]]:
    return read_csv(path, parse_memory_bound)


def memory_bound_rows(path: Path = MEMORY_BOUND_CSV) -> list[PublishedRow]:
    """The rows of a memory-bound file that parse."""
    return [row for _, row in read_memory_bound(path) if isinstance(row, PublishedRow)]


def _binary(fn: Callable[..., object], scalar: float) -> Callable[..., Callable[..., object]]:
    """An op PyTorch ran on two tensors or on a tensor and a scalar."""

    def make(arity: int) -> Callable[..., object]:
        return fn if arity >= 2 else (lambda x: fn(x, scalar))

    return make


def _ops() -> dict[str, Callable[[int], Callable[..., object]]]:
    import torch
    import torch.nn.functional as F

    return {
        "add": _binary(lambda x, y: x + y, 1.5),
        "mul": _binary(lambda x, y: x * y, 1.5),
        "div": _binary(lambda x, y: x / y, 8.0),
        "tanh": lambda arity: torch.tanh,
        "pow": lambda arity: lambda x: torch.pow(x, 3.0),
        "gelu": lambda arity: F.gelu,
        "where": lambda arity: lambda c, x, y: torch.where(c > 0, x, y),
        "softmax": lambda arity: lambda x: torch.softmax(x, -1),
    }


#: The ops this file's rows may name (`layer_norm` is a module, the rest functions).
OPS = frozenset({"add", "mul", "div", "tanh", "pow", "gelu", "where", "softmax", "layer_norm"})


def memory_bound_program(row: PublishedRow):
    """The row's op captured on fake tensors and lowered to the kernel level."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from deplodock.driver import Program, lower_program
    from deplodock.frontend.capture import capture

    class Op(torch.nn.Module):
        def __init__(self, fn: Callable[..., object]):
            super().__init__()
            self.fn = fn

        def forward(self, *args: torch.Tensor) -> object:
            return self.fn(*args)

    with FakeTensorMode(allow_non_fake_inputs=True):
        inputs = [torch.randn(*shape) for shape in row.input_shapes]
        if row.op == "layer_norm":
            module: torch.nn.Module = torch.nn.LayerNorm(row.input_shapes[0][-1])
        else:
            module = Op(_ops()[row.op](len(row.input_shapes)))
        captured = capture(module, inputs)
    program = Program(captured, "torch")
    lower_program(program, "kernel")
    return program.module


@dataclass
class TracedRow:
    """A measured time and the traced kernels that ran: the model re-runs on it cheaply."""

    label: str
    #: The error-band family: "GEMM fp32", "GEMM bf16", "memory-bound" or "attention".
    family: str
    #: Whose measurement: "measured H200" (our suite), "published H100" (eager, cuBLAS).
    source: str
    device: str
    measured_us: float
    kernels: list[tuple[TracedKernel, int]]  # (kernel, registers)
    #: What the row is beyond its family ("softmax", cuBLAS' kernel, the suite's case).
    detail: str = ""
    #: What had to change to build it (a cuBLAS knob deplodock does not take as named).
    note: str = ""
    #: The key of the constants it is modeled with (`perf.model.run_key`: a measured run's
    #: own) when not the device's.
    constants_key: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def gpu_bound(self) -> bool:
        return self.measured_us >= GPU_BOUND_US

    def constants(self, calibration: Calibration | Constants) -> Constants:
        """The constants of this row's device (a calibration's device constants included)."""
        if isinstance(calibration, Constants):
            return calibration
        return calibration.constants_for(self.constants_key or self.device)

    def modeled_us(self, calibration: Calibration | Constants) -> float:
        device, k = device_model(self.device), self.constants(calibration)
        return sum(
            model_kernel(t.counters, device, registers, t.flops, k).time_us * t.launches
            for t, registers in self.kernels
        )

    def limiter(self, calibration: Calibration | Constants) -> str:
        """The limiter of the kernel that takes longest."""
        device, k = device_model(self.device), self.constants(calibration)
        estimates = [
            (model_kernel(t.counters, device, registers, t.flops, k), t.launches)
            for t, registers in self.kernels
        ]
        return max(estimates, key=lambda e: e[0].time_us * e[1])[0].limiter


def traced_program(
    mlir_text: str, registers: dict[str, int] | None, flops: bool = True
) -> list[tuple[TracedKernel, int]]:
    """(kernel, registers) of each launched kernel: ptxas' count where it reported one;
    `flops=False` for a row only timed (`trace_cache.traced_kernels`)."""
    kernels = traced_kernels(mlir_text, flops)
    return [(k, (registers or {}).get(k.counters.name, k.estimated_registers)) for k in kernels]


def cached_build(namespace: str, key: object, build: Callable[[], tuple[str, object]]):
    """(text, registers) from the cache under `namespace`, built once (`build`); a build that
    fails is cached as its reason and raised as a `RowError` every time."""
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:24]
    path = cache_root() / namespace / f"{digest}.json"
    if path.exists():
        cached = json.loads(path.read_text())
        if cached.get("error"):
            raise RowError(cached["error"])
        return cached["mlir"], cached["registers"]
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        text, registers = build()
    except Exception as error:  # a row deplodock cannot build is a reason, not a crash
        reason = (str(error).splitlines() or [type(error).__name__])[0][:160]
        write_atomic(path, json.dumps({"error": reason}))
        raise RowError(reason) from None
    write_atomic(path, json.dumps({"mlir": text, "registers": registers}))
    return text, registers


def trace_memory_bound(row: PublishedRow, device: str = PUBLISHED_DEVICE) -> TracedRow:
    """A published memory-bound row built (default schedule), traced, ready to model."""
    from deplodock.perf.profile import ptxas_registers

    def build() -> tuple[str, object]:
        module = memory_bound_program(row)
        return str(module), ptxas_registers(module, device_model(device).capability)

    key = ["memory-bound", row.op, row.input_shapes, device]
    text, registers = cached_build("published-memory-bound", key, build)
    return TracedRow(
        row.label,
        "memory-bound",
        f"published {device.upper()}",
        device,
        row.latency_us,
        traced_program(text, registers, flops=False),  # type: ignore[arg-type]
        detail=row.kind,
    )


def fit_split(count: int) -> tuple[list[int], list[int]]:
    """Row indices the constants are fitted on (even) and checked on (odd): a fixed split,
    so the held-out error is measured on rows the fit never saw."""
    indices = list(range(count))
    return indices[0::2], indices[1::2]
