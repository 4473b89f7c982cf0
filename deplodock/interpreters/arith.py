"""numpy implementations of the `arith` and `math` ops, for every level's interpreter.

xDSL's own `arith` interpreter works on Python scalars one element at a time. Ours works on
numpy arrays, so the same scalar body runs once over a whole tensor (tensor level), over all
iterations of a vectorised free loop (loop level) or over all lanes of a block (tile, kernel).
A scalar is just a 0-d case. Results are cast to the op's result type, so f32 arithmetic
stays f32 exactly as it would on the GPU.

The op tables below are the whole story: an op's implementation is the numpy function next
to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls
from xdsl.ir import Operation

from deplodock.dialects.element_types import round_to_type
from deplodock.dialects.scalar_ops import CAST_OPS

NumpyFn = Callable[..., Any]


def _erf(x: Any) -> Any:
    """erf has no numpy ufunc; torch's is exact to the last ulp and vectorised."""
    array = np.asarray(x)
    return torch.special.erf(torch.from_numpy(np.ascontiguousarray(array))).numpy()


def _rsqrt(x: Any) -> Any:
    return np.reciprocal(np.sqrt(x))


def _floordiv(a: Any, b: Any) -> Any:
    return np.floor_divide(a, b)


def _ceildiv(a: Any, b: Any) -> Any:
    return -np.floor_divide(-np.asarray(a), b)


def _trunc_div(a: Any, b: Any) -> Any:
    """C-style division (rounds toward zero), as `arith.divsi` and CUDA `/` do."""
    a, b = np.asarray(a), np.asarray(b)
    quotient = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -quotient, quotient)


def _trunc_rem(a: Any, b: Any) -> Any:
    """C-style remainder (sign of the dividend), as `arith.remsi` and CUDA `%` do."""
    return np.asarray(a) - _trunc_div(a, b) * np.asarray(b)


def _maximumf(a: Any, b: Any) -> Any:
    """`arith.maximumf` propagates NaN, like `torch.maximum`."""
    return np.maximum(a, b)


def _minimumf(a: Any, b: Any) -> Any:
    return np.minimum(a, b)


#: numpy implementations of the two-operand ops (also how `backend/cost.py` evaluates index
#: arithmetic).
BINARY_OPS: dict[type[Operation], NumpyFn] = {
    arith.AddfOp: np.add,
    arith.SubfOp: np.subtract,
    arith.MulfOp: np.multiply,
    arith.DivfOp: np.divide,
    arith.MaximumfOp: _maximumf,
    arith.MinimumfOp: _minimumf,
    arith.MaxnumfOp: np.fmax,
    arith.MinnumfOp: np.fmin,
    arith.AddiOp: np.add,
    arith.SubiOp: np.subtract,
    arith.MuliOp: np.multiply,
    arith.DivSIOp: _trunc_div,
    arith.DivUIOp: np.floor_divide,
    arith.FloorDivSIOp: _floordiv,
    arith.CeilDivSIOp: _ceildiv,
    arith.CeilDivUIOp: _ceildiv,
    arith.RemSIOp: _trunc_rem,
    arith.RemUIOp: np.remainder,
    arith.MaxSIOp: np.maximum,
    arith.MinSIOp: np.minimum,
    arith.MaxUIOp: np.maximum,
    arith.MinUIOp: np.minimum,
    arith.AndIOp: np.bitwise_and,
    arith.OrIOp: np.bitwise_or,
    arith.XOrIOp: np.bitwise_xor,
    arith.ShLIOp: np.left_shift,
    arith.ShRSIOp: np.right_shift,
    arith.ShRUIOp: np.right_shift,
    math.PowFOp: np.power,
    math.Atan2Op: np.arctan2,
    math.CopySignOp: np.copysign,
}

UNARY_OPS: dict[type[Operation], NumpyFn] = {
    arith.NegfOp: np.negative,
    math.AbsFOp: np.abs,
    math.AbsIOp: np.abs,
    math.ExpOp: np.exp,
    math.Exp2Op: np.exp2,
    math.ExpM1Op: np.expm1,
    math.LogOp: np.log,
    math.Log2Op: np.log2,
    math.Log10Op: np.log10,
    math.Log1pOp: np.log1p,
    math.SqrtOp: np.sqrt,
    math.RsqrtOp: _rsqrt,
    math.TanhOp: np.tanh,
    math.ErfOp: _erf,
    math.SinOp: np.sin,
    math.CosOp: np.cos,
    math.TanOp: np.tan,
    math.AtanOp: np.arctan,
    math.FloorOp: np.floor,
    math.CeilOp: np.ceil,
    math.RoundEvenOp: np.rint,
    math.TruncOp: np.trunc,
    math.SinhOp: np.sinh,
    math.CoshOp: np.cosh,
    math.AsinOp: np.arcsin,
    math.AcosOp: np.arccos,
    math.AsinhOp: np.arcsinh,
    math.AcoshOp: np.arccosh,
    math.AtanhOp: np.arctanh,
}

