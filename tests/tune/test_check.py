"""The tuner's correctness gate (`tune/check.py`, `tune/footprint.py`): candidates against
the loop level.

Default schedules pass, whole and sampled, for a norm, fp32 and bf16 GEMMs and split-K
(workspace and atomic); planted bugs come out "wrong" with the element that shows them; a
candidate whose interpretation raises is "failed"; a sample runs every split-K slice of the
tiles it compares (and would compare an incomplete tile otherwise); a bigger GEMM runs only
its sampled blocks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp
from xdsl.ir import Operation
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import kernel, loop
from deplodock.driver import lower_program, program_from_expression
from deplodock.numerics import CHECK_FP32_TOLERANCE, CHECK_NARROW_TOLERANCE
from deplodock.passes.pipelines import lower
from deplodock.tune import check as check_module
from deplodock.tune.check import KernelCheck, random_inputs, tolerance_of
from deplodock.tune.footprint import Host, computed_elements, footprints, select_blocks
from deplodock.tune.kernels import loop_kernels, standalone

GEMM = "nn.Linear(256, 128, bias=True)(torch.randn(1, 64, 256))"
GEMM_BF16 = (
    "nn.Linear(256, 128, bias=True, dtype=torch.bfloat16)"
    "(torch.randn(1, 64, 256, dtype=torch.bfloat16))"
)
RMSNORM = "nn.RMSNorm(512)(torch.randn(1, 16, 512))"
#: No epilogue, so `split_atomic` may add the slices straight into the output.
MATMUL = "torch.randn(64, 256) @ torch.randn(256, 128)"
#: M = 50: the last row tile is partly outside, guarded by `%m < 50`.
EDGE_GEMM = "nn.Linear(256, 128, bias=True)(torch.randn(1, 50, 256))"


def loop_kernel(expression: str, **knobs: int) -> loop.KernelOp:
    """The program's (first) loop kernel, with `knobs` on its `schedule` attribute."""
    program = program_from_expression(expression)
    lower_program(program, "loop")
    found = loop_kernels(program.module)[0]
    if knobs:
        schedule = {name: IntegerAttr(value, 64) for name, value in knobs.items()}
        found.attributes["schedule"] = DictionaryAttr(schedule)
    return found


def candidate(found: loop.KernelOp) -> ModuleOp:
    """The kernel's default schedule, lowered to the kernel level as the tuner does."""
    module = standalone(found)
    lower(module, "kernel", start="loop")
    return module


def funcs(module: ModuleOp) -> list[kernel.FuncOp]:
    return [op for op in module.ops if isinstance(op, kernel.FuncOp)]


def first(module: ModuleOp, match) -> Operation:
    """The first op of the kernel-level `module` that `match`es."""
    return next(op for fn in funcs(module) for op in fn.walk() if match(op))


# --- correct candidates pass -----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["full", "sample"])
@pytest.mark.parametrize(
    "expression, knobs",
    [
        (RMSNORM, {}),
        (GEMM, {}),
        (GEMM_BF16, {}),
        (MATMUL, {"splits": 4}),
        (MATMUL, {"splits": 4, "split_atomic": 1}),
    ],
    ids=["rmsnorm", "gemm", "gemm-bf16", "split-k", "split-k-atomic"],
)
def test_default_schedules_pass(expression: str, knobs: dict[str, int], mode: str) -> None:
    found = loop_kernel(expression, **knobs)
    module = candidate(found)
    result = KernelCheck(found, seed=0, mode=mode).check(module)
    assert result.ok and result.status == "ok", result.detail
    assert "max relative error" in result.detail
    grid = sum(fn.grid_size for fn in funcs(module))
    if mode == "full":
        assert result.blocks == grid
    else:
        assert 0 < result.blocks < grid


