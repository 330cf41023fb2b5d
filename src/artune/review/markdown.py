"""A ``Review`` as one Markdown comment for a pull request, and as JSON for bots (the same content).

The page reads top to bottom as a reviewer works: what moves, the
questions for the author, the evidence, the verdict. Tables hold only short
cells (arches, world sizes, sizes, algorithm names); anything longer is a
bullet wrapped at ``WIDTH`` columns, so that the source reads in a terminal
and the page needs no sideways scrolling. Identifiers are code spans, so
that ``__name__`` or ``SGLANG_..._KB`` never turn into emphasis.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path

from artune.review.build import world_sizes
from artune.review.types import (
    BenchCommand,
    BestScore,
    EvidenceQuestion,
    EvidenceReport,
    Move,
    Question,
    RegretEvidence,
    Review,
    SideScore,
)
from artune.sizes import format_span
from artune.table.types import MODES

WIDTH = 100
_CODE = re.compile(r"(`[^`]*`)")
_TOKEN = re.compile(r"(\s+)")
_EDGES = re.compile(r"^([(\[\"']*)(.*?)([)\]\"',;:.]*)$")
_CODE_LIKE = re.compile(r"_|/|\w==?\w|\.py\b|\w\(\)$")  # identifiers, paths, key=value, calls


def inline(text: str) -> str:
    """Prose as Markdown: identifiers as code spans, ``*`` and ``|`` escaped; existing code spans kept."""
    out = []
    for part in _CODE.split(text):
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(part)
            continue
        out += [_word(token) for token in _TOKEN.split(part)]
    return "".join(out)


def _word(token: str) -> str:
    match = _EDGES.match(token)
    assert match is not None  # every string matches
    before, core, after = match.groups()
    if core and _CODE_LIKE.search(core):
        return f"{before}`{core}`{after}"
    return token.replace("\\", "\\\\").replace("*", "\\*").replace("|", "\\|")


def code(text: str) -> str:
    """``text`` as one code span (its own backticks dropped)."""
    return f"`{text.replace('`', '')}`"


def _bullet(text: str, level: int = 0) -> list[str]:
    pad = " " * 4 * level  # four spaces per level: what every Markdown reader takes as a nested list
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=f"{pad}- ",
        subsequent_indent=f"{pad}  ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def _paragraph(text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, break_long_words=False, break_on_hyphens=False)


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    rule = ["---:" if i in right else "---" for i in range(len(header))]
    return [f"| {' | '.join(r)} |" for r in (header, rule, *rows)]


def _sizes(m: Move) -> str:
    """A move's sizes: bytes, or for a shape table its hidden row, fused op and tokens."""
    if not m.shape:
        return format_span(m.lo, m.hi)
    return f"{m.shape}, tokens {m.lo}" + ("+" if m.hi is None else f"..{m.hi}" if m.hi != m.lo else "")


def _route(names: Sequence[str], fallback: str = "") -> str:
    """``a > b``, less the ``fallback`` every route ends in (named once above the table)."""
    shown = names[:-1] if fallback and len(names) > 1 and names[-1] == fallback else names
    return " > ".join(code(n) for n in shown)


def _common_fallback(review: Review) -> str:
    """The last name of every route, when they all end in the same one (the engine's process group)."""
    ends = {route[-1] for m in review.moves for route in (m.before, m.after)}
    return ends.pop() if len(ends) == 1 else ""


def _modes(modes: Sequence[str]) -> str:
    return ", ".join(modes)


def _machine(multicast: bool | None) -> str:
    """How a row names the machine it compares, where a side plans machines with and without multicast apart."""
    return "" if multicast is None else " (multicast)" if multicast else " (no multicast)"


def _topology(hosts: int, nvlink: str) -> str:
    """How a row names ranks across hosts: `` on 4 hosts in one NVLink domain`` (one host: nothing)."""
    if hosts == 1:
        return ""
    return f" on {hosts} hosts " + ("in one NVLink domain" if nvlink == "rack" else "over a network")


