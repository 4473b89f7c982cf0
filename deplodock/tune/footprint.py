"""Footprints: which thread or block of a kernel-level module writes or reads which element.

A sampled check (`check.py`) runs only a few thread blocks of a candidate, so it must know
which blocks a chosen output element depends on, and which elements the blocks it runs
compute completely (only those may be compared). Interpreting the whole candidate to find
out would cost what the sample saves. So each kernel is cut down to the ops its global
addresses need (`address_kernel`: no loads of inputs, no K loop, no shared memory, stored
values zero), which runs on every block in a fraction of a second and records which unit
(a block, a thread or one sweep of a thread's loop: `Accesses`) writes which element, and
reads which element written earlier in the module (`footprints`).

That makes a sample exact across launches: `select_blocks` walks back from the chosen
elements to every unit they depend on (the split-K blocks that add into one output tile,
atomically or through a workspace and a combine kernel), `computed_elements` says which
elements the chosen blocks leave complete, and `widen` adds the cheap blocks of the other
launches (zeroing, combine) that complete the sampled tiles. An address computed from loaded
data, or from an op the analysis does not know, raises `NotAnalysable`.

```python
host = footprints(module)                      # the host program, each launch's Accesses
out = host.outputs[0]
chosen = select_blocks(host, {out: np.array([host.sizes[out] - 1])})  # blocks per launch
complete, written = computed_elements(host, chosen)  # per buffer: what those blocks settle
```
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
)
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls
from xdsl.ir import Attribute, BlockArgument, Operation, OpResult, SSAValue

from deplodock.dialects import kernel
from deplodock.dialects.effects import is_pure
from deplodock.dialects.element_types import numpy_dtype
from deplodock.dialects.queries import forward_function, written_arguments
from deplodock.interpreters import make_interpreter
from deplodock.interpreters.async_copy import shifted
from deplodock.interpreters.blocks import BlockState, default_blocks_per_batch
from deplodock.interpreters.common import lookup_kernel
from deplodock.interpreters.kernel import KernelFunctions, run_kernel
from deplodock.interpreters.simt import buffer_name


class NotAnalysable(Exception):
    """The footprint analysis does not understand the candidate (it is then run whole)."""


# --- the host program ------------------------------------------------------------------------


@dataclass
class Accesses:
    """What one launch's threads touch, from its address kernel run on every block.

    A *unit* is what a write depends on: a whole block (threads cooperate through shared
    memory) or, in a kernel without cross-thread ops, one thread (`per_lane`), or even one
    sweep of a thread's top-level loop (a grid-stride loop without loop-carried values).
    `reads` and `writes` hold (buffer, unit of each access, flat element index);
    `unit_blocks` maps a unit to its block.
    """

    reads: list[tuple[int, np.ndarray, np.ndarray]] = field(default_factory=list)
    writes: list[tuple[int, np.ndarray, np.ndarray, bool]] = field(default_factory=list)
    unit_blocks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


@dataclass
class Launch:
    """One `kernel.launch` of `@forward`: its kernel, the buffer (index into the host's
    buffer list) behind each argument, and its accesses."""

    op: kernel.LaunchOp
    func: kernel.FuncOp
    buffers: list[int]
    accesses: Accesses = field(default_factory=Accesses)


@dataclass
class Host:
    """`@forward` of a kernel-level module: its buffers (arguments first, then
    allocations), its launches in order, and the buffer of each output."""

    sizes: list[int]
    shapes: list[tuple[int, ...]]
    names: list[str]
    arguments: int
    launches: list[Launch]
    outputs: list[int]


def _host(module: ModuleOp) -> Host:
    forward = forward_function(module)
    buffers: dict[SSAValue, int] = {}
    shapes: list[tuple[int, ...]] = []
    names: list[str] = []

    def add(value: SSAValue) -> None:
        assert isinstance(value.type, MemRefType)
        buffers[value] = len(shapes)
        shapes.append(tuple(value.type.get_shape()))
        names.append(buffer_name(value))

    for arg in forward.body.block.args:
        add(arg)
    launches, outputs = [], []
    for op in forward.body.block.ops:
        if isinstance(op, kernel.AllocOp):
            add(op.res)
        elif isinstance(op, kernel.LaunchOp):
            callee = lookup_kernel(op, op.callee, kernel.FuncOp)
            launches.append(Launch(op, callee, [buffers[arg] for arg in op.args]))
        elif isinstance(op, func.ReturnOp):
            outputs = [buffers[value] for value in op.arguments]
        else:
            raise NotAnalysable(f"@forward holds {op.name}")
    sizes = [math.prod(shape) for shape in shapes]
    return Host(sizes, shapes, names, len(forward.body.block.args), launches, outputs)


# --- footprints: the address kernel --------------------------------------------------------

#: Kernel ops that touch no global memory and feed no address: dropped from address kernels.
_INERT = (
    kernel.BarrierOp,
    kernel.ShflXorOp,
    kernel.MmaSyncOp,
    kernel.LdmatrixOp,  # reads shared memory only; its results are data, never addresses
    kernel.SplitTf32Op,
    kernel.CpAsyncCommitOp,
    kernel.CpAsyncWaitOp,
    kernel.SharedAllocOp,
    kernel.ThreadIdOp,
    kernel.BlockIdOp,
    kernel.ForOp,
    kernel.IfOp,
    kernel.YieldOp,
    kernel.ReturnOp,
)
_MEMORY = (
    kernel.LoadOp,
    kernel.StoreOp,
    kernel.AtomicAddOp,
    kernel.LoadVectorOp,
    kernel.StoreVectorOp,
    kernel.CpAsyncOp,
)
#: Ops that let threads of a block see each other's values: their kernels are run per block.
_CROSS_THREAD = (
    kernel.SharedAllocOp,
    kernel.BarrierOp,
    kernel.ShflXorOp,
    kernel.MmaSyncOp,
    kernel.LdmatrixOp,
)
_WRITES = (kernel.StoreOp, kernel.AtomicAddOp, kernel.StoreVectorOp)


def _is_global(value: SSAValue, fn: kernel.FuncOp) -> bool:
    return isinstance(value, BlockArgument) and value.owner is fn.body.block


def _is_root(op: Operation, fn: kernel.FuncOp, relevant: set[int]) -> bool:
    """A global write, or a global read of a buffer written earlier in the module."""
    if isinstance(op, _WRITES):
        return _is_global(op.memref, fn)
    source = op.src if isinstance(op, kernel.CpAsyncOp) else getattr(op, "memref", None)
    if not isinstance(op, _MEMORY) or source is None or not _is_global(source, fn):
        return False
    assert isinstance(source, BlockArgument)
    return source.index in relevant


def _address_operands(op: Operation) -> list[SSAValue]:
    """The operands of a root access its address depends on (cp.async keeps them all: its
    shared destination must stay defined)."""
    if isinstance(op, kernel.CpAsyncOp):
        return list(op.operands)
    return list(op.indices)  # type: ignore[attr-defined]


def address_kernel(fn: kernel.FuncOp, relevant: set[int]) -> kernel.FuncOp:
    """A copy of `fn` that keeps only its root accesses (`_is_root`: global writes, reads
    of the `relevant` arguments) and the ops their addresses and guards need; stored values
    become zeros. Raises `NotAnalysable` where an address depends on loaded data or on an
    op this analysis does not know."""
    for op in fn.walk():
        if op is not fn and not isinstance(op, _INERT + _MEMORY) and not is_pure(op):
            raise NotAnalysable(f"{op.name} is not understood")
    copy = fn.clone()
    roots = [op for op in copy.walk() if _is_root(op, copy, relevant)]
    keep: set[Operation] = set()
    carried: set[tuple[kernel.ForOp, int]] = set()
    pending: list[SSAValue] = []

    def keep_op(op: Operation, operands: Sequence[SSAValue] | None = None) -> None:
        """Keeps `op` (its `operands`, default all, are needed) and its enclosing ops."""
        pending.extend(op.operands if operands is None else operands)
        while op is not copy and op not in keep:
            keep.add(op)
            parent = op.parent_op()
            assert parent is not None
            if isinstance(parent, kernel.ForOp):
                pending.append(parent.lb)
            elif isinstance(parent, kernel.IfOp):
                pending.append(parent.cond)
            op = parent

    def keep_carried(for_op: kernel.ForOp, i: int) -> None:
        if (for_op, i) not in carried:
            carried.add((for_op, i))
            keep_op(for_op, [for_op.lb, for_op.inits[i], for_op.body.block.last_op.operands[i]])  # type: ignore[union-attr]

    for root in roots:
        keep_op(root, _address_operands(root))
    while pending:
        value = pending.pop()
        if isinstance(value, OpResult):
            owner = value.op
            if isinstance(owner, kernel.ForOp):
                keep_carried(owner, value.index)
            elif is_pure(owner) or isinstance(
                owner, kernel.ThreadIdOp | kernel.BlockIdOp | kernel.SharedAllocOp
            ):
                if owner not in keep:
                    keep_op(owner)
            else:
                raise NotAnalysable(f"an address depends on {owner.name}")
        elif isinstance(value, BlockArgument) and value.owner is not copy.body.block:
            loop_op = value.owner.parent_op()
            if not isinstance(loop_op, kernel.ForOp):
                raise NotAnalysable(f"an address depends on a block argument of {loop_op}")
            keep_op(loop_op, [loop_op.lb])
            if value.index > 0:
                keep_carried(loop_op, value.index - 1)
    _prune(copy, roots, keep, carried)
    return copy


def _prune(
    fn: kernel.FuncOp,
    roots: list[Operation],
    keep: set[Operation],
    carried: set[tuple[kernel.ForOp, int]],
) -> None:
    """Erases what is not kept: stored values and unneeded loop-carried values become
    zero constants (a carried value then yields itself)."""
    zeros: dict[Attribute, SSAValue] = {}

    def zero(type_: Attribute) -> SSAValue:
        if type_ not in zeros:
            if isinstance(type_, IndexType | IntegerType):
                constant = arith.ConstantOp(IntegerAttr(0, type_))
            else:
                constant = arith.ConstantOp(FloatAttr(0.0, type_))  # type: ignore[arg-type]
            fn.body.block.insert_op_before(constant, fn.body.block.first_op)  # type: ignore[arg-type]
            keep.add(constant)
            zeros[type_] = constant.result
        return zeros[type_]

    for op in [op for op in keep if isinstance(op, kernel.ForOp)]:
        body, terminator = op.body.block, op.body.block.last_op
        assert terminator is not None
        yields, inits = list(terminator.operands), list(op.inits)
        for i in range(len(inits)):
            if (op, i) not in carried:
                yields[i], inits[i] = body.args[i + 1], zero(inits[i].type)
        terminator.operands = yields
        op.operands = [op.lb, *inits]
    for root in roots:
        if isinstance(root, kernel.StoreVectorOp):
            root.operands = [*(zero(v.type) for v in root.values), root.memref, *root.indices]
        elif isinstance(root, kernel.StoreOp | kernel.AtomicAddOp):
            root.operands = [zero(root.value.type), root.memref, *root.indices]
    for op in reversed(list(fn.walk())):
        if op is fn or op in keep:
            continue
        if isinstance(op, kernel.YieldOp | kernel.ReturnOp) and (
            op.parent_op() is fn or op.parent_op() in keep
        ):
            continue
        op.detach()
        op.erase(safe_erase=False)


# --- footprints: running the address kernel ----------------------------------------------


@dataclass
class _Recorder:
    """Collects a launch's accesses while its address kernel runs (see `Accesses`)."""

    fn: kernel.FuncOp
    buffers: list[int]
    per_lane: bool
    per_sweep: bool
    lanes_per_batch: int
    accesses: Accesses = field(default_factory=Accesses)
    _state: BlockState | None = None
    _serial: int = -1
    _batches: list[tuple[int, int]] = field(default_factory=list)

    def next_serial(self, state: BlockState) -> None:
        """A new batch, or a new sweep of a top-level loop: a new set of units."""
        self._state = state
        self._serial += 1
        self._batches.append((state.lanes.first_block, state.lanes.num_blocks))

    def units(self, state: BlockState) -> np.ndarray:
        if state is not self._state:
            self.next_serial(state)
        lanes = state.lanes
        if self.per_lane:
            return self._serial * self.lanes_per_batch + lanes.lane_ids
        return lanes.first_block + lanes.lane_blocks

    def record(
        self, state: BlockState, op: Operation, args: Sequence[Any], width: int, atomic: bool | None
    ) -> None:
        """One access of the active lanes: `args` = (buffer, *indices) of `width`
        consecutive elements; `atomic` None for a read."""
        buf, *indices = args
        memref = op.src if isinstance(op, kernel.CpAsyncOp) else op.memref  # type: ignore[attr-defined]
        assert isinstance(memref, BlockArgument)
        lanes, mask = state.lanes, state.lanes.current_mask
        units = _compact(self.units(state)[mask])
        for k in range(width):
            flat = lanes.flat_indices(buf, shifted(indices, k), buffer_name(memref), op)[mask]
            flat = _compact(flat)
            key = self.buffers[memref.index]
            if atomic is None:
                self.accesses.reads.append((key, units, flat))
            else:
                self.accesses.writes.append((key, units, flat, atomic))

    def finish(self, grid: int, threads: int) -> Accesses:
        if self.per_lane:  # lanes past a short batch's end belong to no unit: its last block
            lane_block = np.arange(self.lanes_per_batch) // threads
            batches = np.asarray(self._batches, dtype=np.int64).reshape(-1, 2)
            last = batches[:, 1:] - 1
            blocks = batches[:, :1] + np.minimum(lane_block[None, :], last)
            self.accesses.unit_blocks = blocks.reshape(-1)
        else:
            self.accesses.unit_blocks = np.arange(grid)
        return self.accesses


