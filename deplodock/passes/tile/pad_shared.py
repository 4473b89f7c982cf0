"""`tile-pad-shared`: lay out each shared slab so that a warp's accesses hit distinct banks.

Trigger: a `tile.shared_alloc` written by `tile-stage` (attribute `stage`) that has no
layout yet.

Decision: two ways to move rows apart, both counted on the actual accesses.
- *Padding* `p` (0, 1, 2, 4 elements added to each row; with vector reads of `w` elements
  only those keeping rows a multiple of `w` long, 8 included; a bf16 row of a multiple of 16
  bytes filled by a plain copy stays one, so `tile-async-copy` can still move it 16 bytes at a
  time).
- *XOR swizzle* with phase `P` (1, 2, 4, 8; rows of 2, 4, 8, ... 16-byte chunks): the chunks of
  row `r` are stored in the order `chunk ^ (r / P) % chunks` (`tile.Swizzle`). Rows keep their
  length, so no shared memory is spent and 16-byte alignment holds; each access pays one XOR.
For each layout, count the wavefronts of every load and store of the slab for the first warp
of the block (`banks.wavefronts`: the actual index arithmetic, evaluated lane by lane), each
weighted by how often it runs per chunk, plus one per swizzled access for its XOR; keep the
cheapest (a padding before a swizzle, the smallest padding, on a tie).

Why: a `[64][16]` fp32 slab read down a column (`a_s[%nn, %ki]` with neighbouring lanes on
neighbouring rows) puts lanes 0, 2, 4, ... in the same bank (rows are 16 words apart): an
8-way conflict. Rows of 17 words spread the 32 lanes over 32 banks.

    %b_s = tile.shared_alloc {stage = "b"} : memref<64x16xf32, 3>
        ==>
    %b_s = tile.shared_alloc {pad = 1 : i64, stage = "b"} : memref<64x17xf32, 3>

Read 16 bytes at a time (`load_vector ... width 4`), the same slab conflicts 4-way per
quarter-warp; `swizzle = 2` removes it without the 4 floats of padding a row would need:

    %b_s = tile.shared_alloc {pad = 0 : i64, swizzle = 2 : i64, stage = "b"}
        : memref<64x16xf32, 3>

Only the allocation changes: indices stay logical (below the logical row length; the padding
is never read, the swizzle is written out by `convert-tile-to-kernel`). Knobs (`schedule`,
or the pass options of the same names): `pad_a`, `pad_b` (elements per row of each operand's
slab), `swizzle_a`, `swizzle_b` (phase, 0 for none); a slab is padded or swizzled, not both.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import IntegerAttr, MemRefType, StringAttr
from xdsl.ir import Operation
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tile
from deplodock.dialects.common.ldmatrix import ROW_ELEMENTS
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.element_types import byte_size
from deplodock.dialects.hardware import (
    CP_ASYNC_BYTES,
    CP_ASYNC_CG_BYTES,
    MAX_SHARED_BYTES,
    shared_memref,
)
from deplodock.passes.tile import schedule
from deplodock.passes.tile.banks import wavefronts
from deplodock.passes.tile.choices import Tunable, grid
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


def slab_cost(
    alloc: tile.SharedAllocOp,
    threads: tile.ThreadsOp,
    row_length: int,
    swizzle: tile.Swizzle | None = None,
) -> int:
    """Weighted wavefronts of every access of the slab with rows of `row_length`, laid out
    by `swizzle` if given; a swizzle adds one XOR per access, counted as one wavefront."""
    total = 0
    for use in alloc.result.uses:
        access = use.operation
        accesses = (
            tile.LoadOp | tile.StoreOp | tile.LoadVectorOp | tile.StoreVectorOp | tile.LdmatrixOp
        )
        if not isinstance(access, accesses) or access.memref is not alloc.result:
            continue
        count = wavefronts(access, row_length, swizzle=swizzle)
        count = (count if count is not None else 1) + (swizzle is not None)
        total += count * _weight(access, threads)
    return total


def vector_width(alloc: tile.SharedAllocOp) -> int:
    """The widest vector access of the slab (rows must stay a multiple of it long, so every
    vector stays aligned; an `ldmatrix` row is 8 elements); 1 without vector accesses."""
    widths = [
        ROW_ELEMENTS if isinstance(op, tile.LdmatrixOp) else op.width
        for use in alloc.result.uses
        if isinstance(op := use.operation, tile.LoadVectorOp | tile.StoreVectorOp | tile.LdmatrixOp)
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


#: Swizzle phases tried (rows sharing one chunk order; 0 = no swizzle).
SWIZZLES: tuple[int, ...] = (0, 1, 2, 4, 8)


@dataclass(frozen=True)
class Layout:
    """How one slab's rows are laid out: `pad` elements added to each, or an XOR `swizzle`."""

    pad: int = 0
    swizzle: int = 0


