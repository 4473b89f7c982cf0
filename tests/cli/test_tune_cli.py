"""`deplodock tune` and `deplodock cache` from the command line: the summary, the live
display's end, the schedule as a pipeline that `deplodock-opt` replays byte for byte, the
cache that `compile` replays, and one-line errors."""

from __future__ import annotations

import sqlite3

import pytest

from tests.cli.invoke import invoke

EXPR = "F.silu(torch.randn(1, 16, 512)) * torch.randn(1, 16, 512)"
FAST = ["--trials", "6", "--no-check"]


@pytest.fixture
def db(tmp_path):
    return tmp_path / "tune.db"


def test_tune_prints_a_modeled_summary(db):
    result = invoke("deplodock", ["tune", "-c", EXPR, "--cache-db", str(db), *FAST])
    assert result.status == 0, result.stderr
    assert "times modeled (model:h100)" in result.stdout
    assert "mul_kernel" in result.stdout and "searched (trials)" in result.stdout
    assert f"results in {db}" in result.stderr


def test_verbose_prints_the_ranked_variants(db):
    result = invoke("deplodock", ["tune", "-c", EXPR, "--cache-db", str(db), "-v", *FAST])
    assert result.status == 0, result.stderr
    assert "mul_kernel: 6 variant(s)" in result.stderr
    assert "rank trial   modeled us vs default  knobs" in result.stderr
    assert result.stderr.count(" * ") + result.stderr.count(" *   ") >= 1


def test_print_schedule_replays_byte_identical_in_deplodock_opt(db, tmp_path):
    schedule = invoke(
        "deplodock", ["tune", "-c", EXPR, "--cache-db", str(db), "--print-schedule", *FAST]
    )
    assert schedule.status == 0, schedule.stderr
    pipeline = schedule.stdout.strip()
    assert pipeline.startswith('convert-loop-to-tile,tile-schedule{kernel="mul_kernel" knobs="')
    loop_file = tmp_path / "mul.loop.mlir"
    assert (
        invoke("deplodock", ["compile", "-c", EXPR, "--ir", "loop", "-o", str(loop_file)]).status
        == 0
    )
    tuned = invoke("deplodock", ["compile", "-c", EXPR, "--cache-db", str(db)])
    assert "tuned schedules replayed" in tuned.stderr
    replayed = invoke("deplodock-opt", [str(loop_file), "-p", pipeline, "-t", "cuda"])
    assert replayed.status == 0, replayed.stderr
    assert replayed.stdout == tuned.stdout


def test_compile_replays_the_cache_unless_told_not_to(db):
    plain = invoke("deplodock", ["compile", "-c", EXPR, "--cache-db", str(db)])
    assert "replayed" not in plain.stderr and not db.exists()  # nothing created
    invoke("deplodock", ["tune", "-c", EXPR, "--cache-db", str(db), *FAST])
    ignored = invoke("deplodock", ["compile", "-c", EXPR, "--cache-db", str(db), "--no-tuned"])
    assert ignored.stdout == plain.stdout and "replayed" not in ignored.stderr


def test_cache_ls_and_clear(db):
    invoke("deplodock", ["tune", "-c", EXPR, "--cache-db", str(db), *FAST])
    listing = invoke("deplodock", ["cache", "ls", "--cache-db", str(db)])
    assert listing.status == 0
    assert "1 record(s)" in listing.stdout and "mul_kernel" in listing.stdout
    cleared = invoke("deplodock", ["cache", "clear", "--cache-db", str(db)])
    assert "removed 1 record(s)" in cleared.stdout
    assert "0 record(s)" in invoke("deplodock", ["cache", "ls", "--cache-db", str(db)]).stdout


def test_a_corrupt_cache_is_set_aside_with_one_warning(db):
    db.write_bytes(b"not a database at all" * 100)
    result = invoke("deplodock", ["tune", "-c", EXPR, "--cache-db", str(db), *FAST])
    assert result.status == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "set it aside" in warnings[0]
    assert list(db.parent.glob("tune.db.corrupt-*"))
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT COUNT(*) FROM tunings").fetchone() == (1,)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--budget-s", "0"], "--budget-s must be positive"),
        (["--trials", "-3"], "--trials must be positive"),
        (["--model", "h999"], "h999"),
        (["--model", "h100", "--device", "cuda"], "--model DEVICE scores on the model"),
        (["--report", "/nonexistent/dir/r.html"], "--report /nonexistent/dir/r.html"),
        (["--device", "cuda"], "no CUDA device"),
    ],
)
def test_bad_options_are_one_line_errors(arguments, message):
    result = invoke("deplodock", ["tune", "-c", EXPR, "--no-cache", *arguments])
    assert result.status == 1
    assert len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr and "Traceback" not in result.stderr


