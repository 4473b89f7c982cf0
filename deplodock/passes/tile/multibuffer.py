"""`tile-multibuffer`: each shared slab gets `depth` slots, used round robin by the K chunks.

Trigger: a kernel that `tile-stage` has staged (its `ko` loop copies chunks into slabs marked
`stage`), not yet multibuffered.

Rewrite: every staged `memref<E x BK>` becomes `memref<depth x E x BK>`; chunk `c = ko / BK`
is copied into and read from slot `c % depth`. With two or more slots the barrier at the end
of each chunk goes: the copy of chunk `c + 1` writes another slot than the one slower threads
may still be reading for chunk `c`, and the barrier after that copy already orders chunk
`c - 1`'s reads (same slot as `c + 1` with two slots) before it. One barrier per chunk instead
of two; `tile-pipeline` then uses the spare slots to copy ahead.

    %a_s = tile.shared_alloc ... : memref<64x17xf32, 3>       %a_s = ... : memref<2x64x17xf32, 3>
    tile.for %ko ... {                                         tile.for %ko ... {
      copy -> %a_s[%row, %col]                      ==>          %slot = (%ko / 16) % 2
      tile.barrier                                               copy -> %a_s[%slot, %row, %col]
      ... %a_s[%mm, %ki] ...                                     tile.barrier
      tile.barrier                                               ... %a_s[%slot, %mm, %ki] ...

Knob (`schedule`): `depth` (1-4; 1 leaves the kernel as it is), lowered to the most slots
that fit the shared memory a block may have (`hardware.MAX_SHARED_BYTES`). Default 3 where
three slots fit and the copies only move data, else 2. With `tile-pipeline` the third slot
puts the copy of chunk c + 2 in flight while chunk c is computed: twice the bytes a warp has
outstanding, which is what binds a product with few blocks per SM, and a chunk more of lead
for MMAs, which get through a chunk about ten times faster than FFMAs (modeled on H100: fp32
q_proj of Qwen2.5-7B at 32 tokens 63.7 -> 54.7 us; bf16 gate_proj at 512 tokens, 256 x 128
tiles, 224.9 -> 219.1 us). A copy that computes a fused prologue keeps two
(`copies_compute`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, MemRefType, StringAttr
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.hardware import MAX_SHARED_BYTES, shared_memref
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.copy_loops import copy_loops
from deplodock.passes.tile.nests import body_ops

DEPTHS: tuple[int, ...] = (1, 2, 3, 4)


@dataclass
class StagedLoop:
    """The pieces of a staged K loop the buffering passes rearrange."""

    threads: tile.ThreadsOp
    ko: tile.ForOp
    ki: tile.ForOp
    slabs: list[tile.SharedAllocOp]
    copies: list[tile.ForOp]

    @property
    def chunk(self) -> int:
        return self.ko.step_value

    @property
    def chunks(self) -> int:
        return self.ko.upper // self.ko.step_value

    @property
    def slot(self) -> SSAValue | None:
        """The slot of the current chunk, as `tile-multibuffer` indexes its slotted slabs:
        the first index of the copies' stores into them (None before multibuffering)."""
        slotted = {slab.result for slab in self.slabs if "depth" in slab.attributes}
        for copy in self.copies:
            for op in copy.walk():
                if isinstance(op, tile.StoreOp | tile.StoreVectorOp) and op.memref in slotted:
                    return op.indices[0]
        return None


def staged_loop(kernel: tile.KernelOp) -> StagedLoop | None:
    """The staged K loop of a kernel (`tile-stage`'s output), or None."""
    threads = schedule.threads_of(kernel)
    if threads is None:
        return None
    slabs = [
        op
        for op in threads.body.ops
        if isinstance(op, tile.SharedAllocOp) and isinstance(op.attributes.get("stage"), StringAttr)
    ]
    if not slabs:
        return None
    for loop in schedule.top_loops(threads):
        inner = [op for op in body_ops(loop) if isinstance(op, tile.ForOp)]
        copies = [op for op in inner if _writes_slab(op, slabs)]
        reduces = [op for op in inner if op.is_reduce]
        if copies and len(reduces) == 1:
            return StagedLoop(threads, loop, reduces[0], slabs, copies)
    return None


def _writes_slab(loop: tile.ForOp, slabs: list[tile.SharedAllocOp]) -> bool:
    targets = {slab.result for slab in slabs}
    stores = tile.StoreOp | tile.StoreVectorOp
    return any(isinstance(op, stores) and op.memref in targets for op in loop.walk())


def slot_of(
    build: schedule.IndexBuilder, pool: ConstantPool, k_start: SSAValue, chunk: int, depth: int
) -> SSAValue:
    """`(k_start / chunk) % depth`: the slot of the chunk starting at `k_start`."""
    index = build.add(arith.DivSIOp(k_start, pool.index(chunk)), "chunk")
    return build.add(arith.RemSIOp(index, pool.index(depth)), "slot")


