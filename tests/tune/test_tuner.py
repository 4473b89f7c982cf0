"""Tuning a program on the model: budget, reproducibility, failures recorded, the cache."""

from __future__ import annotations

import time

import pytest

from deplodock.tune.cache import TuneCache
from deplodock.tune.evaluate import FAILED, Evaluator, ModelEvaluator, Score
from deplodock.tune.tuner import TuneOptions, tune_program


@pytest.fixture(scope="module")
def model():
    return ModelEvaluator("h100")


def test_rmsnorm_tune_finishes_within_its_budget(rmsnorm_loop, model):
    budget = 6.0  # room for a second trial on a loaded 2-core machine
    start = time.monotonic()
    result = tune_program(rmsnorm_loop, model, TuneOptions(kernel_budget_s=budget, patience=None))
    wall = time.monotonic() - start
    (kernel,) = result.kernels
    record = kernel.record
    assert kernel.stopped in ("budget", "exhausted")
    # the budget is checked before each evaluation: one may finish after it
    assert record.seconds < budget + 1.5 and wall < budget + 5
    assert record.trials >= 2
    assert record.default_us is not None and record.best_us <= record.default_us
    assert record.variants[0].knobs == record.variants[0].knobs  # the heuristic first
    assert record.key.target == "model:h100" and record.key.cost.startswith("model v")


def test_same_seed_same_variants(silu_mul_loop, model):
    options = TuneOptions(max_trials=6, patience=None, seed=3, kernel_budget_s=600)
    first = tune_program(silu_mul_loop, model, options).kernels[0].record
    second = tune_program(silu_mul_loop, model, options).kernels[0].record
    assert [v.knobs for v in first.variants] == [v.knobs for v in second.variants]
    assert [v.time_us for v in first.variants] == [v.time_us for v in second.variants]
    assert first.knobs == second.knobs


class FlakyModel(Evaluator):
    """The model, except that candidates with 128 threads fail as a compile would."""

    def __init__(self, model):
        self.model = model
        self.target, self.toolchain, self.cost = model.target, model.toolchain, model.cost

    def evaluate(self, kernel_module):
        from deplodock.dialects import kernel

        (fn,) = [op for op in kernel_module.ops if isinstance(op, kernel.FuncOp)]
        if fn.block_size == 128:
            raise RuntimeError("ptxas: planted failure\nsecond line")
        return self.model.evaluate(kernel_module)


def test_failing_candidate_scores_zero_and_is_recorded(silu_mul_loop, model):
    options = TuneOptions(max_trials=12, patience=None, kernel_budget_s=600)
    record = tune_program(silu_mul_loop, FlakyModel(model), options).kernels[0].record
    failed = [v for v in record.variants if v.status == FAILED]
    assert failed, "no candidate with 128 threads was tried"
    assert all(v.time_us is None for v in failed)
    assert failed[0].detail == "RuntimeError: ptxas: planted failure"
    assert record.knobs.get("threads") != 128
    assert record.trials == 12


def test_cache_hit_miss_and_new_toolchain(rmsnorm_loop, model, tmp_path):
    cache = TuneCache(tmp_path / "tune.db")
    options = TuneOptions(max_trials=3, patience=None, kernel_budget_s=600)
    first = tune_program(rmsnorm_loop, model, options, cache).kernels[0]
    assert not first.cached
    again = tune_program(rmsnorm_loop, model, options, cache).kernels[0]
    assert again.cached and again.record.knobs == first.record.knobs

    class NewCompiler(FlakyModel):
        def __init__(self, model):
            super().__init__(model)
            self.toolchain = model.toolchain + " (another nvcc)"

    other = tune_program(rmsnorm_loop, NewCompiler(model), options, cache).kernels[0]
    assert not other.cached
    assert len(cache.records()) == 2


