"""One metric, one set of named tolerances, one input generator (`deplodock.numerics`).

The driver's check against PyTorch, the tuner's CPU gate and its GPU re-check all judge by
`max_relative_error` and draw inputs from `random_array`; these tests pin the rules they
share, so a change to them is a change to every check at once.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from deplodock import driver, numerics
from deplodock.numerics import first_mismatch, max_relative_error, random_array, schedule_error
from deplodock.tune import check, measure

NAN, INF = float("nan"), float("inf")


def test_the_error_is_relative_to_the_largest_reference_element() -> None:
    expected = np.array([1.0, -4.0, INF])
    assert max_relative_error(expected.copy(), expected) == 0.0
    off = expected + np.array([0.0, 0.02, 0.0])
    assert max_relative_error(off, expected) == pytest.approx(0.005)
    assert max_relative_error(np.zeros(3), np.zeros(3)) == 0.0


def test_non_finite_values_match_only_the_same_value() -> None:
    """Where the reference is NaN or infinite only the same value matches; a non-finite
    value where the reference is finite is infinitely wrong."""
    expected = np.array([1.0, -4.0, NAN, INF])
    assert max_relative_error(np.array([1.0, -4.0, 0.0, INF]), expected) == math.inf
    assert max_relative_error(np.array([1.0, -4.0, NAN, -INF]), expected) == math.inf
    assert max_relative_error(np.array([1.0, NAN, NAN, INF]), expected) == math.inf


def test_nan_against_nan_compares_nothing_except_between_schedules() -> None:
    """Against PyTorch a NaN in both is no evidence (a NaN weight poisons both sides), so the
    error is NaN, which no tolerance admits; between two schedules of one kernel it is the
    same value (an element neither writes, or the same undefined result) and matches."""
    expected = np.array([1.0, -4.0, NAN, INF])
    assert math.isnan(max_relative_error(expected.copy(), expected))
    assert schedule_error(expected.copy(), expected) == 0.0
    off = np.array([1.0, -4.02, NAN, INF])
    assert schedule_error(off, expected) == pytest.approx(0.005)
    assert schedule_error(np.array([1.0, -4.0, 0.0, INF]), expected) == math.inf


def test_a_reference_beyond_the_outputs_type_is_its_overflow() -> None:
    overflow = np.array([INF], dtype=np.float32)  # exp(1000) overflows fp32 in PyTorch too
    assert max_relative_error(overflow, np.array([1e300])) == 0.0
    assert max_relative_error(overflow.astype(np.float64), np.array([1e300])) == math.inf


def test_the_first_mismatch_agrees_with_the_error_at_the_tolerance() -> None:
    """Whenever the error is above the tolerance, even by the last bit, there is an element
    to name (the tuner's gate names it in its verdict)."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        expected = rng.standard_normal(16)
        actual = expected + rng.standard_normal(16) * 1e-6
        error = max_relative_error(actual, expected)
        assert first_mismatch(actual, expected, float(np.nextafter(error, 0.0))) is not None
        assert first_mismatch(actual, expected, error) is None
    found = first_mismatch(np.array([[1.0, 2.0], [NAN, 4.0]]), np.array([[1.0, 2.0], [3, 4]]), 1)
    assert found is not None and found[0] == (1, 0)


def test_random_arrays_are_seeded_and_typed() -> None:
    def draw(seed: int, dtype: type, bound: int = 1) -> np.ndarray:
        return random_array(np.random.default_rng(seed), (64, 8), np.dtype(dtype), bound)

    x = draw(3, np.float32)
    assert x.dtype == np.float32 and np.count_nonzero(x) == x.size and 0.5 < x.std() < 2
    np.testing.assert_array_equal(draw(3, np.float32), x)
    assert not np.array_equal(draw(4, np.float32), x)
    ids = draw(0, np.int64, 10)
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < 10 and len(np.unique(ids)) > 5
    assert not draw(0, np.int32).any()  # no bound: zeros, valid as any index
    mask = draw(0, np.bool_)
    assert mask.dtype == np.bool_ and 0 < mask.sum() < mask.size


def test_every_check_takes_its_tolerance_from_here() -> None:
    """The driver re-exports its names; the tuner's two gates have their own, for their own
    reasons (`numerics`' comments)."""
    assert driver.max_relative_error is max_relative_error
    assert driver.NARROW_FLOAT_TOLERANCE == numerics.NARROW_FLOAT_TOLERANCE
    assert check.schedule_error is schedule_error
    assert measure.schedule_error is schedule_error
    assert numerics.FP32_TOLERANCE < numerics.FP32_LONG_SUM_TOLERANCE
    assert numerics.CHECK_NARROW_TOLERANCE < numerics.GPU_CHECK_NARROW_TOLERANCE
    assert numerics.CHECK_FP32_TOLERANCE < numerics.GPU_CHECK_FP32_TOLERANCE
