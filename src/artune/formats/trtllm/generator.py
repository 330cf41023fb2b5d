"""The CSV of TensorRT-LLM's lookup-table generator, written from artune's measurements and read back as them.

``tests/scripts/allreduce_perf/allreduce_heuristic_code_gen.py`` (TensorRT-LLM
commit 0c9a37db) reads ``benchmark.tp{N}.sm{V}.csv`` files that
``tests/microbenchmarks/all_reduce.py --explore_2d --save_csv`` writes, with
the columns ``world_size, dtype, size, num_tokens, hidden_size, strategy,
fusion, time (us)``; it drops ``AUTO`` rows, keeps 1 <= tokens <= 2**15 and
128 <= hidden <= 2**14, and names strategies ``NCCL``, ``NCCL_SYMMETRIC``,
``ONESHOT`` and ``TWOSHOT``. It then takes the argmin time of every cell,
which is what writes the flips ``artune check`` reports (R107).

``write_csv`` writes artune's shape measurements in that form, so the
project's own generator consumes them. ``read_csv`` reads such a file back as
``ShapeMeasurement`` s: the rows of one (world size, fused op, hidden, tokens,
strategy) are the rounds of one measurement, in file order, all timed in one
call (the file), so ``artune.tune.shapes.derive_shape_table`` picks each cell
by the tuner's rule (``artune.tune.compare``): a strategy takes over only where the rounds
show it faster, and one row a cell is not enough to overturn the simpler one.
The CSV holds times only, no correctness count: its rows are taken as
correct (``nwrong`` 0), as the generator takes them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path

from artune.errors import TableError
from artune.formats.trtllm.enums import ALGORITHMS, STRATEGIES
from artune.measure.records import DTYPE_BYTES, Candidate, Measurement, ShapeMeasurement

COLUMNS = ("world_size", "dtype", "size", "num_tokens", "hidden_size", "strategy", "fusion", "time (us)")
#: the generator's ranges (its ``filter_df``)
TOKENS = (1, 1 << 15)
HIDDEN = (128, 1 << 14)
#: simpler first: the evidence rule keeps the simpler strategy where the rounds cannot tell them apart
PREFERENCE = ("nccl", "nccl_symmetric", "trtllm_oneshot", "trtllm_twoshot")


def write_csv(measurements: Iterable[ShapeMeasurement]) -> str:
    """The generator's CSV: one row per round of each measurement (its median time per round)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for sm in measurements:
        m = sm.measurement
        strategy = STRATEGIES.get(m.candidate.algorithm)
        if strategy is None:
            raise TableError(f"{m.candidate.algorithm}: not a TensorRT-LLM strategy ({', '.join(STRATEGIES)})")
        for time_us in _rounds(m):
            writer.writerow(
                [sm.world_size, m.dtype, m.size_bytes, sm.tokens, sm.hidden, strategy, sm.fusion, repr(time_us)]
            )
    return out.getvalue()


def _rounds(m: Measurement) -> list[float]:
    burst = max(m.burst, 1)
    samples = list(m.samples_us)
    return [
        sorted(samples[i : i + burst])[(len(samples[i : i + burst]) - 1) // 2] for i in range(0, len(samples), burst)
    ]


def read_csv(path: str | Path) -> list[ShapeMeasurement]:
    """The generator's CSV as measurements; ``TableError`` naming the file and row of what is wrong."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise TableError(f"{name}: cannot read: {err.strerror or err}") from None
    reader = csv.DictReader(io.StringIO(text), skipinitialspace=True)
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise TableError(
            f"{name}: no column {', '.join(repr(c) for c in missing)}; the generator's columns are {', '.join(COLUMNS)}"
        )
    rounds: dict[tuple[int, str, int, int, str, str, int], list[float]] = {}
    for number, row in enumerate(reader, start=2):
        try:
            ws, tokens, hidden, size = (int(row[k]) for k in ("world_size", "num_tokens", "hidden_size", "size"))
            time_us = float(row["time (us)"])
        except (TypeError, ValueError):
            raise TableError(
                f"{name}:{number}: world_size, num_tokens, hidden_size, size must be integers and "
                f"'time (us)' a number: {dict(row)}"
            ) from None
        strategy, fusion, dtype = row["strategy"].strip(), row["fusion"].strip(), row["dtype"].strip()
        if strategy == "AUTO":
            continue  # the generator drops AUTO too: it is not one strategy
        if strategy not in ALGORITHMS:
            raise TableError(f"{name}:{number}: strategy {strategy!r}; the generator knows {', '.join(ALGORITHMS)}")
        if not (TOKENS[0] <= tokens <= TOKENS[1] and HIDDEN[0] <= hidden <= HIDDEN[1]):
            continue  # outside the generator's ranges, as its filter_df drops them
        rounds.setdefault((ws, fusion, hidden, tokens, strategy, dtype, size), []).append(time_us)
    call = f"csv:{name}"
    return [
        ShapeMeasurement(
            ws,
            fusion,
            hidden,
            tokens,
            Measurement(Candidate(ALGORITHMS[strategy]), size, dtype, ws, tuple(times), 0, call=call),
        )
        for (ws, fusion, hidden, tokens, strategy, dtype, size), times in rounds.items()
    ]


__all__ = ["COLUMNS", "DTYPE_BYTES", "PREFERENCE", "read_csv", "write_csv"]
