"""`deplodock tune --workers N`: candidates checked and scored in parallel, on Ray.

`tuner.tune_program` scores one candidate at a time in this process. Here the search stays
in this process (the driver) and the work goes to a pool of workers:

- **What runs where.** The driver walks each kernel's tree (`mcts.BatchSearch`) and ships
  each leaf as the text of its tile-level module; a worker parses it, lowers it to the
  kernel level, checks it against the loop level in the CPU interpreter and scores it
  (`tuner.candidate_scorer`, the same function the in-process search uses). The walk is
  the smaller part: a roll-out per leaf (the scheduling passes), and the legal choices of a
  node (each tried on a copy of the kernel, the costly part) only for the few nodes the
  search descends into (`space.py`). What a worker needs of a kernel (its loop-level
  text, the evaluator, the seed) is shipped once per kernel (`KernelJob`) and kept by each
  worker. Only the driver writes the cache.
- **Reproducible.** Each kernel keeps `workers` leaves in flight and takes their scores in
  the order it proposed them (a score that lands early waits for those before it), so a
  search is a function of its seed and its window, never of which worker was quicker: the
  same seed and worker count give the same variants and winners. Another worker count
  walks the tree in another order; a winner is the best of the leaves evaluated either way.
- **Several kernels at once.** Up to `CONCURRENT_KERNELS` kernels are searched together,
  each with its own window, so a kernel whose next score is late does not leave workers
  idle. The program's budget is shared as in `tuner`, scaled by how many run together.
- **On GPUs.** With a measuring evaluator (`--device cuda`), the tasks still check each
  candidate on the CPU; the timing goes to `GpuMeasurer` actors, one per GPU
  (`num_gpus=1`), each holding a `measure.MeasuredEvaluator` with its watchdog worker (a
  hang is TIMEOUT, a crash FAILED, a fresh worker or actor takes the next candidate). The
  heuristic's schedule is each kernel's reference, and the fastest few are timed again,
  interleaved, on one actor, as in one process.
- **Faults.** A worker that dies under a candidate (killed, out of memory, a crash in
  native code) has the candidate retried once on another worker (Ray's task retry); a
  second death scores it FAILED and the search goes on. Ctrl-C cancels the work in flight
  and keeps every score that came back (the records say "interrupted", and a later run
  continues them). A cluster that goes away mid-run is one error line that says what was
  saved.

`RayPool` is the engine (Ray is the optional `distributed` extra; `ray_pool` says in one
line when it is missing); `InlinePool` evaluates in this process, for tests and for runs
that want the batch search without a cluster.
"""

from __future__ import annotations

import math
import os
import socket
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from deplodock.backend.benchmark import first_line
from deplodock.dialects import loop, make_context
from deplodock.dialects.common.schedule import Schedule
from deplodock.tune.cache import TuneCache
from deplodock.tune.evaluate import FAILED, Evaluator, Score
from deplodock.tune.kernels import loop_kernels, standalone
from deplodock.tune.mcts import INTERRUPTED, BatchSearch, Proposal, SearchResult
from deplodock.tune.space import Candidate, KernelSpace, lower_candidate
from deplodock.tune.tuner import (
    KernelResult,
    KernelTuning,
    NoVariantError,
    ProgramResult,
    TuneOptions,
    TuneProgress,
    candidate_scorer,
    distinct_kernels,
    finish_kernel,
    kernel_budget,
    known_scores,
    retimed,
    start_kernel,
)

#: How many kernels are searched at the same time.
CONCURRENT_KERNELS = 2
#: How long the driver waits for a score before it redraws the progress (seconds).
POLL_S = 0.25


# --- the worker's side --------------------------------------------------------------------


@dataclass(frozen=True)
class KernelJob:
    """What a worker needs to score any candidate of one kernel (shipped once per kernel)."""

    ident: str  # unique to this job: a worker keeps one scorer per job
    loop_text: str  # the standalone loop-level module of the kernel
    evaluator: Evaluator
    check: bool
    seed: int
    check_all: bool = False  # `TuneOptions.check_all`


#: Each worker process's scorers, by `KernelJob.ident`: a kernel's check reference is
#: computed once per worker, not once per candidate. The oldest go past `KEPT_SCORERS` (a
#: long-lived cluster serves many runs).
_SCORERS: dict[str, Callable[[Candidate], Score]] = {}
KEPT_SCORERS = 8


