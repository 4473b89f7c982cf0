"""Helpers shared by the loop-level passes: building kernels and loop nests, and the work
estimate that guards fusion.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint

from deplodock.dialects import loop
from deplodock.passes.constant_pool import ConstantPool

# ---------------------------------------------------------------------------------------------
# Building kernels
# ---------------------------------------------------------------------------------------------


@dataclass
class KernelBuilder:
    """Builds one `loop.kernel` body: index constants live at the top, loop nests below.

    `index(v)` hands out one shared `arith.constant v : index` per value, so `%c0` (the index
    of every size-1 dimension) is created once per kernel.
    """

    kernel: loop.KernelOp
    constants: ConstantPool = field(init=False)

    def __post_init__(self) -> None:
        self.constants = ConstantPool(self.kernel.body.block)

    @staticmethod
    def create(name: str, arg_types: Sequence[Attribute], arg_names: Sequence[str | None]):
        kernel = loop.KernelOp(name, arg_types)
        for arg, hint in zip(kernel.body.block.args, arg_names, strict=True):
            arg.name_hint = hint
        kernel.body.block.add_op(loop.ReturnOp())
        return KernelBuilder(kernel)

    @property
    def block(self) -> Block:
        return self.kernel.body.block

    @property
    def args(self) -> Sequence[SSAValue]:
        return self.block.args

    def body_builder(self) -> Builder:
        """A builder that appends to the kernel body, before `loop.return`."""
        terminator = self.block.last_op
        assert terminator is not None
        return Builder(InsertPoint.before(terminator))

    def index(self, value: int) -> SSAValue:
        """The shared `arith.constant value : index` of this kernel."""
        return self.constants.index(value)

    def constant(self, value: IntegerAttr | FloatAttr, name: str | None = None) -> SSAValue:
        """The shared `arith.constant` of `value`, created at the top of the kernel."""
        return self.constants.get(value, name)

    def index_value(self, value: SSAValue) -> int | None:
        """The integer of `value` if it is one of this kernel's index constants."""
        return self.constants.index_value(value)


def free_loop(builder: Builder, lb: int, ub: int, name: str | None = None) -> Builder:
    """Appends `loop.for %name = lb to ub { }` and returns a builder inside its body."""
    for_op = builder.insert(loop.ForOp(lb, ub))
    for_op.body.block.args[0].name_hint = name
    yield_op = loop.YieldOp()
    for_op.body.block.add_op(yield_op)
    return Builder(InsertPoint.before(yield_op))


def free_nest(
    kb: KernelBuilder,
    builder: Builder,
    ranges: Sequence[tuple[int, int]],
    names: Sequence[str],
) -> tuple[Builder, list[SSAValue]]:
    """A nest of free loops, one per range `[lo, hi)` (outermost first).

    A range of one element gets no loop: its index is the constant `lo`.
    Returns a builder for the innermost body and the index of every range.
    """
    indices: list[SSAValue] = []
    for (lo, hi), name in zip(ranges, names, strict=True):
        if hi - lo == 1:
            indices.append(kb.index(lo))
            continue
        builder = free_loop(builder, lo, hi, name)
        assert builder.insertion_point.block.args
        indices.append(builder.insertion_point.block.args[0])
    return builder, indices


def trip_product(op: Operation, stop: Operation) -> int:
    """Product of the trip counts of the `loop.for`s enclosing `op`, up to `stop`."""
    product = 1
    parent = op.parent_op()
    while parent is not None and parent is not stop:
        if isinstance(parent, loop.ForOp):
            product *= parent.trip_count
        parent = parent.parent_op()
    return product


def work(kernel: loop.KernelOp) -> int:
    """Estimated work of a kernel: every op counts the product of its enclosing trip counts.

    Index constants and loops themselves count too; this is a relative measure that only
    has to see recomputation (an op moved under an extra loop multiplies its weight).
    """
    return sum(trip_product(op, kernel) for op in kernel.walk() if op is not kernel)


def reduction_iterations(kernel: loop.KernelOp) -> int:
    """How many reduce-loop iterations a kernel runs: what fusion must never multiply.

    Recomputing a cheap elementwise producer per consumer element is fine (the 8x guard
    bounds it), and inlining it into a reduce loop's body adds no iteration. Recomputing a
    reduction (a matmul, a row sum) per element of its consumer multiplies iterations and
    turns an O(n^2) kernel into O(n^3), as inlining q/k projections into attention would.
    """
    return sum(
        trip_product(op, kernel) * op.trip_count
        for op in kernel.walk()
        if isinstance(op, loop.ForOp) and op.is_reduce
    )
