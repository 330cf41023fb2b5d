"""Score the engines' rows on every published sweep artune holds, as run, beside the best row their rules allow.

For each published sweep in a benchmark's own format (the vLLM ones in
``src/artune/costmodel/data/``, the nccl-tests and SGLang ones in
``tests/fixtures/evidence/``; README files there name every source) and each
engine release with a row for the sweep's arch: the row's as-run score
(``artune.evidence.score_table``: geometric-mean and worst regret against the
fastest column, sizes whose kernel the sweep did not measure named), the best
row the engine's knobs allow (``artune.evidence.best_row``, vLLM's) and that
row's distance to the fastest-column bound. The invented B300 ws-6 fixture is
scored last, in its own section, labelled as invented.

    python bench/evidence_scores.py                       # print the tables
    python bench/evidence_scores.py --write docs/results/evidence.md

Releases are downloaded once (``pip download --no-deps``, cached under
``~/.cache/artune/releases``); without the registry and the cache, a release
is left out and the page says so.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

from artune.errors import ArtuneError
from artune.evidence import BenchmarkSweep, best_row, read_evidence, score_table
from artune.sizes import format_size
from artune.sources import open_source

ROOT = Path(__file__).resolve().parents[1]
SWEEPS_DIR = ROOT / "src" / "artune" / "costmodel" / "data"
FIXTURES = ROOT / "tests" / "fixtures" / "evidence"
COMMAND = "python bench/evidence_scores.py --write docs/results/evidence.md"
ENGINES = ("vllm==0.25.0", "vllm==0.33.0", "sglang==0.5.23")


@dataclass(frozen=True)
class Published:
    """One sweep file and what the reference says of its machine."""

    path: Path
    label: str
    arch: str
    machine: str  # as the reference states it, inferred labels marked
    world_size: int | None = None  # for formats that do not print it


PUBLISHED = (
    Published(SWEEPS_DIR / "ds2a-sm90-ws8.json", "DS2a vLLM #42324", "9.0", "SM 9.0, ws 8 inferred"),
    Published(SWEEPS_DIR / "ds2b-sm100-ws2.json", "DS2b vLLM #42324", "10.0", "B200 (SM 10.0), first rows"),
    Published(SWEEPS_DIR / "ds2c-sm103-ws2.json", "DS2c vLLM #42324", "10.3", "SM 10.3 inferred"),
    Published(SWEEPS_DIR / "ds2c4-sm103-ws4.json", "DS2c ws4 vLLM #42324", "10.3", "SM 10.3 inferred, 2 rows"),
    Published(SWEEPS_DIR / "ds3a-h100-tp2.txt", "DS3a vLLM #24111", "9.0", "H100, first 4 rows"),
    Published(SWEEPS_DIR / "ds3c-tp6.txt", "DS3c vLLM #24111", "9.0", "GPU not visible; H100 tentatively"),
    Published(FIXTURES / "nccl-tests" / "ds12a-h100-nvls-2gpu.txt", "DS12a nccl #1259", "9.0", "H100 board, 2 GPUs"),
    Published(FIXTURES / "nccl-tests" / "ds12f-gb200-nvl72.txt", "DS12f nccl-tests #43", "10.0", "GB200 NVL72"),
    Published(FIXTURES / "sglang" / "pr37442-mscclpp-gb200.md", "SGLang #37442", "10.0", "GB200, 8 ranks", 8),
)
INVENTED = Published(FIXTURES / "vllm" / "invented-sm103-ws6.json", "invented B300 ws6", "10.3", "invented numbers")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def rows(item: Published, sweep: BenchmarkSweep, engines: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Markdown rows for one sweep (one per engine release) and notes (releases left out, unscored sizes)."""
    out, notes = [], []
    for spec in engines:
        try:
            table = open_source(f"{spec}@{item.arch}").tables[0]
        except ArtuneError as err:
            notes.append(f"{spec}: left out ({err})")
            continue
        score = score_table(table, sweep, item.arch)
        worst = score.worst
        as_run = (
            "no size scored"
            if worst is None
            else f"{_num(score.geomean)} (worst {worst.regret:.3f} at {format_size(worst.size)}), "
            f"{len(score.scored)}/{len(score.sizes)} sizes"
        )
        if score.unscored:
            kernels = sorted({s.kernel for s in score.unscored})
            notes.append(
                f"{spec}: unscored, the sweep has no column for {', '.join(kernels)}: "
                + ", ".join(format_size(s.size) for s in score.unscored)
            )
        best_text, bound = "-", "-"
        if table.rules == "vllm":
            try:
                best = best_row("vllm", sweep, item.arch, table)
                knobs = "; ".join(f"{k} {v}" for k, v in best.knobs)
                gain = best.gain_over(score)
                over = "" if not score.unscored else f" on the {len(score.scored)} sizes scored as run"
                verdict = "" if gain is None else f"; as run loses {gain:.1%}{over}"
                if gain is not None and gain < 0:  # the best row covers every size; the row as run only some
                    verdict = f"; as run is {-gain:.1%} better{over}, sizes this row cannot all take"
                best_text = f"{_num(best.score.geomean)} ({knobs}){verdict}"
                short = ", ".join(f"{format_size(s.size)} ({s.fastest})" for s in best.unreachable) or "none"
                bound = f"{_num(best.bound_gap)}; short of the fastest column at: {short}"
            except ArtuneError as err:
                best_text = f"none scorable ({err})".replace(str(item.path), "the sweep")
        else:
            best_text = "no knob search for SGLang rows (its kernels are not columns of any benchmark artune reads)"
        out.append(f"| {spec} | {as_run} | {best_text} | {bound} |")
    return out, notes


