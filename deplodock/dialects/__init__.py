"""The six deplodock dialects, and the xDSL context every tool parses them with.

Dialects are registered lazily: a dialect's module is imported the first time the parser
meets its prefix, which keeps `deplodock --help` fast.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.dialects.math import Math
from xdsl.ir import Dialect

from deplodock.dialects.common import lexer

lexer.install()  # before any parse; why it is global: the module's docstring

#: dialect name -> (module, attribute) of its `Dialect` object, in lowering order.
DEPLODOCK_DIALECTS: dict[str, tuple[str, str]] = {
    "torch": ("deplodock.dialects.torch", "Torch"),
    "tensor": ("deplodock.dialects.tensor", "TensorDialect"),
    "loop": ("deplodock.dialects.loop", "Loop"),
    "tile": ("deplodock.dialects.tile", "Tile"),
    "kernel": ("deplodock.dialects.kernel", "Kernel"),
    "cuda": ("deplodock.dialects.cuda", "Cuda"),
}

#: xDSL's own dialects that deplodock IR uses at every level.
UPSTREAM_DIALECTS: tuple[Dialect, ...] = (Builtin, Func, Arith, Math)


def dialect_loader(name: str) -> Callable[[], Dialect]:
    module_name, attribute = DEPLODOCK_DIALECTS[name]
    return lambda: getattr(import_module(module_name), attribute)


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Name -> loader, as xDSL's `get_all_dialects` (upstream ones first)."""
    dialects: dict[str, Callable[[], Dialect]] = {
        d.name: (lambda d=d: d) for d in UPSTREAM_DIALECTS
    }
    dialects.update({name: dialect_loader(name) for name in DEPLODOCK_DIALECTS})
    return dialects


def make_context() -> Context:
    """A context that knows builtin, func, arith, math and the six deplodock dialects."""
    ctx = Context()
    for name, loader in get_all_dialects().items():
        ctx.register_dialect(name, loader)
    return ctx
