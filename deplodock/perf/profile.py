"""`--profile --model DEVICE`: every kernel of a program, modeled, ranked by time.

Input is a kernel-level module (the level where a schedule is explicit). Each distinct
`kernel.func` is traced once (`trace.py`) and modeled (`model.py`); a kernel launched several
times counts that many times in the total. Registers per thread come from ptxas when nvcc is
on the PATH (the module is lowered to CUDA C on a copy and built with the same flags as the
GPU path; the build is cached), otherwise from `estimate_registers`, and the table says which.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from deplodock.backend.cost import kernel_cost, launch_counts
from deplodock.dialects import kernel
from deplodock.dialects.queries import name_width
from deplodock.perf.devices import Device
from deplodock.perf.model import TERMS, Calibration, KernelEstimate, load_calibration, model_kernel
from deplodock.perf.sol import (
    Work,
    dtype_of_types,
    family_of_work,
    ideal_seconds,
    program_work,
    sol_fraction,
    sol_line,
)
from deplodock.perf.trace import KernelCounters, trace_kernel

#: Registers the estimate starts from: thread/block ids, loop bounds, addresses.
BASE_REGISTERS = 16


@dataclass
class ProgramEstimate:
    """A program's modeled kernels, slowest first."""

    device: Device
    calibration: Calibration
    kernels: list[tuple[KernelEstimate, int]]  # (estimate, launches)
    registers_source: str
    #: The program's compulsory bytes and useful flops (`sol.program_work`).
    work: Work

    @property
    def total_us(self) -> float:
        """The whole modeled time of the program, every launch included."""
        return sum(estimate.time_us * launches for estimate, launches in self.kernels)

    @property
    def busy_us(self) -> float:
        return sum(estimate.busy_us * launches for estimate, launches in self.kernels)

    @property
    def ideal_us(self) -> float:
        """The program's ideal time (`sol.ideal_seconds`), us."""
        return 1e6 * ideal_seconds(self.device, self.work)

    @property
    def sol_fraction(self) -> float:
        """The program's one % SOL (`perf/sol.py`), modeled: ideal over `total_us`."""
        return sol_fraction(self.device, self.work, self.total_us * 1e-6)

    @property
    def family(self) -> str:
        return family_of_work(self.work)

    @property
    def band_label(self) -> str:
        """`modeled; GEMM bf16 +-18 % on measured H200 rows`: the error every modeled figure
        of this program carries."""
        return self.calibration.band_label(self.family)


def estimate_registers(fn: kernel.FuncOp) -> int:
    """A register count for when ptxas is not available: a base, two per loop-carried value,
    one per value a loop body keeps live across its loads; capped so the block still fits."""
    carried = sum(len(op.body.block.args) - 1 for op in fn.walk() if isinstance(op, kernel.ForOp))
    loads = max(
        (
            sum(1 for inner in op.body.block.ops if isinstance(inner, kernel.LoadOp))
            for op in fn.walk()
            if isinstance(op, kernel.ForOp)
        ),
        default=0,
    )
    estimate = BASE_REGISTERS + 2 * carried + 2 * loads
    cap = 65536 // max(fn.block_size, 1)
    return max(BASE_REGISTERS, min(estimate, 255, cap - cap % 8))


def ptxas_registers(kernel_module: ModuleOp, capability: tuple[int, int]) -> dict[str, int] | None:
    """Registers per thread of each kernel as ptxas reports them, or None without nvcc."""
    from deplodock.backend import nvcc
    from deplodock.backend.build import build_module
    from deplodock.passes.pipelines import lower

    if not nvcc.nvcc_available():
        return None
    cuda_module = lower(kernel_module.clone(), "cuda", start="kernel")
    build = build_module(cuda_module, capability)
    return {name: resources.registers for name, resources in build.kernels.items()}


@dataclass(frozen=True)
class TracedLaunch:
    """One launched kernel, traced: what `estimate_of` models."""

    counters: KernelCounters
    registers: int
    #: "ptxas" or "estimated".
    registers_source: str
    flops: float
    launches: int
    #: `sol.dtype_of_types` of its buffers.
    dtype: str


