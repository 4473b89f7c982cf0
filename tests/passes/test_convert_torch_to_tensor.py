# ruff: noqa: E501  (IR text is kept on one line per op, as it prints)
"""convert-torch-to-tensor: every torch op decomposes, and the tensor program computes what
PyTorch computes (float64 reference on the same random f32 inputs, rel err <= 1e-5)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import make_context
from deplodock.dialects import torch as torch_d
from deplodock.passes.convert_torch_to_tensor import ConvertTorchToTensorPass
from tests.helpers import parse, rel_err, run

Shape = tuple[int, ...]


def ttype(shape: Shape, elt: str = "f32") -> str:
    return "tensor<" + "".join(f"{s}x" for s in shape) + f"{elt}>"


#: numpy dtype of each element type the cases use (bf16 is carried as float32).
NUMPY = {"f32": np.float32, "bf16": np.float32, "i64": np.int64, "i32": np.int32, "i1": np.bool_}


@dataclass
class Case:
    """One torch op on random inputs; `op` is the text after `%r = ` (operands %a0, %a1...)."""

    name: str
    op: str
    inputs: Sequence[Shape]
    result: Shape
    ref: Callable[..., torch.Tensor]
    positive: bool = False
    prelude: list[str] = field(default_factory=list)
    types: Sequence[str] = ()
    """Element type of each input (default f32); integers are drawn in `[0, int_high)`."""
    result_type: str = "f32"
    int_high: int = 8

    def input_types(self) -> list[str]:
        return list(self.types) or ["f32"] * len(self.inputs)

    def module_text(self) -> str:
        pairs = zip(self.inputs, self.input_types(), strict=True)
        args = ", ".join(f"%a{i}: {ttype(s, t)}" for i, (s, t) in enumerate(pairs))
        out = ttype(self.result, self.result_type)
        lines = [f"func.func @forward({args}) -> {out} {{", *self.prelude]
        lines.append(f"  %r = {self.op}")
        lines.append(f"  func.return %r : {out}")
        lines.append("}")
        return "\n".join(lines)


def typed(
    name: str,
    op: str,
    inputs: Sequence[tuple[Shape, str]],
    result: tuple[Shape, str],
    ref: Callable[..., torch.Tensor],
    **kw,
) -> Case:
    """A case whose operands are not all f32: `op` is the op text after `%r = `."""
    shapes, types = [s for s, _ in inputs], [t for _, t in inputs]
    return Case(name, op, shapes, result[0], ref, types=types, result_type=result[1], **kw)


def _sig(inputs: Sequence[tuple[Shape, str]], result: tuple[Shape, str]) -> str:
    return f"({', '.join(ttype(s, t) for s, t in inputs)}) -> {ttype(*result)}"


def _recurrence(cell: str, reverse: bool = False) -> Callable[..., torch.Tensor]:
    """PyTorch's own cell (`torch.lstm_cell`, ...) stepped over precomputed gates: the input
    weight is the identity, so the cell's input projection is the gates themselves."""
    step = {"lstm": torch.lstm_cell, "gru": torch.gru_cell, "rnn_tanh": torch.rnn_tanh_cell}[cell]

    def ref(gates, weight, bias, h0, c0=None):
        eye = torch.eye(gates.shape[-1], dtype=gates.dtype)
        state = (h0, c0) if c0 is not None else h0
        out = [None] * gates.shape[0]
        for t in reversed(range(gates.shape[0])) if reverse else range(gates.shape[0]):
            state = step(gates[t], state, eye, weight, None, bias)
            out[t] = torch.cat(state, -1) if isinstance(state, tuple) else state
        return torch.stack(out)

    return ref


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask=None, **kw) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)


def unary(name: str, ref: Callable[..., torch.Tensor], attrs: str = "", **kw) -> Case:
    t = ttype((3, 5))
    return Case(name, f"torch.{name} %a0 {attrs} : ({t}) -> {t}", [(3, 5)], (3, 5), ref, **kw)


def binary(name: str, ref: Callable[..., torch.Tensor], a: Shape, b: Shape, out: Shape) -> Case:
    op = f"torch.{name} %a0, %a1 : ({ttype(a)}, {ttype(b)}) -> {ttype(out)}"
    return Case(f"{name}_{len(a)}_{len(b)}", op, [a, b], out, ref)


