"""Questions every layer asks of a module, answered once.

Passes, interpreters, the backend and the driver all need to find `@forward`, know the shape
and element type of a tensor or buffer, turn a tensor type into a buffer type, see which
buffers a kernel writes, give things unique names, rename kernel symbols and tell whether
two kernels are the same computation. Each of those answers lives here, so they cannot
drift apart.

```python
forward = forward_function(module)            # func.func @forward, or a ValueError
shape_of(t), element_type_of(t)               # of a tensor or memref type
memref_of(tensor<4x8xf32>)                    # memref<4x8xf32>
written_buffers(kernel)                        # {%out}: what some store writes
def_chain_reaches(address, is_thread_id)       # does it differ between threads?
indices_reach(load.indices, ki)                # does an access move with ki?
computed_from([col], loop.body.block.ops)      # what moves with a copy's column
structural_key(kernel, ignore=("sym_name",))  # equal keys: interchangeable kernels
```
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    TensorType,
)
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.traits import SymbolOpInterface

from deplodock.dialects.common.async_memory import (
    CpAsyncOpBase,
    LoadVectorOpBase,
    StoreVectorOpBase,
)
from deplodock.dialects.common.kernels import KernelOpBase, LaunchOpBase
from deplodock.dialects.common.kernels import enclosing_module as enclosing_module  # re-exported
from deplodock.dialects.common.loops import DynamicForOpBase
from deplodock.dialects.common.memory import LoadOpBase, StoreOpBase

# --- the program -----------------------------------------------------------------------------


def find_function(module: ModuleOp, name: str = "forward") -> FuncOp | None:
    """The top-level `func.func @name` of `module`, or None."""
    for op in module.ops:
        if isinstance(op, FuncOp) and op.sym_name.data == name:
            return op
    return None


def forward_function(module: ModuleOp, name: str = "forward") -> FuncOp:
    """The top-level `func.func @forward` (the host-level program) of `module`."""
    found = find_function(module, name)
    if found is None:
        raise ValueError(f"module has no func.func @{name}")
    return found


# --- types -----------------------------------------------------------------------------------


def shape_of(t: Attribute) -> tuple[int, ...]:
    """The static shape of a tensor or memref type."""
    if not isinstance(t, TensorType | MemRefType):
        raise TypeError(f"expected a tensor or memref type, got {t}")
    return tuple(t.get_shape())


def element_type_of(t: Attribute) -> Attribute:
    """The element type of a tensor or memref type."""
    if not isinstance(t, TensorType | MemRefType):
        raise TypeError(f"expected a tensor or memref type, got {t}")
    return t.get_element_type()


def memref_of(t: Attribute) -> Attribute:
    """`tensor<4x8xf32>` -> `memref<4x8xf32>` (the buffer that holds it); others unchanged."""
    if isinstance(t, TensorType):
        return MemRefType(t.element_type, t.get_shape())
    return t


def constant_index(value: SSAValue) -> int | None:
    """The integer of an `arith.constant N : index` (None for any other value)."""
    owner = value.owner
    if (
        isinstance(owner, arith.ConstantOp)
        and isinstance(owner.value, IntegerAttr)
        and isinstance(value.type, IndexType)
    ):
        return owner.value.value.data
    return None


# --- what a value is computed from ---------------------------------------------------------


def def_chain(value: SSAValue) -> Iterator[SSAValue]:
    """`value` and every value it is computed from, each once: the operands of defining ops,
    and through a dynamic-start loop (`tile.for`, `kernel.for`) its induction variable to
    its start and each iter_arg to its initial value (the loop's `[lb, *inits]` operands
    match its `[iv, *iter_args]`). Other block arguments (kernel buffers, thread and block
    ids, static loop ivs) end the chain."""
    seen: set[SSAValue] = set()
    work = [value]
    while work:
        current = work.pop()
        if current in seen:
            continue
        seen.add(current)
        yield current
        if isinstance(current, BlockArgument):
            owner = current.block.parent_op()
            if isinstance(owner, DynamicForOpBase):
                work.append(owner.operands[current.index])
            continue
        work.extend(current.owner.operands)


def def_chain_reaches(value: SSAValue, predicate: Callable[[SSAValue], bool]) -> bool:
    """Whether some value of `value`'s def chain (`def_chain`) satisfies `predicate`: does
    an address depend on the thread id, on `ki`, on an output loop?"""
    return any(predicate(current) for current in def_chain(value))


def computed_from(seeds: Iterable[SSAValue], ops: Iterable[Operation]) -> set[SSAValue]:
    """`seeds` and every result of `ops` (visited in program order) computed from them:
    the forward counterpart of `def_chain`, over one body (what moves with a copy's
    column, what a producer computes per element)."""
    found = set(seeds)
    for op in ops:
        if any(operand in found for operand in op.operands):
            found.update(op.results)
    return found


def indices_reach(indices: Iterable[SSAValue], value: SSAValue) -> bool:
    """Whether some index's def chain holds `value`: does an access move with `ki`, with
    a copy's column?"""
    return any(def_chain_reaches(index, lambda v: v is value) for index in indices)


