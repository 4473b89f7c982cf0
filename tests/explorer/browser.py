"""Opens a page in a real headless Chromium (Debian's `/usr/bin/chromium`, driven by
Playwright) and records everything that would mean it is broken or not self-contained:
console errors and warnings, uncaught exceptions, and any request that is not for the
page's own file.

`python tests/explorer/browser.py` regenerates the screenshot the README shows
(`docs/images/explorer-rmsnorm.png`) from a fresh `compile --html`.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "docs" / "images" / "explorer-rmsnorm.png"
RMSNORM = "nn.RMSNorm(2048)(torch.randn(1,32,2048))"

#: Chromium as this machine's closed network needs it: no sandbox (root), no GPU, and no
#: background connections (each would be refused and logged).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_unavailable_reason() -> str | None:
    """Why the browser test cannot run here, or None."""
    if shutil.which("chromium") is None:
        return "Debian's chromium is not installed (apt-get install chromium; .ci/run does)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


@dataclass
class Problems:
    """What went wrong while the page was open."""

    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.console or self.errors or self.requests)


@contextmanager
def open_page(path: Path, width: int = 1400, height: int = 900) -> Iterator[tuple[Any, Problems]]:
    """A Playwright page showing `path`, and the problems recorded while it is open."""
    from playwright.sync_api import sync_playwright

    problems = Problems()
    url = path.resolve().as_uri()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on(
                "console",
                lambda m: (
                    problems.console.append(f"{m.type}: {m.text}")
                    if m.type in ("error", "warning")
                    else None
                ),
            )
            page.on("pageerror", lambda e: problems.errors.append(str(e)))
            page.on(
                "request",
                lambda r: problems.requests.append(r.url) if r.url.split("#")[0] != url else None,
            )
            page.goto(url)
            yield page, problems
        finally:
            browser.close()


def write_screenshot(html: Path, target: Path = SCREENSHOT) -> None:
    """The README's picture: RMSNorm's kernel, its modeled counters and its CUDA."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open_page(html, height=820) as (page, problems):
        page.click("#tabbutton-kernels")
        page.screenshot(path=str(target))
    if problems:
        raise RuntimeError(f"the page had problems: {problems}")


if __name__ == "__main__":
    import tempfile

    from deplodock.cli.main import main

    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "rmsnorm.html"
        if main(["compile", "-c", RMSNORM, "--html", str(page_path), "-o", f"{tmp}/r.cu"]):
            raise SystemExit("compile --html failed")
        write_screenshot(page_path)
    print(f"wrote {SCREENSHOT.relative_to(ROOT)}")
