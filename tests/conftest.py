"""Suite-wide guard: the tests must leave nothing of artune's in /dev/shm, whatever they kill."""

from __future__ import annotations

import glob
from collections.abc import Iterator

import pytest

PATTERNS = ("/dev/shm/artune_*", "/dev/shm/sem.artune_*")


def _ours() -> set[str]:
    return {path for pattern in PATTERNS for path in glob.glob(pattern)}


@pytest.fixture(scope="session", autouse=True)
def nothing_left_in_dev_shm() -> Iterator[None]:
    before = _ours()
    yield
    left = sorted(_ours() - before)
    assert not left, f"the tests left these in /dev/shm: {left}"
