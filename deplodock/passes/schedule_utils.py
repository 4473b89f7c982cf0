"""Loop-nest analysis and loop -> tile cloning shared by the schedule passes.

The schedules map loops of a `loop.kernel` onto blocks and threads. What they need:

- *chains*: a loop whose body is one inner loop plus ops that are safe to recompute per
  iteration (`arith`/`math`, loads of buffers the kernel never writes) is a perfect nest with
  that inner loop; `free_chain` / `reduce_chain` follow such nests down, so a whole nest can
  be flattened into one linear index and delinearized (`Emitter.delinearize`);
- `combine_kind`: whether a reduce loop's carried value is `acc = acc <op> x` with `acc`
  used nowhere else, so that its iterations may be split between threads and the partial
  results combined with `tile.combine`;
- `Emitter`: appends ops to a block and clones loop ops as tile ops (`loop.for` -> serial
  `tile.for`, `loop.load/store` -> `tile.load/store`), through a value mapping.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from deplodock.dialects import loop, tile
from deplodock.dialects.tensor import ReduceKind

# ---------------------------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------------------------


def stored_buffers(kernel: loop.KernelOp) -> set[SSAValue]:
    """The memrefs a kernel stores to anywhere."""
    return {op.memref for op in kernel.walk() if isinstance(op, loop.StoreOp)}


def is_hoistable(op: Operation, stored: set[SSAValue]) -> bool:
    """True when `op` may be recomputed at will: scalar arith/math, or a read-only load."""
    if isinstance(op, loop.LoadOp):
        return op.memref not in stored
    return op.dialect_name() in ("arith", "math") and not op.regions


def body_ops(for_op: loop.ForOp) -> list[Operation]:
    """The ops of a loop body without its terminator."""
    return [op for op in for_op.body.block.ops if not isinstance(op, loop.YieldOp)]


def _single_child_loop(for_op: loop.ForOp, stored: set[SSAValue]) -> loop.ForOp | None:
    loops = [op for op in body_ops(for_op) if isinstance(op, loop.ForOp)]
    others = [op for op in body_ops(for_op) if not isinstance(op, loop.ForOp)]
    if len(loops) != 1 or not all(is_hoistable(op, stored) for op in others):
        return None
    return loops[0]


def free_chain(for_op: loop.ForOp, stored: set[SSAValue]) -> list[loop.ForOp]:
    """The perfect nest of free loops starting at the free loop `for_op`."""
    chain = [for_op]
    while (child := _single_child_loop(chain[-1], stored)) is not None and not child.is_reduce:
        chain.append(child)
    return chain


def reduce_chain(for_op: loop.ForOp, stored: set[SSAValue]) -> list[loop.ForOp]:
    """The perfect nest of reduce loops starting at `for_op` that can be flattened.

    Each inner loop must take the outer loop's iter_args as its inits and the outer loop
    must yield the inner results, with only hoistable ops (not using the iter_args) beside.
    """
    chain = [for_op]
    while True:
        outer = chain[-1]
        child = _single_child_loop(outer, stored)
        if child is None or not child.is_reduce:
            return chain
        carried = set(outer.iter_args)
        yielded = outer.body.block.last_op
        assert isinstance(yielded, loop.YieldOp)
        if (
            list(child.inits) != list(outer.iter_args)
            or list(yielded.arguments) != list(child.res)
            or any(v in carried for op in body_ops(outer) if op is not child for v in op.operands)
        ):
            return chain
        chain.append(child)


def trip_counts(chain: Sequence[loop.ForOp]) -> list[int]:
    return [f.trip_count for f in chain]


_COMBINERS: dict[type[Operation], ReduceKind] = {
    arith.AddfOp: ReduceKind.ADD,
    arith.AddiOp: ReduceKind.ADD,
    arith.MulfOp: ReduceKind.MUL,
    arith.MuliOp: ReduceKind.MUL,
    arith.MaximumfOp: ReduceKind.MAX,
    arith.MaxnumfOp: ReduceKind.MAX,
    arith.MaxSIOp: ReduceKind.MAX,
    arith.MinimumfOp: ReduceKind.MIN,
    arith.MinnumfOp: ReduceKind.MIN,
    arith.MinSIOp: ReduceKind.MIN,
}


@dataclass(frozen=True)
class Combiner:
    """How one carried value of a reduce loop combines: `acc = op(acc, x)`."""

    kind: ReduceKind
    op: Operation


def combine_kind(innermost: loop.ForOp, position: int) -> Combiner | None:
    """The combiner of iter_arg `position` of a reduce loop, if it is a plain reduction.

    Requires `yield op(acc, x)` where `acc` (the iter_arg) has no other use and the
    combined value feeds only the yield, so partial results over any split of the
    iterations combine to the same value (up to rounding).
    """
    acc = innermost.iter_args[position]
    yielded = innermost.body.block.last_op
    assert isinstance(yielded, loop.YieldOp)
    value = yielded.arguments[position]
    op = value.owner
    if not isinstance(op, Operation) or type(op) not in _COMBINERS:
        return None
    if op.parent_block() is not innermost.body.block or not value.has_one_use():
        return None
    if list(op.operands).count(acc) != 1 or not acc.has_one_use():
        return None
    return Combiner(_COMBINERS[type(op)], op)


def identity_attr(kind: ReduceKind, element_type: Attribute) -> Attribute:
    """The identity of `kind` as a constant attribute of `element_type`."""
    if isinstance(element_type, AnyFloat):
        return FloatAttr(kind.identity, element_type)
    assert isinstance(element_type, IntegerType | IndexType)
    width = element_type.width.data if isinstance(element_type, IntegerType) else 64
    limits = {ReduceKind.MAX: -(2 ** (width - 1)), ReduceKind.MIN: 2 ** (width - 1) - 1}
    value = limits[kind] if kind in limits else int(kind.identity)  # no int(inf)
    return IntegerAttr(value, element_type)


def is_identity(value: SSAValue, kind: ReduceKind) -> bool:
    """True when `value` is an `arith.constant` holding the identity of `kind`."""
    owner = value.owner
    if not isinstance(owner, arith.ConstantOp):
        return False
    return owner.value == identity_attr(kind, value.type)


def next_power_of_two(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


# ---------------------------------------------------------------------------------------------
# Emitting tile ops
# ---------------------------------------------------------------------------------------------


@dataclass
class Emitter:
    """Appends ops to `block`; clones loop ops into it as tile ops through `mapping`.

    Index constants go to `constants` (inserted by `finish_constants` at the start of the
    threads body, where they dominate every use) and are shared.
    """

    block: Block
    mapping: dict[SSAValue, SSAValue]
    constants: dict[int, SSAValue] = field(default_factory=dict)
    _constant_ops: list[Operation] = field(default_factory=list)

    def at(self, block: Block) -> Emitter:
        """An emitter that appends to `block`, sharing mapping and constants."""
        return Emitter(block, self.mapping, self.constants, self._constant_ops)

    def add(self, op: Operation, name: str | None = None) -> Operation:
        self.block.add_op(op)
        if name is not None and op.results:
            op.results[0].name_hint = name
        return op

    def index(self, value: int) -> SSAValue:
        if value not in self.constants:
            op = arith.ConstantOp(IntegerAttr(value, IndexType()))
            op.result.name_hint = f"c{value}" if value >= 0 else f"cm{-value}"
            self._constant_ops.append(op)
            self.constants[value] = op.result
        return self.constants[value]

    def finish_constants(self, block: Block) -> None:
        """Puts the shared index constants at the start of `block` (the threads body)."""
        first = block.first_op
        for op in self._constant_ops:
            if first is None:
                block.add_op(op)
            else:
                block.insert_op_before(op, first)

    def muli(self, a: SSAValue, b: int, name: str | None = None) -> SSAValue:
        if b == 1:
            return a
        return self.add(arith.MuliOp(a, self.index(b)), name).results[0]

    def addi(self, a: SSAValue, b: SSAValue | int, name: str | None = None) -> SSAValue:
        if isinstance(b, int):
            if b == 0:
                return a
            b = self.index(b)
        return self.add(arith.AddiOp(a, b), name).results[0]

    def delinearize(self, lin: SSAValue, chain: Sequence[loop.ForOp]) -> None:
        """Maps the ivs of a flattened nest to `lb + step * ((lin / stride) % n)`."""
        counts = trip_counts(chain)
        stride = math.prod(counts)
        for k, for_op in enumerate(chain):
            stride //= counts[k]
            name = for_op.induction_var.name_hint
            idx = lin
            if len(chain) > 1:
                if stride != 1:
                    idx = self.add(arith.FloorDivSIOp(idx, self.index(stride))).results[0]
                if k != 0:
                    idx = self.add(arith.RemSIOp(idx, self.index(counts[k]))).results[0]
            iv = self.addi(self.muli(idx, for_op.step_value), for_op.lower)
            if iv is not lin and isinstance(iv.owner, Operation) and name:
                iv.name_hint = name
            self.mapping[for_op.induction_var] = iv

    # -- cloning -----------------------------------------------------------------------------

    def clone_ops(self, ops: Iterable[Operation]) -> None:
        for op in ops:
            self.clone(op)

    def clone(self, op: Operation) -> None:
        """Clones one loop-level op (recursively) as tile ops."""
        m = self.mapping
        match op:
            case loop.ForOp():
                self.serial_for(op)
            case loop.LoadOp():
                new = tile.LoadOp(m.get(op.memref, op.memref), [m.get(i, i) for i in op.indices])
                self.add(new)
                new.res.name_hint = op.res.name_hint
                m[op.res] = new.res
            case loop.StoreOp():
                self.add(
                    tile.StoreOp(
                        m.get(op.value, op.value),
                        m.get(op.memref, op.memref),
                        [m.get(i, i) for i in op.indices],
                    )
                )
            case loop.YieldOp():
                self.add(tile.YieldOp(*[m.get(v, v) for v in op.arguments]))
            case _ if op.dialect_name() in ("loop", "tile"):
                raise ValueError(f"cannot schedule {op.name} here")
            case _:
                self.add(op.clone(value_mapper=m))

    def clone_prologues(self, chain: Sequence[loop.ForOp]) -> None:
        """Clones the hoistable ops around each inner loop of a flattened chain."""
        for outer, inner in itertools.pairwise(chain):
            self.clone_ops(op for op in body_ops(outer) if op is not inner)

    def serial_for(self, op: loop.ForOp) -> tile.ForOp:
        """A `loop.for` run whole by each thread: `tile.for %i = %cLB to UB step S`."""
        inits = [self.mapping.get(v, v) for v in op.inits]
        new = tile.ForOp(self.index(op.lower), op.upper, op.step_value, inits)
        self.add(new)
        for old, arg in zip(op.body.block.args, new.body.block.args, strict=True):
            arg.name_hint = old.name_hint
            self.mapping[old] = arg
        self.at(new.body.block).clone_ops(op.body.block.ops)
        for old, res in zip(op.res, new.res, strict=True):
            res.name_hint = old.name_hint
            self.mapping[old] = res
        return new
