"""The two file-system rules every writer in deplodock follows.

Caches live under one root (`$XDG_CACHE_HOME/deplodock`, `~/.cache/deplodock` by default),
and files are replaced atomically (a temporary beside the target, then a rename), so a
reader (another process, a later run after a crash) never sees half a file and a failed
write leaves the previous file as it was.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_root() -> Path:
    """`$XDG_CACHE_HOME/deplodock`, else `~/.cache/deplodock`."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "deplodock"


def write_atomic(path: Path, data: bytes | str) -> None:
    """Writes `data` to `path` through a temporary file in the same directory and a rename.

    The result looks as a plain `open(path, "w")` would leave it: a symlink is written
    through (its target replaced, the link kept), and the file gets the mode it had, or for a
    new file the umask's (the temporary's own mode is always 0600).
    """
    path = Path(os.path.realpath(path))
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
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
