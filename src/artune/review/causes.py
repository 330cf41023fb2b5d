"""What moved each move: a switch's new default, the engine's table rows, or its dispatch functions.

In that order, the first that holds:

1. a default switch (``artune.review.switches``): the move vanishes when
   AFTER is read with the switch at BEFORE's default;
2. the table rows at the move's arch and world size that differ between the
   sides (vLLM's size tables, each row at its file and line);
3. the dispatch functions the readings ran whose code differs between the
   sides (by fingerprint, ``artune.formats.fingerprints``), or that one side
   has alone.

A move none of these explains has no cause named: the review does not guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from artune.review.switches import Reader
from artune.sizes import format_size

Place = tuple[str, int]  # (arch, world size)


def _vllm_rows(reader: Reader) -> dict[tuple[str, str, int], tuple[str, str]]:
    """(table, arch, world size) -> (the row's value, its file:line), for vLLM's size tables."""
    from artune.formats.vllm.figures import CUSTOM_AR, FI_FUSION, SYMM_MEM

    figures = reader.figures()
    out: dict[tuple[str, str, int], tuple[str, str]] = {}
    named: dict[str, Mapping[str, Mapping[int, Any]] | None] = {
        CUSTOM_AR: figures.custom_ar,
        SYMM_MEM: figures.symm_mem,
        FI_FUSION: figures.fi_fusion,
    }
    for table, rows in named.items():
        for arch, by_ws in (rows or {}).items():
            for ws, value in by_ws.items():
                shown = format_size(value) if table != FI_FUSION else f"{value} MB"
                out[(table, arch, ws)] = (shown, figures.line(table, arch, ws))
    return out


def row_changes(before: Reader | None, after: Reader | None) -> dict[Place, list[str]]:
    """Per (arch, world size), the table rows that differ between the sides, in words."""
    if before is None or after is None or after.engine != "vllm":
        return {}
    a, b = _vllm_rows(before), _vllm_rows(after)
    out: dict[Place, list[str]] = {}
    for table, arch, ws in sorted(a.keys() | b.keys(), key=str):
        was, now = a.get((table, arch, ws)), b.get((table, arch, ws))
        if (was or ("",))[0] == (now or ("",))[0]:
            continue
        where = (now or was or ("", ""))[1].rsplit("/", 1)[-1]
        text = f"`{table}['{arch}'][{ws}]` {was[0] if was else 'none'} -> {now[0] if now else 'none'} ({where})"
        out.setdefault((arch, ws), []).append(text)
    return out


def function_changes(before: Reader | None, after: Reader | None) -> list[str]:
    """The dispatch functions the readings ran whose code differs between the sides, or one side has alone."""
    if before is None or after is None:
        return []
    a, b = before.evaluated(), after.evaluated()
    out = []
    for name in sorted(a.keys() | b.keys()):
        was, now = a.get(name), b.get(name)
        if was is not None and now is not None and was.fingerprint == now.fingerprint:
            continue
        where = (now or was).where.rsplit("/", 1)[-1]  # type: ignore[union-attr]
        change = "new" if was is None else "removed" if now is None else "changed"
        out.append(f"`{name}` {change} ({where})")
    return out


def cause(
    places: Sequence[Place], default_switch: tuple[str, ...], rows: Mapping[Place, list[str]], functions: Sequence[str]
) -> tuple[str, ...]:
    """The cause of a move at ``places``, each part in words (see the module's order); () where none is known."""
    if default_switch:
        return default_switch
    found = tuple(dict.fromkeys(r for place in places for r in rows.get(place, ())))
    if found:
        return found
    # an arch's own function first: SGLang builds each arch's configs in one (``_sm107_configs`` for 10.7)
    marks = {f"sm{arch.replace('.', '')}" for arch, _ in places}
    return tuple(sorted(functions, key=lambda f: not any(mark in f for mark in marks)))


def few(items: Sequence[str], most: int = 3) -> str:
    """``a; b; c; and 4 more``: the first ``most`` of ``items``."""
    return "; ".join(items[:most]) + (f"; and {len(items) - most} more" if len(items) > most else "")
