"""`kernel.mma_sync` in the emitted CUDA: the `dd_mma_m16n8k16` helper of the device header,
its CPU emulation checked against the PTX ISA's fragment layout, against numpy and against
the kernel interpreter, under memcheck, and compiled by nvcc to a tensor-core HMMA.

The kernels are written at the kernel level by hand: each lane loads its fragments of A
(16x16), B (16x8, k x n) and C (16x8 fp32) from global buffers at positions computed in the
IR from the thread id by the documented layout (`LAYOUT` below, copied from the PTX ISA's
"Matrix Fragments for mma.m16n8k16 with floating point type", not from common/mma.py), runs
one `kernel.mma_sync` and stores its D fragment by C's layout. So the stored D is the matrix
A x B + C exactly when the emulation (or the interpreter's common/mma.py) places every
fragment register where the ISA does. One kind of misplacement cannot show in D: the same
permutation of k in A and in B (two swapped halves of every packed pair, say) leaves the
product alone; it changes the order of the sums, which the bit-for-bit comparison of the
emulation with the interpreter catches on inputs whose sums round.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import InterpretationError

from deplodock.backend.cpu_runner import run_kernel, run_on_cpu
from deplodock.backend.cuda_source import kernels_text
from deplodock.backend.nvcc import compile_cubin
from deplodock.dialects import cuda, make_context
from deplodock.passes.convert_kernel_to_cuda import ConvertKernelToCudaPass
from tests.backend.sass import needs_nvcc, sass_of
from tests.helpers import kernel_abort, parse

M, N, K = 16, 8, 16

#: The PTX ISA's fragment layout. Lane l has group g = l >> 2 and index q = l % 4; entry i of
#: an operand is the (row, column) of its register i, each given as coefficients (cg, cq, c):
#: row = cg * g + cq * q + c.
LAYOUT: dict[str, list[tuple[tuple[int, int, int], tuple[int, int, int]]]] = {
    # A (M x K): row g + 8 * ((i >> 1) & 1), column 2q + (i & 1) + 8 * (i >> 2)
    "a": [((1, 0, 8 * ((i >> 1) & 1)), (0, 2, (i & 1) + 8 * (i >> 2))) for i in range(8)],
    # B (K x N): row 2q + (i & 1) + 8 * (i >> 1), column g
    "b": [((0, 2, (i & 1) + 8 * (i >> 1)), (1, 0, 0)) for i in range(4)],
    # C and D (M x N): row g + 8 * (i >> 1), column 2q + (i & 1)
    "c": [((1, 0, 8 * (i >> 1)), (0, 2, i & 1)) for i in range(4)],
}


def _coordinate(value: str, coefficients: tuple[int, int, int]) -> list[str]:
    """IR lines computing `cg * g + cq * q + c0` into `%<value>` (from `%g`, `%q`)."""
    cg, cq, c0 = coefficients
    lines, terms = [], []
    for var, coefficient in (("g", cg), ("q", cq)):
        if coefficient == 1:
            terms.append(f"%{var}")
        elif coefficient > 1:
            lines.append(f"%{value}_{var} = arith.muli %k{coefficient}, %{var} : index")
            terms.append(f"%{value}_{var}")
    (term,) = terms  # each coordinate follows g or q
    return [*lines, f"%{value} = arith.addi %k{c0}, {term} : index"]


def mma_module(element: str, block: int, grid: int, lanes: int = 32) -> str:
    """`@mma`: each warp w of the launch computes D[w] = A[w] x B[w] + C[w] with one
    `kernel.mma_sync`, its fragments loaded and stored by `LAYOUT` (`lanes` < 32: only the
    first lanes of each warp run the MMA, which is undefined)."""
    warps = grid * block // 32
    a_t, b_t = f"memref<{warps}x{M}x{K}x{element}>", f"memref<{warps}x{K}x{N}x{element}>"
    c_t = f"memref<{warps}x{M}x{N}xf32>"
    constants = sorted({32, 4, block // 32} | set(range(16)))
    body = [f"%k{c} = arith.constant {c} : index" for c in constants]
    body += [
        "%t = kernel.thread_id : index",
        "%bid = kernel.block_id : index",
        "%lane = arith.remsi %t, %k32 : index",
        "%wib = arith.divsi %t, %k32 : index",
        f"%wbase = arith.muli %bid, %k{block // 32} : index",
        "%w = arith.addi %wbase, %wib : index",
        "%g = arith.divsi %lane, %k4 : index",
        "%q = arith.remsi %lane, %k4 : index",
    ]
    for operand, buffer, memref in (("a", "x", a_t), ("b", "y", b_t), ("c", "z", c_t)):
        for i, (row, col) in enumerate(LAYOUT[operand]):
            body += _coordinate(f"{operand}{i}_row", row) + _coordinate(f"{operand}{i}_col", col)
            body.append(
                f"%{operand}{i} = kernel.load %{buffer}[%w, %{operand}{i}_row, %{operand}{i}_col]"
                f" : {memref}"
            )
    a = ", ".join(f"%a{i}" for i in range(8))
    b = ", ".join(f"%b{i}" for i in range(4))
    c = ", ".join(f"%c{i}" for i in range(4))
    mma = [f"%d0, %d1, %d2, %d3 = kernel.mma_sync a({a}) b({b}) c({c}) : {element}"]
    mma += [f"kernel.store %d{i}, %out[%w, %c{i}_row, %c{i}_col] : {c_t}" for i in range(4)]
    if lanes < 32:
        body.append(f"%some = arith.cmpi slt, %lane, %k{lanes} : index")
        mma = ["kernel.if %some {", *(f"  {line}" for line in mma), "}"]
    body += [*mma, "kernel.return"]
    return mma_program(body, (a_t, b_t, c_t), grid, block)


def mma_program(body: list[str], types: tuple[str, str, str], grid: int, block: int) -> str:
    """`@mma(%x, %y, %z, %out)` with `body` as its kernel and a `@forward` launching it
    (`types`: the memrefs of A, B and C; D's is C's)."""
    a_t, b_t, c_t = types
    lines = "\n    ".join(body)
    args = f"{a_t}, {b_t}, {c_t}, {c_t}"
    return f"""
