"""Suite-wide set-up: tests are hermetic, and they must leave nothing of artune's in /dev/shm."""

from __future__ import annotations

import glob
import os
import shutil
import tempfile

import pytest

from artune.formats.releases import releases_dir

# A table that `artune tune` installed on this machine, a reading kept by another run (or interpreter, or
# artune), or the user's overrides must not change what the tests see: every process of the suite, spawned
# ranks included, reads an empty cache of its own. Only the engines' released files, downloaded once and never
# changed, are shared: with the user's cache (as the user's settings name it), so the suite downloads each once.
os.environ["ARTUNE_RELEASES_DIR"] = str(releases_dir())
_CACHE = os.environ["ARTUNE_CACHE_DIR"] = tempfile.mkdtemp(prefix="artune-test-cache-")
for _name in (
    "ARTUNE_READINGS_DIR",
    "ARTUNE_TABLE",
    "ARTUNE_ALGORITHM",
    "ARTUNE_BOUNDS",
    "ARTUNE_SHM_BYTES",
    "ARTUNE_HOST",
):
    os.environ.pop(_name, None)

PATTERNS = ("/dev/shm/artune_*", "/dev/shm/sem.artune_*")
_BEFORE = pytest.StashKey[set[str]]()


def _ours() -> set[str]:
    return {path for pattern in PATTERNS for path in glob.glob(pattern)}


def _is_worker(config: pytest.Config) -> bool:
    """A pytest-xdist worker: the controller, which outlives every worker, does the suite-wide checks."""
    return hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_BEFORE] = set() if _is_worker(session.config) else _ours()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Once every test of the suite ran (under xdist: once all workers ended, so none has a segment open)."""
    shutil.rmtree(_CACHE, ignore_errors=True)
    if _is_worker(session.config):
        return
    left = sorted(_ours() - session.config.stash[_BEFORE])
    if left:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        writer = session.config.get_terminal_writer()
        writer.line()
        writer.line(f"FAILED: the tests left these in /dev/shm: {left}", red=True)
