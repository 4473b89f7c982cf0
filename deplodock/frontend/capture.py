"""PyTorch -> torch dialect: `torch.export` a module and walk its FX graph.

`torch.export` gives a functional ATen graph with parameters lifted to placeholders and
FakeTensor metadata (shape, dtype) on every node, which is all the importer needs: each
`call_function` node goes through the table in `frontend/aten/`, and every produced value is
checked against the node's metadata so a wrong handler fails at import, not at run time.

`@forward` takes the user inputs first (arg attr `deplodock.input`), then parameters, buffers
and lifted constants (arg attr `deplodock.param` = the name in the module's state dict).

Before the import the graph is simplified (`simplify_graph`): higher-order ops that only
switch autograd mode are inlined, the multi-output ops `broadcast_tensors` and
`max.dim`/`min.dim` become one single-output op per output, runtime shape/dtype assertions
are dropped and dead nodes are removed, so a Hugging Face model's unused mask bookkeeping
never reaches the report. Unused parameters and buffers get no argument. Everything else
must be in the aten table: `_check_ops` names every unsupported op at once, with its count
and the module path (`model.layers.{0-27}.self_attn`) it comes from.
"""

from __future__ import annotations

import logging
import operator
import re
import warnings
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, OutputKind, TensorArgument
from torch.fx.operator_schemas import normalize_function
from xdsl.builder import Builder
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp, FunctionType, ReturnOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import VerifyException

from deplodock.frontend.aten import AtenImportError, Emitter, target_name, tensor_type
from deplodock.frontend.aten.core import OutputOf, handler_of
from deplodock.frontend.aten.coverage import REFUSED
from deplodock.frontend.aten.decompositions import decompose

_STATE_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


class UnsupportedOpError(Exception):
    """The program uses ops (or arguments) the importer cannot express; one-line message."""


class MixedDtypeError(ValueError):
    """An op whose tensors have different dtypes where its PyTorch kernel takes one (a bf16
    input to an fp32 Linear): the program's to fix, not an op deplodock lacks."""


#: Runtime checks of the traced shapes and dtypes: true for the example inputs by
#: construction, and static shapes make them true for every input. They produce no value.
_ASSERTIONS = frozenset(
    {
        torch.ops.aten._assert_tensor_metadata.default,
        torch.ops.aten._assert_scalar.default,
        torch.ops.aten._assert_async.msg,
        torch.ops.aten.sym_constrain_range.default,
        torch.ops.aten.sym_constrain_range_for_size.default,
    }
)

#: Higher-order ops whose only effect is the autograd mode of their body: inlined.
_GRAD_MODE_WRAPPERS = frozenset({torch.ops.higher_order.wrap_with_set_grad_enabled})

#: At most this many node names in an unsupported-op report (the rest are counted).
_MAX_NODES_REPORTED = 12


def module_path(node: torch.fx.Node) -> str:
    """The module a node comes from (`model.layers.0.self_attn`; "" for the root module)."""
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    return path if isinstance(path, str) else ""


