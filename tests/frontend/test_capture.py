"""The FX importer: op mapping, argument order and attributes, numerics vs PyTorch, errors."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from deplodock.frontend.capture import (
    UnsupportedOpError,
    argument_names,
    capture,
    capture_program,
    to_numpy,
)
from deplodock.frontend.expression import randomize_parameters
from tests.frontend.capturing import Fn


def _ops(module) -> list[str]:
    return [op.name for op in module.walk() if op.name.startswith("torch.")]


def _check(module: nn.Module, inputs, run_torch, rel_err, tol=1e-5):
    """Capture, run at the torch level, compare with PyTorch in float64; returns the IR."""
    ir, params = capture_program(module, inputs)
    ir.verify()
    outs = run_torch(ir, [to_numpy(x) for x in inputs] + params)
    with torch.no_grad():
        refs = module.double()(*(x.double() if x.is_floating_point() else x for x in inputs))
    module.float()
    refs = refs if isinstance(refs, tuple) else (refs,)
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs, strict=True):
        assert rel_err(out, ref.numpy()) <= tol
    return ir


def _randn(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))


def test_rms_norm_stays_one_op(run_torch, rel_err):
    norm = randomize_parameters(nn.RMSNorm(2048), 1)
    ir = _check(norm, (_randn(1, 4, 2048),), run_torch, rel_err)
    assert _ops(ir) == ["torch.rms_norm"]
    assert argument_names(ir) == [("input", "x"), ("param", "weight")]


def test_arguments_inputs_first_then_parameters():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.LayerNorm(16))
    ir = capture(model, (_randn(2, 8),))
    assert argument_names(ir) == [
        ("input", "input"),
        ("param", "0.weight"),
        ("param", "0.bias"),
        ("param", "2.weight"),
        ("param", "2.bias"),
    ]
    assert 'deplodock.param = "0.weight"' in str(ir)
    assert _ops(ir) == ["torch.linear", "torch.relu", "torch.layer_norm"]


def test_mlp_block_numerics(run_torch, rel_err):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(16)
            self.up = nn.Linear(16, 32)
            self.down = nn.Linear(32, 16, bias=False)
            self.register_buffer("scale", torch.full((16,), 0.5))

        def forward(self, x):
            return x + self.down(F.gelu(self.up(self.norm(x)), approximate="tanh")) * self.scale

    ir = _check(randomize_parameters(Block(), 2), (_randn(2, 3, 16),), run_torch, rel_err)
    assert ("param", "scale") in argument_names(ir)


ELEMENTWISE = [
    lambda x, y: x + y * 2 - 1,
    lambda x, y: torch.add(x, y, alpha=3) - torch.sub(x, y, alpha=0.5),
    lambda x, y: 1 - x / (y.abs() + 1),
    lambda x, y: 2.0 / (x.exp() + 1),
    lambda x, y: torch.reciprocal(y.abs() + 0.5) + torch.rsqrt(x.abs() + 1),
    lambda x, y: -x + y.abs().sqrt() + (x.abs() + 1).log(),
    lambda x, y: torch.relu(x) + torch.sigmoid(y) + torch.tanh(x) + F.silu(y),
    lambda x, y: F.gelu(x) + F.gelu(y, approximate="tanh"),
    lambda x, y: x**2 + (y.abs() + 1) ** 0.5,
]


@pytest.mark.parametrize("fn", ELEMENTWISE)
def test_elementwise(fn, run_torch, rel_err):
    _check(Fn(fn), (_randn(4, 8), _randn(8)), run_torch, rel_err)


REDUCTIONS = [
    lambda x: x.sum(-1),
    lambda x: x.sum(),
    lambda x: x.sum((0, 2), keepdim=True),
    lambda x: x.mean(1),
    lambda x: x.mean(),
    lambda x: x.amax(-1, keepdim=True),
    lambda x: torch.softmax(x, -1),
    lambda x: F.log_softmax(x, dim=1),
    lambda x: F.rms_norm(x, [5], eps=1e-6),
    lambda x: F.layer_norm(x, [4, 5]),
]


@pytest.mark.parametrize("fn", REDUCTIONS)
def test_reductions_and_norms(fn, run_torch, rel_err):
    _check(Fn(fn), (_randn(3, 4, 5),), run_torch, rel_err)


MATMULS = [
    (lambda a, b: a @ b, [(4, 8), (8, 3)]),
    (lambda a, b: torch.mm(a, b), [(4, 8), (8, 3)]),
    (lambda a, b: torch.matmul(a, b), [(2, 4, 8), (8,)]),
    (lambda a, b: torch.bmm(a, b), [(2, 4, 8), (2, 8, 3)]),
    (lambda a, w: F.linear(a, w), [(2, 3, 8), (5, 8)]),
    (lambda b, a: torch.addmm(b, a, a.t(), beta=0.5, alpha=2), [(4,), (4, 8)]),
]


@pytest.mark.parametrize(("fn", "shapes"), MATMULS)
def test_matmuls(fn, shapes, run_torch, rel_err):
    _check(Fn(fn), tuple(_randn(*s) for s in shapes), run_torch, rel_err)


LAYOUT = [
    lambda x: x.t() if x.dim() == 2 else x.transpose(0, -1),
    lambda x: x.permute(2, 0, 1),
    lambda x: x.reshape(-1, 5) + x.view(12, 5),
    lambda x: x.flatten(1),
    lambda x: x.unsqueeze(-1).expand(3, 4, 5, 2),
    lambda x: x[:, 1:, ::2],
    lambda x: x[..., -3:-1],
    lambda x: x[:, 1:100],
    lambda x: x[1] + x[:, -1, None].squeeze(1)[0],
    lambda x: torch.cat([x, x[:, :2]], dim=1),
    lambda x: x.contiguous().clone().detach() * 1,
    lambda x: (x[:, :1].squeeze(), x),
]


@pytest.mark.parametrize("fn", LAYOUT)
def test_layout(fn, run_torch, rel_err):
    _check(Fn(fn), (_randn(3, 4, 5),), run_torch, rel_err)


def test_identity_slices_are_dropped():
    ir = capture(Fn(lambda x: x[:, :] + 1), (_randn(2, 3),))
    assert "torch.slice" not in str(ir)


def test_half_precision_capture(run_torch):
    x = _randn(4, 16).half()
    ir, params = capture_program(Fn(lambda x: torch.softmax(x * 2, -1)), (x,))
    assert "tensor<4x16xf16>" in str(ir)
    (out,) = run_torch(ir, [to_numpy(x), *params])
    assert out.dtype == np.float16
    ref = torch.softmax(x.float() * 2, -1).numpy()
    np.testing.assert_allclose(out.astype(np.float32), ref, atol=2e-3)


def test_unsupported_op_is_one_line():
    with pytest.raises(UnsupportedOpError) as info:
        capture(Fn(lambda x: torch.fmax(x, x) * 2), (_randn(3, 4),))
    assert str(info.value) == "unsupported op aten.fmax.default (1x) at forward: node fmax"


def test_several_unsupported_ops_are_listed_together():
    with pytest.raises(UnsupportedOpError) as info:
        capture(
            Fn(lambda x: torch.fmax(x, x) + torch.fmax(x, 2 * x) + torch.fmin(x, x)),
            (_randn(3, 4),),
        )
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("unsupported ops aten.fmax.default (2x), aten.fmin.default (1x)")
    assert "nodes fmax, fmax_1, fmin" in message


def test_dtype_promotion_inserts_a_cast():
    ir = capture(Fn(lambda x, i: x + i), (_randn(3), torch.arange(3)))
    assert "torch.cast %xs_1 : (tensor<3xi64>) -> tensor<3xf32>" in str(ir)
