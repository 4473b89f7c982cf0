"""Progress bars for long work, on a terminal only (tqdm, which transformers brings along).

- a model compile: one bar over its phases (`model`, `torch`, `segment`, the stages,
  `stitch`), labelled with the current one, with an ETA from typical phase durations;
- a tile- or kernel-level CPU run: one bar per kernel launch over its blocks (the
  interpreters report each finished block, or batch of blocks at the kernel level,
  `interpreters.common.BlockProgress`);
- a bench suite (`python -m bench.kernels`): one bar over its cases, labelled with the case
  running, its per-case lines printed above it.

When stderr is not a terminal (a pipe, a log, CI) no bar is drawn, so output stays clean;
a command still running after `HEARTBEAT_S` prints instead one plain line that often
(`heartbeat`: the command, what it is doing, the seconds so far), so a 2-minute model
compile or tune piped to a log is not silent. `--quiet` shows neither.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deplodock.interpreters.common import BlockProgress


class BlockBars:
    """One tqdm bar per launch, replaced when the next launch starts: another kernel, or
    the count of done blocks starting over (a batch reports several blocks at once, so a
    new launch of the same kernel need not begin at 1)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.bar: Any = None
        self.kernel = ""

    def __call__(self, kernel: str, done: int, total: int) -> None:
        if self.bar is None or kernel != self.kernel or done <= self.bar.n:
            self.close()
            from tqdm import tqdm  # only on a terminal

            self.bar = tqdm(
                total=total,
                desc=f"@{kernel}",
                unit="block",
                leave=False,
                file=self.stream,
                dynamic_ncols=True,
            )
            self.kernel = kernel
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


@contextmanager
def block_progress_bar(quiet: bool = False, stream: Any = None) -> Iterator[BlockProgress | None]:
    """Yields a `BlockProgress` drawing bars on `stream` (stderr) if it is a terminal and
    not `quiet`, else None; the bar is removed when the run ends, however it ends."""
    stream = sys.stderr if stream is None else stream
    if not draws(stream, quiet):
        yield None
        return
    bars = BlockBars(stream)
    try:
        yield bars
    finally:
        bars.close()


#: Seconds per phase of a model compile (Qwen2.5-7B, 28 layers, on the 2-core development
#: machine): the bar advances by these, so its ETA follows where the time really goes.
PHASE_WEIGHTS = {
    "model": 2.7,
    "torch": 3.6,
    "segment": 0.15,
    "tensor": 0.07,
    "loop": 1.3,
    "tile": 0.5,
    "kernel": 0.15,
    "cuda": 0.05,
    "stitch": 0.1,
}


class PhaseBar:
    """One tqdm bar over the phases of a compile; the current phase is its label."""

    def __init__(self, phases: list[str], stream: Any) -> None:
        from tqdm import tqdm  # only on a terminal

        self.weights = [PHASE_WEIGHTS.get(phase, 0.1) for phase in phases]
        self.bar = tqdm(
            total=sum(self.weights),
            file=stream,
            leave=False,
            dynamic_ncols=True,
            bar_format="{desc:<16}{percentage:3.0f}%|{bar}| {elapsed}<{remaining}",
        )
        self.done = 0.0
        self.current: str | None = None

    def __call__(self, phase: str) -> None:
        if self.current is not None:
            self.done += PHASE_WEIGHTS.get(self.current, 0.1)
            self.bar.update(min(self.done, self.bar.total) - self.bar.n)
        self.current = phase
        self.bar.set_description_str(f"compile: {phase}")

    def close(self) -> None:
        self.bar.close()


@contextmanager
def phase_progress_bar(
    phases: list[str], quiet: bool = False, stream: Any = None
) -> Iterator[Callable[[str], None] | None]:
    """Yields a phase callback drawing a bar on `stream` (stderr) if it is a terminal and
    not `quiet`, else None; the bar is removed when the compile ends, however it ends."""
    stream = sys.stderr if stream is None else stream
    if not draws(stream, quiet):
        yield tell if _beating is not None else None  # the heartbeat names the phase
        return
    bar = PhaseBar(phases, stream)
    try:
        yield bar
    finally:
        bar.close()


