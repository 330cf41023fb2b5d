"""Replaying a tuning run from what it kept: the measurement log and the run's journal.

Every decision of ``tune_world`` depends only on the measurements and on
the seconds each harness call was counted as (the budget), so a run can be
derived again from them, bit for bit. ``artune tune`` keeps both in its
output folder: ``measurements-ws<N>.jsonl`` (every call's samples, the duel's
and the held-out scoring's included) and ``journal-ws<N>.jsonl``. The journal
opens each run with a ``run`` line (the settings, the bench's algorithms and
tunables, and how many log entries were known when it began) and then has
one ``call`` line per harness call (phase, size, the keys measured, the
seconds counted).

``replay`` serves the run's calls back from the log in order (``LogMeasurer``)
and hands each one the seconds the journal counted, so the replay takes the
same sequence of calls and derives the same table. A replay that asks for a
call the run did not take raises ``ReplayError``: the log and the journal do
not belong together, or the tuner's rules changed since the run.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from artune.errors import ReplayError
from artune.measure.records import Candidate, Measurement, MeasurementLog, measurement_key
from artune.table.types import ParamValue
from artune.tune.config import TuneConfig
from artune.tune.measurer import CachedMeasurer, Measurer
from artune.tune.tuner import WorldResult, tune_world


@dataclass(frozen=True)
class RunHeader:
    """The journal's ``run`` line: what a replay needs besides the measurements."""

    config: TuneConfig
    known: int  # log entries known when the run began
    world_size: int
    dtype: str
    baseline: str
    mode: str
    hosts: int
    algorithms: tuple[str, ...]
    tunables: Mapping[str, Mapping[str, tuple[ParamValue, ...]]]

    @classmethod
    def of(cls, bench: Measurer, config: TuneConfig, known: int) -> RunHeader:
        """The header of a run of ``config`` on ``bench`` that began with ``known`` log entries."""
        tunables = {name: bench.tunables(name) for name in bench.algorithms}
        return cls(
            config, known, bench.world_size, bench.dtype, bench.baseline, bench.mode, bench.hosts,
            tuple(bench.algorithms), {n: t for n, t in tunables.items() if t},
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The ``run`` line's value."""
        return {
            "config": self.config.to_dict(), "known": self.known, "world_size": self.world_size,
            "dtype": self.dtype, "baseline": self.baseline, "mode": self.mode, "hosts": self.hosts,
            "algorithms": list(self.algorithms),
            "tunables": {n: {p: list(v) for p, v in t.items()} for n, t in self.tunables.items()},
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunHeader:
        """The header ``to_dict`` wrote."""
        tunables = {n: {p: tuple(v) for p, v in t.items()} for n, t in data.get("tunables", {}).items()}
        return cls(
            TuneConfig.from_dict(data["config"]), int(data["known"]), int(data["world_size"]), str(data["dtype"]),
            str(data["baseline"]), str(data["mode"]), int(data["hosts"]), tuple(data["algorithms"]), tunables,
        )  # fmt: skip


@dataclass(frozen=True)
class CallLine:
    """One harness call of a run: its phase, size, the keys it measured and the seconds counted."""

    phase: str
    size: int
    keys: tuple[str, ...]
    spent_s: float


class RunJournal:
    """The journal file of one world size (rank 0 appends; ``read`` parses it)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def begin(self, header: RunHeader) -> None:
        """Open a run."""
        self._write({"run": header.to_dict()})

    def call(self, phase: str, size: int, keys: tuple[str, ...], spent_s: float) -> None:
        """Record one call (a ``CachedMeasurer`` journal)."""
        self._write({"call": [phase, size, list(keys), spent_s]})

    def _write(self, data: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(data, separators=(",", ":")) + "\n")

    def last_run(self) -> tuple[RunHeader, list[CallLine]]:
        """The last run's header and calls."""
        if not self.path.is_file():
            raise ReplayError(f"{self.path}: no journal here; only runs of 'artune tune' that wrote one replay")
        header: RunHeader | None = None
        calls: list[CallLine] = []
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if "run" in data:
                    header, calls = RunHeader.from_dict(data["run"]), []
                else:
                    phase, size, keys, spent = data["call"]
                    calls.append(CallLine(str(phase), int(size), tuple(keys), float(spent)))
            except (ValueError, KeyError, TypeError) as err:
                raise ReplayError(f"{self.path}:{number}: not a journal line ({err}); the file is damaged") from err
        if header is None:
            raise ReplayError(f"{self.path}: no 'run' line; the journal is empty or damaged")
        return header, calls


class LogMeasurer:
    """A ``Measurer`` that answers each call with the run's next logged measurements and counted seconds."""

    def __init__(self, header: RunHeader, fresh: Sequence[Measurement], calls: Sequence[CallLine]) -> None:
        self.header = header
        self.world_size, self.dtype, self.baseline = header.world_size, header.dtype, header.baseline
        self.mode, self.hosts = header.mode, header.hosts
        self._queues: dict[str, deque[Measurement]] = {}
        for m in fresh:
            self._queues.setdefault(m.key, deque()).append(m)
        self._calls = deque(calls)
        self._spent: float | None = None

    @property
    def algorithms(self) -> tuple[str, ...]:
        """The run's algorithms."""
        return self.header.algorithms

    def tunables(self, name: str) -> dict[str, tuple[ParamValue, ...]]:
        """The run's tunables of ``name``."""
        return dict(self.header.tunables.get(name, {}))

    @property
    def left(self) -> int:
        """Calls of the run not asked for yet."""
        return len(self._calls)

    def measure(
        self, candidates: Sequence[Candidate], sizes: Sequence[int], budget_s: float, max_iters: int | None = None
    ) -> list[Measurement]:
        """The run's next call: it must be of these candidates at these sizes."""
        out = []
        for size in sizes:
            keys = tuple(measurement_key(c, size, self.dtype, "sum", self.world_size) for c in candidates)
            if not self._calls:
                raise ReplayError(f"the replay asks for {', '.join(keys)}, after the run's last call")
            line = self._calls.popleft()
            if line.keys != keys:
                raise ReplayError(
                    f"the replay asks for {', '.join(keys)} where the run measured {', '.join(line.keys)} "
                    f"({line.phase}): the log and journal are of another run, or the tuner's rules changed"
                )
            for key in keys:
                if not self._queues.get(key):
                    raise ReplayError(f"the log has no more measurements of {key}; it was cut short")
                out.append(self._queues[key].popleft())
            self._spent = line.spent_s
        return out

    def agree(self, seconds: float) -> float | None:
        """The seconds the run counted for this call."""
        return self._spent


def journal_path(log_path: str | Path) -> Path:
    """The journal beside a measurement log: ``measurements-ws2.jsonl`` -> ``journal-ws2.jsonl``."""
    path = Path(log_path)
    return path.with_name(path.name.replace("measurements-", "journal-", 1))


def replay(log_path: str | Path) -> tuple[WorldResult, int]:
    """Derive the last run over ``log_path`` again from the log and its journal; the result and how many of
    the run's calls the replay left unasked (0: it took exactly the run's calls)."""
    header, calls = RunJournal(journal_path(log_path)).last_run()
    if not Path(log_path).is_file():
        raise ReplayError(f"{log_path}: no measurement log here")
    logged = MeasurementLog(log_path).read()
    if len(logged) < header.known:
        raise ReplayError(f"{log_path}: {len(logged)} entries, but the run began with {header.known}; it was cut")
    bench = LogMeasurer(header, logged[header.known :], calls)
    result = tune_world(CachedMeasurer(bench, logged[: header.known]), header.config)
    return result, bench.left
