"""Every move is a question until evidence covers it: what the review asks the author to measure.

A moved range ``(arch, world size, mode, lo..hi)`` is covered by a sweep of
that arch, world size and mode whose sizes lie on both sides of each of the
range's bounds and inside it (``artune.review.benchmarks.reach``). A sweep
is an artune measurement log (``--measured``) or an engine benchmark's
output (``--evidence``). The ranges left uncovered are grouped per arch and
world size, each group with the engine's own benchmark command that would
measure them (X111: nothing measured there; X112: a sweep there that does
not reach every bound).

vLLM's rows do not depend on the mode (its tables are the same in graph and
eager), and its benchmark times CUDA graphs: a vLLM move is asked, and
answered, in graph mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from artune.formats.registry import Names
from artune.review.benchmarks import commands, reach
from artune.review.types import EvidenceQuestion, Move, Question, RegretEvidence
from artune.table.types import MODES

#: the engines whose dispatch reads no mode: their moves are asked in graph mode, as their benchmarks time them
MODELESS = Names("modeless")


@dataclass(frozen=True)
class SweepCover:
    """What a measurement covers: its arch, world size, mode, the sizes it timed, and where it came from."""

    arch: str
    world_size: int
    mode: str
    sizes: tuple[int, ...]
    source: str


Spot = tuple[str, int, str]  # (arch, world size, mode)
Span = tuple[int, int | None]


def moved_spans(moved: Sequence[Move], engine: str) -> dict[Spot, list[Span]]:
    """The moved ranges per ``(arch, world size, mode)``, in the order the moves list them."""
    out: dict[Spot, list[Span]] = {}
    for move in moved:
        modes = ("graph",) if engine in MODELESS and set(move.modes) == set(MODES) else move.modes
        for arch in move.arch.split(", "):
            for ws in move.world_sizes:
                for mode in modes:
                    spans = out.setdefault((arch, ws, mode), [])
                    if (move.lo, move.hi) not in spans:
                        spans.append((move.lo, move.hi))
    return out


def covering(spot: Spot, span: Span, sweeps: Sequence[SweepCover]) -> SweepCover | None:
    """The first sweep of ``spot`` whose sizes reach both sides of ``span``'s bounds and its inside."""
    for sweep in sweeps:
        if (sweep.arch, sweep.world_size, sweep.mode) == spot and not reach(sweep.sizes, [span]):
            return sweep
    return None


def evidence_questions(
    spans: dict[Spot, list[Span]], sweeps: Sequence[SweepCover], engine: str
) -> tuple[EvidenceQuestion, ...]:
    """Per ``(arch, world size)``, the moved ranges no sweep covers, and the commands that would measure them."""
    left: dict[tuple[str, int], list[tuple[str, int, int | None]]] = {}
    for (arch, ws, mode), ranges in spans.items():
        for lo, hi in ranges:
            if covering((arch, ws, mode), (lo, hi), sweeps) is None:
                left.setdefault((arch, ws), []).append((mode, lo, hi))
    out: list[EvidenceQuestion] = []
    for (arch, ws), ranges in left.items():
        near = [s for s in sweeps if (s.arch, s.world_size) == (arch, ws)]
        why = "; ".join(f"{s.source} ({s.mode}): {_lacks(s, ranges)}" for s in near)
        ordered = tuple(sorted(ranges, key=lambda r: (r[1], MODES.index(r[0]))))
        code = "X112" if near else "X111"
        out.append(EvidenceQuestion(code, arch, ws, ordered, commands(engine, arch, ws, ordered), why))
    return tuple(sorted(out, key=lambda a: (_version(a.arch), a.world_size)))


def across_hosts(moved: Sequence[Move], engine: str) -> tuple[EvidenceQuestion, ...]:
    """X111 per ``(arch, world size, hosts, NVLink domain)`` for the moved ranges across hosts: nothing artune
    reads times ranks across hosts (a sweep names no topology), so each is asked, with the engine's own
    benchmark launched on every host."""
    left: dict[tuple[str, int, int, str], list[tuple[str, int, int | None]]] = {}
    for move in moved:
        modes = ("graph",) if engine in MODELESS and set(move.modes) == set(MODES) else move.modes
        for hosts, nvlink in move.topologies:
            if hosts == 1:
                continue
            for arch in move.arch.split(", "):
                for ws in move.world_sizes:
                    ranges = left.setdefault((arch, ws, hosts, nvlink), [])
                    ranges += [(mode, move.lo, move.hi) for mode in modes if (mode, move.lo, move.hi) not in ranges]
    out = [
        EvidenceQuestion(
            "X111",
            arch,
            ws,
            tuple(sorted(ranges, key=lambda r: (r[1], MODES.index(r[0])))),
            commands(engine, arch, ws, ranges, hosts),
            hosts=hosts,
            nvlink=nvlink,
        )
        for (arch, ws, hosts, nvlink), ranges in left.items()
    ]
    return tuple(sorted(out, key=lambda a: (_version(a.arch), a.world_size, a.hosts, a.nvlink)))


