"""The time model: counters + device + a few fitted constants -> a *modeled* kernel time.

Per kernel, each resource gets a time, and the largest one is the kernel's limiter:

| term      | time                                                                          |
|-----------|-------------------------------------------------------------------------------|
| `issue`   | warp-instructions of the busiest SM / (schedulers x clock x issue efficiency) |
| `fp32`    | FFMA/FADD/FMUL warp-instructions x 32 / (FP32 lanes x clock)                  |
| `tensor`  | `mma.sync` warp-instructions x 4096 / (`mma.sync` flops per SM-cycle x clock) |
| `int`     | integer warp-instructions x 32 / (INT32 lanes x clock)                        |
| `sfu`     | MUFU warp-instructions x 32 / (SFU lanes x clock)                             |
| `shared`  | shared-memory wavefronts of the busiest SM / clock (one per cycle)            |
| `l1`      | 128-byte lines the busiest SM's global requests touch / clock (one per cycle) |
| `l2`      | bytes between L1 and L2 / L2 bandwidth                                        |
| `dram`    | DRAM bytes / achievable DRAM bandwidth                                        |
| `latency` | memory bytes x mean latency / bytes in flight (Little's law)                  |

Instruction counts are per pipe (`instructions.py`); every warp-instruction, an `mma.sync`
included, takes one issue slot. "Busiest SM" is where the grid's blocks land most densely:
`ceil(grid / SMs)` blocks, so a grid of 133 blocks on 132 SMs pays two blocks' time in every
instruction term (wave quantization); where blocks do unequal work (a causal P.V block stops
at its diagonal), one of them is the heaviest traced block. DRAM bytes are the compulsory
bytes (each touched byte once) plus the re-reads that miss in L2, by a reuse-distance
estimate (`_dram_bytes`). Little's law caps the bandwidth a kernel can pull with few resident
warps or few loads in flight per warp (the `latency` limiter), which is what makes occupancy
and vector width matter to a memory-bound kernel.

Resources overlap, but not perfectly: the busy time is a soft maximum of the terms (their
p-norm, p fitted), so a kernel limited by DRAM still pays a little for 32-way bank
conflicts. Then `time = launch + rounds x wave_overhead + busy`. The constants (`Constants`) are
fitted by `bench/model_calibration.py` on measured rows (deplodock's own kernels on an H200,
published H100 eager and cuBLAS rows) and committed as `calibration.json`, with the few one
measured run sets apart (`Calibration.device_constants`, keyed `<device>@<timing>`: the
H200's sustained clock and launch cost as its 2026-11-26 latency-timed run saw them, which
model that run's rows only); everything else is counted or comes from `devices.py`. A modeled time
is an estimate with a stated error (its family's `ErrorBand`, from held-out rows:
`bench/results/model-validation.md`), never a measurement. Its % of speed-of-light is
`sol.py`'s, the one every report uses.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from deplodock.dialects.hardware import warps_in
from deplodock.perf.devices import DEFAULT_DEVICE, Device
from deplodock.perf.instructions import FP32_CLASSES, MMA_FLOPS
from deplodock.perf.memory import SECTOR_BYTES
from deplodock.perf.occupancy import Occupancy, Waves, occupancy, waves
from deplodock.perf.sol import Work, ideal_seconds
from deplodock.perf.trace import KernelCounters

CALIBRATION = Path(__file__).with_name("calibration.json")
#: Bumped when the model's equations change (old calibrations and tuning caches go stale).
#: v2: vector shared reads made in lane pairs of equal addresses take half the wavefronts
#: (`hardware.shared_wavefronts`).
#: v3: loops that stage through shared memory are traced for `SAMPLED_STAGED_ITERATIONS` and
#: scaled; % SOL is the one definition of `perf/sol.py` (datasheet roofs, launch included);
#: constants refitted on measured H200 rows and published cuBLAS rows.
MODEL_VERSION = 3
#: The resources the model times, in the order `terms_us` lists them; the limiter is one.
TERMS = ("issue", "fp32", "tensor", "int", "sfu", "shared", "l1", "l2", "dram", "latency")


@dataclass(frozen=True)
class Constants:
    """The model's few free parameters (fitted; see `calibration.json`)."""

    #: Sustained SM clock under load, as a fraction of the boost clock.
    clock_fraction: float = 0.9
    #: Achievable DRAM bandwidth as a fraction of the datasheet peak.
    dram_efficiency: float = 0.9
    #: Latency of a DRAM access under load (the Little's-law denominator), ns.
    memory_latency_ns: float = 800.0
    #: Latency of an L2 hit under load, as a multiple of the device's unloaded figure
    #: (`Device.l2_latency_ns`, a microbenchmark of one warp): queues at the L2 slices and
    #: the crossbar stretch it when every SM streams at once.
    l2_load_factor: float = 1.0
    #: Fixed cost of one launch as CUDA events see it, us.
    launch_us: float = 5.0
    #: Fixed cost of each round of blocks on an SM (block start, ramp, drain), us.
    wave_us: float = 1.0
    #: Fraction of issue slots a scheduler fills (dependencies, branches).
    issue_efficiency: float = 0.7
    #: How well the resources overlap: the busy time is the `overlap`-norm of the terms
    #: (infinity: perfect overlap, the largest term alone; 1: no overlap, their sum).
    overlap: float = 6.0


