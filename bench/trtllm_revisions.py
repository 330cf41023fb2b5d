"""Every TensorRT-LLM header revision the fixtures keep, read by artune and checked against its compiled self.

For each revision in ``tests/fixtures/trtllm-revisions/revisions.tar.xz``
(or ``--fixtures FOLDER`` of revisions laid out like checkouts): ``artune
check`` and ``artune explain`` on it (their exit codes: 0 or 1 is a reading),
the caveats of its reading, and, where it has ``selectStrategyLookUpTable``,
the oracle (``artune.oracles.trtllm``: the header compiled unchanged with
g++) against artune's decision on every probe, counted also for the probes
whose bytes are within ``getMaxRequiredWorkspaceSize`` (where the table, not
the cap, decides). One row per revision:

    python bench/trtllm_revisions.py             # every revision in the fixtures
    python bench/trtllm_revisions.py --record    # and, when every probe agrees, keep their fingerprints

``--record`` writes the fingerprints of each compared revision's functions
into ``src/artune/formats/trtllm/verified.json`` (``artune.formats.fingerprints``)
only when every probe of every revision agreed. Exit status 1 when a
revision does not read or a probe disagrees.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from artune.cli import main as artune
from artune.formats import fingerprints
from artune.oracles import trtllm as oracle

ARCHIVE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "trtllm-revisions" / "revisions.tar.xz"


@dataclass(frozen=True)
class Row:
    """One revision's result."""

    revision: str
    check: int  # artune check's exit status
    explain: int
    caveats: int  # the reading's caveats that a statement was not evaluated
    probes: int = 0
    agree: int = 0
    within: int = 0  # probes within the workspace
    within_agree: int = 0
    first_difference: str = ""
    seconds: float = 0.0

    @property
    def reads(self) -> bool:
        return self.check in (0, 1) and self.explain in (0, 1)

    @property
    def ok(self) -> bool:
        return self.reads and self.agree == self.probes


def quiet(args: list[str]) -> int:
    """``artune ARGS`` with its output swallowed: the exit status."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return artune(args)


def run(root: Path) -> Row:
    start = time.perf_counter()
    check = quiet(["check", f"trtllm:{root}"])
    explain = quiet(
        [
            "explain",
            "--table",
            f"trtllm:{root}",
            "--arch",
            "9.0",
            "--world-size",
            "8",
            "--tokens",
            "64",
            "--hidden",
            "4096",
        ]
    )
    read = oracle.reading(root)
    tables = [*read.tables.values(), *([read.default] if read.default else [])]
    caveats = len({c for t in tables for c in t.caveats if c.kind.value == "unevaluated"})
    if read.header.select is None:
        return Row(root.name, check, explain, caveats, seconds=time.perf_counter() - start)
    probes = oracle.probes(root)
    engine = oracle.engine_decisions(root, probes)
    mine = oracle.artune_decisions(root, probes)
    within = oracle.within_workspace(root, probes)
    first = next((f"{p}: engine {e}, artune {m}" for p, e, m in zip(probes, engine, mine, strict=True) if e != m), "")
    return Row(
        root.name,
        check,
        explain,
        caveats,
        len(probes),
        sum(e == m for e, m in zip(engine, mine, strict=True)),
        sum(within),
        sum(e == m and w for e, m, w in zip(engine, mine, within, strict=True)),
        first,
        time.perf_counter() - start,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fixtures", type=Path, help="a folder of revisions laid out like checkouts")
    parser.add_argument("--record", action="store_true", help="keep the fingerprints when every probe agrees")
    parser.add_argument("--json", action="store_true", help="one JSON object per revision")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.fixtures
        if folder is None:
            with tarfile.open(ARCHIVE) as archive:
                archive.extractall(tmp)
            folder = Path(tmp)
        roots = sorted(p for p in folder.iterdir() if p.is_dir())
        rows = [run(root) for root in roots]
        for row in rows:
            if args.json:
                print(json.dumps({**asdict(row), "ok": row.ok}, sort_keys=True))
            else:
                compared = f"{row.agree}/{row.probes} agree, {row.within_agree}/{row.within} within the workspace"
                what = compared if row.probes else "no selectStrategyLookUpTable: nothing to compile"
                print(
                    f"{row.revision:8} check {row.check} explain {row.explain} caveats {row.caveats:2} {what} "
                    f"({row.seconds:.1f} s)"
                )
                if row.first_difference:
                    print(f"    first difference: {row.first_difference}")
        compared = [r for r in rows if r.probes]
        total, agree = sum(r.probes for r in compared), sum(r.agree for r in compared)
        within, within_agree = sum(r.within for r in compared), sum(r.within_agree for r in compared)
        print(
            f"# {sum(r.reads for r in rows)}/{len(rows)} revisions read (check and explain exit 0 or 1); "
            f"{len(compared)} compiled: {agree}/{total} probes agree, {within_agree}/{within} within the workspace"
        )
        ok = all(r.ok for r in rows)
        if args.record:
            if not ok:
                print("# not recorded: a revision does not read or a probe differs", file=sys.stderr)
            else:
                for root, row in zip(roots, rows, strict=True):
                    if row.probes:
                        path = fingerprints.record("trtllm", row.revision, oracle.evaluated(root))
                print(f"# fingerprints of {len(compared)} revisions kept in {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
