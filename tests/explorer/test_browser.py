"""The explorer page in a real headless Chromium: it loads with no console error and no
request for anything but itself, each tab renders, and a kernel links back to its loop nest."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.explorer.browser import chromium_unavailable_reason, open_page
from tests.explorer.conftest import Page

pytestmark = pytest.mark.skipif(
    chromium_unavailable_reason() is not None, reason=str(chromium_unavailable_reason())
)


def test_each_tab_renders_without_errors(rmsnorm_page: Page, tmp_path: Path) -> None:
    with open_page(rmsnorm_page.path) as (page, problems):
        assert page.title().startswith("deplodock: -c nn.RMSNorm")
        assert page.locator("#tab-overview table a", has_text="rms_norm_kernel").count() == 1
        assert "MODELED" in page.locator("#tab-overview").inner_text()

        page.click("#tabbutton-stages")
        panes = page.locator("#tab-stages .split pre.code")
        assert panes.count() == 2
        assert panes.nth(1).inner_text().count("\n") > 10

        page.click("#tabbutton-passes")
        passes = page.locator("#tab-passes details.pass")
        assert passes.count() == len(rmsnorm_page.data["passes"])
        passes.first.locator("summary").click()
        passes.first.locator(".ln.add, .ln.del").first.wait_for(timeout=5000)  # on toggle
        page.fill("#tab-passes input", "no-such-pass-anywhere")
        assert page.locator("#tab-passes details.pass:visible").count() == 0

        page.click("#tabbutton-kernels")
        code = page.locator("#tab-kernels pre.code")
        assert "__global__" in code.inner_text()
        page.click("#tab-kernels .pills button", timeout=5000)  # the first level: loop nest
        assert "loop.kernel @rms_norm_kernel" in code.inner_text()
        page.screenshot(path=str(tmp_path / "kernels.png"))
    assert not problems, problems


def test_a_kernel_links_back_to_its_loop_nest(rmsnorm_page: Page) -> None:
    with open_page(rmsnorm_page.path) as (page, problems):
        page.click("#tabbutton-kernels")
        page.click("text=open its loop nest")
        assert page.url.endswith("#stages/loop/@rms_norm_kernel")
        marked = page.locator("#tab-stages .ln.mark")
        assert marked.count() == 1
        assert "loop.kernel @rms_norm_kernel(" in marked.inner_text()
        assert marked.is_visible()
    assert not problems, problems