def _scorer(job: KernelJob) -> Callable[[Candidate], Score]:
    scorer = _SCORERS.get(job.ident)
    if scorer is None:
        (kernel,) = loop_kernels(_parse(job.loop_text))
        scorer = candidate_scorer(kernel, job.evaluator, job.check, job.seed, False, job.check_all)
        while len(_SCORERS) >= KEPT_SCORERS:
            del _SCORERS[next(iter(_SCORERS))]
        _SCORERS[job.ident] = scorer
    return scorer


def score_candidate(
    job: KernelJob, tile_text: str, knobs: tuple[tuple[str, int], ...]
) -> tuple[Score, float]:
    """A worker's task: one candidate (its tile-level text) lowered, checked and scored;
    (the score, the seconds it took). Every failure of the candidate is a FAILED score."""
    start = time.perf_counter()
    try:
        score = _scorer(job)(Candidate(Schedule(knobs), _parse(tile_text)))
    except Exception as error:
        score = Score(None, FAILED, f"worker: {first_line(error)}")
    return score, time.perf_counter() - start


class GpuMeasurer:
    """The body of a Ray actor that holds one GPU: a measuring evaluator (`measure.py`) built
    there, whose worker process and watchdog keep their meaning (a hang is TIMEOUT, a crash
    FAILED, a fresh worker for the next candidate). An actor that dies itself is restarted
    by Ray, fresh, for the next candidate; the one it was measuring is FAILED."""

    def __init__(self, factory: Callable[[], Evaluator]):
        self.evaluator: Any = factory()

    def reference(self, kernel_text: str) -> str:
        """The reference schedule built here; its program goes with every candidate."""
        self.evaluator.set_reference(_parse(kernel_text))
        return self.evaluator.reference_text

    def measure(self, kernel_text: str, reference: str | None) -> Score:
        self.evaluator.reference_text = reference
        return self.evaluator.evaluate(_parse(kernel_text))

    def retime(self, kernel_texts: list[str]) -> list[Score]:
        return self.evaluator.retime([_parse(text) for text in kernel_texts])


@dataclass(frozen=True)
class ActorEvaluator(Evaluator):
    """What a worker task measures through: the GPU actors (a candidate goes to the one its
    text hashes to) and the kernel's reference program. Picklable, so it travels in the
    `KernelJob`; the driver re-times the fastest few through it as well."""

    actors: tuple[Any, ...]
    reference: str | None
    target: str
    toolchain: str
    cost: str

    def evaluate(self, kernel_module: ModuleOp) -> Score:
        import ray
        from ray.exceptions import RayActorError

        text = str(kernel_module)
        actor = self.actors[zlib.crc32(text.encode()) % len(self.actors)]
        try:
            return ray.get(actor.measure.remote(text, self.reference))
        except RayActorError as error:
            return Score(None, FAILED, f"its GPU actor died: {first_line(error)}")

    def retime(self, kernel_modules: Sequence[ModuleOp]) -> list[Score]:
        import ray

        texts = [str(module) for module in kernel_modules]
        return ray.get(self.actors[0].retime.remote(texts))


def _parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


# --- pools ----------------------------------------------------------------------------------


class PoolLost(RuntimeError):
    """The pool's workers can no longer be reached (the cluster went away)."""


class Pool(Protocol):
    """Runs `score_candidate` somewhere; handles are opaque to the driver."""

    workers: int

    def share(self, job: KernelJob) -> Any:
        """`job` where workers can read it (Ray's object store); passed to `submit`."""
        ...

    def submit(self, job: Any, tile_text: str, knobs: tuple[tuple[str, int], ...]) -> Any: ...

    def ready(self, handles: list[Any], timeout_s: float) -> set[int]:
        """The indices of `handles` whose results are in (waits up to `timeout_s` for one)."""
        ...

    def result(self, handle: Any) -> tuple[Score, float]: ...

    def cancel(self, handles: list[Any]) -> None: ...

    def measuring(self, evaluator: Evaluator, reference: ModuleOp) -> Evaluator:
        """What workers measure a kernel's candidates through (a measuring `evaluator`),
        `reference` (its heuristic schedule) being what they must compute."""
        ...

    def close(self) -> None: ...


