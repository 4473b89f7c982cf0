"""`docs/ir.md` cannot drift from the code: every `mlir` example in it is a complete module
that parses, verifies and prints back unchanged, and every `deplodock/...` path the docs name
exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import parse

ROOT = Path(__file__).resolve().parent.parent
IR_REFERENCE = ROOT / "docs" / "ir.md"
MLIR_BLOCK = re.compile(r"```mlir\n(?P<text>.*?)```", re.DOTALL)
NAMED_PATH = re.compile(r"`(deplodock/[\w./-]+)`")
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _examples() -> list[str]:
    return [m["text"] for m in MLIR_BLOCK.finditer(IR_REFERENCE.read_text())]


def test_the_reference_has_an_example_per_dialect():
    prefixes = {"torch.", "tensor.", "loop.", "tile.", "kernel.", "cuda."}
    seen = {p for p in prefixes for text in _examples() if f" {p}" in text or f"= {p}" in text}
    assert seen == prefixes


@pytest.mark.parametrize("number", range(len(_examples())))
def test_example_parses_verifies_and_round_trips(number: int):
    text = _examples()[number]
    module = parse(text)  # parses and verifies
    assert str(module) + "\n" == text


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_paths_exist(document: Path):
    missing = [p for p in NAMED_PATH.findall(document.read_text()) if not (ROOT / p).exists()]
    assert not missing, f"{document.name} names files that do not exist: {missing}"
