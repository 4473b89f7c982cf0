"""`python -m bench.tune_suite` on one small case: the tuned suite and the before/after
comparison are written, labelled modeled, and tuning never makes a case slower."""

from __future__ import annotations

import json

from bench.tune_suite import main

CASE = "rmsnorm/tinyllama-1.1b/s32"


def test_one_case_tuned_and_compared(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    status = main(
        ["-k", CASE, "--kernel-budget-s", "3", "--no-check", "--cache-db",
         str(tmp_path / "tune.db"), "--out", str(out)]
    )  # fmt: skip
    assert status == 0
    doc = json.loads((out / "kernels-modeled-h100-fp32-tuned.json").read_text())
    assert doc["modeled"] is True
    (row,) = doc["rows"]
    assert row["case"] == CASE and row["status"] == "ok"
    (kernel,) = doc["tuned"]["cases"][CASE]["kernels"]
    assert kernel["trials"] >= 1 and kernel["tuned_us"] <= kernel["default_us"]
    comparison = (out / "tuning-h100-fp32.md").read_text()
    assert comparison.startswith("# Tuning the kernel suite on the performance model")
    assert "MODELED, not measured" in comparison and f"| {CASE} |" in comparison
    line = next(ln for ln in comparison.splitlines() if ln.startswith(f"| {CASE} |"))
    before, after = (float(x) for x in line.split("|")[2:4])
    assert after <= before
    assert (
        "tuned by `python -m bench.tune_suite`"
        in (out / "kernels-modeled-h100-fp32-tuned.md").read_text()
    )
