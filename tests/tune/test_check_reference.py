"""The check's loop-level reference, kept on disk (`check.reference_path`): a second
`KernelCheck` of the same kernel and seed (another worker, a later search) loads it instead
of interpreting the loop kernel again, and gets exactly the outputs it would compute."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deplodock.interpreters import run_module
from deplodock.tune import check as check_module
from deplodock.tune.check import KernelCheck, reference_path
from deplodock.tune.kernels import standalone
from tests.tune.test_check import RMSNORM, candidate, loop_kernel


@pytest.fixture
def own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """References kept under `tmp_path` only (captures stay in the session's cache)."""
    monkeypatch.setattr(check_module, "cache_root", lambda: tmp_path)
    return tmp_path


def _no_interpreter(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Makes the loop interpreter raise; the list counts its calls."""
    calls: list[int] = []

    def broken(*args: object, **kwargs: object) -> list[np.ndarray]:
        calls.append(1)
        raise RuntimeError("the loop interpreter ran")

    monkeypatch.setattr(check_module, "run_module", broken)
    return calls


def test_a_kept_reference_is_loaded_not_computed(
    own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = loop_kernel(RMSNORM)
    first = KernelCheck(found, seed=3).reference
    assert reference_path(found, 3).is_file()
    calls = _no_interpreter(monkeypatch)
    second = KernelCheck(found, seed=3)
    kept = second.reference
    assert calls == []
    expected = run_module(standalone(found), second.inputs)  # computed afresh, not kept
    assert len(kept) == len(first) == len(expected)
    for got, want in zip(kept, expected, strict=True):
        assert got.dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want)
    assert second.check(candidate(found)).status == "ok"


def test_each_seed_and_kernel_has_its_own_reference(own_cache: Path) -> None:
    rmsnorm = loop_kernel(RMSNORM)
    other = loop_kernel("nn.RMSNorm(256)(torch.randn(1, 16, 256))")
    paths = {reference_path(rmsnorm, 0), reference_path(rmsnorm, 1), reference_path(other, 0)}
    assert len(paths) == 3
    assert reference_path(loop_kernel(RMSNORM), 0) == reference_path(rmsnorm, 0)


def test_an_unreadable_kept_reference_is_computed_again(
    own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = loop_kernel(RMSNORM)
    path = reference_path(found, 0)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not an npz")
    checker = KernelCheck(found)
    expected = run_module(standalone(found), checker.inputs)
    for got, want in zip(checker.reference, expected, strict=True):
        np.testing.assert_array_equal(got, want)
    assert path.read_bytes() != b"not an npz"  # replaced by the computed one
