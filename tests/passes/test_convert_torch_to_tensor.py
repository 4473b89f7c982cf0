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
from xdsl.interpreter import Interpreter
from xdsl.interpreters.func import FuncFunctions
from xdsl.parser import Parser
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import make_context
from deplodock.dialects import torch as torch_d
from deplodock.interpreters.arith import ArithMathFunctions
from deplodock.interpreters.tensor import TensorFunctions
from deplodock.interpreters.torch import TorchFunctions
from deplodock.passes.convert_torch_to_tensor import ConvertTorchToTensorPass

Shape = tuple[int, ...]


def ttype(shape: Shape) -> str:
    return "tensor<" + "".join(f"{s}x" for s in shape) + "f32>"


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

    def module_text(self) -> str:
        args = ", ".join(f"%a{i}: {ttype(s)}" for i, s in enumerate(self.inputs))
        lines = [f"func.func @forward({args}) -> {ttype(self.result)} {{", *self.prelude]
        lines.append(f"  %r = {self.op}")
        lines.append(f"  func.return %r : {ttype(self.result)}")
        lines.append("}")
        return "\n".join(lines)


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
]


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def run(module: ModuleOp, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    interpreter = Interpreter(module)
    for functions in (FuncFunctions(), ArithMathFunctions(), TensorFunctions(), TorchFunctions()):
        interpreter.register_implementations(functions)
    return [np.asarray(r) for r in interpreter.call_op("forward", tuple(inputs))]


def lower(module: ModuleOp) -> ModuleOp:
    ConvertTorchToTensorPass().apply(make_context(), module)
    module.verify()
    return module


def random_inputs(case: Case, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for shape in case.inputs:
        a = rng.standard_normal(shape)
        arrays.append((np.abs(a) + 0.5 if case.positive else a).astype(np.float32))
    return arrays


def rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(out.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_decomposition_matches_pytorch(case: Case) -> None:
    module = lower(parse(case.module_text()))
    assert not [op.name for op in module.walk() if op.dialect_name() == "torch"]
    inputs = random_inputs(case)
    (out,) = run(module, inputs)
    ref = case.ref(*(torch.from_numpy(a).double() for a in inputs)).numpy()
    assert out.shape == ref.shape
    assert out.dtype == np.float32
    assert rel_err(out, ref) <= 1e-5


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_decomposition_matches_torch_interpreter(case: Case) -> None:
    """The same program before (torch interpreter) and after the pass (tensor interpreter)."""
    inputs = random_inputs(case, seed=1)
    module = parse(case.module_text())
    (before,) = run(module, inputs)
    (after,) = run(lower(module), inputs)
    assert after.shape == before.shape
    assert rel_err(after, before.astype(np.float64)) <= 1e-5


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
    (out,) = run(module, [x])
    assert out.dtype == np.float16
    ref = torch.softmax(torch.from_numpy(x).double(), 1).numpy()
    assert rel_err(out, ref) <= 5e-3


def test_integer_arithmetic_is_rejected() -> None:
    t = "tensor<4xi64>"
    text = (
        f"func.func @forward(%a0: {t}, %a1: {t}) -> {t} {{\n"
        f"  %r = torch.add %a0, %a1 : ({t}, {t}) -> {t}\n"
        f"  func.return %r : {t}\n}}"
    )
    with pytest.raises(PassFailedException, match="arithmetic on i64"):
        lower(parse(text))
