"""`convert-tensor-to-loop`: lift every `tensor.*` op of `@forward` into its own `loop.kernel`.

Each tensor op becomes a kernel symbol (inserted before `@forward`), and in `@forward` a
`loop.alloc` of its result buffer and a `loop.launch` of the kernel. The function signature
and `func.return` switch from tensors to memrefs of the same shapes. Lifted bodies:

- elementwise: free loops over the output, a load of each input at the same indices, the
  cloned scalar body (`tensor.index d` becomes the loop index of dim `d`), a store;
- reduce: free loops over the kept dims, nested reduce loops (iter_args, init = the kind's
  identity) over the reduced dims, a store at index 0 of the reduced dims; f16/bf16 inputs
  accumulate in f32 (`arith.extf` of each load, one `arith.truncf` before the store);
- index_map: free loops over the output, the affine map as `arith` index ops, load, store;
  a concat gets one loop nest per source over its own segment of the output, so every load
  stays in bounds;
- gather: free loops over the output, a load of the index, `arith.index_cast` to `index`,
  the load of the source at that index, a store.

Size-1 dimensions get no loop (index `arith.constant 0 : index`). Fusion is a later pass
(`loop-fusion`); this one keeps a 1:1 correspondence that is easy to check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    Float16Type,
    Float32Type,
    FloatAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    TensorType,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineExpr
from xdsl.ir.affine.affine_expr import AffineConstantExpr, AffineDimExpr
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import loop, tensor
from deplodock.passes.loop_utils import (
    KernelBuilder,
    forward_func,
    free_nest,
    kernel_base_name,
    memref_of,
)
from deplodock.passes.schedule_utils import identity_attr

_COMBINE: dict[tensor.ReduceKind, type[arith.FloatingPointLikeBinaryOperation]] = {
    tensor.ReduceKind.ADD: arith.AddfOp,
    tensor.ReduceKind.MUL: arith.MulfOp,
    tensor.ReduceKind.MAX: arith.MaximumfOp,
    tensor.ReduceKind.MIN: arith.MinimumfOp,
}
_COMBINE_INT: dict[tensor.ReduceKind, type[arith.SignlessIntegerBinaryOperation]] = {
    tensor.ReduceKind.ADD: arith.AddiOp,
    tensor.ReduceKind.MUL: arith.MuliOp,
    tensor.ReduceKind.MAX: arith.MaxSIOp,
    tensor.ReduceKind.MIN: arith.MinSIOp,
}


def _shape(t: Attribute) -> tuple[int, ...]:
    """Shape of a tensor, or of the memref that already replaced it (operands are lifted
    before their users)."""
    assert isinstance(t, TensorType | MemRefType)
    return tuple(t.get_shape())


def _element_type(t: Attribute) -> Attribute:
    assert isinstance(t, TensorType | MemRefType)
    return t.element_type


def _iv_names(prefix: str, rank: int) -> list[str]:
    return [f"{prefix}{d}" for d in range(rank)]


@dataclass
class KernelNamer:
    """Unique kernel names: the result's name hint if it has one, else `<kind>_<n>`."""

    taken: set[str]
    counter: int = 0

    def __call__(self, kind: str, hint: str | None) -> str:
        base = kernel_base_name(hint) if hint and hint.isidentifier() else kind
        base = f"{base}_kernel"
        self.counter += 1
        name, suffix = base, 1
        while name in self.taken:
            suffix += 1
            name = f"{base}_{suffix}"
        self.taken.add(name)
        return name


class LiftPattern(RewritePattern):
    """Common part of the lifting patterns: kernel creation and the host-side launch."""

    def __init__(self, namer: KernelNamer):
        self.namer = namer

    @staticmethod
    def in_forward(op: Operation) -> bool:
        func = op.parent_op()
        return isinstance(func, FuncOp) and func.sym_name.data == "forward"

    def new_kernel(self, op: Operation, kind: str) -> tuple[KernelBuilder, list[SSAValue]]:
        """A kernel over the op's (distinct) input buffers then its result buffer."""
        inputs = list(dict.fromkeys(op.operands))
        result = op.results[0]
        name = self.namer(kind, result.name_hint)
        types = [memref_of(v.type) for v in (*inputs, result)]
        names = [v.name_hint for v in (*inputs, result)]
        kb = KernelBuilder.create(name, types, names)
        return kb, inputs

    def finish(
        self,
        op: Operation,
        kb: KernelBuilder,
        inputs: Sequence[SSAValue],
        rewriter: PatternRewriter,
    ) -> None:
        """Inserts the kernel before `@forward`; replaces `op` by alloc + launch."""
        func = op.parent_op()
        assert isinstance(func, FuncOp)
        rewriter.insert(kb.kernel, InsertPoint.before(func))
        alloc = loop.AllocOp(memref_of(op.results[0].type))  # type: ignore[arg-type]
        alloc.res.name_hint = op.results[0].name_hint
        launch = loop.LaunchOp(kb.kernel.sym_name.data, [*inputs, alloc.res])
        rewriter.replace(op, [alloc, launch], [alloc.res])


