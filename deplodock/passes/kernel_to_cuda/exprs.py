"""C expression trees, C types and literals: the building blocks of the CUDA printer.

An `Expr` is C text plus the precedence of its top operator, so operands are parenthesized
only where C needs it (float arithmetic keeps its IR association: `a + (b + c)` stays).
Integer constants fold (`0 * 2048 + k` prints as `k`), which keeps linearized indices short.
Which expression each `arith`/`math` op becomes is `scalar.py`'s business.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import Float16Type, Float32Type, Float64Type, IndexType
from xdsl.ir import Attribute

from deplodock.dialects.element_types import UnsupportedElementType, element_info, is_narrow_float

# C operator precedence (higher binds tighter).
PRIMARY, UNARY, MUL, ADD, SHIFT, REL, EQ, BAND, BXOR, BOR, LAND, LOR, COND = (
    16, 15, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3,
)  # fmt: skip


class PrinterError(Exception):
    """The op (or type) has no CUDA C translation."""


@dataclass(frozen=True)
class Expr:
    """C expression text; `const` is its value when it is a literal (for folding)."""

    text: str
    prec: int = PRIMARY
    const: int | float | bool | None = None


def name(text: str) -> Expr:
    return Expr(text, PRIMARY)


def paren(e: Expr, min_prec: int) -> str:
    return e.text if e.prec >= min_prec else f"({e.text})"


def binary(op: str, prec: int, a: Expr, b: Expr) -> Expr:
    """Left-associative binary operator: the right operand needs parens at equal precedence."""
    return Expr(f"{paren(a, prec)} {op} {paren(b, prec + 1)}", prec)


def call(fn: str, *args: Expr) -> Expr:
    return Expr(f"{fn}({', '.join(a.text for a in args)})", PRIMARY)


def cast(ctype: str, a: Expr) -> Expr:
    return Expr(f"({ctype}){paren(a, UNARY)}", UNARY)


def unary(op: str, a: Expr) -> Expr:
    """`op a`; a sign before a signed operand gets parentheses, since `--x` (or `- -1.0f`
    written without the space) is C's decrement, not a double negation."""
    inner = paren(a, UNARY)
    if op in ("-", "+") and inner.startswith(("-", "+")):
        inner = f"({inner})"
    return Expr(f"{op}{inner}", UNARY)


def select(c: Expr, a: Expr, b: Expr) -> Expr:
    return Expr(f"{paren(c, LOR)} ? {paren(a, COND + 1)} : {paren(b, COND + 1)}", COND)


_CMP_PREC: dict[str, int] = {"==": EQ, "!=": EQ, "<": REL, "<=": REL, ">": REL, ">=": REL}


def compare(op: str, a: Expr, b: Expr) -> Expr:
    return binary(op, _CMP_PREC[op], a, b)


# ---- types ------------------------------------------------------------------------------


def c_type(t: Attribute, index_type: str = "int") -> str:
    """The C type of a scalar: an `index` is the kernel's index type (`int`, or `long long`
    when some extent needs 64 bits), every other type its element-type table row."""
    if isinstance(t, IndexType):
        return index_type
    return element_c_type(t)


def element_c_type(t: Attribute) -> str:
    """C type of a buffer element (`index` buffers hold 64-bit integers, as numpy int64)."""
    try:
        return element_info(t).c_type
    except UnsupportedElementType:
        raise PrinterError(f"no CUDA C type for {t}") from None


def int_literal(v: int) -> Expr:
    if v == -(2**63):  # `9223372036854775808` alone does not fit any signed C type
        return Expr("(-9223372036854775807LL - 1)", PRIMARY, v)
    if not -(2**31) <= v < 2**31:
        return Expr(f"{v}LL", PRIMARY if v >= 0 else UNARY, v)
    return Expr(str(v), PRIMARY if v >= 0 else UNARY, v)


def float_literal(v: float, t: Attribute) -> Expr:
    """A literal that C parses to exactly the value the interpreters compute with."""
    if isinstance(t, Float64Type):
        x, suffix, digits = float(v), "", 17
    else:
        x, suffix, digits = float(np.float32(v)), "f", 9
    if np.isnan(x):
        return Expr("NAN", PRIMARY, x)
    if np.isinf(x):
        return Expr("INFINITY" if x > 0 else "-INFINITY", PRIMARY if x > 0 else UNARY, x)
    text = f"{x:.{digits}g}"
    if not any(ch in text for ch in ".e"):
        text += ".0"
    return Expr(text + suffix, UNARY if text.startswith("-") else PRIMARY, x)


def as_float(e: Expr, t: Attribute) -> Expr:
    """The value of an f16/bf16 expression as a C `float` (identity for other types)."""
    if not is_narrow_float(t):
        return e
    if isinstance(e.const, float):
        return float_literal(e.const, Float32Type())
    fn = "__half2float" if isinstance(t, Float16Type) else "__bfloat162float"
    return call(fn, e)


def from_float(e: Expr, t: Attribute) -> Expr:
    """A C `float` rounded to an f16/bf16 result type (identity for other types)."""
    if not is_narrow_float(t):
        return e
    return call("__float2half_rn" if isinstance(t, Float16Type) else "__float2bfloat16_rn", e)


# ---- folding integer arithmetic ----------------------------------------------------------


def add(a: Expr, b: Expr) -> Expr:
    if isinstance(a.const, int) and isinstance(b.const, int):
        return int_literal(a.const + b.const)
    if a.const == 0 and not isinstance(a.const, float):
        return b
    if b.const == 0 and not isinstance(b.const, float):
        return a
    return binary("+", ADD, a, b)


def mul(a: Expr, b: Expr) -> Expr:
    if isinstance(a.const, int) and isinstance(b.const, int):
        return int_literal(a.const * b.const)
    for x, y in ((a, b), (b, a)):
        if isinstance(x.const, int) and not isinstance(x.const, bool):
            if x.const == 0:
                return int_literal(0)
            if x.const == 1:
                return y
    return binary("*", MUL, a, b)


def linear_index(indices: Sequence[Expr], shape: Sequence[int]) -> Expr:
    """Row-major offset of `indices` in a static `shape`: `i0 * s0 + i1 * s1 + ...`."""
    total = int_literal(0)
    stride = 1
    terms: list[Expr] = []
    for idx, dim in zip(reversed(indices), reversed(shape), strict=True):
        terms.append(mul(idx, int_literal(stride)))
        stride *= dim
    for term in reversed(terms):
        total = add(total, term)
    return total
