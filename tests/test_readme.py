"""Every command in README.md runs as written, as a reader pastes it into a fresh shell, and does what its comment
says; the README stays short and undated.

The README's ``python`` block is saved as ``app.py`` and its ``toml`` block as ``my-table.toml``, as the README
tells the reader to, and each line of its ``sh`` blocks is run, each in a folder of its own (a line that reads
what an earlier one wrote runs after it, in its folder): a test each, so the suite's workers share them. Each runs
in a new ``bash`` with a clean environment (``HOME``, a system ``PATH``, the locale and the user's network
settings) after the one set-up line the README states (``. .venv/bin/activate``, from the clone's folder), so a
command that only works from this suite's own environment fails here. What each comment claims is checked:
``exit N`` is the exit status (0 where the comment names none), and every ``"quoted"`` text is in the output.
Some commands are not run in full, because they would measure this machine for a minute or more, or run this
suite inside itself: ``artune tune``/``verify`` run with ``--help`` (their claims are then not checked),
``artune bench`` with a short ``--budget``, and ``make TARGET`` runs as ``make -n TARGET`` (the recipe resolves;
``make docs`` is built for real by ``tests/test_docs.py``).
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
MEASURING = {("artune", "tune"), ("artune", "verify")}
COMMAND_TIMEOUT_S = 600
#: what a user's own shell keeps of the environment: who they are, their locale, how they reach the network
KEPT = re.compile(
    r"HOME|USER|LANG|LC_\w+|TERM|TMPDIR|XDG_CACHE_HOME|PIP_\w+|\w+_(?:proxy|PROXY)|\w*CA_BUNDLE|SSL_CERT_\w+"
)


def blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced code block."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S)]


def commands(text: str) -> list[list[str]]:
    """Every command line of the ``sh`` blocks, comments dropped, the set-up line that activates ``.venv`` too."""
    out = []
    for language, body in blocks(text):
        if language == "sh":
            out += [words for line in body.splitlines() if (words := shlex.split(line, comments=True))]
    return out


def is_setup(words: list[str]) -> bool:
    """The line that readers run once in a new shell (``. .venv/bin/activate``)."""
    return words[0] in {".", "source"}


def setup_line(text: str) -> str:
    """The one set-up line the README states."""
    found = [shlex.join(words) for words in commands(text) if is_setup(words)]
    assert len(found) == 1, f"the README states {len(found)} set-up lines; one, please: {found}"
    return found[0]


def claims(line: str) -> tuple[int, list[str]]:
    """What a command's comment claims: its exit status (``exit N``; 0 where it names none) and the texts in
    double quotes that its output holds."""
    comment = line.partition(" # ")[2]
    status = re.search(r"\bexit (\d+)", comment)
    return int(status[1]) if status else 0, re.findall(r'"([^"]+)"', comment)


def lines_of(text: str) -> dict[str, str]:
    """Each command line of the ``sh`` blocks (its words joined) and the line with its comment."""
    out = {}
    for language, body in blocks(text):
        if language == "sh":
            out.update(
                {shlex.join(words): line for line in body.splitlines() if (words := shlex.split(line, comments=True))}
            )
    return out


def as_run(words: list[str]) -> tuple[list[str], Path]:
    """The command as the test runs it, and where: the README's folder for make and the test suite."""
    if words[0] == "make":
        return ["make", "-n", *words[1:]], ROOT
    if tuple(words[:2]) in MEASURING:
        return [*words[:2], "--help"], Path()
    if tuple(words[:2]) == ("artune", "bench"):
        return [*words, "--budget", "0.05", "--sizes", "4KiB,1MiB"], Path()
    if words[0] == ".venv/bin/python":
        return words, ROOT
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
            if not words or is_setup(words):
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
    assert len(found) >= 20 and sum(len(u) for u in units(text)) == len(found) - 1  # less the set-up line
    assert setup_line(text) == ". .venv/bin/activate" and ". .venv/bin/activate" in blocks(text)[0][1]
    assert {"torchrun", "make"} <= {w[0] for w in found}
    assert {tuple(w[:2]) for w in found} >= {("artune", c) for c in ("check", "explain", "diff", "export", "review")}
    assert any(len(u) > 1 for u in units(text))  # a command that reads what an earlier one wrote runs after it
    files = {"python", "toml"}
    assert files <= {language for language, _ in blocks(text)}, "the README lost its app.py or my-table.toml block"


def test_claims_are_read_from_the_comments() -> None:
    assert claims("artune check t.toml  # lints; exit 0: nothing found (1: findings, 2: unreadable)") == (0, [])
    assert claims('artune diff a b  # exit 1: "range(s) differ" and "ws=8"') == (1, ["range(s) differ", "ws=8"])
    assert claims("artune show t.toml") == (0, [])


def venv_activate() -> Path:
    """The ``.venv`` the README's set-up line activates: the clone's, or (a suite run from another
    environment) the one this interpreter is in."""
    here = ROOT / ".venv" / "bin" / "activate"
    return here if here.exists() else Path(sys.executable).parent / "activate"


@pytest.mark.parametrize("unit", units(README.read_text(encoding="utf-8")), ids=lambda u: shlex.join(u[0])[:60])
def test_every_readme_command_runs_as_written(unit: list[list[str]], tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    files = {"python": "app.py", "toml": "my-table.toml"}
    for language, body in blocks(text):
        if language in files:
            (tmp_path / files.pop(language)).write_text(body, encoding="utf-8")
    activate = venv_activate()
    if not activate.exists():
        pytest.skip(f"no virtual environment to activate ({activate}): the README's set-up makes .venv")
    setup = setup_line(text).replace(".venv/bin/activate", shlex.quote(str(activate)))
    env = {k: v for k, v in os.environ.items() if KEPT.fullmatch(k)}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    env["ARTUNE_CACHE_DIR"] = str(tmp_path / "cache")  # nothing installed into the user's cache
    commented = lines_of(text)
    for words in unit:
        argv, where = as_run(words)
        folder = where if where.is_absolute() else tmp_path
        script = f"cd {shlex.quote(str(ROOT))} && {setup} && cd {shlex.quote(str(folder))} && {shlex.join(argv)}"
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-c", script],
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        line = commented[shlex.join(words)]
        if done.returncode == 3 and "==" in line and "pip" in done.stderr.lower():
            pytest.skip(f"{line} needs a release download, and the registry cannot be reached")
        status, texts = claims(line) if argv == words or words[:2] == ["artune", "bench"] else (0, [])
        output = done.stdout + done.stderr
        assert done.returncode == status and "Traceback" not in done.stderr, (
            f"{line}\nexit {done.returncode}, the comment says {status}\n{done.stdout[-1500:]}\n{done.stderr[-2000:]}"
        )
        missing = [t for t in texts if t not in output]
        assert not missing, f"{line}\nclaims {missing}, not in its output:\n{output[-3000:]}"