class LiftElementwise(LiftPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tensor.ElementwiseOp, rewriter: PatternRewriter) -> None:
        if not self.in_forward(op):
            return
        kb, inputs = self.new_kernel(op, "elementwise")
        args = dict(zip(inputs, kb.args, strict=False))
        out = kb.args[-1]
        shape = _shape(op.result.type)
        builder, idx = free_nest(
            kb, kb.body_builder(), [(0, s) for s in shape], _iv_names("i", len(shape))
        )
        mapping: dict[SSAValue, SSAValue] = {}
        loaded: dict[SSAValue, SSAValue] = {}
        for block_arg, operand in zip(op.body.block.args, op.inputs, strict=True):
            if operand not in loaded:
                load = builder.insert(loop.LoadOp(args[operand], idx))
                load.res.name_hint = block_arg.name_hint
                loaded[operand] = load.res
            mapping[block_arg] = loaded[operand]
        value = _clone_scalar_body(op, kb, builder, mapping, idx)
        builder.insert(loop.StoreOp(value, out, idx))
        self.finish(op, kb, inputs, rewriter)


def _clone_scalar_body(
    op: tensor.ElementwiseOp,
    kb: KernelBuilder,
    builder: Builder,
    mapping: dict[SSAValue, SSAValue],
    idx: Sequence[SSAValue],
) -> SSAValue:
    """Clones the scalar body into the loop nest; its constants go to the kernel top and
    `tensor.index d` is the index `idx[d]` of the element being computed."""
    for inner in op.body.block.ops:
        if isinstance(inner, tensor.YieldOp):
            return mapping.get(inner.value, inner.value)
        if isinstance(inner, tensor.IndexOp):
            mapping[inner.result] = idx[inner.dim_value]
            continue
        if isinstance(inner, arith.ConstantOp) and isinstance(inner.value, IntegerAttr | FloatAttr):
            mapping[inner.result] = kb.constant(inner.value, inner.result.name_hint)
            continue
        builder.insert(inner.clone(mapping))
    raise PassFailedException("tensor.elementwise: body has no tensor.yield")


class LiftReduce(LiftPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tensor.ReduceOp, rewriter: PatternRewriter) -> None:
        if not self.in_forward(op):
            return
        kind = op.reduce_kind
        kb, inputs = self.new_kernel(op, "reduce")
        src, out = kb.args[0], kb.args[-1]
        in_shape = _shape(op.input.type)
        dims = set(op.reduce_dims)
        kept = [d for d in range(len(in_shape)) if d not in dims]
        builder, kept_idx = free_nest(
            kb,
            kb.body_builder(),
            [(0, in_shape[d]) for d in kept],
            [f"i{d}" for d in kept],
        )
        element = _element_type(op.input.type)
        accumulator = _accumulator_type(element)
        init = kb.constant(identity_attr(kind, accumulator), "init")  # type: ignore[arg-type]
        loop_dims = [d for d in sorted(dims) if in_shape[d] > 1]
        index: dict[int, SSAValue] = dict(zip(kept, kept_idx, strict=True))
        index.update({d: kb.index(0) for d in dims if in_shape[d] == 1})
        value = _reduce_nest(builder, src, loop_dims, in_shape, index, init, kind)
        if accumulator != element:
            value = builder.insert(arith.TruncFOp(value, element)).result
        out_idx = [kb.index(0) if d in dims else index[d] for d in range(len(in_shape))]
        builder.insert(loop.StoreOp(value, out, out_idx))
        self.finish(op, kb, inputs, rewriter)


def _accumulator_type(element: Attribute) -> Attribute:
    """f16/bf16 sums accumulate in f32 and round once at the store, as GPU kernels (and the
    tensor interpreter) do; other types accumulate in themselves."""
    return Float32Type() if isinstance(element, Float16Type | BFloat16Type) else element


