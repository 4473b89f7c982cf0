"""SP-MCTS with several leaves in flight (`BatchSearch`; `search` is one in flight, which
`test_mcts.py` tests): a batch never evaluates a leaf twice, keeps the stop rules, and is
reproducible."""

from __future__ import annotations

from collections import deque

import pytest

from deplodock.tune.mcts import EXHAUSTED, TRIALS, BatchSearch
from tests.tune.test_mcts import Landscape


def batched(space: Landscape, window: int, **options):
    """Drives a `BatchSearch` as `tune/parallel.py` does: `window` leaves in flight,
    completed in the order they were proposed."""
    run = BatchSearch(space, **options)
    in_flight: deque = deque()
    while True:
        while len(in_flight) < window and (proposal := run.propose()) is not None:
            in_flight.append(proposal)
        if not in_flight:
            return run, run.result()
        proposal = in_flight.popleft()
        run.complete(proposal.key, space.score(proposal.leaf), 0.0)


@pytest.mark.parametrize("window", [1, 2, 4, 8])
def test_every_window_explores_everything_once_and_finds_the_same_winner(window):
    space = Landscape((3, 4, 2), seed=5)
    run, result = batched(space, window, seed=1)
    leaves = [t.leaf for t in result.trials]
    assert len(leaves) == len(set(leaves)) == 3 * 4 * 2 == space.evaluations
    assert result.stopped == EXHAUSTED and run.finished
    assert result.best.leaf == space.optimum


@pytest.mark.parametrize("window", [2, 4])
def test_a_batch_keeps_the_trial_limit_and_is_reproducible(window):
    levels = (4, 5, 3, 4)
    first = batched(Landscape(levels, 7), window, max_trials=30, seed=7)[1]
    second = batched(Landscape(levels, 7), window, max_trials=30, seed=7)[1]
    assert len(first.trials) == 30 and first.stopped == TRIALS
    assert [t.leaf for t in first.trials] == [t.leaf for t in second.trials]


def test_the_first_proposals_of_a_batch_are_distinct_leaves():
    """Virtual visits spread a batch: not N copies of the heuristic's leaf."""
    run = BatchSearch(Landscape((4, 5, 3, 4), 3), seed=3)
    proposals = [run.propose() for _ in range(6)]
    keys = [p.key for p in proposals if p is not None]
    assert len(keys) == 6 and len(set(keys)) == 6


def test_interrupt_drops_the_leaves_in_flight_and_keeps_the_trials():
    space = Landscape((4, 5, 3), 2)
    run = BatchSearch(space, seed=0)
    first, second = run.propose(), run.propose()
    run.complete(first.key, space.score(first.leaf), 0.0)
    run.interrupt()
    assert run.finished and run.propose() is None
    result = run.result()
    assert [t.leaf for t in result.trials] == [first.leaf] and result.stopped == "interrupted"
    assert second.key not in {t.leaf for t in result.trials}


class Asked(Landscape):
    """A landscape that keeps which states' choices were asked and which were expanded."""

    def __init__(self, levels, seed):
        super().__init__(levels, seed)
        self.asked: set = set()
        self.expanded: set = set()

    def choices(self, state):
        self.asked.add(state)
        return super().choices(state)

    def child(self, state, choice):
        self.expanded.add(state)
        return super().child(state, choice)


@pytest.mark.parametrize("window", [1, 2, 4])
def test_only_the_nodes_descended_into_are_asked_their_choices(window):
    """Asking a node its choices costs a real space a decision (`tune/space.py`: every legal
    choice tried on a copy); a node rolled out and never descended into is not asked, not
    even to tell whether the leaves in flight block it."""
    space = Asked((3, 6, 6, 6), seed=2)
    batched(space, window, max_trials=12, seed=0)
    leaves = {state for state in space.asked if len(state) == 4}
    assert space.asked - leaves == space.expanded
