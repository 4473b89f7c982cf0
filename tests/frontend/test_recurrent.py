"""`nn.RNN` / `nn.LSTM` / `nn.GRU` through `deplodock.compile` on the CPU against float64 eager.

Each module gets PyTorch's own random initialization (seeded) and a random input; every
output (the sequence of hidden states and the final h, and c for the LSTM) must match the
same module run in float64. The recurrence is one `tensor.recurrence` per layer and
direction (a carried loop), so the op count does not grow with the sequence: checked on the
imported program, and on a 64-step 2-layer LSTM (slow).
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass

import pytest
import torch
from torch import nn

import deplodock
from deplodock.dialects import tensor
from deplodock.frontend.capture import UnsupportedOpError, capture
from deplodock.passes.pipelines import lower

#: A float32 program against float64 eager: a few ulps per step and layer.
TOLERANCE = 1e-5


@dataclass(frozen=True)
class Config:
    """One recurrent module: its cell and shape options."""

    kind: type[nn.RNNBase]
    layers: int = 1
    bidirectional: bool = False
    batch_first: bool = False
    bias: bool = True
    nonlinearity: str = "tanh"

    def build(self, seed: int = 0) -> nn.RNNBase:
        torch.manual_seed(seed)
        extra = {"nonlinearity": self.nonlinearity} if self.kind is nn.RNN else {}
        return self.kind(
            5,
            6,
            num_layers=self.layers,
            bidirectional=self.bidirectional,
            batch_first=self.batch_first,
            bias=self.bias,
            **extra,
        ).eval()

    def __str__(self) -> str:
        cell = f"rnn_{self.nonlinearity}" if self.kind is nn.RNN else self.kind.__name__.lower()
        flags = [f"{self.layers}layer", "bidir" if self.bidirectional else "uni"]
        flags += ["batch_first"] if self.batch_first else []
        flags += [] if self.bias else ["nobias"]
        return "-".join([cell, *flags])


class WithState(nn.Module):
    """The recurrent module called with explicit initial states (inputs of the program)."""

    def __init__(self, rnn: nn.RNNBase):
        super().__init__()
        self.rnn = rnn

    def forward(self, x: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out, final = self.rnn(x, tuple(state) if len(state) > 1 else state[0])
        return (out, *final) if isinstance(final, tuple) else (out, final)


def _outputs(result: object) -> tuple[torch.Tensor, ...]:
    """`(out, h)` or `(out, (h, c))` flattened."""
    assert isinstance(result, tuple)
    out, final = result
    return (out, *final) if isinstance(final, tuple) else (out, final)


def _max_relative_error(actual: tuple, expected: tuple) -> float:
    assert len(actual) == len(expected)
    return max(
        float((a.double() - e).abs().max() / e.abs().max())
        for a, e in zip(actual, expected, strict=True)
    )


def _compiled_error(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> float:
    """`deplodock.compile` on the CPU, one call, against `model` in float64."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own, about nn.RNNBase's flat weights
        compiled = deplodock.compile(model, inputs, device="cpu")
    actual = compiled(*inputs)
    with torch.no_grad():
        expected = copy.deepcopy(model).double()(*(x.double() for x in inputs))
    actual_t = actual if isinstance(actual, tuple) else (actual,)
    flat = expected if isinstance(model, WithState) else _outputs(expected)
    return _max_relative_error(actual_t, flat)


def _input(config: Config, seed: int = 1, steps: int = 4, batch: int = 3) -> torch.Tensor:
    shape = (batch, steps, 5) if config.batch_first else (steps, batch, 5)
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


CONFIGS = [
    Config(nn.LSTM, layers=2, bidirectional=True, batch_first=True),
    Config(nn.GRU, layers=2, bidirectional=True, batch_first=True),
    Config(nn.RNN, layers=2, bidirectional=True, batch_first=True),
    Config(nn.RNN, nonlinearity="relu"),
    Config(nn.LSTM, bias=False),
    Config(nn.GRU, layers=2),
]

SLOW_CONFIGS = [
    Config(nn.LSTM, bidirectional=True),
    Config(nn.GRU, bidirectional=True, batch_first=True, bias=False),
    Config(nn.RNN, layers=2, nonlinearity="relu", batch_first=True),
    Config(nn.LSTM, layers=2),
]


@pytest.mark.parametrize(
    "config",
    [*CONFIGS, *(pytest.param(c, marks=pytest.mark.slow) for c in SLOW_CONFIGS)],
    ids=str,
)
def test_recurrent_module_matches_eager_float64(config: Config) -> None:
    error = _compiled_error(config.build(), (_input(config),))
    assert error <= TOLERANCE, f"{config}: relative error {error:.2e}"


@pytest.mark.parametrize(
    "config", [Config(nn.LSTM, bidirectional=True), Config(nn.GRU, layers=2)], ids=str
)
def test_given_initial_states_match_eager_float64(config: Config) -> None:
    """h0 (and c0) passed in: each layer and direction starts from its own slice."""
    x = _input(config)
    directions = 2 if config.bidirectional else 1
    gen = torch.Generator().manual_seed(2)
    states = [torch.randn(config.layers * directions, 3, 6, generator=gen)]
    if config.kind is nn.LSTM:
        states.append(torch.randn(config.layers * directions, 3, 6, generator=gen))
    error = _compiled_error(WithState(config.build()), (x, *states))
    assert error <= TOLERANCE, f"{config}: relative error {error:.2e}"


def test_the_recurrence_is_one_op_per_layer_and_direction() -> None:
    """The sequence is not unrolled: 2 layers x 2 directions are 4 `tensor.recurrence`
    ops, whatever the number of steps."""
    config = Config(nn.LSTM, layers=2, bidirectional=True)
    for steps in (3, 20):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = lower(capture(config.build(), (_input(config, steps=steps),)), "tensor")
        ops = [op for op in module.walk() if isinstance(op, tensor.RecurrenceOp)]
        assert len(ops) == 4


def test_a_projected_lstm_is_refused_in_one_line() -> None:
    model = nn.LSTM(5, 6, proj_size=3).eval()
    with warnings.catch_warnings(), pytest.raises(UnsupportedOpError) as error:
        warnings.simplefilter("ignore")
        deplodock.compile(model, (torch.randn(4, 2, 5),), device="cpu")
    assert "proj_size" in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.slow
def test_a_two_layer_lstm_over_64_steps() -> None:
    """The issue's case: 64 steps, 2 layers, through the default CPU path."""
    config = Config(nn.LSTM, layers=2, batch_first=True)
    error = _compiled_error(config.build(), (_input(config, steps=64, batch=2),))
    assert error <= TOLERANCE, f"relative error {error:.2e}"


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU], ids=lambda k: k.__name__.lower())
def test_bfloat16_states_are_as_close_as_eager_bfloat16(kind: type[nn.RNNBase]) -> None:
    """bf16 weights and input: the steps compute in f32 and round each stored state, so the
    error against float64 stays within twice eager bf16's own."""
    config = Config(kind, bidirectional=True)
    model = config.build()
    x = _input(config)
    narrow = copy.deepcopy(model).bfloat16()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actual = deplodock.compile(narrow, (x.bfloat16(),), device="cpu")(x.bfloat16())
    with torch.no_grad():
        expected = _outputs(copy.deepcopy(model).double()(x.double()))
        eager = _outputs(narrow(x.bfloat16()))
    assert all(a.dtype == torch.bfloat16 for a in actual)
    assert _max_relative_error(actual, expected) <= 2 * _max_relative_error(eager, expected)
