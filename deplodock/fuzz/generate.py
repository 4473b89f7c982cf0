"""Random programs for the differential fuzzer: small DAGs of the ops deplodock supports.

A program is a list of statements over named tensors, each line valid PyTorch:

    v2 = torch.softmax(v0, dim=-1)
    v3 = v2 @ v1
    v4 = v3 + v0[..., :17]

Inputs are `v0 .. v{k-1}`; every statement defines the next `v<i>` from earlier ones (any
earlier value, so values are reused: a DAG, not a chain); every value no statement uses is
an output (a program may return several). The
generator tracks every value's shape, so each op is drawn only where it applies. Sizes are
odd on purpose (1, 3, 17, 127, ...) and values stay finite: divisions and square roots are
given positive arguments, exponentials bounded inputs.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

#: Sizes a dimension is drawn from: ones (broadcasting), odd and prime sizes, a warp.
SIZES = (1, 2, 3, 5, 8, 17, 32, 33, 127)
#: Elements a value may have (the interpreters run every level of every program).
MAX_ELEMENTS = 40_000
DTYPES = ("fp32", "bf16")

Shape = tuple[int, ...]


@dataclass
class FuzzProgram:
    """Inputs (shapes), statements, and the dtype of every tensor."""

    seed: int
    dtype: str
    inputs: list[Shape]
    statements: list[str] = field(default_factory=list)
    shapes: list[Shape] = field(default_factory=list)  # of v0, v1, ... (inputs first)

    @property
    def outputs(self) -> list[str]:
        """Every computed value no later statement uses (the DAG's sinks), in order."""
        defined = [line.split(" = ", 1)[0] for line in self.statements]
        used = {name for line in self.statements for name in _names(line.split(" = ", 1)[1])}
        return [name for name in defined if name not in used] or defined[-1:]

    def source(self) -> str:
        """A standalone Python definition: `Program` (an nn.Module) and `INPUTS` (shapes)."""
        args = ", ".join(f"v{i}" for i in range(len(self.inputs)))
        body = "\n".join(f"        {line}" for line in self.statements) or "        pass"
        torch_dtype = "torch.float32" if self.dtype == "fp32" else "torch.bfloat16"
        return (
            "import torch\n"
            "import torch.nn.functional as F\n\n\n"
            "class Program(torch.nn.Module):\n"
            f"    def forward(self, {args}):\n"
            f"{body}\n"
            f"        return {', '.join(self.outputs)}\n\n\n"
            f"INPUTS = {self.inputs!r}\n"
            f"DTYPE = {torch_dtype}\n"
            f"SEED = {self.seed}\n"
        )


def _names(expression: str) -> set[str]:
    return set(re.findall(r"\bv\d+\b", expression))


def _numel(shape: Shape) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


class _Builder:
    """Draws ops for one program; each `_op_*` returns (expression, shape) or None."""

    def __init__(self, rng: random.Random, program: FuzzProgram):
        self.rng = rng
        self.program = program

    @property
    def shapes(self) -> list[Shape]:
        return self.program.shapes

    def pick(self) -> int:
        """An earlier value, recent ones more likely (chains and reuse both occur)."""
        n = len(self.shapes)
        return max(0, n - 1 - int(self.rng.expovariate(0.7)))

    def emit(self, expression: str, shape: Shape) -> None:
        self.program.statements.append(f"v{len(self.shapes)} = {expression}")
        self.shapes.append(shape)

    # -- elementwise -------------------------------------------------------------------------

    def _op_unary(self) -> tuple[str, Shape]:
        i = self.pick()
        x = f"v{i}"
        forms = [
            f"torch.relu({x})",
            f"torch.tanh({x})",
            f"torch.sigmoid({x})",
            f"F.silu({x})",
            f"F.gelu({x})",
            f"torch.exp(torch.tanh({x}))",
            f"torch.sqrt(torch.abs({x}) + 1.0)",
            f"torch.rsqrt(torch.abs({x}) + 1.0)",
            f"-{x}",
            f"{x} * {self.rng.choice(['0.5', '1.5', '-2.0'])}",
            f"torch.abs({x})",
            f"torch.clamp({x}, -0.5, 0.5)",
        ]
        return self.rng.choice(forms), self.shapes[i]

    def _broadcast_partner(self, shape: Shape) -> int | None:
        """An earlier value whose shape broadcasts with `shape` to exactly `shape`."""
        candidates = [
            j
            for j, other in enumerate(self.shapes)
            if len(other) <= len(shape)
            and all(o in (1, s) for o, s in zip(other[::-1], shape[::-1], strict=False))
        ]
        return self.rng.choice(candidates) if candidates else None

    def _op_binary(self) -> tuple[str, Shape] | None:
        i = self.pick()
        j = self._broadcast_partner(self.shapes[i])
        if j is None:
            return None
        x, y = f"v{i}", f"v{j}"
        forms = [
            f"{x} + {y}",
            f"{x} - {y}",
            f"{x} * {y}",
            f"torch.maximum({x}, {y})",
            f"torch.minimum({x}, {y})",
            f"{x} / (torch.abs({y}) + 1.0)",
        ]
        return self.rng.choice(forms), self.shapes[i]

    # -- reductions and normalizations --------------------------------------------------------

    def _op_reduce(self) -> tuple[str, Shape] | None:
        i = self.pick()
        shape = self.shapes[i]
        if not shape:
            return None
        dim = self.rng.randrange(len(shape))
        keep = self.rng.random() < 0.5
        kind = self.rng.choice(["sum", "mean", "amax"])
        out = (
            tuple(1 if d == dim else s for d, s in enumerate(shape))
            if keep
            else tuple(s for d, s in enumerate(shape) if d != dim)
        )
        if not out:
            return None  # a 0-d result ends the DAG too early to be interesting
        return f"v{i}.{kind}(dim={dim}, keepdim={keep})", out

    def _op_softmax(self) -> tuple[str, Shape] | None:
        i = self.pick()
        if not self.shapes[i]:
            return None
        dim = self.rng.randrange(len(self.shapes[i]))
        return f"torch.softmax(v{i}, dim={dim})", self.shapes[i]

    def _op_norm(self) -> tuple[str, Shape] | None:
        i = self.pick()
        shape = self.shapes[i]
        if not shape:
            return None
        x = f"v{i}"
        if self.rng.random() < 0.5:
            return f"F.layer_norm({x}, ({shape[-1]},))", shape
        return f"{x} * torch.rsqrt(({x} * {x}).mean(dim=-1, keepdim=True) + 1e-5)", shape

    # -- contractions -------------------------------------------------------------------------

    def _op_matmul(self) -> tuple[str, Shape] | None:
        """`a @ b` where `b` is an earlier value with a matching inner dimension, or a new
        input (a weight) when none has one."""
        i = self.pick()
        a = self.shapes[i]
        if len(a) < 2 or len(a) > 3:
            return None
        k = a[-1]
        n = self.rng.choice(SIZES[2:])
        batch = a[:-2]
        rows = _numel(a[:-1])
        if rows * n > MAX_ELEMENTS or rows * n * k > 4 * MAX_ELEMENTS:
            return None
        partners = [j for j, b in enumerate(self.shapes) if b == (*batch, k, n)]
        if partners:
            return f"v{i} @ v{self.rng.choice(partners)}", (*a[:-1], n)
        return None

    # -- shape ops ----------------------------------------------------------------------------

    def _op_permute(self) -> tuple[str, Shape] | None:
        i = self.pick()
        shape = self.shapes[i]
        if len(shape) < 2:
            return None
        order = list(range(len(shape)))
        self.rng.shuffle(order)
        return f"v{i}.permute({', '.join(map(str, order))})", tuple(shape[d] for d in order)

    def _op_transpose(self) -> tuple[str, Shape] | None:
        i = self.pick()
        shape = self.shapes[i]
        if len(shape) < 2:
            return None
        return f"v{i}.transpose(-1, -2)", (*shape[:-2], shape[-1], shape[-2])

    def _op_reshape(self) -> tuple[str, Shape] | None:
        i = self.pick()
        shape = self.shapes[i]
        if len(shape) < 2:
            return f"v{i}.reshape({_numel(shape)}, 1)", (_numel(shape), 1)
        d = self.rng.randrange(len(shape) - 1)
        merged = (*shape[:d], shape[d] * shape[d + 1], *shape[d + 2 :])
        return f"v{i}.reshape({', '.join(map(str, merged))})", merged

    def _op_slice(self) -> tuple[str, Shape] | None:
        i = self.pick()
        shape = self.shapes[i]
        dims = [d for d, s in enumerate(shape) if s > 1]
        if not dims:
            return None
        d = self.rng.choice(dims)
        start = self.rng.randrange(shape[d] - 1)
        stop = self.rng.randrange(start + 1, shape[d] + 1)
        index = ", ".join([":"] * d + [f"{start}:{stop}"])
        out = tuple(stop - start if e == d else s for e, s in enumerate(shape))
        return f"v{i}[{index}]", out

    def _op_cat(self) -> tuple[str, Shape] | None:
        i = self.pick()
        shape = self.shapes[i]
        if not shape:
            return None
        d = self.rng.randrange(len(shape))
        partners = [
            j
            for j, other in enumerate(self.shapes)
            if len(other) == len(shape)
            and all(o == s for e, (o, s) in enumerate(zip(other, shape, strict=True)) if e != d)
        ]
        j = self.rng.choice(partners)
        out = tuple(s + self.shapes[j][d] if e == d else s for e, s in enumerate(shape))
        if _numel(out) > MAX_ELEMENTS:
            return None
        return f"torch.cat([v{i}, v{j}], dim={d})", out

    def _op_expand(self) -> tuple[str, Shape] | None:
        i = self.pick()
        shape = self.shapes[i]
        ones = [d for d, s in enumerate(shape) if s == 1]
        if not ones:
            return None
        d = self.rng.choice(ones)
        size = self.rng.choice(SIZES[2:])
        out = tuple(size if e == d else s for e, s in enumerate(shape))
        if _numel(out) > MAX_ELEMENTS:
            return None
        return f"v{i}.expand({', '.join(map(str, out))})", out

    def ops(self) -> list[tuple[float, Callable[[], tuple[str, Shape] | None]]]:
        """(weight, drawer) for every op family."""
        return [
            (3.0, self._op_unary),
            (3.0, self._op_binary),
            (1.5, self._op_reduce),
            (1.0, self._op_softmax),
            (1.0, self._op_norm),
            (1.5, self._op_matmul),
            (0.7, self._op_permute),
            (0.7, self._op_transpose),
            (0.7, self._op_reshape),
            (0.7, self._op_slice),
            (0.5, self._op_cat),
            (0.5, self._op_expand),
        ]


def _random_shape(rng: random.Random) -> Shape:
    while True:
        rank = rng.randint(1, 4)
        shape = tuple(rng.choice(SIZES) for _ in range(rank))
        if _numel(shape) <= MAX_ELEMENTS // 4:
            return shape


def generate(seed: int, max_ops: int = 6) -> FuzzProgram:
    """The program of `seed`: 1-3 inputs (matmul partners among them), 1-`max_ops` ops."""
    rng = random.Random(seed)
    dtype = "bf16" if rng.random() < 0.25 else "fp32"
    first = _random_shape(rng)
    inputs = [first]
    if len(first) in (2, 3) and rng.random() < 0.5:  # a weight for a matmul
        inputs.append((*first[:-2], first[-1], rng.choice(SIZES[2:])))
    if rng.random() < 0.5:
        inputs.append(tuple(1 if rng.random() < 0.4 else s for s in first))  # broadcasts
    program = FuzzProgram(seed, dtype, inputs, shapes=list(inputs))
    builder = _Builder(rng, program)
    families = builder.ops()
    weights = [w for w, _ in families]
    target = rng.randint(1, max_ops)
    attempts = 0
    while len(program.statements) < target and attempts < 50:
        attempts += 1
        _, draw = rng.choices(families, weights)[0]
        drawn = draw()
        if drawn is not None and 0 < _numel(drawn[1]) <= MAX_ELEMENTS:
            builder.emit(*drawn)
    if not program.statements:
        builder.emit("v0 * 1.5", program.shapes[0])
    return program
