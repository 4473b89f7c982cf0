"""`tile-unroll`: mark the small constant-trip loops for full unrolling.

Trigger: a `tile.for` whose trip count is known at compile time and not zero, such that the
whole nest it heads, once unrolled, has at most `max_trips` copies of its innermost body: the
loop's trips times the largest unrolled size among the loops nested in it (a loop left rolled
counts once). Inner loops are decided first, so when a nest is too big it is the outer loops
that stay rolled. Two kinds of loop have such a count:

- a serial loop: a constant start, a static bound and step;
- a thread-strided loop `tile.for %l = %t to E step T` over the `T` threads of the block with
  `E` a multiple of `T`, every thread running `E / T` trips, that loads nothing into
  registers: the asynchronous copies of a stage. (Unrolled, a loop of loads holds every
  trip's values at once.) Not in a kernel that prefetches an operand through registers
  (`register_prefetch = 1` on its schedule): the prefetched values already take the
  registers, and the per-thread bases kept across the K loop made the bf16 P.V product of
  TinyLlama's attention spill (254 -> 255 registers, 12 bytes).
  It is first rewritten to count trips, `tile.for %j = 0 to E/T { %l = %t + %j * T ... }`,
  and since `T` is a multiple of the copy's row length `C`, its `%l / C` becomes
  `%t / C + %j * (T / C)` and its `%l % C` becomes `%t % C` (`%t` is not negative): the
  per-thread part no longer changes with `%j`, so `tile-hoist-invariant` takes it out of
  the loop, and the unrolled copies differ by constants that nvcc folds into address offsets.
  Left as it was, nvcc sees a loop whose count depends on the thread and emits a remainder
  loop and a divide, shift and multiply per element.

A loop marked `rolled` by the pass that built it stays rolled (nvcc still unrolls it a few
trips where it sees fit): `tile-shared-statistics` unrolls each trip of its row loop into the
row's cells itself, and marked `unroll` as well, the fp32 P.V product of TinyLlama's attention
at 512 tokens (32 rows a warp) spilled 12 bytes.

Rewrite: the loop gets the unit attribute `unroll`. The mark goes through
`convert-tile-to-kernel` onto the `kernel.for`, and the CUDA printer puts `#pragma unroll`
before that loop, leaving the unrolling itself to nvcc (which then keeps small register tiles
and fold loops in registers, with constant indices).

Knob `unroll` on the kernel's `schedule`: 0 turns the pass off for the kernel, otherwise it
is the `max_trips` of that kernel (a replayed schedule wins over the option). Option
`strided=false` leaves thread-strided loops as they are (to compare with).

    tile.for %w = %c0 to 8 iter_args(...) {      tile.for %w = %c0 to 8 iter_args(...) {
      ...                                  ==>     ...
    }                                            } {unroll}
    tile.for %l = %t to 1024 step 128 {          tile.for %j = %c0 to 8 {
      %row = arith.divsi %l, %c8                   %tr = arith.divsi %t, %c8
      %col = arith.remsi %l, %c8           ==>     %jr = arith.muli %j, %c16
      ...                                          %row = arith.addi %tr, %jr
    }                                              %col = arith.remsi %t, %c8
                                                   ...
                                                 } {unroll}
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import UnitAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.queries import constant_index
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import register_prefetch, schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.nests import is_serial, trip_count

#: The unit attribute that asks for a fully unrolled loop (kept on `kernel.for`).
UNROLL = "unroll"
#: The unit attribute of a loop this pass leaves rolled whatever its trips: its body is
#: already unrolled straight-line code (`tile-shared-statistics`' row loop, each trip a
#: row's cells in registers), so unrolling it too would hold every trip's values at once.
ROLLED = "rolled"
#: Loads into registers: a thread-strided loop holding one is left rolled (module doc).
REGISTER_LOADS = (tile.LoadOp, tile.LoadVectorOp)


def _unrolled_size(op: Operation, sizes: dict[Operation, int]) -> int:
    """Copies of the innermost body that the loops inside `op` (not `op`) unroll into."""
    return max(
        (sizes[inner] for inner in op.walk() if inner is not op and inner in sizes), default=1
    )


def _strided_threads(loop: tile.ForOp) -> tile.ThreadsOp | None:
    """The block whose threads `loop` is strided over with the same trips for every thread
    (`%l = %t to E step T`, `E` a multiple of `T`) and which keeps no data in registers
    (module doc), else None."""
    if any(isinstance(op, REGISTER_LOADS) for op in loop.walk()):
        return None
    start = loop.lb
    if not isinstance(start, BlockArgument):
        return None
    threads = start.block.parent_op()
    if not isinstance(threads, tile.ThreadsOp) or start.index != 0:
        return None
    if loop.step_value != threads.count or loop.upper % threads.count:
        return None
    return threads


def count_trips(loop: tile.ForOp, threads: tile.ThreadsOp) -> tile.ForOp:
    """Rewrites the thread-strided `loop` to run `%j` over its trips (module doc) and
    returns the new loop; the old one is erased."""
    pool = ConstantPool.adopting(threads.body.block)
    step, thread, name = loop.step_value, loop.lb, loop.induction_var.name_hint
    new, element = schedule.rebuild_loop(
        loop,
        pool.index(0),
        loop.upper // step,
        1,
        lambda build, trip: build.addi(thread, build.muli(trip, step), name),
        pool,
    )
    new.induction_var.name_hint = "j"
    build = schedule.IndexBuilder(InsertPoint.at_end(new.body.block), pool)
    _split_rows_and_columns(element, thread, new.induction_var, step, build)
    schedule.drop_unused_constants(threads)
    return new


def _split_rows_and_columns(
    element: SSAValue, thread: SSAValue, trip: SSAValue, step: int, build: schedule.IndexBuilder
) -> None:
    """`(%t + %j * T) / C` -> `%t / C + %j * (T / C)` and `(%t + %j * T) % C` -> `%t % C`,
    for each constant `C` that divides `T`."""
    for use in list(element.uses):
        op = use.operation
        if not isinstance(op, arith.DivSIOp | arith.RemSIOp) or use.index != 0:
            continue
        divisor = constant_index(op.rhs)
        if divisor is None or divisor <= 0 or step % divisor:
            continue
        name = op.result.name_hint
        build.point = InsertPoint.before(op)
        if isinstance(op, arith.RemSIOp):
            replacement = build.add(arith.RemSIOp(thread, op.rhs), name)
        else:
            per_thread = build.add(arith.DivSIOp(thread, op.rhs), name and f"{name}_base")
            replacement = build.addi(per_thread, build.muli(trip, step // divisor), name)
        op.result.replace_all_uses_with(replacement)
        Rewriter.erase_op(op)
    if not element.uses and isinstance(adder := element.owner, arith.AddiOp):
        scaled = adder.rhs.owner
        Rewriter.erase_op(adder)
        if isinstance(scaled, arith.MuliOp) and not scaled.result.uses:
            Rewriter.erase_op(scaled)


def unroll_small_loops(kernel: tile.KernelOp, max_trips: int, strided: bool = True) -> None:
    """Marks the kernel's small constant-trip loops `unroll` (see module doc); `strided`:
    thread-strided loops too."""
    sizes: dict[Operation, int] = {}  # loop -> copies of its innermost body after unrolling
    marked: list[tuple[tile.ForOp, tile.ThreadsOp | None]] = []  # with the strided block
    for op in kernel.walk(region_first=True):  # inner loops before the loops around them
        if not isinstance(op, tile.ForOp):
            continue
        inner = _unrolled_size(op, sizes)
        threads = _strided_threads(op) if strided and not is_serial(op) else None
        if is_serial(op):
            trips = trip_count(op)
        else:  # a strided loop makes the same trips in every thread
            trips = op.upper // op.step_value if threads is not None else 0
        if 0 < trips and trips * inner <= max_trips and ROLLED not in op.attributes:
            marked.append((op, threads))
            sizes[op] = trips * inner
        else:
            sizes[op] = inner
    for loop, threads in marked:
        if threads is not None:
            loop = count_trips(loop, threads)
        loop.attributes[UNROLL] = UnitAttr()


@dataclass(frozen=True)
class TileUnrollPass(Tunable):
    """Marks constant-trip loop nests of at most `max_trips` copies `unroll` (module doc)."""

    name = "tile-unroll"
    knobs = (UNROLL,)

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return not schedule.has_knob(kernel, UNROLL)

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(**{UNROLL: (0, 4, 16, 64, 256)})

    max_trips: int = 64
    #: Whether thread-strided loops with the same trips in every thread are rewritten to
    #: count them and unrolled (false leaves them to nvcc, as loops).
    strided: bool = True

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        max_trips = schedule.read_knob(kernel, UNROLL, self.max_trips)
        if max_trips < 0:
            raise PassFailedException(
                f"tile.kernel @{kernel.sym_name.data}: unroll {max_trips} must be 0 (off) "
                "or a positive number of trips"
            )
        if max_trips > 0:
            strided = self.strided and not schedule.read_knob(kernel, register_prefetch.MARK, 0)
            unroll_small_loops(kernel, max_trips, strided)
        schedule.write_knob(kernel, UNROLL, max_trips)
