"""Loads and stores provably out of bounds are rejected by the verifiers at every level
(`dialects/common/memory.index_range`); what the IR cannot prove is left alone."""

from __future__ import annotations

import pytest
from xdsl.utils.exceptions import VerifyException

from tests.helpers import parse


def kernel_level(upper: int, guarded: bool = False, step: int = 32) -> str:
    """A kernel-level copy of 64 floats whose loop ends at `upper`, optionally guarded."""
    load = (
        "%v = kernel.load %x[%i] : memref<64xf32>\n      kernel.store %v, %y[%i] : memref<64xf32>"
    )
    if guarded:
        load = f"kernel.if %ok {{\n      {load}\n      }}"
    return f"""
builtin.module {{
  kernel.func @k(%x: memref<64xf32>, %y: memref<64xf32>) grid 1 block 32 {{
    %t = kernel.thread_id : index
    %ok = arith.constant true
    kernel.for %i = %t to {upper} step {step} {{
      {load}
    }}
    kernel.return
  }}
}}
"""


def test_loop_ending_at_the_size_verifies() -> None:
    parse(kernel_level(64)).verify()


def test_loop_one_past_the_size_is_rejected() -> None:
    with pytest.raises(VerifyException, match=r"%i ranges over \[0, 64\], out of bounds"):
        parse(kernel_level(65)).verify()


def test_guarded_access_is_not_judged() -> None:
    """A rounded-up loop with an `if` guard is the usual way to cover a ragged edge."""
    parse(kernel_level(96, guarded=True)).verify()


@pytest.mark.parametrize(("lower", "ok"), [(0, True), (1, False)])
def test_static_start_uses_the_last_iterate(lower: int, ok: bool) -> None:
    """`0 to 66 step 2` ends at 64, inside 65 elements although its bound is not; `1 to 66
    step 2` ends at 65, one past."""
    text = f"""
builtin.module {{
  loop.kernel @k(%x: memref<65xf32>) {{
    loop.for %i = {lower} to 66 step 2 {{
      %v = loop.load %x[%i] : memref<65xf32>
      loop.store %v, %x[%i] : memref<65xf32>
    }}
    loop.return
  }}
}}
"""
    if ok:
        parse(text).verify()
    else:
        with pytest.raises(VerifyException, match=r"ranges over \[1, 65\], out of bounds"):
            parse(text).verify()