def multibuffer(staged: StagedLoop, depth: int) -> None:
    """Adds the slot dimension and drops the trailing barrier (see the module docstring)."""
    pool = ConstantPool.adopting(staged.threads.body.block)
    build = schedule.IndexBuilder(InsertPoint.at_start(staged.ko.body.block), pool)
    slot = slot_of(build, pool, staged.ko.induction_var, staged.chunk, depth)
    for slab in staged.slabs:
        memref = slab.result.type
        assert isinstance(memref, MemRefType)
        shape = [depth, *memref.get_shape()]
        slotted = tile.SharedAllocOp(shared_memref(memref.element_type, shape))
        slotted.attributes.update(slab.attributes)
        slotted.attributes["depth"] = IntegerAttr(depth, 64)
        slotted.result.name_hint = slab.result.name_hint
        Rewriter.insert_op(slotted, InsertPoint.before(slab))
        for use in list(slab.result.uses):
            access = use.operation
            if isinstance(access, tile.LoadOp):
                new = tile.LoadOp(slotted.result, [slot, *access.indices])
                new.res.name_hint = access.res.name_hint
            elif isinstance(access, tile.LoadVectorOp):
                new = tile.LoadVectorOp(slotted.result, [slot, *access.indices], access.width)
                for old_value, new_value in zip(access.res, new.res, strict=True):
                    new_value.name_hint = old_value.name_hint
            elif isinstance(access, tile.LdmatrixOp):
                new = tile.LdmatrixOp(
                    slotted.result, [slot, *access.indices], access.count, access.is_trans
                )
                for old_value, new_value in zip(access.res, new.res, strict=True):
                    new_value.name_hint = old_value.name_hint
            elif isinstance(access, tile.StoreOp):
                new = tile.StoreOp(access.value, slotted.result, [slot, *access.indices])
            elif isinstance(access, tile.StoreVectorOp):
                new = tile.StoreVectorOp(access.values, slotted.result, [slot, *access.indices])
            else:
                raise PassFailedException(f"tile-multibuffer: slab used by {access.name}")
            Rewriter.replace_op(access, new)
        Rewriter.erase_op(slab)
    trailing = staged.ki.next_op
    if depth >= 2 and isinstance(trailing, tile.BarrierOp):
        Rewriter.erase_op(trailing)


#: The default depth: three slots where they fit and the copies only move data, else two.
DEEP_DEPTH = 3
DEFAULT_DEPTH = 2


def default_depth(staged: StagedLoop) -> int:
    """`DEEP_DEPTH` when its slots fit a block's shared memory and the copies only move data,
    else `DEFAULT_DEPTH`."""
    fits = tile.shared_bytes(staged.threads) * DEEP_DEPTH <= MAX_SHARED_BYTES
    return DEEP_DEPTH if fits and not copies_compute(staged) else DEFAULT_DEPTH


def copies_compute(staged: StagedLoop) -> bool:
    """Whether a copy computes what it stages (a fused prologue, `tile-stage`) rather than
    storing a global load unchanged (`CopyLoop.direct_load`). Such a prologue reads its
    inputs through L1 once per tile (softmax's row for attention's P.V), and a third slot
    would shrink the L1 the shared memory leaves (modeled on H100: bf16 attention of
    Qwen2.5-7B at 128 tokens, 62.8 -> 74.5 us)."""
    plain = {copy.loop for copy in copy_loops(staged.threads) if copy.direct_load is not None}
    return any(loop not in plain for loop in staged.copies)


@dataclass(frozen=True)
class TileMultibufferPass(Tunable):
    """Staged contractions: `depth` slots per slab, round robin (see the module docstring)."""

    name = "tile-multibuffer"
    knobs = ("depth",)

    #: Slots per slab; 0: the default (module docstring).
    depth: int = 0

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return staged_loop(kernel) is not None and not schedule.has_knob(kernel, "depth")

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(depth=DEPTHS)

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        staged = staged_loop(kernel)
        if staged is None or any("depth" in s.attributes for s in staged.slabs):
            return
        depth = schedule.read_knob(kernel, "depth", self.depth or default_depth(staged))
        if depth not in DEPTHS:
            raise PassFailedException(
                f"tile.kernel @{kernel.sym_name.data}: depth must be one of "
                f"{', '.join(map(str, DEPTHS))}, got {depth}"
            )
        used = tile.shared_bytes(staged.threads) * depth
        if used > MAX_SHARED_BYTES:
            depth = max(1, MAX_SHARED_BYTES // tile.shared_bytes(staged.threads))
        if depth > 1:
            multibuffer(staged, depth)
        schedule.write_knob(kernel, "depth", depth)
