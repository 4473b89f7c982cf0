"""`--print-pass-diffs`: what each pass of a pipeline changed, as unified diffs.

A pipeline callback sees the module between passes; `PassDiffs` keeps the previous text and,
when a pass changed it, records the pass (with its options, as a pipeline string names it)
and the unified diff. Passes that changed nothing are not listed, so reading the output is
reading the pipeline's decisions. With `every_pass` (`compile -vv`) each pass instead
prints the whole module after it, changed or not, as MLIR's `--mlir-print-ir-after-all`.
"""

from __future__ import annotations

import difflib
import io

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.printer import Printer

#: Lines of context around each change.
CONTEXT_LINES = 2


def module_text(module: ModuleOp) -> str:
    stream = io.StringIO()
    Printer(stream=stream).print_op(module)
    return stream.getvalue()


class PassDiffs:
    """Call it between passes (`PassPipeline` callback shape); read `text` at the end."""

    def __init__(self, only: str | None = None, every_pass: bool = False) -> None:
        #: The one pass to show (None: every pass).
        self.only = only
        #: The whole IR after every pass, instead of the diffs of those that changed it.
        self.every_pass = every_pass
        self.previous: str | None = None
        self.parts: list[str] = []

    def __call__(
        self, previous: ModulePass | None, module: ModuleOp, next_pass: ModulePass | None = None
    ) -> None:
        current = module_text(module)
        shown = previous is not None and self.only in (None, previous.name)
        if shown and self.every_pass:
            assert previous is not None
            self.parts.append(f"// ---- IR after {previous.pipeline_pass_spec()}\n{current}")
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
            self.parts.append(f"// ---- {previous.pipeline_pass_spec()}\n" + "\n".join(lines))
        self.previous = current

    @property
    def text(self) -> str:
        if not self.parts:
            what = f"pass {self.only}" if self.only else "pass"
            return f"// no {what} changed the module\n"
        return "\n".join(self.parts) + "\n"
