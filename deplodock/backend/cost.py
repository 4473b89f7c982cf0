"""Bytes and flops of each kernel, counted on the kernel-level IR (for `--profile`).

A `kernel.func` says exactly what every thread executes, so the work of a launch is a count:
every `kernel.load`/`kernel.store` and every float op, times the number of times some thread
executes it. Those counts come from the control flow, which at this level is static bounds
and thread/block-id arithmetic: the index values that decide control (loop starts, `kernel.if`
conditions) are evaluated as numpy arrays over all lanes at once, block ids along axis 0 and
thread ids along axis 1, so a value that depends only on the thread id stays a `(1, T)` row
and a 1.8-million-block launch costs no more than one block. A loop whose body's control
does not depend on its induction variable is counted once, times its per-lane trip count;
one whose body does (a triangular nest, a bounds check on the iv) is walked iteration by
iteration. Control that depends on loaded data cannot be counted; it is assumed taken and
the result is marked inexact.

What is counted:
- `flops`: every `arith`/`math` op with a float result except constants, selects and
  conversions; `math.fma` counts 2. The warp-shuffle combine's adds count on every lane. A
  `kernel.mma_sync` is the whole warp's 2 x M x N x K (4096 for m16n8k16), a 32nd per lane;
  a tf32 one that adds a rounding correction (`correction`) counts none, as the products it
  refines are counted once.
- `load_bytes`/`store_bytes`: global memory accesses as issued (element size x executions),
  which includes re-reads that caches serve. `shared_bytes`: `__shared__` loads + stores.
- `footprint_bytes`: per global buffer, min(issued bytes, buffer size) for loads plus the same
  for stores: the DRAM traffic of a kernel with perfect caching, which `--profile` divides by
  the time to get an achieved bandwidth comparable with the device's copy bandwidth.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    AnyFloat,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
)
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from deplodock.dialects import kernel
from deplodock.dialects.element_types import buffer_bytes, byte_size
from deplodock.dialects.hardware import WARP_SIZE, is_shared
from deplodock.dialects.queries import launch_counts as launch_counts  # perf/ reads it here
from deplodock.dialects.scalar_ops import NOT_FLOPS
from deplodock.interpreters.arith import BINARY_OPS, CMPI_PREDICATES

#: Above this many lane-iterations a loop with iv-dependent control is approximated.
MAX_WALK = 1 << 26


class _Unknown:
    """A value the counter cannot know (loaded data, a loop-carried value, a symbolic iv)."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


class _DynamicControl(Exception):
    """Control flow depends on an unknown value: the enclosing loop must be walked."""


@dataclass
class KernelCost:
    """The work of one launch of a kernel (see the module docstring for the definitions)."""

    name: str
    grid: int
    block: int
    flops: int = 0
    load_bytes: int = 0
    store_bytes: int = 0
    shared_bytes: int = 0
    footprint_bytes: int = 0
    exact: bool = True
    loaded: dict[str, int] = field(default_factory=dict)  # issued bytes per global buffer
    stored: dict[str, int] = field(default_factory=dict)

    @property
    def global_bytes(self) -> int:
        return self.load_bytes + self.store_bytes


@dataclass
class _Counts:
    flops: int = 0
    shared: int = 0
    loaded: defaultdict[SSAValue, int] = field(default_factory=lambda: defaultdict(int))
    stored: defaultdict[SSAValue, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, other: _Counts) -> None:
        self.flops += other.flops
        self.shared += other.shared
        for buf, n in other.loaded.items():
            self.loaded[buf] += n
        for buf, n in other.stored.items():
            self.stored[buf] += n


def _is_flop(op: Operation) -> bool:
    if op.dialect_name() not in ("arith", "math") or isinstance(op, NOT_FLOPS):
        return False
    return len(op.results) == 1 and isinstance(op.results[0].type, AnyFloat)


