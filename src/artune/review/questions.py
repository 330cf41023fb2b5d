"""What decides a review: one ranked list of questions, each with its place and the command that answers it.

The review asks about three kinds of thing, and each becomes a ``Question``:

- a finding of ``artune check`` new in AFTER, at its file and line (what an
  engine reading cannot vouch for among them: E401, E402);
- a loss the evidence shows (X201, X202) or the cost model predicts beyond
  its interval (X113, one question per arch);
- moved ranges no evidence covers (X111, X112: one question each) and
  kernels the evidence did not time (X114, one question per arch).

``RANKS`` orders them, what would have stopped the merge first: a measured
loss, an engine that raises, an arch copied from another, world sizes sent
to NCCL, a reading artune cannot vouch for, then the losses the model
predicts and the moves nothing measured. Codes it does not name follow,
errors before warnings. ``ANSWERS`` names the command that answers each
kind. A new kind of question is an entry in each.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from artune import rocm
from artune.review.benchmarks import artune_command
from artune.review.causes import few
from artune.review.types import Coverage, EvidenceQuestion, Question, world_sizes
from artune.table.types import MODES

#: the codes, most decisive first
RANKS = ("X201", "X202", "E202", "E101", "E201", "E401", "E402", "X113", "X111", "X112", "X114")
_SEVERITY = {"error": 0, "warning": 1, "note": 2}


@dataclass(frozen=True)
class AnswerContext:
    """What the answers are made from: AFTER as given, its engine, the asks and AFTER's world sizes per arch."""

    after: str
    engine: str
    asks: tuple[EvidenceQuestion, ...]
    coverage: tuple[Coverage, ...]
    planned: Mapping[str, tuple[int, ...]]  # per arch, AFTER's world sizes on one host

    def arch(self, question: Question) -> str:
        """The question's first arch, as the platform names it (``gfx94*``: gfx942, never a CUDA arch); for
        "every arch" ("*"), the first AFTER plans."""
        first = question.arch.split(", ")[0]
        if rocm.is_gfx(first):
            prefix = first.rstrip("*")
            return next((gfx for gfx in rocm.archs() if gfx.startswith(prefix)), prefix)
        return first if first in self.planned else next(iter(self.planned), first)


def world_sizes_named(question: Question) -> set[int]:
    """The world sizes a question is about: its own, else those its finding names ("world sizes 9-15")."""
    return set(question.world_sizes or question.named)


def _tune(arch: str, world_sizes: Sequence[int]) -> str:
    """artune's tuner over ``world_sizes`` on the arch's GPU, its logs where ``--evidence-dir`` finds them."""
    name = "artune-evidence/" + "-".join(
        [*([arch] if arch not in ("*", "") else []), *([f"ws{world_sizes[0]}"] if len(world_sizes) == 1 else [])]
    )
    name += "-artune"
    command = artune_command(world_sizes[0], ("graph", "eager"), name)
    argv = list(command.argv)
    for ws in world_sizes[1:]:  # --world-size is repeatable
        argv[argv.index("--mode") : argv.index("--mode")] = ["--world-size", str(ws)]
    return shlex.join(argv)


def _measure_arch(question: Question, ctx: AnswerContext) -> str:
    """E101: measure the arch (its rows, every world size AFTER plans for it), as the finding's fix says."""
    arch = ctx.arch(question)
    return _tune(arch, ctx.planned.get(arch) or (8,))


def _measure_holes(question: Question, ctx: AnswerContext) -> str:
    """E201: what runs at the first world size sent to NCCL, against NCCL: is NCCL meant there?"""
    arch = ctx.arch(question)
    holes = [ws for c in ctx.coverage if arch in c.arch.split(", ") for ws in c.after]
    holes = holes or [ws for c in ctx.coverage for ws in c.after]
    return _tune(arch, holes[:1]) if holes else ""


def _benchmark(question: Question, ctx: AnswerContext) -> str:
    """X111-X114: the engine's own benchmark at the (first) arch's first world size asked about (with the switch
    the question names set, where it names one)."""
    arch = question.arch.split(", ")[0]
    asked = [a for a in ctx.asks if a.arch == arch and a.commands]
    named = [a for a in asked if a.switch and a.switch == question.switch]
    asked = named or [a for a in asked if not a.switch] or asked
    mine = [a for a in asked if a.world_size in question.world_sizes] or asked
    if not mine:
        return ""
    return mine[0].commands[0].text


def _explain(question: Question, ctx: AnswerContext) -> str:
    """A finding at a world size (its own, or one its message names): what AFTER runs there and why (``artune
    explain``, which marks what a caveat leaves unverified); without one, what AFTER runs on its arch (``artune
    show``): an answer, never the finding printed again."""
    sizes = sorted(world_sizes_named(question))
    source = ctx.after.rpartition("@")[0] if "@" in ctx.after else ctx.after
    if not sizes:
        return shlex.join(["artune", "show", f"{source}@{ctx.arch(question)}"])
    argv = ["artune", "explain", "--table", source, "--arch", ctx.arch(question)]
    argv += ["--world-size", str(sizes[0]), "--size", "1MiB"]
    mode = next((m for m in ("graph", "eager") if f"({m}" in question.scope), "")
    return shlex.join(argv + (["--mode", mode] if mode else []))


def _verify(question: Question, ctx: AnswerContext) -> str:
    """E401, E402: the engine's own code run on every probe against artune's reading (``artune verify-engine``),
    where AFTER is an engine's source it can run; otherwise what AFTER runs there (``_explain``)."""
    source = ctx.after.rpartition("@")[0] if "@" in ctx.after else ctx.after  # verify-engine probes every arch
    if ctx.engine and source.startswith((f"{ctx.engine}:", f"{ctx.engine}==")):
        return shlex.join(["artune", "verify-engine", source])
    return _explain(question, ctx)


