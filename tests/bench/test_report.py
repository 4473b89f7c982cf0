"""Suite results from synthetic rows: speedups, geomeans, wins, the JSON file and the chart."""

from __future__ import annotations

import io
import json
import math
import re
import sys
from pathlib import Path

import pytest

from bench.cases import find_cases
from bench.kernels import base_row, progress_line, run_suite
from bench.report import (
    draw_chart,
    geomean,
    results_document,
    summarize,
    with_speedups,
    write_json,
)


def row(name: str, status: str, eager=None, compiled=None, mine=None, reason=None) -> dict:
    r = {"case": name, "status": status, "reason": reason}
    return with_speedups(r | {"eager_ms": eager, "compile_ms": compiled, "deplodock_ms": mine})


ROWS = [
    row("a", "ok", eager=2.0, compiled=1.0, mine=1.0),  # 2x vs eager, 1x vs compile
    row("b", "ok", eager=1.0, compiled=0.5, mine=2.0),  # 0.5x, 0.25x
    row("c", "ok", eager=8.0, compiled=None, mine=2.0, reason="torch.compile: boom"),  # 4x, -
    row("d", "mismatch", reason="max relative error 3e-02 > 1e-05"),
    row("e", "compile_error", reason="PassFailedException: no"),
]


def test_speedups_are_other_over_mine() -> None:
    assert ROWS[0]["speedup_eager"] == 2.0 and ROWS[0]["speedup_compile"] == 1.0
    assert ROWS[1]["speedup_eager"] == 0.5 and ROWS[1]["speedup_compile"] == 0.25
    assert ROWS[2]["speedup_compile"] is None
    assert ROWS[3]["speedup_eager"] is None


def test_geomean() -> None:
    assert geomean([2.0, 0.5, 4.0]) == pytest.approx(4.0 ** (1 / 3))
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert math.isnan(geomean([]))


def test_summary_counts_wins_and_statuses() -> None:
    s = summarize(ROWS)
    assert s.total == 5
    assert s.statuses["ok"] == 3 and s.statuses["mismatch"] == 1
    assert s.statuses["compile_error"] == 1 and s.statuses["crashed"] == 0
    assert s.geomean_eager == pytest.approx((2.0 * 0.5 * 4.0) ** (1 / 3))
    assert s.geomean_compile == pytest.approx((1.0 * 0.25) ** 0.5)
    assert (s.wins_eager, s.compared_eager) == (2, 3)
    assert (s.wins_compile, s.compared_compile) == (0, 2)  # a tie is not a win
    text = "\n".join(s.lines("fp32", "NVIDIA H100"))
    assert "5 cases (fp32) on NVIDIA H100: 3 ok, 1 compile_error, 1 mismatch" in text
    assert "geomean speedup 1.59x, faster in 2/3" in text
    assert "geomean speedup 0.50x, faster in 0/2" in text


def test_json_document(tmp_path: Path) -> None:
    env = {"device": "NVIDIA H100 80GB HBM3", "driver": "570.1", "torch": "2.13", "nvcc": "x"}
    env |= {"date": "2026-01-01T00:00:00", "dtype": "fp32"}
    path = write_json(tmp_path / "r" / "kernels.json", results_document(ROWS, env))
    doc = json.loads(path.read_text())
    assert doc["device"] == "NVIDIA H100 80GB HBM3" and doc["nvcc"] == "x"
    assert doc["date"] and doc["driver"] and doc["torch"]
    assert [r["case"] for r in doc["rows"]] == list("abcde")
    assert doc["rows"][3]["reason"] == "max relative error 3e-02 > 1e-05"
    assert doc["summary"]["wins_vs_eager"] == 2
    assert doc["summary"]["geomean_speedup_vs_eager"] == pytest.approx(4.0 ** (1 / 3))


