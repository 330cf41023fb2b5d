"""``artune check``: lints that find what is wrong or missing in a table.

Each finding is one line, ``TABLE: arch=.. ws=.. mode=..: message``. The
lints: bands that cover no size (out of order or overlapping), unknown
algorithm names, algorithms missing a parameter they need, algorithms whose
engine never runs them at the plan's world size, world sizes with no plan,
modes present for one world size and missing for another, CPU plans in graph
mode, and figures that were not measured on this arch (inherited, modelled).
"""

from __future__ import annotations

from dataclasses import dataclass

from artune.catalog import SPECS
from artune.sizes import format_bound
from artune.table.model import MODES, Plan, Table


@dataclass(frozen=True)
class Finding:
    """One problem in a table."""

    table: str
    arch: str
    message: str
    world_size: int | None = None
    mode: str | None = None

    def __str__(self) -> str:
        where = f"arch={self.arch}"
        if self.world_size is not None:
            where += f" ws={self.world_size}"
        if self.mode is not None:
            where += f" mode={self.mode}"
        return f"{self.table}: {where}: {self.message}"


def check_table(table: Table, max_world_size: int | None = None) -> list[Finding]:
    """Every finding for ``table``; an empty list means clean.

    World sizes from 2 up to the largest planned one (or ``max_world_size``
    when given) must each have a plan in every mode the table uses.
    """
    findings: list[Finding] = []

    def add(message: str, plan: Plan | None = None) -> None:
        ws, mode = (plan.world_size, plan.mode) if plan else (None, None)
        findings.append(Finding(table.name, table.platform.arch, message, ws, mode))

    source = table.provenance
    if source.source == "inherited":
        origin = f" from arch {source.inherited_from}" if source.inherited_from else ""
        add(f"figures inherited{origin}, not measured on this arch; run 'artune tune' on this hardware")
    elif source.source == "modelled":
        add("figures are modelled, not measured; run 'artune tune' on this hardware")
    for plan in table.plans:
        for message in _plan_findings(table, plan):
            add(message, plan)
    for message in _coverage_findings(table, max_world_size):
        add(message)
    return findings


def _plan_findings(table: Table, plan: Plan) -> list[str]:
    out: list[str] = []
    if table.platform.kind == "cpu" and plan.mode != "eager":
        out.append(f"mode {plan.mode!r} on a CPU table; CPU has only 'eager'")
    if plan.provenance is not None and plan.provenance.source in ("inherited", "modelled"):
        out.append(f"plan figures are {plan.provenance.source}, not measured")
    previous = -1
    for i, band in enumerate(plan.bands, start=1):
        if band.upto is not None:  # an open-ended band (only the last) always extends the one before
            if band.upto <= previous:
                out.append(
                    f"band {i} (upto {format_bound(band.upto)}) does not extend band {i - 1} "
                    f"(upto {format_bound(previous)}): bands out of order or overlapping, it covers no size"
                )
            previous = max(previous, band.upto)
        if len(set(band.candidates)) != len(band.candidates):
            out.append(f"band {i} lists an algorithm twice: {list(band.candidates)}")
    for name in plan.algorithms:
        spec = SPECS.get(name)
        if spec is None:
            out.append(f"unknown algorithm {name!r}; known: {', '.join(sorted(SPECS))}")
            continue
        have = plan.params_for(name)
        for key in spec.required_params:
            if key not in have:
                out.append(f"{name} needs parameter {key!r} and has none (it will be skipped)")
        allowed = spec.conditions.world_sizes
        if allowed is not None and plan.world_size not in allowed:
            out.append(f"{name} never runs at world_size={plan.world_size} (only {sorted(allowed)})")
    for name, _values in plan.params:
        if name not in SPECS:
            out.append(f"params for unknown algorithm {name!r}")
    return out


def _coverage_findings(table: Table, max_world_size: int | None) -> list[str]:
    out: list[str] = []
    modes = [m for m in MODES if any(p.mode == m for p in table.plans)]
    sizes = {p.world_size for p in table.plans}
    if not sizes:
        return ["table has no plans"]
    top = max(max(sizes), max_world_size or 0)
    for mode in modes:
        have = {p.world_size for p in table.plans if p.mode == mode}
        holes = [ws for ws in range(2, top + 1) if ws not in have]
        if holes:
            out.append(f"mode={mode}: no plan for world sizes {_ranges(holes)} (up to {top})")
        lacking = sorted(sizes - have)
        if lacking and len(modes) > 1:
            out.append(f"mode={mode} missing for world sizes {_ranges(lacking)} that other modes plan")
    return out


def _ranges(values: list[int]) -> str:
    """``[3, 5, 9, 10, 11]`` -> ``"3, 5, 9-11"``."""
    parts: list[str] = []
    start = prev = values[0]
    for v in [*values[1:], None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(parts)
