"""The explorer page in a real headless Chromium: it loads with no console error and no
request for anything but itself, each tab renders, and a kernel links back to its loop nest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.explorer.browser import chromium_unavailable_reason, open_page
from tests.explorer.conftest import Page

#: How long a check waits for the page to render after a click (tabs render on `hashchange`,
#: which the browser delivers after the click returns).
WAIT_MS = 10_000

#: A real Chromium takes seconds to start and render each tab: slow (issue #39).
pytestmark = [
    pytest.mark.skipif(
        chromium_unavailable_reason() is not None, reason=str(chromium_unavailable_reason())
    ),
    pytest.mark.slow,
]


def expect(locator: Any) -> Any:
    """Playwright's retrying assertions (imported here: the module loads without it)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def test_each_tab_renders_without_errors(rmsnorm_page: Page, tmp_path: Path) -> None:
    with open_page(rmsnorm_page.path) as (page, problems):
        assert page.title().startswith("deplodock: -c nn.RMSNorm")
        assert page.locator("#tab-overview table a", has_text="rms_norm_kernel").count() == 1
        assert "MODELED" in page.locator("#tab-overview").inner_text()

        page.click("#tabbutton-stages")
        panes = page.locator("#tab-stages .split pre.code")
        expect(panes).to_have_count(2, timeout=WAIT_MS)
        assert panes.nth(1).inner_text().count("\n") > 10

        page.click("#tabbutton-passes")
        passes = page.locator("#tab-passes details.pass")
        expect(passes).to_have_count(len(rmsnorm_page.data["passes"]), timeout=WAIT_MS)
        passes.first.locator("summary").click()
        passes.first.locator(".ln.add, .ln.del").first.wait_for(timeout=5000)  # on toggle
        page.fill("#tab-passes input", "no-such-pass-anywhere")
        expect(page.locator("#tab-passes details.pass:visible")).to_have_count(0, timeout=WAIT_MS)

        page.click("#tabbutton-kernels")
        code = page.locator("#tab-kernels pre.code")
        expect(code).to_contain_text("__global__", timeout=WAIT_MS)
        page.click("#tab-kernels .pills button")  # the first level: loop nest
        expect(code).to_contain_text("loop.kernel @rms_norm_kernel", timeout=WAIT_MS)
        page.screenshot(path=str(tmp_path / "kernels.png"))
    assert not problems, problems


def test_a_kernel_links_back_to_its_loop_nest(rmsnorm_page: Page) -> None:
    with open_page(rmsnorm_page.path) as (page, problems):
        page.click("#tabbutton-kernels")
        page.click("text=open its loop nest")
        marked = page.locator("#tab-stages .ln.mark")
        expect(marked).to_have_count(1, timeout=WAIT_MS)
        assert page.url.endswith("#stages/loop/@rms_norm_kernel")
        expect(marked).to_contain_text("loop.kernel @rms_norm_kernel(")
        expect(marked).to_be_visible()
    assert not problems, problems
