"""`deplodock tune` and `deplodock cache`: search schedules, and manage what was found.

    deplodock tune -c "nn.RMSNorm(2048)(torch.randn(1,32,2048))" -v
    deplodock tune Qwen/Qwen2.5-7B --seq-len 512 --budget-s 600
    deplodock tune -c "..." --print-schedule > best.txt
    deplodock cache ls
    deplodock cache clear

`tune` scores candidates on the performance model of a device of `perf/devices.py`
(`--model DEVICE`, `DEFAULT_DEVICE` when none is named: no GPU needed, every time it prints
is labelled modeled) or on the GPU (`--device cuda`: measured). Winners go to the tune
cache, which `compile` and `run` replay.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deplodock.cli.progress import tell
from deplodock.cli.source import add_source_arguments, check_writable, load_source
from deplodock.dialects.queries import name_width
from deplodock.perf.devices import DEFAULT_DEVICE, known_devices

if TYPE_CHECKING:
    from deplodock.tune.cache import TuneRecord
    from deplodock.tune.evaluate import Evaluator
    from deplodock.tune.tuner import KernelResult, ProgramResult


def add_tune_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "tune",
        help="search each kernel's schedule (SP-MCTS) and cache the winners",
        description="Search the schedule knobs of every distinct kernel of a program with "
        "single-player MCTS, each candidate checked against the loop level in the CPU "
        "interpreter and scored by the performance model (or a GPU). Winners are cached "
        "and replayed by compile and run.",
    )
    add_source_arguments(parser)
    score = parser.add_argument_group("scoring")
    score.add_argument(
        "--model",
        metavar="DEVICE",
        help=f"score on the performance model of DEVICE ({known_devices()}; default "
        f"{DEFAULT_DEVICE}): times are modeled",
    )
    score.add_argument(
        "--device",
        choices=("cuda",),
        help="cuda: compile each candidate with the real flags and time it on the GPU "
        "(needs the gpu extra); times are measured",
    )
    search = parser.add_argument_group("search")
    search.add_argument("--budget-s", type=float, help="seconds for the whole program")
    search.add_argument(
        "--kernel-budget-s", type=float, help="at most this per kernel (default 60)"
    )
    search.add_argument(
        "--patience", type=int, help="stop a kernel after N variants without a "
        "better one (40)"
    )  # fmt: skip
    search.add_argument("--trials", type=int, help="stop a kernel after N variants")
    search.add_argument("--seed", type=int, default=0, help="tie-breaking and inputs (0)")
    search.add_argument(
        "--exploration", type=float, help="the UCB exploration constant (default 0.1)"
    )
    search.add_argument(
        "--no-check",
        action="store_true",
        help="score candidates without checking them against the loop level first",
    )
    search.add_argument(
        "--check-all",
        action="store_true",
        help="check every candidate, even those the model puts behind the heuristic's "
        "schedule (by default only a candidate that could win is checked)",
    )
    cores = os.cpu_count() or 1
    search.add_argument(
        "--workers",
        type=int,
        nargs="?",
        const=cores,
        metavar="N",
        help=f"check and score candidates on N local Ray workers (alone: this machine's {cores} "
        "cores), several kernels at once; needs the distributed extra",
    )
    search.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="join the Ray cluster at ADDR and use its CPUs as the workers",
    )
    output = parser.add_argument_group("output")
    output.add_argument(
        "--print-schedule",
        action="store_true",
        help="print the winners as a pass pipeline (deplodock-opt FILE.loop.mlir -p ...)",
    )
    output.add_argument(
        "--report", type=Path, metavar="FILE", help="chart best-so-far vs trials (.html, .png)"
    )
    _add_cache_arguments(parser)
    parser.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the tune cache"
    )
    parser.add_argument(
        "--retune",
        action="store_true",
        help="search every kernel afresh, replacing what the cache holds (a search the "
        "cache holds cut short is continued anyway by a run that may spend more)",
    )
    parser.set_defaults(handler=run_tune)


def add_cache_parser(commands: Any) -> None:
    parser = commands.add_parser("cache", help="list or clear the tune cache")
    parser.add_argument("action", choices=("ls", "clear"), help="ls: list; clear: empty it")
    _add_cache_arguments(parser)
    parser.add_argument("-v", "--verbose", action="count", default=0, help=argparse.SUPPRESS)
    parser.add_argument("--traceback", action="store_true", help="show Python tracebacks")
    parser.set_defaults(handler=run_cache, code=None, source=None)


def _add_cache_arguments(parser: Any) -> None:
    parser.add_argument(
        "--cache-db", type=Path, metavar="FILE", help="the tune cache (default: "
        "$XDG_CACHE_HOME/deplodock/tune.db)"
    )  # fmt: skip


def add_replay_arguments(parser: Any) -> None:
    """compile and run: which tuned schedules to replay."""
    group = parser.add_argument_group("tuned schedules")
    group.add_argument(
        "--no-tuned", action="store_true", help="ignore the tune cache: heuristic schedules"
    )
    group.add_argument(
        "--tuned-for",
        metavar="DEVICE",
        default=DEFAULT_DEVICE,
        help=f"replay the schedules tuned on this device's model ({known_devices()}; default "
        f"{DEFAULT_DEVICE}), or 'cuda': those measured on this machine's GPU (tune --device cuda)",
    )
    _add_cache_arguments(group)


def replay_for(args: argparse.Namespace) -> Any:
    """The `Replay` of compile/run (None with --no-tuned)."""
    if args.no_tuned:
        return None
    from deplodock.tune.replay import measured_replay, model_replay

    if args.tuned_for == "cuda":
        return measured_replay(args.cache_db)
    return model_replay(args.tuned_for, args.cache_db)


def note_replayed(replay: Any) -> None:
    if replay is not None and replay.replayed:
        names = ", ".join(sorted(set(replay.replayed)))
        print(
            f"deplodock: note: tuned schedules replayed from {replay.path}: {names}",
            file=sys.stderr,
        )


# --- tune ---------------------------------------------------------------------------------


def make_evaluator(args: argparse.Namespace) -> Evaluator:
    if args.device == "cuda":
        if args.model is not None:
            raise ValueError("--model DEVICE scores on the model; --device cuda on the GPU")
        from deplodock.tune.measure import MeasuredEvaluator

        return MeasuredEvaluator()
    from deplodock.tune.evaluate import ModelEvaluator

    return ModelEvaluator(args.model or DEFAULT_DEVICE)


def make_pool(args: argparse.Namespace) -> Any:
    """The Ray pool of `--workers`/`--ray-address`; None: score in this process, as a
    single worker does."""
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be positive, got {args.workers}")
    if args.ray_address is None and (args.workers is None or args.workers == 1):
        return None
    from deplodock.tune.parallel import ray_pool

    if args.device == "cuda":  # checked by the workers, timed by one actor per GPU
        from deplodock.tune.measure import MeasuredEvaluator

        return ray_pool(args.workers, args.ray_address, MeasuredEvaluator)
    return ray_pool(args.workers, args.ray_address)


def tune_options(args: argparse.Namespace) -> Any:
    """The search options of the command line; those not given keep `TuneOptions`'
    defaults (their one home)."""
    from deplodock.tune.tuner import TuneOptions

    given = {
        "budget_s": ("--budget-s", args.budget_s),
        "kernel_budget_s": ("--kernel-budget-s", args.kernel_budget_s),
        "patience": ("--patience", args.patience),
        "max_trials": ("--trials", args.trials),
    }
    for flag, value in given.values():
        if value is not None and value <= 0:
            raise ValueError(f"{flag} must be positive, got {value}")
    chosen = {name: value for name, (_, value) in given.items() if value is not None}
    if args.exploration is not None:
        chosen["exploration"] = args.exploration
    return TuneOptions(
        seed=args.seed,
        check=not args.no_check,
        check_all=args.check_all,
        retune=args.retune,
        **chosen,
    )


def run_tune(args: argparse.Namespace) -> int:
    from deplodock.driver import lower_program
    from deplodock.tune.cache import TuneCache
    from deplodock.tune.tuner import tune_program

    if args.report:
        from deplodock.tune.report import check_report_path

        check_report_path(args.report)
        check_writable(args.report, "--report")
    options = tune_options(args)
    cache = None if args.no_cache else TuneCache(args.cache_db)
    evaluator = pool = None
    try:
        evaluator = make_evaluator(args)  # no GPU for --device cuda: one line, before Ray
        pool = make_pool(args)
        program = load_source(args, seed=args.seed, cached=True, progress=tell)
        lower_program(program, "loop", progress=tell)
        display = TuneDisplay(verbose=args.verbose > 0, quiet=args.quiet)
        with display:
            if pool is None:
                result = tune_program(program.module, evaluator, options, cache, display)
            else:
                from deplodock.tune.parallel import tune_program_parallel

                result = tune_program_parallel(
                    program.module, evaluator, options, pool, cache, display
                )
    finally:
        if evaluator is not None:
            evaluator.close()
        if pool is not None:
            pool.close()
    records = [k.record for k in result.kernels]
    if args.verbose:
        from deplodock.tune.report import variants_table

        for kernel in result.kernels:
            if not kernel.cached:
                print(variants_table(kernel.record), file=sys.stderr)
    if args.report:
        from deplodock.tune.report import write_report

        write_report(records, args.report, f"deplodock tune: {args.code or args.source}")
    if args.print_schedule:
        from deplodock.passes.tile.set_schedule import schedule_pipeline

        print(schedule_pipeline(result.schedules()))
    else:
        print(summary_table(result))
    if cache is not None and not args.quiet:
        print(f"tune: {result.seconds:.1f} s; results in {cache.path}", file=sys.stderr)
    starved = [k.name for k in result.kernels if k.default_only]
    if starved and not args.quiet:
        print(_starved_note(starved), file=sys.stderr)
    if result.interrupted:
        from deplodock.cli.errors import INTERRUPTED

        print("deplodock: tune interrupted; what was found is kept", file=sys.stderr)
        return INTERRUPTED
    return 0


def _starved_note(names: list[str]) -> str:
    """The note of a run that left kernels with only their heuristic schedule evaluated."""
    listed = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (
        f"deplodock: note: only the default schedule was evaluated for {len(names)} "
        f"kernel(s) ({listed}): nothing was tuned; a run that may spend more (a larger "
        "--budget-s, --kernel-budget-s or --trials) continues their search"
    )


def _source(kernel: KernelResult) -> str:
    """The summary's `source` column: where the row comes from, and how far it searched."""
    record = kernel.record
    if kernel.cached:
        return f"cache ({record.stopped})" if record.cut_short else "cache"
    how = "default only" if kernel.default_only else "searched"
    more = f", continued from {kernel.continued}" if kernel.continued else ""
    return f"{how} ({kernel.stopped}{more})"


