"""The measured evaluator without a GPU: its timing plan, what its worker's failures score,
its checks.

The timing plan runs with a timer that charges each call a set cost; the evaluator with fake
runners (`fake_runners.py`) that hang, raise, exit and segfault in real spawned processes
(the worker itself: tests/backend/test_worker.py); the runner itself (inputs, reference
check, timing, interleaving) on the CPU emulation of the emitted CUDA C. Only
`measure.gpu_runner` is left for tests/gpu.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from xdsl.dialects.builtin import MemRefType, ModuleOp, StringAttr, bf16, f32, i1, i64

from deplodock.backend.build import DEFAULT_FLAGS, Build, build_module
from deplodock.backend.device import NoCudaDevice, cuda_unavailable_reason
from deplodock.backend.nvcc import NvccError, nvcc_available
from deplodock.passes.pipelines import lower
from deplodock.tune.evaluate import FAILED, OK, TIMEOUT, WRONG, Evaluator, Score
from deplodock.tune.kernels import loop_kernels, standalone
from deplodock.tune.measure import (
    DeviceRunner,
    MeasuredEvaluator,
    Outcome,
    RetimeJob,
    TimeJob,
    TimingPolicy,
    mismatch,
    random_arguments,
    time_alone,
    time_interleaved,
)
from tests.gpu.emulation import FAKE_DEVICE, emulated_load
from tests.tune import fake_runners

#: A device whose nvcc line is a real one, so the toolchain string can be checked.
DEVICE = dataclasses.replace(
    FAKE_DEVICE, nvcc="Cuda compilation tools, release 13.0, V13.0.48 / Build cuda_13.0.r13.0"
)
#: Small enough for the CPU emulation: a few milliseconds a candidate.
QUICK = TimingPolicy(warmup_ms=0.5, target_ms=2.0, min_runs=3, max_runs=20)


# --- the timing plan -------------------------------------------------------------------------


class ChargingTimer:
    """Each call of a candidate charges its cost; `time` reports what the calls in it cost,
    and `log` records every call and flush in order."""

    def __init__(self) -> None:
        self.cost = 0.0
        self.log: list[str] = []

    def time(self, fn: Callable[[], object]) -> float:
        before = self.cost
        fn()
        return self.cost - before

    def candidate(self, name: str, ms: float, fail_at: int | None = None) -> Callable[[], None]:
        calls = []

        def call() -> None:
            calls.append(1)
            if fail_at is not None and len(calls) >= fail_at:
                raise RuntimeError(f"{name} faulted")
            self.log.append(name)
            self.cost += ms

        return call

    def flush(self) -> None:
        self.log.append("flush")


def test_warm_up_by_time_then_the_planned_runs_each_after_a_flush() -> None:
    timer = ChargingTimer()
    policy = TimingPolicy(warmup_ms=3.0, target_ms=10.0, min_runs=4, max_runs=100)
    times = time_alone(timer.candidate("a", 0.5), timer, policy, timer.flush)
    # warm-up in batches of 1, 2, 4 calls (0.5 + 1 + 2 ms >= 3 ms), no flush
    assert timer.log[:7] == ["a"] * 7
    # then 10 ms / 0.5 ms = 20 timed runs, each after a flush
    assert timer.log[7:] == ["flush", "a"] * 20
    assert times == [0.5] * 20


@pytest.mark.parametrize(
    ("ms", "warmup_calls", "runs"),
    [
        (100.0, 1, 4),  # one call warms up; the plan (0.1 run) is raised to min_runs
        (0.001, 100, 100),  # warm-up and runs stop at max_runs
    ],
)
def test_the_plan_is_clamped(ms: float, warmup_calls: int, runs: int) -> None:
    timer = ChargingTimer()
    policy = TimingPolicy(warmup_ms=3.0, target_ms=10.0, min_runs=4, max_runs=100)
    times = time_alone(timer.candidate("a", ms), timer, policy, timer.flush)
    assert timer.log.index("flush") == warmup_calls
    assert len(times) == runs and timer.log.count("flush") == runs


def test_interleaved_runs_take_turns_planned_on_the_fastest() -> None:
    timer = ChargingTimer()
    policy = TimingPolicy(warmup_ms=2.0, target_ms=5.0, min_runs=2, max_runs=50)
    fns = [timer.candidate("a", 1.0), timer.candidate("b", 2.0)]
    results = time_interleaved(fns, timer, policy, timer.flush)
    assert timer.log[:4] == ["a", "a", "a", "b"]  # a warms up in 1 + 2 calls, b in 1
    assert timer.log[4:] == ["flush", "a", "flush", "b"] * 5  # 5 ms / 1 ms (a) rounds
    assert [r.times for r in results] == [[1.0] * 5, [2.0] * 5]


def test_a_candidate_failing_in_the_rounds_is_recorded_and_leaves_them() -> None:
    timer = ChargingTimer()
    policy = TimingPolicy(warmup_ms=0.0, target_ms=4.0, min_runs=1, max_runs=50)
    fns = [timer.candidate("a", 1.0, fail_at=3), timer.candidate("b", 1.0)]
    a, b = time_interleaved(fns, timer, policy, timer.flush)
    assert a.times == [1.0] and a.error == "RuntimeError: a faulted"
    assert b.times == [1.0] * 4 and b.error is None


def test_outcomes_score_by_the_median_in_microseconds() -> None:
    assert Outcome(OK, (3.0, 1.0, 2.0, 50.0), "median of 4 runs").score() == Score(
        2.5, OK, "median of 4 runs"
    )
    assert Outcome(OK).score() == Score(None, FAILED, "no timed runs")
    wrong = Outcome(WRONG, detail="output #0: off").score()
    assert wrong == Score(None, WRONG, "output #0: off") and wrong.reward == 0.0
    with pytest.raises(ValueError, match="min_runs <= max_runs"):
        TimingPolicy(min_runs=10, max_runs=5)


# --- the evaluator, with a scripted runner ---------------------------------------------------


@functools.cache
def kernel_module(code: str) -> ModuleOp:
    """The kernel-level standalone module of the (only) kernel of a `-c` expression."""
    from deplodock.driver import lower_program, program_from_expression

    program = program_from_expression(code)
    lower_program(program, "loop")
    (kernel,) = loop_kernels(program.module)
    return lower(standalone(kernel), "kernel", start="loop")


def candidate(behaviour: str, code: str = "torch.randn(4, 64) * 2.0") -> ModuleOp:
    """A kernel-level module the scripted runner treats as `behaviour` says."""
    module = kernel_module(code).clone()
    module.attributes["fake.behaviour"] = StringAttr(behaviour)
    return module


def fake_build(module: ModuleOp, capability: tuple[int, int]) -> None:
    assert capability == (9, 0)
    if module.attributes.get("fake.behaviour") == StringAttr("nobuild"):
        raise NvccError("ptxas error: Entry function uses too much shared data\nmore")


def scripted_evaluator() -> MeasuredEvaluator:
    """Scripted runner, fake build, a 1.5 s watchdog."""
    return MeasuredEvaluator(
        timeout_s=1.5, device=DEVICE, runner_factory=fake_runners.scripted, build=fake_build
    )


def test_bad_candidates_score_zero_with_the_reason_and_the_search_goes_on() -> None:
    with scripted_evaluator() as evaluator:
        fast = evaluator.evaluate(candidate("fast"))
        slow = evaluator.evaluate(candidate("slow"))
        hung = evaluator.evaluate(candidate("hang"))
        after_hang = evaluator.evaluate(candidate("fast"))
        raised = evaluator.evaluate(candidate("raise"))
        exited = evaluator.evaluate(candidate("exit"))
        wrong = evaluator.evaluate(candidate("wrong"))
        unbuilt = evaluator.evaluate(candidate("nobuild"))
        last = evaluator.evaluate(candidate("medium"))
        starts = evaluator.worker.starts
    assert (fast.time_us, fast.status) == (2.5, OK) and slow.time_us == 9.0
    assert fast.detail == slow.detail  # both in the first worker
    assert hung == Score(None, TIMEOUT, "no result in 1.5 s: the worker was killed")
    assert after_hang.status == OK and after_hang.detail != fast.detail  # a new worker
    assert raised == Score(None, FAILED, "RuntimeError: an illegal memory access was encountered")
    assert exited == Score(None, FAILED, "the worker died (exit code 1)")
    assert wrong == Score(None, WRONG, "output #0: off")
    assert unbuilt.status == FAILED
    assert (
        unbuilt.detail == "build: NvccError: ptxas error: Entry function uses too much shared data"
    )
    assert last.time_us == 5.0
    assert all(s.reward == 0.0 for s in (hung, raised, exited, wrong, unbuilt))
    assert starts == 4  # the first, after the hang, the raise and the exit


def test_the_evaluator_says_what_it_measures_on() -> None:
    from deplodock.tune.evaluate import scheduler_digest

    evaluator: Evaluator = scripted_evaluator()
    assert evaluator.target == "cuda:Emulated GPU sm_90"
    assert evaluator.toolchain == f"nvcc 13.0 sm_90 -O3 -lineinfo; scheduler {scheduler_digest()}"
    assert evaluator.cost == "measured"


def test_a_candidate_that_does_not_build_never_reaches_the_worker() -> None:
    from deplodock.driver import lower_program, program_from_expression

    program = program_from_expression("torch.randn(4, 64) * 2.0")
    lower_program(program, "loop")
    loop_level = standalone(loop_kernels(program.module)[0])  # nothing for kernel -> cuda
    with MeasuredEvaluator(device=DEVICE, runner_factory=fake_runners.scripted) as evaluator:
        score = evaluator.evaluate(loop_level)  # the real build finds no cuda.kernel in it
        assert evaluator.worker.starts == 0
    assert score.status == FAILED
    assert score.detail.startswith("build: ValueError: the module has no cuda.kernel")


@pytest.mark.nvcc
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH")
def test_candidates_are_built_by_nvcc_at_the_run_flags(tmp_path: Path) -> None:
    builds: list[Build] = []

    def build(module: ModuleOp, capability: tuple[int, int]) -> None:
        builds.append(build_module(module, capability, directory=tmp_path))

    with MeasuredEvaluator(device=DEVICE, runner_factory=fake_runners.scripted, build=build) as ev:
        program = ev.compile(candidate("fast"))
    assert isinstance(program, str) and "cuda.kernel @mul_kernel" in program
    (built,) = builds
    assert (built.arch, built.flags) == ("sm_90", DEFAULT_FLAGS) and "-O3" in built.flags
    assert "mul_kernel" in built.kernels and built.cubin


def test_the_reference_travels_with_every_candidate() -> None:
    with scripted_evaluator() as evaluator:
        evaluator.set_reference(candidate("fast"))
        same = evaluator.evaluate(candidate("slow"))
        evaluator.set_reference(candidate("slow"))  # the scripted runner rejects this one
        other = evaluator.evaluate(candidate("slow"))
        evaluator.set_reference(None)
        unchecked = evaluator.evaluate(candidate("slow"))
        with pytest.raises(ValueError, match="the reference does not build: build: NvccError"):
            evaluator.set_reference(candidate("nobuild"))
    assert same.status == OK and other == Score(None, WRONG, "reference slow")
    assert unchecked.status == OK


def test_retime_is_one_interleaved_job_with_scores_in_order() -> None:
    modules = [candidate("slow"), candidate("nobuild"), candidate("medium"), candidate("fast")]
    with scripted_evaluator() as evaluator:
        scores = evaluator.retime(modules)
        assert evaluator.worker.starts == 1
    assert [s.time_us for s in scores] == [9.0, None, 5.0, 2.5]
    assert scores[1].status == FAILED
    assert {s.detail for s in scores[::2]} == {"interleaved ['slow', 'medium', 'fast']"}
    assert evaluator.retime([]) == []


def test_retime_falls_back_to_timing_each_alone_when_the_interleaved_run_fails() -> None:
    with scripted_evaluator() as evaluator:
        fast, flaky, slow = evaluator.retime(
            [candidate("fast"), candidate("flaky"), candidate("slow")]
        )
    assert (fast.time_us, flaky.time_us, slow.time_us) == (2.5, 2.5, 9.0)
    assert fast.detail.endswith(
        "; timed alone: the interleaved run failed: the worker died (exit code 1)"
    )


# --- the runner, on the CPU emulation of the CUDA C ------------------------------------------


def cuda_text(module: ModuleOp) -> str:
    return str(lower(module.clone(), "cuda", start="kernel"))


def emulated_runner() -> DeviceRunner:
    return DeviceRunner(FAKE_DEVICE, emulated_load, fake_runners.WallTimer(), None, "cpu")


def test_the_runner_checks_against_the_reference_then_times() -> None:
    twice, thrice = candidate("x2"), candidate("x3", "torch.randn(4, 64) * 3.0")
    runner = emulated_runner()
    right = runner(TimeJob(cuda_text(twice), cuda_text(twice), QUICK))
    wrong = runner(TimeJob(cuda_text(thrice), cuda_text(twice), QUICK))
    unchecked = runner(TimeJob(cuda_text(thrice), None, QUICK))
    assert right.status == OK and 3 <= len(right.times_us) <= 20
    assert all(t > 0 for t in right.times_us)
    assert right.detail == f"median of {len(right.times_us)} runs"
    assert wrong.status == WRONG
    assert wrong.detail == "output #0: max relative error 0.5 > 0.0001 (reference)"
    assert unchecked.status == OK


def test_the_runner_retimes_in_turns() -> None:
    texts = (cuda_text(candidate("x2")), cuda_text(candidate("x3", "torch.randn(4, 64) * 3.0")))
    outcomes = emulated_runner()(RetimeJob(texts, QUICK))
    assert [o.status for o in outcomes] == [OK, OK]
    assert len(outcomes[0].times_us) == len(outcomes[1].times_us) >= 3
    assert outcomes[0].detail.endswith("interleaved runs")
    with pytest.raises(TypeError, match="not str"):
        emulated_runner()("pid")


def test_the_evaluator_end_to_end_through_a_worker_on_the_emulation() -> None:
    evaluator = MeasuredEvaluator(
        timeout_s=60,
        policy=QUICK,
        device=DEVICE,
        runner_factory=fake_runners.emulated,
        build=lambda module, capability: None,
    )
    with evaluator:
        timed = evaluator.evaluate(candidate("x2"))
        evaluator.set_reference(candidate("x3", "torch.randn(4, 64) * 3.0"))
        wrong = evaluator.evaluate(candidate("x2"))
    assert timed.status == OK and timed.time_us is not None and timed.time_us > 0
    assert wrong.status == WRONG and "max relative error" in wrong.detail


# --- inputs and the comparison ---------------------------------------------------------------


def test_random_arguments_are_seeded_non_zero_and_in_range() -> None:
    types = [
        MemRefType(f32, [3, 40]),
        MemRefType(bf16, [40]),
        MemRefType(i64, [2, 7]),
        MemRefType(i1, [5]),
    ]
    x, w, ids, mask = random_arguments(types, "cpu")
    assert (x.dtype, w.dtype, ids.dtype, mask.dtype) == (
        torch.float32,
        torch.bfloat16,
        torch.int64,
        torch.bool,
    )
    assert x.shape == (3, 40) and bool((x != 0).all()) and x.std() > 0.5
    assert bool((w != 0).all())
    assert int(ids.min()) >= 0 and int(ids.max()) < 2 and len(set(ids.flatten().tolist())) == 2
    again = random_arguments(types, "cpu")
    assert all(torch.equal(a, b) for a, b in zip([x, w, ids, mask], again, strict=True))
    assert not torch.equal(random_arguments(types, "cpu", seed=1)[0], x)


def test_outputs_are_compared_relative_to_the_reference_with_nans_agreeing() -> None:
    """By `numerics.max_relative_error` (`tests/test_numerics.py` pins its rules)."""
    e = torch.tensor([1.0, -4.0, float("nan"), float("inf")])
    assert mismatch([e.clone()], [e]) is None
    assert mismatch([e + torch.tensor([0.0, 0.02, 0.0, 0.0])], [e]) == (
        "output #0: max relative error 0.005 > 0.0001 (reference)"
    )
    assert mismatch([torch.tensor([1.0, -4.0, 0.0, float("inf")])], [e]) == (
        "output #0: max relative error inf > 0.0001 (reference)"
    )
    assert mismatch([e, e], [e]) == "2 outputs, the reference has 1"
    assert mismatch([e[:2]], [e]) == (
        "output #0 is torch.float32 (2,), the reference's torch.float32 (4,)"
    )
    narrow = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    assert mismatch([narrow * 1.0078125], [narrow]) is None  # one bf16 ulp: within 2e-2
    assert mismatch([torch.tensor([1, 2])], [torch.tensor([1, 3])]) == (
        "output #0: max relative error 0.33 > 0 (reference)"
    )


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a GPU is available here")
def test_without_a_gpu_the_evaluator_is_a_one_line_error() -> None:
    with pytest.raises(NoCudaDevice) as error:
        MeasuredEvaluator()
    message = str(error.value)
    assert message.startswith("no CUDA device: ") and "\n" not in message
