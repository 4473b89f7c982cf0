"""Checkpoint weights bound to a program's arguments by name.

A Hugging Face directory holds `model.safetensors`, or shards listed by
`model.safetensors.index.json` (`weight_map`: tensor name -> shard file). Every parameter
argument of `@forward` carries its name in the module (`deplodock.param`), the same name the
checkpoint uses, so binding is a lookup by name with a shape check. Values the checkpoint does
not hold by design (non-persistent buffers such as the rotary `inv_freq`, computed from the
config) come from a fallback mapping; any other missing name is an error, never a default.
A checkpoint that lacks tensors the model expects is one line naming the first and counting
the rest (`WeightError.details` lists them all, for `-v`); a weight that holds NaN or Inf is a
one-line warning, since every output computed from it is NaN on both sides of `run`.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
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
    """Weights that are missing, unreadable or of the wrong shape; one-line message.

    `details`: lines that say more (every missing tensor), for `-v` to print below it.
    """

    def __init__(self, message: str, details: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.details = tuple(details)


def warn_on_stderr(message: str) -> None:
    """The default `warn` of `load_safetensors`: `deplodock: warning: MESSAGE` on stderr."""
    print(f"deplodock: warning: {message}", file=sys.stderr, flush=True)


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


def load_safetensors(
    directory: Path, warn: Callable[[str], None] = warn_on_stderr
) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint in `directory`, by name (all shards merged); a weight
    holding NaN or Inf is told to `warn` in one line (`nonfinite_warning`)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for path in safetensors_files(directory):
        try:
            tensors.update(load_file(path))
        except (OSError, SafetensorError) as error:
            raise WeightError(f"cannot read {path}: {error}") from None
    if (warning := nonfinite_warning(tensors)) is not None:
        warn(f"{directory}: {warning}")
    return tensors


def nonfinite_warning(tensors: Mapping[str, torch.Tensor]) -> str | None:
    """`weight 'NAME' holds NaN (1 of 32 values)` for the first floating tensor with a NaN
    or Inf, and how many others have one; None when all are finite. A NaN weight makes the
    model and its reference both NaN, so the user must hear of it before any comparison."""
    bad = [
        name
        for name, tensor in tensors.items()
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())
    ]
    if not bad:
        return None
    tensor = tensors[bad[0]]
    nans, infs = int(torch.isnan(tensor).sum()), int(torch.isinf(tensor).sum())
    kinds = " and ".join(kind for kind, count in (("NaN", nans), ("Inf", infs)) if count)
    others = f"; {_count(len(bad) - 1, 'other weight')} too" if len(bad) > 1 else ""
    return f"weight '{bad[0]}' holds {kinds} ({nans + infs} of {tensor.numel()} values){others}"


def check_shapes(directory: Path, expected: Mapping[str, Sequence[int]]) -> None:
    """Compares the tensor shapes in the checkpoint's headers (no data is read) with
    `expected`, by name, so a mismatch is one line naming the tensor and both shapes."""
    for path, shapes in _header_shapes(directory):
        for name, shape in shapes.items():
            want = tuple(expected.get(name, shape))
            if shape != want:
                raise WeightError(
                    f"{path.name}: tensor '{name}' has shape {shape}, the model expects {want}"
                )


def check_complete(
    directory: Path, expected: Iterable[str], tied: Iterable[Sequence[str]] = ()
) -> None:
    """Fails when the checkpoint lacks a tensor the model expects, before a loader fills it
    with random values (transformers does, and prints a report of many lines): one line
    naming the first missing tensor and counting the rest, every one in `details`.

    `tied`: groups of names of one shared parameter (`lm_head.weight` and
    `model.embed_tokens.weight`); one of a group stored counts for all of them.
    """
    held = {name for _, shapes in _header_shapes(directory) for name in shapes}
    aliased = {name for group in tied if held.intersection(group) for name in group}
    names = list(expected)
    missing = [name for name in names if name not in held and name not in aliased]
    if not missing:
        return
    first = f"the checkpoint lacks '{missing[0]}'"
    if len(missing) == 1:
        message = f"{first}, a tensor the model expects"
    else:
        message = f"{first} and {_count(len(missing) - 1, 'more tensor')} the model expects"
    details = [f"  missing: {name}" for name in missing]
    raise WeightError(f"{directory}: {message}{_layer_hint(missing, names, held)}", details)


#: A decoder layer's index in a tensor name (`model.layers.3.mlp.up_proj.weight`).
_LAYER_INDEX = re.compile(r"\.layers\.(\d+)\.")


def _layer_hint(missing: Sequence[str], expected: Sequence[str], held: set[str]) -> str:
    """`; it holds 1 of the 2 layers the config asks for (--layers 1 keeps those)` when what
    is missing is whole trailing layers (a config asking for more layers than the weights
    hold); else ''."""

    def layers(names: Iterable[str]) -> set[int]:
        return {int(m.group(1)) for name in names if (m := _LAYER_INDEX.search(name))}

    wanted, stored = layers(expected), layers(held)
    if not stored or stored != set(range(len(stored))) or len(stored) >= len(wanted):
        return ""
    if any(not (found := layers([name])) or min(found) < len(stored) for name in missing):
        return ""
    return (
        f"; it holds {len(stored)} of the {len(wanted)} layers the config asks for "
        f"(--layers {len(stored)} keeps those)"
    )


def _header_shapes(directory: Path) -> list[tuple[Path, dict[str, tuple[int, ...]]]]:
    """Per checkpoint file, its tensors' shapes, read from the header (no data is read)."""
    from safetensors import SafetensorError, safe_open

    found = []
    for path in safetensors_files(directory):
        try:
            with safe_open(path, framework="pt") as f:
                found.append((path, {n: tuple(f.get_slice(n).get_shape()) for n in f.keys()}))
        except (OSError, SafetensorError) as error:
            raise WeightError(f"cannot read {path}: {error}") from None
    return found


def _count(number: int, noun: str) -> str:
    """`1 other weight`, `3 other weights`."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


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
