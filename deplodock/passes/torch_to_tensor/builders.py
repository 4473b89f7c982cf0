"""Building blocks of the torch -> tensor decompositions.

A pattern collects the ops it creates in a `TensorBuilder` and hands them to
`rewriter.replace` in one go. The builder knows the three tensor primitives plus the
layout idioms every decomposition needs (numpy broadcasting, squeezing reduced dims), and
a `ScalarBuilder` writes the `arith`/`math` body of an elementwise op. Scalars may be
passed as Python floats wherever a tensor is expected: they become `arith.constant`s inside
the body (this is how `torch.constant` operands are folded into their consumer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import AnyFloat, FloatAttr, IntegerAttr, IntegerType, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tensor
from deplodock.dialects import torch as torch_d

Shape = tuple[int, ...]
#: an elementwise operand: a tensor value, or a scalar folded into the body as a constant
Operand = SSAValue | float


def shape_of(value: SSAValue) -> Shape:
    assert isinstance(value.type, TensorType), f"expected a tensor, got {value.type}"
    return tuple(value.type.get_shape())


def element_type_of(value: SSAValue) -> Attribute:
    assert isinstance(value.type, TensorType), f"expected a tensor, got {value.type}"
    return value.type.get_element_type()


def splat_value(value: SSAValue) -> float | None:
    """The scalar of a splat constant (`torch.constant`, or the zero-input
    `tensor.elementwise` it becomes), else None."""
    owner = value.owner
    if isinstance(owner, torch_d.ConstantOp):
        return owner.value.value.data
    if isinstance(owner, tensor.ElementwiseOp) and not owner.inputs:
        ops = list(owner.body.block.ops)
        if len(ops) == 2 and isinstance(ops[0], arith.ConstantOp):
            attr = ops[0].value
            if isinstance(attr, FloatAttr | IntegerAttr):
                return float(attr.value.data)
    return None


class ScalarBuilder:
    """Appends scalar `arith`/`math` ops of one element type to an elementwise body."""

    def __init__(self, block: Block, elt: Attribute):
        self.block = block
        self.elt = elt
        self._constants: dict[float, SSAValue] = {}

    def _add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def const(self, value: float) -> SSAValue:
        """One `arith.constant` per distinct value in the body."""
        if value not in self._constants:
            if isinstance(self.elt, IntegerType):
                attr: Attribute = IntegerAttr(int(value), self.elt)
            else:
                assert isinstance(self.elt, AnyFloat)
                attr = FloatAttr(value, self.elt)
            self._constants[value] = self._add(arith.ConstantOp(attr, self.elt))
        return self._constants[value]

    def val(self, x: Operand) -> SSAValue:
        return x if isinstance(x, SSAValue) else self.const(x)

    def add(self, a: Operand, b: Operand) -> SSAValue:
        return self._add(arith.AddfOp(self.val(a), self.val(b)))

    def sub(self, a: Operand, b: Operand) -> SSAValue:
        return self._add(arith.SubfOp(self.val(a), self.val(b)))

    def mul(self, a: Operand, b: Operand) -> SSAValue:
        return self._add(arith.MulfOp(self.val(a), self.val(b)))

    def div(self, a: Operand, b: Operand) -> SSAValue:
        return self._add(arith.DivfOp(self.val(a), self.val(b)))

    def max(self, a: Operand, b: Operand) -> SSAValue:
        return self._add(arith.MaximumfOp(self.val(a), self.val(b)))

    def neg(self, x: Operand) -> SSAValue:
        return self._add(arith.NegfOp(self.val(x)))

    def exp(self, x: Operand) -> SSAValue:
        return self._add(math.ExpOp(self.val(x)))

    def log(self, x: Operand) -> SSAValue:
        return self._add(math.LogOp(self.val(x)))

    def sqrt(self, x: Operand) -> SSAValue:
        return self._add(math.SqrtOp(self.val(x)))

    def rsqrt(self, x: Operand) -> SSAValue:
        return self._add(math.RsqrtOp(self.val(x)))

    def abs(self, x: Operand) -> SSAValue:
        return self._add(math.AbsFOp(self.val(x)))

    def tanh(self, x: Operand) -> SSAValue:
        return self._add(math.TanhOp(self.val(x)))

    def erf(self, x: Operand) -> SSAValue:
        return self._add(math.ErfOp(self.val(x)))

    def powf(self, x: Operand, y: Operand) -> SSAValue:
        return self._add(math.PowFOp(self.val(x), self.val(y)))


BodyFn = Callable[..., SSAValue]


class TensorBuilder:
    """Collects the tensor ops that replace one torch op."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []

    def _add(self, op: Operation) -> SSAValue:
        self.ops.append(op)
        return op.results[0]

    # -- the primitives -------------------------------------------------------------------

    def elementwise(
        self, inputs: Sequence[Operand], shape: Sequence[int], elt: Attribute, body_fn: BodyFn
    ) -> SSAValue:
        """`body_fn(b, *scalars)` over `inputs` broadcast to `shape`.

        Tensor inputs are broadcast with index maps (numpy rules) first; float inputs and
        splat constants become `arith.constant`s in the body instead of operands.
        """
        shape = tuple(shape)
        if not (isinstance(elt, AnyFloat)):
            raise PassFailedException(f"convert-torch-to-tensor: arithmetic on {elt} tensors")
        folded: list[Operand] = []
        for x in inputs:
            scalar = splat_value(x) if isinstance(x, SSAValue) else x
            folded.append(scalar if scalar is not None else x)
        tensors = [self.broadcast_to(x, shape) for x in folded if isinstance(x, SSAValue)]
        block = Block(arg_types=[element_type_of(t) for t in tensors])
        args = iter(block.args)
        sb = ScalarBuilder(block, elt)
        scalars = [next(args) if isinstance(x, SSAValue) else sb.const(x) for x in folded]
        result = body_fn(sb, *scalars)
        block.add_op(tensor.YieldOp(result))
        return self._add(tensor.ElementwiseOp(tensors, TensorType(elt, shape), Region(block)))

    def reduce(self, value: SSAValue, kind: tensor.ReduceKind, dims: Sequence[int]) -> SSAValue:
        return self._add(tensor.ReduceOp(value, kind, sorted(dims)))

    def index_map(self, value: SSAValue, amap: AffineMap, shape: Sequence[int]) -> SSAValue:
        """`out[c] = value[amap(c)]`, or `value` itself when that is the identity."""
        shape = tuple(shape)
        if shape == shape_of(value) and amap == AffineMap.identity(len(shape)):
            return value
        result_type = TensorType(element_type_of(value), shape)
        return self._add(tensor.IndexMapOp([value], [amap], result_type))

    def concat(
        self, values: Sequence[SSAValue], maps: Sequence[AffineMap], shape: Sequence[int], dim: int
    ) -> SSAValue:
        offsets, start = [], 0
        for v in values:
            offsets.append(start)
            start += shape_of(v)[dim]
        result_type = TensorType(element_type_of(values[0]), tuple(shape))
        return self._add(tensor.IndexMapOp(values, maps, result_type, (dim, offsets)))

    # -- layout idioms --------------------------------------------------------------------

    def broadcast_to(self, value: SSAValue, shape: Sequence[int]) -> SSAValue:
        """numpy broadcasting of `value` to `shape` (skipped when already that shape)."""
        return self.index_map(value, broadcast_map(shape_of(value), shape), shape)

    def squeeze(self, value: SSAValue, dims: Sequence[int]) -> SSAValue:
        """Drop the size-1 `dims` of `value`."""
        src = shape_of(value)
        keep = [i for i in range(len(src)) if i not in dims]
        out = [src[i] for i in keep]
        results, next_dim = [], 0
        for i in range(len(src)):
            if i in dims:
                results.append(AffineExpr.constant(0))
            else:
                results.append(AffineExpr.dimension(next_dim))
                next_dim += 1
        return self.index_map(value, AffineMap(len(out), 0, tuple(results)), out)


