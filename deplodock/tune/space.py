"""The schedule space of one kernel, as the tree `mcts.py` searches.

The scheduling passes declare it (`passes/tile/choices.py`): walking the tile stage's passes
in pipeline order, each `Tunable` pass that applies to the kernel as the passes before it
left it is one level of the tree, and its legal choices are that level's branches. A node
holds the standalone tile-level module at its decision point, so a child costs one pass
(and the untunable passes up to the next decision), never a replay from the root.

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


@dataclass(frozen=True)
class Point:
    """A node of the tree: the tile-level module before pass `next_pass` (an index into the
    tile passes), and that pass's legal choices (empty past the last pass)."""

    module: ModuleOp
    next_pass: int
    legal: tuple[Schedule, ...] = ()


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
        return self._advance(module, 0)

    def choices(self, point: Point) -> list[Schedule]:
        if not point.legal:
            return []
        return sorted(point.legal, key=_prior(self._default_knobs(point)))

    def child(self, point: Point, choice: Schedule) -> Point:
        module = point.module.clone()
        schedule.write_knobs(tile_kernel(module), choice)
        self.passes[point.next_pass].apply(self.ctx, module)
        return self._advance(module, point.next_pass + 1)

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

    def _advance(self, module: ModuleOp, index: int) -> Point:
        """Runs passes on `module` from `index` until one offers more than one legal choice
        (a decision), or to the end: untunable passes, passes that do not apply, and forced
        choices."""
        while index < len(self.passes):
            scheduling_pass = self.passes[index]
            if isinstance(scheduling_pass, Tunable):
                legal = scheduling_pass.legal_choices(tile_kernel(module))
                if len(legal) > 1:
                    return Point(module, index, tuple(legal))
            scheduling_pass.apply(self.ctx, module)
            index += 1
        return Point(module, index)

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
