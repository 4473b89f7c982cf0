"""Suite isolation: a case that crashes, hangs or breaks its context costs one row only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.worker import IsolatedRunner
from deplodock.backend.device import cuda_unavailable_reason

ROOT = Path(__file__).resolve().parents[2]


def test_crashes_hangs_and_errors_are_rows_and_the_worker_is_replaced() -> None:
    with IsolatedRunner("tests.bench.fake_runner:run", timeout=3.0) as run:
        first = run(name="a", dtype="fp32", iters=5)
        same = run(name="b", dtype="fp32")
        crashed = run(name="crash", dtype="fp32")
        after_crash = run(name="c", dtype="fp32")
        hung = run(name="hang", dtype="fp32")
        raised = run(name="raise", dtype="fp32")
        after_raise = run(name="d", dtype="fp32")
        sticky = run(name="sticky", dtype="fp32")
        last = run(name="e", dtype="bf16")
        starts = run.starts
    assert first["status"] == "ok" and first["task"] == {"iters": 5}
    assert same["pid"] == first["pid"]  # one worker serves many cases
    assert crashed == {"status": "crashed", "reason": "the worker died (exit code 3)"}
    assert after_crash["status"] == "ok" and after_crash["pid"] != first["pid"]
    assert hung == {"status": "timeout", "reason": "no result in 3 s: the worker was killed"}
    assert raised["status"] == "runtime_error"
    assert raised["reason"] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert "restart" not in raised and "Traceback" in raised["traceback"]
    assert after_raise["status"] == "ok" and after_raise["pid"] != after_crash["pid"]
    assert sticky == {"status": "runtime_error", "reason": "kernel @k failed"}
    assert last["status"] == "ok" and last["dtype"] == "bf16"
    assert starts == 5  # initial, after the crash, the hang, the raise and the sticky error


def run_module(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], capture_output=True, text=True, cwd=ROOT, check=False
    )


def test_list_prints_the_84_cases() -> None:
    result = run_module("bench.kernels", "--list", "--dtype", "bf16")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "84 cases" and len(lines) == 85
    assert lines[0].startswith("q_proj/tinyllama-1.1b/s32") and "bfloat16" in lines[0]


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a GPU is available here")
def test_suite_without_a_gpu_is_a_one_line_error(tmp_path: Path) -> None:
    result = run_module("bench.kernels", "--dtype", "fp32", "--out", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.startswith("bench.kernels: error: no CUDA device: ")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not list(tmp_path.iterdir())


def test_run_and_report_through_a_worker(tmp_path: Path) -> None:
    from bench.cases import find_cases
    from bench.kernels import run_and_report

    cases = find_cases(["softmax/tinyllama-1.1b"])  # s32, s128, s512
    env = {"device": "Fake GPU", "torch": "2.13", "driver": "d", "nvcc": "n", "date": "today"}
    lines: list[str] = []
    with IsolatedRunner("tests.bench.fake_runner:timed", timeout=30.0) as run:
        json_path, png_path = run_and_report(
            cases, "fp32", tmp_path, run, env, {"warmup": 1, "iters": 2}, lines.append
        )
    doc = json.loads(json_path.read_text())
    assert doc["device"] == "Fake GPU" and len(doc["rows"]) == 3
    assert [r["status"] for r in doc["rows"]] == ["ok", "crashed", "ok"]
    assert doc["rows"][1]["reason"] == "the worker died (exit code 3)"
    assert doc["rows"][1]["expression"] == cases[1].expression("fp32")
    assert doc["summary"]["wins_vs_eager"] == 2 and doc["summary"]["wins_vs_compile"] == 0
    assert png_path.read_bytes()[:4] == b"\x89PNG"
    assert any("geomean speedup 2.00x, faster in 2/2" in ln for ln in lines)
    assert lines[0].startswith("3 cases, fp32, on Fake GPU")
