"""`dedupe-kernels`: structurally identical kernels become one symbol.

After fusion, a model with repeated blocks has many kernels that differ only in their
names (`rms_norm`, `rms_norm_3`, ...). Each kernel is keyed by its structure without its
name and value names (`queries.structural_key`); every kernel whose key was seen before is
erased and its launches call the first one. The later stages then schedule, lower and print
each distinct kernel once. Works on the kernel symbols of the loop, tile and kernel levels;
it runs at the end of the `loop` stage, and again at the end of the `kernel` stage, where
the helper kernels scheduling added meet (`tile-split-k`'s `<name>_combine` is the same for
two products of one shape). (A `cuda.kernel` spells its own name inside its C source, so
two of them never compare equal: a program is deduplicated before its cuda stage.)

Example: `@relu` and `@relu_2` below differ only in names, so `@relu_2` goes and its
launch calls `@relu`:

    loop.kernel @relu(%x: memref<8xf32>, %y: memref<8xf32>) { ... }
    loop.kernel @relu_2(%a: memref<8xf32>, %b: memref<8xf32>) { ... }
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from deplodock.dialects.queries import (
    kernel_symbols,
    redirect_launches,
    structural_key,
    symbol_name,
)


@dataclass(frozen=True)
class DedupeKernelsPass(ModulePass):
    """Merges structurally identical kernels into the first of them (see module doc)."""

    name = "dedupe-kernels"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        first: dict[object, str] = {}
        renames: dict[str, str] = {}
        for kernel in kernel_symbols(op):
            key = structural_key(kernel, ignore=("sym_name",))
            if key in first:
                renames[symbol_name(kernel)] = first[key]
                kernel.detach()
                kernel.erase()
            else:
                first[key] = symbol_name(kernel)
        redirect_launches(op, renames)
