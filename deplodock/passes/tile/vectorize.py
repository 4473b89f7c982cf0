"""`tile-vectorize`: a grid-stride elementwise kernel moves `width` elements per access.

(On a staged contraction the same pass vectorizes the reads of the shared slabs instead,
`vectorize_slabs.py`, and widens the copies that compute a fused prologue to 16-byte loads
and stores: `cp.async` cannot compute, so `tile-async-copy` leaves them synchronous. Slabs
that `tile-mma` reads as fragment pairs keep their reads; the copies are still widened.)

Trigger: a `tile.kernel` scheduled by `tile-grid-stride` (each top-level loop of its threads
body is `tile.for %lin = %start to N step G*T`, `%start` per thread) whose loop bodies are
straight-line `arith`/`math` with global `tile.load`/`tile.store`, where every access is
contiguous along the loop: its row-major element offset is `lin + c`, with `c`, `N` and the
buffer's innermost extent multiples of `width` (knob `vector` on the kernel's `schedule`,
default the `width` option), and `width` elements of each buffer make an 8- or 16-byte
vector. Anything else (a broadcast operand, a transposed read, an odd size such as 1001,
nested control flow, shared memory) leaves the kernel alone.

Rewrite: each thread handles `width` consecutive elements per iteration: the loop becomes
`%lin = %start * width to N step G'*T*width` (`G' = min(ceil(N / (T*width)), max_blocks)`,
the grid resized), the index arithmetic from `%lin` stays (it now gives the first element),
every load becomes a `tile.load_vector`, the scalar computation is repeated once per
element, and every store becomes a `tile.store_vector`. The knob used is recorded as
`vector`.

    tile.for %lin = %start to 1000 step 1024 {      %s4 = arith.muli %start, %c4 : index
      %v = tile.load %x[%lin] : memref<1000xf32>     tile.for %lin = %s4 to 1000 step 1024 {
      %r = arith.addf %v, %v : f32          ==>        %v, %v_1, %v_2, %v_3 = tile.load_vector
      tile.store %r, %y[%lin] : memref<1000xf32>         %x[%lin] width 4 : memref<1000xf32>
    }                                                   %r = arith.addf %v, %v : f32
                                                        ... (%r_1, %r_2, %r_3)
                                                        tile.store_vector %r, %r_1, %r_2, %r_3,
                                                          %y[%lin] : memref<1000xf32>
                                                      }
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.effects import is_pure
from deplodock.dialects.element_types import UnsupportedElementType, byte_size
from deplodock.dialects.hardware import (
    MAX_VECTOR_BYTES,
    VECTOR_LANES,
    WIDE_VECTOR_BYTES,
    is_shared,
)
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.copy_loops import (
    copy_loops,
    lane_compares,
    row_loads,
    vector_width,
    widen,
)
from deplodock.passes.tile.vectorize_slabs import vectorize_slab_reads

#: Index arithmetic the contiguity check evaluates (on every iterate of the loop).
_INDEX_OPS = {
    arith.AddiOp: np.add,
    arith.SubiOp: np.subtract,
    arith.MuliOp: np.multiply,
    arith.FloorDivSIOp: np.floor_divide,
    arith.DivSIOp: lambda a, b: np.trunc(a / b).astype(np.int64),
    arith.RemSIOp: np.fmod,
}


def _evaluate(value: SSAValue, lin: SSAValue, lins: np.ndarray, memo: dict) -> np.ndarray | None:
    """`value` for every `lin` in `lins`, when it is index arithmetic on `lin` and constants."""
    if value is lin:
        return lins
    if value in memo:
        return memo[value]
    op = value.owner
    result = None
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        result = np.int64(op.value.value.data)
    elif isinstance(op, arith.IndexCastOp):
        result = _evaluate(op.operands[0], lin, lins, memo)
    elif isinstance(op, Operation) and type(op) in _INDEX_OPS:
        a, b = (_evaluate(o, lin, lins, memo) for o in op.operands)
        if a is not None and b is not None and not np.any(np.asarray(b) == 0):
            result = _INDEX_OPS[type(op)](a, b)
    memo[value] = result
    return result


#: Iterates evaluated at once by the contiguity check: a loop over hundreds of millions of
#: elements is checked in chunks of this many, so memory stays bounded (a few MB).
_CHUNK = 1 << 20


def _shift(
    access: tile.LoadOp | tile.StoreOp, lin: SSAValue, lins: np.ndarray, memo: dict
) -> int | None:
    """The constant `c` with element offset `lin + c` on every iterate in `lins`, if any."""
    memref = access.memref.type
    assert isinstance(memref, MemRefType)
    columns = [_evaluate(i, lin, lins, memo) for i in access.indices]
    if any(c is None for c in columns):
        return None
    offset = np.zeros(lins.size, dtype=np.int64)
    for column, size in zip(columns, memref.get_shape(), strict=True):
        offset = offset * size + np.broadcast_to(column, (lins.size,))  # type: ignore[arg-type]
    shift = offset - lins
    return int(shift[0]) if bool(np.all(shift == shift[0])) else None


def vector_candidate(access: tile.LoadOp | tile.StoreOp, width: int) -> bool:
    """A global access whose `width` elements make a vector of its innermost dimension."""
    memref = access.memref.type
    assert isinstance(memref, MemRefType)
    if is_shared(memref):
        return False
    try:
        if width * byte_size(memref.element_type) not in WIDE_VECTOR_BYTES:
            return False
    except UnsupportedElementType:
        return False
    shape = memref.get_shape()
    return bool(shape) and shape[-1] % width == 0


def _contiguous(
    accesses: list[tile.LoadOp | tile.StoreOp], lin: SSAValue, upper: int, width: int
) -> bool:
    """Every access's element offset is `lin + c` on every iterate (checked chunk by chunk),
    `c` a multiple of `width`, and `width` elements make a vector of the buffer's innermost
    dimension."""
    if not all(vector_candidate(access, width) for access in accesses):
        return False
    shifts: list[int | None] = [None] * len(accesses)
    for start in range(0, upper, _CHUNK):
        lins = np.arange(start, min(upper, start + _CHUNK), dtype=np.int64)
        memo: dict = {}
        for k, access in enumerate(accesses):
            shift = _shift(access, lin, lins, memo)
            if shift is None or shift % width or shifts[k] not in (None, shift):
                return False
            shifts[k] = shift
    return True


def _vectorizable(loop: tile.ForOp, width: int) -> bool:
    if loop.iter_args or not tile.depends_on_thread(loop.lb) or loop.upper % width:
        return False
    accesses: list[tile.LoadOp | tile.StoreOp] = []
    for op in loop.body.block.ops:
        if isinstance(op, tile.YieldOp):
            continue
        if isinstance(op, tile.LoadOp | tile.StoreOp):
            accesses.append(op)
        elif not is_pure(op):
            return False  # the rewrite repeats the data ops once per element
        elif _index_becomes_data(op):
            return False  # e.g. arange: each element needs its own index, not the first one
    return _contiguous(accesses, loop.induction_var, loop.upper, width)


def _index_becomes_data(op: Operation) -> bool:
    """An op turning an index into a data value (`arith.index_cast` to an integer): its
    result differs per element of a vector, which the rewrite does not replicate."""
    takes_index = any(isinstance(v.type, IndexType) for v in op.operands)
    gives_data = any(not isinstance(r.type, IndexType | IntegerType) for r in op.results) or (
        isinstance(op, arith.IndexCastOp)
    )
    return takes_index and gives_data


def _vectorize_body(
    loop: tile.ForOp,
    width: int,
    scalar: Sequence[tile.LoadOp] = (),
    compares: Mapping[arith.CmpiOp, Set[SSAValue]] | None = None,
    pool: ConstantPool | None = None,
) -> None:
    """Loads -> load_vector, data ops repeated per element, stores -> store_vector; the
    `scalar` loads (the same value for every element) stay as they are. Each of `compares`
    (`copy_loops.lane_compares`) is repeated too, element `k` reading its index operands
    plus `k` (`pool` holds the constants).

    `lanes[k]` maps each element-0 value of the data path to its element-`k` twin."""
    lanes: list[dict[SSAValue, SSAValue]] = [{} for _ in range(width)]
    compares = compares or {}
    for op in list(loop.body.block.ops):
        indices = _element_indices(op, compares.get(op, ()), width, pool)
        if isinstance(op, tile.LoadOp) and op not in scalar:
            vector = tile.LoadVectorOp(op.memref, op.indices, width)
            Rewriter.insert_op(vector, InsertPoint.before(op))
            for k, result in enumerate(vector.res):
                result.name_hint = op.res.name_hint
                lanes[k][vector.res[0]] = result
            op.res.replace_all_uses_with(vector.res[0])
            Rewriter.erase_op(op)
        elif isinstance(op, tile.StoreOp):
            values = [lanes[k].get(op.value, op.value) for k in range(width)]
            Rewriter.replace_op(op, tile.StoreVectorOp(values, op.memref, op.indices))
        elif any(indices) or any(o in lanes[0] for o in op.operands):
            copies = []
            for k in range(width):
                copy = op.clone(value_mapper={**lanes[k], **indices[k]})
                Rewriter.insert_op(copy, InsertPoint.before(op))
                copies.append(copy)
            for i, old in enumerate(op.results):
                old.replace_all_uses_with(copies[0].results[i])
                for k in range(width):
                    lanes[k][copies[0].results[i]] = copies[k].results[i]
            Rewriter.erase_op(op)


def _element_indices(
    op: Operation, indices: Set[SSAValue], width: int, pool: ConstantPool | None
) -> list[dict[SSAValue, SSAValue]]:
    """Per element `k` of the vector, what each of the comparison `op`'s `indices` becomes:
    itself for element 0, `index + k` (inserted before `op`) for the others. Empty maps for
    an op that compares no column."""
    elements: list[dict[SSAValue, SSAValue]] = [{} for _ in range(width)]
    for index in indices:
        assert pool is not None
        elements[0][index] = index
        for k in range(1, width):
            shifted = arith.AddiOp(index, pool.index(k))
            Rewriter.insert_op(shifted, InsertPoint.before(op))
            elements[k][index] = shifted.result
    return elements


def vectorize(kernel: tile.KernelOp, width_default: int) -> bool:
    """Vectorizes the grid-stride loops of `kernel` (module doc); False: left alone."""
    threads = schedule.threads_of(kernel)
    if threads is None:
        return False
    width = schedule.read_knob(kernel, "vector", width_default)
    loops = schedule.top_loops(threads)
    stride = kernel.grid.count * threads.count
    if width <= 1 or not loops or any(loop.step_value != stride for loop in loops):
        return False
    if not all(_vectorizable(loop, width) for loop in loops):
        return False
    max_blocks = schedule.read_knob(kernel, "max_blocks", kernel.grid.count)
    largest = max(loop.upper for loop in loops)
    blocks = min(max(1, -(-largest // (threads.count * width))), max_blocks)
    schedule.set_count(kernel.grid, blocks)
    pool = ConstantPool.adopting(threads.body.block)
    starts: dict[SSAValue, SSAValue] = {}
    for loop in loops:
        if loop.lb not in starts:
            builder = schedule.IndexBuilder(InsertPoint.before(loop), pool)
            name = f"{loop.lb.name_hint}{width}" if loop.lb.name_hint else None
            starts[loop.lb] = builder.muli(loop.lb, width, name=name)
        new = tile.ForOp(starts[loop.lb], loop.upper, blocks * threads.count * width)
        Rewriter.insert_op(new, InsertPoint.before(loop))
        new.induction_var.name_hint = loop.induction_var.name_hint
        loop.induction_var.replace_all_uses_with(new.induction_var)
        target = new.body.block
        if isinstance(target.last_op, tile.YieldOp):
            body: Sequence[Operation] = [
                op for op in loop.body.block.ops if not isinstance(op, tile.YieldOp)
            ]
            schedule.move_ops(body, InsertPoint.before(target.last_op))
        else:
            schedule.move_ops(list(loop.body.block.ops), InsertPoint.at_end(target))
        Rewriter.erase_op(loop)
        _vectorize_body(new, width)
    schedule.write_knob(kernel, "vector", width)
    return True


@dataclass(frozen=True)
class TileVectorizePass(Tunable):
    """Grid-stride elementwise kernels: `width` elements per thread and access (module doc)."""

    name = "tile-vectorize"
    knobs = ("vector",)

    width: int = 4

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        strided = schedule.has_knob(kernel, "stage") or schedule.has_knob(kernel, "max_blocks")
        return strided and not schedule.has_knob(kernel, "vector")

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(vector=(1, 2, 4, 8))

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        if schedule.has_knob(kernel, "stage"):
            width = schedule.read_knob(kernel, "vector", MAX_VECTOR_BYTES)
            if vectorize_slab_reads(kernel, width):
                schedule.write_knob(kernel, "vector", _slab_width(kernel))
            # the copies widen whether or not the reads did (a `[BK][BN]` slab of V in
            # P.V is read along N; `tile-mma` reads its slabs in pairs already)
            vectorize_prologue_copies(kernel)
            return
        vectorize(kernel, self.width)


def _slab_width(kernel: tile.KernelOp) -> int:
    """The width `vectorize_slab_reads` used: that of the kernel's first vector read."""
    return next(len(op.res) for op in kernel.walk() if isinstance(op, tile.LoadVectorOp))


def vectorize_prologue_copies(kernel: tile.KernelOp) -> int:
    """The copies of a staged kernel that compute (a fused prologue: `cp.async` cannot take
    them) load and store 16 bytes at a time where `copy_loops.vector_width` allows; the
    plain copies are left to `tile-async-copy`. Returns the number of copies widened."""
    threads = schedule.threads_of(kernel)
    if threads is None:
        return 0
    pool = ConstantPool.adopting(threads.body.block)
    widened = 0
    for copy in copy_loops(threads):
        if copy.direct_load is not None:
            continue
        elements = [copy.store.value.type, *(load.res.type for load in copy.loads)]
        lanes = min(max(VECTOR_LANES), MAX_VECTOR_BYTES // max(map(byte_size, elements)))
        width = vector_width(copy, lanes)
        if width <= 1:
            continue
        per_row = row_loads(copy)
        column = widen(copy, width, pool)
        _vectorize_body(copy.loop, width, per_row, lane_compares(column), pool)
        widened += 1
    return widened