def _compact(ids: np.ndarray) -> np.ndarray:
    """Ids as int32 where they fit: a split-K footprint of a Qwen GEMM records ~10^8."""
    fits = ids.size == 0 or int(ids.max()) < np.iinfo(np.int32).max
    return ids.astype(np.int32) if fits else ids


def _recorder(interpreter: Interpreter) -> _Recorder:
    return interpreter.get_data(_FootprintFunctions, "recorder", lambda: None)


def _state(interpreter: Interpreter) -> BlockState:
    return interpreter.get_data(KernelFunctions, "blocks", list)[-1]


@register_impls
class _FootprintFunctions(InterpreterFunctions):
    """The memory ops of an address kernel record instead of touching memory (loads give
    zeros), and a top-level loop starts a new unit per sweep when asked."""

    @impl(kernel.LoadOp)
    def run_load(self, interpreter: Interpreter, op: kernel.LoadOp, args: PythonValues):
        state = _state(interpreter)
        _recorder(interpreter).record(state, op, args, 1, None)
        return (np.zeros(state.lanes.num_lanes, dtype=numpy_dtype(op.res.type)),)

    @impl(kernel.LoadVectorOp)
    def run_load_vector(
        self, interpreter: Interpreter, op: kernel.LoadVectorOp, args: PythonValues
    ):
        state = _state(interpreter)
        _recorder(interpreter).record(state, op, args, op.width, None)
        return tuple(np.zeros(state.lanes.num_lanes, numpy_dtype(r.type)) for r in op.res)

    @impl(kernel.CpAsyncOp)
    def run_cp_async(self, interpreter: Interpreter, op: kernel.CpAsyncOp, args: PythonValues):
        state = _state(interpreter)
        nd, ns = len(op.dst_indices), len(op.src_indices)
        source = args[1 + nd : 2 + nd + ns]
        if op.pred is None:
            _recorder(interpreter).record(state, op, source, op.elements, None)
        else:
            with state.lanes.masked(args[-1]):
                _recorder(interpreter).record(state, op, source, op.elements, None)
        return ()

    @impl(kernel.StoreOp)
    def run_store(self, interpreter: Interpreter, op: kernel.StoreOp, args: PythonValues):
        _recorder(interpreter).record(_state(interpreter), op, args[1:], 1, False)
        return ()

    @impl(kernel.AtomicAddOp)
    def run_atomic_add(self, interpreter: Interpreter, op: kernel.AtomicAddOp, args: PythonValues):
        _recorder(interpreter).record(_state(interpreter), op, args[1:], 1, True)
        return ()

    @impl(kernel.StoreVectorOp)
    def run_store_vector(
        self, interpreter: Interpreter, op: kernel.StoreVectorOp, args: PythonValues
    ):
        _recorder(interpreter).record(_state(interpreter), op, args[op.width :], op.width, False)
        return ()

    @impl(kernel.ForOp)
    def run_for(self, interpreter: Interpreter, op: kernel.ForOp, args: PythonValues):
        recorder, state = _recorder(interpreter), _state(interpreter)
        top = recorder.per_sweep and op.parent_op() is recorder.fn
        lb, *inits = args

        def body(iv: Any, carried: tuple[Any, ...]) -> PythonValues:
            if top:
                recorder.next_serial(state)
            return interpreter.run_ssacfg_region(op.body, (iv, *carried), "kernel.for")

        results = state.lanes.run_loop(lb, op.upper, op.step_value, inits, body)
        if top:
            recorder.next_serial(state)
        return results