def summary_table(result: ProgramResult) -> str:
    """One row per distinct kernel, and the program's total (launches counted)."""
    kinds = {_kind(k.record) for k in result.kernels}
    kind = kinds.pop() if len(kinds) == 1 else "modeled/measured"
    target = result.kernels[0].record.key.target if result.kernels else ""
    width = name_width(k.name for k in result.kernels)
    launches = sum(k.launches for k in result.kernels)
    lines = [
        f"tune: {len(result.kernels)} kernel(s), {launches} launch(es), times {kind} ({target})",
        f"  {'kernel':<{width}} {'n':>3} {'default us':>11} {'tuned us':>10} {'speedup':>8} "
        f"{'variants':>8}  source",
    ]
    default_total = tuned_total = 0.0
    for kernel in result.kernels:
        record = kernel.record
        default = record.default_us if record.default_us is not None else float("nan")
        default_total += default * kernel.launches
        tuned_total += record.best_us * kernel.launches
        speedup = f"{kernel.speedup:.2f}x" if kernel.speedup else "-"
        source = _source(kernel)
        lines.append(
            f"  {kernel.name:<{width}} {kernel.launches:>3} {default:>11.2f} "
            f"{record.best_us:>10.2f} {speedup:>8} {record.trials:>8}  {source}"
        )
    if result.kernels:
        gain = default_total / tuned_total if tuned_total else float("nan")
        lines.append(
            f"  {'total':<{width}} {'':>3} {default_total:>11.2f} {tuned_total:>10.2f} "
            f"{gain:>7.2f}x"
        )
    return "\n".join(lines)


