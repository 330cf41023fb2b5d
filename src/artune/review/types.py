"""What a review says, as frozen data: the one content that the Markdown and JSON renderers both print.

A ``Review`` holds, in the order a reviewer reads them: what moves (byte
ranges whose algorithm changes, arches that arrive or leave, parameters that
change, world sizes that run NCCL), the questions for the author (check
findings new in AFTER, and apart from them those already in BEFORE), the
evidence (each side's provenance, and where a measurement or the cost model
covers an arch, the regret of the moved rows), and the verdict. Sizes are
bytes here; the renderers format them. ``to_dict``/``from_dict`` carry every
field, so a bot reading the JSON sees exactly what the page shows.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

#: exit codes: approve, questions or request changes, a side that cannot be read
CLEAN, QUESTIONS, UNREADABLE = 0, 1, 2


def world_sizes(values: Iterable[int]) -> str:
    """``[2, 4, 9, 10, 11]`` -> ``"2, 4, 9-11"``."""
    parts: list[str] = []
    run: list[int] = []
    for v in [*sorted(values), None]:
        if v is not None and run and v == run[-1] + 1:
            run.append(v)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)))
        run = [v] if v is not None else []
    return ", ".join(parts) or "none"


class Verdict(str, Enum):
    """What the review asks of the change.

    - ``approve``: evidence covers every move and no moved row loses by more
      than the evidence's noise (or nothing moves and nothing is questioned);
    - ``questions``: a move has no evidence, the cost model predicts a loss
      beyond its interval, or ``artune check`` finds something new;
    - ``request changes``: the evidence shows a moved row losing.
    """

    APPROVE = "approve"
    QUESTIONS = "questions"
    REQUEST_CHANGES = "request changes"

    @property
    def exit_code(self) -> int:
        """0 to approve, 1 otherwise."""
        return CLEAN if self is Verdict.APPROVE else QUESTIONS


@dataclass(frozen=True)
class Move:
    """Sizes ``lo..hi`` (inclusive; ``hi`` None: no end) at which ``before``'s route becomes ``after``'s,
    on ``arch`` (one, or several that move alike: "10.0, 10.3") at ``world_sizes`` in ``modes``, on each of
    ``topologies`` (a move that repeats across host counts is one move).

    A route is what runs, in order: the first candidate available at run
    time, then the next, ending in the fallback (``artune.table.diff``).
    """

    arch: str
    world_sizes: tuple[int, ...]
    modes: tuple[str, ...]
    lo: int
    hi: int | None
    before: tuple[str, ...]
    after: tuple[str, ...]
    multicast: bool | None = None  # the machine compared, where a side plans it apart: None for any machine
    #: the topologies it moves on, each ``(hosts, nvlink)``: ranks on one host ``(1, "host")``, or across
    #: that many hosts in one NVLink domain (``"rack"``) or joined over a network (``"host"``)
    topologies: tuple[tuple[int, str], ...] = ((1, "host"),)
    #: a shape difference (tables that decide by shape): "hidden 4096 NONE", and lo, hi count tokens
    shape: str = ""
    #: what moved it (``artune.review.causes``): a switch's new default, table rows or functions; () unknown
    cause: tuple[str, ...] = ()
    #: the engine's switch setting it moves under ("VLLM_ALLREDUCE_USE_FLASHINFER=0"), "" with nothing set
    switch: str = ""

    @property
    def on_one_host(self) -> bool:
        """Whether it moves for ranks on one host: the calls that measurements and the model weigh."""
        return any(hosts == 1 for hosts, _ in self.topologies)


@dataclass(frozen=True)
class ArchChange:
    """An arch with rows on one side only: ``change`` is "new" or "removed"; ``other`` what the other side runs."""

    arch: str
    change: str
    other: str


@dataclass(frozen=True)
class ParamChange:
    """A parameter of ``algorithm`` that changes (``None``: the side has no value, e.g. ``num_mc_blocks = None``)."""

    arch: str
    world_sizes: tuple[int, ...]
    modes: tuple[str, ...]
    algorithm: str
    param: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class Coverage:
    """The world sizes (2..16, and any planned) that run NCCL for every size, by the engine's own rules."""

    arch: str
    before: tuple[int, ...]
    after: tuple[int, ...]


