"""`deplodock tune`: every distinct kernel of a loop-level program searched on its own.

For each kernel (identical kernels are one: they share a structural hash), the cache is
asked first; on a miss, SP-MCTS (`mcts.py`) searches its schedule space (`space.py`), each
candidate lowered to the kernel level, checked against the loop level in the CPU
interpreter (`check.py`) and scored by the evaluator (the model, or a GPU). A candidate that
fails to lower, computes wrong values or fails to run scores zero and is kept in the record
with its reason; it never stops the search. The winner is stored in the cache under the
kernel's hash, the evaluator's target, toolchain and cost source, which is where `compile`
and `run` find it again (`replay.py`).

The program's budget is shared: each kernel still to tune gets an equal part of what is
left, capped at `kernel_budget_s`, so time a small kernel does not need goes to the next.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from xdsl.dialects.builtin import ModuleOp

from deplodock.backend.benchmark import first_line
from deplodock.dialects import loop
from deplodock.dialects.queries import launch_counts
from deplodock.tune.cache import CacheKey, TuneCache, TuneRecord, Variant
from deplodock.tune.evaluate import FAILED, Evaluator, Score
from deplodock.tune.kernels import kernel_hash, loop_kernels
from deplodock.tune.mcts import DEFAULT_EXPLORATION, INTERRUPTED, SearchResult, Trial, search
from deplodock.tune.space import Candidate, KernelSpace, lower_candidate

#: The most time one kernel's search may take unless told otherwise (issue #11: 60 s).
DEFAULT_KERNEL_BUDGET_S = 60.0
#: New variants without a better one before a search gives up.
DEFAULT_PATIENCE = 40


@dataclass(frozen=True)
class TuneOptions:
    budget_s: float | None = None  # the whole program's; None: kernel_budget_s each
    kernel_budget_s: float = DEFAULT_KERNEL_BUDGET_S
    patience: int | None = DEFAULT_PATIENCE
    max_trials: int | None = None
    seed: int = 0
    exploration: float = DEFAULT_EXPLORATION
    check: bool = True  # each candidate against the loop level in the interpreter


@dataclass
class KernelResult:
    """One kernel's outcome: its record (searched now, or from the cache)."""

    name: str
    record: TuneRecord
    cached: bool
    stopped: str = ""  # the stop rule (`mcts`), empty when cached
    launches: int = 1  # how many times the program launches it

    @property
    def speedup(self) -> float | None:
        """The heuristic schedule's time over the winner's."""
        default = self.record.default_us
        return default / self.record.best_us if default else None


@dataclass
class ProgramResult:
    kernels: list[KernelResult] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: bool = False

    def schedules(self) -> dict[str, dict[str, int]]:
        """{kernel name: its winning knobs}: what `--print-schedule` prints."""
        return {result.name: result.record.knobs for result in self.kernels}


class TuneProgress(Protocol):
    """What a display hears: a kernel starting, each variant scored, a kernel done."""

    def kernel_started(self, name: str, index: int, total: int, budget_s: float) -> None: ...

    def variant(self, name: str, trial: Trial[Candidate], best: Trial[Candidate]) -> None: ...

    def kernel_finished(self, result: KernelResult) -> None: ...


def candidate_scorer(
    kernel: loop.KernelOp, evaluator: Evaluator, check: bool, seed: int
) -> Callable[[Candidate], Score]:
    """Lower, check, evaluate: any failure is a zero score with its reason, not a crash."""
    checker = None
    if check:
        from deplodock.tune.check import KernelCheck

        checker = KernelCheck(kernel, seed)

    needs_reference = True

    def score(candidate: Candidate) -> Score:
        nonlocal needs_reference
        try:
            kernel_module = lower_candidate(candidate)
        except Exception as error:
            return Score(None, FAILED, f"does not lower: {first_line(error)}")
        if needs_reference:  # the first candidate, the heuristic's, is the GPU's reference
            evaluator.set_reference(kernel_module)
            needs_reference = False
        if checker is not None:
            verdict = checker.check(kernel_module)
            if not verdict.ok:
                return Score(None, verdict.status, verdict.detail)
        try:
            return evaluator.evaluate(kernel_module)
        except Exception as error:
            return Score(None, FAILED, first_line(error))

    return score


def tune_kernel(
    kernel: loop.KernelOp,
    evaluator: Evaluator,
    options: TuneOptions,
    budget_s: float,
    on_trial: Callable[[Trial[Candidate]], None] | None = None,
) -> SearchResult[Candidate]:
    """Searches one kernel's schedules (module doc); the result lists every variant."""
    space = KernelSpace(kernel, candidate_scorer(kernel, evaluator, options.check, options.seed))
    result = search(
        space,
        budget_s=budget_s,
        patience=options.patience,
        max_trials=options.max_trials,
        seed=options.seed,
        exploration=options.exploration,
        on_trial=on_trial,
    )
    if evaluator.measured:
        result = retimed(result, evaluator)
    return result