def _top_level_loop(op: Operation, fn: kernel.FuncOp) -> bool:
    """Whether `op` sits in a loop directly in `fn`'s body."""
    parent = op.parent_op()
    while parent is not None and parent is not fn:
        if isinstance(parent, kernel.ForOp) and parent.parent_op() is fn:
            return True
        parent = parent.parent_op()
    return False


def _footprint(launch: Launch, written: set[int]) -> Accesses:
    """Runs `launch`'s address kernel on every block (see `Accesses`)."""
    fn = launch.func
    relevant = {i for i, key in enumerate(launch.buffers) if key in written}
    pruned = address_kernel(fn, relevant)
    ops = list(fn.walk())
    per_lane = not any(isinstance(op, _CROSS_THREAD) for op in ops)
    reads = [op for op in pruned.walk() if _is_root(op, pruned, relevant)]
    reads = [op for op in reads if not isinstance(op, _WRITES)]
    per_sweep = per_lane and not any(isinstance(op, kernel.ForOp) and op.inits for op in ops)
    per_sweep = per_sweep and all(_top_level_loop(op, pruned) for op in reads)
    batch = default_blocks_per_batch(fn.block_size)
    recorder = _Recorder(pruned, launch.buffers, per_lane, per_sweep, batch * fn.block_size)
    interpreter = make_interpreter(ModuleOp([pruned]))
    interpreter.register_implementations(_FootprintFunctions(), override=True)
    interpreter.get_data(_FootprintFunctions, "recorder", lambda: recorder)
    virtual = [
        np.broadcast_to(np.zeros((), numpy_dtype(arg.type.element_type)), arg.type.get_shape())  # type: ignore[attr-defined]
        for arg in pruned.body.block.args
    ]
    run_kernel(interpreter, pruned, tuple(virtual), blocks_per_batch=batch)
    return recorder.finish(fn.grid_size, fn.block_size)


