"""Tuning with candidates scored by a pool (`tune/parallel.py`): in this process for the
driver's rules, on a local Ray runtime (slow: it starts in seconds) for the real thing,
with a worker killed mid-run."""

from __future__ import annotations

import functools

import pytest

from deplodock.driver import lower_program, program_from_expression, render
from deplodock.tune.cache import TuneCache
from deplodock.tune.evaluate import ModelEvaluator
from deplodock.tune.mcts import INTERRUPTED
from deplodock.tune.parallel import (
    ClusterLostError,
    InlinePool,
    PoolLost,
    tune_program_parallel,
)
from deplodock.tune.replay import model_replay
from deplodock.tune.tuner import TuneOptions, tune_program
from tests.tune.conftest import loop_module

#: Two small kernels (a reduction, then a softmax over its result).
TWO_KERNELS = "F.silu(torch.randn(8, 64)).sum(-1).softmax(-1)"
OPTIONS = TuneOptions(max_trials=5, patience=None, seed=1, kernel_budget_s=600)
#: The driver's rules in this process, without the interpreter's check (the Ray tests check).
QUICK = TuneOptions(max_trials=3, patience=None, seed=1, kernel_budget_s=600, check=False)


@pytest.fixture(scope="module")
def model():
    return ModelEvaluator("h100")


@pytest.fixture(scope="module")
def two_kernels_loop():
    return loop_module(TWO_KERNELS)


def variants(result):
    return [[(v.knobs, v.time_us, v.status) for v in k.record.variants] for k in result.kernels]


def test_one_worker_scores_what_the_in_process_search_scores(silu_mul_loop, model):
    options = TuneOptions(max_trials=5, patience=None, seed=3, kernel_budget_s=600, check=False)
    alone = tune_program(silu_mul_loop, model, options)
    pooled = tune_program_parallel(silu_mul_loop, model, options, InlinePool(1))
    assert variants(pooled) == variants(alone)


class Heard:
    """A `TuneProgress` that keeps what it hears."""

    def __init__(self):
        self.started, self.finished, self.pools = [], [], []
        self.bests: dict[str, float] = {}

    def kernel_started(self, name, index, total, budget_s):
        self.started.append(name)

    def variant(self, name, trial, best):
        self.bests[name] = best.score.time_us

    def kernel_finished(self, result):
        self.finished.append(result.name)

    def pool(self, busy, workers, per_s):
        self.pools.append((busy, workers, per_s))


def test_a_window_of_two_is_reproducible_and_caches_every_kernel(two_kernels_loop, model, tmp_path):
    cache, heard = TuneCache(tmp_path / "tune.db"), Heard()
    first = tune_program_parallel(two_kernels_loop, model, QUICK, InlinePool(2), cache, heard)
    assert heard.started == ["sum_kernel", "softmax_kernel"] and len(heard.finished) == 2
    assert heard.bests == {k.name: k.record.best_us for k in first.kernels}
    assert heard.pools and all(0 <= busy <= 2 and workers == 2 for busy, workers, _ in heard.pools)
    second = tune_program_parallel(two_kernels_loop, model, QUICK, InlinePool(2))
    assert variants(first) == variants(second)
    assert [k.name for k in first.kernels] == ["sum_kernel", "softmax_kernel"]
    assert all(len(k.record.variants) == 3 and k.stopped == "trials" for k in first.kernels)
    stored = {r.kernel_name: r for r in cache.records()}
    assert {n: r.knobs for n, r in stored.items()} == {
        k.name: k.record.knobs for k in first.kernels
    }
    again = tune_program_parallel(two_kernels_loop, model, QUICK, InlinePool(2), cache)
    assert all(k.cached for k in again.kernels)


class FailingPool(InlinePool):
    """Scores in this process until `after` results were taken, then fails as `error`."""

    def __init__(self, workers: int, after: int, error: BaseException):
        super().__init__(workers)
        self.after, self.error, self.taken = after, error, 0

    def result(self, handle):
        if self.taken == self.after:
            raise self.error
        self.taken += 1
        return handle