def test_split_k_knobs_reach_the_candidate() -> None:
    """The knobs the tests rely on take effect: 4 slices, added atomically or combined."""
    atomic = candidate(loop_kernel(MATMUL, splits=4, split_atomic=1))
    assert [fn.sym_name.data for fn in funcs(atomic)] == ["matmul_kernel_zero", "matmul_kernel"]
    assert any(isinstance(op, kernel.AtomicAddOp) for op in funcs(atomic)[1].walk())
    combined = candidate(loop_kernel(MATMUL, splits=4))
    assert [fn.sym_name.data for fn in funcs(combined)] == [
        "matmul_kernel",
        "matmul_kernel_combine",
    ]


# --- the sample is exact across launches -------------------------------------------------------


def test_atomic_split_k_sample_runs_every_slice_of_its_tile() -> None:
    """The blocks that add into the last output element are the four slices of its tile,
    and the zeroing blocks of that tile before them; without any one of them the element
    is not complete, so it would not be compared."""
    host = footprints(candidate(loop_kernel(MATMUL, splits=4, split_atomic=1)))
    (output,) = host.outputs
    last = host.sizes[output] - 1
    zero_blocks, slice_blocks = select_blocks(host, {output: np.array([last])})
    assert len(slice_blocks) == 4 and 0 < len(zero_blocks) < host.launches[0].func.grid_size
    complete, written = computed_elements(host, [zero_blocks, slice_blocks])
    assert complete[output][last] and written[output][last]
    assert complete[output].sum() == 32 * 32  # the whole tile, and nothing else
    for dropped in range(4):
        partial = np.delete(slice_blocks, dropped)
        complete, _ = computed_elements(host, [zero_blocks, partial])
        assert not complete[output][last]
    for dropped in range(len(zero_blocks)):
        complete, _ = computed_elements(host, [np.delete(zero_blocks, dropped), slice_blocks])
        assert complete[output].sum() < 32 * 32  # part of the tile is not zeroed first


def test_workspace_split_k_sample_runs_the_slices_behind_the_combine() -> None:
    host = footprints(candidate(loop_kernel(MATMUL, splits=4)))
    (output,) = host.outputs
    last = host.sizes[output] - 1
    slice_blocks, combine_blocks = select_blocks(host, {output: np.array([last])})
    assert len(slice_blocks) == 4 and len(combine_blocks) == 1
    complete, _ = computed_elements(host, [slice_blocks, combine_blocks])
    assert complete[output][last]
    complete, _ = computed_elements(host, [slice_blocks[1:], combine_blocks])
    assert not complete[output][last]


# --- wrong candidates are caught ---------------------------------------------------------------


def subtract_instead_of_add(module: ModuleOp) -> None:
    """Turns the first `arith.addf` of the last kernel (the epilogue's bias add, or the
    combine's sum) into `arith.subf`."""
    fn = funcs(module)[-1]
    add = next(op for op in fn.walk() if isinstance(op, arith.AddfOp))
    Rewriter.replace_op(add, arith.SubfOp(add.lhs, add.rhs))


@pytest.mark.parametrize("mode", ["full", "sample"])
@pytest.mark.parametrize("expression", [GEMM, GEMM_BF16, RMSNORM], ids=["fp32", "bf16", "norm"])
def test_a_planted_bug_is_wrong(expression: str, mode: str) -> None:
    found = loop_kernel(expression)
    module = candidate(found)
    if expression == RMSNORM:  # the norm's first product becomes a sum
        product = first(module, lambda op: isinstance(op, arith.MulfOp))
        Rewriter.replace_op(product, arith.AddfOp(product.lhs, product.rhs))
    else:
        subtract_instead_of_add(module)
    result = KernelCheck(found, mode=mode).check(module)
    assert not result.ok and result.status == "wrong", result.detail
    assert "max relative error" in result.detail and "at output 0 element (" in result.detail
    grid = sum(fn.grid_size for fn in funcs(module))
    assert result.blocks == grid if mode == "full" else 0 < result.blocks < grid


