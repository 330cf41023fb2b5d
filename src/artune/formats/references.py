"""The inference engines' published dispatch tables, bundled as artune tables.

``reference_set("vllm")`` and ``reference_set("sglang")`` return a
``TableSet`` keyed by arch whose tables reproduce what each engine decides
(tables' ``origin`` is ``reference:NAME``). They are facts about the engines,
to explain their choices, find the holes in their tables and compare them with
measured tables; the figures and their exact semantics are documented in
``artune.formats.vllm.reference`` and ``artune.formats.sglang.reference``, and
``artune.table.priority`` turns an engine's priority rules into bands.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from artune.errors import TableError
from artune.table.check import Finding
from artune.table.family import TableSet

REFERENCES: tuple[str, ...] = ("vllm", "sglang")


def _builders() -> dict[str, tuple[Callable[[], TableSet], Callable[[], tuple[Finding, ...]]]]:
    from artune.formats.sglang import reference as sglang
    from artune.formats.vllm import reference as vllm

    return {"vllm": (vllm.table_set, vllm.findings), "sglang": (sglang.table_set, sglang.findings)}


@cache
def reference_set(name: str) -> TableSet:
    """The published tables of engine ``name``; ``TableError`` listing the known names when unknown."""
    return _builder(name)[0]()


@cache
def reference_findings(name: str) -> tuple[Finding, ...]:
    """What ``artune check`` finds in engine ``name``'s published tables: the findings of the release they
    reproduce, named ``reference:NAME`` instead of a file and line."""
    return _builder(name)[1]()


def _builder(name: str) -> tuple[Callable[[], TableSet], Callable[[], tuple[Finding, ...]]]:
    builder = _builders().get(name)
    if builder is None:
        raise TableError(f"reference:{name}: unknown reference; known: {', '.join(REFERENCES)}")
    return builder


__all__ = ["REFERENCES", "reference_findings", "reference_set"]
