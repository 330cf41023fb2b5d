"""What an engine gives artune (``EnginePlugin``, its ``Oracle``) and what its reader returns (``EngineImport``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from artune.formats.files import SourceFile
from artune.sizes import format_span
from artune.table.check import Finding, shadowed_rules, unaligned_rules
from artune.table.family import TableSet
from artune.table.priority import SizeRule

if TYPE_CHECKING:
    from artune.formats.export import Export
    from artune.formats.fingerprints import Evaluated
    from artune.review.types import BenchCommand
    from artune.table.types import Table


def _none() -> tuple[Finding, ...]:
    return ()


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


@dataclass(frozen=True)
class Oracle:
    """An engine's own dispatch code run beside artune's reading of it, probe by probe (``artune verify-engine``).

    Only ``verify-engine`` runs it: ``check``, ``explain`` and ``review`` never execute an engine's code. Each
    callable takes ``root``, the folder or file ``ENGINE:PATH`` names (or a release unpacked there).
    """

    #: what it executes, as the command's first line says it ("vLLM's own dispatch code (...)")
    runs: str
    #: the released versions the release matrix walks; () where releases are not read (a checkout only)
    releases: tuple[str, ...]
    #: every call to decide, each with a ``topology`` ("1 host", "4 hosts rack") and a readable ``str()``
    probes: Callable[[Path], Sequence[Any]]
    #: what the engine's own code runs for each probe, in order (``OracleGap`` where it asks what the
    #: stand-ins do not hold, ``OracleUnavailable`` where a tool is missing)
    engine_decisions: Callable[[Path, list[Any]], Sequence[str]]
    #: artune's reading of the same source, for the same probes
    artune_decisions: Callable[[Path, list[Any]], Sequence[str]]
    #: probes added for the command alone (SGLang's ROCm ones, which other callers of ``probes`` do not expect;
    #: each engine's probes under its switches' other values);
    #: None: none
    extra_probes: Callable[[Path], Sequence[Any]] | None = None
    #: what the probes leave out, each with why (a switch value the oracle cannot run), printed beside the
    #: counts; None: nothing is left out
    unprobed: Callable[[Path], Sequence[str]] | None = None
    #: how a probe is counted; None: its ``topology`` attribute
    topology: Callable[[Any], str] | None = None
    #: the dispatch functions artune's reading evaluated, fingerprinted (what ``--record`` keeps); None: the
    #: engine has nothing to record
    evaluated: Callable[[Path], Sequence[Evaluated]] | None = None


@dataclass(frozen=True)
class EnginePlugin:
    """What one engine gives artune, modelled on NCCL's tuner plugin: a few members every engine fills, the rest
    optional, where ``None`` means "this engine does not offer it" and artune says so when asked for it.

    An engine's folder holds one (``artune.formats.vllm.ENGINE``); ``artune.formats.registry`` finds it by
    name, and another package adds its own with ``register`` or the ``artune.engines`` entry-point group.
    """

    #: the name in table sources and commands: ``NAME:PATH``, ``NAME==VERSION``, ``export --to NAME``
    name: str
    #: the name people read ("vLLM")
    label: str
    #: the reader: a checkout, a released wheel's folder or the table file itself -> artune's tables with the
    #: reviewer's findings (``TableError`` where it is none of these); None for an engine artune only writes for
    read: Callable[[str], EngineImport] | None
    #: the files of a checkout the reader looks for, relative to its root (what ``review --base`` takes from git)
    files: tuple[str, ...]
    #: the files of its released wheel artune reads (a folder ends with ``/``): ``NAME==VERSION`` downloads the
    #: wheel of the package ``NAME`` once and keeps these (``artune.formats.releases``); (): no release is read
    wheel: tuple[str, ...] = ()
    #: the folder its package sits in within its repository but not in its wheel (SGLang's ``python/``); ""
    checkout_prefix: str = ""
    #: its table file, relative to a checkout or a release's folder: where the review places a question with no
    #: file of its own (a workflow annotation needs one); "" for none
    table_file: str = ""
    #: the writer: ``(tables, command, arch, standalone)`` -> paste-ready text in the engine's shape (``arch``:
    #: what ``export --arch`` named; ``standalone``: a whole file, not a fragment); None: no ``export --to``
    write: Callable[[Sequence[Table], str, str | None, bool], Export] | None = None
    #: the writer takes every table of a set at once (one file holds every arch); False: one table
    writes_sets: bool = False
    #: the reader under the engine's switches: ``(path, switches, dtype, arch)`` -> its tables as its code runs
    #: with those environment variables set, for messages of ``dtype`` (``explain --env``, the review's switch
    #: readings); ``arch`` the arch asked about ("" for every arch's), where an AMD arch may get the ROCm tables
    #: alone. None: its reading does not change with switches
    read_under: Callable[[str, Mapping[str, str], str, str], EngineImport] | None = None
    #: where its code decides differently for the messages' other dtypes than the reading's (findings, from the
    #: path ``read`` takes); None: its reading does not depend on the dtype (``explain --dtype`` reads it once)
    dtype_findings: Callable[[str], Sequence[Finding]] | None = None
    #: its published tables, bundled (``reference:NAME``): what it decides, keyed by arch; None: none bundled
    reference: Callable[[], TableSet] | None = None
    #: what ``check`` finds in them: the findings of the release they reproduce (default: none)
    reference_findings: Callable[[], tuple[Finding, ...]] = _none
    #: its benchmark commands that would measure moved ranges: ``(arch, world_size, ranges, hosts, stem)`` ->
    #: the commands, ``ranges`` as ``(mode, lo, hi)`` and ``stem`` the output files' path without an extension
    #: (``artune.review.benchmarks``); None: artune's own tuner measures its tables
    bench: Callable[[str, int, Sequence[tuple[str, int, int | None]], int, str], Sequence[BenchCommand]] | None = None
    #: the kernel its code runs for one call of an algorithm where it picks one below its table, and why:
    #: ``(algorithm, world_size, nbytes, multicast, forced)`` -> ``(kernel, why)`` in the catalog's kernel names
    #: (``forced``: the kernel its users forced, vLLM's VLLM_CUSTOM_ALLREDUCE_ALGO); None for an algorithm of one
    #: kernel or none of its own. None: its algorithms each run the one kernel the catalog names
    kernel: Callable[[str, int, int, bool, str | None], tuple[str, str] | None] | None = None
    #: its dispatch reads no mode (vLLM's): the review asks its moves in graph mode, the mode its benchmark
    #: times, and a graph-mode measurement answers the same row in eager; False: each mode is its own
    modeless: bool = False
    #: the oracle (``Oracle``), loaded when ``verify-engine`` runs; None: its code cannot be run beside the reading
    oracle: Callable[[], Oracle] | None = None
    #: the first letter of its own findings' codes (``artune.findings.PREFIXES``); "" for none
    code_prefix: str = ""
