"""C expressions for `arith` and `math` ops: the op -> expression half of the CUDA printer.

Each op becomes one `Expr` (see `exprs.py`) over its operands' expressions. f16 and bf16 are
storage types: an op on them computes in `float` and rounds the result back, one rounding
per IR op as in the interpreters. The casts are `dialects/scalar_ops.py`'s and the comparison
predicates xDSL's own tables, so the printer and the interpreters agree on what they cover.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
)
from xdsl.ir import Attribute, Operation, SSAValue

from deplodock.dialects.element_types import is_narrow_float
from deplodock.dialects.scalar_ops import CAST_OPS
from deplodock.passes.kernel_to_cuda.exprs import (
    ADD,
    BAND,
    BOR,
    BXOR,
    LAND,
    LOR,
    MUL,
    PRIMARY,
    SHIFT,
    UNARY,
    Expr,
    PrinterError,
    add,
    as_float,
    binary,
    c_type,
    call,
    cast,
    compare,
    float_literal,
    from_float,
    int_literal,
    mul,
    paren,
    select,
    unary,
)


def constant(op: arith.ConstantOp) -> Expr:
    value, t = op.value, op.result.type
    if isinstance(value, IntegerAttr):
        v = value.value.data
        if isinstance(t, IntegerType) and t.width.data == 1:
            return Expr("true" if v else "false", PRIMARY, bool(v))
        return int_literal(v)
    if isinstance(value, FloatAttr):
        lit = float_literal(value.value.data, t)
        if is_narrow_float(t):  # a literal float; as_float() of it needs no conversion
            return Expr(from_float(lit, t).text, PRIMARY, lit.const)
        return lit
    raise PrinterError(f"arith.constant: unsupported value {value}")


_FLOAT_BINARY: dict[type[Operation], tuple[str, int]] = {
    arith.AddfOp: ("+", ADD),
    arith.SubfOp: ("-", ADD),
    arith.MulfOp: ("*", MUL),
    arith.DivfOp: ("/", MUL),
}
#: arith.maximumf/minimumf propagate a NaN operand (IEEE 754-2019 maximum); C's fmaxf/fminf
#: return the other operand instead (maxNum), which is arith.maxnumf/minnumf.
_NAN_PROPAGATING: dict[type[Operation], str] = {
    arith.MaximumfOp: "fmax",
    arith.MinimumfOp: "fmin",
}
_FLOAT_CALL2: dict[type[Operation], str] = {
    arith.MaxnumfOp: "fmax",
    arith.MinnumfOp: "fmin",
    math.PowFOp: "pow",
    math.Atan2Op: "atan2",
    math.CopySignOp: "copysign",
}
_FLOAT_CALL1: dict[type[Operation], str] = {
    math.ExpOp: "exp",
    math.Exp2Op: "exp2",
    math.ExpM1Op: "expm1",
    math.LogOp: "log",
    math.Log2Op: "log2",
    math.Log10Op: "log10",
    math.Log1pOp: "log1p",
    math.SqrtOp: "sqrt",
    math.RsqrtOp: "rsqrt",
    math.TanhOp: "tanh",
    math.ErfOp: "erf",
    math.SinOp: "sin",
    math.CosOp: "cos",
    math.TanOp: "tan",
    math.AtanOp: "atan",
    math.FloorOp: "floor",
    math.CeilOp: "ceil",
    math.RoundEvenOp: "rint",
    math.TruncOp: "trunc",
    math.AbsFOp: "fabs",
    math.SinhOp: "sinh",
    math.CoshOp: "cosh",
    math.AsinOp: "asin",
    math.AcosOp: "acos",
    math.AsinhOp: "asinh",
    math.AcoshOp: "acosh",
    math.AtanhOp: "atanh",
    math.CbrtOp: "cbrt",
    math.RoundOp: "round",
}
#: C functions the printer calls: SSA names must not shadow them.
C_FUNCTION_NAMES = frozenset(
    n + suffix
    for n in (*_FLOAT_CALL1.values(), *_FLOAT_CALL2.values(), *_NAN_PROPAGATING.values(), "fma")
    for suffix in ("", "f")
) | {"__half2float", "__bfloat162float", "__float2half_rn", "__float2bfloat16_rn"}
_INT_BINARY: dict[type[Operation], tuple[str, int]] = {
    arith.SubiOp: ("-", ADD),
    arith.DivSIOp: ("/", MUL),
    arith.RemSIOp: ("%", MUL),
    arith.AndIOp: ("&", BAND),
    arith.OrIOp: ("|", BOR),
    arith.XOrIOp: ("^", BXOR),
    arith.ShLIOp: ("<<", SHIFT),
    arith.ShRSIOp: (">>", SHIFT),
}
_UNSIGNED_BINARY: dict[type[Operation], tuple[str, int]] = {
    arith.DivUIOp: ("/", MUL),
    arith.RemUIOp: ("%", MUL),
    arith.ShRUIOp: (">>", SHIFT),
}
_INT_C_TYPES = ("signed char", "short", "int", "long long")
_CMP: dict[str, str] = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_NEGATED: dict[str, str] = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def float_fn(base: str, t: Attribute) -> str:
    return base if isinstance(t, Float64Type) else base + "f"


def _nan_propagating(base: str, t: Attribute, args: Sequence[Expr]) -> Expr:
    """`a != a || b != b ? a + b : fmaxf(a, b)`: NaN when either operand is (a + b is then
    NaN), the C library's max or min otherwise."""
    a, b = (as_float(x, t) for x in args)
    library = call(float_fn(base, t), a, b)
    tests = [compare("!=", x, x) for x in (a, b) if x.const is None or x.const != x.const]
    if not tests:
        return library
    either_nan = tests[0] if len(tests) == 1 else binary("||", LOR, *tests)
    return select(either_nan, binary("+", ADD, a, b), library)


