"""CPU semantics of the `tensor` dialect on whole numpy arrays.

`tensor.elementwise` runs its scalar body once, with the input arrays as the block
arguments: the `arith`/`math` implementations are numpy-vectorised, so one pass over the
body computes every element; `tensor.index d` is then the coordinate grid of dim `d` (an
`arange` shaped to broadcast along that axis). `tensor.reduce` is a numpy reduction with
`keepdims` and `tensor.scan` the same ufunc's `accumulate`; `tensor.recurrence` steps its
cell's numpy form (`CellKind.run`); `tensor.index_map` evaluates its
affine maps over the output coordinate grid and gathers, and `tensor.gather` is `np.take`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.utils.exceptions import InterpretationError

from deplodock.dialects.element_types import is_narrow_float, numpy_dtype, round_to_type
from deplodock.dialects.tensor import (
    ElementwiseOp,
    GatherOp,
    IndexMapOp,
    IndexOp,
    RecurrenceOp,
    ReduceOp,
    ScanOp,
    YieldOp,
)
from deplodock.interpreters.affine import eval_affine_map
from deplodock.interpreters.common import terminator_impl


def as_tensor(value: Any, tensor_type: TensorType) -> np.ndarray:
    """`value` broadcast to the tensor's shape, as a fresh array of its element type."""
    shape = tuple(tensor_type.get_shape())
    elt = tensor_type.get_element_type()
    array = np.asarray(round_to_type(value, elt))
    return np.array(np.broadcast_to(array, shape), dtype=numpy_dtype(elt), copy=True)


@register_impls
class TensorFunctions(InterpreterFunctions):
    """Interpreter implementations of `tensor.elementwise`, `tensor.reduce`, `tensor.index_map`."""

    @impl(ElementwiseOp)
    def run_elementwise(
        self, interpreter: Interpreter, op: ElementwiseOp, args: PythonValues
    ) -> PythonValues:
        results = interpreter.run_ssacfg_region(op.body, args, "tensor.elementwise")
        return (as_tensor(results[0], op.result.type),)

    run_yield = terminator_impl(YieldOp)

    @impl(IndexOp)
    def run_index(self, interpreter: Interpreter, op: IndexOp, args: PythonValues) -> PythonValues:
        parent = op.parent_op()
        assert isinstance(parent, ElementwiseOp)
        shape = parent.result.type.get_shape()
        dim = op.dim_value
        grid = [n if d == dim else 1 for d, n in enumerate(shape)]
        return (np.arange(shape[dim], dtype=np.int64).reshape(grid),)

    @impl(GatherOp)
    def run_gather(
        self, interpreter: Interpreter, op: GatherOp, args: PythonValues
    ) -> PythonValues:
        source, indices = (np.asarray(a) for a in args)
        size = source.shape[op.dim_value]
        if indices.size and (indices.min() < 0 or indices.max() >= size):
            raise InterpretationError(
                f"tensor.gather: index out of range [0, {size}) "
                f"(min {indices.min()}, max {indices.max()})"
            )
        return (as_tensor(np.take(source, indices, axis=op.dim_value), op.result.type),)

    @impl(ReduceOp)
    def run_reduce(
        self, interpreter: Interpreter, op: ReduceOp, args: PythonValues
    ) -> PythonValues:
        (array,) = args
        array = np.asarray(array)
        elt = op.result.type.get_element_type()
        if is_narrow_float(elt):
            array = array.astype(np.float32)  # accumulate narrow floats in f32, as kernels do
        dims = op.reduce_dims
        out = op.reduce_kind.numpy_ufunc.reduce(array, axis=dims, keepdims=True) if dims else array
        return (as_tensor(out, op.result.type),)

    @impl(ScanOp)
    def run_scan(self, interpreter: Interpreter, op: ScanOp, args: PythonValues) -> PythonValues:
        array = np.asarray(args[0])
        if is_narrow_float(op.result.type.get_element_type()):
            array = array.astype(np.float32)  # the running value is f32, as in the kernels
        out = op.scan_kind.numpy_ufunc.accumulate(array, axis=op.scan_dim)
        return (as_tensor(out, op.result.type),)

    @impl(RecurrenceOp)
    def run_recurrence(
        self, interpreter: Interpreter, op: RecurrenceOp, args: PythonValues
    ) -> PythonValues:
        arrays = [np.asarray(a) for a in args]
        if is_narrow_float(op.result.type.get_element_type()):
            arrays = [a.astype(np.float32) for a in arrays]  # f32 state, as in the kernels
        c0 = arrays[4] if len(arrays) == 5 else None
        out = op.cell_kind.run(*arrays[:4], c0, op.is_reverse)
        return (as_tensor(out, op.result.type),)

    @impl(IndexMapOp)
    def run_index_map(
        self, interpreter: Interpreter, op: IndexMapOp, args: PythonValues
    ) -> PythonValues:
        result_type = op.result.type
        out = np.empty(tuple(result_type.get_shape()), dtype=numpy_dtype(result_type.element_type))
        for array, amap, box in zip(args, op.affine_maps, op.input_regions(), strict=True):
            # open grids: coordinate k varies along axis k only, and broadcasts
            grid = np.ogrid[tuple(slice(lo, hi + 1) for lo, hi in box)] if box else []
            coords = eval_affine_map(amap, list(grid))
            region = tuple(slice(lo, hi + 1) for lo, hi in box)
            gathered = np.asarray(array)[tuple(np.asarray(c) for c in coords)]
            out[region] = np.broadcast_to(gathered, out[region].shape)
        return (out,)
