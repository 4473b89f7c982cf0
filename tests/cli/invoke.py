"""Runs `deplodock` or `deplodock-opt` in this process, as a shell would, and captures it.

A subprocess costs a second or two of start-up (torch, xDSL); calling `main(argv)` costs
nothing after the first import, so the bad-input tests run in-process.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
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


#: The devices `device` can stand in for: name -> (major, minor) on Linux.
DEVICES = {"full": (1, 7), "null": (1, 3)}


def device(directory: Path, name: str) -> Path:
    """`/dev/<name>` (`full`: every write fails with ENOSPC; `null`: every write succeeds),
    or, for root, a twin of it made in `directory`: a writer that replaced its target
    rather than writing it (a temporary and a rename) would replace the machine's own
    device as root, and must harm only the twin. A non-root writer cannot replace /dev's."""
    real = Path("/dev") / name
    if not real.exists() or not stat.S_ISCHR(real.stat().st_mode):
        import pytest

        pytest.skip(f"no {real} here")
    if os.geteuid() != 0:
        return real
    twin = directory / name
    if not twin.exists():
        os.mknod(twin, stat.S_IFCHR | 0o666, os.makedev(*DEVICES[name]))
        try:
            open(twin, "wb").close()  # a filesystem mounted nodev refuses to open it
        except OSError:
            twin.unlink()
            return real  # safe for a writer that writes devices in place, as files.py does
    return twin


def is_device(path: Path) -> bool:
    """`path` is still a character device (not replaced by a regular file)."""
    return stat.S_ISCHR(os.lstat(path).st_mode)