@pytest.mark.parametrize("mode", ["full", "sample"])
def test_a_wrong_split_k_slice_is_wrong(mode: str) -> None:
    """Every slice reads K slice 0 (`%slice = %z0 * 0`): caught in any tile."""
    found = loop_kernel(MATMUL, splits=4, split_atomic=1)
    module = candidate(found)
    offset = first(
        module, lambda op: isinstance(op, arith.MuliOp) and op.result.name_hint == "slice"
    )
    zero = arith.ConstantOp(IntegerAttr.from_index_int_value(0))
    Rewriter.insert_op(zero, InsertPoint.before(offset))
    offset.operands = [offset.operands[0], zero.result]
    result = KernelCheck(found, mode=mode).check(module)
    assert result.status == "wrong", result.detail


def shrink_guard(module: ModuleOp) -> None:
    """`%m < 50` becomes `%m < 49` in the first kernel: row 49 is never computed."""
    bound = first(
        module,
        lambda op: (
            isinstance(op, arith.ConstantOp)
            and isinstance(op.value, IntegerAttr)
            and op.value.value.data == 50
            and any(isinstance(use.operation, arith.CmpiOp) for use in op.result.uses)
        ),
    )
    bound.properties["value"] = IntegerAttr(49, bound.result.type)


@pytest.mark.parametrize("splits", [1, 2])
def test_a_mask_that_skips_a_row_is_wrong_even_when_sampled(splits: int) -> None:
    """The sample need not run the skipped row: the footprint of the whole grid shows an
    output element nobody writes (unsplit) or a workspace element the combine reads that
    nobody wrote (split)."""
    found = loop_kernel(EDGE_GEMM, splits=splits)
    module = candidate(found)
    assert len(funcs(module)) == (1 if splits == 1 else 2)
    shrink_guard(module)
    result = KernelCheck(found, mode="sample").check(module)
    assert result.status == "wrong", result.detail
    if splits == 1:
        assert "output 0 element (0, 49, 0) is written by no thread" in result.detail
    else:
        assert "reads element (0, 49, 0) of %ws, which nothing wrote" in result.detail


# --- failures are verdicts, not crashes --------------------------------------------------------


@pytest.mark.parametrize("mode", ["full", "sample"])
def test_a_missing_barrier_is_failed(mode: str) -> None:
    found = loop_kernel(GEMM)
    module = candidate(found)
    for fn in funcs(module):
        for op in [op for op in fn.walk() if isinstance(op, kernel.BarrierOp)]:
            Rewriter.erase_op(op)
    result = KernelCheck(found, mode=mode).check(module)
    assert result.status == "failed" and not result.ok
    assert "\n" not in result.detail and "Race" in result.detail, result.detail


def test_an_out_of_bounds_store_is_failed() -> None:
    found = loop_kernel(RMSNORM)
    module = candidate(found)
    store = first(module, lambda op: isinstance(op, kernel.StoreOp | kernel.StoreVectorOp))
    far = arith.ConstantOp(IntegerAttr.from_index_int_value(10**6))
    Rewriter.insert_op(far, InsertPoint.before(store))
    operands = list(store.operands)
    operands[-1] = far.result
    store.operands = operands
    for mode in ("full", "sample"):
        result = KernelCheck(found, mode=mode).check(module)
        assert result.status == "failed", result.detail
        assert "out of bounds" in result.detail


def test_keyboard_interrupt_propagates(monkeypatch: pytest.MonkeyPatch) -> None:
    found = loop_kernel(RMSNORM)
    module = candidate(found)
    checker = KernelCheck(found)
    checker.reference  # noqa: B018 - computed before the interpreter is made to stop

    def interrupted(*args: object, **kwargs: object) -> list[np.ndarray]:
        raise KeyboardInterrupt

    monkeypatch.setattr(check_module, "run_blocks", interrupted)
    with pytest.raises(KeyboardInterrupt):
        checker.check(module)


