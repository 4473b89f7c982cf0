"""Results of a suite run: rows, the JSON file, the summary and the speedup chart.

A row is a plain dict (it crosses a process boundary and goes into JSON as is):
`case, op, model, seq, dtype, expression, status, reason, max_rel_error, tolerance,
kernels, eager_ms, compile_ms, deplodock_ms, speedup_eager, speedup_compile`. `status` is
`ok`, or what went wrong: `compile_error` (capture, lowering, nvcc, loading), `mismatch`
(outputs differ from PyTorch beyond the tolerance), `runtime_error` (a kernel failed),
`crashed` / `timeout` (the worker process died or hung). Speedups are `time(other) /
time(deplodock)`: above 1, deplodock is faster.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deplodock.files import write_atomic

STATUSES = ("ok", "compile_error", "mismatch", "runtime_error", "crashed", "timeout")
Row = dict[str, Any]


def with_speedups(row: Row) -> Row:
    """Adds `speedup_eager` / `speedup_compile` from the three median times (None if missing)."""
    mine = row.get("deplodock_ms")
    for other, key in (("eager_ms", "speedup_eager"), ("compile_ms", "speedup_compile")):
        theirs = row.get(other)
        ok = mine is not None and theirs is not None and mine > 0
        row[key] = theirs / mine if ok else None
    return row


def geomean(values: Sequence[float]) -> float:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return float("nan")
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass
class Summary:
    total: int
    statuses: dict[str, int]
    geomean_eager: float
    geomean_compile: float
    wins_eager: int
    compared_eager: int
    wins_compile: int
    compared_compile: int

    def lines(self, dtype: str, device: str) -> list[str]:
        counts = ", ".join(f"{n} {s}" for s, n in self.statuses.items() if n)
        return [
            f"{self.total} cases ({dtype}) on {device}: {counts}",
            f"deplodock vs PyTorch eager:  geomean speedup {self.geomean_eager:.2f}x, "
            f"faster in {self.wins_eager}/{self.compared_eager}",
            f"deplodock vs torch.compile:  geomean speedup {self.geomean_compile:.2f}x, "
            f"faster in {self.wins_compile}/{self.compared_compile}",
        ]


def summarize(rows: Sequence[Row]) -> Summary:
    """Geomean speedups and wins over the rows that ran correctly and were timed."""
    counts = Counter(r["status"] for r in rows)
    statuses = {s: counts.get(s, 0) for s in STATUSES} | {
        s: n for s, n in counts.items() if s not in STATUSES
    }
    ok = [r for r in rows if r["status"] == "ok"]
    eager = [r["speedup_eager"] for r in ok if r.get("speedup_eager")]
    comp = [r["speedup_compile"] for r in ok if r.get("speedup_compile")]
    return Summary(
        len(rows),
        statuses,
        geomean(eager),
        geomean(comp),
        sum(s > 1 for s in eager),
        len(eager),
        sum(s > 1 for s in comp),
        len(comp),
    )


def results_document(rows: Sequence[Row], environment: dict[str, Any]) -> dict[str, Any]:
    """The JSON document: the environment (device, driver, versions, date), summary, rows."""
    summary = summarize(rows)
    return {
        **environment,
        "summary": {
            "cases": summary.total,
            "statuses": summary.statuses,
            "geomean_speedup_vs_eager": _finite(summary.geomean_eager),
            "geomean_speedup_vs_compile": _finite(summary.geomean_compile),
            "wins_vs_eager": summary.wins_eager,
            "wins_vs_compile": summary.wins_compile,
        },
        "rows": list(rows),
    }


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def write_json(path: Path, document: dict[str, Any]) -> Path:
    """Writes a results document by `files.write_atomic`'s rule: a failed write raises
    (`cannot write PATH: REASON`) and leaves the previous results as they were."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(document, indent=1, allow_nan=False, default=str) + "\n")
    return path


def save_figure(figure: Any, path: Path, dpi: int) -> Path:
    """Saves a matplotlib figure as PNG through memory and `write_atomic`: `savefig` onto the
    path would leave half a chart behind a failed write."""
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, buffer.getvalue())
    return path


def draw_chart(rows: Sequence[Row], path: Path, title: str) -> Path:
    """Horizontal bars per case: deplodock's speedup vs eager and vs torch.compile (log x).

    A case that did not run correctly gets no bars and its status in red beside its name.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(rows)
    fig, ax = plt.subplots(figsize=(10, max(3.0, 0.22 * n + 1.5)))
    ys = list(range(n))[::-1]
    height = 0.38
    for y, row in zip(ys, rows, strict=True):
        if row["status"] != "ok":
            ax.text(1.0, y, f"  {row['status']}", va="center", fontsize=7, color="tab:red")
            continue
        for offset, key, color in (
            (height / 2, "speedup_eager", "tab:blue"),
            (-height / 2, "speedup_compile", "tab:orange"),
        ):
            if row.get(key):
                ax.barh(y + offset, row[key] - 1.0, height, left=1.0, color=color)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(ys)
    ax.set_yticklabels([r["case"] for r in rows], fontsize=7)
    ax.set_ylim(-1, n)
    ax.set_xlabel("deplodock speedup (time of the other / time of deplodock; > 1: faster)")
    ax.set_title(title, fontsize=10)
    ax.barh([], [], color="tab:blue", label="vs PyTorch eager")
    ax.barh([], [], color="tab:orange", label="vs torch.compile")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path