def estimate_of(
    device: Device, calibration: Calibration, traced: Iterable[TracedLaunch], work: Work
) -> ProgramEstimate:
    """The program's estimate from its traced launches (however they were traced): each
    modeled with the device's constants, slowest first."""
    constants = calibration.constants_for(device.key)
    rows = [
        (
            model_kernel(
                t.counters, device, t.registers, t.flops, constants, t.registers_source, t.dtype
            ),
            t.launches,
        )
        for t in traced
    ]
    rows.sort(key=lambda row: row[0].time_us * row[1], reverse=True)
    measured = all(row.registers_source == "ptxas" for row, _ in rows)
    source = "ptxas" if measured else "estimated from the IR (no ptxas report)"
    return ProgramEstimate(device, calibration, rows, source, work)


def model_program(
    kernel_module: ModuleOp,
    device: Device,
    registers: dict[str, int] | None = None,
    calibration: Calibration | None = None,
) -> ProgramEstimate:
    """Models every launched kernel of a kernel-level module on `device`."""
    launches = launch_counts(kernel_module)
    traced: list[TracedLaunch] = []
    for fn in kernel_module.ops:
        if not isinstance(fn, kernel.FuncOp) or fn.sym_name.data not in launches:
            continue
        name = fn.sym_name.data
        if registers is not None and name in registers:
            count, source = registers[name], "ptxas"
        else:
            count, source = estimate_registers(fn), "estimated"
        dtype = dtype_of_types([arg.type for arg in fn.body.block.args])
        flops = kernel_cost(fn).flops
        traced.append(TracedLaunch(trace_kernel(fn), count, source, flops, launches[name], dtype))
    work = program_work(kernel_module, {t.counters.name: t.flops for t in traced})
    return estimate_of(device, calibration or load_calibration(), traced, work)


def format_model_table(estimate: ProgramEstimate) -> str:
    """The table `run --profile --model` prints: one row per kernel, slowest first."""
    device, calibration = estimate.device, estimate.calibration
    total = estimate.total_us
    width = name_width((row.name for row, _ in estimate.kernels), "total (modeled)")
    lines = [
        f"profile: MODELED on {device.name}, not measured (performance model v"
        f"{calibration.model_version}, constants fitted {calibration.fit_date}; "
        f"registers: {estimate.registers_source}; {estimate.band_label})",
        f"  {'kernel':<{width}} {'n':>3} {'model us':>9} {'share':>6} {'limiter':>7} {'%SOL':>5} "
        f"{'occ':>5} {'waves':>7} {'sect/req':>8} {'bank':>5} {'DRAM MB':>8} {'regs':>4} "
        f"{'grid':>8} {'block':>5}",
    ]
    for row, launches in estimate.kernels:
        c = row.counters
        share = 100 * row.time_us * launches / total if total else 0.0
        lines.append(
            f"  {row.name:<{width}} {launches:>3} {row.time_us:>9.1f} {share:>5.0f}% "
            f"{row.limiter:>7} {100 * row.sol_fraction:>4.0f}% "
            f"{100 * row.occupancy.fraction:>4.0f}% {row.waves.waves:>7.2f} "
            f"{c.sectors_per_load_request:>8.1f} {c.bank_conflict_factor:>5.1f} "
            f"{row.dram_bytes / 1e6:>8.2f} {row.occupancy.registers:>4} "
            f"{c.grid:>8} {c.block:>5}"
        )
    lines.append(
        f"  {'total (modeled)':<{width}} {'':>3} {total:>9.1f} {'':>6} {'':>7} "
        f"{100 * estimate.sol_fraction:>4.0f}%"
    )
    lines.append("  " + sol_line(device, estimate.work, total * 1e-6, estimate.band_label))
    lines.append(
        f"  limiter: the binding resource ({', '.join(TERMS)}); "
        "%SOL: ideal time (compulsory bytes at the datasheet DRAM bandwidth or useful flops at "
        "the dtype's datasheet peak) over the modeled time, launch included (perf/sol.py); "
        "sect/req: 32-byte sectors per global load (4 = coalesced fp32); bank: shared "
        "wavefronts over the conflict-free minimum"
    )
    return "\n".join(lines)
