"""`python -m bench.standing`: where deplodock stands against eager and torch.compile, per family.

    python -m bench.standing          # writes bench/results/standing-h200.md and .json

One table for both dtypes from inputs never mixed up: the one measured run (the H200,
2026-11-26, commit af4e5e5, `--timing latency`: `kernels-h200-<dtype>.json`) and today's
kernels modeled: on the H100 and H200 models (`kernels-modeled-h100-<dtype>.json`,
`current-h200/kernels-modeled-h200-<dtype>.json`: the shared constants), and as that run
would have timed them (`current-h200/kernels-modeled-h200@latency-<dtype>.json`: its own
clock and launch cost, `python -m bench.kernels --model h200@latency --out
bench/results/current-h200`). Per family (GEMM, attention, memory-bound):

- measured: deplodock's geomean speedup over eager and over torch.compile at af4e5e5, over
  every correct case and over the GPU-bound ones (deplodock and eager both measured at 0.2
  ms or more: under that the latency timing measured host time), and the measured % of
  speed-of-light (`perf/sol.py`) of the GPU-bound cases;
- modeled: today's geomean % of speed-of-light on the H100 and the H200 models (the shared
  constants and each datasheet: kernel time, launches included), and the modeled ratio to
  eager: eager's time measured in that run over deplodock's time modeled as that run would
  have measured it (the same card, clock and timing for both), on the GPU-bound cases, each
  with its family's error band (`calibration.json`).

The README's performance section quotes `standing-h200.md`; `tests/bench/test_standing.py`
checks that the README's table is this module's output on the committed files, so a figure
there cannot go stale without the test failing.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import geomean as report_geomean
from deplodock.files import write_atomic

RESULTS = Path(__file__).resolve().parent / "results"
MEASURED = "kernels-h200-{dtype}.json"
MODELED = "current-h200/kernels-modeled-h200-{dtype}.json"
#: Today's kernels on the H100 model (the shared constants, no run-specific ones).
MODELED_H100 = "kernels-modeled-h100-{dtype}.json"
#: Today's kernels as the measured run would have timed them (its own constants).
MODELED_AS_RUN = "current-h200/kernels-modeled-h200@latency-{dtype}.json"
FAMILIES = ("GEMM", "attention", "memory-bound")
DTYPES = ("fp32", "bf16")
#: A measured time at or above this (ms) is GPU-bound (`bench.published.GPU_BOUND_US`).
GPU_BOUND_MS = 0.2


def geomean(values: Sequence[float]) -> float | None:
    """`bench.report.geomean` of the positive values, None (not NaN) where there are none:
    the table prints None as "-"."""
    mean = report_geomean(values)
    return None if math.isnan(mean) else mean


@dataclass
class FamilyStanding:
    family: str
    dtype: str
    measured_cases: int
    vs_eager: float | None
    vs_compile: float | None
    gpu_bound_cases: int
    gpu_bound_vs_eager: float | None
    gpu_bound_vs_compile: float | None
    measured_sol_pct: float | None
    modeled_cases: int
    modeled_h100_sol_pct: float | None
    modeled_sol_pct: float | None
    modeled_vs_eager_cases: int
    modeled_vs_eager: float | None
    band: str


def _family(op: str) -> str:
    from bench.modeled import family_of

    return family_of(op)


def _band_family(family: str, dtype: str) -> str:
    return f"GEMM {dtype}" if family == "GEMM" else family


def measured_sol_pct(row: dict[str, Any], modeled_row: dict[str, Any] | None) -> float | None:
    """The case's measured % SOL: today's ideal (the program's compulsory bytes and useful
    flops do not depend on its schedule) over the measured time."""
    if modeled_row is None or not row.get("deplodock_ms") or not modeled_row.get("sol_pct"):
        return None
    ideal_us = modeled_row["modeled_us"] * modeled_row["sol_pct"] / 100
    return 100 * ideal_us / (row["deplodock_ms"] * 1e3)


def gpu_bound(row: dict[str, Any]) -> bool:
    """Both deplodock's and eager's measured times at `GPU_BOUND_MS` or more."""
    return min(row.get("deplodock_ms") or 0, row.get("eager_ms") or 0) >= GPU_BOUND_MS


def standing(
    dtype: str,
    measured: dict[str, Any],
    modeled: dict[str, Any],
    bands: dict[str, Any],
    modeled_h100: dict[str, Any] | None = None,
    as_run: dict[str, Any] | None = None,
) -> list[FamilyStanding]:
    """Each family's figures (module docstring); `as_run` (default `modeled`) gives the
    modeled times the ratio to eager divides by."""
    modeled_rows = {r["case"]: r for r in modeled["rows"] if r.get("status") == "ok"}
    run_rows = {r["case"]: r for r in (as_run or modeled)["rows"] if r.get("status") == "ok"}
    out = []
    for family in FAMILIES:
        ok = [
            r
            for r in measured["rows"]
            if r.get("status") == "ok" and _family(r["op"]) == family and r.get("deplodock_ms")
        ]
        bound = [r for r in ok if gpu_bound(r)]
        mine = [r for r in modeled_rows.values() if r["family"] == family]
        h100 = [
            r
            for r in (modeled_h100 or {"rows": []})["rows"]
            if r.get("status") == "ok" and r["family"] == family
        ]
        ratios = [
            r["eager_ms"] * 1e3 / run_rows[r["case"]]["modeled_us"]
            for r in bound
            if r["case"] in run_rows
        ]
        band = bands.get(_band_family(family, dtype))
        band_text = f"+-{band['mape_pct']:.0f} % ({band['source']})" if band else "no measured band"
        out.append(
            FamilyStanding(
                family,
                dtype,
                len(ok),
                geomean([r.get("speedup_eager") for r in ok]),
                geomean([r.get("speedup_compile") for r in ok]),
                len(bound),
                geomean([r.get("speedup_eager") for r in bound]),
                geomean([r.get("speedup_compile") for r in bound]),
                geomean([measured_sol_pct(r, modeled_rows.get(r["case"])) for r in bound]),
                len(mine),
                geomean([r["sol_pct"] for r in h100]),
                geomean([r["sol_pct"] for r in mine]),
                len(ratios),
                geomean(ratios),
                band_text,
            )
        )
    return out


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} %"


def table(rows: Sequence[FamilyStanding]) -> str:
    """The markdown table the README quotes (both dtypes)."""
    lines = [
        "| dtype | family | measured (af4e5e5): vs eager / compile | GPU-bound: vs eager / "
        "compile, % SOL | modeled today, % SOL: H100 / H200 | modeled vs eager (GPU-bound) "
        "| model's band |",
        "|---|---|---|---|---:|---|---|",
    ]
    for s in rows:
        lines.append(
            f"| {s.dtype} | {s.family} | {_x(s.vs_eager)} / {_x(s.vs_compile)} "
            f"({s.measured_cases}) | {_x(s.gpu_bound_vs_eager)} / "
            f"{_x(s.gpu_bound_vs_compile)}, {_pct(s.measured_sol_pct)} ({s.gpu_bound_cases}) "
            f"| {_pct(s.modeled_h100_sol_pct)} / {_pct(s.modeled_sol_pct)} ({s.modeled_cases}) "
            f"| {_x(s.modeled_vs_eager)} "
            f"({s.modeled_vs_eager_cases}) | {s.band} |"
        )
    return "\n".join(lines)


def load(results: Path = RESULTS) -> tuple[list[FamilyStanding], dict[str, Any]]:
    """Every family's standing in both dtypes, and where each input came from."""
    calibration = json.loads(
        (Path(__file__).resolve().parents[1] / "deplodock/perf/calibration.json").read_text()
    )
    rows: list[FamilyStanding] = []
    sources: dict[str, Any] = {}
    for dtype in DTYPES:
        measured = json.loads((results / MEASURED.format(dtype=dtype)).read_text())
        modeled = json.loads((results / MODELED.format(dtype=dtype)).read_text())
        h100 = json.loads((results / MODELED_H100.format(dtype=dtype)).read_text())
        as_run = json.loads((results / MODELED_AS_RUN.format(dtype=dtype)).read_text())
        bands = calibration.get("error_bands", {})
        rows += standing(dtype, measured, modeled, bands, h100, as_run)
        sources[dtype] = {
            "measured": f"{measured['device']}, {measured['date'][:10]}, commit "
            f"{measured.get('commit')}, timing {measured.get('timing')}",
            "modeled": f"{modeled['device_model']} (shared constants and as that run, "
            f"{as_run['device_key']}) at commit {modeled['commit']} and "
            f"{h100['device_model']} at commit {h100['commit']}, model v"
            f"{modeled['calibration']['model_version']} fitted "
            f"{modeled['calibration']['fit_date']}",
        }
    return rows, sources


def markdown(rows: Sequence[FamilyStanding], sources: dict[str, Any]) -> str:
    lines = [
        "# Where deplodock stands: measured H200 (af4e5e5) and today's kernels modeled",
        "",
        "Generated by `python -m bench.standing` (see its docstring for every definition).",
        "",
    ]
    for dtype, source in sources.items():
        lines.append(f"- {dtype}: measured on {source['measured']}; modeled {source['modeled']}")
    lines += [
        "",
        "Speedups are time(other) / time(deplodock): above 1 deplodock is faster. GPU-bound: "
        f"deplodock and eager both measured at {GPU_BOUND_MS} ms or more. In brackets, the "
        "cases each figure covers. Modeled figures carry their family's band: the model's "
        "MAPE on held-out measured rows.",
        "",
        table(rows),
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.standing", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows, sources = load()
    text = markdown(rows, sources)
    write_atomic(args.out / "standing-h200.md", text)
    document = {"sources": sources, "rows": [vars(r) for r in rows]}
    write_atomic(args.out / "standing-h200.json", json.dumps(document, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
