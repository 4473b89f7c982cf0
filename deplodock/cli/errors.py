"""One-line (or one-diagnostic) error reports for the command-line tools.

A user who types a bad expression, a malformed `.mlir` file or an unsupported op gets a
message that names the problem and where it is, and a non-zero exit, never a traceback;
`--traceback` re-raises for the curious. Both tools run their command through
`run_command`, so the rules (which errors are the user's, what Ctrl-C prints, how deep
input may nest) live here once.

Exit status: 1 for the user's errors, `INTERNAL` (70, `EX_SOFTWARE` of sysexits.h) for a bug
in deplodock (`passes/internal_errors.py`: a pass's assertion, or Python's own bug types
anywhere), which says so and asks to be reported, and `INTERRUPTED` after Ctrl-C.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from traceback import extract_tb
from typing import NoReturn

from xdsl.utils.exceptions import ArgSpecParseError, ParseError, VerifyException

from deplodock.passes.internal_errors import InternalError, is_bug

#: Exit status after Ctrl-C, as a shell reports a command killed by SIGINT (128 + 2).
INTERRUPTED = 130

#: The package's directory: errors raised from files below it are deplodock's own.
PACKAGE = Path(__file__).resolve().parent.parent

#: Exit status of an internal error (a bug in deplodock): sysexits.h's EX_SOFTWARE.
INTERNAL = 70

#: Python frames a command may use. Parsing, verifying and printing IR, and walking a `-c`
#: expression's syntax tree, recurse once or twice per nesting level; Python's default
#: (1000) fails a 500-term sum. Deeper input is refused with one line, not a crash.
RECURSION_LIMIT = 10_000


def usage_error(prog: str, message: str) -> NoReturn:
    """A command line the parser cannot read: `prog: error: message`, one line, exit 1, as
    every other error of the tools (argparse prints the whole usage first and exits 2; the
    usage is what `--help` is for)."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(1)


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are `usage_error`s; its subcommands' parsers are too."""

    def error(self, message: str) -> NoReturn:
        usage_error(self.prog, message)


def describe(error: BaseException, source: str | None = None) -> str:
    """The user-facing text of an error: a parse diagnostic keeps its caret, others one line.

    `source` (the input file or `-c`) is named where the error itself cannot say where.
    """
    if isinstance(error, ParseError):
        return str(error).rstrip()
    if isinstance(error, RecursionError):
        where = f"{source}: " if source else ""
        return f"{where}nested too deeply to process (over Python's recursion limit)"
    if isinstance(error, UnicodeDecodeError):
        where = f"{source}: " if source else ""
        return f"{where}not UTF-8 text (byte {error.start}: {error.reason})"
    if isinstance(error, VerifyException):
        return describe_verify_error(error, source)
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    if isinstance(error, ArgSpecParseError):
        return describe_pipeline_error(error)
    text = str(error).strip() or type(error).__name__
    first_line = text.splitlines()[0]
    return first_line


def describe_verify_error(error: VerifyException, source: str | None) -> str:
    """`FILE: op.name: rule`: xDSL's message names the rule; the op it failed on is only
    marked (`^^^`) in the printed module it attaches as a note, so it is read from there."""
    text = (str(error).strip() or type(error).__name__).splitlines()[0]
    op = failing_op(error)
    if op is not None and op not in text:
        text = f"{op}: {text}"
    return f"{source}: {text}" if source and source != "-c" else text


def failing_op(error: VerifyException) -> str | None:
    """The name of the op xDSL underlined in the module printed with a verifier error."""
    for note in getattr(error, "__notes__", ()):
        lines = str(note).splitlines()
        for above, line in itertools.pairwise(lines):
            underline = re.fullmatch(r"\s*\^+-*\s*", line)
            if underline and (match := re.search(r'"([\w.]+)"', above)):
                return match.group(1)
    return None


def describe_pipeline_error(error: ArgSpecParseError) -> str:
    """xDSL's multi-line pipeline diagnostic (location, text, caret, message) as one line."""
    lines = [line for line in str(error).splitlines()[1:] if line.strip()]
    if len(lines) < 4:
        return f"bad pass pipeline: {' '.join(line.strip() for line in lines)}"
    _, text, caret, message = lines[-4:]
    return f"bad pass pipeline '{text}': {message.strip()} (column {caret.index('^') + 1})"


def report_error(error: BaseException, tool: str, source: str | None = None) -> int:
    if isinstance(error, InternalError) or (is_bug(error) and raised_by_deplodock(error)):
        return report_internal_error(error, tool)
    print(f"{tool}: error: {describe(error, source)}", file=sys.stderr)
    return 1


def raised_by_deplodock(error: BaseException) -> bool:
    """Whether deplodock's own code raised `error` (its innermost frame is in the package).

    Outside a pass, Python's bug types from a library deplodock calls (transformers reading
    a malformed config.json, torch tracing the user's module) are the input's doing."""
    frames = extract_tb(error.__traceback__)
    return bool(frames) and Path(frames[-1].filename).is_relative_to(PACKAGE)


def report_internal_error(error: BaseException, tool: str) -> int:
    """One line that says the fault is deplodock's, where it was, and what to do."""
    if not isinstance(error, InternalError):
        error = InternalError(None, None, error)
    print(f"{tool}: {error} (please report; --traceback shows where)", file=sys.stderr)
    return INTERNAL


@contextmanager
def deep_recursion() -> Iterator[None]:
    """Raises Python's recursion limit to `RECURSION_LIMIT` for one command, then restores it."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, RECURSION_LIMIT))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def _silence_stdout() -> None:
    """Points stdout at /dev/null, so the interpreter's final flush into the closed pipe
    does not print its own error at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def run_command(
    command: Callable[[], int], tool: str, traceback: bool, source: str | None = None
) -> int:
    """Runs `command`, turning what a user can cause into one line on stderr and a status.

    Errors exit 1, bugs `INTERNAL`; Ctrl-C exits `INTERRUPTED` with one line (files are
    written atomically, so an interrupted run leaves the previous ones as they were).
    `traceback` re-raises.
    """
    try:
        with deep_recursion():
            return command()
    except KeyboardInterrupt:
        if traceback:
            raise
        print(f"{tool}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:  # `deplodock compile ... | head`: the reader has what it wanted
        _silence_stdout()
        return 0
    except (Exception, ArgSpecParseError) as error:
        if traceback:
            raise
        return report_error(error, tool, source)
