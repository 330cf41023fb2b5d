"""The shared-memory all-reduce algorithms: ``shm_one_shot`` and ``shm_two_shot``.

Both reduce in rank order (0, 1, ..., W-1) with the same accumulation type
(fp32 for float16/bfloat16 sums, the tensor's own type otherwise), so they
give bit-identical results on every rank and to each other. Messages larger
than ``chunk_bytes`` (default ``DEFAULT_CHUNK_BYTES``, at most the channel's
capacity) go in chunks, one channel step each. Integer sums wrap
around as torch's do; max/min propagate NaN (``torch.maximum``). Tensors must
be contiguous CPU tensors.

Two implementations of the same rounds: where the channel runs the compiled
round (``native.py``), ``bind`` returns the native step itself, which does
every chunk of a call in one C call; otherwise the Python round below runs.
Its per-call path is kept lean too: ``bind`` prepares each (shape, dtype, op,
chunk) once (views over the segment, header fields, the chunk spans) and
caches it on the channel, headers are packed with a precompiled ``struct``,
and reductions write in place with ``out=``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch

from artune.algorithms.base import NUMERIC_DTYPES, REDUCE_OPS, Algorithm
from artune.catalog import SHM_CHUNK_BYTES
from artune.errors import CallMismatch
from artune.sizes import parse_size

from .channel import _HDR, DTYPE_CODES, OP_CODES, ShmChannel, algorithm_code


def _native_step(channel: Any, *args: int) -> Callable[[torch.Tensor], None]:
    from ._native import step  # only reached when the module loaded (the channel has a native side)

    return step(channel, *args)  # type: ignore[no-any-return]


#: chunk size when the table gives none: small enough that a chunk's copy and reduction stay in a
#: core's L2 (figures: docs/results/shm-defaults.md). The tuner searches ``chunk_bytes`` per machine.
DEFAULT_CHUNK_BYTES = SHM_CHUNK_BYTES

# how a (dtype, op) pair is reduced
_ADD, _MAX, _MIN, _ADD_FP32 = 0, 1, 2, 3
_BINARY = {_ADD: torch.add, _MAX: torch.maximum, _MIN: torch.minimum}
_HALF = (torch.float16, torch.bfloat16)
SUPPORTED_DTYPES: tuple[torch.dtype, ...] = NUMERIC_DTYPES


def _kind(dtype: torch.dtype, op: str) -> int:
    if op == "sum":
        return _ADD_FP32 if dtype in _HALF else _ADD
    return _MAX if op == "max" else _MIN


# (dtype, op) -> (dtype code, op code, reduction kind, itemsize); absent = unavailable
_PLANS: dict[tuple[torch.dtype, str], tuple[int, int, int, int]] = {
    (dt, op): (DTYPE_CODES[dt], OP_CODES[op], _kind(dt, op), dt.itemsize)
    for dt in SUPPORTED_DTYPES
    for op in REDUCE_OPS
}


def shm_unavailable(dtype: torch.dtype, op: str) -> str | None:
    """Why the shm algorithms cannot reduce ``dtype`` with ``op`` (``None`` when they can)."""
    if op not in REDUCE_OPS:
        return f"op {op!r} is not supported by the shm algorithms (supported: {', '.join(REDUCE_OPS)})"
    if (dtype, op) not in _PLANS:
        names = ", ".join(str(d).removeprefix("torch.") for d in SUPPORTED_DTYPES)
        return f"dtype {dtype} is not supported by the shm algorithms (supported: {names})"
    return None


def _reduce(kind: int, srcs: tuple[torch.Tensor, ...], out: torch.Tensor, acc: torch.Tensor | None) -> None:
    """``out = srcs[0] (op) srcs[1] (op) ...`` left to right; half sums accumulate in ``acc`` (fp32)."""
    if kind == _ADD_FP32:
        assert acc is not None
        acc.copy_(srcs[0])
        for src in srcs[1:]:
            acc.add_(src)  # fp32 += half: computed in fp32
        out.copy_(acc)  # one rounding, to nearest even
        return
    if len(srcs) == 1:
        if srcs[0] is not out:
            out.copy_(srcs[0])
        return
    fn = _BINARY[kind]
    fn(srcs[0], srcs[1], out=out)
    for src in srcs[2:]:
        fn(out, src, out=out)


def _chunk_elements(value: object, capacity: int, itemsize: int) -> int:
    """Elements per chunk for the ``chunk_bytes`` parameter ``value``; ``ValueError`` when out of range."""
    nbytes = parse_size(value, "chunk_bytes") if not isinstance(value, int) or isinstance(value, bool) else value
    if not 0 < nbytes <= capacity:
        raise ValueError(
            f"chunk_bytes={value!r} is out of range: use 1..{capacity} (the shm channel's buffer capacity)"
        )
    return max(1, nbytes // itemsize)


@dataclass(frozen=True)
class _Step:
    """One channel step: the elements it covers and the header fields every rank must agree on."""

    shape: tuple[int, ...]  # of the views (the caller's shape for a one-step call)
    m: int  # elements in this step
    numel: int  # elements in the whole call
    chunk: int  # elements per chunk; 0 for a one-step call
    dtype: torch.dtype
    dcode: int
    ocode: int
    kind: int


class _ShmAlgorithm(Algorithm):
    """What both shm algorithms share: the channel, availability, parameters, chunking, failure handling."""

    #: every step's header carries element count, dtype, op and algorithm: no ``agree`` round needed
    checks_calls = True
    devices = frozenset({"cpu"})

    #: declared tunable parameters and the values a tuner may try (those above the capacity are skipped;
    #: ``tunable_space()`` gives the values valid on this channel)
    tunables: ClassVar[dict[str, tuple[int, ...]]] = {
        "chunk_bytes": (64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 32 << 20),
    }

    def __init__(self, channel: ShmChannel) -> None:
        self._ch = channel
        self._code = algorithm_code(self.name)
        self._rank = channel.rank
        self._default_chunk = min(channel.capacity, DEFAULT_CHUNK_BYTES)

    def unavailable(self, dtype: torch.dtype, op: str) -> str | None:
        return shm_unavailable(dtype, op)

    def tunable_space(self) -> dict[str, tuple[object, ...]]:
        """``tunables`` restricted to this channel's capacity (the capacity itself always included)."""
        cap = self._ch.capacity
        values = sorted({v for v in self.tunables["chunk_bytes"] if v <= cap} | {cap})
        return {"chunk_bytes": tuple(values)}

    def all_reduce(self, tensor: torch.Tensor, op: str, params: Mapping[str, object]) -> torch.Tensor:
        if not tensor.is_contiguous():
            raise ValueError("the shm all-reduce needs a contiguous tensor")
        self.bind(tensor.shape, tensor.dtype, op, params)(tensor)
        return tensor

    def bind(
        self, shape: torch.Size, dtype: torch.dtype, op: str, params: Mapping[str, object]
    ) -> Callable[[torch.Tensor], None]:
        """The all-reduce of contiguous ``shape``/``dtype`` tensors, with views and headers prepared once.

        Cached on the channel per (shape, dtype, op, chunk), so the views over
        the segment are built once and dropped when the channel closes.
        """
        ch = self._ch
        if ch._state:
            ch._check_open()
        plan = _PLANS.get((dtype, op))
        if plan is None:
            raise ValueError(shm_unavailable(dtype, op))
        chunk_bytes = params.get("chunk_bytes") if params else None
        per_chunk = (
            self._default_chunk // plan[3]
            if chunk_bytes is None
            else _chunk_elements(chunk_bytes, ch.capacity, plan[3])
        )
        key = (self._code, shape, dtype, op, per_chunk)
        return ch._cache.get(key) or ch.cache(key, self._compile(shape, dtype, plan, per_chunk))

    def _compile(
        self, shape: torch.Size, dtype: torch.dtype, plan: tuple[int, int, int, int], per_chunk: int
    ) -> Callable[[torch.Tensor], None]:
        ch = self._ch
        dcode, ocode, kind, itemsize = plan
        n = math.prod(shape)
        if ch.native is not None:
            # the compiled round runs every chunk in one call; it checks the channel's state and marks it
            # broken on a failed wait itself, so the bound call is the native object, nothing around it
            return _native_step(
                ch.native,
                self._native_kind,
                n,
                per_chunk,
                itemsize,
                n,
                0 if n <= per_chunk else per_chunk,
                dcode,
                ocode,
                self._code,
            )
        if n <= per_chunk:
            # one step (chunk field 0); n == 0 still does the header round so mismatches are caught
            step = self._prepare(_Step(tuple(shape), n, n, 0, dtype, dcode, ocode, kind))

            def steps(x: torch.Tensor) -> None:
                step(x, 0)

        else:
            last = n % per_chunk or per_chunk
            full_spec = _Step((per_chunk,), per_chunk, n, per_chunk, dtype, dcode, ocode, kind)
            full = self._prepare(full_spec)
            tail = full if last == per_chunk else self._prepare(replace(full_spec, shape=(last,), m=last))
            spans = [(slice(lo, lo + per_chunk), full) for lo in range(0, n - last, per_chunk)]
            spans.append((slice(n - last, n), tail))

            def steps(x: torch.Tensor) -> None:
                flat = x.view(-1)
                for index, (span, chunk_step) in enumerate(spans):
                    chunk_step(flat[span], index)

        def run(x: torch.Tensor) -> None:
            if ch._state:
                ch._check_open()
            if x.requires_grad:
                x = x.detach()
            try:
                steps(x)
            except CallMismatch:
                raise  # every rank did the same rounds: the channel stays usable
            except BaseException as err:
                ch.mark_broken(f"interrupted by {type(err).__name__}")
                raise

        return run

    #: the compiled round's code for this algorithm
    _native_kind: ClassVar[int] = 0

    def _prepare(self, spec: _Step) -> Callable[[torch.Tensor, int], None]:
        """The closure ``step(x, chunk_index)`` that runs one channel step as ``spec`` describes."""
        raise NotImplementedError