builtin.module {{
  kernel.func @mma(%x: {a_t}, %y: {b_t}, %z: {c_t}, %out: {c_t}) grid {grid} block {block} {{
    {lines}
  }}
  func.func @forward(%x: {a_t}, %y: {b_t}, %z: {c_t}) -> {c_t} {{
    %out = kernel.alloc : {c_t}
    kernel.launch @mma(%x, %y, %z, %out) : ({args}) -> ()
    func.return %out : {c_t}
  }}
}}"""


def lowered(module: ModuleOp) -> ModuleOp:
    module = module.clone()
    ConvertKernelToCudaPass().apply(make_context(), module)
    module.verify()
    return module


def kernel_source(module: ModuleOp) -> str:
    (kernel,) = [op for op in module.ops if isinstance(op, cuda.KernelOp)]
    return kernel.source.data


def rounded(x: np.ndarray, element: str) -> np.ndarray:
    """`x` rounded to the 16-bit type, in the dtype the runners take for its buffers."""
    if element == "f16":
        return x.astype(np.float16)
    return torch.from_numpy(x).to(torch.bfloat16).float().numpy()


def random_operands(
    element: str, warps: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Non-zero A, B (16-bit) and C (fp32) for `warps` warps, magnitudes 2^-4 .. 2^4: wide
    enough that the fp32 sums round, so the order of the additions shows in the bits."""
    rng = np.random.default_rng(seed)

    def nonzero(*shape: int) -> np.ndarray:
        sign = rng.choice([-1.0, 1.0], shape)
        return (sign * np.exp2(rng.uniform(-4.0, 4.0, shape))).astype(np.float32)

    a = rounded(nonzero(warps, M, K), element)
    b = rounded(nonzero(warps, K, N), element)
    return a, b, nonzero(warps, M, N)


SHAPES = [pytest.param(32, 1, id="one-warp"), pytest.param(64, 1, id="two-warps")]
ELEMENTS = ["bf16", "f16"]


