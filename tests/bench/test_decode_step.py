"""`bench.decode_step`: the decode step of a model, modeled, with its launches and the time by
kind of kernel; each `M = 1` projection alone. A tiny config keeps the test quick."""

from __future__ import annotations

from bench import decode_step
from bench.cases import QWEN


def test_the_step_row_adds_up_and_its_launch_floor_counts_every_launch() -> None:
    row = decode_step.step_row("docs/examples/tiny-llama", "fp32", 64, "h100")
    assert row["launches"] > 2 * 10  # two layers of a dozen kernels and more
    assert abs(sum(row["by_kind_us"].values()) - row["modeled_us"]) < 0.5
    assert 0 <= row["sol_pct"] < 1  # a tiny model: its launches are nearly all of it
    assert row["launch_floor_us"] < row["modeled_us"]
    assert set(row["by_kind_us"]) <= {
        "attention", "projections", "other (norms, RoPE, cache writes, embedding)"
    }  # fmt: skip


def test_projections_are_a_layers_m1_products() -> None:
    shapes = decode_step.projections(QWEN)
    assert shapes["gate_proj"] == (3584, 18944) and shapes["down_proj"] == (18944, 3584)
    assert shapes["k_proj"] == (3584, 512)


def test_the_markdown_says_modeled_and_lists_every_row() -> None:
    doc = {
        "device_model": "h100", "generated": "2026-12-07", "commit": "abc",
        "command": "python -m bench.decode_step --model h100",
        "steps": [{"model": "m", "dtype": "bf16", "kv_len": 1024, "modeled_us": 10.0,
                   "ideal_us": 5.0, "sol_pct": 50.0, "launches": 3, "launch_floor_us": 3.0,
                   "by_kind_us": {"projections": 6.0, "attention": 1.0,
                                  "other (norms, RoPE, cache writes, embedding)": 3.0}}],
        "projections": [{"model": "m", "projection": "q_proj", "dtype": "bf16", "k": 8,
                         "n": 8, "modeled_us": 1.0, "sol_pct": 2.0, "busy_sol_pct": 3.0}],
    }  # fmt: skip
    text = decode_step.markdown(doc)
    assert "MODELED, not measured" in text
    assert "| m | bf16 | 1024 | 10.0 | 5.0 | 50.0 | 3 | 3.0 | 6.0 | 1.0 | 3.0 |" in text
    assert "| m | q_proj | bf16 | 8 | 8 | 1.0 | 2.0 | 3.0 |" in text
