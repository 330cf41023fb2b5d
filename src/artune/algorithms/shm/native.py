"""Which implementation runs the shared-memory round: the compiled one (``_native.c``) or pure Python.

The compiled round is built by setuptools at install (``pip install -e .``,
which ``make test`` and ``make tune`` run). Where it could not be built (no C
compiler) or is switched off, the pure-Python round in ``channel.py`` runs
instead: the same protocol, slower per call. Ranks decide on their own, and a
native rank and a Python rank work together in one group.

Switch: ``ARTUNE_SHM_NATIVE=0`` turns the compiled round off (read when a
channel is built), e.g. to compare both paths or to rule the extension out.
"""

from __future__ import annotations

import logging
import os
from importlib.util import find_spec
from types import ModuleType

ENV_SWITCH = "ARTUNE_SHM_NATIVE"
_OFF = ("0", "false", "no", "off")

log = logging.getLogger("artune")

_module: ModuleType | None = None
_IMPORT_ERROR = ""
if find_spec(f"{__package__}._native") is None:  # no compiler at install, or a checkout never installed
    _IMPORT_ERROR = "the compiled round is not built here; install with a C compiler (`pip install -e .`)"
else:
    try:
        from . import _native as _module  # type: ignore[attr-defined, no-redef]
    except ImportError as err:  # built for another Python, or a broken build
        _IMPORT_ERROR = f"the compiled round does not load ({err}); reinstall (`pip install -e .`)"

_said: set[str] = set()


def load() -> tuple[ModuleType | None, str]:
    """(the compiled module or ``None``, a one-line description of the path the shm round takes)."""
    if os.environ.get(ENV_SWITCH, "").strip().lower() in _OFF:
        return None, f"python (the compiled round is switched off: {ENV_SWITCH}=0)"
    if _module is None:
        return None, f"python ({_IMPORT_ERROR})"
    return _module, "native (compiled C round)"


def describe() -> str:
    """The path a channel built now would take, e.g. ``native (compiled C round)``."""
    return load()[1]


def say_once(path: str) -> None:
    """Log the path once per process (and again only if it changes)."""
    if path not in _said:
        _said.add(path)
        log.info("artune shm round: %s", path)
