"""Every command in README.md runs as written, in a temporary folder; the README stays short and undated.

The README's ``python`` block is saved as ``app.py`` and its ``toml`` block as ``my-table.toml``, as the README
tells the reader to, and each line of its ``sh`` blocks is run, each in a folder of its own (a line that reads
what an earlier one wrote runs after it, in its folder): a test each, so the suite's workers share them. Three
kinds of command are not run in full, because they would measure this machine for a minute or more, or run this
suite inside itself: ``artune tune``/``verify``/``bench`` run with ``--help``, and ``make TARGET`` runs as
``make -n TARGET`` (the recipe resolves; ``make docs`` is built for real by ``tests/test_docs.py``).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MEASURING = {("artune", "tune"), ("artune", "verify"), ("artune", "bench")}
# exit 1 is a documented answer of these: findings (check), differences (diff), questions (review)
MAY_FIND = {("artune", "check"), ("artune", "diff"), ("artune", "review")}
COMMAND_TIMEOUT_S = 600


def blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced code block."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S)]


def commands(text: str) -> list[list[str]]:
    """Every command line of the ``sh`` blocks, comments dropped."""
    out = []
    for language, body in blocks(text):
        if language == "sh":
            out += [words for line in body.splitlines() if (words := shlex.split(line, comments=True))]
    return out


def as_run(words: list[str]) -> tuple[list[str], Path]:
    """The command as the test runs it, and where: the README's folder for make and the test suite."""
    if words[0] == "make":
        return ["make", "-n", *words[1:]], ROOT
    if tuple(words[:2]) in MEASURING:
        return [*words[:2], "--help"], Path()
    if words[0] == ".venv/bin/python":
        python = ROOT / words[0]
        return [str(python if python.exists() else sys.executable), *words[1:]], ROOT
    return words, Path()


def test_the_readme_is_for_users() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "a dated run: it belongs in docs/results/"
    for history in ("earlier version", "used to", "last stop", "today", "not yet run on a gpu:"):
        assert history not in text.lower(), f"history ({history!r}): it belongs in CHANGELOG.md"


def test_the_readme_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing


def units(text: str) -> list[list[list[str]]]:
    """The commands in runs that must share a folder: one per command, except that a command reading what an
    earlier one of its block wrote (``--out PATH``) runs after it, in its run."""
    out: list[list[list[str]]] = []
    for language, body in blocks(text):
        if language != "sh":
            continue
        written: list[str] = []
        for line in body.splitlines():
            words = shlex.split(line, comments=True)
            if not words:
                continue
            reads = any(w == p or w.startswith(p.rstrip("/") + "/") for w in words for p in written)
            if reads and out:
                out[-1].append(words)
            else:
                out.append([words])
            written += [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--out"]
    return out


def test_the_readme_has_the_commands_a_user_needs() -> None:
    text = README.read_text(encoding="utf-8")
    found = commands(text)
    assert len(found) >= 20 and sum(len(u) for u in units(text)) == len(found)
    assert {"torchrun", "make"} <= {w[0] for w in found}
    assert {tuple(w[:2]) for w in found} >= {("artune", c) for c in ("check", "explain", "diff", "export", "review")}
    assert any(len(u) > 1 for u in units(text))  # a command that reads what an earlier one wrote runs after it
    files = {"python", "toml"}
    assert files <= {language for language, _ in blocks(text)}, "the README lost its app.py or my-table.toml block"


@pytest.mark.parametrize("unit", units(README.read_text(encoding="utf-8")), ids=lambda u: shlex.join(u[0])[:60])
def test_every_readme_command_runs_as_written(unit: list[list[str]], tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    files = {"python": "app.py", "toml": "my-table.toml"}
    for language, body in blocks(text):
        if language in files:
            (tmp_path / files.pop(language)).write_text(body, encoding="utf-8")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["ARTUNE_CACHE_DIR"] = str(tmp_path / "cache")  # nothing installed into the user's cache
    env.pop("ARTUNE_TABLE", None)
    for words in unit:
        argv, where = as_run(words)
        done = subprocess.run(
            argv,
            cwd=where if where.is_absolute() else tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        allowed = {0, 1} if tuple(words[:2]) in MAY_FIND else {0}
        line = shlex.join(words)
        if done.returncode == 3 and "==" in line and "pip" in done.stderr.lower():
            pytest.skip(f"{line} needs a release download, and the registry cannot be reached")
        assert done.returncode in allowed and "Traceback" not in done.stderr, (
            f"{line}: exit {done.returncode}\n{done.stdout[-1000:]}\n{done.stderr[-2000:]}"
        )