def layouts(alloc: tile.SharedAllocOp, threads: tile.ThreadsOp) -> list[Layout]:
    """The layouts the slab may take: paddings keeping rows aligned, swizzles its rows allow."""
    memref = alloc.result.type
    assert isinstance(memref, MemRefType)
    length, width = memref.get_shape()[-1], row_alignment(alloc, threads)
    pads = [Layout(pad=p) for p in (*PADDINGS, 8) if (length + p) % width == 0]
    swizzles = [
        Layout(swizzle=phase)
        for phase in SWIZZLES[1:]
        if tile.Swizzle.problem(memref, phase) is None
    ]
    return pads + swizzles


def layout_cost(alloc: tile.SharedAllocOp, threads: tile.ThreadsOp, layout: Layout) -> int:
    """Weighted wavefronts of every access of the slab laid out as `layout`."""
    memref = alloc.result.type
    assert isinstance(memref, MemRefType)
    length = memref.get_shape()[-1] + layout.pad
    swizzle = tile.Swizzle.of(memref, layout.swizzle) if layout.swizzle else None
    return slab_cost(alloc, threads, length, swizzle)


def best_layout(alloc: tile.SharedAllocOp, threads: tile.ThreadsOp) -> Layout:
    """The cheapest layout; on a tie padding before swizzling (no index math), then the
    smallest padding (the least shared memory)."""
    return min(
        layouts(alloc, threads),
        key=lambda layout: (
            layout_cost(alloc, threads, layout),
            layout.swizzle > 0,
            layout.pad,
            layout.swizzle,
        ),
    )


def lay_out(alloc: tile.SharedAllocOp, layout: Layout) -> None:
    """Replaces the allocation by one whose rows are `layout.pad` elements longer, marked
    with its swizzle when it has one."""
    memref = alloc.result.type
    assert isinstance(memref, MemRefType)
    shape = list(memref.get_shape())
    shape[-1] += layout.pad
    padded = tile.SharedAllocOp(shared_memref(memref.element_type, shape), alloc.result.name_hint)
    padded.attributes.update(alloc.attributes)
    padded.attributes["pad"] = IntegerAttr(layout.pad, 64)
    if layout.swizzle:
        padded.attributes["swizzle"] = IntegerAttr(layout.swizzle, 64)
    Rewriter.replace_op(alloc, padded)


def _asked_layout(kernel: tile.KernelOp, operand: str, options: Layout) -> Layout | None:
    """The layout the kernel's `schedule` (else the pass options, -1 when unset) asks for
    `operand`'s slab; None: the bank analysis chooses."""
    amount = schedule.read_knob(kernel, f"pad_{operand}", options.pad)
    phase = schedule.read_knob(kernel, f"swizzle_{operand}", options.swizzle)
    if amount < 0 and phase < 0:
        return None
    if amount > 0 and phase > 0:
        raise PassFailedException(
            f"tile-pad-shared: kernel @{kernel.sym_name.data}: the slab of {operand} is padded "
            f"(pad_{operand} = {amount}) or swizzled (swizzle_{operand} = {phase}), not both"
        )
    return Layout(max(amount, 0), max(phase, 0))


