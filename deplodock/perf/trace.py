"""Counters from a trace: run a few blocks of a kernel and record what every warp issues.

A `kernel.func` is run by the kernel-level interpreter for three representative blocks (the
first, one in the middle, the last; 16 spread over the grid where blocks do unequal work,
`representative_blocks`), every warp of each. For each op a warp executes with at
least one active lane, `instructions.op_cost` says what it issues; for each memory access the
tracer sees the active lanes' addresses and counts, per warp request:

- global: sectors moved (`memory.global_sectors`), and the distinct sectors per buffer the
  block touches (what reaches L2 when L1 keeps the block's data);
- shared: wavefronts by the bank rules (`memory.shared_wavefronts`) and the conflict-free
  minimum.

A vector load or store is one request per warp of 8 or 16 bytes per thread (fewer requests
and instructions than the scalar accesses it replaces); a `cp.async` is an LDGSTS: a global
read (sectors, lines) and a shared write (wavefronts) in one instruction, with no register
round trip.

Global buffers are *virtual* during a trace: a read-only zero-stride view of the right shape,
so an lm_head weight of 2 GB costs nothing; loads return zeros (addresses never depend on
them in our kernels, except an embedding's row index, for which row 0 is as good as any).
Shared memory is real, with the race detector on.

The whole grid is extrapolated by block class: the interior block stands for every block but
the first and the last. Within a block, a long loop runs a window of its iterations, scaled
(a K loop's last iterations, where its pipeline drains, exactly: `_sample_length`).
`bytes_in_flight_per_warp` estimates memory-level parallelism: the global bytes a warp can
have outstanding at once, i.e. the loads of one loop body (times nvcc's usual unroll of 4
for a loop without a pragma) or of a straight-line region.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls
from xdsl.ir import Operation, SSAValue

from deplodock.dialects import kernel
from deplodock.dialects.common.ldmatrix import ROW_ELEMENTS
from deplodock.dialects.element_types import buffer_bytes, byte_size, numpy_dtype
from deplodock.dialects.hardware import WARP_SIZE, is_shared
from deplodock.dialects.queries import def_chain_reaches, enclosing_module
from deplodock.interpreters import make_interpreter
from deplodock.interpreters.async_copy import issue_copy
from deplodock.interpreters.blocks import (
    BlockState,
    load_matrices,
    load_shared,
    load_vector,
    store_shared,
    store_vector,
)
from deplodock.interpreters.kernel import KernelFunctions
from deplodock.interpreters.shared_memory import (
    RaceError,
    SharedBuffer,
    UninitializedReadError,
)
from deplodock.interpreters.simt import LockstepState, buffer_name, mma_operands
from deplodock.perf import memory
from deplodock.perf.instructions import CLASSES, Cost, fused_multiplies, op_cost

#: A streaming loop longer than this is traced for this many iterations and scaled.
SAMPLED_ITERATIONS = 16
#: A loop that stages through shared memory (a GEMM's K loop: barriers, `cp.async` slots)
#: is traced for a steady window of at least this many iterations, a whole number of turns of
#: its slots (`staged_window`), scaled, and its last `StagedWindow.tail` iterations exactly.
SAMPLED_STAGED_ITERATIONS = 4
#: The fewest last iterations of a staged loop traced exactly: a register prefetch stops in
#: the last one, a `cp.async` pipeline of `depth` slots in the last `depth - 1`.
STAGED_TAIL_ITERATIONS = 2
#: A loop whose slot rotation (`_slot_count`) is longer than this is not sampled.
MAX_SLOTS = 8
#: A staged loop that starts where its block says (causal attention's P.V, which the
#: block's diagonal shifts) is traced for this many iterations, scaled, and no tail: a
#: whole number of turns of 1, 2, 3, 4, 6 or 8 slots. Its first iterations read fewer
#: sectors that the block has not read before than its later ones: the short window
#: undercounted the two-kernel bf16 TinyLlama attention's distinct loads by 11 %, this one
#: by 5.5 %; attention in one kernel samples within 2 % (tests/perf/test_trace_sampling.py).
SHIFTED_STAGED_ITERATIONS = 24

_SCALAR_COUNTERS = (
    "global_load_requests",
    "global_load_sectors",
    "global_load_lines",
    "global_store_requests",
    "global_store_sectors",
    "global_store_lines",
    "shared_requests",
    "shared_wavefronts",
    "shared_ideal_wavefronts",
)

#: Loop unroll nvcc applies to a loop without a pragma (what puts several loads in flight).
DEFAULT_UNROLL = 4


@dataclass
class BlockCounters:
    """What one traced block issued (warp-instructions and memory requests)."""

    block_id: int
    instructions: Counter[str] = field(default_factory=Counter)
    global_load_requests: int = 0
    global_load_sectors: int = 0
    global_load_lines: int = 0
    global_store_requests: int = 0
    global_store_sectors: int = 0
    global_store_lines: int = 0
    shared_requests: int = 0
    shared_wavefronts: int = 0
    shared_ideal_wavefronts: int = 0
    #: Distinct bytes (whole sectors) the block reads / writes, per global buffer.
    unique_load_bytes: dict[str, int] = field(default_factory=dict)
    unique_store_bytes: dict[str, int] = field(default_factory=dict)


@dataclass
class KernelCounters:
    """A kernel's counters for the whole grid (extrapolated from the traced blocks)."""

    name: str
    grid: int
    block: int
    traced_blocks: list[BlockCounters]
    weights: list[int]
    buffer_bytes: dict[str, int]
    bytes_in_flight_per_warp: float
    shared_bytes: int
    source: str = "trace"
    #: The heaviest traced block's work over the mean block's (1.0 where blocks do equal
    #: work): an SM that runs it is busy that much longer (`model.model_kernel`).
    heaviest_block: float = 1.0

    def total(self, attribute: str) -> float:
        return float(
            sum(
                w * getattr(b, attribute)
                for b, w in zip(self.traced_blocks, self.weights, strict=True)
            )
        )

    @property
    def instructions(self) -> dict[str, float]:
        """Warp-instructions of the whole grid by class."""
        totals = {name: 0.0 for name in CLASSES}
        for block, weight in zip(self.traced_blocks, self.weights, strict=True):
            for name, count in block.instructions.items():
                totals[name] += weight * count
        return totals

    @property
    def sectors_per_load_request(self) -> float:
        requests = self.total("global_load_requests")
        return self.total("global_load_sectors") / requests if requests else 0.0

    @property
    def sectors_per_store_request(self) -> float:
        requests = self.total("global_store_requests")
        return self.total("global_store_sectors") / requests if requests else 0.0

    @property
    def bank_conflict_factor(self) -> float:
        """Shared wavefronts over the conflict-free minimum (1.0: no conflicts)."""
        ideal = self.total("shared_ideal_wavefronts")
        return self.total("shared_wavefronts") / ideal if ideal else 1.0

    def unique_bytes(self, kind: str) -> dict[str, float]:
        """Per buffer: the sum over blocks of each block's distinct bytes (`load`/`store`)."""
        totals: dict[str, float] = defaultdict(float)
        for block, weight in zip(self.traced_blocks, self.weights, strict=True):
            per_block = block.unique_load_bytes if kind == "load" else block.unique_store_bytes
            for name, count in per_block.items():
                totals[name] += weight * count
        return dict(totals)

    def footprint_bytes(self, kind: str) -> float:
        """Distinct bytes over the grid, at most each buffer's size (compulsory traffic)."""
        return sum(
            min(total, self.buffer_bytes[name]) for name, total in self.unique_bytes(kind).items()
        )


