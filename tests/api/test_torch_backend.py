"""`torch.compile(model, backend="deplodock")` through torch's backend entry point."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import deplodock.api as deplodock_api
from deplodock.torch_backend import DeplodockFallbackWarning, deplodock
from tests.helpers import tiny_llama


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    scale = expected.double().abs().max().clamp_min(1e-30)
    return float((actual.double() - expected.double()).abs().max() / scale)


def compiled_matches_eager(module: nn.Module, *inputs: torch.Tensor, tolerance: float) -> None:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", DeplodockFallbackWarning)  # no silent eager fallback
        actual = torch.compile(module, backend="deplodock", dynamic=False)(*inputs)
        expected = module.double()(*(x.double() for x in inputs))
    assert rel_err(actual, expected) <= tolerance


class Attention(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = (nn.Linear(dim, dim) for _ in range(3))
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = (
            p(x).reshape(b, s, self.heads, -1).transpose(1, 2) for p in (self.q, self.k, self.v)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, s, d)) + x


def test_the_backend_is_registered_under_its_name():
    assert "deplodock" in torch._dynamo.list_backends()


def test_mlp():
    mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    compiled_matches_eager(mlp, torch.randn(4, 16), tolerance=1e-4)


def test_rmsnorm():
    compiled_matches_eager(nn.RMSNorm(64), torch.randn(2, 8, 64), tolerance=1e-5)


def test_attention_block():
    compiled_matches_eager(Attention(), torch.randn(2, 8, 32), tolerance=1e-4)


@pytest.mark.slow
def test_two_layer_tiny_llama():
    model, input_ids = tiny_llama()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", DeplodockFallbackWarning)
        logits = torch.compile(model, backend="deplodock", dynamic=False)(input_ids).logits
        expected = model.double()(input_ids).logits
    assert rel_err(logits, expected) <= 1e-4


def test_a_new_shape_recompiles():
    calls: list[tuple[int, ...]] = []

    def counting(graph_module, example_inputs):
        calls.extend(tuple(x.shape) for x in example_inputs if x.dim() == 2)
        return deplodock(graph_module, example_inputs)

    norm = nn.RMSNorm(16)
    compiled = torch.compile(norm, backend=counting, dynamic=False)
    with torch.no_grad():
        for rows in (3, 5):
            x = torch.randn(rows, 16)
            assert rel_err(compiled(x), norm(x)) <= 1e-5
    assert calls == [(3, 16), (5, 16)]


def test_three_batch_sizes_run_compiled_once_each(monkeypatch: pytest.MonkeyPatch):
    """Issue #39: at the second shape Dynamo makes the batch dimension symbolic, and that
    graph ran eagerly ("a non-tensor graph input (symbolic shape)"). Now each concrete shape
    compiles once, on its first call, and is kept."""
    compiled_shapes: list[set[tuple[int, ...]]] = []
    real_compile = deplodock_api.compile

    def counting(module, example_inputs, *args, **kwargs):
        compiled_shapes.append({tuple(x.shape) for x in example_inputs})
        return real_compile(module, example_inputs, *args, **kwargs)

    monkeypatch.setattr(deplodock_api, "compile", counting)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    reference = copy.deepcopy(mlp).double()
    compiled = torch.compile(mlp, backend="deplodock")  # Dynamo's default: automatic dynamic
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", DeplodockFallbackWarning)  # no silent eager fallback
        for batch in (2, 3, 5, 3):
            x = torch.randn(batch, 16)
            assert rel_err(compiled(x), reference(x.double())) <= 1e-4
    inputs = [[s for s in shapes if s[1:] == (16,) and s[0] != 32] for shapes in compiled_shapes]
    assert inputs == [[(2, 16)], [(3, 16)], [(5, 16)]]


def test_an_unsupported_op_runs_eagerly_with_one_warning():
    class Gamma(nn.Module):  # `lgamma` is not Core ATen and has no decomposition
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.lgamma(x) * 2.0

    x = torch.randn(1, 4, 3, 3)
    with pytest.warns(DeplodockFallbackWarning, match="aten.lgamma") as caught:
        y = torch.compile(Gamma(), backend="deplodock", dynamic=False)(x)
    assert len(caught) == 1
    assert torch.equal(y, Gamma()(x))


def test_the_fallback_is_per_graph_not_per_model(monkeypatch: pytest.MonkeyPatch):
    """Dynamo splits the model at a graph break: the graph deplodock can compile runs
    compiled, and only the graph with the unsupported op runs eagerly (one warning)."""
    outcomes: list[str] = []
    runs: list[tuple[int, ...]] = []
    real_compile = deplodock_api.compile

    def recording(module, example_inputs, *args, **kwargs):
        try:
            compiled = real_compile(module, example_inputs, *args, **kwargs)
        except Exception:
            outcomes.append("eager")
            raise
        outcomes.append("compiled")

        def counted(*inputs):
            runs.append(tuple(inputs[-1].shape))
            return compiled(*inputs)

        return counted

    class TwoGraphs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.a(x))
            torch._dynamo.graph_break()
            return self.b(torch.lgamma(y.abs() + 1))  # `lgamma`: no handler, no decomposition

    monkeypatch.setattr(deplodock_api, "compile", recording)
    model = TwoGraphs()
    x = torch.randn(2, 4)
    with torch.no_grad(), pytest.warns(DeplodockFallbackWarning, match="aten.lgamma") as caught:
        y = torch.compile(model, backend="deplodock", dynamic=False)(x)
        expected = copy.deepcopy(model).double()(x.double())
    assert outcomes == ["compiled", "eager"]
    assert runs == [(2, 4)]  # the first graph's program ran, once, on `x`
    assert len(caught) == 1
    assert rel_err(y, expected) <= 1e-5
