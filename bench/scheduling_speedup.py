"""`python -m bench.scheduling_speedup`: the modeled suite with the scheduling passes against
the same suite with the baseline schedule (one block per output element or row).

Reads `bench/results/kernels-modeled-<device>-<dtype>.json` (today's default schedules) and
`bench/results/baseline-schedule/` (the same suite modeled before the scheduling passes
existed, kept as it was generated), and writes `scheduling-speedup-<device>.md`: per case the
modeled time before and after, the speedup, and the geomean speedup per family. MODELED, not
measured.

For the fp32 GEMMs at 512 tokens it adds the share of the FP32 peak each reaches (modeled)
next to the share cuBLAS reached, *measured* and published, at the nearest M = 512 shape of
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
                "sol_before": base["sol_pct"],
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
        f"Baseline generated {before['date']} at commit {before['commit']}; scheduled "
        f"{after['date']} at commit {after['commit']}.",
        "",
        "| family | geomean speedup | geomean % SOL before | after |",
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
        "| case | before us | after us | speedup | % SOL after | limiter | published eager us |",
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
    """The published `linear` row at B*M = 512 whose (N, K) is nearest in log scale."""
    same_m = [r for r in rows if int(r["B"]) * int(r["M"]) == PEAK_TABLE_SEQ]
    if not same_m:
        return None
    return min(
        same_m,
        key=lambda r: abs(math.log(int(r["N"]) / n)) + abs(math.log(int(r["K"]) / k)),
    )


def peak_table(after: dict, device_key: str) -> list[str]:
    """fp32 GEMMs at 512 tokens: % of the FP32 peak, modeled here and published for cuBLAS."""
    from bench.cases import all_cases
    from bench.modeled import published_linear_rows
    from deplodock.perf.devices import device_model

    peak = device_model(device_key).fp32_flops_per_s
    cases = {c.name: c for c in all_cases()}
    published = published_linear_rows()
    lines = [
        f"### fp32 GEMMs at {PEAK_TABLE_SEQ} tokens: share of the FP32 peak",
        "",
        "deplodock: flops over the *modeled* time (launch included); cuBLAS: flops over the "
        "*measured* PyTorch-eager time (launch included) at the nearest published M = 512 "
        "shape (NeuSight, `bench/perfdata/`).",
        "",
        "| case | N x K | deplodock % peak (modeled) | nearest published "
        "| cuBLAS % peak (measured) |",
        "|---|---|---|---|---|",
    ]
    for r in after["rows"]:
        case = cases.get(r["case"])
        if r["status"] != "ok" or r["family"] != "GEMM" or case is None:
            continue
        if case.seq != PEAK_TABLE_SEQ:
            continue
        n, k = case.output[-1], case.inputs[0][-1]
        mine = 100 * r["flops"] / (r["modeled_us"] * 1e-6) / peak
        row = nearest_m512_row(n, k, published)
        if row is None:
            theirs, shape = "", ""
        else:
            flops = 2 * PEAK_TABLE_SEQ * int(row["N"]) * int(row["K"])
            theirs = f"{100 * flops / (float(row['latency_us']) * 1e-6) / peak:.1f}"
            shape = f"{PEAK_TABLE_SEQ}x{row['N']}x{row['K']}"
        lines.append(f"| {r['case']} | {n} x {k} | {mine:.1f} | {shape} | {theirs} |")
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
        "% SOL is against the roof of the pipe that does a kernel's math: the FP32 FMA peak "
        "for kernels on FMAs (every baseline kernel), the dense bf16 tensor-core peak for "
        "kernels on `mma.sync` (after scheduling: GEMMs and attention products, fp32 ones as "
        "tf32x3, three tf32 MMAs per product, whose roof counts all three). Where a family "
        "moved to tensor cores, before and after are against different roofs; the speedup "
        "compares times.",
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
