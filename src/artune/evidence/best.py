"""The best row an engine's own rules allow on a sweep: a search of the engine's knobs, scored as it runs them.

vLLM's knobs at one ``(arch, world size)``: the custom all-reduce cap
(``CUSTOM_ALL_REDUCE_MAX_SIZES``, below which ``custom_ar`` runs; at most its
8 MiB buffer), the symmetric-memory cap (``SYMM_MEM_ALL_REDUCE_MAX_SIZES``;
no row turns torch symmetric memory off, and then custom all-reduce keeps its
8 MiB default), whether the world size is in ``_WORLD_SIZES_MULTIMEM``
(multimem, else two-shot) and, where the sweep measured the FlashInfer
backend vLLM would run, FlashInfer's cap (``FI_ALLREDUCE_FUSION_MAX_SIZE_MB``).
The kernel switch inside custom all-reduce is vLLM's, not a knob. Every cap
is tried between each two adjacent sizes of the sweep (the roundest size
strictly between them, so ``<`` and ``<=`` agree), each candidate is built with vLLM's rules
(``artune.formats.vllm.rules``) and scored by ``score_table``; a candidate
that would run a kernel the sweep did not measure is not a candidate. The
winner is written as vLLM's rows (``artune.formats.vllm.write``), the
arch's other world sizes taken from ``base`` (default: the newest release's
rows), and read back as vLLM reads them; its score is that reading's.

Its geometric-mean regret is also the distance to the fastest-column bound
(1.0: every size at the fastest column the sweep measured): what no row
under these rules can reach, with the sizes where it falls short named.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from artune.errors import EvidenceError
from artune.evidence.score import EvidenceScore, SizeScore, score_table
from artune.evidence.sweep import BenchmarkSweep
from artune.formats.vllm import rules as vllm_rules
from artune.formats.vllm import write as vllm_write
from artune.sizes import format_size
from artune.table.types import Platform, Provenance, Table

MiB = 1 << 20
ENGINES = ("vllm",)


@dataclass(frozen=True)
class BestRow:
    """The best row the engine's rules allow on one sweep, ready to paste, with its score."""

    engine: str
    arch: str
    world_size: int
    knobs: tuple[tuple[str, str], ...]  # (knob, value) as the search set them
    table: Table  # the row as the engine reads it back
    text: str  # the rows to paste, in the engine's format
    score: EvidenceScore
    searched: int  # how many candidate rows were scored

    @property
    def bound_gap(self) -> float | None:
        """The best row's geometric-mean regret against the fastest column: what no row can close."""
        return self.score.geomean

    def gain_over(self, as_run: EvidenceScore) -> float | None:
        """How much worse ``as_run``'s geomean regret is than this row's, on the sizes ``as_run`` scored
        (0.193: 19.3% worse); ``None`` when it scored none."""
        mine = self.score.geomean_at({s.size for s in as_run.scored})
        return None if mine is None or as_run.geomean is None else as_run.geomean / mine - 1

    @property
    def unreachable(self) -> tuple[SizeScore, ...]:
        """The sizes where even the best row runs slower than the fastest column."""
        return tuple(s for s in self.score.scored if (s.regret or 1.0) > 1.0)

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "engine": self.engine,
            "arch": self.arch,
            "world_size": self.world_size,
            "knobs": dict(self.knobs),
            "row": self.text,
            "geomean": self.score.geomean,
            "worst": None if self.score.worst is None else self.score.worst.regret,
            "bound_gap": self.bound_gap,
            "unreachable": [{"size": s.size, "fastest": s.fastest, "regret": s.regret} for s in self.unreachable],
            "searched": self.searched,
        }


