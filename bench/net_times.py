"""`python -m bench.net_times`: how long the CPU takes to check each whole net (issue 38).

    python -m bench.net_times                         # all nets, the default CPU path
    python -m bench.net_times --stages kernel cuda    # also the emitted C run on the CPU
    python -m bench.net_times resnet18 vit --timeout 300

Each net of `tests/nets/zoo.py` runs as `tests/nets/test_nets.py` checks it (random
weights, `deplodock.compile(..., device="cpu")`, one call, against eager float64), in a
fresh process per (net, stage) so one that hangs costs only its `--timeout`. Reported per
net: the seconds to capture and lower (`compile`), the seconds of the call (`run`) and the
relative error. `kernel` is what `device="cpu"` runs by default: the kernel-level program
interpreted in numpy. `cuda` lowers one stage further and runs the emitted CUDA C compiled
with g++ against `cpu_simt.h` (cached by content, so a second run skips g++). The table is
written to `--out` (default `bench/results/net-times-cpu.md`) with the machine, date,
command and commit.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "net-times-cpu.md"


def run_one(name: str, stage: str) -> dict[str, object]:
    """Check one net in this process; the result as JSON-ready fields."""
    from tests.nets.zoo import NETS, check

    net = next(n for n in NETS if n.name == name)
    result = check(net, stage=stage)
    return {"error": result.error, "compile_s": result.compile_s, "run_s": result.run_s}


def measure(name: str, stage: str, timeout: float) -> dict[str, object]:
    """Check one net in a child process, so a hang or a crash is one row, not the run."""
    start = time.perf_counter()
    command = [sys.executable, "-W", "ignore", "-m", "bench.net_times", "--one", name, stage]
    try:
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {"failure": f"no result within {timeout:.0f} s"}
    wall = time.perf_counter() - start
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"failure": last[:160], "wall_s": wall}
    return json.loads(lines[-1]) | {"wall_s": wall}


def commit() -> str:
    """The checked-out commit, with `+dirty` when the tree has changes."""
    from bench.model_calibration import git_commit

    head = git_commit()
    dirty = subprocess.run(
        ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return head + ("+dirty" if dirty else "")


def _simt_cache() -> Path:
    """Where the emitted C's shared objects are cached (`cpu_runner.cache_dir`)."""
    from deplodock.backend.cpu_runner import cache_dir

    return cache_dir()


def _cache_empty() -> bool:
    """Whether no kernel's C is built yet: the `cuda` rows then include every g++ run."""
    return not any(_simt_cache().glob("*.so"))


def row(name: str, stage: str, r: dict[str, object]) -> str:
    if "failure" in r:
        return f"| {name} | {stage} | | | | {r['failure']} |"
    return (
        f"| {name} | {stage} | {r['compile_s']:.1f} | {r['run_s']:.2f} | "
        f"{r['wall_s']:.1f} | {r['error']:.1e} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("nets", nargs="*", help="net names (default: all of tests/nets/zoo.py)")
    parser.add_argument("--stages", nargs="+", default=["kernel"], choices=["kernel", "cuda"])
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per net")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--one", nargs=2, metavar=("NET", "STAGE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(*args.one)))
        return 0
    from tests.nets.zoo import NETS

    names = args.nets or [n.name for n in NETS]
    lines = [
        "# Whole nets: CPU check times",
        "",
        f"- machine: {platform.node()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores (shared with other work while measured)",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- command: `python -m bench.net_times {' '.join(argv or sys.argv[1:])}`".rstrip(),
        f"- commit: {commit()}",
        f"- load average at the start: {os.getloadavg()[0]:.1f}",
        f"- C build cache: `{_simt_cache()}`"
        f" ({'empty' if _cache_empty() else 'warm'} at the start)",
        "",
        "`compile`: capture and lowering (s); `run`: one call (s); `wall`: the child process",
        "(imports, reference, g++ when not cached); `error`: max relative error vs float64.",
        '`kernel` is `device="cpu"`\'s default (the kernel level, interpreted); `cuda` runs',
        "the emitted CUDA C on the CPU (g++ and `cpu_simt.h`).",
        "",
        "| net | stage | compile (s) | run (s) | wall (s) | error |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        for stage in args.stages:
            result = measure(name, stage, args.timeout)
            lines.append(row(name, stage, result))
            print(lines[-1], flush=True)
    lines += ["", f"- load average at the end: {os.getloadavg()[0]:.1f}"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
