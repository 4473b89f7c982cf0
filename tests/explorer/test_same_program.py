"""Issue #39 item 1: `compile --html` describes the program `-o` writes. It lowered through a
path of its own that skipped layer stamping and the tune cache (a tiny Qwen gave 24 launches
with `--html`, 27 without; a tuned kernel came out untuned); now the page's cuda stage is the
`-o` file byte for byte, for a stamped model and for a tuned kernel."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli.invoke import invoke
from tests.cli.test_bad_input import tiny_checkpoint
from tests.explorer.conftest import Page

EXPR = "F.silu(torch.randn(1, 16, 512)) * torch.randn(1, 16, 512)"


def _summary(stderr: str) -> str:
    """A model compile's summary without its timings (which vary from run to run)."""
    return re.sub(r"\d+\.\d+ s", "_ s", stderr)


def _stages(page: Path) -> dict[str, str]:
    data = Page(page, page.read_text(encoding="utf-8"), None).data  # type: ignore[arg-type]
    return {stage["name"]: stage["text"] for stage in data["stages"]}


def test_a_stamped_model_page_holds_the_program_o_writes(tmp_path: Path) -> None:
    model = tmp_path / "model"
    tiny_checkpoint(model, layers=2)
    common = ["compile", str(model), "--seq-len", "4"]
    plain = invoke("deplodock", [*common, "-o", str(tmp_path / "plain.cu")])
    assert plain.status == 0, plain.output
    page = tmp_path / "model.html"
    with_html = invoke("deplodock", [*common, "-o", str(tmp_path / "html.cu"), "--html", str(page)])
    assert with_html.status == 0, with_html.output
    written = (tmp_path / "plain.cu").read_text()
    assert (tmp_path / "html.cu").read_text() == written
    stages = _stages(page)
    assert stages["cuda"] == written
    assert _summary(with_html.stderr) == _summary(plain.stderr)  # launches, unique kernels
    loop = invoke("deplodock", [*common, "--ir", "loop"])
    assert loop.status == 0, loop.output
    assert stages["loop"] == loop.stdout  # each stage is what `--ir` prints of it


def test_a_tuned_kernel_page_holds_the_replayed_schedule(tmp_path: Path) -> None:
    db = str(tmp_path / "tune.db")
    tuned = invoke("deplodock", ["tune", "-c", EXPR, "--cache-db", db, "--trials", "6"])
    assert tuned.status == 0, tuned.output
    untuned = invoke("deplodock", ["compile", "-c", EXPR, "--no-tuned"]).stdout
    written = tmp_path / "tuned.cu"
    plain = invoke("deplodock", ["compile", "-c", EXPR, "--cache-db", db, "-o", str(written)])
    assert "tuned schedules replayed" in plain.stderr
    page = tmp_path / "tuned.html"
    result = invoke("deplodock", ["compile", "-c", EXPR, "--cache-db", db, "--html", str(page)])
    assert result.status == 0, result.output
    assert "tuned schedules replayed" in result.stderr
    assert _stages(page)["cuda"] == written.read_text() == result.stdout
    assert written.read_text() != untuned  # the schedule tuned is not the default one
    data = Page(page, page.read_text(encoding="utf-8"), None).data  # type: ignore[arg-type]
    assert any(note.startswith("tuned schedules replayed") for note in data["notes"])
