"""`python -m bench.tune_throughput`: variants scored per second by 1 and by 2 Ray workers.

    python -m bench.tune_throughput --trials 8 --rounds 5 --out bench/results/tune-throughput.md

The same program is tuned (`deplodock.tune.parallel`, on the H100 model, a candidate
checked in the CPU interpreter when it could win, as `tune` does; every one with
`--check-all`) with a fixed number of trials per kernel, once on a local
Ray runtime of each worker count and once in this process (`tune` without `--workers`, for
reference). Each run gets a fresh cubin cache (ptxas's registers are cached by source, so a
run after another would find the others' builds), and each Ray pool first scores a small
other kernel so every worker has imported deplodock before the clock starts. Reported: the
variants, the wall seconds of the search, variants per second and the ratio to 1 worker,
the CPU seconds per variant of this process and of its children, and the wall seconds one
candidate's scoring took where it ran (a worker, or this process). With Ray, this process is
the search alone (a roll-out per leaf, and the legal choices of the nodes it descends into);
in process it is the search and the scoring, and its children are nvcc and ptxas. The
search's share bounds what more workers can gain on a machine of few cores; a candidate that
takes longer with 2 workers than with 1 says the workers did not get a core each.

The machine is shared: the load average before each run is printed with it, and a ratio
measured under others' load says less than one on a quiet machine.
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from deplodock.driver import lower_program, program_from_expression
from deplodock.files import write_atomic
from deplodock.tune.evaluate import ModelEvaluator
from deplodock.tune.parallel import RayPool, tune_program_parallel
from deplodock.tune.tuner import KernelResult, ProgramResult, TuneOptions, tune_program

#: A matmul and a softmax (two kernels), each candidate a few seconds to check and model.
DEFAULT_EXPRESSION = "torch.softmax(torch.randn(64, 256) @ torch.randn(256, 256), -1)"
#: The warm-up's program: small, and no kernel in common with the measured one.
WARM_UP = "F.silu(torch.randn(8, 64)) * 2.0"


@dataclass(frozen=True)
class Run:
    label: str
    workers: int
    variants: int
    seconds: float
    load: float  # the 1-minute load average just before
    driver_cpu_s: float  # CPU seconds of this process (the search) during the run
    children_cpu_s: float  # ... of its child processes (nvcc and ptxas when it scores itself)
    scoring_s: float  # wall seconds of every candidate's scoring, where it ran, summed
    round: int = 1  # `--rounds`: each round runs every configuration once, in turn

    @property
    def per_s(self) -> float:
        return self.variants / self.seconds


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.tune_throughput", description=__doc__)
    parser.add_argument("-c", "--expression", default=DEFAULT_EXPRESSION)
    parser.add_argument("--trials", type=int, default=8, help="variants per kernel (8)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path, help="also write the table here (markdown)")
    parser.add_argument(
        "--check-all", action="store_true", help="check every candidate, as `tune --check-all`"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="run every configuration N times, in turn (1)"
    )
    return parser.parse_args(argv)


def loop_module(expression: str):
    program = program_from_expression(expression)
    lower_program(program, "loop")
    return program.module


class ScoringSeconds:
    """A `TuneProgress` that sums what scoring each variant took (`Trial.seconds`)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def kernel_started(self, name: str, index: int, total: int, budget_s: float) -> None:
        pass

    def variant(self, name: str, trial: Any, best: Any) -> None:
        self.seconds += trial.seconds

    def kernel_finished(self, result: KernelResult) -> None:
        pass

    def pool(self, busy: int, workers: int, per_s: float) -> None:
        pass


def timed(label: str, workers: int, tune: Callable[[ScoringSeconds], ProgramResult]) -> Run:
    load, scoring = os.getloadavg()[0], ScoringSeconds()
    start, cpu, children = time.monotonic(), time.process_time(), _children_cpu()
    result = tune(scoring)
    seconds, cpu = time.monotonic() - start, time.process_time() - cpu
    variants = sum(k.record.trials for k in result.kernels)
    return Run(label, workers, variants, seconds, load, cpu, _children_cpu() - children,
               scoring.seconds)  # fmt: skip


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def fresh_cubin_cache() -> None:
    """A new `$XDG_CACHE_HOME` (set before a pool starts, its workers inherit it)."""
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="tune-throughput-")


