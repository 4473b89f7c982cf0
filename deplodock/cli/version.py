"""`--version` of both tools: one line with deplodock's version and what it runs on.

`deplodock-opt` spells it only `--version`, as `mlir-opt` does: `-v` means `--verbose` in
`deplodock`, and xdsl-opt's `-v` for the version is not taken over (`cli/opt.py`).
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any


def _version_of(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def version_line(tool: str) -> str:
    """`deplodock 0.1.0 (xdsl 0.74.0, torch 2.13.0+cpu, python 3.11.9)`."""
    used = ", ".join(f"{package} {_version_of(package)}" for package in ("xdsl", "torch"))
    return f"{tool} {_version_of('deplodock')} ({used}, python {platform.python_version()})"


class VersionAction(argparse.Action):
    """`--version`: prints `version_line(tool)` and exits 0 (the versions are looked up
    only then, not at every start)."""

    def __init__(self, option_strings: Sequence[str], dest: str, tool: str, **kwargs: Any):
        kwargs.setdefault("help", "print the version of deplodock, xDSL, torch and Python")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)
        self.tool = tool

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(version_line(self.tool))
        parser.exit()
