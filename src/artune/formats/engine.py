"""What an engine reader returns: the tables, the reviewers' findings, the files read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from artune.formats.files import SourceFile
from artune.sizes import format_span
from artune.table.check import Finding, shadowed_rules, unaligned_rules
from artune.table.family import TableSet
from artune.table.priority import SizeRule


@dataclass(frozen=True)
class EngineImport:
    """An engine's tables read from its files, with findings that name the file and line."""

    engine: str
    tables: TableSet
    findings: tuple[Finding, ...]
    files: tuple[SourceFile, ...]

    @property
    def label(self) -> str:
        """``ENGINE:FILE[@commit]`` of the first file: the tables' origin."""
        return f"{self.engine}:{self.files[0].label}"


@dataclass
class FindingSink:
    """Collects findings for one import."""

    table: str
    findings: list[Finding] = field(default_factory=list)
    groups: dict[tuple[str, str, str, tuple[str | int, ...]], list[tuple[str, int, str | None]]] = field(
        default_factory=dict
    )

    def add(
        self,
        source: str,
        arch: str,
        message: str,
        world_size: int | None = None,
        mode: str | None = None,
        severity: str = "warning",
        *,
        code: str,
        hosts: int = 1,
        world_sizes: Sequence[int] = (),
        args: Sequence[str | int | float] = (),
    ) -> None:
        """One finding at ``source`` ("file:line"); ``code`` its kind (``artune.findings``), ``hosts`` the
        ranks' hosts where it is about a topology across hosts, ``world_sizes`` those its message names, ``args``
        the values it is written from (``Finding.args``)."""
        self.findings.append(
            Finding(
                self.table,
                arch,
                message,
                world_size,
                mode,
                source,
                severity,
                hosts=hosts,
                code=code,
                world_sizes=tuple(world_sizes),
                args=tuple(args),
            )
        )

    def copied(self, source: str, arch: str, parent: str, equal: int, total: int) -> None:
        """An arch whose rows equal ``parent``'s (``copied_archs``): the reviewer asks whether it was measured."""
        message = f"{arch} = {parent} in {equal} of {total} tables: measured, or inherited?"
        self.add(source, arch, message, code="E101", args=(parent, equal, total))

    def grouped(
        self,
        source: str,
        arch: str,
        message: str,
        world_size: int,
        mode: str | None,
        code: str,
        args: tuple[str | int, ...] = (),
    ) -> None:
        """A finding that repeats across world sizes and modes: ``done`` writes one line per (arch, message)."""
        self.groups.setdefault((arch, message, code, args), []).append((source, world_size, mode))

    def done(self) -> tuple[Finding, ...]:
        """Every finding, the grouped ones merged."""
        out = list(self.findings)
        for (arch, message, code, args), places in self.groups.items():
            sizes = sorted({ws for _s, ws, _m in places})
            modes = sorted({m for _s, _ws, m in places if m})
            where = f"world size{'s' if len(sizes) > 1 else ''} {', '.join(map(str, sizes))}"
            if modes:
                where += f" ({', '.join(modes)})"
            ws = sizes[0] if len(sizes) == 1 else None
            at = f"{message}; at {where}"
            out.append(
                Finding(self.table, arch, at, ws, None, places[0][0], code=code, world_sizes=tuple(sizes), args=args)
            )
        return tuple(out)

    def rules(self, source: str, arch: str, world_size: int, mode: str | None, rules: Sequence[SizeRule]) -> None:
        """Shadowed and alignment-unreachable rules of one first-match list."""
        for index, by in shadowed_rules(rules):
            message = f"{rules[index].algorithm} is shadowed by {' and '.join(by)}: it can never be reached"
            self.grouped(source, arch, message, world_size, mode, "E102", (rules[index].algorithm, *by))
        for index, lo, hi in unaligned_rules(rules):
            message = (
                f"{rules[index].algorithm} is left only {format_span(lo, hi)}, which holds no size its "
                "alignment rule lets through: it can never be reached"
            )
            self.grouped(source, arch, message, world_size, mode, "E103", (rules[index].algorithm, lo, hi))


def short(value: Any) -> str:
    """``repr(value)`` cut to one readable line, for an error that quotes what the file holds."""
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."
