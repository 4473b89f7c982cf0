"""`Schedule`: the knob values of one kernel, the one type a schedule has anywhere.

A schedule is what the tile passes decided for a kernel, or are told to use: `bm=128 bn=64
group=8 ...`, integer knobs in the order the passes wrote them. It travels unchanged from
pass to tuner to cache to replay, in three spellings that all convert through this class:

- on a `loop.kernel` or `tile.kernel`, the declared optional attribute `schedule`
  (`{bm = 128 : i64, ...}`; `from_attr` / `to_attr`, `of(kernel)` / `write_on(kernel)`);
- in text, the `tile-schedule{knobs="bm=128 bn=64"}` option, `tune --print-schedule` and the
  reports (`parse` / `format`);
- in the tune cache, a JSON object (`dict(schedule)` / `Schedule(mapping)`).

Each pass reads its knob here before its option and writes back what it used
(`passes/tile/schedule.py`), so a schedule written on a loop kernel reproduces its kernel.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol

from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr
from xdsl.utils.exceptions import VerifyException

#: One `name=int` pair of the text form.
_KNOB = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=([-+]?[0-9]+)")


class ScheduleError(ValueError):
    """A schedule that is not names mapped to integers; the text says which knob."""


class Scheduled(Protocol):
    """A kernel op that carries a schedule (`loop.kernel`, `tile.kernel`)."""

    schedule: DictionaryAttr | None


class Schedule(Mapping[str, int]):
    """An immutable, ordered mapping of knob names to integers (module docstring)."""

    __slots__ = ("_knobs",)

    def __init__(self, knobs: Mapping[str, int] | Iterable[tuple[str, int]] = ()):
        pairs = knobs.items() if isinstance(knobs, Mapping) else knobs
        checked: dict[str, int] = {}
        for name, value in pairs:
            if not isinstance(name, str) or not name:
                raise ScheduleError(f"knob name {name!r}: knob names are non-empty strings")
            if isinstance(value, bool) or not isinstance(value, int):
                raise ScheduleError(f"knob {name!r} = {value!r}: knobs map names to integers")
            checked[name] = value
        self._knobs = checked

    # --- the mapping -----------------------------------------------------------------------

    def __getitem__(self, name: str) -> int:
        return self._knobs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._knobs)

    def __len__(self) -> int:
        return len(self._knobs)

    def __hash__(self) -> int:
        return hash(frozenset(self._knobs.items()))

    def __repr__(self) -> str:
        return f"Schedule({self.format()!r})"

    def with_knobs(self, knobs: Mapping[str, int]) -> Schedule:
        """This schedule with `knobs` set: a knob already present keeps its place."""
        return Schedule({**self._knobs, **knobs})

    # --- text ------------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Schedule:
        """`"bm=128 bn=64"` -> the schedule (a later pair of a name wins)."""
        pairs = []
        for pair in text.split():
            match = _KNOB.fullmatch(pair)
            if match is None:
                raise ScheduleError(f"malformed knob '{pair}' (expected name=integer)")
            pairs.append((match.group(1), int(match.group(2))))
        return cls(pairs)

    def format(self) -> str:
        """`"bm=128 bn=64"`: what `parse` reads back."""
        return " ".join(f"{name}={value}" for name, value in self._knobs.items())

    # --- IR --------------------------------------------------------------------------------

    @classmethod
    def from_attr(cls, attr: DictionaryAttr | None) -> Schedule:
        """The schedule a kernel's `schedule` attribute holds (empty when it has none)."""
        if attr is None:
            return cls()
        pairs = []
        for name, value in attr.data.items():
            if not isinstance(value, IntegerAttr):
                raise ScheduleError(f"schedule knob '{name}' must be an integer, got {value}")
            pairs.append((name, value.value.data))
        return cls(pairs)

    def to_attr(self) -> DictionaryAttr:
        """The attribute form: each knob an `i64`, in order."""
        return DictionaryAttr({name: IntegerAttr(v, 64) for name, v in self._knobs.items()})

    @classmethod
    def of(cls, kernel: Scheduled) -> Schedule:
        """The schedule a kernel op carries."""
        return cls.from_attr(kernel.schedule)

    def write_on(self, kernel: Scheduled) -> None:
        """Makes this the kernel op's schedule."""
        kernel.schedule = self.to_attr()


def verify_schedule(kernel: Scheduled, op_name: str, symbol: str) -> None:
    """The verifier's rule for a kernel's `schedule`: integer knobs only."""
    try:
        Schedule.of(kernel)
    except ScheduleError as error:
        raise VerifyException(f"{op_name} @{symbol}: {error}") from None
