"""Hand-written kernel-level programs with known counters, for the performance-model tests.

Each function returns the text of a module with one `kernel.func` and its `@forward`; the
tests parse it, trace it and compare counters with what the CUDA memory rules say, or model
two variants and check which one the model prefers.
"""

from __future__ import annotations

from collections.abc import Sequence


def _forward(name: str, inputs: Sequence[str], output: str) -> str:
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(inputs))
    names = ", ".join(f"%a{i}" for i in range(len(inputs)))
    types = ", ".join([*inputs, output])
    return f"""
func.func @forward({args}) -> {output} {{
  %out = kernel.alloc : {output}
  kernel.launch @{name}({names}, %out) : ({types}) -> ()
  func.return %out : {output}
}}"""


def copy_2d(n: int = 1024, transposed_read: bool = False, threads: int = 256) -> str:
    """`y[r, c] = x[r, c]` (coalesced) or `x[c, r]` (each lane a row apart: strided)."""
    memref = f"memref<{n}x{n}xf32>"
    index = "%col, %row" if transposed_read else "%row, %col"
    return f"""
kernel.func @copy(%x: {memref}, %y: {memref}) grid {n * n // threads} block {threads} {{
  %t = kernel.thread_id : index
  %b = kernel.block_id : index
  %cT = arith.constant {threads} : index
  %cN = arith.constant {n} : index
  %base = arith.muli %b, %cT : index
  %lin = arith.addi %base, %t : index
  %row = arith.divsi %lin, %cN : index
  %col = arith.remsi %lin, %cN : index
  %v = kernel.load %x[{index}] : {memref}
  kernel.store %v, %y[%row, %col] : {memref}
  kernel.return
}}""" + _forward("copy", [memref], memref)


def shared_stride(stride: int, broadcast: bool = False) -> str:
    """One warp writes `s[t * stride]`, then reads it back (or reads `s[0]`: a broadcast)."""
    read = "%c0" if broadcast else "%i"
    return f"""
kernel.func @bank(%x: memref<32xf32>, %y: memref<32xf32>) grid 1 block 32 {{
  %t = kernel.thread_id : index
  %c0 = arith.constant 0 : index
  %cS = arith.constant {stride} : index
  %i = arith.muli %t, %cS : index
  %s = kernel.shared_alloc : memref<1024xf32, 3 : i64>
  %v = kernel.load %x[%t] : memref<32xf32>
  kernel.store %v, %s[%i] : memref<1024xf32, 3 : i64>
  kernel.barrier
  %w = kernel.load %s[{read}] : memref<1024xf32, 3 : i64>
  kernel.store %w, %y[%t] : memref<32xf32>
  kernel.return
}}""" + _forward("bank", ["memref<32xf32>"], "memref<32xf32>")


def transpose_via_shared(n: int = 4096, pad: int = 0) -> str:
    """A 32x32-tile transpose staged through shared memory `tile[32][32 + pad]`: without
    padding the column read is a 32-way bank conflict."""
    memref = f"memref<{n}x{n}xf32>"
    tiles = n // 32
    width = 32 + pad
    shared = f"memref<32x{width}xf32, 3 : i64>"
    return f"""
kernel.func @transpose(%x: {memref}, %y: {memref}) grid {tiles * tiles} block 1024 {{
  %t = kernel.thread_id : index
  %b = kernel.block_id : index
  %c32 = arith.constant 32 : index
  %cTiles = arith.constant {tiles} : index
  %ty = arith.divsi %t, %c32 : index
  %tx = arith.remsi %t, %c32 : index
  %by = arith.divsi %b, %cTiles : index
  %bx = arith.remsi %b, %cTiles : index
  %row0 = arith.muli %by, %c32 : index
  %col0 = arith.muli %bx, %c32 : index
  %r = arith.addi %row0, %ty : index
  %c = arith.addi %col0, %tx : index
  %tile = kernel.shared_alloc : {shared}
  %v = kernel.load %x[%r, %c] : {memref}
  kernel.store %v, %tile[%ty, %tx] : {shared}
  kernel.barrier
  %w = kernel.load %tile[%tx, %ty] : {shared}
  %r2 = arith.addi %col0, %ty : index
  %c2 = arith.addi %row0, %tx : index
  kernel.store %w, %y[%r2, %c2] : {memref}
  kernel.return
}}""" + _forward("transpose", [memref], memref)


