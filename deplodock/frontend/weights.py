"""Checkpoint weights bound to a program's arguments by name.

A Hugging Face directory holds `model.safetensors`, or shards listed by
`model.safetensors.index.json` (`weight_map`: tensor name -> shard file). Every parameter
argument of `@forward` carries its name in the module (`deplodock.param`), the same name the
checkpoint uses, so binding is a lookup by name with a shape check. Values the checkpoint does
not hold by design (non-persistent buffers such as the rotary `inv_freq`, computed from the
config) come from a fallback mapping; any other missing name is an error, never a default.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from xdsl.dialects.builtin import MemRefType, ModuleOp, StringAttr, TensorType

from deplodock.dialects.element_types import numpy_dtype, round_to_type
from deplodock.dialects.queries import forward_function
from deplodock.frontend.capture import to_numpy

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


class WeightError(Exception):
    """Weights that are missing, unreadable or of the wrong shape; one-line message."""


def safetensors_files(directory: Path) -> list[Path]:
    """The checkpoint files of `directory`: the shards of the index, or `*.safetensors`."""
    index = directory / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as error:
            raise WeightError(f"cannot read {index}: {error}") from None
        files = [directory / name for name in dict.fromkeys(weight_map.values())]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise WeightError(f"{index} lists missing shards: {', '.join(missing)}")
        return files
    single = directory / SINGLE_FILE
    if single.is_file():
        return [single]
    return sorted(directory.glob("*.safetensors"))


def load_safetensors(directory: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint in `directory`, by name (all shards merged)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for path in safetensors_files(directory):
        try:
            tensors.update(load_file(path))
        except (OSError, SafetensorError) as error:
            raise WeightError(f"cannot read {path}: {error}") from None
    return tensors


def check_shapes(directory: Path, expected: Mapping[str, Sequence[int]]) -> None:
    """Compares the tensor shapes in the checkpoint's headers (no data is read) with
    `expected`, by name, so a mismatch is one line naming the tensor and both shapes."""
    from safetensors import SafetensorError, safe_open

    for path in safetensors_files(directory):
        try:
            with safe_open(path, framework="pt") as f:
                shapes = {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
        except (OSError, SafetensorError) as error:
            raise WeightError(f"cannot read {path}: {error}") from None
        for name, shape in shapes.items():
            want = tuple(expected.get(name, shape))
            if shape != want:
                raise WeightError(
                    f"{path.name}: tensor '{name}' has shape {shape}, the model expects {want}"
                )


def param_names(module: ModuleOp, function: str = "forward") -> list[str | None]:
    """Per argument of `@function`: its `deplodock.param` name, or None for a call input.

    The one reader of the attribute every by-name binder (numpy here, device tensors in
    `api.CudaExecutor`) walks the arguments with.
    """
    func = forward_function(module, function)
    attrs = func.arg_attrs.data if func.arg_attrs else [None] * len(func.args)
    names: list[str | None] = []
    for arg_attrs in attrs:
        param = arg_attrs.data.get("deplodock.param") if arg_attrs is not None else None
        names.append(param.data if isinstance(param, StringAttr) else None)
    return names


def bind_arguments(
    module: ModuleOp,
    inputs: Sequence[torch.Tensor | np.ndarray],
    weights: Mapping[str, torch.Tensor],
    fallback: Mapping[str, torch.Tensor] | None = None,
    function: str = "forward",
) -> list[np.ndarray]:
    """The values of `@function`'s arguments: `inputs` in order, then each `deplodock.param`
    looked up in `weights` (else `fallback`), converted to the argument's element type."""
    arg_types = forward_function(module, function).function_type.inputs.data
    remaining = iter(inputs)
    values: list[np.ndarray] = []
    for arg_type, name in zip(arg_types, param_names(module, function), strict=True):
        assert isinstance(arg_type, TensorType | MemRefType)
        if name is None:
            value = next(remaining, None)
            if value is None:
                raise WeightError(f"@{function} takes more inputs than the {len(inputs)} given")
            array = to_numpy(value) if isinstance(value, torch.Tensor) else np.asarray(value)
        else:
            array = _lookup(name, weights, fallback or {})
        shape = tuple(arg_type.get_shape())
        if array.shape != shape:
            what = "input" if name is None else f"weight '{name}'"
            raise WeightError(f"{what} has shape {array.shape}, the program expects {shape}")
        if np.issubdtype(array.dtype, np.floating):  # bf16 arguments: rounded like the IR
            array = np.asarray(round_to_type(array, arg_type.element_type))
        values.append(array.astype(numpy_dtype(arg_type.element_type), copy=False))
    return values


def _lookup(
    name: str, weights: Mapping[str, torch.Tensor], fallback: Mapping[str, torch.Tensor]
) -> np.ndarray:
    tensor = weights.get(name)
    if tensor is None:
        tensor = fallback.get(name)
    if tensor is None:
        raise WeightError(f"no weight named '{name}' (the checkpoint holds {len(weights)} tensors)")
    if tensor.is_meta:
        raise WeightError(f"weight '{name}' is on the meta device: load weights first")
    return to_numpy(tensor)
