"""The documentation site builds strictly, one page renders in headless Chromium, and the results pages say how.

The build needs the ``docs`` extra (``make docs`` installs it) and skips without it; the render check needs
Debian's ``chromium`` (``apt-get install -y chromium``) and skips, saying so, where it is absent, as
``bench/render_reviews.py`` does for the review pages.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BUILD_TIMEOUT_S = 300
BROWSER_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        pytest.importorskip(module, reason="the docs extra is not installed: pip install -e .[docs] (make docs)")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return out


def test_the_site_builds_strictly_with_every_page(site: Path) -> None:
    for page in DOCS.rglob("*.md"):
        rel = page.relative_to(DOCS).with_suffix("")
        built = site / rel.parent / "index.html" if rel.name == "index" else site / rel / "index.html"
        assert built.is_file(), f"{page} was not built"
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    # the reference is generated from the docstrings, not written by hand
    assert 'id="artune.communicator.Communicator.all_reduce"' in api
    assert 'id="artune.findings.parse_codes"' in api


def test_a_page_renders_in_chromium(site: Path, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium): the page was not render-checked")
    page = (site / "tables" / "index.html").as_uri()
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1200,1600"]
    dom = subprocess.run(
        [*flags, "--dump-dom", page], capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S, check=False
    ).stdout
    # the page as the browser built it: its title, the field tables, the site's navigation and search
    assert '<h1 id="the-table-format">' in dom
    assert re.search(r"<table>.*?<code>inherited_from</code>", dom, re.S)
    assert "Finding codes" in dom and 'data-md-component="search' in dom
    png = tmp_path / "tables.png"
    subprocess.run([*flags, f"--screenshot={png}", page], capture_output=True, timeout=BROWSER_TIMEOUT_S, check=False)
    assert png.is_file(), "chromium wrote no screenshot"
    import matplotlib.image

    pixels = matplotlib.image.imread(png)
    assert pixels.shape[:2] == (1600, 1200)
    assert pixels.std() > 0.05, "the screenshot is blank"


def test_every_results_page_names_its_command_and_machine() -> None:
    pages = [p for p in (DOCS / "results").glob("*.md") if p.name != "index.md"]
    assert len(pages) >= 10
    index = (DOCS / "results" / "index.md").read_text(encoding="utf-8")
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "Machine:" in text, f"{page.name} does not say which machine"
        assert re.search(r"[Cc]ommands?\b.{0,120}?`", text, re.S), f"{page.name} does not give its command"
        assert f"]({page.name})" in index, f"docs/results/index.md does not link {page.name}"


def test_every_docs_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in DOCS.rglob("*.md"):
        assert str(page.relative_to(DOCS)) in nav, f"{page} is not in mkdocs.yml's nav"
