"""The pipeline explorer: `deplodock compile ... --html FILE` writes one self-contained page
with the source, every stage's IR side by side with the one before, each pass's diff, and
each kernel from its loop nest to its CUDA source with ptxas's report and modeled time.

`collect.explore` gathers the data in one lowering; `page.render_page` turns it into HTML.
"""

from deplodock.explorer.collect import Exploration, explore
from deplodock.explorer.page import render_page

__all__ = ["Exploration", "explore", "render_page"]