@dataclass(frozen=True)
class ErrorBand:
    """How far the model was from measurements of one family, on rows it was not fitted on:
    what every modeled figure of that family carries beside it."""

    family: str
    #: Mean absolute percentage error on the held-out rows.
    mape_pct: float
    #: Median of (modeled - measured) / measured: negative, the model is optimistic.
    median_error_pct: float
    rows: int
    #: Which measurements, in a few words ("measured H200 rows").
    source: str

    def label(self) -> str:
        """`modeled; GEMM bf16 +-18 % on measured H200 rows`."""
        return f"modeled; {self.family} +-{self.mape_pct:.0f} % on {self.source}"


@dataclass(frozen=True)
class Calibration:
    """Fitted constants, where they came from, and the error bands they were checked to."""

    constants: Constants
    fit_date: str = "unfitted"
    commit: str = ""
    device: str = DEFAULT_DEVICE
    rows: int = 0
    model_version: int = MODEL_VERSION
    error_bands: dict[str, ErrorBand] = field(default_factory=dict)
    #: Constants one measured run sets apart from the shared ones, fitted on its own rows
    #: (`calibration.json`'s `device_constants`), keyed by `run_key(device, timing)`: the
    #: sustained clock of a lent card and the fixed cost of a launch as that run's timing saw
    #: it (host issue included, under latency timing). They model that run's rows; a device
    #: model on its own (`run --profile --model h200`, the suites) takes the shared ones.
    device_constants: dict[str, dict[str, float]] = field(default_factory=dict)

    def constants_for(self, device_key: str) -> Constants:
        """The constants of `device_key` (a device, or a `run_key`): the shared ones with
        its own in their place."""
        overrides = self.device_constants.get(device_key)
        return dataclasses.replace(self.constants, **overrides) if overrides else self.constants

    def band_label(self, family: str) -> str:
        """The label a modeled figure of `family` carries (its band, or that it has none)."""
        band = self.error_bands.get(family)
        if band is None:
            return f"modeled; {family}: no measured error band yet"
        return band.label()


def run_key(device_key: str, timing: str) -> str:
    """The key of one measured run's own constants: `h200@latency`."""
    return f"{device_key}@{timing}"


def for_run(calibration: Calibration, device_key: str, timing: str) -> Calibration:
    """`calibration` with the run's own constants as its shared ones, so everything that
    models `device_key` (`constants_for`) models it as that run saw it."""
    own = calibration.constants_for(run_key(device_key, timing))
    return dataclasses.replace(calibration, constants=own, device_constants={})


@cache
def load_calibration(path: Path = CALIBRATION) -> Calibration:
    """The committed calibration (defaults when the file is missing)."""
    if not path.exists():
        return Calibration(Constants())
    data = json.loads(path.read_text())
    return Calibration(
        constants=Constants(**data["constants"]),
        fit_date=data.get("fit_date", "unknown"),
        commit=data.get("commit", ""),
        device=data.get("device", DEFAULT_DEVICE),
        rows=data.get("rows", 0),
        model_version=data.get("model_version", MODEL_VERSION),
        error_bands={
            family: ErrorBand(family=family, **band)
            for family, band in data.get("error_bands", {}).items()
        },
        device_constants={
            key: {name: float(value) for name, value in values.items()}
            for key, values in data.get("device_constants", {}).items()
        },
    )


