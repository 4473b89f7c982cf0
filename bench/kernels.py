"""`python -m bench.kernels`: the LLM kernel suite, deplodock vs PyTorch eager and torch.compile.

    python -m bench.kernels --list                       # the 84 cases and their expressions
    python -m bench.kernels --dtype fp32 --out bench/results/
    python -m bench.kernels --dtype bf16 -k softmax -k rmsnorm --iters 20
    python -m bench.kernels --model h100 --dtype fp32    # no GPU: the performance model

Each case is built, checked against PyTorch (float64 reference, poisoned outputs) and, when
correct, timed. `--timing graph` (what the GPU sessions use, `bench/graph_timing.py`): each
contender in a CUDA graph of N back-to-back calls with an L2 flush between them, replayed,
interleaved; min, median, p10 and p90 per call and the clocks before and after. `latency`
and `device` time one call at a time like `deplodock run --bench` (interleaved, CUDA events,
L2 flushed, median): `latency` includes the host's issue of the call where it outlasts the
flush, `device` keeps the GPU busy meanwhile. Every results file says which it used.
Cases run in a worker process (`bench/worker.py`) so a crash or a hang costs one row. The
run writes `kernels-<dtype>-<time>.json` (device, driver, torch and nvcc versions, date, every
row) and a `.png` chart of per-case speedups under `--out`, and prints the geomean speedups
and the wins.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.cases import DTYPES, Case, add_case_patterns, all_cases, find_cases
from bench.report import Row, draw_chart, results_document, summarize, with_speedups, write_json
from deplodock.backend.benchmark import COMPILE, DEPLODOCK, EAGER
from deplodock.backend.benchmark import TIMINGS as CALL_TIMINGS
from deplodock.perf.devices import known_devices

DEFAULT_OUT = Path(__file__).resolve().parent / "results"
#: `graph` (CUDA-graph replays, `bench/graph_timing.py`) and the one-call timings.
TIMINGS = ("graph", *CALL_TIMINGS)
CASE_FUNCTION = "bench.kernels:run_case"


def base_row(case: Case, dtype: str) -> Row:
    return {
        "case": case.name,
        "op": case.op,
        "model": case.model.name,
        "seq": case.seq,
        "dtype": dtype,
        "expression": case.expression(dtype),
        "status": None,
        "reason": None,
        "max_rel_error": None,
        "tolerance": None,
        "kernels": None,
        "eager_ms": None,
        "compile_ms": None,
        "deplodock_ms": None,
    }


def run_case(
    name: str,
    dtype: str,
    warmup: int,
    iters: int,
    seed: int = 0,
    timing: str = "latency",
    warm: bool = False,
) -> Row:
    """Build, check and time one case on the GPU (runs in the worker process)."""
    import torch

    from deplodock.backend import benchmark as B
    from deplodock.backend.device import require_cuda
    from deplodock.driver import program_from_expression
    from deplodock.driver.cuda import bench_on_cuda, check_on_cuda, prepare_on_cuda

    (case,) = [c for c in all_cases() if c.name == name]
    row = base_row(case, dtype)
    device = require_cuda()
    torch._dynamo.reset()  # each case compiles afresh: no cache limits carried over
    try:
        program = program_from_expression(row["expression"], seed=seed)
        prepared = prepare_on_cuda(program, device, seed)
    except Exception as error:
        return row | {"status": "compile_error", "reason": B.first_line(error)}
    row["kernels"] = len(prepared.compiled.kernels)
    row["tolerance"] = prepared.tolerance
    try:
        report = check_on_cuda(prepared, device)
    except Exception as error:
        return row | {"status": "runtime_error", "reason": B.first_line(error), "restart": True}
    row["max_rel_error"] = max(report.errors, default=0.0)
    row["tolerance"] = report.tolerance  # bf16: may follow PyTorch's own error (the check's)
    if not report.ok:
        reason = f"max relative error {row['max_rel_error']:.3e} > {report.tolerance:.2g}"
        return row | {"status": "mismatch", "reason": reason}
    if timing == "graph":
        row |= graph_timed(prepared, device, warm)
        status = "ok" if row["deplodock_ms"] is not None else "runtime_error"
        del prepared, program
        torch.cuda.empty_cache()
        return with_speedups(row | {"status": status, "restart": status != "ok"})
    results, _ = bench_on_cuda(prepared, device, warmup, iters, timing=timing)
    for key, contender in (
        ("eager_ms", B.EAGER),
        ("compile_ms", B.COMPILE),
        ("deplodock_ms", B.DEPLODOCK),
    ):
        m = results[contender]
        row[key] = m.median if m.ok else None
        if m.error:
            row["reason"] = f"{contender}: {m.error}"
    deplodock = results[B.DEPLODOCK]
    status = "ok" if deplodock.ok else "runtime_error"
    del prepared, program
    torch.cuda.empty_cache()
    return with_speedups(row | {"status": status, "restart": not deplodock.ok})


#: A row's median-time field of each contender.
TIME_KEYS = {"eager_ms": EAGER, "compile_ms": COMPILE, "deplodock_ms": DEPLODOCK}


def graph_row_fields(results: dict[str, Any], clocks: dict[str, Any]) -> Row:
    """The row fields of a graph-timed case: each contender's median per call (the row's
    time), its min/median/p10/p90 and calls (`graph_stats`), the clocks, any error."""
    fields: Row = {"graph_stats": {}, "clocks": clocks}
    for key, contender in TIME_KEYS.items():
        measurement = results.get(contender)
        fields[key] = measurement.median if measurement is not None and measurement.ok else None
        if measurement is None:
            continue
        fields["graph_stats"][contender] = measurement.stats()
        if measurement.error:
            fields["reason"] = f"{contender}: {measurement.error}"
    return fields


def graph_timed(prepared: Any, device: Any, warm: bool) -> Row:  # pragma: no cover - GPU
    from bench.graph_timing import bench_graph

    results, clocks = bench_graph(prepared, device, warm=warm)
    return graph_row_fields(results, clocks)


def environment(dtype: str) -> dict[str, Any]:
    """Device, driver, torch and nvcc versions and the date (computed in a worker)."""
    import torch

    from deplodock.backend.device import require_cuda

    info = dataclasses.asdict(require_cuda())
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),  # "highest": no TF32
        "suite": "bench.kernels",
        "dtype": dtype,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "device": info.pop("name"),
        **info,
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.kernels", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--list", action="store_true", help="print the cases and exit")
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bar (it is only drawn when stderr is a terminal anyway)",
    )
    parser.add_argument("--dtype", choices=DTYPES, default="fp32", help="(default: fp32)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results directory")
    add_case_patterns(parser)
    parser.add_argument(
        "--model",
        metavar="DEVICE",
        help=f"model the cases on DEVICE ({known_devices()}) with the performance model instead "
        "of running them on a GPU (bench/modeled.py); DEVICE@TIMING (h200@latency) takes the "
        "constants of that device's measured run instead of the shared ones",
    )
    parser.add_argument("--warmup", type=int, default=10, help="untimed runs (default: 10)")
    parser.add_argument("--iters", type=int, default=50, help="timed runs (default: 50)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per case")
    parser.add_argument("--seed", type=int, default=0, help="seed of the inputs and weights")
    parser.add_argument(
        "--timing",
        choices=TIMINGS,
        default="latency",
        help="graph: each contender in a CUDA graph of N back-to-back calls (L2 flushed "
        "between them unless --warm), replayed and interleaved: kernel time per call, no host "
        "(bench/graph_timing.py); latency: CUDA events around each call as the host issues it "
        "(host overhead included where it outlasts the L2 flush); device: the GPU is kept busy "
        "while the host issues the call, so the events time GPU work only (default: latency)",
    )
    parser.add_argument(
        "--warm",
        action="store_true",
        help="with --timing graph: no L2 flush between the calls (inputs may stay in L2)",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="with --model: replace only the rows of the cases run in an existing results "
        "file (re-model a few cases after a change)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="with --model: cases modeled in parallel worker processes (default: 1)",
    )
    return parser.parse_args(argv)


def timing_label(timing: str, warm: bool) -> str:
    """The results file's `timing`: the method, and for graphs whether L2 was flushed."""
    if timing != "graph":
        return timing
    return "graph (warm L2)" if warm else "graph (L2 flushed between calls)"


