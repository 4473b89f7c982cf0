"""The tuner's correctness gate: a candidate schedule against its loop-level kernel.

Every candidate is checked in the CPU interpreter before it is scored (issue #11): one whose
interpretation raises (a race report, an out-of-bounds access, a verifier error) is
`failed`, one whose outputs differ from the loop-level kernel's on random inputs is `wrong`;
both score zero and are recorded, and neither stops the search.

The difficulty is cost. The loop-level reference of a Qwen GEMM (512 x 3584 x 3584) takes
5-8 s and runs once per kernel (`KernelCheck` keeps it); interpreting the candidate's 128
blocks at the kernel level takes minutes, one block of it seconds. So a candidate that the
interpreter's estimate puts above `FULL_RUN_SECONDS` runs only the blocks behind a few
chosen output elements, and exactly the elements those blocks fully compute are compared.
Which blocks those are, and which elements they complete, comes from the candidate's
footprint (`footprint.py`: each kernel cut down to its addresses, run on every block in a
fraction of a second), which makes sampling exact across launches: the split-K blocks that
add into one output tile all run before the tile is compared, and the cheap launches around
them (zeroing, combine) run the blocks that complete the sampled tiles. The footprint of the
whole grid also shows what a sample would miss: an output element nobody writes, or a
workspace element read before anybody wrote it (`_check_coverage`).

The reference is also kept on disk (`reference_path`: keyed by the kernel's structural
hash, the seed, and the source of everything that computes it), so each worker of a parallel
search, and every later search of the same kernel, loads it in a fraction of a second
instead of interpreting the whole loop kernel again.

The chosen elements: the last of each output (the edge tile, where masks go wrong), then
one at the golden-ratio point of the output when the budget `SAMPLE_SECONDS` allows (a
block whose tile coordinates differ from each other, unlike the first and last blocks of a
square grid, so swapped axes show).

```python
check = KernelCheck(loop_kernel, seed=0)       # the reference runs on the first check
result = check.check(kernel_level_module)      # CheckResult(ok, status, detail, blocks, ...)
```
"""

from __future__ import annotations

import hashlib
import io
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
from pathlib import Path

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls
from xdsl.ir import Operation, SSAValue

from deplodock.backend.benchmark import first_line
from deplodock.dialects import kernel, loop
from deplodock.dialects.element_types import is_narrow_float, numpy_dtype, round_to_type
from deplodock.dialects.queries import forward_function, read_arguments, written_arguments
from deplodock.files import WriteError, cache_root, write_atomic
from deplodock.interpreters import make_interpreter, run_module
from deplodock.interpreters.blocks import default_blocks_per_batch
from deplodock.interpreters.common import lookup_kernel
from deplodock.interpreters.estimate import Work, estimate_interpretation
from deplodock.interpreters.kernel import run_kernel
from deplodock.interpreters.values import empty_buffer
from deplodock.numerics import (
    CHECK_FP32_TOLERANCE,
    CHECK_NARROW_TOLERANCE,
    SUM_ERROR_FACTOR,
    first_mismatch,
    random_array,
    schedule_error,
)
from deplodock.tune.footprint import Host, Launch, NotAnalysable, footprints, select_blocks, widen
from deplodock.tune.kernels import kernel_hash, standalone

#: A candidate the interpreter estimate (`estimate_interpretation`) puts below this runs
#: every block and is compared everywhere. The estimate runs low on MMA GEMMs: a 1024^2
#: GEMM estimated at 1.2 s took 7.5 s, two of its blocks 0.7 s (2-core machine under load);
#: norms and softmax run close to it.
FULL_RUN_SECONDS = 0.5
#: The estimated seconds a sample may cost before it gives up its second element (the last
#: output element's blocks always run). One block of the Qwen GEMM is estimated at 1.3 s.
SAMPLE_SECONDS = 1.0
#: A launch other than the costliest adds to a sample blocks that complete elements
#: (split-K's zeroing kernel, the combine blocks of the sampled tiles: `widen`) up to this
#: estimate.
WIDEN_SECONDS = 0.5
#: A sample that runs at least this share of the costliest launch's blocks is not worth it:
#: run them all.
SAMPLE_SHARE = 0.5

#: How `KernelCheck` picks the blocks it runs.
MODES = ("auto", "full", "sample")

