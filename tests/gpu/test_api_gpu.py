"""`deplodock.compile(..., device="cuda")` on a real GPU: CUDA tensors in and out.

Marked `gpu`: skipped with the reason where there is no CUDA device, pycuda or nvcc (see
conftest.py). tests/api/test_api_cuda.py runs the same path on the CPU emulation.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import deplodock
from deplodock.frontend.expression import randomize_parameters
from tests.helpers import tiny_llama

pytestmark = pytest.mark.gpu


def rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    a, e = actual.double(), expected.to(actual.device).double()
    return float((a - e).abs().max() / e.abs().max())


def float64_reference(module: nn.Module, *inputs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return copy.deepcopy(module).double()(*(x.double() for x in inputs))


def random(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def mlp(seed: int) -> nn.Module:
    return randomize_parameters(
        nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 32)), seed
    )


def test_a_module_on_the_gpu_exchanges_cuda_tensors_in_place() -> None:
    model = mlp(1).cuda()
    x = random(4, 64).cuda()
    f = deplodock.compile(model, (x,), device="cuda")
    assert f.program.stage == "cuda"
    out = f(x)
    assert out.is_cuda and out.dtype == torch.float32 and out.shape == (4, 32)
    assert rel_err(out, float64_reference(model, x)) <= 1e-4  # fp32 with matrix products
    arguments = f.executor.arguments((x,), dict(model.named_parameters()))
    assert arguments[0].data_ptr() == x.data_ptr()  # inputs and parameters by pointer
    assert {p.data_ptr() for p in model.parameters()} <= {a.data_ptr() for a in arguments}
    with torch.no_grad():
        model[2].weight.mul_(-2.0)
    y = random(4, 64, seed=3).cuda()
    assert rel_err(f(y), float64_reference(model, y)) <= 1e-4


def test_a_module_left_on_the_cpu_is_staged_and_refreshed() -> None:
    model = mlp(2)
    x = random(4, 64)
    f = deplodock.compile(model, (x,), device="cuda")
    out = f(x)  # CPU inputs are moved; the output stays on the GPU
    assert out.is_cuda and rel_err(out, float64_reference(model, x)) <= 1e-4
    with torch.no_grad():
        model[0].bias.add_(1.0)  # a new version of a CPU parameter: copied again
    assert rel_err(f(x), float64_reference(model, x)) <= 1e-4


def test_rmsnorm_in_bf16() -> None:
    model = randomize_parameters(nn.RMSNorm(256, dtype=torch.bfloat16), 4).cuda()
    x = random(2, 16, 256).to("cuda", torch.bfloat16)
    out = deplodock.compile(model, (x,), device="cuda")(x)
    assert out.is_cuda and out.dtype == torch.bfloat16
    assert rel_err(out, float64_reference(model, x)) <= 1e-2


def test_a_hugging_face_causal_lm_on_the_gpu() -> None:
    model, input_ids = tiny_llama()
    model = model.cuda()
    f = deplodock.compile(model, (input_ids.cuda(),), device="cuda")
    logits = f(input_ids.cuda())
    assert logits.is_cuda and logits.shape == (1, 8, 128)
    with torch.no_grad():
        expected = copy.deepcopy(model).double()(input_ids.cuda()).logits
    assert rel_err(logits, expected) <= 1e-4
