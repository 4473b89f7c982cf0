"""The 84 LLM kernel cases: the ops of a decoder layer at two real models' shapes.

Shapes are those of TinyLlama-1.1B (hidden 2048, intermediate 5632, 32 heads, 4 KV heads,
head dim 64) and Qwen2.5-7B (hidden 3584, intermediate 18944, 28 heads, 4 KV heads, head
dim 128; q/k/v projections with bias), at prefill lengths 32, 128 and 512, batch 1. Each
case is a `-c` expression, in fp32 or bf16:

    projections q, kv (k and v fused), o, gate, up, down   6 x 6 = 36 matmuls
    rmsnorm                                                 6
    softmax over (heads, s, s)                              6
    silu(gate) * up                                         6
    causal GQA attention (sdpa, enable_gqa)                 6
    attention written out: softmax(q k^T / sqrt(d) + mask) v   6
    o / down projection + residual add                      12
    silu(gate) * up, then the down projection               6

The written-out attention adds a mask *input* (random values, as HF eager attention adds a
mask tensor): its work is that of a causal mask applied densely.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass

DTYPES = ("fp32", "bf16")
SEQ_LENS = (32, 128, 512)


@dataclass(frozen=True)
class ModelShape:
    name: str
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    qkv_bias: bool


TINYLLAMA = ModelShape("tinyllama-1.1b", 2048, 5632, 32, 4, 64, 1e-5, False)
QWEN = ModelShape("qwen2.5-7b", 3584, 18944, 28, 4, 128, 1e-6, True)
MODELS = (TINYLLAMA, QWEN)


@dataclass(frozen=True)
class Case:
    """One benchmark case; `expression(dtype)` is what `deplodock run -c` takes."""

    op: str
    model: ModelShape
    seq: int
    template: Callable[[ModelShape, int, str, str], str]
    inputs: tuple[tuple[int, ...], ...]  # shapes of the input tensors, in order
    output: tuple[int, ...]
    matmul: bool

    @property
    def name(self) -> str:
        return f"{self.op}/{self.model.name}/s{self.seq}"

    def expression(self, dtype: str = "fp32") -> str:
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r} (expected one of {', '.join(DTYPES)})")
        tensor = "" if dtype == "fp32" else ", dtype=torch.bfloat16"
        return self.template(self.model, self.seq, tensor, tensor)


def _randn(*shape: int, dt: str = "") -> str:
    return f"torch.randn({', '.join(map(str, shape))}{dt})"


def _linear(k: int, n: int, bias: bool, x: str, mdt: str) -> str:
    return f"nn.Linear({k}, {n}, bias={bias}{mdt})({x})"


def _projection(k: Callable[[ModelShape], int], n: Callable[[ModelShape], int], bias: bool):
    def template(m: ModelShape, s: int, dt: str, mdt: str) -> str:
        return _linear(k(m), n(m), bias and m.qkv_bias, _randn(1, s, k(m), dt=dt), mdt)

    return template


PROJECTIONS: dict[str, tuple[Callable[[ModelShape], int], Callable[[ModelShape], int], bool]] = {
    "q_proj": (lambda m: m.hidden, lambda m: m.heads * m.head_dim, True),
    "kv_proj": (lambda m: m.hidden, lambda m: 2 * m.kv_heads * m.head_dim, True),
    "o_proj": (lambda m: m.heads * m.head_dim, lambda m: m.hidden, False),
    "gate_proj": (lambda m: m.hidden, lambda m: m.intermediate, False),
    "up_proj": (lambda m: m.hidden, lambda m: m.intermediate, False),
    "down_proj": (lambda m: m.intermediate, lambda m: m.hidden, False),
}


def _rmsnorm(m: ModelShape, s: int, dt: str, mdt: str) -> str:
    return f"nn.RMSNorm({m.hidden}, eps={m.eps}{mdt})({_randn(1, s, m.hidden, dt=dt)})"


def _softmax(m: ModelShape, s: int, dt: str, mdt: str) -> str:
    return f"torch.softmax({_randn(1, m.heads, s, s, dt=dt)}, dim=-1)"


def _silu_mul(m: ModelShape, s: int, dt: str, mdt: str) -> str:
    x = _randn(1, s, m.intermediate, dt=dt)
    return f"F.silu({x}) * {x}"


def _sdpa(m: ModelShape, s: int, dt: str, mdt: str) -> str:
    q = _randn(1, m.heads, s, m.head_dim, dt=dt)
    kv = _randn(1, m.kv_heads, s, m.head_dim, dt=dt)
    return f"F.scaled_dot_product_attention({q}, {kv}, {kv}, is_causal=True, enable_gqa=True)"


def _attention(m: ModelShape, s: int, dt: str, mdt: str) -> str:
    x = _randn(1, m.heads, s, m.head_dim, dt=dt)
    mask = _randn(1, 1, s, s, dt=dt)
    scale = math.sqrt(m.head_dim)
    return f"torch.softmax({x} @ {x}.transpose(-1, -2) / {scale!r} + {mask}, dim=-1) @ {x}"


def _residual(k: Callable[[ModelShape], int]):
    def template(m: ModelShape, s: int, dt: str, mdt: str) -> str:
        proj = _linear(k(m), m.hidden, False, _randn(1, s, k(m), dt=dt), mdt)
        return f"{proj} + {_randn(1, s, m.hidden, dt=dt)}"

    return template


def _mlp_down(m: ModelShape, s: int, dt: str, mdt: str) -> str:
    return _linear(m.intermediate, m.hidden, False, _silu_mul(m, s, dt, mdt), mdt)


def _cases_for(m: ModelShape, s: int) -> list[Case]:
    h, i, hd = m.hidden, m.intermediate, m.heads * m.head_dim
    cases = [
        Case(op, m, s, _projection(k, n, bias), ((1, s, k(m)),), (1, s, n(m)), True)
        for op, (k, n, bias) in PROJECTIONS.items()
    ]
    q, kv = (1, m.heads, s, m.head_dim), (1, m.kv_heads, s, m.head_dim)
    o_in, down_in, out = ((1, s, hd), (1, s, h)), ((1, s, i), (1, s, h)), (1, s, h)
    cases += [
        Case("rmsnorm", m, s, _rmsnorm, ((1, s, h),), (1, s, h), False),
        Case("softmax", m, s, _softmax, ((1, m.heads, s, s),), (1, m.heads, s, s), False),
        Case("silu_mul", m, s, _silu_mul, ((1, s, i), (1, s, i)), (1, s, i), False),
        Case("sdpa_gqa", m, s, _sdpa, (q, kv, kv), q, True),
        Case("attention", m, s, _attention, (q, q, (1, 1, s, s), q), q, True),
        Case("o_proj_residual", m, s, _residual(lambda m: hd), o_in, out, True),
        Case("down_proj_residual", m, s, _residual(lambda m: i), down_in, out, True),
        Case("silu_mul_down", m, s, _mlp_down, ((1, s, i), (1, s, i)), out, True),
    ]
    return cases


def all_cases() -> list[Case]:
    """The 84 cases, grouped by op, then model, then sequence length."""
    cases = [c for m in MODELS for s in SEQ_LENS for c in _cases_for(m, s)]
    order = {op: n for n, op in enumerate(dict.fromkeys(c.op for c in cases))}
    return sorted(cases, key=lambda c: (order[c.op], MODELS.index(c.model), c.seq))


def add_case_patterns(parser: argparse.ArgumentParser) -> None:
    """`-k/--case PATTERN` (repeatable), into `args.cases`: the option every suite tool takes."""
    parser.add_argument(
        "-k",
        "--case",
        action="append",
        dest="cases",
        metavar="PATTERN",
        help="only the cases whose name contains PATTERN (repeatable)",
    )


def find_cases(patterns: list[str] | None = None) -> list[Case]:
    """The cases whose name contains any of `patterns` (all cases when none are given)."""
    cases = all_cases()
    if not patterns:
        return cases
    chosen = [c for c in cases if any(p in c.name for p in patterns)]
    if not chosen:
        raise ValueError(f"no case matches {', '.join(patterns)} (see --list)")
    return chosen
