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

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    AnyFloat,
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    TensorType,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tensor
from deplodock.dialects import torch as torch_d
from deplodock.dialects.element_types import accumulator_type, is_narrow_float

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


def is_float_type(t: Attribute) -> bool:
    return isinstance(t, AnyFloat)


def _bits(t: Attribute) -> int:
    """Bit width of a float type (16 for both f16 and bf16: neither holds the other)."""
    assert isinstance(t, AnyFloat)
    return t.bitwidth


#: `torch` comparison name -> (cmpf predicate, signed cmpi predicate, unsigned cmpi predicate).
#: Ordered float predicates, except `ne` which is true on NaN as in PyTorch; bools compare
#: unsigned (true > false).
COMPARISONS: dict[str, tuple[str, str, str]] = {
    "eq": ("oeq", "eq", "eq"),
    "ne": ("une", "ne", "ne"),
    "lt": ("olt", "slt", "ult"),
    "le": ("ole", "sle", "ule"),
    "gt": ("ogt", "sgt", "ugt"),
    "ge": ("oge", "sge", "uge"),
}


class ScalarBuilder:
    """Appends scalar `arith`/`math` ops to an elementwise body.

    `elt` is the result element type; it types the Python-float constants of `val`. Each
    arithmetic helper picks the float or the integer `arith` op from its operands' type.
    """

    def __init__(self, block: Block, elt: Attribute):
        self.block = block
        self.elt = elt
        self._constants: dict[tuple[float, Attribute], SSAValue] = {}

    def _add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def const(self, value: float, elt: Attribute | None = None) -> SSAValue:
        """One `arith.constant` per distinct (value, type) in the body."""
        elt = self.elt if elt is None else elt
        if (value, elt) not in self._constants:
            if isinstance(elt, IntegerType | IndexType):
                attr: Attribute = IntegerAttr(int(value), elt)
            else:
                assert isinstance(elt, AnyFloat)
                attr = FloatAttr(value, elt)
            self._constants[(value, elt)] = self._add(arith.ConstantOp(attr, elt))
        return self._constants[(value, elt)]

    def drop_constant(self, op: arith.ConstantOp) -> None:
        """Removes an unused constant of the body (and forgets it)."""
        self._constants = {k: v for k, v in self._constants.items() if v is not op.result}
        self.block.erase_op(op)

    def val(self, x: Operand, like: SSAValue | None = None) -> SSAValue:
        """`x`, or the constant `x` typed like `like` (default: the result type)."""
        if isinstance(x, SSAValue):
            return x
        return self.const(x, like.type if like is not None else None)

    def _pair(self, a: Operand, b: Operand) -> tuple[SSAValue, SSAValue]:
        """Both operands as values; a Python number takes the other operand's type."""
        x = self.val(a, b if isinstance(b, SSAValue) else None)
        return x, self.val(b, x)

    def _arith(
        self, a: Operand, b: Operand, float_op: type[Operation], int_op: type[Operation]
    ) -> SSAValue:
        x, y = self._pair(a, b)
        if x.type == IntegerType(1):
            raise PassFailedException("convert-torch-to-tensor: arithmetic on i1 tensors")
        return self._add((float_op if is_float_type(x.type) else int_op)(x, y))

    def math(self, op_type: type[Operation], *xs: Operand) -> SSAValue:
        """Any float `math` op (`math.AcosOp`, `math.Atan2Op`, ...) of the operands."""
        return self._math(op_type, *xs)

    def _math(self, op_type: type[Operation], *xs: Operand) -> SSAValue:
        """A float-only `math` op (transcendentals have no integer form)."""
        values = [self.val(x) for x in xs]
        if not is_float_type(values[0].type):
            raise PassFailedException(
                f"convert-torch-to-tensor: {op_type.name} needs a float tensor, "
                f"got {values[0].type}"
            )
        return self._add(op_type(*values))

    def add(self, a: Operand, b: Operand) -> SSAValue:
        return self._arith(a, b, arith.AddfOp, arith.AddiOp)

    def sub(self, a: Operand, b: Operand) -> SSAValue:
        return self._arith(a, b, arith.SubfOp, arith.SubiOp)

    def mul(self, a: Operand, b: Operand) -> SSAValue:
        return self._arith(a, b, arith.MulfOp, arith.MuliOp)

    def div(self, a: Operand, b: Operand) -> SSAValue:
        return self._arith(a, b, arith.DivfOp, arith.DivSIOp)

    def max(self, a: Operand, b: Operand) -> SSAValue:
        return self._arith(a, b, arith.MaximumfOp, arith.MaxSIOp)

    def neg(self, x: Operand) -> SSAValue:
        v = self.val(x)
        return self._add(arith.NegfOp(v)) if is_float_type(v.type) else self.sub(0, v)

    def exp(self, x: Operand) -> SSAValue:
        return self._math(math.ExpOp, x)

    def log(self, x: Operand) -> SSAValue:
        return self._math(math.LogOp, x)

    def expm1(self, x: Operand) -> SSAValue:
        """`exp(x) - 1`, exact for small `x` (where the subtraction would cancel)."""
        return self._math(math.ExpM1Op, x)

    def log1p(self, x: Operand) -> SSAValue:
        """`log(1 + x)`, exact for small `x` (where `1 + x` would round)."""
        return self._math(math.Log1pOp, x)

    def sqrt(self, x: Operand) -> SSAValue:
        return self._math(math.SqrtOp, x)

    def rsqrt(self, x: Operand) -> SSAValue:
        return self._math(math.RsqrtOp, x)

    def abs(self, x: Operand) -> SSAValue:
        v = self.val(x)
        return self._add(math.AbsFOp(v) if is_float_type(v.type) else math.AbsIOp(v))

    def tanh(self, x: Operand) -> SSAValue:
        return self._math(math.TanhOp, x)

    def erf(self, x: Operand) -> SSAValue:
        return self._math(math.ErfOp, x)

    def powf(self, x: Operand, y: Operand) -> SSAValue:
        return self._math(math.PowFOp, x, y)

    def cos(self, x: Operand) -> SSAValue:
        return self._math(math.CosOp, x)

    def sin(self, x: Operand) -> SSAValue:
        return self._math(math.SinOp, x)

    # -- comparisons, logic, selection, coordinates, casts ---------------------------------

    def cmp(self, name: str, a: Operand, b: Operand) -> SSAValue:
        """`a <name> b` as an `i1` (`name` in `COMPARISONS`: eq, ne, lt, le, gt, ge)."""
        x, y = self._pair(a, b)
        fpred, spred, upred = COMPARISONS[name]
        if is_float_type(x.type):
            return self._add(arith.CmpfOp(x, y, fpred))
        return self._add(arith.CmpiOp(x, y, upred if x.type == IntegerType(1) else spred))

    def select(self, cond: SSAValue, a: Operand, b: Operand) -> SSAValue:
        x, y = self._pair(a, b)
        return self._add(arith.SelectOp(cond, x, y))

    def and_(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.AndIOp(a, b))

    def or_(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.OrIOp(a, b))

    def xor(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.XOrIOp(a, b))

    def not_(self, a: SSAValue) -> SSAValue:
        return self._add(arith.XOrIOp(a, self.const(1, a.type)))

    def index(self, dim: int) -> SSAValue:
        """The coordinate `dim` of the element being computed (`tensor.index`)."""
        return self._add(tensor.IndexOp(dim))

    def cast(self, x: SSAValue, dst: Attribute) -> SSAValue:
        """`x` converted to `dst` with PyTorch's rules: floats round to nearest, float to
        integer truncates, anything to bool is `!= 0`, bool to a number is 0 or 1."""
        src = x.type
        if src == dst:
            return x
        if dst == IntegerType(1):
            return self.cmp("ne", x, 0)
        if is_float_type(src) and is_float_type(dst):
            if _bits(src) == _bits(dst):  # f16 <-> bf16 goes through f32
                return self.cast(self.cast(x, Float32Type()), dst)
            op = arith.ExtFOp if _bits(src) < _bits(dst) else arith.TruncFOp
            return self._add(op(x, dst))
        if is_float_type(dst):
            op = arith.UIToFPOp if src == IntegerType(1) else arith.SIToFPOp
            return self._add(op(x, dst))
        if is_float_type(src):
            return self._add(arith.FPToSIOp(x, dst))
        if isinstance(src, IndexType) or isinstance(dst, IndexType):
            return self._add(arith.IndexCastOp(x, dst))
        assert isinstance(src, IntegerType) and isinstance(dst, IntegerType)
        if src.width.data < dst.width.data:
            op = arith.ExtUIOp if src == IntegerType(1) else arith.ExtSIOp
            return self._add(op(x, dst))
        return self._add(arith.TruncIOp(x, dst))


