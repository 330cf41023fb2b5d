"""``ArtuneProcessGroup``: the process group ``init_process_group("artune")`` builds.

It is a Python ``torch.distributed.ProcessGroup``, so it replaces the whole
group (torch 2.13 stops at the first Python group it is given, for every
device of a ``"cpu:artune,cuda:nccl"`` spelling). What it does with each call:

- **All-reduce** of CPU tensors (``allreduce``, ``allreduce_coalesced``; sync,
  ``async_op=True``, DDP buckets, functional collectives) runs through a
  ``Communicator`` on this group, built at the first such call on every rank:
  the table's choice, agreement, the self-check, ``PeerTimeout``, fallback
  and ``explain`` behave as documented for the Communicator. ``sum``, ``max``
  and ``min`` go through it; ``avg`` of floating tensors is its sum divided by
  the group size; ``product``, the bitwise ops, ``premul_sum``, and dtypes no
  artune algorithm reduces go to the inner gloo group.
- **All-gather** of CPU tensors (``all_gather_into_tensor``, ``dist.all_gather``,
  the functional and DTensor all-gathers) with at most ``GATHER_MAX_BYTES`` of
  output runs through the Communicator too, as an all-reduce: each rank puts
  its input in its own slot of a zeroed buffer and the buffer is summed as
  integers, so every slot comes back bit for bit (x + 0 = x). It moves world
  size times the bytes of an all-gather, which pays only for small messages:
  there gloo's round trip dominates (a tensor-parallel decode gathers its
  logits every token). Larger ones, ranks on several hosts (not measured
  over a network, where the leaders would exchange world size times the
  bytes), and buffers the table gives the process group's own algorithm go
  to gloo.
- **Every other collective** (barrier, broadcast, the object collectives,
  ``reduce_scatter_tensor`` and the coalesced forms, reduce, gather, scatter,
  all-to-all, send/recv) goes to an inner gloo group on the same ranks,
  called through its own bindings (they release the GIL; falling back to the
  C++ base class from here deadlocks, see the reference notes).
- **CUDA tensors** go to an inner NCCL group built at the first CUDA call,
  when this torch has NCCL and a GPU; otherwise the call raises
  ``ArtuneError``. They never go through gloo. (Where this has run: docs/status.md.)
- The Communicator's own calls on this group (agreement, the process-group
  algorithm, the self-check) go straight to the inner gloo group: a
  per-thread flag marks them.

``dist.new_group`` without a backend builds another ``ArtuneProcessGroup``
for the subgroup (the same rules, its own inner gloo group and Communicator).
``destroy_process_group`` calls ``shutdown``: it closes the Communicator
(nothing stays in /dev/shm), waits for the inner groups' unfinished works and
drops the inner groups, so their threads do not outlive the interpreter
(otherwise gloo aborts at exit).
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from artune.backend.work import ArtuneWork
from artune.errors import ArtuneError

#: reduce ops the Communicator runs, by torch's op type
_R = dist.ReduceOp.RedOpType
_OPS = {_R.SUM: "sum", _R.MAX: "max", _R.MIN: "min", _R.AVG: "sum"}
_MAX_PENDING = 256  # inner works remembered for the drain at shutdown; completed ones are pruned beyond this
#: all-gathers with at most this many bytes of output run as an artune all-reduce (see the module doc): the largest
#: size bench/bench_allgather.py measured, still faster than gloo's all-gather there at 2 and 4 ranks
GATHER_MAX_BYTES = 16 << 20


#: how the Communicator's errors end, and what a torch.distributed user does instead: the group is what they made
COMMUNICATOR_FIX = "create a new communicator"
BACKEND_FIX = 'destroy the process group (dist.destroy_process_group()) and call init_process_group("artune") again'


def in_backend_words(err: Exception) -> Exception:
    """``err`` as a ``torch.distributed`` user reads it: the same exception (a ``PeerTimeout`` stays one, with
    its missing ranks), whose fix names the process group, never a Communicator they did not create."""
    text = str(err)
    if not isinstance(err, ArtuneError) or COMMUNICATOR_FIX not in text:
        return err
    said = copy.copy(err)
    said.args = (text.replace(COMMUNICATOR_FIX, BACKEND_FIX), *err.args[1:])
    return said


class ArtuneProcessGroup(dist.ProcessGroup):
    """A process group whose all-reduces run through an artune ``Communicator`` (see the module doc).

    Built by torch from the registered creator with the group's store, this
    rank, the size and the timeout; users get it from ``init_process_group``
    or ``new_group``, and its Communicator from ``communicator()``.
    """

    #: the backend the Communicator's own process-group calls reach (its baseline algorithm's name)
    artune_inner_backend = "gloo"

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)
        self._store = store
        self._timeout = timeout
        self._gloo: Any = dist.ProcessGroupGloo(dist.PrefixStore("gloo/", store), rank, size, timeout)
        self._nccl: Any = None
        self._comm: Any = None  # the Communicator, built at the first all-reduce (collective)
        self._pending: list[Any] = []
        self._local = threading.local()
        self._name = ""
        self._desc = ""
        self._closed = False
        #: all-reduce calls so far, by who ran them: ``"artune"`` (the Communicator) or ``"gloo"``/``"nccl"``
        #: (delegated: an op or device the Communicator does not take); the Communicator's own calls not counted
        self.allreduce_calls: Counter[str] = Counter()
        #: all-gather calls so far, by who ran them: ``"artune"`` (as a Communicator all-reduce) or ``"gloo"``
        self.allgather_calls: Counter[str] = Counter()
        self._gather_ok: dict[int, bool] = {}  # by output bytes: whether the table runs an artune algorithm for it

    # ------------------------------------------------------------ identity (torch needs the name stored)

    def getBackendName(self) -> str:
        return "artune"

    def setGroupName(self, name: str) -> None:
        self._name = name

    def getGroupName(self) -> str:
        return self._name

    def setGroupDesc(self, desc: str) -> None:
        self._desc = desc

    def getGroupDesc(self) -> str:
        return self._desc

    # ------------------------------------------------------------ the Communicator

    def communicator(self) -> Any:
        """The ``artune.Communicator`` that runs this group's all-reduces (collective the first time)."""
        if self._comm is None:
            if self._closed:
                raise ArtuneError("the artune process group is shut down")
            from artune.communicator import Communicator

            with self._inner_calls():
                self._comm = Communicator(group=self)
        return self._comm

    @contextlib.contextmanager
    def _inner_calls(self) -> Iterator[None]:
        """Route this thread's calls on this group to the inner groups (the Communicator's own calls)."""
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth

    def _direct(self) -> bool:
        return bool(getattr(self._local, "depth", 0))

    # ------------------------------------------------------------ all-reduce

    def allreduce(self, tensors: Sequence[torch.Tensor], opts: Any) -> Any:
        tensors = list(tensors)
        if self._direct():
            return self._delegate(tensors, lambda inner: inner.allreduce(tensors, opts))
        if not _all_cpu(tensors):
            return self._delegate(tensors, lambda inner: inner.allreduce(tensors, opts), count=True)
        return self._reduce(tensors, opts.reduceOp, lambda: self._inner_for(tensors).allreduce(tensors, opts))

    def allreduce_coalesced(self, tensors: Sequence[torch.Tensor], opts: Any) -> Any:
        tensors = list(tensors)
        if self._direct():
            return self._delegate(tensors, lambda inner: inner.allreduce_coalesced(tensors, opts))
        if not _all_cpu(tensors):
            return self._delegate(tensors, lambda inner: inner.allreduce_coalesced(tensors, opts), count=True)
        return self._reduce(tensors, opts.reduceOp, lambda: self._inner_for(tensors).allreduce_coalesced(tensors, opts))

    def _reduce(self, tensors: list[torch.Tensor], reduce_op: Any, delegate: Callable[[], Any]) -> Any:
        """Reduce each tensor through the Communicator when it can; else ``delegate`` to gloo."""
        try:
            comm = self.communicator()
            kind = reduce_op.op if hasattr(reduce_op, "op") else reduce_op
            op = _OPS.get(kind)
            if op is None or any(
                not comm.available(t.dtype, op) or (kind == _R.AVG and not t.is_floating_point()) for t in tensors
            ):
                self.allreduce_calls["gloo"] += 1
                return self._track(delegate())
            self.allreduce_calls["artune"] += 1
            with self._inner_calls():
                for tensor in tensors:
                    comm.all_reduce(tensor, op)
                    if kind == _R.AVG:
                        tensor.div_(self.size())
        except Exception as err:  # reported by wait() and the future, as torch's works do
            return ArtuneWork(tensors, in_backend_words(err))
        return ArtuneWork(tensors)

    # ------------------------------------------------------------ all-gather as an all-reduce

    def _gathers_here(self, inputs: Sequence[torch.Tensor], fits: bool) -> bool:
        """Whether this all-gather runs through the Communicator; counts it under gloo when it does not.

        ``fits``: the outputs match the inputs (``_fits_tensor``, ``_fits_list``).
        Decided from what every rank of a correct program has alike (sizes,
        dtypes, the table), never from memory layout, so all ranks take the
        same path.
        """
        if self._direct():  # the Communicator's own calls: gloo, not counted
            return False
        here = fits and bool(inputs) and _all_cpu(inputs) and all(self._gather_buffer_ok(t) for t in inputs)
        if not here:
            self.allgather_calls["gloo"] += 1
        return here

    def _gather_buffer_ok(self, tensor: torch.Tensor) -> bool:
        """Whether the table runs an artune algorithm on ``tensor``'s all-gather buffer (cached by its size)."""
        nbytes = self.size() * tensor.numel() * tensor.element_size()
        here = self._gather_ok.get(nbytes)
        if here is None:
            try:
                comm = self.communicator()
            except Exception:  # the all-gather goes to gloo, which reports its own errors
                return False
            dtype = _sum_dtype(nbytes)
            here = 0 < nbytes <= GATHER_MAX_BYTES and comm.hosts == 1 and bool(comm.available(dtype, "sum"))
            if here:
                probe = torch.empty(nbytes // dtype.itemsize, dtype=dtype)
                here = comm.decide(probe, "sum").algorithm != comm.baseline_for("cpu")
            self._gather_ok[nbytes] = here
        return here

    def _gather(self, outputs: Any, inputs: list[torch.Tensor], unpack: Callable[..., None]) -> Any:
        """Each input into this rank's slot of a zeroed buffer, the buffer summed as integers, ``unpack``ed."""
        self.allgather_calls["artune"] += 1
        try:
            comm = self.communicator()
            rank, size = self.rank(), self.size()
            with self._inner_calls():
                for k, tensor in enumerate(inputs):
                    n = tensor.numel()
                    buffer = torch.zeros(size * n, dtype=tensor.dtype)
                    buffer[rank * n : (rank + 1) * n].copy_(tensor.reshape(-1))
                    nbytes = buffer.numel() * buffer.element_size()
                    comm.all_reduce(buffer.view(torch.uint8).view(_sum_dtype(nbytes)), "sum")
                    unpack(outputs, k, buffer, size)
        except Exception as err:  # reported by wait() and the future, as torch's works do
            return ArtuneWork(_flat(outputs), in_backend_words(err))
        return ArtuneWork(_flat(outputs))

    # ------------------------------------------------------------ everything else: the inner groups

    def _inner_for(self, tensors: Sequence[torch.Tensor]) -> Any:
        """The inner group for these tensors' device: gloo for CPU, NCCL for CUDA."""
        kinds = {t.device.type for t in tensors}
        if self._closed or self._gloo is None:
            raise ArtuneError("the artune process group is shut down (destroy_process_group was called)")
        if not kinds or kinds == {"cpu"}:
            return self._gloo
        if kinds == {"cuda"}:
            return self._nccl_group()
        raise ArtuneError(
            f"the artune backend takes CPU tensors (through artune and gloo) and CUDA tensors (through an inner "
            f"NCCL group); got tensors on {sorted(kinds)}: move them to one of those devices"
        )

    def _nccl_group(self) -> Any:
        if self._nccl is None:
            if not (dist.is_nccl_available() and torch.cuda.is_available()):
                raise ArtuneError(
                    "the artune backend sends CUDA tensors to an inner NCCL group, but this torch has no NCCL or "
                    "no GPU; use CPU tensors, or init_process_group('nccl') for CUDA work"
                )
            # NCCL sets up its communicators lazily, at the first collective, so building it here is local
            self._nccl = dist.ProcessGroupNCCL(dist.PrefixStore("nccl/", self._store), self.rank(), self.size())
        return self._nccl

    def _get_backend(self, device: Any) -> Any:
        """The inner backend for ``device``; torch asks for it when ``init_process_group`` gets a ``device_id``."""
        kind = torch.device(device).type
        if kind == "cuda":
            return self._nccl_group()
        if kind == "cpu":
            return self._inner_for(())
        raise ArtuneError(f"the artune backend has no inner group for {kind} devices (it takes CPU and CUDA)")

    def _delegate(self, tensors: Sequence[torch.Tensor], call: Callable[[Any], Any], count: bool = False) -> Any:
        inner = self._inner_for(tensors)
        if count:
            self.allreduce_calls["nccl" if inner is self._nccl else "gloo"] += 1
        return self._track(call(inner))

    def _track(self, work: Any) -> Any:
        """Remember an inner work so that ``shutdown`` can wait for it before dropping the inner group."""
        pending = self._pending
        if len(pending) >= _MAX_PENDING:
            pending[:] = [w for w in pending if not w.is_completed()]
        pending.append(work)
        return work

    def broadcast(self, tensors: Sequence[torch.Tensor], opts: Any) -> Any:
        return self._delegate(tensors, lambda inner: inner.broadcast(tensors, opts))

    def barrier(self, opts: Any = None) -> Any:
        inner = self._inner_for(())
        return self._track(inner.barrier(opts) if opts is not None else inner.barrier())

    def allgather(self, output_tensors: Any, input_tensors: Sequence[torch.Tensor], opts: Any) -> Any:
        if self._gathers_here(input_tensors, _fits_list(output_tensors, input_tensors, self.size())):
            return self._gather(output_tensors, input_tensors, _gather_into_list)
        return self._delegate(input_tensors, lambda inner: inner.allgather(output_tensors, input_tensors, opts))

    def allgather_coalesced(self, output_lists: Any, input_list: Sequence[torch.Tensor], opts: Any) -> Any:
        return self._delegate(input_list, lambda inner: inner.allgather_coalesced(output_lists, input_list, opts))

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any) -> Any:
        if self._gathers_here((input,), _fits_tensor((output,), (input,), self.size())):
            return self._gather([output], [input], _gather_into_tensor)
        return self._delegate((input,), lambda inner: inner._allgather_base(output, input, opts))

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any) -> Any:
        return self._delegate((input,), lambda inner: inner._reduce_scatter_base(output, input, opts))

    # the older names some callers still use
    _allgather_base = all_gather_single
    _reduce_scatter_base = reduce_scatter_single

    def all_gather_single_coalesced(self, outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor], opts: Any):
        if self._gathers_here(inputs, _fits_tensor(outputs, inputs, self.size())):
            return self._gather(list(outputs), list(inputs), _gather_into_tensor)
        return self._pairwise(outputs, inputs, lambda inner, o, i: inner._allgather_base(o, i, opts))

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def reduce_scatter_single_coalesced(self, outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor], opts):
        return self._pairwise(outputs, inputs, lambda inner, o, i: inner._reduce_scatter_base(o, i, opts))

    def reduce_scatter_tensor_coalesced(self, outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor], opts):
        return self._pairwise(outputs, inputs, lambda inner, o, i: inner._reduce_scatter_base(o, i, opts))

    def _pairwise(self, outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor], call: Callable) -> Any:
        """A coalesced call as one inner call per (output, input) pair, finished before returning."""
        outputs, inputs = list(outputs), list(inputs)
        try:
            inner = self._inner_for(inputs)
            for work in [self._track(call(inner, o, i)) for o, i in zip(outputs, inputs, strict=True)]:
                work.wait()
        except Exception as err:
            return ArtuneWork(outputs, err)
        return ArtuneWork(outputs)

    def reduce_scatter(self, output_tensors: Sequence[torch.Tensor], input_tensors: Any, opts: Any) -> Any:
        return self._delegate(output_tensors, lambda inner: inner.reduce_scatter(output_tensors, input_tensors, opts))

    def reduce(self, tensors: Sequence[torch.Tensor], opts: Any) -> Any:
        return self._delegate(tensors, lambda inner: inner.reduce(tensors, opts))

    def gather(self, output_tensors: Any, input_tensors: Sequence[torch.Tensor], opts: Any) -> Any:
        return self._delegate(input_tensors, lambda inner: inner.gather(output_tensors, input_tensors, opts))

    def scatter(self, output_tensors: Sequence[torch.Tensor], input_tensors: Any, opts: Any) -> Any:
        return self._delegate(output_tensors, lambda inner: inner.scatter(output_tensors, input_tensors, opts))

    def alltoall(self, output_tensors: Sequence[torch.Tensor], input_tensors: Sequence[torch.Tensor], opts: Any):
        return self._delegate(input_tensors, lambda inner: inner.alltoall(output_tensors, input_tensors, opts))

    def all_to_all_single(
        self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: Any, input_split_sizes: Any, opts: Any
    ) -> Any:
        return self._delegate(
            (input,), lambda inner: inner.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)
        )

    def send(self, tensors: Sequence[torch.Tensor], dst: int, tag: int) -> Any:
        return self._delegate(tensors, lambda inner: inner.send(tensors, dst, tag))

    def recv(self, tensors: Sequence[torch.Tensor], src: int, tag: int) -> Any:
        return self._delegate(tensors, lambda inner: inner.recv(tensors, src, tag))

    def recv_anysource(self, tensors: Sequence[torch.Tensor], tag: int) -> Any:
        return self._delegate(tensors, lambda inner: inner.recv_anysource(tensors, tag))

    # ------------------------------------------------------------ lifetime

    def shutdown(self) -> None:
        """Close the Communicator, wait for unfinished inner works, drop the inner groups; idempotent."""
        self._close(drain=True)

    def abort(self) -> None:
        """Like ``shutdown`` without waiting for unfinished works."""
        self._close(drain=False)

    def _close(self, drain: bool) -> None:
        if self._closed:
            return
        self._closed = True
        comm, self._comm = self._comm, None
        if comm is not None:
            comm.close()
        pending, self._pending = self._pending, []
        if drain:
            for work in pending:
                with contextlib.suppress(Exception):
                    if not work.is_completed():
                        work.wait(self._timeout)
        del pending  # the works go here, with the GIL held, not on a gloo thread at interpreter exit
        self._gloo = None
        self._nccl = None


