"""The fp32-GEMM-versus-cuBLAS table of `bench.scheduling_speedup`: the nearest published
M = 512 shape and the one % SOL on both sides."""

from __future__ import annotations

from bench.scheduling_speedup import nearest_m512_row, peak_table
from deplodock.perf.devices import device_model


def row(b: int, m: int, n: int, k: int, us: float) -> dict:
    return {
        "op": "linear",
        "B": str(b),
        "M": str(m),
        "N": str(n),
        "K": str(k),
        "latency_us": str(us),
    }


def test_the_nearest_shape_is_at_512_rows_and_nearest_in_log_scale() -> None:
    rows = [
        row(1, 512, 4096, 4096, 1.0),
        row(1, 512, 1600, 1600, 1.0),
        row(4, 128, 2048, 2048, 1.0),
    ]
    assert nearest_m512_row(2048, 2048, rows)["B"] == "4"  # 4 x 128 rows is M = 512 too
    assert nearest_m512_row(1800, 1500, rows)["N"] == "1600"
    assert nearest_m512_row(3584, 3584, rows)["N"] == "4096"
    # the file's N is the input features and K the output: (out 512, in 4096) finds N 4096
    wide = [row(1, 512, 4096, 512, 1.0), row(1, 512, 512, 4096, 1.0)]
    assert nearest_m512_row(512, 4096, wide)["N"] == "4096"
    assert nearest_m512_row(2048, 2048, [row(1, 256, 2048, 2048, 1.0)]) is None


def test_the_table_states_each_sol() -> None:
    after = {
        "rows": [
            {"case": "q_proj/tinyllama-1.1b/s512", "status": "ok", "family": "GEMM", "sol_pct": 50},
            {"case": "q_proj/tinyllama-1.1b/s128", "status": "ok", "family": "GEMM", "sol_pct": 9},
        ]
    }
    flops = 2 * 512 * 2048 * 2048
    us = flops / device_model("h100").fp32_flops_per_s * 1e6 * 4  # a quarter of the FMA peak
    lines = peak_table(after, "h100", [row(1, 512, 2048, 2048, us)])
    (line,) = [x for x in lines if x.startswith("| q_proj")]  # the 512-token case only
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == "2048 x 2048"
    assert cells[2] == "50.0"
    assert cells[3] == "512x2048->2048"
    assert cells[4] == "25.0"  # compute-bound: its flops at the FMA peak over the time