class InlinePool:
    """Scores each candidate in this process when it is submitted; `workers` is only the
    window each kernel keeps (the search is then the one a pool of that size makes)."""

    def __init__(self, workers: int = 1):
        self.workers = workers

    def share(self, job: KernelJob) -> Any:
        return job

    def submit(self, job: Any, tile_text: str, knobs: tuple[tuple[str, int], ...]) -> Any:
        return score_candidate(job, tile_text, knobs)

    def ready(self, handles: list[Any], timeout_s: float) -> set[int]:
        return set(range(len(handles)))

    def result(self, handle: Any) -> tuple[Score, float]:
        return handle

    def cancel(self, handles: list[Any]) -> None:
        pass

    def measuring(self, evaluator: Evaluator, reference: ModuleOp) -> Evaluator:
        evaluator.set_reference(reference)
        return evaluator

    def close(self) -> None:
        pass


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


class RayPool:
    """Candidates as Ray tasks, one CPU each: a local runtime of `workers` CPUs, or the
    cluster at `address` (its CPUs are the workers). With `measurer` (a factory of a
    measuring evaluator), one `GpuMeasurer` actor per GPU (`gpus_per_actor` each; `actors`:
    how many, by default the cluster's GPUs) times what the tasks have checked."""

    def __init__(
        self,
        workers: int | None = None,
        address: str | None = None,
        measurer: Callable[[], Evaluator] | None = None,
        actors: int | None = None,
        gpus_per_actor: float = 1.0,
    ):
        os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
        import ray

        self.ray = ray
        self.address = address
        settings: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
        if address is None:
            settings.update(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False)
        else:
            check_reachable(address)
            settings["address"] = address
        try:
            ray.init(**settings)
        except (ConnectionError, RuntimeError, ValueError) as error:
            where = f"the Ray cluster at {address}" if address else "a local Ray runtime"
            raise PoolLost(f"cannot start {where}: {first_line(error)}") from None
        self.workers = workers or max(int(ray.cluster_resources().get("CPU", 1)), 1)
        # a task whose worker dies is retried once (elsewhere); its own exceptions are scores
        self._task = ray.remote(num_cpus=1, max_retries=1)(score_candidate)
        self.actors: tuple[Any, ...] = ()
        if measurer is not None:
            count = actors if actors is not None else int(ray.cluster_resources().get("GPU", 0))
            if count < 1:
                self.close()
                raise PoolLost("the Ray cluster has no GPU to measure on")
            actor = ray.remote(num_cpus=0, num_gpus=gpus_per_actor, max_restarts=-1)(GpuMeasurer)
            self.actors = tuple(actor.remote(measurer) for _ in range(count))

    def share(self, job: KernelJob) -> Any:
        return self._guard(self.ray.put, job)

    def submit(self, job: Any, tile_text: str, knobs: tuple[tuple[str, int], ...]) -> Any:
        return self._guard(self._task.remote, job, tile_text, knobs)

    def ready(self, handles: list[Any], timeout_s: float) -> set[int]:
        done, _ = self._guard(
            self.ray.wait, handles, num_returns=1, timeout=timeout_s, fetch_local=False
        )
        if done:  # and whatever else is in already
            done, _ = self._guard(self.ray.wait, handles, num_returns=len(handles), timeout=0)
        finished = {ref.hex() for ref in done}
        return {i for i, handle in enumerate(handles) if handle.hex() in finished}

    def result(self, handle: Any) -> tuple[Score, float]:
        from ray.exceptions import RayTaskError, WorkerCrashedError

        try:
            return self._guard(self.ray.get, handle)
        except WorkerCrashedError:
            return Score(None, FAILED, "its worker died, twice (retried once)"), 0.0
        except RayTaskError as error:
            return Score(None, FAILED, f"worker: {first_line(error)}"), 0.0

    def cancel(self, handles: list[Any]) -> None:
        for handle in handles:
            try:
                self.ray.cancel(handle, force=True)
            except Exception:  # already finished, or the cluster is gone: nothing to stop
                pass

    def measuring(self, evaluator: Evaluator, reference: ModuleOp) -> Evaluator:
        if not self.actors:
            raise ValueError("this Ray pool has no GPU actors to measure on")
        program = self._guard(self.ray.get, self.actors[0].reference.remote(str(reference)))
        return ActorEvaluator(self.actors, program, evaluator.target, evaluator.toolchain,
                              evaluator.cost)  # fmt: skip

    def close(self) -> None:
        if self.ray.is_initialized():
            self.ray.shutdown()

    def _guard(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`call`, with a lost cluster (Ray's system errors, a dropped connection) as
        `PoolLost`; a candidate's own failure passes through."""
        from ray.exceptions import RaySystemError

        try:
            return call(*args, **kwargs)
        except (RaySystemError, ConnectionError) as error:
            raise PoolLost(first_line(error)) from None


#: How long joining a cluster may take to answer at all (Ray itself retries for minutes).
CONNECT_TIMEOUT_S = 5.0


def check_reachable(address: str) -> None:
    """A cluster address (`host:port`, or `ray://host:port`) that nothing answers at is a
    `PoolLost` now, not minutes of Ray's retries; other forms ("auto") go to Ray as given."""
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not port.isdigit():
        return
    try:
        socket.create_connection((host or "localhost", int(port)), CONNECT_TIMEOUT_S).close()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise PoolLost(f"cannot reach the Ray cluster at {address}: {reason}") from None


def ray_pool(
    workers: int | None, address: str | None, measurer: Callable[[], Evaluator] | None = None
) -> RayPool:
    """The Ray pool the command line asks for; one line when Ray is not installed."""
    if not ray_available():
        raise ValueError(
            "--workers and --ray-address need Ray: pip install 'deplodock[distributed]'"
        )
    return RayPool(workers, address, measurer)


# --- the driver -----------------------------------------------------------------------------


class ClusterLostError(RuntimeError):
    """The pool went away mid-run; the message says what the cache kept."""


@dataclass
class _Search:
    """One kernel being searched: its tree, and its leaves in flight in proposal order."""

    tuning: KernelTuning
    job: Any
    search: BatchSearch
    evaluator: Evaluator  # what the workers score through (`Pool.measuring` when measured)
    in_flight: deque[tuple[Proposal, Any]] = field(default_factory=deque)


@dataclass
class _Rate:
    """Variants per second since the pool started, for the display."""

    start: float
    done: int = 0


def tune_program_parallel(
    module: ModuleOp,
    evaluator: Evaluator,
    options: TuneOptions,
    pool: Pool,
    cache: TuneCache | None = None,
    progress: TuneProgress | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ProgramResult:
    """`tuner.tune_program` with the candidates scored on `pool` (module doc)."""
    return _Driver(evaluator, options, pool, cache, progress, clock).run(module)


@dataclass
class _Driver:
    evaluator: Evaluator
    options: TuneOptions
    pool: Pool
    cache: TuneCache | None
    progress: TuneProgress | None
    clock: Callable[[], float]
    results: list[tuple[int, KernelResult]] = field(default_factory=list)

    def run(self, module: ModuleOp) -> ProgramResult:
        start = self.clock()
        kernels = distinct_kernels(module)
        waiting = deque(enumerate(kernels))
        active: list[_Search] = []
        outcome = ProgramResult()
        rate = _Rate(start)
        try:
            while waiting or active:
                while waiting and len(active) < CONCURRENT_KERNELS:
                    index, (kernel, digest, count) = waiting.popleft()
                    left = len(waiting) + 1 + len(active)
                    searched = self._start(index, kernel, digest, count, len(kernels),
                                           self.clock() - start, left)  # fmt: skip
                    if searched is not None:
                        active.append(searched)
                for searched in active:
                    self._top_up(searched)
                for searched in [s for s in active if s.search.finished]:
                    active.remove(searched)
                    self._finish(searched)
                if active:
                    self._collect(active, rate)
        except KeyboardInterrupt:
            self._stop(active)
            outcome.interrupted = True
        except PoolLost as error:
            self._stop(active)
            saved = f"{len(self.results)} kernel record(s) kept in {self.cache.path}" if (
                self.cache is not None) else "nothing was saved (--no-cache)"  # fmt: skip
            raise ClusterLostError(f"lost the Ray workers ({error}); {saved}") from None
        outcome.kernels = [result for _, result in sorted(self.results, key=lambda r: r[0])]
        outcome.interrupted |= any(k.stopped == INTERRUPTED for k in outcome.kernels)
        outcome.seconds = self.clock() - start
        return outcome

    def _start(
        self,
        index: int,
        kernel: loop.KernelOp,
        digest: str,
        launches: int,
        total: int,
        spent: float,
        left: int,
    ) -> _Search | None:
        """A kernel's search started, or its cached record reported (None)."""
        evaluator, options = self.evaluator, self.options
        together = min(CONCURRENT_KERNELS, left)
        budget = kernel_budget(options, spent, math.ceil(left / together))
        tuning = start_kernel(kernel, digest, launches, index, total, evaluator, options,
                              budget, self.cache, self.progress)  # fmt: skip
        if not isinstance(tuning, KernelTuning):
            self._report(index, tuning)
            return None
        space = KernelSpace(kernel, _never_scored)
        if evaluator.measured:  # the heuristic's schedule is what every candidate must compute
            reference = lower_candidate(space.rollout(space.root())[1])
            evaluator = self.pool.measuring(evaluator, reference)
        search = BatchSearch(
            space,
            budget_s=tuning.budget_s,
            patience=options.patience,
            max_trials=options.max_trials,
            seed=options.seed,
            exploration=options.exploration,
            on_trial=tuning.on_trial,
            clock=self.clock,
            known=known_scores(tuning.earlier) if tuning.earlier is not None else None,
        )
        job = KernelJob(f"{digest}:{uuid.uuid4().hex}", str(standalone(kernel)), evaluator,
                        options.check, options.seed, options.check_all)  # fmt: skip
        return _Search(tuning, self.pool.share(job), search, evaluator)

    def _top_up(self, searched: _Search) -> None:
        """Proposals until the kernel has `workers` leaves in flight."""
        while len(searched.in_flight) < self.pool.workers:
            proposal = searched.search.propose()
            if proposal is None:
                return
            leaf: Candidate = proposal.leaf
            knobs = tuple(leaf.knobs.items())
            handle = self.pool.submit(searched.job, str(leaf.module), knobs)
            searched.in_flight.append((proposal, handle))

    def _collect(self, active: list[_Search], rate: _Rate) -> None:
        """Waits for the next score of any kernel, then hands each kernel the scores that
        are in, in the order it proposed them."""
        heads = [s.in_flight[0][1] for s in active if s.in_flight]
        if not heads:
            return
        self._pool_progress(active, rate)
        self.pool.ready(heads, POLL_S)
        for searched in active:
            while searched.in_flight:
                proposal, handle = searched.in_flight[0]
                if not self.pool.ready([handle], 0.0):
                    break
                searched.in_flight.popleft()
                score, seconds = self.pool.result(handle)
                searched.search.complete(proposal.key, score, seconds)
                rate.done += 1
                if searched.search.stopped is None:
                    self._top_up(searched)

    def _pool_progress(self, active: list[_Search], rate: _Rate) -> None:
        if self.progress is None:
            return
        in_flight = sum(len(s.in_flight) for s in active)
        elapsed = max(self.clock() - rate.start, 1e-9)
        self.progress.pool(min(in_flight, self.pool.workers), self.pool.workers,
                           rate.done / elapsed)  # fmt: skip

    def _stop(self, active: list[_Search]) -> None:
        """Ctrl-C or a lost pool: the work in flight cancelled, what came back recorded."""
        for searched in active:
            self.pool.cancel([handle for _, handle in searched.in_flight])
            searched.in_flight.clear()
            searched.search.interrupt()
            self._finish(searched, raise_empty=False)
        active.clear()

    def _finish(self, searched: _Search, raise_empty: bool = True) -> None:
        """A kernel's record stored and reported; `raise_empty` False (Ctrl-C, a lost pool):
        a kernel none of whose variants came back is left out, the others kept."""
        result: SearchResult[Candidate] = searched.search.result()
        if self.evaluator.measured and result.stopped != INTERRUPTED:
            result = retimed(result, searched.evaluator)
        try:
            finished = finish_kernel(searched.tuning, result, self.options, self.cache)
        except NoVariantError:
            if raise_empty:
                raise
            return
        self._report(searched.tuning.index, finished)

    def _report(self, index: int, result: KernelResult) -> None:
        self.results.append((index, result))
        if self.progress is not None:
            self.progress.kernel_finished(result)


def _never_scored(candidate: Candidate) -> Score:
    """The driver's `KernelSpace` only walks the tree: workers score."""
    raise AssertionError("a batch search hands its leaves to the pool")