def test_report_html_charts_best_so_far(db, tmp_path):
    report = tmp_path / "tune.html"
    result = invoke(
        "deplodock", ["tune", "-c", EXPR, "--cache-db", str(db), "--report", str(report), *FAST]
    )
    assert result.status == 0, result.stderr
    page = report.read_text()
    assert "<svg" in page and "best modeled us so far" in page and "mul_kernel" in page


def test_ctrl_c_keeps_what_was_found(db, monkeypatch):
    """Ctrl-C during the search: the variants found so far are the result, cached, and the
    exit status is 130."""
    from deplodock.tune import mcts

    calls = 0
    real = mcts.BatchSearch.complete

    def interrupted_after_three(self, key, score, seconds):
        nonlocal calls
        calls += 1
        if calls == 4:
            raise KeyboardInterrupt
        return real(self, key, score, seconds)

    monkeypatch.setattr(mcts.BatchSearch, "complete", interrupted_after_three)
    result = invoke("deplodock", ["tune", "-c", EXPR, "--cache-db", str(db), "--no-check"])
    assert result.status == 130
    assert "searched (interrupted)" in result.stdout
    assert "tune interrupted; what was found is kept" in result.stderr
    listing = invoke("deplodock", ["cache", "ls", "--cache-db", str(db)])
    assert "1 record(s)" in listing.stdout


def test_report_png(db, tmp_path):
    pytest.importorskip("matplotlib")
    report = tmp_path / "tune.png"
    result = invoke(
        "deplodock", ["tune", "-c", EXPR, "--cache-db", str(db), "--report", str(report), *FAST]
    )
    assert result.status == 0, result.stderr
    assert report.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_of_another_kind_is_refused(tmp_path):
    result = invoke(
        "deplodock", ["tune", "-c", EXPR, "--no-cache", "--report", str(tmp_path / "r.txt")]
    )
    assert result.status == 1 and "give a .html or .png file" in result.stderr


def test_a_starved_tune_says_so_and_a_larger_budget_continues_it(db):
    """Issue #39 item 3: a tune that evaluated only the default schedule was cached as
    searched and blocked every later search."""
    tune = ["tune", "-c", EXPR, "--cache-db", str(db), "--no-check"]
    starved = invoke("deplodock", [*tune, "--trials", "1"])
    assert starved.status == 0, starved.stderr
    assert "only the default schedule was evaluated for 1 kernel(s) (mul_kernel)" in (
        starved.stderr
    )
    assert "default only (trials)" in starved.stdout
    again = invoke("deplodock", [*tune, "--trials", "1"])
    assert "from the cache (1 variant(s), cut short: trials;" in again.stderr
    assert "cache (trials)" in again.stdout
    larger = invoke("deplodock", [*tune, "--trials", "6"])
    assert "6 variant(s)" in larger.stderr and "(continued from 1)" in larger.stderr
    assert "searched (trials, continued from 1)" in larger.stdout
    assert "only the default" not in larger.stderr
    retune = invoke("deplodock", [*tune, "--trials", "2", "--retune"])
    assert "2 variant(s)" in retune.stderr and "continued" not in retune.stderr
    listing = invoke("deplodock", ["cache", "ls", "--cache-db", str(db)]).stdout.splitlines()
    assert listing[1].endswith("  stopped") and listing[2].endswith("  trials")


def test_the_live_display_of_a_parallel_run_shows_workers_rate_and_each_best():
    import io

    from rich.console import Console
    from rich.live import Live

    from deplodock.cli.tune import TuneDisplay
    from deplodock.dialects.common.schedule import Schedule
    from deplodock.tune.evaluate import Score
    from deplodock.tune.mcts import Trial
    from deplodock.tune.space import Candidate

    screen = io.StringIO()
    display = TuneDisplay(verbose=True, quiet=False)
    display.live = Live(console=Console(file=screen, force_terminal=True, width=120))
    with display.live:  # as `with display` starts it on a terminal
        display.kernel_started("sum_kernel", 0, 2, 60.0)
        display.pool(1, 2, 0.75)
        for name, time_us in (("sum_kernel", 3.5), ("softmax_kernel", 4.25)):
            trial = Trial(1, Candidate(Schedule({"threads": 128}), None), Score(time_us), 0.1, True)
            display.variant(name, trial, trial)
        display.live.refresh()
    text = screen.getvalue()
    assert "1/2 busy, 0.75 variant(s)/s" in text
    assert "best of sum_kernel" in text and "3.50 us (trial 1)" in text
    assert "best of softmax_kernel" in text and "4.25 us (trial 1)" in text
