"""`deplodock`: compile a PyTorch expression or a `.mlir` file to any stage, or run it.

    deplodock compile -c "nn.RMSNorm(2048)(torch.randn(1,32,2048))" --ir tensor
    deplodock compile rmsnorm.mlir --ir cuda -o rmsnorm.cu
    deplodock run -c "nn.Softmax(dim=-1)(torch.randn(2,4,128))" --device cpu

Every failure a user can cause ends in one line on stderr and exit status 1;
`--traceback` shows the Python traceback instead.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from deplodock.cli.errors import report_error
from deplodock.passes.pipelines import STAGES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deplodock",
        description="A hackable ML compiler: PyTorch -> torch -> tensor -> loop -> tile -> "
        "kernel -> cuda, every stage printable and runnable on the CPU.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    compile_parser = commands.add_parser(
        "compile", help="lower a program and print it at a stage", description=compile_doc()
    )
    _add_source_arguments(compile_parser)
    compile_parser.add_argument(
        "--ir", choices=STAGES, default="cuda", help="the stage to print (default: cuda)"
    )
    compile_parser.add_argument("-o", "--output", type=Path, help="write to FILE, not stdout")
    compile_parser.set_defaults(handler=run_compile)

    run_parser = commands.add_parser(
        "run", help="execute a program and compare it with PyTorch", description=run_doc()
    )
    _add_source_arguments(run_parser)
    run_parser.add_argument(
        "--device", choices=("cpu",), default="cpu", help="cpu: interpret the lowered program"
    )
    run_parser.add_argument(
        "--ir",
        choices=STAGES,
        default="kernel",
        help="the stage to interpret (default: kernel, the fully lowered program)",
    )
    run_parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    run_parser.set_defaults(handler=run_run)
    return parser


def compile_doc() -> str:
    return (
        "Lower a PyTorch expression (-c) or a .mlir file to a stage and print it. "
        "At --ir cuda the output is one CUDA translation unit."
    )


def run_doc() -> str:
    return (
        "Lower a program, run it on random inputs and report its max relative error "
        "against PyTorch (-c) or against the file's own level (.mlir)."
    )


def _add_source_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("-c", "--code", metavar="EXPR", help="a PyTorch expression to compile")
    source.add_argument("file", nargs="?", type=Path, help="a .mlir file at any stage")
    parser.add_argument("-v", "--verbose", action="store_true", help="report time per stage")
    parser.add_argument("--traceback", action="store_true", help="show Python tracebacks")


def run_compile(args: argparse.Namespace) -> int:
    from deplodock.driver import load_program, lower_program, render

    program = load_program(args.code, args.file)
    timings = lower_program(program, args.ir)
    text = render(program.module, args.ir)
    if args.output:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    if args.verbose:
        _report_timings(timings)
    return 0


def run_run(args: argparse.Namespace) -> int:
    from deplodock.driver import load_program, lower_program, run_and_compare

    program = load_program(args.code, args.file, seed=args.seed)
    timings = lower_program(program, args.ir)
    report = run_and_compare(program, seed=args.seed)
    print(report.summary())
    if args.verbose:
        _report_timings(timings | {"run": report.seconds})
    return 0 if report.ok else 1


def _report_timings(timings: dict[str, float]) -> None:
    for stage, seconds in timings.items():
        print(f"  {stage:<7} {seconds * 1000:8.1f} ms", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start = time.perf_counter()
    try:
        status = args.handler(args)
    except Exception as error:
        if args.traceback:
            raise
        return report_error(error, tool="deplodock")
    if args.verbose:
        print(f"  total   {(time.perf_counter() - start) * 1000:8.1f} ms", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
