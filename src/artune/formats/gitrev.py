"""An engine checkout's files at a git revision, read without checking anything out.

``artune review vllm:PATH --base REV`` compares the work tree with a base
revision (``origin/main`` in a pull request's CI, ``HEAD`` in a pre-commit
hook). The base's files are copied with ``git ls-tree`` and ``git show`` into
a temporary folder laid out like the checkout, and the normal reader reads
that folder: one reader, whichever side. The work tree, the index and the
checked-out branch are never touched.

Which files: the engine's reader's files and its wheel's (``EnginePlugin.files``, ``.wheel``), each
with and without the folder its package sits in within its repository (``EnginePlugin.checkout_prefix``:
SGLang's ``python/``; wheels have none), so that whatever the reader looks for at the base is there if the
base has it.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from artune.errors import TableError

GIT_TIMEOUT_S = 60


@dataclass(frozen=True)
class RevisionTree:
    """A revision's files in a temporary folder: ``path`` stands for the ``PATH`` given, at ``rev``.

    ``root`` is the repository's top in the temporary folder; ``commit`` the
    full hash ``rev`` resolved to.
    """

    path: Path
    root: Path
    rev: str
    commit: str

    def rename(self, text: str) -> str:
        """``text`` with the temporary folder's paths written ``REV:path``, as ``git show`` names a file at a rev."""
        return text.replace(f"{self.root}/", f"{self.rev}:")


def engine_members(engine: str) -> tuple[str, ...]:
    """Every file or folder (ending ``/``) an engine's reader may look for, relative to a checkout."""
    from artune.formats import engine_reader

    plugin = engine_reader(engine)
    prefix = plugin.checkout_prefix
    out: list[str] = []
    for name in (*plugin.files, *plugin.wheel):
        bare = name.removeprefix(prefix) if prefix else name
        out += [bare, prefix + bare] if prefix else [bare]
    return tuple(dict.fromkeys(out))


def _git(folder: Path, *args: str) -> bytes:
    """``git -C folder ARGS``'s stdout; ``TableError`` with git's own message when it fails."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        raise TableError("--base needs git, and git is not installed here") from None
    except subprocess.TimeoutExpired:
        raise TableError(f"git {' '.join(args[:2])} did not finish in {GIT_TIMEOUT_S} s in {folder}") from None
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        raise TableError(f"git {' '.join(args[:2])} in {folder}: {lines[-1] if lines else f'exit {done.returncode}'}")
    return done.stdout


@contextmanager
def revision_tree(path: str, rev: str, members: Sequence[str]) -> Iterator[RevisionTree]:
    """The files ``members`` (relative to ``path``; a folder ends with ``/``) as they are at ``rev``.

    ``path`` is a directory or file in a git work tree. Yields a
    ``RevisionTree`` whose ``path`` is read as ``path`` would be; the folder
    is removed on exit. ``TableError`` names the problem when ``path`` is not
    in a work tree, ``rev`` is not a commit, or ``rev`` has none of the files.
    """
    given = Path(path)
    if not given.exists():
        raise TableError(f"{path}: no such file or directory; --base needs the engine's git work tree")
    folder = given if given.is_dir() else given.parent
    try:
        top = Path(_git(folder, "rev-parse", "--show-toplevel").decode().strip())
    except TableError:
        raise TableError(f"{path}: not in a git work tree; --base REV reads REV's files with git") from None
    prefix = PurePosixPath(folder.resolve().relative_to(top.resolve())).as_posix()
    prefix = "" if prefix == "." else prefix + "/"
    try:
        commit = _git(top, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    except TableError:
        raise TableError(
            f"--base {rev}: not a commit in {top}; fetch it first (e.g. git fetch origin main) or name another"
        ) from None
    # a file comes with its folder's other files: a reader given one file reads its siblings too
    wanted = [prefix or "."] if given.is_file() else [prefix + m for m in members]
    recursive = [] if given.is_file() else ["-r"]
    listed = _git(top, "ls-tree", *recursive, "-z", "--name-only", "--full-tree", commit, "--", *wanted)
    # a file named (a member, or the one given) comes as it is; a folder's files come where they are source
    named = {*wanted, *([f"{prefix}{given.name}"] if given.is_file() else [])}
    listed_names = [name for name in listed.decode().split("\0") if name]
    files = [name for name in listed_names if name in named or name.endswith((".py", ".h"))]
    if not files:
        raise TableError(f"--base {rev}: {path} has none of the engine's files at that revision ({', '.join(wanted)})")
    if given.is_file() and f"{prefix}{given.name}" not in files:
        raise TableError(f"--base {rev}: {path} is not in that revision")
    with tempfile.TemporaryDirectory(prefix="artune-base-") as work:
        root = Path(work) / "tree"
        for name in files:
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(_git(top, "show", f"{commit}:{name}"))
        yield RevisionTree(root / prefix / given.name if given.is_file() else root / prefix, root, rev, commit)
