"""The held-out check of each run of a robustness batch, by the typical call and by the time spent.

For every run of a ``bench/tune_robustness.py`` batch (its ``--json`` file and
run folders), the geometric mean over the run's held-out sizes of the time of
the derived table's choice over ``always shm_two_shot``'s, from the run's own
measurement log: by the typical call (the median of per-round ratios, what the
tuner decides single sizes on) and by the time spent (``spent_interval``). Beside
them, the margin the batch's independent scorer gave the tuned table over
``always shm_two_shot``. The tuner's checks weigh plans by both statistics;
this shows, on real runs, which of the two the scorer agrees with::

    python bench/heldout_statistics.py /work/robust/q8/all.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

RIVAL = "shm_two_shot"
ALGORITHMS = frozenset(("gloo", "shm_one_shot", "shm_two_shot"))


def _held_out(folder: Path) -> list[int]:
    sizes = set()
    for line in (folder / "journal-ws2.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if "call" in entry and entry["call"][0] == "regret":
            sizes.add(int(entry["call"][1]))
    return sorted(sizes)


def one_run(run: dict[str, Any]) -> dict[str, Any] | None:
    """The run's held-out geometric means (``None`` when it shipped no table or kept no log)."""
    from artune.measure.records import Measurement
    from artune.table.decide import decide
    from artune.table.io import load_table
    from artune.tune.compare import FasterRule

    folder = Path(run["folder"])
    if not (folder / "table.toml").exists() or not (folder / "journal-ws2.jsonl").exists():
        return None
    table = load_table(folder / "table.toml")
    held = _held_out(folder)
    last: dict[tuple[int, str, str], Measurement] = {}
    for line in (folder / "measurements-ws2.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry.get("type") == "header" or not entry.get("samples_us") or int(entry["size_bytes"]) not in held:
            continue
        m = Measurement.from_dict(entry)
        last[(m.size_bytes, m.candidate.algorithm, json.dumps(m.candidate.params_dict, sort_keys=True))] = m
    typical, spent = [], []
    for size in held:
        d = decide(table, size, 2, "eager", ALGORITHMS)
        mine = last.get((size, d.algorithm, json.dumps(dict(d.params), sort_keys=True)))
        theirs = last.get((size, RIVAL, "{}"))
        if mine is None or theirs is None:
            continue
        found = FasterRule().compare(mine, theirs)  # both ran in the size's one held-out call: paired
        if not found.rounds:
            continue
        typical.append(math.log(found.ratio))
        spent.append(math.log(found.spent))
    if not spent:
        return None
    regret = run["regret"]
    return {
        "run": run["run"],
        "table": run["table"],
        "typical": math.exp(sum(typical) / len(typical)) - 1.0,
        "spent": math.exp(sum(spent) / len(spent)) - 1.0,
        "scorer": regret["tuned table"] / regret[f"always {RIVAL}"] - 1.0,
        "sizes": len(spent),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("batch", type=Path, help="a tune_robustness.py --json file")
    args = parser.parse_args()
    runs = json.loads(args.batch.read_text())["runs"]
    print(f"the tuned table's time over always {RIVAL}'s, geometric mean over the run's held-out sizes")
    print(f"{'run':>3}  {'typical call':>12}  {'time spent':>10}  {'scorer':>7}  table")
    for run in runs:
        row = one_run(run)
        if row is None or row["table"] == f"[0, inf) {RIVAL}":
            continue
        print(
            f"{row['run']:>3}  {row['typical']:>+12.1%}  {row['spent']:>+10.1%}  {row['scorer']:>+7.1%}  {row['table']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
