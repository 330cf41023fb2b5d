"""What the harness drives: anything with the Communicator's ``all_reduce`` and ``available``.

``artune.Communicator`` is the usual ``Reducer``. ``FunctionReducer`` adds
named plain functions next to (or instead of) a Communicator: a baseline
such as ``torch.distributed.all_reduce`` (``process_group_all_reduce``),
another library's all-reduce for side-by-side numbers, or a negative control
that does not reduce, so they are timed and checked by the same harness,
interleaved with the Communicator's algorithms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

import torch
import torch.distributed as dist

from artune.errors import ArtuneError

#: a candidate's launch parameters, by name
Params = Mapping[str, object]
#: ``fn(tensor, op, params)``: reduce ``tensor`` in place across the group
ReduceFn = Callable[[torch.Tensor, str, Params], object]

_TORCH_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


@runtime_checkable
class Reducer(Protocol):
    """The part of ``artune.Communicator`` the harness uses."""

    @property
    def algorithms(self) -> tuple[str, ...]:
        """Names runnable here."""
        ...

    def available(self, dtype: torch.dtype, op: str = "sum") -> frozenset[str]:
        """Names that can reduce ``dtype`` with ``op`` here (same answer on every rank)."""
        ...

    def all_reduce(
        self, tensor: torch.Tensor, op: str = "sum", algorithm: str | None = None, params: Params | None = None
    ) -> torch.Tensor:
        """Reduce ``tensor`` in place with ``algorithm`` (forced) and ``params``."""
        ...


def process_group_all_reduce(
    tensor: torch.Tensor, op: str, params: Mapping[str, object], group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """``torch.distributed.all_reduce`` on ``group`` (default WORLD); ``params`` must be empty."""
    if params:
        raise ArtuneError(f"process_group_all_reduce(): takes no parameters, got {dict(params)!r}")
    try:
        reduce_op = _TORCH_OPS[op]
    except KeyError:
        raise ArtuneError(
            f"process_group_all_reduce(): op {op!r} is not supported; use one of {', '.join(_TORCH_OPS)}"
        ) from None
    dist.all_reduce(tensor, op=reduce_op, group=group)
    return tensor


class FunctionReducer:
    """A ``Reducer`` made of named functions ``fn(tensor, op, params)``, optionally over a base one.

    Names in ``functions`` are served by the function (and are available for
    every dtype and op: a function that cannot reduce raises, or gives wrong
    results, and the harness records that); other names go to ``base``.
    ``group`` is the process group the harness uses for its own control
    messages (default: ``base.group`` when it has one, else WORLD).
    """

    def __init__(
        self,
        functions: Mapping[str, ReduceFn],
        base: Reducer | None = None,
        group: dist.ProcessGroup | None = None,
    ) -> None:
        self.functions = dict(functions)
        self.base = base
        self.group = group if group is not None else getattr(base, "group", None)
        clash = set(self.functions) & set(base.algorithms if base is not None else ())
        if clash:
            raise ArtuneError(f"FunctionReducer(): names {sorted(clash)} are already the base reducer's")

    @property
    def algorithms(self) -> tuple[str, ...]:
        """The base's names, then the functions' names."""
        return (*(self.base.algorithms if self.base is not None else ()), *self.functions)

    def available(self, dtype: torch.dtype, op: str = "sum") -> frozenset[str]:
        """The base's available names plus every function's name."""
        found = set(self.functions)
        if self.base is not None:
            found |= self.base.available(dtype, op)
        return frozenset(found)

    def all_reduce(
        self, tensor: torch.Tensor, op: str = "sum", algorithm: str | None = None, params: Params | None = None
    ) -> torch.Tensor:
        """Run ``algorithm`` (a function's name, or the base's)."""
        fn = self.functions.get(algorithm or "")
        if fn is not None:
            fn(tensor, op, params or {})
            return tensor
        if self.base is None:
            raise ArtuneError(
                f"FunctionReducer.all_reduce(): unknown algorithm {algorithm!r}; known: {', '.join(self.algorithms)}"
            )
        return self.base.all_reduce(tensor, op, algorithm=algorithm, params=params)