@dataclass(frozen=True)
class Question:
    """A question for the author: ``where`` is "file:line" (or the table, or ""); ``arch`` one or several
    ("9.0, 10.0"); ``scope`` the world sizes and modes it holds at ("ws 2-8 (graph, eager)"), or "".

    A finding of ``artune check``, or a loss or a gap the evidence shows. In
    ``Review.ranked`` each also carries the command that answers it.
    """

    severity: str
    where: str
    arch: str
    scope: str
    message: str
    code: str = ""  # the finding's stable code (artune.findings), where it has one
    world_sizes: tuple[int, ...] = ()  # the world sizes of ``scope``, where it names them...
    modes: tuple[str, ...] = ()  # ...and its modes
    answer: str = ""  # the command that answers it (a shell line), where one does
    named: tuple[int, ...] = ()  # the world sizes its finding names (``Finding.world_sizes``), beside ``scope``'s
    switch: str = ""  # the switch a moved range's question is asked under (X111, X112), where one is


@dataclass(frozen=True)
class BenchCommand:
    """An engine's own benchmark command that measures moved ranges (``argv``, then ``> stdout`` if any).

    ``sizes`` are the bytes it measures near the ranges; ``missing`` names
    the sides of moved bounds its sizes cannot reach (a benchmark with a
    fixed size list); ``output`` is the evidence file it leaves.
    """

    engine: str
    argv: tuple[str, ...]
    modes: tuple[str, ...]
    sizes: tuple[int, ...]
    output: str
    stdout: bool = False  # the benchmark prints its results: the shell saves them to ``output``
    missing: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The command as a shell line; an argument naming a variable each host sets (``$MASTER_ADDR``, as a
        multi-node launch needs) is left for the shell to expand."""
        line = " ".join(a if _VARIABLE.match(a) else shlex.quote(a) for a in self.argv)
        return line + (f" > {shlex.quote(self.output)}" if self.stdout else "")


_VARIABLE = re.compile(r"^--[\w-]+=\$\{?[A-Z_]+\}?(:\d+)?$")  # --rdzv_endpoint=$MASTER_ADDR:29500


@dataclass(frozen=True)
class EvidenceQuestion:
    """Moved ranges at one ``(arch, world size)`` that no evidence covers, and the commands that would.

    ``code`` is X111 (no evidence at all for them) or X112 (evidence for
    the arch and world size whose sizes do not reach both sides of every
    moved bound; ``why`` says what it lacks). ``ranges`` are ``(mode, lo, hi)``.
    """

    code: str
    arch: str
    world_size: int
    ranges: tuple[tuple[str, int, int | None], ...]
    commands: tuple[BenchCommand, ...]
    why: str = ""
    #: where the ranks run: on one host (1), or across that many hosts in one NVLink domain (``nvlink``
    #: "rack") or joined over a network ("host")
    hosts: int = 1
    nvlink: str = "host"
    switch: str = ""  # the engine's switch setting the ranges move under ("NAME=0"), "" with nothing set
    causes: tuple[str, ...] = ()  # what moved them (``Move.cause``'s parts)

    @property
    def where(self) -> str:
        """``ws 8``, or ``ws 8 across 2 hosts in one NVLink domain`` (``... over a network``)."""
        under = f" with {self.switch}" if self.switch else ""
        if self.hosts == 1:
            return f"ws {self.world_size}{under}"
        joined = "in one NVLink domain" if self.nvlink == "rack" else "over a network"
        return f"ws {self.world_size} across {self.hosts} hosts {joined}{under}"


@dataclass(frozen=True)
class SideScore:
    """One side's row on benchmark evidence, as the engine runs it: geometric-mean and worst regret against
    the fastest column, over the sizes scored; ``unscored``: sizes whose kernel the sweep did not measure."""

    geomean: float | None
    worst: float | None
    worst_size: int | None
    scored: int
    unscored: tuple[int, ...] = ()


@dataclass(frozen=True)
class SideScores:
    """Both sides' scores on the same sizes."""

    before: SideScore
    after: SideScore


@dataclass(frozen=True)
class BestScore:
    """The best row the engine's own rules allow on the evidence (``row``: ready to paste), and its score.

    Its geomean is also the distance to the fastest-column bound: what no
    row under these rules can reach. ``row`` is "" and ``why`` says why
    where the engine's knobs cannot be searched.
    """

    geomean: float | None
    worst: float | None
    row: str
    why: str = ""
    knobs: tuple[tuple[str, str], ...] = ()  # (knob, value) as the search set them


