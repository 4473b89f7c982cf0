"""The CUDA C printer: expression details, and the semantics of the C it prints for scalar ops.

The semantic tests print small kernel-level modules, run them at the cuda level (the C code on
the CPU) and compare with Python's own definition of each op: comparisons with NaN, signed
floor/ceil divisions of negative values, C remainders, min/max.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from xdsl.dialects.arith import CMPF_COMPARISON_OPERATIONS
from xdsl.dialects.builtin import Float32Type, ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import PassFailedException

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.dialects import kernel, make_context
from deplodock.passes.convert_kernel_to_cuda import ConvertKernelToCudaPass
from deplodock.passes.kernel_to_cuda.exprs import (
    ADD,
    MUL,
    binary,
    float_literal,
    int_literal,
    linear_index,
    name,
    unary,
)
from deplodock.passes.kernel_to_cuda.printer import print_kernel

RNG = np.random.default_rng(2)


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def lower(module: ModuleOp) -> ModuleOp:
    ConvertKernelToCudaPass().apply(make_context(), module)
    module.verify()
    return module


def first_kernel(module: ModuleOp) -> kernel.FuncOp:
    return next(op for op in module.ops if isinstance(op, kernel.FuncOp))


# ---- expressions ---------------------------------------------------------------------------


def test_float_literals_round_trip_exactly() -> None:
    values = np.concatenate([RNG.standard_normal(200) * 10.0 ** RNG.integers(-30, 30, 200)])
    for v in values.astype(np.float32):
        text = float_literal(float(v), Float32Type()).text
        assert text.endswith("f")
        assert np.float32(float(text[:-1])) == v
    assert float_literal(1.0, Float32Type()).text == "1.0f"
    assert float_literal(0.1, Float32Type()).text == "0.100000001f"
    assert float_literal(float("inf"), Float32Type()).text == "INFINITY"
    assert float_literal(float("-inf"), Float32Type()).text == "-INFINITY"
    assert float_literal(float("nan"), Float32Type()).text == "NAN"


def test_parentheses_follow_c_precedence_and_ir_association() -> None:
    a, b, c = name("a"), name("b"), name("c")
    assert binary("-", ADD, a, binary("-", ADD, b, c)).text == "a - (b - c)"
    assert binary("+", ADD, binary("+", ADD, a, b), c).text == "a + b + c"
    assert binary("+", ADD, a, binary("+", ADD, b, c)).text == "a + (b + c)"
    assert binary("*", MUL, binary("+", ADD, a, b), c).text == "(a + b) * c"
    assert binary("*", MUL, a, float_literal(-1.5, Float32Type())).text == "a * -1.5f"


def test_a_negation_of_a_negation_is_not_a_decrement() -> None:
    """Found by the fuzzer (seed 5351, `-(-x)`): `--v0` did not compile."""
    a = name("a")
    assert unary("-", unary("-", a)).text == "-(-a)"
    assert unary("-", float_literal(-1.5, Float32Type())).text == "-(-1.5f)"
    assert unary("-", a).text == "-a"
    assert unary("!", unary("!", a)).text == "!!a"


def test_linear_index_folds_constants() -> None:
    zero, two = int_literal(0), int_literal(2)
    assert linear_index([zero, name("b"), name("k")], [1, 32, 2048]).text == "b * 2048 + k"
    assert linear_index([two, name("k")], [4, 8]).text == "16 + k"
    assert linear_index([two, int_literal(3)], [4, 8]).text == "19"
    assert linear_index([name("i")], [7]).text == "i"


# ---- kernel structure ----------------------------------------------------------------------

NAMES = """
kernel.func @names(%in: memref<4xf32>, %out: memref<4xf32>, %acc: memref<4xf32>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %c4 = arith.constant 4 : index
  %in_ok = arith.cmpi slt, %t, %c4 : index
  kernel.if %in_ok {
    %float = kernel.load %in[%t] : memref<4xf32>
    %exp = math.exp %float : f32
    %0 = arith.addf %exp, %exp : f32
    %1 = arith.mulf %0, %0 : f32
    kernel.store %1, %out[%t] : memref<4xf32>
    kernel.store %0, %acc[%t] : memref<4xf32>
  }
  kernel.return
}
"""


def test_signature_names_and_qualifiers() -> None:
    printed = print_kernel(first_kernel(parse(NAMES)))
    src = printed.source
    head = src.splitlines()[0]
    assert head == (
        'extern "C" __global__ void __launch_bounds__(32) names(const float* __restrict__ in, '
        "float* __restrict__ out, float* __restrict__ acc) {"
    )
    # C keywords and called functions are never used as names; `%0` becomes `v0`.
    assert "const float float_1 = in[t];" in src
    assert "const float exp_1 = expf(float_1);" in src
    assert "const float v0 = exp_1 + exp_1;" in src
    assert "out[t] = v0 * v0;" in src  # the single-use product is inlined into its store
    assert "#include" not in src and printed.includes == []
    assert printed.readonly == [True, False, False]  # what the host passes as `const T*`


def test_64bit_indices_for_huge_buffers() -> None:
    src = print_kernel(
        first_kernel(
            parse(
                """
