"""A ``Review`` as one Markdown comment for a pull request, and as JSON for bots (the same content).

The page is read in one screen: the verdict first, then the questions that
decide it, most decisive first, each with its file and line and the command
that answers it (``Review.ranked``). Everything else sits in collapsed
``<details>`` sections: more questions, what moves, the commands that
measure it, the losses, the other findings, the evidence and the regret.
``SCREEN`` bounds the lines outside them: questions that do not fit are
folded, with their count. Tables hold only short cells (arches, world
sizes, sizes, algorithm names); anything longer is a bullet wrapped at
``WIDTH`` columns, so that the source reads in a terminal and the page needs
no sideways scrolling. Identifiers are code spans, so that ``__name__`` or
``SGLANG_..._KB`` never turn into emphasis.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path

from artune.review.causes import few
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
    world_sizes,
)
from artune.sizes import format_span
from artune.table.types import MODES

WIDTH = 100
#: the most lines a page shows outside its ``<details>`` sections: one screen
SCREEN = 40
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
    for left, right in ("()", "[]"):  # a call's own parens, a subscript's brackets: qr_max_size(), m[ws]
        while core.count(left) > core.count(right) and after.startswith(right):
            core, after = core + right, after[1:]
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


def _topologies(topologies: Sequence[tuple[int, str]]) -> str:
    """``1 host; 2, 4 hosts in one NVLink domain; 2 hosts over a network``: where a move holds."""
    by_kind: dict[str, list[int]] = {}
    for hosts, nvlink in topologies:
        by_kind.setdefault("one" if hosts == 1 else nvlink, []).append(hosts)
    parts = ["1 host" if "one" in by_kind else ""]
    parts += [f"{world_sizes(by_kind['rack'])} hosts in one NVLink domain" if "rack" in by_kind else ""]
    parts += [f"{world_sizes(by_kind['host'])} hosts over a network" if "host" in by_kind else ""]
    return "; ".join(p for p in parts if p)


def _moves(review: Review) -> list[str]:
    """What moves: the ranges, the arches that arrive or leave, the parameters, the world sizes NCCL runs."""
    out: list[str] = []
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
        hosts = any(m.topologies != ((1, "host"),) for m in review.moves)  # a Hosts column where any leaves one
        new = {c.arch for c in review.arches if c.change == "new"}
        first = sorted(review.moves, key=lambda m: not set(m.arch.split(", ")) & new)  # the new arches lead
        causes = list(dict.fromkeys(m.cause for m in first))
        row = lambda m: (  # noqa: E731
            ", ".join(a + (" (new)" if a in new else "") for a in m.arch.split(", ")),
            world_sizes(m.world_sizes) + _machine(m.multicast) + (f" with {code(m.switch)}" if m.switch else ""),
            *([_topologies(m.topologies)] if hosts else []),
            *([] if both else [_modes(m.modes)]),
            _sizes(m),
            _route(m.before, fallback),
            _route(m.after, fallback),
        )
        header = ("Arch", "World sizes", *(["Hosts"] if hosts else []), *([] if both else ["Mode"]), "Sizes")
        for why in causes:  # one table per cause, under what moved its rows
            if why or len(causes) > 1:
                said = f"Moved by {inline(few(why, 6))}:" if why else "Moved by what artune cannot name:"
                out += ["", *_paragraph(said)]
            rows = [row(m) for m in first if m.cause == why]
            out += ["", *_table((*header, "Before", "After"), rows), ""]
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


def _moves_title(review: Review) -> str:
    """``What moves: 20 ranges on arch 10.7 (new), 5 parameters``."""
    if not review.changed:
        return "What moves: nothing"
    new = {c.arch for c in review.arches if c.change == "new"}
    archs = dict.fromkeys(a for m in review.moves for a in m.arch.split(", "))
    on = ", ".join(a + (" (new)" if a in new else "") for a in archs)
    parts = [f"{len(review.moves)} range(s) on arch {on}" if review.moves else ""]
    parts += [f"{len(review.arches)} arch(es) arrive or leave" if review.arches and not review.moves else ""]
    parts += [f"{len(review.params)} parameter(s)" if review.params else ""]
    return "What moves: " + ", ".join(p for p in parts if p)


def _merge_rows(rows: Sequence[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Arches with the same cells share one row."""
    merged: dict[tuple[str, str], list[str]] = {}
    for arch, *cells in rows:
        merged.setdefault((cells[0], cells[1]), []).append(arch)
    return [(", ".join(archs), a, b) for (a, b), archs in merged.items()]


