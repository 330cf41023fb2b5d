"""``--evidence``: the engines' benchmark outputs a change carries, read for the review.

Each file is read by ``artune.evidence.read_evidence`` (vLLM's JSON or
table, SGLang's, nccl-tests, TensorRT-LLM's CSV). Its arch is, in order:
``FILE@ARCH``, what the file says, ``--arch``, the name the review's printed
commands give it (``ARCH-wsN-ENGINE.EXT``), or the one arch that moves at
the file's world size and mode. The name also gives the world size to
formats that print none (SGLang's). A file whose arch cannot be told is an
error that says how to name it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from artune.errors import ArtuneError
from artune.review.asks import Span, Spot, Sweep

#: the name the printed commands give their output: ARCH-wsN-ENGINE.EXT
NAMED = re.compile(r"^(?P<arch>\d+\.\d+)-ws(?P<ws>\d+)-")


def _split(spec: str) -> tuple[str, str]:
    """``FILE@ARCH`` -> ``(FILE, ARCH)``; a plain file -> ``(FILE, "")``."""
    head, at, arch = spec.rpartition("@")
    if at and head and re.fullmatch(r"\d+\.\d+", arch):
        return head, arch
    return spec, ""


def read_sweeps(specs: Sequence[str], arch: str, spans: dict[Spot, list[Span]]) -> list[Any]:
    """The benchmark sweeps of ``specs``, each with its arch (``artune.evidence.BenchmarkSweep``)."""
    if not specs:
        return []
    from artune.evidence import read_evidence

    out = []
    for spec in specs:
        path, given = _split(spec)
        named = NAMED.match(Path(path).name)
        ws = int(named["ws"]) if named else None
        try:
            sweep = read_evidence(path, world_size=ws) if ws is not None else read_evidence(path)
        except ArtuneError as err:
            raise ArtuneError(f"--evidence {spec}: {err}") from None
        if ws is not None and sweep.world_size != ws:
            raise ArtuneError(f"--evidence {spec}: the sweep is at world size {sweep.world_size}, its name says {ws}")
        found = given or sweep.arch or arch or (named["arch"] if named else "") or _only(sweep, spans)
        if not found:
            raise ArtuneError(
                f"--evidence {spec}: which arch is this sweep of? Give it as {path}@ARCH, pass --arch, "
                f"or name the file ARCH-ws{sweep.world_size}-... as the review's commands do"
            )
        out.append(replace(sweep, arch=found))
    return out


def _only(sweep: Any, spans: dict[Spot, list[Span]]) -> str:
    """The one arch that moves at the sweep's world size and mode, or ""."""
    arches = {a for a, ws, mode in spans if (ws, mode) == (sweep.world_size, sweep.mode)}
    return arches.pop() if len(arches) == 1 else ""


def coverage_of(sweep: Any) -> Sweep:
    """What a benchmark sweep covers: its arch, world size, mode and the sizes it timed."""
    return Sweep(sweep.arch, sweep.world_size, sweep.mode, tuple(sweep.sizes), sweep.source)
