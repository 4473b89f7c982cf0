"""The tuner's correctness gate: a candidate schedule against its loop-level kernel.

Every candidate is checked in the CPU interpreter before it is scored (issue #11): one whose
interpretation raises (a race report, an out-of-bounds access, a verifier error) is
`failed`, one whose outputs differ from the loop-level kernel's on random inputs is `wrong`;
both score zero and are recorded, and neither stops the search.

The difficulty is cost. The loop-level reference of a Qwen GEMM (512 x 3584 x 3584) takes
5-8 s and runs once per kernel (`KernelCheck` keeps it); interpreting the candidate's 128
blocks at the kernel level takes minutes, one block of it seconds. So a candidate that the
interpreter's estimate puts above `FULL_RUN_SECONDS` runs only the blocks behind a few
chosen output elements, and exactly the elements those blocks fully compute are compared.
Which blocks those are comes from the candidate's *footprint*: each kernel is cut down to
the ops its global addresses need (`address_kernel`: no loads of inputs, no K loop, no
shared memory), which runs on every block in a fraction of a second and records which
thread writes which element, and reads which element written earlier in the module. That
makes sampling exact across launches (`select_blocks`, `computed_elements`): the split-K
blocks that add into one output tile, atomically or through a workspace and a combine
kernel, all run before the tile is compared, and the cheap launches around them (zeroing,
combine) run the blocks that complete the sampled tiles (`widen`). The footprint of the
whole grid also shows what a sample would miss: an output element nobody writes, or a
workspace element read before anybody wrote it (`_check_coverage`).

The chosen elements: the last of each output (the edge tile, where masks go wrong), then
one at the golden-ratio point of the output when the budget `SAMPLE_SECONDS` allows (a
block whose tile coordinates differ from each other, unlike the first and last blocks of a
square grid, so swapped axes show).

```python
check = KernelCheck(loop_kernel, seed=0)       # the reference runs on the first check
result = check.check(kernel_level_module)      # CheckResult(ok, status, detail, blocks, ...)
```
"""

from __future__ import annotations

import math
import time
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

from deplodock.dialects import kernel, loop
from deplodock.dialects.element_types import is_narrow_float, numpy_dtype, round_to_type
from deplodock.dialects.queries import (
    forward_function,
    read_arguments,
    written_arguments,
)
from deplodock.interpreters import make_interpreter, run_module
from deplodock.interpreters.async_copy import shifted
from deplodock.interpreters.blocks import BlockState, default_blocks_per_batch
from deplodock.interpreters.common import lookup_kernel
from deplodock.interpreters.estimate import Work, estimate_interpretation
from deplodock.interpreters.kernel import KernelFunctions, run_kernel
from deplodock.interpreters.simt import buffer_name
from deplodock.interpreters.values import empty_buffer
from deplodock.tune.kernels import standalone

#: A candidate the interpreter estimate (`estimate_interpretation`) puts below this runs
#: every block and is compared everywhere. The estimate runs low on MMA GEMMs: a 1024^2
#: GEMM estimated at 1.2 s took 7.5 s, two of its blocks 0.7 s (2-core machine under load);
#: norms and softmax run close to it.
FULL_RUN_SECONDS = 0.5
#: The estimated seconds a sample may cost before it gives up its second element (the last
#: output element's blocks always run). One block of the Qwen GEMM is estimated at 1.3 s.
SAMPLE_SECONDS = 1.0
#: A launch other than the costliest adds to a sample blocks that complete elements
#: (split-K's zeroing kernel, the combine blocks of the sampled tiles: `widen`) up to this
#: estimate.
WIDEN_SECONDS = 0.5
#: A sample that runs at least this share of the costliest launch's blocks is not worth it:
#: run them all.
SAMPLE_SHARE = 0.5

#: Max relative error (max |actual - expected| / max |expected|, the project's measure) of a
#: candidate against the loop level in the same dtype. The driver allows 1e-5 in fp32 for
#: kernels without long sums and 1e-4 for GEMMs (`driver.cuda.tolerance_for`, and a file
#: against its own level, `FILE_TOLERANCES`), and 1e-2 for bf16/f16, which round at other
#: points than the reference (`NARROW_FLOAT_TOLERANCE`). Here both sides are deplodock in
#: the same dtype, so fp32 can be held tighter than 1e-4: only the order of the additions
#: changes (split-K, MMA fragments, 3xTF32), and that error grows like sqrt(K) * eps with
#: the sum's length K (measured: 5e-7 for K = 256, 1.9e-6 for K = 3584, i.e. about
#: 0.27 sqrt(K) eps, eps = 2^-23). An fp32 kernel gets max(FP32_TOLERANCE,
#: SUM_ERROR_FACTOR * sqrt(K) * eps): 1e-5 up to K ~ 1700, 1.4e-5 at 3584, 3.3e-5 at
#: 18944, a 7x margin, and below the ~2e-4 that plain TF32 products (no 3xTF32 correction)
#: show whatever K.
FP32_TOLERANCE = 1e-5
SUM_ERROR_FACTOR = 2.0
NARROW_TOLERANCE = 1e-2

