"""``artune review BEFORE AFTER``: the review a dispatch-table pull request needs, as one Markdown comment
(on a terminal, that page rendered to its width, without HTML).

Exit codes: 0 approve, 1 questions or request changes, 2 a side or an
evidence file that cannot be read (one line naming it, no traceback), 3 a
release that could not be downloaded (retry, or fill the cache elsewhere).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from artune.cli import arch_option
from artune.errors import ArtuneError
from artune.sources import SOURCES

_EPILOG = """examples:
  artune review vllm==0.25.0 vllm==0.33.0
  artune review vllm:. --base origin/main        # a pull request: the work tree against its base
  artune review sglang:. --base HEAD --out review.json --output-format json
  artune review vllm:. --base origin/main --output-format github   # annotations on the diff
  artune review vllm==0.25.0 vllm==0.33.0 --evidence sweep.json --arch 10.3
  artune review vllm:. --base origin/main --evidence-dir artune-evidence   # CI
"""


def register(commands: Any) -> None:
    """Add ``review`` to the parser."""
    review = commands.add_parser(
        "review",
        help="review a table change: what moves, the evidence it needs, the verdict; exit 0 approve, 1 otherwise",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    review.add_argument("sides", nargs="+", metavar="SIDE", help=f"BEFORE AFTER, each {SOURCES} or ENGINE==VERSION")
    review.add_argument(
        "--base",
        metavar="REV",
        help="one SIDE only (ENGINE:PATH, a git work tree): BEFORE is PATH at git revision REV, AFTER the work tree",
    )
    review.add_argument(
        "--output-format",
        "--format",
        dest="output_format",
        choices=("text", "markdown", "json", "github", "sarif"),
        default=None,
        help="text (the page rendered to the terminal's width, no HTML; the default on a terminal), markdown "
        "(the comment's Markdown, what CI posts; the default otherwise), json (every field), github (a workflow "
        "annotation per question at its file and line), sarif (SARIF 2.1.0)",
    )
    review.add_argument("--out", metavar="FILE", help="also write the review, in the same format, to FILE")
    review.add_argument(
        "--measured",
        action="append",
        default=[],
        metavar="LOG",
        help="artune measurement logs (measurements-ws<N>.jsonl) of the arch: measured regret of the moved rows",
    )
    review.add_argument(
        "--evidence",
        action="append",
        default=[],
        metavar="FILE[@ARCH]",
        help="an engine benchmark's output (vLLM's JSON or table, SGLang's, nccl-tests, TensorRT-LLM's CSV): "
        "measured regret of both sides and the best row; ARCH, or --arch, or a name ARCH-wsN-... gives its arch",
    )
    review.add_argument(
        "--evidence-dir",
        metavar="DIR",
        help="every file in DIR as --evidence, and artune logs (measurements-ws*.jsonl) under it as --measured "
        "(CI: the folder a pull request commits its sweeps to; absent: none)",
    )
    review.add_argument("--arch", type=arch_option, help="the arch of --evidence files that do not name one")
    review.set_defaults(run=run_review)


def evidence_dir(path: str | None) -> tuple[list[str], list[str]]:
    """``(benchmark outputs, artune logs)`` in ``path``: its files, and ``measurements-ws*.jsonl`` at any
    depth (``artune tune --out`` folders) as logs; nothing when it is not given or does not exist."""
    if path is None or not Path(path).exists():
        return [], []
    if not Path(path).is_dir():
        raise ArtuneError(f"--evidence-dir {path}: not a folder; give the folder the sweeps are committed to")
    logs = sorted(str(p) for p in Path(path).rglob("measurements-ws*.jsonl"))
    files = [p for p in sorted(Path(path).iterdir()) if p.is_file() and not p.name.startswith(".")]
    return [str(p) for p in files if str(p) not in logs], logs


def run_review(args: argparse.Namespace) -> int:
    """Print (and with --out write) the review; 0 clean, 1 questions, 2 unreadable."""
    from artune.review import build_review, open_side

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
    found, logs = evidence_dir(args.evidence_dir)
    files = [*args.evidence, *found]
    command += "".join(f" --evidence {f}" for f in args.evidence)
    command += f" --evidence-dir {args.evidence_dir}" if args.evidence_dir else ""
    command += f" --arch {args.arch}" if args.arch else ""
    review = build_review(before, after, [*args.measured, *logs], command, files, args.arch or "")
    terminal = sys.stdout.isatty()
    output_format = args.output_format or ("text" if terminal else "markdown")
    after_spec = args.sides[-1]  # the side the review is about
    if args.out:
        try:
            Path(args.out).write_text(_rendered(review, output_format, after_spec), encoding="utf-8")
        except OSError as err:
            raise ArtuneError(f"--out {args.out}: cannot write: {err.strerror or err}") from None
    sys.stdout.write(_rendered(review, output_format, after_spec, colour=terminal))
    return review.exit_code


def _rendered(review: Any, output_format: str, after: str, colour: bool = False) -> str:
    """The review in ``output_format``: the page (for a terminal, or as Markdown), its JSON, or its ranked
    questions as annotations or SARIF (a question with no file of its own placed at ``after``'s table file, the
    side the review is about)."""
    import json
    import shutil

    from artune.review import render_json, render_markdown
    from artune.review.annotations import github, sarif, table_file

    if output_format == "json":
        return render_json(review)
    if output_format == "github":
        return github(review.ranked)
    if output_format == "sarif":
        return json.dumps(sarif(review.ranked, about=table_file(after)), indent=1) + "\n"
    if output_format == "text":
        from artune.review.terminal import render_text

        return render_text(review, min(shutil.get_terminal_size().columns, 120), colour)
    return render_markdown(review)