class CountBar:
    """One tqdm bar over a known number of items (the cases of a bench suite), labelled
    with the item now running; each item's line is printed above the bar (`finish`)."""

    def __init__(self, total: int, label: str, stream: Any) -> None:
        from tqdm import tqdm  # only on a terminal

        self.label = label
        self.stream = stream
        self.bar = tqdm(
            total=total,
            file=stream,
            leave=False,
            dynamic_ncols=True,
            unit="case",
            bar_format="{desc} {n_fmt}/{total_fmt}|{bar}| {elapsed}<{remaining}",
        )

    def start(self, item: str) -> None:
        self.bar.set_description_str(f"{self.label}: {item}")

    def finish(self, emit: Callable[[str], object], line: str) -> None:
        """`emit(line)` for an item done (the bar cleared first and redrawn after, so they
        don't mix), and one more item counted."""
        with self.bar.external_write_mode(file=self.stream):
            emit(line)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


class PlainCount:
    """`CountBar`'s stand-in where no bar is drawn: each item's line, and nothing else."""

    def start(self, item: str) -> None:
        pass

    def finish(self, emit: Callable[[str], object], line: str) -> None:
        emit(line)


@contextmanager
def count_progress_bar(
    total: int, label: str, quiet: bool = False, stream: Any = None
) -> Iterator[CountBar | PlainCount]:
    """Yields a `CountBar` on `stream` (stderr) if it is a terminal and not `quiet`, else a
    `PlainCount`; the bar is removed when the work ends, however it ends."""
    stream = sys.stderr if stream is None else stream
    if not draws(stream, quiet):
        yield PlainCount()
        return
    bar = CountBar(total, label, stream)
    try:
        yield bar
    finally:
        bar.close()


def draws(stream: Any, quiet: bool) -> bool:
    """Whether a bar is drawn on `stream`: a terminal, and no `--quiet`."""
    return not quiet and hasattr(stream, "isatty") and stream.isatty()


#: Seconds between the plain progress lines of a command whose stderr is not a terminal.
HEARTBEAT_S = 10.0


class Heartbeat:
    """Prints `deplodock: WHAT: STATUS (N s)` on `stream` every `interval` seconds from a
    daemon thread until stopped; `status` is what the command last said it was doing."""

    def __init__(self, what: str, stream: Any, interval: float) -> None:
        self.what, self.stream, self.interval = what, stream, interval
        self.status = "working"
        self.start = time.monotonic()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="deplodock-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self.stopped.wait(self.interval):
            seconds = time.monotonic() - self.start
            line = f"deplodock: {self.what}: {self.status} ({seconds:.0f} s)"
            try:
                print(line, file=self.stream, flush=True)
            except (OSError, ValueError):  # the reader went away: the command hears it itself
                return

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()


_beating: Heartbeat | None = None


def tell(status: str) -> None:
    """What the command is doing now (a compile phase, the kernel being tuned): the next
    heartbeat line says it. Nothing without a heartbeat."""
    if _beating is not None:
        _beating.status = status


@contextmanager
def heartbeat(
    what: str, quiet: bool = False, stream: Any = None, interval: float | None = None
) -> Iterator[None]:
    """A `Heartbeat` around a command whose `stream` (stderr) is a pipe or a file, not a
    terminal (which gets bars) and not an in-process capture (no file descriptor: the
    tests' `invoke`, whose output is compared whole)."""
    global _beating
    stream = sys.stderr if stream is None else stream
    if quiet or _beating is not None or not _is_pipe_or_file(stream):
        yield
        return
    _beating = Heartbeat(what, stream, HEARTBEAT_S if interval is None else interval)
    _beating.thread.start()
    try:
        yield
    finally:
        _beating.stop()
        _beating = None


def _is_pipe_or_file(stream: Any) -> bool:
    if hasattr(stream, "isatty") and stream.isatty():
        return False
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return False
    return True
