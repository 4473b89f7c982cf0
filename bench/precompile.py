"""`python -m bench.precompile`: build the suite's cubins into the cache, in parallel, no GPU.

    python -m bench.precompile --dtype fp32 --dtype bf16 -k qwen2.5-7b/s128 --jobs 16

A timed GPU session is short and its machine is lent by the minute, yet every case of
`bench.kernels` first spends seconds in the compiler's passes and in nvcc. Those steps need
no GPU: this command takes them ahead, one worker process per case, and leaves the cubins
in the content-addressed cache (`deplodock/backend/build.py`, `$XDG_CACHE_HOME`) where
`bench.kernels` finds them. A cubin built here is the one a GPU run would build: the key
covers the source, the architecture, the flags and nvcc's version, so a machine whose nvcc
differs simply misses the cache and builds its own.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

from bench.cases import DTYPES, add_case_patterns, find_cases


def build_case(expression: str, capability: tuple[int, int]) -> tuple[bool, str, float]:
    """Lower one case to cuda and build its cubin (worker process): (cached, note, seconds)."""
    from deplodock.backend.build import build_module, kernel_ops
    from deplodock.driver import lower_program, program_from_expression

    start = time.perf_counter()
    program = program_from_expression(expression)
    lower_program(program, "cuda")
    if not kernel_ops(program.module):
        return True, "no kernel", time.perf_counter() - start
    build = build_module(program.module, capability)
    return (
        build.cached,
        f"{len(build.kernels)} kernel(s), {build.arch}",
        time.perf_counter() - start,
    )


def parse_capability(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise argparse.ArgumentTypeError(f"expected MAJOR.MINOR (like 9.0), got {text!r}")
    return int(major), int(minor)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.precompile", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument(
        "--dtype", action="append", choices=DTYPES, help="repeatable (default: fp32)"
    )
    add_case_patterns(parser)
    parser.add_argument(
        "--capability",
        type=parse_capability,
        default=(9, 0),
        help="the GPU's compute capability (default: 9.0, Hopper)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default: 1)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        cases = find_cases(args.cases)
    except ValueError as error:
        print(f"bench.precompile: error: {error}", file=sys.stderr)
        return 1
    work = [(c.name, d, c.expression(d)) for d in args.dtype or ["fp32"] for c in cases]
    failures = 0
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(build_case, expr, args.capability) for _, _, expr in work]
        for (name, dtype, _), future in zip(work, futures, strict=True):
            try:
                cached, note, seconds = future.result()
            except Exception as error:  # one bad case must not hide the others
                failures += 1
                print(f"{name} {dtype}: error: {str(error).splitlines()[0]}")
                continue
            source = "cache" if cached else "built"
            print(f"{name} {dtype}: {source}, {note}, {seconds:.1f} s")
    print(f"{len(work) - failures} of {len(work)} programs built")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