def broadcast_map(src: Sequence[int], dst: Sequence[int]) -> AffineMap:
    """Map from `dst` coordinates to `src` ones under numpy broadcasting (trailing dims
    aligned; a size-1 source dim reads index 0)."""
    lead = len(dst) - len(src)
    if lead < 0:
        raise PassFailedException(f"convert-torch-to-tensor: cannot broadcast {src} to {dst}")
    results = []
    for k, size in enumerate(src):
        out_size = dst[lead + k]
        if size == out_size:
            results.append(AffineExpr.dimension(lead + k))
        elif size == 1:
            results.append(AffineExpr.constant(0))
        else:
            raise PassFailedException(
                f"convert-torch-to-tensor: cannot broadcast {list(src)} to {list(dst)}"
            )
    return AffineMap(len(dst), 0, tuple(results))


def result_type_of(op: Operation) -> TensorType:
    t = op.results[0].type
    assert isinstance(t, TensorType)
    return t


class TorchLowering(RewritePattern):
    """Base of the per-op patterns: `lower` builds the replacement of one `op_type` op.

    Subclasses set `op_type` and implement `lower(op, b) -> value`; the ops collected in
    `b` replace the torch op, and the returned value replaces its result.
    """

    op_type: ClassVar[type[Operation]]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, self.op_type):
            return
        b = TensorBuilder()
        result = self.lower(op, b)
        rewriter.replace(op, b.ops, [result])

    def lower(self, op: Operation, b: TensorBuilder) -> SSAValue:
        raise NotImplementedError
