"""deplodock: a hackable ML compiler from PyTorch to CUDA, built on xDSL."""

from __future__ import annotations

from typing import Any

__all__ = ["compile", "generator"]


def __getattr__(name: str) -> Any:
    """`deplodock.compile` and `deplodock.generator` are imported on first use, so `import
    deplodock` stays light."""
    if name == "compile":
        from deplodock.api import compile

        return compile
    if name == "generator":
        from deplodock.generation import generator

        return generator
    raise AttributeError(f"module 'deplodock' has no attribute '{name}'")
