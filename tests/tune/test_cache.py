"""The tune cache: hits and misses per key part, the replacement rule, recovery from broken
files, unwritable locations, and several processes writing at once."""

from __future__ import annotations

import multiprocessing
import os
import random
import sqlite3
import traceback
from dataclasses import replace
from pathlib import Path

import pytest

from deplodock.tune import cache as tune_cache
from deplodock.tune.cache import (
    SCHEMA_VERSION,
    CacheKey,
    TuneCache,
    TuneCacheError,
    TuneRecord,
    Variant,
)

KEY = CacheKey(
    kernel="ab" * 32,
    target="model:h100",
    toolchain="nvcc 13.0.48 -O3; scheduler 1234",
    cost="model v2 fit 2026-11-20",
)


def record(
    key: CacheKey = KEY,
    best_us: float = 10.5,
    created: str = "2026-11-20T10:00:00.000000+00:00",
    name: str = "linear_kernel",
) -> TuneRecord:
    variants = (
        Variant({"block_m": 64, "block_n": 32, "stages": 2}, 12.25, "ok"),
        Variant({"block_m": 128, "block_n": 64, "stages": 3}, None, "failed", "ptxas: too many"),
        Variant({"block_m": 32, "block_n": 128, "stages": 1}, best_us, "ok"),
    )
    return TuneRecord(
        key=key,
        kernel_name=name,
        knobs={"block_m": 32, "block_n": 128, "stages": 1, "a_vector": 4},
        best_us=best_us,
        default_us=14.75,
        trials=len(variants),
        seconds=1.5,
        seed=7,
        variants=variants,
        created=created,
    )


@pytest.fixture
def warnings() -> list[str]:
    return []


@pytest.fixture
def db(tmp_path: Path, warnings: list[str]) -> TuneCache:
    return TuneCache(tmp_path / "tune.db", warn=warnings.append)


# --- hits, misses, the replacement rule, records, clear -------------------------------------


def test_a_stored_record_comes_back_whole(db: TuneCache, warnings: list[str]) -> None:
    stored = record()
    assert db.store(stored)
    found = db.lookup(KEY)
    assert found == stored
    assert list(found.knobs) == ["block_m", "block_n", "stages", "a_vector"]  # order kept
    assert list(found.variants[1].knobs) == ["block_m", "block_n", "stages"]
    assert found.variants[1].time_us is None and found.variants[1].detail == "ptxas: too many"
    assert warnings == []


def test_a_record_survives_a_new_cache_object(tmp_path: Path) -> None:
    TuneCache(tmp_path / "tune.db").store(record())
    assert TuneCache(tmp_path / "tune.db").lookup(KEY) == record()


@pytest.mark.parametrize("part", ["kernel", "target", "toolchain", "cost"])
def test_any_other_key_part_is_a_miss(db: TuneCache, part: str) -> None:
    """A new toolchain (target, cost source, kernel) invalidates by being another key."""
    db.store(record())
    other = replace(KEY, **{part: getattr(KEY, part) + " new"})
    assert db.lookup(other) is None
    db.store(record(other, best_us=99.0))
    assert db.lookup(other).best_us == 99.0
    assert db.lookup(KEY) == record()  # the old key's result is untouched


def test_an_empty_cache_misses(db: TuneCache) -> None:
    assert db.lookup(KEY) is None
    assert db.records() == []


def test_the_faster_winner_is_kept(db: TuneCache) -> None:
    assert db.store(record(best_us=10.0, name="first"))
    assert not db.store(record(best_us=11.0, name="slower"))
    assert db.lookup(KEY).kernel_name == "first"
    assert db.store(record(best_us=9.0, name="faster"))
    assert db.lookup(KEY).kernel_name == "faster"
    assert len(db.records()) == 1


def test_on_a_tie_the_newer_record_is_kept(db: TuneCache) -> None:
    db.store(record(best_us=10.0, name="older", created="2026-11-20T10:00:00+00:00"))
    assert db.store(record(best_us=10.0, name="newer", created="2026-11-21T10:00:00+00:00"))
    found = db.lookup(KEY)
    assert (found.kernel_name, found.created) == ("newer", "2026-11-21T10:00:00+00:00")


def test_records_are_newest_first(db: TuneCache) -> None:
    times = ["2026-11-20T10:00:00+00:00", "2026-11-22T10:00:00Z", "2026-11-21T10:00:00+00:00"]
    for number, created in enumerate(times):
        db.store(record(replace(KEY, kernel=f"{number:064x}"), created=created, name=f"k{number}"))
    assert [r.kernel_name for r in db.records()] == ["k1", "k2", "k0"]


