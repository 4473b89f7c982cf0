"""`python -m bench.model_validation`: the performance model's error against measurements.

    python -m bench.model_validation              # writes bench/results/model-validation.md
    python -m bench.model_validation --data ../shared/perfdata/h100-eager-gemm-fp32.csv --limit 50

Without `--data`: every row `bench.model_calibration` knows (our measured H200 suite rows,
the published H100 memory-bound and cuBLAS rows) is modeled with the committed constants
(`deplodock/perf/calibration.json`) and compared with its measured time. Per source and
family, for the rows the constants were fitted on and the held-out ones, and again for the
GPU-bound rows alone (measured at 0.2 ms or more), the report gives the mean absolute
percentage error (MAPE), the median signed error (negative: the model is optimistic) and
Kendall's tau (does the model order the rows as the GPU did?).

With `--data FILE.csv`: any CSV with the columns of the files in `bench/perfdata/` (GEMM rows:
op, dtype, B, M, N, K, latency_us, kernel, grid, block; memory-bound rows: op, dtype,
input_shapes, output_shape, latency_us, samples), modeled on the H100 (`--model`). One line
per row; a row that cannot be built says why on its line and is left out of the summary,
whose last line is `N rows: MAPE X %, median error Y %, tau Z`.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from bench.model_calibration import all_rows, git_commit
from bench.published import (
    MEMORY_BOUND_COLUMNS,
    PUBLISHED_DEVICE,
    PublishedRow,
    RowError,
    TracedRow,
    read_memory_bound,
    trace_memory_bound,
)
from deplodock.files import write_atomic
from deplodock.perf.model import Calibration, load_calibration

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


def error_statistics(measured: Sequence[float], modeled: Sequence[float]) -> dict[str, float]:
    """Rows, MAPE, median signed error (%) and Kendall's tau of modeled against measured."""
    errors = [100 * (b - a) / a for a, b in zip(measured, modeled, strict=True)]
    if not errors:
        return {"rows": 0}
    return {
        "rows": len(errors),
        "mape_pct": round(statistics.fmean(abs(e) for e in errors), 1),
        "median_error_pct": round(statistics.median(errors), 1),
        "median_abs_error_pct": round(statistics.median(abs(e) for e in errors), 1),
        "kendall_tau": round(kendall_tau(measured, modeled), 3),
    }


def summary_line(stats: dict[str, float]) -> str:
    """`N rows: MAPE X %, median error Y %, tau Z` (the interface's last line)."""
    if not stats.get("rows"):
        return "0 rows: MAPE - %, median error - %, tau -"
    tau = stats["kendall_tau"]
    tau_text = "-" if math.isnan(tau) else f"{tau:.2f}"
    return (
        f"{stats['rows']} rows: MAPE {stats['mape_pct']:.1f} %, median error "
        f"{stats['median_error_pct']:+.1f} %, tau {tau_text}"
    )


# --- the report over every known row -------------------------------------------------------


def row_record(row: TracedRow, calibration: Calibration) -> dict[str, object]:
    modeled = row.modeled_us(calibration)
    return {
        "case": row.label,
        "source": row.source,
        "family": row.family,
        "detail": row.detail,
        "note": row.note,
        "split": row.extra.get("split", ""),
        "gpu_bound": row.gpu_bound,
        "measured_us": round(row.measured_us, 2),
        "modeled_us": round(modeled, 2),
        "error_pct": round(100 * (modeled - row.measured_us) / row.measured_us, 1),
        "limiter": row.limiter(calibration),
    }