def _asking(q: Question) -> str:
    """``**warning E101** arch 10.7 ws 2-8 (graph): MESSAGE``: every question shows its code (artune.findings)."""
    scope = ("every arch" if q.arch == "*" else f"arch {q.arch}") + (f" {q.scope}" if q.scope else "")
    tag = f" {q.code}" if q.code else ""
    return f"**{q.severity}{tag}** {scope}: {inline(q.message)}"


def _question(q: Question) -> list[str]:
    return _bullet(_asking(q) + (f" ({code(q.where)})" if q.where else ""))


def _numbered(n: int, q: Question) -> list[str]:
    """A ranked question as item ``n`` of a list: what it asks, then where it is and the command that answers it."""
    lead = f"{n}. "
    out = textwrap.wrap(
        _asking(q),
        WIDTH,
        initial_indent=lead,
        subsequent_indent=" " * len(lead),
        break_long_words=False,
        break_on_hyphens=False,
    )
    if q.where:
        out += _bullet(f"at {code(q.where)}", level=1)
    if q.answer:
        out += _bullet(f"answer: {code(q.answer)}", level=1)
    return out


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
    rows = [(f"**{a.code}**", a.arch, a.where.removeprefix("ws "), inline(_ranges(a))) for a in asks]
    out = [*_table(("Code", "Arch", "WS", "Moved ranges, by mode"), rows, right=(2,)), ""]
    lacking = [a for a in asks if a.why]
    for ask in lacking:
        out += _bullet(
            f"**{ask.code}** arch {ask.arch}, {ask.where}: the evidence does not reach every bound: {inline(ask.why)}."
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
            each = "; on each host, with MASTER_ADDR the first host's address" if "$MASTER_ADDR" in command.text else ""
            out += [f"# arch {ask.arch}, {ask.where.replace('ws ', 'world size ', 1)}{each}", *_shell(command.text)]
        out += ["```", ""]
        for ask, command in found:
            if command.missing:
                lacks = ", ".join(command.missing)
                out += _bullet(
                    f"arch {ask.arch}, {ask.where}: its sizes cannot answer all of it ({lacks}); add "
                    "those sizes to its size list"
                )
        out += [""] if any(c.missing for _, c in found) else []
    return out


def _measurements(review: Review) -> list[str]:
    """The moved ranges no evidence covers, and the commands that measure them."""
    count = sum(len(a.ranges) for a in review.asks)
    out = _paragraph(
        f"{count} moved range(s) that no evidence covers, per arch and world size. Run the command on "
        "the target GPU from the engine's checkout (after `mkdir -p artune-evidence`), commit its output "
        "beside the change and pass it to the review (`--evidence FILE`, `--measured LOG` for artune's "
        "logs, or both at once with `--evidence-dir artune-evidence`): the question becomes a measured line."
    )
    return [*out, "", *_asks(review.asks)]


def _listed(intro: str, questions: Sequence[Question]) -> list[str]:
    out = [intro, ""] if intro else []
    for q in questions:
        out += _question(q)
    return [*out, ""]


def _findings(review: Review) -> list[str]:
    """AFTER's findings of ``artune check`` that decide nothing here: already in BEFORE, resolved, notes."""
    out: list[str] = []
    if review.inherited:
        out += _listed(f"{len(review.inherited)} finding(s) already in BEFORE, not introduced here:", review.inherited)
    if review.unmoved:
        out += _listed(
            f"{len(review.unmoved)} finding(s) new in AFTER at world sizes whose decisions do not move here:",
            review.unmoved,
        )
    if review.resolved:
        out += _listed(f"{len(review.resolved)} finding(s) of BEFORE gone from AFTER:", review.resolved)
    if review.notes:
        out += _listed(f"{len(review.notes)} note(s) new in AFTER:", review.notes)
    return out


def _findings_title(review: Review) -> str:
    parts = [
        f"{len(review.inherited)} already in BEFORE" if review.inherited else "",
        f"{len(review.unmoved)} new where nothing moves" if review.unmoved else "",
        f"{len(review.resolved)} resolved here" if review.resolved else "",
        f"{len(review.notes)} note(s) new in AFTER" if review.notes else "",
    ]
    return "Other findings: " + ", ".join(p for p in parts if p)


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
    """Each side's provenance per arch, the arches whose plans repeat another's, and what nothing weighs."""
    out = _provenance("Before", review.before.spec, review.before.label, review.before.provenance)
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
    for why in review.unmodelled:
        out += _bullet(f"Not weighed: {inline(why)}.")
    return [*out, *([""] if review.unmodelled else [])]


def _regret(review: Review) -> list[str]:
    """The regret of both sides' rows over the moved sizes, measured and modelled."""
    out = _paragraph(
        "Time of each side's choice / time of the fastest, geometric mean over the sizes weighed (their number "
        "follows the range); 1.00 is the best. After's high end in brackets: the 90th percentile, calibrated on "
        "archs held out from the model's fit (modelled), or the worst size (measured). Modelled figures are "
        "artune's cost model, not a measurement: it predicts each algorithm by its family (one-shot, two-shot, "
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
    return [*out, ""]


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


def _details(summary: str, body: Sequence[str]) -> list[str]:
    """A collapsed section: GitHub renders the Markdown inside after a blank line, MkDocs with ``markdown``."""
    while body and not body[-1]:
        body = body[:-1]
    return ['<details markdown="1">', f"<summary>{summary}</summary>", "", *body, "", "</details>", ""]


def outside_details(page: str) -> list[str]:
    """The lines of ``page`` outside its ``<details>`` sections: what a reader sees before opening any."""
    out, depth = [], 0
    for line in page.splitlines():
        if line.startswith("<details"):
            depth += 1
        elif line.startswith("</details>"):
            depth -= 1
        elif depth == 0:
            out.append(line)
    return out


def _folded(review: Review) -> list[str]:
    """Everything but the verdict and the first questions, each kind in its own collapsed section."""
    out = _details(_moves_title(review), _moves(review))
    if review.asks:
        commands = sum(len(a.commands) for a in review.asks)
        out += _details(f"Measurements asked for: {commands} command(s)", _measurements(review))
    if review.concerns:
        out += _details(f"Losses, predicted and measured: {len(review.concerns)}", _listed("", review.concerns))
    if review.inherited or review.unmoved or review.resolved or review.notes:
        out += _details(_findings_title(review), _findings(review))
    out += _details("Evidence: where each side's figures come from", _evidence(review))
    if review.regret:
        bases = " and ".join(dict.fromkeys(r.basis for r in review.regret))
        out += _details(f"Regret over the moved sizes: {bases}", _regret(review))
    if review.evidence is not None:
        out += _details(f"Benchmark evidence: {len(review.evidence.sweeps)} sweep(s)", _scored(review.evidence))
    return out


def render_markdown(review: Review) -> str:
    """The review as one Markdown page (ends with a newline): the verdict, the questions that decide it
    (those past ``SCREEN`` lines folded), then the rest in collapsed sections."""
    verb, _, rest = review.summary.partition(": ")
    head = [f"# artune review: {code(review.before.spec)} to {code(review.after.spec)}", ""]
    head += [*_paragraph(f"**Verdict: {verb}.** {inline(rest)}"), ""]  # one sentence, one paragraph
    tail = [*_folded(review), f"Made by {code(review.command)}."]
    if not review.ranked:
        return "\n".join([*head, "Nothing to ask: no question decides this change.", "", *tail, ""])
    head += ["## What decides it", ""]
    items = [_numbered(i, q) for i, q in enumerate(review.ranked, 1)]
    room = SCREEN - len(head) - len(outside_details("\n".join(tail))) - 1  # the blank line after the list

    def fits(k: int) -> bool:  # the first k questions shown, and the blank line after the fold, if any
        return sum(len(item) for item in items[:k]) + (k < len(items)) <= room

    kept = max((k for k in range(1, len(items) + 1) if fits(k)), default=1)  # the first one always shows
    shown = [line for item in items[:kept] for line in item]
    folded = [line for item in items[kept:] for line in item]
    fold = _details(f"{len(items) - kept} more question(s), ranked", folded) if folded else []
    return "\n".join([*head, *shown, "", *fold, *tail, ""])


def render_json(review: Review) -> str:
    """The review as JSON: every field of the content ``render_markdown`` prints."""
    return json.dumps(review.to_dict(), indent=1, sort_keys=False) + "\n"