def test_clear_removes_every_record_and_counts_them(db: TuneCache) -> None:
    for number in range(3):
        db.store(record(replace(KEY, kernel=f"{number:064x}")))
    assert db.clear() == 3
    assert db.records() == [] and db.lookup(replace(KEY, kernel=f"{0:064x}")) is None
    assert db.clear() == 0
    db.store(record())
    assert db.lookup(KEY) == record()


def test_the_default_location_is_under_the_cache_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cache = TuneCache()
    assert cache.path == tmp_path / "xdg" / "deplodock" / "tune.db"
    assert cache.path.is_file()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"knobs": {"block_m": 32.0}}, "knobs map names to integers"),
        ({"knobs": {"block_m": True}}, "knobs map names to integers"),
        ({"best_us": float("nan")}, "best_us must be finite"),
        ({"default_us": -1.0}, "default_us must be finite and >= 0"),
        ({"trials": -1}, "trials must be >= 0"),
        ({"variants": [Variant({}, 1.0, "ok")]}, "variants must be a tuple"),
        ({"created": "2026-11-20T10:00:00"}, "created must be in UTC"),
        ({"created": "yesterday"}, "created must be an ISO-8601 time"),
    ],
)
def test_a_malformed_record_is_refused(change: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        replace(record(), **change)


def test_a_key_part_must_be_a_non_empty_string() -> None:
    with pytest.raises(ValueError, match="cache key toolchain must be a non-empty string"):
        CacheKey("ab" * 32, "model:h100", "", "measured")
    with pytest.raises(ValueError, match="variant status must be a non-empty string"):
        Variant({"block_m": 32}, None, "")


# --- locations ------------------------------------------------------------------------------


def test_a_missing_directory_is_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "tune.db"
    TuneCache(path).store(record())
    assert path.is_file() and TuneCache(path).lookup(KEY) == record()


def test_a_directory_that_cannot_be_made_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    path = tmp_path / "file" / "tune.db"
    with pytest.raises(TuneCacheError) as caught:
        TuneCache(path)
    message = str(caught.value)
    assert str(path.parent) in message and "\n" not in message


def test_a_path_that_is_a_directory_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "tune.db").mkdir()
    with pytest.raises(TuneCacheError, match=r"tune cache .*tune\.db: .*open") as caught:
        TuneCache(tmp_path / "tune.db")
    assert "\n" not in str(caught.value)
    assert (tmp_path / "tune.db").is_dir()  # left alone


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_is_a_one_line_error(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(TuneCacheError, match="locked") as caught:
            TuneCache(locked / "tune.db")
        assert "\n" not in str(caught.value)
    finally:
        locked.chmod(0o700)


# --- broken files are set aside ---------------------------------------------------------------


def _random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(3).randbytes(20_000))


