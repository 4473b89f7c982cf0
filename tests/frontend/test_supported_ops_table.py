"""`docs/supported-ops.md` is the table `supported_ops_markdown()` generates from the aten
table: adding, removing or re-routing a handler without regenerating it fails here."""

from __future__ import annotations

from pathlib import Path

from deplodock.frontend.aten import HANDLERS
from deplodock.frontend.aten.table import supported_ops_markdown

TABLE = Path(__file__).resolve().parents[2] / "docs" / "supported-ops.md"


def test_the_table_in_docs_is_up_to_date():
    assert TABLE.read_text() == supported_ops_markdown(), (
        "docs/supported-ops.md is stale: regenerate it with the command at its top"
    )


def test_every_handled_aten_op_has_a_row():
    text = supported_ops_markdown().split("## Core ATen coverage")[0]
    rows = [line for line in text.splitlines() if line.startswith("| `aten.")]
    assert len(rows) == len([t for t in HANDLERS if "aten." in str(t)])
    assert "| `aten.argmax.default` | `torch.argmax`, `torch.reshape` |" in rows