def _ranges(numbers: list[int]) -> str:
    """`0-3,5` for [0, 1, 2, 3, 5]."""
    parts: list[str] = []
    ordered = sorted(set(numbers))
    start = prev = ordered[0]
    for n in [*ordered[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ",".join(parts)


def compress_paths(paths: Sequence[str]) -> list[str]:
    """Module paths with one varying index folded: `model.layers.{0-27}.mlp`, first-seen order."""
    groups: dict[str, list[int]] = defaultdict(list)
    singles: dict[str, None] = {}
    for path in paths:
        indices = re.findall(r"(?<=\.)\d+(?=\.|$)", path)
        if len(indices) == 1:
            pattern = re.sub(r"(?<=\.)\d+(?=\.|$)", "{}", path)
            groups[pattern].append(int(indices[0]))
            singles.setdefault(pattern)
        else:
            singles.setdefault(path)
    out = []
    for key in singles:
        if key in groups:
            numbers = groups[key]
            label = str(numbers[0]) if len(set(numbers)) == 1 else "{" + _ranges(numbers) + "}"
            out.append(key.replace("{}", label))
        else:
            out.append(key)
    return out


def _unsupported(
    items: Sequence[tuple[str, str, str]], func: str, why: str = ""
) -> UnsupportedOpError:
    """One line for (op, node, module path) triples: every op with its count and origin.

    `unsupported op aten.cumsum.default (1x) at forward: node cumsum`, for ops inside
    submodules `aten.diff.default (28x in model.layers.{0-27}.self_attn)`, and a Core ATen
    op refused by design with its reason (`aten.nonzero.default (1x; data-dependent output
    shape)`), so the user knows it is not a gap that a newer deplodock fills.
    """
    counts = Counter(op for op, _, _ in items)
    paths: dict[str, list[str]] = defaultdict(list)
    for op, _, path in items:
        if path:
            paths[op].append(path)
    ops = []
    for op, n in counts.items():
        where = f" in {', '.join(compress_paths(paths[op]))}" if paths[op] else ""
        reason = f"; {REFUSED[op]}" if op in REFUSED else ""
        ops.append(f"{op} ({n}x{where}{reason})")
    names = [node for _, node, _ in items]
    shown = ", ".join(names[:_MAX_NODES_REPORTED])
    if len(names) > _MAX_NODES_REPORTED:
        shown += f", ... ({len(names) - _MAX_NODES_REPORTED} more)"
    plural = "s" if len(counts) > 1 else ""
    nplural = "s" if len(items) > 1 else ""
    suffix = f" ({why})" if why else ""
    return UnsupportedOpError(
        f"unsupported op{plural} {', '.join(ops)} at {func}: node{nplural} {shown}{suffix}"
    )


def _normalized_args(node: torch.fx.Node) -> dict[str, Any]:
    """The node's arguments by schema name, PyTorch's defaults filled in."""
    target = node.target.op if isinstance(node.target, OutputOf) else node.target
    pair = normalize_function(
        target,  # type: ignore[arg-type]
        tuple(node.args),
        dict(node.kwargs),
        normalize_to_only_use_kwargs=True,
    )
    if pair is None:
        raise AtenImportError("cannot match the arguments to the op schema")
    return dict(pair.kwargs)


def _check_ops(graph: torch.fx.Graph, func: str) -> None:
    """Reject the whole program up front, naming every unsupported op at once."""
    unsupported = [
        n
        for n in graph.nodes
        if n.op in ("get_attr", "call_module", "call_method")
        or (n.op == "call_function" and handler_of(n.target) is None)
    ]
    # `getitem` only unpacks a multi-output op: reported with that op, not on its own.
    flagged = set(unsupported)
    bad = [
        (target_name(n.target), n.name, module_path(n))
        for n in unsupported
        if not (n.target is operator.getitem and n.args and n.args[0] in flagged)
    ]
    if bad:
        raise _unsupported(bad, func)


def _inline_call(gm: torch.fx.GraphModule, node: torch.fx.Node) -> None:
    """Replaces a `wrap_with_set_grad_enabled(mode, submod, *args)` call by the submodule's body.

    The call returns a tuple that `getitem` nodes unpack; their uses are redirected to the
    inlined values. Module-path metadata is copied with each node.
    """
    sub_node, operands = node.args[1], node.args[2:]
    assert isinstance(sub_node, torch.fx.Node) and isinstance(sub_node.target, str)
    body = getattr(gm, sub_node.target)
    env: dict[torch.fx.Node, Any] = {}
    placeholders = [n for n in body.graph.nodes if n.op == "placeholder"]
    env.update(zip(placeholders, operands, strict=True))
    results: Any = None
    with gm.graph.inserting_before(node):
        for inner in body.graph.nodes:
            if inner.op == "output":
                results = torch.fx.node.map_arg(inner.args[0], lambda n: env[n])
            elif inner.op != "placeholder":
                env[inner] = gm.graph.node_copy(inner, lambda n: env[n])
    for user in list(node.users):
        if user.target is operator.getitem:
            user.replace_all_uses_with(results[user.args[1]])
            gm.graph.erase_node(user)
    if not node.users:
        gm.graph.erase_node(node)


_aten = torch.ops.aten

#: `max(x, dim)` / `min(x, dim)` return (values, indices): the ops that compute each.
_EXTREMUM_PARTS = {
    _aten.max.dim: (_aten.amax.default, _aten.argmax.default),
    _aten.min.dim: (_aten.amin.default, _aten.argmin.default),
}


def _output_part(node: torch.fx.Node, index: int) -> tuple[Any, tuple[Any, ...]] | None:
    """The single-output aten call (target, args) that computes output `index` of a
    multi-output op the importer takes apart, or None for any other op: `broadcast_tensors`
    is one `expand` per operand, `max.dim` / `min.dim` are `amax` and `argmax` (`amin`,
    `argmin`) with the same dim and keepdim."""
    if handler_of(OutputOf(node.target, index)) is not None:  # type: ignore[arg-type]
        return OutputOf(node.target, index), tuple(node.args)  # type: ignore[arg-type]
    if node.target is _aten.broadcast_tensors.default:
        return _aten.expand.default, (node.args[0][index], list(node.meta["val"][index].shape))
    parts = _EXTREMUM_PARTS.get(node.target)  # type: ignore[call-overload]
    if parts is None:
        return None
    a = _normalized_args(node)
    dim = [a["dim"]] if index == 0 else a["dim"]
    return parts[index], (a["input"], dim, a["keepdim"])


def _split_outputs(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """Replaces each `getitem` of a multi-output op by the op computing that output alone
    (`_output_part`), so the table only ever sees single-output ops; other ops are left
    alone (and reported as unsupported)."""
    users = list(node.users)
    if not users or any(u.target is not operator.getitem for u in users):
        return
    parts = {user: _output_part(node, user.args[1]) for user in users}
    if any(part is None for part in parts.values()):
        return
    for user, (target, args) in parts.items():  # type: ignore[misc]
        with graph.inserting_before(user):
            kwargs = dict(node.kwargs) if isinstance(target, OutputOf) else {}
            single = graph.call_function(target, args, kwargs)
        single.meta = dict(user.meta)
        user.replace_all_uses_with(single)
        graph.erase_node(user)
    graph.erase_node(node)


def simplify_graph(gm: torch.fx.GraphModule) -> None:
    """Inline autograd-mode wrappers, take apart the multi-output ops the table knows,
    drop runtime assertions, remove dead nodes (in place)."""
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in _GRAD_MODE_WRAPPERS:
            _inline_call(gm, node)
    for node in list(graph.nodes):
        if node.op == "call_function" and isinstance(node.meta.get("val"), list | tuple):
            _split_outputs(graph, node)
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in _ASSERTIONS and not node.users:
            graph.erase_node(node)
    graph.eliminate_dead_code()


def _ordered_inputs(ep: ExportedProgram) -> list[InputSpec]:
    """User tensor inputs first, then the module state the graph uses (parameters, buffers,
    lifted constants). Non-tensor user inputs (constants folded into the graph) and unused
    state get no argument."""
    specs = ep.graph_signature.input_specs
    other = [s for s in specs if s.kind != InputKind.USER_INPUT and s.kind not in _STATE_KINDS]
    if other:
        kinds = ", ".join(sorted({s.kind.name for s in other}))
        raise UnsupportedOpError(f"unsupported program inputs of kind {kinds}")
    used = {n.name for n in ep.graph_module.graph.nodes if n.op == "placeholder" and n.users}
    return [
        s for s in specs if s.kind == InputKind.USER_INPUT and isinstance(s.arg, TensorArgument)
    ] + [s for s in specs if s.kind in _STATE_KINDS and s.arg.name in used]


def _arg_attr(spec: InputSpec) -> DictionaryAttr:
    if spec.kind == InputKind.USER_INPUT:
        return DictionaryAttr({"deplodock.input": StringAttr(spec.arg.name)})
    assert spec.target is not None
    return DictionaryAttr({"deplodock.param": StringAttr(spec.target)})


def import_exported_program(
    ep: ExportedProgram,
    func_name: str = "forward",
    op_paths: dict[Operation, str] | None = None,
) -> ModuleOp:
    """The torch-dialect module (`func.func @forward`) of an exported program.

    `op_paths`, when given, receives the module path of the FX node each op was imported
    from (what `deplodock.stamp` uses to find the decoder layers).
    """
    simplify_graph(ep.graph_module)
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
            last = block.last_op
            env[node] = _import_node(emitter, node, func_name)
            if op_paths is not None:
                path = module_path(node)
                op = last.next_op if last is not None else block.first_op
                while op is not None:
                    op_paths[op] = path
                    op = op.next_op
        elif node.op == "output":
            outputs = [_output(env, out, func_name) for out in flatten_outputs(node.args[0])]
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
        registration = handler_of(node.target)
        assert registration is not None  # `_check_ops` let it through
        a = _normalized_args(node)
        if isinstance(node.target, OutputOf):
            a["output_index"] = node.target.index
        value = registration(emitter, a, expected)
        if value.type != expected:
            raise AtenImportError(f"imported as {value.type}, PyTorch says {expected}")
        if isinstance(value.owner, Operation):
            value.owner.verify()  # here, where the failure can be told of this node
    except (AtenImportError, VerifyException) as err:
        if mixed := _mixed_dtypes(node):
            raise MixedDtypeError(
                f"{name} at {func_name}: node {node.name} mixes dtypes ({mixed}); like "
                "PyTorch's own kernel it takes one: convert the tensor or the module "
                "(x.to(torch.float32), module.bfloat16())"
            ) from None
        raise _unsupported([(name, node.name, module_path(node))], func_name, str(err)) from None
    if value.name_hint is None:
        value.name_hint = node.name
    return value


def _mixed_dtypes(node: torch.fx.Node) -> str:
    """`x0 is torch.bfloat16, p_0_weight is torch.float32` when the node's floating-point
    inputs are not all of one dtype, else ''. Integer inputs (indices, positions) are left out:
    `x[:, i]` takes int64 indices into a float tensor by design, not by mistake."""
    inputs = [
        (arg.name, arg.meta["val"].dtype)
        for arg in node.all_input_nodes
        if isinstance(arg.meta.get("val"), torch.Tensor) and arg.meta["val"].is_floating_point()
    ]
    if len({dtype for _, dtype in inputs}) < 2:
        return ""
    return ", ".join(f"{arg} is {dtype}" for arg, dtype in inputs)


def flatten_outputs(out: Any) -> list[Any]:
    """The output node's (nested) tuple of values, flattened in order."""
    if isinstance(out, list | tuple):
        return [y for x in out for y in flatten_outputs(x)]
    return [out]


def _output(env: dict[torch.fx.Node, SSAValue], out: Any, func_name: str) -> SSAValue:
    if not isinstance(out, torch.fx.Node) or out not in env:
        raise UnsupportedOpError(f"unsupported output of {func_name}: {out!r} is not a tensor")
    return env[out]


def export(
    module: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor],
    example_kwargs: Mapping[str, Any] | None = None,
) -> ExportedProgram:
    """`torch.export` in eval mode: deplodock compiles inference (dropout off, BN frozen).
    Ops no handler takes are decomposed by PyTorch (`aten/decompositions.py`)."""
    module.eval()
    fake_tensor_log = logging.getLogger("torch._subclasses.fake_tensor")
    level = fake_tensor_log.level
    fake_tensor_log.setLevel(logging.CRITICAL)  # a shape error is reported once, by the caller
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # nn.RNN/LSTM/GRU keep their weights in a list that export warns about; the
            # weights are parameters all the same, and read by name at every call
            warnings.filterwarnings("ignore", "The tensor attributes self._flat_weights")
            ep = torch.export.export(module, tuple(example_inputs), dict(example_kwargs or {}))
            return decompose(ep)
    finally:
        fake_tensor_log.setLevel(level)


def capture(
    module: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor],
    example_kwargs: Mapping[str, Any] | None = None,
) -> ModuleOp:
    """Export `module` on `example_inputs` and import it as a torch-dialect module."""
    return import_exported_program(export(module, example_inputs, example_kwargs))


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
