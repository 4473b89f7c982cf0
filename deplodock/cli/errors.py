"""One-line (or one-diagnostic) error reports for the command-line tools.

A user who types a bad expression, a malformed `.mlir` file or an unsupported op gets a
message that names the problem and where it is, and a non-zero exit, never a traceback;
`--traceback` re-raises for the curious.
"""

from __future__ import annotations

import sys

from xdsl.utils.exceptions import ParseError


def describe(error: BaseException) -> str:
    """The user-facing text of an error: a parse diagnostic keeps its caret, others one line."""
    if isinstance(error, ParseError):
        return str(error).rstrip()
    text = str(error).strip() or type(error).__name__
    first_line = text.splitlines()[0]
    return first_line


def report_error(error: BaseException, tool: str) -> int:
    print(f"{tool}: error: {describe(error)}", file=sys.stderr)
    return 1
