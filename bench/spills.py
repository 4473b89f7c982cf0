"""`python -m bench.spills`: does any default-schedule kernel spill registers?

Lowers every case of the kernel suite (and, with `--model`, whole models) to CUDA with the
default schedule, compiles each program with `nvcc -arch=sm_90 -cubin -Xptxas -v` (no GPU
needed) and reports the kernels ptxas gave spill stores or loads, with their registers.
Exit status 0 when nothing spills, 1 when something does, 2 without `nvcc`. A spill is a
schedule asking for more registers than a thread has (or ptxas trading one for occupancy);
the scheduling issue requires none.

    python -m bench.spills                       # 84 cases x fp32, bf16
    python -m bench.spills --dtype bf16 -k attention
    python -m bench.spills --no-cases --model Qwen/Qwen2.5-7B
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from bench.cases import DTYPES, add_case_patterns, all_cases

#: The architecture compiled for: the H100 the performance model describes.
ARCH = "sm_90"


@dataclass(frozen=True)
class Spill:
    """A kernel ptxas spilled: where it comes from and what ptxas reported."""

    source: str
    kernel: str
    registers: int
    spill_stores: int
    spill_loads: int

    def line(self) -> str:
        return (
            f"{self.source}: @{self.kernel} spills {self.spill_stores} bytes stored, "
            f"{self.spill_loads} loaded ({self.registers} registers)"
        )


def spills_of(program: object, source: str) -> tuple[int, list[Spill]]:
    """(kernels compiled, those that spill) for a program at any stage above `cuda`."""
    from deplodock.backend.cuda_source import kernels_text
    from deplodock.backend.nvcc import compile_cubin
    from deplodock.dialects import cuda
    from deplodock.driver import lower_program

    lower_program(program, "cuda")  # type: ignore[arg-type]
    kernels = [op for op in program.module.ops if isinstance(op, cuda.KernelOp)]  # type: ignore[attr-defined]
    report = compile_cubin(kernels_text(kernels), arch=ARCH).kernels
    found = [
        Spill(source, name, r.registers, r.spill_stores, r.spill_loads)
        for name, r in sorted(report.items())
        if r.spill_stores or r.spill_loads
    ]
    return len(report), found


def programs(args: argparse.Namespace) -> Iterator[tuple[str, object]]:
    """(label, program) for every case and model asked for, lowered lazily."""
    from deplodock.driver import program_from_expression, program_from_model

    dtypes = DTYPES if args.dtype == "both" else (args.dtype,)
    if args.with_cases:
        for dtype in dtypes:
            for case in all_cases():
                if args.cases and not any(p in case.name for p in args.cases):
                    continue
                yield f"{dtype} {case.name}", program_from_expression(case.expression(dtype))
    for model in args.model:
        for dtype in dtypes:
            yield f"{dtype} {model}", program_from_model(model, dtype=dtype)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=(*DTYPES, "both"), default="both")
    add_case_patterns(parser)
    parser.add_argument(
        "--model", action="append", default=[], metavar="ID",
        help="also a whole model (a shipped id or a local directory; repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--no-cases", dest="with_cases", action="store_false", help="skip the kernel-suite cases"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from deplodock.backend.nvcc import nvcc_available

    args = parse_args(argv)
    if not nvcc_available():
        print("bench.spills: nvcc is not on PATH: nothing was compiled", file=sys.stderr)
        return 2
    total, spilled, sources = 0, [], 0
    for label, program in programs(args):
        count, found = spills_of(program, label)
        total, sources = total + count, sources + 1
        spilled += found
        for spill in found:
            print(spill.line(), flush=True)
    print(f"{total} kernel(s) of {sources} program(s) compiled for {ARCH}: {len(spilled)} spill")
    return 1 if spilled else 0


if __name__ == "__main__":
    raise SystemExit(main())