def footprints(module: ModuleOp) -> Host:
    """The host program of a kernel-level module with every launch's accesses (its
    address kernel run on every block). Raises `NotAnalysable` for what the analysis does
    not understand (an address computed from loaded data, an unknown op)."""
    host = _host(module)
    written = {key for launch in host.launches for key in _written_buffers(launch)}
    for launch in host.launches:
        launch.accesses = _footprint(launch, written)
    return host


# --- the sample ------------------------------------------------------------------------------


def select_blocks(host: Host, seeds: dict[int, np.ndarray]) -> list[np.ndarray]:
    """The blocks of each launch that must run for the `seeds` (flat elements per buffer)
    to come out as in a whole run: walking back from the last launch, every unit that
    writes a demanded element, then what those units read. A plain store settles the
    element for earlier launches; an atomic add leaves it demanded (its start counts)."""
    demand = [np.zeros(size, dtype=bool) for size in host.sizes]
    for key, flat in seeds.items():
        demand[key][flat] = True
    chosen: list[np.ndarray] = []
    for launch in reversed(host.launches):
        accesses = launch.accesses
        selected = np.zeros(len(accesses.unit_blocks), dtype=bool)
        settled = []
        for key, units, flat, atomic in accesses.writes:
            hit = demand[key][flat]
            selected[units[hit]] = True
            if not atomic:
                settled.append((key, flat[hit]))
        for key, flat in settled:
            demand[key][flat] = False
        for key, units, flat, atomic in accesses.writes:
            if atomic:
                demand[key][flat[selected[units]]] = True
        for key, units, flat in accesses.reads:
            demand[key][flat[selected[units]]] = True
        chosen.append(np.unique(accesses.unit_blocks[selected]))
    return chosen[::-1]


