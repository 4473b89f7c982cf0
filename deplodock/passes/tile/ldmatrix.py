"""`tile-ldmatrix`: a warp loads its bf16/f16 MMA fragments from shared memory with `ldmatrix`.

Trigger: a kernel whose `tile.mma_sync` ops (bf16 or f16; `tile-mma`) take an A or B
fragment loaded from one shared slab, element by element or in pairs (`tile.load`,
`tile.load_vector ... width 2`), where every lane's loads sit exactly where the fragment
layout puts its registers (`MmaShape.a_position` / `b_position`) around one origin per warp,
with the fragment's K or its M (N) axis the slab's contiguous one. This is checked on the
index arithmetic itself, evaluated lane by lane for every warp of the block
(`banks.lane_values`), so a layout `ldmatrix` cannot serve is left alone.

Rewrite: each such fragment becomes one `tile.ldmatrix` (`common/ldmatrix.py`): an A
fragment (16 x 16) an x4 of its four 8x8 quarters, a B fragment (16 x 8, k x n) an x2 of
its halves, or, with the next B tile of the warp 8 columns on, an x4 of both (lane `t` at
column tile `t / 16`); untransposed when K is the slab's contiguous axis (rows `[m][k]`, `[n][k]`),
`.trans` when M or N is (`[k][m]`, `[k][n]`). Lane `t` points at the row its matrix `t / 8`
needs: for A along K, row `origin + t % 16`, column `origin_k + 8 (t / 16)`; for B along K,
row `origin_n + t % 8`, column `origin_k + 8 ((t / 8) % 2)`; transposed, the same with the
roles of the two axes swapped (A: k row `t % 8 + 8 (t / 16)`, m column `8 ((t / 8) % 2)`; B:
k row `t % 16`). The old loads go away.

Not for tf32 (fp32 slabs): `ldmatrix` moves 16-bit elements, and its `.trans` form would
split a 32-bit element between lanes; tf32 fragments keep their scalar loads.

Why: per K step of 16 and 16 x 8 tile, the scalar path issues 4 + 2 shared loads of 32 bits
(LDS) per lane for A and B, each a separate instruction; `ldmatrix` brings the same
registers in one `LDSM.x4` and one `LDSM.x2`, whose 8-row phases are conflict-free when the
8 rows of each matrix fall in distinct 16-byte bank groups (`tile-pad-shared` counts
`ldmatrix`'s phases and pads or swizzles the slab to that end).

    %a, %a_1 = tile.load_vector %x0_a_s[%mm, %kq] width 2       (and 3 more pairs of A)
    %b, %b_1 = tile.load_vector %w_b_s[%bcol, %kq] width 2      (and 1 more pair of B)
    %d:4 = tile.mma_sync a(%a, %a_1, ...) b(%b, %b_1, ...) c(...) : bf16
        ==>
    %a:8 = tile.ldmatrix %x0_a_s[%arow, %acol] x4 : memref<16x16xbf16, 3>
    %b:4 = tile.ldmatrix %w_b_s[%brow, %bcol] x2 : memref<8x16xbf16, 3>
    %d:4 = tile.mma_sync a(%a#0, ..., %a#7) b(%b#0, ..., %b#3) c(...) : bf16

Knob (`schedule`, or the pass option of the same name): `ldmatrix`, 1 (the default: where
the layout allows) or 0 (keep the scalar loads, the path of sm_80 code without it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import BFloat16Type, Float16Type, MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.ldmatrix import MATRIX_ROWS, ROW_ELEMENTS, fragment_position
from deplodock.dialects.common.mma import MMA_M16N8K16
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.hardware import WARP_SIZE, is_shared
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.banks import Unknown, lane_values
from deplodock.passes.tile.choices import Tunable, grid

#: (row, column) of register `i` of lane `l` in the operand's matrix (A: m x k, B: k x n).
Position = Callable[[int, int], tuple[int, int]]

#: Per operand: its register positions and the axis (0: rows, 1: columns) that is K.
OPERANDS: dict[str, tuple[Position, int]] = {
    "a": (MMA_M16N8K16.a_position, 1),
    "b": (MMA_M16N8K16.b_position, 0),
}

#: Lane `t`'s row address inside the fragment's tile, as offsets (along K, along M or N)
#: from its origin, per operand and form (`trans`): which row of which 8x8 matrix lane `t`
#: points at (module docstring). Each a function of `t` built from `lane % 16`, `lane % 8`,
#: `8 (lane / 16)` and `8 ((lane / 8) % 2)`.
LaneOffsets = tuple[tuple[str, ...], tuple[str, ...]]
ADDRESSES: dict[tuple[str, bool], LaneOffsets] = {
    ("a", False): (("hi16",), ("l16",)),
    ("a", True): (("l8", "hi16"), ("mid8",)),
    ("b", False): (("mid8",), ("l8",)),
    ("b", True): (("l16",), ()),
    # two B fragments 8 columns apart as one x4: matrices 2 and 3 are the second's
    ("b2", False): (("mid8",), ("l8", "hi16")),
    ("b2", True): (("l16",), ("hi16",)),
}


def _lane_terms(lanes: np.ndarray) -> dict[str, np.ndarray]:
    """The terms of `ADDRESSES`, per lane, and register 0's offsets (`group`, `quad2`)."""
    lane = lanes % WARP_SIZE
    return {
        "l16": lane % 16,
        "l8": lane % 8,
        "hi16": 8 * (lane // 16),
        "mid8": 8 * ((lane // 8) % 2),
        "group": lane // 4,
        "quad2": 2 * (lane % 4),
    }


@dataclass(frozen=True)
class Fragment:
    """One MMA operand's fragment as loaded: the slab, the registers' loads, and where the
    slab's indices put the tile (`k_axis`, `mn_axis`: which index runs along K and along M
    or N; the others are the same for every register and uniform over the warp)."""

    side: str
    memref: SSAValue
    values: tuple[SSAValue, ...]
    template: tile.LoadOp | tile.LoadVectorOp
    k_axis: int
    mn_axis: int

    @property
    def trans(self) -> bool:
        """`.trans` when M (N) is the slab's contiguous axis rather than K."""
        return self.mn_axis == len(self.template.indices) - 1

    @property
    def count(self) -> int:
        return len(self.values) // 2


def _element_indices(value: SSAValue) -> tuple[tile.LoadOp | tile.LoadVectorOp, int] | None:
    """The load giving `value` and the element's offset along the last index (a pair's
    second element is one further), or None when it is not a shared slab's load."""
    load = value.owner
    if isinstance(load, tile.LoadOp):
        offset = 0
    elif isinstance(load, tile.LoadVectorOp) and load.width == 2:
        offset = list(load.res).index(value)
    else:
        return None
    memref = load.memref.type
    if not (isinstance(memref, MemRefType) and is_shared(memref)):
        return None
    if not isinstance(memref.element_type, BFloat16Type | Float16Type):
        return None
    return load, offset


def _evaluate(
    values: Sequence[SSAValue], lanes: np.ndarray
) -> list[tuple[tile.LoadOp | tile.LoadVectorOp, list[np.ndarray]]] | None:
    """Per register: its load and the slab coordinates each lane reads (None: a register
    not loaded from a 16-bit shared slab, or indices the evaluator cannot follow)."""
    memo: dict[SSAValue, np.ndarray] = {}
    out = []
    for value in values:
        found = _element_indices(value)
        if found is None:
            return None
        load, offset = found
        try:
            coords = [lane_values(index, lanes, memo) for index in load.indices]
        except Unknown:
            return None
        coords[-1] = coords[-1] + offset
        out.append((load, coords))
    return out


def _warp_uniform(values: np.ndarray) -> bool:
    per_warp = values.reshape(-1, WARP_SIZE)
    return bool((per_warp == per_warp[:, :1]).all())


def match_fragment(side: str, values: Sequence[SSAValue], lanes: np.ndarray) -> Fragment | None:
    """The fragment `values` (one MMA operand) if `ldmatrix` can load it (module doc)."""
    evaluated = _evaluate(values, lanes)
    if evaluated is None:
        return None
    template = evaluated[0][0]
    if any(load.memref is not template.memref for load, _ in evaluated):
        return None
    position, k_side = OPERANDS[side]
    rank = len(template.indices)
    lane = lanes % WARP_SIZE
    expected = [
        np.array([position(int(t), i) for t in lane]) for i in range(len(values))
    ]  # (lanes, 2) per register
    axes = _axes(evaluated, expected, k_side)
    if axes is None:
        return None
    k_axis, mn_axis = axes
    if rank - 1 not in (k_axis, mn_axis):
        return None
    memref = template.memref.type
    assert isinstance(memref, MemRefType)
    if memref.get_shape()[-1] % ROW_ELEMENTS:
        return None
    fragment = Fragment(side, template.memref, tuple(values), template, k_axis, mn_axis)
    inner_origin = (
        evaluated[0][1][rank - 1] - expected[0][:, k_side if not fragment.trans else 1 - k_side]
    )
    if (inner_origin % ROW_ELEMENTS).any():
        return None
    return fragment


def _axes(
    evaluated: list[tuple[tile.LoadOp | tile.LoadVectorOp, list[np.ndarray]]],
    expected: list[np.ndarray],
    k_side: int,
) -> tuple[int, int] | None:
    """(K index, M/N index) of the slab when every register's coordinates are the layout's
    positions plus one origin per warp, every other index the same warp-uniform value."""
    rank = len(evaluated[0][1])
    first = evaluated[0][1]
    for k_axis in range(rank):
        for mn_axis in range(rank):
            if k_axis == mn_axis:
                continue
            if _fits(evaluated, expected, (k_axis, mn_axis), (k_side, 1 - k_side), first):
                return k_axis, mn_axis
    return None


def _fits(
    evaluated: list[tuple[tile.LoadOp | tile.LoadVectorOp, list[np.ndarray]]],
    expected: list[np.ndarray],
    axes: tuple[int, int],
    sides: tuple[int, int],
    first: list[np.ndarray],
) -> bool:
    origins = [first[axis] - expected[0][:, side] for axis, side in zip(axes, sides, strict=True)]
    if not all(_warp_uniform(origin) for origin in origins):
        return False
    for (load, coords), position in zip(evaluated, expected, strict=True):
        for axis, side, origin in zip(axes, sides, origins, strict=True):
            if not np.array_equal(coords[axis], origin + position[:, side]):
                return False
        others = [k for k in range(len(coords)) if k not in axes]
        for k in others:
            if load.indices[k] is not evaluated[0][0].indices[k] or not _warp_uniform(coords[k]):
                return False
    return True


def delivers(fragment: Fragment, lanes: np.ndarray) -> bool:
    """Whether the `ldmatrix` that `rewrite` would emit gives every lane, in every result,
    the element its load read: the row addresses of `ADDRESSES` played through the PTX
    ISA's rule (`common/ldmatrix.fragment_position`) against the loads' own indices. The
    last guard between the address table and a wrong answer."""
    evaluated = _evaluate(fragment.values, lanes)
    if evaluated is None:
        return False
    terms = _lane_terms(lanes)
    k_offsets, mn_offsets = ADDRESSES[(fragment.side, fragment.trans)]
    first = evaluated[0][1]
    address = {}  # per axis: each lane's row address
    for axis, origin_term, offsets in (
        (fragment.k_axis, "quad2", k_offsets),
        (fragment.mn_axis, "group", mn_offsets),
    ):
        address[axis] = first[axis] - terms[origin_term] + sum(terms[t] for t in offsets)
    rows, columns = (
        (fragment.k_axis, fragment.mn_axis)
        if fragment.trans
        else (fragment.mn_axis, fragment.k_axis)
    )
    base = (lanes // WARP_SIZE) * WARP_SIZE
    for register, (_, coords) in enumerate(evaluated):
        for lane in range(len(lanes)):
            matrix, row, column = fragment_position(lane % WARP_SIZE, register, fragment.trans)
            source = base[lane] + MATRIX_ROWS * matrix + row
            if coords[rows][lane] != address[rows][source]:
                return False
            if coords[columns][lane] != address[columns][source] + column:
                return False
    return True


def fragments_of(kernel: tile.KernelOp) -> list[Fragment]:
    """Every distinct A and B fragment of the kernel's 16-bit MMAs that `ldmatrix` can load
    (a B fragment shared by several MMAs counts once)."""
    threads = schedule.threads_of(kernel)
    if threads is None:
        return []
    lanes = np.arange(threads.count, dtype=np.int64)
    found: dict[tuple[SSAValue, ...], Fragment] = {}
    for mma in threads.walk():
        if not isinstance(mma, tile.MmaSyncOp) or mma.is_tf32:
            continue
        for side, values in (("a", tuple(mma.a)), ("b", tuple(mma.b))):
            if values in found:
                continue
            fragment = match_fragment(side, values, lanes)
            if fragment is not None and delivers(fragment, lanes):
                found[values] = fragment
    fragments = list(found.values())
    return [f for f in fragments if f.side == "a"] + _paired(
        [f for f in fragments if f.side == "b"], lanes
    )


def _paired(fragments: list[Fragment], lanes: np.ndarray) -> list[Fragment]:
    """B fragments with x2 each, except that a fragment whose tile is the previous one's
    moved 8 columns (same slab, same K rows, same other indices) joins it in one x4."""
    out: list[Fragment] = []
    for fragment in fragments:
        last = out[-1] if out else None
        if last is not None and last.side == "b" and _next_tile(last, fragment, lanes):
            pair = Fragment(
                "b2",
                last.memref,
                last.values + fragment.values,
                last.template,
                last.k_axis,
                last.mn_axis,
            )
            if delivers(pair, lanes):
                out[-1] = pair
                continue
        out.append(fragment)
    return out


def _next_tile(first: Fragment, second: Fragment, lanes: np.ndarray) -> bool:
    """Whether `second`'s register 0 reads `first`'s 8 columns (N) further, K alike."""
    if second.memref is not first.memref or (second.k_axis, second.mn_axis) != (
        first.k_axis,
        first.mn_axis,
    ):
        return False
    a, b = first.template.indices, second.template.indices
    others = [k for k in range(len(a)) if k not in (first.k_axis, first.mn_axis)]
    if any(a[k] is not b[k] for k in others):
        return False
    memo: dict[SSAValue, np.ndarray] = {}
    try:
        k_gap = lane_values(b[first.k_axis], lanes, memo) - lane_values(
            a[first.k_axis], lanes, memo
        )
        n_gap = lane_values(b[first.mn_axis], lanes, memo) - lane_values(
            a[first.mn_axis], lanes, memo
        )
    except Unknown:
        return False
    offsets = (_element_indices(first.values[0]), _element_indices(second.values[0]))
    if any(found is None or found[1] for found in offsets):
        return False
    return bool((k_gap == 0).all() and (n_gap == MATRIX_ROWS).all())


@dataclass
class _Lanes:
    """The lane terms of the row addresses, built once per kernel before the MMA loop."""

    build: schedule.IndexBuilder
    thread: SSAValue
    terms: dict[str, SSAValue] = field(default_factory=dict)
    deltas: dict[tuple[str, ...], SSAValue] = field(default_factory=dict)

    def term(self, name: str) -> SSAValue:
        if name not in self.terms:
            self.terms[name] = self._make(name)
        return self.terms[name]

    def delta(self, along_k: bool, offsets: tuple[str, ...]) -> SSAValue:
        """Lane `t`'s row address minus register 0's index along one axis: its offsets in
        the tile less register 0's (`2 q` along K, `g` along M or N), once per kernel, so
        each `ldmatrix` pays one add per axis."""
        key = ("k" if along_k else "mn", *offsets)
        if key not in self.deltas:
            value = self.build.add(
                arith.SubiOp(self._sum(offsets), self.term(_origin_term(along_k)))
            )
            value.name_hint = f"ldm_{'k' if along_k else 'mn'}_{'_'.join(offsets) or 'origin'}"
            self.deltas[key] = value
        return self.deltas[key]

    def _sum(self, offsets: tuple[str, ...]) -> SSAValue:
        if not offsets:
            return self.build.constants.index(0)
        total = self.term(offsets[0])
        for name in offsets[1:]:
            total = self.build.addi(total, self.term(name))
        return total

    def _make(self, name: str) -> SSAValue:
        build = self.build
        lane = self.term("lane") if name != "lane" else None
        match name:
            case "lane":
                return build.add(
                    arith.RemSIOp(self.thread, build.constants.index(WARP_SIZE)), "lane"
                )
            case "group":
                return build.add(arith.DivSIOp(lane, build.constants.index(4)), "ldm_group")
            case "quad2":
                quad = build.add(arith.RemSIOp(lane, build.constants.index(4)))
                return build.muli(quad, 2, "ldm_quad2")
            case "l16" | "l8":
                return build.add(
                    arith.RemSIOp(lane, build.constants.index(int(name[1:]))), f"ldm_{name}"
                )
            case "hi16":
                half = build.add(arith.DivSIOp(lane, build.constants.index(16)))
                return build.muli(half, ROW_ELEMENTS, "ldm_hi16")
            case _:  # "mid8"
                eighth = build.add(arith.DivSIOp(lane, build.constants.index(8)))
                parity = build.add(arith.RemSIOp(eighth, build.constants.index(2)))
                return build.muli(parity, ROW_ELEMENTS, "ldm_mid8")


def _origin_term(along_k: bool) -> str:
    """What register 0's index exceeds the tile's origin by, along K or along M (N): `2 q`
    along K, `g` along M or N (`MmaShape.a_position` / `b_position` of register 0)."""
    return "quad2" if along_k else "group"


def rewrite(fragment: Fragment, lanes: _Lanes) -> tile.LdmatrixOp:
    """Replaces the fragment's loads by one `tile.ldmatrix` (module docstring)."""
    first = next(v.owner for v in fragment.values)
    assert isinstance(first, Operation)
    build = schedule.IndexBuilder(InsertPoint.before(first), lanes.build.constants)
    k_offsets, mn_offsets = ADDRESSES[(fragment.side, fragment.trans)]
    indices = list(fragment.template.indices)
    for axis, along_k, offsets in (
        (fragment.k_axis, True, k_offsets),
        (fragment.mn_axis, False, mn_offsets),
    ):
        indices[axis] = build.addi(indices[axis], lanes.delta(along_k, offsets))
    op = tile.LdmatrixOp(fragment.memref, indices, fragment.count, fragment.trans)
    Rewriter.insert_op(op, InsertPoint.before(first))
    for value, loaded in zip(fragment.values, op.res, strict=True):
        loaded.name_hint = value.name_hint
        value.replace_all_uses_with(loaded)
    for value in fragment.values:
        _erase_if_unused(value.owner)
    return op


def _erase_if_unused(op: object) -> None:
    """Erases `op` when nothing uses it any more, then the index math only it used."""
    if not isinstance(op, Operation) or op.parent is None or any(r.uses for r in op.results):
        return
    operands = list(op.operands)
    Rewriter.erase_op(op)
    for operand in operands:
        if isinstance(operand.owner, arith.AddiOp | arith.SubiOp | arith.MuliOp):
            _erase_if_unused(operand.owner)


def use_ldmatrix(kernel: tile.KernelOp) -> bool:
    """Loads every fragment `ldmatrix` can serve with it; False when there is none."""
    fragments = fragments_of(kernel)
    threads = schedule.threads_of(kernel)
    if not fragments or threads is None:
        return False
    pool = ConstantPool.adopting(threads.body.block)
    top = fragments[0].template
    while top.parent_op() is not threads:
        top = top.parent_op()  # type: ignore[assignment]
    build = schedule.IndexBuilder(InsertPoint.before(top), pool)
    lanes = _Lanes(build, threads.body.block.args[0])
    for fragment in fragments:
        rewrite(fragment, lanes)
    return True


@dataclass(frozen=True)
class TileLdmatrixPass(Tunable):
    """16-bit MMA fragments from shared memory by `ldmatrix` where their layout allows
    (module doc)."""

    name = "tile-ldmatrix"
    knobs = ("ldmatrix",)

    #: 1: `ldmatrix` where the fragments' layout allows; 0: keep the scalar loads.
    ldmatrix: int = 1

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return not schedule.has_knob(kernel, "ldmatrix") and bool(fragments_of(kernel))

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(ldmatrix=(0, 1))

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        if not fragments_of(kernel):
            return
        wanted = schedule.read_knob(kernel, "ldmatrix", self.ldmatrix)
        used = bool(wanted) and use_ldmatrix(kernel)
        schedule.write_knob(kernel, "ldmatrix", int(used))