def _kind(record: TuneRecord) -> str:
    return "measured" if record.key.cost == "measured" else "modeled"


class TuneDisplay:
    """Live progress on stderr (rich): the kernel, variants tried, the latest and the best
    time and the best knobs. `-v` on a terminal draws it; otherwise one line per kernel when
    it is done (nothing with `-q`), printed whole: rich would wrap it at 80 columns in a
    file. Where stderr is no terminal the heartbeat (`progress.heartbeat`) says which
    kernel is being searched."""

    def __init__(self, verbose: bool, quiet: bool):
        self.verbose, self.quiet = verbose, quiet
        self.live: Any = None
        self.kernel = ""
        self.header = ""
        self.started = 0.0
        self.workers = ""  # a parallel run's pool: busy of all, variants per second
        self.bests: dict[str, str] = {}  # a parallel run's best so far, per kernel searched

    def __enter__(self) -> TuneDisplay:
        if self.verbose and sys.stderr.isatty():
            from rich.console import Console
            from rich.live import Live

            self.live = Live(console=Console(stderr=True), refresh_per_second=4, transient=True)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def kernel_started(self, name: str, index: int, total: int, budget_s: float) -> None:
        self.kernel, self.started = name, time.monotonic()
        self.header = f"[{index + 1}/{total}] {name} (budget {budget_s:.0f} s)"
        tell(f"searching {self.header}")
        if self.live is not None:
            self.live.update(self.header)

    def pool(self, busy: int, workers: int, per_s: float) -> None:
        self.workers = f"{busy}/{workers} busy, {per_s:.2f} variant(s)/s"
        tell(f"searching {self.header}; workers {self.workers}")

    def variant(self, name: str, trial: Any, best: Any) -> None:
        if best.score.time_us:
            self.bests[name] = f"{best.score.time_us:.2f} us (trial {best.index})"
        tell(f"searching {self.header}, {trial.index} variant(s)")
        if self.live is None:
            return
        from rich.table import Table

        latest = trial.score
        table = Table.grid(padding=(0, 2))
        table.add_row("kernel", self.header)
        if self.workers:
            table.add_row("workers", self.workers)
            for kernel, text in self.bests.items():
                table.add_row(f"best of {kernel}", text)
        of = f" ({name})" if self.workers else ""  # kernels are searched together
        table.add_row(f"variants{of}", f"{trial.index} in {time.monotonic() - self.started:.0f} s")
        table.add_row(
            f"latest{of}",
            f"{latest.time_us:.2f} us" if latest.time_us else f"{latest.status}: {latest.detail}",
        )
        if best.score.time_us:
            table.add_row(f"best{of}", f"{best.score.time_us:.2f} us (trial {best.index})")
            table.add_row(f"knobs{of}", best.leaf.knobs.format())
        self.live.update(table)

    def kernel_finished(self, result: KernelResult) -> None:
        if self.quiet:
            return
        record = result.record
        kind = _kind(record)
        speedup = f" ({result.speedup:.2f}x)" if result.speedup else ""
        default = f"{record.default_us:.2f} -> " if record.default_us else ""
        how = _how(result)
        line = f"tune: {result.name}: {default}{record.best_us:.2f} us {kind}{speedup}, {how}"
        if self.live is not None:
            self.live.console.print(line)
        else:
            print(line, file=sys.stderr)


