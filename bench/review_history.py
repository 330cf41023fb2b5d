"""``artune review`` on every consecutive pair of vLLM and SGLang releases, as a maintainer would run it.

For each engine, each release the oracle lists (``artune.oracles.<engine>.RELEASES``: vLLM 0.10.0 to
0.34.0 with its patch releases, SGLang 0.5.10 to 0.5.23) is reviewed against the one before it, with no
evidence. One row per pair: whether the decisions moved (ranges, arches, parameters), the verdict and
exit code, the questions ranked, the check findings new in the newer release, the moved ranges asked
about and those left unasked, and the seconds the review took (both readings included; a reading made
earlier in the same run, or kept on disk by an earlier one, is reused, as in a CI job with its cache).

Two properties must hold on every pair (exit 1 and the pair named otherwise):

- no approval while a move is unasked: with no evidence, every moved range is a question;
- no questions on a pair whose decisions are identical, unless a finding appears that the older release
  did not have.

    python bench/review_history.py                       # both engines, every pair; prints the table
    python bench/review_history.py --engine sglang --write docs/results/review-history.md
    python bench/review_history.py --engine vllm --releases 0.31.0,0.32.0
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from artune.errors import ArtuneError
from artune.review import Verdict, build_review, open_side
from artune.review.asks import unasked

ENGINES = ("vllm", "sglang")


@dataclass(frozen=True)
class Row:
    """One pair's review."""

    engine: str
    before: str
    after: str
    error: str = ""
    changed: bool = False
    moves: int = 0
    verdict: str = ""
    exit_code: int = 0
    questions: int = 0
    new_findings: int = 0
    asked: int = 0  # moved ranges the review asks about
    unasked: int = 0
    seconds: float = 0.0

    @property
    def problems(self) -> list[str]:
        """What the review got wrong on this pair."""
        out = [f"the review failed: {self.error}"] if self.error else []
        if self.verdict == Verdict.APPROVE.value and self.unasked:
            out.append(f"approved with {self.unasked} moved range(s) unasked")
        if not self.changed and self.exit_code != 0 and not self.new_findings:
            out.append("questions on a pair whose decisions are identical, with no new finding")
        return out


def review_pair(engine: str, before: str, after: str) -> Row:
    """The review of ``engine==before`` -> ``engine==after``, summarised."""
    start = time.perf_counter()
    try:
        review = build_review(open_side("BEFORE", f"{engine}=={before}"), open_side("AFTER", f"{engine}=={after}"))
    except ArtuneError as err:
        return Row(engine, before, after, error=str(err), seconds=time.perf_counter() - start)
    seconds = time.perf_counter() - start
    return Row(
        engine,
        before,
        after,
        changed=review.changed,
        moves=len(review.moves),
        verdict=review.verdict.value,
        exit_code=review.exit_code,
        questions=len(review.ranked),
        new_findings=len(review.questions),
        asked=sum(len(a.ranges) for a in review.asks),
        unasked=len(unasked(review.moves, review.asks, engine)),
        seconds=seconds,
    )


def machine() -> str:
    """This machine in a few words: its cores, its CPU model and its memory."""
    import os

    from artune.machine import _cpu_model, _memory_gib

    return f"a {os.cpu_count()}-core VM ({_cpu_model()}, {_memory_gib()} GiB)"


def page(rows: list[Row], command: str) -> str:
    """The results page: one table per engine, each pair a row, then the two properties' outcome."""
    out = [
        "# `artune review` over the engines' release history",
        "",
        f"Command: `{command}`. Each release is reviewed against the one before it, no evidence given. "
        "*Moves* counts the rows of the review's moves table (a row groups world sizes, modes and topologies); "
        "*asked* and *unasked* count moved ranges per arch, world size, topology and mode; *new findings* are "
        "`artune check` findings of the newer release that the older one did not have (matched by code, place "
        "and data); seconds are each review's wall time on a shared 2-core VM, both readings included, with the "
        "readings artune keeps on disk (`ARTUNE_READINGS_DIR`) warm from an earlier run and those made earlier "
        "in the same run reused, as in a CI job with its cache.",
        "",
        f"Machine: {machine()}, shared with other work; run {time.strftime('%Y-%m-%d', time.gmtime())}.",
        "",
    ]
    for engine in dict.fromkeys(r.engine for r in rows):
        mine = [r for r in rows if r.engine == engine]
        out += [
            f"## {engine}",
            "",
            "| Pair | Decisions | Verdict | Exit | Questions | New findings | Asked | Unasked | s |",
        ]
        out += ["| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in mine:
            decisions = (
                "error" if r.error else (f"{r.moves} move(s)" if r.moves else "changed" if r.changed else "identical")
            )
            out.append(
                f"| {r.before} -> {r.after} | {decisions} | {r.verdict or r.error[:60]} | {r.exit_code} | "
                f"{r.questions} | {r.new_findings} | {r.asked} | {r.unasked} | {r.seconds:.1f} |"
            )
        seconds = [r.seconds for r in mine if not r.error]
        changed = sum(r.changed for r in mine)
        approved = sum(r.verdict == Verdict.APPROVE.value for r in mine)
        out += [
            "",
            f"{len(mine)} pairs: {changed} change decisions, {approved} approved; median review "
            f"{statistics.median(seconds) if seconds else 0:.1f} s, slowest {max(seconds, default=0):.1f} s.",
            "",
        ]
    bad = [(r, p) for r in rows for p in r.problems]
    out += ["## Properties", ""]
    out += [f"- {r.engine} {r.before} -> {r.after}: {p}" for r, p in bad] or [
        "- No pair is approved with a moved range unasked, and no pair whose decisions are identical has "
        "questions without a new finding."
    ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=(*ENGINES, "all"), default="all")
    parser.add_argument("--releases", help="comma-separated versions, reviewed in the order given (default: all)")
    parser.add_argument("--write", metavar="PAGE", help="write the results page (Markdown) to PAGE")
    args = parser.parse_args(argv)
    rows: list[Row] = []
    for engine in ENGINES if args.engine == "all" else (args.engine,):
        oracle = importlib.import_module(f"artune.oracles.{engine}")
        versions = args.releases.split(",") if args.releases else list(oracle.RELEASES)
        for before, after in pairwise(versions):
            row = review_pair(engine, before, after)
            rows.append(row)
            print(
                f"{engine:6} {before:>12} -> {after:12} {'moved' if row.changed else 'same ':5} "
                f"{row.verdict or 'ERROR':15} exit {row.exit_code} questions {row.questions:3} "
                f"new {row.new_findings:3} "
                f"asked {row.asked:4} unasked {row.unasked:4} {row.seconds:5.1f}s {'; '.join(row.problems)}",
                flush=True,
            )
    command = "python bench/review_history.py" + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    text = page(rows, command)
    if args.write:
        Path(args.write).write_text(text)
    else:
        sys.stdout.write("\n" + text)
    return 1 if any(r.problems for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
