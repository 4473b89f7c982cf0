"""`torch.compile(model, backend="deplodock")`: deplodock as a TorchDynamo backend.

Dynamo traces the user's code, breaks the graph where it must and guards on shapes; each FX
graph it hands over is compiled here with `deplodock.compile` for the device of its inputs
(the kernel-level interpreter on the CPU, the built CUDA program on a GPU) and called with
the graph's own inputs. A graph deplodock cannot compile (an unsupported op) runs eagerly
instead, with one warning naming the reason: the user's model never fails because of the
backend. The backend is registered under torch's `torch_dynamo_backends` entry point (see
pyproject.toml), so `pip install -e .` is enough.

deplodock's kernels are static: every shape is a constant of the program. When a model is
called with a new shape, Dynamo's automatic dynamic shapes hand over a graph whose changed
dimensions are symbolic (and passed as integer inputs); that graph is compiled per concrete
shape instead, on the first call with each, and the programs are kept by shape, as other
backends keep theirs. What is specialized: the shape and dtype of every tensor input and
the value of every integer input (a symbolic size); a combination not seen before is a new
compile (seconds), then cached for the life of the compiled function.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch


class DeplodockFallbackWarning(UserWarning):
    """A graph runs eagerly because deplodock could not compile it."""


def _device_of(example_inputs: Sequence[Any]) -> str:
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    return "cuda" if any(t.is_cuda for t in tensors) else "cpu"


def _is_symbolic(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> bool:
    """Whether Dynamo made a dimension of the graph dynamic: a non-tensor input (a SymInt)
    or a value whose shape is symbolic."""
    if not all(isinstance(x, torch.Tensor) for x in example_inputs):
        return True
    for node in graph_module.graph.nodes:
        value = node.meta.get("example_value", node.meta.get("val"))
        if isinstance(value, torch.Tensor) and any(
            not isinstance(size, int) for size in value.shape
        ):
            return True
    return False


def _single_output(graph_module: torch.fx.GraphModule) -> bool:
    """Whether the graph returns a bare tensor rather than a tuple or list of them."""
    output = next(n for n in graph_module.graph.nodes if n.op == "output")
    return not isinstance(output.args[0], tuple | list)


def _compiled_or_eager(
    module: torch.nn.Module, inputs: Sequence[torch.Tensor], single: bool
) -> Callable[..., Any] | None:
    """`module` compiled for `inputs` and returning what Dynamo expects (a tuple unless the
    graph returns one tensor); None, after one warning naming why, when deplodock cannot
    compile it (the caller runs the graph eagerly)."""
    from deplodock.api import compile as deplodock_compile

    try:
        compiled = deplodock_compile(module, list(inputs), device=_device_of(inputs))
    except Exception as error:  # never break the user's model: run this graph eagerly
        text = str(error).strip().splitlines()
        reason = text[0] if text else type(error).__name__
        warnings.warn(f"deplodock: {reason}; this graph runs eagerly", DeplodockFallbackWarning, 3)
        return None

    def run(*args: torch.Tensor) -> Any:
        outputs = compiled(*args)
        if single:
            return outputs
        return outputs if isinstance(outputs, tuple) else (outputs,)

    return run


class _Specialized(torch.nn.Module):
    """A symbolic graph with its integer inputs fixed to one call's values: a module of
    the tensor inputs alone, whose every shape is concrete, for `deplodock.compile`."""

    def __init__(self, graph_module: torch.fx.GraphModule, args: Sequence[Any]):
        super().__init__()
        self.graph_module = graph_module
        self.fixed = {i: a for i, a in enumerate(args) if not isinstance(a, torch.Tensor)}
        self.arity = len(args)

    def forward(self, *tensors: torch.Tensor) -> Any:
        given = iter(tensors)
        return self.graph_module(
            *(self.fixed[i] if i in self.fixed else next(given) for i in range(self.arity))
        )


def shape_key(args: Sequence[Any]) -> tuple[Hashable, ...]:
    """What a compiled program is specialized on: each tensor's shape, dtype and device,
    and each other input's value (Dynamo's symbolic sizes arrive as ints)."""
    return tuple(
        (tuple(a.shape), a.dtype, a.device.type) if isinstance(a, torch.Tensor) else a for a in args
    )


class PerShape:
    """A symbolic graph run compiled: one deplodock program per concrete shape, compiled on
    the first call with that shape and kept (a shape deplodock cannot compile warns once and
    runs eagerly from then on)."""

    def __init__(self, graph_module: torch.fx.GraphModule):
        self.graph_module = graph_module
        self.single = _single_output(graph_module)
        self.programs: dict[tuple[Hashable, ...], Callable[..., Any] | None] = {}

    def __call__(self, *args: Any) -> Any:
        key = shape_key(args)
        if key not in self.programs:
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            module = _Specialized(self.graph_module, args)
            self.programs[key] = _compiled_or_eager(module, tensors, self.single)
        program = self.programs[key]
        if program is None:
            return self.graph_module.forward(*args)
        return program(*(a for a in args if isinstance(a, torch.Tensor)))


def deplodock(
    graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> Callable[..., Any]:
    """The Dynamo backend: a compiled callable for `graph_module` (per concrete shape when
    Dynamo made it symbolic), or its eager forward."""
    if _is_symbolic(graph_module, example_inputs):
        return PerShape(graph_module)
    tensors = list(example_inputs)
    compiled = _compiled_or_eager(graph_module, tensors, _single_output(graph_module))
    return graph_module.forward if compiled is None else compiled
