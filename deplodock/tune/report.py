"""What `tune` shows when a search is over: a ranked table of the variants each kernel's
search explored, and (`--report`) a chart of the best time so far against trials.

The chart is a self-contained HTML page with inline SVG (no script, no dependency), or a
PNG drawn with matplotlib (the `bench` extra). Times are labelled modeled or measured, as
their cost source says: a modeled figure is never passed off as a measurement.
"""

from __future__ import annotations

import html
import importlib.util
from collections.abc import Sequence
from pathlib import Path

from deplodock.tune.cache import TuneRecord, Variant

#: Rows of the ranked table shown in full; longer tables keep the head and the tail.
HEAD_ROWS, TAIL_ROWS = 10, 3


def time_kind(record: TuneRecord) -> str:
    return "measured" if record.key.cost == "measured" else "modeled"


def ranked_variants(record: TuneRecord) -> list[tuple[int, Variant]]:
    """(trial number, variant), fastest first; failed variants last, in trial order."""
    numbered = list(enumerate(record.variants, start=1))
    ok = sorted((p for p in numbered if p[1].time_us is not None), key=lambda p: p[1].time_us)
    return ok + [p for p in numbered if p[1].time_us is None]


def variants_table(record: TuneRecord) -> str:
    """The ranked table of one kernel's variants, the winner starred, with the speedup of
    each over the heuristic schedule (trial 1)."""
    kind = time_kind(record)
    lines = [
        f"{record.kernel_name}: {record.trials} variant(s) in {record.seconds:.1f} s "
        f"({kind} on {record.key.target.split(':', 1)[-1]})",
        f"  {'rank':>4} {'trial':>5} {kind + ' us':>12} {'vs default':>10}  knobs",
    ]
    rows: list[tuple[int, tuple[int, Variant]] | None] = list(
        enumerate(ranked_variants(record), start=1)
    )
    if len(rows) > HEAD_ROWS + TAIL_ROWS + 1:
        rows = [*rows[:HEAD_ROWS], None, *rows[-TAIL_ROWS:]]
    hidden = record.trials - HEAD_ROWS - TAIL_ROWS
    for row in rows:
        if row is None:
            lines.append(f"  {'...':>4} ({hidden} more)")
            continue
        rank, (trial, variant) = row
        best = "*" if variant.knobs == record.knobs and variant.time_us == record.best_us else " "
        if variant.time_us is None:
            timing, versus = variant.status, "-"
        else:
            timing = f"{variant.time_us:.2f}"
            versus = f"{record.default_us / variant.time_us:.2f}x" if record.default_us else "-"
        detail = f"  ({variant.detail})" if variant.time_us is None and variant.detail else ""
        lines.append(
            f" {best}{rank:>4} {trial:>5} {timing:>12} {versus:>10}  "
            f"{variant.knobs.format()}{detail}"
        )
    return "\n".join(lines)


def best_so_far(record: TuneRecord) -> list[float | None]:
    """After each trial, the fastest time seen (None until one succeeded)."""
    best: float | None = None
    series: list[float | None] = []
    for variant in record.variants:
        if variant.time_us is not None and (best is None or variant.time_us < best):
            best = variant.time_us
        series.append(best)
    return series


_NO_MATPLOTLIB = (
    "--report FILE.png needs matplotlib (pip install 'deplodock[bench]'); "
    "--report FILE.html needs nothing"
)
#: The kinds of `--report` file.
REPORT_SUFFIXES = (".html", ".png")


def check_report_path(path: Path) -> None:
    """Fails before a search when `--report` names a kind of file it cannot write."""
    if path.suffix.lower() not in REPORT_SUFFIXES:
        raise ValueError(f"--report {path}: give a .html or .png file")
    if path.suffix.lower() == ".png" and importlib.util.find_spec("matplotlib") is None:
        raise ValueError(_NO_MATPLOTLIB)


def write_report(records: Sequence[TuneRecord], path: Path, title: str) -> None:
    """`--report FILE`: `.html` (inline SVG) or `.png` (matplotlib)."""
    from deplodock.files import write_atomic

    check_report_path(path)
    if path.suffix.lower() == ".html":
        write_atomic(path, html_report(records, title))
    else:
        write_atomic(path, png_report(records, title))


def _svg_chart(record: TuneRecord, width: int = 560, height: int = 220) -> str:
    series = best_so_far(record)
    points = [(i, t) for i, t in enumerate(series, start=1) if t is not None]
    if not points:
        return "<p>no variant succeeded</p>"
    pad = 40
    low, high = min(t for _, t in points), max(t for _, t in points)
    span = (high - low) or high or 1.0
    count = max(len(series), 2)

    def xy(i: int, t: float) -> str:
        x = pad + (width - 2 * pad) * (i - 1) / (count - 1)
        y = height - pad - (height - 2 * pad) * (high - t) / span
        return f"{x:.1f},{y:.1f}"

    line = " ".join(xy(i, t) for i, t in points)
    dots = "".join(
        f'<circle cx="{xy(i, v.time_us).split(",")[0]}" cy="{xy(i, v.time_us).split(",")[1]}" '
        f'r="2" fill="#bbb"/>'
        for i, v in enumerate(record.variants, start=1)
        if v.time_us is not None and low <= v.time_us <= high
    )
    kind = time_kind(record)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
        f'<rect width="{width}" height="{height}" fill="white" stroke="#ccc"/>{dots}'
        f'<polyline points="{line}" fill="none" stroke="#1f77b4" stroke-width="2"/>'
        f'<text x="{pad}" y="16" font-size="12">best {kind} us so far: '
        f"{high:.2f} -&gt; {low:.2f}</text>"
        f'<text x="{width - pad}" y="{height - 8}" font-size="11" text-anchor="end">'
        f"trial {len(series)}</text></svg>"
    )


def html_report(records: Sequence[TuneRecord], title: str) -> str:
    sections = []
    for record in records:
        table = html.escape(variants_table(record))
        sections.append(
            f"<h2>{html.escape(record.kernel_name)}</h2>{_svg_chart(record)}<pre>{table}</pre>"
        )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}pre{font-size:12px}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{''.join(sections)}</body></html>\n"
    )


def png_report(records: Sequence[TuneRecord], title: str) -> bytes:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError(_NO_MATPLOTLIB) from None
    import io

    figure, axis = plt.subplots(figsize=(7, 4))
    for record in records:
        series = best_so_far(record)
        trials = [i for i, t in enumerate(series, start=1) if t is not None]
        axis.plot(trials, [t for t in series if t is not None], label=record.kernel_name)
    kind = time_kind(records[0]) if records else "modeled"
    axis.set_xlabel("trial")
    axis.set_ylabel(f"best {kind} time so far (us)")
    axis.set_title(title)
    axis.legend(fontsize=8)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()
