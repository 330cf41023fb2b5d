"""The hostile corpus under the default limits, and every release's reading beside those limits.

Each case of ``tests/hostile_cases.py`` runs ``artune check ENGINE:TREE`` in
its own process under ``/usr/bin/time -v``, with the default ``--timeout``
and ``--max-memory``: one row per case with its exit status, wall-clock and
CPU seconds, peak RSS (the largest of the command and its reading child),
whether its coded message was printed, whether a traceback was, and whether
the code ran (its marker). ``--releases`` also reads each cached release of
each engine (``artune check ENGINE==VERSION``, nothing kept from an earlier
reading) and prints the slowest and the largest reading beside the limits:

    python bench/hostile_corpus.py                  # the corpus
    python bench/hostile_corpus.py --releases       # and every cached release
    python bench/hostile_corpus.py --cases 'sglang-.*bomb|fifo'

Exit status 1 when a case runs past 60 s or 2 GB, prints a traceback, runs
code, or lacks its message.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from artune.errors import ReleaseUnavailable
from artune.formats import limits
from artune.formats.releases import fetch_release, releases_dir

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import hostile_cases as corpus

MAX_SECONDS, MAX_RSS_MB = 60.0, 2000.0


@dataclass(frozen=True)
class Run:
    """One ``artune check`` measured by ``/usr/bin/time -v``."""

    status: int
    wall_s: float
    cpu_s: float
    rss_mb: float
    text: str


def measure(argv: list[str], env: dict[str, str]) -> Run:
    """Run ``python -m artune ARGV`` under ``/usr/bin/time -v``."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        done = subprocess.run(
            ["/usr/bin/time", "-v", "-o", report.name, sys.executable, "-m", "artune", *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )
        fields = dict(
            line.strip().rsplit(": ", 1) for line in report.read().splitlines() if ": " in line and line[0] == "\t"
        )
    wall = fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":")
    seconds = sum(float(part) * 60**i for i, part in enumerate(reversed(wall)))
    cpu = float(fields["User time (seconds)"]) + float(fields["System time (seconds)"])
    rss = int(fields["Maximum resident set size (kbytes)"]) / 1024
    return Run(done.returncode, seconds, cpu, rss, done.stdout + done.stderr)


def run_corpus(pattern: str) -> bool:
    sources = {engine: fetch_release(engine, version) for engine, version in corpus.VERSIONS.items()}
    sources["trtllm"] = corpus.TRTLLM_FIXTURE
    ok = True
    print(
        f"# the corpus under the default limits: --timeout {limits.DEFAULT_TIMEOUT_S:g} (CPU s), "
        f"--max-memory {limits.DEFAULT_MAX_MEMORY_MIB} (MiB)"
    )
    print(f"{'case':34} {'exit':>4} {'wall s':>7} {'cpu s':>6} {'peak MB':>8}  message traceback ran")
    worst_wall, worst_rss = 0.0, 0.0
    for case in corpus.CASES:
        if pattern and not re.search(pattern, case.name):
            continue
        with tempfile.TemporaryDirectory(prefix="artune-hostile-") as folder:
            work = Path(folder)
            marker = work / "ran"
            tree = corpus.make_tree(corpus.marked(case, work, marker), sources[case.engine], work)
            env = {**os.environ, "ARTUNE_READINGS_DIR": str(work / "readings")}
            run = measure(["check", f"{case.engine}:{tree}"], env)
            said = re.search(case.expect, run.text) is not None
            traceback = "Traceback" in run.text
            ran = marker.exists()
        bad = run.wall_s > MAX_SECONDS or run.rss_mb > MAX_RSS_MB or traceback or ran or not said
        ok &= not bad
        worst_wall, worst_rss = max(worst_wall, run.wall_s), max(worst_rss, run.rss_mb)
        print(
            f"{case.name:34} {run.status:4} {run.wall_s:7.1f} {run.cpu_s:6.1f} {run.rss_mb:8.0f}  "
            f"{'yes' if said else 'NO':7} {'YES' if traceback else 'no':9} {'YES' if ran else 'no'}"
            f"{'   <-- fails' if bad else ''}",
            flush=True,
        )
    print(f"# slowest case {worst_wall:.1f} s wall, largest {worst_rss:.0f} MB peak RSS (bounds: 60 s, 2000 MB)")
    return ok


def run_releases() -> None:
    from artune.oracles import sglang, vllm

    print("# every cached release's reading (artune check ENGINE==VERSION, a fresh reading)")
    print(f"{'release':24} {'exit':>4} {'wall s':>7} {'cpu s':>6} {'peak MB':>8}")
    rows = []
    for engine, oracle in (("vllm", vllm), ("sglang", sglang)):
        for version in oracle.RELEASES:
            if not (releases_dir() / f"{engine}-{version}").is_dir():
                continue
            try:
                fetch_release(engine, version)
            except ReleaseUnavailable:
                continue
            with tempfile.TemporaryDirectory(prefix="artune-readings-") as folder:
                run = measure(["check", f"{engine}=={version}"], {**os.environ, "ARTUNE_READINGS_DIR": folder})
            rows.append((f"{engine}=={version}", run))
            print(f"{engine + '==' + version:24} {run.status:4} {run.wall_s:7.1f} {run.cpu_s:6.1f} {run.rss_mb:8.0f}")
    slowest = max(rows, key=lambda r: r[1].cpu_s)
    largest = max(rows, key=lambda r: r[1].rss_mb)
    print(
        f"# {len(rows)} releases; slowest reading {slowest[0]}: {slowest[1].cpu_s:.1f} s CPU "
        f"({slowest[1].wall_s:.1f} s wall) against --timeout {limits.DEFAULT_TIMEOUT_S:g} s CPU "
        f"({limits.DEFAULT_TIMEOUT_S / slowest[1].cpu_s:.0f}x); largest {largest[0]}: {largest[1].rss_mb:.0f} MB "
        f"peak RSS against --max-memory {limits.DEFAULT_MAX_MEMORY_MIB} MiB "
        f"({limits.DEFAULT_MAX_MEMORY_MIB / largest[1].rss_mb:.0f}x)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="", help="only the cases whose name this regular expression finds")
    parser.add_argument("--releases", action="store_true", help="also read every cached release")
    parser.add_argument("--no-corpus", action="store_true", help="only the releases")
    args = parser.parse_args(argv)
    ok = True if args.no_corpus else run_corpus(args.cases)
    if args.releases or args.no_corpus:
        run_releases()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
