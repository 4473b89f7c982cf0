"""`tile-vectorize` on a staged contraction: the K-chunk loop reads its slabs 16 bytes at a time.

Trigger: a kernel `tile-stage` has staged whose `ki` loop (the loop over one chunk) reads
every slab at `[..., ki]` (the slab rows are contiguous in K, `[E][BK]`), with BK a multiple
of the vector width `w` (4 fp32, 8 bf16: 16 bytes).

Rewrite: the `ki` loop steps by `w`. Each slab load `s[..., ki]` becomes one
`tile.load_vector s[..., ki] width w`, and the loop body is repeated `w` times, the `j`-th
copy using element `j` of every vector and `ki + j`, the accumulators threaded from one copy
to the next. An 8 x 8 register tile then issues 4 shared loads per K step instead of 16,
which is what keeps the FMA pipe, not the load/store unit, the limit. `tile-pad-shared`
then keeps slab rows a multiple of `w` long, so every vector stays 16-byte aligned.

    tile.for %ki = %c0 to 16 ... {                tile.for %ki = %c0 to 16 step 4 ... {
      %a = tile.load %a_s[%slot, %mm, %ki]  ==>     %a, %a_1, %a_2, %a_3 = tile.load_vector
      ... acc += a * b                                %a_s[%slot, %mm, %ki] width 4
                                                    ... 4 x (acc += a_j * b_j)
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.element_types import UnsupportedElementType, byte_size
from deplodock.dialects.hardware import MAX_VECTOR_BYTES, VECTOR_LANES, is_shared
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.nests import body_ops


def chunk_loop(threads: tile.ThreadsOp) -> tile.ForOp | None:
    """The `ki` loop of a staged kernel: the reduce loop that reads slabs."""
    for op in threads.walk():
        if isinstance(op, tile.ForOp) and op.is_reduce and _slab_loads(op):
            return op
    return None


def _slab_loads(loop: tile.ForOp) -> list[tile.LoadOp]:
    return [
        op for op in body_ops(loop) if isinstance(op, tile.LoadOp) and is_shared(op.memref.type)
    ]


def slab_vector_width(loop: tile.ForOp) -> int:
    """Elements per vector read of the loop's slabs (1 when they cannot be vectorized)."""
    loads = _slab_loads(loop)
    if not loads or loop.step_value != 1:
        return 1
    widths = set()
    for load in loads:
        memref = load.memref.type
        assert isinstance(memref, MemRefType)
        if load.indices[-1] != loop.induction_var or loop.induction_var in load.indices[:-1]:
            return 1
        try:
            widths.add(min(max(VECTOR_LANES), MAX_VECTOR_BYTES // byte_size(memref.element_type)))
        except UnsupportedElementType:
            return 1
    width = min(widths)
    if width <= 1 or loop.upper % width:
        return 1
    return width


def vectorize_slab_reads(kernel: tile.KernelOp, width: int) -> bool:
    """Rewrites the `ki` loop (see the module docstring); False when it does not apply."""
    threads = schedule.threads_of(kernel)
    loop = chunk_loop(threads) if threads is not None else None
    if loop is None:
        return False
    width = min(width, slab_vector_width(loop))
    if width <= 1:
        return False
    pool = ConstantPool.adopting(threads.body.block)  # type: ignore[union-attr]
    new = tile.ForOp(loop.lb, loop.upper, width, list(loop.inits))
    new.induction_var.name_hint = loop.induction_var.name_hint
    Rewriter.insert_op(new, InsertPoint.before(loop))
    build = schedule.IndexBuilder(InsertPoint.at_end(new.body.block), pool)
    lanes: dict[SSAValue, list[SSAValue]] = {}
    for load in _slab_loads(loop):
        vector = tile.LoadVectorOp(load.memref, [*load.indices[:-1], new.induction_var], width)
        for k, value in enumerate(vector.res):
            value.name_hint = f"{load.res.name_hint}_{k}" if load.res.name_hint else None
        build.add(vector)
        lanes[load.res] = list(vector.res)
    carried: list[SSAValue] = list(new.iter_args)
    for j in range(width):
        mapping: dict[SSAValue, SSAValue] = dict(zip(loop.iter_args, carried, strict=True))
        mapping[loop.induction_var] = build.addi(new.induction_var, j)
        for result, values in lanes.items():
            mapping[result] = values[j]
        for op in body_ops(loop):
            if op.results and op.results[0] in lanes:
                continue
            clone = op.clone(value_mapper=mapping)
            Rewriter.insert_op(clone, build.point)
            for old, cloned in zip(op.results, clone.results, strict=True):
                mapping[old] = cloned
        yielded = loop.body.block.last_op
        assert isinstance(yielded, tile.YieldOp)
        carried = [mapping.get(v, v) for v in yielded.arguments]
    new.body.block.add_op(tile.YieldOp(*carried))
    for old, result in zip(loop.res, new.res, strict=True):
        result.name_hint = old.name_hint
        old.replace_all_uses_with(result)
    Rewriter.erase_op(loop)
    _erase_unused_index_ops(new)
    return True


def _erase_unused_index_ops(loop: tile.ForOp) -> None:
    for op in reversed(list(loop.body.block.ops)):
        if isinstance(op, arith.AddiOp) and not op.result.uses:
            Rewriter.erase_op(op)
