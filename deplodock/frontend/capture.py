"""PyTorch -> torch dialect: `torch.export` a module and walk its FX graph.

`torch.export` gives a functional ATen graph with parameters lifted to placeholders and
FakeTensor metadata (shape, dtype) on every node, which is all the importer needs: each
`call_function` node goes through the table in `frontend/aten.py`, and every produced value is
checked against the node's metadata so a wrong handler fails at import, not at run time.

`@forward` takes the user inputs first (arg attr `deplodock.input`), then parameters, buffers
and lifted constants (arg attr `deplodock.param` = the name in the module's state dict).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, OutputKind
from torch.fx.operator_schemas import normalize_function
from xdsl.builder import Builder
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp, FunctionType, ReturnOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import VerifyException

from deplodock.frontend.aten import HANDLERS, AtenImportError, Emitter, target_name, tensor_type

_STATE_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


class UnsupportedOpError(Exception):
    """The program uses ops (or arguments) the importer cannot express; one-line message."""


def _unsupported(items: Sequence[tuple[str, str]], func: str, why: str = "") -> UnsupportedOpError:
    """`unsupported op aten.cumsum.default (1x) at forward: node cumsum` for (op, node) pairs."""
    counts = Counter(op for op, _ in items)
    ops = ", ".join(f"{op} ({n}x)" for op, n in counts.items())
    nodes = ", ".join(node for _, node in items)
    plural = "s" if len(counts) > 1 else ""
    nplural = "s" if len(items) > 1 else ""
    suffix = f" ({why})" if why else ""
    return UnsupportedOpError(
        f"unsupported op{plural} {ops} at {func}: node{nplural} {nodes}{suffix}"
    )


def _normalized_args(node: torch.fx.Node) -> dict[str, Any]:
    """The node's arguments by schema name, PyTorch's defaults filled in."""
    pair = normalize_function(
        node.target,  # type: ignore[arg-type]
        tuple(node.args),
        dict(node.kwargs),
        normalize_to_only_use_kwargs=True,
    )
    if pair is None:
        raise AtenImportError("cannot match the arguments to the op schema")
    return dict(pair.kwargs)


def _check_ops(graph: torch.fx.Graph, func: str) -> None:
    """Reject the whole program up front, naming every unsupported op at once."""
    bad = [
        (target_name(n.target), n.name)
        for n in graph.nodes
        if n.op == "get_attr" or (n.op == "call_function" and n.target not in HANDLERS)
    ]
    if bad:
        raise _unsupported(bad, func)


def _ordered_inputs(ep: ExportedProgram) -> list[InputSpec]:
    """User inputs first, then the module state (parameters, buffers, lifted constants)."""
    specs = ep.graph_signature.input_specs
    other = [s for s in specs if s.kind != InputKind.USER_INPUT and s.kind not in _STATE_KINDS]
    if other:
        kinds = ", ".join(sorted({s.kind.name for s in other}))
        raise UnsupportedOpError(f"unsupported program inputs of kind {kinds}")
    return [s for s in specs if s.kind == InputKind.USER_INPUT] + [
        s for s in specs if s.kind in _STATE_KINDS
    ]


def _arg_attr(spec: InputSpec) -> DictionaryAttr:
    if spec.kind == InputKind.USER_INPUT:
        return DictionaryAttr({"deplodock.input": StringAttr(spec.arg.name)})
    assert spec.target is not None
    return DictionaryAttr({"deplodock.param": StringAttr(spec.target)})


def import_exported_program(ep: ExportedProgram, func_name: str = "forward") -> ModuleOp:
    """The torch-dialect module (`func.func @forward`) of an exported program."""
    graph = ep.graph_module.graph
    _check_ops(graph, func_name)
    if any(s.kind != OutputKind.USER_OUTPUT for s in ep.graph_signature.output_specs):
        raise UnsupportedOpError(f"{func_name} mutates its inputs or buffers (in-place ops)")
    placeholders = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    specs = _ordered_inputs(ep)
    types = []
    for spec in specs:
        try:
            types.append(tensor_type(placeholders[spec.arg.name].meta.get("val"), spec.arg.name))
        except AtenImportError as err:
            raise UnsupportedOpError(f"unsupported input at {func_name}: {err}") from None
    block = Block(arg_types=types)
    env: dict[torch.fx.Node, SSAValue] = {}
    for spec, arg in zip(specs, block.args, strict=True):
        arg.name_hint = spec.arg.name
        env[placeholders[spec.arg.name]] = arg
    emitter = Emitter(Builder(InsertPoint.at_end(block)), env)
    outputs: list[SSAValue] = []
    for node in graph.nodes:
        if node.op == "call_function":
            env[node] = _import_node(emitter, node, func_name)
        elif node.op == "output":
            outputs = [_output(env, out, func_name) for out in _flatten(node.args[0])]
    block.add_op(ReturnOp(*outputs))
    func = FuncOp(
        func_name,
        FunctionType.from_lists(types, [v.type for v in outputs]),
        Region(block),
        arg_attrs=ArrayAttr([_arg_attr(s) for s in specs]),
    )
    module = ModuleOp([func])
    module.verify()
    return module


def _import_node(emitter: Emitter, node: torch.fx.Node, func_name: str) -> SSAValue:
    name = target_name(node.target)
    try:
        expected = tensor_type(node.meta.get("val"), f"result of {node.name}")
        value = HANDLERS[node.target](emitter, _normalized_args(node), expected)
        if value.type != expected:
            raise AtenImportError(f"imported as {value.type}, PyTorch says {expected}")
    except (AtenImportError, VerifyException) as err:
        raise _unsupported([(name, node.name)], func_name, str(err)) from None
    if value.name_hint is None:
        value.name_hint = node.name
    return value


def _flatten(out: Any) -> list[Any]:
    return [y for x in out for y in _flatten(x)] if isinstance(out, list | tuple) else [out]


def _output(env: dict[torch.fx.Node, SSAValue], out: Any, func_name: str) -> SSAValue:
    if not isinstance(out, torch.fx.Node) or out not in env:
        raise UnsupportedOpError(f"unsupported output of {func_name}: {out!r} is not a tensor")
    return env[out]


def export(module: torch.nn.Module, example_inputs: Sequence[torch.Tensor]) -> ExportedProgram:
    """`torch.export` in eval mode: deplodock compiles inference (dropout off, BN frozen)."""
    module.eval()
    fake_tensor_log = logging.getLogger("torch._subclasses.fake_tensor")
    level = fake_tensor_log.level
    fake_tensor_log.setLevel(logging.CRITICAL)  # a shape error is reported once, by the caller
    try:
        with torch.no_grad():
            return torch.export.export(module, tuple(example_inputs))
    finally:
        fake_tensor_log.setLevel(level)


def capture(module: torch.nn.Module, example_inputs: Sequence[torch.Tensor]) -> ModuleOp:
    """Export `module` on `example_inputs` and import it as a torch-dialect module."""
    return import_exported_program(export(module, example_inputs))


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A host copy; bf16 is carried as float32 (numpy has no bfloat16)."""
    t = t.detach().cpu()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy().copy()


