"""Core ATen coverage: how each op of PyTorch's Core ATen opset reaches deplodock, or why
it is refused.

The opset is torch's own (`decompositions.core_aten_ops()`), so a new torch shows its new
ops here as "not yet" until they lower or get a reason below. Every op not refused has a
program in `tests/frontend/core_aten_samples.py` that `tests/frontend/test_core_aten_ops.py`
compiles and compares with eager PyTorch: the status is measured, not claimed.
`python -m deplodock.frontend.aten.coverage` prints the count and the ops that do not lower.
"""

from __future__ import annotations

import torch

from deplodock.frontend.aten.core import OutputOf, handler_of
from deplodock.frontend.aten.decompositions import IMPORTER_OPS, core_aten_ops, decomposed

#: The Core ATen ops deplodock refuses, each with its one-line reason.
REFUSED: dict[str, str] = {
    "aten.nonzero.default": "data-dependent output shape",
    "aten._local_scalar_dense.default": "`.item()`: a tensor read as a number (data-dependent)",
    "aten.rand.default": "random numbers inside the model",
    "aten.randn.default": "random numbers inside the model",
    "aten.randperm.default": "random numbers inside the model",
    "aten._fft_r2c.default": "complex dtypes",
    "aten._fft_c2r.default": "complex dtypes",
}


def _returns_shape(op: torch._ops.OpOverload) -> bool:
    """The op returns a size, stride or flag (`sym_size`): with static shapes, a number
    at capture, never an op in the graph."""
    returns = [str(r.type) for r in op._schema.returns]
    return bool(returns) and all(t in ("SymInt", "SymBool", "int", "bool") for t in returns)


def status(op: torch._ops.OpOverload) -> str:
    """How `op` lowers: 'handler', 'decomposed' (by PyTorch, into ops that lower),
    'resolved at capture', 'refused: <reason>', or 'not yet'."""
    name = str(op)
    if name in REFUSED:
        return f"refused: {REFUSED[name]}"
    if handler_of(op) is not None or handler_of(OutputOf(op, 0)) is not None:
        return "handler"
    if op in IMPORTER_OPS:
        return "handler (each output its own op, at import)"
    if op is torch.ops.aten.resize_.default:
        return "functionalized at capture (a same-size resize is a view)"
    if decomposed(op):
        return "decomposed"
    if _returns_shape(op):
        return "resolved at capture"
    return "not yet"


def coverage() -> dict[str, str]:
    """Every Core ATen op of this torch -> its `status`."""
    return {str(op): status(op) for op in core_aten_ops()}


def summary(table: dict[str, str]) -> str:
    """The closing count of a `coverage()` table: `N of M Core ATen ops (torch V) lower;
    K refused with reasons; J not yet`."""
    refused = sum(s.startswith("refused") for s in table.values())
    missing = sum(s == "not yet" for s in table.values())
    lowered = len(table) - refused - missing
    version = torch.__version__.split("+")[0]
    return (
        f"{lowered} of {len(table)} Core ATen ops (torch {version}) lower; "
        f"{refused} refused with reasons; {missing} not yet"
    )


def main() -> None:
    """`python -m deplodock.frontend.aten.coverage`: the count, then each op that does not
    lower with its status."""
    table = coverage()
    print(summary(table))
    for name, status_ in sorted(table.items()):
        if status_.startswith("refused") or status_ == "not yet":
            print(f"  {name}: {status_}")


if __name__ == "__main__":
    main()
