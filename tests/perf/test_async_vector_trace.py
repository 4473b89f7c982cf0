"""The tracer counts vector accesses as one 8/16-byte request per thread and cp.async as an
LDGSTS (a global read and a shared write in one instruction, no register round trip)."""

from __future__ import annotations

import numpy as np

from deplodock.dialects import kernel
from deplodock.perf import memory
from deplodock.perf.trace import trace_kernel
from tests.helpers import parse

N = 4096


def copy_kernel(width: int) -> str:
    """`y = x` over N floats, `width` consecutive elements per thread (1: scalar)."""
    threads = 256
    grid = N // (threads * width)
    if width == 1:
        body = """%v = kernel.load %x[%i] : memref<4096xf32>
  kernel.store %v, %y[%i] : memref<4096xf32>"""
    else:
        names = ", ".join(f"%v{k}" for k in range(width))
        body = f"""{names} = kernel.load_vector %x[%i] width {width} : memref<4096xf32>
  kernel.store_vector {names}, %y[%i] : memref<4096xf32>"""
    return f"""
kernel.func @copy(%x: memref<4096xf32>, %y: memref<4096xf32>) grid {grid} block {threads} {{
  %t = kernel.thread_id : index
  %b = kernel.block_id : index
  %cT = arith.constant {threads} : index
  %cW = arith.constant {width} : index
  %base = arith.muli %b, %cT : index
  %lin = arith.addi %base, %t : index
  %i = arith.muli %lin, %cW : index
  {body}
  kernel.return
}}
"""


def traced(text: str):
    module = parse(text)
    return trace_kernel(next(op for op in module.ops if isinstance(op, kernel.FuncOp)))


def test_a_16_byte_request_per_thread_moves_16_sectors_in_a_quarter_of_the_requests() -> None:
    assert memory.global_sectors(np.arange(32) * 16, width=16) == 16
    assert memory.global_lines(np.arange(32) * 16, width=16) == 4
    scalar, vector = traced(copy_kernel(1)), traced(copy_kernel(4))
    assert scalar.total("global_load_requests") == N // 32
    assert vector.total("global_load_requests") == N // 32 // 4
    # the same bytes move: sectors in total agree, four times as many per request
    assert vector.total("global_load_sectors") == scalar.total("global_load_sectors")
    assert vector.sectors_per_load_request == 4 * scalar.sectors_per_load_request == 16
    assert vector.instructions["ld_global"] == scalar.instructions["ld_global"] / 4
    assert vector.instructions["st_global"] == scalar.instructions["st_global"] / 4
    assert vector.footprint_bytes("load") == scalar.footprint_bytes("load") == N * 4


STAGE = """
kernel.func @stage(%x: memref<4096xf32>, %y: memref<4096xf32>) grid 4 block 256 {
  %t = kernel.thread_id : index
  %b = kernel.block_id : index
  %c4 = arith.constant 4 : index
  %c1024 = arith.constant 1024 : index
  %s = kernel.shared_alloc : memref<1024xf32, 3 : i64>
  %base = arith.muli %b, %c1024 : index
  %col = arith.muli %t, %c4 : index
  %g = arith.addi %base, %col : index
  COPY
  kernel.barrier
  %v = kernel.load %s[%t] : memref<1024xf32, 3 : i64>
  %o = arith.addi %base, %t : index
  kernel.store %v, %y[%o] : memref<4096xf32>
  kernel.return
}
"""

ASYNC = """kernel.cp_async %s[%col], %x[%g], 16 : memref<1024xf32, 3 : i64>, memref<4096xf32>
  kernel.cp_async_commit
  kernel.cp_async_wait 0"""

THROUGH_REGISTERS = """%a, %b1, %c, %d = kernel.load_vector %x[%g] width 4 : memref<4096xf32>
  kernel.store_vector %a, %b1, %c, %d, %s[%col] : memref<1024xf32, 3 : i64>"""


def test_cp_async_is_an_ldgsts_with_the_same_traffic_and_no_register_round_trip() -> None:
    staged = traced(STAGE.replace("COPY", ASYNC))
    loaded = traced(STAGE.replace("COPY", THROUGH_REGISTERS))
    warps = 4 * 256 // 32
    assert staged.instructions["ldgsts"] == warps
    # the load + store pair it replaces: one ld_global and one st_shared per warp
    assert loaded.instructions["ldgsts"] == 0
    assert staged.instructions["ld_global"] == 0
    assert loaded.instructions["ld_global"] == warps
    assert staged.instructions["st_shared"] == 0
    assert loaded.instructions["st_shared"] == warps
    # ... for the same global sectors and shared wavefronts
    for counter in ("global_load_sectors", "global_load_requests", "shared_wavefronts"):
        assert staged.total(counter) == loaded.total(counter), counter
    assert staged.total("global_load_sectors") == 4096 * 4 // 32