def representative_blocks(grid: int, varying: bool = False) -> tuple[list[int], list[int]]:
    """Block ids to trace and how many blocks each stands for.

    Blocks of a uniform kernel differ only at the edges: the first, one in the middle and
    the last stand for all. Where a block's loop runs a number of trips that depends on the
    block (`varies_by_block`: causal attention's P.V stops at the block's diagonal), the
    middle block would stand for them all whatever its own count; then `VARYING_SAMPLES`
    blocks spread over the grid by the golden-ratio sequence (which no grid ordering
    aliases), each standing for an equal share."""
    if grid <= 3:
        return list(range(grid)), [1] * grid
    if not varying:
        return [0, grid // 2, grid - 1], [1, grid - 2, 1]
    ids = sorted({int(grid * ((k * GOLDEN_FRACTION) % 1.0)) for k in range(VARYING_SAMPLES)})
    shares = [grid * (k + 1) // len(ids) - grid * k // len(ids) for k in range(len(ids))]
    return ids, shares


#: How many blocks `representative_blocks` traces for a kernel whose blocks do unequal work.
VARYING_SAMPLES = 16
GOLDEN_FRACTION = (math.sqrt(5.0) - 1.0) / 2.0


def varies_by_block(fn: kernel.FuncOp) -> bool:
    """Whether a loop of `fn` that carries values starts at a value computed from the block
    id: its trip count, and so the block's work, then depends on the block."""
    for op in fn.walk():
        if isinstance(op, kernel.ForOp) and op.inits:
            if def_chain_reaches(op.lb, lambda v: isinstance(v.owner, kernel.BlockIdOp)):
                return True
    return False


#: The pseudo-region of `cp.async` copies: a warp has the copies of one commit group, times
#: the groups a `cp.async.wait_group N` lets stay in flight (N + 1), outstanding at once (the
#: copies need no registers, so nothing else limits them).
ASYNC_GROUPS = "cp.async groups"


def _region_of(op: Operation) -> Operation:
    """The loop (or the kernel) whose one iteration issues `op`: `kernel.if` does not count."""
    parent = op.parent_op()
    while isinstance(parent, kernel.IfOp):
        parent = parent.parent_op()
    assert parent is not None
    return parent


class _Trace:
    """The recording state of one kernel's trace (shared by the impls and the listener)."""

    def __init__(self, fn: kernel.FuncOp):
        self.fn = fn
        self.fused = fused_multiplies(fn.walk())
        self.costs: dict[Operation, Cost] = {}
        self.block: BlockCounters | None = None
        self.block_sectors: dict[str, list[np.ndarray]] = defaultdict(list)
        self.block_store_sectors: dict[str, list[np.ndarray]] = defaultdict(list)
        self.region_sectors: Counter[Operation] = Counter()
        self.region_runs: Counter[Operation] = Counter()
        self.trips: dict[Operation, int] = {}
        self.async_depth = 1
        self.extra_load_bytes: defaultdict[str, float] = defaultdict(float)
        self.extra_store_bytes: defaultdict[str, float] = defaultdict(float)
        self.names = _buffer_names(fn)
        #: Whether loops through shared memory are sampled (`_sample_length`).
        self.staged_sampling = True

    def name_of(self, value: SSAValue) -> str:
        return self.names.get(value, buffer_name(value))

    def cost(self, op: Operation) -> Cost:
        if op not in self.costs:
            self.costs[op] = op_cost(op, self.fused)
        return self.costs[op]

    @staticmethod
    def active_warps(mask: np.ndarray) -> np.ndarray:
        return np.flatnonzero(mask.reshape(-1, WARP_SIZE).any(axis=1))

    def record_global(
        self,
        op: Operation,
        name: str,
        flat: np.ndarray,
        mask: np.ndarray,
        width: int,
        instruction: str | None = None,
    ) -> None:
        """One request per active warp of `width` bytes per lane at element `flat * width`
        (`instruction`: the class counted, by default `ld_global` / `st_global`)."""
        assert self.block is not None
        store = isinstance(op, kernel.StoreOp | kernel.StoreVectorOp | kernel.AtomicAddOp)
        lanes = np.flatnonzero(mask)
        if lanes.size == 0:
            return
        addresses = flat[lanes] * width
        warps, sectors = memory.sectors_by_warp(addresses, lanes // WARP_SIZE, width)
        _, lines = memory.sectors_by_warp(addresses, lanes // WARP_SIZE, width, memory.LINE_BYTES)
        touched = memory.distinct_sectors(addresses, width)
        (self.block_store_sectors if store else self.block_sectors)[name].append(touched)
        requests, sectors_total = len(warps), int(sectors.sum())
        if store:
            self.block.global_store_requests += requests
            self.block.global_store_sectors += sectors_total
            self.block.global_store_lines += int(lines.sum())
            self.block.instructions[instruction or "st_global"] += requests
        else:
            self.block.global_load_requests += requests
            self.block.global_load_sectors += sectors_total
            self.block.global_load_lines += int(lines.sum())
            self.block.instructions[instruction or "ld_global"] += requests
            region = ASYNC_GROUPS if instruction == "ldgsts" else _region_of(op)
            self.region_sectors[region] += sectors_total  # type: ignore[index]

    def record_shared(
        self,
        op: Operation,
        flat: np.ndarray,
        mask: np.ndarray,
        width: int,
        instruction: str | None = None,
    ) -> None:
        """Wavefronts of one request per active warp (`instruction`: the class counted, by
        default `ld_shared` / `st_shared`; "" counts none, for an LDGSTS already counted)."""
        assert self.block is not None
        addresses = flat * width
        for warp in self.active_warps(mask):
            lanes = slice(warp * WARP_SIZE, (warp + 1) * WARP_SIZE)
            active = mask[lanes]
            lane_ids = np.arange(WARP_SIZE)[active]
            wavefronts, ideal = memory.shared_request(addresses[lanes][active], width, lane_ids)
            self.block.shared_wavefronts += wavefronts
            self.block.shared_ideal_wavefronts += ideal
            self.block.shared_requests += 1
            store = isinstance(op, kernel.StoreOp | kernel.StoreVectorOp | kernel.AtomicAddOp)
            name = instruction if instruction is not None else "st_shared" if store else "ld_shared"
            if name:
                self.block.instructions[name] += 1

    def snapshot(self) -> tuple[Any, ...]:
        """What `scale_since` needs to scale the counts a sampled loop adds."""
        assert self.block is not None
        return (
            Counter(self.block.instructions),
            {f: getattr(self.block, f) for f in _SCALAR_COUNTERS},
            {name: len(arrays) for name, arrays in self.block_sectors.items()},
            {name: len(arrays) for name, arrays in self.block_store_sectors.items()},
            Counter(self.region_sectors),
            Counter(self.region_runs),
        )

    def scale_since(self, snapshot: tuple[Any, ...], factor: float) -> None:
        """Multiplies what was counted since `snapshot` by `factor` (a sampled loop)."""
        assert self.block is not None
        instructions, scalars, loads, stores, region_sectors, region_runs = snapshot
        extra = factor - 1.0
        for name, count in self.block.instructions.items():
            self.block.instructions[name] = count + extra * (count - instructions.get(name, 0))
        for name, before in scalars.items():
            now = getattr(self.block, name)
            setattr(self.block, name, now + extra * (now - before))
        for counter, before_counter in (
            (self.region_sectors, region_sectors),
            (self.region_runs, region_runs),
        ):
            for key, count in counter.items():
                counter[key] = count + extra * (count - before_counter.get(key, 0))
        for arrays_by_name, before, target in (
            (self.block_sectors, loads, self.extra_load_bytes),
            (self.block_store_sectors, stores, self.extra_store_bytes),
        ):
            for name, arrays in arrays_by_name.items():
                count = before.get(name, 0)
                if len(arrays) == count:
                    continue
                added = np.unique(np.concatenate(arrays[count:]))
                if count:  # sectors the block had touched before the loop are not new
                    added = np.setdiff1d(added, np.concatenate(arrays[:count]))
                target[name] += extra * len(added) * memory.SECTOR_BYTES

    def finish_block(self) -> BlockCounters:
        assert self.block is not None
        block = self.block
        for target, source in (
            (block.unique_load_bytes, self.block_sectors),
            (block.unique_store_bytes, self.block_store_sectors),
        ):
            for name, arrays in source.items():
                target[name] = memory.SECTOR_BYTES * len(np.unique(np.concatenate(arrays)))
        for target, extra in (
            (block.unique_load_bytes, self.extra_load_bytes),
            (block.unique_store_bytes, self.extra_store_bytes),
        ):
            for name, count in extra.items():
                target[name] = round(target.get(name, 0) + count)
        self.block_sectors.clear()
        self.block_store_sectors.clear()
        self.extra_load_bytes.clear()
        self.extra_store_bytes.clear()
        self.block = None
        return block


def _buffer_names(fn: kernel.FuncOp) -> dict[SSAValue, str]:
    """A distinct name per kernel argument (`%x`, or `%x#2` when two share a name hint)."""
    names: dict[SSAValue, str] = {}
    for i, arg in enumerate(fn.body.block.args):
        name = buffer_name(arg) if arg.name_hint else f"%arg{i}"
        names[arg] = f"{name}#{i}" if name in names.values() else name
    return names


def _trace_of(interpreter: Interpreter) -> _Trace:
    return interpreter.get_data(TraceFunctions, "trace", lambda: None)


def _state(interpreter: Interpreter) -> BlockState:
    return interpreter.get_data(KernelFunctions, "blocks", list)[-1]


def _flat(state: LockstepState, buf: Any, indices: PythonValues, op: Operation) -> np.ndarray:
    return state.flat_indices(buf, indices, buffer_name(op.memref), op)


@register_impls
class TraceFunctions(KernelFunctions):
    """The kernel interpreter with global memory virtual and every access recorded."""

    @impl(kernel.LoadOp)
    def run_load(self, interpreter: Interpreter, op: kernel.LoadOp, args: PythonValues):
        buf, *indices = args
        state, trace = _state(interpreter), _trace_of(interpreter)
        width = byte_size(op.memref.type.element_type)
        if isinstance(buf, SharedBuffer):
            flat = state.lanes.flat_indices(buf.data[0], indices, buf.name, op)
            trace.record_shared(op, flat, state.lanes.current_mask, width)
            return (load_shared(state, op, buf, indices),)
        flat = _flat(state.lanes, buf, indices, op)
        trace.record_global(op, trace.name_of(op.memref), flat, state.lanes.current_mask, width)
        return (np.zeros(state.lanes.num_threads, dtype=numpy_dtype(op.res.type)),)

    @impl(kernel.StoreOp)
    def run_store(self, interpreter: Interpreter, op: kernel.StoreOp, args: PythonValues):
        value, buf, *indices = args
        state, trace = _state(interpreter), _trace_of(interpreter)
        width = byte_size(op.memref.type.element_type)
        if isinstance(buf, SharedBuffer):
            flat = state.lanes.flat_indices(buf.data[0], indices, buf.name, op)
            trace.record_shared(op, flat, state.lanes.current_mask, width)
            store_shared(state, op, buf, indices, value)
            return ()
        flat = _flat(state.lanes, buf, indices, op)
        trace.record_global(op, trace.name_of(op.memref), flat, state.lanes.current_mask, width)
        return ()

    @impl(kernel.AtomicAddOp)
    def run_atomic_add(self, interpreter: Interpreter, op: kernel.AtomicAddOp, args: PythonValues):
        """Counted as a global store: the add happens in L2 (a `RED`), the SM waits for
        nothing."""
        _, buf, *indices = args
        state, trace = _state(interpreter), _trace_of(interpreter)
        width = byte_size(op.memref.type.element_type)
        flat = _flat(state.lanes, buf, indices, op)
        trace.record_global(op, trace.name_of(op.memref), flat, state.lanes.current_mask, width)
        return ()

    @impl(kernel.LdmatrixOp)
    def run_ldmatrix(self, interpreter: Interpreter, op: kernel.LdmatrixOp, args: PythonValues):
        """One `ld_shared` (an LDSM) per warp, its wavefronts those of the 16-byte rows the
        addressing lanes point at (a quarter warp per 8x8 matrix, as an LDS.128's)."""
        buf, *indices = args
        state, trace = _state(interpreter), _trace_of(interpreter)
        row = ROW_ELEMENTS * byte_size(op.memref.type.element_type)
        addressing = state.lanes.thread_ids % WARP_SIZE < ROW_ELEMENTS * op.count
        with state.lanes.masked(addressing) as mask:
            flat = state.lanes.flat_indices(buf.data[0], indices, buf.name, op) // ROW_ELEMENTS
            trace.record_shared(op, flat, mask, row)
        return load_matrices(state, op, args)

    @impl(kernel.LoadVectorOp)
    def run_load_vector(
        self, interpreter: Interpreter, op: kernel.LoadVectorOp, args: PythonValues
    ):
        """One request of `width` elements per lane; global data is virtual (zeros)."""
        buf, *indices = args
        state, trace = _state(interpreter), _trace_of(interpreter)
        nbytes = byte_size(op.memref.type.element_type) * op.width
        if isinstance(buf, SharedBuffer):
            flat = state.lanes.flat_indices(buf.data[0], indices, buf.name, op) // op.width
            trace.record_shared(op, flat, state.lanes.current_mask, nbytes)
            return load_vector(state, op, args)
        flat = _flat(state.lanes, buf, indices, op) // op.width
        trace.record_global(op, trace.name_of(op.memref), flat, state.lanes.current_mask, nbytes)
        dtype = numpy_dtype(op.memref.type.element_type)
        return tuple(np.zeros(state.lanes.num_threads, dtype=dtype) for _ in op.res)

    @impl(kernel.StoreVectorOp)
    def run_store_vector(
        self, interpreter: Interpreter, op: kernel.StoreVectorOp, args: PythonValues
    ):
        buf, *indices = args[op.width :]
        state, trace = _state(interpreter), _trace_of(interpreter)
        nbytes = byte_size(op.memref.type.element_type) * op.width
        if isinstance(buf, SharedBuffer):
            flat = state.lanes.flat_indices(buf.data[0], indices, buf.name, op) // op.width
            trace.record_shared(op, flat, state.lanes.current_mask, nbytes)
            store_vector(state, op, args)
            return ()
        flat = _flat(state.lanes, buf, indices, op) // op.width
        trace.record_global(op, trace.name_of(op.memref), flat, state.lanes.current_mask, nbytes)
        return ()

    @impl(kernel.MmaSyncOp)
    def run_mma_sync(self, interpreter: Interpreter, op: kernel.MmaSyncOp, args: PythonValues):
        """Counted (by the listener), not computed: global memory is virtual, no address
        depends on a product, so D is passed on as C. The warp product was a third of the
        time of tracing a tensor-core GEMM, and the tuner traces many."""
        _, _, accumulators = mma_operands(op, args)
        return tuple(accumulators)

    @impl(kernel.CpAsyncOp)
    def run_cp_async(self, interpreter: Interpreter, op: kernel.CpAsyncOp, args: PythonValues):
        """An LDGSTS per warp: the global read (lanes whose predicate holds) and the shared
        write of `BYTES` per lane; the copy is then issued as in the interpreter (its
        race checks and waits apply), landing zeros (global memory is virtual)."""
        state, trace = _state(interpreter), _trace_of(interpreter)
        nd, ns = len(op.dst_indices), len(op.src_indices)
        dst, src = args[0], args[1 + nd]
        dst_indices, src_indices = args[1 : 1 + nd], args[2 + nd : 2 + nd + ns]
        lanes, count = state.lanes, op.elements
        mask = lanes.current_mask
        reading = mask & (lanes.lanes(args[-1]).astype(bool) if op.pred is not None else True)
        src_flat = lanes.flat_indices(src, src_indices, buffer_name(op.src), op) // count
        trace.record_global(op, trace.name_of(op.src), src_flat, reading, op.num_bytes, "ldgsts")
        if not reading.any():  # every lane zero-fills: the LDGSTS is issued all the same
            assert trace.block is not None
            trace.block.instructions["ldgsts"] += len(trace.active_warps(mask))
        dst_flat = lanes.flat_indices(dst.data[0], dst_indices, dst.name, op) // count
        trace.record_shared(op, dst_flat, mask, op.num_bytes, instruction="")
        names = (dst.name, buffer_name(op.src))
        issue_copy(lanes, state.copies, op, args, state.epoch, names, read=False)
        return ()

    @impl(kernel.ForOp)
    def run_for(self, interpreter: Interpreter, op: kernel.ForOp, args: PythonValues):
        """A long loop runs a window of iterations per lane, scaled to the iterations it
        stands for; a staged loop then runs its last iterations exactly (`_sample_length`)."""
        lb, *inits = args
        state, trace = _state(interpreter), _trace_of(interpreter)
        lanes = state.lanes
        lower = lanes.lanes(lb).astype(np.int64)
        active = lanes.current_mask
        trips = _trips(lower, op.upper, op.step_value) * active
        window = _sample_length(op, trace.staged_sampling)
        if window is None or trips.max(initial=0) <= window.head + window.tail:
            return lanes.run_loop(lb, op.upper, op.step_value, inits, _body(interpreter, op))
        step = op.step_value
        head_end = min(op.upper, int(lower[active].min()) + window.head * step)
        head = _trips(lower, head_end, step) * active
        skipped = trips - head - window.tail
        tail = np.minimum(trips - head, window.tail + skipped % window.turn)
        snapshot = trace.snapshot()
        carried = lanes.run_loop(lb, head_end, step, inits, _body(interpreter, op))
        trace.scale_since(snapshot, float((trips - tail).sum() / head.sum()))
        tail_start = lower + (trips - tail) * step
        return lanes.run_loop(tail_start, op.upper, step, carried, _body(interpreter, op))


def _body(interpreter: Interpreter, op: kernel.ForOp) -> Any:
    """`op`'s body as `LockstepState.run_loop` calls it."""

    def body(iv: Any, carried: tuple[Any, ...]) -> PythonValues:
        return interpreter.run_ssacfg_region(op.body, (iv, *carried), "kernel.for")

    return body


def _trips(lower: np.ndarray, upper: int, step: int) -> np.ndarray:
    return np.maximum(0, -(-(upper - lower) // step))


@dataclass(frozen=True)
class SampledWindow:
    """How a long loop is traced: its first `head` iterations, scaled to stand for all but
    its last `tail`, which run exactly (none for a streaming loop)."""

    head: int
    tail: int = 0
    #: The period of the loop's slot rotation: the iterations skipped between the window
    #: and the tail are a whole number of turns, so the tail finds every slot (and every
    #: `cp.async` group in flight) as the whole loop would.
    turn: int = 1


def _sample_length(op: kernel.ForOp, staged_sampling: bool = True) -> SampledWindow | None:
    """How a long `op` is traced (None: every iteration).

    A streaming loop (no shared memory, no barrier) does the same work in every iteration,
    its loads and stores at addresses that move by the same stride, from the first one: its
    first `SAMPLED_ITERATIONS` stand for all. A loop that stages tiles through shared memory
    (a GEMM's K loop: barriers, `cp.async` into rotating slots) is a software pipeline: the
    prologue before the loop fills the first slots, and inside it every iteration waits for
    one slot, computes on it and refills the slot of a later chunk, so from the first
    iteration on it repeats with the period of its slot rotation (`_slot_count`) until its
    last iterations, which prefetch nothing (`has_next` is false). So `staged_window` traces
    one window of whole turns of the rotation (every slot's bank pattern counted equally),
    scales it to the steady state, and traces the last iterations, where the pipeline
    drains, exactly; the prologue and the epilogue around the loop are traced as always.
    The counters stay within 2 % of the whole trace on the suite's GEMM and attention
    kernels (tests/perf/test_trace_sampling.py; on the 512-token GEMMs they are equal), from
    6 to 11 iterations where a fixed window traced 24 (a 512-token GEMM's trace 2 to 4 times
    cheaper: bench/results/scoring-cost.md). A staged loop is sampled only where
    it carries values (a K loop's accumulators): one that carries none fills shared memory
    for what follows it (a row's statistics), which must see all of it; one whose start
    depends on the block keeps a longer window (`SHIFTED_STAGED_ITERATIONS`)."""
    scalar = kernel.LoadOp | kernel.StoreOp | kernel.AtomicAddOp
    accesses = scalar | kernel.LoadVectorOp | kernel.StoreVectorOp
    asynchronous = kernel.CpAsyncOp | kernel.CpAsyncCommitOp | kernel.CpAsyncWaitOp
    staged = any(
        isinstance(inner, kernel.BarrierOp | kernel.SharedAllocOp | asynchronous)
        or (isinstance(inner, accesses) and is_shared(inner.memref.type))
        for inner in op.walk()
    )
    if not staged:
        return SampledWindow(SAMPLED_ITERATIONS)
    if not (staged_sampling and op.inits):
        return None
    if def_chain_reaches(op.lb, lambda value: isinstance(value.owner, kernel.BlockIdOp)):
        return SampledWindow(SHIFTED_STAGED_ITERATIONS)
    return staged_window(_slot_count(op))


def staged_window(slots: int | None) -> SampledWindow:
    """The window of a staged loop of `slots` rotating slots: the fewest whole turns that
    reach `SAMPLED_STAGED_ITERATIONS`, and a tail of a whole turn, at least
    `STAGED_TAIL_ITERATIONS` (a pipeline of `slots` slots drains in its last `slots - 1`),
    lengthened by up to a turn so that the iterations skipped are whole turns.
    A rotation not understood (None) keeps the fixed window `SHIFTED_STAGED_ITERATIONS`."""
    if slots is None:
        return SampledWindow(SHIFTED_STAGED_ITERATIONS)
    head = slots * -(-SAMPLED_STAGED_ITERATIONS // slots)
    return SampledWindow(head, max(slots, STAGED_TAIL_ITERATIONS), slots)


def _slot_count(op: kernel.ForOp) -> int | None:
    """The period of `op`'s slot rotation: the least common multiple of the constant
    divisors of the remainders its induction variable feeds (`tile-multibuffer`'s
    `chunk % depth`), 1 with none; None where it exceeds `MAX_SLOTS`."""
    iv = op.body.block.args[0]
    period = 1
    for inner in op.walk():
        if not isinstance(inner, arith.RemSIOp | arith.RemUIOp):
            continue
        divisor = inner.rhs.owner
        if not isinstance(divisor, arith.ConstantOp) or not isinstance(divisor.value, IntegerAttr):
            continue
        if def_chain_reaches(inner.lhs, lambda value: value is iv):
            period = math.lcm(period, divisor.value.value.data)
    return period if period <= MAX_SLOTS else None


class _InstructionListener(Interpreter.Listener):
    """Counts each op's warp-instructions (warps with an active lane) and loop trips."""

    def __init__(self, interpreter: Interpreter):
        self.interpreter = interpreter

    def will_interpret_op(self, op: Operation, args: PythonValues) -> None:
        blocks = self.interpreter.get_data(KernelFunctions, "blocks", list)
        trace = _trace_of(self.interpreter)
        if not blocks or trace is None or trace.block is None:
            return
        lanes = blocks[-1].lanes
        cost = trace.cost(op)
        if not cost and not isinstance(
            op, kernel.ForOp | kernel.CpAsyncCommitOp | kernel.CpAsyncWaitOp
        ):
            return
        warps = len(trace.active_warps(lanes.current_mask))
        for name, count in cost.items():
            trace.block.instructions[name] += count * warps
        if isinstance(op, kernel.YieldOp):
            trace.region_runs[op.parent_op()] += warps
        elif isinstance(op, kernel.CpAsyncCommitOp):
            trace.region_runs[ASYNC_GROUPS] += warps  # type: ignore[index]
        elif isinstance(op, kernel.CpAsyncWaitOp):
            trace.async_depth = max(trace.async_depth, op.groups + 1)
        elif isinstance(op, kernel.ForOp):
            lower = lanes.lanes(args[0])[lanes.current_mask]
            if lower.size:
                trips = -(-(op.upper - int(lower.min())) // op.step_value)
                trace.trips[op] = max(trace.trips.get(op, 0), trips)


def _virtual_buffer(memref: MemRefType) -> np.ndarray:
    """A read-only array of `memref`'s shape that occupies one element of memory."""
    dtype = numpy_dtype(memref.element_type)
    return np.broadcast_to(np.zeros((), dtype=dtype), tuple(memref.get_shape()))


def _bytes_in_flight(trace: _Trace, unroll: int) -> float:
    """Sector-weighted mean over regions of the load bytes one warp has outstanding."""
    total_sectors = sum(trace.region_sectors.values())
    if not total_sectors:
        return 0.0
    weighted = 0.0
    for region, sectors in trace.region_sectors.items():
        runs = trace.region_runs.get(region, 0)
        per_run = sectors / runs if runs else sectors
        if region == ASYNC_GROUPS:
            depth = trace.async_depth
        elif isinstance(region, kernel.ForOp):
            depth = min(unroll, trace.trips.get(region, 1))
        else:
            depth = 1
        weighted += sectors * per_run * memory.SECTOR_BYTES * depth
    return weighted / total_sectors


def trace_kernel(
    fn: kernel.FuncOp, blocks: list[int] | None = None, unroll: int = DEFAULT_UNROLL
) -> KernelCounters:
    """Counters of `fn` from tracing `blocks` (default: `representative_blocks`).

    A sampled loop through shared memory that leaves later reads of it unwritten (a value it
    carries that the kernel reads back from shared memory after it), or whose skipped
    iterations leave a read racing a write, is traced again with every such loop whole:
    sampling never turns a kernel into an error (a race of the whole loop is reported)."""
    try:
        return _trace(fn, blocks, unroll, staged_sampling=True)
    except (UninitializedReadError, RaceError):
        return _trace(fn, blocks, unroll, staged_sampling=False)


def _trace(
    fn: kernel.FuncOp, blocks: list[int] | None, unroll: int, staged_sampling: bool
) -> KernelCounters:
    module = enclosing_module(fn)
    interpreter = make_interpreter(module if isinstance(module, ModuleOp) else ModuleOp([]))
    interpreter.register_implementations(TraceFunctions(), override=True)
    interpreter.listeners = (_InstructionListener(interpreter),)
    trace = _Trace(fn)
    trace.staged_sampling = staged_sampling
    interpreter.get_data(TraceFunctions, "trace", lambda: trace)
    grid, threads = fn.grid_size, fn.block_size
    varying = varies_by_block(fn)
    if blocks is None:
        ids, weights = representative_blocks(grid, varying)
    else:
        ids, weights = blocks, [1] * len(blocks)
    arguments = [_virtual_buffer(arg.type) for arg in fn.body.block.args]
    stack: list[BlockState] = interpreter.get_data(KernelFunctions, "blocks", list)
    traced = []
    with np.errstate(all="ignore"):
        for block_id in ids:
            trace.block = BlockCounters(block_id)
            trace.region_runs[fn] += threads // WARP_SIZE
            state = BlockState(LockstepState(threads, first_block=block_id))
            stack.append(state)
            try:
                interpreter.run_ssacfg_region(
                    fn.body, tuple(arguments), f"trace @{fn.sym_name.data}"
                )
            finally:
                stack.pop()
            traced.append(trace.finish_block())
    return KernelCounters(
        name=fn.sym_name.data,
        grid=grid,
        block=threads,
        traced_blocks=traced,
        weights=weights,
        buffer_bytes={trace.name_of(arg): buffer_bytes(arg.type) for arg in fn.body.block.args},
        bytes_in_flight_per_warp=_bytes_in_flight(trace, unroll),
        shared_bytes=fn.shared_bytes(),
        heaviest_block=_heaviest_block(traced, weights) if varying else 1.0,
    )


def _heaviest_block(traced: list[BlockCounters], weights: list[int]) -> float:
    """The most instructions a traced block issued, over the blocks' weighted mean."""
    work = [sum(block.instructions.values()) for block in traced]
    mean = sum(w * x for w, x in zip(weights, work, strict=True)) / sum(weights)
    return max(work) / mean if mean else 1.0