class ShmOneShot(_ShmAlgorithm):
    """Every rank copies its chunk into its slot, then reduces all slots in rank order into its output."""

    name = "shm_one_shot"
    _native_kind = 1  # _native.ONE_SHOT

    def _prepare(self, spec: _Step) -> Callable[[torch.Tensor, int], None]:
        ch, rank, code = self._ch, self._rank, self._code
        shape, dtype, m, kind = spec.shape, spec.dtype, spec.m, spec.kind
        numel, chunk, dcode, ocode = spec.numel, spec.chunk, spec.dcode, spec.ocode
        bufs = tuple(tuple(v.view(shape) for v in ch.slot_views(b, dtype, m)) for b in (0, 1))
        acc = ch.scratch(m).view(shape) if kind == _ADD_FP32 else None
        # x still holds this rank's data: use it in place of its slot in the first (a op b) so that op
        # updates x in place (no third array to write-allocate: ~15% less memory traffic); the argument
        # order stays 0, 1, ... (max/min of +0 and -0 depend on it)
        in_place = kind != _ADD_FP32 and rank <= 1
        pack, header_round, box = _HDR.pack, ch.header_round, ch._seqbox

        def step(x: torch.Tensor, index: int) -> None:
            seq = box[0]
            box[0] = seq + 1
            buf = seq & 1
            slots = bufs[buf]
            slots[rank].copy_(x)
            header_round(buf, pack(seq, numel, chunk, index, dcode, ocode, code))
            if m:
                if in_place:
                    slots = (*slots[:rank], x, *slots[rank + 1 :])
                _reduce(kind, slots, x, acc)

        return step