@dataclass
class KernelEstimate:
    """The model's answer for one kernel: time, limiter, and the counters behind them."""

    name: str
    device: str
    time_us: float
    #: The time the SMs are busy (time_us without the fixed launch cost).
    busy_us: float
    #: Speed of light of the kernel as a program (`sol.ideal_seconds`): its compulsory bytes
    #: at the datasheet DRAM bandwidth or its flops at its dtype's datasheet peak.
    ideal_us: float
    limiter: str
    terms_us: dict[str, float]
    #: The one % SOL (`perf/sol.py`): ideal over the whole modeled time, launch included.
    sol_fraction: float
    #: Ideal over the busy time (no launch): a busy-time figure, only shown labelled so.
    busy_sol_fraction: float
    occupancy: Occupancy
    waves: Waves
    dram_bytes: float
    compulsory_bytes: float
    l2_bytes: float
    flops: float
    counters: KernelCounters
    registers_source: str = "ptxas"
    extra: dict[str, float] = field(default_factory=dict)

    def as_row(self) -> dict[str, object]:
        """A flat, JSON-ready summary (the modeled suite's per-kernel record)."""
        c = self.counters
        return {
            "kernel": self.name,
            "modeled_us": round(self.time_us, 3),
            "busy_us": round(self.busy_us, 3),
            "ideal_us": round(self.ideal_us, 3),
            "limiter": self.limiter,
            "sol_pct": round(100 * self.sol_fraction, 1),
            "busy_sol_pct": round(100 * self.busy_sol_fraction, 1),
            "grid": c.grid,
            "block": c.block,
            "registers": self.occupancy.registers,
            "registers_source": self.registers_source,
            "shared_bytes": self.occupancy.shared_bytes,
            "occupancy_pct": round(100 * self.occupancy.fraction, 1),
            "occupancy_limiter": self.occupancy.limiter,
            "waves": round(self.waves.waves, 3),
            "dram_bytes": round(self.dram_bytes),
            "l2_bytes": round(self.l2_bytes),
            "flops": round(self.flops),
            "sectors_per_load_request": round(c.sectors_per_load_request, 2),
            "sectors_per_store_request": round(c.sectors_per_store_request, 2),
            "bank_conflict_factor": round(c.bank_conflict_factor, 2),
            "bytes_in_flight_per_warp": round(c.bytes_in_flight_per_warp, 1),
            "instructions": {k: round(v) for k, v in c.instructions.items()},
            "terms_us": {k: round(v, 3) for k, v in self.terms_us.items()},
            "counters_source": c.source,
        }


def _l2_bytes(counters: KernelCounters, device: Device, occ: Occupancy) -> float:
    """Bytes that cross L1-L2: each block's distinct sectors while they fit in its share of
    L1, every requested sector when they do not."""
    l1_share = max(device.l1_shared_bytes_per_sm - occ.shared_bytes * occ.blocks_per_sm, 0)
    l1_share /= occ.blocks_per_sm
    total = 0.0
    for block, weight in zip(counters.traced_blocks, counters.weights, strict=True):
        unique = sum(block.unique_load_bytes.values())
        requested = block.global_load_sectors * SECTOR_BYTES
        loads = unique if unique <= l1_share else requested
        total += weight * (loads + sum(block.unique_store_bytes.values()))
    return total


def _dram_bytes(counters: KernelCounters, device: Device, l2_bytes: float) -> tuple[float, float]:
    """(modeled DRAM bytes, compulsory bytes).

    A buffer read by several blocks is fetched from DRAM once if L2 still holds it when the
    next block reads it. Between two reads of the same byte, about `traffic / reuses` other
    bytes pass through L2 (the reuse distance); the re-read hits with probability
    `min(1, L2 size / distance)`. Stores are written back once.
    """
    compulsory = counters.footprint_bytes("load") + counters.footprint_bytes("store")
    traffic = max(l2_bytes, compulsory)
    dram = counters.footprint_bytes("store")
    for name, reads in counters.unique_bytes("load").items():
        size = min(reads, counters.buffer_bytes[name])
        dram += size
        if reads > size > 0:
            distance = traffic / (reads / size)
            dram += (reads - size) * (1.0 - min(1.0, device.l2_bytes / distance))
    return dram, compulsory


