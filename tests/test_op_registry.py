"""Every torch op is known to each layer that must handle it, checked by introspection.

The op list is the `Torch` dialect itself (built from the `OPS` tuple of each module under
`deplodock/dialects/torch/`). Each layer is asked what it handles through its registry, not
through a list kept here:

- the frontend: the torch ops its aten handlers build (`handled_op_types()`, the union of the
  `emits` of the `HANDLERS` registrations, which each handler run checks);
- `convert-torch-to-tensor`: the `op_type` of its patterns (`lowered_op_types()`);
- the torch-level interpreter: the op types of its `@impl`s
  (`TorchFunctions.implemented_op_types()`).

A new op that misses one of them fails here with the op's name and the layer to extend.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest
from xdsl.irdl import IRDLOperation

from deplodock.dialects import torch as T
from deplodock.dialects.torch import base
from deplodock.frontend.aten import handled_op_types
from deplodock.interpreters.torch import TorchFunctions
from deplodock.passes.torch_to_tensor import lowered_op_types

DIALECT_OPS: frozenset[type[IRDLOperation]] = frozenset(T.Torch.operations)

#: What each layer handles, as its registry reports it; the key says where to add an op.
LAYERS: dict[str, Callable[[], frozenset]] = {
    "aten handler (deplodock/frontend/aten/, `@handles(..., emits=...)`)": handled_op_types,
    "convert-torch-to-tensor pattern (deplodock/passes/torch_to_tensor/)": lowered_op_types,
    "interpreter impl (deplodock/interpreters/torch.py)": TorchFunctions.implemented_op_types,
}


def _names(ops: set) -> str:
    return ", ".join(sorted(op.name for op in ops))


def test_the_dialect_has_ops() -> None:
    """Guards the checks below against an empty dialect (they would pass vacuously)."""
    assert len(DIALECT_OPS) >= 50
    assert all(op.name.startswith("torch.") for op in DIALECT_OPS)


@pytest.mark.parametrize("layer", list(LAYERS))
def test_every_torch_op_is_handled_by(layer: str) -> None:
    missing = DIALECT_OPS - LAYERS[layer]()
    assert not missing, f"no {layer} for: {_names(missing)}"


@pytest.mark.parametrize("layer", list(LAYERS))
def test_every_handled_op_is_in_the_dialect(layer: str) -> None:
    """The reverse: a layer that knows an op the dialect does not list (an op class missing
    from its module's `OPS`, or a stale entry) is as inconsistent as a missing one."""
    extra = LAYERS[layer]() - DIALECT_OPS
    assert not extra, f"{layer} knows ops the Torch dialect does not list: {_names(extra)}"


def _ops_defined_in(module: ModuleType) -> set[type[IRDLOperation]]:
    """The concrete (named, `@irdl_op_definition`) op classes whose code is in `module`."""
    return {
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, IRDLOperation)
        and value.__module__ == module.__name__
        and isinstance(getattr(value, "name", None), str)
    }


@pytest.mark.parametrize("module", T.OP_MODULES, ids=lambda m: m.__name__)
def test_each_module_lists_the_ops_it_defines(module: ModuleType) -> None:
    """An op class left out of its module's `OPS` would be in no dialect and no check."""
    listed, defined = set(module.OPS), _ops_defined_in(module)
    assert defined, f"{module.__name__} defines no op"
    assert listed == defined, (
        f"{module.__name__}: OPS misses {_names(defined - listed) or '-'}; "
        f"lists ops defined elsewhere: {_names(listed - defined) or '-'}"
    )


def test_base_defines_no_op() -> None:
    """`base` has no `OPS`: a concrete op there would belong to no module's list."""
    assert not _ops_defined_in(base)


def test_every_op_is_a_name_of_the_package() -> None:
    """`from deplodock.dialects import torch as T; T.AddOp` for every op."""
    for op in DIALECT_OPS:
        assert getattr(T, op.__name__, None) is op, f"T.{op.__name__} is not {op.name}"
        assert op.__name__ in T.__all__
