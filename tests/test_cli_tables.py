"""The table commands as a user runs them: explain, show, check on the bundled references."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from artune.cli import main
from artune.table import loads_table
from artune.table.decide import decide


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["explain", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("size", "extra", "algorithm"),
    [
        ("1MiB", [], "1shot_push"),
        ("3MiB", [], "2shot_pull_mc"),
        ("3MiB", ["--no-multicast"], "2shot_pull"),
        ("200MiB", [], "nccl"),
    ],
)
def test_explain_sglang_rubin(capsys, size, extra, algorithm) -> None:
    args = ["--reference", "sglang", "--arch", "10.7", "--world-size", "8", "--size", size, "--mode", "graph"]
    assert explain(capsys, *args, *extra)["algorithm"] == algorithm


@pytest.mark.parametrize(
    ("size", "algorithm"), [("3MiB", "custom_ar"), ("5MiB", "symm_mem_multimem"), ("100MiB", "nccl")]
)
def test_explain_vllm_rubin(capsys, size, algorithm) -> None:
    args = ["--reference", "vllm", "--arch", "10.7", "--world-size", "8", "--size", size, "--dtype", "bfloat16"]
    decision = explain(capsys, *args)
    assert decision["algorithm"] == algorithm
    assert "inherited from arch 10.3" in decision["reason"]


def test_explain_unplanned_world_size_says_which_rule(capsys) -> None:
    args = ["--reference", "vllm", "--arch", "10.7", "--world-size", "12", "--size", "3MiB", "--dtype", "bfloat16"]
    decision = explain(capsys, *args)
    assert decision["algorithm"] == "nccl"
    # vLLM's rules, not artune's nearest smaller world size: no path at 12 ranks, so nccl for every size
    assert "custom all-reduce or symmetric memory at world size 12" in decision["reason"]
    assert "every size goes to nccl" in decision["reason"]
    assert set(decision) >= {"algorithm", "params", "reason"}


def test_explain_text_output_and_overrides(capsys, monkeypatch) -> None:
    args = ["explain", "--reference", "sglang", "--arch", "10.7", "--world-size", "8", "--size", "3MiB"]
    assert main([*args, "--mode", "graph", "--bound", "1shot_push=4MiB"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1shot_push")
    assert "--algorithm/--bound: 1shot_push bands end at 4MiB" in out
    monkeypatch.setenv("ARTUNE_ALGORITHM", "nccl")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("nccl") and "user override" in out


def test_explain_without_a_table_uses_the_communicators_choice(capsys, monkeypatch, tmp_path) -> None:
    from artune import machine
    from artune.table.bundled import cpu_default
    from artune.table.cache import install_table

    monkeypatch.setenv("ARTUNE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ARTUNE_TABLE", raising=False)
    args = ["--world-size", "2", "--size", "4KiB"]
    assert "bundled default: no measured table" in explain(capsys, *args)["table"]
    install_table(cpu_default().with_changes(origin=""), tmp_path, machine.fingerprint())
    assert "this machine's measured table" in explain(capsys, *args)["table"]
    monkeypatch.setenv("ARTUNE_TABLE", "/nonexistent/t.toml")
    assert main(["explain", *args]) == 2
    assert "/nonexistent/t.toml" in capsys.readouterr().err
    monkeypatch.setenv("ARTUNE_ALGORITHM", "gloo")
    monkeypatch.delenv("ARTUNE_TABLE")
    decision = explain(capsys, *args)
    assert decision["algorithm"] == "gloo"  # the environment's override, applied once
    assert decision["reason"].count("gloo forced") == 1


def test_explain_borrowing_and_bad_input(capsys) -> None:
    decision = explain(capsys, "--reference", "sglang", "--arch", "10.3", "--world-size", "8", "--size", "1KiB")
    assert "SGLang's dispatch on the capability gives it arch 10.0's" in decision["reason"]
    assert main(["explain", "--reference", "nope", "--arch", "9.0", "--world-size", "2", "--size", "1KiB"]) == 2
    assert "vllm" in capsys.readouterr().err
    assert main(["explain", "--table", "bundled:cpu", "--world-size", "2", "--size", "-5"]) == 2
    assert "--size" in capsys.readouterr().err


def test_show_formats(capsys) -> None:
    assert main(["show", "reference:sglang"]) == 0
    chart = capsys.readouterr().out
    assert "2shot_pull_mc" in chart and "arch=10.7" in chart
    assert main(["show", "bundled:cpu", "--format", "toml"]) == 0
    table = loads_table(capsys.readouterr().out)
    assert decide(table, 4096, 2).algorithm == "shm_one_shot"
    assert main(["show", "reference:vllm", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 5


def test_check_references_exit_1_with_their_holes(capsys) -> None:
    # an engine's tables run its process group where they have no plan: that is the engine's rule, not a hole
    # for artune's lints; the release's findings name those world sizes once, as its reader does
    assert main(["check", "reference:vllm"]) == 1
    out = capsys.readouterr().out
    assert "no plan for world sizes" not in out
    assert "reference:vllm: warning E201: arch=*: world sizes 3, 5, 7, 9-15 have no path on any arch" in out
    assert main(["check", "reference:sglang", "--max-world-size", "16"]) == 1
    out = capsys.readouterr().out
    assert "no plan for world sizes" not in out
    assert "reference:sglang: warning E201: arch=10.0, 10.7: world sizes 9-15 have no config" in out


def test_python_dash_m_entry_point() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "artune", "check", "/nonexistent.toml"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "artune check: error: /nonexistent.toml: cannot read: No such file or directory"


def test_explain_describes_the_call_of_the_tables_platform(capsys) -> None:
    cpu = ["--table", "bundled:cpu", "--world-size", "2", "--size", "4KiB"]
    assert main(["explain", *cpu]) == 0
    out = capsys.readouterr().out
    assert "dtype=float32" in out and "multicast" not in out  # no GPU notion on a CPU table
    decision = explain(capsys, *cpu)
    assert decision["dtype"] == "float32" and "multicast" not in decision
    assert explain(capsys, *cpu, "--dtype", "bfloat16")["dtype"] == "bfloat16"  # asked for: kept
    gpu = ["--reference", "sglang", "--arch", "10.7", "--world-size", "8", "--size", "3MiB"]
    assert main(["explain", *gpu]) == 0
    assert "dtype=bfloat16, multicast=on" in capsys.readouterr().out
    assert explain(capsys, *gpu, "--no-multicast")["multicast"] is False


def test_explain_names_why_shared_memory_would_not_be_used(capsys, monkeypatch, tmp_path) -> None:
    """The reason and the fix a Communicator here would log, for a buffer /dev/shm cannot hold."""
    monkeypatch.setenv("ARTUNE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ARTUNE_TABLE", raising=False)
    args = ["--world-size", "2", "--size", "4KiB"]
    assert explain(capsys, *args)["algorithm"] == "shm_one_shot"
    monkeypatch.setenv("ARTUNE_SHM_BYTES", "256GiB")
    decision = explain(capsys, *args)
    assert decision["algorithm"] == "gloo"
    (skipped,) = [s for s in decision["steps"] if s.startswith("shm_one_shot skipped")]
    assert "shared memory unavailable: shared memory needs" in skipped and "enlarge /dev/shm" in skipped
    assert "ARTUNE_SHM_BYTES=256GiB: unset it (the default 4MiB fits)" in skipped


def test_show_draws_an_open_ended_band_as_such(capsys) -> None:
    assert main(["show", "bundled:cpu"]) == 0
    chart = capsys.readouterr().out
    assert "[1MiB, inf) shm_two_shot  fallback gloo" in chart and "TiB" not in chart
    for fmt in ("toml", "json"):
        assert main(["show", "bundled:cpu", "--format", fmt]) == 0
        text = capsys.readouterr().out
        assert "inf" in text and "TiB" not in text


@pytest.mark.parametrize(("size", "kernel"), [("128KiB", "1stage"), ("1MiB", "2stage")])
def test_explain_names_vllms_custom_allreduce_kernel_and_why(capsys, monkeypatch, size, kernel) -> None:
    monkeypatch.delenv("VLLM_CUSTOM_ALLREDUCE_ALGO", raising=False)
    args = ["--reference", "vllm", "--arch", "10.3", "--world-size", "6", "--size", size]
    decision = explain(capsys, *args)
    assert (decision["algorithm"], decision["kernel"]) == ("custom_ar", f"cross_device_reduce_{kernel}")
    assert any("1-stage below 256KiB at 5 to 8 ranks" in step for step in decision["steps"])
    assert main(["explain", *args]) == 0
    assert f"custom_ar (kernel cross_device_reduce_{kernel})" in capsys.readouterr().out
    monkeypatch.setenv("VLLM_CUSTOM_ALLREDUCE_ALGO", "1stage")
    assert explain(capsys, *args)["kernel"] == "cross_device_reduce_1stage"
    monkeypatch.setenv("VLLM_CUSTOM_ALLREDUCE_ALGO", "3stage")
    assert main(["explain", *args]) == 2
    assert "valid values: 1stage, oneshot, 2stage, twoshot" in capsys.readouterr().err
