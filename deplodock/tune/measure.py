"""The autotuner's evaluator on a real GPU: each candidate built, checked and timed there.

- **A worker process with a watchdog.** A candidate schedule is new code: it may fault (an
  illegal address poisons the CUDA context for the rest of its process), crash the driver or
  never finish. So candidates run in a spawned worker process that owns the CUDA context, one
  job at a time, each under a deadline (`backend/worker.py`, which the kernel suite's
  `bench/worker.py` runs its cases in too). A worker past the deadline is killed with
  SIGKILL; one that dies or reports an error is replaced before the next candidate. A bad
  candidate costs one `Score` (TIMEOUT or FAILED, with the reason), never the search.
- **The real optimisation level.** Candidates are built as `deplodock run --device cuda`
  builds programs (`backend/build.build_module`, `-O3`): at another level register
  allocation, unrolling and spills differ, and the ranking would be of other code.
- **L2 flushed, warm-up, median of many.** A kernel run straight after itself finds its
  inputs in L2 and looks faster than it runs inside a program, so L2 is flushed (then the GPU
  kept busy while the host launches) before every timed run. The first runs load the module
  and raise the clocks, so candidates are warmed up for a stretch of GPU time, then timed
  until a target of GPU time (within a run count), and scored by the median.
- **Interleaved re-timing.** The search times candidates seconds or minutes apart, and clocks
  and temperature drift in between; the top few are timed again in turns, one run each per
  round, so drift hits them alike and the final order is the kernels'.

Only `gpu_runner` touches CUDA. The worker (`backend.worker.Worker`), the timing plan
(`time_alone`, `time_interleaved`), the checks and the runner (`DeviceRunner`) take their
timer, loader and runner as arguments, so the tests run them on the CPU with fakes and with
the CPU emulation of the emitted CUDA C.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from deplodock.backend.benchmark import Contender, Measurement, Timer, first_line, run_interleaved
from deplodock.backend.build import DEFAULT_FLAGS, build_module
from deplodock.backend.device import DeviceInfo, require_cuda
from deplodock.backend.nvcc import nvcc_release
from deplodock.backend.worker import DIED, DONE, RAISED, TIMED_OUT, Reply, Runner, Worker
from deplodock.dialects import make_context
from deplodock.dialects.element_types import numpy_dtype, torch_dtype
from deplodock.numerics import (
    GPU_CHECK_FP32_TOLERANCE,
    GPU_CHECK_NARROW_TOLERANCE,
    random_array,
    schedule_error,
)
from deplodock.passes.pipelines import lower
from deplodock.tune.evaluate import FAILED, OK, TIMEOUT, WRONG, Evaluator, Score

#: The seed of the random inputs: every candidate of a kernel (and its reference) sees the same.
INPUT_SEED = 0
#: GPU cycles of the spin before each timed run (~0.1 ms on Hopper): longer than the host
#: takes to launch one candidate, so the events time the kernel, not the launch.
SPIN_CYCLES = 200_000
#: A worker's outcome -> the score's status: a job that raised or killed its worker FAILED.
WORKER_STATUS = {DONE: OK, RAISED: FAILED, DIED: FAILED, TIMED_OUT: TIMEOUT}


# --- timing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimingPolicy:
    """How long a candidate is warmed up and timed (GPU milliseconds, as the timer reports).

    Warm-up runs until `warmup_ms`; then enough timed runs for `target_ms` at the warm-up's
    time per run, at least `min_runs` and at most `max_runs` (which also caps the warm-up).
    """

    warmup_ms: float = 10.0
    target_ms: float = 50.0
    min_runs: int = 10
    max_runs: int = 200

    def __post_init__(self) -> None:
        if not 1 <= self.min_runs <= self.max_runs or self.warmup_ms < 0 or self.target_ms < 0:
            raise ValueError(f"need 1 <= min_runs <= max_runs and times >= 0, got {self}")

    def runs_for(self, per_run_ms: float) -> int:
        """The number of timed runs of a candidate that takes `per_run_ms` a run."""
        wanted = math.ceil(self.target_ms / per_run_ms) if per_run_ms > 0 else self.max_runs
        return max(self.min_runs, min(self.max_runs, wanted))


#: The final re-timing of the top few: longer, as it decides the winner.
RETIME_POLICY = TimingPolicy(warmup_ms=10.0, target_ms=200.0, min_runs=20, max_runs=1000)


def warm_up(fn: Callable[[], object], timer: Timer, policy: TimingPolicy) -> float:
    """Calls `fn` in timed batches of 1, 2, 4, ... back to back until the batches took
    `policy.warmup_ms` (or made `policy.max_runs` calls); the last batch's time per call (ms).
    """
    spent, calls, batch = 0.0, 0, 1
    while True:
        spent_now = timer.time(functools.partial(_repeat, fn, batch))
        spent, calls = spent + spent_now, calls + batch
        if spent >= policy.warmup_ms or calls >= policy.max_runs:
            return spent_now / batch
        batch = min(2 * batch, policy.max_runs - calls)


def _repeat(fn: Callable[[], object], count: int) -> None:
    for _ in range(count):
        fn()


def timed_runs(
    fn: Callable[[], object],
    timer: Timer,
    runs: int,
    before_each: Callable[[], object] | None = None,
) -> list[float]:
    """`runs` timed calls of `fn` (ms), `before_each` (the L2 flush) ahead of each, untimed."""
    times = []
    for _ in range(runs):
        if before_each is not None:
            before_each()
        times.append(timer.time(fn))
    return times


def time_alone(
    fn: Callable[[], object],
    timer: Timer,
    policy: TimingPolicy,
    before_each: Callable[[], object] | None = None,
) -> list[float]:
    """The timed runs (ms) of one candidate: warm-up, then as many runs as `policy` plans."""
    per_run = warm_up(fn, timer, policy)
    return timed_runs(fn, timer, policy.runs_for(per_run), before_each)


def time_interleaved(
    fns: Sequence[Callable[[], object]],
    timer: Timer,
    policy: TimingPolicy,
    before_each: Callable[[], object] | None = None,
) -> list[Measurement]:
    """Candidates timed in turns: each warmed up, then rounds of one timed run each
    (`benchmark.run_interleaved`), as many rounds as `policy` plans for the fastest. A
    candidate that raises during the rounds is recorded with its error and leaves them."""
    per_run = [warm_up(fn, timer, policy) for fn in fns]
    contenders = [Contender(str(i), fn) for i, fn in enumerate(fns)]
    runs = policy.runs_for(min(per_run, default=0.0))
    results = run_interleaved(contenders, timer, warmup=0, iters=runs, before_each=before_each)
    return [results[c.name] for c in contenders]


# --- what the worker reports -----------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One candidate's result in the worker: its timed runs (us) or why it has none."""

    status: str
    times_us: tuple[float, ...] = ()
    detail: str = ""

    def score(self) -> Score:
        """The median run for a timed candidate; no time otherwise."""
        if self.status != OK:
            return Score(None, self.status, self.detail)
        if not self.times_us:
            return Score(None, FAILED, "no timed runs")
        return Score(statistics.median(self.times_us), OK, self.detail)