#: How `KernelCheck` picks the blocks it runs.
MODES = ("auto", "full", "sample")

#: Integer inputs that index nothing are drawn from [0, this).
INTEGER_RANGE = 16
#: The golden ratio's fraction: where the second sampled element sits in an output.
GOLDEN_FRACTION = (math.sqrt(5.0) - 1.0) / 2.0


@dataclass(frozen=True)
class CheckResult:
    """The verdict on one candidate: `status` is "ok", "wrong" (outputs differ) or
    "failed" (lowering or interpretation raised); `detail` says why in one line; `blocks`
    is how many thread blocks were interpreted, `seconds` how long the check took."""

    ok: bool
    status: str
    detail: str
    blocks: int
    seconds: float


class _Wrong(Exception):
    """The candidate computed something else (status "wrong")."""


class NotAnalysable(Exception):
    """The footprint analysis does not understand the candidate (it is then run whole)."""


# --- inputs and comparison -------------------------------------------------------------------


def random_inputs(kernel_op: loop.KernelOp, seed: int) -> list[np.ndarray]:
    """One array per argument of `kernel_op`, from a numpy Generator seeded with `seed`.

    Floats are standard normal in their interpreter dtype (bf16 rounded, carried as
    float32); integers index what they index (`_integer_bound`); booleans are fair coins.
    A buffer the kernel writes but never reads starts poisoned (NaN), as an allocation
    does, so an element the loop kernel leaves alone is NaN in the reference too.
    """
    rng = np.random.default_rng(seed)
    written, read = written_arguments(kernel_op), read_arguments(kernel_op)
    arrays = []
    for position, arg in enumerate(kernel_op.body.block.args):
        memref = arg.type
        assert isinstance(memref, MemRefType)
        shape = tuple(memref.get_shape())
        element = memref.element_type
        dtype = numpy_dtype(element)
        if position in written and position not in read:
            arrays.append(empty_buffer(memref))
        elif np.issubdtype(dtype, np.floating):
            arrays.append(np.asarray(round_to_type(rng.standard_normal(shape), element)))
        elif dtype == np.bool_:
            arrays.append(rng.random(shape) < 0.5)
        else:
            arrays.append(rng.integers(0, _integer_bound(arg), shape).astype(dtype))
    return arrays


def _integer_bound(arg: SSAValue) -> int:
    """The smallest extent an integer buffer's loaded values index (through integer
    casts), else `INTEGER_RANGE`: token ids index the embedding table's rows."""
    bounds: list[int] = []

    def follow(value: SSAValue) -> None:
        for use in value.uses:
            user = use.operation
            if isinstance(user, loop.LoadOp | loop.StoreOp):
                memref = user.memref.type
                assert isinstance(memref, MemRefType)
                shape = memref.get_shape()
                bounds.extend(shape[i] for i, index in enumerate(user.indices) if index is value)
            elif isinstance(user, arith.IndexCastOp | arith.ExtSIOp | arith.ExtUIOp):
                follow(user.results[0])

    for use in arg.uses:
        if isinstance(use.operation, loop.LoadOp) and use.operation.memref is arg:
            follow(use.operation.res)
    return max(1, min(bounds, default=INTEGER_RANGE))


def tolerance_of(kernel_op: loop.KernelOp) -> float:
    """The max relative error a candidate of `kernel_op` may show (see `FP32_TOLERANCE`):
    `NARROW_TOLERANCE` when any buffer holds bf16/f16, else fp32's for its longest sum."""
    elements = [arg.type.element_type for arg in kernel_op.body.block.args]  # type: ignore[attr-defined]
    if any(is_narrow_float(element) for element in elements):
        return NARROW_TOLERANCE
    sums = [op.trip_count for op in kernel_op.walk() if isinstance(op, loop.ForOp) and op.inits]
    eps = float(np.finfo(np.float32).eps)
    return max(FP32_TOLERANCE, SUM_ERROR_FACTOR * math.sqrt(max(sums, default=1)) * eps)