def run_suite(
    cases: Sequence[Case],
    dtype: str,
    runner: Any,
    task: dict[str, Any],
    out: Any = print,
    quiet: bool = False,
) -> list[Row]:
    """One row per case, in order; `runner(**task, name=..., dtype=...)` returns a row. On a
    terminal (and not `quiet`) a bar with the running case and an ETA sits under the lines."""
    from deplodock.cli.progress import count_progress_bar

    rows = []
    width = max((len(c.name) for c in cases), default=0)
    with count_progress_bar(len(cases), "bench", quiet) as bar:
        for n, case in enumerate(cases, 1):
            bar.start(case.name)
            row = base_row(case, dtype) | runner(name=case.name, dtype=dtype, **task)
            row.pop("restart", None)
            row.pop("traceback", None)
            rows.append(with_speedups(row))
            bar.finish(out, progress_line(n, len(cases), width, row))
    return rows


def progress_line(n: int, total: int, width: int, row: Row) -> str:
    def ms(key: str) -> str:
        return f"{row[key]:9.4f}" if row.get(key) is not None else f"{'-':>9}"

    def up(key: str) -> str:
        return f"{row[key]:6.2f}x" if row.get(key) is not None else f"{'-':>7}"

    head = f"[{n:>2}/{total}] {row['case']:<{width}}"
    times = f"{ms('eager_ms')} {ms('compile_ms')} {ms('deplodock_ms')} ms"
    status = row["status"] + (f": {row['reason']}" if row.get("reason") else "")
    return f"{head} {times} {up('speedup_eager')} {up('speedup_compile')}  {status}"


