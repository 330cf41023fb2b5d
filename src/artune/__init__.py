"""artune: measure, derive, check and run the fastest all-reduce for each message on each machine.

The pipeline: ``measure`` times the algorithms available here, ``tune``
derives a dispatch table, ``table`` holds and checks it,
``artune.table.decide`` picks per message, and the ``Communicator`` runs the
choice over a ``torch.distributed`` process group. Beside it, the engine
analysis (``formats``, ``evidence``, ``costmodel``, ``review``) reads,
scores and reviews the engines' own tables; ``docs/development.md`` draws
both.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from artune._version import __version__
from artune.errors import (
    AgreementError,
    ArtuneError,
    CallMismatch,
    CommunicatorClosed,
    OverrideError,
    PeerTimeout,
    ShmUnavailable,
    SizeError,
    SourceUnavailable,
    TableError,
)

if "torch" in sys.modules:  # register the "artune" torch.distributed backend (torch's entry point does too)
    from artune.backend import register as _register_backend

    _register_backend()

if TYPE_CHECKING:
    from artune.communicator import Communicator
    from artune.table import Decision, Table, load_table

__all__ = [
    "AgreementError",
    "ArtuneError",
    "CallMismatch",
    "Communicator",
    "CommunicatorClosed",
    "Decision",
    "OverrideError",
    "PeerTimeout",
    "ShmUnavailable",
    "SizeError",
    "SourceUnavailable",
    "Table",
    "TableError",
    "__version__",
    "load_table",
]


def __getattr__(name: str) -> Any:
    # torch is imported only when the Communicator is used, so `artune check` starts fast
    if name == "Communicator":
        from artune.communicator import Communicator

        return Communicator
    if name in ("Decision", "Table", "load_table"):
        import artune.table

        return getattr(artune.table, name)
    raise AttributeError(f"module 'artune' has no attribute {name!r}")