def timed_outcome(times_ms: Sequence[float], how: str = "runs") -> Outcome:
    return Outcome(OK, tuple(1e3 * t for t in times_ms), f"median of {len(times_ms)} {how}")


@dataclass(frozen=True)
class TimeJob:
    """Check and time one candidate: its cuda-level module as text, and the reference's."""

    program: str
    reference: str | None = None
    policy: TimingPolicy = TimingPolicy()


@dataclass(frozen=True)
class RetimeJob:
    """Time candidates (cuda-level texts) interleaved: a list of `Outcome`s back."""

    programs: tuple[str, ...]
    policy: TimingPolicy = RETIME_POLICY


# --- the runner: inputs, checks and timing of loaded programs --------------------------------


def random_arguments(arg_types: Sequence[Any], device: str, seed: int = INPUT_SEED) -> list[Any]:
    """Seeded random tensors for `@forward`'s memref arguments (`numerics.random_array`'s
    values, drawn on the host), on `device`. Integers are indices as often as not (an
    embedding's token ids), and no type says into what; they are drawn below the smallest
    dimension of any argument, which is in range whatever they index."""
    import torch

    rng = np.random.default_rng(seed)
    dims = [d for t in arg_types for d in t.get_shape()]
    bound = max(1, min(dims, default=1))
    arguments = []
    for t in arg_types:
        array = random_array(rng, t.get_shape(), numpy_dtype(t.element_type), bound)
        value = torch.from_numpy(array).to(device=device, dtype=torch_dtype(t.element_type))
        arguments.append(value.contiguous())
    return arguments


def tolerance_for(dtype: Any) -> float:
    """`numerics.GPU_CHECK_FP32_TOLERANCE` for 32- and 64-bit floats, the narrow one for
    16-bit, 0 else."""
    if not dtype.is_floating_point:
        return 0.0
    return GPU_CHECK_NARROW_TOLERANCE if dtype.itemsize < 4 else GPU_CHECK_FP32_TOLERANCE


