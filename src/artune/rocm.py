"""AMD GPUs as a platform of their own: a ``rocm`` table is named by gfx arch, never by a capability number.

torch on ROCm answers ``torch.cuda.get_device_capability()`` with HIP's
major and minor (9.4 on gfx942), and those numbers collide with NVIDIA's:
9.0 is Hopper on CUDA and MI200 (gfx90a) on ROCm. So a ``rocm`` table's
``Platform.arch`` is the gfx arch (``gfx942``, ``gfx950``), and the
capability torch reports is a fact about it (``RocmArch.capability``) that
``gfx_arch`` turns back into the arch where a user or an engine's code gives
the number. The facts, each with its source, are the data file ``rocm.toml``
beside this module.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KIND = "rocm"
_GFX = re.compile(r"gfx[0-9a-f]+", re.IGNORECASE)


@dataclass(frozen=True)
class RocmArch:
    """One AMD GPU architecture: its gfx name, what torch reports for it, its CDNA generation, its products."""

    gfx: str
    capability: str  # "9.4": torch.cuda.get_device_capability() on a ROCm build, as "major.minor"
    cdna: int
    devices: tuple[str, ...]
    borrows: tuple[str, ...]  # the archs a table of this one may borrow from, nearest first
    sources: tuple[str, ...]

    def describe(self) -> str:
        """``gfx942 (CDNA3; torch reports capability 9.4; MI300X, MI300A, MI325X)``."""
        return f"{self.gfx} (CDNA{self.cdna}; torch reports capability {self.capability}; {', '.join(self.devices)})"


@cache
def archs() -> dict[str, RocmArch]:
    """Every gfx arch artune has facts for, by name."""
    data = tomllib.loads(resources.files("artune").joinpath("rocm.toml").read_text(encoding="utf-8"))
    return {
        gfx: RocmArch(
            gfx,
            str(entry["capability"]),
            int(entry["cdna"]),
            tuple(entry["devices"]),
            tuple(entry.get("borrows", ())),
            tuple(entry.get("sources", ())),
        )
        for gfx, entry in data["arch"].items()
    }


def is_gfx(arch: str) -> bool:
    """Whether ``arch`` names an AMD GPU by gfx arch (``gfx942``, ``gfx942:sramecc+:xnack-``)."""
    return arch.lower().startswith("gfx")


def gfx_arch(arch: str) -> str | None:
    """The gfx arch ``arch`` means on ROCm: itself (``gfx942``; the target features of torch's
    ``gcnArchName`` dropped), or the arch whose capability it is (``9.4`` -> ``gfx942``); ``None`` for a
    number no AMD arch reports."""
    found = _GFX.search(arch)
    if found:
        return found[0].lower()
    return next((a.gfx for a in archs().values() if a.capability == arch.strip()), None)


def arch_facts(gfx: str) -> RocmArch | None:
    """The facts of ``gfx`` (``None`` for an arch artune has none for, such as a newer one)."""
    return archs().get(gfx)


def describe(gfx: str) -> str:
    """The arch in one phrase for messages, with what torch reports for it where artune knows."""
    facts = arch_facts(gfx)
    return facts.describe() if facts is not None else f"{gfx} (an AMD arch artune has no facts for)"