#: Integer inputs that index nothing are drawn from [0, this).
INTEGER_RANGE = 16
#: The golden ratio's fraction: where the second sampled element sits in an output.
GOLDEN_FRACTION = (math.sqrt(5.0) - 1.0) / 2.0
#: The longest `detail` of a failed check: a first line can hold a whole dump.
DETAIL_CHARS = 300


@dataclass(frozen=True)
class CheckResult:
    """The verdict on one candidate: `status` is "ok", "wrong" (outputs differ) or
    "failed" (lowering or interpretation raised); `detail` says why in one line; `blocks`
    is how many thread blocks were interpreted, `seconds` how long the check took."""

    ok: bool
    status: str
    detail: str
    blocks: int
    seconds: float


class _Wrong(Exception):
    """The candidate computed something else (status "wrong")."""


# --- inputs and comparison -------------------------------------------------------------------


def random_inputs(kernel_op: loop.KernelOp, seed: int) -> list[np.ndarray]:
    """One array per argument of `kernel_op`, from a numpy Generator seeded with `seed`.

    Floats are standard normal in their interpreter dtype (bf16 rounded, carried as
    float32); integers index what they index (`_integer_bound`); booleans are fair coins.
    A buffer the kernel writes but never reads starts poisoned (NaN), as an allocation
    does, so an element the loop kernel leaves alone is NaN in the reference too.
    """
    rng = np.random.default_rng(seed)
    written, read = written_arguments(kernel_op), read_arguments(kernel_op)
    arrays = []
    for position, arg in enumerate(kernel_op.body.block.args):
        memref = arg.type
        assert isinstance(memref, MemRefType)
        if position in written and position not in read:
            arrays.append(empty_buffer(memref))
            continue
        shape, dtype = memref.get_shape(), numpy_dtype(memref.element_type)
        if np.issubdtype(dtype, np.floating):  # bf16 rounded, carried as float32
            array = round_to_type(random_array(rng, shape, dtype), memref.element_type)
            arrays.append(np.asarray(array))
        else:
            arrays.append(random_array(rng, shape, dtype, _integer_bound(arg)))
    return arrays


def _integer_bound(arg: SSAValue) -> int:
    """The smallest extent an integer buffer's loaded values index (through integer
    casts), else `INTEGER_RANGE`: token ids index the embedding table's rows."""
    bounds: list[int] = []

    def follow(value: SSAValue) -> None:
        for use in value.uses:
            user = use.operation
            if isinstance(user, loop.LoadOp | loop.StoreOp):
                memref = user.memref.type
                assert isinstance(memref, MemRefType)
                shape = memref.get_shape()
                bounds.extend(shape[i] for i, index in enumerate(user.indices) if index is value)
            elif isinstance(user, arith.IndexCastOp | arith.ExtSIOp | arith.ExtUIOp):
                follow(user.results[0])

    for use in arg.uses:
        if isinstance(use.operation, loop.LoadOp) and use.operation.memref is arg:
            follow(use.operation.res)
    return max(1, min(bounds, default=INTEGER_RANGE))


def tolerance_of(kernel_op: loop.KernelOp) -> float:
    """The max relative error a candidate of `kernel_op` may show (`numerics`'s
    `CHECK_FP32_TOLERANCE`): the narrow one when any buffer holds bf16/f16, else fp32's for
    its longest sum."""
    elements = [arg.type.element_type for arg in kernel_op.body.block.args]  # type: ignore[attr-defined]
    if any(is_narrow_float(element) for element in elements):
        return CHECK_NARROW_TOLERANCE
    sums = [op.trip_count for op in kernel_op.walk() if isinstance(op, loop.ForOp) and op.inits]
    eps = float(np.finfo(np.float32).eps)
    return max(CHECK_FP32_TOLERANCE, SUM_ERROR_FACTOR * math.sqrt(max(sums, default=1)) * eps)


def compare(
    actual: np.ndarray, expected: np.ndarray, compared: np.ndarray, tolerance: float, output: int
) -> float:
    """The max relative error (`numerics.schedule_error`: a NaN in both matches) of
    `actual` against `expected` over the `compared` elements (a boolean mask); above
    `tolerance` it raises `_Wrong` naming the first element off."""
    positions = np.flatnonzero(compared)
    got, want = actual.reshape(-1)[positions], expected.reshape(-1)[positions]
    error = schedule_error(got, want)
    if error <= tolerance:
        return error
    found = first_mismatch(got, want, tolerance)
    assert found is not None, "an error above the tolerance has an element off"
    (k,), value, reference = found
    where = _element(expected.shape, positions[k])
    if math.isinf(error):
        raise _Wrong(f"output {output} element {where} is {value:.6g}, expected {reference:.6g}")
    raise _Wrong(
        f"max relative error {error:.1e} > {tolerance:.0e} at output {output} element "
        f"{where} ({value:.6g}, expected {reference:.6g})"
    )


