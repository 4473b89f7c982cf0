"""`deplodock tune`: every distinct kernel of a loop-level program searched on its own.

For each kernel (identical kernels are one: they share a structural hash), the cache is
asked first; on a miss, SP-MCTS (`mcts.py`) searches its schedule space (`space.py`), each
candidate lowered to the kernel level, checked against the loop level in the CPU
interpreter (`check.py`) and scored by the evaluator (the model, or a GPU). A candidate that
fails to lower, computes wrong values or fails to run scores zero and is kept in the record
with its reason; it never stops the search. The winner is stored in the cache under the
kernel's hash, the evaluator's target, toolchain and cost source, which is where `compile`
and `run` find it again (`replay.py`).

Here candidates are scored one at a time in this process; `parallel.py` scores them on a
pool of Ray workers (`tune --workers N`), with the same records and cache.

The program's budget is shared: each kernel still to tune gets an equal part of what is
left, capped at `kernel_budget_s`, so time a small kernel does not need goes to the next.

A record says how its search ended (`TuneRecord.stopped`). One cut short (its budget, a
trial limit or Ctrl-C: `TuneRecord.cut_short`) is not the last word: a later run that may
spend more (a larger budget than the search took, or more trials) continues it from the
variants it scored (`mcts`' `known`); `retune` searches every kernel afresh whatever the
cache holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Protocol

from xdsl.dialects.builtin import ModuleOp

from deplodock.backend.benchmark import first_line
from deplodock.dialects import loop
from deplodock.dialects.queries import launch_counts
from deplodock.tune.cache import CacheKey, TuneCache, TuneRecord, Variant
from deplodock.tune.evaluate import FAILED, OK, Evaluator, Score
from deplodock.tune.kernels import kernel_hash, loop_kernels
from deplodock.tune.mcts import (
    DEFAULT_EXPLORATION,
    INTERRUPTED,
    TRIALS,
    SearchResult,
    Trial,
    search,
)
from deplodock.tune.space import Candidate, KernelSpace, lower_candidate

#: The most time one kernel's search may take unless told otherwise (issue #11: 60 s).
DEFAULT_KERNEL_BUDGET_S = 60.0
#: New variants without a better one before a search gives up.
DEFAULT_PATIENCE = 40
#: The least extra time worth continuing a search cut short by its budget (seconds): a run
#: with the same budget finds the record spent it and answers from the cache.
MIN_MORE_S = 1.0


@dataclass(frozen=True)
class TuneOptions:
    budget_s: float | None = None  # the whole program's; None: kernel_budget_s each
    kernel_budget_s: float = DEFAULT_KERNEL_BUDGET_S
    patience: int | None = DEFAULT_PATIENCE
    max_trials: int | None = None
    seed: int = 0
    exploration: float = DEFAULT_EXPLORATION
    check: bool = True  # candidates against the loop level in the interpreter
    check_all: bool = False  # ... even those the model puts behind the heuristic's schedule
    retune: bool = False  # search every kernel afresh, whatever the cache holds


@dataclass
class KernelResult:
    """One kernel's outcome: its record (searched now, or from the cache)."""

    name: str
    record: TuneRecord
    cached: bool
    stopped: str = ""  # the stop rule (`mcts`), empty when cached
    launches: int = 1  # how many times the program launches it
    continued: int = 0  # the variants an earlier, cut-short search had scored (0: fresh)

    @property
    def speedup(self) -> float | None:
        """The heuristic schedule's time over the winner's."""
        default = self.record.default_us
        return default / self.record.best_us if default else None

    @property
    def default_only(self) -> bool:
        """Whether only the heuristic schedule was evaluated though there was more to search
        (the budget ran out at the first variant, or Ctrl-C came): nothing was tuned."""
        return self.record.trials <= 1 and self.record.cut_short


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

    def pool(self, busy: int, workers: int, per_s: float) -> None:
        """Parallel runs (`parallel.py`): workers busy of all, variants scored per second."""


#: The detail of a variant the check skipped (`candidate_scorer`).
NOT_CHECKED = "not checked: the model puts it behind the heuristic's schedule, so it cannot win"


