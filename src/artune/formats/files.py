"""Where an engine's files are: a checkout or a file, read as text, with the git commit when there is one."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from artune.errors import TableError
from artune.formats.releases import display_path

MAX_SOURCE_BYTES = 4 << 20


@dataclass(frozen=True)
class SourceFile:
    """One file of an engine: its path as given, its text and the commit of its work tree ("" if none)."""

    path: str
    text: str
    commit: str = ""

    @property
    def label(self) -> str:
        """The path, with the commit when known: how findings and provenance name the file."""
        return f"{self.path}@{self.commit[:12]}" if self.commit else self.path


def git_commit(path: Path) -> str:
    """The HEAD commit of the git work tree holding ``path`` ("" when it is not in one, or git is missing)."""
    folder = path if path.is_dir() else path.parent
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = done.stdout.strip()
    return text if done.returncode == 0 and len(text) == 40 else ""


def read_source(path: Path, commit: str | None = None) -> SourceFile:
    """The text of one engine file; ``TableError`` naming it when it cannot be read."""
    try:
        size = path.stat().st_size
        if size > MAX_SOURCE_BYTES:
            raise TableError(f"{path}: {size} bytes, more than {MAX_SOURCE_BYTES}; is it the engine's table file?")
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise TableError(f"{path}: cannot read: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise TableError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from err
    return SourceFile(display_path(path), text, git_commit(path) if commit is None else commit)


def find_files(root: str, candidates: tuple[str, ...], what: str) -> tuple[Path, list[Path]]:
    """Resolve ``root`` (a checkout or one file) to the files that exist among ``candidates``.

    Returns ``(root path, existing files)``; a file given directly is the
    only one. ``TableError`` naming what was looked for when nothing is there.
    """
    base = Path(root)
    if base.is_file():
        return base, [base]
    if not base.is_dir():
        raise TableError(f"{root}: no such file or directory; give a {what} checkout or its table file")
    found = [base / rel for rel in candidates if (base / rel).is_file()]
    if not found:
        raise TableError(f"{root}: not a {what} checkout: none of {', '.join(candidates)} is there")
    return base, found


def describe(files: list[SourceFile] | tuple[SourceFile, ...]) -> str:
    """``a.py, b.py at git commit 0123abcd...`` (each file's own commit when they differ)."""
    commits = {f.commit for f in files}
    if len(commits) == 1:
        (commit,) = commits
        names = ", ".join(f.path for f in files)
        return f"{names} at git commit {commit}" if commit else names
    return ", ".join(f.label for f in files)
