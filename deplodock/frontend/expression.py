"""`-c` expressions: `nn.RMSNorm(2048)(torch.randn(1, 32, 2048))` -> a module + example inputs.

The expression is split with `ast`, so one line says everything a compile needs:
- every tensor factory call (`torch.randn(...)`, `torch.ones(...)`, ..., optionally followed by
  a dtype conversion such as `.half()`) whose arguments use no other tensor becomes a program
  input `x0, x1, ...`; it is evaluated once for the example value;
- every `nn.X(...)` / `torch.nn.X(...)` constructor (optionally followed by a conversion
  such as `.to(torch.bfloat16)`) is evaluated once and registered as submodule `"0"`, `"1"`,
  ... of a generated wrapper, so its parameters become program parameters (`0.weight`);
- everything else (calls, operators, nested) is the computation: the wrapper's `forward`.
Example values are reproducible: the RNG is seeded before anything is evaluated.
"""

from __future__ import annotations

import ast
import builtins
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from xdsl.dialects.builtin import ModuleOp

from deplodock.frontend.capture import (
    UnsupportedOpError,
    capture_program,
    flatten_outputs,
    to_numpy,
)

FACTORIES = frozenset(
    {"randn", "rand", "randint", "ones", "zeros", "full", "tensor", "arange", "empty", "eye"}
)
CONVERSIONS = frozenset({"half", "float", "bfloat16", "to", "contiguous"})
#: Methods that convert a module and return it (`nn.Linear(64, 32).to(torch.bfloat16)`):
#: applied once when the module is built, never inside the traced computation (where
#: `torch.export` refuses to swap a parameter).
MODULE_CONVERSIONS = frozenset({"half", "float", "double", "bfloat16", "to", "eval", "train"})
NAMESPACE: dict[str, Any] = {"torch": torch, "nn": nn, "F": F}
SAFE_BUILTINS = frozenset({"range", "len", "min", "max", "abs", "int", "float", "tuple", "list"})


class ExpressionError(Exception):
    """A `-c` expression that cannot be compiled; the message is one line with a column."""


def _error(node: ast.AST, message: str) -> ExpressionError:
    return ExpressionError(f"{message} (column {getattr(node, 'col_offset', 0) + 1})")


def _first_line(err: Exception) -> str:
    """What a one-line error quotes of PyTorch's (often multi-line) message."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _dotted(node: ast.AST) -> str | None:
    """`torch.nn.Linear` for an attribute chain rooted at a name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None


