"""The exceptions artune raises: one base class, a subclass per kind of failure.

Every message names what went wrong and how to fix it; callers can catch
``ArtuneError`` for all of them.
"""

from __future__ import annotations


class ArtuneError(Exception):
    """Base class of every error artune raises on purpose."""


class TableError(ArtuneError):
    """A table file or table data is malformed (bad TOML, wrong types, bad sizes, ...)."""


class SizeError(TableError, ValueError):
    """A byte size could not be parsed (``"64KiB"``, ``"2.5MiB"`` and integers are accepted)."""


class OverrideError(ArtuneError, ValueError):
    """A user override (environment variable or argument) is malformed."""


class CallMismatch(ArtuneError):
    """Ranks called the same collective with different element counts, dtypes or ops.

    Raised on every rank of the call, so none of them hangs.
    """


class PeerTimeout(ArtuneError):
    """A peer rank died or did not answer within the communicator's timeout.

    ``missing`` holds the ranks that did not arrive.
    """

    def __init__(self, message: str, missing: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.missing = missing


class CommunicatorClosed(ArtuneError):
    """The communicator was closed, or broken by an earlier peer failure."""


class ShmUnavailable(ArtuneError):
    """Shared memory cannot be used (too small a /dev/shm, other host, ...)."""


class AgreementError(ArtuneError):
    """Ranks disagree at construction (different tables, parameters or versions)."""


class EvidenceError(ArtuneError):
    """A benchmark output file is none of the formats artune reads, is malformed, or cannot score a table."""
