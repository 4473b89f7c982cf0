"""The pipeline explorer as one self-contained HTML file: no server, no network, offline.

The page is three files of this package pasted together: `page.html` (the skeleton),
`page.css` and `page.js`, plus the exploration as JSON in a `<script type=
"application/json">` element that the script reads and renders with `textContent` (so IR
text never becomes markup). Nothing is fetched: no fonts, no CDN, no images.
"""

from __future__ import annotations

import html
import json
import re
from importlib.resources import files

from deplodock.explorer.collect import Exploration

_PACKAGE = files("deplodock.explorer")

#: A slot of the skeleton: `{{title}}`, `{{css}}`, `{{data}}`, `{{js}}`.
_SLOT = re.compile(r"\{\{(title|css|data|js)\}\}")


def _asset(name: str) -> str:
    return _PACKAGE.joinpath(name).read_text(encoding="utf-8")


def _script_safe_json(data: object) -> str:
    """JSON that cannot end its `<script>` element early: `<`, `>` and `&` are escaped as
    JSON unicode escapes, which `JSON.parse` reads back unchanged."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(exploration: Exploration) -> str:
    """The whole page as text, ready to be written to `--html FILE`."""
    parts = {
        "title": html.escape(f"deplodock: {exploration.title}"),
        "css": _asset("page.css"),
        "data": _script_safe_json(exploration.as_json()),
        "js": _asset("page.js"),
    }
    # One pass over the skeleton: a `{{...}}` inside the inserted text is left as it is.
    return _SLOT.sub(lambda match: parts[match[1]], _asset("page.html"))
