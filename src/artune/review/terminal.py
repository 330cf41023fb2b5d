"""The review on a terminal: the page rendered by rich to the terminal's width, without its HTML.

The Markdown page (``artune.review.markdown``) folds its sections in
``<details>`` for GitHub; a terminal shows every section under its title
instead, and rich renders the rest (headings, lists, code, tables) to the
width given, so no line runs past the terminal's edge. Colour only where the
output is a terminal.
"""

from __future__ import annotations

import io
import re

from rich.console import Console
from rich.markdown import Markdown

from artune.review.markdown import render_markdown
from artune.review.types import Review

_SUMMARY = re.compile(r"^<summary>(.*)</summary>$")


def without_html(page: str) -> str:
    """The Markdown page with each folded section as a heading: no ``<details>``, ``<summary>``."""
    out = []
    for line in page.splitlines():
        if line.startswith("<details") or line == "</details>":
            continue
        found = _SUMMARY.match(line)
        out.append(f"### {found[1]}" if found else line)
    return "\n".join(out) + "\n"


def render_text(review: Review, width: int = 100, colour: bool = False) -> str:
    """The review as a terminal shows it, ``width`` characters wide at most."""
    console = Console(
        file=io.StringIO(), width=width, force_terminal=colour, no_color=not colour, highlight=False, emoji=False
    )
    console.print(Markdown(without_html(render_markdown(review)), code_theme="ansi_dark", hyperlinks=False))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
