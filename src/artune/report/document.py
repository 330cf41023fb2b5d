"""A tiny document model rendered both as Markdown and as HTML, so the two reports never disagree."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Heading:
    """A section title (``level`` 1-3)."""

    text: str
    level: int = 2


@dataclass(frozen=True)
class Para:
    """A paragraph of plain text."""

    text: str


@dataclass(frozen=True)
class Alert:
    """A paragraph the reader must not miss (bold, and red in HTML)."""

    text: str


@dataclass(frozen=True)
class Bullets:
    """A bulleted list."""

    items: tuple[str, ...]


@dataclass(frozen=True)
class Grid:
    """A table: a header row and rows of cells (text)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Image:
    """A picture next to the report (``path`` relative to it)."""

    path: str
    alt: str


Block = Heading | Para | Alert | Bullets | Grid | Image


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: Sequence[Block]) -> str:
    """The document as GitHub-flavoured Markdown."""
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append("#" * block.level + " " + block.text)
        elif isinstance(block, Para):
            out.append(block.text)
        elif isinstance(block, Alert):
            out.append(f"> **{block.text}**")
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {item}" for item in block.items))
        elif isinstance(block, Grid):
            lines = ["| " + " | ".join(_md_cell(h) for h in block.header) + " |"]
            lines.append("|" + "|".join("---" for _ in block.header) + "|")
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows]
            out.append("\n".join(lines))
        elif isinstance(block, Image):
            out.append(f"![{block.alt}]({block.path})")
    return "\n\n".join(out) + "\n"


_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;"
    "text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}"
    "img{max-width:100%}code{background:#f4f4f4}.alert{color:#b00;border-left:4px solid #b00;padding-left:.6em}"
)


def to_html(blocks: Sequence[Block], title: str) -> str:
    """The document as one self-contained HTML page (images referenced by relative path)."""
    out = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>',
        f"<style>{_STYLE}</style></head><body>",
    ]
    for block in blocks:
        if isinstance(block, Heading):
            level = min(max(block.level, 1), 6)
            out.append(f"<h{level}>{html.escape(block.text)}</h{level}>")
        elif isinstance(block, Para):
            out.append(f"<p>{html.escape(block.text)}</p>")
        elif isinstance(block, Alert):
            out.append(f'<p class="alert"><strong>{html.escape(block.text)}</strong></p>')
        elif isinstance(block, Bullets):
            out.append("<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, Grid):
            head = "".join(f"<th>{html.escape(h)}</th>" for h in block.header)
            rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in block.rows)
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(block, Image):
            out.append(f'<p><img src="{html.escape(block.path)}" alt="{html.escape(block.alt)}"></p>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"