def _all_cpu(tensors: Sequence[torch.Tensor]) -> bool:
    return all(t.device.type == "cpu" for t in tensors)


def _sum_dtype(nbytes: int) -> torch.dtype:
    """The integer type an all-gather buffer of ``nbytes`` is summed as (whole words when they fit)."""
    return torch.int32 if nbytes % 4 == 0 else torch.uint8


def _fits_tensor(outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor], size: int) -> bool:
    """Each output is a CPU tensor of the input's dtype with world size times its elements."""
    return len(outputs) == len(inputs) and all(
        o.device.type == "cpu" and o.dtype == i.dtype and o.numel() == size * i.numel()
        for o, i in zip(outputs, inputs, strict=True)
    )


def _fits_list(outputs: Sequence[Sequence[torch.Tensor]], inputs: Sequence[torch.Tensor], size: int) -> bool:
    """Each input has a list of world-size CPU outputs shaped like it (``dist.all_gather``)."""
    return len(outputs) == len(inputs) and all(
        len(outs) == size
        and all(o.device.type == "cpu" and o.dtype == i.dtype and o.numel() == i.numel() for o in outs)
        for outs, i in zip(outputs, inputs, strict=True)
    )


def _gather_into_tensor(outputs: list[torch.Tensor], k: int, buffer: torch.Tensor, size: int) -> None:
    outputs[k].copy_(buffer.view(outputs[k].shape))


def _gather_into_list(outputs: list[list[torch.Tensor]], k: int, buffer: torch.Tensor, size: int) -> None:
    for out, part in zip(outputs[k], buffer.chunk(size), strict=True):
        out.copy_(part.view(out.shape))


def _flat(outputs: Any) -> list[torch.Tensor]:
    return [t for o in outputs for t in (o if isinstance(o, (list, tuple)) else [o])]
