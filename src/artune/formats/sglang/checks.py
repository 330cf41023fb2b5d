"""What ``artune check`` says of an SGLang release, from its reading (``artune.formats.sglang.release``).

The findings a reviewer acts on, one line per problem over archs, world
sizes and modes:

- ``error``: ``__init__`` raises at a world size the communicator admits
  (SGLang logs "Setup Custom allreduce failed" and runs NCCL);
- ``warning``: world sizes with no config (NCCL), bounds the default
  workspace clips, multicast asked for where ``num_mc_blocks`` is
  ``None``, rows copied from another arch, a band no aligned size reaches;
- ``note``: v2 off by default in the release, world sizes where the legacy
  class runs, what runs on PCIe-only GPUs, arches served by another's
  configs, the world sizes it runs at across a rack, and (0.5.10-0.5.15)
  the pull buffer that ends custom all-reduce.

SGLang's documented ways of switching an algorithm off (equal adjacent
thresholds, ``mc = Range(0, 0)``, ``num_mc_blocks = None`` with no range)
are not findings: the dispatch is read, so they simply never run. The
message builders are shared with ``reference:sglang``, whose findings equal
the release's.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from artune.formats.pyeval import Record
from artune.formats.sglang import rules as rules
from artune.formats.sglang.choice import DISPATCH, LEGACY, LEGACY_KERNEL
from artune.formats.sglang.dispatch import CLASS, Outcome
from artune.formats.sglang.release import FALLBACK, RACK_GRAPH_NOTE, row_line
from artune.sizes import format_size, format_span
from artune.table.check import Finding
from artune.table.types import MODES, NVLinkDomain, Table

if TYPE_CHECKING:
    from artune.formats.sglang.release import ArchFound, Release


def _ranges(values: list[int]) -> str:
    """``[9, 10, 11, 16]`` -> ``"9-11, 16"``."""
    parts: list[str] = []
    for v in sorted(values):
        if parts and parts[-1][1] == v - 1:
            parts[-1] = (parts[-1][0], v)
        else:
            parts.append((v, v))  # type: ignore[arg-type]
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)  # type: ignore[misc]


def _world_sizes(values: list[int]) -> str:
    """``"world size 4"``, ``"world sizes 9-15"``."""
    return f"world size{'s' if len(set(values)) > 1 else ''} {_ranges(values)}"


def arch_order(arch: str) -> tuple[int, ...]:
    """``"9.0" < "10.0" < "10.3" < "default"``."""
    return tuple(int(p) for p in arch.split(".")) if arch[:1].isdigit() else (1 << 30,)


def group_archs(per_arch: dict[str, list[int]]) -> list[tuple[str, list[int]]]:
    """Archs with the same world sizes, merged: ``[("10.0, 10.7", [9, ..., 15])]``."""
    merged: dict[tuple[int, ...], list[str]] = {}
    for arch in sorted(per_arch, key=arch_order):
        if per_arch[arch]:
            merged.setdefault(tuple(sorted(set(per_arch[arch]))), []).append(arch)
    return [(", ".join(archs), list(sizes)) for sizes, archs in merged.items()]


def holes_message(sizes: list[int]) -> str:
    """World sizes below an arch's largest config that have none."""
    have = "has" if len(sizes) == 1 else "have"
    return f"{_world_sizes(sizes)} {have} no config: custom all-reduce v2 is disabled there and every size goes to nccl"


def clipped_where(per_arch: dict[str, list[int]], modes: set[str]) -> str:
    """``"; at 9.0 ws 2-8; 10.0, 10.7 ws 2-8, 16"``: where rows are clipped, arches with equal sizes merged."""
    where = "; at " + "; ".join(f"{archs} ws {_ranges(sizes)}" for archs, sizes in group_archs(per_arch))
    return where + (f" ({next(iter(modes))} mode)" if len(modes) == 1 else "")


def clipped_args(per_arch: dict[str, list[int]], modes: set[str]) -> tuple[str, ...]:
    """``("9.0 ws 2-8", "10.0, 10.7 ws 2-8, 16", "graph")``: where rows are clipped, as ``Finding.args``."""
    return tuple(f"{archs} ws {_ranges(sizes)}" for archs, sizes in group_archs(per_arch)) + tuple(sorted(modes))


def clipped_message(workspace: int, where: str) -> str:
    """Rows the default workspace clips (``where``: ``clipped_where``)."""
    return (
        f"SGLang's {format_size(workspace)} default workspace ({rules.WORKSPACE_ENV}) clips the rows above "
        f"it: nccl runs there, not what the rows write (artune explain shows both){where}"
    )