def _reduce_nest(
    builder: Builder,
    src: SSAValue,
    loop_dims: Sequence[int],
    shape: Sequence[int],
    index: dict[int, SSAValue],
    init: SSAValue,
    kind: tensor.ReduceKind,
) -> SSAValue:
    """Nested reduce loops over `loop_dims` accumulating `src` with `kind` in the type of
    `init` (loads are widened to it); the result."""
    if not loop_dims:
        load = builder.insert(loop.LoadOp(src, [index[d] for d in range(len(shape))]))
        value: SSAValue = load.res
        if value.type != init.type:
            value = builder.insert(arith.ExtFOp(value, init.type)).result
        table = _COMBINE if isinstance(value.type, AnyFloat) else _COMBINE_INT
        return builder.insert(table[kind](init, value)).result
    dim, *rest = loop_dims
    for_op = builder.insert(loop.ForOp(0, shape[dim], 1, [init]))
    iv, acc = for_op.body.block.args
    iv.name_hint, acc.name_hint = f"r{dim}", "acc"
    inner = Builder(InsertPoint.at_end(for_op.body.block))
    value = _reduce_nest(inner, src, rest, shape, {**index, dim: iv}, acc, kind)
    inner.insert(loop.YieldOp(value))
    for_op.res[0].name_hint = kind.value
    return for_op.res[0]


class LiftIndexMap(LiftPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tensor.IndexMapOp, rewriter: PatternRewriter) -> None:
        if not self.in_forward(op):
            return
        kb, inputs = self.new_kernel(op, "index_map")
        args = dict(zip(inputs, kb.args, strict=False))
        out = kb.args[-1]
        shape = _shape(op.result.type)
        info = op.concat_info
        for i, (operand, amap) in enumerate(zip(op.inputs, op.affine_maps, strict=True)):
            ranges = [(0, s) for s in shape]
            if info is not None:
                dim, offsets = info
                ends = [*offsets[1:], shape[dim]]
                ranges[dim] = (offsets[i], ends[i])
                if offsets[i] == ends[i]:
                    continue
            builder, idx = free_nest(kb, kb.body_builder(), ranges, _iv_names("i", len(shape)))
            emitter = _IndexEmitter(kb, builder, idx)
            src_idx = [emitter.emit(e) for e in amap.results]
            load = builder.insert(loop.LoadOp(args[operand], src_idx))
            builder.insert(loop.StoreOp(load.res, out, idx))
        self.finish(op, kb, inputs, rewriter)


class LiftGather(LiftPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tensor.GatherOp, rewriter: PatternRewriter) -> None:
        if not self.in_forward(op):
            return
        kb, inputs = self.new_kernel(op, "gather")
        args = dict(zip(inputs, kb.args, strict=False))
        out = kb.args[-1]
        shape = _shape(op.result.type)
        builder, idx = free_nest(
            kb, kb.body_builder(), [(0, s) for s in shape], _iv_names("i", len(shape))
        )
        dim, rank = op.dim_value, len(_shape(op.indices.type))
        position = builder.insert(loop.LoadOp(args[op.indices], idx[dim : dim + rank]))
        position.res.name_hint = op.indices.name_hint
        row = builder.insert(arith.IndexCastOp(position.res, IndexType()))
        src_idx = [*idx[:dim], row.result, *idx[dim + rank :]]
        load = builder.insert(loop.LoadOp(args[op.source], src_idx))
        builder.insert(loop.StoreOp(load.res, out, idx))
        self.finish(op, kb, inputs, rewriter)


