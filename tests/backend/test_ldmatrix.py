"""`kernel.ldmatrix` checked against the PTX ISA's rule for `ldmatrix`, in the kernel
interpreter and in the emitted CUDA C run by the CPU emulation (plain and under memcheck),
and compiled by nvcc to `LDSM`.

The kernels are written at the kernel level by hand: each warp copies its 32 rows of 8
elements into shared memory, each lane points at one of them (lane `t` at row `(5t + 3) %
32`, a permutation, so a lane that gave the wrong row shows), runs one `kernel.ldmatrix`
and stores what it got. The expected fragments are built here from the ISA's words, not
from `common/ldmatrix.py`: lane `t` gives the address of row `t % 8` of matrix `t / 8`, and
lane `l` receives, in its registers `2j` and `2j + 1`, row `l / 4`, columns `2 (l % 4)` and
`+ 1` of matrix `j`; with `.trans`, rows `2 (l % 4)` and `+ 1`, column `l / 4`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.utils.exceptions import InterpretationError

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.backend.cuda_source import kernels_text
from deplodock.backend.nvcc import compile_cubin
from deplodock.dialects import cuda
from tests.backend.sass import needs_nvcc, sass_of
from tests.backend.test_mma_sync import kernel_source, lowered
from tests.helpers import kernel_abort, parse

WARPS = 2
ROWS = 32  # rows of one warp's region: four 8x8 matrices


def address_row(lane: int) -> int:
    """The row of its warp's region lane `lane` points at (a permutation of 0..31)."""
    return (5 * lane + 3) % ROWS


def ldmatrix_module(count: int, trans: bool, lanes: int = 32) -> str:
    """`@ldm(%x) -> %out`: `x` is `WARPS x 32 x 8` bf16; warp `w` stages its 32 rows in
    shared memory, lane `t` points at row `address_row(t)` and stores its `2 count`
    fragment elements at `out[w, t, :]` (`lanes` < 32: only the first lanes run it)."""
    block = 32 * WARPS
    x_t = f"memref<{WARPS}x{ROWS}x8xbf16>"
    out_t = f"memref<{WARPS}x32x{2 * count}xbf16>"
    s_t = f"memref<{block}x8xbf16, 3 : i64>"
    values = ", ".join(f"%r{i}" for i in range(2 * count))
    stores = [f"kernel.store %r{i}, %out[%w, %lane, %k{i}] : {out_t}" for i in range(2 * count)]
    ldm = [
        f"{values} = kernel.ldmatrix %s[%srow, %k0] x{count}{' trans' if trans else ''} : {s_t}",
        *stores,
    ]
    if lanes < 32:
        ldm = ["%some = arith.cmpi slt, %lane, %klanes : index", "kernel.if %some {", *ldm, "}"]
    constants = "\n    ".join(f"%k{c} = arith.constant {c} : index" for c in range(8))
    body = "\n    ".join(ldm)
    return f"""
builtin.module {{
  kernel.func @ldm(%x: {x_t}, %out: {out_t}) grid 1 block {block} {{
    %s = kernel.shared_alloc : {s_t}
    {constants}
    %k32 = arith.constant 32 : index
    %klanes = arith.constant {lanes} : index
    %t = kernel.thread_id : index
    %w = arith.divsi %t, %k32 : index
    %lane = arith.remsi %t, %k32 : index
    kernel.for %c = %k0 to 8 step 1 {{
      %v = kernel.load %x[%w, %lane, %c] : {x_t}
      kernel.store %v, %s[%t, %c] : {s_t}
    }}
    kernel.barrier
    %row5 = arith.muli %lane, %k5 : index
    %row53 = arith.addi %row5, %k3 : index
    %wrow = arith.remsi %row53, %k32 : index
    %base = arith.muli %w, %k32 : index
    %srow = arith.addi %base, %wrow : index
    {body}
    kernel.return
  }}
  func.func @forward(%x: {x_t}) -> {out_t} {{
    %out = kernel.alloc : {out_t}
    kernel.launch @ldm(%x, %out) : ({x_t}, {out_t}) -> ()
    func.return %out : {out_t}
  }}
}}"""


