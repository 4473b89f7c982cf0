"""What a candidate schedule is worth: its time, from the performance model or a GPU.

An evaluator takes a candidate as a standalone *kernel-level* module (one `kernel.func` and
the `@forward` that launches it, `kernels.standalone` lowered with the candidate's knobs)
and returns a `Score`. The model evaluator needs no GPU; the measured one (`measure.py`)
times the kernel on a real device. Each says what it is (`target`, `toolchain`, `cost`),
because those strings are part of the cache key: a result is only reused where it was
found on the same device, with the same compiler, by the same cost source.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from xdsl.dialects.builtin import ModuleOp

from deplodock.perf.devices import DEFAULT_DEVICE

if TYPE_CHECKING:
    from deplodock.perf.devices import Device
    from deplodock.perf.model import Calibration

#: Statuses of a `Score`; only "ok" carries a time.
OK, FAILED, WRONG, TIMEOUT = "ok", "failed", "wrong", "timeout"


@dataclass(frozen=True)
class Score:
    """One candidate's outcome: a time in microseconds when `status` is "ok"."""

    time_us: float | None
    status: str = OK
    detail: str = ""

    @property
    def reward(self) -> float:
        """What the search maximises: 1 / time; zero for a candidate that failed."""
        if self.status != OK or not self.time_us:
            return 0.0
        return 1.0 / self.time_us


class Evaluator(Protocol):
    """Scores kernel-level candidates; the three strings go into the cache key.

    A measuring evaluator (`measure.py`, `measured`) also checks every candidate against a
    reference schedule of the same kernel and times the fastest few again, interleaved,
    because timings drift; the model's scores are exact and need neither. Evaluators
    subclass this protocol and inherit the defaults of what they do not need."""

    target: str
    toolchain: str
    cost: str
    #: Scores are timings, which drift: the tuner has the fastest few `retime`d.
    measured: ClassVar[bool] = False

    def evaluate(self, kernel_module: ModuleOp) -> Score: ...

    def set_reference(self, kernel_module: ModuleOp | None) -> None:
        """Candidates scored from now on must compute what `kernel_module` computes (the
        tuner passes its first candidate, the heuristic's); None: no check."""

    def retime(self, kernel_modules: Sequence[ModuleOp]) -> list[Score]:
        """The candidates scored again, in order (a measuring one times them in turns)."""
        return [self.evaluate(module) for module in kernel_modules]

    def close(self) -> None:
        """Releases what the evaluator holds (a measuring one stops its GPU worker)."""


# --- the toolchain: what else decides the kernel a schedule produces --------------------

_PACKAGE = Path(__file__).resolve().parents[1]


@cache
def scheduler_digest() -> str:
    """A digest of the source of every pass (scheduling, lowering, CUDA printing): a cached
    schedule is only replayed by the compiler that produced it."""
    digest = hashlib.sha256()
    for path in sorted((_PACKAGE / "passes").rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def compiler_identity() -> str:
    """nvcc's release and flags (ptxas decides registers, so the model depends on it too),
    and the scheduler digest."""
    from deplodock.backend import nvcc
    from deplodock.backend.build import DEFAULT_FLAGS

    compiler = (
        f"nvcc {nvcc.nvcc_release(nvcc.nvcc_version())} {' '.join(DEFAULT_FLAGS)}"
        if nvcc.nvcc_available()
        else "no nvcc (registers estimated)"
    )
    return f"{compiler}; scheduler {scheduler_digest()}"


def model_identity(device_key: str) -> tuple[str, str, str]:
    """(target, toolchain, cost) of the model evaluator on `device_key`: its part of the
    cache key, which `replay` needs without building an evaluator."""
    from deplodock.perf.devices import device_model
    from deplodock.perf.model import load_calibration

    return _model_identity(device_model(device_key), load_calibration())


def _model_identity(device: Device, calibration: Calibration) -> tuple[str, str, str]:
    cost = f"model v{calibration.model_version} fit {calibration.fit_date}"
    return f"model:{device.key}", compiler_identity(), cost


# --- the model as the evaluator --------------------------------------------------------


class ModelEvaluator(Evaluator):
    """The performance model's time for one launch of the candidate (its helper kernels
    included), on the device model `device_key`, with ptxas's registers when nvcc is
    installed. Modeled, never measured: `cost` says which model and calibration."""

    def __init__(self, device_key: str = DEFAULT_DEVICE):
        from deplodock.perf.devices import device_model
        from deplodock.perf.model import load_calibration

        self.device = device_model(device_key)
        self.calibration = load_calibration()
        self.target, self.toolchain, self.cost = _model_identity(self.device, self.calibration)

    def evaluate(self, kernel_module: ModuleOp) -> Score:
        from deplodock.perf.profile import model_program, ptxas_registers

        registers = ptxas_registers(kernel_module, self.device.capability)
        estimate = model_program(kernel_module, self.device, registers, self.calibration)
        return Score(estimate.total_us)
