"""`python -m bench.model_calibration`: fit the performance model's constants on published data.

    python -m bench.model_calibration            # writes deplodock/perf/calibration.json

The published H100 rows (`bench/perfdata/`, PyTorch eager, memory-bound ops) are built as
deplodock programs of the same op and shape, traced once, and the model's free constants
(`perf.model.Constants`) are fitted to minimise the mean squared log error of modeled against
published time, on the even-numbered rows only; `bench.model_validation` reports the error on
the odd-numbered ones. The fit is a bounded coordinate search on a log grid (no SciPy needed:
six parameters, a smooth objective). The output records the date, the commit and the rows.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.published import (
    PUBLISHED_DEVICE,
    TracedRow,
    fit_split,
    memory_bound_rows,
    trace_row,
)
from deplodock.files import write_atomic
from deplodock.perf.devices import device_model
from deplodock.perf.model import CALIBRATION, MODEL_VERSION, Constants

#: Bounds of each constant (physically plausible ranges, not tuning knobs).
BOUNDS: dict[str, tuple[float, float]] = {
    "clock_fraction": (0.75, 1.0),
    "dram_efficiency": (0.7, 0.97),
    # Loaded DRAM latency: H100 microbenchmarks put the unloaded figure near 500 ns.
    "memory_latency_ns": (450.0, 900.0),
    "launch_us": (1.0, 12.0),
    "wave_us": (0.0, 4.0),
    "issue_efficiency": (0.3, 1.0),
    "overlap": (2.0, 16.0),
}


def loss(rows: Sequence[TracedRow], constants: Constants) -> float:
    """Mean squared log error of modeled vs published time."""
    device = device_model(PUBLISHED_DEVICE)
    errors = [math.log(row.modeled_us(device, constants) / row.row.latency_us) ** 2 for row in rows]
    return sum(errors) / len(errors)


def fit(rows: Sequence[TracedRow], start: Constants | None = None, passes: int = 6) -> Constants:
    """Coordinate search: each pass tries 13 values per constant around the current one and
    keeps the best; the search window halves every pass."""
    best = start or Constants()
    best_loss = loss(rows, best)
    width = 1.0
    for _ in range(passes):
        for name, (low, high) in BOUNDS.items():
            current = getattr(best, name)
            span = (high - low) * width / 2
            for step in range(13):
                value = min(high, max(low, current - span + step * span / 6))
                candidate = dataclasses.replace(best, **{name: value})
                candidate_loss = loss(rows, candidate)
                if candidate_loss < best_loss:
                    best, best_loss = candidate, candidate_loss
        width /= 2
    return best


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=CALIBRATION)
    args = parser.parse_args(argv)
    device = device_model(PUBLISHED_DEVICE)
    rows = memory_bound_rows()
    fit_rows, _ = fit_split(rows)
    traced = [trace_row(rows[i], device) for i in fit_rows]
    constants = fit(traced)
    result = {
        "model_version": MODEL_VERSION,
        "device": device.key,
        "fit_date": datetime.date.today().isoformat(),
        "commit": git_commit(),
        "rows": len(traced),
        "data": "bench/perfdata/h100-eager-memory-bound-fp32.csv, even-numbered rows",
        "loss_msle": round(loss(traced, constants), 6),
        "constants": {k: round(v, 4) for k, v in dataclasses.asdict(constants).items()},
    }
    write_atomic(args.out, json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