def red(name: str, dims: Sequence[int], keep: bool, ref: Callable[..., torch.Tensor]) -> Case:
    shape = (2, 3, 4)
    out = tuple(1 if i in dims else s for i, s in enumerate(shape) if keep or i not in dims)
    attrs = f"{{dims = array<i64: {', '.join(map(str, dims))}>, keepdim = {str(keep).lower()}}}"
    op = f"torch.{name} %a0 {attrs} : ({ttype(shape)}) -> {ttype(out)}"
    return Case(f"{name}_{'_'.join(map(str, dims))}_{keep}", op, [shape], out, ref)


def layout(name: str, attrs: str, src: Shape, dst: Shape, ref: Callable[..., torch.Tensor]) -> Case:
    op = f"torch.{name} %a0 {attrs} : ({ttype(src)}) -> {ttype(dst)}"
    return Case(f"{name}_{'x'.join(map(str, src))}_{'x'.join(map(str, dst))}", op, [src], dst, ref)


def _const(value: float, shape: Shape = ()) -> str:
    return f"  %c = torch.constant {{value = {value} : f64}} : () -> {ttype(shape)}"


NORM = "normalized_shape = array<i64: 8>, eps = 1.0e-05 : f64"
X3, W8 = ttype((2, 3, 8)), ttype((8,))