def computed_elements(host: Host, chosen: list[np.ndarray]) -> tuple[list[np.ndarray], ...]:
    """(complete, written) per buffer after running the `chosen` blocks of each launch:
    an element is complete when every unit that wrote it last ran on complete data (and,
    for atomic adds, it was complete before); arguments start complete, allocations not."""
    complete, written = _start(host)
    for launch, blocks in zip(host.launches, chosen, strict=True):
        _run(host, launch, blocks, complete, written)
    return complete, written


def _start(host: Host) -> tuple[list[np.ndarray], list[np.ndarray]]:
    complete = [np.full(size, k < host.arguments) for k, size in enumerate(host.sizes)]
    return complete, [np.zeros(size, dtype=bool) for size in host.sizes]


def _ready(accesses: Accesses, complete: list[np.ndarray]) -> np.ndarray:
    """Per unit: everything it reads (of buffers written in the module) is complete."""
    ready = np.ones(len(accesses.unit_blocks), dtype=bool)
    for key, units, flat in accesses.reads:
        ready[units[~complete[key][flat]]] = False
    return ready


def _run(
    host: Host,
    launch: Launch,
    blocks: np.ndarray,
    complete: list[np.ndarray],
    written: list[np.ndarray],
) -> None:
    """Updates `complete` and `written` (in place) for running `blocks` of `launch`."""
    accesses = launch.accesses
    ran = np.zeros(launch.func.grid_size, dtype=bool)
    ran[blocks] = True
    good = ran[accesses.unit_blocks] & _ready(accesses, complete)
    for key in {write[0] for write in accesses.writes}:
        hit = np.zeros(host.sizes[key], dtype=bool)
        ok = np.ones(host.sizes[key], dtype=bool)
        for k, units, flat, atomic in accesses.writes:
            if k == key:
                hit[flat] = True
                ok[flat[~good[units]]] = False
                if atomic:
                    ok[flat] &= complete[key][flat]
        complete[key] = np.where(hit, ok, complete[key])
        written[key] |= hit


