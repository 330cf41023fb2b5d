"""``--evidence``: the engines' benchmark outputs a change carries, read for the review.

Each file is read by ``artune.evidence.read_evidence`` (vLLM's JSON or
table, SGLang's, nccl-tests, TensorRT-LLM's CSV). Its arch is, in order:
``FILE@ARCH``, what the file says, ``--arch``, the name the review's printed
commands give it (``ARCH-wsN-ENGINE.EXT``), or the one arch that moves at
the file's world size and mode. The name also gives the world size to
formats that print none (SGLang's). A file whose arch cannot be told is an
error that says how to name it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from artune.errors import ArtuneError, EvidenceError
from artune.measure.stats import geomean
from artune.review.asks import Span, Spot, SweepCover
from artune.review.types import (
    BestScore,
    EvidenceReport,
    FileScore,
    Move,
    Question,
    RegretEvidence,
    SideScore,
    SideScores,
)
from artune.sizes import format_size, format_span
from artune.table.types import Table

#: the name the printed commands give their output: ARCH-wsN-ENGINE.EXT
NAMED = re.compile(r"^(?P<arch>\d+\.\d+)-ws(?P<ws>\d+)-")


def _split(spec: str) -> tuple[str, str]:
    """``FILE@ARCH`` -> ``(FILE, ARCH)``; a plain file -> ``(FILE, "")``."""
    head, at, arch = spec.rpartition("@")
    if at and head and re.fullmatch(r"\d+\.\d+", arch):
        return head, arch
    return spec, ""


def read_sweeps(specs: Sequence[str], arch: str, spans: dict[Spot, list[Span]]) -> list[Any]:
    """The benchmark sweeps of ``specs``, each with its arch (``artune.evidence.BenchmarkSweep``)."""
    if not specs:
        return []
    from artune.evidence import read_evidence

    out = []
    for spec in specs:
        path, given = _split(spec)
        named = NAMED.match(Path(path).name)
        ws = int(named["ws"]) if named else None
        try:
            sweep = read_evidence(path, world_size=ws if ws is not None and _silent(path) else None)
        except ArtuneError as err:
            raise ArtuneError(str(err) if path in str(err) else f"--evidence {spec}: {err}") from None
        if ws is not None and sweep.world_size != ws:
            raise ArtuneError(f"--evidence {spec}: the sweep is at world size {sweep.world_size}, its name says {ws}")
        found = given or sweep.arch or arch or (named["arch"] if named else "") or _only(sweep, spans)
        if not found:
            raise ArtuneError(
                f"--evidence {spec}: which arch is this sweep of? Give it as {path}@ARCH, pass --arch, "
                f"or name the file ARCH-ws{sweep.world_size}-... as the review's commands do"
            )
        out.append(replace(sweep, arch=found))
    return out


def _silent(path: str) -> bool:
    """Whether the file's format prints no world size (SGLang's): its name must give it."""
    from artune.evidence import detect

    try:
        return detect(Path(path).read_text(encoding="utf-8")).startswith("sglang")
    except (OSError, UnicodeDecodeError, ArtuneError):
        return False  # read_evidence says what is wrong with it


def _only(sweep: Any, spans: dict[Spot, list[Span]]) -> str:
    """The one arch that moves at the sweep's world size and mode, or ""."""
    arches = {a for a, ws, mode in spans if (ws, mode) == (sweep.world_size, sweep.mode)}
    return arches.pop() if len(arches) == 1 else ""


# ------------------------------------------------------------------ scoring both sides and the best row


def _side(scores: Sequence[Any]) -> SideScore:
    """A side's geomean and worst regret over ``artune.evidence.score.SizeScore`` rows (unscored ones named)."""
    regrets = [(s.regret, s.size) for s in scores if s.regret is not None]
    geo = geomean(r for r, _ in regrets) if regrets else None
    worst = max(regrets, default=None)
    unscored = tuple(s.size for s in scores if s.regret is None)
    return SideScore(
        geo, None if worst is None else worst[0], None if worst is None else worst[1], len(regrets), unscored
    )


def _inside(size: int, ranges: Sequence[Span]) -> bool:
    return any(lo <= size and (hi is None or size <= hi) for lo, hi in ranges)


def _best(sweep: Any, after: Table) -> BestScore:
    """The best row the rules ``after`` runs by allow on ``sweep``, or why there is none to search.

    Which engines' knobs can be searched is ``artune.evidence.best_row``'s to say: it refuses the others,
    and its reason is the review's.
    """
    from artune.evidence.best import best_row

    try:
        best = best_row(after.rules, sweep, sweep.arch, after)
    except EvidenceError as err:
        return BestScore(None, None, "", str(err))
    worst = best.score.worst
    return BestScore(best.score.geomean, None if worst is None else worst.regret, best.text, "", best.knobs)


@dataclass(frozen=True)
class Scored:
    """What ``--evidence`` gives the review: the report, measured regret rows, the losses, and the coverage."""

    report: EvidenceReport | None
    regret: tuple[RegretEvidence, ...]
    concerns: tuple[Question, ...]
    coverage: tuple[SweepCover, ...]


