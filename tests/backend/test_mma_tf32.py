"""The tf32 `kernel.mma_sync` (m16n8k8) and `kernel.split_tf32` in the emitted CUDA and in the
interpreters, checked against documented rules rather than against themselves.

- The fragment layout is the PTX ISA's ("Matrix Fragments for mma.m16n8k8", `.tf32`), written
  out below as coefficients independently of `common/mma.py`: lane l, g = l >> 2, q = l % 4;
  A a_i at (g + 8 (i & 1), q + 4 (i >> 1)); B b_i at (q + 4 i, g); C as for m16n8k16. Each
  lane loads its fragments by that layout, so D is A x B + C only where both the CPU
  emulation and the interpreter place every register where the ISA does.
- `split_tf32`'s rule (`common/mma.py`): `hi` is x on 10 mantissa bits, to nearest, ties away
  from zero; `lo` is the exact rest with its low 13 bits cleared. Tested on hand-built bit
  patterns (a tie, just below a tie, negative values, a carry into the exponent, NaN, inf).
- What is not a tf32 value (low 13 bits set) is refused by both runners, not guessed at.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from xdsl.utils.exceptions import InterpretationError

from deplodock.backend.cpu_runner import run_kernel, run_on_cpu
from deplodock.backend.cuda_source import kernels_text
from deplodock.dialects import cuda
from deplodock.dialects.common.mma import split_tf32
from tests.backend.sass import needs_nvcc, sass_of
from tests.backend.test_mma_sync import _coordinate, kernel_source, lowered, mma_program
from tests.helpers import kernel_abort, parse

M, N, K = 16, 8, 8

#: (row, column) of each register as (cg, cq, c) coefficients: cg * g + cq * q + c.
LAYOUT = {
    "a": [((1, 0, 8 * (i & 1)), (0, 1, 4 * (i >> 1))) for i in range(4)],
    "b": [((0, 1, 4 * i), (1, 0, 0)) for i in range(2)],
    "c": [((1, 0, 8 * (i >> 1)), (0, 2, i & 1)) for i in range(4)],
}


def tf32_module(warps: int, split: bool = False) -> str:
    """`@mma`: warp w computes D[w] = A[w] x B[w] + C[w] with one tf32 `kernel.mma_sync`,
    its fragments loaded by `LAYOUT` (block 32 x `warps`, one block). With `split`, each A and
    B element goes through `kernel.split_tf32` and the MMA takes the `hi` parts."""
    a_t, b_t = f"memref<{warps}x{M}x{K}xf32>", f"memref<{warps}x{K}x{N}xf32>"
    c_t = f"memref<{warps}x{M}x{N}xf32>"
    body = [f"%k{c} = arith.constant {c} : index" for c in range(33)]
    body += [
        "%t = kernel.thread_id : index",
        "%lane = arith.remsi %t, %k32 : index",
        "%w = arith.divsi %t, %k32 : index",
        "%g = arith.divsi %lane, %k4 : index",
        "%q = arith.remsi %lane, %k4 : index",
    ]
    for operand, buffer, memref in (("a", "x", a_t), ("b", "y", b_t), ("c", "z", c_t)):
        for i, (row, col) in enumerate(LAYOUT[operand]):
            body += _coordinate(f"{operand}{i}_row", row) + _coordinate(f"{operand}{i}_col", col)
            loaded = f"%{operand}{i}" if operand == "c" or not split else f"%{operand}{i}_raw"
            body.append(
                f"{loaded} = kernel.load %{buffer}[%w, %{operand}{i}_row, %{operand}{i}_col]"
                f" : {memref}"
            )
            if split and operand != "c":
                body.append(f"%{operand}{i}, %{operand}{i}_lo = kernel.split_tf32 {loaded}")
    a = ", ".join(f"%a{i}" for i in range(4))
    b = ", ".join(f"%b{i}" for i in range(2))
    c = ", ".join(f"%c{i}" for i in range(4))
    body.append(f"%d0, %d1, %d2, %d3 = kernel.mma_sync a({a}) b({b}) c({c}) : tf32")
    body += [f"kernel.store %d{i}, %out[%w, %c{i}_row, %c{i}_col] : {c_t}" for i in range(4)]
    body.append("kernel.return")
    return mma_program(body, (a_t, b_t, c_t), 1, 32 * warps)


def truncated(x: np.ndarray) -> np.ndarray:
    """`x` with its low 13 bits cleared: a tf32 value, by the format's definition."""
    return (x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def random_operands(warps: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)

    def nonzero(*shape: int) -> np.ndarray:
        sign = rng.choice([-1.0, 1.0], shape)
        return (sign * np.exp2(rng.uniform(-4.0, 4.0, shape))).astype(np.float32)

    return truncated(nonzero(warps, M, K)), truncated(nonzero(warps, K, N)), nonzero(warps, M, N)


@pytest.mark.parametrize("runner", ["cpu-c", "interpreter"])
def test_tf32_mma_matches_numpy_within_fp32_summation(runner: str) -> None:
    module = parse(tf32_module(warps=2))
    a, b, c = random_operands(2, seed=3)
    (d,) = run_on_cpu(lowered(module) if runner == "cpu-c" else module, [a, b, c])
    a64, b64, c64 = (x.astype(np.float64) for x in (a, b, c))
    reference = a64 @ b64 + c64
    # 8 exact products (tf32 x tf32 fits fp32) and C: 9 roundings of the running fp32 sum
    bound = 9 * np.finfo(np.float32).eps / 2 * (np.abs(a64) @ np.abs(b64) + np.abs(c64))
    assert np.all(np.abs(d - reference) <= bound)


def test_the_emulation_and_the_interpreter_agree_bit_for_bit() -> None:
    module = parse(tf32_module(warps=2))
    a, b, c = random_operands(2, seed=11)
    (emulated,) = run_on_cpu(lowered(module), [a, b, c])
    (interpreted,) = run_on_cpu(module, [a, b, c])
    np.testing.assert_array_equal(emulated.view(np.uint32), interpreted.view(np.uint32))


@pytest.mark.parametrize("runner", ["cpu-c", "interpreter"])
def test_each_fragment_register_lands_where_the_ptx_isa_puts_it(runner: str) -> None:
    """Warp 0: A holds 1..128, B = I, so D = A; warp 1: A = I (16 x 8 upper), B holds 1..64,
    so D's top rows are B; warp 2: C holds 1..128, A = B = 0, so D = C (small integers are
    tf32 values)."""
    a = np.zeros((3, M, K), np.float32)
    b = np.zeros((3, K, N), np.float32)
    c = np.zeros((3, M, N), np.float32)
    a[0] = np.arange(1, M * K + 1).reshape(M, K)
    b[0] = np.eye(K)
    a[1, :K] = np.eye(K)
    b[1] = np.arange(1, K * N + 1).reshape(K, N)
    c[2] = np.arange(1, M * N + 1).reshape(M, N)
    module = parse(tf32_module(warps=3))
    (d,) = run_on_cpu(lowered(module) if runner == "cpu-c" else module, [a, b, c])
    np.testing.assert_array_equal(d[0], a[0])
    np.testing.assert_array_equal(d[1][:K], b[1])
    np.testing.assert_array_equal(d[1][K:], 0)
    np.testing.assert_array_equal(d[2], c[2])


def test_split_then_mma_in_both_runners() -> None:
    """Raw fp32 inputs through `kernel.split_tf32`: the MMA takes the `hi` parts, and both
    runners give the product of the rounded inputs, bit for bit alike."""
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((1, *s)).astype(np.float32) for s in ((M, K), (K, N)))
    c = rng.standard_normal((1, M, N)).astype(np.float32)
    module = parse(tf32_module(warps=1, split=True))
    (emulated,) = run_on_cpu(lowered(module), [a, b, c])
    (interpreted,) = run_on_cpu(module, [a, b, c])
    np.testing.assert_array_equal(emulated.view(np.uint32), interpreted.view(np.uint32))
    hi_a, hi_b = split_tf32(a)[0].astype(np.float64), split_tf32(b)[0].astype(np.float64)
    np.testing.assert_allclose(emulated, hi_a @ hi_b + c, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------------------------
# split_tf32's rule, on hand-built bit patterns


def _f(bits: int) -> np.float32:
    return np.array([bits], np.uint32).view(np.float32)[0]


ONE = 0x3F800000
TF32_UNIT = 1 << 13  # one unit in the last place of a tf32 mantissa


@pytest.mark.parametrize(
    ("x_bits", "hi_bits"),
    [
        pytest.param(ONE, ONE, id="exact"),
        pytest.param(ONE + TF32_UNIT // 2, ONE + TF32_UNIT, id="tie-away-from-zero"),
        pytest.param(ONE + TF32_UNIT // 2 - 1, ONE, id="below-the-tie"),
        pytest.param(
            0x80000000 | (ONE + TF32_UNIT // 2), 0x80000000 | (ONE + TF32_UNIT), id="neg-tie"
        ),
        pytest.param(0x3FFFF000, 0x40000000, id="carry-into-exponent"),
        pytest.param(0x7F7FFFFF, 0x7F800000, id="overflow-to-inf"),
    ],
)
def test_split_rounds_hi_to_nearest_ties_away(x_bits: int, hi_bits: int) -> None:
    x = np.array([_f(x_bits)])
    hi, lo = split_tf32(x)
    assert hi.view(np.uint32)[0] == hi_bits
    if np.isfinite(hi[0]):
        rest = np.float64(x[0]) - np.float64(hi[0])
        assert lo[0] == truncated(np.array([rest]))[0]  # the rest, its low 13 bits cleared


def test_split_parts_are_tf32_and_close() -> None:
    x = np.random.default_rng(0).standard_normal(10_000).astype(np.float32)
    hi, lo = split_tf32(x)
    for part in (hi, lo):
        assert not np.any(part.view(np.uint32) & 0x1FFF)
    error = np.abs(x.astype(np.float64) - hi - lo)
    assert np.all(error <= 2.0**-21 * np.abs(x))  # lo keeps 11 of the bits hi left


def test_split_of_nan_and_inf() -> None:
    hi, lo = split_tf32(np.array([np.nan, np.inf, -np.inf], np.float32))
    assert np.isnan(lo).all()  # so a product with a NaN or inf operand is NaN
    assert np.isinf(hi[1:]).all()


def test_the_c_split_follows_the_same_rule() -> None:
    """`dd_split_tf32` in plain C on the CPU: the same bits as the rule's patterns."""
    xs = np.array(
        [_f(ONE + TF32_UNIT // 2), _f(ONE + TF32_UNIT // 2 - 1), _f(0x3FFFF000), 1.1, -3.7e-5],
        np.float32,
    )
    source = (
        "#include <cpu_simt.h>\n"
        'extern "C" __global__ void k(const float* x, float* hi, float* lo) {\n'
        "  dd_split_tf32(x[threadIdx.x], hi[threadIdx.x], lo[threadIdx.x]);\n"
        "}\n"
    )
    hi, lo = np.zeros_like(xs), np.zeros_like(xs)
    run_kernel(source, "k", [xs, hi, lo], grid=1, block=len(xs))
    want_hi, want_lo = split_tf32(xs)
    np.testing.assert_array_equal(hi.view(np.uint32), want_hi.view(np.uint32))
    np.testing.assert_array_equal(lo.view(np.uint32), want_lo.view(np.uint32))


# --------------------------------------------------------------------------------------------
# What is not a tf32 value


def test_the_interpreter_refuses_a_non_tf32_operand() -> None:
    a, b, c = random_operands(1, seed=2)
    a[0, 3, 5] = np.float32(1.0) + np.float32(2.0**-20)  # low bits set
    with pytest.raises(InterpretationError, match="not a tf32 value"):
        run_on_cpu(parse(tf32_module(warps=1)), [a, b, c])


def test_the_emulation_aborts_on_a_non_tf32_operand() -> None:
    source = kernel_source(lowered(parse(tf32_module(warps=1))))
    a, b, c = random_operands(1, seed=2)
    a[0, 0, 0] = np.float32(1.0) + np.float32(2.0**-20)
    arrays = {"a": a, "b": b, "c": c}
    setup = "".join(f"{n} = np.array({x.tolist()!r}, np.float32)\n" for n, x in arrays.items())
    stderr = kernel_abort(source, "mma", "[a, b, c, np.zeros_like(c)]", setup=setup)
    assert "not a tf32 value" in stderr


def test_the_printed_calls() -> None:
    source = kernel_source(lowered(parse(tf32_module(warps=1, split=True))))
    assert re.search(r"float a0, a0_lo;\s*dd_split_tf32\(a0_raw, a0, a0_lo\);", source)
    assert "dd_mma_m16n8k8_tf32(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3);" in source


@needs_nvcc
def test_nvcc_compiles_it_to_a_tf32_hmma(tmp_path) -> None:
    module = lowered(parse(tf32_module(warps=1, split=True)))
    source = kernels_text([op for op in module.ops if isinstance(op, cuda.KernelOp)])
    assert "HMMA.1688.F32.TF32" in sass_of(source, tmp_path)
