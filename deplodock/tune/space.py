"""The schedule space of one kernel, as the tree `mcts.py` searches.

The scheduling passes declare it (`passes/tile/choices.py`): walking the tile stage's passes
in pipeline order, each `Tunable` pass that applies to the kernel as the passes before it
left it is one level of the tree, and its legal choices are that level's branches. A node
holds the standalone tile-level module at its decision point, so a child costs one pass
(and the untunable passes up to the next decision), never a replay from the root.

A child runs on to its decision point only when its own choices are asked for. Finding the
legal choices of a pass runs it once per candidate value on a copy of the kernel, which is
most of what walking the tree costs; most nodes of a search are rolled out once and never
descended into again, and a roll-out needs no decision (it runs every pass with its own
choice, as running on to the decision does), so their choices are never computed. The tree
is the same either way: only when the work is done changes.

The branches are ordered by the prior: the choice the pass makes on its own (its
heuristic) first, then the others by how many knobs they share with it. A roll-out runs the
remaining passes without writing a knob, so each pass takes its own choice: the first leaf
the search scores is exactly the schedule `deplodock compile` gives without tuning.

A leaf is the kernel's complete `schedule` (every knob every pass recorded). Written on the
loop kernel, it reproduces the same kernel (`replay.py`), so it is what the cache keeps and
what `--print-schedule` prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from deplodock.dialects import loop, make_context, tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.passes.pipelines import STAGE_PASSES, build_pipeline, lower
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable
from deplodock.tune.evaluate import Score
from deplodock.tune.kernels import standalone


@dataclass
class Point:
    """A node of the tree: the tile-level module before pass `next_pass` (an index into the
    tile passes), and that pass's legal choices (empty past the last pass). `legal` is None
    until the node is decided (`KernelSpace.decide`: the module run on to its decision point,
    `next_pass` moved there); a roll-out does not need it (module doc)."""

    module: ModuleOp
    next_pass: int
    legal: tuple[Schedule, ...] | None = None


@dataclass(frozen=True)
class Candidate:
    """A leaf: the complete schedule and the tile-level module it produced."""

    knobs: Schedule
    module: ModuleOp


def tile_kernel(module: ModuleOp) -> tile.KernelOp:
    """The tuned kernel: the first tile kernel (a pass may add helpers after it, as
    `tile-split-k` adds `<name>_zero` or `<name>_combine`, which keep their defaults)."""
    return next(op for op in module.ops if isinstance(op, tile.KernelOp))


def schedule_of(module: ModuleOp) -> Schedule:
    """The knobs recorded on the tuned kernel, in the order they were written."""
    return Schedule.of(tile_kernel(module))


def _prior(default: Schedule) -> Callable[[Schedule], tuple[float, ...]]:
    """Sort key of a pass's choices: the heuristic's first, then by knobs shared with it, then
    by how far (in powers of two) the others are from it."""

    def key(choice: Schedule) -> tuple[float, ...]:
        shared = sum(default.get(name) == value for name, value in choice.items())
        distance = sum(
            abs(math.log2(1 + abs(value)) - math.log2(1 + abs(default.get(name, value))))
            for name, value in choice.items()
        )
        return (-shared, distance)

    return key


class KernelSpace:
    """The tree of schedules of one loop kernel (module doc); `score` is injected."""

    def __init__(self, kernel: loop.KernelOp, score: Callable[[Candidate], Score]):
        self.kernel = kernel
        self._score = score
        self.ctx: Context = make_context()
        assert STAGE_PASSES["tile"][0] == "convert-loop-to-tile"
        self.convert, *passes = build_pipeline("tile", start="loop")
        self.passes: tuple[ModulePass, ...] = tuple(passes)

    # --- the mcts.Space protocol ---------------------------------------------------------

    def root(self) -> Point:
        module = standalone(self.kernel)
        self.convert.apply(self.ctx, module)
        return Point(module, 0)

    def choices(self, point: Point) -> list[Schedule]:
        legal = self.decide(point)
        if not legal:
            return []
        return sorted(legal, key=_prior(self._default_knobs(point)))

    def child(self, point: Point, choice: Schedule) -> Point:
        """The node after `choice` at `point`'s decision: one pass, undecided (module doc)."""
        self.decide(point)
        module = point.module.clone()
        schedule.write_knobs(tile_kernel(module), choice)
        self.passes[point.next_pass].apply(self.ctx, module)
        return Point(module, point.next_pass + 1)

    def rollout(self, point: Point) -> tuple[Hashable, Candidate]:
        module = point.module.clone()
        for scheduling_pass in self.passes[point.next_pass :]:
            scheduling_pass.apply(self.ctx, module)
        module.verify()
        knobs = schedule_of(module)
        return tuple(knobs.items()), Candidate(knobs, module)

    def score(self, leaf: Candidate) -> Score:
        return self._score(leaf)

    # --- helpers -------------------------------------------------------------------------

    def decide(self, point: Point) -> tuple[Schedule, ...]:
        """`point` run on (in place, once) from `next_pass` until a pass offers more than
        one legal choice (a decision), or to the end: untunable passes, passes that do not
        apply, and forced choices; the decision's legal choices (empty at the end)."""
        if point.legal is not None:
            return point.legal
        index = point.next_pass
        while index < len(self.passes):
            scheduling_pass = self.passes[index]
            if isinstance(scheduling_pass, Tunable):
                legal = scheduling_pass.legal_choices(tile_kernel(point.module))
                if len(legal) > 1:
                    point.next_pass, point.legal = index, tuple(legal)
                    return point.legal
            scheduling_pass.apply(self.ctx, point.module)
            index += 1
        point.next_pass, point.legal = index, ()
        return point.legal

    def _default_knobs(self, point: Point) -> Schedule:
        """What the pass at `point` chooses on its own: run it on a copy and read back."""
        module = point.module.clone()
        before = schedule_of(module)
        self.passes[point.next_pass].apply(self.ctx, module)
        after = schedule_of(module)
        return Schedule((name, value) for name, value in after.items() if before.get(name) != value)


def lower_candidate(candidate: Candidate) -> ModuleOp:
    """The kernel-level module of a leaf (a copy: the leaf stays as it is)."""
    return lower(candidate.module.clone(), "kernel", start="tile")