def compare(
    actual: np.ndarray, expected: np.ndarray, compared: np.ndarray, tolerance: float, output: int
) -> float:
    """The max relative error of `actual` against `expected` over the `compared` elements
    (a boolean mask), as the project measures it: max |a - e| / max |e|. Where the
    reference is NaN or infinite only the same value matches; a non-finite value where it
    is finite, or an error above `tolerance`, raises `_Wrong` naming the element."""
    positions = np.flatnonzero(compared)
    got = actual.reshape(-1)[positions].astype(np.float64)
    want = expected.reshape(-1)[positions].astype(np.float64)
    finite = np.isfinite(want)
    agree = np.where(finite, np.isfinite(got), (got == want) | (np.isnan(got) & np.isnan(want)))
    if not agree.all():
        k = int(np.argmin(agree))
        where = _element(expected.shape, positions[k])
        raise _Wrong(f"output {output} element {where} is {got[k]:.6g}, expected {want[k]:.6g}")
    scale = max(float(np.max(np.abs(want[finite]), initial=0.0)), np.finfo(np.float64).tiny)
    errors = np.abs(np.where(finite, got - want, 0.0))
    k = int(np.argmax(errors)) if errors.size else 0
    error = float(errors[k]) / scale if errors.size else 0.0
    if error > tolerance:
        where = _element(expected.shape, positions[k])
        raise _Wrong(
            f"max relative error {error:.1e} > {tolerance:.0e} at output {output} element "
            f"{where} ({got[k]:.6g}, expected {want[k]:.6g})"
        )
    return error


def _element(shape: tuple[int, ...], flat: int) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(flat), shape))


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
_CROSS_THREAD = (kernel.SharedAllocOp, kernel.BarrierOp, kernel.ShflXorOp, kernel.MmaSyncOp)
_WRITES = (kernel.StoreOp, kernel.AtomicAddOp, kernel.StoreVectorOp)