def test_identical_kernels_are_tuned_once(model):
    from tests.tune.conftest import loop_module

    module = loop_module(
        "torch.relu(torch.randn(4, 256)) + torch.relu(torch.randn(4, 256)).sum(dim=-1, "
        "keepdim=True)"
    )
    from deplodock.tune.tuner import distinct_kernels

    counts = sorted(count for _, _, count in distinct_kernels(module))
    options = TuneOptions(max_trials=2, patience=None, kernel_budget_s=600)
    result = tune_program(module, model, options)
    assert len(result.kernels) == len(counts)
    assert sum(k.launches for k in result.kernels) == sum(counts)


def test_an_evaluator_that_always_fails_is_one_error(rmsnorm_loop, model):
    from deplodock.tune.tuner import NoVariantError

    class Broken(FlakyModel):
        def evaluate(self, kernel_module):
            return Score(None, FAILED, "nothing works")

    with pytest.raises(NoVariantError, match=r"every variant failed \(nothing works"):
        tune_program(rmsnorm_loop, Broken(model), TuneOptions(max_trials=3, patience=None))


def test_a_wrong_candidate_is_caught_by_the_check_and_recorded(silu_mul_loop, model, monkeypatch):
    """A candidate whose kernel multiplies where it should add (planted for every schedule
    but the heuristic's) scores zero as "wrong"; the heuristic wins."""
    from xdsl.dialects import arith
    from xdsl.rewriter import Rewriter

    from deplodock.dialects import kernel
    from deplodock.tune import tuner

    lowered = tuner.lower_candidate
    seen: list[dict] = []

    def planted(candidate):
        module = lowered(candidate)
        seen.append(candidate.knobs)
        if len(seen) > 1:
            fn = next(op for op in module.ops if isinstance(op, kernel.FuncOp))
            product = next(op for op in fn.walk() if isinstance(op, arith.MulfOp))
            Rewriter.replace_op(product, arith.AddfOp(product.lhs, product.rhs))
        return module

    monkeypatch.setattr(tuner, "lower_candidate", planted)
    options = TuneOptions(max_trials=4, patience=None, kernel_budget_s=600, check_all=True)
    record = tune_program(silu_mul_loop, model, options).kernels[0].record
    statuses = [v.status for v in record.variants]
    assert statuses[0] == "ok" and statuses[1:] == ["wrong"] * 3
    assert all("max relative error" in v.detail for v in record.variants[1:])
    assert record.knobs == record.variants[0].knobs


# --- a search cut short is continued (issue #39 item 3) ------------------------------------


def test_a_starved_search_is_continued_by_a_larger_budget(silu_mul_loop, model, tmp_path):
    """A budget that leaves only the heuristic's schedule evaluated used to be cached as
    searched, and every later tune answered from the cache; now a run that may spend more
    continues from what was scored, and ends where one search of that size would have."""
    cache = TuneCache(tmp_path / "tune.db")
    starved = TuneOptions(max_trials=1, patience=None, kernel_budget_s=600)
    first = tune_program(silu_mul_loop, model, starved, cache).kernels[0]
    assert first.default_only and first.record.stopped == "trials"
    assert cache.records()[0].stopped == "trials"
    again = tune_program(silu_mul_loop, model, starved, cache).kernels[0]
    assert again.cached  # no more to spend: the cache answers
    larger = TuneOptions(max_trials=6, patience=None, kernel_budget_s=600)
    continued = tune_program(silu_mul_loop, model, larger, cache).kernels[0]
    assert not continued.cached and continued.continued == 1 and not continued.default_only
    record = continued.record
    assert record.trials == 6 and record.variants[0] == first.record.variants[0]
    fresh = tune_program(silu_mul_loop, model, larger).kernels[0].record
    assert [v.knobs for v in record.variants] == [v.knobs for v in fresh.variants]
    assert record.knobs == fresh.knobs and record.best_us == fresh.best_us
    (stored,) = cache.records()
    assert stored.trials == 6 and stored.knobs == record.knobs
    assert tune_program(silu_mul_loop, model, larger, cache).kernels[0].cached


