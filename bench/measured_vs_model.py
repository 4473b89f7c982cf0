"""`python -m bench.measured_vs_model`: the performance model against a measured suite run.

    python -m bench.measured_vs_model bench/results/kernels-h200-fp32.json \\
        bench/results/kernels-modeled-h200-fp32.json --out bench/results/model-vs-h200-fp32.md

Pairs each case a GPU measured (`bench.kernels`, deplodock's median ms) with the model's time
for the same case (`bench.kernels --model DEVICE`, built from the same commit), and reports
the error per family: mean absolute percentage error (MAPE), median signed error, and
Kendall's tau (does the model order the cases as the GPU did?).

A measured call includes what the host adds where it outlasts the L2 flush ahead of it (see
`backend/benchmark.py`), and the model predicts GPU time only. So the report also gives the
figures over the *GPU-bound* cases alone: those measured at `--gpu-bound-ms` or more, where
tens of microseconds of host time cannot dominate.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.model_validation import kendall_tau
from bench.modeled import family_of
from deplodock.files import write_atomic

Pair = dict[str, Any]


def pairs(measured: dict[str, Any], modeled: dict[str, Any]) -> list[Pair]:
    """One pair per case both documents have with a time (measured ok, modeled ok), with
    the % SOL of each (`deplodock/perf/sol.py`: the case's ideal time, which the modeled
    document carries, over the measured or the modeled whole time)."""
    models = {
        r["case"]: r for r in modeled["rows"] if r.get("status") == "ok" and r.get("modeled_us")
    }
    out = []
    for row in measured["rows"]:
        if row.get("status") != "ok" or not row.get("deplodock_ms") or row["case"] not in models:
            continue
        measured_us = 1000 * row["deplodock_ms"]
        model = models[row["case"]]
        ideal = model.get("ideal_us")
        out.append(
            {
                "case": row["case"],
                "family": family_of(row["op"]),
                "measured_us": measured_us,
                "modeled_us": model["modeled_us"],
                "error_pct": 100 * (model["modeled_us"] - measured_us) / measured_us,
                "measured_sol_pct": 100 * ideal / measured_us if ideal else None,
                "modeled_sol_pct": model.get("sol_pct") if ideal else None,
            }
        )
    return out


def statistics_of(rows: Sequence[Pair]) -> dict[str, Any]:
    if not rows:
        return {"cases": 0}
    errors = [r["error_pct"] for r in rows]
    return {
        "cases": len(rows),
        "mape_pct": statistics.fmean(abs(e) for e in errors),
        "median_error_pct": statistics.median(errors),
        "kendall_tau": kendall_tau(
            [r["measured_us"] for r in rows], [r["modeled_us"] for r in rows]
        ),
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _tau(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def summary_table(rows: Sequence[Pair], gpu_bound_us: float) -> list[str]:
    lines = [
        "| family | cases | MAPE | median error | Kendall tau | GPU-bound cases | MAPE | "
        "median error | tau |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    families = [*sorted({r["family"] for r in rows}), "all"]
    for family in families:
        chosen = [r for r in rows if family in ("all", r["family"])]
        bound = [r for r in chosen if r["measured_us"] >= gpu_bound_us]
        a, b = statistics_of(chosen), statistics_of(bound)
        lines.append(
            f"| {family} | {a['cases']} | {a['mape_pct']:.0f}% | {a['median_error_pct']:+.0f}% "
            f"| {_tau(a['kendall_tau'])} | {b['cases']} | "
            + (
                f"{b['mape_pct']:.0f}% | {b['median_error_pct']:+.0f}% | {_tau(b['kendall_tau'])} |"
                if b["cases"]
                else "- | - | - |"
            )
        )
    return lines


def report(
    measured: dict[str, Any], modeled: dict[str, Any], gpu_bound_ms: float, sources: Sequence[str]
) -> str:
    rows = pairs(measured, modeled)
    gpu_bound_us = 1000 * gpu_bound_ms
    caveat = []
    if measured.get("timing", "latency") == "latency":
        caveat.append(
            "Latency timing: a measured figure also holds the host work the L2 flush did not "
            "cover, so the cases under the GPU-bound bar say little about the model; "
            "measure with `--timing device` to check them."
        )
    head = [
        f"# The performance model against {measured['device']}, {measured['dtype']}",
        "",
        f"Measured: `{sources[0]}` ({measured['device']}, driver {measured.get('driver')}, "
        f"torch {measured.get('torch')}, {measured.get('date')}; "
        f"{measured.get('timing', 'latency')} timing).",
        f"Modeled: `{sources[1]}` ({modeled['device_model']}, commit {modeled.get('commit')}, "
        f"{modeled.get('date')}).",
        "",
        "Error = (modeled - measured) / measured: negative means the model is optimistic. "
        f"GPU-bound: measured at {gpu_bound_ms:g} ms or more (host time cannot dominate).",
        *caveat,
        f"Regenerate: `python -m bench.measured_vs_model {sources[0]} {sources[1]} "
        f"--gpu-bound-ms {gpu_bound_ms:g}`.",
        "",
        *summary_table(rows, gpu_bound_us),
        "",
        "% SOL: the case's ideal time (`deplodock/perf/sol.py`, from the modeled document) "
        "over its measured, or its modeled, whole time.",
        "",
        "| case | measured us | modeled us | error | % SOL measured | % SOL modeled |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    body = [
        f"| {r['case']} | {r['measured_us']:.1f} | {r['modeled_us']:.1f} | {r['error_pct']:+.0f}% "
        f"| {_pct(r['measured_sol_pct'])} | {_pct(r['modeled_sol_pct'])} |"
        for r in rows
    ]
    return "\n".join(head + body) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.measured_vs_model", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("measured", type=Path, help="a bench.kernels results JSON (GPU run)")
    parser.add_argument("modeled", type=Path, help="a bench.kernels --model results JSON")
    parser.add_argument("--gpu-bound-ms", type=float, default=0.2, help="(default: 0.2)")
    parser.add_argument("--out", type=Path, help="write the report here (default: print it)")
    args = parser.parse_args(argv)
    try:
        measured = json.loads(args.measured.read_text())
        modeled = json.loads(args.modeled.read_text())
        if not modeled.get("modeled") or measured.get("modeled"):
            raise ValueError("expected a measured document, then a modeled one")
        if measured["dtype"] != modeled["dtype"]:
            raise ValueError(f"dtypes differ: {measured['dtype']} vs {modeled['dtype']}")
    except (OSError, ValueError, KeyError) as error:
        print(f"bench.measured_vs_model: error: {error}", file=sys.stderr)
        return 1
    text = report(measured, modeled, args.gpu_bound_ms, [str(args.measured), str(args.modeled)])
    if args.out:
        write_atomic(args.out, text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