def rows_of(warps: int = WARPS) -> np.ndarray:
    """Each warp's 32 x 8 rows: distinct integers, exact in bf16 (|v| <= 256)."""
    x = np.arange(ROWS * 8, dtype=np.float32).reshape(ROWS, 8)
    return np.stack([x if w % 2 == 0 else -(x + 1) for w in range(warps)])


def expected_fragments(x: np.ndarray, count: int, trans: bool) -> np.ndarray:
    """The PTX ISA's rule, written out: matrix `j` row `r` is the row lane `8j + r`
    pointed at; lane `l` gets row `l / 4`, columns `2 (l % 4) + {0, 1}` (transposed:
    rows `2 (l % 4) + {0, 1}`, column `l / 4`) of each matrix, in that order."""
    out = np.zeros((x.shape[0], 32, 2 * count), dtype=np.float32)
    for w in range(x.shape[0]):
        matrices = [[x[w, address_row(8 * j + r)] for r in range(8)] for j in range(count)]
        for lane in range(32):
            for j in range(count):
                for half in range(2):
                    pair = 2 * (lane % 4) + half
                    if trans:
                        value = matrices[j][pair][lane // 4]
                    else:
                        value = matrices[j][lane // 4][pair]
                    out[w, lane, 2 * j + half] = value
    return out


CASES = [(count, trans) for count in (1, 2, 4) for trans in (False, True)]


def _id(case: tuple[int, bool]) -> str:
    return f"x{case[0]}{'-trans' if case[1] else ''}"


@pytest.mark.parametrize("case", CASES, ids=_id)
@pytest.mark.parametrize("runner", ["interpreter", "cpu-c", "memcheck"])
def test_each_lane_gets_what_the_ptx_isa_says(case: tuple[int, bool], runner: str) -> None:
    count, trans = case
    module = parse(ldmatrix_module(count, trans))
    if runner != "interpreter":
        module = lowered(module)
    x = rows_of()
    (got,) = run_on_cpu(module, [x], memcheck=runner == "memcheck")
    np.testing.assert_array_equal(got, expected_fragments(x, count, trans))


def test_the_printed_call() -> None:
    source = kernel_source(lowered(parse(ldmatrix_module(4, True))))
    assert "__nv_bfloat16 r0, r1, r2, r3, r4, r5, r6, r7;\n" in source
    assert "dd_ldmatrix<4, true>(&s[" in source
    assert "__shared__ __align__(16) __nv_bfloat16 s[512];" in source


def test_the_op_round_trips_and_is_verified() -> None:
    text = ldmatrix_module(2, True)
    assert "kernel.ldmatrix %s[%srow, %k0] x2 trans : memref<64x8xbf16, 3 : i64>" in str(
        parse(text)
    )
    with pytest.raises(Exception, match="innermost index 3 is misaligned"):
        parse(text.replace("%s[%srow, %k0] x2", "%s[%srow, %k3] x2"))


def test_a_partial_warp_is_reported_by_the_interpreter_and_the_emulation() -> None:
    module = parse(ldmatrix_module(4, False, lanes=8))
    with pytest.raises(InterpretationError, match="inactive while its warp runs the ldmatrix"):
        run_on_cpu(module, [rows_of()])
    source = kernel_source(lowered(module))
    args = "[np.zeros(512, np.uint16), np.zeros(512, np.uint16)]"
    stderr = kernel_abort(source, "ldm", args, block=64)
    assert "runs ldmatrix without lane 8 of its warp" in stderr


@needs_nvcc
@pytest.mark.parametrize("case", [(4, False), (2, True)], ids=_id)
def test_nvcc_compiles_it_to_ldsm(case: tuple[int, bool], tmp_path: Path) -> None:
    count, trans = case
    module = lowered(parse(ldmatrix_module(count, trans)))
    source = kernels_text([op for op in module.ops if isinstance(op, cuda.KernelOp)])
    resources = compile_cubin(source, arch="sm_90").kernels["ldm"]
    assert not resources.spills
    lines = [ln for ln in sass_of(source, tmp_path).splitlines() if "LDSM" in ln]
    assert len(lines) == 1, lines
    assert (".MT88" in lines[0]) == trans
    assert f".M88.{count}" in lines[0].replace(".MT88", ".M88") or count == 1
