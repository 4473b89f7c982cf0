"""`--timing graph` without a GPU: the plan, the interleaved replays with the flush taken
out, the statistics, the clock readings and the row fields, with fake graphs."""

from __future__ import annotations

import subprocess

import pytest

from bench.graph_timing import (
    CLOCK_QUERY,
    MAX_CALLS_PER_GRAPH,
    MIN_CALLS,
    MIN_REPLAYS,
    MIN_SECONDS,
    GraphMeasurement,
    GraphPlan,
    StreamProgram,
    clocks_record,
    parse_clocks,
    percentile,
    plan_graph,
    read_clocks,
    run_graphs_interleaved,
)
from bench.kernels import TIMINGS, graph_row_fields, parse_args, timing_label


@pytest.mark.parametrize("call_ms", [0.005, 0.02, 0.1, 0.5, 2.0, 10.0, 50.0, 400.0])
def test_the_plan_reaches_100_calls_or_1_s(call_ms: float) -> None:
    plan = plan_graph(call_ms)
    assert 1 <= plan.calls_per_graph <= MAX_CALLS_PER_GRAPH
    assert plan.replays >= MIN_REPLAYS
    assert plan.calls >= MIN_CALLS or plan.calls * call_ms >= MIN_SECONDS * 1e3


def test_a_short_call_fills_a_graph_and_a_long_one_runs_alone() -> None:
    assert plan_graph(0.01).calls_per_graph == MAX_CALLS_PER_GRAPH
    assert plan_graph(20.0).calls_per_graph == 1