def measure(args: argparse.Namespace) -> list[Run]:
    """Every configuration once per round, in turn, so a change of the machine's load
    during the run touches all of them alike."""
    module, warm = loop_module(args.expression), loop_module(WARM_UP)
    model = ModelEvaluator("h100")
    options = TuneOptions(
        max_trials=args.trials, patience=None, seed=0, kernel_budget_s=3600,
        check_all=args.check_all,
    )  # fmt: skip
    runs = []
    for round_ in range(1, args.rounds + 1):
        for workers in args.workers:
            fresh_cubin_cache()
            pool = RayPool(workers)
            try:
                warm_up = TuneOptions(max_trials=2 * workers, patience=None, kernel_budget_s=3600)
                tune_program_parallel(warm, model, warm_up, pool)
                run = timed(
                    "ray",
                    workers,
                    lambda heard, p=pool: tune_program_parallel(
                        module, model, options, p, None, heard
                    ),
                )
            finally:
                pool.close()
            runs.append(replace(run, round=round_))
            print(describe(runs[-1]), file=sys.stderr)
        fresh_cubin_cache()
        run = timed(
            "in process", 1, lambda heard: tune_program(module, model, options, None, heard)
        )
        runs.append(replace(run, round=round_))
        print(describe(runs[-1]), file=sys.stderr)
    return runs


def ratio(run: Run, runs: list[Run]) -> float:
    """`run`'s variants per second over those of 1 Ray worker in the same round."""
    base = next(
        (r for r in runs if r.round == run.round and r.label == "ray" and r.workers == 1),
        next(r for r in runs if r.round == run.round),
    )
    return run.per_s / base.per_s


def summary(runs: list[Run]) -> list[str]:
    """Per configuration, the median ratio to 1 worker over the rounds, and its range."""
    lines = []
    for label, workers in dict.fromkeys((r.label, r.workers) for r in runs):
        ratios = sorted(ratio(r, runs) for r in runs if (r.label, r.workers) == (label, workers))
        lines.append(
            f"- {label}, {workers} worker{'s' if workers > 1 else ''}: median "
            f"{statistics.median(ratios):.2f}x the variants/s of 1 Ray worker over "
            f"{len(ratios)} round{'s' if len(ratios) > 1 else ''} "
            f"(range {ratios[0]:.2f}x-{ratios[-1]:.2f}x)"
        )
    return lines


def describe(run: Run) -> str:
    return (f"{run.label} x{run.workers}: {run.variants} variants in {run.seconds:.1f} s "
            f"= {run.per_s:.3f}/s (load {run.load:.1f})")  # fmt: skip


def table(runs: list[Run]) -> list[str]:
    lines = [
        "| round | engine | workers | variants | seconds | variants/s | vs 1 Ray worker "
        "| load before | this process CPU s/variant | its children's | scoring wall s/variant |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        lines.append(
            f"| {run.round} | {run.label} | {run.workers} | {run.variants} | {run.seconds:.1f} | "
            f"{run.per_s:.3f} | {ratio(run, runs):.2f}x | {run.load:.1f} | "
            f"{run.driver_cpu_s / run.variants:.2f} | {run.children_cpu_s / run.variants:.2f} | "
            f"{run.scoring_s / run.variants:.2f} |"
        )
    return lines


def commit() -> str:
    """HEAD's short hash, "-dirty" with uncommitted changes to tracked files."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout

    try:
        head, dirty = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "-uno")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.strip() + ("-dirty" if dirty.strip() else "")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.trials < 1 or args.rounds < 1 or any(w < 1 for w in args.workers):
        print("tune_throughput: --trials, --rounds and --workers must be positive", file=sys.stderr)
        return 1
    runs = measure(args)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = "python -m bench.tune_throughput " + " ".join(argv or sys.argv[1:])
    text = "\n".join([
        "# Tuning throughput: variants per second by Ray worker count (modeled scores)",
        "",
        f"- date: {now}; commit: {commit()}; cores: {os.cpu_count()}",
        f"- command: `{command.strip()}`",
        f"- program: `{args.expression}`, {args.trials} trials per kernel, seed 0, "
        + ("every candidate checked" if args.check_all else "checked when it could win"),
        "",
        *table(runs),
        "",
        *summary(runs),
        "",
    ])  # fmt: skip
    print(text)
    if args.out is not None:
        write_atomic(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
