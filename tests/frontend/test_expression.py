"""`-c` expressions: splitting into inputs / modules / computation, numerics, error messages."""

import numpy as np
import pytest
import torch
from torch import nn

from deplodock.frontend.capture import UnsupportedOpError, argument_names
from deplodock.frontend.expression import (
    ExpressionError,
    capture_expression,
    parse_expression,
    randomize_parameters,
)


def test_rms_norm_expression():
    module, inputs, names = parse_expression("nn.RMSNorm(2048)(torch.randn(1,32,2048))")
    assert names == ["x0"]
    assert [tuple(x.shape) for x in inputs] == [(1, 32, 2048)]
    assert [n for n, _ in module.named_parameters()] == ["0.weight"]
    assert isinstance(module.get_submodule("0"), nn.RMSNorm)


def test_inputs_are_factories_and_the_rest_is_computation(run_torch, rel_err):
    expr = "torch.relu(torch.matmul(torch.randn(16,64) + torch.randn(64), torch.randn(64,16)))"
    program = capture_expression(expr)
    assert program.input_names == ["x0", "x1", "x2"]
    assert [a.shape for a in program.inputs] == [(16, 64), (64,), (64, 16)]
    assert program.params == []
    ops = [op.name for op in program.module.walk() if op.name.startswith("torch.")]
    assert ops == ["torch.add", "torch.matmul", "torch.relu"]
    (out,) = run_torch(program.module, program.arguments)
    (ref,) = program.reference()
    assert rel_err(out, ref) <= 1e-5
    x0, x1, x2 = (torch.from_numpy(a).double() for a in program.inputs)
    assert rel_err(out, torch.relu((x0 + x1) @ x2).numpy()) <= 1e-5


def test_example_values_are_reproducible():
    a = capture_expression("torch.randn(3, 4) * 2")
    b = capture_expression("torch.randn(3, 4) * 2")
    np.testing.assert_array_equal(a.inputs[0], b.inputs[0])
    assert np.all(a.inputs[0] != 0)


@pytest.mark.parametrize(
    "expr",
    [
        "nn.RMSNorm(64)(torch.randn(2, 8, 64))",
        "nn.LayerNorm(32)(torch.randn(4, 32)) * 2",
        "nn.Sequential(nn.Linear(16, 32), nn.SiLU(), nn.Linear(32, 8))(torch.randn(3, 16))",
        "F.softmax(nn.Linear(8, 8, bias=False)(torch.randn(2, 8)), dim=-1)",
        "torch.nn.functional.gelu(torch.randn(4, 4), approximate='tanh') + torch.ones(4)",
        "(torch.randn(4, 8).sum(-1), torch.rand(2, 3).amax(0))",
        "torch.randn(2, 3, 4).permute(2, 0, 1).reshape(4, 6)[1:3]",
        "torch.cat([torch.randn(2, 3), torch.full((1, 3), 0.5)], 0).mean()",
    ],
)
def test_expression_numerics(expr, run_torch, rel_err):
    program = capture_expression(expr, randomize_seed=3)
    program.module.verify()
    outs = run_torch(program.module, program.arguments)
    refs = program.reference()
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs, strict=True):
        assert rel_err(out, ref) <= 1e-5


def test_parameters_follow_inputs_with_their_names():
    program = capture_expression(
        "nn.Linear(4, 2)(torch.randn(3, 4)) + nn.Linear(4, 2)(torch.randn(4))"
    )
    assert argument_names(program.module) == [
        ("input", "x0"),
        ("input", "x1"),
        ("param", "0.weight"),
        ("param", "0.bias"),
        ("param", "1.weight"),
        ("param", "1.bias"),
    ]
    assert [p.shape for p in program.params] == [(2, 4), (2,), (2, 4), (2,)]


def test_dtype_conversion_of_a_factory_is_part_of_the_input():
    program = capture_expression("torch.randn(4, 8).half() * 2")
    assert program.inputs[0].dtype == np.float16
    assert "tensor<4x8xf16>" in str(program.module)


def test_a_converted_module_is_built_once_with_its_parameters_converted(run_torch, rel_err):
    """`nn.Linear(...).to(torch.bfloat16)` converts the module when it is built; inside the
    traced computation torch.export refuses to swap its parameters."""
    program = capture_expression(
        "nn.Linear(8, 4).to(torch.bfloat16)(torch.randn(3, 8, dtype=torch.bfloat16))",
        randomize_seed=3,
    )
    assert [p.shape for p in program.params] == [(4, 8), (4,)]
    assert "tensor<4x8xbf16>" in str(program.module)
    (out,) = run_torch(program.module, program.arguments)
    (ref,) = program.reference()
    assert rel_err(out, ref) <= 1e-2
    half = capture_expression("nn.LayerNorm(8).half().eval()(torch.randn(2, 8).half())")
    assert "tensor<8xf16>" in str(half.module)


def test_randomize_parameters_replaces_ones_and_zeros():
    norm = nn.LayerNorm(16)
    randomize_parameters(norm, seed=5)
    assert not torch.all(norm.weight == 1) and torch.all(norm.weight != 0)
    assert torch.all(norm.bias != 0)
    module, _, _ = parse_expression("nn.RMSNorm(8)(torch.randn(2, 8))")
    assert torch.all(module.get_parameter("0.weight") == 1)  # untouched unless asked


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("torch.randn(4, 8", "syntax error: '(' was never closed (column 12)"),
        ("foo(torch.randn(3))", "unknown name 'foo' (column 1)"),
        ("torch.relu(torch.randn(2)) + nn.Lineer(2, 2)", "unknown name 'nn.Lineer' (column 30)"),
        ("torch.relu(torch.randn(2)) + torch.relux(1)", "unknown name 'torch.relux' (column 30)"),
        ("1 + 2", "expression has no input tensors"),
        ("torch.randn(4) + torch.randn(5)", "PyTorch could not run the expression"),
        ("torch.randn(-1)", "cannot evaluate input tensor"),
    ],
)
def test_errors_are_one_line_with_a_column(expr, message):
    with pytest.raises(ExpressionError) as info:
        capture_expression(expr)
    text = str(info.value)
    assert "\n" not in text
    assert message in text
    assert "column" in text or message.startswith("PyTorch")


def test_unsupported_op_in_expression():
    with pytest.raises(UnsupportedOpError, match=r"^unsupported op aten\.fmax\.default \(1x\)"):
        capture_expression("torch.fmax(torch.randn(4), torch.randn(4))")


def test_seed_changes_the_example_values():
    a = capture_expression("torch.randn(3, 4) * 2", seed=1)
    b = capture_expression("torch.randn(3, 4) * 2", seed=2)
    assert not np.array_equal(a.inputs[0], b.inputs[0])