class ShmTwoShot(_ShmAlgorithm):
    """Reduce-scatter then all-gather: rank r reduces slice r (1/W of the chunk) of every rank's data,
    publishes it in its slot, and after a second round copies the other ranks' reduced slices.

    Traffic is kept low by working in the caller's tensor: ranks 0 and 1 copy into their slot only
    the slices peers read, and reduce their own slice in place (their own data is the first or
    second operand, so the argument order stays 0, 1, ...); ranks >= 2 copy all their data first,
    since the first (0 op 1) overwrites their slice before their own turn comes.
    """

    name = "shm_two_shot"
    _native_kind = 2  # _native.TWO_SHOT

    def _prepare(self, spec: _Step) -> Callable[[torch.Tensor, int], None]:
        ch, rank, code = self._ch, self._rank, self._code
        dtype, m, kind = spec.dtype, spec.m, spec.kind
        numel, chunk, dcode, ocode = spec.numel, spec.chunk, spec.dcode, spec.ocode
        world = ch.world_size
        bounds = [m * r // world for r in range(world + 1)]
        sizes = [bounds[r + 1] - bounds[r] for r in range(world)]
        lo, hi = bounds[rank], bounds[rank + 1]
        bufs = []
        for b in (0, 1):
            slots = ch.slot_views(b, dtype, m)
            mine = slots[rank]
            if rank <= 1:
                copy_in: Any = tuple((p, mine[bounds[p] : bounds[p + 1]]) for p in range(world) if p != rank)
            else:
                copy_in = mine
            srcs = tuple(s[lo:hi] for s in slots)
            gather = tuple((p, slots[p][bounds[p] : bounds[p + 1]]) for p in range(world) if p != rank)
            bufs.append((copy_in, srcs, mine[lo:hi], gather))
        acc = ch.scratch(hi - lo) if kind == _ADD_FP32 else None
        pack, header_round, reduced_round, box = _HDR.pack, ch.header_round, ch.reduced_round, ch._seqbox

        def step(x: torch.Tensor, index: int) -> None:
            seq = box[0]
            box[0] = seq + 1
            buf = seq & 1
            copy_in, srcs, publish, gather = bufs[buf]
            if m:
                xf = x if x.dim() == 1 else x.view(-1)
                parts = xf.split_with_sizes(sizes)
                if rank <= 1:
                    for p, view in copy_in:
                        view.copy_(parts[p])
                else:
                    copy_in.copy_(xf)
            header_round(buf, pack(seq, numel, chunk, index, dcode, ocode, code))
            if m:
                mine = parts[rank]
                if rank <= 1:  # its own slice never went to its slot
                    srcs = (*srcs[:rank], mine, *srcs[rank + 1 :])
                _reduce(kind, srcs, mine, acc)
                publish.copy_(mine)
                reduced_round(buf, seq)
                for p, view in gather:
                    parts[p].copy_(view)

        return step
