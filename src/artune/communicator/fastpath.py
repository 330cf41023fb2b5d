"""The Communicator's fast path: a repeated call goes from C straight to the route bound on its first sight.

At a few KiB an all-reduce's round takes well under a microsecond, so the
Python around it (building a route key, hashing it, the guard against
overlapping calls, the capture test, the agreement round's header) would be
most of the call. ``Router`` (in ``_native.c``) is that lookup and guard in
C: ``router(tensor, op, key)`` matches the call against the routes it was
given (by the identity of dtype, op and key, the element count and the
device; the tensor must be contiguous) and runs the route: its agreement,
if any (a compiled header-only round over shared memory, or the process
group's own), then its bound call (a compiled shm step from C, any other
algorithm's bound call from C through one Python call). For a CUDA route
it first asks whether the current stream captures a graph (torch's own
C function, once per call; never for CPU tensors) and then runs the graph
route, without agreement. Otherwise it returns False and the Communicator
takes its general path. The key is the forced algorithm (or None), or for
a call that names its parameters the one object the Communicator keeps for
that algorithm and those parameters. Which algorithm a signature runs is
still decided once, on first sight, by the general path; the router only
remembers it. It holds the 16 signatures seen last for the first time
(decode loops use a few); one it dropped takes the general path, still
correct.

Both paths share the router's busy flag (``enter``/``leave``), so calls from
two threads cannot overlap whichever path they take. Where the compiled
round is not built or is switched off (``ARTUNE_SHM_NATIVE=0``), ``Gate``
stands in: no routes, the same flag on a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

import torch

from artune.algorithms.shm import native


class Router(Protocol):
    """What the Communicator needs from its fast path (``_native.Router`` or ``Gate``)."""

    def __call__(self, tensor: torch.Tensor, op: object, key: object, /) -> bool:
        """Run the call if a compiled route matches it; False when the caller must."""
        ...

    def add(
        self,
        dtype: torch.dtype,
        op: object,
        key: object,
        numel: int,
        device: int,
        agree: object,
        run: object,
        graph: object,
        /,
    ) -> bool:
        """Remember a signature's route: on ``device`` (-1: CPU tensors, else a CUDA index), ``agree``
        (``None``, a compiled header round or a callable) before ``run``, ``graph`` inside a capture
        (CUDA only); True when taken."""
        ...

    def clear(self) -> None:
        """Forget every route."""
        ...

    def enter(self) -> bool:
        """Mark a call as running; False when one already is."""
        ...

    def leave(self) -> None:
        """Mark the running call as done."""
        ...

    @property
    def busy(self) -> bool:
        """True while a call runs."""
        ...

    @property
    def hits(self) -> int:
        """How many calls it ran (the route cache's hits that never reached Python)."""
        ...


class Gate:
    """The fast path where the compiled round is absent: no routes, the busy flag on a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __call__(self, tensor: torch.Tensor, op: object, key: object, /) -> bool:
        return False

    def add(self, *route: object) -> bool:
        return False

    def clear(self) -> None:
        pass

    def enter(self) -> bool:
        return self._lock.acquire(False)  # positional: half the cost of blocking=False

    def leave(self) -> None:
        self._lock.release()

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    @property
    def hits(self) -> int:
        return 0  # it runs no call


def capture_test() -> Callable[[], bool] | None:
    """torch's own test whether the current CUDA stream captures a graph: the C function that
    ``torch.cuda.is_current_stream_capturing`` wraps, without the wrapper; ``None`` in a torch without CUDA."""
    if not torch.backends.cuda.is_built():
        return None
    return torch._C._cuda_isCurrentStreamCapturing  # type: ignore[attr-defined, no-any-return]


def make_router() -> Router:
    """The compiled router when the compiled round runs here, else a ``Gate``."""
    module, _ = native.load()
    return module.Router(capture_test()) if module is not None else Gate()
