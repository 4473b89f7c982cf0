"""One `compile --html` of RMSNorm, shared by the explorer's tests (it builds with nvcc)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cli.invoke import Result, invoke
from tests.explorer.browser import RMSNORM

DATA = re.compile(r'<script id="exploration" type="application/json">(.*?)</script>', re.DOTALL)


@dataclass(frozen=True)
class Page:
    path: Path
    html: str
    compile: Result

    @property
    def data(self) -> dict[str, Any]:
        match = DATA.search(self.html)
        assert match is not None, "the page has no exploration data"
        return json.loads(match[1])


@pytest.fixture(scope="session")
def rmsnorm_page(tmp_path_factory: pytest.TempPathFactory) -> Page:
    path = tmp_path_factory.mktemp("explorer") / "rmsnorm.html"
    result = invoke("deplodock", ["compile", "-c", RMSNORM, "--ir", "tile", "--html", str(path)])
    assert result.status == 0, result.output
    return Page(path, path.read_text(encoding="utf-8"), result)
