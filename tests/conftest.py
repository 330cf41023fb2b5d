"""Suite-wide set-up: tests are hermetic, and they must leave nothing of artune's in /dev/shm."""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

# A table that `artune tune` installed on this machine (or the user's overrides) must not change what the
# tests see: every process of the suite, spawned ranks included, reads an empty cache of its own.
_CACHE = os.environ["ARTUNE_CACHE_DIR"] = tempfile.mkdtemp(prefix="artune-test-cache-")
for _name in ("ARTUNE_TABLE", "ARTUNE_ALGORITHM", "ARTUNE_BOUNDS", "ARTUNE_SHM_BYTES", "ARTUNE_HOST"):
    os.environ.pop(_name, None)

PATTERNS = ("/dev/shm/artune_*", "/dev/shm/sem.artune_*")


def _ours() -> set[str]:
    return {path for pattern in PATTERNS for path in glob.glob(pattern)}


@pytest.fixture(scope="session", autouse=True)
def nothing_left_in_dev_shm() -> Iterator[None]:
    before = _ours()
    yield
    shutil.rmtree(_CACHE, ignore_errors=True)
    left = sorted(_ours() - before)
    assert not left, f"the tests left these in /dev/shm: {left}"
