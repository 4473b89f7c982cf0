"""The autotuner's memory: every tuned kernel's winning schedule, kept in one SQLite file.

Why SQLite: it ships with Python, a transaction is atomic (a crash or a full disk leaves the
previous state, never half a row), and several `deplodock tune` runs may share the file at
once. The file is in WAL mode (readers never wait for a writer), every connection waits up
to `BUSY_TIMEOUT_S` for a lock, and every write is one `BEGIN IMMEDIATE` transaction, so a
writer takes the lock before it reads and concurrent runs neither deadlock nor lose rows.

A result is known by a `CacheKey` of four opaque strings: the kernel's structural hash, the
target (a device model or a real device), the toolchain (compiler, flags, scheduler digest)
and the cost source (a model version or `measured`). Anything that changes one of them makes
a different key, so a new toolchain or cost model is simply a miss and the old rows stay for
the old one. Of two results for one key the faster winner is kept; on a tie, the newer.

A file that is not a tune cache of this schema (random bytes, a truncated or malformed
database, someone else's tables, another `SCHEMA_VERSION`) is never deleted and never a
crash: it is renamed to `<name>.corrupt-<UTC time>` (`<name>.v<N>` for another version),
one warning line says so, and a fresh cache takes its place. A location that cannot be
written raises `TuneCacheError`, whose message is one line naming the path and the reason.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from deplodock.dialects.common.schedule import Schedule
from deplodock.files import cache_root
from deplodock.tune.mcts import CUT_SHORT

try:  # POSIX; elsewhere concurrent recoveries of one corrupt file are not serialized.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

#: The layout of the tables below; a file with another version is set aside, not migrated,
#: but for version 1, which lacks only `stopped` and gains it in place (`_upgrade`).
SCHEMA_VERSION = 2

#: How long an operation waits for another process's lock before it gives up (seconds).
BUSY_TIMEOUT_S = 30.0

#: The columns of `tunings`, in table order (the first four are the key).
COLUMNS = (
    "kernel",
    "target",
    "toolchain",
    "cost",
    "kernel_name",
    "knobs",
    "best_us",
    "default_us",
    "trials",
    "seconds",
    "seed",
    "variants",
    "created",
    "stopped",
)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS tunings ("
    " kernel TEXT NOT NULL, target TEXT NOT NULL, toolchain TEXT NOT NULL, cost TEXT NOT NULL,"
    " kernel_name TEXT NOT NULL, knobs TEXT NOT NULL, best_us REAL NOT NULL, default_us REAL,"
    " trials INTEGER NOT NULL, seconds REAL NOT NULL, seed INTEGER NOT NULL,"
    " variants TEXT NOT NULL, created TEXT NOT NULL, stopped TEXT NOT NULL DEFAULT '',"
    " PRIMARY KEY (kernel, target, toolchain, cost))",
)

_TABLES = frozenset({"meta", "tunings"})

#: SQLite's files beside a database, moved with it when it is set aside.
_SIDE_FILES = ("-wal", "-shm", "-journal")

_T = TypeVar("_T")


class TuneCacheError(Exception):
    """The tune cache cannot be used (its message is one line: the path and the reason)."""


def utc_now() -> str:
    """The current time as ISO-8601 UTC, to the microsecond."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def warn_on_stderr(message: str) -> None:
    """The default `warn` of a `TuneCache`: `deplodock: warning: MESSAGE` on stderr."""
    print(f"deplodock: warning: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class CacheKey:
    """What a tuning result is valid for; each part is an opaque, non-empty string."""

    kernel: str  # the structural hash of the loop kernel (`kernels.kernel_hash`)
    target: str  # `model:h100`, `cuda:NVIDIA H100 80GB HBM3 sm_90`, ...
    toolchain: str  # compiler version and flags, scheduler digest
    cost: str  # the cost source: a model version, or `measured`

    def __post_init__(self) -> None:
        for name in ("kernel", "target", "toolchain", "cost"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"cache key {name} must be a non-empty string, got {value!r}")


@dataclass(frozen=True)
class Variant:
    """One schedule the search evaluated, and what came of it."""

    knobs: Schedule
    time_us: float | None  # None where it has no time (it failed, was wrong, timed out)
    status: str  # "ok", "failed", "wrong", "timeout", ...
    detail: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "knobs", _as_schedule(self.knobs))
        if self.time_us is not None:
            _check_time("variant time_us", self.time_us)
        if not isinstance(self.status, str) or not self.status:
            raise ValueError(f"variant status must be a non-empty string, got {self.status!r}")