def test_percentiles_interpolate_like_numpy() -> None:
    values = [4.0, 1.0, 3.0, 2.0, 5.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == 3.0
    assert percentile(values, 10) == pytest.approx(1.4)
    assert percentile(values, 90) == pytest.approx(4.6)


class FakeGraph:
    def __init__(self, name: str, calls: int, per_call: float, log: list[str]):
        self.name, self.calls, self.per_call, self.log = name, calls, per_call, log

    def replay_ms(self) -> float:
        self.log.append(self.name)
        if self.per_call < 0:
            raise RuntimeError("illegal address\nmore")
        return self.calls * self.per_call


def capture(name: str, per_call: float, log: list[str]):
    return lambda calls: FakeGraph(name, calls, per_call, log)


def test_replays_interleave_and_the_flush_comes_off() -> None:
    log: list[str] = []
    flush_ms = 0.05
    contenders = {
        "eager": capture("eager", 0.2 + flush_ms, log),
        "deplodock": capture("deplodock", 0.1 + flush_ms, log),
    }
    plan = GraphPlan(calls_per_graph=8, replays=6)
    results = run_graphs_interleaved(contenders, capture("flush", flush_ms, log), plan=plan)
    assert log[:3] == ["flush", "eager", "deplodock"]
    assert log.count("deplodock") == 6
    assert results["deplodock"].median == pytest.approx(0.1)
    assert results["eager"].median == pytest.approx(0.2)
    stats = results["deplodock"].stats()
    assert stats["calls"] == 48 and stats["replays"] == 6 and stats["calls_per_graph"] == 8
    assert stats["min_ms"] <= stats["p10_ms"] <= stats["median_ms"] <= stats["p90_ms"]


def test_a_contender_that_fails_keeps_its_error_and_the_others_go_on() -> None:
    log: list[str] = []

    def broken(calls: int):
        raise RuntimeError("operation not permitted when stream is capturing")

    contenders = {
        "torch.compile": broken,
        "faulty": capture("faulty", -1.0, log),
        "deplodock": capture("deplodock", 0.1, log),
    }
    results = run_graphs_interleaved(contenders, None, plan=GraphPlan(4, 5))
    assert results["torch.compile"].error.startswith("RuntimeError: operation not permitted")
    assert not results["torch.compile"].ok
    assert results["faulty"].error == "RuntimeError: illegal address"
    assert log.count("faulty") == 1
    assert results["deplodock"].ok and len(results["deplodock"].per_call_ms) == 5


def test_the_plan_follows_the_slowest_contender() -> None:
    estimates = {"a": 0.01, "b": 2.0}
    results = run_graphs_interleaved(
        {name: capture(name, 1.0, []) for name in estimates}, None, estimates.__getitem__
    )
    assert results["a"].calls_per_graph == plan_graph(2.0).calls_per_graph


def test_clocks_parse_from_nvidia_smi() -> None:
    clocks = parse_clocks("1980, 3201, 1980, 1785, Not Active, 41, 120.50\n")
    assert (clocks.sm_mhz, clocks.mem_mhz, clocks.max_sm_mhz) == (1980, 3201, 1980)
    assert clocks.locked is False and clocks.power_w == 120.5 and clocks.error is None
    assert parse_clocks("1980, [N/A], 1980, 1785, Active, 41, [N/A]").locked is True
    assert parse_clocks("garbage").error


def test_clocks_never_raise() -> None:
    def missing(*args, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    assert "nvidia-smi" in read_clocks(run=missing).error

    def query(command, **kwargs):
        assert f"--query-gpu={','.join(CLOCK_QUERY)}" in command
        return subprocess.CompletedProcess(
            command, 0, "1755, 3201, 1980, 1785, Not Active, 50, 300\n"
        )

    assert read_clocks(run=query).sm_mhz == 1755


def test_the_clock_record_says_locked_only_when_both_readings_agree() -> None:
    locked = parse_clocks("1755, 3201, 1980, 1755, Active, 50, 300")
    free = parse_clocks("1980, 3201, 1980, 1785, Not Active, 50, 300")
    assert clocks_record(locked, locked)["locked"] is True
    assert clocks_record(free, free)["locked"] is False
    assert clocks_record(locked, free)["locked"] is None
    assert clocks_record(free, free)["before"]["sm_mhz"] == 1980


def test_a_graph_row_takes_the_medians_and_keeps_the_spread() -> None:
    results = {
        "PyTorch eager": GraphMeasurement("PyTorch eager", 4, [0.2, 0.3, 0.25]),
        "torch.compile": GraphMeasurement("torch.compile", 4, error="RuntimeError: capture"),
        "deplodock": GraphMeasurement("deplodock", 4, [0.1, 0.12, 0.11]),
    }
    clocks = clocks_record(parse_clocks("garbage"), parse_clocks("garbage"))
    fields = graph_row_fields(results, clocks)
    assert fields["eager_ms"] == 0.25 and fields["deplodock_ms"] == 0.11
    assert fields["compile_ms"] is None
    assert fields["reason"] == "torch.compile: RuntimeError: capture"
    assert fields["graph_stats"]["deplodock"]["p90_ms"] == pytest.approx(0.118)
    assert fields["clocks"]["locked"] is None


def test_the_suite_offers_graph_timing_and_labels_it() -> None:
    assert TIMINGS[0] == "graph" and {"latency", "device"} <= set(TIMINGS)
    args = parse_args(["--timing", "graph", "--warm"])
    assert args.timing == "graph" and args.warm
    assert timing_label("graph", False) == "graph (L2 flushed between calls)"
    assert timing_label("graph", True) == "graph (warm L2)"
    assert timing_label("device", False) == "device"


class FakeDriver:
    """libcuda's four calls StreamProgram makes, recorded (handles are small integers)."""

    def __init__(self):
        self.calls: list[tuple] = []

    def cuModuleLoadData(self, module, image):
        module._obj.value = 0x100
        self.calls.append(("load", image.value))
        return 0

    def cuModuleGetFunction(self, function, module, name):
        function._obj.value = 0x200 + len(self.calls)
        self.calls.append(("function", module.value, name))
        return 0

    def cuFuncSetAttribute(self, function, attribute, value):
        self.calls.append(("attribute", function.value, attribute, value))
        return 0

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self.calls.append(("launch", f.value, gx, bx, smem, stream.value, params, extra))
        return 0


def test_the_stream_program_replays_forward_on_the_given_stream() -> None:
    import ctypes
    import types

    import torch

    from deplodock.backend.runtime import _Alloc, _Launch

    x = torch.randn(4, 8)
    steps = [
        _Alloc(1, (4, 8), torch.float32),
        _Launch("k1", None, [0, 1], 4, 128, 0),
        _Launch("k2", None, [1, 0], 2, 256, 64 * 1024),  # past 48 KiB: opts in
        _Launch("k1", None, [1, 1], 4, 128, 0),
    ]
    program = types.SimpleNamespace(
        steps=steps, launches=steps[1:], build=types.SimpleNamespace(cubin=b"CUBIN")
    )
    driver = FakeDriver()
    runner = StreamProgram(program, [x], driver=driver, device="cpu", stream=lambda: 0x77)
    assert [c[0] for c in driver.calls] == ["load", "function", "function", "attribute"]
    assert driver.calls[0] == ("load", b"CUBIN")
    assert driver.calls[3][2:] == (8, 64 * 1024)  # MAX_DYNAMIC_SHARED_SIZE_BYTES
    runner()
    runner()
    launches = [c for c in driver.calls if c[0] == "launch"]
    assert len(launches) == 6 and {c[5] for c in launches} == {0x77}
    assert [(c[2], c[3], c[4]) for c in launches[:3]] == [(4, 128, 0), (2, 256, 65536), (4, 128, 0)]
    assert launches[0][1] == launches[2][1] != launches[1][1]  # k1 loaded once

    def pointers(call: tuple) -> list[int]:
        params = call[6]
        return [ctypes.c_void_p.from_address(params[i]).value for i in range(len(params))]

    scratch = runner.values[1].data_ptr()
    assert pointers(launches[0]) == [x.data_ptr(), scratch]
    assert pointers(launches[1]) == [scratch, x.data_ptr()]
    assert pointers(launches[3]) == pointers(launches[0])  # buffers allocated once