def test_json_has_no_nan_when_nothing_ran(tmp_path: Path) -> None:
    doc = results_document([ROWS[3]], {"device": "x"})
    assert doc["summary"]["geomean_speedup_vs_eager"] is None
    write_json(tmp_path / "x.json", doc)  # allow_nan=False would raise


def test_chart_is_a_png(tmp_path: Path) -> None:
    many = [row(f"case{i}", "ok", eager=1.0 + i, compiled=2.0, mine=1.5) for i in range(20)]
    path = draw_chart([*many, *ROWS], tmp_path / "chart.png", "speedups")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width == 1100 and height > 600  # grows with the number of cases


def test_results_and_charts_fail_loudly_and_keep_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #41: bench results go through `files.write_atomic`: a failed write is an error
    naming the file (`/dev/full` included), and the previous results stay as they were."""
    import deplodock.files as files
    from deplodock.files import WriteError
    from tests.cli.invoke import device

    full = device(tmp_path, "full")
    message = re.escape(f"cannot write {full}: No space left on device")
    with pytest.raises(WriteError, match=message):
        write_json(full, {"rows": []})
    with pytest.raises(WriteError, match=message):
        draw_chart(ROWS, full, "speedups")
    out = write_json(tmp_path / "kernels.json", {"rows": [1]})

    def no_space(_: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", no_space)
    with pytest.raises(WriteError, match=re.escape(f"cannot write {out}: No space left")):
        write_json(out, {"rows": [2]})
    assert json.loads(out.read_text()) == {"rows": [1]}


def test_run_suite_keeps_going_and_merges_rows() -> None:
    cases = find_cases(["rmsnorm/tinyllama"])
    seen = []

    def runner(name: str, dtype: str, **task) -> dict:
        seen.append((name, dtype, task))
        if name.endswith("s128"):
            return {"status": "mismatch", "reason": "max relative error 1e-01 > 1e-05"}
        times = {"eager_ms": 1.0, "compile_ms": 0.5, "deplodock_ms": 0.5}
        return {"status": "ok", "restart": False} | times

    lines: list[str] = []
    rows = run_suite(cases, "bf16", runner, {"warmup": 1, "iters": 2}, lines.append)
    assert [r["status"] for r in rows] == ["ok", "mismatch", "ok"]
    assert seen[0] == (cases[0].name, "bf16", {"warmup": 1, "iters": 2})
    assert rows[0]["expression"] == cases[0].expression("bf16") and "restart" not in rows[0]
    assert rows[0]["speedup_eager"] == 2.0 and rows[0]["speedup_compile"] == 1.0
    assert len(lines) == 3 and lines[1].endswith("mismatch: max relative error 1e-01 > 1e-05")
    assert "2.00x" in lines[0]


def test_progress_line_of_a_failed_case() -> None:
    (c,) = find_cases(["softmax/qwen2.5-7b/s32"])
    r = base_row(c, "fp32") | {"status": "compile_error", "reason": "NvccError: x"}
    line = progress_line(3, 84, 30, with_speedups(r))
    assert line.startswith("[ 3/84] softmax/qwen2.5-7b/s32")
    assert line.endswith("compile_error: NvccError: x")


def test_on_a_terminal_a_bar_names_the_running_case_and_the_lines_still_come(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    cases = find_cases(["rmsnorm/tinyllama"])
    running: list[str] = []

    def runner(name: str, dtype: str, **task) -> dict:
        running.append(terminal.getvalue())
        return {"status": "ok", "eager_ms": 1.0, "compile_ms": 0.5, "deplodock_ms": 0.5}

    lines: list[str] = []
    run_suite(cases, "fp32", runner, {}, lines.append)
    assert len(lines) == len(cases)
    assert f"bench: {cases[-1].name}" in running[-1]  # the bar labels the case running now
    assert f"{len(cases) - 1}/{len(cases)}" in running[-1]
    quiet_before = terminal.getvalue()
    run_suite(cases, "fp32", runner, {}, lines.append, quiet=True)
    assert terminal.getvalue() == quiet_before  # --quiet: no bar at all
