"""`python -m bench.attention`: attention at the lengths the 84-case suite does not reach, modeled.

The suite (`bench/cases.py`) stops at 512 tokens. Attention's cost grows with the square of
the length, and its memory did too until attention became one kernel (`loop-fusion`'s score
matrix, `tile-prologue-product`, `tile-streaming-softmax`): these cases follow it to 4096
tokens of prefill and to 32k cached tokens of decoding, with Qwen2.5-7B's and TinyLlama's
head shapes (grouped-query, causal prefill), in bf16 and fp32.

- prefill: `F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)` with
  512, 2048 and 4096 queries and keys;
- decode: one query against 1k, 8k and 32k keys (no mask: the query is the last position).

Each case is compiled to the kernel level and modeled on the device (`bench.modeled`, the same
rows as the suite's, with their one % of speed-of-light, launches included), and the
program's largest intermediate buffer is recorded: with attention in one kernel it holds no
`queries x keys` matrix. The results are *modeled*, never measured, and say so:
`bench/results/attention-modeled-<device>-<dtype>.{json,md}`.
"""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.cases import MODELS, Case, ModelShape
from bench.model_calibration import git_commit
from bench.modeled import model_case, published_linear_rows
from bench.report import write_json
from deplodock.files import write_atomic

PREFILL_LENGTHS = (512, 2048, 4096)
DECODE_LENGTHS = (1024, 8192, 32768)


def _prefill(m: ModelShape, s: int, dt: str, mdt: str) -> str:
    q = f"torch.randn(1, {m.heads}, {s}, {m.head_dim}{dt})"
    kv = f"torch.randn(1, {m.kv_heads}, {s}, {m.head_dim}{dt})"
    return f"F.scaled_dot_product_attention({q}, {kv}, {kv}, is_causal=True, enable_gqa=True)"


def _decode(m: ModelShape, s: int, dt: str, mdt: str) -> str:
    q = f"torch.randn(1, {m.heads}, 1, {m.head_dim}{dt})"
    kv = f"torch.randn(1, {m.kv_heads}, {s}, {m.head_dim}{dt})"
    return f"F.scaled_dot_product_attention({q}, {kv}, {kv}, enable_gqa=True)"


def attention_cases() -> list[Case]:
    """Prefill then decode, per model, by length."""
    cases = []
    for m in MODELS:
        q = (1, m.heads, 1, m.head_dim)
        for s in PREFILL_LENGTHS:
            kv = (1, m.kv_heads, s, m.head_dim)
            shape = (1, m.heads, s, m.head_dim)
            cases.append(Case("sdpa_gqa", m, s, _prefill, (shape, kv, kv), shape, True))
        for s in DECODE_LENGTHS:
            kv = (1, m.kv_heads, s, m.head_dim)
            cases.append(Case("sdpa_decode", m, s, _decode, (q, kv, kv), q, True))
    return cases


def largest_buffer_bytes(expression: str) -> int:
    """The largest buffer the program allocates (loop level): its output, or a score matrix."""
    from xdsl.dialects.builtin import MemRefType

    from deplodock.dialects import loop
    from deplodock.dialects.element_types import buffer_bytes
    from deplodock.driver import lower_program, program_from_expression

    program = program_from_expression(expression)
    lower_program(program, "loop")
    sizes = [
        buffer_bytes(op.results[0].type)
        for op in program.module.walk()
        if isinstance(op, loop.AllocOp) and isinstance(op.results[0].type, MemRefType)
    ]
    return max(sizes, default=0)


def run(device_key: str, dtype: str, out_dir: Path, patterns: Sequence[str] = ()) -> Path:
    cases = [c for c in attention_cases() if not patterns or any(p in c.name for p in patterns)]
    gemm_rows = published_linear_rows()
    rows: list[dict[str, Any]] = []
    for n, case in enumerate(cases, 1):
        row = model_case(case, dtype, device_key, gemm_rows)
        row["kernel_count"] = len(row.get("kernels", []))
        row["largest_buffer_bytes"] = largest_buffer_bytes(row["expression"])
        rows.append(row)
        detail = (
            f"{row['modeled_us']:.1f} us  {row['sol_pct']}% SOL  {row['limiter']}"
            if row["status"] == "ok"
            else row["status"]
        )
        print(f"[{n:>2}/{len(cases)}] {case.name:<34} {detail}", flush=True)
    doc = {
        "kind": "MODELED, not measured",
        "device_model": device_key,
        "dtype": dtype,
        "generated": datetime.date.today().isoformat(),
        "commit": git_commit(),
        "command": f"python -m bench.attention --model {device_key} --dtype {dtype}",
        "rows": rows,
    }
    stem = out_dir / f"attention-modeled-{device_key}-{dtype}"
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(stem.with_suffix(".json"), doc)
    write_atomic(stem.with_suffix(".md"), markdown(doc))
    return stem.with_suffix(".json")


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        f"# Attention at long lengths, {doc['dtype']}, MODELED on {doc['device_model']}",
        "",
        f"MODELED, not measured. Generated {doc['generated']} at commit {doc['commit']} by "
        f"`{doc['command']}`. % SOL is `deplodock/perf/sol.py`'s: the program's ideal time "
        "(compulsory bytes at the datasheet bandwidth, or its kernels' useful flops at the "
        "dtype's dense peak) over its whole modeled time, launches included. `largest buffer`: "
        "the largest buffer the program allocates at the loop level (with attention in one "
        "kernel, its output; before, the `queries x keys` score matrix).",
        "",
        "| case | kernels | modeled us | % SOL | limiter | largest buffer MB |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for row in doc["rows"]:
        if row["status"] != "ok":
            lines.append(f"| {row['case']} | | {row['status']} | | | |")
            continue
        lines.append(
            f"| {row['case']} | {row['kernel_count']} | {row['modeled_us']:.1f} | "
            f"{row['sol_pct']} | {row['limiter']} | {row['largest_buffer_bytes'] / 1e6:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.attention", description=__doc__)
    parser.add_argument("--model", default="h100", help="the device model (default: h100)")
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("-k", "--case", action="append", dest="cases", default=[])
    args = parser.parse_args(argv)
    print(f"results: {run(args.model, args.dtype, args.out, args.cases)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
