"""Kernel-level programs with TMA copies and mbarriers, written by hand and run by the
kernel interpreter (`interpreters/tma.py`), checked against numpy and against planted bugs.

The expected tiles are built here from the documented rules, not from `common/tma.py`: the
box at (row, col) of the source, zeros outside it; in shared memory, with a 128-byte swizzle
and 4-byte elements, element (r, c) of a box row of 32 lies at column `c ^ 4 (r % 8)` (its
16-byte chunk `c / 4` XORed with the row within the 8-row repeat, CUDA programming guide,
"TMA Swizzle"), which the kernels undo when they read.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.utils.exceptions import InterpretationError

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.interpreters.shared_memory import RaceError
from tests.helpers import parse

ROWS, COLS = 16, 32  # one box: 16 rows of 32 f32 (128 bytes)
BOX_BYTES = ROWS * COLS * 4
THREADS = 64


def _unswizzled_read(stage: str, s: str, index: str) -> str:
    """IR reading element `index` (row-major in the box) of `stage` of shared `s` into
    `%v`: row `r`, column `c ^ 4 (r % 8)`."""
    return f"""
      %r = arith.divsi {index}, %k32 : index
      %c = arith.remsi {index}, %k32 : index
      %r8 = arith.andi %r, %k7 : index
      %x = arith.muli %r8, %k4 : index
      %cs = arith.xori %c, %x : index
      %v = kernel.load {s}[{stage}%r, %cs] : SHARED"""


CONSTANTS = """
    %k0 = arith.constant 0 : index
    %k1 = arith.constant 1 : index
    %k2 = arith.constant 2 : index
    %k4 = arith.constant 4 : index
    %k7 = arith.constant 7 : index
    %k32 = arith.constant 32 : index
    %t = kernel.thread_id : index
    %is0 = arith.cmpi eq, %t, %k0 : index"""


def tile_module(rows: int, cols: int, row0: int, col0: int) -> str:
    """`@tile(%a) -> %out`: block b copies the box at (row0 + 16 (b / 2), col0 + 32 (b % 2))
    of `a` through TMA (128-byte swizzle) and writes it out unswizzled as `out[b]`."""
    a_t, out_t = f"memref<{rows}x{cols}xf32>", f"memref<4x{ROWS}x{COLS}xf32>"
    s_t, bar_t = f"memref<{ROWS}x{COLS}xf32, 3 : i64>", "memref<1xi64, 3 : i64>"
    read = _unswizzled_read("", "%s", "%i").replace("SHARED", s_t)
    return f"""
