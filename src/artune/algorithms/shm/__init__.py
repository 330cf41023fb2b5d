"""Shared-memory all-reduce algorithms over one ``ShmChannel`` per process group (single host)."""

from __future__ import annotations

from .algorithms import SUPPORTED_DTYPES, ShmOneShot, ShmTwoShot, shm_unavailable
from .channel import ShmChannel
from .segment import DEFAULT_BUFFER_BYTES, NAME_PREFIX

__all__ = [
    "DEFAULT_BUFFER_BYTES",
    "NAME_PREFIX",
    "SUPPORTED_DTYPES",
    "ShmChannel",
    "ShmOneShot",
    "ShmTwoShot",
    "shm_unavailable",
]
