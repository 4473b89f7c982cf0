"""Timing: PyTorch eager vs `torch.compile` vs deplodock, fairly.

Fair means: every contender is warmed up first (torch.compile compiles there, the caches of
cuBLAS and of our module loader fill), then the contenders take turns run by run
(interleaved, so clock and thermal drift hits all of them alike), each run is timed with
CUDA events around exactly one call, L2 is flushed before every timed run (by reading a
buffer twice its size, so no contender finds its inputs in cache), and the statistic is the
median of many runs. The loop itself (`run_interleaved`) takes any timer, so its logic is
tested on the CPU with a fake one.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

EAGER, COMPILE, DEPLODOCK = "PyTorch eager", "torch.compile", "deplodock"


class Timer(Protocol):
    def time(self, fn: Callable[[], object]) -> float:
        """Milliseconds one call of `fn` takes."""
        ...


@dataclass
class Contender:
    name: str
    fn: Callable[[], object]


@dataclass
class Measurement:
    """The times (ms) of one contender's timed runs, or why it could not run."""

    name: str
    times: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else float("nan")

    @property
    def min(self) -> float:
        return min(self.times) if self.times else float("nan")

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.times)


def first_line(error: BaseException) -> str:
    """`Type: first line of the message`: how a failure shows in one table cell or row."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def run_interleaved(
    contenders: Sequence[Contender],
    timer: Timer,
    warmup: int = 10,
    iters: int = 50,
    before_each: Callable[[], object] | None = None,
) -> dict[str, Measurement]:
    """`warmup` untimed calls of each contender, then `iters` rounds of one timed call each.

    A contender that raises (in warm-up or later) is recorded with the error's first line and
    leaves the rotation; the others go on. `before_each` (the L2 flush) runs before every
    timed call, outside the timed region.
    """
    if iters < 1 or warmup < 0:
        raise ValueError(f"need iters >= 1 and warmup >= 0, got {iters} and {warmup}")
    results = {c.name: Measurement(c.name) for c in contenders}
    active = list(contenders)
    for c in list(active):
        try:
            for _ in range(warmup):
                c.fn()
        except Exception as error:
            results[c.name].error = first_line(error)
            active.remove(c)
    for _ in range(iters):
        for c in list(active):
            if before_each is not None:
                before_each()
            try:
                results[c.name].times.append(timer.time(c.fn))
            except Exception as error:
                results[c.name].error = first_line(error)
                active.remove(c)
    return results


def speedups(results: dict[str, Measurement], of: str = DEPLODOCK) -> dict[str, float]:
    """`time(other) / time(of)` per other contender: > 1 means `of` is faster."""
    mine = results.get(of)
    if mine is None or not mine.ok:
        return {}
    return {name: m.median / mine.median for name, m in results.items() if name != of and m.ok}


def format_bench_table(
    results: dict[str, Measurement],
    warmup: int,
    iters: int,
    flush_bytes: int = 0,
    timing: str = "latency",
) -> str:
    """The `--bench` report: median and min per contender and deplodock's speedup over it."""
    flush = f", L2 flushed ({flush_bytes / 2**20:.0f} MiB read) before each" if flush_bytes else ""
    what = "; GPU time (the GPU kept busy while the host issues each call)"
    lines = [
        f"bench: median of {iters} interleaved runs after {warmup} warm-up runs, "
        f"CUDA events{flush}{what if timing == 'device' else ''}",
        f"  {'contender':<15} {'median ms':>10} {'min ms':>10} {'deplodock speedup':>18}",
    ]
    ups = speedups(results)
    for name, m in results.items():
        if not m.ok:
            lines.append(f"  {name:<15} {'failed':>10}   {m.error}")
            continue
        up = f"{ups[name]:.2f}x" if name in ups else "-"
        lines.append(f"  {name:<15} {m.median:>10.4f} {m.min:>10.4f} {up:>18}")
    return "\n".join(lines)


# --- the GPU side ---------------------------------------------------------------------------


class CudaEventTimer:  # pragma: no cover - needs a GPU
    """Times one call between two CUDA events on the current stream (milliseconds)."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def time(self, fn: Callable[[], object]) -> float:
        self.start.record()
        fn()
        self.end.record()
        self.end.synchronize()
        return float(self.start.elapsed_time(self.end))


class L2Flusher:  # pragma: no cover - needs a GPU
    """Reads a buffer of twice the L2 size, evicting everything a previous run left there.

    It reads rather than writes: a written flush leaves the L2 full of dirty lines, and the
    timed run that follows pays their write-back to DRAM (up to the L2's size, 60 MB on an
    H200: about 14 us of a memory-bound kernel's bandwidth). A read leaves clean lines, and
    the previous run's dirty ones are written back during the flush, outside the timing.
    """

    def __init__(self, l2_bytes: int):
        import torch

        self.buffer = torch.zeros(max(2 * l2_bytes, 2**20) // 4, dtype=torch.float32, device="cuda")

    @property
    def nbytes(self) -> int:
        return self.buffer.numel() * 4

    def __call__(self) -> None:
        self.buffer.sum()


class GpuSpin:  # pragma: no cover - needs a GPU
    """Keeps the GPU busy (a spin kernel) while the host enqueues the timed call.

    Run just before the timer's start event, it makes the events bracket GPU work only: the
    *device time* of a call. Without it a call whose host work (Python, dispatch, guards,
    launches) outlasts the L2 flush ahead of it is timed with that host work in: its
    *latency*, which is what a caller waits for but not what a kernel costs. 2M cycles are
    about 1 ms at Hopper's 1.98 GHz, past the slowest host work seen per call on an H200
    (torch.compile's, about 0.4 ms).
    """

    CYCLES = 2_000_000

    def __init__(self) -> None:
        import torch

        self.torch = torch

    def __call__(self) -> None:
        self.torch.cuda._sleep(self.CYCLES)


#: How a call is timed: `latency` (events around the call as the host issues it) or `device`
#: (the same events with the GPU kept busy while the host issues it; see `GpuSpin`).
TIMINGS = ("latency", "device")


def compile_exported(torch_module: Any, arguments: Sequence[Any]) -> Callable[..., Any]:
    """`torch.compile` of the module's exported graph.

    The `-c` wrapper module evaluates its expression with `eval`, where Dynamo graph-breaks;
    `torch.export` (non-strict) traces through it, so compiling the exported graph gives
    Inductor the whole computation: the same graph deplodock starts from.
    """
    import torch

    exported = torch.export.export(torch_module, tuple(arguments), strict=False)
    return torch.compile(exported.module())


def torch_contenders(
    torch_module: Any,
    arguments: Sequence[Any],
    deplodock_fn: Callable[[], object],
    compile_fn: Callable[[Any, Sequence[Any]], Callable[..., Any]] = compile_exported,
) -> list[Contender]:
    """Eager, torch.compile (compiled in its first warm-up call) and deplodock, same inputs."""
    import torch

    compiled: dict[str, Callable[..., Any]] = {}

    def eager() -> object:
        with torch.no_grad():
            return torch_module(*arguments)

    def compiled_call() -> object:
        with torch.no_grad():
            if "fn" not in compiled:
                compiled["fn"] = compile_fn(torch_module, arguments)
            return compiled["fn"](*arguments)

    return [
        Contender(EAGER, eager),
        Contender(COMPILE, compiled_call),
        Contender(DEPLODOCK, deplodock_fn),
    ]
