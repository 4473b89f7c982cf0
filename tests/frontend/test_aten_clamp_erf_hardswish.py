"""The aten handlers of erf, the clamps (clamp, clamp_min, clamp_max, hardtanh, relu6) and
hardswish, and the `emits` bookkeeping of the handler registry.

Each case is captured, checked for the torch ops it maps to, and run with the torch
interpreter against PyTorch in float64 (integer results must match exactly).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from xdsl.builder import Builder
from xdsl.dialects.builtin import TensorType, f16, f32
from xdsl.ir import Block
from xdsl.rewriter import InsertPoint

from deplodock.dialects import torch as T
from deplodock.frontend.aten import Emitter, Registration, handled_op_types
from deplodock.frontend.capture import capture, capture_program, to_numpy
from tests.frontend.capturing import Fn, capture_and_compare


def _randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape))) * scale


def _ints(*shape: int) -> torch.Tensor:
    return torch.randint(-6, 7, shape, generator=torch.Generator().manual_seed(len(shape)))


def _torch_ops(ir) -> list[str]:
    return [op.name for op in ir.walk() if op.name.startswith("torch.")]


CASES = {
    "erf": (torch.erf, [_randn(3, 5)], ["torch.erf"]),
    "erf_of_int": (torch.erf, [_ints(7)], ["torch.cast", "torch.erf"]),
    "hardswish": (F.hardswish, [_randn(4, 8, scale=3.0)], ["torch.hardswish"]),
    "clamp": (lambda x: torch.clamp(x, -0.5, 0.5), [_randn(3, 5)], ["torch.clamp"]),
    "clamp_min_kw": (lambda x: torch.clamp(x, min=0.25), [_randn(3, 5)], ["torch.clamp"]),
    "clamp_max_kw": (lambda x: x.clamp(max=-0.25), [_randn(3, 5)], ["torch.clamp"]),
    "clamp_min": (lambda x: x.clamp_min(0.1), [_randn(3, 5)], ["torch.clamp"]),
    "clamp_max": (lambda x: x.clamp_max(0.1), [_randn(3, 5)], ["torch.clamp"]),
    "clamp_min_above_max": (lambda x: x.clamp(1.0, -1.0), [_randn(6)], ["torch.clamp"]),
    "clamp_int": (lambda i: i.clamp(-2, 3), [_ints(9)], ["torch.clamp"]),
    "clamp_int_float_bound": (
        lambda i: i.clamp(min=0.5),
        [_ints(9)],
        ["torch.cast", "torch.clamp"],
    ),
    "relu6": (F.relu6, [_randn(4, 8, scale=4.0)], ["torch.clamp"]),
    "hardtanh": (lambda x: F.hardtanh(x, -0.75, 0.25), [_randn(4, 8)], ["torch.clamp"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_op_imports_and_matches_pytorch(name, run_torch, rel_err):
    fn, inputs, expected_ops = CASES[name]
    ir = capture_and_compare(fn, inputs, run_torch, rel_err, tolerance=1e-6)
    assert _torch_ops(ir) == expected_ops


def test_clamp_bounds_are_properties():
    ir = capture(Fn(lambda x: x.clamp(-0.5, 2.0)), (_randn(3, 5),))
    assert "torch.clamp %xs {min = -5.000000e-01 : f64, max = 2.000000e+00 : f64}" in str(ir)
    ir = capture(Fn(lambda x: x.clamp_max(2.0)), (_randn(3, 5),))
    assert "{max = 2.000000e+00 : f64}" in str(ir) and "min =" not in str(ir)


def test_clamp_propagates_nan_like_pytorch(run_torch):
    x = torch.tensor([float("nan"), -2.0, 0.0, 2.0])
    for fn in (lambda x: x.clamp(-1.0, 1.0), lambda x: x.clamp(min=float("nan")), F.hardswish):
        ir, params = capture_program(Fn(fn), [x])
        (out,) = run_torch(ir, [to_numpy(x), *params])
        np.testing.assert_array_equal(out, fn(x).numpy())  # NaN == NaN for this assert


# --- the registry's `emits` ----------------------------------------------------------------


def _emitter() -> tuple[Emitter, Block]:
    block = Block(arg_types=[TensorType(f32, [4])])
    return Emitter(Builder(InsertPoint.at_end(block)), {}), block


def test_registration_checks_what_its_handler_builds():
    """A handler that builds an op it does not declare fails loudly, naming the op, so
    `handled_op_types` cannot claim more (or less) than the code does."""
    e, block = _emitter()

    def neg(e, a, out):
        return e.emit(T.NegOp(block.args[0]))

    assert Registration("test.neg", neg, frozenset({T.NegOp}))(e, {}, TensorType(f32, [4]))
    with pytest.raises(AssertionError, match=r"test\.neg built torch\.neg: add it to `emits`"):
        Registration("test.neg", neg, frozenset({T.ExpOp}))(e, {}, TensorType(f32, [4]))


def test_glue_ops_need_no_declaration():
    e, block = _emitter()

    def glue(e, a, out):
        e.cast(block.args[0], f16)  # dtype promotion: a torch.cast
        return e.scalar(1.0, f32)  # a Python scalar: a torch.constant

    Registration("test.glue", glue, frozenset())(e, {}, TensorType(f32, []))
    assert [type(op) for op in e.emitted] == [T.CastOp, T.ConstantOp]


def test_new_ops_are_handled():
    assert {T.ErfOp, T.ClampOp, T.HardswishOp} <= handled_op_types()
