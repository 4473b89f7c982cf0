"""Lower each distinct decoder layer once and stamp it for every layer.

Lowering works on a whole program, and loop fusion looks at pairs of launches, so a 28-layer
model costs far more than 28 times one layer. But an LLM's decoder layers are one
computation on different weights, and every torch-level op knows the module it came from
(`model.layers.<i>.self_attn`, recorded at capture). So the torch-level `@forward` is cut
into segments, maximal runs of ops of one layer (or of none: the prologue with the
embedding and rotary tables, the epilogue with the final norm and LM head). Each segment
becomes a standalone module (its inputs are arguments, the values later ops need are
results); segments with the same structural key (`queries.structural_key`, blind to value
names and argument attributes) share one module, which is lowered once. Stitching builds the lowered
program: the kernels of each lowered segment move into one module (renamed apart), and the
host sequence of each segment's `@forward` (allocs, launches) is cloned in order, mapped to
that segment's buffers and weights, so layer 7's launches call the shared layer kernels
with layer 7's weights.

The price: a value crossing a segment boundary (the hidden state between two layers) is
materialized in a buffer; fusion happens within segments.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    ModuleOp,
    StringAttr,
)
from xdsl.dialects.func import FuncOp, FunctionType, ReturnOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from deplodock.dialects import torch as T
from deplodock.dialects.queries import (
    forward_function,
    kernel_symbols,
    memref_of,
    rename_symbols,
    structural_key,
    symbol_name,
    unique_name,
)
from deplodock.passes.dedupe_kernels import DedupeKernelsPass
from deplodock.passes.pipelines import is_below


@dataclass
class Segment:
    """A run of consecutive ops of one layer (`layer` None: outside every layer)."""

    layer: int | None
    ops: list[Operation]
    inputs: list[SSAValue] = field(default_factory=list[SSAValue])
    outputs: list[SSAValue] = field(default_factory=list[SSAValue])
    module: ModuleOp | None = None


def layer_of(path: str, prefix: str) -> int | None:
    """3 for `model.layers.3.mlp` under prefix `model.layers`."""
    match = re.match(re.escape(prefix) + r"\.(\d+)(\.|$)", path)
    return int(match.group(1)) if match else None


def split(func: FuncOp, op_paths: dict[Operation, str], prefix: str) -> list[Segment]:
    """The segments of `@forward`'s body, in order, with their inputs and outputs."""
    segments: list[Segment] = []
    for op in func.body.block.ops:
        if isinstance(op, ReturnOp):
            break
        layer = layer_of(op_paths.get(op, ""), prefix)
        if not segments or segments[-1].layer != layer:
            segments.append(Segment(layer, []))
        segments[-1].ops.append(op)
    owner = {op: i for i, seg in enumerate(segments) for op in seg.ops}
    for i, seg in enumerate(segments):
        inputs: dict[SSAValue, None] = {}
        for op in seg.ops:
            for operand in op.operands:
                source = operand.owner
                if not (isinstance(source, Operation) and owner.get(source) == i):
                    inputs.setdefault(operand)
        seg.inputs = list(inputs)
        seg.outputs = [
            result
            for op in seg.ops
            for result in op.results
            if any(owner.get(use.operation) != i for use in result.uses)
        ]
    return segments


def _is_constant(value: SSAValue) -> bool:
    return isinstance(value.owner, T.ConstantOp)


def segment_module(func: FuncOp, seg: Segment) -> ModuleOp:
    """`seg` as a standalone torch-level module; constants it reads are copied in."""
    inputs = [v for v in seg.inputs if not _is_constant(v)]
    block = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = {}
    for value, arg in zip(inputs, block.args, strict=True):
        arg.name_hint = value.name_hint
        mapping[value] = arg
    for value in seg.inputs:
        if _is_constant(value):
            block.add_op(value.owner.clone(value_mapper=mapping))  # type: ignore[union-attr]
    for op in seg.ops:
        block.add_op(op.clone(value_mapper=mapping))
    block.add_op(ReturnOp(*[mapping[v] for v in seg.outputs]))
    forward = FuncOp(
        "forward",
        FunctionType.from_lists([v.type for v in inputs], [v.type for v in seg.outputs]),
        Region(block),
        arg_attrs=ArrayAttr([_arg_attrs(func, v) for v in inputs]),
    )
    seg.inputs = inputs
    return ModuleOp([forward])


def _arg_attrs(func: FuncOp, value: SSAValue) -> DictionaryAttr:
    """The original argument's attributes, or `deplodock.input` naming the intermediate."""
    args = list(func.args)
    if value in args and func.arg_attrs is not None:
        attrs = func.arg_attrs.data[args.index(value)]
        assert isinstance(attrs, DictionaryAttr)
        return attrs
    return DictionaryAttr({"deplodock.input": StringAttr(value.name_hint or "segment_input")})


def _rename_kernels(module: ModuleOp, taken: set[str]) -> None:
    """Gives the module's kernels names not in `taken` (`rms_norm_1`); updates launches.

    Done at the loop level, so that the kernels scheduling adds (`<name>_combine`) are
    named apart as well.
    """
    renames: dict[str, str] = {}
    for op in kernel_symbols(module):
        name = symbol_name(op)
        if (new := unique_name(name, taken)) != name:
            renames[name] = new
    rename_symbols(module, renames)