@dataclass(frozen=True)
class TuneRecord:
    """The result of tuning one kernel for one key: the winner, and the search that found it."""

    key: CacheKey
    kernel_name: str  # readable, for reports (`linear_kernel`); not part of the key
    knobs: Schedule  # the winner's complete schedule, in knob order
    best_us: float
    default_us: float | None  # the heuristic schedule's time, where it had one
    trials: int  # variants evaluated
    seconds: float  # wall time of the search
    seed: int
    variants: tuple[Variant, ...] = ()  # everything explored, in the order tried
    created: str = field(default_factory=utc_now)  # ISO-8601 UTC
    #: How the search ended (`mcts`: budget, trials, interrupted, patience, exhausted): the
    #: first three cut it short, so a later tune with more to spend searches on; "" for a
    #: record of schema version 1, which did not say.
    stopped: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "knobs", _as_schedule(self.knobs))
        _check_time("best_us", self.best_us)
        if self.default_us is not None:
            _check_time("default_us", self.default_us)
        _check_time("seconds", self.seconds)
        for name in ("trials", "seed"):
            if not _is_int(getattr(self, name)):
                raise ValueError(f"{name} must be an integer, got {getattr(self, name)!r}")
        if self.trials < 0:
            raise ValueError(f"trials must be >= 0, got {self.trials}")
        if not isinstance(self.variants, tuple):
            raise ValueError("variants must be a tuple of Variant")
        if not isinstance(self.stopped, str):
            raise ValueError(f"stopped must be a string, got {self.stopped!r}")
        _check_created(self.created)

    @property
    def cut_short(self) -> bool:
        """Whether the search stopped with more to search (`mcts.CUT_SHORT`): its budget, a
        trial limit or Ctrl-C; a later tune that may spend more continues it."""
        return self.stopped in CUT_SHORT

    @property
    def created_time(self) -> datetime:
        """`created` as an aware datetime."""
        return datetime.fromisoformat(self.created)


