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
    """Writes `data` to `path` through a temporary file in the same directory and a rename."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
