"""A progress bar over the blocks the CPU interpreters run, on a terminal only.

A tile- or kernel-level run of a large program can take minutes; the interpreters report
every finished block (`interpreters.common.BlockProgress`) and this shows one bar per
kernel launch on stderr (`@matmul_kernel  37/512 blocks`). When stderr is not a terminal
(a pipe, a log, CI) nothing is shown, so output stays clean.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deplodock.interpreters.common import BlockProgress


class BlockBars:
    """One tqdm bar per launch, replaced when the next kernel starts."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.bar: Any = None
        self.kernel = ""

    def __call__(self, kernel: str, done: int, total: int) -> None:
        if self.bar is None or kernel != self.kernel or done == 1:
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
def block_progress_bar(stream: Any = None) -> Iterator[BlockProgress | None]:
    """Yields a `BlockProgress` drawing bars on `stream` (stderr) if it is a terminal,
    else None; the bar is removed when the run ends, however it ends."""
    stream = sys.stderr if stream is None else stream
    if not (hasattr(stream, "isatty") and stream.isatty()):
        yield None
        return
    bars = BlockBars(stream)
    try:
        yield bars
    finally:
        bars.close()
