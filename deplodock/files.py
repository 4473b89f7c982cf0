"""The file-system rules every writer in deplodock follows.

Caches live under one root (`$XDG_CACHE_HOME/deplodock`, `~/.cache/deplodock` by default),
and every output file (`-o`, `--html`, `--report`, cache entries, bench results) goes through
`write_atomic`: a regular file is replaced atomically (a temporary beside the target, then a
rename), so a reader (another process, a later run after a crash) never sees half a file and
a failed write leaves the previous file as it was; a device or a pipe (`-o /dev/stdout`) is
written in place. Either way a failure of write, flush, fsync or close is an error
(`WriteError`), never a silent success.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class WriteError(OSError):
    """An output file that could not be written; its text is the one line a user sees,
    `cannot write PATH: REASON` (the path as given, never the temporary's)."""

    def __init__(self, path: Path | str, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause))
        self.path = Path(path)

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.strerror}"


def cache_root() -> Path:
    """`$XDG_CACHE_HOME/deplodock`, else `~/.cache/deplodock`."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "deplodock"


def write_atomic(path: Path, data: bytes | str) -> None:
    """Writes `data` to `path`, or raises `WriteError` with the previous file untouched.

    A regular file (or a new one) is replaced through a temporary in the same directory: it
    looks as a plain `open(path, "w")` would leave it (a symlink is written through, its
    target replaced and the link kept; the file keeps its mode, or for a new file gets the
    umask's). A file that exists and is not regular (`/dev/full`, `/dev/null`, a fifo) is
    written in place: there is nothing to replace, and a temporary in `/dev` would either be
    refused or, for root, replace the device itself.
    """
    payload = data.encode() if isinstance(data, str) else data
    try:
        if _is_special(path):
            _write_in_place(path, payload)
        else:
            _replace(Path(os.path.realpath(path)), payload)
    except OSError as error:
        raise WriteError(path, error) from None


def _is_special(path: Path) -> bool:
    """`path` (symlinks followed) exists and is neither a regular file nor a directory."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _write_in_place(path: Path, payload: bytes) -> None:
    """Writes a device or fifo directly; closing flushes, so its error surfaces too."""
    with open(path, "wb") as f:
        f.write(payload)
        f.flush()


def _replace(path: Path, payload: bytes) -> None:
    """Writes a temporary beside `path` (flushed and fsynced, so a full disk fails here and
    not after the rename), then renames it over `path`; on any failure it is removed."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
            os.chmod(f.fileno(), _mode_for(path))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _mode_for(path: Path) -> int:
    """The permission bits `path` has, else those a new file gets under the current umask."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
