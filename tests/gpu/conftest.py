"""GPU tests: marked `gpu`, skipped with the reason when this machine cannot run them.

The reason (no CUDA build of torch, no GPU, no pycuda, no nvcc) is the one `deplodock run
--device cuda` would print, and it is repeated in the terminal summary so a CPU-only run
says plainly what it did not check.
"""

from __future__ import annotations

import functools

import pytest


@functools.cache
def gpu_unavailable_reason() -> str | None:
    from deplodock.backend.device import cuda_unavailable_reason

    return cuda_unavailable_reason()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = gpu_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"no CUDA device: {reason}")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    reason = gpu_unavailable_reason()
    skipped = [
        r for r in terminalreporter.stats.get("skipped", []) if "no CUDA device" in str(r.longrepr)
    ]
    if reason is not None and skipped:
        terminalreporter.write_line(
            f"GPU tests: {len(skipped)} skipped (no CUDA device: {reason}); the GPU paths "
            "were not run"
        )
