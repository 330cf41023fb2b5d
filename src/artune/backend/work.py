"""``ArtuneWork``: the ``torch.distributed`` Work of an artune collective that ran synchronously.

The Communicator finishes a call before returning, so the work is complete
when the process group hands it out. What torch needs from it (torch 2.13's
``torch/csrc/distributed/c10d/Work.hpp`` and its Python binding, as DDP and
``dist.all_reduce`` use it):

- ``wait(timeout=...)`` with a default: ``dist.all_reduce`` calls it with no
  argument, functional collectives with ``timedelta(0)``. On failure it raises
  the collective's exception.
- ``get_future()`` resolving to the list of tensors (DDP reads the value; a
  ``None`` value crashes its reducer). On failure the future must be failed
  where C++ sees it: ``Future.set_exception`` is invisible to C++, but a
  ``then`` callback that raises marks the child future as failed, so DDP
  raises a ``RuntimeError`` instead of crashing.
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist


def _reraise(fut: torch.futures.Future) -> list[torch.Tensor]:
    return fut.value()  # raises the parent's exception inside the callback: the child fails in C++


class ArtuneWork(dist.Work):
    """A completed collective: its output tensors, or the exception it raised."""

    def __init__(self, tensors: list[torch.Tensor], error: BaseException | None = None) -> None:
        super().__init__()
        self._tensors = tensors
        self._error = error

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        """Return ``True``; raise the collective's exception when it failed."""
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return self._error is None

    def exception(self) -> BaseException | None:
        return self._error

    def result(self) -> list[torch.Tensor]:
        if self._error is not None:
            raise self._error
        return self._tensors

    def get_future(self) -> torch.futures.Future:
        """A future of the output tensors; failed (also for C++ callers such as DDP) when the call failed."""
        fut: torch.futures.Future = torch.futures.Future()
        if self._error is None:
            fut.set_result(self._tensors)
            return fut
        fut.set_exception(self._error)
        return fut.then(_reraise)
