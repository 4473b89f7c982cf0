"""Helpers shared by the loop-level passes: building kernels and loop nests, reading the host
sequence of `@forward`, and the work estimate that guards fusion.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    TensorType,
)
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import Pure

from deplodock.dialects import loop
from deplodock.dialects.common import KernelOpBase, LaunchOpBase


def memref_of(t: Attribute) -> Attribute:
    """`tensor<4x8xf32>` -> `memref<4x8xf32>`; other types unchanged."""
    if isinstance(t, TensorType):
        return MemRefType(t.element_type, t.get_shape())
    return t


def forward_func(module: ModuleOp) -> FuncOp | None:
    for op in module.ops:
        if isinstance(op, FuncOp) and op.sym_name.data == "forward":
            return op
    return None


# ---------------------------------------------------------------------------------------------
# Building kernels
# ---------------------------------------------------------------------------------------------


@dataclass
class KernelBuilder:
    """Builds one `loop.kernel` body: index constants live at the top, loop nests below.

    `index(v)` hands out one shared `arith.constant v : index` per value, so `%c0` (the index
    of every size-1 dimension) is created once per kernel.
    """

    kernel: loop.KernelOp
    _consts: dict[Attribute, SSAValue] = field(default_factory=dict[Attribute, SSAValue])
    _last_const: Operation | None = None

    @staticmethod
    def create(name: str, arg_types: Sequence[Attribute], arg_names: Sequence[str | None]):
        kernel = loop.KernelOp(name, arg_types)
        for arg, hint in zip(kernel.body.block.args, arg_names, strict=True):
            arg.name_hint = hint
        kernel.body.block.add_op(loop.ReturnOp())
        return KernelBuilder(kernel)

    @property
    def block(self) -> Block:
        return self.kernel.body.block

    @property
    def args(self) -> Sequence[SSAValue]:
        return self.block.args

    def body_builder(self) -> Builder:
        """A builder that appends to the kernel body, before `loop.return`."""
        terminator = self.block.last_op
        assert terminator is not None
        return Builder(InsertPoint.before(terminator))

    def index(self, value: int) -> SSAValue:
        """The shared `arith.constant value : index` of this kernel."""
        name = f"c{value}" if value >= 0 else f"c_neg{-value}"
        return self.constant(IntegerAttr(value, IndexType()), name)

    def constant(self, value: IntegerAttr | FloatAttr, name: str | None = None) -> SSAValue:
        """The shared `arith.constant` of `value`, created at the top of the kernel."""
        if (known := self._consts.get(value)) is not None:
            return known
        const = arith.ConstantOp(value)
        const.result.name_hint = name
        if self._last_const is None:
            self.block.insert_op_before(const, self.block.first_op)  # type: ignore[arg-type]
        else:
            self.block.insert_op_after(const, self._last_const)
        self._last_const = const
        self._consts[value] = const.result
        return const.result

    def index_value(self, value: SSAValue) -> int | None:
        """The integer of `value` if it is one of this kernel's index constants."""
        for attr, const in self._consts.items():
            if const is value and isinstance(attr, IntegerAttr):
                return attr.value.data
        return None


def free_loop(builder: Builder, lb: int, ub: int, name: str | None = None) -> Builder:
    """Appends `loop.for %name = lb to ub { }` and returns a builder inside its body."""
    for_op = builder.insert(loop.ForOp(lb, ub))
    for_op.body.block.args[0].name_hint = name
    yield_op = loop.YieldOp()
    for_op.body.block.add_op(yield_op)
    return Builder(InsertPoint.before(yield_op))


def free_nest(
    kb: KernelBuilder,
    builder: Builder,
    ranges: Sequence[tuple[int, int]],
    names: Sequence[str],
) -> tuple[Builder, list[SSAValue]]:
    """A nest of free loops, one per range `[lo, hi)` (outermost first).

    A range of one element gets no loop: its index is the constant `lo`.
    Returns a builder for the innermost body and the index of every range.
    """
    indices: list[SSAValue] = []
    for (lo, hi), name in zip(ranges, names, strict=True):
        if hi - lo == 1:
            indices.append(kb.index(lo))
            continue
        builder = free_loop(builder, lo, hi, name)
        assert builder.insertion_point.block.args
        indices.append(builder.insertion_point.block.args[0])
    return builder, indices


# ---------------------------------------------------------------------------------------------
# The host sequence
# ---------------------------------------------------------------------------------------------


def kernel_of(module: ModuleOp, launch: loop.LaunchOp) -> loop.KernelOp | None:
    name = launch.callee.string_value()
    for op in module.ops:
        if isinstance(op, loop.KernelOp) and op.sym_name.data == name:
            return op
    return None


def launches(func: FuncOp) -> list[loop.LaunchOp]:
    return [op for op in func.body.block.ops if isinstance(op, loop.LaunchOp)]


def stores(kernel: loop.KernelOp) -> Iterator[loop.StoreOp]:
    return (op for op in kernel.walk() if isinstance(op, loop.StoreOp))


def written_args(kernel: loop.KernelOp) -> set[int]:
    """Positions of the kernel arguments the kernel stores to."""
    block = kernel.body.block
    return {
        s.memref.index
        for s in stores(kernel)
        if isinstance(s.memref, BlockArgument) and s.memref.block is block
    }