def score_sweeps(
    sweeps: Sequence[Any],
    found: Sequence[tuple[str, Table, Table]],
    moved: Sequence[Move],
    spans: dict[Spot, list[Span]],
) -> Scored:
    """Both sides scored on every sweep as the engine runs them, the best row, and what loses (X114, X201, X202).

    A sweep covers only the sizes at which both sides' kernels were measured.
    """
    from artune.evidence.score import score_table

    tables = {arch: (ta, tb) for arch, ta, tb in found}
    rows: list[FileScore] = []
    regret: list[RegretEvidence] = []
    concerns: list[Question] = []
    coverage: list[SweepCover] = []
    for sweep in sweeps:
        if sweep.arch not in tables:
            raise ArtuneError(
                f"--evidence {sweep.source}: neither side has a table for arch {sweep.arch}; "
                f"they have {', '.join(tables)}"
            )
        ta, tb = tables[sweep.arch]
        was, now = score_table(ta, sweep, sweep.arch).sizes, score_table(tb, sweep, sweep.arch).sizes
        spot: Spot = (sweep.arch, sweep.world_size, sweep.mode)
        ranges = spans.get(spot, [])
        both = [(a, b) for a, b in zip(was, now, strict=True) if a.regret is not None and b.regret is not None]
        coverage.append(SweepCover(*spot, tuple(a.size for a, _ in both), sweep.source))
        in_was = [a for a in was if _inside(a.size, ranges)]
        in_now = [b for b in now if _inside(b.size, ranges)]
        best = _best(sweep, tb)
        score = FileScore(
            sweep.source,
            sweep.benchmark,
            *spot,
            sweep.noise,
            SideScores(_side(was), _side(now)),
            SideScores(_side(in_was), _side(in_now)),
            best,
        )
        rows.append(score)
        if ranges:
            found_rows = _answer(score, [(a, b) for a, b in both if _inside(a.size, ranges)], moved)
            regret += found_rows[0]
            concerns += [*_unmeasured(score, in_was, in_now), *found_rows[1]]
    if not rows:
        return Scored(None, (), (), ())
    every_was = [s for sweep in sweeps for s in score_table(tables[sweep.arch][0], sweep, sweep.arch).sizes]
    every_now = [s for sweep in sweeps for s in score_table(tables[sweep.arch][1], sweep, sweep.arch).sizes]
    report = EvidenceReport(SideScores(_side(every_was), _side(every_now)), _all_best(rows), tuple(rows))
    return Scored(report, tuple(regret), tuple(concerns), tuple(coverage))


def _all_best(rows: Sequence[FileScore]) -> BestScore:
    """One file's best row; with several, the geometric mean of their geomeans and the rows one after another."""
    if len(rows) == 1:
        return rows[0].best
    found = [r.best for r in rows if r.best.geomean is not None]
    if not found:
        return BestScore(None, None, "", "; ".join(dict.fromkeys(r.best.why for r in rows)))
    geo = geomean(b.geomean or 1.0 for b in found)
    worst = max((b.worst or 1.0) for b in found)
    return BestScore(geo, worst, "\n".join(b.row for b in found))


def _unmeasured(score: FileScore, was: Sequence[Any], now: Sequence[Any]) -> list[Question]:
    """X114: moved sizes whose kernel the sweep did not measure, on either side."""
    missing: dict[tuple[str, str], list[int]] = {}
    for s in (*was, *now):
        if s.regret is None:
            missing.setdefault((s.kernel, s.algorithm), []).append(s.size)
    out = []
    for (kernel, algorithm), sizes in missing.items():
        message = (
            f"{Path(score.source).name} has no column for {kernel} ({algorithm} runs it at "
            f"{', '.join(format_size(n) for n in sorted(set(sizes)))}): it cannot answer those moved sizes; "
            f"measure {kernel} there"
        )
        scope = f"ws {score.world_size} ({score.mode})"
        out.append(
            Question(
                "warning",
                Path(score.source).name,
                score.arch,
                scope,
                message,
                "X114",
                (score.world_size,),
                (score.mode,),
            )
        )
    return out


def _answer(
    score: FileScore, pairs: Sequence[tuple[Any, Any]], moved: Sequence[Move]
) -> tuple[list[RegretEvidence], list[Question]]:
    """The measured regret row over the moved sizes both sides ran measured kernels at, and the losses."""
    from artune.review.measured import routes

    if not pairs:
        return [], []
    arch, ws, mode = score.arch, score.world_size, score.mode
    geo = [geomean(p[k].regret for p in pairs) for k in (0, 1)]
    fastest = Counter(b.fastest for _, b in pairs).most_common(1)[0][0]
    worst = max(b.regret for _, b in pairs)
    lo, hi = pairs[0][0].size, pairs[-1][0].size
    row = RegretEvidence(arch, ws, mode, "measured", score.source, lo, hi, len(pairs), geo[0], geo[1], worst, fastest)
    where, scope = Path(score.source).name, f"ws {ws} ({mode})"
    losses = []
    if geo[1] > geo[0] * (1 + score.noise):
        message = (
            f"measured on {len(pairs)} sizes in {format_span(lo, hi)}, AFTER's rows "
            f"({routes(moved, arch, ws, mode, 'after')}) have regret {geo[1]:.3f} against BEFORE's {geo[0]:.3f}, "
            f"beyond the sweep's noise ({score.noise:.1%}); the better row is BEFORE's: "
            f"{routes(moved, arch, ws, mode, 'before')}"
        )
        losses.append(Question("error", where, arch, scope, message, "X201", (ws,), (mode,)))
    best, after = score.best, score.sides.after.geomean
    if best.geomean is not None and after is not None and after > best.geomean * (1 + score.noise):
        message = (
            f"AFTER's row scores {after:.3f} on the sweep as the engine runs it, the best row its rules allow "
            f"{best.geomean:.3f}, beyond the sweep's noise ({score.noise:.1%}); the better row: "
            f"{', '.join(f'{k} {v}' for k, v in best.knobs)} (under Evidence, ready to paste)"
        )
        losses.append(Question("error", where, arch, scope, message, "X202", (ws,), (mode,)))
    return [row], losses
