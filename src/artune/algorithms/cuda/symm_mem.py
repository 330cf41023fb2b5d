"""torch symmetric-memory all-reduces: one-shot, two-shot and multimem (NVLS).

Where this has run: docs/status.md.

The Communicator's set-up allocates one symmetric buffer per process group
and rendezvous it once (``SymmMemBuffer``); it is registered before any
capture. Each call stages its input into the buffer, runs the op on the
buffer and copies the result out, as vLLM's symmetric-memory communicator
does. Everything here is stream-ordered (no host synchronisation), so the
calls can be captured in a CUDA graph. Which op a name uses is
feature-detected (``rules.OPS``): ``one_shot_all_reduce_out`` writes straight
into the caller's tensor where the installed torch has it. A peer must not
overwrite its buffer with the next call's input while this rank still reads
it: that rests on the torch kernels' own barriers through their signal pads,
as vLLM's use of the same pattern does; the self-check and
``bench/gpu_check.py`` are what will show it holds.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed as dist

from artune.algorithms.base import Algorithm
from artune.algorithms.cuda import rules


def group_name(group: Any) -> str:
    """The name ``torch.ops.symm_mem`` knows ``group`` by (WORLD when ``None``)."""
    return str((group if group is not None else dist.group.WORLD).group_name)


class SymmMemBuffer:
    """One symmetric buffer of ``nbytes`` on the current CUDA device for ``group``.

    Construction allocates (local); ``rendezvous`` is collective. They are
    separate so that the ranks can agree that every allocation succeeded
    before any rank waits in the rendezvous for a peer that failed.
    """

    def __init__(self, group: Any, nbytes: int) -> None:
        import torch.distributed._symmetric_memory as symm_mem

        self.group_name = group_name(group)
        enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
        if enable is not None:  # required before torch 2.8, deprecated after
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                enable(self.group_name)
        self.nbytes = int(nbytes)
        device = torch.device("cuda", torch.cuda.current_device())
        self.storage = symm_mem.empty(self.nbytes, dtype=torch.uint8, device=device)
        self.handle: Any = None
        self.multicast = False

    def rendezvous(self) -> None:
        """Exchange the buffer with every rank of the group (collective); learns whether multicast works."""
        import torch.distributed._symmetric_memory as symm_mem

        self.handle = symm_mem.rendezvous(self.storage, self.group_name)
        self.multicast = bool(getattr(self.handle, "multicast_ptr", 0))

    def view(self, dtype: torch.dtype, numel: int) -> torch.Tensor:
        """The first ``numel`` elements of the buffer as ``dtype``."""
        itemsize = torch.empty((), dtype=dtype).element_size()
        return self.storage[: numel * itemsize].view(dtype)

    def close(self) -> None:
        """Drop the references (torch frees the allocation when the last one goes)."""
        self.handle = None
        self.storage = torch.empty(0, dtype=torch.uint8)


class SymmMemAlgorithm(Algorithm):
    """One ``torch.ops.symm_mem`` all-reduce over a ``SymmMemBuffer``."""

    devices = frozenset({"cuda"})
    capturable = True

    def __init__(self, name: str, buffer: SymmMemBuffer) -> None:
        self.name = name
        self.buffer = buffer
        namespace = torch.ops.symm_mem
        self._op_name = next(op for op in rules.OPS[name] if rules._has_op(namespace, op))
        self._op = getattr(namespace, self._op_name)

    def unavailable(self, dtype: torch.dtype, op: str) -> str | None:
        return rules.call_unavailable(dtype, op)

    def unfit(self, nbytes: int, dtype: torch.dtype) -> str | None:
        return rules.size_unfit(nbytes, torch.empty((), dtype=dtype).element_size(), self.buffer.nbytes)

    def all_reduce(self, tensor: torch.Tensor, op: str, params: Mapping[str, object]) -> torch.Tensor:
        self.bind(tensor.shape, tensor.dtype, op, params)(tensor)
        return tensor

    def bind(
        self, shape: torch.Size, dtype: torch.dtype, op: str, params: Mapping[str, object]
    ) -> Callable[[torch.Tensor], object]:
        """Stage in, reduce in the buffer, copy out: three stream-ordered launches, nothing on the host."""
        staged = self.buffer.view(dtype, math.prod(shape))
        name, run, group = self._op_name, self._op, self.buffer.group_name
        if name == "one_shot_all_reduce_out":

            def call(tensor: torch.Tensor) -> None:
                staged.copy_(tensor.view(-1))
                run(staged, op, group, tensor.view(-1))

        elif name == "one_shot_all_reduce":

            def call(tensor: torch.Tensor) -> None:
                staged.copy_(tensor.view(-1))
                tensor.view(-1).copy_(run(staged, op, group))

        else:  # two_shot_all_reduce_, multimem_all_reduce_: in place on the buffer

            def call(tensor: torch.Tensor) -> None:
                staged.copy_(tensor.view(-1))
                run(staged, op, group)
                tensor.view(-1).copy_(staged)

        return call

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.buffer.close()