def _moves(review: Review) -> list[str]:
    out = ["## What moves", ""]
    if not review.changed:
        out += ["No change: both sides run the same algorithm for every arch, world size, mode and size.", ""]
    if review.moves:
        fallback = _common_fallback(review)
        tail = f" Every route ends in {code(fallback)}, which runs wherever nothing before it can." if fallback else ""
        out += _paragraph(
            "Byte ranges whose algorithm changes, by what each side runs there. A route `a > b` runs `a` "
            "where it can (dtype, alignment, multicast), else `b`." + tail
        )
        both = all(m.modes == MODES for m in review.moves)  # no graph/eager split (vLLM): no Mode column
        if both:
            out += ["", f"Every range moves in both modes ({', '.join(MODES)})."]
        new = {c.arch for c in review.arches if c.change == "new"}
        first = sorted(review.moves, key=lambda m: not set(m.arch.split(", ")) & new)  # the new arches lead
        rows = [
            (
                ", ".join(a + (" (new)" if a in new else "") for a in m.arch.split(", ")),
                world_sizes(m.world_sizes) + _topology(m.hosts, m.nvlink) + _machine(m.multicast),
                *([] if both else [_modes(m.modes)]),
                _sizes(m),
                _route(m.before, fallback),
                _route(m.after, fallback),
            )
            for m in first
        ]
        header = ("Arch", "World sizes", *([] if both else ["Mode"]), "Sizes", "Before", "After")
        out += ["", *_table(header, rows), ""]
    for change in review.arches:
        verb = "New arch" if change.change == "new" else "Removed arch"
        other = "before" if change.change == "new" else "after"
        out += _bullet(f"{verb} {code(change.arch)}; {other} this change: {inline(change.other)}")
    if review.arches:
        out.append("")
    if review.params:
        out += ["Parameters that change (none: the side has no value, so the algorithm cannot run):", ""]
        rows = [
            (
                p.arch,
                world_sizes(p.world_sizes),
                _modes(p.modes),
                code(p.algorithm),
                code(p.param),
                p.before if p.before is not None else "none",
                p.after if p.after is not None else "none",
            )
            for p in review.params
        ]
        out += [*_table(("Arch", "World sizes", "Mode", "Algorithm", "Parameter", "Before", "After"), rows), ""]
    if review.coverage:
        out += _paragraph("World sizes (2-16, and any planned) at which every size runs NCCL:")
        rows = [(c.arch, world_sizes(c.before), world_sizes(c.after)) for c in review.coverage]
        out += ["", *_table(("Arch", "Before", "After"), _merge_rows(rows)), ""]
    return out


