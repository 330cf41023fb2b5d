"""Render review pages as a reader sees them: Markdown to HTML (the ``markdown`` package), then a screenshot.

    python bench/render_reviews.py [PAGE.md ...] [--out DIR] [--no-screenshot] [--regenerate]

``--regenerate`` first rewrites the kept reviews (``KEPT``: ``artune review
BEFORE AFTER`` of released engines, whose wheels it downloads and caches)
into ``docs/reviews/`` and prints, per page, the line of its verdict and the
lines outside its ``<details>`` sections (what a reader sees before opening
any); tests/test_review.py holds them current. Default pages:
``docs/reviews/*.md``. Writes ``DIR/NAME.html`` (default
``/tmp/artune-reviews``) with GitHub-like styling, and, where ``chromium`` is
installed, ``DIR/NAME.png`` from headless Chromium at 1200 px wide. It also
prints, per page, what reads badly in the source: lines over 120 columns
(tables excepted) and tables whose rows are not as wide as their header.
``markdown`` is a bench-only dependency: ``pip install markdown``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CSS = (
    "body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:980px;margin:24px auto;"
    "line-height:1.5;font-size:15px;color:#1f2328}code{background:#eff1f3;padding:.1em .3em;border-radius:4px;"
    "font-size:85%}table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #d0d7de;padding:4px 10px}"
    "th{background:#f6f8fa}h1,h2{border-bottom:1px solid #d8dee4}"
)
SCREENSHOT_TIMEOUT_S = 120
#: the kept reviews: (BEFORE, AFTER, page under docs/reviews)
KEPT = (
    ("vllm==0.26.0", "vllm==0.27.0", "vllm-0.26.0-to-0.27.0.md"),
    ("sglang==0.5.18", "sglang==0.5.19", "sglang-0.5.18-to-0.5.19.md"),
    ("vllm==0.25.0", "vllm==0.33.0", "vllm-0.25.0-to-0.33.0.md"),
    ("vllm==0.28.0", "vllm==0.33.0", "vllm-0.28.0-to-0.33.0.md"),
    ("sglang==0.5.20", "sglang==0.5.23", "sglang-0.5.20-to-0.5.23.md"),
)


def regenerate() -> None:
    """Rewrite each kept review as ``artune review BEFORE AFTER`` prints it now."""
    from artune.review import build_review, open_side, render_markdown
    from artune.review.markdown import outside_details

    for before, after, page in KEPT:
        review = build_review(open_side("BEFORE", before), open_side("AFTER", after))
        text = render_markdown(review)
        (ROOT / "docs" / "reviews" / page).write_text(text, encoding="utf-8")
        verdict = next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith("**Verdict: "))
        print(
            f"docs/reviews/{page}: {review.verdict.value}, {len(review.ranked)} questions; verdict on line "
            f"{verdict}, {len(outside_details(text))} lines outside <details>, {len(text.splitlines())} in all"
        )


def problems(text: str) -> list[str]:
    """Lines over 120 columns outside tables, and tables with rows of unequal width."""
    lines = enumerate(text.splitlines(), 1)
    out = [f"line {i}: {len(line)} columns" for i, line in lines if len(line) > 120 and not line.startswith("|")]
    for block in text.split("\n\n"):
        rows = [r for r in block.splitlines() if r.startswith("|")]
        widths = {len(re.split(r"(?<!\\)\|", r)) for r in rows}
        if len(widths) > 1:
            out.append(f"table starting {rows[0][:40]!r}: rows of {sorted(widths)} cells")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=Path("/tmp/artune-reviews"))
    parser.add_argument("--no-screenshot", action="store_true")
    parser.add_argument("--regenerate", action="store_true", help="rewrite docs/reviews/ from the released engines")
    args = parser.parse_args()
    if args.regenerate:
        regenerate()
    try:
        import markdown
    except ModuleNotFoundError:
        print("render_reviews: HTML needs the markdown package: pip install markdown", file=sys.stderr)
        return 0 if args.regenerate else 2
    pages = args.pages or sorted((ROOT / "docs" / "reviews").glob("*.md"))
    args.out.mkdir(parents=True, exist_ok=True)
    browser = None if args.no_screenshot else shutil.which("chromium") or shutil.which("chromium-browser")
    for page in pages:
        text = page.read_text(encoding="utf-8")
        body = markdown.markdown(text, extensions=["tables", "md_in_html"])  # <details markdown="1">
        html = args.out / f"{page.stem}.html"
        html.write_text(f"<html><head><meta charset='utf-8'><style>{CSS}</style></head><body>{body}</body></html>")
        found = problems(text)
        print(f"{page}: {html}" + "".join(f"\n  {p}" for p in found))
        if browser:
            png = args.out / f"{page.stem}.png"
            command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
            command += [f"--screenshot={png}", "--window-size=1200,2000", html.as_uri()]
            done = subprocess.run(command, capture_output=True, text=True, timeout=SCREENSHOT_TIMEOUT_S, check=False)
            print(f"  {png}" if png.exists() else f"  no screenshot: {done.stderr.strip()[-200:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
