"""SP-MCTS on synthetic knob landscapes: it finds the optimum, beats random search at equal
budget, is reproducible with a seed, and honours its stop rules."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

import pytest

from deplodock.tune.evaluate import FAILED, Score
from deplodock.tune.mcts import (
    EXHAUSTED,
    INTERRUPTED,
    PATIENCE,
    TRIALS,
    SearchResult,
    Trial,
    search,
)

Path = tuple[int, ...]


@dataclass
class Landscape:
    """Levels of knob values; a leaf's time is a smooth bowl around a hidden optimum plus a
    pairwise interaction and per-point noise (fixed by `seed`), far from the defaults (0)."""

    levels: tuple[int, ...]
    seed: int = 0
    failing: frozenset[Path] = frozenset()
    evaluations: int = 0

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        self.optimum = tuple(rng.randrange(1, n) for n in self.levels)
        self.noise = {
            p: rng.uniform(0.0, 0.3) for p in itertools.product(*(range(n) for n in self.levels))
        }

    def time_us(self, path: Path) -> float:
        bowl = sum((a - b) ** 2 for a, b in zip(path, self.optimum, strict=True))
        pairs = sum(abs((path[i] - path[i + 1]) - (self.optimum[i] - self.optimum[i + 1]))
                    for i in range(len(path) - 1))  # fmt: skip
        return 10.0 + bowl + 0.5 * pairs + (0.0 if path == self.optimum else self.noise[path])

    # --- the Space protocol ---
    def root(self) -> Path:
        return ()

    def choices(self, state: Path) -> list[int]:
        return list(range(self.levels[len(state)])) if len(state) < len(self.levels) else []

    def child(self, state: Path, choice: int) -> Path:
        return (*state, choice)

    def rollout(self, state: Path) -> tuple[Path, Path]:
        leaf = state + (0,) * (len(self.levels) - len(state))
        return leaf, leaf

    def score(self, leaf: Path) -> Score:
        self.evaluations += 1
        if leaf in self.failing:
            return Score(None, FAILED, "planted failure")
        return Score(self.time_us(leaf))


def random_search(space: Landscape, max_trials: int, seed: int = 0) -> SearchResult[Path]:
    """The baseline the tests hold MCTS to: `max_trials` uniformly random paths (distinct
    leaves not guaranteed), each scored."""
    rng = random.Random(seed)
    trials: list[Trial[Path]] = []
    best = 0.0
    for index in range(1, max_trials + 1):
        state = space.root()
        while options := space.choices(state):
            state = space.child(state, rng.choice(list(options)))
        _, leaf = space.rollout(state)
        score = space.score(leaf)
        trials.append(Trial(index, leaf, score, 0.0, score.reward > best))
        best = max(best, score.reward)
    return SearchResult(trials, TRIALS, 0.0)


def best_time(result) -> float:
    return result.best.score.time_us


def test_finds_the_optimum_of_a_small_landscape():
    space = Landscape((4, 4, 4), seed=1)
    result = search(space, max_trials=64)
    assert result.best.leaf == space.optimum
    assert best_time(result) == pytest.approx(10.0)


def test_explores_everything_then_stops():
    space = Landscape((3, 2), seed=2)
    result = search(space)
    assert result.stopped == EXHAUSTED
    assert len(result.trials) == 6  # every leaf once (memoised)
    assert space.evaluations == 6
    assert result.best.leaf == space.optimum


def test_first_trial_is_the_heuristic():
    space = Landscape((5, 5, 5, 5), seed=3)
    result = search(space, max_trials=1)
    assert result.stopped == TRIALS
    assert [t.leaf for t in result.trials] == [(0, 0, 0, 0)]


@pytest.mark.parametrize("seed", range(6))
def test_beats_random_search_at_equal_budget(seed):
    budget = 60
    space = Landscape((6, 6, 6, 6, 6), seed=seed)  # 7776 leaves
    tuned = search(space, max_trials=budget, seed=seed)
    assert len(tuned.trials) == budget
    randoms = [best_time(random_search(space, budget, seed=s)) for s in range(5)]
    assert tuned.best.leaf == space.optimum
    assert best_time(tuned) <= min(randoms)
    assert best_time(tuned) < sum(randoms) / len(randoms)


def test_same_seed_same_search():
    def run(seed):
        return [
            t.leaf for t in search(Landscape((5, 5, 5, 5), seed=4), max_trials=40, seed=seed).trials
        ]

    assert run(7) == run(7)


def test_patience_stops_a_stagnant_search():
    space = Landscape((8, 8, 8, 8), seed=5)
    result = search(space, patience=5)
    assert result.stopped == PATIENCE
    improving = [t.index for t in result.trials if t.improved]
    assert len(result.trials) - improving[-1] == 5


def test_budget_stops_and_keeps_the_best():
    ticks = iter(range(10_000))
    result = search(Landscape((8, 8, 8)), budget_s=10, clock=lambda: next(ticks))
    assert result.stopped == "budget"
    assert result.best is not None and len(result.trials) < 8**3


def test_failed_candidates_score_zero_and_are_kept():
    space = Landscape((3, 3), seed=6)
    space.failing = frozenset({(0, 1), space.optimum})
    result = search(space)
    failed = [t for t in result.trials if t.score.status == FAILED]
    assert {t.leaf for t in failed} == {(0, 1), space.optimum}
    assert all(t.score.reward == 0 for t in failed)
    assert result.best.leaf != space.optimum


def test_ctrl_c_keeps_what_was_found():
    space = Landscape((6, 6, 6), seed=8)
    calls = 0

    def interrupt(trial):
        nonlocal calls
        calls += 1
        if calls == 10:
            raise KeyboardInterrupt

    result = search(space, on_trial=interrupt)
    assert result.stopped == INTERRUPTED
    assert len(result.trials) == 10 and result.best is not None
