"""The published cuBLAS GEMM rows (`h100-eager-gemm-fp32.csv`) as deplodock kernels of cuBLAS'
own schedule.

Each row names the kernel cuBLAS ran. Its name holds the schedule: `tilesize128x128x8`
(a 128 x 128 output tile per block, 8-deep K steps), `stage3` (three pipeline stages),
`warpsize2x2x1` (2 x 2 warps, so 128 threads), `ffma` (FP32 FMAs); CUTLASS' SIMT kernels
spell it `sgemm_256x128_8x4` (tile in cuBLAS' column-major view, so columns x rows; K step,
stages; 256 threads by the row's block) and may split K over the grid's z.
`cublas_schedule` turns the name into deplodock knobs (`bm`, `bn`, `bk`, `depth`, `threads`,
`fm` x `fn` register cells, FMA pipe: `mma=0`, `cp.async` pipelined), `trace_gemm` builds
the row's op with those knobs written on its kernel (`tile-schedule`'s knobs, as `deplodock
tune` replays them) and traces it, and the model times it. Where
deplodock cannot take a knob as named (a tile extent or cell count it does not accept), the
nearest legal value is used and the row says so.

The columns: the CSV's `B, M, N, K`, read against its `grid` column (every cuBLAS row's grid
is `ceil(M / tile_m) x ceil(K / tile_n) x B`): the output is `B x M x K` and the product
sums over `N`: `linear` is `(B*M, N) @ (N, K)` (input features N, output features K) and
`bmm` is `(B, M, N) @ (B, N, K)`.

Building a row costs seconds (capture, lowering, ptxas, a trace); the build is cached under
`~/.cache/deplodock/published-gemm/`, keyed by the row's shape and knobs, and the trace by
`bench.trace_cache`, so a second run costs an unpickle per row.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.published import (
    PUBLISHED_DEVICE,
    RowError,
    TracedRow,
    cached_build,
    read_csv,
    traced_program,
)
from deplodock.perf.devices import device_model

#: Register cells per thread deplodock accepts along one axis (`tile-thread`'s CELL_COUNTS).
CELLS = (1, 2, 3, 4, 6, 8, 16)
#: Tile extents `tile-block` accepts.
EXTENTS = (16, 32, 64, 96, 112, 128, 256)
#: K chunks `tile-chunk-k` accepts, and multibuffer depths `tile-multibuffer` accepts.
CHUNKS = (4, 8, 16, 32, 64)
DEPTHS = (1, 2, 3, 4)
GEMM_COLUMNS = frozenset({"op", "B", "M", "N", "K", "latency_us", "kernel", "grid", "block"})

_XMMA = re.compile(r"tilesize(\d+)x(\d+)x(\d+)_stage(\d+)_warpsize(\d+)x(\d+)x(\d+)_(\w+?)_")
_CUTLASS = re.compile(r"sgemm_(\d+)x(\d+)_(\d+)x(\d+)_")


@dataclass(frozen=True)
class GemmRow:
    """One published GEMM: `B x (M x N) @ (N x K)` (module docstring) and cuBLAS' kernel."""

    op: str
    dtype: str
    batch: int
    m: int
    reduce: int
    n_out: int
    latency_us: float
    kernel: str
    grid: tuple[int, int, int]
    block: int

    @property
    def label(self) -> str:
        return f"{self.op} {self.batch}x{self.m}x{self.reduce}x{self.n_out}"


def _int(row: dict[str, str], name: str) -> int:
    try:
        return int(row[name])
    except (KeyError, TypeError, ValueError):
        raise RowError(f"column {name}: {row.get(name)!r} is not an integer") from None


def parse_row(row: dict[str, str]) -> GemmRow:
    """A CSV row as a `GemmRow` (a `RowError` when a field does not parse)."""
    try:
        latency = float(row["latency_us"])
        grid = tuple(int(x) for x in row["grid"].split("x"))
        block = int(row["block"].split("x")[0])
    except (KeyError, AttributeError, ValueError):
        raise RowError("latency_us, grid or block does not parse") from None
    if len(grid) != 3 or latency <= 0:
        raise RowError(f"grid {row.get('grid')!r} / latency {latency} is not a measurement")
    op = row.get("op", "")
    if op not in ("linear", "bmm"):
        raise RowError(f"op {op!r} is not linear or bmm")
    return GemmRow(
        op,
        row.get("dtype") or "fp32",
        _int(row, "B"),
        _int(row, "M"),
        _int(row, "N"),
        _int(row, "K"),
        latency,
        row.get("kernel", ""),
        (grid[0], grid[1], grid[2]),
        block,
    )


def read_rows(path: Path) -> Iterator[tuple[dict, GemmRow | RowError]]:
    return read_csv(path, parse_row)


def _nearest(value: int, legal: tuple[int, ...]) -> int:
    return min(legal, key=lambda x: (abs(math.log(x / value)), -x))


