"""The toolkit every scheduling pass uses: the kernel's `schedule` knobs, its block and
threads regions, shared index constants, and the flatten-and-stride rewrite of a loop nest.

A scheduling pass is one decision. It reads its knob from the kernel's `schedule`
dictionary when the kernel has one (a tuned or hand-written schedule being replayed), else
takes its pass option, applies the decision, and writes the value it used back, so the
printed tile IR says how every kernel was scheduled and replays as it is:

```python
threads = read_knob(kernel, "threads", default=self.max_threads)
...
write_knob(kernel, "threads", threads)
```
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.hardware import MAX_THREADS_PER_BLOCK, WARP_SIZE, is_valid_block_size
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile.nests import body_ops, chain_size, start_of, trip_counts

# --- knobs -----------------------------------------------------------------------------------


#: Knobs that count or measure something (a tile extent, a raster group, register cells, a
#: chunk, slots, splits, threads, blocks, rows, a vector width): 0 is none of their values.
#: A pass *option* of 0 may mean "the heuristic's choice" (`tile-block{bm=0}`), but a knob is
#: the decision itself, so a 0 knob is refused (`knob_error`), never taken as the default.
POSITIVE_KNOBS = frozenset(
    {"bm", "bn", "group", "fm", "fn", "bk", "depth", "splits", "threads", "max_blocks"}
    | {"rows_per_block", "vector"}
)


def knob_error(name: str, value: int) -> str | None:
    """Why `name=value` cannot be a schedule knob (None when it can)."""
    if name in POSITIVE_KNOBS and value <= 0:
        return f"{name}={value}: must be positive (leave the knob out for the heuristic's choice)"
    return None


def read_knob(kernel: tile.KernelOp, name: str, default: int) -> int:
    """The kernel's knob `name` (its `Schedule`), else `default` (the pass option); a
    value no schedule may hold (`knob_error`) is refused in one line."""
    knobs = Schedule.of(kernel)
    if name not in knobs:
        return default
    if why := knob_error(name, knobs[name]):
        raise PassFailedException(f"tile.kernel @{kernel.sym_name.data}: schedule knob {why}")
    return knobs[name]


def has_knob(kernel: tile.KernelOp, name: str) -> bool:
    """Whether the kernel's schedule sets `name` (a pass that wrote it has decided)."""
    return name in Schedule.of(kernel)


def write_knob(kernel: tile.KernelOp, name: str, value: int) -> None:
    """Records knob `name = value` on the kernel's schedule (a new knob goes last)."""
    write_knobs(kernel, {name: value})


def write_knobs(kernel: tile.KernelOp, knobs: Mapping[str, int]) -> None:
    """Records several knobs at once (a tuner's choice, a `tile-schedule` option)."""
    Schedule.of(kernel).with_knobs(knobs).write_on(kernel)


def is_tiled_contraction(kernel: tile.KernelOp) -> bool:
    """Whether `tile-block` owns this kernel's schedule (the baseline passes leave it)."""
    return has_knob(kernel, "bm")


def check_threads(kernel: tile.KernelOp, threads: int, knob: str) -> None:
    """A thread count the hardware runs: whole warps, at most 1024."""
    if not is_valid_block_size(threads):
        raise PassFailedException(
            f"tile.kernel @{kernel.sym_name.data}: {knob} {threads} must be a multiple of "
            f"{WARP_SIZE} in [{WARP_SIZE}, {MAX_THREADS_PER_BLOCK}]"
        )


# --- regions ---------------------------------------------------------------------------------


def threads_of(kernel: tile.KernelOp) -> tile.ThreadsOp | None:
    """The one `tile.threads` region of the kernel's grid (None when there are several:
    the baseline passes schedule kernels of one threads region)."""
    regions = [op for op in kernel.grid.body.block.ops if isinstance(op, tile.ThreadsOp)]
    return regions[0] if len(regions) == 1 else None


def top_loops(threads: tile.ThreadsOp) -> list[tile.ForOp]:
    """The loops directly in the threads body: what the passes map onto blocks and threads."""
    return [op for op in threads.body.block.ops if isinstance(op, tile.ForOp)]


def drop_unused_constants(threads: tile.ThreadsOp) -> None:
    """Erases the index constants at the top of the body that nothing uses any more (the
    starts of the serial loops a pass has just mapped)."""
    for op in list(threads.body.block.ops):
        if not isinstance(op, arith.ConstantOp):
            break
        if isinstance(op.result.type, IndexType) and not op.result.uses:
            Rewriter.erase_op(op)


def set_count(region: tile.GridOp | tile.ThreadsOp, count: int) -> None:
    """Resizes the grid (blocks) or the block (threads)."""
    region.upper = IntegerAttr(count, 64)


# --- emitting index arithmetic ---------------------------------------------------------------