def _element(shape: tuple[int, ...], flat: int) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(flat), shape))


# --- the sample: its elements and its cost ---------------------------------------------------


def _launch_seconds(launch: Launch, blocks: np.ndarray, per_block_ops: int) -> float:
    """The interpreter estimate of running `blocks` of `launch` (batches of consecutive
    blocks), from the op executions of one block."""
    batch = default_blocks_per_batch(launch.func.block_size)
    runs = np.split(blocks, np.flatnonzero(np.diff(blocks) != 1) + 1) if blocks.size else []
    batches = sum(-(-len(run) // batch) for run in runs)
    threads = launch.func.block_size
    return Work(per_block_ops * batches, per_block_ops * len(blocks) * threads).seconds


def _sample_seconds(host: Host, chosen: list[np.ndarray], per_block_ops: list[int]) -> float:
    """The interpreter estimate of running `chosen`."""
    launches = zip(host.launches, chosen, per_block_ops, strict=True)
    return sum(_launch_seconds(launch, blocks, ops) for launch, blocks, ops in launches)


def _seeds(host: Host, fractions: Sequence[float]) -> dict[int, np.ndarray]:
    """Output elements at the given fractions of each output (1.0: the last element)."""
    return {
        key: np.unique([min(host.sizes[key] - 1, int(host.sizes[key] * f)) for f in fractions])
        for key in host.outputs
    }


# --- running a candidate ---------------------------------------------------------------------


@register_impls
class _SampledLaunches(InterpreterFunctions):
    """`kernel.launch` that runs the blocks chosen for it (all where none are)."""

    @impl(kernel.LaunchOp)
    def run_launch(self, interpreter: Interpreter, op: kernel.LaunchOp, args: PythonValues):
        chosen = interpreter.get_data(_SampledLaunches, "blocks", dict)
        blocks = chosen.get(op)
        run_kernel(interpreter, lookup_kernel(op, op.callee, kernel.FuncOp), args, blocks=blocks)
        return ()


def run_blocks(
    module: ModuleOp, inputs: Sequence[np.ndarray], blocks: dict[Operation, Sequence[int]]
) -> list[np.ndarray]:
    """`@forward` of a kernel-level module on copies of `inputs`, each launch in `blocks`
    running only the blocks listed for it."""
    interpreter = make_interpreter(module)
    interpreter.register_implementations(_SampledLaunches(), override=True)
    interpreter.get_data(_SampledLaunches, "blocks", lambda: dict(blocks))
    args = tuple(np.array(value, copy=True) for value in inputs)
    with np.errstate(all="ignore"):
        results = interpreter.call_op("forward", args)
    return [np.asarray(result) for result in results]


# --- the reference, kept on disk ------------------------------------------------------------

_PACKAGE = Path(__file__).resolve().parents[1]
#: The sources that decide a reference: the dialects and interpreters that run the loop
#: kernel, the random inputs and the numerics they are drawn with.
REFERENCE_SOURCES = ("dialects", "interpreters", "numerics.py", "tune/check.py")


@cache
def _reference_digest() -> str:
    digest = hashlib.sha256()
    for name in REFERENCE_SOURCES:
        root = _PACKAGE / name
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes())
    for package in ("numpy", "xdsl"):
        digest.update(f"{package} {version(package)}".encode())
    return digest.hexdigest()


def reference_path(loop_kernel: loop.KernelOp, seed: int) -> Path:
    """Where the reference outputs of `loop_kernel` on the inputs of `seed` are kept."""
    key = hashlib.sha256(f"{kernel_hash(loop_kernel)} {seed} {_reference_digest()}".encode())
    return cache_root() / "check-references" / f"{key.hexdigest()[:32]}.npz"


def load_reference(path: Path) -> list[np.ndarray] | None:
    """The outputs kept at `path`, or None (absent or unreadable: computed again)."""
    try:
        with np.load(path, allow_pickle=False) as kept:
            return [kept[f"arr_{i}"] for i in range(len(kept.files))]
    except (OSError, ValueError, KeyError):
        return None


def save_reference(path: Path, outputs: Sequence[np.ndarray]) -> None:
    """Keeps `outputs` at `path`; a cache that cannot be written is only slower."""
    buffer = io.BytesIO()
    np.savez(buffer, *outputs)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, buffer.getvalue())
    except (OSError, WriteError):
        pass


