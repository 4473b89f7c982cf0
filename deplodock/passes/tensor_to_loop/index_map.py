"""`tensor.index_map` -> free loops over the output, the affine map as `arith` index ops, a
load and a store. A concat gets one loop nest per source over its own segment of the output,
so every load stays in bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineExpr
from xdsl.ir.affine.affine_expr import AffineConstantExpr, AffineDimExpr
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import loop, tensor
from deplodock.dialects.queries import shape_of
from deplodock.passes.loop_utils import KernelBuilder
from deplodock.passes.tensor_to_loop.lift import Args, LiftPattern, output_nest


class LiftIndexMap(LiftPattern[tensor.IndexMapOp]):
    op_type = tensor.IndexMapOp

    def build(self, op: tensor.IndexMapOp, kb: KernelBuilder, args: Args, out: SSAValue) -> None:
        shape = shape_of(op.result.type)
        info = op.concat_info
        for i, (operand, amap) in enumerate(zip(op.inputs, op.affine_maps, strict=True)):
            ranges = [(0, s) for s in shape]
            if info is not None:
                dim, offsets = info
                ends = [*offsets[1:], shape[dim]]
                ranges[dim] = (offsets[i], ends[i])
                if offsets[i] == ends[i]:
                    continue
            builder, idx = output_nest(kb, ranges)
            emitter = IndexEmitter(kb, builder, idx)
            src_idx = [emitter.emit(e) for e in amap.results]
            load = builder.insert(loop.LoadOp(args[operand], src_idx))
            builder.insert(loop.StoreOp(load.res, out, idx))


@dataclass
class IndexEmitter:
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