def widen(
    host: Host,
    chosen: list[np.ndarray],
    costliest: int,
    seconds: Callable[[int, np.ndarray], float],
    budget: float,
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """`chosen` plus, in each launch but the `costliest`, blocks of units that write and
    read only complete data, nearest the chosen blocks first, as many as keep
    `seconds(launch, blocks)` within `budget`: split-K's zeroing kernel, the combine
    blocks of the sampled tiles, so that whole tiles come out complete. Returns the blocks,
    and (complete, written) as `computed_elements` gives them for those blocks."""
    complete, written = _start(host)
    widened = []
    for i, (launch, blocks) in enumerate(zip(host.launches, chosen, strict=True)):
        if i != costliest:
            accesses = launch.accesses
            writers = np.zeros(len(accesses.unit_blocks), dtype=bool)
            for _, units, _, _ in accesses.writes:
                writers[units] = True
            ready = accesses.unit_blocks[np.flatnonzero(writers & _ready(accesses, complete))]
            extra = _nearest_first(np.setdiff1d(ready, blocks), blocks)
            low, high = 0, len(extra)  # the longest prefix of `extra` within the budget
            while low < high:
                middle = (low + high + 1) // 2
                if seconds(i, np.union1d(blocks, extra[:middle])) <= budget:
                    low = middle
                else:
                    high = middle - 1
            blocks = np.union1d(blocks, extra[:low])
        widened.append(blocks)
        _run(host, launch, blocks, complete, written)
    return widened, complete, written


def _nearest_first(extra: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """`extra` (sorted block ids) ordered by their distance to the nearest of `blocks`."""
    if not blocks.size or not extra.size:
        return extra
    right = np.clip(np.searchsorted(blocks, extra), 0, blocks.size - 1)
    left = np.clip(right - 1, 0, blocks.size - 1)
    distance = np.minimum(np.abs(extra - blocks[left]), np.abs(extra - blocks[right]))
    return extra[np.argsort(distance, kind="stable")]


def _written_buffers(launch: Launch) -> set[int]:
    return {launch.buffers[i] for i in written_arguments(launch.func)}


__all__ = [
    "Accesses",
    "Host",
    "Launch",
    "NotAnalysable",
    "address_kernel",
    "computed_elements",
    "footprints",
    "select_blocks",
    "widen",
]