def grouped(records: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    """Statistics per (source, family, split), over all rows and the GPU-bound ones."""
    out = []
    keys = sorted({(str(r["source"]), str(r["family"])) for r in records})
    for source, family in keys:
        for split in ("held-out", "fit"):
            mine = [
                r
                for r in records
                if r["source"] == source and r["family"] == family and r["split"] == split
            ]
            for subset, chosen in (
                ("all", mine),
                ("GPU-bound", [r for r in mine if r["gpu_bound"]]),
            ):
                stats = error_statistics(
                    [float(r["measured_us"]) for r in chosen],  # type: ignore[arg-type]
                    [float(r["modeled_us"]) for r in chosen],  # type: ignore[arg-type]
                )
                out.append(
                    {"source": source, "family": family, "split": split, "subset": subset} | stats
                )
    return out


def validate(gemm_stride: int) -> dict[str, object]:
    calibration = load_calibration()
    rows = all_rows(gemm_stride, echo=lambda line: print(line, file=sys.stderr))
    records = [row_record(row, calibration) for row in rows]
    return {
        "date": datetime.date.today().isoformat(),
        "commit": git_commit(),
        "command": f"python -m bench.model_validation --gemm-stride {gemm_stride}",
        "calibration": {
            "fit_date": calibration.fit_date,
            "commit": calibration.commit,
            "rows": calibration.rows,
            "model_version": calibration.model_version,
        },
        "summary": grouped(records),
        "rows": records,
    }


def _cell(value: object) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "-"
    return "-" if value is None else str(value)


def markdown(report: dict[str, object]) -> str:
    calibration = report["calibration"]
    assert isinstance(calibration, dict)
    lines = [
        "# Performance model vs measurements (modeled, not measured)",
        "",
        f"Generated {report['date']} at commit {report['commit']} by `{report['command']}`; "
        f"model v{calibration['model_version']}, constants fitted {calibration['fit_date']} at "
        f"commit {calibration['commit']} on {calibration['rows']} rows "
        "(`python -m bench.model_calibration`, `deplodock/perf/calibration.json`).",
        "",
        "Sources: *measured H200*: deplodock's own kernels of commit af4e5e5, timed on an H200 "
        "on 2026-11-26 (`bench/results/kernels-h200-*.json`, latency timing: under 0.2 ms "
        "the host's time sets the figure), rebuilt at that commit and modeled on the `h200` "
        "device model. *published H100*: PyTorch 2.1 eager on an H100 SXM (NeuSight; "
        "`bench/perfdata/README.md`): memory-bound ops built as deplodock programs of the same "
        "op and shape (deplodock's default schedule), cuBLAS GEMMs built with cuBLAS' own tile, "
        "K step, stages and warps (`bench/published_gemm.py`; every "
        "`--gemm-stride`-th row of each half). Fit: the even rows of each source (measured "
        "rows GPU-bound only); held-out: the odd rows.",
        "",
        "Error = (modeled - measured) / measured; negative: the model is optimistic. "
        "GPU-bound: measured at 0.2 ms or more.",
        "",
        "| source | family | split | subset | rows | MAPE % | median error % | median abs % | "
        "Kendall tau |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    summary = report["summary"]
    assert isinstance(summary, list)
    for s in summary:
        if not s.get("rows"):
            continue
        lines.append(
            f"| {s['source']} | {s['family']} | {s['split']} | {s['subset']} | {s['rows']} | "
            f"{s['mape_pct']} | {s['median_error_pct']} | {s['median_abs_error_pct']} | "
            f"{_cell(s['kendall_tau'])} |"
        )
    lines += [
        "",
        "| case | source | family | split | measured us | modeled us | error % | limiter | "
        "schedule / detail |",
        "|---|---|---|---|---:|---:|---:|---|---|",
    ]
    rows = report["rows"]
    assert isinstance(rows, list)
    for r in rows:
        detail = f"{r['detail']}{'; ' + r['note'] if r['note'] else ''}"
        lines.append(
            f"| {r['case']} | {r['source']} | {r['family']} | {r['split']} | "
            f"{r['measured_us']} | {r['modeled_us']} | {r['error_pct']} | {r['limiter']} | "
            f"{detail} |"
        )
    return "\n".join(lines) + "\n"


# --- --data FILE.csv ------------------------------------------------------------------------


def _header(path: Path) -> set[str]:
    with path.open(newline="") as handle:
        return set(next(csv.reader(handle), []))


def _data_rows(path: Path, device: str) -> Iterator[tuple[str, Callable[[], TracedRow] | str]]:
    """(label, a thunk that builds and traces the row, or the reason it cannot be)."""
    from bench.published_gemm import GEMM_COLUMNS, GemmRow, read_rows, trace_gemm

    header = _header(path)
    kinds = (
        (GEMM_COLUMNS, read_rows, GemmRow, trace_gemm, ("op", "B", "M", "N", "K")),
        (MEMORY_BOUND_COLUMNS, read_memory_bound, PublishedRow, trace_memory_bound,
         ("op", "input_shapes")),
    )  # fmt: skip
    for columns, read, kind, trace, named in kinds:
        if columns <= header:
            for raw, row in read(path):
                if isinstance(row, kind):
                    yield row.label, (lambda row=row, trace=trace: trace(row, device))
                else:
                    yield " ".join(str(raw.get(name)) for name in named), str(row)
            return
    raise RowError(
        f"{path}: the columns {sorted(header)} are neither a GEMM file's nor a memory-bound one's"
    )


def check_data(path: Path, limit: int | None, device: str, echo=print) -> dict[str, float]:
    """Models each row of `path` (the first `limit`), one line each, then the summary line."""
    calibration = load_calibration()
    measured: list[float] = []
    modeled: list[float] = []
    skipped = 0
    for index, (label, build) in enumerate(_data_rows(path, device)):
        if limit is not None and index >= limit:
            break
        if isinstance(build, str):
            skipped += 1
            echo(f"[{index}] {label}: skipped: {build}")
            continue
        try:
            row = build()
            time = row.modeled_us(calibration)
        except Exception as error:  # any row that cannot be modeled is a line, not a crash
            skipped += 1
            reason = (str(error).splitlines() or [type(error).__name__])[0][:160]
            echo(f"[{index}] {label}: skipped: {reason}")
            continue
        measured.append(row.measured_us)
        modeled.append(time)
        error = 100 * (time - row.measured_us) / row.measured_us
        note = f"  ({row.note})" if row.note else ""
        echo(
            f"[{index}] {label}: measured {row.measured_us:.1f} us, modeled {time:.1f} us, "
            f"error {error:+.1f} %{note}"
        )
    stats = error_statistics(measured, modeled)
    echo(f"{skipped} rows skipped (not modeled, left out of the summary)")
    echo(summary_line(stats))
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--data", type=Path, help="model the rows of this CSV (module doc)")
    parser.add_argument("--limit", type=int, help="with --data: the first N rows only")
    parser.add_argument(
        "--model",
        default=PUBLISHED_DEVICE,
        help=f"with --data: the device (default {PUBLISHED_DEVICE}, where the published rows ran)",
    )
    parser.add_argument("--gemm-stride", type=int, default=8, help="(default: 8)")
    args = parser.parse_args(argv)
    if args.data is not None:
        try:
            check_data(args.data, args.limit, args.model)
        except (OSError, RowError) as error:
            print(f"bench.model_validation: error: {error}", file=sys.stderr)
            return 1
        return 0
    report = validate(args.gemm_stride)
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out / "model-validation.json", json.dumps(report, indent=1) + "\n")
    write_atomic(args.out / "model-validation.md", markdown(report))
    for s in report["summary"]:  # type: ignore[union-attr]
        if s.get("rows"):
            print(f"{s['source']}, {s['family']}, {s['split']}, {s['subset']}: {summary_line(s)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
