"""Tuned schedules back into a compile: the cache's winners written on the loop kernels.

`deplodock compile` and `run` lower a program as always; just before the tile stage, each
loop kernel whose structural hash has a record in the tune cache (for the chosen target,
this toolchain and cost source) gets the winner's knobs as its `schedule` attribute, which
`convert-loop-to-tile` carries over and every scheduling pass reads before its own choice.
So a tuned program compiles to exactly the kernels the search scored. A kernel that already
carries a schedule (written by hand in a `.mlir` file) keeps it.

Nothing is created: without a cache file there is nothing to replay and no file appears.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from deplodock.perf.devices import DEFAULT_DEVICE
from deplodock.tune.cache import CacheKey, TuneCache
from deplodock.tune.kernels import kernel_hash, loop_kernels


@dataclass
class Replay:
    """Looks up each loop kernel of a module in the cache and writes its winner on it.

    `identity` gives (target, toolchain, cost), the cache key's other three parts; it is
    only asked when the cache file exists (it runs `nvcc --version` and reads the model's
    calibration, which a plain compile without a cache need not pay for). The cache and the
    identity are opened once, on first use: a model's layers attach one segment at a time."""

    identity: Callable[[], tuple[str, str, str]]
    path: Path = field(default_factory=TuneCache.default_path)
    replayed: list[str] = field(default_factory=list)
    _opened: tuple[TuneCache, tuple[str, str, str]] | None = field(default=None, repr=False)

    def attach(self, module: ModuleOp) -> int:
        """Writes the cached schedules on `module`'s loop kernels; how many it wrote."""
        kernels = [k for k in loop_kernels(module) if k.schedule is None]
        if not kernels or not self.path.exists():
            return 0
        if self._opened is None:
            self._opened = TuneCache(self.path), self.identity()
        cache, (target, toolchain, cost) = self._opened
        count = 0
        for kernel in kernels:
            record = cache.lookup(CacheKey(kernel_hash(kernel), target, toolchain, cost))
            if record is not None:
                record.knobs.write_on(kernel)
                self.replayed.append(kernel.sym_name.data)
                count += 1
        return count


def model_replay(device_key: str = DEFAULT_DEVICE, path: Path | None = None) -> Replay:
    """The replay of schedules tuned on the performance model of `device_key`."""

    def identity() -> tuple[str, str, str]:
        from deplodock.tune.evaluate import model_identity

        return model_identity(device_key)

    return Replay(identity, path or TuneCache.default_path())


def measured_replay(path: Path | None = None) -> Replay:
    """The replay of schedules measured on this machine's GPU (`tune --device cuda`)."""

    def identity() -> tuple[str, str, str]:
        from deplodock.backend.device import require_cuda
        from deplodock.tune.measure import measured_identity

        return measured_identity(require_cuda())

    return Replay(identity, path or TuneCache.default_path())