def candidate_scorer(
    kernel: loop.KernelOp,
    evaluator: Evaluator,
    check: bool,
    seed: int,
    needs_reference: bool = True,
    check_all: bool = False,
) -> Callable[[Candidate], Score]:
    """Lower, check, evaluate: any failure is a zero score with its reason, not a crash.
    `needs_reference`: the first candidate scored is the evaluator's reference (False when
    the caller set it: a continued search does not score the heuristic's schedule again).

    With the model (not a GPU) and `check` but not `check_all`, a candidate is checked only
    when it could win: the model scores it first, and one slower than the heuristic's
    schedule keeps its time with `NOT_CHECKED` as its detail. The heuristic's schedule is
    itself checked (scored in full the first time the bar is needed), and the winner is
    the fastest variant, so the winner is always a checked one; a wrong heuristic makes the
    bar zero, and every candidate is checked. The check is most of a candidate's cost
    (`bench/results/scoring-cost.md`), and most candidates lose. The bar depends only on
    the kernel, so which worker scores what changes nothing (`parallel.py`). A GPU
    evaluator checks every candidate first: a wrong kernel is not run on the device."""
    checker = None
    if check:
        from deplodock.tune.check import KernelCheck

        checker = KernelCheck(kernel, seed)
    contenders_only = checker is not None and not check_all and not evaluator.measured
    heuristic: list[tuple[Hashable, Score]] = []  # its knobs and full score, once known

    def lowered(candidate: Candidate) -> ModuleOp | Score:
        try:
            return lower_candidate(candidate)
        except Exception as error:
            return Score(None, FAILED, f"does not lower: {first_line(error)}")

    def evaluated(kernel_module: ModuleOp) -> Score:
        try:
            return evaluator.evaluate(kernel_module)
        except Exception as error:
            return Score(None, FAILED, first_line(error))

    def check_failure(kernel_module: ModuleOp) -> Score | None:
        """The check's verdict as a zero score, or None when it passes (or nothing checks)."""
        if checker is None:
            return None
        verdict = checker.check(kernel_module)
        return None if verdict.ok else Score(None, verdict.status, verdict.detail)

    def full(candidate: Candidate) -> Score:
        nonlocal needs_reference
        kernel_module = lowered(candidate)
        if isinstance(kernel_module, Score):
            return kernel_module
        if needs_reference:  # the first candidate, the heuristic's, is the GPU's reference
            evaluator.set_reference(kernel_module)
            needs_reference = False
        failure = check_failure(kernel_module)
        return failure if failure is not None else evaluated(kernel_module)

    def heuristic_score() -> tuple[Hashable, Score]:
        if not heuristic:
            space = KernelSpace(kernel, full)
            knobs, default = space.rollout(space.root())
            heuristic.append((knobs, full(default)))
        return heuristic[0]

    def contender(candidate: Candidate) -> Score:
        knobs, default_score = heuristic_score()
        if tuple(candidate.knobs.items()) == knobs:
            return default_score
        kernel_module = lowered(candidate)
        if isinstance(kernel_module, Score):
            return kernel_module
        score = evaluated(kernel_module)
        if score.status != OK:
            return score
        if score.reward < default_score.reward:
            return Score(score.time_us, OK, NOT_CHECKED)
        failure = check_failure(kernel_module)
        return failure if failure is not None else score

    return contender if contenders_only else full


