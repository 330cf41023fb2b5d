"""The engines' own files in and out, one package per engine beside the shared evaluator.

``artune.formats.vllm`` and ``artune.formats.sglang`` each hold the engine's
reader (``read``: its table file, from a checkout, a released wheel or a pull
request, turned into artune tables), its dispatch rules as its code runs them
(``rules``), its published tables (``reference``) and its writer (``write``:
paste-ready text in the engine's current shape); ``artune.formats.nccl``
writes NCCL's tuner-plugin format. Shared by all of them: ``pyeval`` (the
Python subset the readers interpret, never run), ``files``, ``gitrev``,
``releases`` and ``engine``. ``artune.formats.trtllm`` reads
TensorRT-LLM's C++ lookup-table header (``trtllm:PATH``). A table source
``ENGINE:PATH`` (or a release, ``ENGINE==VERSION``) is accepted wherever a
table is, for every engine that reads; each engine's folder holds its
``ENGINE`` (``artune.formats.engine.EnginePlugin``), and
``artune.formats.registry`` is where engines are found and registered.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from artune.errors import Raised, TableError, Unsupported
from artune.formats import limits
from artune.formats.engine import EngineImport, EnginePlugin
from artune.formats.registry import READABLE, engine, register


class _Readers(Mapping[str, EnginePlugin]):
    """The engines that read, by name: a view of the registry (``artune.formats.registry``)."""

    def __getitem__(self, name: str) -> EnginePlugin:
        if name not in READABLE:
            raise KeyError(name)
        return engine(name)

    def __iter__(self) -> Iterator[str]:
        return iter(READABLE)

    def __len__(self) -> int:
        return len(READABLE)


#: the engines that read (``ENGINE:PATH``), by name, and their names: views of the registry, so an engine
#: registered later is in them
READERS: Mapping[str, EnginePlugin] = _Readers()
ENGINES = READABLE
_SUBSET = (
    "artune reads engine files without running them, in the Python subset artune.formats.pyeval documents: "
    "point it at the engine's own table file, or report the construct with the file"
)


def engine_reader(name: str) -> EnginePlugin:
    """The registered engine ``name`` that reads; ``TableError`` naming the known ones otherwise."""
    if name not in READABLE:
        raise TableError(f"{name}: unknown engine; known: {', '.join(READABLE)}")
    return engine(name)


def read_engine(engine: str, path: str) -> EngineImport:
    """Read ``engine``'s tables from ``path`` (a checkout or the table file); ``TableError`` when it cannot."""
    read = engine_reader(engine).read
    assert read is not None  # engine_reader returns engines that read
    limits.reading(path)
    try:
        return read(path)
    except Raised:
        raise  # the file's own error (a failed assert, a missing key): its message says what to fix there
    except Unsupported as err:
        raise Unsupported(f"{err} ({_SUBSET})") from None
    except RecursionError:
        raise Unsupported(f"{path}: expressions nested too deeply to read; is this the engine's table file?") from None


def engine_source(spec: str) -> tuple[str, str] | None:
    """``("vllm", PATH)`` for ``"vllm:PATH"`` (likewise sglang), and for a release ``"vllm==0.33.0"`` the
    folder it is unpacked to (``artune.formats.releases``); ``None`` for any other table name."""
    from artune.formats.releases import fetch_release, release_spec

    release = release_spec(spec)
    if release is not None:
        with limits.paused():  # the network's time is not the reading's
            return release[0], str(fetch_release(*release))
    engine, sep, path = spec.partition(":")
    if sep and engine in ENGINES:
        if not path:
            raise TableError(f"{spec}: give the checkout or file after '{engine}:'")
        return engine, path
    return None


__all__ = [
    "ENGINES",
    "READERS",
    "EngineImport",
    "EnginePlugin",
    "engine_reader",
    "engine_source",
    "read_engine",
    "register",
]
