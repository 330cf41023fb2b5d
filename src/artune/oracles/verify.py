"""An engine's own dispatch code against artune's reading of it, probe by probe: ``artune verify-engine``.

``verify(SOURCE)`` takes ``ENGINE==VERSION`` (a release, downloaded once) or
``ENGINE:PATH`` (a checkout or a file) and hands it to the engine's oracle,
``artune.formats.engine.Oracle``, which its ``EnginePlugin`` loads.

The answers are compared element by element and counted per topology. Once
every probe of a release agrees, ``record=True`` keeps its fingerprints in
``artune/formats/<engine>/verified.json`` (``artune.formats.fingerprints``):
only a verification run writes that file.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from artune import rocm
from artune.errors import TableError
from artune.formats import ENGINES, engine_reader, fingerprints
from artune.formats.engine import Oracle
from artune.formats.releases import fetch_release, release_spec

#: the platforms a run can be limited to: a probe is on ROCm when its arch is a gfx arch
PLATFORMS = ("cuda", "rocm")


@dataclass(frozen=True)
class EngineSource:
    """What ``verify-engine`` was given: the engine, the folder or file its oracle reads, the release."""

    engine: str
    root: Path
    spec: str
    version: str = ""  # the release's version; "" for ENGINE:PATH


@dataclass(frozen=True)
class Verification:
    """The engine's answers against artune's, per topology, with the first differences."""

    source: EngineSource
    probes: int
    topologies: tuple[tuple[str, int, int], ...]  # (topology, probes, agree), in the probes' order
    differences: tuple[tuple[str, str, str], ...]  # (probe, engine's answer, artune's), the first ones
    differ: int
    seconds: float
    recorded: str = ""  # where --record kept the fingerprints
    engine_answers: dict[str, int] = field(default_factory=dict)  # answer -> how many probes it was
    unprobed: tuple[str, ...] = ()  # what the probes leave out, each with why (the oracle's ``unprobed``)

    @property
    def agree(self) -> bool:
        return self.probes > 0 and self.differ == 0

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "source": self.source.spec,
            "engine": self.source.engine,
            "probes": self.probes,
            "agree": self.agree,
            "differ": self.differ,
            "topologies": {name: [n, same] for name, n, same in self.topologies},
            "differences": [{"probe": p, "engine": e, "artune": a} for p, e, a in self.differences],
            "engine_answers": self.engine_answers,
            "unprobed": list(self.unprobed),
            "recorded": self.recorded or None,
            "seconds": round(self.seconds, 1),
        }


def source(spec: str) -> EngineSource:
    """``vllm==0.34.0`` (downloaded once), ``sglang:PATH``, ``trtllm:PATH``; ``TableError`` for anything else."""
    release = release_spec(spec)
    if release is not None:
        engine, version = release
        return EngineSource(engine, fetch_release(engine, version), spec, version)
    engine, sep, path = spec.partition(":")
    if not sep or engine not in ENGINES:
        raise TableError(f"{spec}: give ENGINE==VERSION or ENGINE:PATH, ENGINE one of {', '.join(ENGINES)}")
    if not path or not Path(path).exists():
        raise TableError(f"{spec}: no such file or directory {path!r}; give the engine's checkout or file")
    return EngineSource(engine, Path(path), spec)


def oracle(engine: str) -> Oracle:
    """The engine's oracle; ``TableError`` where the engine offers none."""
    found = engine_reader(engine)
    if found.oracle is None:
        raise TableError(f"{engine}: {found.label} offers no oracle: verify-engine cannot run {found.label}'s code")
    return found.oracle()


def _topology(module: Oracle, probe: Any) -> str:
    return str(module.topology(probe)) if module.topology is not None else str(probe.topology)


def _order(name: str) -> tuple[int, int]:
    """``"1 host"`` first, then by hosts, each rack before network."""
    hosts = int(name.split()[0]) if name.split()[0].isdigit() else 0
    return hosts, name.endswith("network")


def verify(spec: str, record: bool = False, keep: int = 10, platform: str | None = None) -> Verification:
    """Run the engine's own code and artune's reading on every probe of ``spec`` (only those of ``platform``,
    ``cuda`` or ``rocm``, when given); with ``record``, keep a release's fingerprints once every probe agreed
    (``TableError`` for a source that is not a release, or a run limited to one platform)."""
    found = source(spec)
    if record and not found.version:
        raise TableError(f"{spec}: --record keeps a release's fingerprints; give ENGINE==VERSION")
    if platform is not None and platform not in PLATFORMS:
        raise TableError(f"unknown platform {platform!r}; give one of {', '.join(PLATFORMS)}")
    if record and platform is not None:
        raise TableError(
            f"{spec}: --record keeps the fingerprints of a release verified on every platform; drop --platform"
        )
    module = oracle(found.engine)
    start = time.perf_counter()
    probes = list(module.probes(found.root))
    # probes kept out of probes(root), whose callers expect one platform
    probes += list(module.extra_probes(found.root)) if module.extra_probes is not None else []
    if platform is not None:
        probes = [p for p in probes if rocm.is_gfx(str(getattr(p, "arch", ""))) == (platform == "rocm")]
        if not probes:
            raise TableError(f"{spec}: has no {platform} probes (its code has no {platform} path artune reads)")
    left_out = module.unprobed  # what the probes leave out (on CUDA), said beside the counts
    theirs = list(module.engine_decisions(found.root, probes))
    ours = list(module.artune_decisions(found.root, probes))
    counts: Counter[str] = Counter()
    same: Counter[str] = Counter()
    differences: list[tuple[str, str, str]] = []
    differ = 0
    for probe, engine_answer, artune_answer in zip(probes, theirs, ours, strict=True):
        name = _topology(module, probe)
        counts[name] += 1
        if engine_answer == artune_answer:
            same[name] += 1
            continue
        differ += 1
        if len(differences) < keep:
            differences.append((str(probe), str(engine_answer), str(artune_answer)))
    result = Verification(
        found,
        len(probes),
        tuple((name, counts[name], same[name]) for name in sorted(counts, key=_order)),
        tuple(differences),
        differ,
        time.perf_counter() - start,
        engine_answers=dict(Counter(str(a) for a in theirs)),
        unprobed=tuple(left_out(found.root)) if left_out is not None and platform != "rocm" else (),
    )
    if record and result.agree:
        if module.evaluated is None:
            raise TableError(f"{found.engine}'s oracle evaluates no dispatch function: nothing to record")
        path = fingerprints.record(found.engine, found.version, module.evaluated(found.root))
        result = Verification(**{**result.__dict__, "recorded": str(path)})
    return result


__all__ = ["PLATFORMS", "EngineSource", "Verification", "oracle", "source", "verify"]
