"""The README's performance figures are regenerated, not typed: its standing table is
`bench.standing`'s output on the committed results, and its error bands are
`calibration.json`'s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.standing import RESULTS, load, markdown, standing, table

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CALIBRATION = json.loads((ROOT / "deplodock/perf/calibration.json").read_text())


def test_the_readme_quotes_the_standing_table_as_generated() -> None:
    rows, _ = load()
    assert table(rows) in README, (
        "README.md's standing table drifted from the results: run `python -m bench.standing` "
        "and paste its table into the performance section"
    )


def test_the_committed_standing_file_is_regenerated() -> None:
    rows, sources = load()
    assert (RESULTS / "standing-h200.md").read_text() == markdown(rows, sources)


@pytest.mark.parametrize("family", sorted(CALIBRATION["error_bands"]))
def test_the_readme_quotes_each_band_as_fitted(family: str) -> None:
    band = CALIBRATION["error_bands"][family]
    row = f"| {family} | {band['mape_pct']:.1f} % | {band['median_error_pct']:+.1f} % | "
    assert row in README, f"README.md's band of {family} is not calibration.json's"


def test_standing_takes_gpu_bound_cases_for_the_modeled_ratio() -> None:
    measured = {
        "rows": [
            {"case": "a", "op": "q_proj", "status": "ok", "eager_ms": 0.4, "compile_ms": 0.5,
             "deplodock_ms": 0.5, "speedup_eager": 0.8, "speedup_compile": 1.0},
            {"case": "b", "op": "q_proj", "status": "ok", "eager_ms": 0.05, "compile_ms": 0.2,
             "deplodock_ms": 0.1, "speedup_eager": 0.5, "speedup_compile": 2.0},
        ]
    }  # fmt: skip
    modeled = {
        "rows": [
            {"case": "a", "status": "ok", "family": "GEMM", "modeled_us": 200.0, "sol_pct": 50},
            {"case": "b", "status": "ok", "family": "GEMM", "modeled_us": 50.0, "sol_pct": 8},
        ]
    }
    bands = {"GEMM fp32": {"mape_pct": 15.0, "source": "measured H200"}}
    h100 = {"rows": [{"case": "a", "status": "ok", "family": "GEMM", "sol_pct": 60}]}
    gemm = standing("fp32", measured, modeled, bands, h100)[0]
    as_run = {"rows": [{**modeled["rows"][0], "modeled_us": 320.0}]}
    assert standing("fp32", measured, modeled, bands, h100, as_run)[0].modeled_vs_eager == 1.25
    assert gemm.measured_cases == 2 and gemm.gpu_bound_cases == 1
    assert gemm.gpu_bound_vs_eager == pytest.approx(0.8)
    assert gemm.modeled_vs_eager == pytest.approx(400 / 200)
    assert gemm.measured_sol_pct == pytest.approx(100 * 100 / 500)  # ideal 100 us of 500
    assert gemm.modeled_sol_pct == pytest.approx((50 * 8) ** 0.5)
    assert gemm.modeled_h100_sol_pct == pytest.approx(60)
    assert gemm.band == "+-15 % (measured H200)"