def run_and_report(
    cases: Sequence[Case],
    dtype: str,
    out_dir: Path,
    runner: Any,
    env: dict[str, Any],
    task: dict[str, Any],
    echo: Any = print,
    quiet: bool = False,
) -> tuple[Path, Path]:
    """Run the cases, write the JSON and the chart under `out_dir`, print the summary."""
    timing = env.get("timing", "latency")
    echo(
        f"{len(cases)} cases, {dtype}, on {env['device']} (torch {env.get('torch')}), "
        f"{timing} timing; per case:"
    )
    echo("  median ms of eager, torch.compile, deplodock; speedup vs eager, vs compile; status")
    rows = run_suite(cases, dtype, runner, task, echo, quiet)
    stem = f"kernels-{dtype}-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    json_path = write_json(out_dir / f"{stem}.json", results_document(rows, env))
    title = f"deplodock speedup per case, {dtype}, {env['device']}"
    png_path = draw_chart(rows, out_dir / f"{stem}.png", title)
    for line in summarize(rows).lines(dtype, env["device"]):
        echo(line)
    echo(f"results: {json_path}\nchart:   {png_path}")
    return json_path, png_path


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        cases = find_cases(args.cases)
    except ValueError as error:
        print(f"bench.kernels: error: {error}", file=sys.stderr)
        return 1
    if args.list:
        for case in cases:
            print(f"{case.name:<40} {case.expression(args.dtype)}")
        print(f"{len(cases)} cases")
        return 0
    if args.model:
        from bench.modeled import run_modeled_suite, split_model_key
        from deplodock.perf.devices import UnknownDevice, device_model
        from deplodock.perf.model import load_calibration

        device_key, timing = split_model_key(args.model.lower())
        try:
            device_model(device_key)
        except UnknownDevice as error:
            print(f"bench.kernels: error: {error}", file=sys.stderr)
            return 1
        if timing and args.model.lower() not in load_calibration().device_constants:
            known = ", ".join(sorted(load_calibration().device_constants)) or "none"
            error = f"no measured run {args.model!r} in calibration.json (known: {known})"
            print(f"bench.kernels: error: {error}", file=sys.stderr)
            return 1
        run_modeled_suite(
            cases,
            args.dtype,
            args.model.lower(),
            args.out,
            jobs=args.jobs,
            merge=args.merge,
            quiet=args.quiet,
        )
        return 0
    from deplodock.backend.device import cuda_unavailable_reason

    if (reason := cuda_unavailable_reason()) is not None:
        print(f"bench.kernels: error: no CUDA device: {reason}", file=sys.stderr)
        return 1
    from bench.worker import IsolatedRunner

    task = {
        "warmup": args.warmup,
        "iters": args.iters,
        "seed": args.seed,
        "timing": args.timing,
        "warm": args.warm,
    }
    with IsolatedRunner("bench.kernels:environment", timeout=600) as probe:
        env = probe(dtype=args.dtype) | {"timing": timing_label(args.timing, args.warm)}
    if "device" not in env:
        print(f"bench.kernels: error: {env.get('reason')}", file=sys.stderr)
        return 1
    with IsolatedRunner(CASE_FUNCTION, timeout=args.timeout) as runner:
        run_and_report(cases, args.dtype, args.out, runner, env, task, quiet=args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