def test_a_search_out_of_time_is_continued_by_a_longer_one(silu_mul_loop, model, tmp_path):
    cache = TuneCache(tmp_path / "tune.db")
    tiny = TuneOptions(kernel_budget_s=1e-6, patience=None)
    first = tune_program(silu_mul_loop, model, tiny, cache).kernels[0]
    assert first.record.stopped == "budget" and first.default_only
    assert tune_program(silu_mul_loop, model, tiny, cache).kernels[0].cached
    longer = TuneOptions(kernel_budget_s=600, max_trials=4, patience=None)
    continued = tune_program(silu_mul_loop, model, longer, cache).kernels[0]
    assert not continued.cached and continued.record.trials == 4
    assert continued.record.seconds >= first.record.seconds


def test_a_finished_search_is_not_continued_but_retune_searches_afresh(
    silu_mul_loop, model, tmp_path
):
    cache = TuneCache(tmp_path / "tune.db")
    small = TuneOptions(max_trials=60, patience=2, kernel_budget_s=600)
    first = tune_program(silu_mul_loop, model, small, cache).kernels[0]
    assert first.record.stopped in ("patience", "exhausted")
    larger = TuneOptions(max_trials=80, patience=2, kernel_budget_s=600)
    assert tune_program(silu_mul_loop, model, larger, cache).kernels[0].cached
    retune = TuneOptions(max_trials=1, patience=None, kernel_budget_s=600, retune=True)
    fresh = tune_program(silu_mul_loop, model, retune, cache).kernels[0]
    assert not fresh.cached and fresh.continued == 0 and fresh.record.trials == 1
    (stored,) = cache.records()
    assert stored.trials == 1 and stored.stopped == "trials"  # replaced, though not faster


def test_only_a_candidate_that_could_win_is_checked(silu_mul_loop, model, monkeypatch):
    """Every schedule but the heuristic's is planted wrong; the evaluator puts every other
    one ahead of the heuristic and the rest behind. Those ahead are checked and caught; those
    behind keep their time unchecked, and cannot win; `check_all` checks them too."""
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import IntegerAttr
    from xdsl.rewriter import Rewriter

    from deplodock.dialects import kernel
    from deplodock.tune import tuner

    lowered = tuner.lower_candidate
    seen: list[dict] = []

    def planted(candidate):
        module = lowered(candidate)
        seen.append(candidate.knobs)
        fn = next(op for op in module.ops if isinstance(op, kernel.FuncOp))
        if len(seen) > 1:
            product = next(op for op in fn.walk() if isinstance(op, arith.MulfOp))
            Rewriter.replace_op(product, arith.AddfOp(product.lhs, product.rhs))
            fn.attributes["test.pace"] = IntegerAttr(len(seen) % 2, 64)
        return module

    class Paced(Evaluator):
        """The model's time for the heuristic; half of it (pace 0) or twice (pace 1)."""

        target, toolchain, cost = model.target, model.toolchain, model.cost

        def evaluate(self, kernel_module):
            fn = next(op for op in kernel_module.ops if isinstance(op, kernel.FuncOp))
            time_us = model.evaluate(kernel_module).time_us
            pace = fn.attributes.get("test.pace")
            return Score(time_us if pace is None else time_us * (0.5, 2.0)[pace.value.data])

    monkeypatch.setattr(tuner, "lower_candidate", planted)
    options = TuneOptions(max_trials=5, patience=None, kernel_budget_s=600)
    record = tune_program(silu_mul_loop, Paced(), options).kernels[0].record
    first, *others = record.variants
    assert first.status == "ok" and first.detail == ""
    ahead = [v for v in others if v.status == "wrong"]
    behind = [v for v in others if v.status == "ok"]
    assert ahead and behind and len(ahead) + len(behind) == len(others)
    assert all(v.detail == tuner.NOT_CHECKED and v.time_us > first.time_us for v in behind)
    assert record.knobs == first.knobs

    seen.clear()
    options = TuneOptions(max_trials=5, patience=None, kernel_budget_s=600, check_all=True)
    record = tune_program(silu_mul_loop, Paced(), options).kernels[0].record
    assert [v.status for v in record.variants] == ["ok"] + ["wrong"] * 4
