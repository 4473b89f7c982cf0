"""`bench.measured_vs_model`: pairing a measured run with a modeled one, and the statistics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.measured_vs_model import main, pairs, statistics_of


def measured_doc(rows: list[tuple[str, str, str, float | None]]) -> dict:
    return {
        "device": "NVIDIA H200",
        "dtype": "fp32",
        "date": "2026-11-26",
        "rows": [{"case": c, "op": op, "status": s, "deplodock_ms": ms} for c, op, s, ms in rows],
    }


def modeled_doc(times: dict[str, float]) -> dict:
    return {
        "modeled": True,
        "device_model": "NVIDIA H200 SXM 141GB (modeled)",
        "dtype": "fp32",
        "commit": "abc1234",
        "rows": [{"case": c, "status": "ok", "modeled_us": t} for c, t in times.items()],
    }


MEASURED = measured_doc(
    [
        ("q_proj/a/s32", "q_proj", "ok", 0.100),
        ("gate_proj/a/s32", "gate_proj", "ok", 0.400),
        ("rmsnorm/a/s32", "rmsnorm", "ok", 0.050),
        ("attention/a/s32", "attention", "mismatch", None),
    ]
)
MODELED = modeled_doc(
    {"q_proj/a/s32": 80.0, "gate_proj/a/s32": 500.0, "rmsnorm/a/s32": 10.0, "x/a/s32": 1.0}
)


def test_pairs_keep_the_cases_both_timed_with_a_signed_error() -> None:
    got = {p["case"]: p for p in pairs(MEASURED, MODELED)}
    assert sorted(got) == ["gate_proj/a/s32", "q_proj/a/s32", "rmsnorm/a/s32"]
    assert got["q_proj/a/s32"]["error_pct"] == pytest.approx(-20.0)  # modeled 80 vs 100 us
    assert got["gate_proj/a/s32"]["error_pct"] == pytest.approx(25.0)
    assert got["rmsnorm/a/s32"]["family"] == "memory-bound"


def test_statistics_mape_median_and_ranking() -> None:
    stats = statistics_of(pairs(MEASURED, MODELED))
    assert stats["cases"] == 3
    assert stats["mape_pct"] == pytest.approx((20 + 25 + 80) / 3)
    assert stats["median_error_pct"] == pytest.approx(-20.0)
    assert stats["kendall_tau"] == pytest.approx(1.0)  # the model orders the three as measured


def test_the_report_splits_off_the_gpu_bound_cases(tmp_path: Path, capsys) -> None:
    paths = [tmp_path / "measured.json", tmp_path / "modeled.json"]
    for path, doc in zip(paths, (MEASURED, MODELED), strict=True):
        path.write_text(json.dumps(doc))
    assert main([*map(str, paths), "--gpu-bound-ms", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "| GEMM | 2 | 22% | +2% | 1.00 | 1 | 25% | +25% | - |" in out
    assert "| rmsnorm/a/s32 | 50.0 | 10.0 | -80% | - | - |" in out


def test_each_case_carries_its_measured_and_modeled_sol() -> None:
    """The modeled document's ideal time over each whole time: the one % SOL both ways."""
    modeled = modeled_doc({"q_proj/a/s32": 80.0})
    modeled["rows"][0] |= {"ideal_us": 40.0, "sol_pct": 50.0}
    (pair,) = pairs(MEASURED, modeled)
    assert pair["measured_sol_pct"] == pytest.approx(40.0)  # 40 us ideal over 100 us measured
    assert pair["modeled_sol_pct"] == 50.0


def test_documents_in_the_wrong_order_are_one_line_errors(tmp_path: Path, capsys) -> None:
    paths = [tmp_path / "measured.json", tmp_path / "modeled.json"]
    for path, doc in zip(paths, (MEASURED, MODELED), strict=True):
        path.write_text(json.dumps(doc))
    assert main([str(paths[1]), str(paths[0])]) == 1
    err = capsys.readouterr().err
    assert (
        err == "bench.measured_vs_model: error: expected a measured document, then a modeled one\n"
    )
