"""What a reading of vLLM's code found, kept on disk: each source is evaluated once per machine, not per command.

Evaluating a release's dispatch on every machine its tables describe takes
seconds (``artune.formats.vllm.code``), and the answer depends only on the
files read, the settings and artune's evaluator: so it is kept under
``$ARTUNE_READINGS_DIR`` (default ``readings`` in artune's cache,
``artune.settings.cache_root``), one JSON file per source, named by a hash of
everything that changes a reading: the files' text, the settings, the
interpreter (its version and implementation: they parse the files), artune's
version and the source of the modules that evaluate and fingerprint them. A
changed file, setting, interpreter or evaluator is another name, so a stale
reading, or one made by another Python, is never used; a file that cannot be read
back is ignored and the source evaluated again. What is kept: each outcome
with its machine, mode and the facts it asked, what the evaluator could not
follow, the fingerprints of the functions that ran and the environment variables the dispatch read.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from artune._version import __version__
from artune.formats.files import SourceFile
from artune.formats.fingerprints import Evaluated
from artune.formats.pyeval import Unmodelled
from artune.formats.vllm.world import GpuGroup
from artune.settings import cache_root

FORMAT = 1


def readings_dir() -> Path:
    """Where readings are kept (``ARTUNE_READINGS_DIR``, default ``readings`` in ``artune.settings.cache_root``)."""
    return Path(os.environ.get("ARTUNE_READINGS_DIR") or cache_root() / "readings")


def _evaluator_source() -> bytes:
    """The source of the modules whose code decides what a reading finds: the evaluator (every module of
    ``pyeval``), the fingerprints, the stand-ins, the evaluation and this file (by path: they import this module)."""
    here = Path(__file__).parent
    paths = sorted((here.parent / "pyeval").glob("*.py"))
    paths += [here.parent / "fingerprints.py", here / "world.py", here / "code.py", Path(__file__)]
    return b"".join(p.name.encode() + b"\0" + p.read_bytes() for p in paths)


def interpreter() -> str:
    """The Python that reads: its implementation and full version (a reading parses the files with it)."""
    return f"{sys.implementation.name} {sys.version}"


def name(files: list[SourceFile], settings: Mapping[str, str]) -> str:
    """The file name a reading of ``files`` with ``settings`` is kept under."""
    digest = hashlib.sha256(b"%d\0" % FORMAT)
    digest.update(f"{interpreter()}\0artune {__version__}\0".encode())
    digest.update(hashlib.sha256(_evaluator_source()).digest())
    digest.update(json.dumps(sorted(settings.items())).encode())
    for source in files:
        digest.update(source.path.encode() + b"\0" + source.text.encode() + b"\0")
    return digest.hexdigest()[:32] + ".json"


def _machine(fields: list[Any]) -> GpuGroup:
    arch, ws, multicast, hosts, rack, platform = fields
    return GpuGroup(arch, ws, multicast, hosts, rack, platform)


def _fields(machine: GpuGroup) -> list[Any]:
    return [machine.arch, machine.world_size, machine.multicast, machine.hosts, machine.rack, machine.platform]


def load(path: Path) -> dict[str, Any] | None:
    """A kept reading as plain data; ``None`` where there is none, or it cannot be read back."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def outcomes(data: dict[str, Any]) -> list[tuple[GpuGroup, str, frozenset[str], Any]]:
    """Each kept outcome: ``(group, mode, facts, (pieces, raises, at_start, kind, where))``."""
    out = []
    for item in data.get("outcomes", []):
        pieces = tuple((start, tuple(names)) for start, names in item["pieces"])
        kept = (pieces, item["raises"], item["at_start"], item.get("kind", ""), item.get("where", ""))
        out.append((_machine(item["machine"]), item["mode"], frozenset(item["facts"]), kept))
    return out


def met(data: dict[str, Any]) -> list[tuple[Unmodelled, set[GpuGroup | None]]]:
    return [
        (Unmodelled(**item["what"]), {None if m is None else _machine(m) for m in item["machines"]})
        for item in data.get("met", [])
    ]


def evaluated(data: dict[str, Any]) -> list[Evaluated]:
    return [Evaluated(*item) for item in data.get("evaluated", [])]


def variables(data: dict[str, Any]) -> set[tuple[str, str]]:
    """The environment variables the dispatch read, each with the platform it was read on."""
    return {(name, platform) for name, platform in data.get("variables", [])}


def save(
    path: Path,
    found: list[tuple[GpuGroup, str, frozenset[str], Any]],
    unmodelled: list[tuple[Unmodelled, set[GpuGroup | None]]],
    ran: list[Evaluated],
    read: Iterable[tuple[str, str]] = (),
) -> None:
    """Keep a reading (best effort: a cache that cannot be written is no error)."""
    data = {
        "format": FORMAT,
        "outcomes": [
            {
                "machine": _fields(machine),
                "mode": mode,
                "facts": sorted(facts),
                "pieces": [[start, list(names)] for start, names in outcome.pieces],
                "raises": outcome.raises,
                "at_start": outcome.at_start,
                "kind": outcome.kind,
                "where": outcome.where,
            }
            for machine, mode, facts, outcome in found
        ],
        "met": [{"what": _unmodelled(what), "machines": _machines(machines)} for what, machines in unmodelled],
        "evaluated": [[e.function, e.fingerprint, e.where] for e in ran],
        "variables": sorted([name, platform] for name, platform in read),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8") as out:
            json.dump(data, out)
        os.replace(out.name, path)
    except OSError:
        return


def _unmodelled(what: Unmodelled) -> dict[str, Any]:
    return {
        "function": what.function,
        "filename": what.filename,
        "line": what.line,
        "construct": what.construct,
        "reason": what.reason,
        "assumed": what.assumed,
    }


def _machines(machines: set[GpuGroup | None]) -> list[Any]:
    return [None if m is None else _fields(m) for m in sorted(machines, key=lambda m: (m is not None, str(m)))]


__all__ = ["load", "name", "readings_dir", "save"]