def fma_loop(grid: int, iterations: int = 512) -> str:
    """Compute-bound: each thread runs `iterations` dependent FMAs on one loaded value."""
    memref = f"memref<{grid * 256}xf32>"
    return f"""
kernel.func @fmas(%x: {memref}, %y: {memref}) grid {grid} block 256 {{
  %t = kernel.thread_id : index
  %b = kernel.block_id : index
  %c0 = arith.constant 0 : index
  %c256 = arith.constant 256 : index
  %base = arith.muli %b, %c256 : index
  %i = arith.addi %base, %t : index
  %v = kernel.load %x[%i] : {memref}
  %r = kernel.for %k = %c0 to {iterations} iter_args(%acc = %v) -> (f32) {{
    %m = arith.mulf %acc, %v : f32
    %s = arith.addf %m, %v : f32
    kernel.yield %s : f32
  }}
  kernel.store %r, %y[%i] : {memref}
  kernel.return
}}""" + _forward("fmas", [memref], memref)


def matmul_naive(n: int = 512) -> str:
    """One thread per output `C[i, j]`, lanes along j: A broadcast, B coalesced."""
    memref = f"memref<{n}x{n}xf32>"
    return f"""
kernel.func @mm(%a: {memref}, %b: {memref}, %c: {memref}) grid {n * n // 256} block 256 {{
  %t = kernel.thread_id : index
  %bid = kernel.block_id : index
  %c0 = arith.constant 0 : index
  %c256 = arith.constant 256 : index
  %cN = arith.constant {n} : index
  %zero = arith.constant 0.000000e+00 : f32
  %base = arith.muli %bid, %c256 : index
  %lin = arith.addi %base, %t : index
  %i = arith.divsi %lin, %cN : index
  %j = arith.remsi %lin, %cN : index
  %sum = kernel.for %k = %c0 to {n} iter_args(%acc = %zero) -> (f32) {{
    %x = kernel.load %a[%i, %k] : {memref}
    %y = kernel.load %b[%k, %j] : {memref}
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    kernel.yield %s : f32
  }}
  kernel.store %sum, %c[%i, %j] : {memref}
  kernel.return
}}""" + _forward("mm", [memref, memref], memref)


def matmul_register_tiled(n: int = 512, tile: int = 4) -> str:
    """Each thread computes a `tile x tile` block of C from `tile` A and `tile` B values per
    k: `tile^2` FMAs for `2 * tile` loads (an outer product in registers)."""
    memref = f"memref<{n}x{n}xf32>"
    per_row = n // tile
    grid = n * n // (256 * tile * tile)
    lines = [
        f"kernel.func @mm(%a: {memref}, %b: {memref}, %c: {memref}) grid {grid} block 256 {{",
        "  %t = kernel.thread_id : index",
        "  %bid = kernel.block_id : index",
        "  %c0 = arith.constant 0 : index",
        "  %c256 = arith.constant 256 : index",
        f"  %cR = arith.constant {per_row} : index",
        f"  %cT = arith.constant {tile} : index",
        "  %zero = arith.constant 0.000000e+00 : f32",
        "  %base = arith.muli %bid, %c256 : index",
        "  %lin = arith.addi %base, %t : index",
        "  %ti = arith.divsi %lin, %cR : index",
        "  %tj = arith.remsi %lin, %cR : index",
        "  %i0 = arith.muli %ti, %cT : index",
        "  %j0 = arith.muli %tj, %cT : index",
    ]
    for r in range(tile):
        lines.append(f"  %o{r} = arith.constant {r} : index")
        lines.append(f"  %i{r + 1} = arith.addi %i0, %o{r} : index")
        lines.append(f"  %jj{r} = arith.addi %j0, %o{r} : index")
    accs = [f"%acc{r}_{c}" for r in range(tile) for c in range(tile)]
    inits = ", ".join(f"{acc} = %zero" for acc in accs)
    types = ", ".join("f32" for _ in accs)
    results = ", ".join(f"%s{r}_{c}" for r in range(tile) for c in range(tile))
    lines.append(f"  {results} = kernel.for %k = %c0 to {n} iter_args({inits}) -> ({types}) {{")
    for r in range(tile):
        lines.append(f"    %x{r} = kernel.load %a[%i{r + 1}, %k] : {memref}")
        lines.append(f"    %y{r} = kernel.load %b[%k, %jj{r}] : {memref}")
    nexts = []
    for r in range(tile):
        for c in range(tile):
            lines.append(f"    %p{r}_{c} = arith.mulf %x{r}, %y{c} : f32")
            lines.append(f"    %n{r}_{c} = arith.addf %acc{r}_{c}, %p{r}_{c} : f32")
            nexts.append(f"%n{r}_{c}")
    lines.append(f"    kernel.yield {', '.join(nexts)} : {types}")
    lines.append("  }")
    for r in range(tile):
        for c in range(tile):
            lines.append(f"  kernel.store %s{r}_{c}, %c[%i{r + 1}, %jj{c}] : {memref}")
    lines += ["  kernel.return", "}"]
    return "\n".join(lines) + _forward("mm", [memref, memref], memref)


