"""Executable documentation: the `console` blocks of the README, the walkthrough and every
guide under docs/guides/ are real runs.

A block looks like

    ```console
    $ deplodock compile -c "torch.relu(torch.randn(4, 8))" --ir tensor
    <what the command printed>
    ```

`tests/test_docs.py` re-runs every command and fails when the printed output drifted;
`python tests/docs_examples.py --update` rewrites the blocks with today's output.

A guide quotes code from the repository in `python` / `mlir` blocks whose first line is a
comment naming the file (`# deplodock/interpreters/torch.py`); the test checks that the
rest of the block is still in that file, verbatim, so a guide cannot show stale code.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUIDES = tuple(sorted((ROOT / "docs" / "guides").rglob("*.md")))
DOCUMENTS = (
    ROOT / "README.md",
    ROOT / "docs" / "walkthrough.md",
    ROOT / "docs" / "scheduling.md",
    *GUIDES,
)
BLOCK = re.compile(r"```console\n\$ (?P<command>[^\n]*)\n(?P<output>.*?)```", re.DOTALL)
CODE = re.compile(r"```(?:python|mlir)\n(?P<code>.*?)```", re.DOTALL)
QUOTE_SOURCE = re.compile(r"(?:#|//) (?P<path>[\w./-]+)\n")


@dataclass(frozen=True)
class Example:
    document: Path
    command: str
    output: str


def examples(document: Path) -> list[Example]:
    text = document.read_text()
    return [Example(document, m["command"], m["output"]) for m in BLOCK.finditer(text)]


@dataclass(frozen=True)
class Quote:
    """A code block of a guide: `path` is the file it claims to quote ('' if none)."""

    document: Path
    path: str
    code: str


def quotes(document: Path) -> list[Quote]:
    found = []
    for match in CODE.finditer(document.read_text()):
        source = QUOTE_SOURCE.match(match["code"])
        code = match["code"][source.end() :] if source else match["code"]
        found.append(Quote(document, source["path"] if source else "", code))
    return found


def run_command(command: str) -> str:
    """Runs a `deplodock`/`deplodock-opt` command in-process from the repository root."""
    from deplodock.cli import main as deplodock_main
    from deplodock.cli import opt as opt_main

    argv = shlex.split(command)
    entry = {"deplodock": deplodock_main.main, "deplodock-opt": opt_main.main}[argv[0]]
    stdout, stderr = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            status = entry(argv[1:])
    finally:
        os.chdir(cwd)
    if status != 0:
        raise RuntimeError(f"`{command}` exited with {status}: {stderr.getvalue().strip()}")
    return stdout.getvalue()


def update(document: Path) -> None:
    text = document.read_text()

    def rerun(match: re.Match[str]) -> str:
        output = run_command(match["command"])
        return f"```console\n$ {match['command']}\n{output}```"

    document.write_text(BLOCK.sub(rerun, text))


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/docs_examples.py --update")
    for path in DOCUMENTS:
        update(path)
        print(f"updated {path.relative_to(ROOT)}")
