"""``artune verify-engine SOURCE``: run the engine's own dispatch code and compare it with artune's reading.

The only command that executes an engine's code (``check``, ``explain`` and
``review`` never do); its first line says so. Exit codes: 0 every probe
agrees, 1 some differ (the first differences are printed), 2 it cannot run
(a source that is no engine's, an oracle that cannot answer: one line with
the fix), 3 a release or a tool could not be had (retry, install g++).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

_EPILOG = """examples:
  artune verify-engine vllm==0.34.0            # a release: downloaded once, cached
  artune verify-engine vllm:.                  # a checkout (a pull request's work tree)
  artune verify-engine sglang==0.5.23 --format json
  artune verify-engine vllm==0.34.0 --platform rocm   # only the AMD probes (QuickReduce, AITER)
  artune verify-engine vllm==0.34.0 --record   # keep its fingerprints (artune/formats/vllm/verified.json)
"""


def register(commands: Any) -> None:
    """Add ``verify-engine`` to the parser."""
    command = commands.add_parser(
        "verify-engine",
        help="run an engine's own dispatch code on every probe and compare artune's reading; exit 0 all agree",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument("source", metavar="SOURCE", help="ENGINE==VERSION or ENGINE:PATH (vllm, sglang, trtllm)")
    command.add_argument(
        "--record",
        action="store_true",
        help="once every probe of a release agrees, keep its dispatch functions' fingerprints as verified",
    )
    command.add_argument(
        "--platform", choices=("cuda", "rocm"), help="only the probes of one platform (default: every one)"
    )
    command.add_argument("--format", choices=("text", "json"), default="text")
    command.add_argument("--differences", type=int, default=10, metavar="N", help="print the first N differences")
    command.set_defaults(run=run_verify)


def run_verify(args: argparse.Namespace) -> int:
    """Print the verification; 0 when every probe agrees, 1 otherwise."""
    from artune.oracles.verify import oracle, source, verify

    found = source(args.source)
    runs = oracle(found.engine)  # one that cannot run says so before the first line claims it will
    print(
        f"artune verify-engine executes {runs.runs} from {args.source} in a stand-in world "
        f"({runs.probes.__module__}); check, explain and review never do.",
        file=sys.stderr if args.format == "json" else sys.stdout,
        flush=True,
    )
    result = verify(args.source, record=args.record, keep=max(0, args.differences), platform=args.platform)
    if args.format == "json":
        print(json.dumps(result.as_dict(), indent=1))
        return 0 if result.agree else 1
    on = f" on {args.platform}" if args.platform else ""
    print(f"{args.source}: {result.probes} probes{on}, {result.probes - result.differ} agree ({result.seconds:.1f} s)")
    for name, n, same in result.topologies:
        print(f"  {name}: {n} probes, {same} agree")
    answers = ", ".join(f"{name} {n}" for name, n in sorted(result.engine_answers.items()))
    print(f"  the engine ran: {answers}")
    for why in result.unprobed:
        print(f"  not probed: {why}")
    for probe, engine_answer, artune_answer in result.differences:
        print(f"  differs: {probe}: engine {engine_answer}, artune {artune_answer}")
    if result.differ > len(result.differences):
        print(f"  ... {result.differ - len(result.differences)} more differ")
    if result.recorded:
        print(f"  recorded the fingerprints of its dispatch functions in {result.recorded}")
    elif args.record:
        print("  not recorded: some probes differ")
    return 0 if result.agree else 1