def _half_a_database(path: Path) -> None:
    full = TuneCache(path)
    for number in range(40):
        full.store(record(replace(KEY, kernel=f"{number:064x}")))
    assert not Path(f"{path}-wal").exists()  # everything is in the main file
    data = path.read_bytes()
    assert len(data) > 8 * 4096
    path.write_bytes(data[: len(data) // 2])


def _a_cut_header(path: Path) -> None:
    TuneCache(path).store(record())
    path.write_bytes(path.read_bytes()[:60])


def _a_damaged_page(path: Path) -> None:
    cache = TuneCache(path)
    for number in range(40):
        cache.store(record(replace(KEY, kernel=f"{number:064x}")))
    with sqlite3.connect(path) as db:
        (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'tunings'").fetchone()
        (page_size,) = db.execute("PRAGMA page_size").fetchone()
    db.close()
    data = bytearray(path.read_bytes())
    data[(root - 1) * page_size] = 0  # not a b-tree page type
    path.write_bytes(bytes(data))


def _unparsable_json(path: Path) -> None:
    TuneCache(path).store(record())
    with sqlite3.connect(path) as db:
        db.execute("UPDATE tunings SET variants = '[{\"knobs\": {'")
    db.close()


def _someone_elses_database(path: Path) -> None:
    with sqlite3.connect(path) as other:
        other.execute("CREATE TABLE people (name TEXT)")
        other.execute("INSERT INTO people VALUES ('ada')")
    other.close()


def _a_cache_without_its_version(path: Path) -> None:
    TuneCache(path).store(record())
    with sqlite3.connect(path) as other:
        other.execute("DELETE FROM meta")
    other.close()


BREAKAGES = {
    "random bytes": (_random_bytes, "is unreadable"),
    "truncated": (_half_a_database, "is "),
    "cut header": (_a_cut_header, "is unreadable"),
    "damaged page": (_a_damaged_page, "is damaged (*** in database main *** Page"),
    "bad json": (_unparsable_json, "is damaged (unreadable JSON in 1 of its rows)"),
    "other tables": (_someone_elses_database, "is another database (tables: people)"),
    "no version": (_a_cache_without_its_version, "has no schema version"),
}


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_a_broken_file_is_set_aside_with_one_warning(tmp_path: Path, breakage: str) -> None:
    path = tmp_path / "tune.db"
    damage, what = BREAKAGES[breakage]
    damage(path)
    broken = path.read_bytes()
    warnings: list[str] = []
    cache = TuneCache(path, warn=warnings.append)
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert f"tune cache {path} {what}" in warnings[0]
    (aside,) = tmp_path.glob("tune.db.corrupt-*[0-9]Z")
    assert aside.name in warnings[0]
    assert aside.read_bytes() == broken  # nothing lost
    assert cache.records() == []
    cache.store(record())
    assert cache.lookup(KEY) == record()
    TuneCache(path, warn=warnings.append)
    assert len(warnings) == 1  # the fresh cache is not set aside again


def test_another_schema_version_is_set_aside_by_its_number(tmp_path: Path) -> None:
    path = tmp_path / "tune.db"
    TuneCache(path).store(record())
    with sqlite3.connect(path) as other:
        other.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'", ("7",))
    other.close()
    warnings: list[str] = []
    cache = TuneCache(path, warn=warnings.append)
    assert warnings == [
        f"tune cache {path} has schema version 7 (this deplodock uses {SCHEMA_VERSION}); "
        "set it aside as tune.db.v7, started afresh"
    ]
    assert cache.lookup(KEY) is None
    with sqlite3.connect(tmp_path / "tune.db.v7") as old:
        assert old.execute("SELECT count(*) FROM tunings").fetchone() == (1,)
    old.close()


def test_a_version_1_cache_gains_stopped_in_place(tmp_path: Path) -> None:
    """Issue #39: version 2 records how each search ended (`stopped`); a version 1 file
    keeps its results (their end unknown, "") rather than being set aside."""
    path = tmp_path / "tune.db"
    TuneCache(path).store(record())
    with sqlite3.connect(path) as old:
        old.execute("ALTER TABLE tunings DROP COLUMN stopped")
        old.execute("UPDATE meta SET value = '1' WHERE name = 'schema_version'")
    old.close()
    warnings: list[str] = []
    cache = TuneCache(path, warn=warnings.append)
    assert warnings == [] and cache.lookup(KEY) == record()
    assert not cache.lookup(KEY).cut_short
    cut = replace(record(best_us=1.0), stopped="budget")
    assert cache.store(cut) and cache.lookup(KEY).stopped == "budget"
    assert cache.lookup(KEY).cut_short
    with sqlite3.connect(path) as new:
        version = new.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
    new.close()
    assert version == (str(SCHEMA_VERSION),)


def test_replace_keeps_a_slower_record(db: TuneCache) -> None:
    db.store(record(best_us=1.0))
    assert not db.store(record(best_us=5.0))
    assert db.store(record(best_us=5.0), replace=True)  # `tune --retune`
    assert db.lookup(KEY).best_us == 5.0


def test_set_aside_files_are_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "tune.db"
    warnings: list[str] = []
    for number in range(3):
        path.write_bytes(f"garbage {number}".encode() * 100)
        TuneCache(path, warn=warnings.append)
    asides = sorted(tmp_path.glob("tune.db.corrupt-*"))
    assert len(asides) == 3 and len(warnings) == 3
    contents = sorted(p.read_bytes()[:9] for p in asides)
    assert contents == [b"garbage 0", b"garbage 1", b"garbage 2"]


def test_a_file_broken_after_opening_is_recovered_on_use(
    db: TuneCache, warnings: list[str]
) -> None:
    db.store(record())
    _random_bytes(db.path)
    assert db.lookup(KEY) is None
    assert len(warnings) == 1 and "is unreadable" in warnings[0]
    assert db.store(record())
    assert db.lookup(KEY) == record()


def test_a_record_that_does_not_decode_is_a_one_line_error(db: TuneCache) -> None:
    db.store(record())
    with sqlite3.connect(db.path) as other:
        other.execute("""UPDATE tunings SET knobs = '{"block_m": 1.5}'""")
    other.close()
    with pytest.raises(TuneCacheError, match="a stored record cannot be read") as caught:
        db.lookup(KEY)
    assert "\n" not in str(caught.value) and str(db.path) in str(caught.value)


def test_a_file_removed_after_opening_is_recreated(db: TuneCache, warnings: list[str]) -> None:
    db.store(record())
    db.path.unlink()
    assert db.lookup(KEY) is None
    assert db.store(record()) and db.lookup(KEY) == record()
    assert warnings == []


def test_the_default_warning_is_one_line_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _random_bytes(tmp_path / "tune.db")
    TuneCache(tmp_path / "tune.db")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("deplodock: warning: tune cache ")


# --- connections ----------------------------------------------------------------------------


def test_every_connection_is_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[sqlite3.Connection] = []
    real_connect = sqlite3.connect

    def connect(*args, **kwargs) -> sqlite3.Connection:
        opened.append(real_connect(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(tune_cache.sqlite3, "connect", connect)
    _random_bytes(tmp_path / "tune.db")
    db = TuneCache(tmp_path / "tune.db", warn=lambda _: None)
    db.store(record())
    db.store(record(best_us=99.0))
    db.lookup(KEY)
    db.records()
    _random_bytes(db.path)
    db.lookup(KEY)  # a failed attempt, a recovery and a retry
    db.clear()
    assert len(opened) >= 8
    for connection in opened:
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            connection.total_changes  # noqa: B018


# --- several processes at once ---------------------------------------------------------------

PROCESSES = 4
STORES = 25
SHARED = replace(KEY, kernel="f" * 64)


def _worker(path: Path, number: int, start: multiprocessing.synchronize.Barrier) -> None:
    try:
        start.wait()
        cache = TuneCache(path)
        mine = [replace(KEY, kernel=f"{number:032x}{index:032x}") for index in range(STORES)]
        rng = random.Random(number)
        for index, key in enumerate(mine):
            cache.store(record(key, best_us=float(number * 100 + index)))
            if index == STORES // 2:
                cache.store(record(SHARED, best_us=float(50 + number)))
            earlier = rng.choice(mine[: index + 1])
            assert cache.lookup(earlier).best_us == float(number * 100 + mine.index(earlier))
            cache.lookup(replace(KEY, kernel=f"{rng.randrange(PROCESSES):032x}{index:032x}"))
            if index % 10 == 0:
                cache.records()
    except BaseException:
        traceback.print_exc()
        os._exit(1)


def _fork() -> multiprocessing.context.BaseContext:
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs the fork start method")
    return multiprocessing.get_context("fork")


def test_concurrent_stores_and_lookups_lose_nothing(tmp_path: Path) -> None:
    context = _fork()
    path = tmp_path / "tune.db"
    start = context.Barrier(PROCESSES)
    workers = [
        context.Process(target=_worker, args=(path, number, start)) for number in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [w.exitcode for w in workers] == [0] * PROCESSES
    rows = TuneCache(path).records()
    assert len(rows) == PROCESSES * STORES + 1
    assert TuneCache(path).lookup(SHARED).best_us == 50.0  # the fastest of the contenders
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert check.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    check.close()


def _open_broken(path: Path, start: multiprocessing.synchronize.Barrier) -> None:
    try:
        start.wait()
        cache = TuneCache(path, warn=lambda _: None)
        cache.store(record(replace(KEY, kernel=f"{os.getpid():064x}")))
    except BaseException:
        traceback.print_exc()
        os._exit(1)


def test_concurrent_opens_of_a_broken_file_set_it_aside_once(tmp_path: Path) -> None:
    context = _fork()
    path = tmp_path / "tune.db"
    _random_bytes(path)
    start = context.Barrier(PROCESSES)
    workers = [context.Process(target=_open_broken, args=(path, start)) for _ in range(PROCESSES)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [w.exitcode for w in workers] == [0] * PROCESSES
    assert len(list(tmp_path.glob("tune.db.corrupt-*"))) == 1
    assert len(TuneCache(path).records()) == PROCESSES
