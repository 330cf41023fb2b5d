"""Reading and writing tables as TOML: the only place where tables meet plain dicts.

Every problem in a file becomes a ``TableError`` naming the file, the place
and the fix; never a bare traceback. Keys starting with ``x_`` or ``x-`` are
extensions of other tools and are ignored; any other unknown key is an error,
so that a typo cannot silently change a table.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from artune.errors import SizeError, TableError
from artune.sizes import UNBOUNDED, format_size, parse_bound, parse_size
from artune.table.gaps import NAMES as GAP_POLICIES
from artune.table.types import (
    KINDS,
    MODES,
    NVLINK_DOMAINS,
    SCHEMA,
    SOURCES,
    Band,
    Mode,
    NVLinkDomain,
    Plan,
    Platform,
    Provenance,
    ShapePlan,
    Table,
    freeze_params,
    pow2_ranges,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MAX_FILE_BYTES = 8 << 20
MAX_PLANS = 4096
MAX_BANDS = 1024
MAX_WORLD_SIZE = 1 << 20
MAX_COUNT = 1 << 62  # a world size, hidden size or token count in a shape plan
_PROVENANCE_KEYS = ("source", "date", "device", "tool", "notes", "inherited_from")


def load_table(path: str | Path) -> Table:
    """Read a table file; ``TableError`` with a one-line reason when it cannot be used."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise TableError(f"{path}: file is {size} bytes, more than {MAX_FILE_BYTES}; is it a table?")
        data = path.read_bytes()
    except OSError as err:
        raise TableError(f"{path}: cannot read: {err.strerror or err}") from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise TableError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from err
    return loads_table(text, origin=str(path))


def loads_table(text: str, origin: str = "<string>") -> Table:
    """Parse TOML text into a ``Table``."""
    if len(text) > MAX_FILE_BYTES:
        raise TableError(f"{origin}: {len(text)} characters, more than {MAX_FILE_BYTES}; is it a table?")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise TableError(f"{origin}: not valid TOML: {err}") from err
    except RecursionError as err:
        raise TableError(f"{origin}: not valid TOML: nested too deeply") from err
    return table_from_dict(data, origin)


def dumps_table(table: Table) -> str:
    """The table as TOML text, sizes written with binary units where exact."""
    return tomli_w.dumps(table_to_dict(table))