kernel.func @big(%x: memref<65536x65536xf32>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %b = kernel.block_id : index
  %v = arith.constant 1.0 : f32
  kernel.store %v, %x[%b, %t] : memref<65536x65536xf32>
  kernel.return
}"""
            )
        )
    ).source
    assert "const long long t = threadIdx.x;" in src
    assert "x[b * 65536 + t] = 1.0f;" in src


def test_values_nothing_reads_are_not_printed() -> None:
    """Issue #39: a coordinate no index used (`v0 = batch / 28` in Qwen's GEMMs) printed as a
    variable never referenced, which nvcc warns of (an error under -Werror); so did a load
    and the quotient feeding only it."""
    src = print_kernel(
        first_kernel(
            parse(
                """
kernel.func @unread(%x: memref<64xf32>, %y: memref<32xf32>) grid 2 block 32 {
  %t = kernel.thread_id : index
  %b = kernel.block_id : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %batch = arith.divsi %b, %c2 : index
  %row = arith.remsi %batch, %c2 : index
  %high = arith.divsi %batch, %c2 : index
  %i = arith.muli %high, %c32 : index
  %dead = kernel.load %x[%i] : memref<64xf32>
  %v = kernel.load %x[%t] : memref<64xf32>
  %w = arith.index_cast %row : index to i32
  %f = arith.sitofp %w : i32 to f32
  %s = arith.addf %v, %f : f32
  kernel.store %s, %y[%t] : memref<32xf32>
  kernel.return
}"""
            )
        )
    ).source
    assert "high" not in src and "dead" not in src and " * 32" not in src, src
    assert "const int batch = b / 2;" in src and "batch % 2" in src, src


def test_unprintable_op_fails_the_pass() -> None:
    module = parse(
        """
kernel.func @pop(%x: memref<32xi32>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %v = kernel.load %x[%t] : memref<32xi32>
  %p = math.ctpop %v : i32
  kernel.store %p, %x[%t] : memref<32xi32>
  kernel.return
}"""
    )
    with pytest.raises(PassFailedException, match=r"@pop: no CUDA C translation for math\.ctpop"):
        lower(module)


# ---- semantics of printed scalar ops (run on the CPU) --------------------------------------


def cmpf_module() -> str:
    lines = []
    for i, pred in enumerate(CMPF_COMPARISON_OPERATIONS):
        lines += [
            f"%p{i} = arith.cmpf {pred}, %a, %b : f32",
            f"%s{i} = arith.select %p{i}, %one, %zero : f32",
            f"%c{i} = arith.constant {i} : index",
            f"kernel.store %s{i}, %y[%t, %c{i}] : memref<32x16xf32>",
        ]
    body = "\n    ".join(lines)
    return f"""