def _latency_time(
    counters: KernelCounters,
    device: Device,
    occ: Occupancy,
    k: Constants,
    l2_bytes: float,
    dram_bytes: float,
) -> float:
    """Little's law: the memory system returns at most (bytes in flight) / (mean latency)
    per second. Bytes in flight are the resident warps' outstanding loads; the latency is
    L2's for hits and DRAM's for the share of bytes that miss."""
    resident_warps = min(counters.grid, occ.blocks_per_sm * device.sm_count) * warps_in(
        counters.block
    )
    in_flight = resident_warps * max(counters.bytes_in_flight_per_warp, SECTOR_BYTES)
    miss = min(1.0, dram_bytes / l2_bytes) if l2_bytes > 0 else 1.0
    l2_latency_ns = device.l2_latency_ns * k.l2_load_factor
    latency_ns = l2_latency_ns * (1.0 - miss) + k.memory_latency_ns * miss
    return max(l2_bytes, dram_bytes) * latency_ns * 1e-9 / in_flight


def _overlapped(terms: Iterable[float], overlap: float) -> float:
    """The p-norm of the terms: the largest one, plus a share of the others that shrinks as
    the resources overlap better (a soft maximum)."""
    values = [t for t in terms if t > 0]
    if not values:
        return 0.0
    top = max(values)
    return top * sum((t / top) ** overlap for t in values) ** (1.0 / overlap)


def model_kernel(
    counters: KernelCounters,
    device: Device,
    registers: int,
    flops: float,
    constants: Constants | None = None,
    registers_source: str = "ptxas",
    dtype: str = "fp32",
) -> KernelEstimate:
    """Modeled time of one launch of the traced kernel on `device` (`flops`: all of its math,
    tensor-core flops included, as `backend.cost` counts it; `dtype`: which datasheet peak
    bounds them in the kernel's % SOL, `sol.dtype_of_types` of its buffers)."""
    k = constants or load_calibration().constants_for(device.key)
    occ = occupancy(
        device, counters.block, registers, counters.shared_bytes, registers_source != "ptxas"
    )
    grid_waves = waves(device, counters.grid, occ)
    clock = device.boost_clock_ghz * 1e9 * k.clock_fraction
    # The busiest SM runs ceil(grid / SMs) blocks, one of them (where blocks do unequal
    # work) the heaviest.
    busiest_blocks = math.ceil(counters.grid / device.sm_count) - 1 + counters.heaviest_block
    busiest_share = busiest_blocks / counters.grid

    instructions = counters.instructions
    per_sm = {name: count * busiest_share for name, count in instructions.items()}
    terms = {
        "issue": sum(per_sm.values())
        / (device.warp_schedulers_per_sm * clock * k.issue_efficiency),
        "fp32": sum(per_sm[c] for c in FP32_CLASSES) * 32 / (device.fp32_lanes_per_sm * clock),
        "tensor": per_sm["mma"] * MMA_FLOPS / (device.mma_sync_flops_per_clock_per_sm * clock),
        "int": per_sm["int"] * 32 / (device.int32_lanes_per_sm * clock),
        "sfu": per_sm["sfu"] * 32 / (device.sfu_lanes_per_sm * clock),
        "shared": counters.total("shared_wavefronts") * busiest_share / clock,
        "l1": (counters.total("global_load_lines") + counters.total("global_store_lines"))
        * busiest_share
        / clock,
    }
    l2_bytes = _l2_bytes(counters, device, occ)
    terms["l2"] = l2_bytes / device.l2_bytes_per_s
    dram_bytes, compulsory = _dram_bytes(counters, device, l2_bytes)
    terms["dram"] = dram_bytes / (device.dram_bytes_per_s * k.dram_efficiency)
    terms["latency"] = _latency_time(counters, device, occ, k, l2_bytes, dram_bytes)
    terms_us = {name: seconds * 1e6 for name, seconds in terms.items()}
    limiter = max(terms_us, key=lambda name: terms_us[name])
    busy_us = _overlapped(terms_us.values(), k.overlap) + grid_waves.rounds * k.wave_us
    time_us = k.launch_us + busy_us
    ideal_us = 1e6 * ideal_seconds(device, Work(compulsory, flops, dtype))
    return KernelEstimate(
        name=counters.name,
        device=device.key,
        time_us=time_us,
        busy_us=busy_us,
        ideal_us=ideal_us,
        limiter=limiter,
        terms_us=terms_us,
        sol_fraction=ideal_us / time_us,
        busy_sol_fraction=ideal_us / busy_us if busy_us > 0 else 0.0,
        occupancy=occ,
        waves=grid_waves,
        dram_bytes=dram_bytes,
        compulsory_bytes=compulsory,
        l2_bytes=l2_bytes,
        flops=flops,
        counters=counters,
        registers_source=registers_source,
    )


def constants_as_dict(constants: Constants) -> dict[str, float]:
    return dataclasses.asdict(constants)
