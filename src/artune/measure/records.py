"""What a measurement is, and the append-only log that keeps them.

A ``Candidate`` is an algorithm with fixed parameters (hashable, with a
canonical ``key``). A ``Measurement`` holds the raw per-iteration samples of
one candidate at one size (the slowest rank's time of each iteration), the
number of wrong elements of its correctness check, and a status: failures are
kept as explicit values (``timeout``, ``runtime``, ``invalid``) whose time is
``inf``, never dropped.

A ``MeasurementLog`` is a JSON-lines file whose first line is a
self-describing ``Header`` (schema, platform, device, world size, library
versions, date, host fingerprint). It is append-only and resumable: opening
an existing log with a matching header keeps its measurements, and one with
a header from other hardware or another world size is refused.

Units follow nccl-tests: ``time_us`` in microseconds, ``algbw_GBps`` =
``size_bytes / time`` in GB/s of 1e9 bytes, all-reduce ``busbw_GBps`` =
``algbw * 2(n-1)/n``, ``count`` the number of elements.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import os
import platform as _platform
import sys
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from artune.errors import ArtuneError
from artune.measure.stats import Summary, summarize
from artune.table.types import ParamValue

log = logging.getLogger(__name__)

SCHEMA = 1
LOG_KIND = "artune-measurements"
STATUSES = ("ok", "timeout", "runtime", "invalid")
INF = float("inf")

#: bytes per element of the dtypes artune names (``artune.catalog.DTYPES``)
DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "int64": 8,
}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of the dtype named ``dtype`` (``"float32"``)."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ArtuneError(f"dtype_bytes(): unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}") from None


def _format_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class Candidate:
    """An algorithm with fixed parameters: what one measurement times.

    ``params`` is a tuple of sorted ``(name, value)`` pairs so candidates are
    hashable and compare by content; build one from a dict with ``Candidate.of``.
    """

    algorithm: str
    params: tuple[tuple[str, ParamValue], ...] = ()

    def __post_init__(self) -> None:
        ordered = tuple(sorted((str(k), v) for k, v in self.params))
        if ordered != self.params:
            object.__setattr__(self, "params", ordered)

    @classmethod
    def of(cls, algorithm: str, params: Mapping[str, ParamValue] | None = None) -> Candidate:
        """The candidate for ``algorithm`` with the parameters in ``params`` (a dict)."""
        return cls(algorithm, tuple(sorted((params or {}).items())))

    @property
    def params_dict(self) -> dict[str, ParamValue]:
        """The parameters as a dict."""
        return dict(self.params)

    @property
    def key(self) -> str:
        """Canonical text: ``gloo``, ``shm_two_shot[chunk_bytes=1048576]`` (parameters sorted by name)."""
        if not self.params:
            return self.algorithm
        inner = ",".join(f"{k}={_format_value(v)}" for k, v in self.params)
        return f"{self.algorithm}[{inner}]"

    def __str__(self) -> str:
        return self.key


def measurement_key(candidate: Candidate, size_bytes: int, dtype: str, redop: str, world_size: int) -> str:
    """Canonical key of one measurement: ``shm_one_shot size=4096 dtype=float32 redop=sum world_size=2``."""
    return f"{candidate.key} size={size_bytes} dtype={dtype} redop={redop} world_size={world_size}"


@dataclass(frozen=True)
class Measurement:
    """One candidate at one message size: raw samples and correctness.

    ``samples_us`` holds one value per timed iteration: the slowest rank's
    time of that call, in microseconds. ``nwrong`` is the number of wrong
    elements in the correctness check summed over ranks (``-1``: not
    checked). ``status`` is ``"ok"``, or ``"timeout"``, ``"runtime"`` (the
    call raised), ``"invalid"`` (unavailable here, or wrong results), with
    ``error`` saying why; a measurement that is not ok has ``time_us == inf``.

    How the samples pair up with other candidates' (``artune.tune.compare``):
    the harness times candidates in turns of ``burst`` calls, so samples
    ``[i * burst, (i + 1) * burst)`` are the turn of round ``i``; measurements
    with the same non-empty ``call`` were timed in one harness call, round by
    round in turns with each other (``""``: unknown, in a log that does not
    name its calls).
    """

    candidate: Candidate
    size_bytes: int
    dtype: str
    world_size: int
    samples_us: tuple[float, ...]
    nwrong: int
    status: str = "ok"
    error: str = ""
    redop: str = "sum"
    burst: int = 1
    call: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ArtuneError(f"Measurement(): status {self.status!r} is not one of {', '.join(STATUSES)}")
        if not isinstance(self.samples_us, tuple):
            object.__setattr__(self, "samples_us", tuple(float(s) for s in self.samples_us))
        if self.burst < 1:
            raise ArtuneError(f"Measurement(): burst must be >= 1, got {self.burst}")

    @property
    def ok(self) -> bool:
        """True when the candidate ran, was correct and was timed."""
        return self.status == "ok"

    @cached_property
    def summary(self) -> Summary:
        """Statistics of the raw samples (``count == 0`` when none)."""
        return summarize(self.samples_us)

    def _timed(self, value: float) -> float:
        return value if self.ok and self.summary.count else INF

    @property
    def time_us(self) -> float:
        """Median step time in microseconds; ``inf`` when not ok (choose by this)."""
        return self._timed(self.summary.median)

    @property
    def p20_us(self) -> float:
        """20th percentile of the samples in microseconds (``inf`` when not ok)."""
        return self._timed(self.summary.p20)

    @property
    def p80_us(self) -> float:
        """80th percentile of the samples in microseconds (``inf`` when not ok)."""
        return self._timed(self.summary.p80)

    @property
    def p99_us(self) -> float:
        """99th percentile of the samples in microseconds (``inf`` when not ok)."""
        return self._timed(self.summary.p99)

    @property
    def cv_pct(self) -> float:
        """Coefficient of variation of the samples in percent (``nan`` when there are none)."""
        return self.summary.cv_pct

    @property
    def iters(self) -> int:
        """How many timed iterations (samples) there are."""
        return len(self.samples_us)

    @property
    def count(self) -> int:
        """Elements per rank (nccl-tests' ``count``): ``size_bytes / bytes per element``."""
        return self.size_bytes // dtype_bytes(self.dtype)

    @property
    def algbw_GBps(self) -> float:
        """``size_bytes / time`` in GB/s (1e9 bytes); 0 when not ok."""
        t = self.time_us
        return self.size_bytes / (t * 1e-6) / 1e9 if math.isfinite(t) and t > 0 else 0.0

    @property
    def busbw_GBps(self) -> float:
        """All-reduce bus bandwidth: ``algbw * 2(n-1)/n`` (nccl-tests); 0 when not ok."""
        return bus_bandwidth(self.algbw_GBps, self.world_size)

    @property
    def key(self) -> str:
        """Canonical key: candidate key, size, dtype, redop and world size."""
        return measurement_key(self.candidate, self.size_bytes, self.dtype, self.redop, self.world_size)

    def failed(self, status: str, error: str) -> Measurement:
        """A copy marked as failed with ``status`` and ``error`` (samples dropped)."""
        return Measurement(
            self.candidate, self.size_bytes, self.dtype, self.world_size, (), self.nwrong, status, error, self.redop,
            self.burst, self.call,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """Plain data for one JSON line; derived figures are included for readers and ignored on read."""

        def finite(x: float) -> float | None:
            return round(x, 3) if math.isfinite(x) else None

        return {
            "type": "measurement",
            "key": self.key,
            "algorithm": self.candidate.algorithm,
            "params": self.candidate.params_dict,
            "size_bytes": self.size_bytes,
            "count": self.count,
            "dtype": self.dtype,
            "redop": self.redop,
            "world_size": self.world_size,
            "status": self.status,
            "error": self.error,
            "nwrong": self.nwrong,
            "time_us": finite(self.time_us),
            "p20_us": finite(self.p20_us),
            "p80_us": finite(self.p80_us),
            "p99_us": finite(self.p99_us),
            "cv_pct": finite(self.cv_pct),
            "algbw_GBps": round(self.algbw_GBps, 4),
            "busbw_GBps": round(self.busbw_GBps, 4),
            "samples_us": [round(s, 3) for s in self.samples_us],
            "burst": self.burst,
            "call": self.call,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        """The measurement written by ``to_dict``."""
        try:
            return cls(
                candidate=Candidate.of(str(data["algorithm"]), dict(data.get("params") or {})),
                size_bytes=int(data["size_bytes"]),
                dtype=str(data["dtype"]),
                world_size=int(data["world_size"]),
                samples_us=tuple(float(s) for s in data.get("samples_us") or ()),
                nwrong=int(data.get("nwrong", -1)),
                status=str(data.get("status", "ok")),
                error=str(data.get("error", "")),
                redop=str(data.get("redop", "sum")),
                burst=int(data.get("burst", 1)),
                call=str(data.get("call", "")),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ArtuneError(f"Measurement.from_dict(): malformed measurement ({err!r}): {dict(data)!r}") from None


@dataclass(frozen=True)
class ShapeMeasurement:
    """One candidate at one shape (TensorRT-LLM's tokens x hidden x fused op): the measurement with its shape."""

    world_size: int
    fusion: str
    hidden: int
    tokens: int
    measurement: Measurement


def bus_bandwidth(algbw_GBps: float, world_size: int) -> float:
    """nccl-tests' all-reduce bus bandwidth: ``algbw * 2(n-1)/n`` (0 for one rank)."""
    if world_size < 1:
        raise ArtuneError(f"bus_bandwidth(): world_size must be >= 1, got {world_size}")
    return algbw_GBps * 2.0 * (world_size - 1) / world_size


def _versions() -> dict[str, str]:
    from artune._version import __version__

    versions = {"artune": __version__, "python": _platform.python_version()}
    for module in ("torch", "numpy"):
        mod = sys.modules.get(module)
        if mod is None:
            try:
                mod = __import__(module)
            except ImportError:  # pragma: no cover - both are dependencies
                continue
        versions[module] = str(getattr(mod, "__version__", "?"))
    return versions


@dataclass(frozen=True)
class Header:
    """The first line of a measurement log: what the measurements are of.

    ``platform`` is a ``Platform`` as a dict (kind, arch, device); logs are
    only mixed when ``platform``, ``host_fingerprint``, ``world_size`` and
    ``schema`` all match.
    """

    schema: int
    platform: dict[str, str]
    device: str
    world_size: int
    versions: dict[str, str] = field(default_factory=dict)
    date: str = ""
    host_fingerprint: str = ""
    #: on a GPU: the ``GpuFacts`` as text plus ``mode`` and ``timing`` (how the figures were taken)
    gpu: dict[str, str] = field(default_factory=dict)

    @classmethod
    def for_this_machine(cls, world_size: int, gpu: Mapping[str, str] | None = None) -> Header:
        """The header for measurements taken now, here, at ``world_size`` ranks (``gpu``: for CUDA ones)."""
        from artune import machine

        plat, digest = machine.cpu_platform(), machine.fingerprint()
        if gpu:
            from artune.gpufacts import GpuFacts

            plat = GpuFacts.from_dict(gpu).platform()
            digest = str(gpu.get("fingerprint", digest))
        return cls(
            schema=SCHEMA,
            platform=asdict(plat),
            device=plat.device,
            world_size=world_size,
            versions=_versions(),
            date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            host_fingerprint=digest,
            gpu=dict(gpu or {}),
        )

    def mismatch(self, other: Header) -> str | None:
        """Why measurements under ``other`` must not be mixed with these, or ``None``."""
        for name in ("schema", "platform", "host_fingerprint", "world_size"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                return f"{name} {theirs!r} != {mine!r}"
        if self.gpu.get("mode") != other.gpu.get("mode"):
            return f"mode {other.gpu.get('mode')!r} != {self.gpu.get('mode')!r}"
        return None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the header line."""
        return {"type": "header", "kind": LOG_KIND, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Header:
        """The header written by ``to_dict``."""
        if data.get("type") != "header" or data.get("kind") != LOG_KIND:
            raise ArtuneError(f"not an artune measurement log header: {dict(data)!r}")
        try:
            return cls(
                schema=int(data["schema"]),
                platform={str(k): str(v) for k, v in dict(data["platform"]).items()},
                device=str(data.get("device", "")),
                world_size=int(data["world_size"]),
                versions={str(k): str(v) for k, v in dict(data.get("versions") or {}).items()},
                date=str(data.get("date", "")),
                host_fingerprint=str(data.get("host_fingerprint", "")),
                gpu={str(k): str(v) for k, v in dict(data.get("gpu") or {}).items()},
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ArtuneError(f"malformed measurement log header ({err!r}): {dict(data)!r}") from None


class MeasurementLog:
    """An append-only JSON-lines file of measurements under one header.

    ``MeasurementLog(path, header)`` creates the file with ``header`` as its
    first line, or resumes an existing file whose header matches (same
    schema, platform, host fingerprint and world size; ``ArtuneError``
    otherwise, so results from different hardware never mix). ``header``
    may be omitted to open an existing log for reading and appending
    under its own header. Each ``append`` writes and flushes one line; a
    torn last line (a crash mid-write) is skipped with a warning on read.
    """

    def __init__(self, path: str | os.PathLike[str], header: Header | None = None) -> None:
        self.path = Path(path)
        existing = self._read_header() if self.path.exists() and self.path.stat().st_size else None
        if existing is None:
            if header is None:
                raise ArtuneError(
                    f"MeasurementLog(): {self.path} does not exist or is empty, and no header was given to start it"
                )
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("w", encoding="utf-8") as out:
                out.write(json.dumps(header.to_dict(), sort_keys=True) + "\n")
            self.header = header
        else:
            if header is not None:
                why = existing.mismatch(header)
                if why is not None:
                    raise ArtuneError(
                        f"MeasurementLog(): {self.path} holds measurements of other hardware or another world "
                        f"size ({why}); refusing to mix them: write to another file or delete this one"
                    )
            self.header = existing

    def _read_header(self) -> Header:
        with self.path.open(encoding="utf-8") as src:
            first = src.readline()
        try:
            data = json.loads(first)
        except json.JSONDecodeError:
            raise ArtuneError(f"MeasurementLog(): {self.path}: first line is not a JSON header") from None
        try:
            return Header.from_dict(data)
        except ArtuneError as err:
            raise ArtuneError(f"MeasurementLog(): {self.path}: {err}") from None

    def append(self, measurement: Measurement) -> None:
        """Write ``measurement`` as one line and flush it."""
        if measurement.world_size != self.header.world_size:
            raise ArtuneError(
                f"MeasurementLog.append(): measurement at world_size={measurement.world_size} does not belong "
                f"in {self.path} (world_size={self.header.world_size})"
            )
        line = json.dumps(measurement.to_dict(), sort_keys=True, allow_nan=False) + "\n"
        with self.path.open("r+b") as out:
            end = out.seek(0, os.SEEK_END)
            out.seek(max(0, end - 1))
            if end and out.read(1) != b"\n":  # a torn last line (crash mid-write): drop it
                out.seek(0)
                data = out.read()
                out.truncate(data.rfind(b"\n") + 1)
                out.seek(0, os.SEEK_END)
                log.warning("%s: dropped a torn last line before appending", self.path)
            out.write(line.encode("utf-8"))
            out.flush()

    def extend(self, measurements: list[Measurement]) -> None:
        """Append each of ``measurements``."""
        for m in measurements:
            self.append(m)

    def _lines(self) -> Iterator[tuple[int, str]]:
        with self.path.open(encoding="utf-8") as src:
            lines = src.read().split("\n")
        for number, line in enumerate(lines[1:], start=2):
            if line.strip():
                yield number, line

    def read(self) -> list[Measurement]:
        """Every measurement in file order (a key measured twice appears twice)."""
        found: list[Measurement] = []
        lines = list(self._lines())
        for index, (number, line) in enumerate(lines):
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                if index == len(lines) - 1:
                    log.warning("%s:%d: skipping a torn last line (interrupted write)", self.path, number)
                    continue
                raise ArtuneError(f"MeasurementLog.read(): {self.path}:{number} is not JSON") from None
            found.append(Measurement.from_dict(data))
        return found

    def latest(self) -> dict[str, Measurement]:
        """The last measurement of every key (what a resumed run may skip)."""
        return {m.key: m for m in self.read()}

    def keys(self) -> set[str]:
        """Keys already measured (ok or failed)."""
        return set(self.latest())

    def __contains__(self, key: object) -> bool:
        return key in self.keys()

    def __len__(self) -> int:
        return len(self.read())