@dataclass
class _IndexEmitter:
    """Emits an affine expression of the output indices as `arith` index ops.

    Constant sub-expressions are folded (an output dim of size 1 is the constant 0), and
    `x * 1`, `x + 0`, `x floordiv 1`, `x mod 1` are simplified away.
    """

    kb: KernelBuilder
    builder: Builder
    dims: Sequence[SSAValue]

    def emit(self, expr: AffineExpr) -> SSAValue:
        value = self._emit(expr)
        return self.kb.index(value) if isinstance(value, int) else value

    _memo: dict[str, SSAValue | int] = field(default_factory=dict[str, "SSAValue | int"])

    def _emit(self, expr: AffineExpr) -> SSAValue | int:
        key = str(expr)
        if key not in self._memo:
            self._memo[key] = self._emit_new(expr)
        return self._memo[key]

    def _emit_new(self, expr: AffineExpr) -> SSAValue | int:
        if isinstance(expr, AffineConstantExpr):
            return expr.value
        if isinstance(expr, AffineDimExpr):
            value = self.dims[expr.position]
            const = self.kb.index_value(value)
            return value if const is None else const
        if not isinstance(expr, AffineBinaryOpExpr):
            raise PassFailedException(f"convert-tensor-to-loop: unsupported affine expr {expr}")
        lhs, rhs = self._emit(expr.lhs), self._emit(expr.rhs)
        return self._binary(expr.kind, lhs, rhs)

    def _binary(
        self, kind: AffineBinaryOpKind, lhs: SSAValue | int, rhs: SSAValue | int
    ) -> SSAValue | int:
        if isinstance(lhs, int) and isinstance(rhs, int):
            return _fold(kind, lhs, rhs)
        if kind == AffineBinaryOpKind.Add and 0 in (lhs, rhs):
            return rhs if lhs == 0 else lhs
        if kind == AffineBinaryOpKind.Mul and 1 in (lhs, rhs):
            return rhs if lhs == 1 else lhs
        if kind in (AffineBinaryOpKind.FloorDiv, AffineBinaryOpKind.CeilDiv) and rhs == 1:
            return lhs
        if kind == AffineBinaryOpKind.Mod and rhs == 1:
            return 0
        op_class = _INDEX_OPS[kind]
        a = self.kb.index(lhs) if isinstance(lhs, int) else lhs
        b = self.kb.index(rhs) if isinstance(rhs, int) else rhs
        return self.builder.insert(op_class(a, b)).result


def _fold(kind: AffineBinaryOpKind, a: int, b: int) -> int:
    match kind:
        case AffineBinaryOpKind.Add:
            return a + b
        case AffineBinaryOpKind.Mul:
            return a * b
        case AffineBinaryOpKind.Mod:
            return a % b
        case AffineBinaryOpKind.FloorDiv:
            return a // b
        case AffineBinaryOpKind.CeilDiv:
            return -(-a // b)


_INDEX_OPS: dict[AffineBinaryOpKind, type[arith.SignlessIntegerBinaryOperation]] = {
    AffineBinaryOpKind.Add: arith.AddiOp,
    AffineBinaryOpKind.Mul: arith.MuliOp,
    AffineBinaryOpKind.Mod: arith.RemSIOp,
    AffineBinaryOpKind.FloorDiv: arith.FloorDivSIOp,
    AffineBinaryOpKind.CeilDiv: arith.CeilDivSIOp,
}


class ForwardToMemrefs(RewritePattern):
    """`@forward`'s arguments and results become memrefs of the same shapes."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: FuncOp, rewriter: PatternRewriter) -> None:
        if op.sym_name.data != "forward":
            return
        inputs = [memref_of(t) for t in op.function_type.inputs]
        outputs = [memref_of(t) for t in op.function_type.outputs]
        new_type = FunctionType.from_lists(inputs, outputs)
        if new_type == op.function_type:
            return
        for arg in op.body.block.args:
            if isinstance(arg.type, TensorType):
                rewriter.replace_value_with_new_type(arg, memref_of(arg.type))
        op.function_type = new_type
        rewriter.notify_op_modified(op)


def _check_lifted(module: ModuleOp) -> None:
    for op in module.walk():
        if op.dialect_name() == "tensor":
            raise PassFailedException(f"convert-tensor-to-loop: {op.name} left after lifting")
        if isinstance(op, ReturnOp):
            for v in op.arguments:
                if isinstance(v.type, TensorType):
                    raise PassFailedException("convert-tensor-to-loop: a tensor is returned")


@dataclass(frozen=True)
class ConvertTensorToLoopPass(ModulePass):
    """Lift each `tensor.*` op of `@forward` into a `loop.kernel` + alloc + launch."""

    name = "convert-tensor-to-loop"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if forward_func(op) is None:
            raise PassFailedException("convert-tensor-to-loop: the module has no @forward")
        taken = {
            s.data
            for inner in op.ops
            if (s := inner.properties.get("sym_name")) is not None and hasattr(s, "data")
        }
        namer = KernelNamer(taken)
        PatternRewriteWalker(ForwardToMemrefs(), apply_recursively=False).rewrite_module(op)
        patterns: list[RewritePattern] = [
            LiftElementwise(namer),
            LiftReduce(namer),
            LiftIndexMap(namer),
            LiftGather(namer),
        ]
        PatternRewriteWalker(
            GreedyRewritePatternApplier(patterns, dce_enabled=False), apply_recursively=False
        ).rewrite_module(op)
        _check_lifted(op)
