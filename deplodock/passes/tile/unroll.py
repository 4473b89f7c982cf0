"""`tile-unroll`: mark the small constant-trip loops for full unrolling.

Trigger: a `tile.for` whose trip count is known at compile time (a constant start, and the
bound and step are static) and not zero, such that the whole nest it heads, once unrolled,
has at most `max_trips` copies of its innermost body: the loop's trips times the largest
unrolled size among the loops nested in it (a loop left rolled counts once). Inner loops
are decided first, so when a nest is too big it is the outer loops that stay rolled.

Rewrite: the loop gets the unit attribute `unroll`. Nothing else changes here: the mark
goes through `convert-tile-to-kernel` onto the `kernel.for`, and the CUDA printer puts
`#pragma unroll` before that loop, leaving the unrolling itself to nvcc (which then keeps
small register tiles and fold loops in registers, with constant indices).

Knob `unroll` on the kernel's `schedule`: 0 turns the pass off for the kernel, otherwise it
is the `max_trips` of that kernel (a replayed schedule wins over the option).

    tile.for %w = %c0 to 8 iter_args(...) {      tile.for %w = %c0 to 8 iter_args(...) {
      ...                                  ==>     ...
    }                                            } {unroll}
    tile.for %k = %t to 2048 step 256 { ... }    tile.for %k = %t to 2048 step 256 { ... }
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tile
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Choice, Tunable, grid, has_knob
from deplodock.passes.tile.nests import is_serial, trip_count

#: The unit attribute that asks for a fully unrolled loop (kept on `kernel.for`).
UNROLL = "unroll"


def _unrolled_size(op: Operation, sizes: dict[Operation, int]) -> int:
    """Copies of the innermost body that the loops inside `op` (not `op`) unroll into."""
    return max(
        (sizes[inner] for inner in op.walk() if inner is not op and inner in sizes), default=1
    )


def unroll_small_loops(kernel: tile.KernelOp, max_trips: int) -> None:
    """Marks the kernel's small constant-trip loops `unroll` (see module doc)."""
    sizes: dict[Operation, int] = {}  # loop -> copies of its innermost body after unrolling
    for op in kernel.walk(region_first=True):  # inner loops before the loops around them
        if not isinstance(op, tile.ForOp):
            continue
        inner = _unrolled_size(op, sizes)
        trips = trip_count(op) if is_serial(op) else 0
        if 0 < trips and trips * inner <= max_trips:
            op.attributes[UNROLL] = UnitAttr()
            sizes[op] = trips * inner
        else:
            sizes[op] = inner


@dataclass(frozen=True)
class TileUnrollPass(Tunable, ModulePass):
    """Marks constant-trip loop nests of at most `max_trips` copies `unroll` (module doc)."""

    name = "tile-unroll"
    knobs = (UNROLL,)

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return not has_knob(kernel, UNROLL)

    def candidates(self, kernel: tile.KernelOp) -> list[Choice]:
        return grid(**{UNROLL: (0, 4, 16, 64, 256)})

    max_trips: int = 64

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.ops if isinstance(k, tile.KernelOp)]:
            max_trips = schedule.read_knob(kernel, UNROLL, self.max_trips)
            if max_trips < 0:
                raise PassFailedException(
                    f"tile.kernel @{kernel.sym_name.data}: unroll {max_trips} must be 0 (off) "
                    "or a positive number of trips"
                )
            if max_trips > 0:
                unroll_small_loops(kernel, max_trips)
            schedule.write_knob(kernel, UNROLL, max_trips)
