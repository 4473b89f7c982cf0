"""The generated table of supported aten ops (`docs/supported-ops.md`).

One row per aten overload in `HANDLERS`, with the torch ops its handler builds (the
registration's `emits`), grouped by the module that handles it. `tests/frontend/
test_supported_ops_table.py` fails when the file differs from `supported_ops_markdown()`,
so the table cannot go stale; every torch op listed has a decomposition test of its own
(`tests/passes/test_convert_torch_to_tensor.py` checks that).
"""

from __future__ import annotations

from collections import defaultdict

from deplodock.frontend.aten.core import HANDLERS, target_name
from deplodock.frontend.aten.coverage import coverage, summary

HEADER = """# Supported aten ops

Generated from the frontend's aten table (`deplodock/frontend/aten/`) by
`supported_ops_markdown()` in `deplodock/frontend/aten/table.py`; regenerate with

```bash
python -m deplodock.frontend.aten.table > docs/supported-ops.md
```

An op no handler takes is first decomposed by PyTorch (`aten/decompositions.py`), or by
deplodock's own decompositions where PyTorch has none into aten ops (`aten.unfold`,
`aten.adaptive_max_pool2d`, which `adaptive_max_pool1d` calls); an op still left is
refused at capture with one line naming every unsupported op (and, for a Core ATen op
refused by design, its reason). The torch ops are described in [ir.md](ir.md); the ones a
handler may add on the side (`torch.constant` for Python scalars, `torch.cast` for dtype
promotion) are not listed.
"""

#: the module (or package) of a handler -> the section it is listed under
SECTIONS = {
    "deplodock.frontend.aten.elementwise": "Elementwise: arithmetic, activations, comparisons",
    "deplodock.frontend.aten.arithmetic": "Math functions, rounding, remainders, bitwise ops",
    "deplodock.frontend.aten.structured": "Reductions, contractions, layout, gathers",
    "deplodock.frontend.aten.composite": (
        "Composites: norms, losses, pooling, convolution, recurrent layers"
    ),
}


def supported_ops_markdown() -> str:
    """The whole of `docs/supported-ops.md`: one table per handler module, rows sorted."""
    rows: dict[str, list[str]] = defaultdict(list)
    for target, registration in HANDLERS.items():
        module = _section(registration.handler.__module__)
        torch_ops = ", ".join(f"`{op.name}`" for op in sorted(registration.emits, key=_name))
        rows[module].append(f"| `{target_name(target)}` | {torch_ops or '(none)'} |")
    parts = [HEADER]
    for module, title in SECTIONS.items():
        parts.append(f"\n## {title}\n\n| aten op | torch ops |\n|---|---|\n")
        parts.append("".join(row + "\n" for row in sorted(rows.pop(module, []))))
    assert not rows, f"handlers outside the known modules: {sorted(rows)}"
    parts.append(core_aten_markdown())
    return "".join(parts)


def core_aten_markdown() -> str:
    """The Core ATen section: the count that lowers, then one row per op of torch's opset."""
    table = coverage()
    lines = [
        "\n## Core ATen coverage\n\n",
        f"{summary(table)}. The opset is torch's own "
        "(the overloads tagged `core`), each op measured by "
        "`tests/frontend/test_core_aten_ops.py`: 'handler' is a row above, 'decomposed' is "
        "PyTorch's decomposition into ops that lower, 'resolved at capture' a size that static "
        "shapes make a number.\n\n| Core ATen op | status |\n|---|---|\n",
    ]
    lines += [f"| `{name}` | {status} |\n" for name, status in sorted(table.items())]
    return "".join(lines)


def _section(module: str) -> str:
    """The `SECTIONS` key of a handler's module: the module, or the package it is in
    (`...aten.composite.losses` is listed under `...aten.composite`)."""
    while module not in SECTIONS and "." in module:
        module = module.rpartition(".")[0]
    return module


def _name(op: type) -> str:
    return op.name  # type: ignore[attr-defined]


if __name__ == "__main__":
    print(supported_ops_markdown(), end="")