@pytest.mark.parametrize("element", ELEMENTS)
@pytest.mark.parametrize(("block", "grid"), SHAPES)
def test_cpu_run_matches_numpy_and_the_interpreter(element: str, block: int, grid: int) -> None:
    module = parse(mma_module(element, block, grid))
    a, b, c = random_operands(element, grid * block // 32, seed=block + len(element))
    (emulated,) = run_on_cpu(lowered(module), [a, b, c])
    a64, b64, c64 = (x.astype(np.float64) for x in (a, b, c))
    reference = a64 @ b64 + c64
    # 16 exact products and C summed in fp32: 17 roundings, each within eps/2 of the running
    # sum, itself at most the sum of the magnitudes
    bound = 17 * np.finfo(np.float32).eps / 2 * (np.abs(a64) @ np.abs(b64) + np.abs(c64))
    assert np.all(np.abs(emulated - reference) <= bound)
    assert not np.array_equal(emulated, reference.astype(np.float32)), "no sum rounded"
    (interpreted,) = run_on_cpu(module, [a, b, c])
    np.testing.assert_array_equal(emulated.view(np.uint32), interpreted.view(np.uint32))


def layout_operands(element: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Four warps whose D tells where each input element went (integers, exact in 16 bits):

    - warps 0 and 1: A holds 1..256 (A[r, k] = 16 r + k + 1), B selects columns 0..7 (warp
      0) or 8..15 (warp 1) of A, so D[r, n] must be A[r, n + 8 w];
    - warp 2: A = I, B holds 1..128, so D = B;
    - warp 3: A = B = 0, C holds 1..128, so D = C.
    """
    a = np.zeros((4, M, K), np.float32)
    b = np.zeros((4, K, N), np.float32)
    c = np.zeros((4, M, N), np.float32)
    a[0] = a[1] = np.arange(1, M * K + 1).reshape(M, K)
    b[0, :N] = np.eye(N)
    b[1, N:] = np.eye(N)
    a[2] = np.eye(M)
    b[2] = np.arange(1, K * N + 1).reshape(K, N)
    c[3] = np.arange(1, M * N + 1).reshape(M, N)
    return rounded(a, element), rounded(b, element), c


def _misplaced(got: np.ndarray, want: np.ndarray, what: str) -> str:
    """Where the first wrong element of D came from (its value names the input element)."""
    r, n = (int(v) for v in np.argwhere(got != want)[0])
    value = int(got[r, n])
    columns = K if what == "A" else N
    source = f"{what}[{(value - 1) // columns}, {(value - 1) % columns}]"
    return f"D[{r}, {n}] holds {value} ({source} if an input), expected {int(want[r, n])}"


@pytest.mark.parametrize("element", ELEMENTS)
@pytest.mark.parametrize("runner", ["cpu-c", "interpreter"])
def test_each_fragment_register_lands_where_the_ptx_isa_puts_it(element: str, runner: str) -> None:
    module = parse(mma_module(element, block=64, grid=2))
    if runner == "cpu-c":
        module = lowered(module)
    a, b, c = layout_operands(element)
    (d,) = run_on_cpu(module, [a, b, c])
    expected = [a[0][:, :N], a[1][:, N:], b[2], c[3]]
    for w, (what, want) in enumerate(zip("AABC", expected, strict=True)):
        assert np.array_equal(d[w], want), f"warp {w}: {_misplaced(d[w], want, what)}"


def test_blocks_after_the_first_on_one_worker() -> None:
    """One host thread runs three blocks of two warps: the warp exchange is reused."""
    module = parse(mma_module("bf16", block=64, grid=3))
    a, b, c = random_operands("bf16", 6, seed=7)
    source = kernel_source(lowered(module))
    out = np.full((6, M, N), np.nan, np.float32)
    bits = [torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy() for x in (a, b)]
    run_kernel(source, "mma", [*bits, c, out], grid=3, block=64, workers=1)
    (interpreted,) = run_on_cpu(module, [a, b, c])
    np.testing.assert_array_equal(out, interpreted)


def test_the_printed_call() -> None:
    source = kernel_source(lowered(parse(mma_module("bf16", 32, 1))))
    assert "float d0, d1, d2, d3;\n" in source
    assert (
        "dd_mma_m16n8k16(d0, d1, d2, d3, a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, "
        "c0, c1, c2, c3);"
    ) in source


# --------------------------------------------------------------------------------------------
# A warp that is not whole


def _abort_message(source: str, block: int) -> str:
    return kernel_abort(source, "k", f"[np.zeros(4 * {block}, np.float32)]", block=block)


def _mma_kernel(guard: str) -> str:
    """Hand-written CUDA C: one mma.sync per thread under `guard`."""
    return (
        "#include <cuda_bf16.h>\n"
        "#include <cpu_simt.h>\n"
        'extern "C" __global__ void k(float* out) {\n'
        "  const __nv_bfloat16 one = __float2bfloat16(1.0f);\n"
        "  float d0, d1, d2, d3;\n"
        f"  if ({guard}) {{\n"
        "    dd_mma_m16n8k16(d0, d1, d2, d3, one, one, one, one, one, one, one, one, one, one,\n"
        "                    one, one, 0.0f, 0.0f, 0.0f, 0.0f);\n"
        "    out[4 * threadIdx.x] = d0;\n"
        "  }\n"
        "}\n"
    )


def test_a_partial_warp_aborts() -> None:
    stderr = _abort_message(_mma_kernel("true"), block=48)
    assert (
        "cpu_simt: thread 32 of block 0 runs mma.sync in a warp of 16 threads (a block of 48): "
        "mma.sync needs all 32 lanes of the warp"
    ) in stderr


def test_a_divergent_warp_aborts() -> None:
    stderr = _abort_message(_mma_kernel("threadIdx.x % 32 < 16"), block=32)
    assert (
        "cpu_simt: thread 0 of block 0 runs mma.sync without lane 16 of its warp (divergent "
        "control flow or an early exit): mma.sync needs every lane of the warp"
    ) in stderr


def test_a_whole_warp_of_ones() -> None:
    out = np.zeros(4 * 32, np.float32)
    run_kernel(_mma_kernel("true"), "k", [out], grid=1, block=32)
    np.testing.assert_array_equal(out[::4], 16.0)


def test_the_printed_kernel_aborts_on_divergence_like_the_interpreter() -> None:
    module = parse(mma_module("bf16", block=32, grid=1, lanes=8))
    with pytest.raises(InterpretationError, match="inactive while its warp runs the MMA"):
        run_on_cpu(module, list(random_operands("bf16", 1, seed=0)))
    source = kernel_source(lowered(module))
    args = (
        "[np.zeros(256, np.uint16), np.zeros(128, np.uint16), np.zeros(128, np.float32), "
        "np.zeros(128, np.float32)]"
    )
    assert "runs mma.sync without lane 8 of its warp" in kernel_abort(source, "mma", args)


# --------------------------------------------------------------------------------------------
# memcheck, nvcc, SASS


@pytest.mark.parametrize("element", ELEMENTS)
def test_memcheck_build_runs_the_mma(element: str) -> None:
    module = lowered(parse(mma_module(element, 64, 1)))
    a, b, c = random_operands(element, 2, seed=3)
    (plain,) = run_on_cpu(module, [a, b, c])
    (checked,) = run_on_cpu(module, [a, b, c], memcheck=True)
    np.testing.assert_array_equal(plain, checked)


@needs_nvcc
@pytest.mark.parametrize(("element", "hmma"), [("bf16", "HMMA.16816.F32.BF16"), ("f16", None)])
def test_nvcc_compiles_the_mma_to_hmma(element: str, hmma: str | None, tmp_path: Path) -> None:
    module = lowered(parse(mma_module(element, 64, 1)))
    source = kernels_text([op for op in module.ops if isinstance(op, cuda.KernelOp)])
    result = compile_cubin(source, arch="sm_90")
    assert not result.kernels["mma"].spills and result.kernels["mma"].stack_frame == 0
    lines = [ln for ln in sass_of(source, tmp_path).splitlines() if "HMMA" in ln]
    assert len(lines) == 1, lines
    if hmma is not None:
        assert hmma in lines[0]
    else:  # f16 inputs, fp32 accumulator: the plain F32 form
        assert "HMMA.16816.F32 " in lines[0]
