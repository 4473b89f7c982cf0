"""`deplodock.compile(..., device="cuda")` without a GPU.

The cuda path runs end to end through the CPU emulation of the runtime (tests/gpu/
emulation.py): capture, lowering to the cuda level, one load, then calls exchanging tensors
with `CudaProgram` by pointer. Only `require_cuda` and pycuda's loader are replaced, so the
argument wiring (inputs, parameters by name, dtypes, outputs) is the one a GPU runs.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from xdsl.dialects.builtin import ModuleOp

import deplodock
from deplodock import api
from deplodock.backend.device import DeviceInfo, NoCudaDevice, cuda_unavailable_reason
from deplodock.backend.runtime import CudaProgram
from deplodock.frontend.expression import randomize_parameters
from tests.gpu.emulation import FAKE_DEVICE, emulated_load
from tests.helpers import tiny_llama


def rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual.double() - expected.double()).abs().max() / expected.abs().max())


class GatedNorm(nn.Module):
    """RMSNorm, then a SiLU gate: reductions and elementwise work, two parameters."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.RMSNorm(dim)
        self.gate = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) * torch.nn.functional.silu(self.gate)


def float64_reference(module: nn.Module, *inputs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return copy.deepcopy(module).double()(*(x.double() for x in inputs))


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[ModuleOp]:
    """device="cuda" on the emulation; returns the modules loaded (each load appends)."""
    loaded: list[ModuleOp] = []

    def load(module: ModuleOp, device: DeviceInfo) -> CudaProgram:
        loaded.append(module)
        return emulated_load(module, device)

    target = api.CudaTarget(require=lambda: FAKE_DEVICE, load=load, tensor_device="cpu")
    monkeypatch.setitem(api.TARGETS, "cuda", api.Target("cuda", target, stages=("cuda",)))
    return loaded


def random(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_cuda_path_matches_float64_pytorch(loads: list[ModuleOp]) -> None:
    model = randomize_parameters(GatedNorm(96), 3)
    x = random(2, 5, 96)
    f = deplodock.compile(model, (x,), device="cuda")
    assert f.program.stage == "cuda" and f.device == "cuda"
    assert loads == [f.program.module]
    assert "__global__ void" in f.ir
    out = f(x)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert out.shape == (2, 5, 96)
    assert rel_err(out, float64_reference(model, x)) <= 1e-5
    y = random(2, 5, 96, seed=1)
    assert rel_err(f(y), float64_reference(model, y)) <= 1e-5
    assert len(loads) == 1  # built and loaded once, not per call


def test_an_mlp_reads_current_parameters_by_pointer(loads: list[ModuleOp]) -> None:
    model = randomize_parameters(nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)), 1)
    x = random(3, 8)
    f = deplodock.compile(model, (x,), device="cuda")
    assert rel_err(f(x), float64_reference(model, x)) <= 1e-5
    with torch.no_grad():
        # parameters on the program's device and dtype are passed as they are
        state = dict(model.named_parameters())
        arguments = f.executor.arguments((x,), state)
        pointers = {a.data_ptr() for a in arguments}
        assert {p.data_ptr() for p in model.parameters()} <= pointers
        model[2].weight.mul_(-2.0)  # new weights, no recompile
    y = random(3, 8, seed=5)
    assert rel_err(f(y), float64_reference(model, y)) <= 1e-5
    assert len(loads) == 1


def test_parameters_elsewhere_are_staged_once_per_version(loads: list[ModuleOp]) -> None:
    """A parameter not usable in place (here: float64 for an fp32 program) is copied once,
    and again only after it changes."""
    model = randomize_parameters(nn.Linear(8, 4), 2)
    x = random(3, 8)
    f = deplodock.compile(model, (x,), device="cuda")
    wide = {k: v.double() for k, v in model.named_parameters()}
    first = f.executor.arguments((x,), wide)
    again = f.executor.arguments((x,), wide)
    assert all(a is b for a, b in zip(first, again, strict=True))
    assert all(a.dtype == torch.float32 for a in first)
    wide["weight"].mul_(3.0)  # an in-place update bumps the version: a fresh copy
    third = f.executor.arguments((x,), wide)
    weight = next(i for i, name in enumerate(f.executor.params) if name == "weight")
    assert third[weight] is not first[weight]
    assert torch.equal(third[weight], wide["weight"].float())


def test_several_outputs_keep_their_dtypes(loads: list[ModuleOp]) -> None:
    class Two(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.softmax(x, -1), x.sum(-1)

    x = random(2, 16).half()
    a, b = deplodock.compile(Two(), (x,), device="cuda")(x)
    assert a.dtype == b.dtype == torch.float16
    ref_a, ref_b = Two()(x.double())
    assert rel_err(a, ref_a) <= 5e-3 and rel_err(b, ref_b) <= 5e-3  # fp16 rounding


def test_wrong_inputs_and_stages_are_refused(loads: list[ModuleOp]) -> None:
    f = deplodock.compile(nn.ReLU(), (random(4),), device="cuda")
    with pytest.raises(ValueError, match=r"takes 1 input\(s\), got 2"):
        f(random(4), random(4))
    with pytest.raises(ValueError, match=r"argument #0: expected torch.float32 \(4,\)"):
        f(random(5))
    with pytest.raises(ValueError, match="device 'cuda' runs the cuda stage, not 'kernel'"):
        deplodock.compile(nn.ReLU(), (random(4),), device="cuda", stage="kernel")


@pytest.mark.slow
def test_a_hugging_face_causal_lm(loads: list[ModuleOp]) -> None:
    """Decoder layers lowered once (stamped) down to the cuda level, logits as a tensor."""
    model, input_ids = tiny_llama()
    f = deplodock.compile(model, (input_ids,), device="cuda")
    assert f.program.stage == "cuda" and f.program.segments == (4, 3) and len(loads) == 1
    logits = f(input_ids)
    assert logits.dtype == torch.float32 and logits.shape == (1, 8, 128)
    with torch.no_grad():
        expected = copy.deepcopy(model).double()(input_ids).logits
    assert rel_err(logits, expected) <= 1e-4  # fp32 with matrix products


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a GPU is available")
def test_without_a_gpu_compile_says_why_before_capturing() -> None:
    class Unsupported(nn.Module):  # capturing it would fail: the device check comes first
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.lgamma(x)

    with pytest.raises(NoCudaDevice) as info:
        deplodock.compile(Unsupported(), (random(4),), device="cuda")
    assert str(info.value) == f"no CUDA device: {cuda_unavailable_reason()}"
