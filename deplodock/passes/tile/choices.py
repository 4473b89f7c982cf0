"""The search space of a schedule: the knob values each scheduling pass accepts for a kernel.

A tuner builds a schedule one decision at a time, in pipeline order: before pass P runs on a
kernel it asks P for `legal_choices(kernel)`, picks one, writes it on the kernel's
`schedule` and lets P apply it (P reads its knobs before its options). So the space is
declared by the passes themselves, for the kernel as the passes before P left it:

```python
for p in tile_passes:
    for kernel in kernels:
        options = p.legal_choices(kernel) if isinstance(p, Tunable) else []
        if options:
            schedule.write_knobs(kernel, pick(options))
    p.apply(ctx, module)
```

A pass states what it could take (`candidates`: its value grid, e.g. every BM x BN tile
no larger than twice the output) and when it applies at all (`applies_to`); the legal
choices are the candidates that the pass, run on a copy of the kernel, takes as given:
it succeeds, the kernel verifies (threads per block, shared memory, alignment), and the
knobs it records are the ones asked for (a pass that would clamp a value, as
`tile-multibuffer` clamps a depth whose buffers overflow shared memory, has not taken it).
The copy makes the space exact without a second statement of each pass's limits.
"""

from __future__ import annotations

import itertools
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException, PassFailedException, VerifyException

from deplodock.dialects import make_context, tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.passes.tile import schedule
from deplodock.passes.tile.kernel_pass import TileKernelPass


def grid(**values: Sequence[int]) -> list[Schedule]:
    """Every combination of the given knob values (a Cartesian product, in order): one
    choice of a pass is a partial `Schedule`, e.g. `bm=128 bn=64 group=8`."""
    names = list(values)
    return [
        Schedule(zip(names, combo, strict=True)) for combo in itertools.product(*values.values())
    ]


def _taken(scheduling_pass: TileKernelPass, kernel: tile.KernelOp, choice: Schedule) -> bool:
    """Whether the pass, run on a copy of `kernel` with `choice` written, takes it."""
    copy = kernel.clone()
    schedule.write_knobs(copy, choice)
    module = ModuleOp([copy])
    try:
        scheduling_pass.apply(make_context(), module)
        module.verify()
    except (PassFailedException, VerifyException, DiagnosticException):
        return False
    return all(schedule.read_knob(copy, name, -1) == value for name, value in choice.items())


@dataclass(frozen=True)
class Tunable(TileKernelPass):
    """A scheduling pass whose knobs a tuner may choose."""

    #: The knobs the pass decides: the keys of each of its choices.
    knobs: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def applies_to(self, kernel: tile.KernelOp) -> bool:
        """Whether the pass would schedule `kernel` as it stands (its trigger)."""

    @abstractmethod
    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        """The value grid the pass could take for `kernel` (legal or not)."""

    def legal_choices(self, kernel: tile.KernelOp) -> list[Schedule]:
        """The candidates the pass takes as given for `kernel` (module docstring); empty
        when the pass does not apply to it."""
        if not self.applies_to(kernel):
            return []
        return [choice for choice in self.candidates(kernel) if _taken(self, kernel, choice)]
