"""What an op does besides computing its results, read from the effects it declares.

Passes move, duplicate, inline and drop ops that only compute their results: an op declared
`Pure` (or `NoMemoryEffect`) in its IRDL definition is one, so a new op declared so is
hoisted, printed as a C expression, costed as an integer instruction and dropped when unused
like `arith.addi`, with no other edit. Every pass asks here rather than naming dialects.

Four rules are deplodock's own, on top of xDSL's `is_side_effect_free`:

- a `Collective` op (`tile.combine`) is never pure here, though it may be declared `Pure`:
  its result depends on what the other threads of its group give it, so it is pure only
  where all of them run it together (CSE may merge two), not where a pass moves it into a
  guard, hands its iterations to other threads or copies it into a cooperative loop;
- an op with regions (a loop, a guard) is never pure here: the passes that ask move single
  ops, and a loop of loads moved or dropped as one is a different rewrite;
- a terminator is never pure: it hands control back, and no pass may move or drop it;
- the arith ops xDSL leaves undeclared (`scalar_ops.UNDECLARED_PURE`) are pure.

```python
is_pure(arith.AddiOp(a, b))              # True; tile.load (reads memory): False
is_dead(load)                            # no uses, and only reads or computes: True
erase_dead(list(block.ops))              # drops what nothing uses, users first
```
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation
from xdsl.rewriter import Rewriter
from xdsl.traits import IsTerminator, OpTrait, is_side_effect_free
from xdsl.transforms.dead_code_elimination import would_be_trivially_dead

from deplodock.dialects.scalar_ops import UNDECLARED_PURE


class Collective(OpTrait):
    """An op whose result depends on the values other threads give it (a block reduction,
    a warp shuffle, a warp's MMA): every thread of its group runs it, at the same point."""


def is_pure(op: Operation) -> bool:
    """Whether `op` only computes its results from its own operands: it declares no memory
    effects, is no collective, has no regions and is no terminator (module doc)."""
    if op.regions or op.has_trait(IsTerminator) or op.has_trait(Collective):
        return False
    return isinstance(op, UNDECLARED_PURE) or is_side_effect_free(op)


def is_dead(op: Operation) -> bool:
    """Whether erasing `op` changes nothing: nothing uses its results, and it is pure or
    only reads memory (xDSL's `would_be_trivially_dead`), or it is a loop that only
    computes its results that way (`_computing_loop`)."""
    return not any(result.uses for result in op.results) and _unneeded_if_unused(op)


def _unneeded_if_unused(op: Operation) -> bool:
    if op.regions:
        return _computing_loop(op)
    return is_pure(op) or would_be_trivially_dead(op)


def _computing_loop(op: Operation) -> bool:
    """An op with results and regions whose nested ops only compute or read (a dot product
    left behind when `tile-stage` moved its value into a slab copy): unused, it does
    nothing. Ops without results (a guard, a copy loop) are kept: they are there for what
    their bodies do."""
    return bool(op.results) and all(
        inner.has_trait(IsTerminator) or _unneeded_if_unused(inner)
        for region in op.regions
        for block in region.blocks
        for inner in block.ops
    )


def dead_ops(ops: Sequence[Operation]) -> set[Operation]:
    """The ops among `ops` (in program order: a block's ops, or a walk) that nothing needs:
    `is_dead`, or used only by such ops. Users come after what they use, so one walk
    backwards finds them all. The CUDA printer leaves them out; `erase_dead` erases them."""
    dead: set[Operation] = set()
    for op in reversed(ops):
        users = (use.operation for result in op.results for use in result.uses)
        if _unneeded_if_unused(op) and all(user in dead for user in users):
            dead.add(op)
    return dead


def erase_dead(ops: Sequence[Operation]) -> None:
    """Erases the dead ops among `ops` (`dead_ops`), users first. xDSL's `region_dce` is
    not used: it keeps the ops `scalar_ops.UNDECLARED_PURE` lists, and drops whole loops."""
    dead = dead_ops(ops)
    for op in reversed(ops):
        if op in dead:
            Rewriter.erase_op(op)
