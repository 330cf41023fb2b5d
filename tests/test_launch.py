"""``artune.launch.run_ranks`` under a signal: a SIGTERM that arrives while the ranks are being started waits
until they all are, then ends them as it would have a moment later (interrupted, joined, nothing left running,
no traceback from a half-built rank)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

RANK = """
import time


def sleep(ctx, seconds):
    time.sleep(seconds)
"""

LAUNCHER = """
import json, os, signal
from multiprocessing.process import BaseProcess

from artune import launch
from artune.errors import Terminated

import ranks


def terminated(signum, frame):
    raise Terminated


def start_then_signal(self):
    rank = getattr(self, "_target", None) is launch._rank_main  # (start() drops _target)
    start(self)
    if rank:
        started.append(self)
        if len(started) == 1:  # between the first rank's start and the second's
            os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":  # the fork server imports this module too
    signal.signal(signal.SIGTERM, terminated)
    started = []
    start = BaseProcess.start
    BaseProcess.start = start_then_signal
    try:
        launch.run_ranks(ranks.sleep, 2, 60.0, timeout=90.0)
        print(json.dumps({"raised": None}))
    except Terminated:
        print(json.dumps({"raised": "Terminated", "started": len(started),
                          "running": [p.is_alive() for p in started], "exitcodes": [p.exitcode for p in started]}))
"""


def test_a_sigterm_while_the_ranks_start_ends_every_rank_before_run_ranks_raises(tmp_path: Path) -> None:
    (tmp_path / "ranks.py").write_text(RANK)
    (tmp_path / "launcher.py").write_text(LAUNCHER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, str(tmp_path / "launcher.py")], capture_output=True, text=True, env=env, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    # both ranks started though the signal came after the first; both were ended (by the SIGTERM run_ranks sends
    # its ranks) before the Terminated left run_ranks, long before their 60 s sleep
    assert found == {"raised": "Terminated", "started": 2, "running": [False, False], "exitcodes": found["exitcodes"]}
    assert all(code is not None for code in found["exitcodes"])
    assert "Traceback" not in run.stderr, run.stderr[-3000:]


INTERRUPTED_WHILE_STARTING = """
import os, signal
from artune import launch


class Env(dict):
    def __iter__(self):  # os.environ.update(env) reads env: run_ranks' SIGTERM arrives right then
        os.kill(os.getpid(), signal.SIGTERM)
        return super().__iter__()


class Results:
    def put(self, payload):
        print("result", payload[0])


launch._rank_main(print, 0, 1, 0, (), Results(), 1.0, Env(PATH="/usr/bin"))
print("returned")
"""


def test_a_rank_interrupted_while_it_sets_its_environment_ends_without_a_word(tmp_path: Path) -> None:
    """The race a loaded machine hit: the SIGTERM came while the rank was inside ``os.environ.update(env)``,
    and its KeyboardInterrupt escaped as a traceback; now the rank, which has made nothing yet, just ends."""
    script = tmp_path / "rank.py"
    script.write_text(INTERRUPTED_WHILE_STARTING)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout, run.stderr) == (0, "returned\n", "")
