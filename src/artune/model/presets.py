"""GPU presets and hardware files: ``Hardware`` from TOML, every figure with its source.

The bundled ``presets.toml`` holds the calibrated factors, the calibrated
per-round latencies (per arch family) and one table per preset. A user's
hardware file has the keys of one preset at the top level::

    arch = "10.7"
    device = "my GPU"
    nvlink_GBps = 1800.0     # per direction
    round_us = "10.0"        # a calibrated family, or a number in us
    overhead_us = 4.0
    eager_overhead_us = 15.0
    sms = 160                # optional
    multicast = true
    sources = ["where each figure comes from"]
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from artune.errors import ArtuneError
from artune.model.gpu import Factors, Figure, Hardware

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_KEYS = ("arch", "device", "nvlink_GBps", "round_us", "overhead_us", "eager_overhead_us", "sms", "multicast", "sources")
_REQUIRED = ("arch", "nvlink_GBps", "round_us", "multicast")
_FACTORS = ("eta_one", "eta_two", "eta_mc", "eager_round", "mc_rounds", "eta_ring")


def bundled() -> dict[str, Any]:
    """The bundled presets file as a dict."""
    text = resources.files("artune.model").joinpath("presets.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def _figure(value: Any, where: str) -> Figure:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Figure.exact(float(value))
    if isinstance(value, Mapping) and "value" in value:
        v = float(value["value"])
        return Figure(v, float(value.get("lo", v)), float(value.get("hi", v)))
    raise ArtuneError(f"{where}: expected a number or {{ value = .., lo = .., hi = .. }}, got {value!r}")


def factors(data: Mapping[str, Any] | None = None) -> Factors:
    """The calibrated factors (bundled unless ``data`` is given)."""
    section = (data or bundled())["factors"]
    return Factors(*(_figure(section[k], f"factors.{k}") for k in _FACTORS), source=str(section.get("source", "")))


def hardware_from_dict(name: str, data: Mapping[str, Any], origin: str) -> Hardware:
    """A ``Hardware`` from one preset's keys; ``ArtuneError`` naming the key and the fix."""
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise ArtuneError(f"{origin}: unknown key {unknown[0]!r}; expected {', '.join(_KEYS)}")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ArtuneError(f"{origin}: missing {', '.join(missing)} (see 'artune plan --help' and the README)")
    base = bundled()
    rounds = data["round_us"]
    if isinstance(rounds, str):
        calibrated = base["calibrated"]["round_us"]
        if rounds not in calibrated:
            raise ArtuneError(
                f"{origin}: round_us = {rounds!r} is not a calibrated family; use one of "
                f"{', '.join(calibrated)} or a number of microseconds"
            )
        round_us = _figure(calibrated[rounds], f"calibrated.round_us.{rounds}")
    else:
        round_us = _figure(rounds, f"{origin}: round_us")
    try:
        bandwidth = float(data["nvlink_GBps"])
        overhead = float(data.get("overhead_us", 4.0))
        eager = float(data.get("eager_overhead_us", 15.0))
        sms = int(data["sms"]) if "sms" in data else None
    except (TypeError, ValueError) as err:
        raise ArtuneError(f"{origin}: a figure is not a number: {err}") from None
    if bandwidth <= 0 or round_us.value <= 0 or overhead < 0 or eager < 0 or (sms is not None and sms <= 0):
        raise ArtuneError(f"{origin}: nvlink_GBps and round_us must be > 0, overheads >= 0, sms > 0")
    return Hardware(
        name=name,
        arch=str(data["arch"]),
        device=str(data.get("device", name)),
        nvlink_GBps=bandwidth,
        round_us=round_us,
        overhead_us=overhead,
        eager_overhead_us=eager,
        sms=sms,
        multicast=bool(data["multicast"]),
        factors=factors(base),
        sources=tuple(str(s) for s in data.get("sources", ())),
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