CASES: list[Case] = [
    # constants and binary ops (broadcasting both ways, scalar constants folded)
    Case(
        "constant",
        f"torch.constant {{value = 1.5 : f64}} : () -> {ttype((2, 3))}",
        [],
        (2, 3),
        lambda: torch.full((2, 3), 1.5, dtype=torch.float64),
    ),
    binary("add", torch.add, (4, 8), (8,), (4, 8)),
    binary("add", torch.add, (4, 1), (1, 8), (4, 8)),
    binary("sub", torch.sub, (2, 3, 4), (3, 1), (2, 3, 4)),
    binary("mul", torch.mul, (), (3, 4), (3, 4)),
    binary("div", torch.div, (3, 4), (3, 4), (3, 4)),
    Case(
        "mul_const",
        f"torch.mul %a0, %c : ({ttype((3, 4))}, tensor<f32>) -> {ttype((3, 4))}",
        [(3, 4)],
        (3, 4),
        lambda a: a * 0.125,
        prelude=[_const(0.125)],
    ),
    Case(
        "sub_const_lhs",
        f"torch.sub %c, %a0 : (tensor<f32>, {ttype((3, 4))}) -> {ttype((3, 4))}",
        [(3, 4)],
        (3, 4),
        lambda a: 1.0 - a,
        prelude=[_const(1.0)],
    ),
    Case(
        "add_splat",
        f"torch.add %a0, %c : ({ttype((3,))}, {ttype((2, 3))}) -> {ttype((2, 3))}",
        [(3,)],
        (2, 3),
        lambda a: a + torch.full((2, 3), 3.0, dtype=a.dtype),
        prelude=[_const(3.0, (2, 3))],
    ),
    # unary ops
    unary("neg", torch.neg),
    unary("exp", torch.exp),
    unary("log", torch.log, positive=True),
    unary("sqrt", torch.sqrt, positive=True),
    unary("rsqrt", torch.rsqrt, positive=True),
    unary("abs", torch.abs),
    unary("relu", torch.relu),
    unary("sigmoid", torch.sigmoid),
    unary("tanh", torch.tanh),
    unary("silu", F.silu),
    unary("gelu", F.gelu, '{approximate = "none"}'),
    unary("gelu", lambda x: F.gelu(x, approximate="tanh"), '{approximate = "tanh"}'),
    unary("erf", torch.erf),
    unary("hardswish", F.hardswish),
    unary(
        "clamp",
        lambda x: x.clamp(-0.5, 0.5),
        "{min = -5.000000e-01 : f64, max = 5.000000e-01 : f64}",
    ),
    unary("clamp", lambda x: x.clamp(max=0.25), "{max = 2.500000e-01 : f64}"),
    unary("hardsigmoid", F.hardsigmoid),
    unary("mish", F.mish),
    unary("log_sigmoid", F.logsigmoid),
    unary("leaky_relu", lambda x: F.leaky_relu(x, 0.3), "{negative_slope = 3.0e-01 : f64}"),
    unary(
        "elu",
        lambda x: F.celu(x, 0.5),
        "{alpha = 5.0e-01 : f64, scale = 1.0 : f64, input_scale = 2.0 : f64}",
    ),
    unary(
        "softplus",
        lambda x: F.softplus(x, 2.0, 1.0),
        "{beta = 2.0 : f64, threshold = 1.0 : f64}",
    ),
    unary("triu", lambda x: torch.triu(x, 1), "{diagonal = 1 : i64}"),
    unary("tril", lambda x: torch.tril(x, -1), "{diagonal = -1 : i64}"),
    Case(
        "window",
        "torch.window %a0 {kernel = array<i64: 3, 2>, stride = array<i64: 2, 1>, dilation = array<i64: 1, 2>, "
        "low = array<i64: 1, 0>, high = array<i64: 2, 1>, pad_value = -2.0 : f64} : "
        f"({ttype((2, 5, 4))}) -> {ttype((2, 3, 3, 3, 2))}",
        [(2, 5, 4)],
        (2, 3, 3, 3, 2),
        lambda x: F.pad(x, (0, 1, 1, 2), value=-2.0).unfold(1, 3, 2).unfold(2, 3, 1)[..., ::2],
    ),
    binary("maximum", torch.maximum, (3, 4), (4,), (3, 4)),
    binary("minimum", torch.minimum, (3, 1), (1, 4), (3, 4)),
    *[
        unary("pow", lambda x, e=e: x**e, f"{{exponent = {e} : f64}}", positive=e % 1 != 0)
        for e in (2.0, 3.0, 0.5, -0.5, -1.0, 1.7, 0.0, 1.0)
    ],
    # reductions
    red("sum", [1], False, lambda x: x.sum(1)),
    red("sum", [0, 2], True, lambda x: x.sum((0, 2), keepdim=True)),
    red("mean", [2], False, lambda x: x.mean(2)),
    red("mean", [0, 1, 2], False, lambda x: x.mean()),
    red("amax", [1], True, lambda x: x.amax(1, keepdim=True)),
    red("amax", [0, 2], False, lambda x: x.amax((0, 2))),
    red("amin", [1], True, lambda x: x.amin(1, keepdim=True)),
    red("amin", [0, 1, 2], False, lambda x: x.amin()),
    typed(
        "argmax",
        f"torch.argmax %a0 {{dim = 1 : i64, keepdim = false}} : {_sig([((2, 5, 3), 'f32')], ((2, 3), 'i64'))}",
        [((2, 5, 3), "f32")],
        ((2, 3), "i64"),
        lambda x: x.argmax(1),
    ),
    typed(
        "argmin_keepdim",
        f"torch.argmin %a0 {{dim = 2 : i64, keepdim = true}} : {_sig([((2, 5, 3), 'f32')], ((2, 5, 1), 'i64'))}",
        [((2, 5, 3), "f32")],
        ((2, 5, 1), "i64"),
        lambda x: x.argmin(2, keepdim=True),
    ),
    typed(
        "argmax_int_ties",
        f"torch.argmax %a0 {{dim = 0 : i64, keepdim = false}} : {_sig([((9, 4), 'i64')], ((4,), 'i64'))}",
        [((9, 4), "i64")],
        ((4,), "i64"),
        lambda x: x.argmax(0),
        int_high=3,
    ),
    Case(
        "softmax",
        f"torch.softmax %a0 {{dim = 2 : i64}} : ({X3}) -> {X3}",
        [(2, 3, 8)],
        (2, 3, 8),
        lambda x: torch.softmax(x, 2),
    ),
    Case(
        "softmax_0",
        f"torch.softmax %a0 {{dim = 0 : i64}} : ({X3}) -> {X3}",
        [(2, 3, 8)],
        (2, 3, 8),
        lambda x: torch.softmax(x, 0),
    ),
    Case(
        "log_softmax",
        f"torch.log_softmax %a0 {{dim = 1 : i64}} : ({X3}) -> {X3}",
        [(2, 3, 8)],
        (2, 3, 8),
        lambda x: torch.log_softmax(x, 1),
    ),
    # normalizations
    Case(
        "rms_norm",
        f"torch.rms_norm %a0, %a1 {{{NORM}}} : ({X3}, {W8}) -> {X3}",
        [(2, 3, 8), (8,)],
        (2, 3, 8),
        lambda x, w: F.rms_norm(x, (8,), w, 1e-5),
    ),
    Case(
        "rms_norm_noweight",
        f"torch.rms_norm %a0 {{{NORM}}} : ({X3}) -> {X3}",
        [(2, 3, 8)],
        (2, 3, 8),
        lambda x: F.rms_norm(x, (8,), None, 1e-5),
    ),
    Case(
        "rms_norm_2d",
        f"torch.rms_norm %a0, %a1 {{normalized_shape = array<i64: 3, 8>, eps = 1.0e-06 : f64}}"
        f" : ({X3}, {ttype((3, 8))}) -> {X3}",
        [(2, 3, 8), (3, 8)],
        (2, 3, 8),
        lambda x, w: F.rms_norm(x, (3, 8), w, 1e-6),
    ),
    Case(
        "layer_norm",
        f"torch.layer_norm %a0, %a1, %a2 {{{NORM}}} : ({X3}, {W8}, {W8}) -> {X3}",
        [(2, 3, 8), (8,), (8,)],
        (2, 3, 8),
        lambda x, w, b: F.layer_norm(x, (8,), w, b, 1e-5),
    ),
    Case(
        "layer_norm_plain",
        f"torch.layer_norm %a0 {{{NORM}}} : ({X3}) -> {X3}",
        [(2, 3, 8)],
        (2, 3, 8),
        lambda x: F.layer_norm(x, (8,), None, None, 1e-5),
    ),
    # contractions
    binary("matmul", torch.matmul, (3, 5), (5, 4), (3, 4)),
    binary("matmul", torch.matmul, (2, 3, 5), (5, 4), (2, 3, 4)),
    binary("matmul", torch.matmul, (2, 1, 3, 5), (4, 5, 2), (2, 4, 3, 2)),
    binary("matmul", torch.matmul, (5,), (5,), ()),
    binary("matmul", torch.matmul, (5,), (2, 5, 3), (2, 3)),
    binary("matmul", torch.matmul, (2, 3, 5), (5,), (2, 3)),
    binary("bmm", torch.bmm, (2, 3, 5), (2, 5, 4), (2, 3, 4)),
    Case(
        "linear",
        f"torch.linear %a0, %a1, %a2 : ({X3}, {ttype((4, 8))}, {ttype((4,))}) -> "
        f"{ttype((2, 3, 4))}",
        [(2, 3, 8), (4, 8), (4,)],
        (2, 3, 4),
        F.linear,
    ),
    Case(
        "linear_nobias",
        f"torch.linear %a0, %a1 : ({ttype((8,))}, {ttype((4, 8))}) -> {ttype((4,))}",
        [(8,), (4, 8)],
        (4,),
        F.linear,
    ),
    Case(
        "matmul_relu",
        f"torch.relu %m : ({ttype((3, 4))}) -> {ttype((3, 4))}",
        [(3, 5), (5, 4)],
        (3, 4),
        lambda a, b: torch.relu(a @ b),
        prelude=[
            f"  %m = torch.matmul %a0, %a1 : ({ttype((3, 5))}, {ttype((5, 4))}) -> {ttype((3, 4))}"
        ],
    ),
    # layout
    layout(
        "transpose",
        "{dim0 = 0 : i64, dim1 = 2 : i64}",
        (2, 3, 4),
        (4, 3, 2),
        lambda x: x.transpose(0, 2),
    ),
    layout(
        "permute",
        "{dims = array<i64: 1, 2, 0>}",
        (2, 3, 4),
        (3, 4, 2),
        lambda x: x.permute(1, 2, 0),
    ),
    layout("reshape", "", (2, 3, 4), (6, 4), lambda x: x.reshape(6, 4)),
    layout("reshape", "", (2, 3, 4), (4, 6), lambda x: x.reshape(4, 6)),
    layout("reshape", "", (2, 3, 4), (24,), lambda x: x.reshape(24)),
    layout("reshape", "", (6, 4), (2, 1, 3, 4, 1), lambda x: x.reshape(2, 1, 3, 4, 1)),
    layout("reshape", "", (1, 5, 1), (5,), lambda x: x.reshape(5)),
    layout("reshape", "", (1, 1), (), lambda x: x.reshape(())),
    layout("reshape", "", (), (1, 1), lambda x: x.reshape(1, 1)),
    layout("unsqueeze", "{dim = 1 : i64}", (3, 4), (3, 1, 4), lambda x: x.unsqueeze(1)),
    layout("unsqueeze", "{dim = 2 : i64}", (3, 4), (3, 4, 1), lambda x: x.unsqueeze(2)),
    layout("expand", "", (3, 1), (2, 3, 4), lambda x: x.expand(2, 3, 4)),
    layout(
        "slice",
        "{dim = 1 : i64, start = 1 : i64, end = 7 : i64, step = 2 : i64}",
        (3, 8),
        (3, 3),
        lambda x: x[:, 1:7:2],
    ),
    layout(
        "slice",
        "{dim = 0 : i64, start = 2 : i64, end = 5 : i64, step = 1 : i64}",
        (6, 2),
        (3, 2),
        lambda x: x[2:5],
    ),
    Case(
        "cat",
        f"torch.cat %a0, %a1, %a2 {{dim = 1 : i64}} : ({ttype((2, 3))}, {ttype((2, 1))}, "
        f"{ttype((2, 4))}) -> {ttype((2, 8))}",
        [(2, 3), (2, 1), (2, 4)],
        (2, 8),
        lambda a, b, c: torch.cat([a, b, c], 1),
    ),
    Case(
        "cat_single",
        f"torch.cat %a0 {{dim = 0 : i64}} : ({ttype((2, 3))}) -> {ttype((2, 3))}",
        [(2, 3)],
        (2, 3),
        lambda a: torch.cat([a], 0),
    ),
    # trigonometry, comparisons, logic, where
    unary("cos", torch.cos),
    unary("sin", torch.sin),
    *[
        typed(
            f"{name}_{elt}",
            f"torch.{name} %a0, %a1 : {_sig([((3, 4), elt), ((4,), elt)], ((3, 4), 'i1'))}",
            [((3, 4), elt), ((4,), elt)],
            ((3, 4), "i1"),
            getattr(torch, name),
            int_high=3,
        )
        for name in ("eq", "ne", "lt", "le", "gt", "ge")
        for elt in ("f32", "i64", "i1")
    ],
    *[
        typed(
            f"logical_{name}",
            f"torch.logical_{name} %a0, %a1 : {_sig([((3, 4), 'i1'), ((3, 1), 'i1')], ((3, 4), 'i1'))}",
            [((3, 4), "i1"), ((3, 1), "i1")],
            ((3, 4), "i1"),
            getattr(torch, f"logical_{name}"),
        )
        for name in ("and", "or")
    ],
    typed(
        "logical_not",
        f"torch.logical_not %a0 : {_sig([((3, 4), 'i1')], ((3, 4), 'i1'))}",
        [((3, 4), "i1")],
        ((3, 4), "i1"),
        torch.logical_not,
    ),
    typed(
        "where",
        f"torch.where %a0, %a1, %a2 : {_sig([((3, 1), 'i1'), ((3, 4), 'f32'), ((4,), 'f32')], ((3, 4), 'f32'))}",
        [((3, 1), "i1"), ((3, 4), "f32"), ((4,), "f32")],
        ((3, 4), "f32"),
        torch.where,
    ),
    typed(
        "where_splat",
        f"torch.where %a0, %c, %a1 : (tensor<3x4xi1>, tensor<f32>, tensor<3x4xf32>) -> {ttype((3, 4))}",
        [((3, 4), "i1"), ((3, 4), "f32")],
        ((3, 4), "f32"),
        lambda m, x: x.masked_fill(m, -1.5),
        prelude=[_const(-1.5)],
    ),
    # casts and generated tensors
    *[
        typed(
            f"cast_{src}_{dst}",
            f"torch.cast %a0 : {_sig([((3, 4), src)], ((3, 4), dst))}",
            [((3, 4), src)],
            ((3, 4), dst),
            lambda x, dst=dst: x.to(
                {
                    "f32": torch.float64,
                    "bf16": torch.bfloat16,
                    "i64": torch.int64,
                    "i32": torch.int32,
                    "i1": torch.bool,
                }[dst]
            ),
        )
        for src, dst in [
            ("f32", "bf16"),
            ("bf16", "f32"),
            ("f32", "i64"),
            ("f32", "i1"),
            ("i64", "f32"),
            ("i1", "i64"),
            ("i1", "f32"),
            ("i64", "i32"),
            ("i32", "i64"),
        ]
    ],
    typed(
        "arange_i64",
        f"torch.arange {{start = 3.0 : f64, step = 2.0 : f64}} : () -> {ttype((7,), 'i64')}",
        [],
        ((7,), "i64"),
        lambda: torch.arange(3, 17, 2),
    ),
    typed(
        "arange_f32",
        f"torch.arange {{start = -1.0 : f64, step = 0.25 : f64}} : () -> {ttype((9,))}",
        [],
        ((9,), "f32"),
        lambda: torch.arange(-1.0, 1.25, 0.25, dtype=torch.float64),
    ),
    Case(
        "bool_constant",
        f"torch.constant {{value = 1.0 : f64}} : () -> {ttype((2, 3), 'i1')}",
        [],
        (2, 3),
        lambda: torch.ones(2, 3, dtype=torch.bool),
        result_type="i1",
    ),
    # float math (issue 42)
    Case(
        "acos",
        "torch.acos %t : (tensor<3x5xf32>) -> tensor<3x5xf32>",
        [(3, 5)],
        (3, 5),
        lambda x: torch.acos(torch.tanh(x)),
        prelude=["  %t = torch.tanh %a0 : (tensor<3x5xf32>) -> tensor<3x5xf32>"],
    ),
    Case(
        "asin",
        "torch.asin %t : (tensor<3x5xf32>) -> tensor<3x5xf32>",
        [(3, 5)],
        (3, 5),
        lambda x: torch.asin(torch.tanh(x)),
        prelude=["  %t = torch.tanh %a0 : (tensor<3x5xf32>) -> tensor<3x5xf32>"],
    ),
    Case(
        "atanh",
        "torch.atanh %t : (tensor<3x5xf32>) -> tensor<3x5xf32>",
        [(3, 5)],
        (3, 5),
        lambda x: torch.atanh(torch.tanh(x)),
        prelude=["  %t = torch.tanh %a0 : (tensor<3x5xf32>) -> tensor<3x5xf32>"],
    ),
    Case(
        "acosh",
        "torch.acosh %t : (tensor<3x5xf32>) -> tensor<3x5xf32>",
        [(3, 5)],
        (3, 5),
        lambda x: torch.acosh(torch.cosh(x)),
        prelude=["  %t = torch.cosh %a0 : (tensor<3x5xf32>) -> tensor<3x5xf32>"],
    ),
    unary("asinh", torch.asinh),
    unary("atan", torch.atan),
    unary("cosh", torch.cosh),
    unary("sinh", torch.sinh),
    unary("tan", torch.tan),
    unary("expm1", torch.expm1),
    unary("ceil", torch.ceil),
    unary("floor", torch.floor),
    unary("round", torch.round),
    unary("trunc", torch.trunc),
    unary("log1p", torch.log1p, positive=True),
    unary("log2", torch.log2, positive=True),
    unary("log10", torch.log10, positive=True),
    binary("atan2", torch.atan2, (3, 4), (4,), (3, 4)),
    Case(
        "pow_tensor",
        "torch.pow_tensor %a0, %a1 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>",
        [(3, 4), (3, 4)],
        (3, 4),
        torch.pow,
        positive=True,
    ),
    typed(
        "bitwise_and",
        "torch.bitwise_and %a0, %a1 : " + _sig([((3, 4), "i64"), ((3, 4), "i64")], ((3, 4), "i64")),
        [((3, 4), "i64"), ((3, 4), "i64")],
        ((3, 4), "i64"),
        torch.bitwise_and,
    ),
    typed(
        "bitwise_or",
        "torch.bitwise_or %a0, %a1 : " + _sig([((3, 4), "i64"), ((3, 4), "i64")], ((3, 4), "i64")),
        [((3, 4), "i64"), ((3, 4), "i64")],
        ((3, 4), "i64"),
        torch.bitwise_or,
    ),
    typed(
        "bitwise_xor",
        "torch.bitwise_xor %a0, %a1 : " + _sig([((3, 4), "i64"), ((3, 4), "i64")], ((3, 4), "i64")),
        [((3, 4), "i64"), ((3, 4), "i64")],
        ((3, 4), "i64"),
        torch.bitwise_xor,
    ),
    red("prod", [1], False, lambda x: x.prod(1)),
    Case(
        "cumprod_f32",
        f"torch.cumprod %a0 {{dim = 1 : i64}} : ({X3}) -> {X3}",
        [(2, 3, 8)],
        (2, 3, 8),
        lambda x: x.cumprod(1),
    ),
    # cumsum
    Case(
        "cumsum_f32",
        f"torch.cumsum %a0 {{dim = 1 : i64}} : ({X3}) -> {X3}",
        [(2, 3, 8)],
        (2, 3, 8),
        lambda x: x.cumsum(1),
    ),
    typed(
        "cumsum_i1",
        f"torch.cumsum %a0 {{dim = 1 : i64}} : {_sig([((2, 8), 'i1')], ((2, 8), 'i64'))}",
        [((2, 8), "i1")],
        ((2, 8), "i64"),
        lambda x: x.cumsum(1),
    ),
    # gathers
    typed(
        "embedding",
        f"torch.embedding %a0, %a1 : {_sig([((10, 4), 'f32'), ((2, 3), 'i64')], ((2, 3, 4), 'f32'))}",
        [((10, 4), "f32"), ((2, 3), "i64")],
        ((2, 3, 4), "f32"),
        lambda w, i: F.embedding(i, w),
        int_high=10,
    ),
    typed(
        "index_2",
        f"torch.index %a0, %a1, %a2 : {_sig([((4, 6, 3), 'f32'), ((2, 1), 'i64'), ((5,), 'i32')], ((2, 5, 3), 'f32'))}",
        [((4, 6, 3), "f32"), ((2, 1), "i64"), ((5,), "i32")],
        ((2, 5, 3), "f32"),
        lambda x, i, j: x[i, j],
        int_high=4,
    ),
    typed(
        "index_negative",
        f"torch.index %a0, %a1 : {_sig([((6, 3), 'f32'), ((4,), 'i64')], ((4, 3), 'f32'))}",
        [((6, 3), "f32"), ((4,), "i64")],
        ((4, 3), "f32"),
        lambda x, i: x[i - 6],
        prelude=[],
        int_high=6,
    ),
    # recurrences: every step's state (h, then c for the LSTM)
    Case(
        "recurrence_lstm_reverse",
        "torch.recurrence %a0, %a1, %a2, %a3, %a4 {cell = #tensor<cell lstm>, reverse} : "
        f"({ttype((5, 2, 12))}, {ttype((12, 3))}, {ttype((12,))}, {ttype((2, 3))}, "
        f"{ttype((2, 3))}) -> {ttype((5, 2, 6))}",
        [(5, 2, 12), (12, 3), (12,), (2, 3), (2, 3)],
        (5, 2, 6),
        _recurrence("lstm", reverse=True),
    ),
    Case(
        "recurrence_gru",
        "torch.recurrence %a0, %a1, %a2, %a3 {cell = #tensor<cell gru>} : "
        f"({ttype((4, 2, 9))}, {ttype((9, 3))}, {ttype((9,))}, {ttype((2, 3))}) -> {ttype((4, 2, 3))}",
        [(4, 2, 9), (9, 3), (9,), (2, 3)],
        (4, 2, 3),
        _recurrence("gru"),
    ),
    Case(
        "recurrence_rnn_tanh",
        "torch.recurrence %a0, %a1, %a2, %a3 {cell = #tensor<cell rnn_tanh>} : "
        f"({ttype((3, 1, 4))}, {ttype((4, 4))}, {ttype((4,))}, {ttype((1, 4))}) -> {ttype((3, 1, 4))}",
        [(3, 1, 4), (4, 4), (4,), (1, 4)],
        (3, 1, 4),
        _recurrence("rnn_tanh"),
    ),
    # attention
    Case(
        "sdpa_causal_gqa",
        "torch.scaled_dot_product_attention %a0, %a1, %a2 {is_causal = true, scale = 0.3 : f64, enable_gqa = true} : "
        f"({ttype((1, 4, 5, 8))}, {ttype((1, 2, 5, 8))}, {ttype((1, 2, 5, 6))}) -> {ttype((1, 4, 5, 6))}",
        [(1, 4, 5, 8), (1, 2, 5, 8), (1, 2, 5, 6)],
        (1, 4, 5, 6),
        lambda q, k, v: _sdpa(q, k, v, is_causal=True, scale=0.3, enable_gqa=True),
    ),
    Case(
        "sdpa_float_mask",
        "torch.scaled_dot_product_attention %a0, %a1, %a2, %a3 {is_causal = false, scale = 0.5 : f64, enable_gqa = false} : "
        f"({ttype((2, 3, 8))}, {ttype((2, 7, 8))}, {ttype((2, 7, 4))}, {ttype((3, 7))}) -> {ttype((2, 3, 4))}",
        [(2, 3, 8), (2, 7, 8), (2, 7, 4), (3, 7)],
        (2, 3, 4),
        lambda q, k, v, m: _sdpa(q, k, v, m, scale=0.5),
    ),
    typed(
        "sdpa_bool_mask",
        "torch.scaled_dot_product_attention %a0, %a0, %a1, %a2 {is_causal = false, scale = 0.5 : f64, enable_gqa = false} : "
        + _sig(
            [((2, 5, 8), "f32"), ((2, 5, 8), "f32"), ((2, 5, 3), "f32"), ((2, 1, 5), "i1")],
            ((2, 5, 3), "f32"),
        ),
        [((2, 5, 8), "f32"), ((2, 5, 3), "f32"), ((2, 1, 5), "i1")],
        ((2, 5, 3), "f32"),
        lambda q, v, m: _sdpa(q, q, v, m, scale=0.5),
    ),
]