#: `arith.cmpi` predicate -> numpy comparison.
CMPI_PREDICATES: dict[str, NumpyFn] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "slt": np.less,
    "sle": np.less_equal,
    "sgt": np.greater,
    "sge": np.greater_equal,
    "ult": np.less,
    "ule": np.less_equal,
    "ugt": np.greater,
    "uge": np.greater_equal,
}

_CMPF_ORDERED: dict[str, NumpyFn] = {
    "eq": np.equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "lt": np.less,
    "le": np.less_equal,
    "ne": np.not_equal,
}


def _result_of(op: Operation, value: Any) -> PythonValues:
    return (round_to_type(value, op.results[0].type),)


def _elementwise_impl(fn: NumpyFn) -> Callable[..., PythonValues]:
    def run(_: InterpreterFunctions, __: Interpreter, op: Operation, args: PythonValues):
        with np.errstate(all="ignore"):
            return _result_of(op, fn(*args))

    return run


def _cast_impl(_: InterpreterFunctions, __: Interpreter, op: Operation, args: PythonValues):
    return _result_of(op, args[0])


def _constant_impl(
    _: InterpreterFunctions, __: Interpreter, op: arith.ConstantOp, args: PythonValues
) -> PythonValues:
    value = op.value
    if isinstance(value, IntegerAttr | FloatAttr):
        return _result_of(op, value.value.data)
    raise NotImplementedError(f"arith.constant of {value} is not supported by the interpreter")


def _cmpi_impl(
    _: InterpreterFunctions, __: Interpreter, op: arith.CmpiOp, args: PythonValues
) -> PythonValues:
    predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    return (np.asarray(CMPI_PREDICATES[predicate](*args)),)


def _cmpf_impl(
    _: InterpreterFunctions, __: Interpreter, op: arith.CmpfOp, args: PythonValues
) -> PythonValues:
    """Ordered predicates are false on NaN, unordered ones true, as in LLVM."""
    predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
    lhs, rhs = np.asarray(args[0]), np.asarray(args[1])
    unordered = np.isnan(lhs) | np.isnan(rhs)
    if predicate in ("false", "true"):
        return (np.full(np.broadcast(lhs, rhs).shape, predicate == "true"),)
    if predicate == "ord":
        return (~unordered,)
    if predicate == "uno":
        return (unordered,)
    result = _CMPF_ORDERED[predicate[1:]](lhs, rhs)
    return (result | unordered if predicate[0] == "u" else result & ~unordered,)


def _select_impl(
    _: InterpreterFunctions, __: Interpreter, op: arith.SelectOp, args: PythonValues
) -> PythonValues:
    condition, if_true, if_false = args
    return _result_of(op, np.where(condition, if_true, if_false))


def _fma_impl(
    _: InterpreterFunctions, __: Interpreter, op: math.FmaOp, args: PythonValues
) -> PythonValues:
    a, b, c = (np.asarray(x, dtype=np.float64) for x in args)
    return _result_of(op, a * b + c)


def _build_functions() -> type[InterpreterFunctions]:
    methods: dict[str, Any] = {
        "run_constant": impl(arith.ConstantOp)(_constant_impl),
        "run_cmpi": impl(arith.CmpiOp)(_cmpi_impl),
        "run_cmpf": impl(arith.CmpfOp)(_cmpf_impl),
        "run_select": impl(arith.SelectOp)(_select_impl),
        "run_fma": impl(math.FmaOp)(_fma_impl),
    }
    for op_type, fn in (BINARY_OPS | UNARY_OPS).items():
        methods[f"run_{op_type.__name__}"] = impl(op_type)(_elementwise_impl(fn))
    for op_type in CAST_OPS:
        methods[f"run_{op_type.__name__}"] = impl(op_type)(_cast_impl)
    functions = type("ArithMathFunctions", (InterpreterFunctions,), methods)
    functions.__doc__ = "numpy-vectorised `arith` and `math` (see the module docstring)."
    return register_impls(functions)


ArithMathFunctions = _build_functions()
