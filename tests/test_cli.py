"""The command line's shape, as a user meets it: --version, "did you mean", one error shape, each sub-command's
own usage, counts that match what is printed, and every spelling of an arch."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import pytest

from artune.arch import CUDA_ARCHS, known, parse_arch
from artune.cli import main
from artune.errors import ArtuneError


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    """``artune ARGV`` as a shell runs it (argparse exits the process on a usage error)."""
    return subprocess.run(
        [sys.executable, "-m", "artune", *argv], capture_output=True, text=True, timeout=120, check=False
    )


def test_version_prints_the_installed_version() -> None:
    done = run("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"artune {version('artune')}"


@pytest.mark.parametrize(("typed", "meant"), [("explian", "explain"), ("chek", "check"), ("reveiw", "review")])
def test_a_mistyped_command_gets_did_you_mean(typed: str, meant: str) -> None:
    done = run("-v", typed, "--world-size", "2")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"artune: error: unknown command {typed!r}; did you mean {meant!r}?" in done.stderr


def test_a_command_like_nothing_lists_the_commands() -> None:
    done = run("zzzz")
    assert done.returncode == 2 and "choose from check, explain" in done.stderr and "did you mean" not in done.stderr


def test_a_bad_option_prints_the_sub_commands_own_usage() -> None:
    done = run("check", "--colour")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: artune check ")
    assert "artune check: error: unrecognized arguments: --colour" in done.stderr


def test_a_missing_file_is_reported_in_the_one_error_shape(tmp_path, capsys) -> None:
    missing = str(tmp_path / "nope.toml")
    for command in (["check", missing], ["show", missing], ["explain", "--table", missing, "--world-size", "2"]):
        assert main([*command, "--size", "4KiB"] if command[0] == "explain" else command) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"artune {command[0]}: error: {missing}: cannot read"), err


def test_checks_count_matches_the_lines_it_prints(capsys) -> None:
    # the reference vLLM set has warnings and notes: every printed line is counted, by kind
    assert main(["check", "reference:vllm"]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    warnings = sum(": warning " in line for line in lines)
    notes = sum(": note " in line for line in lines)
    assert warnings and len(lines) == warnings + notes
    summary = captured.err.strip().splitlines()[-1]
    assert summary.startswith(f"{warnings} warning")
    assert summary.endswith(f"{notes} note{'' if notes == 1 else 's'}") if notes else "note" not in summary


@pytest.mark.parametrize("spelled", ["10.7", "sm_107", "sm107", "SM_107a", "compute_107", " 10.7 "])
def test_every_spelling_of_rubin_reads_to_one_arch(spelled: str) -> None:
    assert parse_arch(spelled) == "10.7"


@pytest.mark.parametrize(
    ("spelled", "arch"),
    [
        ("sm_90", "9.0"),
        ("9.0", "9.0"),
        ("sm_100a", "10.0"),
        ("12.1", "12.1"),
        ("gfx942", "gfx942"),
        ("GFX942:sramecc+:xnack-", "gfx942"),
        ("9.4", "gfx942"),
        ("9.5", "gfx950"),
    ],
)
def test_other_spellings(spelled: str, arch: str) -> None:
    assert parse_arch(spelled) == arch


@pytest.mark.parametrize("unknown", ["99.9", "sm_999", "sm_13", "gfx1234", "default", "rubin", "10", ""])
def test_an_unknown_arch_is_an_error_listing_the_known_ones(unknown: str) -> None:
    with pytest.raises(ArtuneError) as err:
        parse_arch(unknown)
    assert f"unknown arch {unknown!r}" in str(err.value)
    assert all(arch in str(err.value) for arch in known())


def test_every_known_arch_reads_to_itself() -> None:
    assert all(parse_arch(arch) == arch for arch in known())
    assert all(parse_arch(f"sm_{arch.replace('.', '')}") == arch for arch in CUDA_ARCHS)


def _explain(capsys, arch: str) -> dict:
    argv = ["explain", "--reference", "vllm", "--arch", arch, "--world-size", "8", "--size", "3MiB"]
    assert main([*argv, "--mode", "graph", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_sm_107_decides_as_10_7_does(capsys) -> None:
    rubin = _explain(capsys, "10.7")
    assert _explain(capsys, "sm_107") == rubin
    assert "10.7" in json.dumps(rubin)


def test_an_unknown_arch_on_the_command_line_is_a_usage_error() -> None:
    done = run("explain", "--reference", "vllm", "--arch", "99.9", "--world-size", "8", "--size", "3MiB")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("usage: artune explain ")
    assert "artune explain: error: argument --arch: unknown arch '99.9'; artune knows CUDA 7.0" in done.stderr


def test_an_arch_after_at_reads_the_same_way(capsys) -> None:
    assert main(["diff", "reference:vllm@sm_107", "reference:vllm@10.7"]) == 0
    assert main(["diff", "reference:vllm@99.9", "reference:vllm@10.7"]) == 2
    assert "unknown arch '99.9'" in capsys.readouterr().err


def test_a_reader_that_leaves_early_gets_no_traceback() -> None:
    """``artune diff ... | head -1``: the pipe closes under the output, as ``head`` does."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "artune", "diff", "reference:vllm@10.3", "reference:vllm@10.7"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the first line is written
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and "Traceback" not in err, err


WAIT = "import time; from artune.progress import waiting\nwith waiting('reading vllm==0.33.0'):\n    time.sleep(1.0)\n"


def test_a_slow_wait_shows_a_spinner_on_a_terminal_and_nothing_in_a_pipe() -> None:
    import os
    import pty

    main_fd, terminal = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-c", WAIT], stderr=terminal, stdout=subprocess.PIPE, timeout=60)
        os.set_blocking(main_fd, False)
        shown = os.read(main_fd, 65536).decode(errors="replace")
    finally:
        os.close(terminal)
        os.close(main_fd)
    assert done.returncode == 0 and "reading vllm==0.33.0" in shown
    piped = subprocess.run([sys.executable, "-c", WAIT], capture_output=True, text=True, timeout=60)
    assert (piped.returncode, piped.stdout, piped.stderr) == (0, "", "")