def served_message(by: dict[str, list[str]]) -> tuple[str, str]:
    """``(archs, message)`` for arches with no configs of their own, by the arch whose configs they get."""
    parts = [
        f"{' and '.join(archs)} {'its default configs' if twin == 'default' else f'the configs of {twin}'}"
        for twin, archs in by.items()
    ]
    archs = ", ".join(sorted((a for names in by.values() for a in names), key=arch_order))
    return archs, f"no configs of their own: SGLang's dispatch on the GPU's capability gives {'; '.join(parts)}"


def pcie_message(runs: str) -> str:
    """S108: what SGLang ``runs`` on PCIe-only GPUs ("custom_ar_v1 at world size 2 up to 8MiB")."""
    return (
        "on PCIe-only GPUs (no NVLink between every pair; these tables are for NVLink-connected ones) "
        f"SGLang runs {runs}; nccl everywhere else (can_use_custom_all_reduce_with_nvlink refuses more than two "
        "PCIe-only GPUs)"
    )


def rack_findings(origin: str, tables: dict[str, Table], default: Table | None, source: str) -> list[Finding]:
    """N111, a note per set: the world sizes where custom all-reduce runs across hosts in one NVLink clique
    (v2 in every release), with graph-captured calls on the eager plans, and across hosts joined over a
    network (in no release); every other one across hosts runs nccl."""
    everything = {**tables, **({"default": default} if default is not None else {})}
    found = {}
    for domain in (NVLinkDomain.RACK, NVLinkDomain.HOST):
        per_arch = {
            arch: sorted({p.world_size for p in t.plans if p.hosts > 1 and p.nvlink is domain})
            for arch, t in everything.items()
        }
        found[domain] = group_archs(per_arch)
    groups, network = found[NVLinkDomain.RACK], found[NVLinkDomain.HOST]
    if not groups and not network:
        return []
    listed = lambda groups: "; ".join(f"{archs} ws {_ranges(sizes)}" for archs, sizes in groups)  # noqa: E731
    graph = any(
        p.mode == "graph" and RACK_GRAPH_NOTE in (p.provenance.notes if p.provenance else "")
        for t in everything.values()
        for p in t.plans
    )
    legacy = any(
        LEGACY_KERNEL in b.candidates for t in everything.values() for p in t.plans if p.hosts > 1 for b in p.bands
    )
    what = "custom all-reduce" if legacy else "custom all-reduce v2"
    parts = [f"across hosts in one NVLink clique (nvlink=rack) {what} runs at {listed(groups)}"] if groups else []
    if network:
        parts.append(f"across hosts joined over a network {what} runs at {listed(network)}")
    message = (
        "; ".join(parts)
        + ", on any number of hosts dividing the world size"
        + ("; graph-captured calls take the eager plans there" if graph else "")
        + "; every other world size across hosts"
        + ("" if network else ", and every one across hosts joined over a network,")
        + " runs nccl"
    )
    archs = ", ".join(dict.fromkeys(a for g in (groups, network) for names, _ in g for a in names.split(", ")))
    args = (listed(groups), listed(network))
    return [Finding(origin, archs, message, None, None, source, "note", code="N111", args=args)]


def collect(r: Release) -> tuple[Finding, ...]:
    """Every finding, one line per problem."""
    everything = [*r.archs.values(), r.default]
    _opt_in(r, everything)
    _raises(r, everything)
    _holes(r, everything)
    _clipped(r, everything)
    _multicast(r, everything)
    _unreachable(r, everything)
    _served(r)
    _on_pcie(r)
    r.findings += rack_findings(r.origin, r.tables, r.default_table, r._where(1))
    order = {"error": 0, "warning": 1, "note": 2}
    return tuple(sorted(r.findings, key=lambda f: order.get(f.severity, 3)))


