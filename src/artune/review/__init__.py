"""``artune review``: one comment for a dispatch-table change, from two table sources.

- ``types``: the review's content as frozen data (what moves, questions,
  evidence, verdict), and its JSON form;
- ``build``: the content, from two sides opened as any table source (or
  one side at a git revision);
- ``regret``: the regret of the moved rows, measured or modelled;
- ``evidence``: ``--evidence``, the engines' benchmark outputs, both sides
  and the best row scored on them;
- ``asks`` and ``benchmarks``: the moves no evidence covers, and the engines'
  own benchmark commands that would measure them;
- ``measured``: what artune's logs cover, and the losses they show;
- ``verdict``: approve, questions or request changes;
- ``questions``: what decides the verdict, ranked, each with the command
  that answers it;
- ``markdown``: the page (the verdict first, the rest folded), and the JSON
  for bots; ``annotations``: the questions as GitHub workflow annotations
  and SARIF, at their file and line.
"""

from artune.review.build import Opened, build_review, open_side
from artune.review.markdown import render_json, render_markdown
from artune.review.types import CLEAN, QUESTIONS, UNREADABLE, Review, Verdict

__all__ = [
    "CLEAN",
    "QUESTIONS",
    "UNREADABLE",
    "Opened",
    "Review",
    "Verdict",
    "build_review",
    "open_side",
    "render_json",
    "render_markdown",
]
