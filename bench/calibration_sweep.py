"""`python -m bench.calibration_sweep`: our own kernels over the schedule space, graph-timed.

    python -m bench.calibration_sweep --list                    # the points, no GPU
    python -m bench.calibration_sweep --precompile --jobs 16    # build them ahead, no GPU
    python -m bench.calibration_sweep --out bench/results       # time them (GPU)

The model's compute side was fitted on 26 GEMMs of one old run; it needs rows that vary what
it models: GEMMs over block tiles, pipeline depth, split-K and the pipe (FMA, tensor cores:
`mma`), memory-bound kernels over sizes and vector widths (`vector`, bytes per access). Each
point is one expression and the `tile-schedule` knobs written on its loop kernels (as `deplodock
tune` replays a schedule: knobs a point leaves out take the passes' own choice), so every
point lies in the tuner's space; a point whose knobs a pass refuses is left out when built.

The precompile step caches each point's cuda-level module and its cubin, so on the GPU a
point costs a parse and its timing. There each point is graph-timed alone
(`bench/graph_timing.py`: N calls with an L2 flush between them, min/median/p10/p90 per
call) and not checked for correctness (the tuner's and the tests' checks cover these
schedules); the rows carry the point's expression and knobs, so `bench.model_calibration`
can rebuild, trace and model exactly what ran.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from deplodock.files import write_atomic

DTYPE_ARG = {"fp32": "", "bf16": ", dtype=torch.bfloat16"}
#: (tokens, input features, output features): the suite's projection shapes, small to large.
GEMM_SHAPES = ((32, 2048, 2048), (128, 3584, 3584), (512, 2048, 5632), (512, 3584, 18944))
#: (bm, bn) block tiles, pipeline depths and split-K counts swept per GEMM shape.
GEMM_TILES = ((64, 64), (128, 64), (128, 128))
GEMM_DEPTHS = (2, 3)
GEMM_SPLITS = (1, 4)
#: (rows, width) of the memory-bound ops, and the access widths in bytes.
MEMORY_SHAPES = ((32, 2048), (128, 3584), (512, 5632), (2048, 5632))
VECTOR_BYTES = (4, 8, 16)
MEMORY_OPS = {
    "silu_mul": "F.silu(torch.randn({r}, {w}{dt})) * torch.randn({r}, {w}{dt})",
    "rmsnorm": "nn.RMSNorm({w}{dt})(torch.randn({r}, {w}{dt}))",
    "softmax": "torch.softmax(torch.randn({r}, {w}{dt}), dim=-1)",
}
#: The least number of points a session's sweep times (issue 33: at least 100 kernels).
MIN_POINTS = 100


@dataclass(frozen=True)
class SweepPoint:
    """One kernel to time: an expression and the knobs written on its loop kernels."""

    name: str
    family: str
    dtype: str
    expression: str
    knobs: dict[str, int] = field(default_factory=dict)


def gemm_points() -> Iterator[SweepPoint]:
    for dtype in ("fp32", "bf16"):
        dt = DTYPE_ARG[dtype]
        for tokens, k, n in GEMM_SHAPES:
            expression = f"nn.Linear({k}, {n}, bias=False{dt})(torch.randn({tokens}, {k}{dt}))"
            for (bm, bn), depth, splits in (
                (t, d, s) for t in GEMM_TILES for d in GEMM_DEPTHS for s in GEMM_SPLITS
            ):
                if splits > 1 and tokens > 128:  # split-K is for outputs too small to fill
                    continue
                for mma in (0, 1):
                    knobs = {"bm": bm, "bn": bn, "depth": depth, "mma": mma}
                    knobs |= {"splits": splits} if splits > 1 else {}
                    label = "_".join(f"{key}{value}" for key, value in knobs.items())
                    yield SweepPoint(
                        f"gemm/{dtype}/{tokens}x{k}x{n}/{label}",
                        f"GEMM {dtype}",
                        dtype,
                        expression,
                        knobs,
                    )


def memory_points() -> Iterator[SweepPoint]:
    for dtype in ("fp32", "bf16"):
        for op, template in MEMORY_OPS.items():
            for rows, width in MEMORY_SHAPES:
                expression = template.format(r=rows, w=width, dt=DTYPE_ARG[dtype])
                for vector in VECTOR_BYTES:
                    yield SweepPoint(
                        f"{op}/{dtype}/{rows}x{width}/vector{vector}",
                        "memory-bound",
                        dtype,
                        expression,
                        {"vector": vector},
                    )


def sweep_points() -> list[SweepPoint]:
    """Every point, the families taken in turn (GEMM fp32, GEMM bf16, memory-bound), so a
    sweep the session cuts short still covers each of them."""
    groups: dict[str, list[SweepPoint]] = {}
    for point in [*gemm_points(), *memory_points()]:
        groups.setdefault(point.family, []).append(point)
    ordered: list[SweepPoint] = []
    for round_ in itertools.zip_longest(*groups.values()):
        ordered += [point for point in round_ if point is not None]
    return ordered


def lowered(point: SweepPoint, stage: str = "cuda") -> Any:
    """The point's program lowered to `stage` with its knobs on every loop kernel (a pass
    that refuses a knob raises: the point is not in the space)."""
    from deplodock.dialects.common.schedule import Schedule
    from deplodock.driver import lower_program, program_from_expression
    from deplodock.tune.kernels import loop_kernels

    program = program_from_expression(point.expression)
    lower_program(program, "loop")
    for kernel in loop_kernels(program.module):
        Schedule(point.knobs).write_on(kernel)
    lower_program(program, stage)
    return program


def cuda_text(point: SweepPoint) -> str:
    """The point's cuda-level module, lowered once and cached (`bench.published.cached_build`,
    keyed by expression and knobs): the GPU parses it instead of running the passes again."""
    from bench.published import cached_build

    key = ["calibration-sweep", point.expression, point.knobs]
    text, _ = cached_build("calibration-sweep", key, lambda: (str(lowered(point).module), None))
    return text


def build_point(point: SweepPoint, capability: tuple[int, int]) -> tuple[bool, str, float]:
    """Lower and build one point's cubin into the cache (worker process)."""
    from deplodock.backend.build import build_module, kernel_ops
    from deplodock.tune.measure import parse_module

    start = time.perf_counter()
    module = parse_module(cuda_text(point))
    if not kernel_ops(module):
        return True, "no kernel", time.perf_counter() - start
    build = build_module(module, capability)
    return build.cached, f"{len(build.kernels)} kernel(s)", time.perf_counter() - start


