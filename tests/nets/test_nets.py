"""Whole nets through `deplodock.compile` on the CPU against eager float64 (issue 38, item 2).

The nets are in `tests/nets/zoo.py`, written from their papers and torchvision's structure
with random weights and batch-norm statistics: each must come within `TOLERANCE` relative
error of the same module run in float64. The heavier checks (tens of seconds of lowering on
2 cores) are marked slow and run by `.ci/run`; `bench/net_times.py` times them all.
"""

from __future__ import annotations

import pytest

from tests.nets.zoo import NETS, Net, check

#: A float32 program against float64 eager over a whole net: a few ulps per layer.
TOLERANCE = 1e-5


def _param(net: Net) -> object:
    marks = []
    if net.slow:
        marks.append(pytest.mark.slow)
    if net.skip:
        marks.append(pytest.mark.skip(reason=net.skip))
    if net.xfail:
        marks.append(pytest.mark.xfail(reason=net.xfail, strict=True))
    return pytest.param(net, id=net.name, marks=marks)


@pytest.mark.parametrize("net", [_param(net) for net in NETS])
def test_net_matches_eager_float64(net: Net) -> None:
    result = check(net)
    assert result.error <= TOLERANCE, f"{net.name}: relative error {result.error:.2e}"
