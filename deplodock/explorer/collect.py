"""What the pipeline explorer shows, gathered in one lowering: stages, pass diffs, kernels.

`explore` lowers a program down to CUDA C as `compile` does (a model's layers stamped, tuned
schedules replayed) and keeps, on the way,

- each stage's whole text (what `compile --ir <stage>` prints),
- each pass that changed the module, with its stage and unified diff (`passes.diffs`),
- per kernel symbol: its op at the loop, tile and kernel levels, its CUDA source and
  launch shape, what ptxas reports (registers, shared memory, spills; when nvcc is
  installed) and the performance model's time, limiter and counters (always labelled
  modeled).

A kernel keeps its symbol name from the loop level to CUDA (`@rms_norm_kernel` is
`loop.kernel`, `tile.kernel`, `kernel.func` and `__global__ rms_norm_kernel`), so the name is
the link between a CUDA kernel and its loop nest.

Everything here is plain data (`Exploration.as_json`): the page (`page.py`) only renders it.
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import PassPipelineCallbackType
from xdsl.printer import Printer

from deplodock.dialects.queries import kernel_symbols, launch_counts, symbol_name
from deplodock.driver import Program, StageProgress, lower_program, render
from deplodock.passes.diffs import PassDiffs
from deplodock.passes.pipelines import STAGES, stages_between
from deplodock.perf.devices import DEFAULT_DEVICE

if TYPE_CHECKING:
    from deplodock.tune.replay import Replay

#: The levels at which a kernel is its own symbol, above its CUDA source.
KERNEL_LEVELS = ("loop", "tile", "kernel")


@dataclass
class StageView:
    """One stage of the program: the text `compile --ir <name>` prints."""

    name: str
    text: str
    #: Seconds its pipeline took (the starting stage: 0).
    seconds: float


@dataclass
class PassView:
    """One pass that changed the module."""

    spec: str
    stage: str
    diff: str


@dataclass
class KernelView:
    """One kernel from its loop nest to its CUDA source."""

    name: str
    launches: int
    grid: int
    block: int
    #: Its op's text at each of `KERNEL_LEVELS` the program went through.
    levels: dict[str, str] = field(default_factory=dict)
    cuda: str = ""
    #: ptxas: registers, spill_stores, spill_loads, shared_bytes, stack_frame (None: no nvcc).
    ptxas: dict[str, int] | None = None
    #: The performance model's record (`KernelEstimate.as_row`), or None below the kernel level.
    model: dict[str, Any] | None = None


@dataclass
class Exploration:
    """Everything the explorer page shows about one compile."""

    title: str
    source: str
    stages: list[StageView] = field(default_factory=list)
    passes: list[PassView] = field(default_factory=list)
    kernels: list[KernelView] = field(default_factory=list)
    #: How the kernels were modeled and where registers came from (one line each).
    notes: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)

    def stage(self, name: str) -> StageView:
        for view in self.stages:
            if view.name == name:
                return view
        raise KeyError(f"the exploration has no stage {name!r}")

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def explore(
    program: Program,
    title: str,
    source: str,
    device_key: str = DEFAULT_DEVICE,
    callback: PassPipelineCallbackType | None = None,
    progress: StageProgress | None = None,
    replay: Replay | None = None,
) -> Exploration:
    """Lowers `program` (in place) to the cuda stage and gathers the explorer's data.

    The lowering is the one `compile` does (`driver.lower_program`): a model's layers
    stamped, `replay`'s tuned schedules written on their kernels, so every stage on the
    page is what `compile --ir <stage>` prints and its cuda stage what `-o` writes.
    `callback` also sees the module between passes (`compile -v` next to `--html`);
    `progress` hears each phase start (a model compile's progress bar).
    """
    exploration = Exploration(title, source, versions=_versions())
    start = program.stage
    exploration.stages.append(StageView(start, render(program.module, start), 0.0))
    recorder = PassDiffs()
    texts: dict[str, str] = {}
    modules: dict[str, ModuleOp] = {}

    def between_passes(*args: Any) -> None:
        recorder(*args)
        if callback is not None:
            callback(*args)

    def phase(name: str) -> None:
        if name in STAGES:  # a model's other phases (`segment`, `stitch`) run no pass
            recorder.stage = name
        if progress is not None:
            progress(name)

    def reached(stage: str, module: ModuleOp) -> None:
        texts[stage] = render(module, stage)
        if stage in KERNEL_LEVELS:
            modules[stage] = module.clone()  # the program goes on being lowered in place

    lower_program(program, STAGES[-1], between_passes, phase, replay, reached)
    for stage in stages_between(start, STAGES[-1]):
        seconds = program.timings.get(stage, 0.0)
        exploration.stages.append(StageView(stage, texts[stage], seconds))
    exploration.passes = [
        PassView(change.spec, change.stage or "", change.diff) for change in recorder.changes
    ]
    exploration.kernels = _kernels(program.module, modules)
    if replay is not None and replay.replayed:
        names = ", ".join(sorted(set(replay.replayed)))
        exploration.notes.append(f"tuned schedules replayed from {replay.path}: {names}")
    _add_performance(exploration, modules.get("kernel"), program.module, device_key)
    return exploration


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("deplodock", "xdsl"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "unknown"
    return found


def _op_text(op: Operation) -> str:
    stream = io.StringIO()
    Printer(stream=stream).print_op(op)
    return stream.getvalue()


def _kernels(cuda_module: ModuleOp, modules: dict[str, ModuleOp]) -> list[KernelView]:
    """One view per CUDA kernel, with its ops at the levels above (found by symbol name)."""
    from deplodock.backend.build import kernel_ops

    launches = launch_counts(cuda_module)
    by_level = {
        level: {symbol_name(op): op for op in kernel_symbols(module)}
        for level, module in modules.items()
    }
    views = []
    for op in kernel_ops(cuda_module):
        name = op.sym_name.data
        view = KernelView(
            name,
            launches.get(name, 1),
            op.grid.value.data,
            op.block.value.data,
            cuda=op.source.data,
        )
        for level in KERNEL_LEVELS:
            if name in by_level.get(level, {}):
                view.levels[level] = _op_text(by_level[level][name])
        views.append(view)
    return views


def _add_performance(
    exploration: Exploration,
    kernel_module: ModuleOp | None,
    cuda_module: ModuleOp,
    device_key: str,
) -> None:
    """ptxas's report (when nvcc is installed) and the model's estimate of each kernel."""
    from deplodock.backend import nvcc
    from deplodock.backend.build import build_module
    from deplodock.perf.devices import device_model
    from deplodock.perf.profile import model_program

    if not exploration.kernels:
        return
    device = device_model(device_key)
    registers = None
    if nvcc.nvcc_available():
        build = build_module(cuda_module, device.capability)
        resources = {name: asdict(found) for name, found in build.kernels.items()}
        for view in exploration.kernels:
            view.ptxas = resources.get(view.name)
        registers = {name: found["registers"] for name, found in resources.items()}
        exploration.notes.append(
            f"ptxas: nvcc {nvcc.nvcc_release(build.nvcc_version)}, -arch={build.arch} "
            f"{' '.join(build.flags)}"
        )
    else:
        exploration.notes.append("ptxas: nvcc is not installed, registers are estimated")
    if kernel_module is None:
        return
    estimate = model_program(kernel_module, device, registers)
    rows = {row.name: row.as_row() for row, _ in estimate.kernels}
    for view in exploration.kernels:
        view.model = rows.get(view.name)
    exploration.notes.append(
        f"times are MODELED on {device.name}, not measured (performance model "
        f"v{estimate.calibration.model_version}, constants fitted "
        f"{estimate.calibration.fit_date}; {estimate.band_label})"
    )
    exploration.notes.append(
        f"program: {100 * estimate.sol_fraction:.1f}% of speed-of-light, modeled "
        f"({estimate.total_us:.1f} us against an ideal {estimate.ideal_us:.1f} us; "
        "%SOL: ideal time over the whole time, launches included, deplodock/perf/sol.py)"
    )