def _between(low: int, high: int) -> int:
    """The roundest size strictly between ``low`` and ``high`` (the multiple of the largest power of two):
    6 MiB between 4 and 8 MiB, 48 MiB between 47.84 and 64 MiB; ``<`` and ``<=`` bounds then agree."""
    for bit in range(high.bit_length(), -1, -1):
        step = 1 << bit
        first = (low // step + 1) * step
        if first < high:
            return first
    raise ValueError(f"no size between {low} and {high}")


def _cuts(sizes: list[int]) -> list[int]:
    """A cap between each two adjacent sizes of the sweep, and one above the last."""
    return [*(_between(a, b) for a, b in itertools.pairwise(sizes)), sizes[-1] * 2]


def _vllm_table(arch: str, ws: int, fi: int | None, ca: int, sm: int | None, mm: bool) -> Table:
    d = vllm_rules.Dispatch(
        release=f"best row for {arch} ws={ws}",
        custom_ar={arch: {ws: ca}},
        symm_mem={arch: {ws: sm}} if sm is not None else {},
        multimem={arch: [ws] if mm else []},
        fi_sizes_mb={arch: {ws: fi / MiB}} if fi is not None else {},
        flashinfer_on=fi is not None,
    )
    provenance = Provenance("published", tool="artune.evidence.best_row")
    return Table(Platform("cuda", arch), provenance, vllm_rules.arch_plans(d, arch), rules="vllm", origin=d.release)


def _vllm(evidence: BenchmarkSweep, arch: str, base: Table | None) -> BestRow:
    ws = evidence.world_size
    sizes = [n for n in evidence.sizes if evidence.fastest(n) is not None]
    cuts = _cuts(sizes)
    cap = 8192 * 1024  # CustomAllreduce's buffer: a larger row is capped there
    ca_values = (
        sorted({0, cap, *(c for c in cuts if c < cap)}) if ws in vllm_rules.Dispatch("").custom_ar_sizes() else [0]
    )
    fi_kernel = vllm_rules.kernel("flashinfer_ar", ws, 0, evidence.multicast) or ""  # the backend vLLM resolves
    fi_values = [None, *cuts] if evidence.column(fi_kernel) is not None else [None]
    mm_values = [False, True] if evidence.multicast else [False]
    best: tuple[float, int, tuple] | None = None
    searched = 0
    for fi, ca, sm, mm in itertools.product(fi_values, ca_values, [None, *cuts], mm_values):
        if sm is None and mm:
            continue  # without a symmetric-memory row, multimem changes nothing
        score = score_table(_vllm_table(arch, ws, fi, ca, sm, mm), evidence, arch)
        searched += 1
        if score.unscored or score.geomean is None:
            continue
        simple = (fi is not None) + (sm is not None) + mm  # on a tie, the row with fewer paths
        key = (round(score.geomean, 12), simple, (fi, ca, sm, mm))
        if best is None or key[:2] < best[:2]:
            best = key
    if best is None:
        raise EvidenceError(
            f"{evidence.source}: no vLLM row at {arch} ws={ws} runs only kernels this sweep measured "
            f"({', '.join(c.name for c in evidence.columns)}): vLLM's rows always fall back to pynccl"
        )
    fi, ca, sm, mm = best[2]
    return _vllm_written(evidence, arch, base, (fi, ca, sm, mm), searched)


def _vllm_written(evidence: BenchmarkSweep, arch: str, base: Table | None, knobs: tuple, searched: int) -> BestRow:
    """The winner in vLLM's rows, with ``base``'s rows for the arch's other world sizes, read back as vLLM does."""
    from artune.formats.references import reference_set

    fi, ca, sm, mm = knobs
    ws = evidence.world_size
    if base is None:
        base = reference_set("vllm").resolve(arch)
    custom, symm, multimem, flashinfer = vllm_write.project(base)
    if ws in vllm_rules.Dispatch("").custom_ar_sizes():
        custom[ws] = ca
    symm.pop(ws, None)
    flashinfer.pop(ws, None)
    multimem = [w for w in multimem if w != ws] + ([ws] if mm else [])
    if sm is not None:
        symm[ws] = sm
    if fi is not None:
        flashinfer[ws] = fi
    table = vllm_write.reread(arch, dict(sorted(custom.items())), dict(sorted(symm.items())), multimem, flashinfer)
    command = f"artune evidence best-row: {evidence.source} ({arch} ws={ws})"
    text = vllm_write.export_vllm([table], command).text
    named = (
        ("FI_ALLREDUCE_FUSION_MAX_SIZE_MB", "off" if fi is None else format_size(fi)),
        ("CUSTOM_ALL_REDUCE_MAX_SIZES", format_size(ca) if ws in custom else f"none at ws={ws}"),
        ("SYMM_MEM_ALL_REDUCE_MAX_SIZES", "no row" if sm is None else format_size(sm)),
        ("_WORLD_SIZES_MULTIMEM", "yes" if mm else "no"),
    )
    table = table.with_changes(origin=f"best vLLM row on {evidence.source}")
    score = score_table(table, evidence, arch)
    return BestRow("vllm", arch, ws, named, table, text, score, searched)


def best_row(engine: str, evidence: BenchmarkSweep, arch: str, base: Table | None = None) -> BestRow:
    """The best row ``engine``'s own knobs allow for ``(arch, evidence.world_size)`` on ``evidence``.

    ``base`` supplies the arch's rows at the other world sizes (default: the
    engine's newest release). See the module docstring for the search.
    """
    if engine != "vllm":
        raise EvidenceError(
            f"best_row: {engine!r}: the knob search covers {', '.join(ENGINES)}; SGLang's kernels (1shot_push, "
            "2shot_pull, ...) are not columns of any benchmark artune reads, so no SGLang row can be scored whole"
        )
    return _vllm(evidence, arch, base)
