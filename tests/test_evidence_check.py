"""``artune check TABLE --evidence FILE``: X1xx findings, from the library and as a user runs the command."""

from __future__ import annotations

from pathlib import Path

import pytest

from artune.cli import main
from artune.evidence import best_row, read_evidence
from artune.evidence.check import evidence_findings
from artune.formats.references import reference_set
from artune.table.io import dumps_table

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"
SWEEPS = Path(__file__).parents[1] / "src" / "artune" / "costmodel" / "data"  # the published vLLM sweeps
B300 = FIXTURES / "vllm" / "invented-sm103-ws6.json"


def codes(findings) -> list[str]:
    return [f.code for f in findings]


def test_a_row_that_loses_to_the_best_row_by_more_than_noise_is_flagged() -> None:
    sweep = read_evidence(B300)
    findings = evidence_findings(reference_set("vllm").resolve("10.3"), sweep, "10.3")
    assert codes(findings) == ["X100", "X101"]
    x101 = findings[1]
    assert (x101.severity, x101.world_size, x101.mode) == ("warning", 6, "graph")
    assert "19.3%" in x101.message and "CUSTOM_ALL_REDUCE_MAX_SIZES 192KiB" in x101.message


def test_the_best_row_itself_is_not_flagged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = read_evidence(B300)
    best = best_row("vllm", sweep, "10.3")
    assert codes(evidence_findings(best.table, sweep, "10.3")) == ["X100"]
    path = tmp_path / "best.toml"
    path.write_text(dumps_table(best.table.with_changes(rules="vllm")))
    code = main(["check", str(path), "--evidence", str(B300), "--arch", "10.3"])
    out = capsys.readouterr().out
    assert "as run: geomean regret 1.002" in out and "loses to the best row" not in out
    assert code in (0, 1)  # the table's own structural findings may remain; X101 is not among them


def test_unmeasured_kernels_are_named_or_the_sweep_says_nothing() -> None:
    table = reference_set("vllm").resolve("10.3")
    ds2c = evidence_findings(table, read_evidence(SWEEPS / "ds2c-sm103-ws2.json"), "10.3")
    assert "X102" in codes(ds2c)
    x102 = next(f for f in ds2c if f.code == "X102")
    assert x102.note and "flashinfer/mnnvl" in x102.message
    nccl = evidence_findings(table, read_evidence(FIXTURES / "nccl-tests" / "ds12a-h100-nvls-2gpu.txt"), "10.3")
    assert codes(nccl) == ["X103"] and "out-of-place" in nccl[0].message


def test_an_sglang_row_has_no_knob_search() -> None:
    sweep = read_evidence(FIXTURES / "sglang" / "invented-jit-ws4.txt", world_size=4)
    findings = evidence_findings(reference_set("sglang").resolve("10.0"), sweep, "10.0")
    assert set(codes(findings)) <= {"X102", "X103", "X104"}


def test_check_evidence_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["check", "reference:vllm", "--evidence", str(B300), "--arch", "10.3"]) == 1
    out = capsys.readouterr().out
    assert "arch=10.3 ws=6 mode=graph: loses to the best row vllm's knobs allow by 19.3%" in out
    assert main(["check", "reference:vllm", "--evidence", str(B300)]) == 2
    assert "--evidence needs --arch" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_text("not a benchmark\n")
    assert main(["check", "reference:vllm", "--evidence", str(bad), "--arch", "10.3"]) == 2
    assert "not the output of a benchmark artune reads" in capsys.readouterr().err
