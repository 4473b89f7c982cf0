"""The 84 suite cases: names, shapes, and every expression captured by the frontend.

Capturing needs the modules' shapes only, so `nn.Linear` initialisation (a second per
7B-sized weight) is skipped; the weights keep whatever `torch.empty` gave them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
from xdsl.dialects.builtin import BFloat16Type, Float32Type

from bench.cases import QWEN, TINYLLAMA, all_cases, find_cases
from deplodock.backend import nvcc
from deplodock.backend.build import build_module
from deplodock.backend.cost import program_costs
from deplodock.dialects.queries import forward_function
from deplodock.driver import lower_program, program_from_expression
from deplodock.frontend.expression import parse_expression

CASES = all_cases()


@pytest.fixture
def fast_init(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.nn.Linear, "reset_parameters", lambda self: None)


def test_there_are_84_uniquely_named_cases() -> None:
    assert len(CASES) == 84
    assert len({c.name for c in CASES}) == 84
    ops = Counter(c.op for c in CASES)
    assert ops == {
        **{p: 6 for p in ("q_proj", "kv_proj", "o_proj", "gate_proj", "up_proj", "down_proj")},
        **{p: 6 for p in ("rmsnorm", "softmax", "silu_mul", "sdpa_gqa", "attention")},
        "o_proj_residual": 6,
        "down_proj_residual": 6,
        "silu_mul_down": 6,
    }
    assert sum(c.matmul for c in CASES) == 36 + 6 + 6 + 12 + 6
    assert {(c.model.name, c.seq) for c in CASES} == {
        (m, s) for m in ("tinyllama-1.1b", "qwen2.5-7b") for s in (32, 128, 512)
    }


def case(name: str):
    (c,) = [c for c in CASES if c.name == name]
    return c


def test_shapes_are_the_models() -> None:
    assert (TINYLLAMA.hidden, TINYLLAMA.intermediate, TINYLLAMA.heads) == (2048, 5632, 32)
    assert (TINYLLAMA.kv_heads, TINYLLAMA.head_dim) == (4, 64)
    assert (QWEN.hidden, QWEN.intermediate, QWEN.heads, QWEN.kv_heads, QWEN.head_dim) == (
        3584, 18944, 28, 4, 128
    )  # fmt: skip
    kv = case("kv_proj/qwen2.5-7b/s128")
    assert kv.inputs == ((1, 128, 3584),) and kv.output == (1, 128, 1024)
    assert "bias=True" in kv.expression()  # Qwen2's k/v projections have a bias
    assert "bias=False" in case("kv_proj/tinyllama-1.1b/s32").expression()
    down = case("down_proj/qwen2.5-7b/s512")
    assert down.inputs == ((1, 512, 18944),) and down.output == (1, 512, 3584)
    sdpa = case("sdpa_gqa/tinyllama-1.1b/s128")
    assert sdpa.inputs == ((1, 32, 128, 64), (1, 4, 128, 64), (1, 4, 128, 64))
    assert "enable_gqa=True" in sdpa.expression() and "is_causal=True" in sdpa.expression()
    soft = case("softmax/qwen2.5-7b/s512")
    assert soft.inputs == ((1, 28, 512, 512),)
    assert "/ 11.313708498984761" in case("attention/qwen2.5-7b/s32").expression()


def test_bf16_expressions_use_bf16_everywhere() -> None:
    text = case("rmsnorm/qwen2.5-7b/s32").expression("bf16")
    assert text.count("dtype=torch.bfloat16") == 2  # the module and the input
    with pytest.raises(ValueError, match="unknown dtype"):
        case("rmsnorm/qwen2.5-7b/s32").expression("fp8")


def test_find_cases_filters_by_name() -> None:
    assert [c.name for c in find_cases(["rmsnorm/tiny"])] == [
        f"rmsnorm/tinyllama-1.1b/s{s}" for s in (32, 128, 512)
    ]
    with pytest.raises(ValueError, match="no case matches"):
        find_cases(["nope"])


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_every_case_captures_with_its_shapes(dtype: str, fast_init: None) -> None:
    element = Float32Type if dtype == "fp32" else BFloat16Type
    failures = []
    for c in CASES:
        try:
            program = program_from_expression(c.expression(dtype))
        except Exception as error:
            failures.append(f"{c.name}: {error}")
            continue
        fn = forward_function(program.module)
        types = fn.function_type
        n = len(c.inputs)
        assert [tuple(t.get_shape()) for t in types.inputs.data[:n]] == list(c.inputs), c.name
        assert [tuple(t.get_shape()) for t in types.outputs.data] == [c.output], c.name
        assert all(isinstance(t.element_type, element) for t in types.inputs.data), c.name
    assert not failures, "\n".join(failures)


def test_eager_pytorch_agrees_with_the_declared_shapes(fast_init: None) -> None:
    for c in find_cases(["/s32"]):
        if c.model is not TINYLLAMA:
            continue
        module, inputs, _ = parse_expression(c.expression())
        assert [tuple(x.shape) for x in inputs] == list(c.inputs), c.name
        with torch.no_grad():
            assert tuple(module(*inputs).shape) == c.output, c.name


SMALL = [c for c in CASES if c.model is TINYLLAMA and c.seq == 32]


@pytest.mark.parametrize("c", SMALL, ids=[c.op for c in SMALL])
def test_small_cases_lower_to_cuda_with_exact_costs(c, fast_init: None) -> None:
    program = program_from_expression(c.expression())
    lower_program(program, "kernel")
    costs = program_costs(program.module)
    lower_program(program, "cuda")
    kernels = {op.sym_name.data for op in program.module.ops if op.name == "cuda.kernel"}
    assert kernels == set(costs)
    assert all(cost.exact for cost in costs.values())
    out_bytes = 4
    for d in c.output:
        out_bytes *= d
    assert sum(cost.store_bytes for cost in costs.values()) >= out_bytes
    if c.op.endswith("proj"):
        (k,), n = c.inputs[0][-1:], c.output[-1]
        # One multiply-add per product, in the GEMM kernel (tile-split-k may add a combine).
        assert max(cost.flops for cost in costs.values()) >= 2 * c.seq * n * k


@pytest.mark.nvcc
@pytest.mark.skipif(not nvcc.nvcc_available(), reason="nvcc is not on PATH")
@pytest.mark.parametrize("name", ["rmsnorm", "softmax", "attention", "silu_mul_down"])
def test_small_cases_build_for_sm90_without_spills(name: str, fast_init: None, tmp_path: Path):
    (c,) = [c for c in SMALL if c.op == name]
    program = program_from_expression(c.expression("bf16"))
    lower_program(program, "cuda")
    build = build_module(program.module, (9, 0), directory=tmp_path)
    assert build.arch == "sm_90"
    for kernel, res in build.kernels.items():
        assert not res.spills, f"{kernel} spills: {res}"
