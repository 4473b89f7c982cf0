"""The GPU session without a GPU: the plan fits its 9 minutes on the emulated path, the
results are packed after every step in the documented format, and a session cut short
keeps what it finished."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from bench.calibration_sweep import MIN_POINTS, sweep_points
from bench.gpu_session import (
    BUDGET_S,
    LAYERS,
    SESSION_KEYS,
    STEP_KEYS,
    EmulatedRunner,
    StepRecord,
    layer_commands,
    plan,
    run_plan,
    worst_cases,
)

ROOT = Path(__file__).resolve().parents[2]


def members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name.removeprefix("./"): tar.extractfile(m).read() for m in tar if m.isfile()}


def emulate(tmp_path: Path, budget: float = BUDGET_S, **durations: float):
    results, out = tmp_path / "results", tmp_path / "out"
    results.mkdir()
    seen: list[tuple[str, dict[str, bytes]]] = []

    def after(record: StepRecord) -> None:
        seen.append((record.name, members(out / "results.tgz")))

    runner = EmulatedRunner(results, durations)
    records = run_plan(plan(results), results, out, runner, budget, after)
    return records, results, out, seen


def test_the_plan_has_every_step_the_issue_asks_for() -> None:
    names = [step.name for step in plan(Path("/tmp/r"))]
    for name in ("setup", "gpu-tests", "suite-fp32", "suite-bf16", "calibration-sweep"):
        assert name in names
    assert {"layers", "profile-worst"} <= set(names)
    suite = next(s for s in plan(Path("/tmp/r")) if s.name == "suite-fp32")
    assert "--timing" in suite.command and "graph" in suite.command
    assert all(step.limit_s >= step.estimate_s for step in plan(Path("/tmp/r")))


def test_the_sweep_and_the_layers_cover_what_the_issue_asks_for() -> None:
    points = sweep_points()
    assert len(points) >= MIN_POINTS
    assert {p.family for p in points} == {"GEMM fp32", "GEMM bf16", "memory-bound"}
    gemm_knobs = {k for p in points if p.family.startswith("GEMM") for k in p.knobs}
    assert {"bm", "bn", "depth", "mma", "splits"} <= gemm_knobs
    assert {p.knobs["vector"] for p in points if p.family == "memory-bound"} == {4, 8, 16}
    assert len({p.name for p in points}) == len(points)
    commands = layer_commands("python3")
    assert len(commands) == len(LAYERS) == 8
    assert {c[c.index("--dtype") + 1] for c in commands} == {"fp32", "bf16"}
    assert {c[c.index("--seq-len") + 1] for c in commands} == {"128", "512"}


def test_the_emulated_session_skips_nothing_within_9_minutes(tmp_path: Path) -> None:
    records, _, out, _ = emulate(tmp_path)
    assert [r.status for r in records] == ["ok"] * len(records)
    session = json.loads(members(out / "results.tgz")["session.json"])
    assert session["emulated"] is True
    assert session["elapsed_s"] <= BUDGET_S == 540


def test_the_results_format(tmp_path: Path) -> None:
    _, _, out, _ = emulate(tmp_path)
    files = members(out / "results.tgz")
    session = json.loads(files["session.json"])
    assert set(SESSION_KEYS) <= set(session)
    for step in session["steps"]:
        assert set(STEP_KEYS) <= set(step)
        assert step["log"] in files
        for name in step["files"]:
            assert json.loads(files[name])
    assert {"kernels-fp32", "kernels-bf16", "calibration-sweep"} <= {
        name.rsplit("-", 2)[0] for name in files if name.endswith(".json")
    }
    summary = files["summary.md"].decode()
    assert summary.startswith("# GPU session: EMULATED")
    assert "Skipped: none." in summary


def test_results_are_packed_after_every_step(tmp_path: Path) -> None:
    _, _, _, seen = emulate(tmp_path)
    for index, (name, files) in enumerate(seen):
        steps = json.loads(files["session.json"])["steps"]
        assert [s["name"] for s in steps][-1] == name
        assert len(steps) == index + 1


def test_a_short_budget_skips_the_last_steps_and_keeps_the_rest(tmp_path: Path) -> None:
    records, _, out, _ = emulate(tmp_path, budget=200)
    statuses = {r.name: r.status for r in records}
    assert statuses["setup"] == statuses["gpu-tests"] == "ok"
    assert statuses["profile-worst"] == "skipped"
    assert "budget is spent" in next(r.reason for r in records if r.name == "profile-worst")
    assert json.loads(members(out / "results.tgz")["session.json"])["elapsed_s"] <= 200


def test_a_step_past_its_limit_is_cut_and_the_next_one_runs(tmp_path: Path) -> None:
    records, *_ = emulate(tmp_path, **{"gpu-tests": 1000.0})
    statuses = {r.name: r.status for r in records}
    assert statuses["gpu-tests"] == "timeout"
    assert statuses["calibration-sweep"] == "ok"


def test_the_ten_worst_cases_are_the_slowest_against_eager() -> None:
    rows = [{"case": f"c{i}", "status": "ok", "speedup_eager": s} for i, s in enumerate([3, 1, 2])]
    rows += [{"case": "bad", "status": "mismatch", "speedup_eager": 0.1}]
    assert [r["case"] for r in worst_cases([{"rows": rows}], 2)] == ["c1", "c2"]


@pytest.mark.parametrize("flag", ["--plan", "--emulate"])
def test_the_script_runs_in_one_command(tmp_path: Path, flag: str) -> None:
    env = os.environ | {"PYTHON": sys.executable, "OUT": str(tmp_path / "out")}
    command = ["bash", "bench/gpu_session.sh", flag, "--results", str(tmp_path / "results")]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    if flag == "--emulate":
        assert "8 of 8 steps run, 0 skipped" in done.stdout
        assert (tmp_path / "out" / "results.tgz").exists()
    else:
        assert "foreground of a 540 s budget" in done.stdout


def test_a_sweep_cut_short_still_covers_every_family() -> None:
    first = sweep_points()[:30]
    assert {p.family for p in first} == {"GEMM fp32", "GEMM bf16", "memory-bound"}
