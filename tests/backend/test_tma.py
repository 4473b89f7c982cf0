"""TMA tensor copies and mbarriers in the device header: the CPU emulation checked against
the documented rules, planted bugs reported, and the same kernels built by nvcc for sm_90a.

The rules, written down here from the docs (never from `cpu_simt.h`):

- `cp.async.bulk.tensor.2d` (PTX ISA, "cp.async.bulk.tensor"; CUDA programming guide, "Using
  TMA to transfer multi-dimensional arrays"): the box at coordinates (c0 innermost, c1) lands
  in shared memory row after row; elements outside the tensor, on either side, are zeros.
- The swizzle patterns (CUDA programming guide, "TMA Swizzle"): shared memory is seen as rows
  of the span (32, 64 or 128 bytes) cut in 16-byte chunks; the tables give, for each row of
  the pattern's repeat (8 x span bytes), the chunk position each chunk of that row lands in
  (the same patterns as the PTX ISA's wgmma swizzles: `TABLES`, restated in `test_wgmma`).
  They are compared byte for byte with what the emulation writes.
- mbarrier (PTX ISA, "mbarrier"): a phase completes when all its expected arrivals are in and
  its tx-count (raised by `arrive.expect_tx`, lowered by each copy's bytes) is zero; a
  `try_wait.parity p` succeeds once the phase of parity p has completed. A wait that can never
  succeed is a hang (reported, not a silent pass); a barrier a TMA copy completes on must be
  made visible to the async proxy by `fence.proxy.async` after its init (the guide's TMA
  example).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deplodock.backend.cpu_runner import run_kernel
from deplodock.backend.device_header import device_part
from deplodock.backend.nvcc import compile_cubin
from deplodock.backend.tensor_map import TensorMapError, tensor_map_2d
from deplodock.interpreters.shared_memory import UninitializedReadError
from tests.backend.sass import needs_nvcc, sass_of
from tests.backend.test_wgmma import TABLES
from tests.helpers import kernel_abort

BOX_ROWS = 16
THREADS = 64


#: The tile kernel's head, on one line as memcheck's source rewrite expects.
TILE_HEAD = (
    'extern "C" __global__ void tile(const __grid_constant__ dd_tensor_map map, '
    "unsigned short* out, const int* origin)"
)


def tile_source(box_rows: int, box_cols: int, expect_bytes: int, wait: bool = True) -> str:
    """`tile(map, out, origin)`: block b copies the box at `origin + (b / 2 rows, b % 2
    cols) boxes` into shared memory through TMA, waits on its mbarrier (unless not
    `wait`), and every thread copies shared memory out as it lies (swizzled), 16-bit word by
    word."""
    words = box_rows * box_cols
    return f"""#include <cpu_simt.h>
{TILE_HEAD} {{
  __shared__ __align__(1024) unsigned short s[{words}];
  __shared__ __align__(8) unsigned long long bar[1];
  if (threadIdx.x == 0) {{
    dd_mbarrier_init(&bar[0], 1);
    dd_fence_proxy_async();
  }}
  __syncthreads();
  if (threadIdx.x == 0) {{
    dd_mbarrier_arrive_expect_tx(&bar[0], {expect_bytes}u);
    dd_tma_load_2d(&s[0], &map, origin[0] + (int)(blockIdx.x % 2) * {box_cols},
                   origin[1] + (int)(blockIdx.x / 2) * {box_rows}, &bar[0]);
  }}
  {"dd_mbarrier_wait(&bar[0], 0);" if wait else ""}
  for (int i = threadIdx.x; i < {words}; i += blockDim.x) out[blockIdx.x * {words} + i] = s[i];
}}
"""


def expected_tile(x: np.ndarray, row0: int, col0: int, box_cols: int, span: int) -> np.ndarray:
    """The shared bytes of one box by the rules above: the box row-major with zeros outside
    `x`, then each 16-byte chunk moved where the swizzle table puts it."""
    box = np.zeros((BOX_ROWS, box_cols), dtype=x.dtype)
    for r in range(BOX_ROWS):
        for c in range(box_cols):
            if 0 <= row0 + r < x.shape[0] and 0 <= col0 + c < x.shape[1]:
                box[r, c] = x[row0 + r, col0 + c]
    linear = box.reshape(-1).view(np.uint8)
    if span == 0:
        return linear.copy()
    chunks = linear.reshape(-1, span // 16, 16)  # rows of the span, in 16-byte chunks
    out = np.empty_like(chunks)
    for row in range(chunks.shape[0]):
        for chunk, lands in enumerate(TABLES[span][row % 8]):
            out[row, lands] = chunks[row, chunk]
    return out.reshape(-1)


def run_tiles(span: int, origin: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, int]:
    """Four boxes, from `origin` (column, row), of a random 16-bit tensor of 40 rows and 3
    box widths less 5 columns (a column slice of a wider array: its row pitch stays a
    multiple of 16 bytes), as the emulation lays them in shared memory; the tensor and the
    box width."""
    box_cols = (span or 64) // 2
    storage = np.random.default_rng(span).integers(1, 1 << 16, (40, 3 * box_cols), np.uint16)
    x = storage[:, : 3 * box_cols - 5]
    tmap = tensor_map_2d(x, (BOX_ROWS, box_cols), span)
    out = np.zeros(4 * BOX_ROWS * box_cols, dtype=np.uint16)
    source = tile_source(BOX_ROWS, box_cols, 2 * BOX_ROWS * box_cols)
    run_kernel(source, "tile", [tmap, out, np.array(origin, np.int32)], grid=4, block=THREADS)
    return out.reshape(4, -1), x, box_cols


@pytest.mark.parametrize("span", [0, 32, 64, 128])
@pytest.mark.parametrize("origin", [(0, 0), (-3, 30)], ids=["inside", "over-every-edge"])
def test_tma_tiles_land_as_the_swizzle_tables_say(span: int, origin: tuple[int, int]) -> None:
    got, x, box_cols = run_tiles(span, origin)
    for block in range(4):
        col0 = origin[0] + (block % 2) * box_cols
        row0 = origin[1] + (block // 2) * BOX_ROWS
        want = expected_tile(x, row0, col0, box_cols, span)
        np.testing.assert_array_equal(got[block].view(np.uint8), want, err_msg=f"block {block}")


def test_the_tables_are_permutations_that_differ_from_the_identity() -> None:
    for span, table in TABLES.items():
        assert all(sorted(row) == list(range(span // 16)) for row in table)
        assert any(row != sorted(row) for row in table)


@pytest.mark.parametrize(
    ("box", "swizzle", "message"),
    [
        ((16, 64), 64, "exactly the span"),
        ((16, 4), 0, "not a multiple of 16 bytes"),
        ((300, 64), 0, "each side must be 1 to 256"),
        ((16, 64), 16, "expected one of"),
    ],
)
def test_bad_tensor_maps_are_one_line_errors(
    box: tuple[int, int], swizzle: int, message: str
) -> None:
    with pytest.raises(TensorMapError, match=message):
        tensor_map_2d(np.zeros((64, 64), np.uint16), box, swizzle)


# --------------------------------------------------------------------------------------------
# A pipelined reduction: two stages, full and empty barriers, planted bugs


STAGES = 2
TILES = 6
PIPE_COLS = 32  # 32 floats: 128-byte rows, swizzled by 128 bytes


def pipeline_source(bug: str = "") -> str:
    """`tma_pipeline(map, out)`: thread 0 streams TILES boxes of 16 x 32 floats through two shared
    stages (full barrier: one arrival plus the box's bytes; empty barrier: every thread);
    every thread sums its elements of each box, read through the 128-byte swizzle, into
    `out`. `bug` plants one: "expect-tx" (twice the bytes), "no-fence", "reuse" (the
    producer reuses a stage without waiting on its empty barrier)."""
    box_bytes = BOX_ROWS * PIPE_COLS * 4
    expect = 2 * box_bytes if bug == "expect-tx" else box_bytes
    fence = "" if bug == "no-fence" else "dd_fence_proxy_async();"
    empty_wait = (
        "" if bug == "reuse" else "if (t >= 2) dd_mbarrier_wait(&empty[s], (round - 1) & 1);"
    )
    return f"""#include <cpu_simt.h>
extern "C" __global__ void tma_pipeline(const __grid_constant__ dd_tensor_map map, float* out) {{
  __shared__ __align__(1024) float stage[{STAGES}][{BOX_ROWS * PIPE_COLS}];
  __shared__ __align__(8) unsigned long long full[{STAGES}], empty[{STAGES}];
  if (threadIdx.x == 0) {{
    for (int s = 0; s < {STAGES}; ++s) {{
      dd_mbarrier_init(&full[s], 1);
      dd_mbarrier_init(&empty[s], blockDim.x);
    }}
    {fence}
  }}
  __syncthreads();
  float acc[{BOX_ROWS * PIPE_COLS // THREADS}] = {{}};
  for (int t = 0; t < {TILES}; ++t) {{
    const int s = t % {STAGES};
    const unsigned round = t / {STAGES};
    if (threadIdx.x == 0) {{
      {empty_wait}
      dd_mbarrier_arrive_expect_tx(&full[s], {expect}u);
      dd_tma_load_2d(stage[s], &map, 0, t * {BOX_ROWS}, &full[s]);
    }}
    dd_mbarrier_wait(&full[s], round & 1);
    for (int k = 0; k < {BOX_ROWS * PIPE_COLS // THREADS}; ++k) {{
      const int i = threadIdx.x + k * {THREADS};  // element (i / 32, i % 32) of the box
      const int byte = i * 4;
      acc[k] += stage[s][(byte ^ (((byte >> 7) & 7) << 4)) / 4];
    }}
    dd_mbarrier_arrive(&empty[s]);
  }}
  for (int k = 0; k < {BOX_ROWS * PIPE_COLS // THREADS}; ++k)
    out[threadIdx.x + k * {THREADS}] = acc[k];
}}
"""


def _pipeline_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.random.default_rng(7).standard_normal((TILES * BOX_ROWS, PIPE_COLS)).astype(np.float32)
    tmap = tensor_map_2d(x, (BOX_ROWS, PIPE_COLS), 128)
    return x, tmap, np.zeros(BOX_ROWS * PIPE_COLS, np.float32)


def test_the_pipeline_sums_the_tiles_like_float64() -> None:
    x, tmap, out = _pipeline_inputs()
    run_kernel(pipeline_source(), "tma_pipeline", [tmap, out], grid=1, block=THREADS)
    want = x.astype(np.float64).reshape(TILES, -1).sum(axis=0)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_reading_before_the_barrier_sees_undefined_bytes() -> None:
    x = np.arange(1, 64 * 64 + 1, dtype=np.uint16).reshape(64, 64)
    out = np.zeros(BOX_ROWS * 64, np.uint16)
    source = tile_source(BOX_ROWS, 64, 2 * BOX_ROWS * 64, wait=False)
    tmap = tensor_map_2d(x, (BOX_ROWS, 64), 128)
    run_kernel(source, "tile", [tmap, out, np.zeros(2, np.int32)], grid=1, block=THREADS)
    assert (out == 0xFFFF).all()  # undefined (the emulation's 0xff fill) until the phase ends


def _stderr_of(source: str, name: str, make_args: str, grid: int = 1) -> str:
    """Runs the kernel in a child process (the emulation aborts) and returns its stderr."""
    setup = "from tests.backend.test_tma import _pipeline_inputs\n"
    return kernel_abort(source, name, make_args, grid, THREADS, setup)


PIPE_ARGS = "list(_pipeline_inputs()[1:])"


@pytest.mark.slow  # a child process (the emulation aborts) and a g++ build each
@pytest.mark.parametrize(
    ("bug", "message"),
    [
        ("expect-tx", "hang in block 0: thread 0 waits for the phase of parity 0 of mbarrier 0"),
        ("no-fence", "no fence.proxy.async made visible to the async proxy"),
        ("reuse", "thread 1 of block 0: race: its wait 0 on mbarrier 0 is for the bytes"),
    ],
)
def test_planted_pipeline_bugs_are_reported(bug: str, message: str) -> None:
    assert message in _stderr_of(pipeline_source(bug), "tma_pipeline", PIPE_ARGS)


@pytest.mark.slow
def test_too_few_expected_bytes_are_reported() -> None:
    box_bytes = 2 * BOX_ROWS * 64
    source = tile_source(BOX_ROWS, 64, box_bytes // 2)
    args = (
        "[__import__('deplodock.backend.tensor_map', fromlist=['x']).tensor_map_2d("
        "np.zeros((64, 128), np.uint16), (16, 64), 128), np.zeros(4096, np.uint16), "
        "np.zeros(2, np.int32)]"
    )
    stderr = _stderr_of(source, "tile", args)
    assert "delivered more bytes than mbarrier.arrive.expect_tx announced" in stderr


# --------------------------------------------------------------------------------------------
# nvcc for sm_90a: the same kernels, and their SASS


def nvcc_source(source: str) -> str:
    """`source` as a unit nvcc builds alone: the device header's part instead of the include."""
    return device_part() + source.replace("#include <cpu_simt.h>\n", "")


@needs_nvcc
def test_nvcc_builds_the_pipeline_for_sm_90a_with_utmaldg_and_syncs(tmp_path: Path) -> None:
    source = nvcc_source(pipeline_source())
    result = compile_cubin(source, arch="sm_90a", extra_flags=["-O3"])
    assert set(result.kernels) == {"tma_pipeline"} and not result.kernels["tma_pipeline"].spills
    sass = sass_of(source, tmp_path, arch="sm_90a")
    assert "UTMALDG.2D" in sass
    assert "SYNCS.ARRIVE" in sass  # mbarrier.arrive(.expect_tx)
    assert "SYNCS.PHASECHK" in sass  # the try_wait.parity loop
    assert "FENCE.VIEW.ASYNC.S" in sass  # fence.proxy.async.shared::cta


# --------------------------------------------------------------------------------------------
# memcheck: the copies' destinations are checked spans, written when the copy lands


def test_tma_tiles_under_memcheck_match_the_plain_run() -> None:
    box_cols, origin = 64, np.array((-3, 30), np.int32)
    x = np.random.default_rng(11).integers(0, 1 << 16, (40, 3 * box_cols - 8), np.uint16)
    outs = []
    for memcheck in (False, True):
        out = np.zeros(4 * BOX_ROWS * box_cols, np.uint16)
        tmap = tensor_map_2d(x, (BOX_ROWS, box_cols), 128)
        args = [tmap, out, origin]
        source = tile_source(BOX_ROWS, box_cols, 2 * BOX_ROWS * box_cols)
        run_kernel(source, "tile", args, grid=4, block=THREADS, memcheck=memcheck)
        outs.append(out)
    np.testing.assert_array_equal(outs[1], outs[0])
    want = expected_tile(x, 30, -3, box_cols, 128).view(np.uint16)
    np.testing.assert_array_equal(outs[0][: BOX_ROWS * box_cols], want)


def test_memcheck_reports_a_read_before_the_barrier() -> None:
    source = tile_source(BOX_ROWS, 64, 2 * BOX_ROWS * 64, wait=False)
    args = [
        tensor_map_2d(np.zeros((64, 64), np.uint16), (BOX_ROWS, 64), 128),
        np.zeros(4 * BOX_ROWS * 64, np.uint16),
        np.zeros(2, np.int32),
    ]
    with pytest.raises(UninitializedReadError, match="uninitialized"):
        run_kernel(source, "tile", args, grid=4, block=THREADS, memcheck=True)