def _on_pcie(r: Release) -> None:
    """S108: what runs on PCIe-only GPUs, where it differs from the NVLink tables: per world size with a
    custom algorithm, which, up to which size (the eager plans; graph's say the same in every release)."""
    if r.default.reading.choice is None:
        return  # without the dispatcher, what SGLang picks there is not read (S107 says so)
    by: dict[str, list[str]] = {}
    sizes: dict[str, tuple[int, ...]] = {}  # the world sizes each text names
    for arch, table in r.pcie().items():
        plans = [p for p in table.plans if p.mode == "eager" and p.bands]
        parts = [
            f"{'/'.join(dict.fromkeys(c for b in p.bands for c in b.candidates if c != FALLBACK))} at world "
            f"size {p.world_size} up to {format_size(p.bands[-1].upto) if p.bands[-1].upto else 'any size'}"
            for p in plans
        ]
        runs = "; ".join(parts) or "no custom all-reduce at any world size"
        by.setdefault(runs, []).append(arch)
        sizes[runs] = tuple(p.world_size for p in plans)
    where = r.default.reading.choice
    source = where.where(where.dispatch.node if where.dispatch else None)
    for runs, archs in by.items():
        arch = ", ".join(sorted(archs, key=arch_order))
        r._add("S108", "note", source, arch, pcie_message(runs), world_sizes=sizes[runs], args=(runs,))


def _raises(r: Release, everything: list[ArchFound]) -> None:
    per_arch = {a.arch: [s.world_size for s in a.sized if s.status == "raises"] for a in everything}
    errors = {s.world_size: (s.where, s.error) for a in everything for s in a.sized if s.status == "raises"}
    classes = {s.world_size: s.cls for a in everything for s in a.sized if s.status == "raises"}
    for archs, sizes in group_archs(per_arch):
        where, error = errors[sizes[0]]
        source = where or r.files.communicator.path
        what = re.sub(r"^KeyError \S+ in ", "KeyError in ", error)  # the key is a world size: the sizes say which
        r._add(
            "E202",
            "error",
            source,
            archs,
            f"{classes[sizes[0]]}.__init__ raises ({what}) at {_world_sizes(sizes)}, which the communicator "
            "admits: SGLang logs 'Setup Custom allreduce failed' and runs nccl there",
            world_sizes=sizes,
            args=(classes[sizes[0]], what),
        )


def _holes(r: Release, everything: list[ArchFound]) -> None:
    if not any(s.cls == CLASS and s.status == "on" for a in everything for s in a.sized):
        return  # v2 off by default (S105): the legacy class's world sizes are its own, not holes
    per_arch: dict[str, list[int]] = {}
    lines: dict[str, int] = {}
    for found in everything:
        on = [s.world_size for s in found.sized if s.status == "on"]
        if on:
            per_arch[found.arch] = [s.world_size for s in found.sized if s.status == "off" and s.world_size < max(on)]
            lines[found.arch] = r._first_row(found)
    for archs, sizes in group_archs(per_arch):
        r._add("E201", "warning", r._where(lines[archs.split(", ")[0]]), archs, holes_message(sizes), world_sizes=sizes)


def _clipped(r: Release, everything: list[ArchFound]) -> None:
    per_arch: dict[str, list[int]] = {}
    modes: set[str] = set()
    first = 0
    for found in everything:
        for (ws, mode), outcome in found.outcomes.items():
            if outcome.written != outcome.bands:
                per_arch.setdefault(found.arch, []).append(ws)
                modes.add(mode)
                if not first:
                    sized = next(s for s in found.sized if s.world_size == ws)
                    first = row_line(sized.written, ws, r.text, 1)
    if not per_arch:
        return
    where = clipped_where(per_arch, modes)
    archs = ", ".join(sorted(per_arch, key=arch_order))
    clipped = clipped_args(per_arch, modes)
    if r.files.configs is None:
        r._add(
            "S102",
            "note",
            r._where(first),
            archs,
            "the 16MiB pull buffer (CustomAllReduceV2.__init__'s max_pull_size default) ends custom all-reduce: "
            f"nccl runs above it, where the rows write a custom algorithm for every size{where}",
            args=clipped,
        )
        return
    r._add("E301", "warning", r._where(first), archs, clipped_message(r.workspace, where), args=(r.workspace, *clipped))


def _multicast(r: Release, everything: list[ArchFound]) -> None:
    per_arch: dict[str, list[int]] = {}
    first = 0
    for found in everything:
        asked = []
        for sized in found.sized:
            config = sized.written
            if not (isinstance(config, Record) and config.get("num_mc_blocks", 0) is None):
                continue
            heuristics = [config.get(m) for m in MODES]
            ranges = [h.get("mc") for h in heuristics if isinstance(h, Record)]
            if any(isinstance(r, Record) and r.get("max_bytes", 0) > 0 for r in ranges):
                asked.append(sized.world_size)
                first = first or row_line(config, sized.world_size, r.text, 1)
        per_arch[found.arch] = asked
    for archs, sizes in group_archs(per_arch):
        r._add(
            "S103",
            "warning",
            r._where(first),
            archs,
            f"rows ask for multicast two-shot (a non-empty mc range) at {_world_sizes(sizes)}, where "
            "num_mc_blocks is None: multicast never runs there",
            world_sizes=sizes,
        )


