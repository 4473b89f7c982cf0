"""The timing loop, the bench and profile tables and the ceilings cache, with fake timers.

The GPU only supplies numbers (CUDA-event milliseconds); everything done with them is
plain Python, checked here on the CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from deplodock.backend.benchmark import (
    COMPILE,
    DEPLODOCK,
    EAGER,
    Contender,
    Measurement,
    format_bench_table,
    run_interleaved,
    speedups,
    torch_contenders,
)
from deplodock.backend.cost import KernelCost
from deplodock.backend.device import Ceilings, load_ceilings
from deplodock.backend.nvcc import KernelResources
from deplodock.backend.profile import format_profile_table, kernel_profiles
from deplodock.frontend.expression import parse_expression


class FakeTimer:
    """Returns scripted times per contender and logs what ran in which order."""

    def __init__(self, times: dict[str, list[float]], log: list[str]):
        self.times = {k: iter(v) for k, v in times.items()}
        self.log = log

    def time(self, fn) -> float:
        name = fn()
        self.log.append(f"timed {name}")
        return next(self.times[name])


def contender(name: str, log: list[str], fail_at: int | None = None) -> Contender:
    calls = {"n": 0}

    def fn() -> str:
        calls["n"] += 1
        if fail_at is not None and calls["n"] >= fail_at:
            raise RuntimeError(f"{name} broke\nsecond line")
        log.append(f"call {name}")
        return name

    return Contender(name, fn)


def test_warmup_is_untimed_then_runs_interleave_with_a_flush_before_each() -> None:
    log: list[str] = []
    timer = FakeTimer({"a": [5.0, 1.0, 3.0], "b": [2.0, 2.0, 9.0]}, log)
    results = run_interleaved(
        [contender("a", log), contender("b", log)],
        timer,
        warmup=2,
        iters=3,
        before_each=lambda: log.append("flush"),
    )
    assert log[:4] == ["call a", "call a", "call b", "call b"]  # warm-up, not timed
    timed = log[4:]
    assert timed == ["flush", "call a", "timed a", "flush", "call b", "timed b"] * 3
    assert results["a"].times == [5.0, 1.0, 3.0] and results["a"].median == 3.0
    assert results["b"].median == 2.0 and results["b"].min == 2.0


def test_a_failing_contender_is_recorded_and_the_others_go_on() -> None:
    log: list[str] = []
    timer = FakeTimer({"a": [1.0] * 4, "b": [2.0] * 4}, log)
    results = run_interleaved(
        [contender("a", log, fail_at=3), contender("b", log)], timer, warmup=1, iters=4
    )
    assert results["a"].error == "RuntimeError: a broke" and results["a"].times == [1.0]
    assert not results["a"].ok
    assert results["b"].times == [2.0] * 4 and results["b"].ok


def test_warmup_failure_means_no_timed_runs() -> None:
    log: list[str] = []
    results = run_interleaved([contender("a", log, fail_at=1)], FakeTimer({}, log), 3, 2)
    assert results["a"].times == [] and results["a"].error.startswith("RuntimeError")
    with pytest.raises(ValueError, match="iters >= 1"):
        run_interleaved([], FakeTimer({}, log), 1, 0)


def test_bench_table_shows_times_and_speedups() -> None:
    results = {
        EAGER: Measurement(EAGER, [0.30, 0.20, 0.40]),
        COMPILE: Measurement(COMPILE, error="BackendCompilerFailed: no triton"),
        DEPLODOCK: Measurement(DEPLODOCK, [0.10, 0.11, 0.09]),
    }
    assert speedups(results) == {EAGER: pytest.approx(3.0)}
    table = format_bench_table(results, warmup=10, iters=3, flush_bytes=100 * 2**20)
    lines = table.splitlines()
    assert "median of 3 interleaved runs after 10 warm-up runs" in lines[0]
    assert "L2 flushed (100 MiB read)" in lines[0]
    assert lines[2].split() == ["PyTorch", "eager", "0.3000", "0.2000", "3.00x"]
    assert "failed" in lines[3] and "BackendCompilerFailed: no triton" in lines[3]
    assert lines[4].split() == ["deplodock", "0.1000", "0.0900", "-"]


def test_contenders_compute_the_same_thing() -> None:
    module, inputs, _ = parse_expression("nn.RMSNorm(16)(torch.randn(2, 16)) * 3.0")
    expected = module(*inputs)
    compiled_with = []

    def fake_compile(m, args):
        compiled_with.append(len(args))
        return m

    cs = torch_contenders(module, inputs, lambda: expected, compile_fn=fake_compile)
    assert [c.name for c in cs] == [EAGER, COMPILE, DEPLODOCK]
    for c in cs:
        assert torch.allclose(c.fn(), expected)
    cs[1].fn()
    assert compiled_with == [1]  # compiled once, on first use


def test_profile_rows_and_table() -> None:
    cost = KernelCost("rms", 128, 256, flops=2_000_000, load_bytes=8_000_000, store_bytes=0)
    cost.footprint_bytes = 3_000_000
    rows = kernel_profiles(
        [("rms", 128, 256), ("other", 4, 32)],
        [[0.002, 0.001, 0.003], [0.001]],
        {"rms": cost},
        {"rms": KernelResources(registers=40, spill_stores=8, spill_loads=4, shared_bytes=32)},
        dynamic_shared_bytes={"rms": 65536},
    )
    assert rows[0].time_ms == 0.002
    assert rows[0].gbps == pytest.approx(3_000_000 / 2e-6 / 1e9)  # 1500 GB/s
    assert rows[0].issued_gbps == pytest.approx(4000.0)
    assert rows[0].gflops == pytest.approx(1000.0)
    ceilings = Ceilings(copy_gbps=3000.0, fp32_gflops=50_000.0, bf16_gflops=600_000.0)
    table = format_profile_table(rows, ceilings, "fp32", "NVIDIA H100").splitlines()
    assert table[0] == "profile: per-kernel median times on NVIDIA H100"
    # smem: 32 bytes static + 65536 dynamic
    assert table[2].split() == [
        "rms", "2.0", "67%", "1500", "50%", "1000", "2%", "40", "65568", "12", "128", "256"
    ]  # fmt: skip
    assert table[3].split()[:3] == ["other", "1.0", "33%"] and "-" in table[3].split()
    assert table[4].split()[:2] == ["total", "3.0"]
    assert "copy 3000 GB/s, fp32 matmul 50000 GFLOP/s" in table[5]
    bf16 = format_profile_table(rows, ceilings, "bf16")
    assert "bf16 matmul 600000 GFLOP/s" in bf16


def test_ceilings_are_measured_once_per_device(tmp_path: Path) -> None:
    path = tmp_path / "ceilings.json"
    measured: list[str] = []

    def measure(value: float):
        def run() -> Ceilings:
            measured.append("x")
            return Ceilings(value, 2 * value, 3 * value, "2026-01-01")

        return run

    first = load_ceilings("H100", measure(1000.0), path)
    again = load_ceilings("H100", measure(5.0), path)
    other = load_ceilings("H200", measure(2000.0), path)
    assert first == again == Ceilings(1000.0, 2000.0, 3000.0, "2026-01-01")
    assert other.copy_gbps == 2000.0 and len(measured) == 2
    assert set(json.loads(path.read_text())) == {"H100", "H200"}
    path.write_text("{broken")
    assert load_ceilings("H100", measure(7.0), path).copy_gbps == 7.0


def test_an_unknown_timing_is_refused_before_the_gpu_is_touched() -> None:
    from deplodock.driver.cuda import bench_on_cuda

    with pytest.raises(ValueError, match="unknown timing 'wall' \\(expected latency or device\\)"):
        bench_on_cuda(None, None, 1, 1, timing="wall")


def test_the_bench_table_says_when_it_shows_gpu_time() -> None:
    results = {DEPLODOCK: Measurement(DEPLODOCK, [0.10])}
    latency = format_bench_table(results, warmup=1, iters=1).splitlines()[0]
    device = format_bench_table(results, warmup=1, iters=1, timing="device").splitlines()[0]
    assert "GPU time" not in latency
    assert device.endswith("; GPU time (the GPU kept busy while the host issues each call)")
