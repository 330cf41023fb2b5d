"""The engines' own files in and out.

Readers turn an engine's table file (from a checkout, a released wheel, or a
pull request) into artune tables: ``vllm_read`` (constant expressions,
restricted evaluation) and ``sglang_read`` (the configs' and the
communicator's code, interpreted by ``pyeval``, never run). Writers print paste-ready text in the engine's
current shape: ``vllm_write``, ``sglang_write``, ``nccl_write``. A table
source ``vllm:PATH`` or ``sglang:PATH`` is accepted wherever a table is.
"""

from __future__ import annotations

from artune.errors import TableError
from artune.formats.engine import EngineImport
from artune.formats.pyeval import Raised, Unsupported

ENGINES = ("vllm", "sglang")
_SUBSET = (
    "artune reads engine files without running them, in the Python subset artune.formats.pyeval documents: "
    "point it at the engine's own table file, or report the construct with the file"
)


def read_engine(engine: str, path: str) -> EngineImport:
    """Read ``engine``'s tables from ``path`` (a checkout or the table file); ``TableError`` when it cannot."""
    if engine == "vllm":
        from artune.formats.vllm_read import read_vllm as read
    elif engine == "sglang":
        from artune.formats.sglang_read import read_sglang as read
    else:
        raise TableError(f"{engine}: unknown engine; known: {', '.join(ENGINES)}")
    try:
        return read(path)
    except Raised:
        raise  # the file's own error (a failed assert, a missing key): its message says what to fix there
    except Unsupported as err:
        raise Unsupported(f"{err} ({_SUBSET})") from None
    except RecursionError:
        raise TableError(f"{path}: expressions nested too deeply to read; is this the engine's table file?") from None


def engine_source(spec: str) -> tuple[str, str] | None:
    """``("vllm", PATH)`` for ``"vllm:PATH"`` (likewise sglang), and for a release ``"vllm==0.33.0"`` the
    folder it is unpacked to (``artune.formats.releases``); ``None`` for any other table name."""
    from artune.formats.releases import fetch_release, release_spec

    release = release_spec(spec)
    if release is not None:
        return release[0], str(fetch_release(*release))
    engine, sep, path = spec.partition(":")
    if sep and engine in ENGINES:
        if not path:
            raise TableError(f"{spec}: give the checkout or file after '{engine}:'")
        return engine, path
    return None


__all__ = ["ENGINES", "EngineImport", "engine_source", "read_engine"]