def _unreachable(r: Release, everything: list[ArchFound]) -> None:
    per_key: dict[tuple[str, str], list[int]] = {}
    for found in everything:
        for (ws, _mode), outcome in found.outcomes.items():
            reached = {
                name
                for lo, hi, names in _spans(outcome)
                if hi is None or -(-lo // rules.ALIGN) * rules.ALIGN <= hi
                for name in names
            }
            for lo, hi, names in _spans(outcome):
                for name in names:
                    if name != FALLBACK and name not in reached:
                        text = f"{name} is left only {format_span(lo, hi)}, which holds no 16-byte-aligned size"
                        per_key.setdefault((found.arch, text), []).append(ws)
    for (arch, text), sizes in per_key.items():
        r._add(
            "E103",
            "warning",
            r.files.communicator.path,
            arch,
            f"{text}: it never runs; at {_world_sizes(sorted(set(sizes)))}",
            world_sizes=sorted(set(sizes)),
            args=(text,),
        )


def _served(r: Release) -> None:
    by: dict[str, list[str]] = {}
    for arch, twin in r.served.items():
        if arch not in r.copies:  # a copy has configs of its own: the copied-rows warning says so
            by.setdefault(twin, []).append(arch)
    if by:
        served = tuple(f"{arch}: {twin}" for twin, arches in by.items() for arch in arches)
        r._add("S104", "note", r._where(_dispatch_line(r)), *served_message(by), args=served)


def _dispatch_line(r: Release) -> int:
    """The line of the function that asks the GPU's capability (where an arch's configs are chosen)."""
    for node in ast.walk(ast.parse(r.rows_file.text)):
        if isinstance(node, ast.FunctionDef) and re.search(
            r"get_device_capability|is_sm100_supported", ast.unparse(node)
        ):
            return node.lineno
    return 1


def _opt_in(r: Release, everything: list[ArchFound]) -> None:
    """Where SGLang picks its legacy class on one host: everywhere (v2 off by default, 0.5.10-0.5.11:
    S105), or at world sizes v2 declines (S106); and with no dispatcher beside the communicator, what is
    assumed (S107)."""
    choice = r.default.reading.choice
    if choice is None:
        r._add(
            "S107",
            "note",
            f"{r.files.communicator.path}:1",
            "all",
            f"no custom_all_reduce.py beside {CLASS}: artune takes {CLASS} as the class SGLang builds for every "
            f"group (its {DISPATCH} decides that, and where it declines, runs the legacy {LEGACY}; give the "
            "checkout or the release to read it)",
        )
        return
    on = [s for a in everything for s in a.sized if s.status == "on"]
    legacy: dict[str, list[int]] = {}
    for found in everything:
        legacy[found.arch] = [s.world_size for s in found.sized if s.cls == LEGACY and s.status == "on"]
    condition = choice.v2_condition()
    if on and all(s.cls == LEGACY for s in on) and condition is not None:
        line, test = condition
        r._add(
            "S105",
            "note",
            f"{choice.source.path}:{line}",
            "all",
            f"custom all-reduce v2 is off by default in this release (SGLang takes it when `{test}`): by "
            f"default SGLang runs its legacy {LEGACY}, which these tables describe ({LEGACY_KERNEL})",
            args=(test,),
        )
        return
    for archs, sizes in group_archs(legacy):
        r._add(
            "S106",
            "note",
            f"{choice.source.path}:{choice.dispatch.node.lineno if choice.dispatch else 1}",
            archs,
            f"{DISPATCH} picks SGLang's legacy {LEGACY} at {_world_sizes(sizes)}, where v2 declines the group: "
            f"{LEGACY_KERNEL} runs there (what its should_custom_ar admits), not v2's algorithms",
            world_sizes=sizes,
        )


def _spans(outcome: Outcome) -> list[tuple[int, int | None, tuple[str, ...]]]:
    out: list[tuple[int, int | None, tuple[str, ...]]] = []
    lower = 0
    for band in outcome.bands:
        out.append((lower, band.upto, band.candidates))
        if band.upto is None:
            break
        lower = band.upto + 1
    return out


__all__ = [
    "arch_order",
    "clipped_args",
    "clipped_message",
    "clipped_where",
    "collect",
    "group_archs",
    "holes_message",
    "pcie_message",
    "rack_findings",
    "served_message",
]