@dataclass(frozen=True)
class FileScore:
    """One evidence file: what it measured, both sides over all its sizes and over the moved ones, the best row."""

    source: str
    benchmark: str
    arch: str
    world_size: int
    mode: str
    noise: float
    sides: SideScores
    moved: SideScores
    best: BestScore


@dataclass(frozen=True)
class EvidenceReport:
    """``--evidence``: both sides and the best row over every file's sizes (one file: its own), and each file."""

    sides: SideScores
    best: BestScore
    sweeps: tuple[FileScore, ...]


@dataclass(frozen=True)
class Side:
    """One side's provenance: the source as given, the files read, and per arch where the figures came from."""

    spec: str
    label: str
    provenance: tuple[tuple[str, str], ...]  # (arch, provenance text)


@dataclass(frozen=True)
class RegretEvidence:
    """How much slower the rows' choice is than the best, over the moved sizes of one (arch, ws, mode).

    ``basis`` is "modelled" (artune's cost model, ``source`` names the
    preset) or "measured" (``source`` names the log). ``lo..hi`` spans the
    moved sizes weighed (modelled: up to 256 MiB; measured: the logged
    sizes). The regret is the geometric mean over ``sizes`` sizes of
    time(choice) / time(best). Modelled: the median over the model's
    replicates, and as ``after_high`` its 90th percentile calibrated on the
    archs held out from the fit (the bootstrap's own where the fit was not
    validated by arch), ``validation`` the blind-arch score behind it, and
    ``undecided`` why the model cannot tell the sides apart and the sweep
    that would (empty when it can); measured: ``after_high`` is the worst
    size.
    """

    arch: str
    world_size: int
    mode: str
    basis: str
    source: str
    lo: int
    hi: int
    sizes: int
    before: float
    after: float
    after_high: float
    best: str  # what the basis finds fastest most often there: an algorithm, or "family (algorithm)" when modelled
    validation: str = ""
    undecided: str = ""


@dataclass(frozen=True)
class Review:
    """A whole review: its sections in order, the verdict and the exit code."""

    command: str  # the command that makes this review (without --out and --format, which change no content)
    before: Side
    after: Side
    moves: tuple[Move, ...]
    arches: tuple[ArchChange, ...]
    params: tuple[ParamChange, ...]
    coverage: tuple[Coverage, ...]
    #: what decides the verdict, most decisive first, each with the command that answers it
    #: (``artune.review.questions``): the questions, the concerns and the asks below, one list
    ranked: tuple[Question, ...]
    questions: tuple[Question, ...]  # new in AFTER
    inherited: tuple[Question, ...]  # already in BEFORE: not introduced here
    #: new in AFTER, about world sizes whose decisions this change does not move at its arches: not asked
    unmoved: tuple[Question, ...]
    resolved: tuple[Question, ...]  # in BEFORE, gone from AFTER
    notes: tuple[Question, ...]  # AFTER's notes (information, not questions)
    asks: tuple[EvidenceQuestion, ...]  # moved ranges no evidence covers, per arch and world size
    concerns: tuple[Question, ...]  # losses: measured (X201, X202) or modelled beyond the interval (X113)
    copies: tuple[str, ...]  # AFTER's arches whose plans equal another arch's: "10.7 = 10.3 in 8 of 8 plans"
    regret: tuple[RegretEvidence, ...]
    evidence: EvidenceReport | None  # --evidence: the sides and the best row scored on the engines' benchmarks
    unmodelled: tuple[str, ...]  # "arch A: why" for each arch that moved with nothing to weigh it
    verdict: Verdict
    summary: str  # the verdict's line
    exit_code: int

    @property
    def changed(self) -> bool:
        """Whether the two sides run anything differently (or their parameters or arches differ)."""
        return bool(self.moves or self.arches or self.params)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON: every field, tuples as lists."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Review:
        """The review ``to_dict`` gave (``ValueError``/``KeyError`` when ``data`` is not one)."""
        return _build(cls, data)


def _build(kind: Any, value: Any) -> Any:
    """``value`` (JSON data) as an instance of the type ``kind``: dataclasses, tuples, unions with None."""
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        return kind(**{f.name: _build(hints[f.name], value[f.name]) for f in dataclasses.fields(kind)})
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        (inner,) = [a for a in typing.get_args(kind) if a is not type(None)]
        return _build(inner, value)
    if origin is tuple:
        args = typing.get_args(kind)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_build(args[0], v) for v in value)
        return tuple(_build(a, v) for a, v in zip(args, value, strict=True))
    return kind(value)
