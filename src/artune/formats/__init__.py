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
``vllm:PATH``, ``sglang:PATH`` or ``trtllm:PATH`` is accepted wherever a table
is; ``READERS`` is where an engine is registered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from artune.errors import Raised, TableError, Unsupported
from artune.formats import limits
from artune.formats.engine import EngineImport
from artune.formats.sglang import read as sglang_read
from artune.formats.trtllm import read as trtllm_read
from artune.formats.vllm import read as vllm_read


@dataclass(frozen=True)
class EngineReader:
    """One engine's reader: how ``ENGINE:PATH`` is read, and which files of a checkout it looks for."""

    name: str
    read: Callable[[str], EngineImport]
    files: tuple[str, ...]


READERS: dict[str, EngineReader] = {
    reader.name: reader
    for reader in (
        EngineReader("vllm", vllm_read.read_vllm, vllm_read.FILES),
        EngineReader("sglang", sglang_read.read_sglang, sglang_read.FILES),
        EngineReader("trtllm", trtllm_read.read_trtllm, trtllm_read.FILES),
    )
}
ENGINES = tuple(READERS)
_SUBSET = (
    "artune reads engine files without running them, in the Python subset artune.formats.pyeval documents: "
    "point it at the engine's own table file, or report the construct with the file"
)


def engine_reader(engine: str) -> EngineReader:
    """The registered reader of ``engine``; ``TableError`` naming the known engines otherwise."""
    reader = READERS.get(engine)
    if reader is None:
        raise TableError(f"{engine}: unknown engine; known: {', '.join(ENGINES)}")
    return reader


def read_engine(engine: str, path: str) -> EngineImport:
    """Read ``engine``'s tables from ``path`` (a checkout or the table file); ``TableError`` when it cannot."""
    read = engine_reader(engine).read
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


__all__ = ["ENGINES", "READERS", "EngineImport", "EngineReader", "engine_reader", "engine_source", "read_engine"]
