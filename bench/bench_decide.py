"""Cost of one ``Table.decide`` call next to a plain dict lookup, measured in one run.

    python bench/bench_decide.py [--reps 200000]

Prints the median over repeats of the per-call cost (ns) of: a dict lookup
(the floor for any table lookup in Python), ``decide`` with
``available=None``, and ``decide`` with an ``available`` frozenset as the
Communicator passes it, for a measured-style CPU table, SGLang's SM107
reference table and tables read from released engines (vLLM 0.34.0 and
SGLang 0.5.23, read once by evaluating their own dispatch code: skipped,
saying so, where the release cache cannot be filled), and the ratio to the
dict lookup. Reading happens once per source; ``decide`` never reads. Goal:
decide <= 1 us.
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import time

from artune.table.bundled import cpu_default
from artune.table.decide import decide


def per_call_ns(fn, args: list[tuple], repeats: int) -> float:
    """Median over ``repeats`` timed passes of the mean cost of one call, in ns."""
    results = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for a in args:
            fn(*a)
        results.append((time.perf_counter_ns() - start) / len(args))
    return statistics.median(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200_000, help="calls per timed pass")
    parser.add_argument("--repeats", type=int, default=15, help="timed passes (median reported)")
    args = parser.parse_args()
    rng = random.Random(0)
    sizes = [rng.randrange(0, 256 << 20) for _ in range(args.reps)]
    tables = [("bundled:cpu ws=2", cpu_default(), 2, "eager", frozenset({"gloo", "shm_one_shot", "shm_two_shot"}))]
    try:
        from artune.formats.references import reference_set

        sm107 = reference_set("sglang").resolve("10.7")
        names = frozenset(a for p in sm107.plans for a in p.algorithms)
        tables.append(("reference:sglang 10.7 ws=8", sm107, 8, "graph", names))
    except ImportError:
        pass
    for spec, arch, ws, mode in (("vllm==0.34.0", "9.0", 8, "graph"), ("sglang==0.5.23", "10.0", 8, "graph")):
        try:
            from artune.errors import ArtuneError
            from artune.sources import open_source

            start = time.perf_counter()
            table = open_source(f"{spec}@{arch}").tables[0]
            print(f"# read {spec}@{arch} once: {time.perf_counter() - start:.1f} s (not per decision)")
        except (ImportError, ArtuneError) as err:
            print(f"# {spec}: not read here ({err})")
            continue
        names = frozenset(a for p in table.plans for a in p.algorithms)
        tables.append((f"{spec} {arch} ws={ws}", table, ws, mode, names))
    lookup = {n: n for n in range(0, 256 << 20, 1 << 16)}
    keys = [(s - s % (1 << 16),) for s in sizes]
    dict_ns = per_call_ns(lookup.get, keys, args.repeats)
    print(f"{'what':<48} {'ns/call':>9} {'x dict':>8}")
    print(f"{'dict.get (baseline)':<48} {dict_ns:>9.0f} {1.0:>8.2f}")
    for label, table, ws, mode, available in tables:
        plain = [(s, ws, mode) for s in sizes]
        with_avail = [(s, ws, mode, available) for s in sizes]
        for name, calls in (("decide()", plain), ("decide(available=...)", with_avail)):
            ns = per_call_ns(functools.partial(decide, table), calls, args.repeats)
            verdict = "ok" if ns <= 1000 else "OVER 1 us"
            print(f"{label + ' ' + name:<48} {ns:>9.0f} {ns / dict_ns:>8.2f}  {verdict}")


if __name__ == "__main__":
    main()