def _is_constant_expr(node: ast.AST, modules: bool = False) -> bool:
    """Evaluable from the namespace alone: no names but torch/nn/F, no calls (except module
    constructors when `modules`, for `nn.Sequential(nn.Linear(...), ...)`)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and not (modules and _module_class(sub)):
            return False
        if isinstance(sub, ast.Lambda | ast.NamedExpr):
            return False
        if isinstance(sub, ast.Name) and sub.id not in NAMESPACE:
            return False
    return True


def _is_factory(node: ast.AST) -> bool:
    """`torch.randn(2, 3)`, or a dtype conversion of one: `torch.randn(2, 3).half()`."""
    if not isinstance(node, ast.Call):
        return False
    args = [*node.args, *(k.value for k in node.keywords)]
    if not all(_is_constant_expr(a) for a in args):
        return False
    name = _dotted(node.func)
    if name is not None and name.startswith("torch.") and name[6:] in FACTORIES:
        return True
    f = node.func
    return isinstance(f, ast.Attribute) and f.attr in CONVERSIONS and _is_factory(f.value)


def _is_module(node: ast.AST) -> bool:
    """A module constructor, or a conversion of one with constant arguments:
    `nn.Linear(64, 32)`, `nn.Linear(64, 32).to(torch.bfloat16)`."""
    if not isinstance(node, ast.Call):
        return False
    if _module_class(node):
        return True
    f = node.func
    args = [*node.args, *(k.value for k in node.keywords)]
    return (
        isinstance(f, ast.Attribute)
        and f.attr in MODULE_CONVERSIONS
        and all(_is_constant_expr(a) for a in args)
        and _is_module(f.value)
    )


def _module_class(node: ast.Call) -> bool:
    name = _dotted(node.func)
    if name is None or not name.startswith(("nn.", "torch.nn.")):
        return False
    obj = _lookup(node.func, name)
    return isinstance(obj, type) and issubclass(obj, nn.Module)


def _lookup(node: ast.AST, name: str) -> Any:
    obj: Any = NAMESPACE[name.split(".")[0]]
    for part in name.split(".")[1:]:
        if not hasattr(obj, part):
            raise _error(node, f"unknown name {name!r}")
        obj = getattr(obj, part)
    return obj


def _evaluate(node: ast.expr, what: str) -> Any:
    code = compile(ast.fix_missing_locations(ast.Expression(node)), "<expression>", "eval")
    try:
        return eval(code, dict(NAMESPACE))
    except Exception as err:
        raise _error(node, f"cannot evaluate {what}: {_first_line(err)}") from None


@dataclass
class _Splitter(ast.NodeTransformer):
    """Replaces inputs and module constructors by names, collecting their values."""

    inputs: list[torch.Tensor] = field(default_factory=list)
    modules: list[nn.Module] = field(default_factory=list)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if _is_factory(node):
            value = _evaluate(node, "input tensor")
            if not isinstance(value, torch.Tensor):
                raise _error(node, "tensor factory did not return a tensor")
            self.inputs.append(value)
            return ast.copy_location(ast.Name(f"x{len(self.inputs) - 1}", ast.Load()), node)
        if _is_module(node):
            if _module_class(node) and not all(
                _is_constant_expr(a, True) for a in [*node.args, *node.keywords]
            ):
                raise _error(node, "module constructor arguments must not use tensors")
            self.modules.append(_evaluate(node, "module constructor"))
            return ast.copy_location(ast.Name(f"__m{len(self.modules) - 1}", ast.Load()), node)
        return self.generic_visit(node)

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        raise _error(node, "a lambda is not supported: write the computation itself")

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id not in NAMESPACE and node.id not in SAFE_BUILTINS:
            raise _error(node, f"unknown name {node.id!r}")
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        name = _dotted(node)
        if name is not None and name.split(".")[0] in NAMESPACE:
            _lookup(node, name)
            return node
        return self.generic_visit(node)


class ExpressionModule(nn.Module):
    """The generated wrapper: submodules `0, 1, ...` and a forward that evaluates the code."""

    def __init__(self, code: Any, modules: Sequence[nn.Module], input_names: Sequence[str]):
        super().__init__()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)
        self.code = code
        self.input_names = list(input_names)

        # torch.export names the program inputs after forward's parameters: x0, x1, ...
        def forward(*inputs: torch.Tensor) -> Any:
            return self.evaluate(inputs)

        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        params = [inspect.Parameter(n, kind) for n in self.input_names]
        forward.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        self.forward = forward

    def evaluate(self, inputs: Sequence[torch.Tensor]) -> Any:
        scope: dict[str, Any] = {**NAMESPACE, "__builtins__": builtins}
        scope |= {f"__m{i}": m for i, m in enumerate(self.children())}
        scope |= dict(zip(self.input_names, inputs, strict=True))
        return eval(self.code, scope)


def parse_expression(
    expr: str, seed: int | None = 0
) -> tuple[nn.Module, tuple[torch.Tensor, ...], list[str]]:
    """The wrapper module, its example inputs and their names (`x0, x1, ...`).

    The RNG is seeded with `seed` first (None: leave it as the caller set it).
    """
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as err:
        raise ExpressionError(f"syntax error: {err.msg} (column {err.offset or 0})") from None
    if seed is not None:
        torch.manual_seed(seed)
    splitter = _Splitter()
    body = splitter.visit(tree)
    if not splitter.inputs:
        raise ExpressionError(
            "expression has no input tensors: create them with torch.randn(...) (column 1)"
        )
    code = compile(ast.fix_missing_locations(body), "<expression>", "eval")
    names = [f"x{i}" for i in range(len(splitter.inputs))]
    return ExpressionModule(code, splitter.modules, names), tuple(splitter.inputs), names


def randomize_parameters(module: nn.Module, seed: int = 0, buffers: bool = True) -> nn.Module:
    """Non-trivial values for every floating parameter/buffer (norm weights are ones, biases 0).

    Tests call this so that a numerics check cannot pass by multiplying with ones; 2-D+ tensors
    get `randn / sqrt(fan_in)` (keeps activations O(1)), 1-D ones `uniform(0.5, 1.5)`.
    `buffers=False` keeps buffers that hold computed values (a rotary `inv_freq`).
    """
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for t in [*module.parameters(), *(module.buffers() if buffers else ())]:
            if not t.is_floating_point():
                continue
            if t.dim() >= 2:
                new = torch.randn(t.shape, generator=gen) / max(t.shape[-1], 1) ** 0.5
            else:
                new = torch.rand(t.shape, generator=gen) + 0.5
            t.copy_(new.to(t.dtype))
    return module


@dataclass
class ExpressionProgram:
    """A captured expression: the torch-dialect module and everything to run and check it."""

    module: ModuleOp
    inputs: list[np.ndarray]
    params: list[np.ndarray]
    input_names: list[str]
    torch_module: nn.Module
    example_inputs: tuple[torch.Tensor, ...]

    @property
    def arguments(self) -> list[np.ndarray]:
        """`@forward`'s arguments in order: inputs, then parameters."""
        return [*self.inputs, *self.params]

    @property
    def reference(self) -> Callable[[], list[np.ndarray]]:
        """Computes PyTorch's outputs on the example inputs (as numpy arrays)."""

        def run() -> list[np.ndarray]:
            with torch.no_grad():
                out = self.torch_module(*self.example_inputs)
            return [to_numpy(t) for t in flatten_outputs(out)]

        return run


def capture_expression(
    expr: str, randomize_seed: int | None = None, seed: int | None = 0
) -> ExpressionProgram:
    """Parse, (optionally) randomize parameters, export and import a `-c` expression."""
    module, inputs, names = parse_expression(expr, seed)
    if randomize_seed is not None:
        randomize_parameters(module, randomize_seed)
    try:
        ir, params = capture_program(module, inputs)
    except UnsupportedOpError:
        raise
    except Exception as err:
        raise ExpressionError(f"PyTorch could not run the expression: {_first_line(err)}") from None
    arrays = [to_numpy(t) for t in inputs]
    return ExpressionProgram(ir, arrays, params, names, module, inputs)
