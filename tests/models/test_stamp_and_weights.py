"""Stamping identical layers, module-path reports, and binding checkpoints by name."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.driver import Program, kernel_counts, lower_program, max_relative_error
from deplodock.frontend.capture import (
    compress_paths,
    export,
    import_exported_program,
    state_arrays,
)
from deplodock.frontend.expression import randomize_parameters
from deplodock.frontend.weights import WeightError, bind_arguments, load_safetensors


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(width, eps=1e-6)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.silu(self.up(self.norm(x))))


class Stack(nn.Module):
    def __init__(self, width: int = 16, depth: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Block(width) for _ in range(depth)])
        self.head = nn.Linear(width, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * 2.0
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


@pytest.mark.parametrize("stage", ["loop", "kernel"])
def test_stamped_stack_matches_pytorch(stage: str) -> None:
    model = randomize_parameters(Stack(), 4)
    x = torch.randn(1, 4, 16, generator=torch.Generator().manual_seed(0))
    op_paths: dict = {}
    ep = export(model, (x,))
    module = import_exported_program(ep, op_paths=op_paths)
    arguments = [x.numpy(), *state_arrays(ep)]
    program = Program(module, "torch", layer_prefix="layers", op_paths=op_paths)
    lower_program(program, stage)
    assert program.segments == (5, 3)  # prologue, 3 layers sharing one module, epilogue
    launches, kernels = kernel_counts(program.module)
    assert launches > kernels
    (out,) = run_on_cpu(program.module, arguments)
    with torch.no_grad():
        expected = model.double()(x.double()).numpy()
    assert max_relative_error(out, expected) <= 1e-5


def test_compress_paths() -> None:
    paths = ["m.layers.0.attn", "m.layers.1.attn", "m.layers.3.attn", "m", "m.layers.2.mlp"]
    assert compress_paths(paths) == ["m.layers.{0-1,3}.attn", "m", "m.layers.2.mlp"]


def _module_with_params() -> tuple[object, list[str]]:
    model = nn.Sequential(nn.Linear(4, 3))
    ep = export(model, (torch.randn(2, 4),))
    return import_exported_program(ep), ["0.weight", "0.bias"]


def test_sharded_checkpoint_is_merged_and_bound_by_name(tmp_path: Path) -> None:
    weight, bias = torch.randn(3, 4), torch.randn(3)
    save_file({"0.weight": weight}, tmp_path / "a.safetensors")
    save_file({"0.bias": bias}, tmp_path / "b.safetensors")
    index = {"weight_map": {"0.weight": "a.safetensors", "0.bias": "b.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    weights = load_safetensors(tmp_path)
    module, _ = _module_with_params()
    x = torch.randn(2, 4)
    values = bind_arguments(module, [x], weights)  # type: ignore[arg-type]
    np.testing.assert_array_equal(values[1], weight.numpy())
    np.testing.assert_array_equal(values[2], bias.numpy())


def test_missing_shard_is_reported(tmp_path: Path) -> None:
    index = {"weight_map": {"0.weight": "gone.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(WeightError, match=r"missing shards: gone\.safetensors"):
        load_safetensors(tmp_path)


def test_missing_and_misshapen_weights_are_errors() -> None:
    module, _ = _module_with_params()
    x = torch.randn(2, 4)
    with pytest.raises(WeightError, match=r"no weight named '0\.bias'"):
        bind_arguments(module, [x], {"0.weight": torch.randn(3, 4)})  # type: ignore[arg-type]
    with pytest.raises(WeightError, match=r"weight '0\.weight' has shape \(4, 3\)"):
        bind_arguments(module, [x], {"0.weight": torch.randn(4, 3), "0.bias": torch.randn(3)})  # type: ignore[arg-type]
    with pytest.raises(WeightError, match="meta device"):
        meta = {"0.weight": torch.empty(3, 4, device="meta"), "0.bias": torch.randn(3)}
        bind_arguments(module, [x], meta)  # type: ignore[arg-type]


def test_capture_inlines_grad_mode_regions_and_drops_unused_state() -> None:
    """Hugging Face rotary embeddings run under `torch.no_grad()`: the export wraps such
    regions in a higher-order op, which the importer inlines; an unused buffer (as
    `original_inv_freq`) gets no argument."""

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("unused", torch.ones(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x + 1
            with torch.enable_grad():
                z = torch.relu(y) * 2
            return z - 1

    ep = export(Net(), (torch.randn(3),))
    targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    assert "wrap_with_set_grad_enabled" in targets
    module = import_exported_program(ep)
    ops = [op.name for op in module.walk() if op.name.startswith("torch.")]
    assert "torch.relu" in ops and "torch.mul" in ops
    assert "unused" not in str(module)
    x = torch.randn(3)
    (out,) = run_on_cpu(module, [x.numpy()])
    assert max_relative_error(out, (torch.relu(x + 1) * 2 - 1).numpy()) <= 1e-6