def read_args(kernel: loop.KernelOp) -> set[int]:
    """Positions of the kernel arguments the kernel loads from."""
    block = kernel.body.block
    return {
        op.memref.index
        for op in kernel.walk()
        if isinstance(op, loop.LoadOp)
        and isinstance(op.memref, BlockArgument)
        and op.memref.block is block
    }


# ---------------------------------------------------------------------------------------------
# Work estimate
# ---------------------------------------------------------------------------------------------


def trip_product(op: Operation, stop: Operation) -> int:
    """Product of the trip counts of the `loop.for`s enclosing `op`, up to `stop`."""
    product = 1
    parent = op.parent_op()
    while parent is not None and parent is not stop:
        if isinstance(parent, loop.ForOp):
            product *= parent.trip_count
        parent = parent.parent_op()
    return product


def work(kernel: loop.KernelOp) -> int:
    """Estimated work of a kernel: every op counts the product of its enclosing trip counts.

    Index constants and loops themselves count too; this is a relative measure that only
    has to see recomputation (an op moved under an extra loop multiplies its weight).
    """
    return sum(trip_product(op, kernel) for op in kernel.walk() if op is not kernel)


def reduction_iterations(kernel: loop.KernelOp) -> int:
    """How many reduce-loop iterations a kernel runs: what fusion must never multiply.

    Recomputing a cheap elementwise producer per consumer element is fine (the 8x guard
    bounds it), and inlining it into a reduce loop's body adds no iteration. Recomputing a
    reduction (a matmul, a row sum) per element of its consumer multiplies iterations and
    turns an O(n^2) kernel into O(n^3), as inlining q/k projections into attention would.
    """
    return sum(
        trip_product(op, kernel) * op.trip_count
        for op in kernel.walk()
        if isinstance(op, loop.ForOp) and op.is_reduce
    )


def total_elements(t: Attribute) -> int:
    assert isinstance(t, MemRefType | TensorType)
    return math.prod(t.get_shape())


# ---------------------------------------------------------------------------------------------
# Clean-up inside a kernel: dedupe and dead-code elimination
# ---------------------------------------------------------------------------------------------


def _is_removable(op: Operation, written: set[SSAValue]) -> bool:
    """An op whose only effect is its results: pure ops, loads of buffers the kernel never
    writes, and reduce loops made of such ops."""
    if isinstance(op, loop.LoadOp):
        return op.memref not in written
    if isinstance(op, loop.ForOp):
        return op.is_reduce and all(
            _is_removable(inner, written) or isinstance(inner, loop.YieldOp)
            for inner in op.body.block.ops
        )
    return not op.regions and op.has_trait(Pure)


def _written_buffers(kernel: loop.KernelOp) -> set[SSAValue]:
    return {s.memref for s in stores(kernel)}


def dedupe(kernel: loop.KernelOp) -> None:
    """Merges structurally identical removable ops (same operands) of the same block.

    Blocks are visited outside-in, so duplicates of outer values are merged first and the
    inner ops (e.g. two copies of the same reduce loop) then see identical operands.
    """
    written = _written_buffers(kernel)
    _dedupe_block(kernel.body.block, written)


def _dedupe_block(block: Block, written: set[SSAValue]) -> None:
    seen: dict[tuple[object, ...], list[Operation]] = {}
    for op in list(block.ops):
        if _is_removable(op, written):
            key = (op.name, tuple(op.operands), len(op.results))
            twin = next(
                (o for o in seen.get(key, []) if o.is_structurally_equivalent(op, {block: block})),
                None,
            )
            if twin is not None:
                for old, new in zip(op.results, twin.results, strict=True):
                    old.replace_all_uses_with(new)
                Rewriter.erase_op(op)
                continue
            seen.setdefault(key, []).append(op)
        for region in op.regions:
            for inner in region.blocks:
                _dedupe_block(inner, written)


def dce(kernel: loop.KernelOp) -> None:
    """Erases removable ops whose results are unused (innermost and last first)."""
    written = _written_buffers(kernel)
    changed = True
    while changed:
        changed = False
        for op in reversed(list(kernel.walk())):
            if op is kernel or not op.results or any(r.uses for r in op.results):
                continue
            if _is_removable(op, written):
                Rewriter.erase_op(op)
                changed = True


def kernel_base_name(name: str) -> str:
    """`rms_norm_5` or `rms_norm_kernel_2` -> `rms_norm`: the op a kernel is named after."""
    return re.sub(r"(_kernel)?(_\d+)*$", "", name) or "kernel"


def rename_kernels(module: ModuleOp) -> None:
    """Names every launched kernel `<op>_kernel` (then `_2`, `_3`, ...) in launch order.

    The names survive to the CUDA C functions, so they must read well and must not clash
    with C library functions (a kernel called `div` or `exp` would).
    """
    launches = [op for op in module.walk() if isinstance(op, LaunchOpBase)]
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, KernelOpBase)}
    renamed: dict[str, str] = {}
    taken: set[str] = set()
    for launch in launches:
        old = launch.callee.root_reference.data
        if old not in renamed and old in kernels:
            base = f"{kernel_base_name(old)}_kernel"
            new, suffix = base, 1
            while new in taken:
                suffix += 1
                new = f"{base}_{suffix}"
            taken.add(new)
            renamed[old] = new
    for old, new in renamed.items():
        kernels[old].sym_name = StringAttr(new)
    for launch in launches:
        old = launch.callee.root_reference.data
        if old in renamed:
            launch.callee = SymbolRefAttr(renamed[old])
