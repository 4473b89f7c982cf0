"""`bench/scoring_cost.py`: the table of a candidate's scoring costs, and bad input."""

from __future__ import annotations

import random

import pytest

from bench import scoring_cost

PARTS = ("lower", "trace", "model", "check", "reference", "reference_again")


def _run(rng: random.Random, label: str) -> dict:
    rows = [
        {
            "case": f"case{i}/{label}",
            "dtype": "fp32",
            "check_blocks": rng.randint(1, 300),
            "cpu_s": {part: round(rng.uniform(0.01, 9.0), 2) for part in PARTS},
        }
        for i in range(3)
    ]
    return {"date": "d", "commit": "c", "command": "x", "machine": "m", "rows": rows}


def test_the_table_has_a_section_per_run_and_sums_a_candidate() -> None:
    rng = random.Random(7)
    runs = {"before": _run(rng, "before"), "after": _run(rng, "after")}
    text = scoring_cost.markdown(runs)
    assert text.index("## before") < text.index("## after")
    for run in runs.values():
        for row in run["rows"]:
            cpu = row["cpu_s"]
            (line,) = [line for line in text.splitlines() if line.startswith(f"| {row['case']} |")]
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            total = cpu["lower"] + cpu["trace"] + cpu["model"] + cpu["check"]
            assert float(cells[6]) == pytest.approx(total, abs=0.006)
            assert float(cells[3]) == cpu["trace"] and int(cells[9]) == row["check_blocks"]


def test_an_unknown_case_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert scoring_cost.main(["--label", "x", "-k", "no_such/case"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no suite case 'no_such/case'" in err