def _merge_rows(rows: Sequence[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Arches with the same cells share one row."""
    merged: dict[tuple[str, str], list[str]] = {}
    for arch, *cells in rows:
        merged.setdefault((cells[0], cells[1]), []).append(arch)
    return [(", ".join(archs), a, b) for (a, b), archs in merged.items()]


def _question(q: Question) -> list[str]:
    scope = ("every arch" if q.arch == "*" else f"arch {q.arch}") + (f" {q.scope}" if q.scope else "")
    where = f" ({code(q.where)})" if q.where else ""
    tag = f" {q.code}" if q.code else ""  # every finding shows its code (artune.findings)
    return _bullet(f"**{q.severity}{tag}** {scope}: {inline(q.message)}{where}")


def _ranges(ask: EvidenceQuestion) -> str:
    """``graph (640KiB, 2.25MiB], (2.25MiB, 8MiB]; eager ...``: the ranges per mode."""
    by_mode: dict[str, list[str]] = {}
    for mode, lo, hi in ask.ranges:
        by_mode.setdefault(mode, []).append(format_span(lo, hi))
    return "; ".join(f"{mode} {', '.join(spans)}" for mode, spans in by_mode.items())


def _shell(text: str, width: int = WIDTH - 6) -> list[str]:
    """A shell line wrapped at ``width`` with backslash continuations (arguments never split)."""
    words: list[str] = []
    for token in text.split(" "):  # an option stays on the line of its first value
        if words and words[-1].startswith("-") and " " not in words[-1] and not token.startswith("-"):
            words[-1] += " " + token
        else:
            words.append(token)
    lines, line = [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line + " \\")
            line = "    " + word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line]


_TOOL = {  # how each benchmark's command is introduced: what it times, and how the review reads it
    "vllm": "vLLM's benchmark ({modes} mode; `--evidence` reads its JSON):",
    "sglang": "SGLang's benchmark ({modes} mode; it times SGLang's own dispatch as installed against NCCL; "
    "`--evidence` reads what it prints):",
    "trtllm": "TensorRT-LLM's microbenchmark ({modes} mode; `--evidence` reads its CSV):",
    "artune": "artune's tuner ({modes} mode; it times every algorithm the rows name; "
    "`--measured` reads its logs, `measurements-ws*.jsonl` in the folder):",
}


def _asks(asks: Sequence[EvidenceQuestion]) -> list[str]:
    """The moved ranges no evidence covers, one table row per arch and world size, then the commands that
    measure them, one block per benchmark with a comment line per arch and world size."""
    rows = [(f"**{a.code}**", a.arch, str(a.world_size), inline(_ranges(a))) for a in asks]
    out = [*_table(("Code", "Arch", "WS", "Moved ranges, by mode"), rows, right=(2,)), ""]
    lacking = [a for a in asks if a.why]
    for ask in lacking:
        out += _bullet(
            f"**{ask.code}** arch {ask.arch}, ws {ask.world_size}: the evidence does not reach every bound: "
            f"{inline(ask.why)}."
        )
    out += [""] if lacking else []
    by_tool: dict[tuple[str, tuple[str, ...]], list[tuple[EvidenceQuestion, BenchCommand]]] = {}
    for ask in asks:
        for command in ask.commands:
            by_tool.setdefault((command.engine, command.modes), []).append((ask, command))
    for (engine, modes), found in by_tool.items():
        out += _paragraph(_TOOL[engine].format(modes=", ".join(modes)))
        out += ["", "```sh"]
        for ask, command in found:
            out += [f"# arch {ask.arch}, world size {ask.world_size}", *_shell(command.text)]
        out += ["```", ""]
        for ask, command in found:
            if command.missing:
                lacks = ", ".join(command.missing)
                out += _bullet(
                    f"arch {ask.arch}, ws {ask.world_size}: its sizes cannot answer all of it ({lacks}); add "
                    "those sizes to its size list"
                )
        out += [""] if any(c.missing for _, c in found) else []
    return out


def _questions(review: Review) -> list[str]:
    out = ["## Questions for the author", ""]
    if review.questions:
        out += [f"{len(review.questions)} finding(s) of `artune check` that are new in AFTER:", ""]
        for q in review.questions:
            out += _question(q)
    else:
        out.append("None: `artune check` finds nothing in AFTER that BEFORE does not have.")
    out.append("")
    if review.asks:
        count = sum(len(a.ranges) for a in review.asks)
        out += ["### Measurements asked for", ""]
        out += _paragraph(
            f"{count} moved range(s) that no evidence covers, per arch and world size. Run the command on "
            "the target GPU from the engine's checkout (after `mkdir -p artune-evidence`), commit its output "
            "beside the change and pass it to the review (`--evidence FILE`, `--measured LOG` for artune's "
            "logs, or both at once with `--evidence-dir artune-evidence`): the question becomes a measured line."
        )
        out.append("")
        out += _asks(review.asks)
    if review.concerns:
        out += ["### Losses, predicted and measured", ""]
        for q in review.concerns:
            out += _question(q)
        out.append("")
    if review.inherited:
        out += ["### Not introduced here", "", f"{len(review.inherited)} finding(s) already in BEFORE:", ""]
        for q in review.inherited:
            out += _question(q)
        out.append("")
    if review.resolved:
        out += ["### Resolved here", "", f"{len(review.resolved)} finding(s) of BEFORE gone from AFTER:", ""]
        for q in review.resolved:
            out += _question(q)
        out.append("")
    return out


def _provenance(title: str, side_spec: str, label: str, rows: Sequence[tuple[str, str]]) -> list[str]:
    out = _bullet(f"**{title}** {code(side_spec)}" + (f" ({inline(label)})" if label != side_spec else "") + ":")
    # arches whose provenance differs only by naming the arch share one line, the arch written {arch}
    grouped: dict[str, list[str]] = {}
    for arch, text in rows:
        template = re.sub(rf"(?<![\w.]){re.escape(arch)}(?![\w])", "`{arch}`", text) if arch != "default" else text
        grouped.setdefault(template, []).append(arch)
    for template, archs in grouped.items():
        shown = inline(template) if len(archs) > 1 else inline(template.replace("`{arch}`", archs[0]))
        out += _bullet(f"{', '.join(code(a) for a in archs)}: {shown}", level=1)
    return out


def _ratio(value: float) -> str:
    return f"{value:.2f}"


def _basis(r: RegretEvidence) -> str:
    """``modelled: rubin`` (the preset), ``measured: measurements-ws8.jsonl`` (the log's name)."""
    source = r.source.removeprefix("preset ") if r.basis == "modelled" else r.source.rsplit("/", 1)[-1]
    return f"{r.basis}: {inline(source)}"


def _regret_rows(rows: Sequence[RegretEvidence]) -> list[tuple[str, ...]]:
    return [
        (
            r.arch,
            str(r.world_size),
            r.mode,
            f"{format_span(r.lo, r.hi)}, {r.sizes}",
            _basis(r),
            _ratio(r.before),
            f"{_ratio(r.after)} ({_ratio(r.after_high)})",
            inline(r.best),
        )
        for r in rows
    ]


def _evidence(review: Review) -> list[str]:
    out = ["## Evidence", ""]
    out += _provenance("Before", review.before.spec, review.before.label, review.before.provenance)
    out += _provenance("After", review.after.spec, review.after.label, review.after.provenance)
    out.append("")
    if len(review.after.provenance) > 1:  # copies between arches: were the rows measured, or copied?
        if review.copies:
            out += _paragraph(
                "Arches whose plans (bands, block counts) repeat another arch's in AFTER: "
                + "; ".join(code(c) for c in review.copies)
                + "."
            )
        else:
            out += _paragraph("No arch's plans in AFTER repeat another arch's.")
        out.append("")
    if review.regret:
        out += _paragraph(
            "Regret over the moved sizes: time of each side's choice / time of the fastest, geometric mean over "
            "the sizes weighed (their number follows the range); 1.00 is the best. After's high end in "
            "brackets: the 90th percentile, calibrated on archs held out from the model's fit (modelled), or the "
            "worst size (measured). "
            "Modelled figures are artune's cost model, not a measurement: it predicts each algorithm by its "
            "family (one-shot, two-shot, "
            "multicast, NCCL), so push and pull variants of a family weigh the same."
        )
        header = ("Arch", "WS", "Mode", "Sizes, how many", "Basis", "Before", "After", "Fastest")
        out += ["", *_table(header, _regret_rows(review.regret), right=(1, 5, 6)), ""]
        validated = dict.fromkeys(r.validation for r in review.regret if r.basis == "modelled" and r.validation)
        for line in validated:
            out += _bullet(f"The model, validated {inline(line)}.")
        for r in review.regret:
            if r.undecided:
                out += _bullet(inline(r.undecided) + ".")
        if validated:
            out.append("")
    if review.evidence is not None:
        out += _scored(review.evidence)
    for why in review.unmodelled:
        out += _bullet(f"Not weighed: {inline(why)}.")
    if review.notes:
        out += ["", f"{len(review.notes)} note(s) new in AFTER:", ""]
        for q in review.notes:
            out += _question(q)
    if review.unmodelled or review.notes:
        out.append("")
    return out


def _geo(score: SideScore | BestScore) -> str:
    if score.geomean is None:
        return "none scored"
    return f"{score.geomean:.3f} ({score.worst:.2f})" if score.worst is not None else f"{score.geomean:.3f}"


def _scored(report: EvidenceReport) -> list[str]:
    """``--evidence``: both sides and the best row on each sweep, as the engine runs them."""
    out = _paragraph(
        "On the evidence, as the engine runs each row (down to the kernel): geometric-mean regret against the "
        "fastest column over the sweep's sizes, the worst size in brackets; moved: over the moved sizes only. "
        "The best row is the best the engine's own knobs allow on the sweep; its regret is the distance to the "
        "fastest-column bound, which no row under these rules can close."
    )
    header = ("Evidence", "Arch", "WS", "Mode", "Noise", "Before", "After", "Moved: before", "Moved: after", "Best row")
    rows = [
        (
            code(Path(s.source).name),
            s.arch,
            str(s.world_size),
            s.mode,
            f"{s.noise:.1%}",
            _geo(s.sides.before),
            _geo(s.sides.after),
            _geo(s.moved.before) if s.moved.before.scored else "-",
            _geo(s.moved.after) if s.moved.after.scored else "-",
            _geo(s.best),
        )
        for s in report.sweeps
    ]
    out += ["", *_table(header, rows, right=(2,)), ""]
    for s in report.sweeps:
        if s.best.row:
            out += _bullet(f"The best row on {code(Path(s.source).name)} ({_geo(s.best)}), ready to paste:")
            out += ["", "  ```python", *(f"  {line}" for line in s.best.row.splitlines() if line), "  ```", ""]
        elif s.best.why:
            out += _bullet(f"No best row on {code(Path(s.source).name)}: {inline(s.best.why)}.")
    return [*out, ""]


def render_markdown(review: Review) -> str:
    """The review as one Markdown page (ends with a newline)."""
    title = f"# artune review: {code(review.before.spec)} to {code(review.after.spec)}"
    lines = [title, "", f"Made by {code(review.command)}.", "", *_moves(review), *_questions(review)]
    lines += _evidence(review)
    lines += ["## Verdict", "", *_paragraph(f"**{inline(review.summary)}**"), ""]  # one sentence, one paragraph
    return "\n".join(lines)


def render_json(review: Review) -> str:
    """The review as JSON: every field of the content ``render_markdown`` prints."""
    return json.dumps(review.to_dict(), indent=1, sort_keys=False) + "\n"
