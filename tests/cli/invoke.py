"""Runs `deplodock` or `deplodock-opt` in this process, as a shell would, and captures it.

A subprocess costs a second or two of start-up (torch, xDSL); calling `main(argv)` costs
nothing after the first import, so the bad-input tests run in-process.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from deplodock.cli import main as deplodock_main
from deplodock.cli import opt as opt_main

TOOLS: dict[str, Callable[[Sequence[str]], int]] = {
    "deplodock": deplodock_main.main,
    "deplodock-opt": opt_main.main,
}


@dataclass(frozen=True)
class Result:
    status: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def invoke(tool: str, argv: Sequence[str], cwd: Path | None = None) -> Result:
    """`tool argv...`: its exit status (argparse's `SystemExit` included) and its output."""
    stdout, stderr = io.StringIO(), io.StringIO()
    previous = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                status = TOOLS[tool](list(argv))
            except SystemExit as exit_:
                status = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        os.chdir(previous)
    return Result(status, stdout.getvalue(), stderr.getvalue())


def assert_one_line_error(result: Result, *fragments: str, status: int = 1) -> None:
    """Exit `status`, nothing on stdout, one line on stderr containing every fragment."""
    assert "Traceback" not in result.output, result.output
    assert result.status == status, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
