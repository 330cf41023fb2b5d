"""Where an engine's files are: a checkout or a file, read as text, with the git commit when there is one."""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from artune.errors import TableError
from artune.formats.cache import display_path

MAX_SOURCE_BYTES = 4 << 20
REFUSED = "E422"  # a path artune will not read: outside its tree, or not a regular file
UNREADABLE = "E420"  # a file artune will not evaluate: too large, not text
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


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


def present(path: Path) -> bool:
    """Whether anything is at ``path`` (a link to nothing too): what ``read_source`` then reads, or refuses."""
    return os.path.lexists(path)


def contain(path: Path, root: Path) -> None:
    """``TableError`` (E422) naming ``path`` unless it is a regular file that resolves inside ``root`` (the
    checkout, or the one file given): a link out of the tree, a FIFO, a socket or a device is never opened,
    and nothing of what lies outside the tree is quoted."""
    shown = display_path(path)
    try:
        real = path.resolve(strict=True)
        top = root.resolve(strict=True)
    except (OSError, RuntimeError):
        raise TableError(f"{REFUSED}: {shown}: refused: a link to nothing, or a loop of links") from None
    if real != top and not real.is_relative_to(top):
        raise TableError(
            f"{REFUSED}: {shown}: refused: it resolves outside the tree read ({display_path(root)}); "
            "artune reads only files inside it"
        )
    mode = os.stat(real).st_mode
    for test, kind in _KINDS:
        if test(mode):
            raise TableError(f"{REFUSED}: {shown}: refused: {kind}, not a regular file")


def read_source(path: Path, commit: str | None = None, root: Path | None = None) -> SourceFile:
    """The text of one engine file; ``TableError`` naming it when it cannot be read, or when it is not a
    regular file inside ``root`` (``contain``; default: ``path`` is the tree, given by itself)."""
    contain(path, path if root is None else root)
    try:
        size = path.stat().st_size
        if size > MAX_SOURCE_BYTES:
            raise TableError(
                f"{UNREADABLE}: {path}: {size} bytes, more than {MAX_SOURCE_BYTES}; is it the engine's table file?"
            )
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise TableError(f"{path}: cannot read: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise TableError(f"{UNREADABLE}: {path}: not UTF-8 text ({err.reason} at byte {err.start})") from err
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
        if present(base) and base.exists():
            contain(base, base)  # a FIFO, a socket or a device given as the checkout: refused by name
        raise TableError(f"{root}: no such file or directory; give a {what} checkout or its table file")
    found = [base / rel for rel in candidates if present(base / rel)]
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