# --- buffers a kernel touches --------------------------------------------------------------


def written_buffers(op: Operation) -> set[SSAValue]:
    """The buffers some `X.store` (or vector store, or async copy's destination) inside `op`
    writes (loop, tile and kernel levels)."""
    written: set[SSAValue] = set()
    for inner in op.walk():
        if isinstance(inner, StoreOpBase | StoreVectorOpBase):
            written.add(inner.memref)
        elif isinstance(inner, CpAsyncOpBase):
            written.add(inner.dst)
    return written


def read_buffers(op: Operation) -> set[SSAValue]:
    """The buffers some `X.load` (or vector load, or async copy's source) inside `op` reads."""
    read: set[SSAValue] = set()
    for inner in op.walk():
        if isinstance(inner, LoadOpBase | LoadVectorOpBase):
            read.add(inner.memref)
        elif isinstance(inner, CpAsyncOpBase):
            read.add(inner.src)
    return read


def argument_positions(block: Block, values: Iterable[SSAValue]) -> set[int]:
    """Which arguments of `block` are among `values` (e.g. a kernel's written arguments)."""
    wanted = set(values)
    return {arg.index for arg in block.args if arg in wanted}


def written_arguments(kernel: KernelOpBase) -> set[int]:
    """Positions of the kernel arguments the kernel stores to (its outputs)."""
    return argument_positions(kernel.body.block, written_buffers(kernel))


def read_arguments(kernel: KernelOpBase) -> set[int]:
    """Positions of the kernel arguments the kernel loads from (its inputs)."""
    return argument_positions(kernel.body.block, read_buffers(kernel))


# --- symbols and names -----------------------------------------------------------------------


def symbol_name(op: Operation) -> str:
    """The `sym_name` of a symbol op (kernels of every level, functions)."""
    name = op.properties.get("sym_name") or op.attributes.get("sym_name")
    if not isinstance(name, StringAttr):
        raise ValueError(f"{op.name} is not a symbol")
    return name.data


def kernel_symbols(module: ModuleOp) -> list[Operation]:
    """The module's top-level symbols other than functions: its kernels, at any level."""
    return [
        op for op in module.ops if op.has_trait(SymbolOpInterface) and not isinstance(op, FuncOp)
    ]


def unique_name(base: str, used: set[str], first_suffix: int = 1) -> str:
    """`base` if free, else `base_<n>` for the first free `n >= first_suffix`; takes it."""
    candidate, n = base, first_suffix
    while candidate in used:
        candidate = f"{base}_{n}"
        n += 1
    used.add(candidate)
    return candidate


def kernel_base_name(name: str) -> str:
    """`rms_norm_5` or `rms_norm_kernel_2` -> `rms_norm`: the op a kernel is named after."""
    return re.sub(r"(_kernel)?(_\d+)*$", "", name) or "kernel"


def kernel_name(base: str, taken: set[str]) -> str:
    """`<base>_kernel`, then `<base>_kernel_2`, `_3`...: the first not in `taken` (taken).

    Kernel names survive into the CUDA C, so they read as what they compute and never clash
    with a C library function (a kernel called `exp` or `div` would).
    """
    return unique_name(f"{base}_kernel", taken, first_suffix=2)