class KernelCheck:
    """Checks candidates of one loop-level kernel against it, on inputs drawn from `seed`.

    The reference (the loop-level kernel, whole) runs on the first `check` and is kept
    (`reference`, `reference_seconds`). `check(module)` takes a candidate lowered to the
    kernel level (`kernel.func`s and `@forward` with the loop kernel's arguments) and never
    raises, except KeyboardInterrupt. `mode`: "auto" samples big candidates (see the module
    docstring), "full" runs every block, "sample" samples whatever the size (tests).
    """

    def __init__(self, loop_kernel: loop.KernelOp, seed: int = 0, mode: str = "auto"):
        if mode not in MODES:
            raise ValueError(f"check mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.loop_kernel = loop_kernel
        self.seed = seed
        self.mode = mode
        self.tolerance = tolerance_of(loop_kernel)
        self.reference_seconds = 0.0
        self._inputs: list[np.ndarray] | None = None
        self._reference: list[np.ndarray] | None = None
        self._reference_error: Exception | None = None
        self._arg_types = list(loop_kernel.arg_types)
        self._blocks = 0

    @property
    def inputs(self) -> list[np.ndarray]:
        if self._inputs is None:
            self._inputs = random_inputs(self.loop_kernel, self.seed)
        return self._inputs

    @property
    def reference(self) -> list[np.ndarray]:
        """The loop kernel's outputs (the arguments it writes, in order) on `inputs`, from
        the disk (`reference_path`) when an earlier check kept them; what running it raised,
        raised again on every later call."""
        if self._reference is None:
            if self._reference_error is not None:
                raise self._reference_error
            start = time.perf_counter()
            path = reference_path(self.loop_kernel, self.seed)
            try:
                self._reference = load_reference(path) or self._run_reference(path)
            except Exception as error:
                self._reference_error = error
                raise
            finally:
                self.reference_seconds = time.perf_counter() - start
        return self._reference

    def _run_reference(self, path: Path) -> list[np.ndarray]:
        """The loop kernel run whole on `inputs`, its outputs kept at `path`."""
        with np.errstate(all="ignore"):
            outputs = [np.asarray(r) for r in run_module(standalone(self.loop_kernel), self.inputs)]
        save_reference(path, outputs)
        return outputs

    def check(self, module: ModuleOp) -> CheckResult:
        """The verdict on `module`, a candidate lowered to the kernel level."""
        start = time.perf_counter()
        try:
            reference = self.reference
        except Exception as error:  # reported on every candidate, not raised
            detail = f"the loop-level reference does not run: {_detail(error)}"
            return self._result("failed", detail, 0, start)
        start = time.perf_counter()
        self._blocks = 0
        try:
            error, compared = self._check(module, reference)
        except _Wrong as wrong:
            return self._result("wrong", str(wrong), self._blocks, start)
        except Exception as error:  # any failure of a candidate is a verdict
            return self._result("failed", _detail(error), self._blocks, start)
        total = sum(r.size for r in reference)
        detail = f"max relative error {error:.1e} over {compared} of {total} output elements"
        return self._result("ok", detail, self._blocks, start)

    def _result(self, status: str, detail: str, blocks: int, start: float) -> CheckResult:
        seconds = time.perf_counter() - start
        return CheckResult(status == "ok", status, detail, blocks, seconds)

    def _check(self, module: ModuleOp, reference: list[np.ndarray]) -> tuple[float, int]:
        """(max relative error, elements compared); `_blocks` counts the blocks run."""
        types = list(forward_function(module).function_type.inputs.data)
        if types != self._arg_types:
            raise ValueError("the candidate's @forward takes other arguments than the kernel")
        plan = self._plan(module)
        if plan is None:
            launches = [op for op in module.walk() if isinstance(op, kernel.LaunchOp)]
            grids = [lookup_kernel(op, op.callee, kernel.FuncOp).grid_size for op in launches]
            self._blocks = sum(grids)
            outputs = run_blocks(module, self.inputs, {})
            masks = [np.ones(r.shape, dtype=bool) for r in reference]
            return self._compare(outputs, reference, masks), sum(r.size for r in reference)
        host, chosen, masks = plan
        self._blocks = sum(len(ids) for ids in chosen)
        runs = zip(host.launches, chosen, strict=True)
        outputs = run_blocks(module, self.inputs, {launch.op: ids.tolist() for launch, ids in runs})
        if not any(mask.any() for mask in masks):
            raise RuntimeError("the sampled blocks wrote nothing")
        return self._compare(outputs, reference, masks), sum(int(m.sum()) for m in masks)

    def _plan(self, module: ModuleOp) -> tuple[Host, list[np.ndarray], list[np.ndarray]] | None:
        """(footprints, the blocks to run per launch, the output elements they compute), or
        None to run all blocks: a cheap candidate, one the footprint analysis does not
        understand, or one whose sample runs about as many blocks of its costliest launch
        as the whole. Raises `_Wrong` where the footprint shows an output element nobody
        writes (`_check_coverage`)."""
        if self.mode == "full":
            return None
        full = estimate_interpretation(module).seconds
        if self.mode == "auto" and full <= FULL_RUN_SECONDS:
            return None
        try:
            host = footprints(module)
        except NotAnalysable:
            if self.mode == "sample":
                raise
            return None
        self._check_coverage(host)
        ops = [self._per_block_ops(module, launch) for launch in host.launches]
        whole = [
            _launch_seconds(launch, np.arange(launch.func.grid_size), per_block)
            for launch, per_block in zip(host.launches, ops, strict=True)
        ]
        costliest = int(np.argmax(whole))

        def seconds(i: int, blocks: np.ndarray) -> float:
            return _launch_seconds(host.launches[i], blocks, ops[i])

        chosen = select_blocks(host, _seeds(host, [1.0, GOLDEN_FRACTION]))
        if _sample_seconds(host, chosen, ops) > SAMPLE_SECONDS:
            chosen = select_blocks(host, _seeds(host, [1.0]))
        sampled, grid = len(chosen[costliest]), host.launches[costliest].func.grid_size
        if self.mode == "auto" and sampled >= SAMPLE_SHARE * grid:
            return None
        chosen, complete, written = widen(host, chosen, costliest, seconds, WIDEN_SECONDS)
        compared = [(complete[k] & written[k]).reshape(host.shapes[k]) for k in host.outputs]
        return host, chosen, compared

    @staticmethod
    def _per_block_ops(module: ModuleOp, launch: Launch) -> int:
        return estimate_interpretation(module, launch.func.sym_name.data).op_executions

    def _check_coverage(self, host: Host) -> None:
        """Over the whole grid: no thread reads an element of an allocation that nothing
        wrote before (split-K's combine reading a workspace row the partial kernel's mask
        skipped), and every output element the reference writes, some thread writes."""
        written = [np.zeros(size, dtype=bool) for size in host.sizes]
        for launch in host.launches:
            for key, _, flat in launch.accesses.reads:
                unwritten = flat[~written[key][flat]] if key >= host.arguments else flat[:0]
                if unwritten.size:
                    where = _element(host.shapes[key], int(unwritten[0]))
                    raise _Wrong(
                        f"@{launch.func.sym_name.data} reads element {where} of "
                        f"{host.names[key]}, which nothing wrote"
                    )
            for key, _, flat, _ in launch.accesses.writes:
                written[key][flat] = True
        for output, (key, expected) in enumerate(zip(host.outputs, self.reference, strict=True)):
            missing = ~np.isnan(expected.reshape(-1).astype(np.float64)) & ~written[key]
            if missing.any():
                where = _element(expected.shape, int(np.argmax(missing)))
                count = int(missing.sum())
                raise _Wrong(
                    f"output {output} element {where} is written by no thread ({count} such)"
                )

    def _compare(
        self, outputs: list[np.ndarray], reference: list[np.ndarray], masks: list[np.ndarray]
    ) -> float:
        if len(outputs) != len(reference):
            raise ValueError(f"the candidate returns {len(outputs)} outputs, not {len(reference)}")
        error = 0.0
        for i, (actual, expected, mask) in enumerate(zip(outputs, reference, masks, strict=True)):
            error = max(error, compare(actual, expected, mask, self.tolerance, i))
        return error


def _detail(error: BaseException) -> str:
    """`first_line(error)`, clipped to `DETAIL_CHARS`."""
    text = first_line(error)
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 3] + "..."


__all__ = [
    "CheckResult",
    "KernelCheck",
    "compare",
    "random_inputs",
    "reference_path",
    "run_blocks",
    "tolerance_of",
]