def matmul_16x16(n: int = 512, staged: bool = False) -> str:
    """16x16 threads per 16x16 tile of C. Unstaged: every k reads A and B from global memory.
    Staged: each 16-wide k-slab of A and B is copied to shared memory once per block, and the
    inner loop reads shared memory."""
    memref = f"memref<{n}x{n}xf32>"
    tiles = n // 16
    shared = "memref<16x16xf32, 3 : i64>"
    head = f"""
kernel.func @mm(%a: {memref}, %b: {memref}, %c: {memref}) grid {tiles * tiles} block 256 {{
  %t = kernel.thread_id : index
  %bid = kernel.block_id : index
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %cTiles = arith.constant {tiles} : index
  %zero = arith.constant 0.000000e+00 : f32
  %ty = arith.divsi %t, %c16 : index
  %tx = arith.remsi %t, %c16 : index
  %by = arith.divsi %bid, %cTiles : index
  %bx = arith.remsi %bid, %cTiles : index
  %r0 = arith.muli %by, %c16 : index
  %q0 = arith.muli %bx, %c16 : index
  %i = arith.addi %r0, %ty : index
  %j = arith.addi %q0, %tx : index"""
    if not staged:
        body = f"""
  %sum = kernel.for %k = %c0 to {n} iter_args(%acc = %zero) -> (f32) {{
    %x = kernel.load %a[%i, %k] : {memref}
    %y = kernel.load %b[%k, %j] : {memref}
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    kernel.yield %s : f32
  }}"""
    else:
        body = f"""
  %as = kernel.shared_alloc : {shared}
  %bs = kernel.shared_alloc : {shared}
  %sum = kernel.for %k0 = %c0 to {n} step 16 iter_args(%acc = %zero) -> (f32) {{
    %ka = arith.addi %k0, %tx : index
    %kb = arith.addi %k0, %ty : index
    %x = kernel.load %a[%i, %ka] : {memref}
    kernel.store %x, %as[%ty, %tx] : {shared}
    %y = kernel.load %b[%kb, %j] : {memref}
    kernel.store %y, %bs[%ty, %tx] : {shared}
    kernel.barrier
    %part = kernel.for %kk = %c0 to 16 iter_args(%acc2 = %acc) -> (f32) {{
      %u = kernel.load %as[%ty, %kk] : {shared}
      %v = kernel.load %bs[%kk, %tx] : {shared}
      %p = arith.mulf %u, %v : f32
      %s = arith.addf %acc2, %p : f32
      kernel.yield %s : f32
    }}
    kernel.barrier
    kernel.yield %part : f32
  }}"""
    tail = f"""
  kernel.store %sum, %c[%i, %j] : {memref}
  kernel.return
}}"""
    return head + body + tail + _forward("mm", [memref, memref], memref)


def copy_2d_ilp(n: int = 1024, per_thread: int = 4, threads: int = 256) -> str:
    """`copy_2d` with each thread moving `per_thread` elements `threads` apart: independent
    loads a warp can have in flight together (what a vector load gives in one request)."""
    memref = f"memref<{n * n}xf32>"
    chunk = threads * per_thread
    lines = [
        f"kernel.func @copy(%x: {memref}, %y: {memref}) grid {n * n // chunk} block {threads} {{",
        "  %t = kernel.thread_id : index",
        "  %b = kernel.block_id : index",
        f"  %cC = arith.constant {chunk} : index",
        "  %base = arith.muli %b, %cC : index",
        "  %i0 = arith.addi %base, %t : index",
    ]
    for e in range(1, per_thread):
        lines.append(f"  %o{e} = arith.constant {e * threads} : index")
        lines.append(f"  %i{e} = arith.addi %i0, %o{e} : index")
    for e in range(per_thread):
        lines.append(f"  %v{e} = kernel.load %x[%i{e}] : {memref}")
    for e in range(per_thread):
        lines.append(f"  kernel.store %v{e}, %y[%i{e}] : {memref}")
    lines += ["  kernel.return", "}"]
    return "\n".join(lines) + _forward("copy", [memref], memref)