def stitch(func: FuncOp, segments: Sequence[Segment]) -> ModuleOp:
    """One lowered program from the lowered segment modules (see the module doc)."""
    combined = ModuleOp([])
    seen: set[int] = set()
    for seg in segments:
        assert seg.module is not None
        if id(seg.module) in seen:
            continue
        seen.add(id(seg.module))
        for op in kernel_symbols(seg.module):
            op.detach()
            combined.body.block.add_op(op)
    arg_types = [_lowered_type(func, segments, arg) for arg in func.args]
    block = Block(arg_types=arg_types)
    values: dict[SSAValue, SSAValue] = {}
    for arg, new in zip(func.args, block.args, strict=True):
        new.name_hint = arg.name_hint
        values[arg] = new
    for seg in segments:
        assert seg.module is not None
        lowered = forward_function(seg.module)
        mapping = {a: values[v] for a, v in zip(lowered.args, seg.inputs, strict=True)}
        for op in lowered.body.block.ops:
            if isinstance(op, ReturnOp):
                for value, result in zip(seg.outputs, op.arguments, strict=True):
                    values[value] = mapping.get(result, result)
            else:
                block.add_op(op.clone(value_mapper=mapping))
    returned = func.body.block.last_op
    assert isinstance(returned, ReturnOp)
    outputs = [values[v] for v in returned.arguments]
    block.add_op(ReturnOp(*outputs))
    forward = FuncOp(
        "forward",
        FunctionType.from_lists(arg_types, [v.type for v in outputs]),
        Region(block),
        arg_attrs=func.arg_attrs,
    )
    combined.body.block.add_op(forward)
    return combined


def _lowered_type(func: FuncOp, segments: Sequence[Segment], arg: SSAValue) -> Attribute:
    """The type an original argument has in the lowered segments (a memref from loop on)."""
    for seg in segments:
        if arg in seg.inputs:
            assert seg.module is not None
            return forward_function(seg.module).args[seg.inputs.index(arg)].type
    return memref_of(arg.type)


@dataclass
class StampReport:
    """What stamping did: segments, distinct segment modules, seconds per stage."""

    segments: int
    unique: int
    timings: dict[str, float]


def lower_stamped(
    module: ModuleOp,
    op_paths: dict[Operation, str],
    prefix: str,
    stages: Sequence[str],
    lower_one: Callable[[ModuleOp, str], None],
    progress: Callable[[str], None] | None = None,
    reached: Callable[[str, ModuleOp], None] | None = None,
) -> tuple[ModuleOp, StampReport]:
    """Lowers a torch-level `module` through `stages`, each distinct segment once (down to
    the kernel level: `segment_stages`), then stitched, the rest whole.

    `lower_one(module, stage)` lowers a module by one stage (the driver's stage step);
    `progress`, if given, hears each phase start (`segment`, the stages, `stitch`, `cuda`);
    `reached`, if given, hears each stage from the loop level on with the whole program
    there, stitched as a lowering to that stage would stitch it (copies, before the last).
    """
    tell = progress or (lambda phase: None)
    func = forward_function(module)
    tell("segment")
    start = time.perf_counter()
    segments = split(func, op_paths, prefix)
    unique: dict[str, ModuleOp] = {}
    for seg in segments:
        module = segment_module(func, seg)
        key = structural_key(module, ignore=("arg_attrs",))  # parameter names differ
        seg.module = unique.setdefault(key, module)
    timings = {"segment": time.perf_counter() - start}
    apart = segment_stages(stages)
    for stage in apart:
        tell(stage)
        start = time.perf_counter()
        for segment_module_ in unique.values():
            lower_one(segment_module_, stage)
        if stage == "loop":  # names apart, so that stitching never merges two by name
            taken: set[str] = {"forward"}
            for segment_module_ in unique.values():
                _rename_kernels(segment_module_, taken)
        timings[stage] = time.perf_counter() - start
        if reached is not None and stage != apart[-1] and is_below(stage, "tensor"):
            reached(stage, _stitched(func, _copies(segments), "loop" in stages))
    tell("stitch")
    start = time.perf_counter()
    stitched = _stitched(func, segments, "loop" in stages)
    timings["stitch"] = time.perf_counter() - start
    if reached is not None:
        reached(apart[-1], stitched)
    for stage in stages[len(apart) :]:
        tell(stage)
        start = time.perf_counter()
        lower_one(stitched, stage)
        timings[stage] = time.perf_counter() - start
        if reached is not None:
            reached(stage, stitched)
    return stitched, StampReport(len(segments), len(unique), timings)


def _stitched(func: FuncOp, segments: Sequence[Segment], dedupe: bool) -> ModuleOp:
    """`stitch`, and from the loop level on kernels equal across segments made one."""
    stitched = stitch(func, segments)
    if dedupe:
        DedupeKernelsPass().apply(Context(), stitched)
    stitched.verify()
    return stitched


def _copies(segments: Sequence[Segment]) -> list[Segment]:
    """The segments with copies of their modules (a segment module shared stays shared):
    stitching takes the kernels out of the modules it stitches."""
    copies: dict[int, ModuleOp] = {}
    for seg in segments:
        assert seg.module is not None
        copies.setdefault(id(seg.module), seg.module.clone())
    return [replace(seg, module=copies[id(seg.module)]) for seg in segments]


def segment_stages(stages: Sequence[str]) -> tuple[str, ...]:
    """The stages each distinct segment is lowered through, before stitching: all but the
    cuda stage, which prints each kernel's name into its C source, so that two kernels equal
    but for their names (an RMSNorm of the epilogue and of a layer) still become one when
    the segments meet; the stitched program is lowered to cuda whole."""
    return tuple(stage for stage in stages if stage != "cuda")