def _is_scalar(op: Operation) -> bool:
    """Scalar arithmetic: pure, per thread."""
    return op.dialect_name() in ("arith", "math")


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
        if op is not fn and not isinstance(op, _INERT + _MEMORY) and not _is_scalar(op):
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
            elif _is_scalar(owner) or isinstance(
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


def _launch_seconds(launch: Launch, blocks: np.ndarray, per_block_ops: int) -> float:
    """The interpreter estimate of running `blocks` of `launch` (batches of consecutive
    blocks), from the op executions of one block."""
    batch = default_blocks_per_batch(launch.func.block_size)
    runs = np.split(blocks, np.flatnonzero(np.diff(blocks) != 1) + 1) if blocks.size else []
    batches = sum(-(-len(run) // batch) for run in runs)
    threads = launch.func.block_size
    return Work(per_block_ops * batches, per_block_ops * len(blocks) * threads).seconds


def _sample_seconds(host: Host, chosen: list[np.ndarray], per_block_ops: list[int]) -> float:
    """The interpreter estimate of running `chosen`."""
    launches = zip(host.launches, chosen, per_block_ops, strict=True)
    return sum(_launch_seconds(launch, blocks, ops) for launch, blocks, ops in launches)


def _seeds(host: Host, fractions: Sequence[float]) -> dict[int, np.ndarray]:
    """Output elements at the given fractions of each output (1.0: the last element)."""
    return {
        key: np.unique([min(host.sizes[key] - 1, int(host.sizes[key] * f)) for f in fractions])
        for key in host.outputs
    }


# --- running a candidate ---------------------------------------------------------------------


@register_impls
class _SampledLaunches(InterpreterFunctions):
    """`kernel.launch` that runs the blocks chosen for it (all where none are)."""

    @impl(kernel.LaunchOp)
    def run_launch(self, interpreter: Interpreter, op: kernel.LaunchOp, args: PythonValues):
        chosen = interpreter.get_data(_SampledLaunches, "blocks", dict)
        blocks = chosen.get(op)
        run_kernel(interpreter, lookup_kernel(op, op.callee, kernel.FuncOp), args, blocks=blocks)
        return ()


def run_blocks(
    module: ModuleOp, inputs: Sequence[np.ndarray], blocks: dict[Operation, Sequence[int]]
) -> list[np.ndarray]:
    """`@forward` of a kernel-level module on copies of `inputs`, each launch in `blocks`
    running only the blocks listed for it."""
    interpreter = make_interpreter(module)
    interpreter.register_implementations(_SampledLaunches(), override=True)
    interpreter.get_data(_SampledLaunches, "blocks", lambda: dict(blocks))
    args = tuple(np.array(value, copy=True) for value in inputs)
    with np.errstate(all="ignore"):
        results = interpreter.call_op("forward", args)
    return [np.asarray(result) for result in results]


class KernelCheck:
    """Checks candidates of one loop-level kernel against it, on inputs drawn from `seed`.

    The reference (the loop-level kernel, whole) runs on the first `check` and is kept
    (`reference`, `reference_seconds`). `check(module)` takes a candidate lowered to the
    kernel level (`kernel.func`s and `@forward` with the loop kernel's arguments) and never
    raises, except KeyboardInterrupt. `mode`: "auto" samples big candidates (see the module
    docstring), "full" runs every block, "sample" samples whatever the size (tests).
    """

    def __init__(self, loop_kernel: loop.KernelOp, seed: int = 0, mode: str = "auto"):
        if mode not in MODES:
            raise ValueError(f"check mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.loop_kernel = loop_kernel
        self.seed = seed
        self.mode = mode
        self.tolerance = tolerance_of(loop_kernel)
        self.reference_seconds = 0.0
        self._inputs: list[np.ndarray] | None = None
        self._reference: list[np.ndarray] | None = None
        self._reference_error: Exception | None = None
        self._arg_types = list(loop_kernel.arg_types)
        self._blocks = 0

    @property
    def inputs(self) -> list[np.ndarray]:
        if self._inputs is None:
            self._inputs = random_inputs(self.loop_kernel, self.seed)
        return self._inputs

    @property
    def reference(self) -> list[np.ndarray]:
        """The loop kernel's outputs (the arguments it writes, in order) on `inputs`; what
        running it raised, raised again on every later call."""
        if self._reference is None:
            if self._reference_error is not None:
                raise self._reference_error
            start = time.perf_counter()
            try:
                with np.errstate(all="ignore"):
                    self._reference = run_module(standalone(self.loop_kernel), self.inputs)
            except Exception as error:
                self._reference_error = error
                raise
            finally:
                self.reference_seconds = time.perf_counter() - start
        return self._reference

    def check(self, module: ModuleOp) -> CheckResult:
        """The verdict on `module`, a candidate lowered to the kernel level."""
        start = time.perf_counter()
        try:
            reference = self.reference
        except Exception as error:  # reported on every candidate, not raised
            detail = f"the loop-level reference does not run: {_one_line(error)}"
            return self._result("failed", detail, 0, start)
        start = time.perf_counter()
        self._blocks = 0
        try:
            error, compared = self._check(module, reference)
        except _Wrong as wrong:
            return self._result("wrong", str(wrong), self._blocks, start)
        except Exception as error:  # any failure of a candidate is a verdict
            return self._result("failed", _one_line(error), self._blocks, start)
        total = sum(r.size for r in reference)
        detail = f"max relative error {error:.1e} over {compared} of {total} output elements"
        return self._result("ok", detail, self._blocks, start)

    def _result(self, status: str, detail: str, blocks: int, start: float) -> CheckResult:
        seconds = time.perf_counter() - start
        return CheckResult(status == "ok", status, detail, blocks, seconds)

    def _check(self, module: ModuleOp, reference: list[np.ndarray]) -> tuple[float, int]:
        """(max relative error, elements compared); `_blocks` counts the blocks run."""
        types = list(forward_function(module).function_type.inputs.data)
        if types != self._arg_types:
            raise ValueError("the candidate's @forward takes other arguments than the kernel")
        plan = self._plan(module)
        if plan is None:
            launches = [op for op in module.walk() if isinstance(op, kernel.LaunchOp)]
            grids = [lookup_kernel(op, op.callee, kernel.FuncOp).grid_size for op in launches]
            self._blocks = sum(grids)
            outputs = run_blocks(module, self.inputs, {})
            masks = [np.ones(r.shape, dtype=bool) for r in reference]
            return self._compare(outputs, reference, masks), sum(r.size for r in reference)
        host, chosen, masks = plan
        self._blocks = sum(len(ids) for ids in chosen)
        runs = zip(host.launches, chosen, strict=True)
        outputs = run_blocks(module, self.inputs, {launch.op: ids.tolist() for launch, ids in runs})
        if not any(mask.any() for mask in masks):
            raise RuntimeError("the sampled blocks wrote nothing")
        return self._compare(outputs, reference, masks), sum(int(m.sum()) for m in masks)

    def _plan(self, module: ModuleOp) -> tuple[Host, list[np.ndarray], list[np.ndarray]] | None:
        """(footprints, the blocks to run per launch, the output elements they compute), or
        None to run all blocks: a cheap candidate, one the footprint analysis does not
        understand, or one whose sample runs about as many blocks of its costliest launch
        as the whole. Raises `_Wrong` where the footprint shows an output element nobody
        writes (`_check_coverage`)."""
        if self.mode == "full":
            return None
        full = estimate_interpretation(module).seconds
        if self.mode == "auto" and full <= FULL_RUN_SECONDS:
            return None
        try:
            host = footprints(module)
        except NotAnalysable:
            if self.mode == "sample":
                raise
            return None
        self._check_coverage(host)
        ops = [self._per_block_ops(module, launch) for launch in host.launches]
        whole = [
            _launch_seconds(launch, np.arange(launch.func.grid_size), per_block)
            for launch, per_block in zip(host.launches, ops, strict=True)
        ]
        costliest = int(np.argmax(whole))

        def seconds(i: int, blocks: np.ndarray) -> float:
            return _launch_seconds(host.launches[i], blocks, ops[i])

        chosen = select_blocks(host, _seeds(host, [1.0, GOLDEN_FRACTION]))
        if _sample_seconds(host, chosen, ops) > SAMPLE_SECONDS:
            chosen = select_blocks(host, _seeds(host, [1.0]))
        sampled, grid = len(chosen[costliest]), host.launches[costliest].func.grid_size
        if self.mode == "auto" and sampled >= SAMPLE_SHARE * grid:
            return None
        chosen, complete, written = widen(host, chosen, costliest, seconds, WIDEN_SECONDS)
        compared = [(complete[k] & written[k]).reshape(host.shapes[k]) for k in host.outputs]
        return host, chosen, compared

    @staticmethod
    def _per_block_ops(module: ModuleOp, launch: Launch) -> int:
        return estimate_interpretation(module, launch.func.sym_name.data).op_executions

    def _check_coverage(self, host: Host) -> None:
        """Over the whole grid: no thread reads an element of an allocation that nothing
        wrote before (split-K's combine reading a workspace row the partial kernel's mask
        skipped), and every output element the reference writes, some thread writes."""
        written = [np.zeros(size, dtype=bool) for size in host.sizes]
        for launch in host.launches:
            for key, _, flat in launch.accesses.reads:
                unwritten = flat[~written[key][flat]] if key >= host.arguments else flat[:0]
                if unwritten.size:
                    where = _element(host.shapes[key], int(unwritten[0]))
                    raise _Wrong(
                        f"@{launch.func.sym_name.data} reads element {where} of "
                        f"{host.names[key]}, which nothing wrote"
                    )
            for key, _, flat, _ in launch.accesses.writes:
                written[key][flat] = True
        for output, (key, expected) in enumerate(zip(host.outputs, self.reference, strict=True)):
            missing = ~np.isnan(expected.reshape(-1).astype(np.float64)) & ~written[key]
            if missing.any():
                where = _element(expected.shape, int(np.argmax(missing)))
                count = int(missing.sum())
                raise _Wrong(
                    f"output {output} element {where} is written by no thread ({count} such)"
                )

    def _compare(
        self, outputs: list[np.ndarray], reference: list[np.ndarray], masks: list[np.ndarray]
    ) -> float:
        if len(outputs) != len(reference):
            raise ValueError(f"the candidate returns {len(outputs)} outputs, not {len(reference)}")
        error = 0.0
        for i, (actual, expected, mask) in enumerate(zip(outputs, reference, masks, strict=True)):
            error = max(error, compare(actual, expected, mask, self.tolerance, i))
        return error


def _written_buffers(launch: Launch) -> set[int]:
    return {launch.buffers[i] for i in written_arguments(launch.func)}


def _one_line(error: BaseException) -> str:
    """`Type: first line of the message`, at most 300 characters."""
    message = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {message[0]}" if message else type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."


__all__ = [
    "CheckResult",
    "Host",
    "KernelCheck",
    "NotAnalysable",
    "address_kernel",
    "compare",
    "computed_elements",
    "footprints",
    "random_inputs",
    "run_blocks",
    "select_blocks",
    "tolerance_of",
    "widen",
]
