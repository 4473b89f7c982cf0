"""sm_90a `wgmma`: its matrix descriptors, swizzles and accumulator layout checked against the
PTX ISA's tables (restated here by hand, not derived from `common/wgmma.py`); `kernel.wgmma`
run by the kernel interpreter and by the emitted CUDA C on the CPU emulation against numpy
float64 on random inputs; and the emitted CUDA compiled by nvcc for sm_90a to HGMMA.

The interpreted kernels are written at the kernel level by hand: the host builds the byte
image of each operand's shared array by the ISA's canonical K-major layout (core matrices of
8 rows x 16 bytes, LBO between core matrices along K, SBO between 8-row groups, then the
swizzle's chunk permutation from the tables below), the kernel copies the images verbatim into
shared memory, runs one wgmma with descriptors for them and stores every thread's accumulator
registers; the test places each register by the ISA's accumulator rule and compares D with
A B^T + C in float64.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.utils.exceptions import InterpretationError, VerifyException

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.backend.cuda_source import kernels_text
from deplodock.backend.nvcc import compile_cubin
from deplodock.dialects import cuda
from deplodock.dialects.common.wgmma import (
    MatrixDescriptor,
    accumulator_position,
    swizzle_address,
)
from tests.backend.sass import cubin_sass, needs_nvcc
from tests.backend.test_mma_sync import kernel_source, lowered
from tests.helpers import kernel_abort, parse

# -- the ISA's tables, restated ----------------------------------------------------------------

#: Where the 16-byte chunk `c` of row `r` of a swizzle pattern lands (the ISA's swizzle
#: figures: rows of 128, 64 and 32 bytes, 8 rows per pattern of 1024, 512 and 256 bytes; the
#: CUDA programming guide's "TMA Swizzle" tables are the same, and `test_tma` reads them here).
SWIZZLE_128B = [
    [0, 1, 2, 3, 4, 5, 6, 7],
    [1, 0, 3, 2, 5, 4, 7, 6],
    [2, 3, 0, 1, 6, 7, 4, 5],
    [3, 2, 1, 0, 7, 6, 5, 4],
    [4, 5, 6, 7, 0, 1, 2, 3],
    [5, 4, 7, 6, 1, 0, 3, 2],
    [6, 7, 4, 5, 2, 3, 0, 1],
    [7, 6, 5, 4, 3, 2, 1, 0],
]
SWIZZLE_64B = [
    [0, 1, 2, 3],
    [0, 1, 2, 3],
    [1, 0, 3, 2],
    [1, 0, 3, 2],
    [2, 3, 0, 1],
    [2, 3, 0, 1],
    [3, 2, 1, 0],
    [3, 2, 1, 0],
]
SWIZZLE_32B = [[0, 1]] * 4 + [[1, 0]] * 4
TABLES = {128: SWIZZLE_128B, 64: SWIZZLE_64B, 32: SWIZZLE_32B}


@pytest.mark.parametrize("width", [128, 64, 32])
def test_swizzle_moves_each_chunk_where_the_isa_table_says(width: int) -> None:
    table = TABLES[width]
    period = 8 * width
    for repeat in range(2):  # the pattern repeats every 8 rows
        for row in range(8):
            for chunk in range(width // 16):
                for byte in (0, 5, 15):
                    logical = repeat * period + row * width + chunk * 16 + byte
                    physical = repeat * period + row * width + table[row][chunk] * 16 + byte
                    assert int(swizzle_address(logical, width)) == physical


def test_no_swizzle_moves_nothing() -> None:
    addresses = np.arange(4096)
    np.testing.assert_array_equal(swizzle_address(addresses, 0), addresses)


# Descriptors encoded by hand from the ISA's bit table: start >> 4 in bits 0-13, LBO >> 4 in
# 16-29, SBO >> 4 in 32-45, base offset in 49-51, mode in 62-63 (1: 128B, 2: 64B, 3: 32B).
ENCODED = [
    (MatrixDescriptor(start=0x400, lbo=16, sbo=1024, swizzle=128), 0x4000_0040_0001_0040),
    (MatrixDescriptor(start=0x3FFF0, lbo=0x3FFF0, sbo=0x3FFF0), 0x0000_3FFF_3FFF_3FFF),
    (MatrixDescriptor(start=0x10, lbo=128, sbo=256, swizzle=64), 0x8000_0010_0008_0001),
    (MatrixDescriptor(start=0, lbo=0, sbo=512, swizzle=32, base_offset=5), 0xC00A_0020_0000_0000),
]


@pytest.mark.parametrize(("desc", "bits"), ENCODED)
def test_descriptor_bits_follow_the_isa_table(desc: MatrixDescriptor, bits: int) -> None:
    assert desc.encode() == bits
    assert MatrixDescriptor.decode(bits) == desc


def test_decode_ignores_the_unused_bits() -> None:
    unused = (0b11 << 14) | (0b11 << 30) | (0b111 << 46) | (0x3FF << 52)
    desc, bits = ENCODED[0]
    assert MatrixDescriptor.decode(bits | unused) == desc


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"start": 8, "lbo": 16, "sbo": 16}, "start must be a multiple of 16"),
        ({"start": 0, "lbo": 1 << 18, "sbo": 16}, "lbo must be a multiple of 16 below 2"),
        ({"start": 0, "lbo": 16, "sbo": 16, "swizzle": 16}, "swizzle must be 0, 32, 64"),
    ],
)
def test_a_bad_descriptor_field_is_one_line_error(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MatrixDescriptor(**fields)


def isa_accumulator(thread: int, i: int) -> tuple[int, int]:
    """The ISA's m64nNk16 accumulator rule as its text gives it: warp `thread / 32` owns 16
    rows; with groupID = lane >> 2 and threadID_in_group = lane % 4, d_i is at row groupID
    (+ 8 when i % 4 >= 2) of the warp's rows, column (i / 4) * 8 + threadID_in_group * 2 +
    (i & 1)."""
    warp, lane = thread // 32, thread % 32
    row = warp * 16 + (lane >> 2) + (8 if i % 4 >= 2 else 0)
    return row, (i // 4) * 8 + (lane % 4) * 2 + (i & 1)


#: Entries read off the ISA's accumulator figure (thread, register) -> (row, column).
FIGURE = {
    (0, 0): (0, 0),
    (0, 1): (0, 1),
    (0, 2): (8, 0),
    (0, 3): (8, 1),
    (0, 4): (0, 8),
    (5, 0): (1, 2),
    (31, 3): (15, 7),
    (37, 0): (17, 2),
    (127, 31): (63, 63),
}


def test_accumulator_layout_lane_by_lane() -> None:
    for (thread, i), where in FIGURE.items():
        assert accumulator_position(thread, i) == where
    cells = set()
    for thread in range(128):
        for i in range(128):  # N = 256: 128 registers
            assert accumulator_position(thread, i) == isa_accumulator(thread, i)
            cells.add(accumulator_position(thread, i))
    assert len(cells) == 64 * 256  # every element of D exactly once


# -- kernel.wgmma in the interpreter -----------------------------------------------------------


def operand_image(x: np.ndarray, swizzle: int, lbo: int, sbo: int, size: int) -> np.ndarray:
    """The shared array (in elements) holding the K-major `rows x K` operand `x` (K spans 32
    bytes) laid out as the ISA's canonical layout with these offsets says."""
    element = 32 // x.shape[1]
    image = np.zeros(size // element, dtype=x.dtype)
    per_chunk = 16 // element
    for r in range(x.shape[0]):
        for chunk in range(2):  # the two 16-byte chunks of the row's 32 bytes of K
            if swizzle:  # row r % 8 of its 8-row group is `swizzle` bytes long
                moved = TABLES[swizzle][r % 8][chunk]
                at = (r // 8) * sbo + (r % 8) * swizzle + moved * 16
            else:  # core matrix (r / 8, chunk): 8 rows of 16 bytes
                at = (r // 8) * sbo + chunk * lbo + (r % 8) * 16
            image[at // element : at // element + per_chunk] = x[
                r, chunk * per_chunk : (chunk + 1) * per_chunk
            ]
    return image


def wgmma_module(
    n: int,
    element: str,
    a_layout: tuple[int, int, int],
    b_layout: tuple[int, int, int],
    sizes: tuple[int, int],
    wait: bool = True,
    fence: bool = True,
    chain: bool = False,
) -> str:
    """`@forward(%a_img, %b_img, %c) -> %out`: one warpgroup copies the images into shared
    memory, runs one wgmma on accumulators `c[t, :]` and stores them at `out[t, :]`."""
    k = 16 if element != "f32" else 8
    regs = n // 2
    a_t, b_t = f"memref<{sizes[0]}x{element}>", f"memref<{sizes[1]}x{element}>"
    sa_t, sb_t = f"memref<{sizes[0]}x{element}, 3 : i64>", f"memref<{sizes[1]}x{element}, 3 : i64>"
    c_t = f"memref<128x{regs}xf32>"
    consts = "\n    ".join(f"%k{i} = arith.constant {i} : index" for i in range(regs))
    loads = "\n    ".join(f"%c{i} = kernel.load %c[%t, %k{i}] : {c_t}" for i in range(regs))
    last = "e" if chain else "d"
    stores = "\n    ".join(f"kernel.store %{last}{i}, %out[%t, %k{i}] : {c_t}" for i in range(regs))
    cs = ", ".join(f"%c{i}" for i in range(regs))
    ds = ", ".join(f"%d{i}" for i in range(regs))
    (asw, albo, asbo), (bsw, blbo, bsbo) = a_layout, b_layout
    es = ds.replace("%d", "%e")
    second = f"{es} = kernel.wgmma m64n{n}k{k} %sa(%da), %sb(%db) c({ds}) : {sa_t}, {sb_t}"
    return f"""
builtin.module {{
  kernel.func @wg(%a: {a_t}, %b: {b_t}, %c: {c_t}, %out: {c_t}) grid 1 block 128 {{
    %sa = kernel.shared_alloc : {sa_t}
    %sb = kernel.shared_alloc : {sb_t}
    {consts}
    %t = kernel.thread_id : index
    kernel.for %i = %t to {sizes[0]} step 128 {{
      %v = kernel.load %a[%i] : {a_t}
      kernel.store %v, %sa[%i] : {sa_t}
    }}
    kernel.for %i = %t to {sizes[1]} step 128 {{
      %v = kernel.load %b[%i] : {b_t}
      kernel.store %v, %sb[%i] : {sb_t}
    }}
    kernel.barrier
    {loads}
    %da = kernel.wgmma_desc %sa[%k0] swizzle {asw} lbo {albo} sbo {asbo} : {sa_t}
    %db = kernel.wgmma_desc %sb[%k0] swizzle {bsw} lbo {blbo} sbo {bsbo} : {sb_t}
    {"kernel.wgmma_fence" if fence else ""}
    {ds} = kernel.wgmma m64n{n}k{k} %sa(%da), %sb(%db) c({cs}) : {sa_t}, {sb_t}
    {second if chain else ""}
    kernel.wgmma_commit
    {"kernel.wgmma_wait 0" if wait else ""}
    {stores}
    kernel.return
  }}
  func.func @forward(%a: {a_t}, %b: {b_t}, %c: {c_t}) -> {c_t} {{
    %out = kernel.alloc : {c_t}
    kernel.launch @wg(%a, %b, %c, %out) : ({a_t}, {b_t}, {c_t}, {c_t}) -> ()
    func.return %out : {c_t}
  }}
}}"""


def rounded_to(x: np.ndarray, mantissa_bits: int) -> np.ndarray:
    """`x` (float32) with all but `mantissa_bits` mantissa bits cleared: a bf16 (7) or tf32
    (10) value."""
    mask = np.uint32(~((1 << (23 - mantissa_bits)) - 1) & 0xFFFFFFFF)
    return (x.astype(np.float32).view(np.uint32) & mask).view(np.float32)


#: (N, element, A layout, B layout): (swizzle, LBO, SBO) of each operand, and the image sizes
#: in bytes.
CASES = {
    "m64n64k16-bf16-128B": (64, "bf16", (128, 16, 1024), (128, 16, 1024)),
    "m64n64k16-bf16-none": (64, "bf16", (0, 128, 256), (0, 1024, 128)),
    "m64n32k8-tf32-64B": (32, "f32", (64, 16, 512), (32, 16, 256)),
    "m64n32k8-tf32-none": (32, "f32", (0, 128, 256), (0, 128, 256)),
    "m64n24k16-f16-32B": (24, "f16", (32, 16, 256), (0, 384, 128)),
}


def image_bytes(rows: int, layout: tuple[int, int, int]) -> int:
    """Bytes up to the end of the last 8-row group (each `8 S`, or two core matrices LBO apart)."""
    swizzle, lbo, sbo = layout
    return (rows // 8 - 1) * sbo + (8 * swizzle if swizzle else lbo + 128)


def run_case(
    case: str,
    wait: bool = True,
    fence: bool = True,
    b_sbo: int | None = None,
    emitted_c: bool = False,
    chain: bool = False,
):
    """(D as the kernel left it, A B^T + C in float64) for one case on random inputs, run by
    the interpreter or (`emitted_c`) by the printed CUDA C on the CPU emulation."""
    n, element, a_layout, b_layout = CASES[case]
    rng = np.random.default_rng(7)
    k = 8 if element == "f32" else 16

    def values(shape: tuple[int, int]) -> np.ndarray:
        x = rng.standard_normal(shape)
        if element == "f16":
            return x.astype(np.float16).astype(np.float32)
        return rounded_to(x, 7 if element == "bf16" else 10)

    a, b = values((64, k)), values((n, k))
    c = rng.standard_normal((128, n // 2)).astype(np.float32)
    sizes = (image_bytes(64, a_layout), image_bytes(n, b_layout))
    a_img = operand_image(a, *a_layout, sizes[0])
    b_img = operand_image(b, *b_layout, sizes[1])
    elements = tuple(size * k // 32 for size in sizes)
    kernel_b = b_layout if b_sbo is None else (b_layout[0], b_layout[1], b_sbo)
    text = wgmma_module(n, element, a_layout, kernel_b, elements, wait, fence, chain)
    module = lowered(parse(text)) if emitted_c else parse(text)
    (out,) = run_on_cpu(module, [a_img, b_img, c])
    d = np.zeros((64, n))
    expected = a.astype(np.float64) @ b.astype(np.float64).T * (2 if chain else 1)
    for thread in range(128):
        for i in range(n // 2):
            row, col = isa_accumulator(thread, i)
            d[row, col] = out[thread, i]
            expected[row, col] += c[thread, i]
    return d, expected


#: Each emitted-C run builds with g++ (seconds): one case stays in the quick suite.
RUNS = [pytest.param(case, "interpreter", id=f"{case}-interpreter") for case in CASES] + [
    pytest.param(
        case,
        "cpu-c",
        id=f"{case}-cpu-c",
        marks=() if case == "m64n64k16-bf16-128B" else pytest.mark.slow,
    )
    for case in CASES
]


@pytest.mark.parametrize(("case", "runner"), RUNS)
def test_wgmma_computes_a_times_b_plus_d(case: str, runner: str) -> None:
    d, expected = run_case(case, emitted_c=runner == "cpu-c")
    np.testing.assert_allclose(d, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("runner", ["interpreter", pytest.param("cpu-c", marks=pytest.mark.slow)])
def test_a_wgmma_chains_onto_one_in_flight(runner: str) -> None:
    """Two wgmmas on one accumulator with no wait between (the hardware orders them): D = A
    B^T + (A B^T + C)."""
    d, expected = run_case("m64n32k8-tf32-64B", chain=True, emitted_c=runner == "cpu-c")
    np.testing.assert_allclose(d, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_the_emulation_lands_the_result_only_at_the_wait() -> None:
    """Without the wait the C emulation's registers keep C (as a GPU may): D != A B^T + C,
    and what was read is exactly the accumulator passed in."""
    d, expected = run_case("m64n32k8-tf32-none", wait=False, emitted_c=True)
    assert not np.allclose(d, expected, rtol=1e-3, atol=1e-3)
    d_plus_ab, _ = run_case("m64n32k8-tf32-none", emitted_c=True)
    assert not np.allclose(d, d_plus_ab, rtol=1e-3, atol=1e-3)


@pytest.mark.slow
def test_the_emulation_reports_a_wgmma_without_a_fence() -> None:
    source = kernel_source(
        lowered(
            parse(wgmma_module(16, "bf16", (0, 128, 256), (0, 128, 256), (512, 512), fence=False))
        )
    )
    args = (
        "[np.zeros(512, np.uint16), np.zeros(512, np.uint16), np.zeros(1024, np.float32), "
        "np.zeros(1024, np.float32)]"
    )
    assert "wgmma without a wgmma_fence" in kernel_abort(source, "wg", args, block=128)


def test_a_wrong_descriptor_stride_is_caught() -> None:
    """B's 8-row groups are 128 bytes apart: 64 reads overlapping rows (wrong numbers), 2048
    reads past the array (a reported error)."""
    d, expected = run_case("m64n64k16-bf16-none", b_sbo=64)
    assert not np.allclose(d, expected, rtol=1e-3, atol=1e-3)
    with pytest.raises(InterpretationError, match="past its 2048"):
        run_case("m64n64k16-bf16-none", b_sbo=2048)


def test_reading_the_accumulator_before_the_wait_is_a_reported_race() -> None:
    with pytest.raises(InterpretationError, match="still in flight"):
        run_case("m64n32k8-tf32-none", wait=False)


def test_a_wgmma_without_a_fence_is_reported() -> None:
    with pytest.raises(InterpretationError, match=r"without a kernel\.wgmma_fence"):
        run_case("m64n32k8-tf32-none", fence=False)


def test_the_ops_round_trip_and_are_verified() -> None:
    text = wgmma_module(16, "bf16", (0, 128, 256), (0, 128, 256), (512, 512))
    printed = str(parse(text))
    assert "kernel.wgmma_desc %sa[%k0] swizzle 0 lbo 128 sbo 256 : memref<512xbf16, 3 : i64>" in (
        printed
    )
    assert str(parse(printed)) == printed
    with pytest.raises(VerifyException, match="N must be a multiple of 8 from 8 to 256"):
        seven = text.replace("c(%c0, %c1,", "c(%c1,").replace("%d0, %d1,", "%d1,")
        seven = seven.replace("kernel.store %d0,", "kernel.store %d1,")
        parse(seven.replace("m64n16k16", "m64n14k16"))
    with pytest.raises(VerifyException, match="swizzle must be 0, 32, 64 or 128"):
        parse(text.replace("swizzle 0 lbo 128", "swizzle 16 lbo 128"))
    with pytest.raises(VerifyException, match="runs on warpgroups of 128 threads"):
        parse(text.replace("grid 1 block 128", "grid 1 block 96"))
    mixed = wgmma_module(16, "bf16", (0, 128, 256), (0, 128, 256), (512, 256))
    with pytest.raises(VerifyException, match="A and B must have one element type"):
        parse(mixed.replace("256xbf16", "256xf16"))
    with pytest.raises(Exception, match="expected m64n16k16"):
        parse(text.replace("m64n16k16", "m64n16k8"))


@needs_nvcc
@pytest.mark.parametrize(
    "case", ["m64n64k16-bf16-128B", pytest.param("m64n32k8-tf32-64B", marks=pytest.mark.slow)]
)
def test_nvcc_compiles_it_for_sm_90a_to_hgmma(case: str, tmp_path: Path) -> None:
    n, element, a_layout, b_layout = CASES[case]
    k = 8 if element == "f32" else 16
    sizes = tuple(
        image_bytes(rows, layout) * k // 32 for rows, layout in ((64, a_layout), (n, b_layout))
    )
    module = lowered(parse(wgmma_module(n, element, a_layout, b_layout, sizes)))
    source = kernels_text([op for op in module.ops if isinstance(op, cuda.KernelOp)])
    flags = ["-O3", "-gencode=arch=compute_90a,code=sm_90a"]
    cubin = compile_cubin(source, arch="sm_90a", extra_flags=flags)
    assert not cubin.kernels["wg"].spills
    sass = cubin_sass(cubin.cubin, tmp_path)
    hgmma = [line for line in sass.splitlines() if "HGMMA" in line]
    assert len(hgmma) == 1, hgmma
    assert f"HGMMA.64x{n}x{k}.F32.{'BF16' if element == 'bf16' else 'TF32'}" in hgmma[0]
    assert "gdesc" in hgmma[0]  # A and B through descriptors
    assert "WARPGROUP.ARRIVE" in sass  # wgmma.fence
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x0" in sass  # wgmma.wait_group 0