def lower(module: ModuleOp) -> ModuleOp:
    ConvertTorchToTensorPass().apply(make_context(), module)
    module.verify()
    return module


def random_inputs(case: Case, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for shape, elt in zip(case.inputs, case.input_types(), strict=True):
        if elt == "i1":
            arrays.append(rng.random(shape) < 0.5)
        elif elt in ("i64", "i32"):
            arrays.append(rng.integers(0, case.int_high, shape).astype(NUMPY[elt]))
        else:
            a = rng.standard_normal(shape)
            a = (np.abs(a) + 0.5 if case.positive else a).astype(np.float32)
            if elt == "bf16":  # representable values, as a bf16 tensor holds
                a = torch.from_numpy(a).bfloat16().float().numpy()
            arrays.append(a)
    return arrays


def torch_input(a: np.ndarray) -> torch.Tensor:
    """Floats in float64 for the reference; integers and bools as they are."""
    t = torch.from_numpy(a)
    return t.double() if t.is_floating_point() else t


def tolerance(case: Case) -> float:
    return 1e-2 if "bf16" in (*case.input_types(), case.result_type) else 1e-5


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_decomposition_matches_pytorch(case: Case) -> None:
    module = lower(parse(case.module_text()))
    assert not [op.name for op in module.walk() if op.dialect_name() == "torch"]
    inputs = random_inputs(case)
    (out,) = run(module, *inputs)
    ref = case.ref(*(torch_input(a) for a in inputs))
    ref = (ref.double() if ref.dtype == torch.bfloat16 else ref).numpy()
    assert out.shape == ref.shape
    assert out.dtype == NUMPY[case.result_type]
    assert rel_err(out, ref) <= tolerance(case)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_decomposition_matches_torch_interpreter(case: Case) -> None:
    """The same program before (torch interpreter) and after the pass (tensor interpreter)."""
    inputs = random_inputs(case, seed=1)
    module = parse(case.module_text())
    (before,) = run(module, *inputs)
    (after,) = run(lower(module), *inputs)
    assert after.shape == before.shape
    assert after.dtype == before.dtype
    assert rel_err(after, before.astype(np.float64)) <= tolerance(case)


def test_every_torch_op_has_a_case() -> None:
    """Adding a torch op without a decomposition test fails here."""
    covered = {line.split()[0] for c in CASES for line in [c.op, *c.prelude] if "torch." in line}
    covered |= {line.split("=")[1].split()[0] for c in CASES for line in c.prelude}
    ops = {op.name for op in torch_d.Torch.operations}
    assert ops <= covered, sorted(ops - covered)


def test_scalar_constant_folds_into_the_consumer() -> None:
    case = next(c for c in CASES if c.name == "mul_const")
    module = lower(parse(case.module_text()))
    names = [op.name for op in module.walk()]
    assert names.count("tensor.elementwise") == 1
    assert "tensor.index_map" not in names
    assert "arith.constant" in names


def test_same_shape_operands_are_not_broadcast() -> None:
    case = next(c for c in CASES if c.name == "div_2_2")
    module = lower(parse(case.module_text()))
    assert "tensor.index_map" not in [op.name for op in module.walk()]


def test_signature_stays_tensors() -> None:
    case = next(c for c in CASES if c.name == "rms_norm")
    module = lower(parse(case.module_text()))
    text = str(module)
    assert f"func.func @forward(%a0: {X3}, %a1: {W8}) -> {X3}" in text


def test_f16_decomposes_and_runs() -> None:
    t = "tensor<4x8xf16>"
    text = (
        f"func.func @forward(%a0: {t}) -> {t} {{\n"
        f"  %r = torch.softmax %a0 {{dim = 1 : i64}} : ({t}) -> {t}\n"
        f"  func.return %r : {t}\n}}"
    )
    module = lower(parse(text))
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float16)
    (out,) = run(module, x)
    assert out.dtype == np.float16
    ref = torch.softmax(torch.from_numpy(x).double(), 1).numpy()
    assert rel_err(out, ref) <= 5e-3


def test_integer_arithmetic_stays_integer() -> None:
    t = "tensor<4xi64>"
    text = (
        f"func.func @forward(%a0: {t}, %a1: {t}) -> {t} {{\n"
        f"  %r = torch.sub %a0, %a1 : ({t}, {t}) -> {t}\n"
        f"  func.return %r : {t}\n}}"
    )
    module = lower(parse(text))
    assert "arith.subi" in str(module)
    a, b = np.array([5, -3, 7, 0]), np.array([2, 4, -1, 9])
    (out,) = run(module, a, b)
    assert out.dtype == np.int64 and (out == a - b).all()


def test_bool_arithmetic_is_rejected() -> None:
    t = "tensor<4xi1>"
    text = (
        f"func.func @forward(%a0: {t}, %a1: {t}) -> {t} {{\n"
        f"  %r = torch.add %a0, %a1 : ({t}, {t}) -> {t}\n"
        f"  func.return %r : {t}\n}}"
    )
    with pytest.raises(PassFailedException, match="arithmetic on i1"):
        lower(parse(text))
