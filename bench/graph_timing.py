"""`bench.kernels --timing graph`: kernel time without the host, from CUDA-graph replays.

`latency` timing (events around one call as the host issues it) measured host time for every
case under about 0.2 ms in the 2026-11-26 H200 run; `device` timing hides the host behind a
spin kernel but still times one call at a time. Here each contender (deplodock, eager,
torch.compile) is captured once in a CUDA graph of N back-to-back calls, each call after an
L2 flush (a read of twice the L2; `--warm` leaves it out), and the graph is replayed: the
host issues one replay for N calls, so nothing of Python or of the launch path is timed.
The flushes are timed apart, in a graph of N flushes alone, and taken out:

    per-call time = (time of the contender's graph - time of the flush graph) / N

Replays of the contenders are interleaved round by round (clock and thermal drift hits them
alike); per contender the run keeps every replay's per-call time and reports min, median,
p10 and p90, over at least 100 calls or 1 s of calls, whichever comes first. The SM and
memory clocks are read before and after each case (`nvidia-smi`, which reads NVML), with
whether the clocks were held by an application or locked setting.

deplodock's program runs as its host sequence (`@forward`'s allocations once, outside the
graph; its launches on the capturing stream through the driver API, `StreamProgram`), so
the graph holds exactly its kernels, with no Python between them.

Everything but the classes marked "needs a GPU" is plain Python and tested on the CPU with
fake graphs (tests/bench/test_graph_timing.py).
"""

from __future__ import annotations

import math
import statistics
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

#: Calls per case and contender the plan aims for: at least this many ...
MIN_CALLS = 100
#: ... or this many seconds of calls, whichever is reached first.
MIN_SECONDS = 1.0
#: A graph's calls last about this long: long enough that a replay's own launch (a few us)
#: is noise, short enough that a slow case still gets several replays for its percentiles.
GRAPH_MS = 5.0
#: Bounds on the calls captured in one graph and on the replays.
MAX_CALLS_PER_GRAPH = 64
MIN_REPLAYS, MAX_REPLAYS = 5, 200


@dataclass(frozen=True)
class GraphPlan:
    """How one case is timed: N calls per graph, R replays per contender (R * N calls)."""

    calls_per_graph: int
    replays: int

    @property
    def calls(self) -> int:
        return self.calls_per_graph * self.replays


def plan_graph(call_ms: float) -> GraphPlan:
    """The plan for a call that takes about `call_ms` (from one warm-up replay).

    N fills `GRAPH_MS`; R reaches `MIN_CALLS` calls or `MIN_SECONDS` of them, whichever is
    fewer replays, and never falls under `MIN_REPLAYS` (p10 and p90 need a few samples).
    """
    call_ms = max(call_ms, 1e-4)
    per_graph = max(1, min(MAX_CALLS_PER_GRAPH, math.floor(GRAPH_MS / call_ms)))
    by_calls = math.ceil(MIN_CALLS / per_graph)
    by_time = math.ceil(MIN_SECONDS * 1e3 / (call_ms * per_graph))
    replays = max(MIN_REPLAYS, min(MAX_REPLAYS, min(by_calls, by_time)))
    return GraphPlan(per_graph, replays)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between the closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class GraphMeasurement:
    """One contender's per-call times (ms), one per replay, or why it could not run."""

    name: str
    calls_per_graph: int = 0
    per_call_ms: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.per_call_ms)

    @property
    def median(self) -> float:
        return statistics.median(self.per_call_ms) if self.per_call_ms else float("nan")

    def stats(self) -> dict[str, Any]:
        """What a row stores: min, median, p10, p90 (ms) and how many calls they cover."""
        times = self.per_call_ms
        if not times:
            return {"error": self.error}
        return {
            "min_ms": min(times),
            "median_ms": statistics.median(times),
            "p10_ms": percentile(times, 10),
            "p90_ms": percentile(times, 90),
            "replays": len(times),
            "calls_per_graph": self.calls_per_graph,
            "calls": len(times) * self.calls_per_graph,
            "error": self.error,
        }


class Graph(Protocol):
    def replay_ms(self) -> float:
        """Milliseconds one replay of the whole graph takes (events around the replay)."""
        ...