def test_ctrl_c_keeps_what_came_back(two_kernels_loop, model, tmp_path):
    cache = TuneCache(tmp_path / "tune.db")
    pool = FailingPool(2, 2, KeyboardInterrupt())  # before a kernel's 3 trials are in
    result = tune_program_parallel(two_kernels_loop, model, QUICK, pool, cache)
    assert result.interrupted
    kept = sum(k.record.trials for k in result.kernels)
    assert kept == 2 and all(k.stopped == INTERRUPTED for k in result.kernels)
    assert sum(r.trials for r in cache.records()) == 2
    assert all(r.cut_short for r in cache.records())  # a later run continues them


def test_a_lost_cluster_is_one_line_saying_what_was_kept(two_kernels_loop, model, tmp_path):
    cache = TuneCache(tmp_path / "tune.db")
    pool = FailingPool(2, 2, PoolLost("connection to the head node refused"))
    with pytest.raises(ClusterLostError) as caught:
        tune_program_parallel(two_kernels_loop, model, QUICK, pool, cache)
    message = str(caught.value)
    assert "\n" not in message and "head node refused" in message
    kept = len(cache.records())
    assert kept >= 1 and f"{kept} kernel record(s) kept in {cache.path}" in message
    assert sum(r.trials for r in cache.records()) == 2


def test_measured_through_a_pool_is_checked_timed_and_retimed(silu_mul_loop, tmp_path):
    """A measuring evaluator (scripted runner, fake GPU) through the pool: the same variants
    as in one process, and the fastest few re-timed interleaved."""
    from tests.tune.ray_evaluators import scripted_measurer

    options = TuneOptions(max_trials=3, patience=None, seed=0, kernel_budget_s=600)
    with scripted_measurer(tmp_path) as alone_evaluator:
        alone = tune_program(silu_mul_loop, alone_evaluator, options)
    with scripted_measurer(tmp_path) as evaluator:
        pooled = tune_program_parallel(silu_mul_loop, evaluator, options, InlinePool(1))
    assert variants(pooled) == variants(alone)
    (kernel,) = pooled.kernels
    assert kernel.record.key.cost == "measured"
    assert any("interleaved" in v.detail for v in kernel.record.variants)