def tune_kernel(
    kernel: loop.KernelOp,
    evaluator: Evaluator,
    options: TuneOptions,
    budget_s: float,
    on_trial: Callable[[Trial[Candidate]], None] | None = None,
    earlier: TuneRecord | None = None,
) -> SearchResult[Candidate]:
    """Searches one kernel's schedules (module doc); the result lists every variant.
    `earlier`: a record cut short, whose variants the search continues from."""
    known = known_scores(earlier) if earlier is not None else {}
    scorer = candidate_scorer(
        kernel, evaluator, options.check, options.seed, not known, options.check_all
    )
    space = KernelSpace(kernel, scorer)
    if known and evaluator.measured:  # the heuristic's schedule, scored before, is the reference
        evaluator.set_reference(lower_candidate(space.rollout(space.root())[1]))
    result = search(
        space,
        budget_s=budget_s,
        patience=options.patience,
        max_trials=options.max_trials,
        seed=options.seed,
        exploration=options.exploration,
        on_trial=on_trial,
        known=known,
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


def known_scores(record: TuneRecord) -> dict[tuple[tuple[str, int], ...], Score]:
    """An earlier search's variants as `mcts` knows leaves: by knobs (`space.rollout`'s key)."""
    return {tuple(v.knobs.items()): Score(v.time_us, v.status, v.detail) for v in record.variants}


def record_of(
    key: CacheKey,
    name: str,
    result: SearchResult[Candidate],
    seed: int,
    earlier: TuneRecord | None = None,
) -> TuneRecord | None:
    """The cache record of a search: None when no variant succeeded. A search continuing
    `earlier` keeps its variants this one did not reach again, its time, and its winner
    where this search found none faster (so the record replaces it in the cache)."""
    best = result.best
    if best is None:
        return None
    first = result.trials[0]
    variants = tuple(
        Variant(t.leaf.knobs, t.score.time_us, t.score.status, t.score.detail)
        for t in result.trials
    )
    knobs, best_us = best.leaf.knobs, float(best.score.time_us or 0.0)
    seconds = result.seconds
    if earlier is not None:
        reached = {v.knobs for v in variants}
        variants += tuple(v for v in earlier.variants if v.knobs not in reached)
        seconds += earlier.seconds
        if earlier.best_us < best_us:
            knobs, best_us = earlier.knobs, earlier.best_us
    return TuneRecord(
        key=key,
        kernel_name=name,
        knobs=knobs,
        best_us=best_us,
        default_us=first.score.time_us if first.score.reward > 0 else None,
        trials=len(variants),
        seconds=seconds,
        seed=seed,
        variants=variants,
        stopped=result.stopped,
    )


def searches_on(record: TuneRecord, options: TuneOptions, budget_s: float) -> bool:
    """Whether a run with `options` and `budget_s` for this kernel continues the search
    `record` holds: it was cut short, and this run may spend more (module doc)."""
    if not record.cut_short:
        return False
    if options.max_trials is not None and options.max_trials <= record.trials:
        return False
    if record.stopped == TRIALS:
        return True  # this run's trial limit (or none) is above the one that stopped it
    return budget_s >= record.seconds + MIN_MORE_S


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

    @classmethod
    def of(cls, name: str, trials: list[Trial[Candidate]]) -> NoVariantError:
        """The error of kernel `name`, with the distinct reasons its `trials` failed."""
        reasons = "; ".join(sorted({t.score.detail for t in trials}))
        return cls(f"kernel @{name}: every variant failed ({reasons[:300]})")


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
        budget = kernel_budget(options, clock() - start, len(kernels) - index)
        tuning = start_kernel(kernel, digest, count, index, len(kernels), evaluator, options,
                              budget, cache, progress)  # fmt: skip
        if isinstance(tuning, KernelTuning):
            searched = tune_kernel(kernel, evaluator, options, tuning.budget_s,
                                   tuning.on_trial, tuning.earlier)  # fmt: skip
            result = finish_kernel(tuning, searched, options, cache)
            outcome.interrupted |= searched.stopped == INTERRUPTED
        else:
            result = tuning
        outcome.kernels.append(result)
        if progress is not None:
            progress.kernel_finished(result)
        if outcome.interrupted:
            break
    outcome.seconds = clock() - start
    return outcome


@dataclass
class KernelTuning:
    """One kernel whose search runs (`start_kernel`): what its record needs at the end
    (`finish_kernel`), the budget left to it, and what hears its variants. The one home of
    the per-kernel bookkeeping of `tune_program` and of `parallel.py`'s driver."""

    index: int
    name: str
    key: CacheKey
    launches: int
    budget_s: float
    earlier: TuneRecord | None  # a record cut short, which the search continues
    on_trial: Callable[[Trial[Candidate]], None] | None


def start_kernel(
    kernel: loop.KernelOp,
    digest: str,
    launches: int,
    index: int,
    total: int,
    evaluator: Evaluator,
    options: TuneOptions,
    budget_s: float,
    cache: TuneCache | None,
    progress: TuneProgress | None,
) -> KernelResult | KernelTuning:
    """The cache asked for the `index`-th of `total` kernels: its cached result, or, when
    there is none or this run continues it (`searches_on`), the search to run (the display
    told it starts; the time a continued record took counts against `budget_s`)."""
    name = kernel.sym_name.data
    key = CacheKey(digest, evaluator.target, evaluator.toolchain, evaluator.cost)
    cached = cache.lookup(key) if cache is not None and not options.retune else None
    if cached is not None and not searches_on(cached, options, budget_s):
        return KernelResult(name, cached, cached=True, launches=launches)
    if progress is not None:
        progress.kernel_started(name, index, total, budget_s)
    if cached is not None:
        budget_s = max(budget_s - cached.seconds, 0.0)
    on_trial = Reporter(name, progress).trial if progress is not None else None
    return KernelTuning(index, name, key, launches, budget_s, cached, on_trial)


def finish_kernel(
    tuning: KernelTuning,
    searched: SearchResult[Candidate],
    options: TuneOptions,
    cache: TuneCache | None,
) -> KernelResult:
    """A search's record stored in the cache, as the kernel's result; `NoVariantError`
    when no variant succeeded."""
    record = record_of(tuning.key, tuning.name, searched, options.seed, tuning.earlier)
    if record is None:
        raise NoVariantError.of(tuning.name, searched.trials)
    if cache is not None:
        cache.store(record, replace=options.retune)
    continued = tuning.earlier.trials if tuning.earlier is not None else 0
    return KernelResult(tuning.name, record, cached=False, stopped=searched.stopped,
                        launches=tuning.launches, continued=continued)  # fmt: skip


def kernel_budget(options: TuneOptions, spent: float, left: int) -> float:
    """A kernel's share of what is left of the program's budget (module doc), `left`
    kernels still to tune."""
    if options.budget_s is None:
        return options.kernel_budget_s
    share = max(options.budget_s - spent, 0.0) / max(left, 1)
    return min(share, options.kernel_budget_s)


@dataclass
class Reporter:
    """Tells `progress` each variant of one kernel, with the best so far."""

    name: str
    progress: TuneProgress
    best: Trial[Candidate] | None = None

    def trial(self, trial: Trial[Candidate]) -> None:
        if trial.improved:
            self.best = trial
        self.progress.variant(self.name, trial, self.best or trial)
