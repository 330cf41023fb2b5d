"""``artune tune`` and ``artune verify`` on the command line: errors, exit codes, and one real run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from artune.cli import main
from artune.table.io import load_table
from artune.tune import session
from artune.tune.measurer import CachedMeasurer
from artune.tune.synthetic import SyntheticMeasurer, linear_cost
from artune.tune.verify import verify_plan

TABLE = """
schema = 1
[platform]
kind = "cpu"
arch = "x86_64"
[provenance]
source = "measured"
[[plan]]
world_size = 2
fallback = "gloo"
bands = [{{ below = "{bound}", algorithm = "shm_one_shot" }}, {{ upto = "inf", algorithm = "shm_two_shot" }}]
"""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tune"], "--world-size N is required"),
        (["tune", "--world-size", "1"], "need at least 2 ranks"),
        (["tune", "--world-size", "2", "--budget", "-3"], "must be a positive number"),
        (["verify", "/nonexistent/table.toml"], "cannot read"),
    ],
)
def test_user_errors_exit_2_with_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_tune_refuses_a_machine_whose_shared_memory_it_cannot_use(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Else gloo would be tuned into every size and the installed table would keep it there."""
    monkeypatch.setenv("ARTUNE_SHM_BYTES", "256GiB")
    assert main(["tune", "--world-size", "2", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "shared memory for 2 ranks cannot be set up here: shared memory needs" in err
    assert "ARTUNE_SHM_BYTES=256GiB: unset it" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing measured, nothing written
    (tmp_path / "t.toml").write_text(TABLE.format(bound="24KiB"))
    assert main(["verify", str(tmp_path / "t.toml")]) == 2  # not "nothing to verify", exit 0
    assert "shared-memory bands could not be measured" in capsys.readouterr().err


def test_torchrun_world_size_must_match(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["tune", "--world-size", "3"]) == 2
    assert "torchrun started WORLD_SIZE=2" in capsys.readouterr().err


def _synthetic_collective(fn: Any, world_size: int, request: Any, timeout: float) -> Any:
    """``run_collective`` replaced: verify against a modelled machine whose crossover is near 22 KB."""
    costs = {"gloo": linear_cost(400, 1.2), "shm_one_shot": linear_cost(5, 1.0), "shm_two_shot": linear_cost(20, 3.0)}
    bench = SyntheticMeasurer(costs, noise=0.02)
    return verify_plan(CachedMeasurer(bench), request.plan, bench.algorithms, request.rule, request.budget_s)


@pytest.mark.parametrize(("bound", "code"), [("24KiB", 0), ("1MiB", 1)])
def test_verify_exit_code_says_whether_the_table_holds(
    bound: str, code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.toml"
    path.write_text(TABLE.format(bound=bound))
    monkeypatch.setattr(session, "run_collective", _synthetic_collective)
    assert main(["verify", str(path), "--budget", "1"]) == code
    out = capsys.readouterr().out
    assert "shm_one_shot -> shm_two_shot" in out
    assert ("DRIFTED" in out) == bool(code)


@pytest.mark.timeout(240)
def test_real_quick_tune_writes_a_clean_table_and_report(tmp_path: Path) -> None:
    """One small real run: spawned ranks, the harness, the shm algorithms (no wall-clock assertions)."""
    out = tmp_path / "tune"
    env = {**os.environ, "ARTUNE_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run(
        [sys.executable, "-m", "artune", "tune", "--world-size", "2", "--quick", "--out", str(out), "--no-install"],
        capture_output=True,
        text=True,
        env=env,
        timeout=220,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Regret on" in run.stdout
    table = load_table(out / "table.toml")
    assert table.provenance.source == "measured" and [p.world_size for p in table.plans] == [2]
    check = subprocess.run(
        [sys.executable, "-m", "artune", "check", str(out / "table.toml")], capture_output=True, text=True, env=env
    )
    assert check.returncode == 0, check.stdout + check.stderr
    for name in ("measurements-ws2.jsonl", "report.md", "report.html", "latency-ws2.png", "speedup-ws2.png"):
        assert (out / name).stat().st_size > 0, name
    assert "Regret on" in (out / "report.md").read_text()
    assert not (tmp_path / "cache").exists()  # --no-install
    # the run replays from its log and journal: the same table, measuring nothing
    again = subprocess.run(
        [sys.executable, "-m", "artune", "tune", "--replay", str(out)], capture_output=True, text=True, env=env
    )
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    assert "the same plan as" in again.stdout
    assert load_table(out / "replay" / "table.toml").plans == table.plans


def test_busy_machine_warning() -> None:
    from artune.cli.tune import busy_warning

    assert busy_warning(0.2, 1.9, world_size=2, cpus=2) == ""
    assert "busy" in busy_warning(2.5, 2.0, world_size=2, cpus=2)  # others ran before we started
    assert "busy" in busy_warning(0.1, 3.4, world_size=2, cpus=2)  # others joined during the run
    assert busy_warning(3.0, 7.0, world_size=2, cpus=8) == ""


ONE_BAND = """
schema = 1
[platform]
kind = "cpu"
arch = "x86_64"
[provenance]
source = "measured"
[[plan]]
world_size = 2
fallback = "shm_one_shot"
bands = [{ upto = "inf", algorithm = "gloo" }]
"""


@pytest.mark.timeout(120)
def test_real_verify_of_a_one_band_table_whose_fallback_is_faster(tmp_path: Path) -> None:
    """Spawned ranks measure the band's gloo against the fallback shared memory, which beats it on a quiet
    machine; on a busy one the verify may not tell them apart, and then it must say so and not pass. What
    holds whatever the machine's speed: the closing line and the exit status agree with the checks printed."""
    path = tmp_path / "t.toml"
    path.write_text(ONE_BAND)
    env = {**os.environ, "ARTUNE_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run(
        [sys.executable, "-m", "artune", "verify", str(path), "--budget", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=100,
    )
    assert (
        "Traceback" not in run.stderr and "ws=2 band [0, inf) (gloo over fallback shm_one_shot): at 256 " in run.stdout
    )
    check, summary = run.stdout.splitlines()[-2:]
    if check.endswith("DRIFTED"):
        assert summary == "1 check(s), 1 drifted, 0 unsure" and run.returncode == 1
    elif check.endswith("holds (unsure: too few rounds to be sure; a larger --budget decides)"):
        assert summary.startswith("1 check(s), 0 drifted, 1 unsure: could not tell") and run.returncode == 1
    else:  # gloo kept up with shared memory at every size measured: surely holds
        assert check.endswith(": holds") and summary == "1 check(s), 0 drifted, 0 unsure: the table holds"
        assert run.returncode == 0


def _marked(mark: str) -> list[int]:
    """The processes whose environment holds ``ARTUNE_TEST_MARK=mark`` (a command, its fork server, its ranks)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and f"ARTUNE_TEST_MARK={mark}".encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return found


def _wait(until: Any, what: str, deadline_s: float = 60.0) -> None:
    import time

    end = time.monotonic() + deadline_s
    while not until():
        assert time.monotonic() < end, f"still waiting after {deadline_s:.0f}s: {what}"
        time.sleep(0.1)


def _segments() -> set[str]:
    return {p.name for p in Path("/dev/shm").glob("*artune_*")} if Path("/dev/shm").is_dir() else set()


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_a_tune_ended_by_a_signal_leaves_no_rank_running(tmp_path: Path, sig: str) -> None:
    """A job scheduler's SIGTERM ends ``artune tune`` as Ctrl-C does (exit 143, one line, its ranks ended and
    its shared memory unlinked); even SIGKILL, which nothing can catch, takes its ranks with it."""
    import signal
    import uuid

    mark = uuid.uuid4().hex
    env = {**os.environ, "ARTUNE_CACHE_DIR": str(tmp_path / "cache"), "ARTUNE_TEST_MARK": mark}
    before = _segments()
    argv = ["tune", "--world-size", "2", "--quick", "--no-install", "--no-progress", "--out", str(tmp_path / "t")]
    tune = subprocess.Popen(
        [sys.executable, "-m", "artune", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        # the tune, its resource tracker, its fork server and both ranks: a rank still being forked when the tune
        # ends prints the fork server's traceback (a known gap, not what this test is about)
        _wait(lambda: len(_marked(mark)) >= 5 or tune.poll() is not None, "the tune's fork server and two ranks")
        assert tune.poll() is None, tune.communicate()
        tune.send_signal(getattr(signal, sig))
        _, err = tune.communicate(timeout=60)
    finally:
        if tune.poll() is None:
            tune.kill()
            tune.communicate()
    if sig == "SIGTERM":
        assert tune.returncode == 143 and err.strip().splitlines()[-1] == "artune tune: terminated", err[-2000:]
        assert "Traceback" not in err
    _wait(lambda: not _marked(mark), "the ranks to end with the tune")
    if sig == "SIGTERM":  # (a SIGKILLed rank cannot unlink what it made: its peers' deadlines and names do)
        assert _segments() <= before


def test_a_hypervisor_taking_cpu_time_makes_a_quiet_load_busy() -> None:
    from artune.cli.tune import busy_warning
    from artune.machine import cpu_times, steal_share

    assert busy_warning(0.2, 1.9, world_size=2, cpus=2, steal=0.01) == ""
    assert "the hypervisor took 12% of the CPU time" in busy_warning(0.2, 1.9, world_size=2, cpus=2, steal=0.12)
    assert busy_warning(0.2, 1.9, world_size=2, cpus=2, steal=float("nan")) == ""  # unknown is not busy
    # /proc/stat's 8th counter is steal: 30 of 100 ticks
    assert steal_share([0] * 8, [50, 0, 20, 0, 0, 0, 0, 30]) == 0.3
    now = cpu_times()
    assert not now or len(now) >= 8
