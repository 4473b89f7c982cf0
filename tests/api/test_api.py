"""`deplodock.compile(module, example_inputs)`: a callable program, errors in one message."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import deplodock
from deplodock.frontend.capture import UnsupportedOpError
from deplodock.frontend.expression import randomize_parameters
from tests.helpers import tiny_llama


def _rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual.double() - expected.double()).abs().max() / expected.abs().max())


def test_import_deplodock_stays_light() -> None:
    code = "import sys, deplodock; print('torch' in sys.modules, callable(deplodock.compile))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_compile_returns_a_callable_reading_current_parameters() -> None:
    model = randomize_parameters(nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)), 1)
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    f = deplodock.compile(model, (x,))
    assert f.program.stage == "kernel"
    with torch.no_grad():
        assert _rel_err(f(x), model(x)) <= 1e-5
        model[2].weight.mul_(-2.0)  # new weights, no recompile
        y = torch.randn(3, 8)
        assert _rel_err(f(y), model(y)) <= 1e-5
    assert "kernel.func" in f.ir


def test_several_outputs_keep_their_dtypes() -> None:
    class Two(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.softmax(x, -1), x.sum(-1)

    x = torch.randn(2, 16, generator=torch.Generator().manual_seed(0)).half()
    a, b = deplodock.compile(Two(), (x,), stage="loop")(x)
    assert a.dtype == b.dtype == torch.float16
    ref_a, ref_b = Two()(x.double())
    assert _rel_err(a, ref_a) <= 5e-3 and _rel_err(b, ref_b) <= 5e-3  # fp16 rounding


def test_a_scalar_result_keeps_its_zero_dimensional_shape() -> None:
    """An MSE loss reduced to a 0-d tensor comes back 0-d (not shape (1,)), at any stage."""

    class Mse(nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return F.mse_loss(x, y)

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)
    for stage in ("torch", "kernel"):
        loss = deplodock.compile(Mse(), (x, y), stage=stage)(x, y)
        assert loss.shape == () and _rel_err(loss, Mse()(x.double(), y.double())) <= 1e-6


def test_hugging_face_model_logits_and_model_left_unchanged() -> None:
    model, input_ids = tiny_llama()
    norms_before = [type(m).__name__ for m in model.modules()]
    f = deplodock.compile(model, (input_ids,))
    assert [type(m).__name__ for m in model.modules()] == norms_before
    assert model.config._attn_implementation == "sdpa"
    assert f.program.segments == (4, 3)  # prologue, 2 layers lowered once, epilogue
    logits = f(input_ids)
    with torch.no_grad():
        expected = model.double()(input_ids).logits
    assert logits.shape == (1, 8, 128)
    assert _rel_err(logits, expected) <= 1e-4


def test_unsupported_ops_are_reported_in_one_message_with_their_module_paths() -> None:
    class Mix(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.lgamma(x) + torch.cummax(x, -1).values

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mix = Mix()
            self.proj = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.proj(self.mix(x))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList([Layer() for _ in range(3)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = layer(x)
            return torch.lgamma(x)

    with pytest.raises(UnsupportedOpError) as info:
        deplodock.compile(Net(), (torch.randn(2, 8),))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        "unsupported ops aten.lgamma.default (4x in layers.{0-2}.mix), "
        "aten.cummax.default (3x in layers.{0-2}.mix) at forward: nodes lgamma, cummax, "
    )
    assert "getitem" not in message


def test_unknown_device() -> None:
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        deplodock.compile(nn.ReLU(), (torch.randn(4),), device="tpu")


def test_the_old_names_of_the_targets_still_work_and_say_their_new_ones() -> None:
    """`api.Device` was renamed `Target` ("device" is hardware: `perf/devices.py`)."""
    from deplodock import api

    with pytest.warns(DeprecationWarning, match=r"api\.Device is deprecated: use .*api\.Target"):
        assert api.Device is api.Target
    with pytest.warns(DeprecationWarning, match=r"api\.DEVICES is deprecated"):
        assert api.DEVICES is api.TARGETS
    with pytest.raises(AttributeError, match="no attribute 'Devices'"):
        api.Devices  # noqa: B018
