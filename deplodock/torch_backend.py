"""`torch.compile(model, backend="deplodock")`: deplodock as a TorchDynamo backend.

Dynamo traces the user's code, breaks the graph where it must and guards on shapes; each FX
graph it hands over is compiled here with `deplodock.compile` for the device of its inputs
(the kernel-level interpreter on the CPU, the built CUDA program on a GPU) and called with
the graph's own inputs. A graph deplodock cannot compile (an unsupported op, a symbolic
shape) runs eagerly instead, with one warning naming the reason: the user's model never
fails because of the backend. The backend is registered under torch's
`torch_dynamo_backends` entry point (see pyproject.toml), so `pip install -e .` is enough.

Shapes are static: a new input shape makes Dynamo recompile (use `dynamic=False`; with
automatic dynamic shapes the symbolic graph runs eagerly).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch


class DeplodockFallbackWarning(UserWarning):
    """A graph runs eagerly because deplodock could not compile it."""


def _device_of(example_inputs: Sequence[Any]) -> str:
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    return "cuda" if any(t.is_cuda for t in tensors) else "cpu"


def _static_reason(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> str:
    """Why the graph is not one deplodock compiles ('' when it is)."""
    if not all(isinstance(x, torch.Tensor) for x in example_inputs):
        return "a non-tensor graph input (symbolic shape)"
    for node in graph_module.graph.nodes:
        value = node.meta.get("example_value", node.meta.get("val"))
        if isinstance(value, torch.Tensor) and any(
            not isinstance(size, int) for size in value.shape
        ):
            return "a symbolic shape (compile with dynamic=False)"
    return ""


def _single_output(graph_module: torch.fx.GraphModule) -> bool:
    """Whether the graph returns a bare tensor rather than a tuple or list of them."""
    output = next(n for n in graph_module.graph.nodes if n.op == "output")
    return not isinstance(output.args[0], tuple | list)


def deplodock(
    graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> Callable[..., Any]:
    """The Dynamo backend: a compiled callable for `graph_module`, or its eager forward."""
    from deplodock.api import compile as deplodock_compile

    reason = _static_reason(graph_module, example_inputs)
    if not reason:
        try:
            compiled = deplodock_compile(
                graph_module, list(example_inputs), device=_device_of(example_inputs)
            )
        except Exception as error:  # never break the user's model: run this graph eagerly
            text = str(error).strip().splitlines()
            reason = text[0] if text else type(error).__name__
    if reason:
        warnings.warn(f"deplodock: {reason}; this graph runs eagerly", DeplodockFallbackWarning, 2)
        return graph_module.forward

    single = _single_output(graph_module)

    def run(*args: torch.Tensor) -> Any:
        outputs = compiled(*args)
        if single:
            return outputs
        return outputs if isinstance(outputs, tuple) else (outputs,)

    return run
