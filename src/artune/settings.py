"""Environment settings, read and checked in one place.

| variable | meaning |
|---|---|
| ``ARTUNE_TABLE`` | table file the Communicator uses (after an explicit ``table=`` argument) |
| ``ARTUNE_ALGORITHM`` | force this algorithm for every size (wins over any table) |
| ``ARTUNE_BOUNDS`` | move band bounds: ``"shm_one_shot=256KiB,1shot_push=4MiB"`` |
| ``ARTUNE_TIMEOUT`` | seconds a rank waits for its peers before ``PeerTimeout`` (default 60) |
| ``ARTUNE_CACHE_DIR`` | artune's caches: tables, releases, readings (default ``$XDG_CACHE_HOME/artune``) |
| ``ARTUNE_SHM_BYTES`` | shared-memory buffer per rank and round (default 4MiB) |
| ``ARTUNE_HOST`` | tests and experiments only: act as if on a host of this name (``artune.machine``) |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from artune.errors import OverrideError, SizeError
from artune.sizes import parse_size

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_SHM_BYTES = 4 << 20


@dataclass(frozen=True)
class Settings:
    """The environment's artune settings (``None``: not set)."""

    table: Path | None = None
    algorithm: str | None = None
    bounds: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    cache_dir: Path = Path.home() / ".cache" / "artune"
    shm_bytes: int = DEFAULT_SHM_BYTES


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """The folder that holds artune's caches (``tables``, ``releases``, ``readings``): ``ARTUNE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/artune``, else ``~/.cache/artune``."""
    env = os.environ if env is None else env
    if env.get("ARTUNE_CACHE_DIR"):
        return Path(env["ARTUNE_CACHE_DIR"])
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "artune"


def from_env(env: dict[str, str] | None = None) -> Settings:
    """Read ``ARTUNE_*`` settings; ``OverrideError`` naming the variable when one is malformed."""
    env = dict(os.environ if env is None else env)
    timeout_text = env.get("ARTUNE_TIMEOUT", "")
    try:
        timeout = float(timeout_text) if timeout_text else DEFAULT_TIMEOUT_S
    except ValueError:
        raise OverrideError(f"ARTUNE_TIMEOUT={timeout_text!r} is not a number of seconds") from None
    if not timeout > 0:
        raise OverrideError(f"ARTUNE_TIMEOUT={timeout_text!r} must be positive")
    try:
        shm_bytes = parse_size(env.get("ARTUNE_SHM_BYTES") or DEFAULT_SHM_BYTES, "ARTUNE_SHM_BYTES")
    except SizeError as err:
        raise OverrideError(str(err)) from None
    return Settings(
        table=Path(env["ARTUNE_TABLE"]) if env.get("ARTUNE_TABLE") else None,
        algorithm=env.get("ARTUNE_ALGORITHM") or None,
        bounds=env.get("ARTUNE_BOUNDS") or None,
        timeout_s=timeout,
        cache_dir=cache_root(env),
        shm_bytes=shm_bytes,
    )
