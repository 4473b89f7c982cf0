"""`bench.model_calibration`: the fit, a measured run's own constants, the bounds it must
report."""

from __future__ import annotations

import dataclasses

import pytest

from bench.model_calibration import at_bounds, error_bands, fit, group_weights, loss, with_value
from bench.published import TracedRow
from bench.trace_cache import TracedKernel
from deplodock.backend.cost import kernel_cost
from deplodock.dialects import kernel
from deplodock.perf.model import Calibration, Constants, for_run, run_key
from deplodock.perf.trace import trace_kernel
from tests.helpers import parse
from tests.perf import kernels as K

#: The key of the H200 run's own constants (its latency-timed rows).
H200_RUN = run_key("h200", "latency")
#: The "truth" the synthetic rows are measured with: the H200 run saw 0.8 of its clock.
TRUTH = Calibration(
    Constants(dram_efficiency=0.85, launch_us=6.0, issue_efficiency=0.8),
    device_constants={H200_RUN: {"clock_fraction": 0.8}},
)


def traced(text: str) -> list[tuple[TracedKernel, int]]:
    fn = next(op for op in parse(text).ops if isinstance(op, kernel.FuncOp))
    counters = trace_kernel(fn)
    return [(TracedKernel(counters, float(kernel_cost(fn).flops), 1, 32, "fp32"), 32)]


@pytest.fixture(scope="module")
def rows() -> list[TracedRow]:
    """Memory-bound copies and FMA-bound loops on both devices, 'measured' by `TRUTH`."""
    kernels = [traced(K.copy_2d(n)) for n in (1024, 2048, 4096)]
    kernels += [traced(K.fma_loop(grid, 512)) for grid in (1056, 2112, 4224)]
    made = []
    for device in ("h100", "h200"):
        for i, k in enumerate(kernels):
            family = "memory-bound" if i < 3 else "GEMM fp32"
            row = TracedRow(f"{device} {i}", family, f"synthetic {device}", device, 1.0, k)
            row.constants_key = H200_RUN if device == "h200" else ""
            row.measured_us = row.modeled_us(TRUTH)
            row.extra["split"] = "fit" if i % 2 == 0 else "held-out"
            made.append(row)
    return made


def test_the_fit_recovers_the_measured_times_and_the_devices_own_clock(rows):
    start = Calibration(Constants())
    fitted = fit(rows, start, passes=4)
    weights = group_weights(rows)
    assert loss(rows, fitted, weights) < 0.05 * loss(rows, start, weights)
    for row in rows:
        assert row.modeled_us(fitted) == pytest.approx(row.measured_us, rel=0.05)
    # the FMA-bound H200 rows ran slower than the H100's at the same counts: only a clock of
    # its own explains that, and the fit finds it
    h100 = fitted.constants_for("h100").clock_fraction
    assert fitted.constants_for(H200_RUN).clock_fraction < h100


def test_the_held_out_rows_give_each_family_a_band(rows):
    bands = error_bands(rows, TRUTH)
    assert set(bands) == {"memory-bound", "GEMM fp32"}
    assert bands["GEMM fp32"]["mape_pct"] == 0.0 and bands["GEMM fp32"]["rows"] == 4  # 2 per device
    assert bands["GEMM fp32"]["source"].endswith("held-out rows")


def test_a_constant_at_a_bound_is_reported_with_why(rows):
    at_floor = with_value(TRUTH, (None, "wave_us"), 0.0)
    at_floor = with_value(at_floor, (H200_RUN, "launch_us"), 60.0)
    found = {entry["constant"]: entry for entry in at_bounds(at_floor, rows)}
    assert found["wave_us"]["bound"] == "low" and "floor" in str(found["wave_us"]["why"])
    assert found["h200@latency.launch_us"]["bound"] == "high"
    assert found["h200@latency.launch_us"]["why"] == "no physical reason: a model gap"
    assert "dram_efficiency" not in found


def test_device_constants_replace_only_their_own():
    own = TRUTH.constants_for(H200_RUN)
    assert own.clock_fraction == 0.8
    shared = TRUTH.constants.clock_fraction
    assert dataclasses.replace(own, clock_fraction=shared) == TRUTH.constants_for("h100")


def test_a_device_model_alone_takes_the_shared_constants_and_a_run_its_own():
    """The H200 run's clock and launch cost were what its latency timing saw: they model its
    rows, not the H200 of `run --profile --model h200` or of the suites."""
    assert TRUTH.constants_for("h200") == TRUTH.constants
    as_run = for_run(TRUTH, "h200", "latency")
    assert as_run.constants_for("h200").clock_fraction == 0.8
    assert for_run(TRUTH, "h200", "graph").constants_for("h200") == TRUTH.constants


def test_host_timed_measured_rows_never_set_a_band(rows):
    """A measured row under 0.2 ms timed the host's call: whatever its error, it is neither
    fitted nor allowed into a band."""
    copy = rows[1]
    host_timed = TracedRow("tiny", "memory-bound", "measured H200", "h200", 5.0, copy.kernels)
    host_timed.extra["split"] = "held-out"
    assert not host_timed.gpu_bound
    bands = error_bands([*rows, host_timed], TRUTH)
    assert bands["memory-bound"]["mape_pct"] == 0.0
    assert "measured" not in str(bands["memory-bound"]["source"])
