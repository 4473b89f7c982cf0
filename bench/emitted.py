"""`python -m bench.emitted DIR`: write the CUDA the compiler emits for the suite and the models.

    python -m bench.emitted /tmp/before                  # on main
    python -m bench.emitted /tmp/after --jobs 2          # with the change
    diff -r /tmp/before /tmp/after && echo identical

A refactor that claims "no change in behaviour" proves it here: the 84 cases in fp32 and
bf16 (168 programs) and whole decoder layers of Qwen2.5-7B and TinyLlama (`--models`, on by
default) are lowered to one CUDA translation unit each, written as `<label>.cu`, so two
trees compare with `diff -r`. Nothing is built or run; the tune cache is not read (the
schedules are the passes' own). `--long` adds one layer of each model at 2048 tokens, the
lengths past which nothing compiled before (issue 40).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench.cases import DTYPES, all_cases

#: (model id, layers, tokens) of the whole-model programs.
MODELS: tuple[tuple[str, int, int], ...] = (
    ("Qwen/Qwen2.5-7B", 2, 128),
    ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", 1, 512),
)
LONG_MODELS: tuple[tuple[str, int, int], ...] = (
    ("Qwen/Qwen2.5-7B", 1, 2048),
    ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", 1, 2048),
)

#: One program: (file label, expression or None, model or None, layers, tokens, dtype).
Job = tuple[str, str | None, str | None, int, int, str]


def jobs(models: bool, long: bool) -> Iterator[Job]:
    for dtype in DTYPES:
        for case in all_cases():
            label = f"{dtype}-{case.name.replace('/', '-')}"
            yield label, case.expression(dtype), None, 0, 0, dtype
    chosen = (MODELS if models else ()) + (LONG_MODELS if long else ())
    for model, layers, tokens in chosen:
        for dtype in DTYPES:
            label = re.sub(r"[^\w.-]+", "-", f"{dtype}-{model}-l{layers}-s{tokens}")
            yield label, None, model, layers, tokens, dtype


def emit(job: Job) -> tuple[str, str, float]:
    """Lowers one program to CUDA (worker process): (label, source, seconds)."""
    from deplodock.driver import lower_program, program_from_expression, program_from_model, render
    from deplodock.passes.pipelines import STAGES

    label, expression, model, layers, tokens, dtype = job
    start = time.perf_counter()
    if expression is not None:
        program = program_from_expression(expression)
    else:
        program = program_from_model(model, layers=layers, seq_len=tokens, dtype=dtype)
    lower_program(program, STAGES[-1])
    return label, render(program.module, STAGES[-1]), time.perf_counter() - start


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="where to write <label>.cu")
    parser.add_argument("--no-models", dest="models", action="store_false")
    parser.add_argument("--long", action="store_true", help="also 2048-token model layers")
    parser.add_argument("-k", dest="pattern", help="only labels containing this text")
    parser.add_argument("--jobs", type=int, default=2)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.directory.mkdir(parents=True, exist_ok=True)
    chosen = [j for j in jobs(args.models, args.long) if not args.pattern or args.pattern in j[0]]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for label, source, seconds in pool.map(emit, chosen):
            (args.directory / f"{label}.cu").write_text(source)
            print(f"{label}: {len(source)} chars, {seconds:.1f} s", file=sys.stderr)
    print(f"{len(chosen)} programs written to {args.directory}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
