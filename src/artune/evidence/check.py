"""``artune check TABLE --evidence FILE``: findings for a row that loses to the best row by more than noise.

Codes (``Finding.code``):

- ``X100`` (note): the row's as-run score on the sweep, the best row the
  engine's knobs allow and the fastest-column bound, one line.
- ``X101`` (warning): the row's geometric-mean regret is worse than the best
  row's (on the sizes the row was scored) by more than the sweep's own noise (``BenchmarkSweep.noise``); the
  message names the best row's knobs. Fix: take the best row
  (``best_row(...).text``) or measure again if the sweep is doubtful.
- ``X102`` (note): sizes left unscored because the sweep did not measure the
  kernel the row runs there; they are named. Fix: a sweep with that column.
- ``X103`` (warning): the sweep measured none of the kernels the row runs at
  its sizes, so it says nothing about the row. Fix: a sweep of the engine's
  own kernels.
- ``X104`` (note): no knob search for this engine's rows (only vLLM's are
  searched); the as-run score stands alone.
"""

from __future__ import annotations

from artune.errors import EvidenceError
from artune.evidence.best import ENGINES, best_row
from artune.evidence.score import score_table
from artune.evidence.sweep import BenchmarkSweep
from artune.sizes import format_size
from artune.table.check import Finding
from artune.table.types import Table


def evidence_findings(table: Table, evidence: BenchmarkSweep, arch: str) -> list[Finding]:
    """What ``evidence`` says of ``table``'s row at its world size and mode on ``arch``."""
    ws, mode = evidence.world_size, evidence.mode

    def finding(code: str, message: str, severity: str) -> Finding:
        return Finding(table.name, arch, message, ws, mode, severity=severity, code=code)

    score = score_table(table, evidence, arch)
    out: list[Finding] = []
    if score.geomean is None:
        kernels = sorted({s.kernel for s in score.sizes})
        return [
            finding(
                "X103",
                f"{evidence.source} measured none of the kernels the row runs ({', '.join(kernels)}); its columns: "
                f"{', '.join(c.name for c in evidence.columns)}",
                "warning",
            )
        ]
    if score.unscored:
        sizes = ", ".join(f"{format_size(s.size)} ({s.kernel})" for s in score.unscored)
        out.append(finding("X102", f"not scored, the sweep did not measure the kernel: {sizes}", "note"))
    engine = table.rules if table.rules in ENGINES else ""
    if not engine:
        out.append(finding("X104", f"as run: {score.summary()}; no knob search for {table.rules} rows", "note"))
        return out
    try:
        best = best_row(engine, evidence, arch)
    except EvidenceError as err:
        out.append(finding("X104", f"as run: {score.summary()}; {err}", "note"))
        return out
    loss = best.gain_over(score)
    assert best.score.geomean is not None and loss is not None  # the best row scores every size
    knobs = ", ".join(f"{k} {v}" for k, v in best.knobs)
    summary = (
        f"as run: geomean regret {score.geomean:.3f} over {len(score.scored)} sizes; best {engine} row "
        f"{best.score.geomean:.3f}; fastest-column bound 1.000 ({evidence.source})"
    )
    if score.unscored:
        summary += f"; compared on the {len(score.scored)} sizes the row's kernels were measured"
    out.append(finding("X100", summary, "note"))
    if loss > evidence.noise:
        out.append(
            finding(
                "X101",
                f"loses to the best row {engine}'s knobs allow by {loss:.1%} in geomean regret on "
                f"{evidence.source} (the sweep's noise: {evidence.noise:.1%}); best row: {knobs}",
                "warning",
            )
        )
    return out
