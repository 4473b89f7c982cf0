"""Unit tests of the lock-step SIMT core shared by the tile and kernel interpreters."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.utils.exceptions import InterpretationError

from deplodock.interpreters.simt import LockstepState


def test_masks_stack_and_combine_by_and():
    state = LockstepState(8)
    assert state.current_mask.all()
    state.push_mask(state.thread_ids < 6)
    state.push_mask(state.thread_ids % 2 == 0)
    assert state.current_mask.tolist() == [True, False, True, False, True, False, False, False]
    state.pop_mask()
    assert state.current_mask.sum() == 6
    state.pop_mask()
    with pytest.raises(InterpretationError):
        state.pop_mask()


def test_gather_masks_out_of_bounds_lanes():
    state = LockstepState(4)
    buf = np.arange(10, dtype=np.float32).reshape(2, 5) * 1.5
    cols = state.thread_ids + 2  # lane 3 reads column 5: out of bounds
    with state.masked(cols < 5):
        out = state.gather(buf, (1, cols), name="%x")
    assert out[:3].tolist() == buf[1, 2:5].tolist()
    with pytest.raises(InterpretationError, match=r"buffer %x.*index 5 out of bounds"):
        state.gather(buf, (1, cols), name="%x")


def test_scatter_writes_active_lanes_only_and_detects_conflicts():
    state = LockstepState(4)
    buf = np.zeros(4, dtype=np.float32)
    with state.masked(state.thread_ids != 1):
        state.scatter(buf, (state.thread_ids,), state.thread_ids * 2.0 + 1.0, name="%y")
    assert buf.tolist() == [1.0, 0.0, 5.0, 7.0]
    state.scatter(buf, (0,), 3.5, name="%y")  # every lane stores the same value: fine
    assert buf[0] == 3.5
    with pytest.raises(InterpretationError, match="threads 0 and 1 write different values"):
        state.scatter(buf, (0,), state.thread_ids * 1.0, name="%y")


def test_run_loop_dynamic_per_lane_bounds():
    """Lane t sums i for i = t, t + 3, ... < 10, as a strided cooperative loop would."""
    state = LockstepState(4)
    (total,) = state.run_loop(
        state.thread_ids, 10, 3, [np.float32(0)], lambda iv, c: (c[0] + iv.astype(np.float32),)
    )
    expected = [sum(range(t, 10, 3)) for t in range(4)]
    assert total.tolist() == expected


def test_run_loop_respects_outer_mask():
    state = LockstepState(4)
    with state.masked(state.thread_ids < 2):
        (count,) = state.run_loop(0, 5, 1, [0], lambda iv, c: (c[0] + 1,))
    assert count.tolist() == [5, 5, 0, 0]


def test_combine_over_active_lanes():
    rng = np.random.default_rng(0)
    values = rng.standard_normal(64).astype(np.float32)
    state = LockstepState(64)
    total = state.combine("add", values)
    assert total.shape == (64,) and np.allclose(total, values.sum(), rtol=1e-5)
    with state.masked(state.thread_ids >= 32):
        assert state.combine("max", values)[0] == values[32:].max()
        assert state.combine("min", values)[0] == values[32:].min()
        assert np.isclose(state.combine("mul", values)[0], np.prod(values[32:]), rtol=1e-4)
