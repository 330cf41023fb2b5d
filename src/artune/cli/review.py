"""``artune review BEFORE AFTER``: the review a dispatch-table pull request needs, as one Markdown comment.

Exit codes: 0 nothing to question (or no change), 1 questions for the
author, 2 a side that cannot be read (one line naming the side, no
traceback).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from artune.errors import ArtuneError
from artune.sources import SOURCES

_EPILOG = """examples:
  artune review vllm==0.25.0 vllm==0.33.0
  artune review vllm:. --base origin/main        # a pull request: the work tree against its base
  artune review sglang:. --base HEAD --out review.md --format json
"""


def register(commands: Any) -> None:
    """Add ``review`` to the parser."""
    review = commands.add_parser(
        "review",
        help="review a table change: what moves, questions for the author, evidence, verdict; exit 1 on questions",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    review.add_argument("sides", nargs="+", metavar="SIDE", help=f"BEFORE AFTER, each {SOURCES} or ENGINE==VERSION")
    review.add_argument(
        "--base",
        metavar="REV",
        help="one SIDE only (ENGINE:PATH, a git work tree): BEFORE is PATH at git revision REV, AFTER the work tree",
    )
    review.add_argument("--format", choices=("markdown", "json"), default="markdown")
    review.add_argument("--out", metavar="FILE", help="also write the review to FILE")
    review.add_argument(
        "--measured",
        action="append",
        default=[],
        metavar="LOG",
        help="artune measurement logs (measurements-ws<N>.jsonl) of the arch: measured regret of the moved rows",
    )
    review.set_defaults(run=run_review)


def run_review(args: argparse.Namespace) -> int:
    """Print (and with --out write) the review; 0 clean, 1 questions, 2 unreadable."""
    from artune.review import build_review, open_side, render_json, render_markdown

    if args.base is not None:
        if len(args.sides) != 1:
            raise ArtuneError(
                "review --base REV takes one SIDE (ENGINE:PATH): BEFORE is it at REV, AFTER the work tree"
            )
        before = open_side("BEFORE", args.sides[0], args.base)
        after = open_side("AFTER", args.sides[0])
    else:
        if len(args.sides) != 2:
            raise ArtuneError("review takes BEFORE and AFTER (or one ENGINE:PATH with --base REV)")
        before, after = open_side("BEFORE", args.sides[0]), open_side("AFTER", args.sides[1])
    command = " ".join(["artune review", *args.sides, *(["--base", args.base] if args.base else [])])
    command += "".join(f" --measured {log}" for log in args.measured)
    review = build_review(before, after, args.measured, command)
    text = render_json(review) if args.format == "json" else render_markdown(review)
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as err:
            raise ArtuneError(f"--out {args.out}: cannot write: {err.strerror or err}") from None
    sys.stdout.write(text)
    return review.exit_code