def section(item: Published, engines: tuple[str, ...]) -> list[str]:
    sweep = read_evidence(item.path, world_size=item.world_size, arch=item.arch)
    path = item.path.relative_to(ROOT)
    lines = [
        f"### {item.label}: arch {item.arch} ({item.machine}), ws={sweep.world_size}, {sweep.mode}",
        "",
        f"`{path}`: {sweep.describe()}. Timing: {sweep.timing}. Noise: {sweep.noise:.1%}.",
        "",
        "| row | as run: geomean regret (worst), sizes scored | best row under the engine's rules | "
        "fastest-column bound: best row's gap |",
        "|---|---|---|---|",
    ]
    found, notes = rows(item, sweep, engines)
    lines += found + [""] + [f"- {n}" for n in notes] + ([""] if notes else [])
    return lines


def page(engines: tuple[str, ...]) -> str:
    head = [
        "# Engine rows scored on the published sweeps, as the engines run them",
        "",
        f"Command: `{COMMAND}`, {datetime.date.today().isoformat()}.",
        "",
        f"Machine: {platform.machine()}, Python {platform.python_version()}; no GPU is needed: the times are the "
        "sweeps' own.",
        "",
        "Per sweep and engine release with a row for the sweep's arch: the row's **as-run** score (each size "
        "decided as the engine decides, taken down to the kernel that runs, its column's time over the fastest "
        "column's: the regret; geometric mean and worst), the **best row** vLLM's own knobs allow on the sweep "
        "(custom-AR cap, symm-mem cap, multimem world sizes, FlashInfer cap where the sweep measured FlashInfer), "
        "and that best row's distance to the **fastest-column bound** (1.000: every size at the fastest column): "
        "what no row under vLLM's rules can reach. A size whose kernel the sweep did not measure is unscored and "
        "named, never filled from another column; where the row as run leaves sizes unscored, its loss to the "
        "best row is taken on the sizes it was scored. The best row can only use kernels the sweep measured: "
        "on a sweep without `ca_*` columns it has custom all-reduce off (a cap of 0, with a symmetric-memory "
        "row, without which vLLM keeps custom all-reduce's 8 MiB default) because nothing else can be scored, "
        "not because custom all-reduce is slow there; likewise FlashInfer off where the sweep has no FlashInfer "
        "column. docs/evidence.md describes the method. TensorRT-LLM rows are not scored here: its tables "
        "decide by tokens x hidden x fused op, and scoring a shape table on a sweep is not built.",
        "",
        "## Published sweeps",
        "",
    ]
    body = [line for item in PUBLISHED for line in section(item, engines)]
    tail = [
        "## The invented B300 ws-6 case (not a measurement)",
        "",
        "Invented numbers shaped like the issue's B300 world-size-6 sweep (tests/fixtures/evidence/README.md): "
        "vLLM's custom all-reduce runs its 2-stage kernel from 256 KiB up to the row's 8 MiB cap, where "
        "multimem is faster. It is the tests' hand-scored case.",
        "",
        *section(INVENTED, engines),
    ]
    return "\n".join(head + body + tail).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="FILE", help="write the markdown page here instead of printing it")
    parser.add_argument("--engines", default=",".join(ENGINES), help="table sources, comma-separated")
    args = parser.parse_args(argv)
    text = page(tuple(args.engines.split(",")))
    if args.write:
        Path(args.write).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