def dump_table(table: Table, path: str | Path) -> None:
    """Write the table to ``path`` (atomically: a temporary file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(dumps_table(table), encoding="utf-8")
    tmp.replace(path)


# ---------------------------------------------------------------- dict -> Table


class _TableReader:
    """Checks one file's dict, keeping the file name for messages."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def fail(self, where: str, message: str) -> TableError:
        return TableError(f"{self.origin}: {where}: {message}" if where else f"{self.origin}: {message}")

    def mapping(self, value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(where, f"expected a table, got {type(value).__name__}")
        return value

    def keys(self, data: Mapping[str, Any], where: str, allowed: tuple[str, ...]) -> None:
        self.string_keys(data, where)
        unknown = [k for k in data if k not in allowed and not k.startswith(("x_", "x-"))]
        if unknown:
            raise self.fail(
                where,
                f"unknown key {unknown[0]!r}; expected one of {', '.join(allowed)} "
                "(prefix a key with 'x_' to keep tool-specific data)",
            )

    def string_keys(self, data: Mapping[Any, Any], where: str) -> None:
        for key in data:
            if not isinstance(key, str) or not key or not key.isprintable():
                raise self.fail(where, f"key {key!r} must be a non-empty printable string")

    def text(self, data: Mapping[str, Any], key: str, where: str, choices: tuple[str, ...] = ()) -> str:
        value = data.get(key, "")
        if not isinstance(value, str):
            raise self.fail(where, f"{key} must be a string, got {type(value).__name__} {value!r}")
        if choices and value not in choices:
            raise self.fail(where, f"{key} = {value!r}; expected one of {', '.join(choices)}")
        return value

    def required(self, data: Mapping[str, Any], key: str, where: str) -> Any:
        if key not in data:
            raise self.fail(where, f"missing key {key!r}")
        return data[key]

    def size(self, value: Any, where: str) -> int:
        try:
            return parse_size(value, where)
        except SizeError as err:
            raise TableError(f"{self.origin}: {err}") from None

    def bound(self, value: Any, where: str) -> int | None:
        try:
            return parse_bound(value, where)
        except SizeError as err:
            raise TableError(f"{self.origin}: {err}") from None

    def name(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(where, f"an algorithm name must be a non-empty string, got {value!r}")
        return value

    def provenance(self, value: Any, where: str) -> Provenance:
        data = self.mapping(value, where)
        self.keys(data, where, _PROVENANCE_KEYS)
        self.required(data, "source", where)
        fields = {k: self.text(data, k, where, SOURCES if k == "source" else ()) for k in _PROVENANCE_KEYS}
        if isinstance(data.get("date"), str) is False and "date" in data:
            raise self.fail(where, "date must be a string like '2026-11-29'")
        return Provenance(**fields)

    def band(self, value: Any, where: str) -> Band:
        data = self.mapping(value, where)
        self.keys(data, where, ("upto", "below", "algorithm"))
        if ("upto" in data) == ("below" in data):
            raise self.fail(where, "give exactly one of 'upto' (inclusive) or 'below' (exclusive)")
        upto: int | None
        if "upto" in data:
            upto = self.bound(data["upto"], f"{where}: upto")
        else:
            below = self.size(data["below"], f"{where}: below")
            if below == 0:
                raise self.fail(where, "below = 0 covers no size")
            upto = below - 1
        algorithm = self.required(data, "algorithm", where)
        if isinstance(algorithm, list):
            if not algorithm:
                raise self.fail(where, "algorithm list is empty")
            candidates = tuple(self.name(a, where) for a in algorithm)
        else:
            candidates = (self.name(algorithm, where),)
        return Band(upto, candidates)

    def params(self, value: Any, where: str) -> dict[str, dict[str, Any]]:
        data = self.mapping(value, where)
        self.string_keys(data, where)
        out: dict[str, dict[str, Any]] = {}
        for algorithm, values in data.items():
            values = self.mapping(values, f"{where}.{algorithm}")
            self.string_keys(values, f"{where}.{algorithm}")
            for key, item in values.items():
                if not isinstance(item, (int, float, str, bool)) or (
                    isinstance(item, float) and not math.isfinite(item)
                ):
                    raise self.fail(
                        f"{where}.{algorithm}.{key}",
                        f"a parameter must be a finite number, a string or a boolean, got {item!r}",
                    )
            out[self.name(algorithm, where)] = dict(values)
        return out

    def plan(self, value: Any, where: str) -> Plan:
        data = self.mapping(value, where)
        keys = (
            "world_size",
            "hosts",
            "nvlink_domain",
            "multicast",
            "mode",
            "fallback",
            "bands",
            "params",
            "provenance",
            "written",
            "notes",
        )
        self.keys(data, where, keys)
        world_size = self.required(data, "world_size", where)
        if isinstance(world_size, bool) or not isinstance(world_size, int):
            raise self.fail(where, f"world_size must be an integer, got {world_size!r}")
        if not 1 <= world_size <= MAX_WORLD_SIZE:
            raise self.fail(where, f"world_size = {world_size} is outside 1..{MAX_WORLD_SIZE}")
        hosts = data.get("hosts", 1)  # absent: one host
        if isinstance(hosts, bool) or not isinstance(hosts, int) or not 1 <= hosts <= world_size:
            raise self.fail(where, f"hosts must be an integer from 1 to world_size ({world_size}), got {hosts!r}")
        multicast = data.get("multicast")  # absent: any machine
        if multicast is not None and not isinstance(multicast, bool):
            raise self.fail(where, f"multicast must be true or false (absent: any machine), got {multicast!r}")
        # absent: host, each host its own NVLink domain (every file written before NVLink domains)
        nvlink = self.text(data, "nvlink_domain", where, NVLINK_DOMAINS) if "nvlink_domain" in data else "host"
        if nvlink == "rack" and hosts == 1:
            raise self.fail(where, 'nvlink_domain = "rack" needs hosts > 1 (one host is one NVLink domain)')
        where = f"{where} (world_size={world_size}" + (f", hosts={hosts})" if hosts > 1 else ")")
        mode = Mode(self.text(data, "mode", where, MODES)) if "mode" in data else Mode.EAGER
        fallback = self.name(self.required(data, "fallback", where), f"{where}: fallback")
        bands = self.bands(data, "bands", where)
        written = self.bands(data, "written", where)
        notes = data.get("notes", [])
        if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
            raise self.fail(f"{where}: notes", f"notes must be a list of strings, got {notes!r}")
        params = self.params(data.get("params", {}), f"{where}: params")
        provenance = self.provenance(data["provenance"], f"{where}: provenance") if "provenance" in data else None
        return Plan(
            world_size,
            mode,
            bands,
            fallback,
            freeze_params(params),
            provenance,
            hosts,
            written,
            tuple(notes),
            multicast,
            nvlink=NVLinkDomain(nvlink),
        )

    def count(self, data: Mapping[str, Any], key: str, where: str, required: bool = True) -> int | None:
        """A positive integer at ``key`` (absent and not ``required``: ``None``)."""
        if key not in data and not required:
            return None
        value = self.required(data, key, where)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
            raise self.fail(where, f"{key} must be an integer from 1 to {MAX_COUNT}, got {value!r}")
        return value

    def fusions(self, data: Mapping[str, Any], where: str) -> tuple[str, ...]:
        fusions = self.required(data, "fusions", where)
        if not isinstance(fusions, list) or not fusions or not all(isinstance(f, str) and f for f in fusions):
            raise self.fail(where, f"fusions must be a non-empty list of fused-op names, got {fusions!r}")
        return tuple(fusions)

    def shape_plan(self, value: Any, where: str) -> ShapePlan:
        """``[[shape_plan]]``: world sizes and hidden sizes (``*_upto`` absent: no upper bound), fused ops, bands
        that count tokens."""
        data = self.mapping(value, where)
        keys = ("world_size", "world_size_upto", "hidden", "hidden_upto", "fusions", "fallback", "bands", "provenance")
        self.keys(data, where, keys)
        ws, ws_upto = self.count(data, "world_size", where), self.count(data, "world_size_upto", where, False)
        hidden, hidden_upto = self.count(data, "hidden", where), self.count(data, "hidden_upto", where, False)
        assert ws is not None and hidden is not None  # required
        fusions = self.fusions(data, where)
        where = f"{where} (world_size={ws}, hidden={hidden}, fusions={'/'.join(fusions)})"
        fallback = self.name(self.required(data, "fallback", where), f"{where}: fallback")
        provenance = self.provenance(data["provenance"], f"{where}: provenance") if "provenance" in data else None
        bands = self.bands(data, "bands", where)
        try:
            return ShapePlan(ws, ws_upto, hidden, hidden_upto, fusions, bands, fallback, provenance)
        except TableError as err:
            raise self.fail(where, str(err)) from None

    def legacy_shape_plans(self, plans: list[tuple[Mapping[str, Any], str]]) -> tuple[ShapePlan, ...]:
        """``[[plan]]`` entries with ``hidden`` and ``fusions``, as tables were written before shape plans had
        their own type: a row each for the world sizes and hidden sizes a truncated ``log2`` index reads
        (``pow2_ranges``), as TensorRT-LLM reads its rows."""
        found = []
        for data, where in plans:
            self.keys(data, where, ("world_size", "mode", "fallback", "bands", "provenance", "hidden", "fusions"))
            ws, hidden = self.count(data, "world_size", where), self.count(data, "hidden", where)
            found.append((ws, hidden, data, where))
        ws_ranges = pow2_ranges(ws for ws, _h, _d, _w in found)
        hidden_ranges = pow2_ranges(h for _ws, h, _d, _w in found)
        out = []
        for ws, hidden, data, where in found:
            assert ws is not None and hidden is not None
            shape = {
                "world_size": ws_ranges[ws][0],
                "world_size_upto": ws_ranges[ws][1],
                "hidden": hidden_ranges[hidden][0],
                "hidden_upto": hidden_ranges[hidden][1],
                **{k: data[k] for k in ("fusions", "fallback", "bands", "provenance") if k in data},
            }
            out.append(self.shape_plan(shape, where))
        return tuple(out)

    def caps(self, value: Any) -> tuple[tuple[int | None, int], ...]:
        """``[[caps]]``: ``{world_size_upto = N, bytes = B}``, the last without ``world_size_upto``."""
        if not isinstance(value, list):
            raise self.fail("caps", "use [[caps]] (a list of {world_size_upto, bytes})")
        out: list[tuple[int | None, int]] = []
        for i, item in enumerate(value, start=1):
            data = self.mapping(item, f"caps {i}")
            self.keys(data, f"caps {i}", ("world_size_upto", "bytes"))
            most = data.get("world_size_upto")
            if most is not None and (isinstance(most, bool) or not isinstance(most, int) or most < 1):
                raise self.fail(f"caps {i}", f"world_size_upto must be a positive integer, got {most!r}")
            out.append((most, self.size(self.required(data, "bytes", f"caps {i}"), f"caps {i}: bytes")))
        return tuple(out)

    def bands(self, data: Mapping[str, Any], key: str, where: str) -> tuple[Band, ...]:
        value = data.get(key, [])
        if not isinstance(value, list):
            raise self.fail(where, f"{key} must be a list, got {type(value).__name__}")
        if len(value) > MAX_BANDS:
            raise self.fail(where, f"{len(value)} {key}, more than {MAX_BANDS}")
        label = "band" if key == "bands" else f"{key} band"
        bands = tuple(self.band(b, f"{where}: {label} {i + 1}") for i, b in enumerate(value))
        for i, band in enumerate(bands[:-1], start=1):
            if band.upto is None:
                raise self.fail(
                    f"{where}: {label} {i}",
                    f"upto = {UNBOUNDED!r} leaves no size for the bands after it; only the last band may be open-ended",
                )
        return bands


def table_from_dict(data: Mapping[str, Any], origin: str = "<dict>") -> Table:
    """Build a ``Table`` from the dict form of a TOML file, checking every value."""
    r = _TableReader(origin)
    data = r.mapping(data, "")
    r.keys(data, "top level", ("schema", "platform", "provenance", "rules", "caps", "plan", "shape_plan"))
    schema = data.get("schema", SCHEMA)
    if type(schema) is not int or schema != SCHEMA:
        raise r.fail("schema", f"schema = {schema!r}, this artune reads schema {SCHEMA}; upgrade artune")
    platform_data = r.mapping(r.required(data, "platform", "top level"), "[platform]")
    r.keys(platform_data, "[platform]", ("kind", "arch", "device"))
    r.required(platform_data, "kind", "[platform]")
    platform = Platform(
        kind=r.text(platform_data, "kind", "[platform]", KINDS),
        arch=r.text(platform_data, "arch", "[platform]"),
        device=r.text(platform_data, "device", "[platform]"),
    )
    if not platform.arch:
        raise r.fail("[platform]", "arch must be a non-empty string such as '10.7' or 'x86_64'")
    provenance = r.provenance(r.required(data, "provenance", "top level"), "[provenance]")
    plans_value = data.get("plan", [])
    if not isinstance(plans_value, list):
        raise r.fail("plan", "use [[plan]] (a list of plans)")
    if len(plans_value) > MAX_PLANS:
        raise r.fail("plan", f"{len(plans_value)} plans, more than {MAX_PLANS}")
    entries = [(r.mapping(p, f"plan {i + 1}"), f"plan {i + 1}") for i, p in enumerate(plans_value)]
    plans = tuple(r.plan(p, where) for p, where in entries if "hidden" not in p and "fusions" not in p)
    shape_value = data.get("shape_plan", [])
    if not isinstance(shape_value, list):
        raise r.fail("shape_plan", "use [[shape_plan]] (a list of shape plans)")
    if len(shape_value) + len(plans_value) > MAX_PLANS:
        raise r.fail("shape_plan", f"{len(shape_value) + len(plans_value)} plans, more than {MAX_PLANS}")
    shape_plans = tuple(r.shape_plan(p, f"shape_plan {i + 1}") for i, p in enumerate(shape_value))
    shape_plans += r.legacy_shape_plans([(p, w) for p, w in entries if "hidden" in p or "fusions" in p])
    rules = r.text(data, "rules", "top level", GAP_POLICIES) if "rules" in data else "artune"
    caps = r.caps(data["caps"]) if "caps" in data else ()
    return Table(platform, provenance, plans, schema, rules, origin=origin, caps=caps, shape_plans=shape_plans)


# ---------------------------------------------------------------- Table -> dict


def _size_value(nbytes: int, exact: bool) -> int | str:
    text = format_size(nbytes)
    return nbytes if exact or text.isdigit() else text


def _band_dict(band: Band, exact: bool) -> dict[str, Any]:
    algorithm: str | list[str] = band.candidates[0] if len(band.candidates) == 1 else list(band.candidates)
    if band.upto is None:
        return {"upto": UNBOUNDED, "algorithm": algorithm}
    upto_text, below_text = format_size(band.upto), format_size(band.upto + 1)
    if not exact and upto_text.isdigit() and not below_text.isdigit():
        return {"below": below_text, "algorithm": algorithm}
    return {"upto": _size_value(band.upto, exact), "algorithm": algorithm}


def _provenance_dict(provenance: Provenance) -> dict[str, str]:
    return {k: getattr(provenance, k) for k in _PROVENANCE_KEYS if getattr(provenance, k)}


def table_to_dict(table: Table, exact: bool = False) -> dict[str, Any]:
    """The dict form written to TOML; ``exact`` writes sizes as integers (for hashing)."""
    plans = []
    for plan in table.plans:
        entry: dict[str, Any] = {"world_size": plan.world_size}
        if plan.hosts != 1:  # written only when it matters, so single-host tables keep their text and digest
            entry["hosts"] = plan.hosts
        if plan.nvlink is NVLinkDomain.RACK:  # likewise: plans across hosts joined over a network
            entry["nvlink_domain"] = plan.nvlink.value
        if plan.multicast is not None:  # likewise: plans for any machine keep their text and digest
            entry["multicast"] = plan.multicast
        entry.update(mode=plan.mode, fallback=plan.fallback)
        entry["bands"] = [_band_dict(b, exact) for b in plan.bands]
        if plan.written:
            entry["written"] = [_band_dict(b, exact) for b in plan.written]
        if plan.notes:
            entry["notes"] = list(plan.notes)
        if plan.params:
            entry["params"] = {name: dict(values) for name, values in plan.params}
        if plan.provenance is not None:
            entry["provenance"] = _provenance_dict(plan.provenance)
        plans.append(entry)
    platform = {"kind": table.platform.kind, "arch": table.platform.arch}
    if table.platform.device:
        platform["device"] = table.platform.device
    out: dict[str, Any] = {"schema": table.schema, "platform": platform}
    if table.rules != "artune":  # written only when it matters, so artune's tables keep their text and digest
        out["rules"] = table.rules
    if table.caps:
        out["caps"] = [
            {**({"world_size_upto": most} if most is not None else {}), "bytes": nbytes} for most, nbytes in table.caps
        ]
    out = {**out, "provenance": _provenance_dict(table.provenance), "plan": plans}
    if table.shape_plans:  # written only when there are some, so tables by bytes keep their text and digest
        out["shape_plan"] = [_shape_plan_dict(p) for p in table.shape_plans]
    return out


def _shape_plan_dict(plan: ShapePlan) -> dict[str, Any]:
    """A shape plan as TOML writes it: its bands count tokens, written as plain integers."""
    entry: dict[str, Any] = {"world_size": plan.world_size}
    if plan.world_size_upto is not None:
        entry["world_size_upto"] = plan.world_size_upto
    entry["hidden"] = plan.hidden
    if plan.hidden_upto is not None:
        entry["hidden_upto"] = plan.hidden_upto
    entry.update(fusions=list(plan.fusions), fallback=plan.fallback, bands=[_band_dict(b, True) for b in plan.bands])
    if plan.provenance is not None:
        entry["provenance"] = _provenance_dict(plan.provenance)
    return entry


def digest(table: Table) -> str:
    """A short hash of the table's content (platform, rules, provenance, plans); equal tables, equal digests."""
    found = table.memo.get(digest)
    if found is None:
        text = json.dumps(table_to_dict(table, exact=True), sort_keys=True)
        found = table.memo[digest] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return found
