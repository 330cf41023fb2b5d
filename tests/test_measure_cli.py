"""``artune bench``: argument errors, and a real two-rank smoke run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from artune.cli import main
from artune.measure.records import MeasurementLog


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "--world-size", "2", "--algorithms", "gloo,warp_drive"], "unknown name(s) ['warp_drive']"),
        (["bench", "--world-size", "2", "--sizes", "4KB"], "binary"),
        (["bench", "--world-size", "2", "--budget", "0"], "--budget"),
        (["bench"], "--world-size N is required"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("artune bench: error:") and "Traceback" not in err


@pytest.mark.timeout(150)
def test_bench_smoke(tmp_path: Path) -> None:
    log = tmp_path / "bench.jsonl"
    cmd = [sys.executable, "-m", "artune", "bench", "--world-size", "2", "--sizes", "4KiB", "--budget", "0.2"]
    done = subprocess.run([*cmd, "--jsonl", str(log)], capture_output=True, text=True, timeout=140)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for column in ("size", "count", "dtype", "redop", "gloo", "time_us", "busbw_GBps", "nwrong", "gloo/this"):
        assert column in out
    assert "4KiB" in out and "1024" in out and "float32" in out
    found = MeasurementLog(log).read()
    assert found and {m.size_bytes for m in found} == {4096} and "gloo" in {m.candidate.algorithm for m in found}
    assert all(m.ok and m.nwrong == 0 for m in found), [(m.key, m.status, m.error) for m in found]
