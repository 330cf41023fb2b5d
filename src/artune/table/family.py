"""Architecture families: which table an arch without its own may borrow, loudly.

Arch strings keep their minor version ("10.7" is not "10.0"). ``FAMILY``
lists, per arch, the archs it may borrow from, nearest first; an arch that is
not listed may borrow from ``"<major>.0"``. AMD archs are gfx names
(``artune.rocm``): each borrows what its facts list (gfx950 from gfx942), and
a set of ``rocm`` tables reads the capability torch reports (``9.4``) as the
gfx arch it stands for. Borrowing logs a warning that names what was borrowed
and how to measure instead, and is recorded on the returned table
(``Table.borrowed``) so every decision's reason shows it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from artune import rocm
from artune.table.types import Plan, Platform, Provenance, Table

log = logging.getLogger(__name__)

FAMILY: dict[str, tuple[str, ...]] = {
    # Rubin (sm_107) shares major 10 with Blackwell; B300 (10.3) is its nearest measured relative.
    "10.7": ("10.3", "10.0"),
    "10.3": ("10.0",),
    "12.1": ("12.0",),
}


def family_chain(arch: str) -> tuple[str, ...]:
    """The archs ``arch`` may borrow from, nearest first (without ``arch`` itself)."""
    if arch in FAMILY:
        return FAMILY[arch]
    if rocm.is_gfx(arch):
        facts = rocm.arch_facts(arch)
        return facts.borrows if facts is not None else ()
    major, dot, _minor = arch.partition(".")
    if dot and major.isdigit() and arch != f"{major}.0":
        return (f"{major}.0",)
    return ()


@dataclass(frozen=True)
class TableSet:
    """Tables of one origin (an engine's published tables, or a cache) keyed by arch.

    ``default`` is what the origin itself uses for archs it does not know
    (SGLang has one); when absent, artune's conservative default applies.
    ``rules`` names how an arch without a table of its own is served
    (``artune.table.gaps``): artune's family chain, or, for an engine's set,
    the engine's own choice, which ``engine_arch`` answers (the table the
    engine runs on that arch, its ``borrowed`` note saying why; ``None``: the
    set's default).
    """

    name: str
    kind: str
    tables: Mapping[str, Table] = field(hash=False)
    default: Table | None = field(default=None, hash=False)
    rules: str = "artune"
    engine_arch: Callable[[str], Table | None] | None = field(default=None, hash=False, compare=False)

    def resolve(self, arch: str, *, quiet: bool = False) -> Table:
        """The table for ``arch``: its own, then the engine's choice (an engine's set) or a family member's,
        then the set's default, or a conservative one.

        Borrowing is logged at WARNING, since a borrowed table was measured on another machine; ``quiet``
        leaves that to a caller that reports it itself (the borrowed table's ``borrowed`` note says it).
        """
        warn = (lambda note: None) if quiet else (lambda note: log.warning("%s", note))
        if self.kind == rocm.KIND:
            arch = rocm.gfx_arch(arch) or arch  # the capability torch reports stands for its gfx arch
        if arch in self.tables:
            return self.tables[arch]
        if self.rules != "artune":
            return self._engine_resolve(arch)
        for relative in family_chain(arch):
            if relative in self.tables:
                note = (
                    f"arch {arch} has no table in {self.name}; borrowed arch {relative}'s "
                    f"(family {arch} -> {' -> '.join(family_chain(arch))}); "
                    f"measure instead: artune tune on a {arch} machine"
                )
                warn(note)
                return self.tables[relative].with_changes(borrowed=(note,))
        if self.default is not None:
            note = (
                f"arch {arch} has no table or family member in {self.name}; using its default table; "
                f"measure instead: artune tune on a {arch} machine"
            )
            warn(note)
            return self.default.with_changes(borrowed=(note,))
        note = (
            f"arch {arch} has no table or family member in {self.name}; using the conservative default "
            f"(the process group for every size); measure instead: artune tune on a {arch} machine"
        )
        warn(note)
        return conservative_default(Platform(self.kind, arch)).with_changes(borrowed=(note,))

    def _engine_resolve(self, arch: str) -> Table:
        found = self.engine_arch(arch) if self.engine_arch is not None else None
        if found is not None:
            return found
        if self.default is not None:
            note = f"arch {arch} has no table in {self.name}; the engine runs its own default there (no family chain)"
            return self.default.with_changes(borrowed=(note,))
        note = (
            f"arch {arch} has no table in {self.name}, and the engine has no default: "
            f"{process_group(self.kind)} for every size"
        )
        return conservative_default(Platform(self.kind, arch)).with_changes(borrowed=(note,), rules=self.rules)


def conservative_default(platform: Platform) -> Table:
    """A table that sends every size to the process group (NCCL on NVIDIA GPUs, RCCL on AMD's, gloo on CPU)."""
    fallback = process_group(platform.kind)
    plan = Plan(world_size=1, mode="eager", bands=(), fallback=fallback)
    provenance = Provenance(
        source="modelled", tool="artune", notes="conservative default: the process group for every size"
    )
    return Table(platform, provenance, (plan,), origin="artune:conservative-default")


#: the process group's all-reduce on each kind of platform: what runs where no plan decides
PROCESS_GROUP = {"cuda": "nccl", "rocm": "rccl", "cpu": "gloo"}


def process_group(kind: str) -> str:
    """The process group's all-reduce on a ``kind`` platform (``rccl`` on ROCm: torch's ``nccl`` backend
    there is RCCL)."""
    return PROCESS_GROUP.get(kind, "nccl")