def mma_loop(grid: int, iterations: int, threads: int = 128, scalar_fmas: int = 0) -> str:
    """Tensor-core-bound: each lane loads its bf16 A and B fragments once (8-byte vector
    loads) and the warp runs `iterations` dependent `kernel.mma_sync` on them;
    `scalar_fmas` dependent FFMAs per iteration add FP32-pipe work."""
    a_memref = f"memref<{grid * threads * 8}xbf16>"
    b_memref = f"memref<{grid * threads * 4}xbf16>"
    y_memref = f"memref<{grid * threads * 4}xf32>"
    a_lo, a_hi = (", ".join(f"%a{i}" for i in range(j, j + 4)) for j in (0, 4))
    a = f"{a_lo}, {a_hi}"
    b = ", ".join(f"%b{i}" for i in range(4))
    lines = [
        f"kernel.func @mmas(%a: {a_memref}, %b: {b_memref}, %y: {y_memref}) "
        f"grid {grid} block {threads} {{",
        "  %t = kernel.thread_id : index",
        "  %bid = kernel.block_id : index",
        "  %c0 = arith.constant 0 : index",
        f"  %cT = arith.constant {threads} : index",
        "  %c4 = arith.constant 4 : index",
        "  %c8 = arith.constant 8 : index",
        "  %zero = arith.constant 0.000000e+00 : f32",
        "  %base = arith.muli %bid, %cT : index",
        "  %lane = arith.addi %base, %t : index",
        "  %ia = arith.muli %lane, %c8 : index",
        "  %ib = arith.muli %lane, %c4 : index",
        f"  {a_lo} = kernel.load_vector %a[%ia] width 4 : {a_memref}",
        "  %ia4 = arith.addi %ia, %c4 : index",
        f"  {a_hi} = kernel.load_vector %a[%ia4] width 4 : {a_memref}",
        f"  {b} = kernel.load_vector %b[%ib] width 4 : {b_memref}",
        f"  %d0, %d1, %d2, %d3 = kernel.for %k = %c0 to {iterations} iter_args(%e0 = %zero, "
        "%e1 = %zero, %e2 = %zero, %e3 = %zero) -> (f32, f32, f32, f32) {",
        f"    %r0, %r1, %r2, %r3 = kernel.mma_sync a({a}) b({b}) c(%e0, %e1, %e2, %e3) : bf16",
    ]
    last = "%r3"
    for f in range(scalar_fmas):  # a dependent FFMA chain on the FP32 pipe
        lines.append(f"    %m{f} = arith.mulf {last}, %r0 : f32")
        lines.append(f"    %s{f} = arith.addf %m{f}, %r1 : f32")
        last = f"%s{f}"
    lines += [
        f"    kernel.yield %r0, %r1, %r2, {last} : f32, f32, f32, f32",
        "  }",
        f"  kernel.store_vector %d0, %d1, %d2, %d3, %y[%ib] : {y_memref}",
        "  kernel.return",
        "}",
    ]
    return "\n".join(lines) + _forward("mmas", [a_memref, b_memref], y_memref)


def shared_fill(rows: int = 64, carried: bool = False) -> str:
    """One warp fills `s[r, t]` row by row in a loop (barrier in it), then reads the last row
    back: what the loop writes is read after it. With `carried`, the loop also carries a sum
    (a K-loop-like shape the tracer samples)."""
    shared = f"memref<{rows}x32xf32, 3 : i64>"
    carry = " iter_args(%acc = %zero) -> (f32)" if carried else ""
    result = "%sum = " if carried else ""
    step = "  %n = arith.addf %acc, %v : f32\n    kernel.yield %n : f32" if carried else ""
    return f"""
kernel.func @fill(%x: memref<{rows}x32xf32>, %y: memref<32xf32>) grid 1 block 32 {{
  %t = kernel.thread_id : index
  %c0 = arith.constant 0 : index
  %last = arith.constant {rows - 1} : index
  %zero = arith.constant 0.000000e+00 : f32
  %s = kernel.shared_alloc : {shared}
  {result}kernel.for %r = %c0 to {rows}{carry} {{
    %v = kernel.load %x[%r, %t] : memref<{rows}x32xf32>
    kernel.store %v, %s[%r, %t] : {shared}
    kernel.barrier
  {step}
  }}
  %w = kernel.load %s[%last, %t] : {shared}
  kernel.store %w, %y[%t] : memref<32xf32>
  kernel.return
}}""" + _forward("fill", [f"memref<{rows}x32xf32>"], "memref<32xf32>")
