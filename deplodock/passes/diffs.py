"""What each pass of a pipeline changed, as unified diffs (`--print-pass-diffs`, `-v`, `--html`).

A pipeline callback sees the module between passes; `PassDiffs` keeps the previous text and,
when a pass changed it, records a `PassChange`: the pass (with its options, as a pipeline
string names it), the stage it belongs to and the unified diff. Passes that changed nothing
are not recorded, so reading the changes is reading the pipeline's decisions. With
`every_pass` (`compile -vv`) each pass instead records the whole module after it, changed or
not, as MLIR's `--mlir-print-ir-after-all`.

It lives with the passes, not the CLI, because the driver's pipeline explorer (`--html`)
reads the same records the CLI prints.
"""

from __future__ import annotations

import difflib
import io
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.printer import Printer

#: Lines of context around each change.
CONTEXT_LINES = 2


def module_text(module: ModuleOp) -> str:
    stream = io.StringIO()
    Printer(stream=stream).print_op(module)
    return stream.getvalue()


@dataclass(frozen=True)
class PassChange:
    """One pass that changed the module (or, with `every_pass`, any pass)."""

    #: The pass as a pipeline string names it: `tile-thread{fm=8 fn=4}`.
    spec: str
    #: The stage whose pipeline ran it (None when the caller did not say).
    stage: str | None
    #: The unified diff's hunks (`@@ ... @@` lines and their +/-/context lines).
    diff: str
    #: The whole module after the pass (`every_pass` only).
    after: str | None = None

    @property
    def text(self) -> str:
        """How `--print-pass-diffs` and `-v` print it."""
        if self.after is not None:
            return f"// ---- IR after {self.spec}\n{self.after}"
        return f"// ---- {self.spec}\n{self.diff}"


class PassDiffs:
    """Call it between passes (`PassPipeline` callback shape); read `changes` or `text` at
    the end. Set `stage` before running a stage's pipeline to have its changes tagged."""

    def __init__(self, only: str | None = None, every_pass: bool = False) -> None:
        #: The one pass to show (None: every pass).
        self.only = only
        #: The whole IR after every pass, instead of the diffs of those that changed it.
        self.every_pass = every_pass
        #: The stage the passes now running belong to.
        self.stage: str | None = None
        self.previous: str | None = None
        self.changes: list[PassChange] = []

    def __call__(
        self, previous: ModulePass | None, module: ModuleOp, next_pass: ModulePass | None = None
    ) -> None:
        current = module_text(module)
        shown = previous is not None and self.only in (None, previous.name)
        if shown and self.every_pass:
            assert previous is not None
            self.changes.append(
                PassChange(str(previous.pipeline_pass_spec()), self.stage, "", after=current)
            )
        elif shown and self.previous is not None and current != self.previous:
            assert previous is not None
            diff = difflib.unified_diff(
                self.previous.splitlines(),
                current.splitlines(),
                fromfile="before",
                tofile="after",
                n=CONTEXT_LINES,
                lineterm="",
            )
            lines = list(diff)[2:]  # the ---/+++ header says nothing here
            self.changes.append(
                PassChange(str(previous.pipeline_pass_spec()), self.stage, "\n".join(lines))
            )
        self.previous = current

    @property
    def text(self) -> str:
        if not self.changes:
            what = f"pass {self.only}" if self.only else "pass"
            return f"// no {what} changed the module\n"
        return "\n".join(change.text for change in self.changes) + "\n"