class _Counter:
    """Counts one `kernel.func`; values live in a stack of per-block scopes."""

    def __init__(self, fn: kernel.FuncOp, lenient: bool):
        self.fn = fn
        self.grid, self.block = fn.grid_size, fn.block_size
        self.lanes = self.grid * self.block
        self.lenient = lenient
        self.exact = True
        self.scopes: list[tuple[Block, dict[SSAValue, Any]]] = []

    # -- weights: how many times each lane runs an op (broadcastable to (grid, block)) -------

    def total(self, weight: Any) -> int:
        w = np.asarray(weight)
        if w.ndim == 0:
            return int(w) * self.lanes
        return int(w.sum(dtype=np.int64)) * (self.lanes // w.size)

    # -- values -------------------------------------------------------------------------------

    def lookup(self, value: SSAValue) -> Any:
        for _, env in reversed(self.scopes):
            if value in env:
                return env[value]
        if isinstance(value, BlockArgument):
            return UNKNOWN
        result = self.compute(value.owner)
        owner_block = value.owner.parent_block()
        for block, env in reversed(self.scopes):  # memoize where the value is defined
            if block is owner_block:
                env[value] = result
                break
        return result

    def compute(self, op: Operation) -> Any:
        if isinstance(op, kernel.ThreadIdOp):
            return np.arange(self.block, dtype=np.int64).reshape(1, self.block)
        if isinstance(op, kernel.BlockIdOp):
            return np.arange(self.grid, dtype=np.int64).reshape(self.grid, 1)
        if isinstance(op, arith.ConstantOp):
            value = op.value
            if isinstance(value, IntegerAttr):
                v = value.value.data
                if isinstance(value.type, IntegerType) and value.type.width.data == 1:
                    return np.asarray(bool(v))
                return np.asarray(v, dtype=np.int64)
            return UNKNOWN
        args = [self.lookup(v) for v in op.operands]
        if any(a is UNKNOWN for a in args):
            return UNKNOWN
        if type(op) in BINARY_OPS and not isinstance(op.results[0].type, AnyFloat):
            return np.asarray(BINARY_OPS[type(op)](*args))
        if isinstance(op, arith.CmpiOp):
            predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
            return np.asarray(CMPI_PREDICATES[predicate](*args))
        if isinstance(op, arith.SelectOp) and not isinstance(op.result.type, AnyFloat):
            return np.where(*args)
        if isinstance(op, arith.IndexCastOp | arith.ExtSIOp | arith.ExtUIOp):
            return args[0]
        return UNKNOWN

    def known(self, value: SSAValue) -> Any:
        v = self.lookup(value)
        if v is UNKNOWN:
            if not self.lenient:
                raise _DynamicControl()
            self.exact = False
        return v

    # -- ops ----------------------------------------------------------------------------------

    def count_block(self, block: Block, weight: Any, env: dict[SSAValue, Any]) -> _Counts:
        counts = _Counts()
        self.scopes.append((block, env))
        try:
            for op in block.ops:
                counts.add(self.count_op(op, weight))
        finally:
            self.scopes.pop()
        return counts

    def count_op(self, op: Operation, weight: Any) -> _Counts:
        counts = _Counts()
        match op:
            case kernel.LoadOp() | kernel.StoreOp() | kernel.AtomicAddOp():
                t = op.memref.type
                assert isinstance(t, MemRefType)
                n = self.total(weight) * byte_size(t.element_type)
                if is_shared(t):
                    counts.shared += n
                elif isinstance(op, kernel.LoadOp):
                    counts.loaded[op.memref] += n
                else:
                    counts.stored[op.memref] += n
            case kernel.LoadVectorOp() | kernel.StoreVectorOp():
                t = op.memref.type
                assert isinstance(t, MemRefType)
                n = self.total(weight) * byte_size(t.element_type) * op.width
                if is_shared(t):
                    counts.shared += n
                elif isinstance(op, kernel.LoadVectorOp):
                    counts.loaded[op.memref] += n
                else:
                    counts.stored[op.memref] += n
            case kernel.LdmatrixOp():  # a lane's share of the warp's rows: its 2 N elements
                t = op.memref.type
                assert isinstance(t, MemRefType)
                counts.shared += self.total(weight) * byte_size(t.element_type) * len(op.res)
            case kernel.CpAsyncOp():
                n = self.total(weight) * op.num_bytes  # a zero-filling copy reads nothing
                counts.loaded[op.src] += n
                counts.shared += n
            case kernel.IfOp():
                cond = self.known(op.cond)
                taken = weight if cond is UNKNOWN else weight * np.asarray(cond, dtype=np.int64)
                counts.add(self.count_block(op.body.block, taken, {}))
            case kernel.ForOp():
                counts.add(self.count_for(op, weight))
            case kernel.MmaSyncOp():  # every lane of the warp runs it: a 32nd of its flops each
                if not op.is_correction:
                    counts.flops += self.total(weight) * op.shape.flops // WARP_SIZE
            case _ if op.regions:
                self.exact = False  # an op this counter does not model: its body is skipped
            case _ if _is_flop(op):
                counts.flops += self.total(weight) * (2 if isinstance(op, math.FmaOp) else 1)
        return counts

    def count_for(self, op: kernel.ForOp, weight: Any) -> _Counts:
        lb = self.known(op.lb)
        ub, step = op.upper, op.step_value
        if lb is UNKNOWN:  # lenient: as if started at 0
            lb = np.asarray(0)
        trips = np.maximum(0, -((np.asarray(lb) - ub) // step))  # ceil((ub - lb) / step)
        body = op.body.block
        symbolic = {a: UNKNOWN for a in body.args}
        if self.lenient:
            return self.count_block(body, weight * trips, symbolic)
        try:
            return self.count_block(body, weight * trips, symbolic)
        except _DynamicControl:
            pass
        lanes = np.broadcast(np.asarray(weight), np.asarray(lb)).size
        if int(trips.max(initial=0)) * lanes > MAX_WALK:
            self.lenient, self.exact = True, False
            try:
                return self.count_block(body, weight * trips, symbolic)
            finally:
                self.lenient = False
        counts = _Counts()
        for k in range(int(trips.max(initial=0))):  # walk: the iv is known in each iteration
            iv = np.asarray(lb) + k * step
            env: dict[SSAValue, Any] = {a: UNKNOWN for a in body.args[1:]}
            env[body.args[0]] = iv
            counts.add(self.count_block(body, weight * (iv < ub), env))
        return counts


def kernel_cost(fn: kernel.FuncOp) -> KernelCost:
    """Flops and bytes of one launch of `fn` (exact unless control depends on loaded data)."""
    counter = _Counter(fn, lenient=False)
    try:
        counts = counter.count_block(fn.body.block, np.asarray(1), {})
    except _DynamicControl:  # data-dependent control outside any loop
        counter = _Counter(fn, lenient=True)
        counts = counter.count_block(fn.body.block, np.asarray(1), {})
    names = {arg: arg.name_hint or f"arg{i}" for i, arg in enumerate(fn.body.block.args)}
    cost = KernelCost(fn.sym_name.data, fn.grid_size, fn.block_size, exact=counter.exact)
    cost.flops, cost.shared_bytes = counts.flops, counts.shared
    for buf, n in counts.loaded.items():
        cost.loaded[names.get(buf, "?")] = n
    for buf, n in counts.stored.items():
        cost.stored[names.get(buf, "?")] = n
    cost.load_bytes = sum(counts.loaded.values())
    cost.store_bytes = sum(counts.stored.values())
    footprint = 0
    for issued in (counts.loaded, counts.stored):
        for buf, n in issued.items():
            assert isinstance(buf.type, MemRefType)
            footprint += min(n, buffer_bytes(buf.type))
    cost.footprint_bytes = footprint
    return cost


def program_costs(module: ModuleOp) -> dict[str, KernelCost]:
    """The cost of every `kernel.func` of a kernel-level module, by kernel name."""
    return {op.sym_name.data: kernel_cost(op) for op in module.ops if isinstance(op, kernel.FuncOp)}