def under_switch(asks: Sequence[EvidenceQuestion], switch: str) -> tuple[EvidenceQuestion, ...]:
    """``asks`` of ranges that move only with ``switch`` ("NAME=VALUE") set: each command runs with it set,
    and writes its own file."""
    out = []
    for ask in asks:
        suffix = "-" + switch.lower().replace("=", "")
        commands = []
        for c in ask.commands:
            stem, dot, ext = c.output.rpartition(".")
            output = f"{stem}{suffix}.{ext}" if dot and ext.isalnum() else c.output + suffix
            argv = (switch, *(output if a == c.output else a for a in c.argv))
            commands.append(replace(c, argv=argv, output=output))
        out.append(replace(ask, switch=switch, commands=tuple(commands)))
    return tuple(out)


def _version(arch: str) -> tuple[int, ...]:
    """``"10.3"`` -> ``(10, 3)``, for ordering; an arch that is not a version ("default") last."""
    parts = arch.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else (1 << 30,)


def _lacks(sweep: SweepCover, ranges: Sequence[tuple[str, int, int | None]]) -> str:
    """What ``sweep`` lacks for the ranges of its mode (or that it measured another mode)."""
    mine = [(lo, hi) for mode, lo, hi in ranges if mode == sweep.mode]
    return ", ".join(reach(sweep.sizes, mine)) if mine else "another mode"


def modelled_losses(regret: Sequence[RegretEvidence], answered: set[Spot], engine: str = "") -> tuple[Question, ...]:
    """X113: where the cost model predicts AFTER slower than BEFORE beyond its interval, and nothing measured.

    The interval is AFTER's 90th percentile above its median (calibrated on
    the archs held out from the fit), taken as the half-width either side. A loss
    counts when AFTER's median less that half-width is still above BEFORE's.
    A measurement of the ``(arch, world size, mode)`` silences the model.
    """
    if engine in MODELESS:  # a measured graph-mode row answers the same row in eager
        answered = answered | {(arch, ws, mode) for arch, ws, _ in answered for mode in MODES}
    out: list[Question] = []
    for r in regret:
        if r.basis != "modelled" or (r.arch, r.world_size, r.mode) in answered:
            continue
        half = max(r.after_high - r.after, 0.0)
        if r.after - half > r.before:
            message = (
                f"the cost model ({r.source}) predicts AFTER slower over the moved sizes: regret "
                f"{r.before:.2f} before, {r.after:.2f} after (calibrated 90th percentile {r.after_high:.2f}), a loss "
                f"beyond its interval; measure it (the command above) or say why the model is wrong here"
            )
            scope = f"ws {r.world_size} ({r.mode})"
            out.append(Question("warning", "", r.arch, scope, message, "X113", (r.world_size,), (r.mode,)))
    return tuple(out)


def unasked(moved: Sequence[Move], asks: Sequence[EvidenceQuestion], engine: str) -> tuple[str, ...]:
    """The moved ranges no question asks about, each as ``arch ws N [hosts H nvlink] mode [lo, hi]`` (and the
    switch it moves under): a review that approves with any of these approves a move nothing measured
    (evidence that covers a range answers its question, so with evidence a covered range is here too)."""
    asked = {
        (a.arch, a.world_size, a.hosts, a.nvlink if a.hosts > 1 else "host", a.switch, mode, lo, hi)
        for a in asks
        for mode, lo, hi in a.ranges
    }
    out: list[str] = []
    for move in moved:
        modes = ("graph",) if engine in MODELESS and set(move.modes) == set(MODES) else move.modes
        for hosts, nvlink in move.topologies:
            for arch in move.arch.split(", "):
                for ws in move.world_sizes:
                    for mode in modes:
                        if (arch, ws, hosts, nvlink, move.switch, mode, move.lo, move.hi) not in asked:
                            where = f" hosts {hosts} {nvlink}" if hosts > 1 else ""
                            under = f" with {move.switch}" if move.switch else ""
                            out.append(f"arch {arch} ws {ws}{where} {mode} [{move.lo}, {move.hi}]{under}")
    return tuple(dict.fromkeys(out))