#: Builds the graph of `calls` back-to-back calls of a contender (flushed or warm).
CaptureFn = Callable[[int], Graph]


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def run_graphs_interleaved(
    contenders: dict[str, CaptureFn],
    flush: CaptureFn | None,
    call_ms: Callable[[str], float] | None = None,
    plan: GraphPlan | None = None,
) -> dict[str, GraphMeasurement]:
    """Capture every contender, then replay them round by round; per-call times per replay.

    The plan comes from `plan` or from the slowest contender's `call_ms` (all contenders run
    the same N and R, so they are compared on equal terms). `flush` captures the graph of
    the flushes alone: each round replays it too, and its time comes off every contender's
    replay of that round. A contender whose capture or replay raises keeps its error and
    leaves the rotation.
    """
    if plan is None:
        estimates = [call_ms(name) for name in contenders] if call_ms else [1.0]
        plan = plan_graph(max(estimates, default=1.0))
    results = {name: GraphMeasurement(name, plan.calls_per_graph) for name in contenders}
    graphs: dict[str, Graph] = {}
    for name, capture in contenders.items():
        try:
            graphs[name] = capture(plan.calls_per_graph)
        except Exception as error:
            results[name].error = first_line(error)
    flush_graph = flush(plan.calls_per_graph) if flush is not None else None
    for _ in range(plan.replays):
        overhead = flush_graph.replay_ms() if flush_graph is not None else 0.0
        for name, graph in list(graphs.items()):
            try:
                total = graph.replay_ms()
            except Exception as error:
                results[name].error = first_line(error)
                del graphs[name]
                continue
            results[name].per_call_ms.append(max(total - overhead, 0.0) / plan.calls_per_graph)
    return results


# --- clocks -------------------------------------------------------------------------------

#: What `nvidia-smi` is asked for (NVML's readings): current SM and memory clocks, the
#: application clocks, and whether an application or locked clock setting holds them.
CLOCK_QUERY = (
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "clocks.applications.graphics",
    "clocks_event_reasons.applications_clocks_setting",
    "temperature.gpu",
    "power.draw",
)


@dataclass(frozen=True)
class Clocks:
    """One reading of the GPU's clocks (MHz), or why there is none."""

    sm_mhz: float | None = None
    mem_mhz: float | None = None
    max_sm_mhz: float | None = None
    app_sm_mhz: float | None = None
    #: True when an application-clocks or locked-clocks setting holds the clocks (NVML's
    #: "applications clocks setting" event reason); None when it could not be read.
    locked: bool | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    error: str | None = None


def _number(text: str) -> float | None:
    try:
        return float(text.strip().split()[0])
    except (ValueError, IndexError):
        return None


def parse_clocks(line: str) -> Clocks:
    """`Clocks` from one `--format=csv,noheader,nounits` line of `CLOCK_QUERY`."""
    fields = [f.strip() for f in line.strip().split(",")]
    if len(fields) != len(CLOCK_QUERY):
        return Clocks(error=f"unexpected nvidia-smi line: {line.strip()[:120]!r}")
    sm, mem, max_sm, app, reason, temperature, power = fields
    locked = {"active": True, "not active": False}.get(reason.lower())
    return Clocks(
        _number(sm),
        _number(mem),
        _number(max_sm),
        _number(app),
        locked,
        _number(temperature),
        _number(power),
    )


def read_clocks(
    index: int = 0, run: Callable[..., Any] = subprocess.run, timeout: float = 10.0
) -> Clocks:
    """The clocks of GPU `index` now (an error reading, never an exception)."""
    command = [
        "nvidia-smi",
        f"--id={index}",
        f"--query-gpu={','.join(CLOCK_QUERY)}",
        "--format=csv,noheader,nounits",
    ]
    try:
        done = run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        return Clocks(error=first_line(error))
    if done.returncode != 0:
        return Clocks(error=(done.stderr or done.stdout).strip()[:200] or "nvidia-smi failed")
    return parse_clocks(done.stdout.splitlines()[0] if done.stdout else "")


def clocks_record(before: Clocks, after: Clocks) -> dict[str, Any]:
    """What a row stores: both readings, and whether the clocks were locked throughout."""
    locked = before.locked if before.locked == after.locked else None
    return {"before": asdict(before), "after": asdict(after), "locked": locked}


# --- the GPU side -------------------------------------------------------------------------


class CudaGraph:  # pragma: no cover - needs a GPU
    """`calls` back-to-back calls of `fn`, each after `before` (the flush), in one graph."""

    def __init__(self, fn: Callable[[], object], calls: int, before: Callable[[], object] | None):
        import torch

        self.torch = torch
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm up on the side stream, as capture requires
            for _ in range(2):
                if before is not None:
                    before()
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            for _ in range(calls):
                if before is not None:
                    before()
                fn()
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.graph.replay()  # the first replay uploads the graph: untimed
        torch.cuda.synchronize()

    def replay_ms(self) -> float:
        self.start.record()
        self.graph.replay()
        self.end.record()
        self.end.synchronize()
        return float(self.start.elapsed_time(self.end))


