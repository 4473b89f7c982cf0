"""The device part of `cpu_simt.h` as nvcc sees it: what a translation unit carries inline.

`cpu_simt.h` is the one home of deplodock's device primitives (cp.async, vector accesses,
mma.sync): each is defined once there, its GPU side inline PTX, its CPU side the emulation.
A `.cu` file that `deplodock compile` writes must build with a plain `nvcc -c`, without the
package's backend folder on the include path, so `device_part()` gives that part of the
header as nvcc reads it: the emulation branches (`!defined(__CUDACC__)`) and the memcheck
overloads dropped, the `__CUDA_ARCH__` conditionals kept (nvcc compiles a unit once for the
host and once for the device). It is the header's own text, resolved by `unifdef`'s rule,
never a second copy kept in Python. The part keeps its guard (`DEPLODOCK_DEVICE_PRIMITIVES`),
so the CPU emulation, which starts every unit with the whole header, skips the copy.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HEADER_PATH = Path(__file__).with_name("cpu_simt.h")

#: The guard around the device part of the header: its first and last lines.
GUARD = "DEPLODOCK_DEVICE_PRIMITIVES"

#: What nvcc defines, and what only a CPU build defines, for `unifdef`.
NVCC_DEFINES: dict[str, bool] = {"__CUDACC__": True, "DEPLODOCK_MEMCHECK": False}


class HeaderError(ValueError):
    """The header's device part cannot be resolved (a conditional `unifdef` cannot read)."""


@functools.cache
def device_part() -> str:
    """The header's device part as nvcc sees it (module docstring), guard included."""
    return unifdef(_guarded_part(HEADER_PATH.read_text()), NVCC_DEFINES)


def _guarded_part(text: str) -> str:
    """From `#ifndef GUARD` to its `#endif  // GUARD`, both included."""
    start = text.index(f"#ifndef {GUARD}\n")
    end_marker = f"#endif  // {GUARD}\n"
    end = text.index(end_marker, start) + len(end_marker)
    return text[start:end]


_DIRECTIVE = re.compile(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)")


@dataclass
class _Conditional:
    """One `#if` ... `#endif` being read: whether its directives are kept in the output
    (its conditions are not all known), whether the current branch is kept, and whether a
    branch known to be taken has been seen (every later one is dropped)."""

    live: bool  # the enclosing branch is kept
    printed: bool = False
    active: bool = False
    decided: bool = False


def unifdef(text: str, defines: dict[str, bool]) -> str:
    """`text` with every conditional on the `defines` resolved (True: defined, False: not),
    as the `unifdef` tool does; conditionals on other macros are kept as they are."""
    out: list[str] = []
    stack: list[_Conditional] = []

    def live() -> bool:
        return all(c.active for c in stack)

    for line in text.splitlines(keepends=True):
        match = _DIRECTIVE.match(line)
        if match is None:
            if live():
                out.append(line)
            continue
        kind, rest = match.group(1), _strip_comment(match.group(2))
        if kind in ("if", "ifdef", "ifndef"):
            frame = _Conditional(live=live())
            stack.append(frame)
            _branch(frame, _condition(kind, rest, defines), line, out, first=True)
        elif kind == "elif":
            _branch(_top(stack, line), _condition(kind, rest, defines), line, out)
        elif kind == "else":
            _branch(_top(stack, line), True, line, out)
        else:
            frame = _top(stack, line)
            stack.pop()
            if frame.printed and frame.live:
                out.append(line)
    if stack:
        raise HeaderError(f"unterminated conditional: {len(stack)} #if without #endif")
    return "".join(out)


def _top(stack: list[_Conditional], line: str) -> _Conditional:
    if not stack:
        raise HeaderError(f"{line.strip()} without #if")
    return stack[-1]


def _branch(
    frame: _Conditional, value: bool | None, line: str, out: list[str], first: bool = False
) -> None:
    """Enters the next branch of `frame`, whose condition is `value` (None: unknown)."""
    if frame.decided or value is False:
        frame.active = False
        return
    frame.active = True
    if value is True:
        frame.decided = True
        if frame.printed and frame.live:
            out.append(_directive_like(line, "#else"))
        return
    if frame.live:  # unknown: the directive stays, as `#if` when no earlier one was kept
        out.append(line if frame.printed or first else _directive_like(line, "#if", line))
    frame.printed = True


def _directive_like(line: str, directive: str, condition_from: str | None = None) -> str:
    """`line` rewritten as `directive` (with the condition of `condition_from`, if given)."""
    indent = line[: len(line) - len(line.lstrip())]
    if condition_from is None:
        return f"{indent}{directive}\n"
    match = _DIRECTIVE.match(condition_from)
    assert match is not None
    return f"{indent}{directive}{match.group(2).rstrip()}\n"


def _strip_comment(condition: str) -> str:
    return condition.split("//", 1)[0].strip()


def _condition(kind: str, text: str, defines: dict[str, bool]) -> bool | None:
    """The value of a directive's condition under `defines`; None when it depends on
    other macros."""
    if kind == "ifdef":
        return defines.get(text)
    if kind == "ifndef":
        value = defines.get(text)
        return None if value is None else not value
    return _evaluate(text, defines)


_TOKEN = re.compile(r"\s*(defined\s*\(\s*\w+\s*\)|defined\s+\w+|&&|\|\||!|\(|\)|[^\s()!&|]+)")


def _evaluate(text: str, defines: dict[str, bool]) -> bool | None:
    """Three-valued `&&`, `||`, `!` over `defined(X)` terms: a term on a macro outside
    `defines` is unknown; any other term naming one of `defines` cannot be resolved."""
    tokens = [m.group(1) for m in _TOKEN.finditer(text)]
    position = 0

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        position += 1
        return tokens[position - 1]

    def chain(operator: str, operand: Callable[[], bool | None], absorbing: bool) -> bool | None:
        """`a op b op ...`: `absorbing` if any term is (True for ||, False for &&), else
        unknown if any term is, else the other value."""
        value = operand()
        while peek() == operator:
            take()
            terms = (value, operand())
            value = absorbing if absorbing in terms else None if None in terms else not absorbing
        return value

    def either() -> bool | None:
        return chain("||", both, True)

    def both() -> bool | None:
        return chain("&&", unary, False)

    def unary() -> bool | None:
        token = take()
        if token == "!":
            value = unary()
            return None if value is None else not value
        if token == "(":
            value = either()
            if take() != ")":
                raise HeaderError(f"unbalanced parentheses in #if {text}")
            return value
        if token.startswith("defined"):
            return defines.get(re.sub(r"defined|[\s()]", "", token))
        if any(name in token for name in defines):
            raise HeaderError(f"cannot resolve '{token}' in #if {text}")
        return None

    value = either()
    if position != len(tokens):
        raise HeaderError(f"cannot read #if {text}")
    return value
