"""`python -m bench.scheduling_speedup`: the modeled suite with the scheduling passes against
the same suite with the baseline schedule (one block per output element or row).

Reads `bench/results/kernels-modeled-<device>-<dtype>.json` (today's default schedules) and
`bench/results/baseline-schedule/` (the same suite modeled before the scheduling passes
existed, kept as it was generated), and writes `scheduling-speedup-<device>.md`: per case the
modeled time before and after, the speedup, and the geomean speedup per family. MODELED, not
measured.

% SOL is the one definition (`deplodock/perf/sol.py`): the program's ideal time over its
whole time, launches included. The ideal is the program's (its inputs, outputs and useful
flops), the same before and after, so "% SOL before" is today's ideal over the baseline's
modeled time, whatever definition the baseline's own files printed.

For the fp32 GEMMs at 512 tokens it adds the % SOL each reaches (modeled) next to the % SOL
cuBLAS reached, *measured* and published, at the nearest M = 512 shape of
`bench/perfdata/h100-eager-gemm-fp32.csv`: what a hand-tuned library attains at that size.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from bench.report import geomean
from deplodock.files import write_atomic
from deplodock.perf.devices import DEFAULT_DEVICE

#: The token count of the GEMM-versus-cuBLAS table (the suite's largest).
PEAK_TABLE_SEQ = 512

RESULTS = Path(__file__).parent / "results"


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def speedups(before: dict, after: dict) -> list[dict]:
    old = {r["case"]: r for r in before["rows"] if r["status"] == "ok"}
    rows = []
    for r in after["rows"]:
        if r["status"] != "ok" or r["case"] not in old:
            continue
        base = old[r["case"]]
        rows.append(
            {
                "case": r["case"],
                "family": r["family"],
                "before_us": base["modeled_us"],
                "after_us": r["modeled_us"],
                "speedup": base["modeled_us"] / r["modeled_us"],
                "sol_before": 100 * r["ideal_us"] / base["modeled_us"],
                "sol_after": r["sol_pct"],
                "limiter": r["limiter"],
                "published_eager_us": r.get("published_eager_us"),
            }
        )
    return rows


def section(dtype: str, before: dict, after: dict) -> list[str]:
    rows = speedups(before, after)
    families = sorted({r["family"] for r in rows})
    lines = [
        f"## {dtype}",
        "",
        f"Baseline generated {before['date']} at commit {before['commit']} (model "
        f"v{before['calibration']['model_version']}, kept as generated); scheduled "
        f"{after['date']} at commit {after['commit']} (model "
        f"v{after['calibration']['model_version']}): the speedups hold the model's changes "
        "as well as the schedules'.",
        "",
        "| family | geomean speedup | geomean % SOL before (modeled) | after (modeled) |",
        "|---|---|---|---|",
    ]
    for family in [*families, "all"]:
        mine = [r for r in rows if family in ("all", r["family"])]
        lines.append(
            f"| {family} | {geomean([r['speedup'] for r in mine]):.2f}x | "
            f"{geomean([r['sol_before'] for r in mine]):.2f} | "
            f"{geomean([r['sol_after'] for r in mine]):.2f} |"
        )
    lines += [
        "",
        "| case | before us | after us | speedup | % SOL after (modeled) | limiter | "
        "published eager us |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        eager = r["published_eager_us"] if r["published_eager_us"] is not None else ""
        lines.append(
            f"| {r['case']} | {r['before_us']:.1f} | {r['after_us']:.1f} | "
            f"{r['speedup']:.2f}x | {r['sol_after']} | {r['limiter']} | {eager} |"
        )
    return [*lines, ""]


def nearest_m512_row(n: int, k: int, rows: list[dict]) -> dict | None:
    """The published `linear` row at B*M = 512 whose output features `n` and input features
    `k` are nearest in log scale (the file's `K` and `N`: `bench/published_gemm.py`)."""
    same_m = [r for r in rows if int(r["B"]) * int(r["M"]) == PEAK_TABLE_SEQ]
    if not same_m:
        return None
    return min(
        same_m,
        key=lambda r: abs(math.log(int(r["K"]) / n)) + abs(math.log(int(r["N"]) / k)),
    )


def peak_table(after: dict, device_key: str, published: list[dict] | None = None) -> list[str]:
    """fp32 GEMMs at 512 tokens: % SOL, modeled here and measured (published) for cuBLAS
    (`published`: the file's `linear` rows by default)."""
    from bench.cases import all_cases
    from bench.modeled import published_linear_rows
    from deplodock.perf.devices import device_model
    from deplodock.perf.sol import Work, sol_fraction

    device = device_model(device_key)
    cases = {c.name: c for c in all_cases()}
    published = published_linear_rows() if published is None else published
    lines = [
        f"### fp32 GEMMs at {PEAK_TABLE_SEQ} tokens: % of speed-of-light",
        "",
        "deplodock: the case's % SOL (`deplodock/perf/sol.py`) over its *modeled* time "
        "(launch included); cuBLAS: the same definition over the *measured* PyTorch-eager "
        "time (launch included) at the nearest published M = 512 shape (NeuSight, "
        "`bench/perfdata/`). fp32: the roof is the FP32 FMA peak.",
        "",
        "| case | out x in | deplodock % SOL (modeled) | nearest published "
        "| cuBLAS % SOL (measured) |",
        "|---|---|---|---|---|",
    ]
    for r in after["rows"]:
        case = cases.get(r["case"])
        if r["status"] != "ok" or r["family"] != "GEMM" or case is None:
            continue
        if case.seq != PEAK_TABLE_SEQ:
            continue
        n, k = case.output[-1], case.inputs[0][-1]
        row = nearest_m512_row(n, k, published)
        if row is None:
            theirs, shape = "", ""
        else:
            m, k_in, n_out = PEAK_TABLE_SEQ, int(row["N"]), int(row["K"])
            work = Work(4.0 * (m * k_in + k_in * n_out + m * n_out), 2.0 * m * k_in * n_out)
            seconds = float(row["latency_us"]) * 1e-6
            theirs = f"{100 * sol_fraction(device, work, seconds):.1f}"
            shape = f"{m}x{k_in}->{n_out}"
        lines.append(f"| {r['case']} | {n} x {k} | {r['sol_pct']:.1f} | {shape} | {theirs} |")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default=DEFAULT_DEVICE, help=f"device model key (default: {DEFAULT_DEVICE})"
    )
    args = parser.parse_args(argv)
    lines = [
        f"# Scheduling passes vs the baseline schedule, MODELED on {args.model}",
        "",
        "Both columns are modeled by deplodock's performance model (no GPU involved): "
        "`python -m bench.kernels --model h100 --dtype DTYPE`, before and after the "
        "scheduling passes. Generated by `python -m bench.scheduling_speedup`.",
        "",
        "% SOL (`deplodock/perf/sol.py`): the program's ideal time (inputs read once and "
        "outputs written once at the datasheet DRAM bandwidth, or its useful flops at the "
        "FP32 FMA peak for fp32, the dense tensor-core peak for bf16) over its whole modeled "
        "time, launches included; before and after share the ideal. fp32 products on tensor "
        "cores (tf32x3) may pass 100 %.",
        "",
    ]
    for dtype in ("fp32", "bf16"):
        name = f"kernels-modeled-{args.model}-{dtype}.json"
        before, after = RESULTS / "baseline-schedule" / name, RESULTS / name
        if not (before.exists() and after.exists()):
            continue
        old, new = load(before), load(after)
        if old["commit"] == new["commit"]:
            lines += [f"## {dtype}", "", "Not regenerated since the baseline: no comparison.", ""]
            continue
        lines += section(dtype, old, new)
        if dtype == "fp32":
            lines += peak_table(new, args.model)
    out = RESULTS / f"scheduling-speedup-{args.model}.md"
    write_atomic(out, "\n".join(lines))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