BodyFn = Callable[..., SSAValue]


def _widened(sb: ScalarBuilder, value: SSAValue, compute: Attribute) -> SSAValue:
    """A bf16/f16 operand of an op computed in f32, extended first."""
    return (
        sb.cast(value, compute) if is_narrow_float(value.type) and compute != value.type else value
    )


def _rounded(sb: ScalarBuilder, value: SSAValue, elt: Attribute) -> SSAValue:
    """`value` cast to `elt`; a constant becomes a constant of `elt` (nothing to compute)."""
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, FloatAttr):
        rounded = sb.const(owner.value.value.data, elt)
        if not value.uses:  # a splat stays a lone constant (`splat_value` recognizes it)
            sb.drop_constant(owner)
        return rounded
    return sb.cast(value, elt)


class TensorBuilder:
    """Collects the tensor ops that replace one torch op."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []

    def _add(self, op: Operation) -> SSAValue:
        self.ops.append(op)
        return op.results[0]

    def name_results(self, since: int, hint: str) -> None:
        """Names the results of the ops collected from index `since` on `hint`: the kernels
        lifted from them are named after it (`<hint>_kernel`), so the parts of one torch
        op say what each computes. Unnamed results take the torch op's name."""
        for op in self.ops[since:]:
            for result in op.results:
                result.name_hint = hint

    # -- the primitives -------------------------------------------------------------------

    def elementwise(
        self, inputs: Sequence[Operand], shape: Sequence[int], elt: Attribute, body_fn: BodyFn
    ) -> SSAValue:
        """`body_fn(b, *scalars)` over `inputs` broadcast to `shape`; the result type is `elt`.

        Tensor inputs are broadcast with index maps (numpy rules) first; float inputs become
        `arith.constant`s of type `elt`, and splat-constant tensors constants of their own
        element type, in the body instead of operands.
        """
        shape = tuple(shape)
        folded: list[SSAValue | tuple[float, Attribute | None]] = []
        for x in inputs:
            if not isinstance(x, SSAValue):
                folded.append((x, None))
            elif (scalar := splat_value(x)) is not None:
                folded.append((scalar, element_type_of(x)))
            else:
                folded.append(x)
        tensors = [self.broadcast_to(x, shape) for x in folded if isinstance(x, SSAValue)]
        block = Block(arg_types=[element_type_of(t) for t in tensors])
        args = iter(block.args)
        compute = accumulator_type(elt)  # f32 for bf16/f16: PyTorch's opmath
        sb = ScalarBuilder(block, compute)
        scalars = [
            _widened(sb, next(args), compute)
            if isinstance(x, SSAValue)
            else sb.const(x[0], compute if x[1] is not None and is_narrow_float(x[1]) else x[1])
            for x in folded
        ]
        result = body_fn(sb, *scalars)
        if result.type == compute != elt:
            result = _rounded(sb, result, elt)  # rounded once, at the end of the op
        block.add_op(tensor.YieldOp(result))
        return self._add(tensor.ElementwiseOp(tensors, TensorType(elt, shape), Region(block)))

    def reduce(self, value: SSAValue, kind: tensor.ReduceKind, dims: Sequence[int]) -> SSAValue:
        return self._add(tensor.ReduceOp(value, kind, sorted(dims)))

    def scan(self, value: SSAValue, kind: tensor.ReduceKind, dim: int) -> SSAValue:
        return self._add(tensor.ScanOp(value, kind, dim))

    def recurrence(self, op: tensor.RecurrenceOp) -> SSAValue:
        """A whole `tensor.recurrence`, built by the caller (it has many operands)."""
        return self._add(op)

    def gather(self, source: SSAValue, indices: SSAValue, dim: int = 0) -> SSAValue:
        return self._add(tensor.GatherOp(source, indices, dim))

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

    def cast(self, value: SSAValue, elt: Attribute) -> SSAValue:
        """`value` converted element by element to `elt` (`ScalarBuilder.cast`'s rules), or
        `value` itself when it already has that element type."""
        if element_type_of(value) == elt:
            return value
        return self.elementwise([value], shape_of(value), elt, lambda s, v: s.cast(v, elt))

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

    Subclasses set `op_type` (a class attribute, or per instance for table-driven
    patterns) and implement `lower(op, b) -> value`; the ops collected in `b` replace the
    torch op, and the returned value replaces its result.
    """

    op_type: type[Operation]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, self.op_type):
            return
        b = TensorBuilder()
        result = self.lower(op, b)
        rewriter.replace(op, b.ops, [result])

    def lower(self, op: Operation, b: TensorBuilder) -> SSAValue:
        raise NotImplementedError
