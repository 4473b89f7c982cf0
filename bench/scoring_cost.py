"""`python -m bench.scoring_cost`: what one tuning candidate costs to score without a GPU.

The tuner lowers each candidate to the kernel level, checks it against the loop level in the
CPU interpreter (`tune/check.py`) and scores it on the performance model, whose counters come
from a trace (`perf/trace.py`). This script times those parts for the default candidate (the
first leaf the search scores) of a few suite cases, in CPU seconds of this process (the
figure that does not move with the machine's load; nvcc's included) and in wall seconds,
with caches that start empty as a new candidate finds them (a fresh `XDG_CACHE_HOME`):

- `lower`: the candidate from its tile-level module to the kernel level;
- `trace`: `trace_kernel` of every launched kernel;
- `model`: the rest of the model evaluator (ptxas registers: an nvcc build; flops);
- `check`: `KernelCheck.check`, its reference already computed;
- `reference`: the loop-level reference computed (once per kernel), and loaded again by a
  second `KernelCheck` (another worker, a later search), from the disk where kept.

Each run adds its rows under its `--label` to `--out` (JSON) and rewrites the table next
to it (`.md`), so a before/after pair is two runs of this file, the first with the older
tree first on `PYTHONPATH`:

    PYTHONPATH=../main python bench/scoring_cost.py --label before
    python -m bench.scoring_cost --label after
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "results" / "scoring-cost.json"
#: The suite's 512-token GEMMs timed by default: a square projection and a long-K one.
DEFAULT_CASES = ("q_proj/qwen2.5-7b/s512", "down_proj/tinyllama-1.1b/s512")


def _cpu_seconds() -> float:
    """CPU seconds of this process and of the children it waited for (nvcc, ptxas)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _timed(run: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, CPU seconds, wall seconds)."""
    cpu, wall = _cpu_seconds(), time.perf_counter()
    result = run()
    return result, _cpu_seconds() - cpu, time.perf_counter() - wall


def _commit(source: Path) -> str:
    """The short commit of the tree `source` lives in, `+dirty` with local changes."""
    try:
        git = ["git", "-C", str(source)]
        commit = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def measure_case(name: str, dtype: str) -> dict[str, Any]:
    """The costs of scoring the default candidate of case `name` in `dtype`."""
    from bench.cases import find_cases
    from deplodock.backend.cost import kernel_cost
    from deplodock.dialects import kernel
    from deplodock.driver import lower_program, program_from_expression
    from deplodock.perf.devices import DEFAULT_DEVICE, device_model
    from deplodock.perf.profile import ptxas_registers
    from deplodock.perf.trace import trace_kernel
    from deplodock.tune.check import KernelCheck
    from deplodock.tune.evaluate import Score
    from deplodock.tune.kernels import loop_kernels
    from deplodock.tune.space import KernelSpace, lower_candidate

    case = next(c for c in find_cases([name]) if c.name == name)
    program = program_from_expression(case.expression(dtype))
    lower_program(program, "loop")
    loop_kernel = loop_kernels(program.module)[0]
    space = KernelSpace(loop_kernel, lambda _: Score(1.0))
    _, candidate = space.rollout(space.root())
    module, lower_cpu, lower_wall = _timed(lambda: lower_candidate(candidate))
    funcs = [op for op in module.ops if isinstance(op, kernel.FuncOp)]
    _, trace_cpu, trace_wall = _timed(lambda: [trace_kernel(fn) for fn in funcs])
    capability = device_model(DEFAULT_DEVICE).capability
    _, model_cpu, model_wall = _timed(
        lambda: (ptxas_registers(module, capability), [kernel_cost(fn) for fn in funcs])
    )
    checker = KernelCheck(loop_kernel)
    _ = checker.inputs  # drawn before the clock starts
    _, ref_cpu, ref_wall = _timed(lambda: checker.reference)
    verdict, check_cpu, check_wall = _timed(lambda: checker.check(module))
    again = KernelCheck(loop_kernel)
    _ = again.inputs
    _, again_cpu, again_wall = _timed(lambda: again.reference)
    return {
        "case": name,
        "dtype": dtype,
        "knobs": dict(candidate.knobs),
        "check": verdict.detail,
        "check_blocks": verdict.blocks,
        "cpu_s": {
            "lower": round(lower_cpu, 2),
            "trace": round(trace_cpu, 2),
            "model": round(model_cpu, 2),
            "check": round(check_cpu, 2),
            "reference": round(ref_cpu, 2),
            "reference_again": round(again_cpu, 2),
        },
        "wall_s": {
            "lower": round(lower_wall, 2),
            "trace": round(trace_wall, 2),
            "model": round(model_wall, 2),
            "check": round(check_wall, 2),
            "reference": round(ref_wall, 2),
            "reference_again": round(again_wall, 2),
        },
    }


def markdown(runs: dict[str, Any]) -> str:
    """The table of every recorded run, CPU seconds per part and per candidate."""
    lines = [
        "# Scoring cost of one tuning candidate (CPU, no GPU)",
        "",
        "Written by `bench/scoring_cost.py` (module doc). Seconds of CPU time of the scoring",
        "process (wall seconds in the JSON); *per candidate* = lower + trace + model + check;",
        "the reference is computed once per kernel (`again`: a second check of the kernel).",
        "",
    ]
    for label, run in runs.items():
        lines += [
            f"## {label}",
            "",
            f"{run['date']}, commit {run['commit']}, `{run['command']}`, {run['machine']}",
            "",
            "| case | dtype | lower | trace | model | check | per candidate | reference | again "
            "| blocks checked |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in run["rows"]:
            cpu = row["cpu_s"]
            total = cpu["lower"] + cpu["trace"] + cpu["model"] + cpu["check"]
            lines.append(
                f"| {row['case']} | {row['dtype']} | {cpu['lower']:.2f} | {cpu['trace']:.2f} | "
                f"{cpu['model']:.2f} | {cpu['check']:.2f} | {total:.2f} | {cpu['reference']:.2f} | "
                f"{cpu['reference_again']:.2f} | {row['check_blocks']} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--label", required=True, help="the name this run's rows are kept under")
    parser.add_argument("-k", "--case", action="append", help="a suite case (repeatable)")
    parser.add_argument("--dtype", action="append", choices=("fp32", "bf16"))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    from bench.cases import all_cases

    known = {case.name for case in all_cases()}
    unknown = [name for name in args.case or () if name not in known]
    if unknown:
        print(
            f"scoring_cost: error: no suite case {unknown[0]!r} (bench.kernels --list)",
            file=sys.stderr,
        )
        return 2
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="scoring-cost-")
    import deplodock

    source = Path(deplodock.__file__).resolve().parent
    rows = [
        measure_case(name, dtype)
        for name in args.case or DEFAULT_CASES
        for dtype in args.dtype or ("fp32", "bf16")
    ]
    runs = json.loads(args.out.read_text()) if args.out.exists() else {}
    runs[args.label] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _commit(source),
        "command": "python bench/scoring_cost.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": "2-core CPU shared with other jobs, no GPU",
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(runs, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(runs))
    print(markdown({args.label: runs[args.label]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
