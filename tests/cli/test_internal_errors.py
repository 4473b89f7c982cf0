"""A bug in a pass is reported as deplodock's, not the user's (issue 40).

A planted assertion in a tile pass (the way `tile-mma` once asserted on a lane-strided loop)
must print one line that says "internal error", names the pass and the kernel, asks to be
reported, and exit with `INTERNAL` (70), distinct from a user error's 1. A pass that refuses
a bad knob on purpose, and a library's own error outside any pass, stay user errors.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, i32

from deplodock.cli.errors import INTERNAL
from deplodock.dialects import tile
from deplodock.passes.internal_errors import InternalError, blame, is_bug
from deplodock.passes.tile.cse import TileCsePass
from deplodock.passes.tile.mma import TileMmaPass
from tests.cli.invoke import assert_one_line_error, invoke

MATMUL = "torch.randn(64, 32) @ torch.randn(32, 48)"
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "rmsnorm.mlir"


def planted(self: object, kernel: tile.KernelOp) -> None:
    assert False, "planted: not a serial tile.for"  # noqa: B011


def test_planted_assertion_is_an_internal_error_naming_pass_and_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(TileMmaPass, "apply_to_kernel", planted)
    result = invoke("deplodock", ["compile", "-c", MATMUL])
    assert_one_line_error(
        result,
        "deplodock: internal error in pass tile-mma on kernel @matmul_kernel: planted",
        "(please report; --traceback shows where)",
        status=INTERNAL,
    )
    assert "error: planted" not in result.stderr  # not worded as the user's error


def test_planted_assertion_in_deplodock_opt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TileCsePass, "apply_to_kernel", planted)
    result = invoke("deplodock-opt", [str(EXAMPLE), "-p", "lower-to-tile"])
    assert_one_line_error(
        result,
        "deplodock-opt: internal error in pass tile-cse on kernel @",
        ": planted: not a serial tile.for (please report",
        status=INTERNAL,
    )


def test_traceback_flag_shows_where(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TileMmaPass, "apply_to_kernel", planted)
    with pytest.raises(InternalError) as caught:
        invoke("deplodock", ["compile", "-c", MATMUL, "--traceback"])
    assert isinstance(caught.value.__cause__, AssertionError)
    assert (caught.value.pass_name, caught.value.kernel) == ("tile-mma", "matmul_kernel")


def test_invalid_ir_written_by_a_pass_is_the_pass_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    """The input verified when parsed; IR that fails to verify after a pass is its doing."""

    def break_kernel(self: object, kernel: tile.KernelOp) -> None:
        block = kernel.body.block
        one = arith.ConstantOp(IntegerAttr(1, IndexType()))
        two = arith.ConstantOp(IntegerAttr(2, i32))
        block.insert_ops_before([one, two, arith.AddiOp(one, two)], block.first_op)

    monkeypatch.setattr(TileCsePass, "apply_to_kernel", break_kernel)
    result = invoke("deplodock-opt", [str(EXAMPLE), "-p", "lower-to-tile"])
    assert_one_line_error(
        result, "internal error in pass tile-cse: operand 'rhs'", "but got i32", status=INTERNAL
    )


def test_a_refused_option_stays_the_users_error() -> None:
    pipeline = 'lower-to-loop,convert-loop-to-tile,tile-stage{operands="c"}'
    result = invoke("deplodock-opt", [str(EXAMPLE), "-p", pipeline])
    assert_one_line_error(result, "error: tile-stage: unknown operand 'c'", status=1)
    assert "internal error" not in result.stderr


@pytest.mark.parametrize(
    ("error", "bug"),
    [
        (AssertionError("x"), True),
        (KeyError("x"), True),
        (TypeError("x"), True),
        (ValueError("a bad option"), False),
        (RuntimeError("x"), False),
    ],
)
def test_only_pythons_own_bug_types_are_bugs(error: Exception, bug: bool) -> None:
    assert is_bug(error) is bug


def test_a_subclass_is_a_deliberate_report_not_a_bug() -> None:
    from deplodock.dialects.element_types import UnsupportedElementType

    assert issubclass(UnsupportedElementType, TypeError)
    assert not is_bug(UnsupportedElementType("f8 is not supported"))
    with pytest.raises(UnsupportedElementType), blame("tile-mma", "k"):
        raise UnsupportedElementType("f8 is not supported")


def test_blame_names_the_innermost_kernel_and_the_outer_pass() -> None:
    with pytest.raises(InternalError) as caught, blame("lower-to-cuda"):
        with blame(None, "softmax_kernel"):
            raise KeyError("bm")
    assert str(caught.value) == (
        "internal error in pass lower-to-cuda on kernel @softmax_kernel: missing key 'bm'"
    )