class StreamProgram:
    """deplodock's `@forward` with its launches on the current stream (CUDA-graph capture).

    `CudaProgram` launches through pycuda on the legacy default stream, which a graph cannot
    capture. This replays the same host sequence through the driver API (`cuLaunchKernel`
    on `torch.cuda.current_stream()`), from the same cubin, with the intermediates allocated
    once: a call is only the program's launches. `driver`, `device` and `stream` default to
    libcuda, CUDA tensors and PyTorch's current stream; a test passes fakes (CPU tensors).
    """

    def __init__(
        self,
        program: Any,
        arguments: Sequence[Any],
        driver: Any = None,
        device: str = "cuda",
        stream: Callable[[], int] | None = None,
    ):
        import ctypes

        import torch

        from deplodock.backend.runtime import _Alloc, _Launch

        self.cuda = driver if driver is not None else ctypes.CDLL("libcuda.so.1")
        self.ctypes = ctypes
        self.stream = stream or (lambda: torch.cuda.current_stream().cuda_stream)
        module = ctypes.c_void_p()
        if program.launches:  # a program that only passes buffers through has no cubin
            cubin = program.build.cubin
            self._check(self.cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(cubin)))
        self.module = module
        values: list[Any] = [*arguments, *([None] * len(program.steps))]
        self.launches: list[tuple[ctypes.c_void_p, int, int, int, Any, Any]] = []
        functions: dict[str, ctypes.c_void_p] = {}
        for step in program.steps:
            if isinstance(step, _Alloc):
                values[step.slot] = torch.empty(step.shape, dtype=step.dtype, device=device)
            elif isinstance(step, _Launch):
                if step.name not in functions:
                    functions[step.name] = self._function(step.name, step.smem)
                pointers = [ctypes.c_void_p(values[s].data_ptr()) for s in step.slots]
                params = (ctypes.c_void_p * len(pointers))(
                    *[ctypes.cast(ctypes.pointer(p), ctypes.c_void_p) for p in pointers]
                )
                self.launches.append(
                    (functions[step.name], step.grid, step.block, step.smem, params, pointers)
                )
        self.values = values  # keeps every buffer alive as long as the launches

    def _check(self, status: int) -> None:
        if status != 0:
            raise RuntimeError(f"CUDA driver error {status}")

    def _function(self, name: str, smem: int) -> Any:
        from deplodock.dialects.hardware import needs_dynamic_shared

        ctypes = self.ctypes
        function = ctypes.c_void_p()
        self._check(
            self.cuda.cuModuleGetFunction(ctypes.byref(function), self.module, name.encode())
        )
        if needs_dynamic_shared(smem):
            max_dynamic_shared = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self._check(self.cuda.cuFuncSetAttribute(function, max_dynamic_shared, smem))
        return function

    def __call__(self) -> None:
        ctypes = self.ctypes
        stream = ctypes.c_void_p(self.stream())
        for function, grid, block, smem, params, _ in self.launches:
            self._check(
                self.cuda.cuLaunchKernel(
                    function, grid, 1, 1, block, 1, 1, smem, stream, params, None
                )
            )


def bench_graph(
    prepared: Any, device: Any, warm: bool = False, compile_fn: Any = None
) -> tuple[dict[str, GraphMeasurement], dict[str, Any]]:  # pragma: no cover - needs a GPU
    """Every contender of a prepared program timed by graph replay; (results, clocks record)."""
    import time

    import torch

    from deplodock.backend import benchmark as B

    flusher = None if warm else B.L2Flusher(device.l2_bytes)
    program = StreamProgram(prepared.compiled, prepared.arguments)
    kwargs = {"compile_fn": compile_fn} if compile_fn is not None else {}
    if prepared.expected is not None:  # a model: no PyTorch module on the device to race
        contenders = [B.Contender(B.DEPLODOCK, program)]
    else:
        contenders = B.torch_contenders(
            prepared.program.torch_module, prepared.inputs, program, **kwargs
        )
    for c in contenders:  # torch.compile compiles here, outside every graph
        c.fn()
    torch.cuda.synchronize()

    def call_ms(fn: Callable[[], object]) -> float:
        start = time.perf_counter()
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1e3 / 3  # host-bound upper bound: a fine plan

    captures = {c.name: (lambda n, fn=c.fn: CudaGraph(fn, n, flusher)) for c in contenders}
    estimates = {c.name: call_ms(c.fn) for c in contenders}
    flush = (lambda n: CudaGraph(lambda: None, n, flusher)) if flusher is not None else None
    before = read_clocks(device.index)
    results = run_graphs_interleaved(captures, flush, estimates.__getitem__)
    after = read_clocks(device.index)
    return results, clocks_record(before, after)
