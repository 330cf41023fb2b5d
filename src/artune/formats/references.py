"""The inference engines' published dispatch tables, bundled as artune tables.

``reference_set(NAME)`` returns an engine's (``EnginePlugin.reference``) as a
``TableSet`` keyed by arch whose tables reproduce what each engine decides
(tables' ``origin`` is ``reference:NAME``). They are facts about the engines,
to explain their choices, find the holes in their tables and compare them with
measured tables; the figures and their exact semantics are documented in
``artune.formats.vllm.reference`` and ``artune.formats.sglang.reference``, and
``artune.table.priority`` turns an engine's priority rules into bands.
"""

from __future__ import annotations

from functools import cache

from artune.errors import TableError
from artune.formats.engine import EnginePlugin
from artune.formats.registry import Names, engine
from artune.table.check import Finding
from artune.table.family import TableSet

#: the engines with published tables bundled: a view of the registry (``artune.formats.registry``)
REFERENCES = Names("reference")


@cache
def reference_set(name: str) -> TableSet:
    """The published tables of engine ``name``; ``TableError`` listing the known names when unknown."""
    reference = _engine(name).reference
    assert reference is not None  # _engine returns engines with a reference
    return reference()


@cache
def reference_findings(name: str) -> tuple[Finding, ...]:
    """What ``artune check`` finds in engine ``name``'s published tables: the findings of the release they
    reproduce, named ``reference:NAME`` instead of a file and line."""
    return _engine(name).reference_findings()


def _engine(name: str) -> EnginePlugin:
    if name not in REFERENCES:
        raise TableError(f"reference:{name}: unknown reference; known: {', '.join(REFERENCES)}")
    return engine(name)


__all__ = ["REFERENCES", "reference_findings", "reference_set"]