class TuneCache:
    """The tune results at `path` (`<cache root>/tune.db` by default).

    The file is checked (and set aside if it is not a usable cache) when the object is made;
    each operation then opens its own connection and closes it before it returns.
    """

    def __init__(
        self, path: Path | None = None, warn: Callable[[str], None] = warn_on_stderr
    ) -> None:
        self.path = Path(path) if path is not None else self.default_path()
        self.warn = warn
        self._prepare()

    @staticmethod
    def default_path() -> Path:
        """`<cache root>/tune.db`: where tune writes and compile replays, unless told."""
        return cache_root() / "tune.db"

    def lookup(self, key: CacheKey) -> TuneRecord | None:
        """The record stored for `key`, or None."""
        query = f"SELECT {', '.join(COLUMNS)} FROM tunings WHERE {_KEY_MATCH}"

        def select(db: sqlite3.Connection) -> TuneRecord | None:
            row = db.execute(query, _key_values(key)).fetchone()
            return None if row is None else _record_from_row(row)

        return self._run(select)

    def store(self, record: TuneRecord, replace: bool = False) -> bool:
        """Keeps `record` unless its key already has a faster one; says whether it was kept.

        The rule: the lower `best_us` wins, and on a tie the record being stored (the newer).
        `replace` (`tune --retune`: a search started afresh) keeps `record` whatever it is.
        """
        columns = ", ".join(COLUMNS)
        updates = ", ".join(f"{name} = excluded.{name}" for name in COLUMNS[4:])
        condition = "" if replace else " WHERE excluded.best_us <= tunings.best_us"
        statement = (
            f"INSERT INTO tunings ({columns}) VALUES ({', '.join('?' * len(COLUMNS))}) "
            f"ON CONFLICT (kernel, target, toolchain, cost) DO UPDATE SET {updates}{condition}"
        )
        values = _row_from_record(record)

        def upsert(db: sqlite3.Connection) -> bool:
            with _immediate_transaction(db):
                return db.execute(statement, values).rowcount == 1

        return self._run(upsert)

    def records(self) -> list[TuneRecord]:
        """Every stored record, newest first (then by kernel name and key)."""
        query = f"SELECT {', '.join(COLUMNS)} FROM tunings"

        def select_all(db: sqlite3.Connection) -> list[TuneRecord]:
            return [_record_from_row(row) for row in db.execute(query)]

        found = self._run(select_all)
        found.sort(key=lambda r: (r.kernel_name, *_key_values(r.key)))
        found.sort(key=lambda r: r.created_time, reverse=True)  # stable: ties keep the above
        return found

    def clear(self) -> int:
        """Removes every record; returns how many there were (set-aside files stay)."""

        def delete_all(db: sqlite3.Connection) -> int:
            with _immediate_transaction(db):
                return db.execute("DELETE FROM tunings").rowcount

        return self._run(delete_all)

    def _run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Runs `operation` on a fresh connection; a file found broken is recovered, once."""
        try:
            return self._attempt(operation)
        except sqlite3.DatabaseError as error:
            if not _needs_recovery(error):
                raise self._error(error) from error
        self._prepare()
        try:
            return self._attempt(operation)
        except sqlite3.DatabaseError as error:
            raise self._error(error) from error

    def _attempt(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        with _connect(self.path) as db:
            return operation(db)

    def _prepare(self) -> None:
        """Makes `path` a usable cache: creates it, or sets a broken file aside first."""
        _check_not_special(self.path)
        _make_directory(self.path.parent)
        try:
            with _exclusive_lock(self.path.with_name(self.path.name + ".lock")):
                problem = _diagnose(self.path)
                if problem is not None:
                    self._set_aside(*problem)
                _create_schema(self.path)
        except (OSError, sqlite3.Error) as error:
            raise self._error(error) from error

    def _set_aside(self, suffix: str, what: str) -> None:
        aside = _unused_name(self.path.with_name(self.path.name + suffix))
        os.rename(self.path, aside)
        for side in _SIDE_FILES:
            companion = self.path.with_name(self.path.name + side)
            if companion.exists():
                os.rename(companion, aside.with_name(aside.name + side))
        message = f"tune cache {self.path} {what}; set it aside as {aside.name}, started afresh"
        self.warn(_one_line(message))

    def _error(self, error: BaseException) -> TuneCacheError:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        return TuneCacheError(_one_line(f"tune cache {self.path}: {reason}"))


_KEY_MATCH = "kernel = ? AND target = ? AND toolchain = ? AND cost = ?"


def _key_values(key: CacheKey) -> tuple[str, str, str, str]:
    return (key.kernel, key.target, key.toolchain, key.cost)


def _row_from_record(record: TuneRecord) -> tuple[Any, ...]:
    variants = [
        {"knobs": dict(v.knobs), "time_us": v.time_us, "status": v.status, "detail": v.detail}
        for v in record.variants
    ]
    return (
        *_key_values(record.key),
        record.kernel_name,
        json.dumps(dict(record.knobs)),
        float(record.best_us),
        None if record.default_us is None else float(record.default_us),
        record.trials,
        float(record.seconds),
        record.seed,
        json.dumps(variants),
        record.created,
        record.stopped,
    )


class _UnreadableRow(sqlite3.DatabaseError):
    """A stored row that does not decode into a `TuneRecord` (a damaged file)."""


def _record_from_row(row: tuple[Any, ...]) -> TuneRecord:
    try:
        return _decode_row(row)
    except (ValueError, TypeError, KeyError) as error:
        raise _UnreadableRow(f"a stored record cannot be read ({error})") from error


def _decode_row(row: tuple[Any, ...]) -> TuneRecord:
    values = dict(zip(COLUMNS, row, strict=True))
    key = CacheKey(*(values.pop(name) for name in ("kernel", "target", "toolchain", "cost")))
    variants = tuple(Variant(**v) for v in json.loads(values.pop("variants")))
    knobs = json.loads(values.pop("knobs"))
    return TuneRecord(key=key, knobs=knobs, variants=variants, **values)


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection in autocommit mode (transactions are explicit), closed on exit."""
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        yield db
    finally:
        db.close()


