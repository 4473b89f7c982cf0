"""`python -m bench.decode_step`: a whole model's decode step, and its projections, modeled.

Generation spends its time in the decode step: one new token through every layer, reading
every weight once and the KV cache (docs/guides/generation.md). This models that step as
`deplodock generate` compiles it (`deplodock run --profile --model DEVICE MODEL --kv-len N`:
the model's own layers over a cache of N rows, the step at its last position) for
Qwen2.5-7B and TinyLlama, and each `M = 1` projection of a layer alone, in bf16 and fp32.

For the step it records the modeled time, the one % SOL (`perf/sol.py`: compulsory bytes at
the datasheet bandwidth over the whole time, launches included), the launches and the time
the model charges for them alone (`launches x launch_us`: a floor no schedule removes, only
fewer kernels do), and the time by kind of kernel. *Modeled*, never measured:
`bench/results/decode-step-modeled-<device>.{json,md}`.
"""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.cases import MODELS, ModelShape
from bench.model_calibration import git_commit
from bench.report import write_json
from deplodock.files import write_atomic

#: Shipped model ids of the suite's shapes (`bench.cases.MODELS`).
MODEL_IDS = {
    "qwen2.5-7b": "Qwen/Qwen2.5-7B",
    "tinyllama-1.1b": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
}
KV_LENS = (1024, 2048)  # TinyLlama takes 2048 positions
DTYPES = ("bf16", "fp32")


def projections(m: ModelShape) -> dict[str, tuple[int, int]]:
    """A layer's `M = 1` projections: name -> (K, N)."""
    return {
        "q_proj": (m.hidden, m.heads * m.head_dim),
        "k_proj": (m.hidden, m.kv_heads * m.head_dim),
        "o_proj": (m.heads * m.head_dim, m.hidden),
        "gate_proj": (m.hidden, m.intermediate),
        "down_proj": (m.intermediate, m.hidden),
    }


def kind_of(kernel: str) -> str:
    """The step's kernels by what they do (their names say: `fused_names.py`)."""
    if "attention" in kernel:
        return "attention"
    if kernel.startswith("linear"):
        return "projections"
    return "other (norms, RoPE, cache writes, embedding)"


def estimate(program: Any, device_key: str) -> Any:
    from deplodock.driver import lower_program
    from deplodock.perf.devices import device_model
    from deplodock.perf.profile import model_program, ptxas_registers

    device = device_model(device_key)
    lower_program(program, "kernel")
    return model_program(program.module, device, ptxas_registers(program.module, device.capability))


def step_row(model_id: str, dtype: str, kv_len: int, device_key: str) -> dict[str, Any]:
    from deplodock.driver import program_from_model

    program = program_from_model(model_id, dtype=dtype, kv_len=kv_len)
    modeled = estimate(program, device_key)
    launches = sum(count for _, count in modeled.kernels)
    launch_us = modeled.calibration.constants.launch_us
    by_kind: dict[str, float] = {}
    for kernel, count in modeled.kernels:
        kind = kind_of(kernel.name)
        by_kind[kind] = by_kind.get(kind, 0.0) + kernel.time_us * count
    return {
        "model": model_id,
        "dtype": dtype,
        "kv_len": kv_len,
        "modeled_us": round(modeled.total_us, 1),
        "ideal_us": round(modeled.ideal_us, 1),
        "sol_pct": round(100 * modeled.ideal_us / modeled.total_us, 1),
        "launches": launches,
        "launch_floor_us": round(launches * launch_us, 1),
        "by_kind_us": {kind: round(us, 1) for kind, us in sorted(by_kind.items())},
    }


def projection_row(m: ModelShape, name: str, dtype: str, device_key: str) -> dict[str, Any]:
    from deplodock.driver import program_from_expression

    k, n = projections(m)[name]
    cast = ".bfloat16()" if dtype == "bf16" else ""
    expression = f"F.linear(torch.randn(1, {k}){cast}, torch.randn({n}, {k}){cast})"
    modeled = estimate(program_from_expression(expression), device_key)
    return {
        "model": m.name,
        "projection": name,
        "dtype": dtype,
        "k": k,
        "n": n,
        "modeled_us": round(modeled.total_us, 1),
        "sol_pct": round(100 * modeled.ideal_us / modeled.total_us, 1),
        "busy_sol_pct": round(100 * modeled.ideal_us / modeled.busy_us, 1),
    }


def run(device_key: str, out_dir: Path, kv_lens: Sequence[int], dtypes: Sequence[str]) -> Path:
    steps, gemvs = [], []
    for m in MODELS:
        for dtype in dtypes:
            for kv_len in kv_lens:
                row = step_row(MODEL_IDS[m.name], dtype, kv_len, device_key)
                print(f"{m.name} {dtype} kv {kv_len}: {row['modeled_us']} us, "
                      f"{row['sol_pct']} % SOL", flush=True)  # fmt: skip
                steps.append(row)
            for name in projections(m):
                gemvs.append(projection_row(m, name, dtype, device_key))
    doc = {
        "kind": "MODELED, not measured",
        "device_model": device_key,
        "generated": datetime.date.today().isoformat(),
        "commit": git_commit(),
        "command": f"python -m bench.decode_step --model {device_key}",
        "steps": steps,
        "projections": gemvs,
    }
    stem = out_dir / f"decode-step-modeled-{device_key}"
    write_json(stem.with_suffix(".json"), doc)
    write_atomic(stem.with_suffix(".md"), markdown(doc))
    return stem.with_suffix(".md")


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        f"# The decode step, MODELED on {doc['device_model']}",
        "",
        f"MODELED, not measured. Generated {doc['generated']} at commit {doc['commit']} by "
        f"`{doc['command']}`. The step is what `deplodock generate` compiles: one token "
        "through every layer over a KV cache of `kv` rows, at the cache's last position "
        "(`deplodock run --profile --model DEVICE MODEL --kv-len N`). % SOL is "
        "`deplodock/perf/sol.py`'s: compulsory bytes at the datasheet DRAM bandwidth over the "
        "whole modeled time, launches included. `launch floor`: launches x the model's "
        "fixed cost of one launch (as CUDA events time a kernel alone).",
        "",
        "| model | dtype | kv | modeled us | ideal us | % SOL | launches | launch floor us "
        "| projections us | attention us | other us |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in doc["steps"]:
        kinds = row["by_kind_us"]
        other = sum(us for kind, us in kinds.items() if kind.startswith("other"))
        lines.append(
            f"| {row['model']} | {row['dtype']} | {row['kv_len']} | {row['modeled_us']} | "
            f"{row['ideal_us']} | {row['sol_pct']} | {row['launches']} | "
            f"{row['launch_floor_us']} | {kinds.get('projections', 0.0)} | "
            f"{kinds.get('attention', 0.0)} | {round(other, 1)} |"
        )
    lines += [
        "",
        "## Each `M = 1` projection alone",
        "",
        "`busy % SOL`: the ideal over the time without the launch.",
        "",
        "| model | projection | dtype | K | N | modeled us | % SOL | busy % SOL |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in doc["projections"]:
        lines.append(
            f"| {row['model']} | {row['projection']} | {row['dtype']} | {row['k']} | "
            f"{row['n']} | {row['modeled_us']} | {row['sol_pct']} | {row['busy_sol_pct']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decode_step", description=__doc__)
    parser.add_argument("--model", default="h100", help="the device model (default h100)")
    parser.add_argument("--kv", type=int, nargs="+", default=list(KV_LENS))
    parser.add_argument("--dtype", nargs="+", choices=DTYPES, default=list(DTYPES))
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    print(run(args.model, args.out, args.kv, args.dtype))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