def unsigned(ctype: str) -> str:
    return "unsigned long long" if ctype in ("long long", "unsigned long long") else "unsigned"


@dataclass
class ScalarContext:
    """What an arith/math translation needs from the printer."""

    index_type: str
    nonneg: Callable[[SSAValue], bool]


def scalar_expr(op: Operation, args: Sequence[Expr], ctx: ScalarContext) -> Expr:
    """The C expression computing the (single) result of an arith/math op."""
    if isinstance(op, arith.ConstantOp):
        return constant(op)
    rt = op.results[0].type
    ins = [o.type for o in op.operands]
    if type(op) in _FLOAT_BINARY:
        sym, prec = _FLOAT_BINARY[type(op)]
        return from_float(binary(sym, prec, as_float(args[0], rt), as_float(args[1], rt)), rt)
    if type(op) in _NAN_PROPAGATING:
        return from_float(_nan_propagating(_NAN_PROPAGATING[type(op)], rt, args), rt)
    if type(op) in _FLOAT_CALL2:
        fn = float_fn(_FLOAT_CALL2[type(op)], rt)
        return from_float(call(fn, as_float(args[0], rt), as_float(args[1], rt)), rt)
    if type(op) in _FLOAT_CALL1:
        return from_float(call(float_fn(_FLOAT_CALL1[type(op)], rt), as_float(args[0], rt)), rt)
    if isinstance(op, arith.NegfOp):
        return from_float(unary("-", as_float(args[0], rt)), rt)
    if isinstance(op, math.FmaOp):
        fargs = [as_float(a, rt) for a in args]
        return from_float(call(float_fn("fma", rt), *fargs), rt)
    if isinstance(op, arith.AddiOp):
        return add(args[0], args[1])
    if isinstance(op, arith.MuliOp):
        return mul(args[0], args[1])
    if isinstance(op, arith.SubiOp) and args[1].const == 0:
        return args[0]
    if type(op) in _INT_BINARY:
        sym, prec = _INT_BINARY[type(op)]
        return binary(sym, prec, args[0], args[1])
    if type(op) in _UNSIGNED_BINARY:
        sym, prec = _UNSIGNED_BINARY[type(op)]
        ct = c_type(rt, ctx.index_type)
        u = unsigned(ct)
        return cast(ct, binary(sym, prec, cast(u, args[0]), cast(u, args[1])))
    if isinstance(op, arith.FloorDivSIOp | arith.CeilDivSIOp):
        return _signed_division(op, args, ctx)
    if isinstance(op, arith.MaxSIOp | arith.MinSIOp):
        sym = ">" if isinstance(op, arith.MaxSIOp) else "<"
        return select(compare(sym, args[0], args[1]), args[0], args[1])
    if isinstance(op, math.AbsIOp):
        return select(compare("<", args[0], int_literal(0)), unary("-", args[0]), args[0])
    if isinstance(op, arith.SelectOp):
        return select(args[0], args[1], args[2])
    if isinstance(op, arith.CmpiOp):
        return _cmpi(op, args, ctx)
    if isinstance(op, arith.CmpfOp):
        return _cmpf(op, [as_float(a, t) for a, t in zip(args, ins, strict=True)])
    if isinstance(op, CAST_OPS):
        return _cast(args[0], ins[0], rt, ctx)
    raise PrinterError(f"no CUDA C translation for {op.name}")