def _check_swizzle(kernel: tile.KernelOp, alloc: tile.SharedAllocOp, layout: Layout) -> None:
    memref = alloc.result.type
    assert isinstance(memref, MemRefType)
    if layout.swizzle and (problem := tile.Swizzle.problem(memref, layout.swizzle)):
        raise PassFailedException(
            f"tile-pad-shared: kernel @{kernel.sym_name.data}: swizzle = {layout.swizzle} "
            f"for {memref}: {problem}"
        )


@dataclass(frozen=True)
class TilePadSharedPass(Tunable):
    """Staged slabs: row padding or swizzle chosen by a bank-conflict count (module doc)."""

    name = "tile-pad-shared"
    knobs = ("pad_a", "pad_b", "swizzle_a", "swizzle_b")

    #: Elements added to each row of the slab of `a` (-1: chosen by the bank analysis).
    pad_a: int = -1
    #: Elements added to each row of the slab of `b` (-1: chosen by the bank analysis).
    pad_b: int = -1
    #: XOR swizzle phase of the slab of `a` (0: none; -1: chosen by the bank analysis).
    swizzle_a: int = -1
    #: XOR swizzle phase of the slab of `b` (0: none; -1: chosen by the bank analysis).
    swizzle_b: int = -1

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return schedule.has_knob(kernel, "stage") and bool(_unpadded_operands(kernel))

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        operands = _unpadded_operands(kernel)
        pads = grid(**{f"pad_{operand}": PADDINGS for operand in operands})
        swizzles = grid(**{f"swizzle_{operand}": SWIZZLES for operand in operands})
        return [
            pad.with_knobs(swizzle)
            for pad in pads
            for swizzle in swizzles
            if all(not (pad[f"pad_{o}"] and swizzle[f"swizzle_{o}"]) for o in operands)
        ]

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        threads = schedule.threads_of(kernel)
        if threads is None:
            return
        for alloc in [o for o in threads.body.ops if isinstance(o, tile.SharedAllocOp)]:
            operand = alloc.attributes.get("stage")
            if not isinstance(operand, StringAttr) or "pad" in alloc.attributes:
                continue
            options = Layout(
                getattr(self, f"pad_{operand.data}", -1),
                getattr(self, f"swizzle_{operand.data}", -1),
            )
            asked = _asked_layout(kernel, operand.data, options)
            if asked is not None and not _keeps_rows_aligned(alloc, threads, asked):
                asked = None  # the knob another slab of the operand wrote: not for this one
            layout = asked or best_layout(alloc, threads)
            _check_swizzle(kernel, alloc, layout)
            lay_out(alloc, layout)
            schedule.write_knob(kernel, f"pad_{operand.data}", layout.pad)
            schedule.write_knob(kernel, f"swizzle_{operand.data}", layout.swizzle)
        _check_budget(kernel, threads)


def _keeps_rows_aligned(alloc: tile.SharedAllocOp, threads: tile.ThreadsOp, layout: Layout) -> bool:
    """Whether `layout`'s padding keeps the slab's rows a multiple of its `row_alignment`.
    One knob (`pad_b`) serves every slab of an operand; attention stages two `b` slabs (K
    and V), and a pad fine for K (4, no `ldmatrix`) would break V's 8-element `ldmatrix`
    rows."""
    memref = alloc.result.type
    assert isinstance(memref, MemRefType)
    return (memref.get_shape()[-1] + layout.pad) % row_alignment(alloc, threads) == 0


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
    if used > MAX_SHARED_BYTES:
        raise PassFailedException(
            f"tile-pad-shared: kernel @{kernel.sym_name.data} needs {used} bytes of shared "
            f"memory after padding, more than {MAX_SHARED_BYTES}"
        )