def state_arrays(ep: ExportedProgram) -> list[np.ndarray]:
    """Parameters, buffers and lifted constants, in `@forward` argument order."""
    out = []
    for spec in _ordered_inputs(ep):
        if spec.kind == InputKind.USER_INPUT:
            continue
        assert spec.target is not None
        value = ep.state_dict.get(spec.target, ep.constants.get(spec.target))
        assert isinstance(value, torch.Tensor)
        out.append(to_numpy(value))
    return out


def capture_program(
    module: torch.nn.Module, example_inputs: Sequence[torch.Tensor]
) -> tuple[ModuleOp, list[np.ndarray]]:
    """`capture`, plus the parameter arrays that follow the inputs in `@forward`'s arguments."""
    ep = export(module, example_inputs)
    return import_exported_program(ep), state_arrays(ep)


def argument_names(module: ModuleOp, func_name: str = "forward") -> list[tuple[str, str]]:
    """(`input` | `param`, name) for each argument of `@forward`, from its arg attributes."""
    func = next(op for op in module.ops if isinstance(op, FuncOp) and op.sym_name.data == func_name)
    names = []
    for attrs in func.arg_attrs.data if func.arg_attrs else []:
        for kind in ("input", "param"):
            if (value := attrs.data.get(f"deplodock.{kind}")) is not None:
                assert isinstance(value, StringAttr)
                names.append((kind, value.data))
    return names
