"""`tile-pad-shared`: pad the rows of each shared slab so that a warp's accesses hit distinct banks.

Trigger: a `tile.shared_alloc` written by `tile-stage` (attribute `stage`) that has no
padding yet.

Decision: for every candidate padding `p` (0, 1, 2, 4 elements added to each row; with vector
reads of `w` elements only those keeping rows a multiple of `w` long, 8 included; a bf16 row
of a multiple of 16 bytes filled by a plain copy stays one, so `tile-async-copy` can still
move it 16 bytes at a time), count the
wavefronts of every load and store of the slab for the first warp of the block
(`banks.wavefronts`: the actual index arithmetic, evaluated lane by lane), each weighted by how
often it runs per chunk; keep the cheapest `p` (the smallest on a tie).

Why: a `[64][16]` fp32 slab read down a column (`a_s[%nn, %ki]` with neighbouring lanes on
neighbouring rows) puts lanes 0, 2, 4, ... in the same bank (rows are 16 words apart): an
8-way conflict. Rows of 17 words spread the 32 lanes over 32 banks.

    %b_s = tile.shared_alloc {stage = "b"} : memref<64x16xf32, 3>
        ==>
    %b_s = tile.shared_alloc {pad = 1 : i64, stage = "b"} : memref<64x17xf32, 3>

Only the allocation changes: indices stay below the logical row length, the padding is never
read. Knobs (`schedule`): `pad_a`, `pad_b` (elements per row of each operand's slab).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tile
from deplodock.dialects.element_types import byte_size
from deplodock.dialects.hardware import (
    CP_ASYNC_BYTES,
    CP_ASYNC_CG_BYTES,
    MAX_STATIC_SHARED_BYTES,
    shared_memref,
)
from deplodock.passes.tile import schedule
from deplodock.passes.tile.banks import wavefronts
from deplodock.passes.tile.choices import Choice, Tunable, grid, has_knob
from deplodock.passes.tile.copy_loops import copy_loops

#: Paddings tried (elements per row).
PADDINGS: tuple[int, ...] = (0, 1, 2, 4)


def _weight(access: Operation, threads: tile.ThreadsOp) -> int:
    """How many times one thread runs `access` per trip of the outermost loop around it."""
    weight, parent = 1, access.parent_op()
    loops: list[tile.ForOp] = []
    while parent is not None and parent is not threads:
        if isinstance(parent, tile.ForOp):
            loops.append(parent)
        parent = parent.parent_op()
    for loop in loops[:-1]:  # the outermost (the K chunk loop) is shared by every access
        weight *= max(1, loop.upper // loop.step_value)
    return weight


def slab_cost(alloc: tile.SharedAllocOp, threads: tile.ThreadsOp, row_length: int) -> int:
    """Weighted wavefronts of every access of the slab with rows of `row_length`."""
    total = 0
    for use in alloc.result.uses:
        access = use.operation
        accesses = tile.LoadOp | tile.StoreOp | tile.LoadVectorOp | tile.StoreVectorOp
        if not isinstance(access, accesses) or access.memref is not alloc.result:
            continue
        count = wavefronts(access, row_length)
        total += (count if count is not None else 1) * _weight(access, threads)
    return total


def vector_width(alloc: tile.SharedAllocOp) -> int:
    """The widest vector access of the slab (rows must stay a multiple of it long, so every
    vector stays aligned); 1 without vector accesses."""
    widths = [
        use.operation.width
        for use in alloc.result.uses
        if isinstance(use.operation, tile.LoadVectorOp | tile.StoreVectorOp)
    ]
    return max(widths, default=1)


def row_alignment(alloc: tile.SharedAllocOp, threads: tile.ThreadsOp) -> int:
    """Elements a padded row must stay a multiple of: the widest vector access, and for a
    2-byte element filled by a plain copy 16 bytes' worth when the row is that long
    (`cp.async` moves 4 bytes at least, so a bf16 slab whose rows lose 16-byte alignment
    would be copied through registers by `tile-async-copy`)."""
    memref = alloc.result.type
    assert isinstance(memref, MemRefType)
    width = vector_width(alloc)
    element = byte_size(memref.element_type)
    row_bytes = memref.get_shape()[-1] * element
    if element < CP_ASYNC_BYTES[0] and row_bytes % CP_ASYNC_CG_BYTES == 0:
        plain = [c for c in copy_loops(threads) if c.store.memref is alloc.result]
        if any(copy.direct_load is not None for copy in plain):
            width = max(width, CP_ASYNC_CG_BYTES // element)
    return width


def best_padding(alloc: tile.SharedAllocOp, threads: tile.ThreadsOp) -> int:
    shape = alloc.result.type.get_shape()
    width = row_alignment(alloc, threads)
    candidates = [pad for pad in (*PADDINGS, 8) if (shape[-1] + pad) % width == 0]
    costs = [(slab_cost(alloc, threads, shape[-1] + pad), pad) for pad in candidates]
    return min(costs)[1]


def pad(alloc: tile.SharedAllocOp, amount: int) -> None:
    """Replaces the allocation by one whose rows are `amount` elements longer."""
    memref = alloc.result.type
    assert isinstance(memref, MemRefType)
    shape = list(memref.get_shape())
    shape[-1] += amount
    padded = tile.SharedAllocOp(shared_memref(memref.element_type, shape), alloc.result.name_hint)
    padded.attributes.update(alloc.attributes)
    padded.attributes["pad"] = IntegerAttr(amount, 64)
    Rewriter.replace_op(alloc, padded)


@dataclass(frozen=True)
class TilePadSharedPass(Tunable, ModulePass):
    """Staged slabs: row padding chosen by a bank-conflict count (see the module doc)."""

    name = "tile-pad-shared"
    knobs = ("pad_a", "pad_b")

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return has_knob(kernel, "stage") and bool(_unpadded_operands(kernel))

    def candidates(self, kernel: tile.KernelOp) -> list[Choice]:
        return grid(**{f"pad_{operand}": PADDINGS for operand in _unpadded_operands(kernel)})

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.ops if isinstance(k, tile.KernelOp)]:
            threads = schedule.threads_of(kernel)
            if threads is None:
                continue
            for alloc in [o for o in threads.body.ops if isinstance(o, tile.SharedAllocOp)]:
                operand = alloc.attributes.get("stage")
                if not isinstance(operand, StringAttr) or "pad" in alloc.attributes:
                    continue
                knob = f"pad_{operand.data}"
                amount = schedule.read_knob(kernel, knob, -1)
                if amount < 0:
                    amount = best_padding(alloc, threads)
                pad(alloc, amount)
                schedule.write_knob(kernel, knob, amount)
            _check_budget(kernel, threads)


def _unpadded_operands(kernel: tile.KernelOp) -> list[str]:
    """The operands (`a`, `b`) whose slabs `tile-stage` made and nothing has padded yet."""
    threads = schedule.threads_of(kernel)
    if threads is None:
        return []
    allocs = [o for o in threads.body.ops if isinstance(o, tile.SharedAllocOp)]
    stages = [alloc.attributes.get("stage") for alloc in allocs if "pad" not in alloc.attributes]
    return [stage.data for stage in stages if isinstance(stage, StringAttr)]


def _check_budget(kernel: tile.KernelOp, threads: tile.ThreadsOp) -> None:
    used = tile.shared_bytes(threads)
    if used > MAX_STATIC_SHARED_BYTES:
        raise PassFailedException(
            f"tile-pad-shared: kernel @{kernel.sym_name.data} needs {used} bytes of shared "
            f"memory after padding, more than {MAX_STATIC_SHARED_BYTES}"
        )
