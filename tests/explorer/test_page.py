"""`compile --html`: what the explorer page holds, that it needs nothing from outside, and
that its errors are one line."""

from __future__ import annotations

import re
from pathlib import Path

from deplodock.backend import nvcc
from deplodock.explorer import Exploration, render_page
from deplodock.explorer.collect import StageView
from deplodock.passes import DEPLODOCK_PASSES
from deplodock.passes.pipelines import STAGES
from deplodock.perf.model import TERMS
from tests.cli.invoke import assert_one_line_error, invoke
from tests.explorer.browser import RMSNORM
from tests.explorer.conftest import DATA, Page


def test_stdout_is_what_ir_asks_for_as_without_html(rmsnorm_page: Page) -> None:
    plain = invoke("deplodock", ["compile", "-c", RMSNORM, "--ir", "tile"])
    assert plain.status == 0
    assert rmsnorm_page.compile.stdout == plain.stdout


def test_every_stage_is_the_text_compile_prints_at_that_stage(rmsnorm_page: Page) -> None:
    stages = rmsnorm_page.data["stages"]
    assert [s["name"] for s in stages] == list(STAGES)
    for stage in ("tensor", "loop", "cuda"):
        printed = invoke("deplodock", ["compile", "-c", RMSNORM, "--ir", stage]).stdout
        assert next(s["text"] for s in stages if s["name"] == stage) == printed


def test_passes_carry_their_stage_and_a_diff(rmsnorm_page: Page) -> None:
    passes = rmsnorm_page.data["passes"]
    assert len(passes) >= 5
    assert {p["stage"] for p in passes} <= set(STAGES[1:])
    assert {"loop", "tile", "kernel"} <= {p["stage"] for p in passes}
    names = set(DEPLODOCK_PASSES)
    for change in passes:
        assert re.match(r"[\w-]+", change["spec"])[0] in names, change["spec"]
        assert change["diff"].startswith("@@"), change["spec"]
        assert re.search(r"^[+-]", change["diff"], re.MULTILINE), change["spec"]


def test_the_kernel_from_its_loop_nest_to_cuda(rmsnorm_page: Page) -> None:
    (kernel,) = rmsnorm_page.data["kernels"]
    assert kernel["name"] == "rms_norm_kernel"
    assert (kernel["grid"], kernel["block"], kernel["launches"]) == (32, 256, 1)
    assert kernel["levels"]["loop"].startswith("loop.kernel @rms_norm_kernel(")
    assert kernel["levels"]["tile"].startswith("tile.kernel @rms_norm_kernel(")
    assert kernel["levels"]["kernel"].startswith("kernel.func @rms_norm_kernel(")
    assert "__global__" in kernel["cuda"] and " rms_norm_kernel(" in kernel["cuda"]


def test_ptxas_report_and_modeled_time(rmsnorm_page: Page) -> None:
    (kernel,) = rmsnorm_page.data["kernels"]
    notes = rmsnorm_page.data["notes"]
    if nvcc.nvcc_available():
        assert kernel["ptxas"]["registers"] > 0
        assert kernel["ptxas"]["shared_bytes"] >= 4 * 8  # one partial per warp
        assert any(note.startswith("ptxas: nvcc") for note in notes)
    else:
        assert kernel["ptxas"] is None
    model = kernel["model"]
    assert model["modeled_us"] > 0 and model["limiter"] in TERMS
    assert model["grid"] == 32 and model["block"] == 256
    assert any("MODELED" in note and "not measured" in note for note in notes)


def test_the_page_fetches_nothing(rmsnorm_page: Page) -> None:
    html = rmsnorm_page.html
    for outside in ("<link", " src=", "url(", "@import", "fetch(", "XMLHttpRequest", "http"):
        assert outside not in html.replace(DATA.search(html)[1], ""), outside


def test_ir_text_cannot_end_the_data_script_early() -> None:
    hostile = '</script><script>alert("x")</script> & <!--'
    exploration = Exploration("t", hostile, [StageView("torch", hostile, 0.0)])
    page = render_page(exploration)
    assert page.count("</script>") == 2  # the data's and the code's own
    data = Page(Path("-"), page, None).data  # type: ignore[arg-type]
    assert data["source"] == hostile and data["stages"][0]["text"] == hostile


def test_a_template_slot_in_the_source_stays_text() -> None:
    page = render_page(Exploration("{{css}}", "{{js}} {{data}}"))
    assert page.count("use strict") == 1
    assert "{{js}} {{data}}" in page


def test_a_file_below_torch_starts_at_its_own_stage(tmp_path: Path) -> None:
    tile = tmp_path / "rms.tile.mlir"
    result = invoke("deplodock", ["compile", "-c", RMSNORM, "--ir", "tile", "-o", str(tile)])
    assert result.status == 0
    page = tmp_path / "rms.html"
    result = invoke("deplodock", ["compile", str(tile), "--ir", "kernel", "--html", str(page)])
    assert result.status == 0, result.output
    data = Page(page, page.read_text(), result).data
    assert [s["name"] for s in data["stages"]] == ["tile", "kernel", "cuda"]
    assert data["source"] == tile.read_text()
    assert list(data["kernels"][0]["levels"]) == ["kernel"]


def test_html_errors_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "page.html"
    result = invoke("deplodock", ["compile", "-c", RMSNORM, "--html", str(missing)])
    assert_one_line_error(result, "--html", "no directory")
    result = invoke("deplodock", ["compile", "-c", RMSNORM, "--html", str(tmp_path)])
    assert_one_line_error(result, "--html", "is a directory")
    tile = tmp_path / "rms.tile.mlir"
    invoke("deplodock", ["compile", "-c", RMSNORM, "--ir", "tile", "-o", str(tile)])
    page = tmp_path / "page.html"
    result = invoke("deplodock", ["compile", str(tile), "--ir", "loop", "--html", str(page)])
    assert_one_line_error(result, "already at stage 'tile'")
    assert not page.exists()
