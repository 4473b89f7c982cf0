"""Single-player Monte Carlo tree search (SP-MCTS) over a tree of decisions.

The tree is a schedule built one decision at a time (`space.py`: one level per tunable
pass); a leaf is a complete schedule with a time. Each iteration:

1. **select**: from the root, descend to the child maximising
   `best(child) / best(all) + c * sqrt(ln visits(parent) / visits(child))`. A child's value
   is the *best* reward found below it, not the mean (one player, no opponent: the search
   wants the single best leaf), and dividing by the best reward so far puts it in [0, 1],
   so `c` has no unit whatever the times are. Children never visited come first, in the
   order the space gives them (its prior: the heuristic's own choice first); the prior only
   orders, it never adds to a reward. Subtrees already explored in full are skipped.
2. **expand** the first unvisited child, and **roll out** from it: the space completes the
   schedule with its defaults (the passes' heuristics), the cheapest good guess.
3. **evaluate** the leaf (memoised: a schedule reached twice is scored once) and
   **back-propagate** its reward (1 / time; 0 for a failed candidate) as a max.

It stops at the time budget, after `patience` new leaves without a better one, at
`max_trials` leaves, when the whole tree has been explored, or on Ctrl-C (keeping what was
found). Ties are broken by a generator seeded with `seed`, so a run with a trial limit is
reproducible.

`BatchSearch` is the search with several leaves in flight, for a pool of workers
(`parallel.py`); `search` is that search with one leaf in flight, scored in this process.

A search cut short (by its budget, a trial limit or Ctrl-C) is continued by handing the
next one what it scored (`known`): those leaves are not scored again, they take no time
and count as the trials they were, so the same seed walks the same tree on from where the
first search stopped.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from deplodock.tune.evaluate import Score

State = TypeVar("State")
Leaf = TypeVar("Leaf")

#: The exploration constant: the weight of the visit term against the normalised reward.
#: Small, because a tuning budget buys tens of leaves, not thousands: with 0.1 the search
#: found the optimum of every synthetic landscape of `tests/tune/test_mcts.py` in 60 of 7776
#: leaves, where 0.5 (closer to the textbook sqrt 2) missed a third of them.
DEFAULT_EXPLORATION = 0.1
#: Stop rules' reasons, as `SearchResult.stopped` gives them.
BUDGET, PATIENCE, TRIALS, EXHAUSTED, INTERRUPTED = (
    "budget",
    "patience",
    "trials",
    "exhausted",
    "interrupted",
)
#: The stop rules that cut a search short of its end (more time or trials would have searched
#: on); patience and exhaustion end it. `tuner` continues a search cut short.
CUT_SHORT = (BUDGET, TRIALS, INTERRUPTED)


class Space(Protocol[State, Leaf]):
    """A tree of decisions: what a node can choose, and what its defaults complete it to."""

    def root(self) -> State: ...

    def choices(self, state: State) -> Sequence[Any]:
        """The options at `state`, the most promising first; empty at a leaf."""
        ...

    def child(self, state: State, choice: Any) -> State: ...

    def rollout(self, state: State) -> tuple[Hashable, Leaf]:
        """The leaf the defaults reach from `state`, with a key that identifies it."""
        ...

    def score(self, leaf: Leaf) -> Score: ...


@dataclass
class Trial(Generic[Leaf]):
    """One leaf evaluated: the n-th (from 1), its score, and whether it was a new best."""

    index: int
    leaf: Leaf
    score: Score
    seconds: float
    improved: bool
    known: bool = False  # scored by an earlier search (`known`), not by this one


@dataclass
class SearchResult(Generic[Leaf]):
    trials: list[Trial[Leaf]]
    stopped: str
    seconds: float

    @property
    def best(self) -> Trial[Leaf] | None:
        """The fastest trial that succeeded (the first of equals)."""
        ok = [t for t in self.trials if t.score.reward > 0]
        return max(ok, key=lambda t: (t.score.reward, -t.index)) if ok else None


@dataclass
class _Node(Generic[State]):
    state: State
    parent: _Node[State] | None
    options: Sequence[Any] | None = None  # None until first asked
    children: list[_Node[State]] = field(default_factory=list)
    visits: int = 0
    best: float = 0.0
    exhausted: bool = False
    waiting: bool = False  # its leaf is being evaluated (`BatchSearch`)


class _Stop(Exception):
    def __init__(self, reason: str):
        self.reason = reason


@dataclass
class _Search(Generic[State, Leaf]):
    """The tree's statistics and the rules on them (selection, back-propagation, the stop
    rules); `BatchSearch` walks the tree with them."""

    space: Space[State, Leaf]
    exploration: float
    rng: random.Random
    deadline: float | None
    patience: int | None
    max_trials: int | None
    on_trial: Callable[[Trial[Leaf]], None] | None
    clock: Callable[[], float]
    known: Mapping[Hashable, Score] = field(default_factory=dict)
    trials: list[Trial[Leaf]] = field(default_factory=list)
    scores: dict[Hashable, float] = field(default_factory=dict)
    global_best: float = 0.0
    since_best: int = 0

    def options(self, node: _Node[State]) -> Sequence[Any]:
        if node.options is None:
            node.options = list(self.space.choices(node.state))
        return node.options

    def select(
        self, node: _Node[State], skip: Callable[[_Node[State]], bool] = lambda child: False
    ) -> _Node[State] | None:
        """The child of `node` to descend into: of those not exhausted nor `skip`ped, the
        best value, ties broken by the generator (None when none is left). `skip` is asked
        only of the children that could win, best value first: asking may cost the space a
        decision (`BatchSearch._blocked`). The same child as filtering them all first."""
        children = [c for c in node.children if not c.exhausted]
        scale = self.global_best or 1.0
        log_visits = math.log(max(node.visits, 1))

        def value(child: _Node[State]) -> float:
            bonus = self.exploration * math.sqrt(log_visits / max(child.visits, 1))
            return child.best / scale + bonus

        values = [value(c) for c in children]
        top: float | None = None
        ties: list[int] = []
        for i in sorted(range(len(children)), key=lambda i: -values[i]):
            if top is not None and values[i] < top - 1e-12:
                break
            if not skip(children[i]):
                top = values[i] if top is None else top
                ties.append(i)
        if not ties:
            return None
        return self.rng.choice([children[i] for i in sorted(ties)])

    def record(self, key: Hashable, leaf: Leaf, score: Score, seconds: float) -> float:
        """A leaf's score taken into the search: memoised, a trial, the best updated."""
        reward = score.reward
        self.scores[key] = reward
        improved = reward > self.global_best
        trial = Trial(len(self.trials) + 1, leaf, score, seconds, improved, key in self.known)
        self.trials.append(trial)
        if improved:
            self.global_best, self.since_best = reward, 0
        else:
            self.since_best += 1
        if self.on_trial is not None:
            self.on_trial(trial)
        return reward

    def back_propagate(
        self, node: _Node[State], reward: float, leaf: bool, visit: bool = True
    ) -> None:
        """The reward up the path as a max; `visit`: count the visit too (a batch counted it
        when it proposed the leaf, `BatchSearch`)."""
        if leaf:
            node.exhausted = True
        current: _Node[State] | None = node
        while current is not None:
            current.visits += visit
            current.best = max(current.best, reward)
            options = current.options
            if (
                options is not None
                and options
                and len(current.children) == len(options)
                and all(c.exhausted for c in current.children)
            ):
                current.exhausted = True
            current = current.parent
        self.check_stop()

    def check_time(self) -> None:
        if self.deadline is not None and self.clock() >= self.deadline and self.trials:
            raise _Stop(BUDGET)

    def check_stop(self) -> None:
        if self.max_trials is not None and len(self.trials) >= self.max_trials:
            raise _Stop(TRIALS)
        if self.patience is not None and self.since_best >= self.patience:
            raise _Stop(PATIENCE)
        self.check_time()