def test_a_reference_that_does_not_run_fails_every_candidate(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    found = loop_kernel(RMSNORM)
    module = candidate(found)
    calls = []

    def broken(*args: object, **kwargs: object) -> list[np.ndarray]:
        calls.append(1)
        raise RuntimeError("no loop interpreter today")

    monkeypatch.setattr(check_module, "cache_root", lambda: tmp_path)  # none kept by others
    monkeypatch.setattr(check_module, "run_module", broken)
    checker = KernelCheck(found)
    for _ in range(2):
        result = checker.check(module)
        assert result.status == "failed"
        assert result.detail == (
            "the loop-level reference does not run: RuntimeError: no loop interpreter today"
        )
    assert len(calls) == 1  # tried once


def test_a_sample_that_writes_nothing_is_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    def nothing(host: Host, seeds: object) -> list[np.ndarray]:
        return [np.zeros(0, dtype=np.int64) for _ in host.launches]

    monkeypatch.setattr(check_module, "select_blocks", nothing)
    found = loop_kernel(RMSNORM)
    result = KernelCheck(found, mode="sample").check(candidate(found))
    assert result.status == "failed"
    assert result.detail == "RuntimeError: the sampled blocks wrote nothing"


def test_a_candidate_with_other_arguments_is_failed() -> None:
    result = KernelCheck(loop_kernel(RMSNORM)).check(candidate(loop_kernel(GEMM)))
    assert result.status == "failed" and "other arguments" in result.detail


# --- cost ------------------------------------------------------------------------------------


def test_a_bigger_gemm_runs_only_its_sampled_blocks() -> None:
    """Above the full-run estimate, only the blocks behind the sampled elements run: the
    whole kernel would take several seconds, the sample a fraction of one (counted in
    blocks, not timed: a timed assertion fails on a loaded machine)."""
    found = loop_kernel("nn.Linear(1024, 1024, bias=True)(torch.randn(1, 256, 1024))")
    module = candidate(found)
    (fn,) = funcs(module)
    result = KernelCheck(found).check(module)
    assert result.ok, result.detail
    assert 0 < result.blocks <= 2 < fn.grid_size == 128


def test_a_cheap_candidate_runs_whole() -> None:
    found = loop_kernel(RMSNORM)
    module = candidate(found)
    result = KernelCheck(found).check(module)
    assert result.ok and result.blocks == funcs(module)[0].grid_size
    total = 16 * 512
    assert result.detail.endswith(f"over {total} of {total} output elements")


# --- inputs and tolerances ---------------------------------------------------------------------


def test_inputs_are_random_typed_and_poison_only_what_is_written() -> None:
    found = loop_kernel(GEMM_BF16)
    x, weight, bias, out = random_inputs(found, seed=3)
    for array in (x, weight, bias):
        assert array.dtype == np.float32 and np.count_nonzero(array) == array.size
        bits = array.view(np.uint32)
        assert not (bits & 0xFFFF).any()  # bf16 values: the low half of the float is zero
    assert np.isnan(out).all()
    again = random_inputs(found, seed=3)
    np.testing.assert_array_equal(again[0], x)
    assert not np.array_equal(random_inputs(found, seed=4)[0], x)


def test_integer_inputs_index_what_they_index() -> None:
    found = loop_kernel("nn.Embedding(100, 64)(torch.randint(0, 100, (1, 512)))")
    ids = next(a for a in random_inputs(found, seed=0) if np.issubdtype(a.dtype, np.integer))
    assert ids.min() >= 0 and ids.max() < 100 and len(np.unique(ids)) > 50
    result = KernelCheck(found, mode="sample").check(candidate(found))
    assert result.ok, result.detail


def test_tolerances_follow_the_dtype_and_the_sum() -> None:
    assert tolerance_of(loop_kernel(GEMM_BF16)) == CHECK_NARROW_TOLERANCE
    assert tolerance_of(loop_kernel("torch.randn(64, 64) * 2")) == CHECK_FP32_TOLERANCE
    long = tolerance_of(loop_kernel("torch.randn(4, 16384) @ torch.randn(16384, 4)"))
    assert CHECK_FP32_TOLERANCE < long < 1e-4


def test_a_bad_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="check mode must be one of auto, full, sample"):
        KernelCheck(loop_kernel(RMSNORM), mode="fast")
