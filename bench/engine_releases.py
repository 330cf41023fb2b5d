"""Every released vLLM and SGLang wheel, read by artune and checked against the engine's own code.

For each release that ``src/artune/oracles/<engine>.py`` lists, oldest first:
download the wheel once (``artune.formats.releases``: ``pip download
--no-deps``, only the dispatch files kept, cached under
``~/.cache/artune/releases``), read it with artune's reader, run the
engine's own dispatch on its own configs (the oracle) and artune's decision
on the same probes, and count the lines ``artune check`` prints. The probes
stand on one host (world sizes 2-16) and in racks (``oracles.RACK_TOPOLOGIES``:
2, 4 and 18 hosts in one NVLink domain and 2 hosts joined over a network, at
world sizes 8, 16, 32 and 72, and 2); each row counts them per topology. One
row per release:

    python bench/engine_releases.py                 # both engines, every release
    python bench/engine_releases.py --engine sglang --releases 0.5.20,0.5.23 --markdown

Exit status 1 when any release does not read or any probe disagrees.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections import Counter
from dataclasses import dataclass

from artune.errors import ArtuneError, ReleaseUnavailable
from artune.formats.releases import fetch_release
from artune.sources import open_source, source_findings

ENGINES = ("sglang", "vllm")
TOPOLOGIES = ("1 host", "2 hosts rack", "4 hosts rack", "18 hosts rack", "2 hosts network")


@dataclass(frozen=True)
class Row:
    """One release's result."""

    engine: str
    version: str
    reads: str  # "yes", or why not
    probes: int = 0
    equal: int = 0
    findings: int = 0
    first_difference: str = ""
    seconds: float = 0.0
    #: per topology ("1 host", "4 hosts rack", "2 hosts network"): (probes, equal)
    topologies: tuple[tuple[str, int, int], ...] = ()

    @property
    def ok(self) -> bool:
        return self.reads == "yes" and self.probes > 0 and self.equal == self.probes


def run_release(engine: str, version: str) -> Row:
    """Read, probe and check one release."""
    oracle = importlib.import_module(f"artune.oracles.{engine}")
    start = time.perf_counter()
    try:
        root = fetch_release(engine, version)
    except ReleaseUnavailable as err:
        return Row(engine, version, f"no wheel: {err}")
    try:
        findings = source_findings(open_source(f"{engine}:{root}"))
    except ArtuneError as err:
        return Row(engine, version, f"no: {err}", seconds=time.perf_counter() - start)
    probes = oracle.probes(root)
    theirs = oracle.engine_decisions(root, probes)
    ours = oracle.artune_decisions(root, probes)
    differ = [(p, t, o) for p, t, o in zip(probes, theirs, ours, strict=True) if t != o]
    first = ""
    if differ:
        probe, t, o = differ[0]
        first = f"{probe}: engine {t}, artune {o}"
    counts = Counter(p.topology for p in probes)
    wrong = Counter(p.topology for p, _t, _o in differ)
    return Row(
        engine,
        version,
        "yes",
        len(probes),
        len(probes) - len(differ),
        len(findings),
        first,
        time.perf_counter() - start,
        tuple((name, counts[name], counts[name] - wrong[name]) for name in TOPOLOGIES if counts[name]),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=(*ENGINES, "all"), default="all")
    parser.add_argument("--releases", help="comma-separated versions (default: every release the oracle lists)")
    parser.add_argument("--markdown", action="store_true", help="print the matrix as a Markdown table")
    args = parser.parse_args(argv)
    rows: list[Row] = []
    for engine in ENGINES if args.engine == "all" else (args.engine,):
        oracle = importlib.import_module(f"artune.oracles.{engine}")
        versions = args.releases.split(",") if args.releases else list(oracle.RELEASES)
        for version in versions:
            row = run_release(engine, version)
            rows.append(row)
            if not args.markdown:
                per = " ".join(f"[{name}: {n}/{eq}]" for name, n, eq in row.topologies)
                print(
                    f"{engine:7} {version:12} reads={row.reads[:60]:6} probes={row.probes:6} equal={row.equal:6} "
                    f"findings={row.findings:3} {row.seconds:5.1f}s {per} {row.first_difference}",
                    flush=True,
                )
    if args.markdown:
        columns = " | ".join(f"{name} (probes / equal)" for name in TOPOLOGIES)
        print(f"| engine | release | reads | probes | equal to the engine's code | {columns} | `artune check` lines |")
        print("|---|---|---|---:|---:|" + "---:|" * len(TOPOLOGIES) + "---:|")
        for row in rows:
            reads = row.reads if row.reads == "yes" else row.reads.split(":", 1)[0]
            per = {name: f"{n} / {eq}" for name, n, eq in row.topologies}
            cells = " | ".join(per.get(name, "") for name in TOPOLOGIES)
            print(f"| {row.engine} | {row.version} | {reads} | {row.probes} | {row.equal} | {cells} | {row.findings} |")
    totals = Counter(row.ok for row in rows)
    print(f"# {totals[True]} of {len(rows)} releases read and agree on every probe", file=sys.stderr)
    return 0 if totals[True] == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
