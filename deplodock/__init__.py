"""deplodock: a hackable ML compiler from PyTorch to CUDA, built on xDSL."""

from __future__ import annotations

from typing import Any

__all__ = ["compile"]


def __getattr__(name: str) -> Any:
    """`deplodock.compile` is imported on first use, so `import deplodock` stays light."""
    if name == "compile":
        from deplodock.api import compile

        return compile
    raise AttributeError(f"module 'deplodock' has no attribute '{name}'")
