"""`deplodock`: compile a PyTorch expression or a `.mlir` file to any stage, or run it.

    deplodock compile -c "nn.RMSNorm(2048)(torch.randn(1,32,2048))" --ir tensor
    deplodock compile rmsnorm.mlir --ir cuda -o rmsnorm.cu
    deplodock run -c "nn.Softmax(dim=-1)(torch.randn(2,4,128))" --device cpu
    deplodock compile Qwen/Qwen2.5-7B --layers 1 --seq-len 128 --ir loop
    deplodock run ./tiny-qwen-dir --device cpu
    deplodock generate Qwen/Qwen2.5-7B --layers 2 --prompt-ids 1,2,3 --max-new-tokens 8

Every failure a user can cause ends in one line on stderr and exit status 1 (Ctrl-C: 130);
`--traceback` shows the Python traceback instead.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from deplodock.cli.errors import OneLineArgumentParser, run_command
from deplodock.cli.generate import add_generate_parser
from deplodock.cli.progress import block_progress_bar, heartbeat, phase_progress_bar, tell
from deplodock.cli.source import add_source_arguments, check_writable, is_model, load_source
from deplodock.cli.tune import (
    add_cache_parser,
    add_replay_arguments,
    add_tune_parser,
    note_replayed,
    replay_for,
)
from deplodock.cli.version import VersionAction
from deplodock.files import write_atomic
from deplodock.passes.diffs import PassDiffs
from deplodock.passes.pipelines import STAGES, is_below, stages_between
from deplodock.perf.devices import DEFAULT_DEVICE, known_devices

if TYPE_CHECKING:
    from deplodock.driver import Program
    from deplodock.explorer import Exploration
    from deplodock.tune.replay import Replay


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog="deplodock",
        description="A hackable ML compiler: PyTorch -> torch -> tensor -> loop -> tile -> "
        "kernel -> cuda, every stage printable and runnable on the CPU.",
    )
    parser.add_argument("--version", action=VersionAction, tool="deplodock")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    compile_parser = commands.add_parser(
        "compile", help="lower a program and print it at a stage", description=compile_doc()
    )
    add_source_arguments(compile_parser)
    compile_parser.add_argument(
        "--ir", choices=STAGES, default="cuda", help="the stage to print (default: cuda)"
    )
    compile_parser.add_argument("-o", "--output", type=Path, help="write to FILE, not stdout")
    compile_parser.add_argument(
        "--print-pass-diffs",
        nargs="?",
        const="all",
        metavar="PASS",
        help="print, instead of the program, a unified diff of what each pass changed (or "
        "only PASS), headed by the pass and its options (-v prints them to stderr)",
    )
    compile_parser.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write the pipeline explorer to FILE: one self-contained page with every "
        "stage beside the one before, each pass's diff, and each kernel from its loop nest "
        "to CUDA with ptxas's report and its modeled time (lowers to cuda whatever --ir says)",
    )
    compile_parser.set_defaults(handler=run_compile)

    run_parser = commands.add_parser(
        "run", help="execute a program and compare it with PyTorch", description=run_doc()
    )
    add_source_arguments(run_parser)
    run_parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        help="cpu: interpret the lowered program (the default); cuda: build it with nvcc and "
        "run it on the GPU (the default with --bench/--profile; needs the gpu extra: pycuda)",
    )
    run_parser.add_argument(
        "--ir",
        choices=STAGES,
        help="the stage to interpret (default: kernel, the fully lowered program, or the "
        "file's own stage when it is below)",
    )
    run_parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    run_parser.add_argument(
        "--memcheck",
        action="store_true",
        help="with --ir cuda: run the emitted C with checked buffers, so an index outside a "
        "global or __shared__ buffer, or a read of a shared element the block never wrote, is "
        "an error naming kernel, buffer, element, thread, block and source line (the "
        "interpreters of the other levels always check; a cuda-level file, which has no "
        "reference, always runs so)",
    )
    gpu = run_parser.add_argument_group("cuda (--device cuda)")
    gpu.add_argument(
        "--bench", action="store_true", help="time PyTorch eager, torch.compile and deplodock"
    )
    gpu.add_argument(
        "--profile", action="store_true", help="per-kernel time, GB/s, GFLOP/s, registers"
    )
    gpu.add_argument(
        "--model",
        metavar="DEVICE",
        help=f"with --profile: model the kernels on DEVICE ({known_devices()}) with the GPU-free "
        f"performance model instead of measuring; the default without a GPU is {DEFAULT_DEVICE}",
    )
    gpu.add_argument(
        "--timing",
        choices=("latency", "device"),  # benchmark.TIMINGS, not imported: compile stays light
        help="with --bench: latency times each call as the host issues it (the default); "
        "device keeps the GPU busy meanwhile, so only GPU time counts",
    )
    gpu.add_argument("--warmup", type=int, default=10, help="untimed runs first (default: 10)")
    gpu.add_argument("--iters", type=int, default=50, help="timed runs, median (default: 50)")
    add_replay_arguments(compile_parser)
    add_replay_arguments(run_parser)
    run_parser.set_defaults(handler=run_run)
    add_tune_parser(commands)
    add_cache_parser(commands)
    add_generate_parser(commands)
    return parser


def compile_doc() -> str:
    return (
        "Lower a PyTorch expression (-c), a .mlir file or a Hugging Face causal LM (a "
        "shipped model id or a local directory with config.json) to a stage and print it. "
        "At --ir cuda the output is one CUDA translation unit. For a model, a summary "
        "(kernel count, seconds per stage) goes to stderr."
    )


def run_doc() -> str:
    return (
        "Lower a program, run it on random inputs and report its max relative error "
        "against PyTorch (-c), against transformers (a model: the directory's safetensors, "
        "else random weights) or against the file's own level (.mlir). A file run at its "
        "own level has nothing to compare with: UNCHECKED (exit 1), cuda-level C under "
        "memcheck."
    )


#: What `compile` says of a program that launches no kernel (`-c "torch.randn(4)"`): valid,
#: but rarely what was meant.
NOTHING_COMPUTED = (
    "deplodock: note: the program computes nothing: no kernel launches, its outputs are "
    "its inputs (or views of them)"
)


def run_compile(args: argparse.Namespace) -> int:
    from deplodock.driver import compile_summary, computes_nothing, lower_program, render

    if args.output:
        check_writable(args.output)  # before a compile that may take a while
    if args.html:
        check_writable(args.html, "--html")
    diffs = (
        pass_diffs(args.print_pass_diffs, every_pass=args.verbose >= 2)
        if args.print_pass_diffs or args.verbose
        else None
    )
    phases = compile_phases(args.ir) if is_model(args) else []
    replay = replay_for(args)
    with phase_progress_bar(phases, quiet=args.quiet or not phases) as progress:
        program = load_source(args, cached=True, progress=progress)
        if args.html:
            exploration = write_explorer(args, program, diffs, progress, replay)
            timings = program.timings
        else:
            timings = lower_program(
                program, args.ir, callback=diffs, progress=progress, replay=replay
            )
    start = time.perf_counter()
    if args.print_pass_diffs:
        assert diffs is not None
        text = diffs.text
    elif args.html:
        text = exploration.stage(args.ir).text
    else:
        text = render(program.module, args.ir)
    if args.ir == "cuda":
        timings["print"] = time.perf_counter() - start
    if args.output:
        write_atomic(args.output, text)  # `files`: atomic, and a failed write is one line
    else:
        sys.stdout.write(text)
    note_replayed(replay)
    if program.name:  # a model: what was compiled, how many kernels, how long
        print(compile_summary(program), file=sys.stderr)
    elif computes_nothing(program):
        print(NOTHING_COMPUTED, file=sys.stderr)
    if args.verbose:
        if diffs is not None and not args.print_pass_diffs:
            sys.stderr.write(diffs.text)
        _report_timings(timings)
    return 0


def write_explorer(
    args: argparse.Namespace,
    program: Program,
    diffs: PassDiffs | None,
    progress: Callable[[str], None] | None = None,
    replay: Replay | None = None,
) -> Exploration:
    """`compile --html FILE`: lowers `program` to cuda as `compile` does (stamped, `replay`
    replayed), gathering the explorer's data, writes the page, and returns the exploration
    (its stages give what `--ir` prints, and `-o` writes)."""
    from deplodock.driver import check_lowerable
    from deplodock.explorer import explore, render_page

    check_lowerable(program, args.ir)  # explore lowers to cuda: --ir must still be reachable
    source = args.code if args.code is not None else _source_text(args)
    title = f"-c {args.code}" if args.code is not None else (program.name or args.source)
    exploration = explore(program, title, source, callback=diffs, progress=progress, replay=replay)
    write_atomic(args.html, render_page(exploration))
    return exploration


def _source_text(args: argparse.Namespace) -> str:
    """What the explorer shows as the source of a `.mlir` file or a model."""
    if is_model(args):
        layers = f" --layers {args.layers}" if args.layers is not None else ""
        return (
            f"deplodock compile {args.source}{layers} --seq-len {args.seq_len} --dtype {args.dtype}"
        )
    return Path(args.source).read_text(encoding="utf-8")


def compile_phases(stage: str) -> list[str]:
    """The phases of a model compile to `stage`, in order (what its progress bar counts):
    from the loop level on, the layers are segmented, lowered once each down to the kernel
    level and stitched (`stamp.segment_stages`), and the cuda stage lowers the whole."""
    from deplodock.stamp import segment_stages

    stages = stages_between(STAGES[0], stage)
    if "loop" not in stages:
        return ["model", "torch", *stages]
    apart = segment_stages(stages)
    return ["model", "torch", "segment", *apart, "stitch", *stages[len(apart) :]]


def pass_diffs(only: str | None, every_pass: bool = False) -> PassDiffs:
    """The between-passes callback of `--print-pass-diffs[=PASS]` and `-v` (`-vv`: the IR
    after every pass, `every_pass`)."""
    from deplodock.passes import DEPLODOCK_PASSES, unknown_pass

    if only not in (None, "all") and only not in DEPLODOCK_PASSES:
        raise ValueError(f"--print-pass-diffs: {unknown_pass(only, DEPLODOCK_PASSES)}")
    return PassDiffs(None if only in (None, "all") else only, every_pass=every_pass)


#: `run --memcheck` below or above the cuda level.
MEMCHECK_STAGE = "--memcheck goes with --ir cuda (the interpreters always check)"


def run_run(args: argparse.Namespace) -> int:
    from deplodock.driver import long_run_warning, lower_program, run_and_compare

    if args.model is not None and not args.profile:
        raise ValueError("--model DEVICE goes with --profile (a modeled profile)")
    if args.model is not None and args.bench:
        raise ValueError("--bench measures on a GPU; --model DEVICE models without one")
    if args.timing is not None and not args.bench:
        raise ValueError("--timing goes with --bench (how its calls are timed)")
    if args.memcheck and args.ir not in (None, "cuda"):
        raise ValueError(MEMCHECK_STAGE)
    if (
        args.profile
        and not args.bench
        and args.device != "cuda"
        and (args.model or not _cuda_usable())
    ):
        return run_profile_model(args)
    if args.device == "cuda" or (args.device is None and (args.bench or args.profile)):
        return run_run_cuda(args)
    if args.bench or args.profile:
        raise ValueError("--bench and --profile need --device cuda")
    program = load_source(args, seed=args.seed)
    stage = args.ir or (program.stage if is_below(program.stage, "kernel") else "kernel")
    if args.memcheck and stage != "cuda":
        raise ValueError(MEMCHECK_STAGE)
    replay = replay_for(args)
    timings = lower_program(program, stage, replay=replay)
    note_replayed(replay)
    if warning := long_run_warning(program):
        print(f"deplodock: warning: {warning}", file=sys.stderr, flush=True)
    with block_progress_bar(quiet=args.quiet) as progress:
        report = run_and_compare(program, seed=args.seed, progress=progress, memcheck=args.memcheck)
    print(report.summary())
    if args.verbose:
        _report_timings(timings | {"run": report.seconds})
    return 0 if report.ok else 1


def _cuda_usable() -> bool:
    from deplodock.backend.device import cuda_unavailable_reason

    return cuda_unavailable_reason() is None


#: `run --profile` where no GPU is usable: a note on stderr (stdout is the verdict and table).
NO_GPU_PROFILE = (
    "deplodock: note: no CUDA device here: --profile shows the performance model, and the "
    "program is checked on the CPU"
)


def run_profile_model(args: argparse.Namespace) -> int:
    """`run --profile` on the performance model (`--model`, or no GPU here). Without a GPU
    the program is still checked, on the CPU, so the run gives the verdict a GPU run gives
    (OK or MISMATCH) above the table; `--model DEVICE` asks only for the model."""
    from deplodock.driver import long_run_warning, run_and_compare
    from deplodock.driver.model import profile_on_model

    if not args.model:
        print(NO_GPU_PROFILE, file=sys.stderr)
    program = load_source(args, seed=args.seed, progress=tell)
    replay = replay_for(args)
    table = profile_on_model(program, args.model or DEFAULT_DEVICE, replay=replay)
    note_replayed(replay)
    status = 0
    if not args.model:
        if warning := long_run_warning(program):
            print(f"deplodock: warning: {warning}", file=sys.stderr, flush=True)
        tell("checking on the CPU")
        with block_progress_bar(quiet=args.quiet) as progress:
            report = run_and_compare(program, seed=args.seed, progress=progress)
        print(report.summary())
        status = 0 if report.ok else 1
    print(table)
    if args.verbose:
        _report_timings(program.timings)
    return status


def run_run_cuda(args: argparse.Namespace) -> int:
    """`run --device cuda`: the whole program is built for the GPU (`--ir` does not apply)."""
    from deplodock.backend.device import require_cuda
    from deplodock.driver.cuda import run_on_cuda

    require_cuda()  # fail fast, before lowering: "no CUDA device: <why>"
    program = load_source(args, seed=args.seed)
    status = run_on_cuda(
        program,
        args.seed,
        args.bench,
        args.profile,
        args.warmup,
        args.iters,
        timing=args.timing or "latency",
        replay=replay_for(args),
    )
    if args.verbose:
        _report_timings(program.timings)
    return status


def _report_timings(timings: dict[str, float]) -> None:
    for stage, seconds in timings.items():
        print(f"  {stage:<7} {seconds * 1000:8.1f} ms", file=sys.stderr)


def _keeping_error(args: argparse.Namespace, raised: list[Exception]) -> int:
    """Runs the subcommand, noting the error it raises before `run_command` reports it."""
    try:
        return args.handler(args)
    except Exception as error:
        raised.append(error)
        raise


def _print_details(raised: Sequence[Exception]) -> None:
    """`-v`: below an error's one line, the lines that say more (`WeightError.details`:
    every missing tensor); without `-v` the one line is all."""
    for error in raised:
        for line in getattr(error, "details", ()):
            print(line, file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start = time.perf_counter()
    source = "-c" if args.code is not None else args.source
    raised: list[Exception] = []
    command = partial(_keeping_error, args, raised)
    what = f"{args.command} {source}" if source else args.command
    with heartbeat(what, quiet=getattr(args, "quiet", False)):  # stderr a pipe or a log
        status = run_command(command, "deplodock", args.traceback, source)
    if args.verbose:
        _print_details(raised)
        print(f"  total   {(time.perf_counter() - start) * 1000:8.1f} ms", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
