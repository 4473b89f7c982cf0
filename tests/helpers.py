"""What many tests need: parse IR text, run `@forward` on any level, measure the error.

Tests run programs through `deplodock.interpreters.run_module`, the same entry point the
CLI uses, so a test exercises exactly the interpreter a user gets.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from deplodock.dialects import make_context
from deplodock.driver import max_relative_error
from deplodock.interpreters import run_module

__all__ = ["parse", "rel_err", "run"]

rel_err = max_relative_error


def parse(text: str, verify: bool = True) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    if verify:
        module.verify()
    return module


def run(module: ModuleOp | str, *inputs: np.ndarray) -> list[np.ndarray]:
    """Runs `@forward` of `module` (or of the IR text) on copies of `inputs`."""
    if isinstance(module, str):
        module = parse(module)
    return run_module(module, inputs)