def time_point(point: SweepPoint, device: Any) -> dict[str, Any]:  # pragma: no cover - GPU
    """One point graph-timed on the GPU: its row (stats, clocks, or the error)."""
    import torch

    from bench.graph_timing import (
        CudaGraph,
        StreamProgram,
        clocks_record,
        read_clocks,
        run_graphs_interleaved,
    )
    from deplodock.backend.benchmark import L2Flusher
    from deplodock.backend.runtime import CudaProgram
    from deplodock.dialects.element_types import torch_dtype
    from deplodock.tune.measure import parse_module

    row: dict[str, Any] = asdict(point)
    try:
        compiled = CudaProgram.load(parse_module(cuda_text(point)), device)
        arguments = [
            torch.randn(tuple(t.get_shape()), device="cuda").to(torch_dtype(t.element_type))
            for t in compiled.arg_types
        ]
        runner = StreamProgram(compiled, arguments)
    except Exception as error:
        return row | {"status": "error", "reason": str(error).splitlines()[0][:200]}
    flusher = L2Flusher(device.l2_bytes)
    start = time.perf_counter()
    for _ in range(3):
        runner()
    torch.cuda.synchronize()
    estimate_ms = (time.perf_counter() - start) * 1e3 / 3
    before = read_clocks(device.index)
    results = run_graphs_interleaved(
        {"deplodock": lambda n: CudaGraph(runner, n, flusher)},
        lambda n: CudaGraph(lambda: None, n, flusher),
        lambda _: estimate_ms,
    )
    measurement = results["deplodock"]
    row |= {
        "status": "ok" if measurement.ok else "runtime_error",
        "kernels": len(compiled.launches),
        "median_ms": measurement.median if measurement.ok else None,
        "graph_stats": measurement.stats(),
        "clocks": clocks_record(before, read_clocks(device.index)),
    }
    return row


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.calibration_sweep", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--list", action="store_true", help="print the points and exit")
    parser.add_argument("--precompile", action="store_true", help="build the cubins, no GPU")
    parser.add_argument("--jobs", type=int, default=1, help="with --precompile (default: 1)")
    parser.add_argument("--limit", type=int, default=0, help="the first N points (0: all)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    return parser.parse_args(argv)


def precompile(points: Sequence[SweepPoint], jobs: int) -> int:
    """Builds every point into the cache; prints one line per point; the failures' count."""
    failures = 0
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(build_point, p, (9, 0)) for p in points]
        for point, future in zip(points, futures, strict=True):
            try:
                cached, note, seconds = future.result()
            except Exception as error:  # a knob a pass refuses: not in the space
                failures += 1
                print(f"{point.name}: not built: {str(error).splitlines()[0][:160]}")
                continue
            print(f"{point.name}: {'cache' if cached else 'built'}, {note}, {seconds:.1f} s")
    print(f"{len(points) - failures} of {len(points)} points built")
    return failures


def run_on_gpu(points: Sequence[SweepPoint], out: Path) -> Path:  # pragma: no cover - GPU
    """Times every point (one JSON document, rewritten after each point so a cut-short
    run keeps what it timed)."""
    from deplodock.backend.device import require_cuda

    device = require_cuda()
    document: dict[str, Any] = {
        "suite": "bench.calibration_sweep",
        "timing": "graph (L2 flushed between calls)",
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        **{k: v for k, v in asdict(device).items() if k != "index"},
        "rows": [],
    }
    path = out / f"calibration-sweep-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    for n, point in enumerate(points, 1):
        row = time_point(point, device)
        document["rows"].append(row)
        write_atomic(path, json.dumps(document, indent=1) + "\n")
        median = row.get("median_ms")
        shown = f"{median * 1e3:9.2f} us" if median is not None else row.get("reason", "")
        print(f"[{n}/{len(points)}] {point.name}: {row['status']} {shown}", flush=True)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    points = sweep_points()
    if args.limit:
        points = points[: args.limit]
    if args.list:
        for point in points:
            print(f"{point.name:<56} {point.knobs}")
        print(f"{len(points)} points")
        return 0
    if args.precompile:
        return 1 if precompile(points, args.jobs) else 0
    from deplodock.backend.device import cuda_unavailable_reason

    if (reason := cuda_unavailable_reason()) is not None:
        print(f"bench.calibration_sweep: error: no CUDA device: {reason}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"results: {run_on_gpu(points, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