def _signed_division(op: Operation, args: Sequence[Expr], ctx: ScalarContext) -> Expr:
    a, b = args
    if isinstance(a.const, int) and isinstance(b.const, int) and b.const:
        q = a.const // b.const if isinstance(op, arith.FloorDivSIOp) else -(-a.const // b.const)
        return int_literal(q)
    if b.const == 1:
        return a
    floor = isinstance(op, arith.FloorDivSIOp)
    if ctx.nonneg(op.operands[0]) and ctx.nonneg(op.operands[1]):
        return binary("/", MUL, a if floor else add(a, add(b, int_literal(-1))), b)
    # C rounds toward zero: correct by one when the remainder is nonzero and the exact
    # quotient is negative (floor) or positive (ceil).
    x, y = paren(a, UNARY), paren(b, UNARY)
    sign = "-" if floor else "+"
    if isinstance(b.const, int) and b.const > 0:  # the quotient's sign is the dividend's
        wrong_way = f"{x} < 0" if floor else f"{x} > 0"
    else:
        wrong_way = f"({x} < 0) {'!=' if floor else '=='} ({y} < 0)"
    return Expr(f"{x} / {y} {sign} ({x} % {y} != 0 && {wrong_way})", ADD)


def _cmpi(op: arith.CmpiOp, args: Sequence[Expr], ctx: ScalarContext) -> Expr:
    pred = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    a, b = args
    if pred.startswith("u"):
        u = unsigned(c_type(op.lhs.type, ctx.index_type))
        a, b = cast(u, a), cast(u, b)
    return compare(_CMP[pred.removeprefix("s").removeprefix("u")], a, b)


def _cmpf(op: arith.CmpfOp, args: Sequence[Expr]) -> Expr:
    pred = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
    a, b = args
    if pred in ("false", "true"):
        return Expr(pred, PRIMARY, pred == "true")
    if pred in ("ord", "uno"):
        sym, join = ("==", "&&") if pred == "ord" else ("!=", "||")
        prec = LAND if join == "&&" else LOR
        return Expr(f"{compare(sym, a, a).text} {join} {compare(sym, b, b).text}", prec)
    sym = _CMP[pred[1:]]
    if pred == "one":  # ordered and unequal: false on NaN, unlike C's !=
        return Expr(f"{compare('<', a, b).text} || {compare('>', a, b).text}", LOR)
    if pred == "une":
        return compare("!=", a, b)
    if pred == "ueq":
        return unary("!", Expr(f"{compare('<', a, b).text} || {compare('>', a, b).text}", LOR))
    if pred.startswith("u"):  # unordered: true on NaN = not the ordered opposite
        return unary("!", compare(_NEGATED[sym], a, b))
    return compare(sym, a, b)


def _cast(a: Expr, src: Attribute, dst: Attribute, ctx: ScalarContext) -> Expr:
    src_c, dst_c = c_type(src, ctx.index_type), c_type(dst, ctx.index_type)
    if is_narrow_float(src) or is_narrow_float(dst):
        value = as_float(a, src)
        if not isinstance(src, Float16Type | BFloat16Type | Float32Type):
            value = cast("float", value)  # integer or f64 source
        if is_narrow_float(dst):
            return from_float(value, dst)
        return value if dst_c == "float" else cast(dst_c, value)
    if src_c == dst_c:
        return a
    if isinstance(a.const, int) and not isinstance(a.const, bool) and dst_c in _INT_C_TYPES:
        return a
    return cast(dst_c, a)