Answer = Callable[[Question, AnswerContext], str]
#: the command that answers each kind of question; the others get ``_explain``, and the measured losses none:
#: their message names the better row
ANSWERS: Mapping[str, Answer] = {
    "X201": lambda q, ctx: "",
    "X202": lambda q, ctx: "",
    "E101": _measure_arch,
    "E201": _measure_holes,
    "E401": _verify,
    "E402": _verify,
    "X113": _benchmark,
    "X111": _benchmark,
    "X112": _benchmark,
    "X114": _benchmark,
}


def _rank(question: Question) -> tuple[int, int]:
    code = question.code
    return (RANKS.index(code) if code in RANKS else len(RANKS), _SEVERITY.get(question.severity, 3))


def _scope(pairs: Sequence[tuple[int, str]]) -> str:
    """``ws 5-8 (eager), ws 16 (graph, eager)``: world sizes with the same modes merged."""
    modes: dict[int, list[str]] = {}
    for ws, mode in pairs:
        modes.setdefault(ws, []).append(mode)
    by_modes: dict[tuple[str, ...], list[int]] = {}
    for ws, found in modes.items():
        by_modes.setdefault(tuple(m for m in MODES if m in found), []).append(ws)
    return ", ".join(f"ws {world_sizes(sizes)} ({', '.join(m)})" for m, sizes in by_modes.items())


def _per_arch(items: Sequence[Question], code: str, message: Callable[[str, str], str]) -> list[Question]:
    """The questions of ``code`` merged per arch: ``message(arch, scope)`` the text, their world sizes merged."""
    by_arch: dict[str, list[Question]] = {}
    for q in items:
        if q.code == code:
            by_arch.setdefault(q.arch, []).append(q)
    out = []
    for arch, found in by_arch.items():
        pairs = [(ws, mode) for q in found for ws in q.world_sizes for mode in q.modes]
        sizes = tuple(dict.fromkeys(ws for ws, _ in pairs))
        modes = tuple(m for m in MODES if any(mode == m for _, mode in pairs))
        wheres = {q.where for q in found}
        where = wheres.pop() if len(wheres) == 1 else ""
        out.append(Question(found[0].severity, where, arch, "", message(arch, _scope(pairs)), code, sizes, modes))
    return out


def _unmeasured(asks: Sequence[EvidenceQuestion]) -> list[Question]:
    """X111, X112: one question per code (and per switch setting the ranges move under), its ranges counted
    over the arches and world sizes they move at, and what moved them."""
    by: dict[tuple[str, str], dict[str, list[EvidenceQuestion]]] = {}
    for ask in asks:
        by.setdefault((ask.code, ask.switch), {}).setdefault(ask.arch, []).append(ask)
    out = []
    for (code, switch), arches in by.items():
        found = [a for asked in arches.values() for a in asked]
        count = sum(len(a.ranges) for a in found)
        at = "; ".join(_at(arch, asked) for arch, asked in arches.items())
        what = "no evidence covers" if code == "X111" else "the evidence does not reach both sides of"
        under = f" only with `{switch}` set (not the release's default)" if switch else ""
        first = found[0]
        causes = list(dict.fromkeys(c for a in found for c in a.causes))
        moved_by = f"; moved by {few(causes)}" if causes else ""
        message = (
            f"{count} moved range(s){under} that {what}, at {at}{moved_by}; the answer measures {first.arch} "
            f"{first.where}, and Measurements asked for holds the command for each"
        )
        sizes = tuple(dict.fromkeys(a.world_size for a in found))
        out.append(Question("warning", "", ", ".join(arches), "", message, code, sizes, switch=switch))
    return out


def _at(arch: str, asked: Sequence[EvidenceQuestion]) -> str:
    """``9.0 ws 2, 4 and across hosts ws 8 (2, 4 hosts)``: the world sizes on one host, then across hosts."""
    one = [a.world_size for a in asked if a.hosts == 1]
    across: dict[int, list[int]] = {}
    for a in asked:
        if a.hosts > 1:
            across.setdefault(a.world_size, []).append(a.hosts)
    parts = [f"ws {world_sizes(one)}"] if one else []
    if across:
        many = ", ".join(f"ws {ws} ({world_sizes(set(h))} hosts)" for ws, h in across.items())
        parts.append(f"across hosts {many}")
    return f"{arch} {' and '.join(parts)}"


def ranked(
    questions: Sequence[Question],
    concerns: Sequence[Question],
    asks: Sequence[EvidenceQuestion],
    ctx: AnswerContext,
) -> tuple[Question, ...]:
    """Every question that decides the verdict, most decisive first, each with the command that answers it."""
    modelled = _per_arch(
        concerns,
        "X113",
        lambda arch, scopes: (
            f"the cost model predicts AFTER slower than BEFORE beyond its interval at {scopes}, "
            "and nothing measured it: measure it, or say why the model is wrong there (figures under Regret)"
        ),
    )
    kernels = _per_arch(
        concerns,
        "X114",
        lambda arch, scopes: (
            f"the evidence has no column for a kernel a moved row runs at {scopes}: it cannot "
            "answer those sizes (which kernels: under Losses)"
        ),
    )
    rest = [c for c in concerns if c.code not in ("X113", "X114")]
    found = [*questions, *rest, *modelled, *kernels, *_unmeasured(asks)]
    out = [replace(q, answer=ANSWERS.get(q.code, _explain)(q, ctx)) for q in found]
    return tuple(sorted(out, key=_rank))