builtin.module {{
  kernel.func @cmpf(%x: memref<32xf32>, %z: memref<32xf32>, %y: memref<32x16xf32>)
      grid 1 block 32 {{
    %t = kernel.thread_id : index
    %one = arith.constant 1.0 : f32
    %zero = arith.constant 0.0 : f32
    %a = kernel.load %x[%t] : memref<32xf32>
    %b = kernel.load %z[%t] : memref<32xf32>
    {body}
    kernel.return
  }}
  func.func @forward(%x: memref<32xf32>, %z: memref<32xf32>) -> memref<32x16xf32> {{
    %y = kernel.alloc : memref<32x16xf32>
    kernel.launch @cmpf(%x, %z, %y) : (memref<32xf32>, memref<32xf32>, memref<32x16xf32>) -> ()
    func.return %y : memref<32x16xf32>
  }}
}}"""


def test_cmpf_predicates_with_nan() -> None:
    nan = float("nan")
    pairs = [(1.0, 2.0), (2.0, 1.0), (1.5, 1.5), (nan, 1.0), (1.0, nan), (nan, nan)]
    pairs += [(float(a), float(b)) for a, b in RNG.integers(-2, 3, (26, 2))]
    x = np.array([p[0] for p in pairs], np.float32)
    z = np.array([p[1] for p in pairs], np.float32)
    (y,) = run_on_cpu(lower(parse(cmpf_module())), [x, z])
    for row, (a, b) in zip(y, pairs, strict=True):
        unordered = math.isnan(a) or math.isnan(b)
        ordered = {
            "eq": a == b, "gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b, "ne": a != b,
        }  # fmt: skip
        expect = []
        for pred in CMPF_COMPARISON_OPERATIONS:
            if pred in ("false", "true"):
                expect.append(pred == "true")
            elif pred == "ord":
                expect.append(not unordered)
            elif pred == "uno":
                expect.append(unordered)
            elif pred.startswith("o"):
                expect.append(not unordered and ordered[pred[1:]])
            else:
                expect.append(unordered or ordered[pred[1:]])
        assert list(row) == [float(e) for e in expect], (a, b)


INT_OPS = ["floordivsi", "ceildivsi", "remsi", "divsi", "maxsi", "minsi"]


def int_module() -> str:
    lines = []
    for i, op in enumerate([*INT_OPS, "floordivsi", "ceildivsi"]):
        rhs = "%b" if i < len(INT_OPS) else "%c4"
        lines += [
            f"%r{i} = arith.{op} %a, {rhs} : index",
            f"%i{i} = arith.index_cast %r{i} : index to i32",
            f"%f{i} = arith.sitofp %i{i} : i32 to f32",
            f"%k{i} = arith.constant {i} : index",
            f"kernel.store %f{i}, %y[%t, %k{i}] : memref<64x8xf32>",
        ]
    body = "\n    ".join(lines)
    return f"""
builtin.module {{
  kernel.func @ints(%x: memref<64xf32>, %d: memref<64xf32>, %y: memref<64x8xf32>) grid 1 block 64 {{
    %t = kernel.thread_id : index
    %c4 = arith.constant 4 : index
    %xa = kernel.load %x[%t] : memref<64xf32>
    %xb = kernel.load %d[%t] : memref<64xf32>
    %ia = arith.fptosi %xa : f32 to i32
    %ib = arith.fptosi %xb : f32 to i32
    %a = arith.index_cast %ia : i32 to index
    %b = arith.index_cast %ib : i32 to index
    {body}
    kernel.return
  }}
  func.func @forward(%x: memref<64xf32>, %d: memref<64xf32>) -> memref<64x8xf32> {{
    %y = kernel.alloc : memref<64x8xf32>
    kernel.launch @ints(%x, %d, %y) : (memref<64xf32>, memref<64xf32>, memref<64x8xf32>) -> ()
    func.return %y : memref<64x8xf32>
  }}
}}"""


def test_signed_integer_division_semantics() -> None:
    a = RNG.integers(-20, 21, 64)
    b = RNG.choice([-7, -3, -2, -1, 1, 2, 3, 5], 64)
    (y,) = run_on_cpu(lower(parse(int_module())), [a.astype(np.float32), b.astype(np.float32)])
    trunc = [int(p / q) for p, q in zip(a, b, strict=True)]
    expect = np.stack(
        [
            a // b,
            -(-a // b),
            a - np.array(trunc) * b,
            trunc,
            np.maximum(a, b),
            np.minimum(a, b),
            a // 4,
            -(-a // 4),
        ],
        axis=1,
    )
    np.testing.assert_array_equal(y, expect.astype(np.float32))
