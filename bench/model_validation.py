"""`python -m bench.model_validation`: the performance model's error against published data.

    python -m bench.model_validation              # writes bench/results/model-validation.md

Every published memory-bound H100 row is built as a deplodock program, modeled with the
committed constants (`deplodock/perf/calibration.json`) and compared with the published
PyTorch-eager time. The report gives, per op family, the mean absolute percentage error
(MAPE), the worst case and Kendall's tau (does the model order the rows as the GPU did?),
separately for the rows the constants were fitted on and for the held-back validation rows.
GEMM rows need the scheduling passes to express cuBLAS' tiling; until then they are not
modeled and the report says so.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.model_calibration import git_commit
from bench.published import PUBLISHED_DEVICE, fit_split, memory_bound_rows, trace_row
from deplodock.files import write_atomic
from deplodock.perf.devices import device_model
from deplodock.perf.model import load_calibration

OUT = Path(__file__).resolve().parent / "results"


def kendall_tau(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Kendall's tau-a: (concordant - discordant) pairs over all pairs (ties count 0)."""
    n = len(xs)
    if n < 2:
        return float("nan")
    score = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            score += (dx * dy > 0) - (dx * dy < 0)
    return score / (n * (n - 1) / 2)


def summarize(rows: list[dict[str, object]]) -> dict[str, object]:
    errors = [abs(float(r["error_pct"])) for r in rows]  # type: ignore[arg-type]
    worst = max(rows, key=lambda r: abs(float(r["error_pct"])))  # type: ignore[arg-type]
    return {
        "rows": len(rows),
        "mape_pct": round(sum(errors) / len(errors), 1),
        "worst_pct": round(float(worst["error_pct"]), 1),  # type: ignore[arg-type]
        "worst_case": worst["case"],
        "kendall_tau": round(
            kendall_tau(
                [float(r["published_us"]) for r in rows],  # type: ignore[arg-type]
                [float(r["modeled_us"]) for r in rows],  # type: ignore[arg-type]
            ),
            3,
        ),
    }


def validate() -> dict[str, object]:
    device = device_model(PUBLISHED_DEVICE)
    calibration = load_calibration()
    published = memory_bound_rows()
    fit_rows, _ = fit_split(published)
    rows = []
    for index, row in enumerate(published):
        traced = trace_row(row, device)
        modeled = traced.modeled_us(device, calibration.constants)
        rows.append(
            {
                "case": row.label,
                "family": row.family,
                "split": "fit" if index in fit_rows else "validation",
                "published_us": row.latency_us,
                "modeled_us": round(modeled, 2),
                "error_pct": round(100 * (modeled - row.latency_us) / row.latency_us, 1),
                "limiter": traced.limiter(device, calibration.constants),
            }
        )
    groups: dict[str, dict[str, object]] = {}
    for split in ("validation", "fit", "all"):
        chosen = [r for r in rows if split == "all" or r["split"] == split]
        groups[split] = {"all families": summarize(chosen)} | {
            family: summarize([r for r in chosen if r["family"] == family])
            for family in sorted({str(r["family"]) for r in chosen})
        }
    return {
        "date": datetime.date.today().isoformat(),
        "commit": git_commit(),
        "device_model": device.name,
        "calibration": {
            "fit_date": calibration.fit_date,
            "commit": calibration.commit,
            "rows": calibration.rows,
            "model_version": calibration.model_version,
        },
        "summary": groups,
        "rows": rows,
    }


def markdown(report: dict[str, object]) -> str:
    calibration = report["calibration"]
    assert isinstance(calibration, dict)
    lines = [
        "# Performance model vs published H100 measurements (modeled, not measured)",
        "",
        f"Generated {report['date']} at commit {report['commit']} by "
        "`python -m bench.model_validation`; device model: "
        f"{report['device_model']}; constants fitted {calibration['fit_date']} at commit "
        f"{calibration['commit']} on {calibration['rows']} rows "
        "(`python -m bench.model_calibration`).",
        "",
        "Published times: PyTorch 2.1 eager, fp32, H100 SXM (NeuSight; see "
        "`bench/perfdata/README.md`). Each row is rebuilt as a deplodock program of the same op "
        "and shape (its default schedule: the scheduling passes' heuristics) and modeled. "
        "Where PyTorch's kernel differs from deplodock's, the error includes that difference. "
        "GEMM rows are not part of this report (`bench/results/model-vs-h200-*.md` compares "
        "the model with a measured GEMM run).",
        "",
        "| split | family | rows | MAPE % | worst % | worst case | Kendall tau |",
        "|---|---|---|---|---|---|---|",
    ]
    summary = report["summary"]
    assert isinstance(summary, dict)
    for split, families in summary.items():
        for family, s in families.items():
            lines.append(
                f"| {split} | {family} | {s['rows']} | {s['mape_pct']} | {s['worst_pct']} | "
                f"{s['worst_case']} | {s['kendall_tau']} |"
            )
    lines += [
        "",
        "| case | family | split | published us | modeled us | error % | limiter |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = report["rows"]
    assert isinstance(rows, list)
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['family']} | {r['split']} | {r['published_us']} | "
            f"{r['modeled_us']} | {r['error_pct']} | {r['limiter']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    report = validate()
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out / "model-validation.json", json.dumps(report, indent=1) + "\n")
    write_atomic(args.out / "model-validation.md", markdown(report))
    summary = report["summary"]
    assert isinstance(summary, dict)
    for split, families in summary.items():
        s = families["all families"]
        print(f"{split:<10} MAPE {s['mape_pct']}%  worst {s['worst_pct']}%  tau {s['kendall_tau']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
