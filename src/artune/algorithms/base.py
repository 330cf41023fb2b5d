"""The algorithm interface: what every runnable all-reduce implements.

An algorithm is bound to one process group at construction (it may allocate
resources such as shared memory there, collectively) and then reduces tensors
in place. The Communicator owns algorithms; algorithms know nothing about
tables, tuning or reports.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping

import torch

# Reduce ops by the names tables and users write; values are torch's.
REDUCE_OPS = ("sum", "max", "min")
#: the numeric dtypes an all-reduce may be asked to sum; the shared-memory wire codes number them in this order
NUMERIC_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
)


class Algorithm(ABC):
    """One runnable all-reduce bound to a process group."""

    #: the registry name (a key of ``artune.catalog.SPECS``)
    name: str
    #: True when the algorithm itself compares element count, dtype and op across ranks
    #: (raising ``CallMismatch``); otherwise the Communicator checks before calling it
    checks_calls: bool = False
    #: the device types (``"cpu"``, ``"cuda"``, ...) whose tensors it reduces; ``None``: whatever the
    #: group's backend takes
    devices: frozenset[str] | None = None
    #: True when a call may be captured in a CUDA graph: stream-ordered, no host synchronisation
    capturable: bool = False

    @abstractmethod
    def unavailable(self, dtype: torch.dtype, op: str) -> str | None:
        """Why this algorithm cannot reduce ``dtype`` with ``op`` here, or ``None`` when it can.

        Must not depend on the message size and must give the same answer on
        every rank (the Communicator relies on that to agree without talking).
        """

    @abstractmethod
    def all_reduce(self, tensor: torch.Tensor, op: str, params: Mapping[str, object]) -> torch.Tensor:
        """Reduce the contiguous ``tensor`` in place across the group and return it.

        ``params`` are the plan's parameters for this algorithm (may be empty).
        Raises ``CallMismatch`` when ranks disagree on element count, dtype or
        op, and ``PeerTimeout`` when a peer does not arrive in time.
        """

    def unfit(self, nbytes: int, dtype: torch.dtype) -> str | None:
        """Why a message of ``nbytes`` cannot go this way (alignment, buffer size), or ``None``.

        Size-dependent, unlike ``unavailable``; the Communicator asks once per
        call signature and runs the fallback instead. Same answer on every rank.
        """
        return None

    def bind(
        self, shape: torch.Size, dtype: torch.dtype, op: str, params: Mapping[str, object]
    ) -> Callable[[torch.Tensor], object]:
        """``all_reduce`` for contiguous tensors of this shape and dtype, with ``op`` and ``params`` fixed.

        The Communicator keeps the result per call signature, so an algorithm
        with per-call set-up (views, headers, parameter checks) overrides this
        to do that set-up once; the default just calls ``all_reduce``.
        """
        all_reduce = self.all_reduce
        return lambda tensor: all_reduce(tensor, op, params)

    def tunable_space(self) -> dict[str, tuple[object, ...]]:
        """Declared parameters and the values worth trying on this group (a tuner searches them)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; idempotent."""
