"""Which engines artune knows, by name: the engines' folders, ``register``, and the ``artune.engines`` entry points.

An engine is one ``EnginePlugin`` (``artune.formats.engine``). artune's own
live in their folders (``artune.formats.vllm.ENGINE``) and are imported the
first time one is asked for, so naming the engines costs no reading code. A
package adds an engine without editing artune in either of two ways:

- ``artune.formats.registry.register(ENGINE)`` before the command runs (a test,
  a script calling ``artune.cli.main``);
- an entry point in the group ``artune.engines`` whose name is the engine's
  and whose object is its ``EnginePlugin``, e.g. in ``pyproject.toml``::

      [project.entry-points."artune.engines"]
      toy = "toy_engine:ENGINE"

An engine registered under a name artune already has replaces it.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from importlib.metadata import entry_points

from artune.errors import TableError
from artune.formats.engine import EnginePlugin

#: the group a package's entry points name its engines in
GROUP = "artune.engines"
#: artune's own engines, by name: the folder whose ``ENGINE`` it is, in the order commands list them
_FOLDERS: Mapping[str, str] = {
    "vllm": "artune.formats.vllm",
    "sglang": "artune.formats.sglang",
    "nccl-tuner": "artune.formats.nccl",
    "trtllm": "artune.formats.trtllm",
}
_REGISTERED: dict[str, EnginePlugin] = {}
_LOADED: dict[str, EnginePlugin] = {}


def register(engine: EnginePlugin) -> EnginePlugin:
    """Add ``engine`` under its name (replacing one of that name); returns it, so a module can write
    ``ENGINE = register(EnginePlugin(...))``."""
    if not isinstance(engine, EnginePlugin):
        raise TypeError(f"register: {engine!r} is no EnginePlugin; build one (artune.formats.engine.EnginePlugin)")
    _REGISTERED[engine.name] = engine
    _LOADED.pop(engine.name, None)
    return engine


def unregister(name: str) -> None:
    """Forget the engine ``register`` added as ``name`` (a test's clean-up); artune's own stay."""
    _REGISTERED.pop(name, None)
    _LOADED.pop(name, None)


def _entry_points() -> dict[str, str]:
    """The ``artune.engines`` entry points installed: name -> ``module:attribute``."""
    return _installed(tuple(sys.path))


@functools.lru_cache(maxsize=4)
def _installed(path: tuple[str, ...]) -> dict[str, str]:
    """The entry points found on ``path`` (sys.path), read once per path: every table source asks."""
    return {point.name: point.value for point in entry_points(group=GROUP)}


def names() -> tuple[str, ...]:
    """Every engine's name, artune's own first, without importing any engine."""
    return tuple(dict.fromkeys([*_FOLDERS, *_entry_points(), *_REGISTERED]))


def engine(name: str) -> EnginePlugin:
    """The engine called ``name``; ``TableError`` naming the known ones otherwise."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in _LOADED:
        return _LOADED[name]
    if name in _FOLDERS:
        found = importlib.import_module(_FOLDERS[name]).ENGINE
    else:
        point = next((p for p in entry_points(group=GROUP) if p.name == name), None)
        if point is None:
            raise TableError(f"{name}: unknown engine; known: {', '.join(names())}")
        found = point.load()
        if not isinstance(found, EnginePlugin) or found.name != name:
            raise TableError(
                f"entry point {name} = {point.value} ({GROUP}) is no EnginePlugin named {name!r}: fix the package "
                "that installs it, or uninstall it"
            )
    _LOADED[name] = found
    return found


def engines(offering: str = "") -> tuple[EnginePlugin, ...]:
    """Every engine (each imported), or those that fill the optional member ``offering`` (``"read"``,
    ``"write"``, ``"modeless"``: not None, not False nor empty)."""
    return tuple(e for e in map(engine, names()) if not offering or _offers(e, offering))


def _offers(found: EnginePlugin, member: str) -> bool:
    value = getattr(found, member)
    return value is not None and value is not False and value != () and value != ""


class Names(Sequence[str]):
    """The names of the engines that offer a member, read afresh each time (so an engine registered later is in
    it): what ``argparse`` takes as ``choices`` and messages list. Artune's own are known without importing
    them, so only a question about another engine loads the rest."""

    def __init__(self, offering: str) -> None:
        self._offering = offering

    def _names(self) -> tuple[str, ...]:
        return tuple(e.name for e in engines(self._offering))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in names() and _offers(engine(name), self._offering)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        return self._names()[index]

    def __eq__(self, other: object) -> bool:
        """Equal to the tuple of the same names (what these views were before engines could register)."""
        return self._names() == (tuple(other) if isinstance(other, (Names, tuple)) else other)

    __hash__ = None  # type: ignore[assignment]  # it changes as engines register

    def __repr__(self) -> str:
        return repr(self._names())


#: the engines artune reads (``ENGINE:PATH``, ``ENGINE==VERSION``) and those it writes (``export --to``)
READABLE = Names("read")
WRITABLE = Names("write")

__all__ = ["GROUP", "READABLE", "WRITABLE", "Names", "engine", "engines", "names", "register", "unregister"]
