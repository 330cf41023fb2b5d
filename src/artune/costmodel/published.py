"""Published per-size all-reduce latency sweeps on NVLink GPUs, as fit and validation data.

The sweeps are data, ``data/sweeps.toml`` beside this module: every sweep
names its source and where it is, which GPU (a preset), world size, timing
mode and, per column, which kernel ran. The vLLM sweeps are files in the
benchmark's own output format in ``data/`` (their README names each
source), read by ``artune.evidence`` as a user's sweep is; the others,
whose sources printed none of the formats artune reads (symm-mem-recipes',
kraken's tables, Azure's busbw summaries, an issue's list), are typed in
the TOML file. Where a source leaves the GPU or the world size to be
inferred, the sweep's ``note`` says so. Which published sweeps are left out,
and why, is in ``docs/cost-model.md``.

A *kernel* is one of the GPU model's, ``scheme/implementation``
(``artune.costmodel.gpu.KERNELS``): the scheme is the catalog's
(``one_shot``, ``two_shot``, ``multicast``, ``library``); the
implementation is ``custom`` (an engine-style kernel using the GPU's SMs:
vLLM's custom all-reduce, SGLang's, Triton's), ``torch`` (the torch
symmetric-memory ops, launched with few blocks) or, for the library, NCCL
as it was run (``nccl``: NCCL chooses; ``nccl_ring``/``nccl_nvls``: forced).

Modes: ``graph`` is pipelined back-to-back calls (CUDA graphs of several
calls, as vLLM's ``benchmark_device_communicators.py`` and nccl-tests ``-G``
time them); ``eager`` is calls timed one at a time (CUDA events around each
call after an L2 flush, as symm-mem-recipes and kraken do, or eager launches
as nccl-tests without ``-G`` and torch.distributed loops do).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from artune import catalog
from artune.costmodel.gpu import KERNELS, model_kernel

if TYPE_CHECKING:
    from artune.evidence import BenchmarkSweep


@dataclass(frozen=True)
class Sweep:
    """One published sweep: sizes in bytes, one time column (us) per kernel, ``nan`` where not published."""

    id: str
    source: str
    preset: str
    world_size: int
    mode: str
    kernels: tuple[str, ...]
    sizes: tuple[int, ...]
    times: tuple[tuple[float, ...], ...]  # per size, one time per kernel
    note: str = ""
    url: str = ""  # where the source is

    def __post_init__(self) -> None:
        if len(self.times) != len(self.sizes) or any(len(row) != len(self.kernels) for row in self.times):
            raise ValueError(f"{self.id}: {len(self.sizes)} sizes, {len(self.kernels)} kernels: rows do not match")
        for kernel in self.kernels:
            if kernel not in KERNELS:
                raise ValueError(f"{self.id}: kernel {kernel!r} is none of the model's: {', '.join(KERNELS)}")

    @property
    def choice(self) -> bool:
        """Whether the sweep measured more than one kernel at some size (a choice to score)."""
        return any(sum(not math.isnan(t) for t in row) > 1 for row in self.times)

    def points(self) -> list[tuple[int, str, float]]:
        """``(bytes, kernel, us)`` for every published time."""
        return [
            (n, k, t)
            for n, row in zip(self.sizes, self.times, strict=True)
            for k, t in zip(self.kernels, row, strict=True)
            if not math.isnan(t)
        ]


#: the evidence kernels (``artune.evidence``'s columns) the forms describe -> the model's kernel, from the catalog
MODEL_KERNELS = {name: k for name, kernel in catalog.KERNELS.items() if (k := model_kernel(kernel)) is not None}


def from_evidence(evidence: BenchmarkSweep, sweep_id: str, preset: str, note: str = "") -> Sweep:
    """A benchmark's output (``artune.evidence.read_evidence``) as fit data on ``preset``'s GPU: the columns
    whose kernel the forms describe (``MODEL_KERNELS``; NCCL's in-place twin, NCCL's symmetric kernels,
    FlashInfer and the engines' whole dispatches are left out), sizes and times as read."""
    keep = [i for i, c in enumerate(evidence.columns) if c.kernel in MODEL_KERNELS]
    if not keep:
        raise ValueError(f"{evidence.source}: no column the cost model has a form for")
    return Sweep(
        sweep_id,
        f"{evidence.benchmark} ({evidence.timing})",
        preset,
        evidence.world_size,
        evidence.mode,
        tuple(MODEL_KERNELS[evidence.columns[i].kernel] for i in keep),
        evidence.sizes,
        tuple(tuple(row[i] for i in keep) for row in evidence.times),
        note,
    )


DATA = "sweeps.toml"


def _data(name: str) -> str:
    from importlib.resources import files

    return files("artune.costmodel").joinpath("data", name).read_text(encoding="utf-8")


def _file(name: str, columns: list[str]) -> tuple[tuple[int, ...], tuple[tuple[float, ...], ...]]:
    """Sizes and times (us) of the benchmark output ``name`` in ``data/``, ``columns`` in kernel order."""
    from artune.evidence import read_text

    found = read_text(_data(name), name)
    names = [c.name for c in found.columns]
    order = [names.index(c) for c in columns]
    return found.sizes, tuple(tuple(row[i] for i in order) for row in found.times)


def _times(entry: dict[str, Any]) -> tuple[tuple[int, ...], tuple[tuple[float, ...], ...]]:
    """A sweep's sizes and times (us) from whichever form its entry gives them in."""
    if "file" in entry:
        return _file(entry["file"], entry["columns"])
    sizes = tuple(int(n) for n in entry["sizes"])
    if "busbw_GBps" in entry:  # nccl-tests: bus bandwidth = 2 (p-1)/p bytes / time
        factor = 2 * (entry["world_size"] - 1) / entry["world_size"]
        return sizes, tuple((factor * n / (bw * 1e3),) for n, bw in zip(sizes, entry["busbw_GBps"], strict=True))
    return sizes, tuple(tuple(float(t) for t in row) for row in entry["times_us"])


def load_sweeps(text: str, origin: str = DATA) -> tuple[Sweep, ...]:
    """The sweeps of a ``sweeps.toml`` text; ``ValueError`` naming the sweep and what is wrong with it."""
    out = []
    for i, entry in enumerate(tomllib.loads(text)["sweep"]):
        try:
            sizes, times = _times(entry)
            fields = ("id", "source", "preset", "world_size", "mode")
            out.append(Sweep(*(entry[f] for f in fields), tuple(entry["kernels"]), sizes, times, **_extra(entry)))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{origin}: sweep {entry.get('id', i + 1)}: {err!r}") from None
    return tuple(out)


def _extra(entry: dict[str, Any]) -> dict[str, str]:
    return {k: entry[k] for k in ("note", "url") if k in entry}


SWEEPS: tuple[Sweep, ...] = load_sweeps(_data(DATA))


def sweep(sweep_id: str) -> Sweep:
    """The sweep with ``sweep_id``; ``KeyError`` listing the ids when unknown."""
    for s in SWEEPS:
        if s.id == sweep_id:
            return s
    raise KeyError(f"unknown sweep {sweep_id!r}; sweeps: {', '.join(s.id for s in SWEEPS)}")