@dataclass
class IndexBuilder:
    """Inserts index arithmetic at one point, folding `x * 1` and `x + 0` away."""

    point: InsertPoint
    constants: ConstantPool

    def add(self, op: Operation, name: str | None = None) -> SSAValue:
        Rewriter.insert_op(op, self.point)
        if name is not None:
            op.results[0].name_hint = name
        return op.results[0]

    def muli(self, a: SSAValue, b: int, name: str | None = None) -> SSAValue:
        return a if b == 1 else self.add(arith.MuliOp(a, self.constants.index(b)), name)

    def addi(self, a: SSAValue, b: SSAValue | int, name: str | None = None) -> SSAValue:
        if isinstance(b, int):
            if b == 0:
                return a
            b = self.constants.index(b)
        return self.add(arith.AddiOp(a, b), name)

    def delinearize(self, lin: SSAValue, chain: Sequence[tile.ForOp]) -> None:
        """Replaces the ivs of a flattened nest by `start + step * ((lin / stride) % n)`."""
        counts = trip_counts(chain)
        stride = math.prod(counts)
        for k, loop in enumerate(chain):
            stride //= counts[k]
            idx = lin
            if len(chain) > 1:
                if stride != 1:
                    idx = self.add(arith.FloorDivSIOp(idx, self.constants.index(stride)))
                if k != 0:
                    idx = self.add(arith.RemSIOp(idx, self.constants.index(counts[k])))
            iv = self.addi(self.muli(idx, loop.step_value), start_of(loop))
            if iv is not lin and isinstance(iv.owner, Operation) and loop.induction_var.name_hint:
                iv.name_hint = loop.induction_var.name_hint
            loop.induction_var.replace_all_uses_with(iv)


# --- the flatten-and-stride rewrite ----------------------------------------------------------


def move_ops(ops: Sequence[Operation], point: InsertPoint) -> None:
    for op in ops:
        op.detach()
        Rewriter.insert_op(op, point)


def rebuild_loop(
    loop: tile.ForOp,
    lb: SSAValue,
    ub: int,
    step: int,
    index: Callable[[IndexBuilder, SSAValue], SSAValue],
    constants: ConstantPool,
) -> tuple[tile.ForOp, SSAValue]:
    """`loop` over a new range `lb to ub step step`, with its body, iter_args, results and
    attributes: `index(build, %new_iv)` computes, first in the body, the value that takes
    the old induction variable's place. Returns the new loop and that value; the old loop
    is erased. (`tile-unroll` counts a strided copy's trips this way, `tile-causal-skip`
    starts a K loop late.)"""
    new = tile.ForOp(lb, ub, step, list(loop.inits))
    new.attributes.update(loop.attributes)
    Rewriter.insert_op(new, InsertPoint.before(loop))
    build = IndexBuilder(InsertPoint.at_end(new.body.block), constants)
    replacement = index(build, new.induction_var)
    for old, arg in zip(loop.iter_args, new.iter_args, strict=True):
        arg.name_hint = old.name_hint
        old.replace_all_uses_with(arg)
    loop.induction_var.replace_all_uses_with(replacement)
    move_ops(list(loop.body.block.ops), InsertPoint.at_end(new.body.block))
    for old, result in zip(loop.res, new.res, strict=True):
        result.name_hint = old.name_hint
        old.replace_all_uses_with(result)
    Rewriter.erase_op(loop)
    return new, replacement


def flatten_into(
    chain: Sequence[tile.ForOp],
    start: SSAValue,
    step: int,
    constants: ConstantPool,
    inits: Sequence[SSAValue] = (),
) -> tile.ForOp:
    """Replaces the perfect nest `chain` by one loop `tile.for %lin = start to N step S`.

    The new loop sits where the nest was; its body delinearizes `%lin` into the nest's ivs,
    then holds the hoistable ops of the outer levels and the innermost body, moved (with
    their names). `inits` are the new loop's iter_args inits (the innermost loop's
    iter_args become the new loop's). The emptied nest stays for the caller to erase once
    nothing uses its results (`Rewriter.erase_op(chain[0])`).
    """
    root, innermost = chain[0], chain[-1]
    new = tile.ForOp(start, chain_size(chain), step, inits)
    Rewriter.insert_op(new, InsertPoint.before(root))
    lin = new.body.block.args[0]
    single = len(chain) == 1 and start_of(root) == 0 and root.step_value == 1
    lin.name_hint = root.induction_var.name_hint if single else "lin"
    body_end = InsertPoint.at_end(new.body.block)
    IndexBuilder(body_end, constants).delinearize(lin, chain)
    for outer, inner in itertools.pairwise(chain):
        move_ops([op for op in body_ops(outer) if op is not inner], body_end)
    for old, new_arg in zip(innermost.iter_args, new.iter_args, strict=True):
        new_arg.name_hint = old.name_hint
        old.replace_all_uses_with(new_arg)
    move_ops(list(innermost.body.block.ops), body_end)
    return new


def stride_free_nests(
    threads: tile.ThreadsOp,
    nests: Sequence[Sequence[tile.ForOp]],
    start: SSAValue,
    step: int,
    constants: ConstantPool,
) -> None:
    """Each free nest becomes `tile.for %lin = start to N step S` (`flatten_into`); the old
    nests and the constants only they used go away."""
    for nest in nests:
        flatten_into(nest, start, step, constants)
        Rewriter.erase_op(nest[0])
    drop_unused_constants(threads)
