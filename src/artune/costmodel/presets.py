"""GPU presets and hardware files: ``Hardware`` from TOML, every figure with its source.

The bundled ``presets.toml`` holds one table per preset. A user's hardware
file has the keys of one preset at the top level::

    arch = "10.7"
    device = "my GPU"
    nvlink_GBps = 1800.0     # per direction
    sms = 160                # optional
    multicast = true
    round_us = 6.0           # optional: a measured round latency overrides the family's
    sources = ["where each figure comes from"]

An AMD GPU (``arch`` a gfx arch) has no switch: its node is a fully
connected mesh, each GPU one Infinity Fabric link to each peer, so it gives
``links`` (per GPU) and ``link_GBps`` (per link, per direction) instead of
``nvlink_GBps``::

    arch = "gfx942"
    links = 7
    link_GBps = 64.0
    multicast = false

The fitted parameters are not here: they come from ``gpu-fit.json``
(``artune.costmodel.gpu.bundled_fit``), by the arch's family.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from artune.costmodel.gpu import Machine, family_of
from artune.errors import ArtuneError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_KEYS = ("arch", "device", "nvlink_GBps", "links", "link_GBps", "sms", "multicast", "round_us", "sources")
_REQUIRED = ("arch", "multicast")


@dataclass(frozen=True)
class Hardware:
    """One GPU's figures, each with where it comes from (``sources``)."""

    name: str
    arch: str
    device: str
    nvlink_GBps: float  # per GPU, per direction (0 for a mesh)
    sms: int | None
    multicast: bool
    round_us: float | None = None  # a user's measured round latency, else the family's
    sources: tuple[str, ...] = ()
    links: int = 0  # a fully connected mesh: links per GPU (one to each peer); 0: a switch (NVLink)
    link_GBps: float = 0.0  # a mesh: per link, per direction

    def machine(self, unseen_rule: str = "between") -> Machine:
        """What the forms need of this GPU."""
        return Machine(
            self.arch, self.nvlink_GBps, self.multicast, unseen_rule, self.round_us, self.links, self.link_GBps
        )

    @property
    def fabric(self) -> str:
        """The GPU's links in words: ``NVLink 450 GB/s per direction`` or ``7 Infinity Fabric links of ...``."""
        if self.links:
            return f"{self.links} Infinity Fabric links of {self.link_GBps:g} GB/s per direction, a full mesh"
        return f"NVLink {self.nvlink_GBps:g} GB/s per direction"


def bundled() -> dict[str, Any]:
    """The bundled presets file as a dict."""
    text = resources.files("artune.costmodel").joinpath("presets.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def hardware_from_dict(name: str, data: Mapping[str, Any], origin: str) -> Hardware:
    """A ``Hardware`` from one preset's keys; ``ArtuneError`` naming the key and the fix."""
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise ArtuneError(f"{origin}: unknown key {unknown[0]!r}; expected {', '.join(_KEYS)}")
    mesh = "links" in data or "link_GBps" in data
    missing = [k for k in (*_REQUIRED, *(("links", "link_GBps") if mesh else ("nvlink_GBps",))) if k not in data]
    if missing:
        raise ArtuneError(f"{origin}: missing {', '.join(missing)} (see 'artune plan --help' and the README)")
    if mesh and "nvlink_GBps" in data:
        raise ArtuneError(f"{origin}: give nvlink_GBps (a switch) or links and link_GBps (a full mesh), not both")
    try:
        bandwidth = 0.0 if mesh else float(data["nvlink_GBps"])
        links, link = (int(data["links"]), float(data["link_GBps"])) if mesh else (0, 0.0)
        sms = int(data["sms"]) if "sms" in data else None
        round_us = float(data["round_us"]) if "round_us" in data else None
    except (TypeError, ValueError) as err:
        raise ArtuneError(f"{origin}: a figure is not a number: {err}") from None
    if (
        (bandwidth <= 0 and not mesh)
        or (mesh and (links < 1 or link <= 0))
        or (sms is not None and sms <= 0)
        or (round_us is not None and round_us <= 0)
    ):
        raise ArtuneError(f"{origin}: nvlink_GBps (or links and link_GBps), sms and round_us must be > 0")
    arch = str(data["arch"])
    family_of(arch)  # a clear error for an arch that is not a compute capability
    return Hardware(
        name=name,
        arch=arch,
        device=str(data.get("device", name)),
        nvlink_GBps=bandwidth,
        sms=sms,
        multicast=bool(data["multicast"]),
        round_us=round_us,
        sources=tuple(str(s) for s in data.get("sources", ())),
        links=links,
        link_GBps=link,
    )


def preset_names() -> list[str]:
    """The bundled preset names."""
    return sorted(bundled()["preset"])


def load_preset(name: str) -> Hardware:
    """The bundled preset ``name``; ``ArtuneError`` listing the names when unknown."""
    presets = bundled()["preset"]
    if name not in presets:
        raise ArtuneError(f"unknown preset {name!r}; presets: {', '.join(sorted(presets))}")
    return hardware_from_dict(name, presets[name], f"preset {name}")


def load_hardware(path: str | Path) -> Hardware:
    """A user's hardware file; ``ArtuneError`` when it cannot be read or is malformed."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ArtuneError(f"{path}: cannot read: {err.strerror or err}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ArtuneError(f"{path}: not a valid TOML hardware file: {err}") from None
    return hardware_from_dict(path.stem, data, str(path))
