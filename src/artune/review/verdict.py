"""The verdict: approve, questions or request changes, and its one line.

- request changes: a measurement shows a moved row losing (X201 to the other
  side, X202 to the best row the engine's rules allow), beyond its noise;
- questions: a move without evidence (X111, X112), a modelled loss beyond
  the model's interval (X113), evidence without a column for the kernel a
  moved row runs (X114), or a finding of ``artune check`` new in AFTER;
- approve: none of these (nothing moves, or evidence covers every move and
  no moved row loses).
"""

from __future__ import annotations

from collections.abc import Sequence

from artune.review.types import ArchChange, EvidenceQuestion, Move, ParamChange, Question, RegretEvidence, Verdict

#: codes of the findings that are measured losses: they ask for changes, not answers
LOSSES = ("X201", "X202")
_CONCERNS = {  # the other concerns, as the verdict's line counts them
    "X113": ("modelled loss", "beyond the model's interval"),
    "X114": ("kernel", "the evidence did not measure"),
}


def _span(values: Sequence[float]) -> str:
    lo, hi = f"{min(values):.2f}", f"{max(values):.2f}"
    return lo if lo == hi else f"{lo}-{hi}"


def _weighed(regret: Sequence[RegretEvidence]) -> list[str]:
    """``modelled regret 1.10-1.15 -> 1.00`` per basis: before's and after's range over the rows weighed."""
    out = []
    for basis in ("measured", "modelled"):
        rows = [r for r in regret if r.basis == basis]
        if rows:
            text = f"{basis} regret {_span([r.before for r in rows])} -> {_span([r.after for r in rows])}"
            if basis == "modelled":
                # a modelled figure is stated with its calibrated interval, and where it cannot tell, says so
                text += f" (calibrated p90 up to {max(r.after_high for r in rows):.2f}"
                undecided = sum(bool(r.undecided) for r in rows)
                text += f"; cannot tell on {undecided} of {len(rows)})" if undecided else ")"
            out.append(text)
    return out


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 'es' if noun.endswith('s') else 's'}"


def _what(moved: Sequence[Move], arches: Sequence[ArchChange], params: Sequence[ParamChange]) -> str:
    """What changes, in a clause: ranges moving on which arches, arches that arrive or leave, parameters."""
    parts = []
    arrived = ", ".join(c.arch for c in arches if c.change == "new")
    left = ", ".join(c.arch for c in arches if c.change != "new")
    if moved:
        on = ", ".join(dict.fromkeys(a for m in moved for a in m.arch.split(", ")))
        news = "; ".join([f"{arrived} new" if arrived else "", f"{left} removed" if left else ""]).strip("; ")
        text = f"{_count(len(moved), 'range')} move{'s' if len(moved) == 1 else ''} on arch {on}"
        parts.append(text + (f" ({news})" if news else ""))
    else:
        parts += [f"arch {arrived} arrives" if arrived else "", f"arch {left} leaves" if left else ""]
    parts += [f"{_count(len(params), 'parameter')} change" if params else ""]
    return ", ".join(p for p in parts if p)


def verdict(
    moved: Sequence[Move],
    arches: Sequence[ArchChange],
    params: Sequence[ParamChange],
    questions: Sequence[Question],
    regret: Sequence[RegretEvidence] = (),
    asks: Sequence[EvidenceQuestion] = (),
    concerns: Sequence[Question] = (),
) -> tuple[Verdict, str]:
    """The verdict and its line (one sentence)."""
    losses = [c for c in concerns if c.code in LOSSES]
    if not (moved or arches or params):
        if questions:
            return Verdict.QUESTIONS, f"questions: {_count(len(questions), 'question')} for the author; nothing moves."
        return Verdict.APPROVE, "approve: no change, both sides run the same algorithm everywhere."
    reasons = []
    if losses:
        reasons.append(f"{_count(len(losses), 'measured loss')} ({', '.join(sorted({c.code for c in losses}))})")
    if asks:
        ranges = sum(len(a.ranges) for a in asks)
        reasons.append(f"{_count(ranges, 'moved range')} unmeasured at {_count(len(asks), 'arch and world size pair')}")
    for code, what in _CONCERNS.items():
        found = [c for c in concerns if c.code == code]
        if found:
            reasons.append(f"{_count(len(found), what[0])} {what[1]}")
    if questions:
        errors = sum(q.severity == "error" for q in questions)
        reasons.append(_count(len(questions), "check question") + (f" ({errors} errors)" if errors else ""))
    what = "; ".join([_what(moved, arches, params), *_weighed(regret)])
    if losses:
        kind = Verdict.REQUEST_CHANGES
    elif reasons:
        kind = Verdict.QUESTIONS
    else:
        return Verdict.APPROVE, f"approve: evidence covers every move and no moved row loses; {what}."
    return kind, f"{kind.value}: {', '.join(reasons)}; {what}."
