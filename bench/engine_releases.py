"""Every released vLLM and SGLang wheel, verified: ``artune verify-engine ENGINE==VERSION`` for each.

For each release that ``src/artune/oracles/<engine>.py`` lists, oldest first,
this runs what ``artune verify-engine`` runs (``artune.oracles.verify``):
the wheel is downloaded once (``artune.formats.releases``: ``pip download
--no-deps``, only the dispatch files kept, cached under
``~/.cache/artune/releases``), the engine's own dispatch code decides every
probe in a stand-in world, artune's reading decides the same probes, and the
answers are compared per topology (``artune.oracles.TOPOLOGIES``: one host at
world sizes 2-16, and every split across hosts that ``check`` describes, in
one NVLink domain and over a network), and under each value other than the
default of each switch the release's dispatch tests (a sample of sizes:
``switch_probes`` of ``artune.oracles.vllm`` and ``artune.oracles.sglang``; a
value the oracle cannot run is named, not probed). It also counts the lines ``artune
check`` prints and the seconds artune's reading took (``read s``: a fresh
reading, nothing kept from an earlier run). One row per release:

    python bench/engine_releases.py                 # both engines, every release
    python bench/engine_releases.py --engine vllm --releases 0.33.0,0.34.0 --markdown
    python bench/engine_releases.py --engine vllm --record   # keep each agreeing release's fingerprints

Exit status 1 when any release does not read or any probe disagrees.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from artune.errors import ArtuneError, ReleaseUnavailable
from artune.formats.releases import fetch_release
from artune.oracles.verify import verify
from artune.sources import open_source, source_findings

ENGINES = ("sglang", "vllm")


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
    seconds: float = 0.0  # the whole verification
    read_seconds: float = 0.0  # artune's reading alone, fresh
    #: per topology ("1 host", "4 hosts rack", "2 hosts network"): (probes, equal)
    topologies: tuple[tuple[str, int, int], ...] = ()
    recorded: bool = False
    unprobed: tuple[str, ...] = ()  # switch values the oracle cannot run, each with why

    @property
    def ok(self) -> bool:
        return self.reads == "yes" and self.probes > 0 and self.equal == self.probes


@contextlib.contextmanager
def _empty_readings() -> Iterator[None]:
    """No reading kept from an earlier run, for as long as the release is verified: the reading made here is
    kept in a folder removed at the end (the evaluated release outlives its first use and keeps what it reads
    later into the folder it was made with, which must exist until then)."""
    saved = os.environ.get("ARTUNE_READINGS_DIR")
    with tempfile.TemporaryDirectory(prefix="artune-readings-") as empty:
        os.environ["ARTUNE_READINGS_DIR"] = empty
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("ARTUNE_READINGS_DIR", None)
            else:
                os.environ["ARTUNE_READINGS_DIR"] = saved


def _fresh_reading(engine: str, version: str) -> tuple[float, int]:
    """Seconds a fresh reading of the release takes, and the lines ``artune check`` prints for it."""
    start = time.perf_counter()
    found = source_findings(open_source(f"{engine}=={version}"))
    return time.perf_counter() - start, len(found)


def run_release(engine: str, version: str, record: bool = False) -> Row:
    """Verify one release."""
    start = time.perf_counter()
    try:
        fetch_release(engine, version)
    except ReleaseUnavailable as err:
        return Row(engine, version, f"no wheel: {err}")
    try:
        with _empty_readings():
            read_seconds, findings = _fresh_reading(engine, version)
            result = verify(f"{engine}=={version}", record=record, keep=1)
    except ArtuneError as err:
        return Row(engine, version, f"no: {err}", seconds=time.perf_counter() - start)
    first = ""
    if result.differences:
        probe, theirs, ours = result.differences[0]
        first = f"{probe}: engine {theirs}, artune {ours}"
    return Row(
        engine,
        version,
        "yes",
        result.probes,
        result.probes - result.differ,
        findings,
        first,
        time.perf_counter() - start,
        read_seconds,
        result.topologies,
        bool(result.recorded),
        result.unprobed,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=(*ENGINES, "all"), default="all")
    parser.add_argument("--releases", help="comma-separated versions (default: every release the oracle lists)")
    parser.add_argument("--markdown", action="store_true", help="print the matrix as a Markdown table")
    parser.add_argument("--record", action="store_true", help="keep each agreeing release's fingerprints")
    args = parser.parse_args(argv)
    rows: list[Row] = []
    for engine in ENGINES if args.engine == "all" else (args.engine,):
        oracle = importlib.import_module(f"artune.oracles.{engine}")
        versions = args.releases.split(",") if args.releases else list(oracle.RELEASES)
        for version in versions:
            row = run_release(engine, version, args.record)
            rows.append(row)
            per = " ".join(f"[{name}: {n}/{eq}]" for name, n, eq in row.topologies)
            print(
                f"{engine:7} {version:12} reads={row.reads[:60]:6} probes={row.probes:7} equal={row.equal:7} "
                f"findings={row.findings:3} read {row.read_seconds:5.1f}s all {row.seconds:5.1f}s "
                f"{'recorded ' if row.recorded else ''}{per} {row.first_difference}"
                + "".join(f" [not probed: {why}]" for why in row.unprobed),
                file=sys.stderr if args.markdown else sys.stdout,
                flush=True,
            )
    if args.markdown:
        _markdown(rows)
    totals = Counter(row.ok for row in rows)
    print(f"# {totals[True]} of {len(rows)} releases read and agree on every probe", file=sys.stderr)
    return 0 if totals[True] == len(rows) else 1


def _markdown(rows: list[Row]) -> None:
    names = list(dict.fromkeys(name for row in rows for name, _n, _eq in row.topologies))
    ones = [n for n in names if n == "1 host"]
    racks = [n for n in names if n.endswith("rack")]
    networks = [n for n in names if n.endswith("network")]
    amd = [n for n in names if " gfx" in n]  # ROCm probes: "1 host gfx942 QR=INT8 AITER=on"
    dtypes = [n for n in names if n.endswith(("float16", "float32"))]  # "1 host float32": bf16 is the others'
    switched = [n for n in names if "=" in n and " gfx" not in n]  # CUDA under a switch: "1 host VLLM_X=1"
    print(
        "| engine | release | reads | probes | equal to the engine's code | 1 host (probes / equal) | "
        "across hosts, one NVLink domain (probes / equal) | across hosts, a network (probes / equal) | "
        "1 host, fp16 and fp32 (probes / equal) | each value of each switch the dispatch tests (probes / equal) | "
        "ROCm, every QuickReduce level, AITER on and off (probes / equal) | `artune check` lines | reading (s) |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        reads = row.reads if row.reads == "yes" else row.reads.split(":", 1)[0]
        per = {name: (n, eq) for name, n, eq in row.topologies}

        def cell(group: list[str], per: dict[str, tuple[int, int]] = per) -> str:
            n = sum(per.get(name, (0, 0))[0] for name in group)
            eq = sum(per.get(name, (0, 0))[1] for name in group)
            return f"{n} / {eq}" if n else ""

        print(
            f"| {row.engine} | {row.version} | {reads} | {row.probes} | {row.equal} | {cell(ones)} | {cell(racks)} "
            f"| {cell(networks)} | {cell(dtypes)} | {cell(switched)} | {cell(amd)} | {row.findings} "
            f"| {row.read_seconds:.1f} |"
        )
    split = sorted({int(name.split()[0]) for name in racks + networks})
    print(f"\nAcross hosts the probes split each group over {', '.join(map(str, split))} hosts.")
    for row in rows:
        for why in row.unprobed:
            print(f"\n{row.engine} {row.version} leaves one switch value unprobed: {why}.")


if __name__ == "__main__":
    sys.exit(main())