def _how(result: KernelResult) -> str:
    """How a kernel's result came: from the cache (saying whether that search was cut
    short), or searched (continued, or only the default evaluated)."""
    record = result.record
    if result.cached:
        if record.cut_short:
            return (
                f"from the cache ({record.trials} variant(s), cut short: {record.stopped}; "
                "a larger budget or --retune searches on)"
            )
        return "from the cache"
    how = f"{record.trials} variant(s) in {record.seconds:.1f} s, stopped: {result.stopped}"
    if result.continued:
        how += f" (continued from {result.continued})"
    if result.default_only:
        how += "; only the default schedule was evaluated"
    return how


# --- cache ---------------------------------------------------------------------------------


def run_cache(args: argparse.Namespace) -> int:
    from deplodock.tune.cache import TuneCache

    path = args.cache_db or TuneCache.default_path()
    if args.action == "clear":
        if not path.exists():
            print(f"cache: {path}: nothing to clear")
            return 0
        removed = TuneCache(path).clear()
        print(f"cache: removed {removed} record(s) from {path}")
        return 0
    records = TuneCache(path).records() if path.exists() else []
    print(f"cache: {path}: {len(records)} record(s)")
    width = name_width(record.kernel_name for record in records)
    if records:
        print(
            f"  {'kernel':<{width}} {'hash':<12} {'target':<14} {'best us':>9} {'speedup':>8} "
            f"{'trials':>6}  {'cost':<22} {'created':<19}  stopped"
        )
    for record in records:
        speedup = f"{record.default_us / record.best_us:.2f}x" if record.default_us else "-"
        print(
            f"  {record.kernel_name:<{width}} {record.key.kernel[:12]:<12} "
            f"{record.key.target[:14]:<14} {record.best_us:>9.2f} {speedup:>8} "
            f"{record.trials:>6}  {record.key.cost[:22]:<22} {record.created[:19]}  "
            f"{record.stopped or '-'}"
        )
    return 0
