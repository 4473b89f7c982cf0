"""`dedupe-kernels`: structurally identical kernels become one symbol.

After fusion, a model with repeated blocks has many kernels that differ only in their
names (`rms_norm`, `rms_norm_3`, ...). Each kernel is keyed by its printed text with its own
name replaced (a structural hash that ignores the symbol); every kernel whose key was seen
before is erased and its launches call the first one. The later stages then schedule,
lower and print each distinct kernel once. Works at any level that has kernel symbols
(`loop.kernel`, `tile.kernel`, `kernel.func`, `cuda.kernel`); it runs at the end of the
`loop` stage.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, SymbolRefAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.printer import Printer
from xdsl.traits import SymbolOpInterface


def kernel_symbols(module: ModuleOp) -> list[Operation]:
    """The module's top-level symbols other than functions: its kernels."""
    return [
        op for op in module.ops if op.has_trait(SymbolOpInterface) and not isinstance(op, FuncOp)
    ]


def _name(kernel: Operation) -> str:
    name = kernel.properties.get("sym_name") or kernel.attributes.get("sym_name")
    assert isinstance(name, StringAttr)
    return name.data


def structural_key(kernel: Operation) -> str:
    """The kernel's text without value names and with its own name replaced: equal keys,
    interchangeable kernels."""
    stream = io.StringIO()
    Printer(stream=stream).print_op(kernel.clone(clone_name_hints=False))
    return re.sub(rf"\b{re.escape(_name(kernel))}\b", "@@kernel@@", stream.getvalue())


def redirect_launches(module: ModuleOp, renames: dict[str, str]) -> None:
    """Points every op whose `callee` names a key of `renames` at its value."""
    if not renames:
        return
    for op in module.walk():
        callee = op.properties.get("callee")
        if isinstance(callee, SymbolRefAttr) and callee.root_reference.data in renames:
            op.properties["callee"] = SymbolRefAttr(renames[callee.root_reference.data])


@dataclass(frozen=True)
class DedupeKernelsPass(ModulePass):
    """Merges structurally identical kernels into the first of them (see module doc)."""

    name = "dedupe-kernels"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        first: dict[str, str] = {}
        renames: dict[str, str] = {}
        for kernel in kernel_symbols(op):
            key = structural_key(kernel)
            if key in first:
                renames[_name(kernel)] = first[key]
                kernel.detach()
                kernel.erase()
            else:
                first[key] = _name(kernel)
        redirect_launches(op, renames)
