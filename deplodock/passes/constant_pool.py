"""Shared constants at the top of a block, each value created once.

Every pass that emits index arithmetic (loop starts, strides, delinearization) needs the
same few constants over and over; a pool hands out one `arith.constant` per value, placed at
the top of the block where it dominates every later use, named `%c256` (`%c_neg1`).

```python
pool = ConstantPool.adopting(threads.body.block)   # reuses the block's leading constants
step = pool.index(256)                              # %c256 = arith.constant 256 : index
```
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue

from deplodock.dialects.queries import constant_index


def index_name(value: int) -> str:
    """`c256`, or `c_neg1` for a negative value: how an index constant is named."""
    return f"c{value}" if value >= 0 else f"c_neg{-value}"


@dataclass
class ConstantPool:
    """One `arith.constant` per value at the top of `block`, in the order first asked for."""

    block: Block
    _known: dict[Attribute, SSAValue] = field(default_factory=dict[Attribute, SSAValue])
    _last: Operation | None = None

    @staticmethod
    def adopting(block: Block) -> ConstantPool:
        """A pool that reuses the constants already leading `block` (and adds after them)."""
        pool = ConstantPool(block)
        for op in block.ops:
            if not isinstance(op, arith.ConstantOp):
                break
            pool.adopt(op)
            pool._last = op
        return pool

    def adopt(self, op: arith.ConstantOp) -> None:
        """Serves later requests for `op`'s value with `op` (which must dominate them)."""
        self._known.setdefault(op.value, op.result)

    def get(self, value: IntegerAttr | FloatAttr, name: str | None = None) -> SSAValue:
        """The shared constant of `value`, created at the top of the block if new."""
        if (known := self._known.get(value)) is not None:
            return known
        const = arith.ConstantOp(value)
        const.result.name_hint = name
        if self._last is not None:
            self.block.insert_op_after(const, self._last)
        elif self.block.first_op is not None:
            self.block.insert_op_before(const, self.block.first_op)
        else:
            self.block.add_op(const)
        self._last = const
        self._known[value] = const.result
        return const.result

    def index(self, value: int) -> SSAValue:
        """The shared `arith.constant value : index`."""
        return self.get(IntegerAttr(value, IndexType()), index_name(value))

    def index_value(self, value: SSAValue) -> int | None:
        """The integer of `value` if it is one of the pool's index constants."""
        known = isinstance(value.owner, arith.ConstantOp) and self._known.get(value.owner.value)
        return constant_index(value) if known is value else None