@dataclass
class Proposal(Generic[Leaf]):
    """A leaf a `BatchSearch` wants evaluated, known by `key`."""

    key: Hashable
    leaf: Leaf


class BatchSearch(Generic[State, Leaf]):
    """The same search with several leaves in flight, for evaluators that run in parallel.

    The caller asks for leaves (`propose`) while it has room, evaluates them where it likes
    and hands each score back (`complete`). Between proposal and result a leaf's path counts
    the visit already (a virtual visit: the exploration bonus of that subtree shrinks, so
    the next proposal goes elsewhere, while its value waits for the reward), and a leaf in
    flight is not selected again. A roll-out that reaches a leaf already in flight waits for
    that leaf's score instead of costing a second evaluation.

    The search is a function of the order it is told scores in. A caller that keeps a fixed
    number of leaves in flight and completes them in the order they were proposed (as
    `tune/parallel.py` does) gets the same trials from the same seed however long each
    evaluation takes; with one leaf in flight it makes exactly `search`'s trials.
    """

    def __init__(
        self,
        space: Space[State, Leaf],
        budget_s: float | None = None,
        patience: int | None = None,
        max_trials: int | None = None,
        seed: int = 0,
        exploration: float = DEFAULT_EXPLORATION,
        on_trial: Callable[[Trial[Leaf]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        known: Mapping[Hashable, Score] | None = None,
    ):
        self.start = clock()
        deadline = self.start + budget_s if budget_s is not None else None
        self.run = _Search(space, exploration, random.Random(seed), deadline, patience,
                           max_trials, on_trial, clock, known=known or {})  # fmt: skip
        self.root: _Node[State] = _Node(space.root(), None)
        self.stopped: str | None = None
        #: In-flight leaves by key: the leaf, and the nodes that wait for its reward.
        self.waiting: dict[Hashable, tuple[Leaf, list[tuple[_Node[State], bool]]]] = {}

    @property
    def finished(self) -> bool:
        """No leaf in flight, and none to propose: a stop rule held or the tree is done."""
        return not self.waiting and (self.stopped is not None or self.root.exhausted)

    def propose(self) -> Proposal[Leaf] | None:
        """The next leaf to evaluate; None when a stop rule holds, the tree is explored, or
        every unexplored part waits on leaves in flight (ask again after a `complete`)."""
        run = self.run
        while self.stopped is None and not self.root.exhausted:
            if run.max_trials is not None and len(run.trials) + len(self.waiting) >= run.max_trials:
                return None
            if self._out_of_time():
                return None
            found = self._descend()
            if found is None:
                return None
            node, is_leaf = found
            key, leaf = run.space.rollout(node.state)
            self._visit(node)
            if key in self.waiting:
                node.waiting = True
                self.waiting[key][1].append((node, is_leaf))
                continue
            if key in run.scores:
                self._settle(node, run.scores[key], is_leaf)
            elif key in run.known:
                self._settle(node, run.record(key, leaf, run.known[key], 0.0), is_leaf)
            elif self._out_of_time():  # the roll-out took the last of the budget
                return None
            else:
                node.waiting = True
                self.waiting[key] = (leaf, [(node, is_leaf)])
                return Proposal(key, leaf)
        return None

    def complete(self, key: Hashable, score: Score, seconds: float) -> None:
        """The score of a proposed leaf (`seconds`: what evaluating it took)."""
        leaf, nodes = self.waiting.pop(key)
        reward = self.run.record(key, leaf, score, seconds)
        for node, is_leaf in nodes:
            node.waiting = False
            self._settle(node, reward, is_leaf)

    def interrupt(self) -> None:
        """Stops here (Ctrl-C): the leaves in flight are dropped, the trials kept."""
        self.stopped = self.stopped or INTERRUPTED
        self.waiting.clear()

    def result(self) -> SearchResult[Leaf]:
        run = self.run
        return SearchResult(run.trials, self.stopped or EXHAUSTED, run.clock() - self.start)

    # --- helpers -------------------------------------------------------------------------

    def _descend(self) -> tuple[_Node[State], bool] | None:
        """Selection and expansion as in `search`, past the subtrees that wait on leaves in
        flight: (the node to roll out, whether it is a leaf reached by selection)."""
        node = self.root
        while True:
            options = self.run.options(node)
            if not options:
                return node, True
            if len(node.children) < len(options):
                child = _Node(self.run.space.child(node.state, options[len(node.children)]), node)
                node.children.append(child)
                return child, False
            selected = self.run.select(node, self._blocked)
            if selected is None:
                return None
            node = selected

    def _blocked(self, node: _Node[State]) -> bool:
        """Whether everything left below `node` waits on leaves in flight. A node whose
        choices were never asked has no children: only its own leaf can wait, and asking
        would cost the space a decision (`space.py`) the descent may never need."""
        if node.options is None and not node.waiting:
            return False
        options = self.run.options(node)
        if not options:
            return node.waiting
        if len(node.children) < len(options):
            return False
        return all(c.exhausted or self._blocked(c) for c in node.children)

    def _out_of_time(self) -> bool:
        """Past the deadline (stopped: BUDGET), once a leaf was evaluated or is in flight:
        the first leaf is always evaluated."""
        run = self.run
        if run.deadline is None or run.clock() < run.deadline:
            return False
        if not run.trials and not self.waiting:
            return False
        self.stopped = BUDGET
        return True

    @staticmethod
    def _visit(node: _Node[State]) -> None:
        current: _Node[State] | None = node
        while current is not None:
            current.visits += 1
            current = current.parent

    def _settle(self, node: _Node[State], reward: float, is_leaf: bool) -> None:
        try:
            self.run.back_propagate(node, reward, is_leaf, visit=False)
        except _Stop as stop:
            self.stopped = self.stopped or stop.reason


def search(space: Space[State, Leaf], **options: Any) -> SearchResult[Leaf]:
    """Searches `space` until a stop rule holds (module doc), one leaf at a time, scored in
    this process by the space; `options` are `BatchSearch`'s (the budget, the stop rules,
    the seed, `known`: the scores of an earlier search of the same space, by leaf key,
    continued here). The first leaf (the defaults all the way down) is always evaluated,
    whatever the budget."""
    run: BatchSearch[State, Leaf] = BatchSearch(space, **options)
    clock = run.run.clock
    try:
        while (proposal := run.propose()) is not None:
            start = clock()
            score = space.score(proposal.leaf)
            run.complete(proposal.key, score, clock() - start)
    except KeyboardInterrupt:
        run.interrupt()
    return run.result()
