"""`tile-chunk-k`: the K loop of a register-tiled contraction walks K in chunks of BK.

Trigger: a kernel that `tile-thread` has mapped (knob `fm`), whose K loop (the top-level
reduce loop of the block, starting at 0 with step 1) is longer than two chunks.

Rewrite: `for k < K` becomes `for ko < K - K % BK step BK { for ki < BK { k = ko + ki } }`,
and the last `K % BK` iterations, if any, run in a *cleanup* loop `for k = K - K % BK to K`
that continues from the chunked loop's accumulators. Alone this changes no arithmetic; it
gives `tile-stage` a chunk to copy into shared memory before the `ki` loop reads it, with
every staged chunk whole (no bounds checks along K).

    %acc:16 = tile.for %k = %c0 to 100             %p:16 = tile.for %ko = %c0 to 96 step 16 ... {
        iter_args(...) { body(k) }        ==>        %q:16 = tile.for %ki = %c0 to 16 ... {
                                                       %k = arith.addi %ko, %ki ... body(k) }
                                                   %acc:16 = tile.for %k = %c96 to 100 ...

Knob (`schedule`): `bk`. The default takes the deepest chunk of a short list whose two slots
of both slabs (rows padded by one 16-byte vector) fit the shared memory a block may opt in to
(99 KiB, `hardware.MAX_SHARED_BYTES`), that K holds twice, one dividing K first (the K tail's
cleanup loop reads global memory past the slabs) and, for a computed operand (its copy goes
through registers), at most `MAX_PREFETCH_ELEMENTS` per thread; else 16. The list is 64, 32
for MMA-fragment cells (`tile-thread`'s `mma = 1`): one 16-deep chunk is a single MMA step
per barrier and per `cp.async` group, too little work to cover the copy's latency. It is 32,
16 on the FMA pipe: a 32-deep fp32 chunk reads whole 128-byte lines and halves the
per-chunk barriers, waits and address arithmetic. A computed operand on the FMA pipe keeps
16: at 32 the unrolled softmax prologue of attention's P.V (bf16 SDPA of TinyLlama at 128
tokens) spilled in ptxas. Modeled on H100 at 512 tokens: bf16
Qwen2.5-7B q_proj (128 x 112 tiles, BK 32) 95 -> 64 us, its k/v projection (64 x 64, BK 64)
50 -> 37 us, its down_proj (128 x 112, BK 64, past 48 KiB) 343 -> 266 us; fp32 TinyLlama
q_proj (128 x 64, BK 32) 101.8 -> 99.6 us, and at 32 tokens 45.4 -> 35.9 us (twice the
bytes in flight per warp).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.hardware import MAX_SHARED_BYTES, MAX_VECTOR_BYTES
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.contraction import k_loop_of, nested_product, operand_bytes
from deplodock.passes.tile.multibuffer import DEFAULT_DEPTH
from deplodock.passes.tile.nests import body_ops, start_of

#: Chunk lengths the pass accepts (and the tuner may choose from).
CHUNKS: tuple[int, ...] = (4, 8, 16, 32, 64)

#: The default chunk, and those the heuristic tries, deepest first (module doc): for kernels
#: on tensor cores and for those on the FMA pipe.
DEFAULT_CHUNK = 16
MMA_CHUNKS: tuple[int, ...] = (64, 32)
FMA_CHUNKS: tuple[int, ...] = (32, 16)
#: Elements of a computed operand's chunk one thread may copy (and `tile-register-prefetch`
#: hold in registers, for each input of the prologue) for a deeper MMA chunk to be taken.
MAX_PREFETCH_ELEMENTS = 16


def computes_an_operand(loop: tile.ForOp) -> bool:
    """Whether a product of the K loop takes something other than a loaded value (a fused
    prologue): its copy goes through registers, and `tile-register-prefetch` holds a thread's
    share of the chunk for each input, so a deeper chunk costs registers (32 elements per
    thread of the attention P.V prologue spilled at 255 registers)."""
    for op in loop.walk():
        if isinstance(op, arith.MulfOp):
            for operand in op.operands:
                source = operand.owner
                if isinstance(source, arith.ExtFOp):
                    source = source.input.owner
                if not isinstance(source, tile.LoadOp):
                    return True
    return False


def default_chunk(kernel: tile.KernelOp, loop: tile.ForOp) -> int:
    """The deepest of `MMA_CHUNKS` (MMA-fragment cells) or `FMA_CHUNKS` whose two slots of
    both slabs fit a block's shared memory, that K holds twice and, for a computed operand,
    that gives a thread at most `MAX_PREFETCH_ELEMENTS` of it, one dividing K first; else,
    and for a computed operand on the FMA pipe, `DEFAULT_CHUNK`."""
    bm, bn = schedule.read_knob(kernel, "bm", 0), schedule.read_knob(kernel, "bn", 0)
    threads = max(1, schedule.read_knob(kernel, "threads", 1))
    k, computed = loop.upper, computes_an_operand(loop)
    element = operand_bytes(kernel)
    if (product := nested_product(loop)) is not None:
        return product_chunk(k, bm, bn, element, *product)
    mma = schedule.read_knob(kernel, "mma", 0) == 1
    if not mma and computed:
        return DEFAULT_CHUNK
    chunks = MMA_CHUNKS if mma else FMA_CHUNKS

    def takes(bk: int) -> bool:
        # rows padded by up to one widest vector (`tile-pad-shared`), in as many slots as
        # `tile-multibuffer` gives at the least (it takes three where they fit)
        slots = DEFAULT_DEPTH * (bm + bn) * (bk * element + MAX_VECTOR_BYTES)
        per_thread = max(bm, bn) * bk // threads
        return (
            k >= 2 * bk
            and slots <= MAX_SHARED_BYTES
            and not (computed and per_thread > MAX_PREFETCH_ELEMENTS)
        )

    fitting = [bk for bk in chunks if takes(bk)]
    # a chunk that divides K leaves no cleanup loop, whose reads skip shared memory
    whole = [bk for bk in fitting if k % bk == 0]
    return (whole or fitting or [DEFAULT_CHUNK])[0]


#: Chunks of keys attention in one kernel may take, deepest first (`product_chunk`).
PRODUCT_CHUNKS: tuple[int, ...] = (64, 32, 16)


def product_chunk(k: int, bm: int, bn: int, element: int, length: int, product_bytes: int) -> int:
    """The deepest of `PRODUCT_CHUNKS` dividing K (`tile-streaming-softmax` has no tail) whose
    buffers fit a block's shared memory once: the block's queries (`bm x length`), a chunk
    of keys (`bk x length`) and of values (`bk x bn`), the chunk's P and its fp32 scores
    (`bk x bm` each), each row padded by one widest vector; else the smallest dividing K."""

    def fits(bk: int) -> bool:
        rows = [(bm, length * product_bytes), (bk, length * product_bytes), (bk, bn * element)]
        rows += [(bk, bm * element), (bk, bm * 4)]
        total = sum(count * (width + MAX_VECTOR_BYTES) for count, width in rows)
        return total <= MAX_SHARED_BYTES

    whole = [bk for bk in PRODUCT_CHUNKS if k % bk == 0 and k >= 2 * bk]
    return next((bk for bk in whole if fits(bk)), whole[-1] if whole else DEFAULT_CHUNK)


def _is_chunked(loop: tile.ForOp) -> bool:
    """Whether `loop` is already a chunk loop: an inner loop carries its accumulators. (Other
    inner loops, such as the dot product that computes attention's probability in a fused
    prologue, are part of the body.)"""
    carried = list(loop.iter_args)
    return any(
        isinstance(op, tile.ForOp) and carried and list(op.inits) == carried
        for op in body_ops(loop)
    )


def legal_chunks(k: int) -> list[int]:
    return [bk for bk in CHUNKS if 2 * bk <= k]


def chunk_k(kernel: tile.KernelOp, bk: int) -> bool:
    """Splits the K loop of a register-tiled kernel into chunks (see the module doc)."""
    threads = schedule.threads_of(kernel)
    loop = k_loop_of(threads) if threads is not None else None
    if loop is None or start_of(loop) != 0 or loop.step_value != 1:
        return False
    if _is_chunked(loop):
        return False
    k = loop.upper
    if k < 2 * bk:
        return False
    main = k - k % bk
    pool = ConstantPool.adopting(threads.body.block)  # type: ignore[union-attr]
    cleanup = loop.clone() if main < k else None
    outer = tile.ForOp(pool.index(0), main, bk, list(loop.inits))
    inner = tile.ForOp(pool.index(0), bk, 1, list(outer.iter_args))
    outer.induction_var.name_hint, inner.induction_var.name_hint = "ko", "ki"
    for new, old in zip(outer.iter_args, loop.iter_args, strict=True):
        new.name_hint = old.name_hint
    for new, old in zip(inner.iter_args, loop.iter_args, strict=True):
        new.name_hint = old.name_hint
    Rewriter.insert_op(outer, InsertPoint.before(loop))
    outer.body.block.add_ops([inner, tile.YieldOp(*inner.res)])
    k_value = arith.AddiOp(outer.induction_var, inner.induction_var)
    k_value.result.name_hint = loop.induction_var.name_hint
    inner.body.block.add_op(k_value)
    loop.induction_var.replace_all_uses_with(k_value.result)
    for old, new in zip(loop.iter_args, inner.iter_args, strict=True):
        old.replace_all_uses_with(new)
    schedule.move_ops(list(loop.body.block.ops), InsertPoint.at_end(inner.body.block))
    results: list[SSAValue] = list(outer.res)
    if cleanup is not None:
        rest = tile.ForOp(pool.index(main), k, 1, results)
        rest.induction_var.name_hint = loop.induction_var.name_hint
        for new, old in zip(rest.iter_args, loop.iter_args, strict=True):
            new.name_hint = old.name_hint
        mapping = {cleanup.induction_var: rest.induction_var}
        mapping |= dict(zip(cleanup.iter_args, rest.iter_args, strict=True))
        for op in cleanup.body.block.ops:
            rest.body.block.add_op(op.clone(value_mapper=mapping))
        Rewriter.insert_op(rest, InsertPoint.after(outer))
        results = list(rest.res)
        cleanup.erase()
    for old, new in zip(loop.res, results, strict=True):
        new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    Rewriter.erase_op(loop)
    return True


@dataclass(frozen=True)
class TileChunkKPass(Tunable):
    """Register-tiled contractions: K in chunks of `bk` plus a cleanup loop."""

    name = "tile-chunk-k"
    knobs = ("bk",)

    #: 0: the heuristic's chunk (`default_chunk`).
    bk: int = 0

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return schedule.has_knob(kernel, "fm") and not schedule.has_knob(kernel, "bk")

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        threads = schedule.threads_of(kernel)
        loop = k_loop_of(threads) if threads is not None else None
        return [] if loop is None else grid(bk=legal_chunks(loop.upper))

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        if not schedule.has_knob(kernel, "fm"):
            return
        threads = schedule.threads_of(kernel)
        loop = k_loop_of(threads) if threads is not None else None
        guess = default_chunk(kernel, loop) if loop is not None else DEFAULT_CHUNK
        bk = schedule.read_knob(kernel, "bk", self.bk or guess)
        if bk <= 0:
            raise PassFailedException(
                f"tile.kernel @{kernel.sym_name.data}: bk must be positive, got {bk}"
            )
        if chunk_k(kernel, bk):
            schedule.write_knob(kernel, "bk", bk)