def rename_kernels(module: ModuleOp, base_of: Callable[[str], str] = kernel_base_name) -> None:
    """Names every launched kernel `<base>_kernel` (then `_2`, `_3`...) in launch order,
    `base_of(old name)` giving its base (by default the op it is named after already)."""
    launches = [op for op in module.walk() if isinstance(op, LaunchOpBase)]
    launched = [launch.callee.root_reference.data for launch in launches]
    existing = {symbol_name(op) for op in kernel_symbols(module)}
    renames: dict[str, str] = {}
    taken: set[str] = set()
    for old in launched:
        if old not in renames and old in existing:
            renames[old] = kernel_name(base_of(old), taken)
    rename_symbols(module, renames)


def name_width(names: Iterable[str], header: str = "kernel") -> int:
    """The width of a table column that shows `names` whole under `header`: reports never
    cut a kernel's name (two attention kernels cut to 28 characters read the same)."""
    return max([len(header), *(len(name) for name in names)])


def launch_counts(module: ModuleOp) -> dict[str, int]:
    """How many times `@forward` launches each kernel, at any level from loop to cuda (a
    kernel may run more than once: a model's layers share theirs); {} without `@forward`.
    Every report that counts launches (tune, profile, the explorer) counts them here."""
    counts: dict[str, int] = {}
    forward = find_function(module)
    for op in forward.walk() if forward is not None else ():
        callee = op.properties.get("callee")
        if op.name.endswith(".launch") and isinstance(callee, SymbolRefAttr):
            name = callee.root_reference.data
            counts[name] = counts.get(name, 0) + 1
    return counts


def redirect_launches(module: ModuleOp, renames: dict[str, str]) -> None:
    """Points every op whose `callee` names a key of `renames` at its value."""
    if not renames:
        return
    for op in module.walk():
        callee = op.properties.get("callee")
        if isinstance(callee, SymbolRefAttr) and callee.root_reference.data in renames:
            op.properties["callee"] = SymbolRefAttr(renames[callee.root_reference.data])


def rename_symbols(module: ModuleOp, renames: dict[str, str]) -> None:
    """Renames kernel symbols (`old -> new`) and every launch of them."""
    for op in kernel_symbols(module):
        new = renames.get(symbol_name(op))
        if new is not None:
            op.properties["sym_name"] = StringAttr(new)
    redirect_launches(module, renames)


# --- structural identity -------------------------------------------------------------------


def structural_key(op: Operation, ignore: Sequence[str] = ()) -> Hashable:
    """A hashable description of `op` and everything inside it, without value names.

    Two ops with equal keys compute the same thing: same op names, properties, attributes,
    result types and region structure, with every operand named by where it is defined
    (the n-th value defined inside `op`). Properties and attributes named in `ignore` (a
    kernel's own `sym_name`, `@forward`'s `arg_attrs`) are left out everywhere. `op` must
    be closed: an operand defined outside it is an error (kernels are isolated from above).
    """
    numbering: dict[SSAValue, int] = {}
    skip = frozenset(ignore)

    def number(values: Sequence[SSAValue]) -> None:
        for value in values:
            numbering[value] = len(numbering)

    def operand(value: SSAValue) -> int:
        if value not in numbering:
            raise ValueError(f"structural_key: {op.name} uses a value defined outside it")
        return numbering[value]

    def fields(table: dict[str, Attribute]) -> tuple[tuple[str, Attribute], ...]:
        return tuple(sorted(((k, v) for k, v in table.items() if k not in skip), key=_first))

    def key(current: Operation) -> Hashable:
        regions = []
        for region in current.regions:
            blocks = []
            for block in region.blocks:
                number(block.args)
                body = tuple(key(inner) for inner in block.ops)
                blocks.append((tuple(a.type for a in block.args), body))
            regions.append(tuple(blocks))
        operands = tuple(operand(v) for v in current.operands)
        number(current.results)
        return (
            current.name,
            fields(current.properties),
            fields(current.attributes),
            operands,
            tuple(r.type for r in current.results),
            tuple(regions),
        )

    return key(op)


def _first(pair: tuple[str, Attribute]) -> str:
    return pair[0]
