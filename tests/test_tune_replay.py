"""``artune.tune.replay``: a run derived again from its log and journal is the same run, bit for bit."""

from __future__ import annotations

from pathlib import Path

import pytest

from artune.errors import ReplayError
from artune.measure.records import Header, MeasurementLog
from artune.tune.config import TuneConfig
from artune.tune.measurer import CachedMeasurer
from artune.tune.replay import RunHeader, RunJournal, journal_path, replay
from artune.tune.synthetic import SyntheticMeasurer
from artune.tune.tuner import WorldResult, tune_world
from test_tune_duel import flipping  # a machine whose state flips between calls


def run(tmp_path: Path, seed: int, config: TuneConfig, known: int = 0) -> tuple[WorldResult, Path]:
    log_path = tmp_path / "measurements-ws2.jsonl"
    log = MeasurementLog(log_path, Header.for_this_machine(2))
    before = log.read()
    inner: SyntheticMeasurer = flipping(seed)
    journal = RunJournal(journal_path(log_path))
    journal.begin(RunHeader.of(inner, config, len(before)))
    result = tune_world(CachedMeasurer(inner, before, record=log.append, journal=journal.call), config)
    return result, log_path


@pytest.mark.parametrize("seed", [0, 1, 5])
def test_replay_derives_the_same_table_duel_and_scores(tmp_path: Path, seed: int) -> None:
    config = TuneConfig.quick_run(budget_s=4.0).with_changes(seed=seed)
    result, log_path = run(tmp_path, seed, config)
    again, left = replay(log_path)
    assert left == 0
    assert again.plan == result.plan
    assert again.duel == result.duel
    assert again.regret == result.regret
    assert again.spent_s == result.spent_s and again.calls == result.calls
    assert again.measured == result.measured  # every call came from the log, as the run measured it


def test_a_resumed_run_replays_from_where_it_began(tmp_path: Path) -> None:
    config = TuneConfig.quick_run(budget_s=3.0)
    run(tmp_path, 0, config)
    second, log_path = run(tmp_path, 1, config.with_changes(budget_s=5.0))
    assert second.reused > 0
    again, left = replay(log_path)
    assert left == 0 and again.plan == second.plan and again.reused == second.reused


def test_a_log_of_another_run_is_refused_with_the_reason(tmp_path: Path) -> None:
    config = TuneConfig.quick_run(budget_s=3.0)
    _, log_path = run(tmp_path, 0, config)
    lines = journal_path(log_path).read_text().splitlines()
    journal_path(log_path).write_text("\n".join([lines[0], *lines[2:]]) + "\n")  # a call left out
    with pytest.raises(ReplayError, match="where the run measured"):
        replay(log_path)
    journal_path(log_path).write_text("{not json\n")
    with pytest.raises(ReplayError, match="damaged"):
        replay(log_path)
    with pytest.raises(ReplayError, match="no journal"):
        replay(tmp_path / "measurements-ws4.jsonl")