#: How many of the fastest variants a measuring evaluator times again, in turns.
RETIMED = 3


def retimed(result: SearchResult[Candidate], evaluator: Evaluator) -> SearchResult[Candidate]:
    """The fastest few variants timed again interleaved (`measure.py`), so drift between
    their first timings does not pick the winner; their scores are replaced."""
    top = sorted((t for t in result.trials if t.score.reward > 0), key=lambda t: -t.score.reward)[
        :RETIMED
    ]
    if len(top) < 2:
        return result
    scores = evaluator.retime([lower_candidate(t.leaf) for t in top])
    for trial, score in zip(top, scores, strict=True):
        trial.score = score
    return result


def record_of(
    key: CacheKey, name: str, result: SearchResult[Candidate], seed: int
) -> TuneRecord | None:
    """The cache record of a search: None when no variant succeeded."""
    best = result.best
    if best is None:
        return None
    first = result.trials[0]
    variants = tuple(
        Variant(t.leaf.knobs, t.score.time_us, t.score.status, t.score.detail)
        for t in result.trials
    )
    return TuneRecord(
        key=key,
        kernel_name=name,
        knobs=best.leaf.knobs,
        best_us=float(best.score.time_us or 0.0),
        default_us=first.score.time_us if first.score.reward > 0 else None,
        trials=len(result.trials),
        seconds=result.seconds,
        seed=seed,
        variants=variants,
    )


def distinct_kernels(module: ModuleOp) -> list[tuple[loop.KernelOp, str, int]]:
    """The program's kernels, one per structural hash: (kernel, hash, how many times
    `@forward` launches it or a kernel of the same hash: the `n` the tables print)."""
    launches = launch_counts(module)
    seen: dict[str, list] = {}
    for kernel in loop_kernels(module):
        digest = kernel_hash(kernel)
        seen.setdefault(digest, [kernel, digest, 0])[2] += launches.get(kernel.sym_name.data, 0)
    return [(kernel, digest, count) for kernel, digest, count in seen.values()]


class NoVariantError(RuntimeError):
    """Every variant of a kernel failed (its heuristic schedule included)."""


def tune_program(
    module: ModuleOp,
    evaluator: Evaluator,
    options: TuneOptions,
    cache: TuneCache | None = None,
    progress: TuneProgress | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ProgramResult:
    """Tunes every distinct kernel of a loop-level `module` (module doc)."""
    start = clock()
    kernels = distinct_kernels(module)
    outcome = ProgramResult()
    for index, (kernel, digest, count) in enumerate(kernels):
        name = kernel.sym_name.data
        key = CacheKey(digest, evaluator.target, evaluator.toolchain, evaluator.cost)
        cached = cache.lookup(key) if cache is not None else None
        if cached is not None:
            result = KernelResult(name, cached, cached=True, launches=count)
        else:
            budget = _kernel_budget(options, clock() - start, len(kernels) - index)
            if progress is not None:
                progress.kernel_started(name, index, len(kernels), budget)

            reporter = _Reporter(name, progress) if progress is not None else None
            on_trial = reporter.trial if reporter is not None else None
            searched = tune_kernel(kernel, evaluator, options, budget, on_trial)
            record = record_of(key, name, searched, options.seed)
            if record is None:
                reasons = {t.score.detail for t in searched.trials}
                raise NoVariantError(
                    f"kernel @{name}: every variant failed ({'; '.join(sorted(reasons))[:300]})"
                )
            if cache is not None:
                cache.store(record)
            result = KernelResult(name, record, cached=False, stopped=searched.stopped,
                                  launches=count)  # fmt: skip
            outcome.interrupted |= searched.stopped == INTERRUPTED
        outcome.kernels.append(result)
        if progress is not None:
            progress.kernel_finished(result)
        if outcome.interrupted:
            break
    outcome.seconds = clock() - start
    return outcome


def _kernel_budget(options: TuneOptions, spent: float, left: int) -> float:
    if options.budget_s is None:
        return options.kernel_budget_s
    share = max(options.budget_s - spent, 0.0) / max(left, 1)
    return min(share, options.kernel_budget_s)


@dataclass
class _Reporter:
    """Tells `progress` each variant of one kernel, with the best so far."""

    name: str
    progress: TuneProgress
    best: Trial[Candidate] | None = None

    def trial(self, trial: Trial[Candidate]) -> None:
        if trial.improved:
            self.best = trial
        self.progress.variant(self.name, trial, self.best or trial)