def test_workers_without_ray_is_one_line(monkeypatch, capsys):
    from deplodock.cli.main import main
    from deplodock.tune import parallel

    monkeypatch.setattr(parallel, "ray_available", lambda: False)
    code = main(["tune", "-c", "torch.relu(torch.randn(4, 8))", "--workers", "2", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 1 and "pip install 'deplodock[distributed]'" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_cluster_address_nothing_answers_at_is_one_line_at_once():
    import socket

    from deplodock.tune.parallel import check_reachable

    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(PoolLost) as caught:
        check_reachable(f"127.0.0.1:{port}")
    assert str(caught.value).startswith(f"cannot reach the Ray cluster at 127.0.0.1:{port}: ")
    assert "\n" not in str(caught.value)
    check_reachable("auto")  # not host:port: Ray's to resolve


# --- on a local Ray runtime -----------------------------------------------------------------


@pytest.fixture(scope="module")
def build_tally(tmp_path_factory):
    """Where the GPU actors' builds are counted (`KillingBuild`): the second one dies."""
    return tmp_path_factory.mktemp("builds")


@pytest.fixture(scope="module")
def ray_pool(build_tally):
    """One local Ray runtime for the module (a process has one): 2 CPU workers, and 2 GPU
    actors without a GPU (the scripted runner on a fake device, 0 GPUs each)."""
    pytest.importorskip("ray")
    from deplodock.tune.parallel import RayPool
    from tests.tune.ray_evaluators import scripted_measurer

    measurer = functools.partial(scripted_measurer, build_tally, 2)  # build 1: the reference
    pool = RayPool(2, measurer=measurer, actors=2, gpus_per_actor=0)
    yield pool
    pool.close()


def cuda_of(cache_path) -> str:
    """The program compiled to CUDA with the cache's winners replayed."""
    program = program_from_expression(TWO_KERNELS)
    replay = model_replay("h100", cache_path)
    lower_program(program, "cuda", replay=replay)
    assert sorted(replay.replayed) == ["softmax_kernel", "sum_kernel"]
    return render(program.module, "cuda")


@pytest.mark.slow
def test_ray_with_a_worker_killed_finds_and_replays_the_same_winners(
    two_kernels_loop, model, ray_pool, tmp_path
):
    from tests.tune.ray_evaluators import KillingModel

    tally = tmp_path / "tally"
    tally.mkdir()
    killing = KillingModel(model, tally, nth=3)  # the 3rd evaluation's worker is SIGKILLed
    on_ray = TuneCache(tmp_path / "ray.db")
    result = tune_program_parallel(two_kernels_loop, killing, OPTIONS, ray_pool, on_ray)
    # every variant, the killed attempt, and at most one score of the heuristic's schedule
    # per worker process and kernel (the check's bar, `tuner.candidate_scorer`): the two
    # workers and the one that replaces the killed
    assert 2 * 5 + 1 <= len(list(tally.iterdir())) <= 2 * 5 + 1 + 3 * 2
    assert all(k.stopped == "trials" and k.record.trials == 5 for k in result.kernels)
    assert all(v.status == "ok" for k in result.kernels for v in k.record.variants)
    in_process = TuneCache(tmp_path / "inline.db")
    alone = tune_program_parallel(two_kernels_loop, model, OPTIONS, InlinePool(2), in_process)
    assert variants(result) == variants(alone)
    assert {r.kernel_name: r.knobs for r in on_ray.records()} == {
        k.name: k.record.knobs for k in alone.kernels
    }
    assert cuda_of(on_ray.path) == cuda_of(in_process.path)


@pytest.mark.slow
def test_ray_a_candidate_that_kills_every_worker_is_failed_and_the_search_goes_on(
    silu_mul_loop, model, ray_pool, tmp_path
):
    from tests.tune.ray_evaluators import KillingModel

    killing = KillingModel(model, tmp_path, threads=128)  # as FlakyModel plants failures
    options = TuneOptions(max_trials=12, patience=None, seed=0, kernel_budget_s=600)
    (kernel,) = tune_program_parallel(silu_mul_loop, killing, options, ray_pool).kernels
    died = [v for v in kernel.record.variants if v.status == "failed"]
    assert died and all("died" in v.detail for v in died)
    assert kernel.record.trials == 12 and kernel.record.best_us > 0


@pytest.mark.slow
@pytest.mark.xfail(
    strict=False,
    reason="order-dependent in the full suite (#37): run alone or with tests/tune it passes; "
    "after the whole suite the actor is killed but no candidate comes back FAILED (seen at "
    "2228f3f and e34b693, not at 3d1b3eb); under investigation",
)
def test_ray_measures_on_gpu_actors_and_a_dead_actor_fails_one_candidate(
    silu_mul_loop, ray_pool, tmp_path
):
    """The second build kills its GPU actor: that candidate is FAILED, and a restarted actor
    measures the rest."""
    from tests.tune.ray_evaluators import scripted_measurer

    options = TuneOptions(max_trials=4, patience=None, seed=0, kernel_budget_s=600)
    with scripted_measurer(tmp_path) as evaluator:
        (kernel,) = tune_program_parallel(silu_mul_loop, evaluator, options, ray_pool).kernels
    statuses = [(v.status, v.detail) for v in kernel.record.variants]
    died = [detail for status, detail in statuses if status == "failed"]
    assert len(died) == 1 and "GPU actor died" in died[0]
    assert kernel.record.trials == 4 and kernel.record.key.cost == "measured"
    assert sum(status == "ok" for status, _ in statuses) == 3