def _cells(cells: int) -> tuple[int, int] | None:
    """FM x FN = `cells`, both legal, the squarer pair with FN >= FM first."""
    pairs = [(fm, cells // fm) for fm in CELLS if cells % fm == 0 and cells // fm in CELLS]
    pairs.sort(key=lambda p: (abs(math.log(p[1] / p[0])), -p[1]))
    return pairs[0] if pairs else None


@dataclass(frozen=True)
class CublasSchedule:
    """The knobs of cuBLAS' kernel in deplodock's terms, and what had to move."""

    knobs: dict[str, int]
    notes: tuple[str, ...]

    def text(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.knobs.items())


def cublas_schedule(row: GemmRow) -> CublasSchedule:
    """The row's kernel name -> knobs (module docstring); a `RowError` for a name that holds
    no tile."""
    notes: list[str] = []
    xmma = _XMMA.search(row.kernel)
    cutlass = _CUTLASS.search(row.kernel)
    if xmma:
        tm, tn, tk, stages, wm, wn, _, math_path = xmma.groups()
        tile_m, tile_n, chunk, depth = int(tm), int(tn), int(tk), int(stages)
        threads = 32 * int(wm) * int(wn)
        if math_path != "ffma":
            notes.append(f"{math_path} kernel modeled on the FMA pipe")
    elif cutlass:
        # CUTLASS names its tile in cuBLAS' column-major view: the first extent runs along
        # the output's columns (the grid says so: ceil(K / first) x ceil(M / second) blocks)
        tile_n, tile_m, chunk, depth = (int(x) for x in cutlass.groups())
        threads = row.block
    else:
        raise RowError(f"kernel name holds no tile: {row.kernel[:60]!r}")
    bm, bn = _nearest(tile_m, EXTENTS), _nearest(tile_n, EXTENTS)
    if (bm, bn) != (tile_m, tile_n):
        notes.append(f"tile {tile_m}x{tile_n} -> {bm}x{bn}")
    bk = _nearest(chunk, CHUNKS)
    if bk != chunk:
        notes.append(f"K step {chunk} -> {bk}")
    slots = min(DEPTHS, key=lambda d: abs(d - depth))
    if slots != depth:
        notes.append(f"{depth} stages -> {slots} slots")
    cells = _cells(bm * bn // threads) if bm * bn % threads == 0 else None
    if cells is None:
        raise RowError(f"{bm}x{bn} tile on {threads} threads has no legal register cells")
    fm, fn = cells
    knobs = {"bm": bm, "bn": bn, "fm": fm, "fn": fn, "mma": 0, "threads": threads, "bk": bk}
    knobs |= {"depth": slots, "pipeline": 1, "async": 1}
    batches = row.batch if row.op == "bmm" else 1  # linear folds B into its rows
    wanted = row.grid[2] // batches if row.grid[2] > batches else 1
    if wanted > 1:
        splits = nearest_split(wanted, row.reduce)
        if splits > 1:
            knobs["splits"] = splits
        note = f"split K over {wanted} (grid z)"
        notes.append(note if splits == wanted else f"{note} -> {splits}")
    return CublasSchedule(knobs, tuple(notes))


def nearest_split(wanted: int, reduce: int) -> int:
    """The split count `tile-split-k` takes nearest `wanted`: one of its `SPLITS` that
    divides K and leaves slices of at least `MIN_SLICE` (1 when none does)."""
    from deplodock.passes.tile.split_k import MIN_SLICE, SPLITS

    legal = [s for s in SPLITS if s == 1 or (reduce % s == 0 and reduce // s >= MIN_SLICE)]
    return min(legal, key=lambda s: (abs(math.log(s / wanted)), -s))


def _capture(row: GemmRow):
    import torch
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode

    from deplodock.frontend.capture import capture

    class Linear(torch.nn.Module):
        def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return F.linear(x, w)

    class Bmm(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.bmm(a, b)

    with FakeTensorMode(allow_non_fake_inputs=True):
        if row.op == "linear":
            rows = row.batch * row.m  # cuBLAS sees (B*M, N): one M axis, no batch
            inputs = [torch.randn(rows, row.reduce), torch.randn(row.n_out, row.reduce)]
            return capture(Linear(), inputs)
        inputs = [
            torch.randn(row.batch, row.m, row.reduce),
            torch.randn(row.batch, row.reduce, row.n_out),
        ]
        return capture(Bmm(), inputs)


def trace_gemm(row: GemmRow, device: str = PUBLISHED_DEVICE) -> TracedRow:
    """The row with cuBLAS' schedule built in deplodock, traced, ready to model."""
    schedule = cublas_schedule(row)
    key = ["gemm", row.op, row.batch, row.m, row.reduce, row.n_out, schedule.knobs, device]
    text, registers = cached_build(
        "published-gemm", key, lambda: _build(row, schedule, device_model(device).capability)
    )
    return TracedRow(
        row.label,
        "GEMM fp32",
        f"published {device.upper()}",
        device,
        row.latency_us,
        traced_program(text, registers, flops=False),  # type: ignore[arg-type]
        detail=schedule.text(),
        note="; ".join(schedule.notes),
    )


def _build(
    row: GemmRow, schedule: CublasSchedule, capability: tuple[int, int]
) -> tuple[str, dict[str, int] | None]:
    """The row's op lowered to the loop level, cuBLAS' knobs written on its one kernel (as
    `tile-schedule` would), then lowered to the kernel level; with ptxas' registers."""
    from deplodock.dialects.common.schedule import Schedule
    from deplodock.driver import Program, lower_program
    from deplodock.perf.profile import ptxas_registers
    from deplodock.tune.kernels import loop_kernels

    program = Program(_capture(row), "torch")
    lower_program(program, "loop")
    kernels = loop_kernels(program.module)
    if len(kernels) != 1:
        raise RowError(f"the op lowered to {len(kernels)} loop kernels, not one")
    Schedule(schedule.knobs).write_on(kernels[0])
    lower_program(program, "kernel")
    return str(program.module), ptxas_registers(program.module, capability)
