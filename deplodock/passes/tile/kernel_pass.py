"""`TileKernelPass`: a scheduling pass decides kernel by kernel.

Every tile pass makes its decision for one `tile.kernel` at a time, on the kernel as the
passes before it left it; to such a pass the module is only its list of kernels. This base
class writes that loop once: a pass says what it does to one kernel (`apply_to_kernel`), and
a bug raised while it works on one is reported naming the pass and the kernel
(`passes/internal_errors.py`):

    @dataclass(frozen=True)
    class TileCsePass(TileKernelPass):
        name = "tile-cse"

        def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
            cse(kernel)

A pass whose knobs a tuner may search builds on it through `choices.Tunable`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from deplodock.dialects import tile
from deplodock.passes.internal_errors import blame


def tile_kernels(module: ModuleOp) -> list[tile.KernelOp]:
    """The module's kernels at the tile level, in order (a list: a pass may add kernels)."""
    return [op for op in module.ops if isinstance(op, tile.KernelOp)]


@dataclass(frozen=True)
class TileKernelPass(ModulePass, ABC):
    """A module pass that applies itself to each `tile.kernel` of the module in turn."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        self.check_options()
        for kernel in self.kernels(op):
            with blame(self.name, kernel.sym_name.data):
                self.apply_to_kernel(kernel)

    def check_options(self) -> None:
        """Refuses bad pass options (`PassFailedException`) before any kernel is touched."""

    def kernels(self, module: ModuleOp) -> list[tile.KernelOp]:
        """The kernels the pass looks at: all of them, unless a pass option picks some."""
        return tile_kernels(module)

    @abstractmethod
    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        """Schedules one kernel (or leaves it as it is when the pass does not apply)."""
