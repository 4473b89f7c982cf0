"""`python -m deplodock.fuzz`: differential fuzzing of the whole compiler against PyTorch.

    python -m deplodock.fuzz --n 200 --seed 0                 # what CI runs (tests/fuzz)
    python -m deplodock.fuzz --n 10000 --seed 1 --out fuzz/   # the long run; reproducers in fuzz/

Program `i` is `generate(seed + i)`; each is checked at every level (`check.LEVELS`), the
cuda level (a C++ compile per program) for every `--cuda-every`-th program. A failure is
shrunk and saved as a reproducer under `--out`. The summary line gives the counts and the
time; the exit status is 1 when any program was miscompiled or crashed the compiler.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from deplodock.files import write_atomic
from deplodock.fuzz.check import LEVELS, Outcome, check, save_reproducer, shrink
from deplodock.fuzz.generate import generate


def levels_for(index: int, cuda_every: int) -> tuple[str, ...]:
    """Every level, the cuda one only for every `cuda_every`-th program (0: never)."""
    with_cuda = cuda_every > 0 and index % cuda_every == 0
    return LEVELS if with_cuda else tuple(level for level in LEVELS if level != "cuda")


def fuzz(
    n: int,
    seed: int,
    cuda_every: int = 10,
    out: Path | None = None,
    echo: Callable[[str], object] = print,
) -> dict[str, object]:
    """Checks `n` programs; returns the summary (counts, failures, seconds)."""
    start = time.perf_counter()
    counts: Counter[str] = Counter()
    failures = []
    for index in range(n):
        program = generate(seed + index)
        levels = levels_for(index, cuda_every)
        outcome = check(program, levels)
        counts[outcome.status] += 1
        if outcome.failed:
            small = shrink(program, lambda p, lv=levels: check(p, lv).failed)
            final = check(small, levels)
            saved = save_reproducer(small, final, out) if out else None
            failures.append(
                {"seed": program.seed, "outcome": final.line(), "reproducer": str(saved or "")}
            )
            echo(f"program {program.seed}: {outcome.line()} (shrunk: {final.line()})")
    seconds = time.perf_counter() - start
    summary = {
        "programs": n,
        "seed": seed,
        "cuda_every": cuda_every,
        "counts": dict(counts),
        "failures": failures,
        "seconds": round(seconds, 1),
    }
    echo(
        f"{n} programs (seed {seed}): "
        + ", ".join(f"{counts[s]} {s}" for s in ("ok", "mismatch", "crash", "unsupported"))
        + f" in {seconds:.0f} s"
    )
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deplodock.fuzz", description=__doc__)
    parser.add_argument("--n", type=int, default=200, help="programs to check (default: 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first program")
    parser.add_argument(
        "--cuda-every", type=int, default=10, help="run the cuda level every N programs"
    )
    parser.add_argument("--out", type=Path, help="directory for reproducers and summary.json")
    args = parser.parse_args(argv)
    summary = fuzz(args.n, args.seed, args.cuda_every, args.out)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        write_atomic(args.out / "summary.json", json.dumps(summary, indent=1) + "\n")
    counts = summary["counts"]
    assert isinstance(counts, dict)
    return 1 if counts.get("mismatch") or counts.get("crash") else 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["Outcome", "fuzz", "main"]