builtin.module {{
  kernel.func @tile(%a: {a_t}, %out: {out_t}) grid 4 block {THREADS} {{
    {CONSTANTS}
    %row0 = arith.constant {row0} : index
    %col0 = arith.constant {col0} : index
    %k16 = arith.constant 16 : index
    %s = kernel.shared_alloc : {s_t}
    %bar = kernel.shared_alloc : {bar_t}
    %b = kernel.block_id : index
    %bh = arith.divsi %b, %k2 : index
    %bw = arith.remsi %b, %k2 : index
    %dr = arith.muli %bh, %k16 : index
    %dc = arith.muli %bw, %k32 : index
    %row = arith.addi %row0, %dr : index
    %col = arith.addi %col0, %dc : index
    kernel.if %is0 {{
      kernel.mbarrier_init %bar[%k0], 1 : {bar_t}
      kernel.fence_proxy_async
      kernel.mbarrier_arrive %bar[%k0] expect_tx {BOX_BYTES} : {bar_t}
      kernel.tma_load %s[%k0, %k0], %a[%row, %col], %bar[%k0] swizzle 128 : {s_t}, {a_t}, {bar_t}
    }}
    kernel.mbarrier_wait %bar[%k0], %k0 : {bar_t}
    kernel.for %i = %t to {ROWS * COLS} step {THREADS} {{{read}
      kernel.store %v, %out[%b, %r, %c] : {out_t}
    }}
    kernel.return
  }}
  func.func @forward(%a: {a_t}) -> {out_t} {{
    %out = kernel.alloc : {out_t}
    kernel.launch @tile(%a, %out) : ({a_t}, {out_t}) -> ()
    func.return %out : {out_t}
  }}
}}"""


def expected_boxes(a: np.ndarray, row0: int, col0: int) -> np.ndarray:
    """The four boxes, zeros outside `a` (padding `a` with zeros all around)."""
    pad = 64
    padded = np.zeros((a.shape[0] + 2 * pad, a.shape[1] + 2 * pad), a.dtype)
    padded[pad:-pad, pad:-pad] = a
    boxes = []
    for b in range(4):
        r, c = row0 + ROWS * (b // 2) + pad, col0 + COLS * (b % 2) + pad
        boxes.append(padded[r : r + ROWS, c : c + COLS])
    return np.stack(boxes)


@pytest.mark.parametrize(
    ("shape", "origin"), [((64, 64), (0, 0)), ((40, 50), (-5, 20))], ids=["inside", "edges"]
)
def test_tma_tiles_through_the_interpreter(shape: tuple[int, int], origin: tuple[int, int]) -> None:
    a = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    (out,) = run_on_cpu(parse(tile_module(*shape, *origin)), [a])
    np.testing.assert_array_equal(out, expected_boxes(a, *origin))


TILES = 4


def pipeline_module(bug: str = "") -> str:
    """`@pipe(%a) -> %out`: thread 0 streams TILES boxes of `a` through two shared stages
    (full barriers: one arrival plus the box's bytes; empty: every thread); each thread adds
    its elements of every box into `out`. `bug`: "no-fence", "expect-tx" (twice the
    bytes), "reuse" (no wait on the empty barrier), "early-read" (no wait on the full one)."""
    a_t, out_t = f"memref<{TILES * ROWS}x{COLS}xf32>", f"memref<{ROWS}x{COLS}xf32>"
    s_t, bar_t = f"memref<2x{ROWS}x{COLS}xf32, 3 : i64>", "memref<2xi64, 3 : i64>"
    read = _unswizzled_read("%stage, ", "%s", "%i").replace("SHARED", s_t)
    fence = "" if bug == "no-fence" else "kernel.fence_proxy_async"
    expect = 2 * BOX_BYTES if bug == "expect-tx" else BOX_BYTES
    empty_wait = "" if bug == "reuse" else f"kernel.mbarrier_wait %empty[%stage], %prev : {bar_t}"
    full_wait = "" if bug == "early-read" else f"kernel.mbarrier_wait %full[%stage], %par : {bar_t}"
    tma = (
        "kernel.tma_load %s[%stage, %k0, %k0], %a[%row, %k0], %full[%stage] swizzle 128 : "
        f"{s_t}, {a_t}, {bar_t}"
    )
    return f"""
builtin.module {{
  kernel.func @pipe(%a: {a_t}, %out: {out_t}) grid 1 block {THREADS} {{
    {CONSTANTS}
    %k16 = arith.constant 16 : index
    %zero = arith.constant 0.0 : f32
    %s = kernel.shared_alloc : {s_t}
    %full = kernel.shared_alloc : {bar_t}
    %empty = kernel.shared_alloc : {bar_t}
    kernel.for %i = %t to {ROWS * COLS} step {THREADS} {{
      %r = arith.divsi %i, %k32 : index
      %c = arith.remsi %i, %k32 : index
      kernel.store %zero, %out[%r, %c] : {out_t}
    }}
    kernel.if %is0 {{
      kernel.mbarrier_init %full[%k0], 1 : {bar_t}
      kernel.mbarrier_init %full[%k1], 1 : {bar_t}
      kernel.mbarrier_init %empty[%k0], {THREADS} : {bar_t}
      kernel.mbarrier_init %empty[%k1], {THREADS} : {bar_t}
      {fence}
    }}
    kernel.barrier
    kernel.for %tile = %k0 to {TILES} step 1 {{
      %stage = arith.remsi %tile, %k2 : index
      %round = arith.divsi %tile, %k2 : index
      %par = arith.remsi %round, %k2 : index
      %prev = arith.subi %k1, %par : index
      %reuse = arith.cmpi sge, %tile, %k2 : index
      %row = arith.muli %tile, %k16 : index
      kernel.if %is0 {{
        kernel.if %reuse {{
          {empty_wait}
        }}
        kernel.mbarrier_arrive %full[%stage] expect_tx {expect} : {bar_t}
        {tma}
      }}
      {full_wait}
      kernel.for %i = %t to {ROWS * COLS} step {THREADS} {{{read}
        %o = kernel.load %out[%r, %c] : {out_t}
        %sum = arith.addf %o, %v : f32
        kernel.store %sum, %out[%r, %c] : {out_t}
      }}
      kernel.mbarrier_arrive %empty[%stage] : {bar_t}
    }}
    kernel.return
  }}
  func.func @forward(%a: {a_t}) -> {out_t} {{
    %out = kernel.alloc : {out_t}
    kernel.launch @pipe(%a, %out) : ({a_t}, {out_t}) -> ()
    func.return %out : {out_t}
  }}
}}"""


def _pipeline_input() -> np.ndarray:
    return np.random.default_rng(5).standard_normal((TILES * ROWS, COLS)).astype(np.float32)


def test_the_pipeline_sums_the_tiles_like_float64() -> None:
    a = _pipeline_input()
    (out,) = run_on_cpu(parse(pipeline_module()), [a])
    want = a.astype(np.float64).reshape(TILES, ROWS, COLS).sum(axis=0)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("bug", "error", "message"),
    [
        ("no-fence", InterpretationError, "no fence_proxy_async made visible"),
        ("expect-tx", InterpretationError, "hang: thread 0 waits for the phase of parity 0"),
        ("reuse", RaceError, r"thread 0 writes element \[0, .* by thread 1 .*kernel.tma_load"),
        ("early-read", RaceError, "while a TMA copy of thread 0 to it is in flight"),
    ],
)
def test_planted_pipeline_bugs_are_reported(bug: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        run_on_cpu(parse(pipeline_module(bug)), [_pipeline_input()])
