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

from artune.review.types import ArchChange, EvidenceQuestion, Move, ParamChange, Question, Verdict

#: codes of the findings that are measured losses: they ask for changes, not answers
LOSSES = ("X201", "X202")
_CONCERNS = {  # the other concerns, as the verdict's line counts them
    "X113": ("modelled loss", "beyond the model's interval"),
    "X114": ("kernel", "the evidence did not measure"),
}


def _span(values: Sequence[float]) -> str:
    lo, hi = f"{min(values):.2f}", f"{max(values):.2f}"
    return lo if lo == hi else f"{lo}-{hi}"


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
    asks: Sequence[EvidenceQuestion] = (),
    concerns: Sequence[Question] = (),
) -> tuple[Verdict, str]:
    """The verdict and its line: one sentence, what changes, then what decides it (the figures are the
    page's: Regret, Losses)."""
    losses = [c for c in concerns if c.code in LOSSES]
    if not (moved or arches or params):
        if questions:
            return Verdict.QUESTIONS, f"questions: {_count(len(questions), 'question')} for the author; nothing moves."
        return Verdict.APPROVE, "approve: no change, both sides run the same algorithm everywhere."
    reasons = []
    if losses:
        reasons.append(f"{_count(len(losses), 'measured loss')} ({', '.join(sorted({c.code for c in losses}))})")
    if asks:
        reasons.append(f"no evidence covers {'it' if len(asks) == 1 else 'them'} at {_count(len(asks), 'place')}")
    for code, what in _CONCERNS.items():
        found = [c for c in concerns if c.code == code]
        if found:
            reasons.append(f"{_count(len(found), what[0])} {what[1]}")
    if questions:
        errors = sum(q.severity == "error" for q in questions)
        news = _count(len(questions), "new finding") + (f" ({errors} errors)" if errors else "")
        reasons.append(f"{news} {'needs' if len(questions) == 1 else 'need'} an answer")
    what = _what(moved, arches, params)
    if losses:
        kind = Verdict.REQUEST_CHANGES
    elif reasons:
        kind = Verdict.QUESTIONS
    else:
        return Verdict.APPROVE, f"approve: evidence covers every move and no moved row loses; {what}."
    said = reasons[0] if len(reasons) == 1 else f"{', '.join(reasons[:-1])} and {reasons[-1]}"
    return kind, f"{kind.value}: {what}; {said}."
