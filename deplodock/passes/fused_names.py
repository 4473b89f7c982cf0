"""What a fused kernel is called: its main work, then what it outputs (`linear_silu_kernel`).

Lifting names each kernel after the op it computes (`tensor_to_loop/lift.py`: `silu_kernel`,
`linear_kernel`). Fusion pulls producers into their consumer and the fused kernel keeps the
consumer's symbol, so by that name alone the MLP's gate projection, whose epilogue is the
SiLU, read `silu_kernel`, and the down projection, whose consumer is the residual add,
`add_kernel`. So `loop-fusion` remembers the parts each kernel is made of (the lifted
kernels fused into it, each with the reduce-loop iterations it had when lifted) and names
the result after

- its main work: the part with the most reduce-loop iterations (a contraction outweighs a
  row statistic, which outweighs elementwise work), then
- its output: the consumer's own part, when that is another op.

So the gate projection is `linear_silu_kernel`, the down projection `linear_add_kernel`, a
norm's statistic with the residual add before it `rms_norm_kernel`. A kernel that reduces
nothing keeps its output's name (`cat_kernel`): none of its parts is the main work. Every
report (compile, tune, profile, the explorer, the tune cache) shows this one name; what
identifies a kernel across programs is its structure (`queries.structural_key`), not it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from deplodock.dialects import loop
from deplodock.dialects.queries import kernel_base_name
from deplodock.passes.loop_utils import reduction_iterations


@dataclass(frozen=True)
class Part:
    """One lifted kernel inside a fused one: the op it is named after, and its weight."""

    base: str
    reductions: int


@dataclass
class FusedNames:
    """The parts of every kernel fusion touched, by symbol (the consumer's symbol survives
    a fusion, so it keeps naming the grown kernel); `base` is the name the kernel earns."""

    parts: dict[str, tuple[Part, ...]] = field(default_factory=dict)

    def of(self, kernel: loop.KernelOp) -> tuple[Part, ...]:
        """The kernel's parts, its own first; a kernel not fused yet is one part, weighed
        now (so call it before the kernel grows)."""
        name = kernel.sym_name.data
        if name not in self.parts:
            self.parts[name] = (Part(kernel_base_name(name), reduction_iterations(kernel)),)
        return self.parts[name]

    def fused(self, consumer: str, parts: tuple[Part, ...]) -> None:
        """`consumer` now holds `parts` (its own, then its new producer's)."""
        self.parts[consumer] = parts

    def base(self, name: str) -> str:
        """`<main>_<output>`, or one of them where they agree or nothing reduces (module
        doc); a kernel fusion never touched keeps the base of its name."""
        parts = self.parts.get(name)
        if not parts:
            return kernel_base_name(name)
        output = parts[0].base
        main = max(parts, key=lambda part: part.reductions)  # the first of equals: the output
        if main.reductions == 0 or output == main.base or output.startswith(f"{main.base}_"):
            return output
        return f"{main.base}_{output}"
