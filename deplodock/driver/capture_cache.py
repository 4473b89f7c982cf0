"""A warm `deplodock compile -c EXPR`: the captured torch-level program, kept on disk.

Capturing an expression costs about 4 s, nearly all of it importing torch and
`torch.export`; lowering it costs a fraction of a second. Someone iterating on a pass compiles
the same expression again and again, so the torch-level module is cached as text under
`$XDG_CACHE_HOME/deplodock/captures/` and a later compile of the same expression parses it
instead, without importing torch at all (`tests/cli/test_startup.py`).

The key is everything that can change the capture: the expression, the seed, the torch and
xDSL versions, and the source of deplodock's frontend and dialects (an edit to a pass does
not invalidate it; an edit to an aten handler does). Only `compile` uses the cache: `run`
needs the PyTorch module itself, as its reference. A cache that cannot be read or written is
skipped silently, as if empty.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from deplodock.files import cache_root, write_atomic

#: The packages whose source decides what a capture produces.
CAPTURE_SOURCES = ("frontend", "dialects")

_PACKAGE = Path(__file__).resolve().parents[1]


@cache
def _source_digest() -> str:
    digest = hashlib.sha256()
    for package in CAPTURE_SOURCES:
        for path in sorted((_PACKAGE / package).rglob("*.py")):
            digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "none"


def cache_path(code: str, seed: int) -> Path:
    """Where the torch-level module of `code` (captured with `seed`) is kept."""
    parts = (code, str(seed), _version("torch"), _version("xdsl"), _source_digest())
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]
    return cache_root() / "captures" / f"{key}.mlir"


def load_cached(code: str, seed: int) -> str | None:
    """The cached torch-level text of `code`, or None."""
    try:
        return cache_path(code, seed).read_text()
    except (OSError, UnicodeDecodeError):
        return None


def store(code: str, seed: int, torch_level_text: str) -> None:
    """Keeps the torch-level text of `code` for the next compile (best effort)."""
    path = cache_path(code, seed)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, torch_level_text)
    except OSError:
        pass
