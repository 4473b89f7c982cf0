"""Telling the compiler's faults from the user's.

A pass that trips over one of its own assumptions (an `assert`, a key or attribute that
should have been there) has found a bug in deplodock, not in its input: the user can only
report it. Such an error is re-raised as `InternalError`, which names the pass and, where
the pass works kernel by kernel (`tile/kernel_pass.py`), the kernel, so the command line
says so in one line and exits with a status of its own (`cli/errors.py`).

What counts as a bug is the exact type: Python's own `AssertionError`, `KeyError`,
`TypeError`... A pass that refuses its input on purpose raises something else
(`PassFailedException` for a bad knob, `ValueError` for a bad option, the frontend's
`UnsupportedOpError`, `UnsupportedElementType`, a subclass of `TypeError` that is therefore
not a bug), and that error reaches the user unchanged.

    with blame("tile-mma", "matmul_kernel"):
        assert start is not None, "not a serial tile.for"
    ==> InternalError: internal error in pass tile-mma on kernel @matmul_kernel:
        not a serial tile.for
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipelineCallbackType

#: The exception types that only a mistake in deplodock's own code raises.
BUG_TYPES: tuple[type[BaseException], ...] = (
    AssertionError,
    AttributeError,
    IndexError,
    KeyError,
    NameError,
    NotImplementedError,
    StopIteration,
    TypeError,
    UnboundLocalError,
    ZeroDivisionError,
)


def is_bug(error: BaseException) -> bool:
    """Whether `error` is one of `BUG_TYPES` itself (a subclass is a deliberate report)."""
    return type(error) in BUG_TYPES


def first_line(error: BaseException) -> str:
    """The first line of an error's message (with the next where it ends in a colon, as a
    verifier's "operand 'rhs' does not verify:" does), or its type's name when it has none."""
    text = str(error).strip()
    if isinstance(error, KeyError) and error.args:
        text = f"missing key {error.args[0]!r}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    line = lines[0]
    for following in lines[1:]:
        if not line.endswith(":"):
            break
        line = f"{line} {following}"
    return line


class InternalError(Exception):
    """A bug in deplodock found while running a pass (module docstring)."""

    def __init__(self, pass_name: str | None, kernel: str | None, cause: BaseException):
        self.pass_name, self.kernel, self.cause = pass_name, kernel, cause
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f" in pass {self.pass_name}" if self.pass_name else ""
        if self.kernel:
            where += f" on kernel @{self.kernel}"
        return f"internal error{where}: {first_line(self.cause)}"


@contextmanager
def blame(pass_name: str | None, kernel: str | None = None) -> Iterator[None]:
    """Re-raises a bug raised inside as an `InternalError` naming the pass (and kernel)."""
    try:
        yield
    except InternalError as error:
        error.pass_name = error.pass_name or pass_name
        error.kernel = error.kernel or kernel
        raise
    except Exception as error:
        if not is_bug(error):
            raise
        raise InternalError(pass_name, kernel, error) from error


@dataclass
class RunningPass:
    """A `PassPipeline` callback that remembers which pass is about to run, so an error out
    of the pipeline can be blamed on it; calls `inner` (the caller's own callback) too."""

    inner: PassPipelineCallbackType | None = None
    name: str | None = field(default=None, init=False)

    def __call__(
        self, previous: ModulePass | None, module: ModuleOp, next_pass: ModulePass | None
    ) -> None:
        if self.inner is not None:
            self.inner(previous, module, next_pass)
        self.name = next_pass.name if next_pass is not None else None

    @contextmanager
    def blaming(self) -> Iterator[None]:
        """`blame` on whichever pass was running when an error came out of the pipeline."""
        try:
            yield
        except InternalError as error:
            error.pass_name = error.pass_name or self.name
            raise
        except Exception as error:
            if not is_bug(error):
                raise
            raise InternalError(self.name, None, error) from error
