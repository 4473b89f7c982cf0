"""The modeled suite's JSON keeps its schema (readers of bench/results/ depend on it).

A change to the keys below is a schema change: bump `bench.modeled.SCHEMA_VERSION` and
regenerate the committed results with `python -m bench.kernels --model h100`.
"""

from __future__ import annotations

import json

from bench.cases import find_cases
from bench.modeled import SCHEMA_VERSION, document, model_case, nearest_published_gemm

DOCUMENT_KEYS = {
    "schema_version", "suite", "modeled", "note", "device_model", "device_key", "dtype", "date",
    "commit",
    "calibration", "error_bands", "summary", "rows",
}  # fmt: skip
SUMMARY_KEYS = {
    "cases", "ok", "geomean_sol_pct", "total_modeled_us", "worst", "gemm_512_sol_pct",
}  # fmt: skip
ROW_KEYS = {
    "case", "op", "family", "band", "model", "seq", "dtype", "expression", "status", "reason",
    "modeled_us", "busy_us", "ideal_us", "sol_pct", "flops", "compulsory_bytes", "limiter",
    "dram_bytes",
    "registers_source", "published_eager_us", "published_shape", "kernels",
}  # fmt: skip
KERNEL_KEYS = {
    "kernel", "modeled_us", "busy_us", "ideal_us", "limiter", "sol_pct", "busy_sol_pct", "grid",
    "block",
    "registers", "registers_source", "shared_bytes", "occupancy_pct", "occupancy_limiter",
    "waves", "dram_bytes", "l2_bytes", "flops", "sectors_per_load_request",
    "sectors_per_store_request", "bank_conflict_factor", "bytes_in_flight_per_warp",
    "instructions", "terms_us", "counters_source", "launches",
}  # fmt: skip


def test_modeled_suite_schema_is_stable():
    (case,) = find_cases(["rmsnorm/tinyllama-1.1b/s32"])
    row = model_case(case, "fp32", "h100", [])
    assert row["status"] == "ok", row["reason"]
    doc = json.loads(json.dumps(document([row], "h100", "fp32")))
    assert SCHEMA_VERSION == 3
    assert set(doc) == DOCUMENT_KEYS
    assert set(doc["summary"]) == SUMMARY_KEYS
    assert set(doc["rows"][0]) == ROW_KEYS
    assert set(doc["rows"][0]["kernels"][0]) == KERNEL_KEYS
    assert doc["modeled"] is True and "not measured" in doc["note"]
    assert 0 < row["sol_pct"] <= 100
    # the one % SOL: the program's ideal over its whole modeled time, launch included
    assert row["sol_pct"] == round(100 * row["ideal_us"] / row["modeled_us"], 2)
    assert doc["error_bands"]["memory-bound"].startswith("modeled; memory-bound")


def test_published_gemm_lookup_takes_the_nearest_m():
    (case,) = find_cases(["q_proj/tinyllama-1.1b/s128"])
    rows = [
        {"op": "linear", "B": "1", "M": m, "N": "2048", "K": n, "latency_us": t, "kernel": "k"}
        for m, n, t in (("64", "2048", "10"), ("256", "2048", "20"), ("128", "512", "5"))
    ]
    found = nearest_published_gemm(case, "fp32", rows)
    assert found is not None and found["shape"] in ("64x2048x2048", "256x2048x2048")
    (kv,) = find_cases(["kv_proj/tinyllama-1.1b/s128"])  # 2048 in, 512 out: the file's N, K
    assert nearest_published_gemm(kv, "fp32", rows)["shape"] == "128x2048x512"
    assert nearest_published_gemm(case, "bf16", rows) is None  # published data is fp32


def test_a_run_key_models_with_that_runs_constants():
    """`--model h200@latency`: the H200 as its measured run saw it; `--model h200`: the
    shared constants and the datasheet."""
    from bench.modeled import calibration_for, split_model_key
    from deplodock.perf.model import load_calibration

    assert split_model_key("h200@latency") == ("h200", "latency")
    assert split_model_key("h100") == ("h100", None)
    shared = load_calibration()
    assert calibration_for("h200").constants_for("h200") == shared.constants
    as_run = calibration_for("h200@latency").constants_for("h200")
    assert as_run == shared.constants_for("h200@latency") != shared.constants