@contextmanager
def _immediate_transaction(db: sqlite3.Connection) -> Iterator[None]:
    """`BEGIN IMMEDIATE` ... `COMMIT`, rolled back if the body raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    """Holds an exclusive lock on the file `path` (so one process at a time checks the cache)."""
    with open(path, "a") as handle:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def _check_not_special(path: Path) -> None:
    """Refuses a device or fifo (`/dev/full`): it cannot hold a database, and SQLite would
    first create its lock and WAL files beside it (in `/dev`), then fail to write, or set the
    device itself aside as corrupt. (A directory fails to open, in SQLite's words.)"""
    if path.exists() and not path.is_file() and not path.is_dir():
        raise TuneCacheError(
            _one_line(f"tune cache {path}: not a regular file (the cache is an SQLite database)")
        )


def _make_directory(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        reason = error.strerror or error
        raise TuneCacheError(
            _one_line(f"tune cache directory {directory} cannot be created: {reason}")
        ) from error


def _diagnose(path: Path) -> tuple[str, str] | None:
    """None if `path` is absent, empty or a usable cache; else (a suffix for it, what is wrong)."""
    if not path.exists():
        return None
    try:
        with _connect(path) as db:
            return _diagnose_database(db)
    except sqlite3.DatabaseError as error:
        if _is_corruption(error):
            return _corrupt(f"is unreadable ({error})")
        raise


def _diagnose_database(db: sqlite3.Connection) -> tuple[str, str] | None:
    tables = {
        name
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")
    }
    if not tables:
        return None
    if tables != _TABLES:
        return _corrupt(f"is another database (tables: {', '.join(sorted(tables))})")
    version = db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
    if version is None or not str(version[0]).isdigit():
        return _corrupt("has no schema version")
    found = int(version[0])
    upgradable = found == 1 and _columns(db) == COLUMNS[:-1]  # `_upgrade` adds `stopped`
    if found != SCHEMA_VERSION and not upgradable:
        return f".v{found}", f"has schema version {found} (this deplodock uses {SCHEMA_VERSION})"
    if not upgradable and _columns(db) != COLUMNS:
        return _corrupt("has a tunings table of another layout")
    check = [row[0] for row in db.execute("PRAGMA quick_check(1)")]
    if check != ["ok"]:
        return _corrupt(f"is damaged ({check[0] if check else 'no integrity report'})")
    (unreadable,) = db.execute(_UNREADABLE_ROWS).fetchone()
    if unreadable:
        return _corrupt(f"is damaged (unreadable JSON in {unreadable} of its rows)")
    return None


#: Counts the rows whose JSON columns do not parse as a knob object and a variant array.
_UNREADABLE_ROWS = (
    "SELECT count(*) FROM tunings WHERE CASE WHEN json_valid(knobs) AND json_valid(variants)"
    " THEN json_type(knobs) != 'object' OR json_type(variants) != 'array' ELSE 1 END"
)


def _columns(db: sqlite3.Connection) -> tuple[str, ...]:
    return tuple(row[1] for row in db.execute("PRAGMA table_info(tunings)"))


def _corrupt(what: str) -> tuple[str, str]:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f".corrupt-{stamp}", what


def _create_schema(path: Path) -> None:
    with _connect(path) as db:
        db.execute("PRAGMA journal_mode = WAL")
        with _immediate_transaction(db):
            for statement in _SCHEMA:
                db.execute(statement)
            db.execute(
                "INSERT OR IGNORE INTO meta (name, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            _upgrade(db)


def _upgrade(db: sqlite3.Connection) -> None:
    """A version 1 cache (`_diagnose` let through only one whose table lacks just `stopped`)
    made version 2 in place: its results stay, their `stopped` unknown ("")."""
    (version,) = db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
    if version == "1":
        db.execute("ALTER TABLE tunings ADD COLUMN stopped TEXT NOT NULL DEFAULT ''")
        db.execute(
            "UPDATE meta SET value = ? WHERE name = 'schema_version'", (str(SCHEMA_VERSION),)
        )


def _is_corruption(error: sqlite3.DatabaseError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def _needs_recovery(error: sqlite3.DatabaseError) -> bool:
    """A broken file, or one replaced or emptied behind this object's back."""
    return (
        _is_corruption(error)
        or isinstance(error, _UnreadableRow)
        or str(error).startswith("no such table")
    )


def _unused_name(path: Path) -> Path:
    """`path`, or `path-1`, `path-2`, ... : the first that does not exist (nothing is replaced)."""
    candidate, number = path, 0
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}-{number}")
    return candidate


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _as_schedule(knobs: Mapping[str, int]) -> Schedule:
    """A record's knobs as a `Schedule` (stored as a JSON object, so a mapping)."""
    if not isinstance(knobs, Mapping):
        raise ValueError(f"knobs must be a mapping of str to int, got {type(knobs).__name__}")
    return Schedule(knobs)


def _check_time(name: str, value: float) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")


def _check_created(created: str) -> None:
    try:
        moment = datetime.fromisoformat(created)
    except (TypeError, ValueError):
        raise ValueError(f"created must be an ISO-8601 time, got {created!r}") from None
    offset = moment.utcoffset()
    if offset is None or offset.total_seconds() != 0:
        raise ValueError(f"created must be in UTC, got {created!r}")
