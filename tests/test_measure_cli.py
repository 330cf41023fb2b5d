"""``artune bench``: argument errors, and a real two-rank smoke run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from artune.cli import main
from artune.measure.records import Candidate, Measurement, MeasurementLog


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
    lines = done.stdout.splitlines()
    # nccl-tests' shape: '#' lines around one row per size, in bytes; per algorithm time, algbw, busbw, #wrong
    at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["#", "size"])
    header, names = lines[at].split(), lines[at - 1].lstrip("#").split()
    assert header[:5] == ["#", "size", "count", "type", "redop"] and header.count("busbw") >= 2
    assert "gloo" in names and header.count("time") == len(names)
    rows = [line.split() for line in lines if not line.startswith("#")]
    assert len(rows) == 1 and rows[0][:4] == ["4096", "1024", "float", "sum"]
    assert len(rows[0]) == 4 + 4 * len(names) and all(float(t) > 0 for t in rows[0][4::4])
    assert lines[-3] == "# Out of bounds values : 0 OK"
    average = lines[-2].split(":", 1)
    assert average[0] == "# Avg bus bandwidth    " and average[1].split()[::2] == names
    found = MeasurementLog(log).read()
    assert found and {m.size_bytes for m in found} == {4096} and "gloo" in {m.candidate.algorithm for m in found}
    assert all(m.ok and m.nwrong == 0 for m in found), [(m.key, m.status, m.error) for m in found]


def test_nccl_tests_text_names_a_busy_machine_and_failures() -> None:
    from artune.cli.measure import nccl_tests_text

    def measured(name: str, times: list[float], status: str = "ok") -> Measurement:
        return Measurement(Candidate(name), 4096, "float32", 2, tuple(times), 0, status=status, error="boom")

    text = nccl_tests_text([measured("gloo", [20.0, 20.0]), measured("shm_one_shot", [], "runtime")], 2, busy="load 9")
    lines = text.splitlines()
    assert "# WARNING: load 9" in lines
    row = next(line.split() for line in lines if not line.startswith("#"))
    assert row[:8] == ["4096", "1024", "float", "sum", "20.00", "0.20", "0.20", "0"] and row[8] == "runtime"
    assert lines[-2].endswith("gloo 0.205  shm_one_shot -")