def mismatch(actual: Sequence[Any], expected: Sequence[Any]) -> str | None:
    """Why a candidate's outputs are not the reference's (None when they match): by
    `numerics.schedule_error` (a NaN in both matches), on host copies of the tensors."""
    from deplodock.frontend.capture import to_numpy

    if len(actual) != len(expected):
        return f"{len(actual)} outputs, the reference has {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
        if a.shape != e.shape or a.dtype != e.dtype:
            mine, theirs = f"{a.dtype} {tuple(a.shape)}", f"{e.dtype} {tuple(e.shape)}"
            return f"output #{i} is {mine}, the reference's {theirs}"
        error = schedule_error(to_numpy(a), to_numpy(e))
        tolerance = tolerance_for(e.dtype)
        if error > tolerance:
            return f"output #{i}: max relative error {error:.2g} > {tolerance:g} (reference)"
    return None


def parse_module(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


class DeviceRunner:
    """The worker's runner: loads cuda-level programs, checks them, times them.

    `load(module, device)` is `CudaProgram.load` on a GPU (the CPU emulation in tests),
    `timer` times one call (CUDA events), `before_each` runs before each timed run (the L2
    flush and the spin), and the arguments live on `tensor_device`. A reference's outputs
    are computed once and kept for the candidates that name it.
    """

    def __init__(
        self,
        device: DeviceInfo,
        load: Callable[[ModuleOp, DeviceInfo], Any],
        timer: Timer,
        before_each: Callable[[], object] | None = None,
        tensor_device: str = "cuda",
    ):
        self.device = device
        self.load = load
        self.timer = timer
        self.before_each = before_each
        self.tensor_device = tensor_device
        self._reference: tuple[str, list[Any]] | None = None
        self._arguments: tuple[tuple[str, ...], list[Any]] | None = None

    def __call__(self, job: Any) -> Any:
        if isinstance(job, TimeJob):
            return self.time(job)
        if isinstance(job, RetimeJob):
            return self.retime(job)
        raise TypeError(f"the runner takes a TimeJob or a RetimeJob, not {type(job).__name__}")

    def run_once(self, text: str) -> tuple[Any, list[Any], list[Any]]:
        """Load a program, run it once (checked launch by launch) on the seeded random
        arguments: (program, arguments, outputs)."""
        program = self.load(parse_module(text), self.device)
        arguments = self.arguments(program.arg_types)
        return program, arguments, program(*arguments, check=True)

    def arguments(self, arg_types: Sequence[Any]) -> list[Any]:
        """`random_arguments` of these types: drawn on the host once per kernel (its
        candidates and its reference take the same), a fresh copy for each run, which a
        wrong candidate may write over."""
        key = tuple(str(t) for t in arg_types)
        if self._arguments is None or self._arguments[0] != key:
            self._arguments = None  # free the previous kernel's arguments first
            self._arguments = (key, random_arguments(arg_types, self.tensor_device))
        return [argument.clone() for argument in self._arguments[1]]

    def expected(self, reference: str) -> list[Any]:
        """The reference program's outputs on the seeded inputs (computed once per reference)."""
        if self._reference is None or self._reference[0] != reference:
            self._reference = None  # free the previous reference's outputs first
            _, _, outputs = self.run_once(reference)
            self._reference = (reference, [o.clone() for o in outputs])
        return self._reference[1]

    def time(self, job: TimeJob) -> Outcome:
        """Check the candidate against its reference (if any), then time it alone."""
        expected = self.expected(job.reference) if job.reference is not None else None
        program, arguments, outputs = self.run_once(job.program)
        if expected is not None and (why := mismatch(outputs, expected)) is not None:
            return Outcome(WRONG, detail=why)
        call = functools.partial(program, *arguments)
        return timed_outcome(time_alone(call, self.timer, job.policy, self.before_each))

    def retime(self, job: RetimeJob) -> list[Outcome]:
        """Time the candidates in turns; raises if one of them fails (the parent then times
        each alone, in a fresh worker, where only the culprit fails)."""
        calls = []
        for text in job.programs:
            program, arguments, _ = self.run_once(text)
            calls.append(functools.partial(program, *arguments))
        results = time_interleaved(calls, self.timer, job.policy, self.before_each)
        if failed := [f"#{i}: {m.error}" for i, m in enumerate(results) if m.error]:
            raise RuntimeError(f"the interleaved re-timing failed: {'; '.join(failed)}")
        return [timed_outcome(m.times, "interleaved runs") for m in results]


def gpu_runner() -> DeviceRunner:  # pragma: no cover - needs a GPU
    """The runner of a GPU worker: PyTorch's primary context, CUDA events, L2 flush + spin."""
    from deplodock.backend.benchmark import CudaEventTimer, GpuSpin, L2Flusher
    from deplodock.backend.runtime import CudaProgram, primary_context

    device = require_cuda()
    primary_context(device.index)
    flush, spin = L2Flusher(device.l2_bytes), GpuSpin()
    spin.CYCLES = SPIN_CYCLES

    def before_each() -> None:
        flush()
        spin()

    return DeviceRunner(device, CudaProgram.load, CudaEventTimer(), before_each, "cuda")


# --- the evaluator ---------------------------------------------------------------------------


def measured_identity(device: DeviceInfo) -> tuple[str, str, str]:
    """(target, toolchain, cost) of measuring on `device`: its part of the cache key (the
    scheduler digest too, as for the model: a changed pass never replays a stale winner)."""
    from deplodock.tune.evaluate import scheduler_digest

    arch = device.arch
    toolchain = (
        f"nvcc {nvcc_release(device.nvcc)} {arch} {' '.join(DEFAULT_FLAGS)}; "
        f"scheduler {scheduler_digest()}"
    )
    return f"cuda:{device.name} {arch}", toolchain, "measured"


class MeasuredEvaluator(Evaluator):
    """Scores kernel-level candidates by their time on this machine's GPU.

    Each candidate is lowered to cuda and built here (`build(module, capability)`, nvcc at
    the project's flags), then checked and timed in the worker (`runner_factory` builds its
    runner there: `gpu_runner` by default). `device` defaults to `require_cuda()`, which
    raises `NoCudaDevice` with a one-line reason where no GPU is usable.
    """

    cost = "measured"
    measured = True

    def __init__(
        self,
        timeout_s: float = 10.0,
        policy: TimingPolicy = TimingPolicy(),
        retime_policy: TimingPolicy = RETIME_POLICY,
        device: DeviceInfo | None = None,
        runner_factory: Callable[[], Runner] = gpu_runner,
        build: Callable[[ModuleOp, tuple[int, int]], object] = build_module,
    ):
        self.device = device if device is not None else require_cuda()
        self.timeout_s = timeout_s
        self.policy, self.retime_policy = policy, retime_policy
        self.build = build
        self.worker = Worker(runner_factory, name="measuring worker")
        self.target, self.toolchain, self.cost = measured_identity(self.device)
        self.reference_text: str | None = None

    def set_reference(self, kernel_module: ModuleOp | None) -> None:
        """Candidates evaluated from now on must compute what `kernel_module` computes (a
        trusted schedule of the same kernel, the default one say) on the same random inputs;
        one that does not scores WRONG. None: no check."""
        if kernel_module is None:
            self.reference_text = None
            return
        program = self.compile(kernel_module)
        if isinstance(program, Score):
            raise ValueError(f"the reference does not build: {program.detail}")
        self.reference_text = program

    def compile(self, kernel_module: ModuleOp) -> str | Score:
        """The candidate lowered to cuda and built (into the build cache, where the worker
        finds it) as text, or the FAILED score saying why it could not be."""
        try:
            module = lower(kernel_module.clone(), "cuda", start="kernel")
        except Exception as error:
            return Score(None, FAILED, f"lowering to cuda: {first_line(error)}")
        try:
            self.build(module, self.device.capability)
        except Exception as error:
            return Score(None, FAILED, f"build: {first_line(error)}")
        return str(module)

    def evaluate(self, kernel_module: ModuleOp) -> Score:
        program = self.compile(kernel_module)
        if isinstance(program, Score):
            return program
        job = TimeJob(program, self.reference_text, self.policy)
        return self._score(self.worker.call(job, self.timeout_s))

    def retime(self, kernel_modules: Sequence[ModuleOp]) -> list[Score]:
        """The candidates timed again in turns (`retime_policy`), one score each, in order.

        If the interleaved run fails (a candidate hangs or crashes only now), each is timed
        alone under its own deadline instead, and its detail says so.
        """
        scores: list[Score | None] = [None] * len(kernel_modules)
        programs: dict[int, str] = {}
        for i, module in enumerate(kernel_modules):
            program = self.compile(module)
            if isinstance(program, Score):
                scores[i] = program
            else:
                programs[i] = program
        if programs:
            job = RetimeJob(tuple(programs.values()), self.retime_policy)
            reply = self.worker.call(job, self.timeout_s * len(programs))
            if reply.status == DONE:
                for i, outcome in zip(programs, reply.value, strict=True):
                    scores[i] = outcome.score()
            else:
                for i, program in programs.items():
                    alone = TimeJob(program, None, self.retime_policy)
                    score = self._score(self.worker.call(alone, self.timeout_s))
                    detail = f"{score.detail}; timed alone: the interleaved run failed: "
                    scores[i] = Score(score.time_us, score.status, detail + reply.detail)
        return [s for s in scores if s is not None]

    @staticmethod
    def _score(reply: Reply) -> Score:
        if reply.status != DONE:
            return Score(None, WORKER_STATUS[reply.status], reply.detail)
        return reply.value.score()

    def close(self) -> None:
        self.worker.close()

    def __enter__(self) -> MeasuredEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
